// The quantized matmul / GEMV kernels (int8 per-channel, int4 group-wise
// with zero points or signed, GGUF Q8_0 and Q4_0) against dequantize-then-
// float64 written here from the layouts' definitions; results independent of
// m (a token's output is the same in prefill and decode), of the grid and of
// the thread count; bad launches refused with a message.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_harness.h"
#include "kernel_params.h"

enum { F_INT8, F_INT4, F_INT4_SIGNED, F_Q8_0, F_Q4_0 };
static const char *const k_kernel[] = {"qmatmul_int8", "qmatmul_int4",
                                       "qmatmul_int4", "qmatmul_q8_0",
                                       "qmatmul_q4_0"};

typedef struct qproblem {
  int format;
  accel_kp_qmatmul_constants_t c;
  float *x;
  uint8_t *w;
  float *scale;
  uint8_t *zero;
  uint64_t w_bytes, groups;
  double *dense;  // dequantized [n, k], by this test's own decoding
} qproblem_t;

static double half(uint16_t h) { return kt_f16_value(h); }

static qproblem_t make(test_rng_t *rng, int format, uint32_t m, uint32_t n,
                       uint32_t k, uint32_t group) {
  qproblem_t p = {.format = format,
                  .c = {.m = m, .n = n, .k = k, .group_size = group,
                        .flags = format == F_INT4_SIGNED ? ACCEL_KP_QFLAG_SIGNED_I4 : 0}};
  p.x = malloc(4ull * m * k + 4);
  for (uint64_t i = 0; i < (uint64_t)m * k; ++i) p.x[i] = (float)kt_uniform(rng, -2, 2);
  p.dense = malloc(8ull * n * k + 8);
  uint64_t nk = (uint64_t)n * k;
  if (format == F_INT8) {
    p.w_bytes = nk;
    p.groups = 1;
  } else if (format == F_INT4 || format == F_INT4_SIGNED) {
    p.w_bytes = nk / 2;
    p.groups = k / group;
  } else {
    p.w_bytes = nk / 32 * (format == F_Q8_0 ? 34 : 18);
    p.groups = k / 32;
  }
  p.w = malloc(p.w_bytes + 4);
  for (uint64_t i = 0; i < p.w_bytes; ++i) p.w[i] = (uint8_t)test_rng_next(rng);
  p.scale = malloc(4ull * n * p.groups + 4);
  p.zero = malloc((uint64_t)n * p.groups + 4);
  for (uint64_t i = 0; i < (uint64_t)n * p.groups; ++i) {
    p.scale[i] = (float)kt_uniform(rng, 0.001, 0.05);
    p.zero[i] = (uint8_t)test_rng_range(rng, 0, 15);
  }
  for (uint32_t j = 0; j < n; ++j) {
    for (uint32_t i = 0; i < k; ++i) {
      uint64_t e = (uint64_t)j * k + i;
      double v;
      if (format == F_INT8) {
        v = (int8_t)p.w[e] * (double)p.scale[j];
      } else if (format == F_INT4 || format == F_INT4_SIGNED) {
        int nib = (p.w[e / 2] >> (4 * (e % 2))) & 15;
        uint64_t g = (uint64_t)j * p.groups + i / group;
        double q = format == F_INT4_SIGNED ? (nib >= 8 ? nib - 16 : nib)
                                           : nib - (double)p.zero[g];
        v = q * p.scale[g];
      } else {
        uint32_t bsize = format == F_Q8_0 ? 34 : 18;
        const uint8_t *blk = p.w + ((uint64_t)j * (k / 32) + i / 32) * bsize;
        uint16_t d = (uint16_t)(blk[0] | blk[1] << 8);
        uint32_t t = i % 32;
        if (format == F_Q8_0) {
          v = (int8_t)blk[2 + t] * half(d);
        } else {
          int nib = t < 16 ? (blk[2 + t] & 15) : (blk[2 + t - 16] >> 4);
          v = (nib - 8) * half(d);
        }
      }
      p.dense[e] = v;
    }
  }
  // Q8_0 / Q4_0 scales: keep them finite and small (random bytes may make
  // f16 infinities or NaN).
  if (format == F_Q8_0 || format == F_Q4_0) {
    uint32_t bsize = format == F_Q8_0 ? 34 : 18;
    for (uint64_t b = 0; b < (uint64_t)n * (k / 32); ++b) {
      uint16_t d = kt_f16_from(kt_uniform(rng, 0.001, 0.05));
      p.w[b * bsize] = (uint8_t)d;
      p.w[b * bsize + 1] = (uint8_t)(d >> 8);
      double dv = half(d);
      uint64_t j = b / (k / 32), i0 = b % (k / 32) * 32;
      for (uint32_t t = 0; t < 32; ++t) {
        const uint8_t *blk = p.w + b * bsize;
        int q = format == F_Q8_0 ? (int8_t)blk[2 + t]
                                 : (t < 16 ? (blk[2 + t] & 15) : (blk[2 + t - 16] >> 4)) - 8;
        p.dense[j * k + i0 + t] = q * dv;
      }
    }
  }
  return p;
}

static kt_case_t qcase(qproblem_t *p) {
  kt_case_t c = {.kernel = k_kernel[p->format], .constants = &p->c,
                 .constants_size = sizeof(p->c)};
  uint64_t xb = 4ull * p->c.m * p->c.k, yb = 4ull * p->c.m * p->c.n;
  uint64_t sb = 4ull * p->c.n * p->groups;
  if (p->format == F_INT8) {
    c.access = "rrrw";
    c.binding_count = 4;
    c.data[0] = p->x; c.data[1] = p->w; c.data[2] = p->scale;
    c.bytes[0] = xb; c.bytes[1] = p->w_bytes; c.bytes[2] = sb; c.bytes[3] = yb;
  } else if (p->format == F_INT4 || p->format == F_INT4_SIGNED) {
    c.access = "rrrrw";
    c.binding_count = 5;
    c.data[0] = p->x; c.data[1] = p->w; c.data[2] = p->scale; c.data[3] = p->zero;
    c.bytes[0] = xb; c.bytes[1] = p->w_bytes; c.bytes[2] = sb;
    c.bytes[3] = p->format == F_INT4 ? (uint64_t)p->c.n * p->groups : 1;
    c.bytes[4] = yb;
  } else {
    c.access = "rrw";
    c.binding_count = 3;
    c.data[0] = p->x; c.data[1] = p->w;
    c.bytes[0] = xb; c.bytes[1] = p->w_bytes; c.bytes[2] = yb;
  }
  return c;
}

// Tolerance: f32 products and sums over k terms plus one scale product per
// group: 3 (k + 16) 2^-24 of sum |x w|.
static void check(const qproblem_t *p, const float *y) {
  uint64_t count = (uint64_t)p->c.m * p->c.n;
  double *want = malloc(8 * count + 8), *allowed = malloc(8 * count + 8);
  for (uint32_t r = 0; r < p->c.m; ++r) {
    for (uint32_t j = 0; j < p->c.n; ++j) {
      double sum = 0, mag = 0;
      for (uint32_t i = 0; i < p->c.k; ++i) {
        double t = p->x[(uint64_t)r * p->c.k + i] * p->dense[(uint64_t)j * p->c.k + i];
        sum += t;
        mag += fabs(t);
      }
      want[(uint64_t)r * p->c.n + j] = sum;
      allowed[(uint64_t)r * p->c.n + j] = 3.0 * (p->c.k + 16) * 0x1p-24 * mag + 1e-30;
    }
  }
  kt_assert_close(k_kernel[p->format], y, want, allowed, count, 1.0, 0.0);
  free(want);
  free(allowed);
}

static void free_problem(qproblem_t *p) {
  free(p->x); free(p->w); free(p->scale); free(p->zero); free(p->dense);
}

// Every format on random shapes (GEMV and small batches; n around the
// 64-column unit; k of 1, 2, 3 and 4 groups) matches the dequantized
// float64 product and is bit-identical across grids and thread counts.
static void test_qmatmul_matches_dequantized_float64(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  static const uint32_t ns[] = {1, 5, 63, 64, 65, 131};
  static const uint32_t groups[] = {32, 64, 128};
  for (int round = 0; round < 30; ++round) {
    int format = round % 5;
    uint32_t m = round < 10 ? 1 : (uint32_t)test_rng_range(&rng, 1, 5);
    uint32_t n = ns[test_rng_range(&rng, 0, 5)];
    uint32_t group = format == F_INT4 || format == F_INT4_SIGNED
                         ? groups[test_rng_range(&rng, 0, 2)] : 32;
    uint32_t k = format == F_INT8 ? (uint32_t)test_rng_range(&rng, 1, 300)
                                  : group * (uint32_t)test_rng_range(&rng, 1, 4);
    qproblem_t p = make(&rng, format, m, n, k, group);
    kt_case_t c = qcase(&p);
    void *out[KT_MAX_BINDINGS] = {0};
    kt_check_reproducible(&c, accel_kp_qmatmul_units(&p.c), out);
    check(&p, out[c.binding_count - 1]);
    kt_free_outputs(&c, out);
    free_problem(&p);
  }
}

// A row of x gives the same bits as a GEMV (m = 1) and inside a batch.
static void test_qmatmul_row_result_independent_of_m(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int format = 0; format < 5; ++format) {
    qproblem_t p = make(&rng, format, 4, 70, 256, 64);
    kt_case_t c = qcase(&p);
    void *batch[KT_MAX_BINDINGS] = {0}, *single[KT_MAX_BINDINGS] = {0};
    assert_accel_ok(kt_run(&c, 2, batch));
    qproblem_t one = p;
    one.c.m = 1;
    one.x = p.x + 2 * 256;  // row 2
    kt_case_t c1 = qcase(&one);
    assert_accel_ok(kt_run(&c1, 1, single));
    assert_memory_equal((float *)batch[c.binding_count - 1] + 2 * 70,
                        single[c.binding_count - 1], 70 * 4);
    kt_free_outputs(&c, batch);
    kt_free_outputs(&c1, single);
    free_problem(&p);
  }
}

// The portable, AVX2 and AVX-512 paths (ACCEL_KP_VECTOR caps the one the
// kernel takes) give the same bits for every format, m and tail.
static void test_qmatmul_vector_paths_agree(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int format = 0; format < 5; ++format) {
    uint32_t k = format == F_INT8 ? 301 : 256;
    qproblem_t p = make(&rng, format, 3, 67, k, format == F_INT4 ? 32 : 128);
    kt_case_t c = qcase(&p);
    void *best[KT_MAX_BINDINGS] = {0};
    assert_accel_ok(kt_run(&c, 2, best));
    for (int level = 0; level < 2; ++level) {
      char text[2] = {(char)('0' + level), 0};
      setenv("ACCEL_KP_VECTOR", text, 1);
      void *capped[KT_MAX_BINDINGS] = {0};
      assert_accel_ok(kt_run(&c, 2, capped));
      unsetenv("ACCEL_KP_VECTOR");
      assert_memory_equal(best[c.binding_count - 1],
                          capped[c.binding_count - 1], 4ull * 3 * 67);
      kt_free_outputs(&c, capped);
    }
    kt_free_outputs(&c, best);
    free_problem(&p);
  }
}

// Empty shapes are legal and write nothing.
static void test_qmatmul_accepts_empty_shapes(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  qproblem_t p = make(&rng, F_INT8, 0, 8, 32, 32);
  kt_case_t c = qcase(&p);
  assert_accel_ok(kt_run(&c, 2, NULL));
  free_problem(&p);
  p = make(&rng, F_Q4_0, 3, 0, 64, 32);
  c = qcase(&p);
  assert_accel_ok(kt_run(&c, 2, NULL));
  free_problem(&p);
}

// Group sizes other than 32/64/128, k not a multiple of the block, and
// bindings shorter than the shapes fail with a message.
static void test_qmatmul_rejects_bad_launches(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  qproblem_t p = make(&rng, F_INT4, 2, 8, 128, 64);
  p.c.group_size = 48;
  kt_case_t c = qcase(&p);
  kt_expect_failure(&c, "group_size 48 must be 32, 64 or 128");
  p.c.group_size = 64;
  p.c.k = 96;
  kt_expect_failure(&c, "k 96 must be a multiple of 64");
  p.c.k = 128;
  c = qcase(&p);
  c.bytes[1] -= 1;
  kt_expect_failure(&c, "binding 1 (w) holds 511 bytes, the constants need 512");
  c = qcase(&p);
  c.bytes[3] = 15;
  kt_expect_failure(&c, "binding 3 (zero)");
  free_problem(&p);
  p = make(&rng, F_INT8, 2, 8, 10, 32);
  c = qcase(&p);
  c.bytes[2] = 28;
  kt_expect_failure(&c, "binding 2 (scale)");
  c = qcase(&p);
  c.bytes[3] = 60;
  kt_expect_failure(&c, "binding 3 (y)");
  free_problem(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_qmatmul_matches_dequantized_float64),
      cmocka_unit_test(test_qmatmul_row_result_independent_of_m),
      cmocka_unit_test(test_qmatmul_vector_paths_agree),
      cmocka_unit_test(test_qmatmul_accepts_empty_shapes),
      cmocka_unit_test(test_qmatmul_rejects_bad_launches),
  };
  return cmocka_run_group_tests(tests, NULL, kt_teardown);
}
