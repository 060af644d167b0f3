// GGUF block-quantized matmul / GEMV for the block types beyond Q8_0 and
// Q4_0 (kernel_params.h, "qmatmul_q4_1" ...): y = x W^T with W stored in
// ggml's block layout, byte for byte as in a GGUF file. Each block of a
// weight row is dequantized once into registers-sized scratch (32 or 256
// floats, the formulas of ggml's dequantize_row_*) and multiplied against
// every row of x while it is in L1, so that prefill does not dequantize a
// weight once per token and decode reads each weight byte once.
//
// Reduction order (kernels/README.md): 16 lanes over the row, element i of
// the row into lane i % 16 in increasing i, acc += x[i] * w[i] with w[i]
// the dequantized f32 value, then y = fold(acc). The AVX2 path performs the
// same multiplies and adds in the same order (no FMA: -ffp-contract=off),
// so both give the same bits; ACCEL_KP_VECTOR=0 caps it to the portable
// loop.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_list.h"
#include "kernel_util.h"
#include "q8_activations.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define QK_K 256

enum gformat { G_Q4_1, G_Q5_0, G_Q5_1, G_Q4_K, G_Q5_K, G_Q6_K, G_Q8_0,
               G_Q4_0, G_COUNT };

typedef struct gtype {
  const char *name;
  uint32_t block;  // elements per block
  uint32_t bytes;  // bytes per block
  void (*dequantize)(const uint8_t *b, float *out);
  // The same values from AVX2 (the same roundings: bit-identical); NULL:
  // the portable one serves.
  void (*dequantize_avx2)(const uint8_t *b, float *out);
} gtype_t;

static float f16_at(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, sizeof(h));
  return accel_kp_f16_to_f32(h);
}

// block_q8_0: f16 d, 32 int8; value q d.
static void dq_q8_0(const uint8_t *b, float *y) {
  float d = f16_at(b);
  for (int j = 0; j < 32; ++j) y[j] = (float)(int8_t)b[2 + j] * d;
}

// block_q4_0: f16 d, 16 bytes of nibbles; value (q - 8) d.
static void dq_q4_0(const uint8_t *b, float *y) {
  float d = f16_at(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = (float)((int32_t)(b[2 + j] & 15) - 8) * d;
    y[j + 16] = (float)((int32_t)(b[2 + j] >> 4) - 8) * d;
  }
}

// block_q4_1: f16 d, f16 m, 16 bytes of nibbles (low: elements 0-15).
static void dq_q4_1(const uint8_t *b, float *y) {
  float d = f16_at(b), m = f16_at(b + 2);
  const uint8_t *qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = (float)(qs[j] & 15) * d + m;
    y[j + 16] = (float)(qs[j] >> 4) * d + m;
  }
}

// block_q5_0: f16 d, u32 qh (bit j: the fifth bit of element j), 16 bytes
// of nibbles; value (q - 16) d.
static void dq_q5_0(const uint8_t *b, float *y) {
  float d = f16_at(b);
  uint32_t qh;
  memcpy(&qh, b + 2, 4);
  const uint8_t *qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    uint32_t h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
    y[j] = (float)((int32_t)((qs[j] & 15) | h0) - 16) * d;
    y[j + 16] = (float)((int32_t)((qs[j] >> 4) | h1) - 16) * d;
  }
}

// block_q5_1: f16 d, f16 m, u32 qh, 16 bytes of nibbles; value q d + m.
static void dq_q5_1(const uint8_t *b, float *y) {
  float d = f16_at(b), m = f16_at(b + 2);
  uint32_t qh;
  memcpy(&qh, b + 4, 4);
  const uint8_t *qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    uint32_t h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
    y[j] = (float)((qs[j] & 15) | h0) * d + m;
    y[j + 16] = (float)((qs[j] >> 4) | h1) * d + m;
  }
}

// The 6-bit scale and minimum of sub-block |j| (0..7) of a Q4_K / Q5_K
// block's 12 scale bytes (ggml's get_scale_min_k4).
static void scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *mn = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// The scales and minimums of sub-blocks |is| and |is| + 1, times d and dmin.
static void pair_scales(int is, const uint8_t *scales, float d, float dmin,
                        float *d1, float *m1, float *d2, float *m2) {
  uint8_t sc, m;
  scale_min_k4(is, scales, &sc, &m);
  *d1 = d * (float)sc;
  *m1 = dmin * (float)m;
  scale_min_k4(is + 1, scales, &sc, &m);
  *d2 = d * (float)sc;
  *m2 = dmin * (float)m;
}

// block_q4_K (144 bytes): f16 d, f16 dmin, 12 scale bytes, 128 bytes of
// nibbles; eight sub-blocks of 32, value d sc q - dmin m.
static void dq_q4_k(const uint8_t *b, float *y) {
  float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t *scales = b + 4, *q = b + 16;
  for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, q += 32) {
    float d1, m1, d2, m2;
    pair_scales(is, scales, d, dmin, &d1, &m1, &d2, &m2);
    for (int l = 0; l < 32; ++l) y[j + l] = d1 * (float)(q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) y[j + 32 + l] = d2 * (float)(q[l] >> 4) - m2;
  }
}

// block_q5_K (176 bytes): f16 d, f16 dmin, 12 scale bytes, 32 bytes qh (the
// fifth bits), 128 bytes of nibbles.
static void dq_q5_k(const uint8_t *b, float *y) {
  float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, ql += 32) {
    float d1, m1, d2, m2;
    pair_scales(is, scales, d, dmin, &d1, &m1, &d2, &m2);
    for (int l = 0; l < 32; ++l) {
      y[j + l] = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      y[j + 32 + l] = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
    u1 = (uint8_t)(u1 << 2);
    u2 = (uint8_t)(u2 << 2);
  }
}

// block_q6_K (210 bytes): 128 bytes ql (low nibbles), 64 bytes qh (high
// two bits), 16 int8 scales, f16 d; value d scale (q - 32).
static void dq_q6_k(const uint8_t *b, float *y) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *sc = (const int8_t *)(b + 192);
  float d = f16_at(b + 208);
  for (int n = 0; n < QK_K; n += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      int is = l / 16;
      int32_t q1 = (int32_t)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      int32_t q2 = (int32_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      int32_t q3 = (int32_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      int32_t q4 = (int32_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[n + l] = d * (float)sc[is] * (float)q1;
      y[n + l + 32] = d * (float)sc[is + 2] * (float)q2;
      y[n + l + 64] = d * (float)sc[is + 4] * (float)q3;
      y[n + l + 96] = d * (float)sc[is + 6] * (float)q4;
    }
  }
}

#if defined(__x86_64__)
#define KP_AVX2 __attribute__((target("avx2")))

// Eight unsigned bytes at |p| as eight int32.
KP_AVX2 static inline __m256i bytes8(const uint8_t *p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

// y = d * (float)q - m, as the portable loops round it (no FMA).
KP_AVX2 static inline void store_dq(float *y, __m256 d, __m256i q, __m256 m) {
  _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(q)),
                                    m));
}

KP_AVX2 static void dq_q4_k_avx2(const uint8_t *b, float *y) {
  float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t *scales = b + 4, *q = b + 16;
  const __m256i low4 = _mm256_set1_epi32(0xF);
  for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, q += 32) {
    float d1, m1, d2, m2;
    pair_scales(is, scales, d, dmin, &d1, &m1, &d2, &m2);
    __m256 vd1 = _mm256_set1_ps(d1), vm1 = _mm256_set1_ps(m1);
    __m256 vd2 = _mm256_set1_ps(d2), vm2 = _mm256_set1_ps(m2);
    for (int l = 0; l < 32; l += 8) {
      __m256i v = bytes8(q + l);
      store_dq(y + j + l, vd1, _mm256_and_si256(v, low4), vm1);
      store_dq(y + j + 32 + l, vd2, _mm256_srli_epi32(v, 4), vm2);
    }
  }
}

KP_AVX2 static void dq_q5_k_avx2(const uint8_t *b, float *y) {
  float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + 48;
  const __m256i low4 = _mm256_set1_epi32(0xF), one = _mm256_set1_epi32(1);
  for (int j = 0, is = 0, shift = 0; j < QK_K;
       j += 64, is += 2, ql += 32, shift += 2) {
    float d1, m1, d2, m2;
    pair_scales(is, scales, d, dmin, &d1, &m1, &d2, &m2);
    __m256 vd1 = _mm256_set1_ps(d1), vm1 = _mm256_set1_ps(m1);
    __m256 vd2 = _mm256_set1_ps(d2), vm2 = _mm256_set1_ps(m2);
    __m128i s1 = _mm_cvtsi32_si128(shift), s2 = _mm_cvtsi32_si128(shift + 1);
    for (int l = 0; l < 32; l += 8) {
      __m256i v = bytes8(ql + l), h = bytes8(qh + l);
      __m256i h1 = _mm256_slli_epi32(
          _mm256_and_si256(_mm256_srl_epi32(h, s1), one), 4);
      __m256i h2 = _mm256_slli_epi32(
          _mm256_and_si256(_mm256_srl_epi32(h, s2), one), 4);
      store_dq(y + j + l, vd1, _mm256_add_epi32(_mm256_and_si256(v, low4), h1),
               vm1);
      store_dq(y + j + 32 + l, vd2,
               _mm256_add_epi32(_mm256_srli_epi32(v, 4), h2), vm2);
    }
  }
}

KP_AVX2 static void dq_q6_k_avx2(const uint8_t *b, float *y) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *sc = (const int8_t *)(b + 192);
  float d = f16_at(b + 208);
  const __m256i low4 = _mm256_set1_epi32(0xF), three = _mm256_set1_epi32(3),
                k32 = _mm256_set1_epi32(32);
  const __m256 zero = _mm256_setzero_ps();
  for (int n = 0; n < QK_K; n += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; l += 8) {
      int is = l / 16;
      __m256i a = bytes8(ql + l), c = bytes8(ql + l + 32), h = bytes8(qh + l);
      __m256i q1 = _mm256_or_si256(
          _mm256_and_si256(a, low4),
          _mm256_slli_epi32(_mm256_and_si256(h, three), 4));
      __m256i q2 = _mm256_or_si256(
          _mm256_and_si256(c, low4),
          _mm256_slli_epi32(
              _mm256_and_si256(_mm256_srli_epi32(h, 2), three), 4));
      __m256i q3 = _mm256_or_si256(
          _mm256_srli_epi32(a, 4),
          _mm256_slli_epi32(
              _mm256_and_si256(_mm256_srli_epi32(h, 4), three), 4));
      __m256i q4 = _mm256_or_si256(
          _mm256_srli_epi32(c, 4),
          _mm256_slli_epi32(
              _mm256_and_si256(_mm256_srli_epi32(h, 6), three), 4));
      // (d * sc) * (q - 32): the portable order; x - 0 leaves x as is.
      store_dq(y + n + l, _mm256_set1_ps(d * (float)sc[is]),
               _mm256_sub_epi32(q1, k32), zero);
      store_dq(y + n + l + 32, _mm256_set1_ps(d * (float)sc[is + 2]),
               _mm256_sub_epi32(q2, k32), zero);
      store_dq(y + n + l + 64, _mm256_set1_ps(d * (float)sc[is + 4]),
               _mm256_sub_epi32(q3, k32), zero);
      store_dq(y + n + l + 96, _mm256_set1_ps(d * (float)sc[is + 6]),
               _mm256_sub_epi32(q4, k32), zero);
    }
  }
}
#define DQ_AVX2(fn) fn
#else
#define DQ_AVX2(fn) NULL
#endif

static const gtype_t k_types[G_COUNT] = {
    [G_Q4_1] = {"qmatmul_q4_1", 32, 20, dq_q4_1},
    [G_Q5_0] = {"qmatmul_q5_0", 32, 22, dq_q5_0},
    [G_Q5_1] = {"qmatmul_q5_1", 32, 24, dq_q5_1},
    [G_Q4_K] = {"qmatmul_q4_k", QK_K, 144, dq_q4_k, DQ_AVX2(dq_q4_k_avx2)},
    [G_Q5_K] = {"qmatmul_q5_k", QK_K, 176, dq_q5_k, DQ_AVX2(dq_q5_k_avx2)},
    [G_Q6_K] = {"qmatmul_q6_k", QK_K, 210, dq_q6_k, DQ_AVX2(dq_q6_k_avx2)},
    // Dequantized by embedding_gguf only (quant_kernels.c multiplies them).
    [G_Q8_0] = {"q8_0", 32, 34, dq_q8_0},
    [G_Q4_0] = {"q4_0", 32, 18, dq_q4_0},
};

// ggml's type number -> format; -1: not a block type here.
static int format_of_ggml(uint32_t type) {
  switch (type) {
    case ACCEL_KP_GGML_Q4_0: return G_Q4_0;
    case ACCEL_KP_GGML_Q4_1: return G_Q4_1;
    case ACCEL_KP_GGML_Q5_0: return G_Q5_0;
    case ACCEL_KP_GGML_Q5_1: return G_Q5_1;
    case ACCEL_KP_GGML_Q8_0: return G_Q8_0;
    case ACCEL_KP_GGML_Q4_K: return G_Q4_K;
    case ACCEL_KP_GGML_Q5_K: return G_Q5_K;
    case ACCEL_KP_GGML_Q6_K: return G_Q6_K;
    default: return -1;
  }
}

// acc[l] += x[i] * w[i] for i in [0, count), lane l = i % 16 (count a
// multiple of 16).
static void block_dot_portable(float *acc, const float *x, const float *w,
                               uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    acc[i % KP_LANES] = acc[i % KP_LANES] + x[i] * w[i];
  }
}

#if defined(__x86_64__)
KP_AVX2 static void block_dot_avx2(
    float *acc, const float *x, const float *w, uint32_t count) {
  __m256 a0 = _mm256_loadu_ps(acc), a1 = _mm256_loadu_ps(acc + 8);
  for (uint32_t i = 0; i < count; i += 16) {
    a0 = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_loadu_ps(x + i),
                                         _mm256_loadu_ps(w + i)));
    a1 = _mm256_add_ps(a1, _mm256_mul_ps(_mm256_loadu_ps(x + i + 8),
                                         _mm256_loadu_ps(w + i + 8)));
  }
  _mm256_storeu_ps(acc, a0);
  _mm256_storeu_ps(acc + 8, a1);
}

static int use_avx2(void) {
  const char *cap = getenv("ACCEL_KP_VECTOR");
  return __builtin_cpu_supports("avx2") && !(cap != NULL && cap[0] == '0');
}
#else
static int use_avx2(void) {
  return 0;
}
#endif

static int32_t gmatmul(const accel_kernel_dispatch_t *d,
                       const accel_kernel_workgroup_t *wg, enum gformat f,
                       enum qa_type qa) {
  const gtype_t *t = &k_types[f];
  accel_kp_qmatmul_constants_t c;
  if (!kp_signature(d, wg, 3, &c, sizeof(c))) {
    return 1;
  }
  // tile_n is a tunable of the int8/int4/Q8_0/Q4_0 kernels only.
  if (c.k % t->block != 0 || (c.flags & ~ACCEL_KP_QFLAG_Q8_ACTIVATIONS) ||
      c.tile_n != 0 || c.reserved[0] != 0 || c.reserved[1] != 0) {
    kp_fail(d, wg, "%s: k %u must be a multiple of %u; flags 0x%x must be "
            "0 or Q8_ACTIVATIONS, tile_n and reserved fields zero", t->name,
            c.k, t->block, c.flags);
    return 1;
  }
  typedef unsigned __int128 u128;
  uint64_t row_bytes = (uint64_t)c.k / t->block * t->bytes;
  if (!kp_binding_holds(d, wg, 0, "x", (u128)c.m * c.k * 4u) ||
      !kp_binding_holds(d, wg, 1, "w", (u128)c.n * row_bytes) ||
      !kp_binding_holds(d, wg, 2, "y", (u128)c.m * c.n * 4u)) {
    return 1;
  }
  if (c.flags & ACCEL_KP_QFLAG_Q8_ACTIVATIONS) {
    return qa_matmul(d, wg, &c, qa, ACCEL_KP_QMM_TILE_N);
  }
  const float *x = d->bindings[0].data;
  const uint8_t *w = d->bindings[1].data;
  float *y = d->bindings[2].data;
  kp_range_t units = kp_units(d, wg, accel_kp_qmatmul_units(&c));
  uint64_t j0 = units.begin * ACCEL_KP_QMM_TILE_N;
  uint64_t j1 = units.end * ACCEL_KP_QMM_TILE_N;
  if (j1 > c.n) j1 = c.n;
  if (j0 >= j1 || c.m == 0 || c.k == 0) {
    return 0;
  }
  float *acc = malloc((uint64_t)c.m * KP_LANES * sizeof(float));
  if (acc == NULL) {
    kp_fail(d, wg, "%s: cannot allocate %u rows of accumulators", t->name,
            c.m);
    return 1;
  }
  int avx2 = use_avx2();
  void (*dequantize)(const uint8_t *, float *) =
      avx2 && t->dequantize_avx2 != NULL ? t->dequantize_avx2 : t->dequantize;
  float block[QK_K];
  for (uint64_t j = j0; j < j1; ++j) {
    memset(acc, 0, (uint64_t)c.m * KP_LANES * sizeof(float));
    const uint8_t *row = w + j * row_bytes;
    for (uint64_t b = 0; b < c.k / t->block; ++b) {
      dequantize(row + b * t->bytes, block);
      for (uint64_t r = 0; r < c.m; ++r) {
        const float *xb = x + r * c.k + b * t->block;
#if defined(__x86_64__)
        if (avx2) {
          block_dot_avx2(acc + r * KP_LANES, xb, block, t->block);
          continue;
        }
#endif
        block_dot_portable(acc + r * KP_LANES, xb, block, t->block);
      }
    }
    for (uint64_t r = 0; r < c.m; ++r) {
      y[r * c.n + j] = kp_fold(acc + r * KP_LANES);
    }
  }
  (void)avx2;
  free(acc);
  return 0;
}

int32_t qmatmul_q4_1(const accel_kernel_dispatch_t *d,
                     const accel_kernel_workgroup_t *wg) {
  return gmatmul(d, wg, G_Q4_1, QA_Q4_1);
}
int32_t qmatmul_q5_0(const accel_kernel_dispatch_t *d,
                     const accel_kernel_workgroup_t *wg) {
  return gmatmul(d, wg, G_Q5_0, QA_Q5_0);
}
int32_t qmatmul_q5_1(const accel_kernel_dispatch_t *d,
                     const accel_kernel_workgroup_t *wg) {
  return gmatmul(d, wg, G_Q5_1, QA_Q5_1);
}
int32_t qmatmul_q4_k(const accel_kernel_dispatch_t *d,
                     const accel_kernel_workgroup_t *wg) {
  return gmatmul(d, wg, G_Q4_K, QA_Q4_K);
}
int32_t qmatmul_q5_k(const accel_kernel_dispatch_t *d,
                     const accel_kernel_workgroup_t *wg) {
  return gmatmul(d, wg, G_Q5_K, QA_Q5_K);
}
int32_t qmatmul_q6_k(const accel_kernel_dispatch_t *d,
                     const accel_kernel_workgroup_t *wg) {
  return gmatmul(d, wg, G_Q6_K, QA_Q6_K);
}

// Rows of a block-quantized table, dequantized (kernel_params.h,
// "embedding_gguf"). Unit: one token.
int32_t embedding_gguf(const accel_kernel_dispatch_t *d,
                       const accel_kernel_workgroup_t *wg) {
  accel_kp_embedding_gguf_constants_t c;
  if (!kp_signature(d, wg, 3, &c, sizeof(c))) {
    return 1;
  }
  int f = format_of_ggml(c.type);
  if (f < 0 || c.dim % k_types[f].block != 0 || c.reserved != 0) {
    kp_fail(d, wg, "embedding_gguf: type %u must be a ggml block type "
            "(Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K) whose block "
            "divides dim %u; reserved must be zero", c.type, c.dim);
    return 1;
  }
  const gtype_t *t = &k_types[f];
  typedef unsigned __int128 u128;
  uint64_t row_bytes = (uint64_t)c.dim / t->block * t->bytes;
  if (!kp_binding_holds(d, wg, 0, "table", (u128)c.vocab * row_bytes) ||
      !kp_binding_holds(d, wg, 1, "ids", (u128)c.tokens * 4u) ||
      !kp_binding_holds(d, wg, 2, "out", (u128)c.tokens * c.dim * 4u)) {
    return 1;
  }
  const uint8_t *table = d->bindings[0].data;
  const int32_t *ids = d->bindings[1].data;
  float *out = d->bindings[2].data;
  kp_range_t units = kp_units(d, wg, c.tokens);
  for (uint64_t i = units.begin; i < units.end; ++i) {
    if (ids[i] < 0 || (uint32_t)ids[i] >= c.vocab) {
      kp_fail(d, wg, "embedding_gguf: token %llu has id %d, outside 0..%u",
              (unsigned long long)i, ids[i], c.vocab - 1);
      return 1;
    }
  }
  for (uint64_t i = units.begin; i < units.end; ++i) {
    const uint8_t *row = table + (uint64_t)ids[i] * row_bytes;
    for (uint64_t b = 0; b < c.dim / t->block; ++b) {
      t->dequantize(row + b * t->bytes, out + i * c.dim + b * t->block);
    }
  }
  return 0;
}

#ifndef ACCEL_KP_COMBINED
ACCEL_KP_FAMILY_LIBRARY("accel GGUF block matmul kernels",
                        ACCEL_KP_GGUF_KERNELS, NULL, ACCEL_KP_META_GGUF)
#endif
