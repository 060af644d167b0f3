// The GGUF block kernels beyond Q8_0 / Q4_0 (qmatmul_q4_1 ... q6_k,
// embedding_gguf). Their values against ggml's dequantization are checked
// by tests/model/gguf_run_test.py with the gguf package's own
// dequantize on random valid blocks; here: bit-identical results across
// grids and thread counts, a row's result independent of m, the portable
// and AVX2 paths equal, the embedding rows equal to what the matmul kernel
// multiplies by, and bad launches refused with a message.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_harness.h"
#include "kernel_params.h"

typedef struct gform {
  const char *kernel;
  uint32_t ggml_type, block, bytes;
  // Offsets of the f16 scales in a block (kept finite and small).
  int scale_offsets[2];
} gform_t;

static const gform_t k_forms[] = {
    {"qmatmul_q4_1", ACCEL_KP_GGML_Q4_1, 32, 20, {0, 2}},
    {"qmatmul_q5_0", ACCEL_KP_GGML_Q5_0, 32, 22, {0, -1}},
    {"qmatmul_q5_1", ACCEL_KP_GGML_Q5_1, 32, 24, {0, 2}},
    {"qmatmul_q4_k", ACCEL_KP_GGML_Q4_K, 256, 144, {0, 2}},
    {"qmatmul_q5_k", ACCEL_KP_GGML_Q5_K, 256, 176, {0, 2}},
    {"qmatmul_q6_k", ACCEL_KP_GGML_Q6_K, 256, 210, {208, -1}},
};
#define FORM_COUNT (sizeof(k_forms) / sizeof(k_forms[0]))

typedef struct gproblem {
  const gform_t *f;
  accel_kp_qmatmul_constants_t c;
  float *x;
  uint8_t *w;
  uint64_t w_bytes;
} gproblem_t;

static gproblem_t make(test_rng_t *rng, const gform_t *f, uint32_t m,
                       uint32_t n, uint32_t k) {
  gproblem_t p = {.f = f, .c = {.m = m, .n = n, .k = k}};
  p.x = malloc(4ull * m * k + 4);
  for (uint64_t i = 0; i < (uint64_t)m * k; ++i) {
    p.x[i] = (float)kt_uniform(rng, -2, 2);
  }
  p.w_bytes = (uint64_t)n * (k / f->block) * f->bytes;
  p.w = malloc(p.w_bytes + 4);
  for (uint64_t i = 0; i < p.w_bytes; ++i) p.w[i] = (uint8_t)test_rng_next(rng);
  for (uint64_t b = 0; b < p.w_bytes / f->bytes; ++b) {
    for (int s = 0; s < 2; ++s) {
      if (f->scale_offsets[s] < 0) continue;
      uint16_t d = kt_f16_from(kt_uniform(rng, 1e-4, 1e-2));
      p.w[b * f->bytes + f->scale_offsets[s]] = (uint8_t)d;
      p.w[b * f->bytes + f->scale_offsets[s] + 1] = (uint8_t)(d >> 8);
    }
  }
  return p;
}

static kt_case_t gcase(gproblem_t *p) {
  kt_case_t c = {.kernel = p->f->kernel, .access = "rrw", .binding_count = 3,
                 .constants = &p->c, .constants_size = sizeof(p->c)};
  c.data[0] = p->x;
  c.data[1] = p->w;
  c.bytes[0] = 4ull * p->c.m * p->c.k;
  c.bytes[1] = p->w_bytes;
  c.bytes[2] = 4ull * p->c.m * p->c.n;
  return c;
}

static void free_problem(gproblem_t *p) {
  free(p->x);
  free(p->w);
}

// Every form, GEMV and small batches, n around the 64-column unit: the same
// bits for every grid and host thread count, and finite.
static void test_gguf_qmatmul_reproducible_across_grids(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  static const uint32_t ns[] = {1, 63, 65, 130};
  for (int round = 0; round < 12; ++round) {
    const gform_t *f = &k_forms[round % FORM_COUNT];
    uint32_t m = round < 6 ? 1 : (uint32_t)test_rng_range(&rng, 2, 4);
    uint32_t n = ns[test_rng_range(&rng, 0, 3)];
    uint32_t k = f->block * (uint32_t)test_rng_range(&rng, 1, 3);
    gproblem_t p = make(&rng, f, m, n, k);
    kt_case_t c = gcase(&p);
    void *out[KT_MAX_BINDINGS] = {0};
    kt_check_reproducible(&c, accel_kp_qmatmul_units(&p.c), out);
    const float *y = out[2];
    for (uint64_t i = 0; i < (uint64_t)m * n; ++i) {
      assert_true(isfinite(y[i]));
    }
    kt_free_outputs(&c, out);
    free_problem(&p);
  }
}

// A row of x gives the same bits as a GEMV and inside a batch.
static void test_gguf_qmatmul_row_independent_of_m(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (size_t i = 0; i < FORM_COUNT; ++i) {
    gproblem_t p = make(&rng, &k_forms[i], 4, 70, 512);
    kt_case_t c = gcase(&p);
    void *batch[KT_MAX_BINDINGS] = {0}, *single[KT_MAX_BINDINGS] = {0};
    assert_accel_ok(kt_run(&c, 2, batch));
    gproblem_t one = p;
    one.c.m = 1;
    one.x = p.x + 2 * 512;
    kt_case_t c1 = gcase(&one);
    assert_accel_ok(kt_run(&c1, 1, single));
    assert_memory_equal((float *)batch[2] + 2 * 70, single[2], 70 * 4);
    kt_free_outputs(&c, batch);
    kt_free_outputs(&c1, single);
    free_problem(&p);
  }
}

// ACCEL_KP_VECTOR=0 (the portable loop) gives the bits of the AVX2 path.
static void test_gguf_qmatmul_vector_paths_agree(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (size_t i = 0; i < FORM_COUNT; ++i) {
    gproblem_t p = make(&rng, &k_forms[i], 3, 67, 512);
    kt_case_t c = gcase(&p);
    void *best[KT_MAX_BINDINGS] = {0}, *portable[KT_MAX_BINDINGS] = {0};
    assert_accel_ok(kt_run(&c, 2, best));
    setenv("ACCEL_KP_VECTOR", "0", 1);
    assert_accel_ok(kt_run(&c, 2, portable));
    unsetenv("ACCEL_KP_VECTOR");
    assert_memory_equal(best[2], portable[2], 4ull * 3 * 67);
    kt_free_outputs(&c, best);
    kt_free_outputs(&c, portable);
    free_problem(&p);
  }
}

// embedding_gguf's row t equals the weights the matmul multiplies by: for x
// the unit vector e_i, qmatmul gives y[j] = W[j, i], so the column of
// products over unit vectors is the dequantized table, which the embedding
// must reproduce exactly (one product by 1.0 and sums with zeros are exact).
static void test_embedding_gguf_rows_are_the_matmul_weights(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (size_t i = 0; i < FORM_COUNT; ++i) {
    const gform_t *f = &k_forms[i];
    uint32_t vocab = 5, dim = f->block * 2;
    gproblem_t p = make(&rng, f, dim, vocab, dim);
    memset(p.x, 0, 4ull * dim * dim);
    for (uint32_t r = 0; r < dim; ++r) p.x[(uint64_t)r * dim + r] = 1.0f;
    kt_case_t c = gcase(&p);
    void *out[KT_MAX_BINDINGS] = {0};
    assert_accel_ok(kt_run(&c, 2, out));
    const float *y = out[2];  // y[r, j] = W[j, r]
    int32_t ids[3] = {4, 0, 2};
    accel_kp_embedding_gguf_constants_t ec = {.tokens = 3, .vocab = vocab,
                                              .dim = dim, .type = f->ggml_type};
    kt_case_t e = {.kernel = "embedding_gguf", .access = "rrw",
                   .binding_count = 3, .constants = &ec,
                   .constants_size = sizeof(ec)};
    e.data[0] = p.w;
    e.data[1] = ids;
    e.bytes[0] = p.w_bytes;
    e.bytes[1] = sizeof(ids);
    e.bytes[2] = 4ull * 3 * dim;
    void *rows[KT_MAX_BINDINGS] = {0};
    kt_check_reproducible(&e, 3, rows);
    const float *got = rows[2];
    for (uint32_t t = 0; t < 3; ++t) {
      for (uint32_t r = 0; r < dim; ++r) {
        float want = y[(uint64_t)r * vocab + (uint32_t)ids[t]];
        if (got[(uint64_t)t * dim + r] != want) {
          fail_msg("%s: embedding row %d element %u: %g, the matmul's %g",
                   f->kernel, ids[t], r, got[(uint64_t)t * dim + r], want);
        }
      }
    }
    kt_free_outputs(&c, out);
    kt_free_outputs(&e, rows);
    free_problem(&p);
  }
}

// k not a multiple of the block, flags, short bindings, an unknown type and
// an id outside the vocabulary fail with a message.
static void test_gguf_kernels_reject_bad_launches(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  gproblem_t p = make(&rng, &k_forms[3], 2, 8, 512);
  kt_case_t c = gcase(&p);
  p.c.k = 384;
  kt_expect_failure(&c, "qmatmul_q4_k: k 384 must be a multiple of 256");
  p.c.k = 512;
  p.c.flags = 1;
  kt_expect_failure(&c, "flags 0x1");
  p.c.flags = 0;
  c.bytes[1] -= 1;
  kt_expect_failure(&c, "binding 1 (w)");
  c = gcase(&p);
  c.bytes[2] = 60;
  kt_expect_failure(&c, "binding 2 (y)");
  int32_t ids[2] = {1, 8};
  accel_kp_embedding_gguf_constants_t ec = {.tokens = 2, .vocab = 8,
                                            .dim = 512,
                                            .type = ACCEL_KP_GGML_Q4_K};
  kt_case_t e = {.kernel = "embedding_gguf", .access = "rrw",
                 .binding_count = 3, .constants = &ec,
                 .constants_size = sizeof(ec)};
  e.data[0] = p.w;
  e.data[1] = ids;
  e.bytes[0] = p.w_bytes;
  e.bytes[1] = sizeof(ids);
  e.bytes[2] = 4ull * 2 * 512;
  kt_expect_failure(&e, "token 1 has id 8, outside 0..7");
  ec.type = 10;  // Q2_K
  kt_expect_failure(&e, "type 10 must be a ggml block type");
  free_problem(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gguf_qmatmul_reproducible_across_grids),
      cmocka_unit_test(test_gguf_qmatmul_row_independent_of_m),
      cmocka_unit_test(test_gguf_qmatmul_vector_paths_agree),
      cmocka_unit_test(test_embedding_gguf_rows_are_the_matmul_weights),
      cmocka_unit_test(test_gguf_kernels_reject_bad_launches),
  };
  return cmocka_run_group_tests(tests, NULL, kt_teardown);
}
