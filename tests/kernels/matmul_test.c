// The matmul reference kernel against a float64 matmul written here: f32,
// f16 and bf16 operands (mixed too), transposes, bias, activations, odd and
// empty shapes; bit-identical results across grids, thread counts and
// repeated runs; bad launches refused with a message.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_harness.h"
#include "kernel_params.h"

typedef struct mm_problem {
  accel_kp_matmul_constants_t c;
  void *a, *b;
  float *bias;
  uint64_t a_bytes, b_bytes;
} mm_problem_t;

static uint32_t esize(uint32_t dtype) { return dtype == ACCEL_KP_DTYPE_F32 ? 4 : 2; }

static double element(const void *p, uint32_t dtype, uint64_t i) {
  if (dtype == ACCEL_KP_DTYPE_F32) return ((const float *)p)[i];
  uint16_t h = ((const uint16_t *)p)[i];
  return dtype == ACCEL_KP_DTYPE_BF16 ? kt_bf16_value(h) : kt_f16_value(h);
}

static void *random_matrix(test_rng_t *rng, uint32_t dtype, uint64_t n) {
  void *p = malloc(n * esize(dtype) + 4);
  for (uint64_t i = 0; i < n; ++i) {
    double v = kt_uniform(rng, -1.0, 1.0);
    if (dtype == ACCEL_KP_DTYPE_F32) ((float *)p)[i] = (float)v;
    else if (dtype == ACCEL_KP_DTYPE_BF16) ((uint16_t *)p)[i] = kt_bf16_from(v);
    else ((uint16_t *)p)[i] = kt_f16_from(v);
  }
  return p;
}

static mm_problem_t make_problem(test_rng_t *rng, uint32_t m, uint32_t n,
                                 uint32_t k, uint32_t dta, uint32_t dtb,
                                 uint32_t flags, uint32_t act) {
  mm_problem_t p = {.c = {.m = m, .n = n, .k = k, .flags = flags,
                          .dtype_a = dta, .dtype_b = dtb, .activation = act}};
  p.a_bytes = (uint64_t)m * k * esize(dta);
  p.b_bytes = (uint64_t)k * n * esize(dtb);
  p.a = random_matrix(rng, dta, (uint64_t)m * k);
  p.b = random_matrix(rng, dtb, (uint64_t)k * n);
  p.bias = malloc(4ull * n + 4);
  for (uint32_t j = 0; j < n; ++j) p.bias[j] = (float)kt_uniform(rng, -1, 1);
  return p;
}

static kt_case_t problem_case(mm_problem_t *p) {
  kt_case_t c = {.kernel = "matmul", .access = "rrrw", .binding_count = 4,
                 .data = {p->a, p->b, p->bias, NULL},
                 .bytes = {p->a_bytes, p->b_bytes,
                           (p->c.flags & ACCEL_KP_MM_BIAS) ? 4ull * p->c.n : 4,
                           4ull * p->c.m * p->c.n},
                 .constants = &p->c, .constants_size = sizeof(p->c)};
  return c;
}

// Checks |got| against the float64 product. Tolerance: f32 accumulation
// over k + 1 terms, 2 (k + 1) 2^-24 of sum |a b| + |bias| (2^-22 for bf16 x
// bf16, where OpenBLAS's sbgemm rounds the pair sums of its bf16 dot
// instruction), plus 1e-6 relative for the activation's own f32 error.
static void check_problem(const mm_problem_t *p, const float *got) {
  const accel_kp_matmul_constants_t *c = &p->c;
  int ta = (c->flags & ACCEL_KP_MM_TRANS_A) != 0;
  int tb = (c->flags & ACCEL_KP_MM_TRANS_B) != 0;
  double unit = (c->dtype_a == ACCEL_KP_DTYPE_BF16 &&
                 c->dtype_b == ACCEL_KP_DTYPE_BF16) ? 0x1p-22 : 0x1p-24;
  uint64_t count = (uint64_t)c->m * c->n;
  double *want = malloc(count * sizeof(double) + 8);
  double *scale = malloc(count * sizeof(double) + 8);
  for (uint32_t i = 0; i < c->m; ++i) {
    for (uint32_t j = 0; j < c->n; ++j) {
      double sum = 0, mag = 0;
      for (uint32_t t = 0; t < c->k; ++t) {
        double a = element(p->a, c->dtype_a, ta ? (uint64_t)t * c->m + i : (uint64_t)i * c->k + t);
        double b = element(p->b, c->dtype_b, tb ? (uint64_t)j * c->k + t : (uint64_t)t * c->n + j);
        sum += a * b;
        mag += fabs(a * b);
      }
      if (c->flags & ACCEL_KP_MM_BIAS) {
        sum += p->bias[j];
        mag += fabs(p->bias[j]);
      }
      uint64_t o = (uint64_t)i * c->n + j;
      want[o] = kt_activation(c->activation, sum);
      // The activations' slopes are at most about 1.13; their own f32
      // evaluation adds a few ulp of |sum| (relative 1e-6 covers it).
      scale[o] = 1.2 * mag * 2.0 * (c->k + 1) * unit +
                 1e-6 * (fabs(want[o]) + fabs(sum)) + 1e-7;
    }
  }
  kt_assert_close("matmul", got, want, scale, count, 1.0, 0.0);
  free(want);
  free(scale);
}

static void free_problem(mm_problem_t *p) {
  free(p->a);
  free(p->b);
  free(p->bias);
}

// Runs |p| on every grid and thread count (same bits), checks it against
// the reference and frees it.
static void run_reproducible_and_check(mm_problem_t *p) {
  kt_case_t c = problem_case(p);
  void *out[KT_MAX_BINDINGS] = {0};
  kt_check_reproducible(&c, accel_kp_matmul_units(&p->c), out);
  check_problem(p, out[3]);
  kt_free_outputs(&c, out);
  free_problem(p);
}

// Random shapes (1, primes, non-multiples of the vector width), every dtype
// pair, transposes, bias and activation match the float64 reference, with
// the same bits for every grid and thread count.
static void test_matmul_matches_float64_reference(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  static const uint32_t dims[] = {1, 2, 3, 7, 17, 31, 64, 67, 130};
  for (int round = 0; round < 24; ++round) {
    uint32_t m = dims[test_rng_range(&rng, 0, 8)];
    uint32_t n = round == 0 ? 257 : dims[test_rng_range(&rng, 0, 8)];
    uint32_t k = dims[test_rng_range(&rng, 0, 8)];
    uint32_t dta = (uint32_t)test_rng_range(&rng, 1, 3);
    uint32_t dtb = round % 3 == 0 ? dta : (uint32_t)test_rng_range(&rng, 1, 3);
    uint32_t flags = (uint32_t)test_rng_range(&rng, 0, 7);
    uint32_t act = (uint32_t)test_rng_range(&rng, 0, 3);
    mm_problem_t p = make_problem(&rng, m, n, k, dta, dtb, flags, act);
    // Small tiles so that edge tiles and many units occur.
    p.c.tile_m = round % 2 ? 0 : (uint32_t)test_rng_range(&rng, 1, 9);
    p.c.tile_n = round % 2 ? 0 : (uint32_t)test_rng_range(&rng, 1, 40);
    run_reproducible_and_check(&p);
  }
}

// m, n or k of 0 is legal: nothing is written for m or n 0; k 0 gives the
// bias (through the activation).
static void test_matmul_accepts_empty_shapes(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  mm_problem_t p = make_problem(&rng, 3, 5, 0, 1, 1, ACCEL_KP_MM_BIAS, 0);
  kt_case_t c = problem_case(&p);
  void *out[KT_MAX_BINDINGS] = {0};
  assert_accel_ok(kt_run(&c, 2, out));
  const float *y = out[3];
  for (int i = 0; i < 15; ++i) assert_true(y[i] == p.bias[i % 5]);
  kt_free_outputs(&c, out);
  free_problem(&p);
  mm_problem_t e = make_problem(&rng, 0, 5, 4, 1, 1, 0, 0);
  c = problem_case(&e);
  assert_accel_ok(kt_run(&c, 2, NULL));
  free_problem(&e);
}

// A GEMV-shaped and a larger product with the default tiles (several
// units, one-row tiles through sgemv) match the reference and are
// reproducible.
static void test_matmul_default_tiles_gemv_and_square(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  uint32_t shapes[2][3] = {{1, 1100, 333}, {300, 1030, 129}};
  for (int s = 0; s < 2; ++s) {
    mm_problem_t p = make_problem(&rng, shapes[s][0], shapes[s][1],
                                  shapes[s][2], 1, 1, ACCEL_KP_MM_BIAS,
                                  ACCEL_KP_ACT_GELU_TANH);
    run_reproducible_and_check(&p);
  }
}

// Bindings shorter than the shapes, unknown dtypes and flags fail the
// launch with a message that names the problem; nothing is read.
static void test_matmul_rejects_bad_launches(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  mm_problem_t p = make_problem(&rng, 4, 6, 5, 1, 1, ACCEL_KP_MM_BIAS, 0);
  kt_case_t c = problem_case(&p);
  c.bytes[0] -= 4;
  kt_expect_failure(&c, "binding 0 (a) holds 76 bytes, the constants need 80");
  c = problem_case(&p);
  c.bytes[2] = 8;
  kt_expect_failure(&c, "binding 2 (bias)");
  c = problem_case(&p);
  c.bytes[3] = 4;
  kt_expect_failure(&c, "binding 3 (c)");
  p.c.dtype_b = 9;
  c = problem_case(&p);
  kt_expect_failure(&c, "matmul dtypes 1 x 9");
  p.c.dtype_b = 1;
  p.c.flags = 1u << 7;
  kt_expect_failure(&c, "matmul flags 0x80");
  free_problem(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_matches_float64_reference),
      cmocka_unit_test(test_matmul_accepts_empty_shapes),
      cmocka_unit_test(test_matmul_default_tiles_gemv_and_square),
      cmocka_unit_test(test_matmul_rejects_bad_launches),
  };
  return cmocka_run_group_tests(tests, NULL, kt_teardown);
}
