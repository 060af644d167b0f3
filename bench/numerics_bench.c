// accel-bench kernels, the cost of ACCEL_CHECK_NUMERICS (docs/numerics.md):
// the same launches on two runtimes of reference.axe, one with the check on
// (ACCEL_RUNTIME_FLAG_CHECK_NUMERICS) and one without, interleaved in pairs.
// Two shapes bracket it: the decoder's largest int8 GEMV (1 x 2816 x 1024:
// little output for much work, the common case) and a softmax over 64 rows
// of 4096 (as much output as input: the worst case, one extra pass over
// what the kernel wrote).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/accel.h"
#include "bench.h"
#include "kernel_params.h"

#ifndef ACCEL_REFERENCE_AXE_PATH
#define ACCEL_REFERENCE_AXE_PATH ""
#endif

#define LAUNCHES 8
#define QMM_N 2816u
#define QMM_K 1024u
#define SM_ROWS 64u
#define SM_COLS 4096u

// One runtime's side: its executable, stream and buffers.
typedef struct side {
  accel_runtime_t *rt;
  accel_device_t *dev;
  accel_executable_t *exe;
  accel_stream_t *s;
  accel_kernel_t *qmm, *softmax;
  accel_buffer_t *x, *w, *scale, *y, *sm_in, *sm_out;
} side_t;

typedef struct numerics_bench {
  side_t sides[2];  // 0: check on, 1: off
} numerics_bench_t;

static accel_buffer_t *alloc_filled(side_t *s, uint64_t bytes, int pattern) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = bytes};
  accel_buffer_t *b = NULL;
  void *p = NULL;
  if (accel_buffer_alloc(s->dev, &d, &b) != ACCEL_OK ||
      accel_buffer_host_pointer(b, &p) != ACCEL_OK) {
    accel_buffer_release(b);
    return NULL;
  }
  if (pattern == 0) {
    memset(p, 0, bytes);
  } else {
    float *f = p;
    for (uint64_t i = 0; i < bytes / 4; ++i) {
      f[i] = (float)(i % 97) / 97.0f - 0.5f;
    }
  }
  return b;
}

static void side_close(side_t *s) {
  accel_buffer_t *bufs[] = {s->x, s->w, s->scale, s->y, s->sm_in, s->sm_out};
  for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); ++i) {
    accel_buffer_release(bufs[i]);
  }
  accel_stream_destroy(s->s);
  accel_executable_release(s->exe);
  accel_runtime_destroy(s->rt);
  memset(s, 0, sizeof(*s));
}

static int side_open(side_t *s, bool check) {
  const char *path = getenv("ACCEL_REFERENCE_AXE");
  if (path == NULL || path[0] == '\0') {
    path = ACCEL_REFERENCE_AXE_PATH;
  }
  accel_runtime_options_t o;
  accel_runtime_options_init(&o);
  o.flags = check ? ACCEL_RUNTIME_FLAG_CHECK_NUMERICS : 0;
  if (accel_runtime_create(&o, &s->rt) != ACCEL_OK ||
      accel_device_get(s->rt, 0, &s->dev) != ACCEL_OK ||
      accel_executable_load_file(s->rt, s->dev, path, 0, &s->exe) !=
          ACCEL_OK ||
      accel_executable_kernel(s->exe, "qmatmul_int8", &s->qmm) != ACCEL_OK ||
      accel_executable_kernel(s->exe, "softmax", &s->softmax) != ACCEL_OK ||
      accel_stream_create(s->dev, NULL, &s->s) != ACCEL_OK) {
    fprintf(stderr, "accel-bench kernels: numerics: reference.axe \"%s\": "
            "%s\n", path, accel_last_error());
    return 1;
  }
  s->x = alloc_filled(s, QMM_K * 4ull, 1);
  s->w = alloc_filled(s, (uint64_t)QMM_N * QMM_K, 0);
  s->scale = alloc_filled(s, QMM_N * 4ull, 1);
  s->y = alloc_filled(s, QMM_N * 4ull, 0);
  s->sm_in = alloc_filled(s, (uint64_t)SM_ROWS * SM_COLS * 4, 1);
  s->sm_out = alloc_filled(s, (uint64_t)SM_ROWS * SM_COLS * 4, 0);
  if (s->x == NULL || s->w == NULL || s->scale == NULL || s->y == NULL ||
      s->sm_in == NULL || s->sm_out == NULL) {
    fprintf(stderr, "accel-bench kernels: numerics: %s\n", accel_last_error());
    return 1;
  }
  return 0;
}

static void teardown(void *ctx) {
  numerics_bench_t *b = ctx;
  side_close(&b->sides[0]);
  side_close(&b->sides[1]);
}

static int setup(void *ctx) {
  numerics_bench_t *b = ctx;
  if (side_open(&b->sides[0], true) != 0 ||
      side_open(&b->sides[1], false) != 0) {
    teardown(b);
    return 1;
  }
  return 0;
}

// ns for LAUNCHES launches of one kernel on side |s| and a synchronize.
static double time_launches(side_t *s, bool softmax) {
  accel_kp_qmatmul_constants_t qc = {.m = 1, .n = QMM_N, .k = QMM_K};
  accel_kp_softmax_constants_t sc = {.rows = SM_ROWS, .cols = SM_COLS};
  accel_launch_binding_t qb[4] = {{s->x, 0, 0}, {s->w, 0, 0},
                                  {s->scale, 0, 0}, {s->y, 0, 0}};
  accel_launch_binding_t sb[2] = {{s->sm_in, 0, 0}, {s->sm_out, 0, 0}};
  accel_launch_desc_t d = {
      .struct_size = sizeof(d),
      .workgroup_count = {softmax ? SM_ROWS : (QMM_N + 63) / 64, 1, 1},
      .binding_count = softmax ? 2 : 4,
      .bindings = softmax ? sb : qb,
      .constants_size = softmax ? sizeof(sc) : sizeof(qc),
      .constants = softmax ? (const void *)&sc : (const void *)&qc};
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < LAUNCHES; ++i) {
    if (accel_launch(s->s, softmax ? s->softmax : s->qmm, &d) != ACCEL_OK) {
      return -1;
    }
  }
  if (accel_stream_synchronize(s->s, ACCEL_TIMEOUT_INFINITE) != ACCEL_OK) {
    return -1;
  }
  return (double)(bench_now_ns() - t0) / LAUNCHES;
}

// Slots: 0 GEMV checked, 1 GEMV plain, 2 softmax checked, 3 softmax plain
// (ns per launch); the order within a pair alternates by run.
static int measure(void *ctx, int run, double *out) {
  numerics_bench_t *b = ctx;
  for (int k = 0; k < 2; ++k) {
    int first = run & 1;
    double t_first = time_launches(&b->sides[first], k == 1);
    double t_second = time_launches(&b->sides[1 - first], k == 1);
    if (t_first <= 0 || t_second <= 0) {
      fprintf(stderr, "accel-bench kernels: numerics launch failed: %s\n",
              accel_last_error());
      return 1;
    }
    out[2 * k + first] = t_first;
    out[2 * k + 1 - first] = t_second;
  }
  return 0;
}

static const bench_figure_t k_figures[] = {
    {.name = "numerics_check_qmatmul_int8_1x2816x1024",
     .unit = "ns",
     .value_slot = 0,
     .baseline_name = "qmatmul_int8_unchecked",
     .baseline_slot = 1,
     .target = "<= 1.1"},
    {.name = "numerics_check_softmax_64x4096",
     .unit = "ns",
     .value_slot = 2,
     .baseline_name = "softmax_unchecked",
     .baseline_slot = 3,
     .target = NULL},
};

int bench_kernels_numerics(bench_report_t *report, bool quick) {
  numerics_bench_t b;
  memset(&b, 0, sizeof(b));
  bench_group_t group = {.runs = quick ? 5 : 21,
                         .slots = 4,
                         .setup = setup,
                         .measure = measure,
                         .teardown = teardown,
                         .figures = k_figures,
                         .figure_count = 2};
  return bench_group_run(report, &group, &b);
}
