// Block-quantized matmul / GEMV with 8-bit activations
// (ACCEL_KP_QFLAG_Q8_ACTIVATIONS on qmatmul_q8_0, _q4_0, _q4_1, _q5_0,
// _q5_1, _q4_k, _q5_k and _q6_k): each row of x is quantized once per
// launch and thread to groups of 32 int8 with an f32 scale, and every
// 32-element group of a weight row meets it in an exact integer dot
// product, the way llama.cpp's vec_dot kernels do (it quantizes to Q8_0 /
// Q8_K blocks).
// Integer sums are exact, so the AVX2 path (_mm256_maddubs_epi16 /
// _mm256_madd_epi16) and the portable loops agree by construction; the few
// float operations per group run in one fixed order in both.
//
// The order (kernels/README.md, "8-bit activations"), per row r of x:
// - group g (elements 32g .. 32g + 31): amax = max |x| (a NaN never wins),
//   d = amax / 127, id = amax > 0 ? 127 / amax : 0, q = nearbyint(clamp(x
//   id, -127, 127)) (clamp: v > -127 ? v : -127, then v < 127 ? v : 127;
//   nearest-even), S = sum q;
// - weight row j, group g: integers w (the block's quantized values as
//   listed in qa_unpack_*), float A (the group's scale), B (its offset, for
//   the types with a minimum) and a per-16-element integer multiplier M (the
//   Q6_K sub-block scale, else 1); I = sum over the two halves h of
//   M_h sum w q (exact);
// - c = (d A) (float)I, plus (d B) (float)S for Q4_1, Q5_1, Q4_K, Q5_K
//   (c = t + u); acc[g % 8] = acc[g % 8] + c in increasing g;
// - y = ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7)).
// For up to QA_DIRECT_MAX_M rows of x (decode steps) the blocks of every
// type are decoded in registers and meet x there, with the
// weight bytes prefetched ahead; otherwise each weight row is unpacked once
// per launch and meets every row of x while it is in L1, four weight rows
// at a time. Both give the bits of the order above.
#ifndef ACCEL_KERNELS_HOST_Q8_ACTIVATIONS_H_
#define ACCEL_KERNELS_HOST_Q8_ACTIVATIONS_H_

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_util.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define QA_GROUP 32u
// Weight rows unpacked and multiplied together (each x group is loaded once
// for all of them).
#define QA_ROWS 4u

enum qa_type { QA_Q8_0, QA_Q4_0, QA_Q4_1, QA_Q5_0, QA_Q5_1, QA_Q4_K,
               QA_Q5_K, QA_Q6_K, QA_COUNT };

// One block type: its block and the unpacking of a block to integers and
// per-group floats (|a|, |b| per 32 elements, |mult| per 16).
typedef struct qa_format {
  const char *name;
  uint32_t block;  // elements per block
  uint32_t bytes;  // bytes per block
  int has_min;     // B and S take part
  int has_mult;    // M is not all ones
  // qa_unpack_* stores w + offset (0 .. 31) for the types whose values are
  // an unsigned field minus an offset (Q4_0: 8, Q5_0: 16): the vector
  // paths multiply the unsigned bytes and take offset S off the sum.
  int32_t offset;
  void (*unpack)(const uint8_t *blk, int8_t *q, float *a, float *b,
                 int16_t *mult);
} qa_format_t;

// One unpacked weight row.
typedef struct qa_wrow {
  int8_t *q;
  float *a, *b;
  int16_t *mult;
  // Vector paths, types with M: two madd operands per run of eight groups
  // (qa_run_lanes), 4 int16 per group.
  int16_t *multv;
} qa_wrow_t;

static inline float qa_f16(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, sizeof(h));
  return accel_kp_f16_to_f32(h);
}

static inline void qa_ones(int16_t *mult, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) mult[i] = 1;
}

// block_q8_0: w = qs, A = d.
static void qa_unpack_q8_0(const uint8_t *blk, int8_t *q, float *a, float *b,
                           int16_t *mult) {
  a[0] = qa_f16(blk);
  b[0] = 0.0f;
  memcpy(q, blk + 2, 32);
  qa_ones(mult, 2);
}

// block_q4_0: w = nibble - 8 (stored: the nibble), A = d.
static void qa_unpack_q4_0(const uint8_t *blk, int8_t *q, float *a, float *b,
                           int16_t *mult) {
  a[0] = qa_f16(blk);
  b[0] = 0.0f;
  for (int j = 0; j < 16; ++j) {
    q[j] = (int8_t)(blk[2 + j] & 15);
    q[j + 16] = (int8_t)(blk[2 + j] >> 4);
  }
  qa_ones(mult, 2);
}

// block_q4_1: w = nibble, A = d, B = m.
static void qa_unpack_q4_1(const uint8_t *blk, int8_t *q, float *a, float *b,
                           int16_t *mult) {
  a[0] = qa_f16(blk);
  b[0] = qa_f16(blk + 2);
  for (int j = 0; j < 16; ++j) {
    q[j] = (int8_t)(blk[4 + j] & 15);
    q[j + 16] = (int8_t)(blk[4 + j] >> 4);
  }
  qa_ones(mult, 2);
}

// The five-bit values of a Q5_0 / Q5_1 block: nibbles |qs|, fifth bits |qh|.
static void qa_five_bits(const uint8_t *qs, uint32_t qh, int8_t *q) {
  for (int j = 0; j < 16; ++j) {
    uint32_t h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
    q[j] = (int8_t)((qs[j] & 15) | h0);
    q[j + 16] = (int8_t)((qs[j] >> 4) | h1);
  }
}

// block_q5_0: w = five-bit value - 16 (stored: the five-bit value), A = d.
static void qa_unpack_q5_0(const uint8_t *blk, int8_t *q, float *a, float *b,
                           int16_t *mult) {
  uint32_t qh;
  memcpy(&qh, blk + 2, 4);
  a[0] = qa_f16(blk);
  b[0] = 0.0f;
  qa_five_bits(blk + 6, qh, q);
  qa_ones(mult, 2);
}

// block_q5_1: w = five-bit value, A = d, B = m.
static void qa_unpack_q5_1(const uint8_t *blk, int8_t *q, float *a, float *b,
                           int16_t *mult) {
  uint32_t qh;
  memcpy(&qh, blk + 4, 4);
  a[0] = qa_f16(blk);
  b[0] = qa_f16(blk + 2);
  qa_five_bits(blk + 8, qh, q);
  qa_ones(mult, 2);
}

// The 6-bit scale and minimum of sub-block |j| of a Q4_K / Q5_K block's 12
// scale bytes (ggml's get_scale_min_k4).
static inline void qa_scale_min_k4(int j, const uint8_t *s, uint8_t *sc,
                                   uint8_t *mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    *mn = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// A = d sc and B = -(dmin m) of the eight sub-blocks of a Q4_K / Q5_K block
// (the roundings of ggml's dequantize_row_q4_K).
static inline void qa_k4_scales(const uint8_t *blk, float *a, float *b) {
  float d = qa_f16(blk), dmin = qa_f16(blk + 2);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    qa_scale_min_k4(j, blk + 4, &sc, &mn);
    a[j] = d * (float)sc;
    b[j] = -(dmin * (float)mn);
  }
}

// block_q4_K: sub-block 2i + h holds the low (h 0) or high (h 1) nibbles of
// bytes 32i .. 32i + 31.
static void qa_unpack_q4_k(const uint8_t *blk, int8_t *q, float *a, float *b,
                           int16_t *mult) {
  qa_k4_scales(blk, a, b);
  const uint8_t *qs = blk + 16;
  for (int i = 0; i < 4; ++i) {
    for (int l = 0; l < 32; ++l) {
      q[64 * i + l] = (int8_t)(qs[32 * i + l] & 15);
      q[64 * i + 32 + l] = (int8_t)(qs[32 * i + l] >> 4);
    }
  }
  qa_ones(mult, 16);
}

// block_q5_K: as Q4_K plus the fifth bit of sub-block s, element l in bit s
// of qh[l].
static void qa_unpack_q5_k(const uint8_t *blk, int8_t *q, float *a, float *b,
                           int16_t *mult) {
  qa_k4_scales(blk, a, b);
  const uint8_t *qh = blk + 16, *qs = blk + 48;
  for (int i = 0; i < 4; ++i) {
    for (int l = 0; l < 32; ++l) {
      q[64 * i + l] = (int8_t)((qs[32 * i + l] & 15) |
                               (((qh[l] >> (2 * i)) & 1) << 4));
      q[64 * i + 32 + l] = (int8_t)((qs[32 * i + l] >> 4) |
                                    (((qh[l] >> (2 * i + 1)) & 1) << 4));
    }
  }
  qa_ones(mult, 16);
}

// block_q6_K: w = six-bit value - 32, A = d, M = the int8 scale of each
// 16 elements (in element order).
static void qa_unpack_q6_k(const uint8_t *blk, int8_t *q, float *a, float *b,
                           int16_t *mult) {
  const uint8_t *ql = blk, *qh = blk + 128;
  const int8_t *sc = (const int8_t *)(blk + 192);
  float d = qa_f16(blk + 208);
  for (int n = 0; n < 256; n += 128, ql += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      q[n + l] = (int8_t)(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
      q[n + l + 32] =
          (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      q[n + l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      q[n + l + 96] =
          (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
  for (int j = 0; j < 8; ++j) {
    a[j] = d;
    b[j] = 0.0f;
  }
  for (int j = 0; j < 16; ++j) mult[j] = sc[j];
}

static const qa_format_t k_qa_formats[QA_COUNT] = {
    [QA_Q8_0] = {"qmatmul_q8_0", 32, 34, 0, 0, 0, qa_unpack_q8_0},
    [QA_Q4_0] = {"qmatmul_q4_0", 32, 18, 0, 0, 8, qa_unpack_q4_0},
    [QA_Q4_1] = {"qmatmul_q4_1", 32, 20, 1, 0, 0, qa_unpack_q4_1},
    [QA_Q5_0] = {"qmatmul_q5_0", 32, 22, 0, 0, 16, qa_unpack_q5_0},
    [QA_Q5_1] = {"qmatmul_q5_1", 32, 24, 1, 0, 0, qa_unpack_q5_1},
    [QA_Q4_K] = {"qmatmul_q4_k", 256, 144, 1, 0, 0, qa_unpack_q4_k},
    [QA_Q5_K] = {"qmatmul_q5_k", 256, 176, 1, 0, 0, qa_unpack_q5_k},
    [QA_Q6_K] = {"qmatmul_q6_k", 256, 210, 0, 1, 0, qa_unpack_q6_k},
};

// One quantized row of x: k int8, and per group its scale and sum; |h|,
// where the direct Q6_K path runs (NULL elsewhere): 32 times the sum of
// each 16-element half of every group, per run of eight groups g0 .. g7 in
// the order g0L g1L g2L g3L g0H g1H g2H g3H g4L .. g7L g4H .. g7H (L the
// first half), the order qa_hsum8's first two levels leave the halves in.
typedef struct qa_xrow {
  const int8_t *q;
  const float *d;
  const int32_t *s;
  const int32_t *h;
} qa_xrow_t;

// The fold of the eight group lanes.
static inline float qa_fold8(const float acc[8]) {
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) +
         ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// The contribution of group |g| with exact dot |i| (see the order above).
static inline float qa_group_term(const qa_format_t *f, const qa_xrow_t *x,
                                  const qa_wrow_t *w, uint64_t g, int32_t i) {
  float t = (x->d[g] * w->a[g]) * (float)i;
  if (!f->has_min) {
    return t;
  }
  float u = (x->d[g] * w->b[g]) * (float)x->s[g];
  return t + u;
}

// x to groups of 32 integers in -|levels| .. |levels| (127: int8 into |q8|;
// 32767: int16 into |q16|, i16_activations.h), the order above with
// |levels| for 127.
static inline void qa_quantize_levels(const float *x, uint64_t k,
                                      float levels, int8_t *q8, int16_t *q16,
                                      float *d, int32_t *s) {
  for (uint64_t g = 0; g < k / QA_GROUP; ++g) {
    const float *xg = x + g * QA_GROUP;
    float amax = 0.0f;
    for (uint32_t e = 0; e < QA_GROUP; ++e) {
      float a = fabsf(xg[e]);
      amax = a > amax ? a : amax;
    }
    float id = amax > 0.0f ? levels / amax : 0.0f;
    d[g] = amax / levels;
    int32_t sum = 0;
    for (uint32_t e = 0; e < QA_GROUP; ++e) {
      float v = xg[e] * id;
      v = v > -levels ? v : -levels;
      v = v < levels ? v : levels;
      int32_t qi = (int32_t)nearbyintf(v);
      if (q16 != NULL) {
        q16[g * QA_GROUP + e] = (int16_t)qi;
      } else {
        q8[g * QA_GROUP + e] = (int8_t)qi;
      }
      sum += qi;
    }
    s[g] = sum;
  }
}

static void qa_quantize_portable(const float *x, uint64_t k, int8_t *q,
                                 float *d, int32_t *s) {
  qa_quantize_levels(x, k, 127.0f, q, NULL, d, s);
}

static float qa_dot_portable(const qa_format_t *f, const qa_xrow_t *x,
                             const qa_wrow_t *w, uint64_t k) {
  float acc[8] = {0};
  for (uint64_t g = 0; g < k / QA_GROUP; ++g) {
    int32_t i = 0;
    for (uint32_t h = 0; h < 2; ++h) {
      uint64_t e0 = g * QA_GROUP + 16u * h;
      int32_t half = 0;
      for (uint32_t e = 0; e < 16; ++e) {
        half += ((int32_t)w->q[e0 + e] - f->offset) * (int32_t)x->q[e0 + e];
      }
      i += (int32_t)w->mult[2 * g + h] * half;
    }
    acc[g % 8] = acc[g % 8] + qa_group_term(f, x, w, g, i);
  }
  return qa_fold8(acc);
}

#if defined(__x86_64__)
#define QA_AVX2 __attribute__((target("avx2")))
#define QA_INLINE static inline __attribute__((always_inline))

// The sum of the lanes of |p|.
QA_AVX2 QA_INLINE int32_t qa_hsum(__m256i p) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(p),
                            _mm256_extracti128_si256(p, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// The AVX2 form of qa_quantize_levels (the same roundings: bit-identical);
// |h| (NULL: not wanted) receives the half sums of qa_xrow_t.h for the
// complete runs of eight groups (int8 only).
QA_AVX2 QA_INLINE void qa_quantize_levels_avx2(const float *x, uint64_t k,
                                               float levels, int8_t *q8,
                                               int16_t *q16, float *d,
                                               int32_t *s, int32_t *h) {
  uint64_t runs = k / QA_GROUP / 8;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 lo = _mm256_set1_ps(-levels), hi = _mm256_set1_ps(levels);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (uint64_t g = 0; g < k / QA_GROUP; ++g) {
    const float *xg = x + g * QA_GROUP;
    __m256 v[4], m = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(xg + 8 * i);
      // max_ps(a, m) is a > m ? a : m: a NaN never wins, as in the
      // portable loop; the maximum of the rest does not depend on order.
      m = _mm256_max_ps(_mm256_andnot_ps(sign, v[i]), m);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m),
                           _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    float amax = _mm_cvtss_f32(m4);
    float id = amax > 0.0f ? levels / amax : 0.0f;
    d[g] = amax / levels;
    __m256 vid = _mm256_set1_ps(id);
    __m256i qi[4], sum = _mm256_setzero_si256();
    for (int i = 0; i < 4; ++i) {
      __m256 t = _mm256_mul_ps(v[i], vid);
      t = _mm256_min_ps(_mm256_max_ps(t, lo), hi);
      t = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      qi[i] = _mm256_cvtps_epi32(t);
      sum = _mm256_add_epi32(sum, qi[i]);
    }
    if (h != NULL && g / 8 < runs) {
      uint64_t at = g / 8 * 16 + (g % 8) / 4 * 8 + g % 4;
      h[at] = 32 * qa_hsum(_mm256_add_epi32(qi[0], qi[1]));
      h[at + 4] = 32 * qa_hsum(_mm256_add_epi32(qi[2], qi[3]));
    }
    if (q16 != NULL) {
      // packs works per 128-bit lane: 64-bit quarters 0 2 1 3 restore the
      // order.
      for (int i = 0; i < 2; ++i) {
        __m256i p = _mm256_packs_epi32(qi[2 * i], qi[2 * i + 1]);
        _mm256_storeu_si256((__m256i *)(q16 + g * QA_GROUP + 16 * i),
                            _mm256_permute4x64_epi64(p, 0xd8));
      }
    } else {
      __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]),
                                     _mm256_packs_epi32(qi[2], qi[3]));
      _mm256_storeu_si256((__m256i *)(q8 + g * QA_GROUP),
                          _mm256_permutevar8x32_epi32(p, order));
    }
    s[g] = qa_hsum(sum);
  }
}

QA_AVX2 static void qa_quantize_avx2(const float *x, uint64_t k, int8_t *q,
                                     float *d, int32_t *s, int32_t *h) {
  qa_quantize_levels_avx2(x, k, 127.0f, q, NULL, d, s, h);
}

// acc + the products of 32 int8 of w and x, four consecutive ones per
// 32-bit lane, each 16-bit pair times its int16 in |m|. With |is_unsigned|
// the w bytes are 0..31 (the offset is taken off later) and go to maddubs
// as they are; otherwise |w| times x with w's sign: maddubs multiplies
// unsigned by signed bytes, and |w| <= 128, |x| <= 127 keep each pair sum
// below 2^15.
QA_AVX2 QA_INLINE __m256i qa_chunk_acc(__m256i acc, const int8_t *wq,
                                       const int8_t *xq, __m256i m,
                                       int is_unsigned) {
  __m256i w = _mm256_loadu_si256((const __m256i *)wq);
  __m256i x = _mm256_loadu_si256((const __m256i *)xq);
  __m256i p = is_unsigned ? _mm256_maddubs_epi16(w, x)
                          : _mm256_maddubs_epi16(_mm256_sign_epi8(w, w),
                                                 _mm256_sign_epi8(x, w));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, m));
}

// The same with AVX512-VNNI on 256-bit vectors (m all ones): vpdpbusd sums
// the four products of each lane in 32 bits, with no 16-bit step.
#define QA_VNNI __attribute__((target("avx2,avx512vl,avx512vnni")))
QA_VNNI QA_INLINE __m256i qa_chunk_acc_vnni(__m256i acc, const int8_t *wq,
                                            const int8_t *xq,
                                            int is_unsigned) {
  __m256i w = _mm256_loadu_si256((const __m256i *)wq);
  __m256i x = _mm256_loadu_si256((const __m256i *)xq);
  return is_unsigned ? _mm256_dpbusd_epi32(acc, w, x)
                     : _mm256_dpbusd_epi32(acc, _mm256_sign_epi8(w, w),
                                           _mm256_sign_epi8(x, w));
}

// Eight int32 lanes whose sum is the exact dot of one group in the plain
// layout, M per half (|mult|) when |has_mult|.
QA_AVX2 QA_INLINE __m256i qa_group_lanes(const int8_t *wq, const int8_t *xq,
                                         const int16_t *mult, int has_mult,
                                         int is_unsigned) {
  __m256i m = has_mult ? _mm256_set_m128i(_mm_set1_epi16(mult[1]),
                                          _mm_set1_epi16(mult[0]))
                       : _mm256_set1_epi16(1);
  return qa_chunk_acc(_mm256_setzero_si256(), wq, xq, m, is_unsigned);
}

QA_VNNI QA_INLINE __m256i qa_group_lanes_vnni(const int8_t *wq,
                                              const int8_t *xq,
                                              const int16_t *mult,
                                              int has_mult, int is_unsigned) {
  if (has_mult) {
    return qa_group_lanes(wq, xq, mult, has_mult, is_unsigned);
  }
  return qa_chunk_acc_vnni(_mm256_setzero_si256(), wq, xq, is_unsigned);
}

// The vector paths keep x and the unpacked weights of every full run of
// eight groups interleaved: bytes 4c .. 4c + 3 of group l (0..7) at
// 32c + 4l, so that 32-bit lane l of chunk c belongs to group l and the
// chunks' products sum into one vector of the eight groups' dot products
// with no horizontal adds. This transposes each run in place (an 8 x 8
// transpose of 32-bit words); groups past the last run stay as they are.
QA_AVX2 static void qa_interleave(int8_t *q, uint64_t groups) {
  for (uint64_t g = 0; g + 8 <= groups; g += 8) {
    __m256i *v = (__m256i *)(q + g * QA_GROUP);
    __m256i r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_si256(v + i);
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
      u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
      u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
      u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
      u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; ++i) {
      _mm256_storeu_si256(v + i, _mm256_permute2x128_si256(u[i], u[i + 4],
                                                           0x20));
      _mm256_storeu_si256(v + i + 4,
                          _mm256_permute2x128_si256(u[i], u[i + 4], 0x31));
    }
  }
}

// Lane l: the exact dot of group l of an interleaved run (32-bit lane l of
// each chunk); |multv| the two madd operands of the run (chunks 0-3 and
// 4-7) when |has_mult|.
QA_AVX2 QA_INLINE __m256i qa_run_lanes(const int8_t *wq, const int8_t *xq,
                                       const int16_t *multv, int has_mult,
                                       int is_unsigned) {
  __m256i acc = _mm256_setzero_si256();
  for (int c = 0; c < 8; ++c) {
    __m256i m = has_mult ? _mm256_loadu_si256(
                               (const __m256i *)(multv + 16 * (c / 4)))
                         : _mm256_set1_epi16(1);
    acc = qa_chunk_acc(acc, wq + 32 * c, xq + 32 * c, m, is_unsigned);
  }
  return acc;
}

QA_VNNI QA_INLINE __m256i qa_run_lanes_vnni(const int8_t *wq,
                                            const int8_t *xq,
                                            const int16_t *multv,
                                            int has_mult, int is_unsigned) {
  if (has_mult) {
    return qa_run_lanes(wq, xq, multv, has_mult, is_unsigned);
  }
  __m256i acc = _mm256_setzero_si256();
  for (int c = 0; c < 8; ++c) {
    acc = qa_chunk_acc_vnni(acc, wq + 32 * c, xq + 32 * c, is_unsigned);
  }
  return acc;
}

// Lanes l of the result: the sum of the eight lanes of p[l].
QA_AVX2 QA_INLINE __m256i qa_hsum8(const __m256i p[8]) {
  __m256i ab = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]),
                                 _mm256_hadd_epi32(p[2], p[3]));
  __m256i cd = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]),
                                 _mm256_hadd_epi32(p[6], p[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20),
                          _mm256_permute2x128_si256(ab, cd, 0x31));
}

// Whole-row unpacking with AVX2 and F16C (f16 -> f32 is exact, so the
// values are those of the portable qa_unpack_*; B only where read), and
// for Q6_K with |interleaved| the runs' madd operands; 0: no such path for
// the type, the portable one runs.
#define QA_AVX2_F16C __attribute__((target("avx2,f16c")))

QA_AVX2_F16C QA_INLINE float qa_f16_f16c(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, sizeof(h));
  return _cvtsh_ss(h);
}

// A = d sc and B = -(dmin m) of the eight sub-blocks of a Q4_K / Q5_K block:
// the eight 6-bit scales to bytes 0-7 and minimums to 8-15 (the bit moves
// of qa_scale_min_k4, all sixteen at once in one register: the low bits by
// one shuffle and masks, the two top bits of sub-blocks 4-7 by another),
// rounded as the portable code rounds them.
QA_AVX2_F16C QA_INLINE void qa_q4_k_scales_avx2(const uint8_t *blk, float *a,
                                                float *b) {
  // Bytes 0-3: d and dmin (f16); bytes 4-15: the scale bytes q0 .. q11.
  __m128i v = _mm_loadu_si128((const __m128i *)blk);
  // sc0-3 = q0-3 & 63, sc4-7 = q8-11 & 15, m0-3 = q4-7 & 63,
  // m4-7 = q8-11 >> 4 ...
  const __m128i low_at = _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10,
                                       11, 12, 13, 14, 15);
  const __m128i low_mask = _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63,
                                         63, 63, 63, 0, 0, 0, 0);
  const __m128i high_nibble = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                            0, 15, 15, 15, 15);
  // ... and sc4-7 |= (q0-3 >> 6) << 4, m4-7 |= (q4-7 >> 6) << 4. Shifts
  // run in 16-bit lanes on masked bytes, so no bit crosses a byte.
  const __m128i top_at = _mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1,
                                       -1, -1, 8, 9, 10, 11);
  __m128i l = _mm_shuffle_epi8(v, low_at);
  __m128i t = _mm_and_si128(_mm_shuffle_epi8(v, top_at),
                            _mm_set1_epi8((char)0xc0));
  __m128i sm = _mm_or_si128(
      _mm_or_si128(_mm_and_si128(l, low_mask),
                   _mm_and_si128(_mm_srli_epi16(l, 4), high_nibble)),
      _mm_srli_epi16(t, 2));
  __m128 dd = _mm_cvtph_ps(v);  // d, dmin, ...
  __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sm));
  __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8)));
  _mm256_storeu_ps(a, _mm256_mul_ps(_mm256_broadcastss_ps(dd), sc));
  _mm256_storeu_ps(
      b, _mm256_xor_ps(
             _mm256_mul_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dd)), mn),
             _mm256_set1_ps(-0.0f)));
}

// The 256 six-bit fields of a Q6_K block minus |offset| (32: the values;
// 0: the fields, unsigned), as int8, in element order: v[i] holds elements
// 32 i .. 32 i + 31.
QA_AVX2_F16C QA_INLINE void qa_q6_k_fields_avx2(const uint8_t *blk,
                                                __m256i v[8], int offset) {
  const __m256i low4 = _mm256_set1_epi8(0x0f), three = _mm256_set1_epi8(3),
                k32 = _mm256_set1_epi8((char)offset);
  const uint8_t *ql = blk, *qh = blk + 128;
  for (int n = 0; n < 2; ++n, ql += 64, qh += 32) {
    __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
    __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
    __m256i h = _mm256_loadu_si256((const __m256i *)qh);
    // Byte shifts through 16-bit lanes, masked: bits never cross.
    __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(h, three), 4);
    __m256i h1 = _mm256_slli_epi16(
        _mm256_and_si256(_mm256_srli_epi16(h, 2), three), 4);
    __m256i h2 = _mm256_slli_epi16(
        _mm256_and_si256(_mm256_srli_epi16(h, 4), three), 4);
    __m256i h3 = _mm256_slli_epi16(
        _mm256_and_si256(_mm256_srli_epi16(h, 6), three), 4);
    v[4 * n] = _mm256_sub_epi8(
        _mm256_or_si256(_mm256_and_si256(l0, low4), h0), k32);
    v[4 * n + 1] = _mm256_sub_epi8(
        _mm256_or_si256(_mm256_and_si256(l1, low4), h1), k32);
    v[4 * n + 2] = _mm256_sub_epi8(
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), h2),
        k32);
    v[4 * n + 3] = _mm256_sub_epi8(
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4), h3),
        k32);
  }
}

// The 256 values of a Q6_K block (the fields minus 32).
QA_AVX2_F16C QA_INLINE void qa_q6_k_values_avx2(const uint8_t *blk,
                                                __m256i v[8]) {
  qa_q6_k_fields_avx2(blk, v, 32);
}

QA_AVX2_F16C static int qa_unpack_row_avx2(enum qa_type type,
                                           const uint8_t *row, uint64_t blocks,
                                           int interleaved, qa_wrow_t *w) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  switch (type) {
    case QA_Q8_0:
      for (uint64_t b = 0; b < blocks; ++b) {
        const uint8_t *blk = row + 34 * b;
        w->a[b] = qa_f16_f16c(blk);
        _mm256_storeu_si256((__m256i *)(w->q + 32 * b),
                            _mm256_loadu_si256((const __m256i *)(blk + 2)));
      }
      return 1;
    case QA_Q4_0: {
      const __m128i low4x = _mm_set1_epi8(0x0f);
      for (uint64_t b = 0; b < blocks; ++b) {
        const uint8_t *blk = row + 18 * b;
        w->a[b] = qa_f16_f16c(blk);
        __m128i v = _mm_loadu_si128((const __m128i *)(blk + 2));
        _mm_storeu_si128((__m128i *)(w->q + 32 * b), _mm_and_si128(v, low4x));
        _mm_storeu_si128((__m128i *)(w->q + 32 * b + 16),
                         _mm_and_si128(_mm_srli_epi16(v, 4), low4x));
      }
      return 1;
    }
    case QA_Q4_K:
      for (uint64_t b = 0; b < blocks; ++b) {
        const uint8_t *blk = row + 144 * b;
        qa_q4_k_scales_avx2(blk, w->a + 8 * b, w->b + 8 * b);
        for (int i = 0; i < 4; ++i) {
          __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * i));
          int8_t *q = w->q + 256 * b + 64 * i;
          _mm256_storeu_si256((__m256i *)q, _mm256_and_si256(v, low4));
          _mm256_storeu_si256((__m256i *)(q + 32),
                              _mm256_and_si256(_mm256_srli_epi16(v, 4), low4));
        }
      }
      return 1;
    case QA_Q6_K: {
      for (uint64_t b = 0; b < blocks; ++b) {
        const uint8_t *blk = row + 210 * b;
        const int8_t *sc = (const int8_t *)(blk + 192);
        float d = qa_f16_f16c(blk + 208);
        __m256i v[8];
        qa_q6_k_values_avx2(blk, v);
        for (int i = 0; i < 8; ++i) {
          _mm256_storeu_si256((__m256i *)(w->q + 256 * b + 32 * i), v[i]);
        }
        _mm256_storeu_ps(w->a + 8 * b, _mm256_set1_ps(d));
        __m128i scales = _mm_loadu_si128((const __m128i *)sc);
        _mm256_storeu_si256((__m256i *)(w->mult + 16 * b),
                            _mm256_cvtepi8_epi16(scales));
        if (interleaved) {
          // The run's madd operands (qa_run_lanes): half h of group l in
          // 16-bit lanes 2l and 2l + 1.
          const __m128i even = _mm_setr_epi8(0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10,
                                             10, 12, 12, 14, 14);
          const __m128i odd = _mm_add_epi8(even, _mm_set1_epi8(1));
          _mm256_storeu_si256(
              (__m256i *)(w->multv + 32 * b),
              _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, even)));
          _mm256_storeu_si256(
              (__m256i *)(w->multv + 32 * b + 16),
              _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, odd)));
        }
      }
      return 1;
    }
    default:
      return 0;
  }
}

// y[t] for |rows| (1 .. QA_ROWS) unpacked weight rows against one row of x,
// under TARGET: runs of eight groups through RUN (qa_run_lanes or its VNNI
// form) when |interleaved|, else through LANES (qa_group_lanes or its VNNI
// form) and horizontal sums; groups past the last run through LANES.
// Unsigned weights take |offset| S off each group's sum here (exact).
#define QA_DEFINE_DOT(NAME, TARGET, LANES, RUN)                               \
  TARGET static void NAME(const qa_format_t *f, const qa_xrow_t *x,           \
                          const qa_wrow_t *w, uint32_t rows, uint64_t k,      \
                          int interleaved, float *y) {                        \
    uint64_t groups = k / QA_GROUP, g = 0;                                    \
    __m256 acc[QA_ROWS];                                                      \
    for (uint32_t t = 0; t < rows; ++t) acc[t] = _mm256_setzero_ps();         \
    int has_mult = f->has_mult, is_unsigned = f->offset != 0 || f->has_min;   \
    __m256i offset = _mm256_set1_epi32(f->offset);                            \
    for (; g + 8 <= groups; g += 8) {                                         \
      __m256 xd = _mm256_loadu_ps(x->d + g);                                  \
      __m256i s = _mm256_loadu_si256((const __m256i *)(x->s + g));            \
      __m256 xs = _mm256_cvtepi32_ps(s);                                      \
      __m256i off = _mm256_mullo_epi32(offset, s);                            \
      for (uint32_t t = 0; t < rows; ++t) {                                   \
        uint64_t e = g * QA_GROUP;                                            \
        __m256i lanes;                                                        \
        if (interleaved) {                                                    \
          lanes = RUN(w[t].q + e, x->q + e, w[t].multv + 4 * g, has_mult,     \
                      is_unsigned);                                           \
        } else {                                                              \
          __m256i p[8];                                                       \
          for (int i = 0; i < 8; ++i) {                                       \
            p[i] = LANES(w[t].q + e + 32 * i, x->q + e + 32 * i,              \
                         w[t].mult + 2 * (g + i), has_mult, is_unsigned);     \
          }                                                                   \
          lanes = qa_hsum8(p);                                                \
        }                                                                     \
        __m256i sum = _mm256_sub_epi32(lanes, off);                           \
        __m256 c = _mm256_mul_ps(                                             \
            _mm256_mul_ps(xd, _mm256_loadu_ps(w[t].a + g)),                   \
            _mm256_cvtepi32_ps(sum));                                         \
        if (f->has_min) {                                                     \
          c = _mm256_add_ps(                                                  \
              c, _mm256_mul_ps(_mm256_mul_ps(xd, _mm256_loadu_ps(w[t].b + g)),\
                               xs));                                          \
        }                                                                     \
        acc[t] = _mm256_add_ps(acc[t], c);                                    \
      }                                                                       \
    }                                                                         \
    NAME##_tail(f, x, w, rows, k, g, acc, y);                                 \
  }

// The groups from |g| on (past the last run) of QA_DEFINE_DOT, added to the
// runs' lanes |acc|, and the fold into y.
#define QA_DEFINE_TAIL(NAME, TARGET, LANES)                                   \
  TARGET static void NAME(const qa_format_t *f, const qa_xrow_t *x,           \
                          const qa_wrow_t *w, uint32_t rows, uint64_t k,      \
                          uint64_t g, const __m256 *acc, float *y) {          \
    uint64_t groups = k / QA_GROUP;                                           \
    int has_mult = f->has_mult, is_unsigned = f->offset != 0 || f->has_min;   \
    for (uint32_t t = 0; t < rows; ++t) {                                     \
      float lanes[8];                                                         \
      _mm256_storeu_ps(lanes, acc[t]);                                        \
      for (uint64_t h = g; h < groups; ++h) {                                 \
        uint64_t e = h * QA_GROUP;                                            \
        int32_t i = qa_hsum(LANES(w[t].q + e, x->q + e, w[t].mult + 2 * h,    \
                                  has_mult, is_unsigned)) -                   \
                    f->offset * x->s[h];                                      \
        lanes[h % 8] = lanes[h % 8] + qa_group_term(f, x, &w[t], h, i);       \
      }                                                                       \
      y[t] = qa_fold8(lanes);                                                 \
    }                                                                         \
  }

QA_DEFINE_TAIL(qa_dot_avx2_tail, QA_AVX2, qa_group_lanes)
QA_DEFINE_TAIL(qa_dot_vnni_tail, QA_VNNI, qa_group_lanes_vnni)
QA_DEFINE_DOT(qa_dot_avx2, QA_AVX2, qa_group_lanes, qa_run_lanes)
QA_DEFINE_DOT(qa_dot_vnni, QA_VNNI, qa_group_lanes_vnni, qa_run_lanes_vnni)

// QA_DEFINE_DOT's interleaved runs for two rows of x and QA_ROWS weight rows
// at once with VNNI (vpdpbusd, or for Q6_K maddubs and madd by M): each chunk of w and x is
// loaded once for the eight products it takes part in (32 vector
// registers hold the eight integer and eight float accumulators). The same
// operations per pair of rows, so the same bits.
QA_VNNI QA_INLINE void qa_dot_vnni_2x4_m(const qa_format_t *f,
                                         const qa_xrow_t *x,
                                         const qa_wrow_t *w, uint64_t k,
                                         int has_mult, float y[2][QA_ROWS]) {
  uint64_t groups = k / QA_GROUP, g = 0;
  __m256 acc[2][QA_ROWS];
  for (int r = 0; r < 2; ++r) {
    for (uint32_t t = 0; t < QA_ROWS; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  int is_unsigned = f->offset != 0 || f->has_min;
  __m256i offset = _mm256_set1_epi32(f->offset);
  for (; g + 8 <= groups; g += 8) {
    uint64_t e = g * QA_GROUP;
    __m256i lanes[2][QA_ROWS];
    for (int r = 0; r < 2; ++r) {
      for (uint32_t t = 0; t < QA_ROWS; ++t) {
        lanes[r][t] = _mm256_setzero_si256();
      }
    }
    for (int c = 0; c < 8; ++c) {
      __m256i wv[QA_ROWS], xv[2];
      for (uint32_t t = 0; t < QA_ROWS; ++t) {
        wv[t] = _mm256_loadu_si256((const __m256i *)(w[t].q + e + 32 * c));
      }
      for (int r = 0; r < 2; ++r) {
        xv[r] = _mm256_loadu_si256((const __m256i *)(x[r].q + e + 32 * c));
      }
      for (uint32_t t = 0; t < QA_ROWS; ++t) {
        __m256i wu = is_unsigned ? wv[t] : _mm256_sign_epi8(wv[t], wv[t]);
        // Q6_K: the madd operand of the run's chunks c / 4 (qa_run_lanes).
        __m256i mt = has_mult ? _mm256_loadu_si256((const __m256i *)(
                                    w[t].multv + 4 * g + 16 * (c / 4)))
                              : _mm256_setzero_si256();
        for (int r = 0; r < 2; ++r) {
          __m256i xs = is_unsigned ? xv[r] : _mm256_sign_epi8(xv[r], wv[t]);
          lanes[r][t] =
              has_mult ? _mm256_add_epi32(
                             lanes[r][t],
                             _mm256_madd_epi16(_mm256_maddubs_epi16(wu, xs), mt))
                       : _mm256_dpbusd_epi32(lanes[r][t], wu, xs);
        }
      }
    }
    for (int r = 0; r < 2; ++r) {
      __m256 xd = _mm256_loadu_ps(x[r].d + g);
      __m256i s = _mm256_loadu_si256((const __m256i *)(x[r].s + g));
      __m256 xs = _mm256_cvtepi32_ps(s);
      __m256i off = _mm256_mullo_epi32(offset, s);
      for (uint32_t t = 0; t < QA_ROWS; ++t) {
        __m256i sum = _mm256_sub_epi32(lanes[r][t], off);
        __m256 c = _mm256_mul_ps(_mm256_mul_ps(xd, _mm256_loadu_ps(w[t].a + g)),
                                 _mm256_cvtepi32_ps(sum));
        if (f->has_min) {
          c = _mm256_add_ps(
              c, _mm256_mul_ps(_mm256_mul_ps(xd, _mm256_loadu_ps(w[t].b + g)),
                               xs));
        }
        acc[r][t] = _mm256_add_ps(acc[r][t], c);
      }
    }
  }
  if (g < groups) {
    for (int r = 0; r < 2; ++r) {
      qa_dot_vnni_tail(f, &x[r], w, QA_ROWS, k, g, acc[r], y[r]);
    }
    return;
  }
  // qa_fold8 in vector form: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
  for (int r = 0; r < 2; ++r) {
    for (uint32_t t = 0; t < QA_ROWS; ++t) {
      __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[r][t]),
                            _mm256_extractf128_ps(acc[r][t], 1));
      h = _mm_add_ps(h, _mm_movehl_ps(h, h));
      y[r][t] = _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
    }
  }
}

QA_VNNI static void qa_dot_vnni_2x4(const qa_format_t *f, const qa_xrow_t *x,
                                    const qa_wrow_t *w, uint64_t k,
                                    float y[2][QA_ROWS]) {
  if (f->has_mult) {
    qa_dot_vnni_2x4_m(f, x, w, k, 1, y);
  } else {
    qa_dot_vnni_2x4_m(f, x, w, k, 0, y);
  }
}

// The direct path (few rows of x, as a decode step has): each weight block
// is decoded in registers and meets the rows of x there, with no unpacked
// copy of the row; the integer sums and the float operations are those of
// the paths above, so the bits are the same. Types without a vector decoder
// here (0 from qa_direct_types) take the unpacking path.
#define QA_DIRECT_MAX_M 4u
// How far ahead of the run being decoded its row's bytes are prefetched.
#ifndef QA_PREFETCH
#define QA_PREFETCH 1024
#endif

static inline int qa_direct_type(enum qa_type type) {
  return type >= QA_Q8_0 && type < QA_COUNT;  // every type
}

// The block bytes of one group of the types with 32-element blocks.
static inline uint64_t qa_bytes32(enum qa_type type) {
  return type == QA_Q8_0   ? 34
         : type == QA_Q4_0 ? 18
         : type == QA_Q4_1 ? 20
         : type == QA_Q5_0 ? 22
                           : 24;  // Q5_1
}

// A run of eight groups of a weight row decoded: wv[i] the 32 bytes of
// group i (signed for Q8_0 and Q6_K, else unsigned, offset not taken off),
// A and B per group, and for Q6_K the madd operand of each group (M of its
// halves in the low and high 128-bit lanes).
typedef struct qa_run {
  __m256i wv[8];
  __m256i mv[8];
  float a[8], b[8];
} qa_run_t;

// 0x10 in byte e of the result where bit e of |bits| is set (the fifth bits
// of a Q5_0 / Q5_1 block): byte e holds byte e / 8 of |bits|, ORed with
// every bit but its own; all ones then means the bit was set.
QA_AVX2_F16C QA_INLINE __m256i qa_fifth_bits(uint32_t bits) {
  const __m256i spread = _mm256_setr_epi8(
      0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
      3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i others = _mm256_set1_epi64x((long long)0x7fbfdfeff7fbfdfeull);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
  v = _mm256_cmpeq_epi8(_mm256_or_si256(v, others), _mm256_set1_epi8(-1));
  return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

// Group h (0 .. groups - 1) of a row of one of the types with 32-element
// blocks: its bytes as qa_unpack_* stores them, A and B.
QA_AVX2_F16C QA_INLINE __m256i qa_direct_group32(enum qa_type type,
                                                 const uint8_t *row,
                                                 uint64_t h, float *a,
                                                 float *b) {
  const uint8_t *blk = row + qa_bytes32(type) * h;
  *a = qa_f16_f16c(blk);
  *b = type == QA_Q4_1 || type == QA_Q5_1 ? qa_f16_f16c(blk + 2) : 0.0f;
  if (type == QA_Q8_0) {
    return _mm256_loadu_si256((const __m256i *)(blk + 2));
  }
  // The nibbles: low ones elements 0-15, high ones 16-31.
  const uint8_t *qs = type == QA_Q4_0   ? blk + 2
                      : type == QA_Q4_1 ? blk + 4
                      : type == QA_Q5_0 ? blk + 6
                                        : blk + 8;
  __m128i v = _mm_loadu_si128((const __m128i *)qs);
  const __m128i low4 = _mm_set1_epi8(0x0f);
  __m256i n = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), low4),
                               _mm_and_si128(v, low4));
  if (type == QA_Q5_0 || type == QA_Q5_1) {
    uint32_t qh;
    memcpy(&qh, qs - 4, 4);
    n = _mm256_or_si256(n, qa_fifth_bits(qh));
  }
  return n;
}

// The run of groups g .. g + 7 (g a multiple of 8) of |row|.
QA_AVX2_F16C QA_INLINE void qa_direct_run(enum qa_type type,
                                          const uint8_t *row, uint64_t g,
                                          qa_run_t *r) {
  const __m256i low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  for (int i = 0; i < 8; ++i) {
    r->b[i] = 0.0f;
    r->mv[i] = ones;
  }
  // The run's bytes, QA_PREFETCH ahead (past the row's end the next row's,
  // which follows it; a prefetch never faults).
  uint64_t bytes = type == QA_Q4_K   ? 144
                   : type == QA_Q5_K ? 176
                   : type == QA_Q6_K ? 210
                                     : 8 * qa_bytes32(type);
  const char *ahead = (const char *)row + g / 8 * bytes + QA_PREFETCH;
  for (uint64_t o = 0; o < bytes; o += 64) {
    _mm_prefetch(ahead + o, _MM_HINT_T0);
  }
  switch (type) {
    case QA_Q8_0:
    case QA_Q4_0:
    case QA_Q4_1:
    case QA_Q5_0:
    case QA_Q5_1:
      for (int i = 0; i < 8; ++i) {
        r->wv[i] = qa_direct_group32(type, row, g + i, &r->a[i], &r->b[i]);
      }
      return;
    case QA_Q5_K: {
      // As Q4_K, with the fifth bit of sub-block s, element l, in bit s of
      // qh[l].
      const uint8_t *blk = row + 176 * (g / 8);
      qa_q4_k_scales_avx2(blk, r->a, r->b);
      __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 16));
      const __m256i one = _mm256_set1_epi8(1);
      for (int i = 0; i < 4; ++i) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 48 + 32 * i));
        __m256i h0 = _mm256_slli_epi16(
            _mm256_and_si256(
                _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * i)), one),
            4);
        __m256i h1 = _mm256_slli_epi16(
            _mm256_and_si256(
                _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * i + 1)), one),
            4);
        r->wv[2 * i] = _mm256_or_si256(_mm256_and_si256(v, low4), h0);
        r->wv[2 * i + 1] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(v, 4), low4), h1);
      }
      return;
    }
    case QA_Q4_K: {
      const uint8_t *blk = row + 144 * (g / 8);
      qa_q4_k_scales_avx2(blk, r->a, r->b);
      for (int i = 0; i < 4; ++i) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * i));
        r->wv[2 * i] = _mm256_and_si256(v, low4);
        r->wv[2 * i + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      }
      return;
    }
    case QA_Q6_K: {
      const uint8_t *blk = row + 210 * (g / 8);
      const int8_t *sc = (const int8_t *)(blk + 192);
      float d = qa_f16_f16c(blk + 208);
      qa_q6_k_values_avx2(blk, r->wv);
      // Group i's operand: dword i of the widened scales (M of its two
      // halves) in every dword, then M_0 to the low and M_1 to the high
      // 128-bit lane.
      __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
      const __m256i halves = _mm256_setr_epi8(
          0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2,
          3, 2, 3, 2, 3, 2, 3, 2, 3);
      for (int i = 0; i < 8; ++i) {
        r->a[i] = d;
        r->mv[i] = _mm256_shuffle_epi8(
            _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(i)), halves);
      }
      return;
    }
    default:
      for (int i = 0; i < 8; ++i) {
        r->wv[i] = _mm256_setzero_si256();
        r->a[i] = 0.0f;
      }
      return;
  }
}

// Whole-row unpacking through the register decoders, for the types
// qa_unpack_row_avx2 has no path of its own for (Q4_1, Q5_0, Q5_1, Q5_K):
// the same bytes, A and B as the portable qa_unpack_* (M unused: all ones
// for them). 0 for the other types.
QA_AVX2_F16C static int qa_unpack_row_direct(enum qa_type type,
                                             const uint8_t *row,
                                             uint64_t groups, qa_wrow_t *w) {
  switch (type) {
    case QA_Q4_1:
    case QA_Q5_0:
    case QA_Q5_1:
      for (uint64_t h = 0; h < groups; ++h) {
        _mm256_storeu_si256(
            (__m256i *)(w->q + 32 * h),
            qa_direct_group32(type, row, h, &w->a[h], &w->b[h]));
      }
      return 1;
    case QA_Q5_K:
      for (uint64_t g = 0; g < groups; g += 8) {
        qa_run_t run;
        qa_direct_run(type, row, g, &run);
        for (int i = 0; i < 8; ++i) {
          _mm256_storeu_si256((__m256i *)(w->q + 32 * (g + i)), run.wv[i]);
          w->a[g + i] = run.a[i];
          w->b[g + i] = run.b[i];
        }
      }
      return 1;
    default:
      return 0;
  }
}

// acc + the exact products of decoded group |w| and 32 bytes of x (AVX2:
// maddubs and madd with |m|; VNNI: vpdpbusd where M is all ones).
QA_AVX2 QA_INLINE __m256i qa_wdot(__m256i w, const int8_t *xq, __m256i m,
                                  int is_unsigned) {
  __m256i x = _mm256_loadu_si256((const __m256i *)xq);
  __m256i p = is_unsigned ? _mm256_maddubs_epi16(w, x)
                          : _mm256_maddubs_epi16(_mm256_sign_epi8(w, w),
                                                 _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(p, m);
}

QA_VNNI QA_INLINE __m256i qa_wdot_vnni(__m256i w, const int8_t *xq,
                                       __m256i m, int is_unsigned) {
  (void)m;
  __m256i x = _mm256_loadu_si256((const __m256i *)xq);
  return is_unsigned ? _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, x)
                     : _mm256_dpbusd_epi32(_mm256_setzero_si256(),
                                           _mm256_sign_epi8(w, w),
                                           _mm256_sign_epi8(x, w));
}

// y[r] for the |xrows| rows of x against weight row |row| under TARGET,
// groups through DOT (qa_wdot, or qa_wdot_vnni for the types without M);
// the float steps of QA_DEFINE_DOT in its order.
#define QA_DEFINE_DIRECT(NAME, TARGET, DOT, Q6K)                              \
  TARGET QA_INLINE void NAME##_type(enum qa_type type, const uint8_t *row,    \
                                    const qa_xrow_t *x, uint32_t xrows,       \
                                    uint64_t k, float *y) {                   \
    const qa_format_t *f = &k_qa_formats[type];                               \
    uint64_t groups = k / QA_GROUP, g = 0;                                    \
    __m256 acc[QA_DIRECT_MAX_M];                                              \
    for (uint32_t r = 0; r < xrows; ++r) acc[r] = _mm256_setzero_ps();        \
    int has_mult = f->has_mult, is_unsigned = f->offset != 0 || f->has_min;   \
    __m256i offset = _mm256_set1_epi32(f->offset);                            \
    const __m256i ones = _mm256_set1_epi16(1);                                \
    for (; g + 8 <= groups; g += 8) {                                         \
      qa_run_t run;                                                           \
      qa_direct_run(type, row, g, &run);                                      \
      __m256 va = _mm256_loadu_ps(run.a), vb = _mm256_loadu_ps(run.b);        \
      for (uint32_t r = 0; r < xrows; ++r) {                                  \
        const int8_t *xq = x[r].q + g * QA_GROUP;                             \
        __m256i p[8];                                                         \
        for (int i = 0; i < 8; ++i) {                                         \
          p[i] = DOT(run.wv[i], xq + 32 * i, has_mult ? run.mv[i] : ones,     \
                     is_unsigned);                                            \
        }                                                                     \
        __m256 xd = _mm256_loadu_ps(x[r].d + g);                              \
        __m256i s = _mm256_loadu_si256((const __m256i *)(x[r].s + g));        \
        __m256i sum = _mm256_sub_epi32(qa_hsum8(p),                           \
                                       _mm256_mullo_epi32(offset, s));        \
        __m256 c = _mm256_mul_ps(_mm256_mul_ps(xd, va),                       \
                                 _mm256_cvtepi32_ps(sum));                    \
        if (f->has_min) {                                                     \
          c = _mm256_add_ps(c, _mm256_mul_ps(_mm256_mul_ps(xd, vb),           \
                                             _mm256_cvtepi32_ps(s)));         \
        }                                                                     \
        acc[r] = _mm256_add_ps(acc[r], c);                                    \
      }                                                                       \
    }                                                                         \
    float lanes[QA_DIRECT_MAX_M][8];                                          \
    for (uint32_t r = 0; r < xrows; ++r) _mm256_storeu_ps(lanes[r], acc[r]);  \
    /* Groups past the last run: the 32-element blocks only (no M). */        \
    for (uint64_t h = g; h < groups; ++h) {                                   \
      float a, b;                                                             \
      __m256i wv = qa_direct_group32(type, row, h, &a, &b);                   \
      for (uint32_t r = 0; r < xrows; ++r) {                                  \
        int32_t i = qa_hsum(DOT(wv, x[r].q + h * QA_GROUP, ones,              \
                                is_unsigned)) -                               \
                    f->offset * x[r].s[h];                                    \
        float c = (x[r].d[h] * a) * (float)i;                                 \
        if (f->has_min) c = c + (x[r].d[h] * b) * (float)x[r].s[h];           \
        lanes[r][h % 8] = lanes[r][h % 8] + c;                                \
      }                                                                       \
    }                                                                         \
    for (uint32_t r = 0; r < xrows; ++r) y[r] = qa_fold8(lanes[r]);           \
  }                                                                           \
  /* Weight rows j (bytes w + j row_bytes) to y[r ldy + j], |xrows| a      \
     constant where this inlines. */                                         \
  TARGET QA_INLINE void NAME##_loop(enum qa_type type, const uint8_t *w,      \
                                    uint64_t row_bytes, uint64_t nrows,       \
                                    const qa_xrow_t *x, uint32_t xrows,       \
                                    uint64_t k, float *y, uint64_t ldy) {     \
    float o[QA_DIRECT_MAX_M];                                                 \
    for (uint64_t j = 0; j < nrows; ++j) {                                    \
      NAME##_type(type, w + j * row_bytes, x, xrows, k, o);                   \
      for (uint32_t r = 0; r < xrows; ++r) y[r * ldy + j] = o[r];             \
    }                                                                         \
  }                                                                           \
  /* One copy per type and row count, both constants in each. */            \
  TARGET QA_INLINE void NAME##_rows(enum qa_type type, const uint8_t *w,      \
                                    uint64_t row_bytes, uint64_t nrows,       \
                                    const qa_xrow_t *x, uint32_t xrows,       \
                                    uint64_t k, float *y, uint64_t ldy) {     \
    switch (xrows) {                                                          \
      case 1: NAME##_loop(type, w, row_bytes, nrows, x, 1, k, y, ldy); return;\
      case 2: NAME##_loop(type, w, row_bytes, nrows, x, 2, k, y, ldy); return;\
      case 3: NAME##_loop(type, w, row_bytes, nrows, x, 3, k, y, ldy); return;\
      default: NAME##_loop(type, w, row_bytes, nrows, x, 4, k, y, ldy);       \
    }                                                                         \
  }                                                                           \
  TARGET static void NAME(enum qa_type type, const uint8_t *w,                \
                          uint64_t row_bytes, uint64_t nrows,                 \
                          const qa_xrow_t *x, uint32_t xrows, uint64_t k,     \
                          float *y, uint64_t ldy) {                           \
    switch (type) {                                                           \
      case QA_Q8_0: NAME##_rows(QA_Q8_0, w, row_bytes, nrows, x, xrows, k,    \
                                y, ldy); return;                              \
      case QA_Q4_0: NAME##_rows(QA_Q4_0, w, row_bytes, nrows, x, xrows, k,    \
                                y, ldy); return;                              \
      case QA_Q4_1: NAME##_rows(QA_Q4_1, w, row_bytes, nrows, x, xrows, k,    \
                                y, ldy); return;                              \
      case QA_Q5_0: NAME##_rows(QA_Q5_0, w, row_bytes, nrows, x, xrows, k,    \
                                y, ldy); return;                              \
      case QA_Q5_1: NAME##_rows(QA_Q5_1, w, row_bytes, nrows, x, xrows, k,    \
                                y, ldy); return;                              \
      case QA_Q4_K: NAME##_rows(QA_Q4_K, w, row_bytes, nrows, x, xrows, k,    \
                                y, ldy); return;                              \
      case QA_Q5_K: NAME##_rows(QA_Q5_K, w, row_bytes, nrows, x, xrows, k,    \
                                y, ldy); return;                              \
      case QA_Q6_K: Q6K(NAME, w, row_bytes, nrows, x, xrows, k, y, ldy);      \
        return;                                                               \
      default: return;                                                        \
    }                                                                         \
  }

#define QA_AVX2_DIRECT __attribute__((target("avx2,f16c")))
#define QA_VNNI_DIRECT __attribute__((target("avx2,f16c,avx512vl,avx512vnni")))

// Q6_K on the direct path with VNNI. The six-bit fields stay unsigned
// (0 .. 63) and meet x in vpdpbusd, one product vector per group; the first
// two hadd levels of qa_hsum8 leave each group's halves apart, so 32 times
// x's half sums (qa_xrow_t.h) come off there and each half is multiplied by
// its sub-block scale in 32 bits before the last level adds the halves:
// I = sum_h M_h (sum w q - 32 sum q) = sum_h M_h sum (w - 32) q, the integer
// qa_wdot computes (every term fits in 32 bits: at most 16 x 63 x 127 plus
// 32 x 16 x 127, times 128). Against the generic loop (qa_direct_avx2's
// Q6_K) this drops the per-group sign and madd steps and the per-group scale
// shuffles.
QA_VNNI_DIRECT QA_INLINE void qa_q6k_vnni_row(const uint8_t *row,
                                              const qa_xrow_t *x,
                                              uint32_t xrows, uint64_t k,
                                              float *y) {
  // Scales 0 2 4 6 1 3 5 7 | 8 10 12 14 9 11 13 15: the halves' order.
  const __m128i order = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14,
                                      9, 11, 13, 15);
  __m256 acc[QA_DIRECT_MAX_M];
  for (uint32_t r = 0; r < xrows; ++r) acc[r] = _mm256_setzero_ps();
  for (uint64_t b = 0; b < k / 256; ++b) {
    const uint8_t *blk = row + 210 * b;
    for (uint64_t o = 0; o < 210; o += 64) {
      _mm_prefetch((const char *)blk + QA_PREFETCH + o, _MM_HINT_T0);
    }
    __m256i wv[8];
    qa_q6_k_fields_avx2(blk, wv, 0);
    __m128i sc = _mm_shuffle_epi8(
        _mm_loadu_si128((const __m128i *)(blk + 192)), order);
    __m256i m0 = _mm256_cvtepi8_epi32(sc),
            m1 = _mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8));
    __m256 va = _mm256_set1_ps(qa_f16_f16c(blk + 208));
    for (uint32_t r = 0; r < xrows; ++r) {
      const int8_t *xq = x[r].q + 256 * b;
      const int32_t *h = x[r].h + 16 * b;
      __m256i p[8];
      for (int i = 0; i < 8; ++i) {
        p[i] = _mm256_dpbusd_epi32(
            _mm256_setzero_si256(), wv[i],
            _mm256_loadu_si256((const __m256i *)(xq + 32 * i)));
      }
      __m256i lo = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]),
                                     _mm256_hadd_epi32(p[2], p[3]));
      __m256i hi = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]),
                                     _mm256_hadd_epi32(p[6], p[7]));
      lo = _mm256_mullo_epi32(
          _mm256_sub_epi32(lo, _mm256_loadu_si256((const __m256i *)h)), m0);
      hi = _mm256_mullo_epi32(
          _mm256_sub_epi32(hi, _mm256_loadu_si256((const __m256i *)(h + 8))),
          m1);
      __m256i sum = _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20),
                                     _mm256_permute2x128_si256(lo, hi, 0x31));
      __m256 xd = _mm256_loadu_ps(x[r].d + 8 * b);
      acc[r] = _mm256_add_ps(
          acc[r], _mm256_mul_ps(_mm256_mul_ps(xd, va),
                                _mm256_cvtepi32_ps(sum)));
    }
  }
  for (uint32_t r = 0; r < xrows; ++r) {
    float lanes[8];
    _mm256_storeu_ps(lanes, acc[r]);
    y[r] = qa_fold8(lanes);
  }
}

// Weight rows j of a Q6_K weight (k a multiple of 256) to y[r ldy + j];
// the switch makes |xrows| a constant in each inlined row.
QA_VNNI_DIRECT static void qa_direct_q6k_vnni(const uint8_t *w,
                                              uint64_t row_bytes,
                                              uint64_t nrows,
                                              const qa_xrow_t *x,
                                              uint32_t xrows, uint64_t k,
                                              float *y, uint64_t ldy) {
  float o[QA_DIRECT_MAX_M];
  for (uint64_t j = 0; j < nrows; ++j) {
    const uint8_t *row = w + j * row_bytes;
    switch (xrows) {
      case 1: qa_q6k_vnni_row(row, x, 1, k, o); break;
      case 2: qa_q6k_vnni_row(row, x, 2, k, o); break;
      case 3: qa_q6k_vnni_row(row, x, 3, k, o); break;
      default: qa_q6k_vnni_row(row, x, 4, k, o);
    }
    for (uint32_t r = 0; r < xrows; ++r) y[r * ldy + j] = o[r];
  }
}

// Q6_K rows of a direct path: the generic loop (its M through qa_wdot's
// madd), or with VNNI the unsigned-field loop above.
#define QA_Q6K_GENERIC(NAME, ...) NAME##_rows(QA_Q6_K, __VA_ARGS__)
#define QA_Q6K_UNSIGNED(NAME, ...) qa_direct_q6k_vnni(__VA_ARGS__)
QA_DEFINE_DIRECT(qa_direct_avx2, QA_AVX2_DIRECT, qa_wdot, QA_Q6K_GENERIC)
// Q6_K, the one type with M, has its own loop: vpdpbusd serves every type
// that reaches the generic one.
QA_DEFINE_DIRECT(qa_direct_vnni, QA_VNNI_DIRECT, qa_wdot_vnni,
                 QA_Q6K_UNSIGNED)


// 0 portable, 1 AVX2 (and F16C), 2 AVX2 with AVX512-VNNI: the best the CPU
// has, capped by ACCEL_KP_VECTOR (0: portable, 1: AVX2). Every level gives
// the same bits.
static int qa_vector_level(void) {
  int level = !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("f16c")
                  ? 0
              : __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512vnni")
                  ? 2
                  : 1;
  const char *cap = getenv("ACCEL_KP_VECTOR");
  if (cap != NULL && cap[0] >= '0' && cap[0] < '0' + level) {
    level = cap[0] - '0';
  }
  return level;
}
#else
static int qa_vector_level(void) {
  return 0;
}
#endif

// The weight rows [j0, j1) of this work-group's units (|tile| per unit);
// false when it has none (or m or k is 0).
static inline int qa_unit_rows(const accel_kernel_dispatch_t *d,
                               const accel_kernel_workgroup_t *wg,
                               const accel_kp_qmatmul_constants_t *c,
                               uint64_t tile, uint64_t *j0, uint64_t *j1) {
  kp_range_t units = kp_units(d, wg, accel_kp_qmatmul_units(c));
  *j0 = units.begin * tile;
  *j1 = units.end * tile;
  if (*j1 > c->n) *j1 = c->n;
  return *j0 < *j1 && c->m != 0 && c->k != 0;
}

// The thread's scratch (kernel ABI 1.3; kp_scratch) of |bytes| for a launch
// of |f| with quantized activations: it keeps x quantized across the
// work-groups this thread runs in the launch. NULL after failing the launch
// with a message.
static inline uint8_t *qa_scratch(const accel_kernel_dispatch_t *d,
                                  const accel_kernel_workgroup_t *wg,
                                  const qa_format_t *f, uint64_t bytes,
                                  int *fresh, int *owned) {
  uint8_t *scratch = kp_scratch(d, wg, bytes, fresh, owned);
  if (scratch == NULL) {
    kp_fail(d, wg, "%s: cannot allocate %llu bytes of quantized activations",
            f->name, (unsigned long long)bytes);
  }
  return scratch;
}

// Runs a checked launch of |type| with ACCEL_KP_QFLAG_Q8_ACTIVATIONS: x, w
// and y are bindings 0, 1 and 2 and hold what |c| describes; |tile| output
// columns per unit.
static int32_t qa_matmul(const accel_kernel_dispatch_t *d,
                         const accel_kernel_workgroup_t *wg,
                         const accel_kp_qmatmul_constants_t *c,
                         enum qa_type type, uint64_t tile) {
  const qa_format_t *f = &k_qa_formats[type];
  const float *x = d->bindings[0].data;
  const uint8_t *wbytes = d->bindings[1].data;
  float *y = d->bindings[2].data;
  uint64_t j0, j1;
  if (!qa_unit_rows(d, wg, c, tile, &j0, &j1)) {
    return 0;
  }
  uint64_t k = c->k, groups = k / QA_GROUP, m = c->m;
  uint64_t row_bytes = k / f->block * f->bytes;
  // One allocation: x quantized (m k int8, m groups scales and sums), then
  // QA_ROWS unpacked weight rows (k int8, groups A and B, 2 + 4 groups M).
  uint64_t x_bytes = m * k + m * groups * (sizeof(float) + 3 * sizeof(int32_t));
  uint64_t w_bytes = QA_ROWS * (k + groups * (2 * sizeof(float) +
                                              6 * sizeof(int16_t)));
  int fresh, owned;
  uint8_t *scratch = qa_scratch(d, wg, f, x_bytes + w_bytes, &fresh, &owned);
  if (scratch == NULL) {
    return 1;
  }
  float *xd = (float *)scratch;
  int32_t *xs = (int32_t *)(xd + m * groups);
  int32_t *xh = xs + m * groups;  // qa_xrow_t.h: 2 per group
  float *wa = (float *)(xh + 2 * m * groups);
  float *wb = wa + QA_ROWS * groups;
  int16_t *wm = (int16_t *)(wb + QA_ROWS * groups);
  int16_t *wmv = wm + QA_ROWS * 2 * groups;
  int8_t *xq = (int8_t *)(wmv + QA_ROWS * 4 * groups);
  int8_t *wq = xq + m * k;
  int level = qa_vector_level(), avx2 = level >= 1;
#if defined(__x86_64__)
  if (avx2 && m <= QA_DIRECT_MAX_M && qa_direct_type(type)) {
    qa_xrow_t xr[QA_DIRECT_MAX_M];
    for (uint64_t r = 0; r < m; ++r) {
      if (fresh) {
        qa_quantize_avx2(x + r * k, k, xq + r * k, xd + r * groups,
                         xs + r * groups, xh + 2 * r * groups);
      }
      xr[r] = (qa_xrow_t){xq + r * k, xd + r * groups, xs + r * groups,
                          xh + 2 * r * groups};
    }
    if (level == 2) {
      qa_direct_vnni(type, wbytes + j0 * row_bytes, row_bytes, j1 - j0, xr,
                     (uint32_t)m, k, y + j0, c->n);
    } else {
      qa_direct_avx2(type, wbytes + j0 * row_bytes, row_bytes, j1 - j0, xr,
                     (uint32_t)m, k, y + j0, c->n);
    }
    kp_scratch_free(scratch, owned);
    return 0;
  }
#endif
  // Interleaving costs a transpose per weight row, which pays when the row
  // meets two rows of x or more; a GEMV sums each group horizontally.
  int interleaved = m >= 2;
  for (uint64_t r = 0; fresh && r < m; ++r) {
#if defined(__x86_64__)
    if (avx2) {
      qa_quantize_avx2(x + r * k, k, xq + r * k, xd + r * groups,
                       xs + r * groups, NULL);
      if (interleaved) qa_interleave(xq + r * k, groups);
      continue;
    }
#endif
    qa_quantize_portable(x + r * k, k, xq + r * k, xd + r * groups,
                         xs + r * groups);
  }
  qa_wrow_t w[QA_ROWS];
  for (uint32_t t = 0; t < QA_ROWS; ++t) {
    w[t] = (qa_wrow_t){.q = wq + t * k, .a = wa + t * groups,
                       .b = wb + t * groups, .mult = wm + t * 2 * groups,
                       .multv = wmv + t * 4 * groups};
  }
  uint32_t per_block = f->block / QA_GROUP;
  for (uint64_t j = j0; j < j1; j += QA_ROWS) {
    uint32_t rows = j1 - j < QA_ROWS ? (uint32_t)(j1 - j) : QA_ROWS;
    for (uint32_t t = 0; t < rows; ++t) {
      const uint8_t *row = wbytes + (j + t) * row_bytes;
#if defined(__x86_64__)
      if (avx2) {
        if (!qa_unpack_row_avx2(type, row, k / f->block, interleaved,
                                &w[t]) &&
            !qa_unpack_row_direct(type, row, groups, &w[t])) {
          for (uint64_t b = 0; b < k / f->block; ++b) {
            f->unpack(row + b * f->bytes, w[t].q + b * f->block,
                      w[t].a + b * per_block, w[t].b + b * per_block,
                      w[t].mult + 2 * b * per_block);
          }
        }
        if (interleaved) qa_interleave(w[t].q, groups);
        continue;
      }
#endif
      for (uint64_t b = 0; b < k / f->block; ++b) {
        f->unpack(row + b * f->bytes, w[t].q + b * f->block,
                  w[t].a + b * per_block, w[t].b + b * per_block,
                  w[t].mult + 2 * b * per_block);
      }
    }
    for (uint64_t r = 0; r < m; ++r) {
      qa_xrow_t xr = {xq + r * k, xd + r * groups, xs + r * groups, NULL};
      float out[QA_ROWS];
#if defined(__x86_64__)
      if (level == 2 && interleaved && rows == QA_ROWS && r + 1 < m) {
        qa_xrow_t pair[2] = {
            xr, {xq + (r + 1) * k, xd + (r + 1) * groups,
                 xs + (r + 1) * groups, NULL}};
        float out2[2][QA_ROWS];
        qa_dot_vnni_2x4(f, pair, w, k, out2);
        for (uint32_t t = 0; t < rows; ++t) {
          y[r * c->n + j + t] = out2[0][t];
          y[(r + 1) * c->n + j + t] = out2[1][t];
        }
        ++r;
        continue;
      }
      if (level == 2) {
        qa_dot_vnni(f, &xr, w, rows, k, interleaved, out);
      } else if (level == 1) {
        qa_dot_avx2(f, &xr, w, rows, k, interleaved, out);
      } else
#endif
      {
        for (uint32_t t = 0; t < rows; ++t) {
          out[t] = qa_dot_portable(f, &xr, &w[t], k);
        }
      }
      for (uint32_t t = 0; t < rows; ++t) y[r * c->n + j + t] = out[t];
    }
  }
  (void)avx2;
  kp_scratch_free(scratch, owned);
  return 0;
}

#endif  // ACCEL_KERNELS_HOST_Q8_ACTIVATIONS_H_
