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

// Both runtime figures: unplaced first, then placed, each its own warm-up
// and runs (ACCEL_AFFINITY restored after).
static int runtime_create_run(bench_report_t *report, int runs, int iters) {
  const char *saved = getenv("ACCEL_AFFINITY");
  double placed = 0, unplaced = 0;
  setenv("ACCEL_AFFINITY", "0", 1);
  int failed = time_runtime_create(runs, iters, &unplaced);
  unsetenv("ACCEL_AFFINITY");
  failed = failed || time_runtime_create(runs, iters, &placed);
  if (saved != NULL) {
    setenv("ACCEL_AFFINITY", saved, 1);
  }
  if (!failed) {
    bench_add(report, "runtime_create_placed", placed, "us",
              "runtime_create_unplaced", unplaced, "<= 1.5", runs);
  }
  return failed;
}

// The topology figures: one live load per run, then reading back its JSON
// (formatted once, from the warm-up's topology).
typedef struct topo_bench {
  accel_topology_options_t opts;
  char *json;
  size_t length;
  bool have_hwloc;  // false: built without hwloc, no figure
  bool have_json;   // false: built without json-c, no deserialize figure
} topo_bench_t;

static int format_json(topo_bench_t *b, accel_topology_t *t) {
  if (check(accel_topology_format(t, ACCEL_TOPOLOGY_FORMAT_JSON, NULL, 0,
                                  &b->length),
            "json size")) {
    return 1;
  }
  b->json = malloc(b->length + 1);
  return b->json == NULL ||
         check(accel_topology_format(t, ACCEL_TOPOLOGY_FORMAT_JSON, b->json,
                                     b->length + 1, &b->length),
               "json");
}

// Samples: 0 the live load, 1 the deserialize (ms).
static int topology_measure(void *arg, int run, double *out) {
  topo_bench_t *b = arg;
  if (!b->have_hwloc) {
    return 0;
  }
  accel_topology_t *t = NULL;
  uint64_t t0 = bench_now_ns();
  accel_status_t load_st = accel_topology_load(&b->opts, &t);
  if (load_st == ACCEL_ERROR_UNSUPPORTED) {
    fprintf(stderr, "accel-bench topo: %s; load figures skipped\n",
            accel_last_error());
    b->have_hwloc = false;
    return 0;
  }
  if (check(load_st, "live topology")) {
    return 1;
  }
  uint64_t t1 = bench_now_ns();
  int failed = b->json == NULL ? format_json(b, t) : 0;
  accel_topology_destroy(t);
  if (failed) {
    return 1;
  }
  uint64_t t2 = bench_now_ns();
  accel_status_t st = accel_topology_deserialize(b->json, b->length, &t);
  uint64_t t3 = bench_now_ns();
  if (st == ACCEL_ERROR_UNSUPPORTED) {
    b->have_json = false;  // built without json-c
  } else if (check(st, "deserialize")) {
    return 1;
  } else {
    accel_topology_destroy(t);
  }
  out[0] = (double)(t1 - t0) / 1e6;
  out[1] = (double)(t3 - t2) / 1e6;
  (void)run;
  return 0;
}

static void topology_teardown(void *arg) {
  topo_bench_t *b = arg;
  free(b->json);
}

static bool topology_keep(void *arg, int index) {
  topo_bench_t *b = arg;
  return b->have_hwloc && (index == 0 || b->have_json);
}

static const bench_figure_t k_topology_figures[] = {
    {"topology_load_live", "ms", 0, NULL, 0, "<= 100", BENCH_MEDIANS, false},
    {"topology_deserialize", "ms", 1, "topology_load_live", 0, "<= 0.1",
     BENCH_MEDIANS, false},
};

int accel_bench_topo(const bench_args_t *args) {
  int runs = args->quick ? 5 : 21;
  int iters = args->quick ? 20 : 200;
  bench_report_t report = {.bench = "topo"};
  snprintf(report.device, sizeof(report.device), "host:0");
  if (runtime_create_run(&report, runs, iters)) {
    return 1;
  }
  topo_bench_t b = {.have_hwloc = true, .have_json = true};
  accel_topology_options_init(&b.opts);
  b.opts.flags = ACCEL_TOPOLOGY_LOAD_IGNORE_ENV;
  const bench_group_t group = {
      .runs = runs, .slots = 2, .measure = topology_measure,
      .teardown = topology_teardown, .figures = k_topology_figures,
      .figure_count = 2, .keep_figure = topology_keep};
  if (bench_group_run(&report, &group, &b)) {
    return 1;
  }
  return bench_print(&report, args->json);
}
