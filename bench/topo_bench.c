// accel-bench topo: what topology discovery costs the runtime and its users.
//
// Figures (medians of repeated runs after a warm-up):
//  - runtime_create_placed: accel_runtime_create + destroy with device
//    placement (the host device's workers bound to its NUMA node), against
//    runtime_create_unplaced (ACCEL_AFFINITY=0) in the same run. Target 1.5x.
//  - topology_load_live: a full live discovery (hwloc with the PCI tree,
//    libibverbs, libdrm). Target on the value: <= 100 ms.
//  - topology_deserialize: reading back the live topology's JSON, against
//    topology_load_live: what a host saves by exchanging the serialized form.
//    Target 0.1x.
#include <stdio.h>
#include <stdlib.h>

#include "accel/accel.h"
#include "bench.h"

static int check(accel_status_t st, const char *what) {
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-bench topo: %s: %s (%s)\n", what,
            accel_last_error(), accel_status_name(st));
    return 1;
  }
  return 0;
}

// Median time of |iters| runtime create+destroy pairs, per pair, in us.
static int time_runtime_create(int runs, int iters, double *out_us) {
  double samples[64];
  for (int r = -1; r < runs; ++r) {  // r = -1 is the warm-up
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < iters; ++i) {
      accel_runtime_t *rt = NULL;
      if (check(accel_runtime_create(NULL, &rt), "runtime")) {
        return 1;
      }
      accel_runtime_destroy(rt);
    }
    if (r >= 0) {
      samples[r] = (double)(bench_now_ns() - t0) / iters / 1000.0;
    }
  }
  *out_us = bench_median(samples, runs);
  return 0;
}

int accel_bench_topo(const bench_args_t *args) {
  int runs = args->quick ? 5 : 21;
  int iters = args->quick ? 20 : 200;
  bench_report_t report = {.bench = "topo"};
  snprintf(report.device, sizeof(report.device), "host:0");

  const char *saved = getenv("ACCEL_AFFINITY");
  double placed = 0, unplaced = 0;
  setenv("ACCEL_AFFINITY", "0", 1);
  int failed = time_runtime_create(runs, iters, &unplaced);
  unsetenv("ACCEL_AFFINITY");
  failed = failed || time_runtime_create(runs, iters, &placed);
  if (saved != NULL) {
    setenv("ACCEL_AFFINITY", saved, 1);
  }
  if (failed) {
    return 1;
  }

  accel_topology_options_t opts;
  accel_topology_options_init(&opts);
  opts.flags = ACCEL_TOPOLOGY_LOAD_IGNORE_ENV;
  double load[64], parse[64];
  char *json = NULL;
  size_t length = 0;
  bool have_hwloc = true;
  for (int r = -1; r < runs && have_hwloc; ++r) {
    accel_topology_t *t = NULL;
    uint64_t t0 = bench_now_ns();
    accel_status_t load_st = accel_topology_load(&opts, &t);
    if (load_st == ACCEL_ERROR_UNSUPPORTED) {
      fprintf(stderr, "accel-bench topo: %s; load figures skipped\n",
              accel_last_error());
      have_hwloc = false;
      break;
    }
    if (check(load_st, "live topology")) {
      free(json);
      return 1;
    }
    uint64_t t1 = bench_now_ns();
    if (json == NULL) {
      if (check(accel_topology_format(t, ACCEL_TOPOLOGY_FORMAT_JSON, NULL, 0,
                                      &length),
                "json size") ||
          (json = malloc(length + 1)) == NULL ||
          check(accel_topology_format(t, ACCEL_TOPOLOGY_FORMAT_JSON, json,
                                      length + 1, &length),
                "json")) {
        accel_topology_destroy(t);
        free(json);
        return 1;
      }
    }
    accel_topology_destroy(t);
    uint64_t t2 = bench_now_ns();
    accel_status_t st = accel_topology_deserialize(json, length, &t);
    uint64_t t3 = bench_now_ns();
    if (st == ACCEL_ERROR_UNSUPPORTED) {
      parse[r < 0 ? 0 : r] = -1;  // built without json-c
    } else if (check(st, "deserialize")) {
      free(json);
      return 1;
    } else {
      accel_topology_destroy(t);
      if (r >= 0) {
        parse[r] = (double)(t3 - t2) / 1e6;
      }
    }
    if (r >= 0) {
      load[r] = (double)(t1 - t0) / 1e6;
    }
  }
  free(json);
  bench_add(&report, "runtime_create_placed", placed, "us",
            "runtime_create_unplaced", unplaced, "<= 1.5", runs);
  if (!have_hwloc) {
    return bench_print(&report, args->json);
  }
  double live_ms = bench_median(load, runs);
  bench_add(&report, "topology_load_live", live_ms, "ms", NULL, 0, "<= 100",
            runs);
  if (parse[0] >= 0) {
    bench_add(&report, "topology_deserialize", bench_median(parse, runs), "ms",
              "topology_load_live", live_ms, "<= 0.1", runs);
  }
  return bench_print(&report, args->json);
}
