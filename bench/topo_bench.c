// accel-bench topo: what topology discovery costs the runtime and its users.
//
// Figures (medians of per-run ratios against a baseline measured in the same
// run, or of the value's samples; bench.h):
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
#include <string.h>

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

// Mean us of |iters| runtime create+destroy pairs into |out_us|.
static int time_runtime_create(int iters, double *out_us) {
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < iters; ++i) {
    accel_runtime_t *rt = NULL;
    if (check(accel_runtime_create(NULL, &rt), "runtime")) {
      return 1;
    }
    accel_runtime_destroy(rt);
  }
  *out_us = (double)(bench_now_ns() - t0) / iters / 1000.0;
  return 0;
}

typedef struct create_bench {
  int iters;
  char *saved_affinity;  // ACCEL_AFFINITY as it was, restored by teardown
} create_bench_t;

static int create_setup(void *arg) {
  create_bench_t *b = arg;
  const char *saved = getenv("ACCEL_AFFINITY");
  b->saved_affinity = saved != NULL ? strdup(saved) : NULL;
  return 0;
}

static void create_teardown(void *arg) {
  create_bench_t *b = arg;
  if (b->saved_affinity != NULL) {
    setenv("ACCEL_AFFINITY", b->saved_affinity, 1);
    free(b->saved_affinity);
  } else {
    unsetenv("ACCEL_AFFINITY");
  }
}

// One pair: unplaced (ACCEL_AFFINITY=0), then placed.
static int create_measure(void *arg, int run, double *out) {
  (void)run;
  create_bench_t *b = arg;
  setenv("ACCEL_AFFINITY", "0", 1);
  int failed = time_runtime_create(b->iters, &out[0]);
  unsetenv("ACCEL_AFFINITY");
  return failed || time_runtime_create(b->iters, &out[1]);
}

static const bench_figure_t k_create_figures[] = {
    {"runtime_create_placed", "us", 1, "runtime_create_unplaced", 0, "<= 1.5",
     BENCH_PAIRED, false},
};

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
    {"topology_load_live", "ms", 0, NULL, 0, "<= 100", BENCH_PAIRED, false},
    {"topology_deserialize", "ms", 1, "topology_load_live", 0, "<= 0.1",
     BENCH_PAIRED, false},
};

int accel_bench_topo(const bench_args_t *args) {
  int runs = args->quick ? 5 : 11;
  int iters = args->quick ? 20 : 200;
  bench_report_t report = {.bench = "topo"};
  snprintf(report.device, sizeof(report.device), "host:0");
  create_bench_t create = {.iters = iters};
  const bench_group_t create_group = {
      .runs = runs, .slots = 2, .setup = create_setup,
      .measure = create_measure, .teardown = create_teardown,
      .figures = k_create_figures, .figure_count = 1};
  if (bench_group_run(&report, &create_group, &create)) {
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
