// softmax, layernorm, rmsnorm and rope against float64 references written
// here, on random rows of odd widths (1, primes, non-multiples of 16, 4096)
// and in place; bit-identical across grids and thread counts; bad launches
// refused with a message.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_harness.h"
#include "kernel_params.h"

static const uint32_t k_widths[] = {1, 2, 7, 15, 16, 17, 31, 100, 257, 4096};

static float *random_floats(test_rng_t *rng, uint64_t n, double lo, double hi) {
  float *p = malloc(4 * n + 4);
  for (uint64_t i = 0; i < n; ++i) p[i] = (float)kt_uniform(rng, lo, hi);
  return p;
}

// Softmax matches exp(x s - max) / sum in float64 within (8 + 2 cols) ulp
// of each value (the kernel's exp is within 3 ulp and its sum rounds cols
// times) plus 2 ulp of |x s| + |max| (the rounding of the exponent).
static void test_softmax_matches_float64_reference(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int round = 0; round < 20; ++round) {
    uint32_t rows = (uint32_t)test_rng_range(&rng, 1, 9);
    uint32_t cols = k_widths[test_rng_range(&rng, 0, 9)];
    double range = round % 4 == 0 ? 60.0 : 8.0;  // stability: large inputs
    float *x = random_floats(&rng, (uint64_t)rows * cols, -range, range);
    accel_kp_softmax_constants_t k = {.rows = rows, .cols = cols,
        .scale = round % 3 == 0 ? 0.0f : (float)kt_uniform(&rng, 0.1, 2.0)};
    int inplace = round % 2;
    kt_case_t c = {.kernel = "softmax", .access = inplace ? "bb" : "rw",
                   .binding_count = 2, .data = {x},
                   .bytes = {4ull * rows * cols, 4ull * rows * cols},
                   .constants = &k, .constants_size = sizeof(k),
                   .alias = {0, inplace ? 1 : 0}};
    void *out[KT_MAX_BINDINGS] = {0};
    kt_check_reproducible(&c, rows, out);
    double s = k.scale == 0.0f ? 1.0 : k.scale;
    uint64_t n = (uint64_t)rows * cols;
    double *want = malloc(8 * n), *allowed = malloc(8 * n);
    for (uint32_t r = 0; r < rows; ++r) {
      const float *row = x + (uint64_t)r * cols;
      double max = -INFINITY, sum = 0;
      for (uint32_t i = 0; i < cols; ++i) max = fmax(max, row[i] * s);
      for (uint32_t i = 0; i < cols; ++i) sum += exp(row[i] * s - max);
      for (uint32_t i = 0; i < cols; ++i) {
        uint64_t o = (uint64_t)r * cols + i;
        want[o] = exp(row[i] * s - max) / sum;
        // Plus the rounding of x s - max, which exp turns into a relative
        // error of its absolute size.
        allowed[o] = ((8.0 + 2.0 * cols) * 0x1p-24 +
                      2 * 0x1p-24 * (fabs(row[i] * s) + fabs(max))) * want[o] +
                     1.2e-38;  // exp flushes below 2^-126 to 0
      }
    }
    kt_assert_close("softmax", out[1], want, allowed, n, 1.0, 0.0);
    kt_free_outputs(&c, out);
    free(want);
    free(allowed);
    free(x);
  }
}

// layernorm / rmsnorm match the float64 normalisation. Tolerance: the mean
// and variance sum cols values in f32, so (8 + 2 cols) ulp of the terms'
// magnitudes: |z gamma| + |gamma| max|x| rstd + |beta|.
static void test_norms_match_float64_reference(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int round = 0; round < 24; ++round) {
    int layer = round % 2;
    uint32_t rows = (uint32_t)test_rng_range(&rng, 1, 6);
    uint32_t cols = k_widths[test_rng_range(&rng, 0, 9)];
    float *x = random_floats(&rng, (uint64_t)rows * cols, -3, 5);
    float *gamma = random_floats(&rng, cols, -2, 2);
    float *beta = random_floats(&rng, cols, -1, 1);
    accel_kp_norm_constants_t k = {.rows = rows, .cols = cols,
                                   .eps = round % 3 ? 1e-5f : 0.0f};
    uint64_t n = (uint64_t)rows * cols;
    kt_case_t c = {.kernel = layer ? "layernorm" : "rmsnorm",
                   .access = layer ? "rrrw" : "rrw",
                   .binding_count = layer ? 4 : 3,
                   .data = {x, gamma, layer ? beta : NULL},
                   .bytes = {4 * n, 4ull * cols, layer ? 4ull * cols : 4 * n, 4 * n},
                   .constants = &k, .constants_size = sizeof(k)};
    if (round % 4 == 1) {  // in place
      c.access = layer ? "brrb" : "brb";
      c.alias[layer ? 3 : 2] = 1;
    }
    void *out[KT_MAX_BINDINGS] = {0};
    kt_check_reproducible(&c, rows, out);
    double *want = malloc(8 * n), *allowed = malloc(8 * n);
    for (uint32_t r = 0; r < rows; ++r) {
      const float *row = x + (uint64_t)r * cols;
      double mean = 0, var = 0, amax = 0;
      if (layer) {
        for (uint32_t i = 0; i < cols; ++i) mean += row[i];
        mean /= cols;
      }
      for (uint32_t i = 0; i < cols; ++i) {
        var += (row[i] - mean) * (row[i] - mean);
        amax = fmax(amax, fabs(row[i]));
      }
      var /= cols;
      double rstd = 1.0 / sqrt(var + k.eps);
      for (uint32_t i = 0; i < cols; ++i) {
        uint64_t o = (uint64_t)r * cols + i;
        double z = (row[i] - mean) * rstd;
        want[o] = z * gamma[i] + (layer ? beta[i] : 0.0);
        allowed[o] = (8.0 + 2.0 * cols) * 0x1p-24 *
                         (fabs(z * gamma[i]) + fabs(gamma[i]) * amax * rstd +
                          (layer ? fabs(beta[i]) : 0.0)) + 1e-30;
      }
    }
    kt_assert_close(c.kernel, out[c.binding_count - 1], want, allowed, n, 1.0, 0.0);
    kt_free_outputs(&c, out);
    free(want); free(allowed); free(x); free(gamma); free(beta);
  }
}

// rope in both conventions matches the float64 rotation by pos *
// base^(-2p / rotary_dim), leaves dims past rotary_dim untouched, and is
// bit-identical across grids (it works in place).
static void test_rope_matches_float64_reference(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int round = 0; round < 16; ++round) {
    uint32_t tokens = (uint32_t)test_rng_range(&rng, 1, 9);
    uint32_t heads = (uint32_t)test_rng_range(&rng, 1, 5);
    uint32_t head_dim = 2 * (uint32_t)test_rng_range(&rng, 1, 40);
    uint32_t rd = round % 3 == 0 ? 2 * (uint32_t)test_rng_range(&rng, 1, head_dim / 2) : 0;
    accel_kp_rope_constants_t k = {.tokens = tokens, .heads = heads,
                                   .head_dim = head_dim, .rotary_dim = rd,
                                   .mode = round % 2, .base = round % 4 ? 10000.0f : 500000.0f};
    uint64_t n = (uint64_t)tokens * heads * head_dim;
    float *x = random_floats(&rng, n, -2, 2);
    int32_t *pos = malloc(4ull * tokens);
    for (uint32_t t = 0; t < tokens; ++t) pos[t] = (int32_t)test_rng_range(&rng, 0, 9000);
    kt_case_t c = {.kernel = "rope", .access = "br", .binding_count = 2,
                   .data = {x, pos}, .bytes = {4 * n, 4ull * tokens},
                   .constants = &k, .constants_size = sizeof(k)};
    void *out[KT_MAX_BINDINGS] = {0};
    kt_check_reproducible(&c, tokens, out);
    double *want = malloc(8 * n), *allowed = malloc(8 * n);
    uint32_t r = rd ? rd : head_dim;
    for (uint64_t i = 0; i < n; ++i) {
      want[i] = x[i];
      allowed[i] = 0;
    }
    for (uint32_t t = 0; t < tokens; ++t) {
      for (uint32_t h = 0; h < heads; ++h) {
        uint64_t base = ((uint64_t)t * heads + h) * head_dim;
        for (uint32_t p = 0; p < r / 2; ++p) {
          uint32_t i0 = k.mode ? p : 2 * p, i1 = k.mode ? p + r / 2 : 2 * p + 1;
          double th = pos[t] * pow(k.base, -2.0 * p / r);
          double a = x[base + i0], b = x[base + i1];
          want[base + i0] = a * cos(th) - b * sin(th);
          want[base + i1] = a * sin(th) + b * cos(th);
          allowed[base + i0] = allowed[base + i1] = 4 * 0x1p-24 * (fabs(a) + fabs(b));
        }
      }
    }
    kt_assert_close("rope", out[0], want, allowed, n, 1.0, 0.0);
    kt_free_outputs(&c, out);
    free(want); free(allowed); free(x); free(pos);
  }
}

// Empty row counts are legal; short bindings, odd rotary dims and negative
// positions fail with a message.
static void test_row_kernels_reject_bad_launches(void **state) {
  (void)state;
  float x[64] = {0};
  accel_kp_softmax_constants_t s = {.rows = 0, .cols = 8};
  kt_case_t c = {.kernel = "softmax", .access = "rw", .binding_count = 2,
                 .data = {x}, .bytes = {0, 0}, .constants = &s,
                 .constants_size = sizeof(s)};
  assert_accel_ok(kt_run(&c, 2, NULL));
  s.rows = 2;
  c.bytes[0] = c.bytes[1] = 60;
  kt_expect_failure(&c, "binding 0 (x) holds 60 bytes, the constants need 64");
  accel_kp_norm_constants_t nk = {.rows = 2, .cols = 8, .eps = 1e-5f};
  kt_case_t n = {.kernel = "rmsnorm", .access = "rrw", .binding_count = 3,
                 .data = {x, x}, .bytes = {64, 28, 64}, .constants = &nk,
                 .constants_size = sizeof(nk)};
  kt_expect_failure(&n, "binding 1 (gamma) holds 28 bytes");
  n.bytes[1] = 32;
  nk.eps = -1.0f;
  kt_expect_failure(&n, "eps -1 must be >= 0");
  int32_t pos[2] = {0, -3};
  accel_kp_rope_constants_t rk = {.tokens = 2, .heads = 1, .head_dim = 8,
                                  .rotary_dim = 3, .base = 10000.0f};
  kt_case_t r = {.kernel = "rope", .access = "br", .binding_count = 2,
                 .data = {x, pos}, .bytes = {64, 8}, .constants = &rk,
                 .constants_size = sizeof(rk)};
  kt_expect_failure(&r, "rotary_dim 3 must be even");
  rk.rotary_dim = 0;
  kt_expect_failure(&r, "position -3 of token 1 is negative");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_softmax_matches_float64_reference),
      cmocka_unit_test(test_norms_match_float64_reference),
      cmocka_unit_test(test_rope_matches_float64_reference),
      cmocka_unit_test(test_row_kernels_reject_bad_launches),
  };
  return cmocka_run_group_tests(tests, NULL, kt_teardown);
}
