// activation (GELU tanh / erf, SiLU), swiglu, add and mul (with row
// broadcast) against float64 written here, on random lengths around the
// 16384-element unit, in place; bit-identical across grids and thread
// counts; bad constants refused with a message.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_harness.h"
#include "kernel_params.h"

static double act_ref(uint32_t op, double v) {
  switch (op) {
    case ACCEL_KP_ACT_GELU_TANH:
      return 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case ACCEL_KP_ACT_GELU_ERF:
      return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    default:
      return v / (1.0 + exp(-v));
  }
}

static uint32_t random_count(test_rng_t *rng) {
  static const uint32_t counts[] = {1, 5, 16, 17, 16383, 16384, 16385, 40000};
  return counts[test_rng_range(rng, 0, 7)];
}

static float *random_floats(test_rng_t *rng, uint64_t n, double lo, double hi) {
  float *p = malloc(4 * n + 4);
  for (uint64_t i = 0; i < n; ++i) p[i] = (float)kt_uniform(rng, lo, hi);
  return p;
}

// Each activation within 16 ulp of |result| + |v| (the tanh form
// 1 - 2 / (e + 1) loses relative precision near 0; erff and the kernel exp
// are a few ulp) and swiglu within the same of silu(gate) up.
static void test_activations_match_float64_reference(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int round = 0; round < 16; ++round) {
    uint32_t op = 1 + round % 4;  // 4: swiglu
    uint32_t n = random_count(&rng);
    float *x = random_floats(&rng, n, -12, 12);
    float *up = random_floats(&rng, n, -3, 3);
    x[0] = 0.0f;
    if (n > 3) { x[1] = 100.0f; x[2] = -100.0f; }
    int swiglu = op == 4;
    accel_kp_eltwise_constants_t k = {.count = n, .op = swiglu ? 0 : op};
    int inplace = round % 3 == 0;
    kt_case_t c = {.kernel = swiglu ? "swiglu" : "activation",
                   .access = swiglu ? "rrw" : "rw",
                   .binding_count = swiglu ? 3 : 2,
                   .data = {x, up}, .bytes = {4ull * n, 4ull * n, 4ull * n},
                   .constants = &k, .constants_size = sizeof(k)};
    if (inplace) {
      c.access = swiglu ? "brb" : "bb";
      c.alias[swiglu ? 2 : 1] = 1;
    }
    void *out[KT_MAX_BINDINGS] = {0};
    kt_check_reproducible(&c, accel_kp_eltwise_units(&k), out);
    double *want = malloc(8ull * n), *allowed = malloc(8ull * n);
    for (uint32_t i = 0; i < n; ++i) {
      double v = x[i];
      want[i] = swiglu ? act_ref(ACCEL_KP_ACT_SILU, v) * up[i] : act_ref(op, v);
      allowed[i] = 16 * 0x1p-24 * (fabs(want[i]) + fabs(v) * (swiglu ? fabs(up[i]) : 1.0)) + 1e-37;
    }
    kt_assert_close(c.kernel, out[c.binding_count - 1], want, allowed, n, 1.0, 0.0);
    kt_free_outputs(&c, out);
    free(want); free(allowed); free(x); free(up);
  }
}

// add and mul, plain and broadcasting a row, are the correctly rounded f32
// results (within 1 ulp of the float64 value, which rounds once more).
static void test_add_mul_match_and_broadcast(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int round = 0; round < 12; ++round) {
    int multiply = round % 2;
    uint32_t width = round % 3 == 0 ? 0 : (uint32_t)test_rng_range(&rng, 1, 300);
    uint32_t rows = (uint32_t)test_rng_range(&rng, 1, 200);
    uint32_t n = width ? width * rows : random_count(&rng);
    uint32_t bn = width ? width : n;
    float *a = random_floats(&rng, n, -100, 100);
    float *b = random_floats(&rng, bn, -100, 100);
    accel_kp_eltwise_constants_t k = {.count = n, .b_count = width};
    kt_case_t c = {.kernel = multiply ? "mul" : "add", .access = "rrw",
                   .binding_count = 3, .data = {a, b},
                   .bytes = {4ull * n, 4ull * bn, 4ull * n},
                   .constants = &k, .constants_size = sizeof(k)};
    void *out[KT_MAX_BINDINGS] = {0};
    kt_check_reproducible(&c, accel_kp_eltwise_units(&k), out);
    double *want = malloc(8ull * n);
    for (uint32_t i = 0; i < n; ++i) {
      double bv = b[i % bn];
      want[i] = multiply ? a[i] * bv : a[i] + bv;
    }
    kt_assert_close(c.kernel, out[2], want, NULL, n, 0x1p-24, 1e-30);
    kt_free_outputs(&c, out);
    free(want); free(a); free(b);
  }
}

// A count of 0 is legal; NONE as the activation, a b_count that does not
// divide count and short bindings fail with a message.
static void test_eltwise_rejects_bad_launches(void **state) {
  (void)state;
  float x[32] = {0};
  accel_kp_eltwise_constants_t k = {.count = 0, .op = ACCEL_KP_ACT_SILU};
  kt_case_t c = {.kernel = "activation", .access = "rw", .binding_count = 2,
                 .data = {x}, .bytes = {0, 0}, .constants = &k,
                 .constants_size = sizeof(k)};
  assert_accel_ok(kt_run(&c, 2, NULL));
  k.count = 8;
  k.op = ACCEL_KP_ACT_NONE;
  c.bytes[0] = c.bytes[1] = 32;
  kt_expect_failure(&c, "activation: constants not valid");
  accel_kp_eltwise_constants_t a = {.count = 10, .b_count = 3};
  kt_case_t add = {.kernel = "add", .access = "rrw", .binding_count = 3,
                   .data = {x, x}, .bytes = {40, 12, 40}, .constants = &a,
                   .constants_size = sizeof(a)};
  kt_expect_failure(&add, "add: constants not valid (count 10, b_count 3");
  a.b_count = 5;
  add.bytes[1] = 16;
  kt_expect_failure(&add, "binding 1 (b) holds 16 bytes, the constants need 20");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_activations_match_float64_reference),
      cmocka_unit_test(test_add_mul_match_and_broadcast),
      cmocka_unit_test(test_eltwise_rejects_bad_launches),
  };
  return cmocka_run_group_tests(tests, NULL, kt_teardown);
}
