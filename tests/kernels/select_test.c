// embedding, argmax and top-k against selections written here (qsort with
// the documented ranking), with ties, NaN and k from 1 to cols; bit-identical
// across grids and thread counts; out-of-range ids and bad k refused with a
// message.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_harness.h"
#include "kernel_params.h"

// The embedding of f32, f16 and bf16 tables is the exact f32 value of the
// row each id names.
static void test_embedding_gathers_rows(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (uint32_t dtype = 1; dtype <= 3; ++dtype) {
    uint32_t vocab = (uint32_t)test_rng_range(&rng, 1, 300);
    uint32_t dim = (uint32_t)test_rng_range(&rng, 1, 70);
    uint32_t tokens = (uint32_t)test_rng_range(&rng, 1, 40);
    uint32_t es = dtype == 1 ? 4 : 2;
    uint8_t *table = malloc((uint64_t)vocab * dim * es);
    double *value = malloc(8ull * vocab * dim);
    for (uint64_t i = 0; i < (uint64_t)vocab * dim; ++i) {
      double v = kt_uniform(&rng, -3, 3);
      if (dtype == 1) {
        float f = (float)v;
        memcpy(table + 4 * i, &f, 4);
        value[i] = f;
      } else {
        uint16_t h = dtype == 2 ? kt_f16_from(v) : kt_bf16_from(v);
        memcpy(table + 2 * i, &h, 2);
        value[i] = dtype == 2 ? kt_f16_value(h) : kt_bf16_value(h);
      }
    }
    int32_t *ids = malloc(4ull * tokens);
    for (uint32_t t = 0; t < tokens; ++t) ids[t] = (int32_t)test_rng_range(&rng, 0, vocab - 1);
    accel_kp_embedding_constants_t k = {.tokens = tokens, .vocab = vocab,
                                        .dim = dim, .dtype = dtype};
    kt_case_t c = {.kernel = "embedding", .access = "rrw", .binding_count = 3,
                   .data = {table, ids},
                   .bytes = {(uint64_t)vocab * dim * es, 4ull * tokens, 4ull * tokens * dim},
                   .constants = &k, .constants_size = sizeof(k)};
    void *out[KT_MAX_BINDINGS] = {0};
    kt_check_reproducible(&c, tokens, out);
    const float *o = out[2];
    for (uint32_t t = 0; t < tokens; ++t) {
      for (uint32_t j = 0; j < dim; ++j) {
        assert_true(o[(uint64_t)t * dim + j] == value[(uint64_t)ids[t] * dim + j]);
      }
    }
    ids[tokens - 1] = (int32_t)vocab;
    kt_expect_failure(&c, "outside the vocabulary");
    kt_free_outputs(&c, out);
    free(table); free(value); free(ids);
  }
}

static const float *g_row;  // qsort context

// The documented ranking: larger first, numbers before NaN, lower index on
// ties.
static int rank_compare(const void *pa, const void *pb) {
  int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
  float va = g_row[a], vb = g_row[b];
  if (isnan(va) != isnan(vb)) return isnan(va) ? 1 : -1;
  if (!isnan(va) && va != vb) return va > vb ? -1 : 1;
  return a < b ? -1 : 1;
}

// Random rows with many ties (values from a small set) and NaN: argmax is
// the first best number, top-k the first k of the sorted ranking.
static void test_argmax_and_topk_match_sorted_ranking(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int round = 0; round < 16; ++round) {
    uint32_t rows = (uint32_t)test_rng_range(&rng, 1, 8);
    uint32_t cols = (uint32_t)test_rng_range(&rng, 1, round < 8 ? 40 : 3000);
    uint32_t k = round % 4 == 0 ? cols < ACCEL_KP_TOPK_MAX ? cols : ACCEL_KP_TOPK_MAX
                                : (uint32_t)test_rng_range(&rng, 1, cols < 50 ? cols : 50);
    float *x = malloc(4ull * rows * cols);
    for (uint64_t i = 0; i < (uint64_t)rows * cols; ++i) {
      uint64_t r = test_rng_range(&rng, 0, 20);
      x[i] = r == 0 ? NAN : (float)((int)r - 10) * 0.5f;
    }
    if (round == 1) {
      for (uint32_t i = 0; i < cols; ++i) x[i] = NAN;  // an all-NaN row
    }
    accel_kp_select_constants_t sk = {.rows = rows, .cols = cols, .k = k};
    kt_case_t am = {.kernel = "argmax", .access = "rw", .binding_count = 2,
                    .data = {x}, .bytes = {4ull * rows * cols, 4ull * rows},
                    .constants = &sk, .constants_size = sizeof(sk)};
    kt_case_t tk = {.kernel = "topk", .access = "rww", .binding_count = 3,
                    .data = {x}, .bytes = {4ull * rows * cols, 4ull * rows * k, 4ull * rows * k},
                    .constants = &sk, .constants_size = sizeof(sk)};
    void *amo[KT_MAX_BINDINGS] = {0}, *tko[KT_MAX_BINDINGS] = {0};
    kt_check_reproducible(&am, rows, amo);
    kt_check_reproducible(&tk, rows, tko);
    int32_t *order = malloc(4ull * cols);
    for (uint32_t r = 0; r < rows; ++r) {
      g_row = x + (uint64_t)r * cols;
      for (uint32_t i = 0; i < cols; ++i) order[i] = (int32_t)i;
      qsort(order, cols, 4, rank_compare);
      int32_t want_argmax = isnan(g_row[order[0]]) ? 0 : order[0];
      assert_int_equal(((int32_t *)amo[1])[r], want_argmax);
      const float *v = (const float *)tko[1] + (uint64_t)r * k;
      const int32_t *ix = (const int32_t *)tko[2] + (uint64_t)r * k;
      for (uint32_t i = 0; i < k; ++i) {
        if (ix[i] != order[i]) {
          print_error("topk row %u rank %u: index %d, want %d\n", r, i, ix[i], order[i]);
          fail();
        }
        assert_memory_equal(&v[i], &g_row[order[i]], 4);
      }
    }
    kt_free_outputs(&am, amo);
    kt_free_outputs(&tk, tko);
    free(order);
    free(x);
  }
}

// k of 0, above cols or above ACCEL_KP_TOPK_MAX, argmax over empty rows
// and short bindings fail with a message; zero rows is legal.
static void test_select_rejects_bad_launches(void **state) {
  (void)state;
  float x[16] = {0};
  accel_kp_select_constants_t sk = {.rows = 2, .cols = 8, .k = 9};
  kt_case_t tk = {.kernel = "topk", .access = "rww", .binding_count = 3,
                  .data = {x}, .bytes = {64, 64, 64}, .constants = &sk,
                  .constants_size = sizeof(sk)};
  kt_expect_failure(&tk, "topk: k 9 must be 1 to min(cols 8, 1024)");
  sk.k = 0;
  kt_expect_failure(&tk, "topk: k 0");
  sk.k = 4;
  tk.bytes[2] = 16;
  kt_expect_failure(&tk, "binding 2 (indices) holds 16 bytes, the constants need 32");
  accel_kp_select_constants_t ak = {.rows = 1, .cols = 0};
  kt_case_t am = {.kernel = "argmax", .access = "rw", .binding_count = 2,
                  .data = {x}, .bytes = {0, 4}, .constants = &ak,
                  .constants_size = sizeof(ak)};
  kt_expect_failure(&am, "argmax: rows of 0 columns");
  ak.rows = 0;
  assert_accel_ok(kt_run(&am, 2, NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_embedding_gathers_rows),
      cmocka_unit_test(test_argmax_and_topk_match_sorted_ranking),
      cmocka_unit_test(test_select_rejects_bad_launches),
  };
  return cmocka_run_group_tests(tests, NULL, kt_teardown);
}
