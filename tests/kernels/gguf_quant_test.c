// The GGUF block kernels (qmatmul_q4_1 ... q6_k, embedding_gguf, and
// qmatmul_q8_0 / q4_0 where ACCEL_KP_QFLAG_Q8_ACTIVATIONS is concerned).
// Their values against ggml's dequantization are checked by
// tests/model/gguf_run_test.py with the gguf package's own dequantize on
// random valid blocks; here, with f32 and with 8-bit activations:
// bit-identical results across grids and thread counts, a row's result
// independent of m, the portable and vector paths equal, the embedding rows
// equal to what the matmul kernel multiplies by, 8-bit activations within
// the bound their rounding allows of float64, and bad launches refused with
// a message.
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
    {"qmatmul_q8_0", ACCEL_KP_GGML_Q8_0, 32, 34, {0, -1}},
    {"qmatmul_q4_0", ACCEL_KP_GGML_Q4_0, 32, 18, {0, -1}},
};
#define FORM_COUNT (sizeof(k_forms) / sizeof(k_forms[0]))

typedef struct gproblem {
  const gform_t *f;
  accel_kp_qmatmul_constants_t c;
  float *x;
  uint8_t *w;
  uint64_t w_bytes;
} gproblem_t;

// Random x in [-2, 2] (some groups of 32 scaled down by 1000 or zero, so
// that 8-bit activations' scales vary), random valid blocks.
static gproblem_t make(test_rng_t *rng, const gform_t *f, uint32_t m,
                       uint32_t n, uint32_t k, uint32_t flags) {
  gproblem_t p = {.f = f, .c = {.m = m, .n = n, .k = k, .flags = flags}};
  p.x = malloc(4ull * m * k + 4);
  for (uint64_t i = 0; i < (uint64_t)m * k; ++i) {
    p.x[i] = (float)kt_uniform(rng, -2, 2);
    if (i / 32 % 7 == 3) p.x[i] *= 1e-3f;
    if (i / 32 % 11 == 5) p.x[i] = 0.0f;
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

static const uint32_t k_flags[2] = {0, ACCEL_KP_QFLAG_Q8_ACTIVATIONS};

// 16-bit activations (q8_0 and q4_0, forms 6 and 7) over rows of x from a
// GEMV through the four-row register path to the interleaved tile and its
// odd last row.
static const uint32_t k_i16_ms[5] = {1, 3, 4, 6, 9};
#define I16_CASES (2 * 5)

// Every form, f32 and 8-bit activations, GEMV and small batches, n around
// the 64-column unit and the four-row tile, k with partial runs of eight
// groups, then the 16-bit cases: the same bits for every grid and host
// thread count, and finite.
static void test_gguf_qmatmul_reproducible_across_grids(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  static const uint32_t ns[] = {1, 6, 63, 65, 130};
  for (size_t round = 0; round < 32 + I16_CASES; ++round) {
    int i16 = round >= 32;
    const gform_t *f = &k_forms[i16 ? 6 + round % 2 : round % FORM_COUNT];
    uint32_t m = i16              ? k_i16_ms[(round - 32) / 2]
                 : round % 16 < 8 ? 1
                                  : (uint32_t)test_rng_range(&rng, 2, 4);
    uint32_t n = ns[test_rng_range(&rng, 0, 4)];
    uint32_t k = f->block * (uint32_t)test_rng_range(&rng, 1, 3) *
                 (f->block == 32 ? 5u : 1u);
    gproblem_t p = make(&rng, f, m, n, k,
                        i16 ? ACCEL_KP_QFLAG_I16_ACTIVATIONS
                            : k_flags[round / 16]);
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
  // f32 and 8-bit activations for every form, then 16-bit for q8_0 and
  // q4_0 (forms 6 and 7).
  for (size_t i = 0; i < 2 * FORM_COUNT + 2; ++i) {
    int i16 = i >= 2 * FORM_COUNT;
    gproblem_t p = make(&rng, &k_forms[i16 ? 6 + i % 2 : i % FORM_COUNT], 4,
                        70, 512,
                        i16 ? ACCEL_KP_QFLAG_I16_ACTIVATIONS
                            : k_flags[i / FORM_COUNT]);
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

// ACCEL_KP_VECTOR=0 (the portable loops) and 1 (AVX2, no VNNI) give the
// bits of the best path for |p|.
static void expect_vector_paths_agree(const gproblem_t *p, kt_case_t *c) {
  void *best[KT_MAX_BINDINGS] = {0};
  assert_accel_ok(kt_run(c, 2, best));
  for (int cap = 0; cap < 2; ++cap) {
    void *capped[KT_MAX_BINDINGS] = {0};
    setenv("ACCEL_KP_VECTOR", cap ? "1" : "0", 1);
    assert_accel_ok(kt_run(c, 2, capped));
    unsetenv("ACCEL_KP_VECTOR");
    if (memcmp(best[2], capped[2], 4ull * p->c.m * p->c.n) != 0) {
      fail_msg("%s m %u flags %u: ACCEL_KP_VECTOR=%d differs from the best "
               "path", p->f->kernel, p->c.m, p->c.flags, cap);
    }
    kt_free_outputs(c, capped);
  }
  kt_free_outputs(c, best);
}

// ACCEL_KP_VECTOR=0 (the portable loops) and 1 (AVX2; for 8-bit
// activations without VNNI) give the bits of the best path, with groups
// past the last run of eight and weight rows past the last tile of four;
// then the 16-bit cases.
static void test_gguf_qmatmul_vector_paths_agree(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (size_t i = 0; i < 6 * FORM_COUNT + I16_CASES; ++i) {
    int i16 = i >= 6 * FORM_COUNT;
    const gform_t *f = &k_forms[i16 ? 6 + i % 2 : i % FORM_COUNT];
    uint32_t k = f->block == 32 ? 32u * 27u : 256u * 3u;
    // GEMV and batches: 8-bit activations decode the blocks in registers
    // for up to four rows of x and unpack and interleave them for more.
    static const uint32_t ms[3] = {1, 3, 6};
    uint32_t m = i16 ? k_i16_ms[(i - 6 * FORM_COUNT) / 2]
                     : ms[i / (2 * FORM_COUNT)];
    gproblem_t p = make(&rng, f, m, 67, k,
                        i16 ? ACCEL_KP_QFLAG_I16_ACTIVATIONS
                            : k_flags[i / FORM_COUNT % 2]);
    kt_case_t c = gcase(&p);
    expect_vector_paths_agree(&p, &c);
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
    gproblem_t p = make(&rng, f, dim, vocab, dim, 0);
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
  gproblem_t p = make(&rng, &k_forms[3], 2, 8, 512, 0);
  kt_case_t c = gcase(&p);
  p.c.k = 384;
  kt_expect_failure(&c, "qmatmul_q4_k: k 384 must be a multiple of 256");
  p.c.k = 512;
  p.c.flags = 1;
  kt_expect_failure(&c, "flags 0x1");
  p.c.flags = ACCEL_KP_QFLAG_Q8_ACTIVATIONS | 4u;
  kt_expect_failure(&c, "flags 0x6");
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

// The dequantized weights [n, k] (embedding_gguf over every row).
static float *dequantized(const gproblem_t *p) {
  uint32_t n = p->c.n, k = p->c.k;
  int32_t *ids = malloc(4ull * n);
  for (uint32_t j = 0; j < n; ++j) ids[j] = (int32_t)j;
  accel_kp_embedding_gguf_constants_t ec = {.tokens = n, .vocab = n, .dim = k,
                                            .type = p->f->ggml_type};
  kt_case_t e = {.kernel = "embedding_gguf", .access = "rrw",
                 .binding_count = 3, .constants = &ec,
                 .constants_size = sizeof(ec)};
  e.data[0] = p->w;
  e.data[1] = ids;
  e.bytes[0] = p->w_bytes;
  e.bytes[1] = 4ull * n;
  e.bytes[2] = 4ull * n * k;
  void *out[KT_MAX_BINDINGS] = {0};
  assert_accel_ok(kt_run(&e, 1, out));
  float *w = malloc(4ull * n * k);
  memcpy(w, out[2], 4ull * n * k);
  kt_free_outputs(&e, out);
  free(ids);
  return w;
}

// Checks y [m, n] against x W in float64: |y - x W| <= sum over groups of
// (amax / (2 levels)) sum |w| (1 + slack) (x rounded to a step of amax /
// levels) plus the f32 roundings (16 (k / 32 + 8) 2^-24 of sum |x w|, with
// the scales' products). Returns the sum of the errors.
static double check_float64_bound(const gproblem_t *p, const float *w,
                                  const float *y, double levels,
                                  double slack) {
  uint32_t m = p->c.m, n = p->c.n, k = p->c.k;
  double total = 0.0;
  for (uint32_t r = 0; r < m; ++r) {
    const float *xr = p->x + (uint64_t)r * k;
    for (uint32_t j = 0; j < n; ++j) {
      const float *wj = w + (uint64_t)j * k;
      double want = 0.0, bound = 0.0, mag = 0.0;
      for (uint32_t g = 0; g < k / 32; ++g) {
        double amax = 0.0, wsum = 0.0;
        for (uint32_t e = 32 * g; e < 32 * g + 32; ++e) {
          amax = fmax(amax, fabs(xr[e]));
          wsum += fabs(wj[e]);
          want += (double)xr[e] * wj[e];
          mag += fabs((double)xr[e] * wj[e]);
        }
        bound += amax / (2.0 * levels) * wsum * (1.0 + slack);
      }
      bound += 16.0 * (k / 32 + 8) * ldexp(mag, -24);
      double err = fabs((double)y[(uint64_t)r * n + j] - want);
      if (err > bound) {
        fail_msg("%s m %u k %u: y[%u, %u] = %.9g, float64 %.9g: error %.3g "
                 "above the bound %.3g", p->f->kernel, m, k, r, j,
                 y[(uint64_t)r * n + j], want, err, bound);
      }
      total += err;
    }
  }
  return total;
}

// Every type, GEMV and batches, k with whole and partial runs of eight
// groups: |y - x W| <= sum over groups of (amax / 254) sum |w| (x rounded to
// a step of amax / 127) plus the f32 roundings (16 (k / 32 + 8) 2^-24 of
// sum |x w|, with the scales' products), and the error is not zero
// everywhere (x really is quantized).
static void test_q8_activations_within_bound_of_float64(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (size_t i = 0; i < FORM_COUNT; ++i) {
    const gform_t *f = &k_forms[i];
    // m 1 and 3: blocks decoded in registers; 6: the unpacked rows (two
    // rows of x at a time with VNNI).
    for (int round = 0; round < 3; ++round) {
      uint32_t m = round == 0 ? 1 : round == 1 ? 3 : 6, n = 37;
      uint32_t k = f->block == 32 ? 32u * (round == 0 ? 11u : 24u)
                                  : 256u * (round == 0 ? 1u : 3u);
      gproblem_t p = make(&rng, f, m, n, k, ACCEL_KP_QFLAG_Q8_ACTIVATIONS);
      float *w = dequantized(&p);
      kt_case_t c = gcase(&p);
      void *out[KT_MAX_BINDINGS] = {0};
      assert_accel_ok(kt_run(&c, 2, out));
      assert_true(check_float64_bound(&p, w, out[2], 127.0, 1e-6) > 0.0);
      kt_free_outputs(&c, out);
      free(w);
      free_problem(&p);
    }
  }
}

// Extreme activations: a row of zeros gives exact zeros (and only the
// minimum terms vanish with it), a row of huge values stays finite, and
// Q8_0 weights of -128 (which ggml never writes but a file may hold) do
// not overflow the 16-bit pair sums: the result matches the portable one
// and the float64 bound. Zeros and huge values with 16-bit activations too.
static void test_q8_activations_extreme_values(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  // Every form with 8-bit activations, then q8_0 and q4_0 with 16-bit.
  for (size_t i = 0; i < FORM_COUNT + 2; ++i) {
    int i16 = i >= FORM_COUNT;
    gproblem_t p = make(&rng, &k_forms[i16 ? 6 + i % 2 : i], 2, 9, 512,
                        i16 ? ACCEL_KP_QFLAG_I16_ACTIVATIONS
                            : ACCEL_KP_QFLAG_Q8_ACTIVATIONS);
    memset(p.x, 0, 4ull * 512);
    for (uint32_t e = 0; e < 512; ++e) p.x[512 + e] = (e % 2 ? -3e30f : 3e30f);
    kt_case_t c = gcase(&p);
    void *out[KT_MAX_BINDINGS] = {0};
    assert_accel_ok(kt_run(&c, 2, out));
    const float *y = out[2];
    for (uint32_t j = 0; j < 9; ++j) {
      assert_true(y[j] == 0.0f);
      assert_true(isfinite(y[9 + j]));
    }
    kt_free_outputs(&c, out);
    free_problem(&p);
  }
  gproblem_t p = make(&rng, &k_forms[6], 1, 8, 256,
                      ACCEL_KP_QFLAG_Q8_ACTIVATIONS);
  for (uint64_t b = 0; b < p.w_bytes / 34; ++b) {
    memset(p.w + b * 34 + 2, 0x80, 32);  // every weight -128
  }
  for (uint32_t e = 0; e < 256; ++e) p.x[e] = e % 3 ? -1.0f : 1.0f;
  kt_case_t c = gcase(&p);
  void *best[KT_MAX_BINDINGS] = {0}, *portable[KT_MAX_BINDINGS] = {0};
  assert_accel_ok(kt_run(&c, 1, best));
  setenv("ACCEL_KP_VECTOR", "0", 1);
  assert_accel_ok(kt_run(&c, 1, portable));
  unsetenv("ACCEL_KP_VECTOR");
  assert_memory_equal(best[2], portable[2], 4ull * 8);
  float *w = dequantized(&p);
  for (uint32_t j = 0; j < 8; ++j) {
    double want = 0.0;
    for (uint32_t e = 0; e < 256; ++e) want += (double)p.x[e] * w[j * 256 + e];
    assert_true(fabs(((float *)best[2])[j] - want) <= 1e-4 * fabs(want));
  }
  free(w);
  kt_free_outputs(&c, best);
  kt_free_outputs(&c, portable);
  free_problem(&p);
}

// qmatmul_int8 (no block type) refuses |flags| with |message|.
static void expect_int8_refuses(uint32_t flags, const char *message) {
  float x[64] = {0}, scale[2] = {1, 1}, y[4];
  int8_t w8[128] = {0};
  accel_kp_qmatmul_constants_t q = {.m = 1, .n = 2, .k = 64, .flags = flags};
  kt_case_t c = {.kernel = "qmatmul_int8", .access = "rrrw",
                 .binding_count = 4, .constants = &q,
                 .constants_size = sizeof(q)};
  c.data[0] = x;
  c.data[1] = w8;
  c.data[2] = scale;
  c.bytes[0] = sizeof(x);
  c.bytes[1] = sizeof(w8);
  c.bytes[2] = sizeof(scale);
  c.bytes[3] = sizeof(y);
  char want[128];
  snprintf(want, sizeof(want), "qmatmul_int8: k 64 must be a multiple of 1; %s",
           message);
  kt_expect_failure(&c, want);
}

// The flag on qmatmul_int8, and unknown bits beside it on qmatmul_q8_0,
// fail with a message.
static void test_q8_activations_flag_refused_elsewhere(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  gproblem_t p = make(&rng, &k_forms[6], 1, 4, 64,
                      ACCEL_KP_QFLAG_Q8_ACTIVATIONS | 8u);
  kt_case_t qc = gcase(&p);
  kt_expect_failure(&qc, "qmatmul_q8_0: k 64 must be a multiple of 32; "
                         "flags 0xa");
  free_problem(&p);
  expect_int8_refuses(ACCEL_KP_QFLAG_Q8_ACTIVATIONS, "flags 0x2");
}

// |y - x W| <= sum over groups of (amax / 65534) sum |w| (x rounded to a
// step of amax / 32767) plus the f32 roundings (as for 8-bit activations),
// and on the same problems the mean error is under 1/50 of 8-bit
// activations' (the rounding is 258 times finer).
static void test_i16_activations_within_bound_of_float64(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (size_t i = 0; i < 6; ++i) {
    const gform_t *f = &k_forms[6 + i % 2];
    uint32_t m = i < 2 ? 1 : i < 4 ? 3 : 6, n = 37, k = 32u * 24u;
    gproblem_t p = make(&rng, f, m, n, k, ACCEL_KP_QFLAG_I16_ACTIVATIONS);
    float *w = dequantized(&p);
    kt_case_t c = gcase(&p);
    void *out[KT_MAX_BINDINGS] = {0}, *q8[KT_MAX_BINDINGS] = {0};
    assert_accel_ok(kt_run(&c, 2, out));
    p.c.flags = ACCEL_KP_QFLAG_Q8_ACTIVATIONS;
    assert_accel_ok(kt_run(&c, 2, q8));
    double sum16 = check_float64_bound(&p, w, out[2], 32767.0, 1e-3);
    double sum8 = check_float64_bound(&p, w, q8[2], 127.0, 1e-6);
    if (!(sum16 * 50.0 < sum8)) {
      fail_msg("%s m %u: mean error %.3g with 16-bit activations, %.3g with "
               "8-bit", f->kernel, m, sum16 / (m * n), sum8 / (m * n));
    }
    kt_free_outputs(&c, out);
    kt_free_outputs(&c, q8);
    free(w);
    free_problem(&p);
  }
}

// The 16-bit flag with the 8-bit one, on another block type and on
// qmatmul_int8 fails with a message (its extremes:
// test_q8_activations_extreme_values).
static void test_i16_activations_misuse(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (size_t i = 0; i < 2; ++i) {
    gproblem_t p = make(&rng, &k_forms[6 + i], 2, 9, 512,
                        ACCEL_KP_QFLAG_I16_ACTIVATIONS |
                            ACCEL_KP_QFLAG_Q8_ACTIVATIONS);
    kt_case_t c = gcase(&p);
    kt_expect_failure(&c, "flags 0x6 ask for 8-bit and 16-bit activations "
                          "at once");
    free_problem(&p);
  }
  gproblem_t p = make(&rng, &k_forms[3], 1, 4, 256,
                      ACCEL_KP_QFLAG_I16_ACTIVATIONS);
  kt_case_t c = gcase(&p);
  kt_expect_failure(&c, "qmatmul_q4_k: k 256 must be a multiple of 256; "
                        "flags 0x4");
  free_problem(&p);
  expect_int8_refuses(ACCEL_KP_QFLAG_I16_ACTIVATIONS, "flags 0x4");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gguf_qmatmul_reproducible_across_grids),
      cmocka_unit_test(test_gguf_qmatmul_row_independent_of_m),
      cmocka_unit_test(test_gguf_qmatmul_vector_paths_agree),
      cmocka_unit_test(test_embedding_gguf_rows_are_the_matmul_weights),
      cmocka_unit_test(test_gguf_kernels_reject_bad_launches),
      cmocka_unit_test(test_q8_activations_within_bound_of_float64),
      cmocka_unit_test(test_q8_activations_extreme_values),
      cmocka_unit_test(test_q8_activations_flag_refused_elsewhere),
      cmocka_unit_test(test_i16_activations_within_bound_of_float64),
      cmocka_unit_test(test_i16_activations_misuse),
  };
  return cmocka_run_group_tests(tests, NULL, kt_teardown);
}
