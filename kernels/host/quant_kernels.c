// Quantized matmul / GEMV (kernel_params.h, "qmatmul_*"): y = x W^T with W
// int8 per-channel, int4 group-wise, GGUF Q8_0 or Q4_0. Decode (m = 1) reads
// every weight byte once and is bound by memory bandwidth, so the weights are
// never expanded to f32 in memory: each 16-element chunk is decoded into
// registers and multiplied there.
//
// Reduction order (kernels/README.md): 16 lanes. int8: acc[i % 16] +=
// x[i] * q[i] over the row, y = fold(acc) * scale. Grouped formats: per
// group, t[l] += x[e] * (float)(q[e] - zero) over the group's chunks (lane l
// of a chunk takes element e = 16c + l, or for int4 the nibble order of
// chunk_x), then acc[l] += scale * t[l]; y = fold(acc). The AVX2 and AVX-512
// paths perform the same roundings in the same order as the portable one
// (no FMA: the kernels build with -ffp-contract=off); ACCEL_KP_VECTOR=0, 1
// or 2 caps the path (tests compare them).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_list.h"
#include "kernel_util.h"
#include "i16_activations.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// Helpers of the vector paths are inlined into them, so that no legacy-SSE
// code runs between AVX-512 instructions (a state transition per call).
#define KP_INLINE static inline __attribute__((always_inline))

enum qformat { Q_INT8, Q_INT4, Q_Q8_0, Q_Q4_0 };

// One launch's weight view.
typedef struct qweights {
  enum qformat format;
  uint64_t k;
  uint32_t group;  // elements per scale (int4, Q8_0, Q4_0)
  int is_signed;   // int4: i4 nibbles, no zero points
  const uint8_t *w;
  const float *scale;
  const uint8_t *zero;
} qweights_t;

KP_INLINE uint64_t row_bytes(const qweights_t *q) {
  switch (q->format) {
    case Q_INT8:
      return q->k;
    case Q_INT4:
      return q->k / 2;
    case Q_Q8_0:
      return q->k / ACCEL_KP_QK * sizeof(accel_kp_block_q8_0_t);
    default:
      return q->k / ACCEL_KP_QK * sizeof(accel_kp_block_q4_0_t);
  }
}

// Group |g| of row |j|: its scale and zero point, and the row's bytes.
KP_INLINE float group_scale(const qweights_t *q, const uint8_t *row, uint64_t j,
                         uint64_t g) {
  if (q->format == Q_INT4) {
    return q->scale[j * (q->k / q->group) + g];
  }
  uint16_t d;
  memcpy(&d, row + g * (q->format == Q_Q8_0 ? 34u : 18u), sizeof(d));
  return accel_kp_f16_to_f32(d);
}

KP_INLINE int32_t group_zero(const qweights_t *q, uint64_t j, uint64_t g) {
  if (q->format == Q_Q4_0) {
    return 8;
  }
  if (q->format == Q_INT4) {
    return q->is_signed ? 8 : q->zero[j * (q->k / q->group) + g];
  }
  return 0;
}

// The 16 quantized values of chunk |c| of group |g| of |row|, as stored
// (before the zero point); i4 nibbles are flipped (v ^ 8) so that q - 8 is
// their signed value. Chunks 2b and 2b + 1 hold the 32 elements of block b
// of the group: for Q8_0 and Q4_0 elements 32b + 16(c % 2) + l (lane l);
// for int4, whose byte l holds elements 2l and 2l + 1, the low nibbles
// (elements 32b + 2l) then the high ones (32b + 2l + 1). chunk_x gives the
// matching x index.
static void chunk_values(const qweights_t *q, const uint8_t *row, uint64_t g,
                         uint32_t c, int32_t out[16]) {
  if (q->format == Q_INT4) {
    const uint8_t *p = row + (g * q->group + 32u * (c / 2)) / 2;
    for (int l = 0; l < 16; ++l) {
      int32_t v = (p[l] >> (4 * (c & 1))) & 0x0f;
      out[l] = q->is_signed ? v ^ 8 : v;
    }
  } else if (q->format == Q_Q8_0) {
    const int8_t *p = (const int8_t *)(row + g * 34u + 2u + 16u * c);
    for (int l = 0; l < 16; ++l) out[l] = p[l];
  } else {
    const uint8_t *p = row + g * 18u + 2u;
    for (int l = 0; l < 16; ++l) out[l] = (p[l] >> (4 * c)) & 0x0f;
  }
}

// Index of the x value that lane |l| of chunk |c| multiplies, relative to
// the group's first element.
static uint32_t chunk_x(const qweights_t *q, uint32_t c, uint32_t l) {
  return q->format == Q_INT4 ? 32u * (c / 2) + 2u * l + (c & 1) : 16u * c + l;
}

static float dot_int8_portable(const float *x, const int8_t *w, uint64_t k) {
  float acc[KP_LANES] = {0};
  for (uint64_t i = 0; i < k; ++i) {
    acc[i % KP_LANES] = acc[i % KP_LANES] + x[i] * (float)w[i];
  }
  return kp_fold(acc);
}

static float dot_groups_portable(const qweights_t *q, const float *x,
                                 uint64_t j) {
  const uint8_t *row = q->w + j * row_bytes(q);
  float acc[KP_LANES] = {0};
  uint32_t chunks = q->group / 16;
  for (uint64_t g = 0; g < q->k / q->group; ++g) {
    float t[KP_LANES] = {0};
    int32_t zero = group_zero(q, j, g);
    for (uint32_t c = 0; c < chunks; ++c) {
      int32_t v[16];
      chunk_values(q, row, g, c, v);
      const float *xg = x + g * q->group;
      for (uint32_t l = 0; l < 16; ++l) {
        t[l] = t[l] + xg[chunk_x(q, c, l)] * (float)(v[l] - zero);
      }
    }
    float s = group_scale(q, row, j, g);
    for (int l = 0; l < KP_LANES; ++l) acc[l] = acc[l] + s * t[l];
  }
  return kp_fold(acc);
}

#if defined(__x86_64__)
#define KP_AVX2 __attribute__((target("avx2")))

KP_AVX2 static float fold_avx2(__m256 lo, __m256 hi) {
  float acc[KP_LANES];
  _mm256_storeu_ps(acc, lo);
  _mm256_storeu_ps(acc + 8, hi);
  return kp_fold(acc);
}

KP_AVX2 static float dot_int8_avx2(const float *x, const int8_t *w,
                                   uint64_t k) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  uint64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    __m128i q = _mm_loadu_si128((const __m128i *)(w + i));
    __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
    __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)));
    a0 = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_loadu_ps(x + i), w0));
    a1 = _mm256_add_ps(a1, _mm256_mul_ps(_mm256_loadu_ps(x + i + 8), w1));
  }
  float acc[KP_LANES];
  _mm256_storeu_ps(acc, a0);
  _mm256_storeu_ps(acc + 8, a1);
  for (; i < k; ++i) {
    acc[i % KP_LANES] = acc[i % KP_LANES] + x[i] * (float)w[i];
  }
  return kp_fold(acc);
}

// The 16 values of one chunk as bytes (see chunk_values); |*is_signed| says
// whether they are int8 (Q8_0) or unsigned. SSE2 only, so that both vector
// paths inline it.
KP_INLINE __m128i chunk_bytes_f(const qweights_t *q, enum qformat format,
                                const uint8_t *row, uint64_t g, uint32_t c,
                                int *is_signed) {
  const __m128i low4 = _mm_set1_epi8(0x0f);
  *is_signed = format == Q_Q8_0;
  if (format == Q_INT4) {
    __m128i p = _mm_loadu_si128(
        (const __m128i *)(row + (g * q->group + 32u * (c / 2)) / 2));
    __m128i bytes = _mm_and_si128((c & 1) ? _mm_srli_epi16(p, 4) : p, low4);
    return q->is_signed ? _mm_xor_si128(bytes, _mm_set1_epi8(8)) : bytes;
  }
  if (format == Q_Q8_0) {
    return _mm_loadu_si128((const __m128i *)(row + g * 34u + 2u + 16u * c));
  }
  __m128i p = _mm_loadu_si128((const __m128i *)(row + g * 18u + 2u));
  return _mm_and_si128(c ? _mm_srli_epi16(p, 4) : p, low4);
}

KP_INLINE __m128i chunk_bytes(const qweights_t *q, const uint8_t *row,
                              uint64_t g, uint32_t c, int *is_signed) {
  return chunk_bytes_f(q, q->format, row, g, c, is_signed);
}

// The 16 values of one chunk as two int32 vectors.
KP_AVX2 static void chunk_avx2(const qweights_t *q, const uint8_t *row,
                               uint64_t g, uint32_t c, __m256i *v0,
                               __m256i *v1) {
  int is_signed;
  __m128i bytes = chunk_bytes(q, row, g, c, &is_signed);
  __m128i high = _mm_srli_si128(bytes, 8);
  *v0 = is_signed ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
  *v1 = is_signed ? _mm256_cvtepi8_epi32(high) : _mm256_cvtepu8_epi32(high);
}

// The x values of chunk |c| (see chunk_x) for lanes 0-7 and 8-15; |xg|
// points at the group's first element.
KP_AVX2 static void chunk_x_avx2(const qweights_t *q, const float *xg,
                                 uint32_t c, __m256 *x0, __m256 *x1) {
  if (q->format != Q_INT4) {
    *x0 = _mm256_loadu_ps(xg + 16u * c);
    *x1 = _mm256_loadu_ps(xg + 16u * c + 8u);
    return;
  }
  const float *xb = xg + 32u * (c / 2);
  int odd = c & 1;
  __m256 half[2];
  for (int h = 0; h < 2; ++h) {
    __m256 a = _mm256_loadu_ps(xb + 16 * h), b = _mm256_loadu_ps(xb + 16 * h + 8);
    // Even (or odd) elements of a and b, in order.
    __m256 e = odd ? _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))
                   : _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    half[h] = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
  }
  *x0 = half[0];
  *x1 = half[1];
}

KP_AVX2 static float dot_groups_avx2(const qweights_t *q, const float *x,
                                     uint64_t j) {
  const uint8_t *row = q->w + j * row_bytes(q);
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  uint32_t chunks = q->group / 16;
  for (uint64_t g = 0; g < q->k / q->group; ++g) {
    __m256 t0 = _mm256_setzero_ps(), t1 = _mm256_setzero_ps();
    __m256i zero = _mm256_set1_epi32(group_zero(q, j, g));
    for (uint32_t c = 0; c < chunks; ++c) {
      __m256i v0, v1;
      chunk_avx2(q, row, g, c, &v0, &v1);
      __m256 x0, x1;
      chunk_x_avx2(q, x + g * q->group, c, &x0, &x1);
      __m256 w0 = _mm256_cvtepi32_ps(_mm256_sub_epi32(v0, zero));
      __m256 w1 = _mm256_cvtepi32_ps(_mm256_sub_epi32(v1, zero));
      t0 = _mm256_add_ps(t0, _mm256_mul_ps(x0, w0));
      t1 = _mm256_add_ps(t1, _mm256_mul_ps(x1, w1));
    }
    __m256 s = _mm256_set1_ps(group_scale(q, row, j, g));
    a0 = _mm256_add_ps(a0, _mm256_mul_ps(s, t0));
    a1 = _mm256_add_ps(a1, _mm256_mul_ps(s, t1));
  }
  return fold_avx2(a0, a1);
}

// AVX-512: one zmm is exactly the 16 lanes. Each lane's sum is a chain of
// dependent adds, so four weight rows run side by side to overlap their
// chains (rows past the end repeat the last row; their results are dropped).
#define KP_AVX512 __attribute__((target("avx512f")))

KP_AVX512 static void fold4_avx512(const __m512 acc[4], float out[4]) {
  for (int r = 0; r < 4; ++r) {
    float lanes[KP_LANES];
    _mm512_storeu_ps(lanes, acc[r]);
    out[r] = kp_fold(lanes);
  }
}

// The x values of chunk |c| (see chunk_x); |xg| points at the group's first
// element.
KP_AVX512 KP_INLINE __m512 chunk_x_avx512(enum qformat format,
                                          const float *xg, uint32_t c) {
  if (format != Q_INT4) {
    return _mm512_loadu_ps(xg + 16u * c);
  }
  const float *xb = xg + 32u * (c / 2);
  __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22,
                                  24, 26, 28, 30);
  idx = _mm512_add_epi32(idx, _mm512_set1_epi32((int)(c & 1)));
  return _mm512_permutex2var_ps(_mm512_loadu_ps(xb), idx,
                                _mm512_loadu_ps(xb + 16));
}

// Specialised per format (|format| is a constant in each caller).
KP_AVX512 KP_INLINE void dot4_groups_f(const qweights_t *q,
                                       enum qformat format, const float *x,
                                       const uint64_t j[4], float out[4]) {
  const uint8_t *row[4];
  __m512 acc[4];
  uint64_t bytes = row_bytes(q);
  for (int r = 0; r < 4; ++r) {
    row[r] = q->w + j[r] * bytes;
    acc[r] = _mm512_setzero_ps();
  }
  uint32_t chunks = q->group / 16;
  for (uint64_t g = 0; g < q->k / q->group; ++g) {
    __m512 t[4];
    __m512i zero[4];
    for (int r = 0; r < 4; ++r) {
      t[r] = _mm512_setzero_ps();
      zero[r] = _mm512_set1_epi32(group_zero(q, j[r], g));
    }
    if (format == Q_Q8_0) {
      for (uint32_t c = 0; c < chunks; ++c) {
        __m512 xv = chunk_x_avx512(format, x + g * q->group, c);
        for (int r = 0; r < 4; ++r) {
          int is_signed;
          __m128i b = chunk_bytes_f(q, format, row[r], g, c, &is_signed);
          __m512i v = _mm512_cvtepi8_epi32(b);
          __m512 wv = _mm512_cvtepi32_ps(_mm512_sub_epi32(v, zero[r]));
          t[r] = _mm512_add_ps(t[r], _mm512_mul_ps(xv, wv));
        }
      }
    } else {
      // 4-bit formats: one 16-byte load holds a block's two chunks (low
      // nibbles, then high), and (float)(q - zero) comes from a 16-entry
      // table of the group's values, which is exact and saves the
      // conversion per element.
      __m512 table[4];
      const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                             10, 11, 12, 13, 14, 15);
      __m512i flip = _mm512_set1_epi32(format == Q_INT4 && q->is_signed ? 8 : 0);
      for (int r = 0; r < 4; ++r) {
        table[r] = _mm512_cvtepi32_ps(
            _mm512_sub_epi32(_mm512_xor_si512(iota, flip), zero[r]));
      }
      const __m512i low4 = _mm512_set1_epi32(0x0f);
      for (uint32_t c = 0; c < chunks; c += 2) {
        __m512 x0 = chunk_x_avx512(format, x + g * q->group, c);
        __m512 x1 = chunk_x_avx512(format, x + g * q->group, c + 1);
        uint64_t offset = format == Q_INT4
                              ? (g * q->group + 16u * c) / 2
                              : g * 18u + 2u;
        for (int r = 0; r < 4; ++r) {
          __m512i v = _mm512_cvtepu8_epi32(
              _mm_loadu_si128((const __m128i *)(row[r] + offset)));
          __m512 w0 = _mm512_permutexvar_ps(_mm512_and_si512(v, low4), table[r]);
          __m512 w1 = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), table[r]);
          t[r] = _mm512_add_ps(t[r], _mm512_mul_ps(x0, w0));
          t[r] = _mm512_add_ps(t[r], _mm512_mul_ps(x1, w1));
        }
      }
    }
    for (int r = 0; r < 4; ++r) {
      __m512 s = _mm512_set1_ps(group_scale(q, row[r], j[r], g));
      acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(s, t[r]));
    }
  }
  fold4_avx512(acc, out);
}

KP_AVX512 static void dot4_groups_avx512(const qweights_t *q, const float *x,
                                         const uint64_t j[4], float out[4]) {
  switch (q->format) {
    case Q_INT4:
      dot4_groups_f(q, Q_INT4, x, j, out);
      break;
    case Q_Q8_0:
      dot4_groups_f(q, Q_Q8_0, x, j, out);
      break;
    default:
      dot4_groups_f(q, Q_Q4_0, x, j, out);
      break;
  }
}

// 0 portable, 1 AVX2, 2 AVX-512: the best the CPU has, capped by
// ACCEL_KP_VECTOR.
static int vector_level(void) {
  int level = __builtin_cpu_supports("avx512f") ? 2
              : __builtin_cpu_supports("avx2") ? 1 : 0;
  const char *cap = getenv("ACCEL_KP_VECTOR");
  if (cap != NULL && cap[0] >= '0' && cap[0] < '0' + level) {
    level = cap[0] - '0';
  }
  return level;
}
#else
static int vector_level(void) {
  return 0;
}
#endif

static float row_dot(const qweights_t *q, int level, const float *x,
                     uint64_t j) {
#if defined(__x86_64__)
  if (level >= 1) {
    return q->format == Q_INT8
               ? dot_int8_avx2(x, (const int8_t *)q->w + j * q->k, q->k) *
                     q->scale[j]
               : dot_groups_avx2(q, x, j);
  }
#endif
  (void)level;
  return q->format == Q_INT8
             ? dot_int8_portable(x, (const int8_t *)q->w + j * q->k, q->k) *
                   q->scale[j]
             : dot_groups_portable(q, x, j);
}

static const char *const k_names[] = {"qmatmul_int8", "qmatmul_int4",
                                      "qmatmul_q8_0", "qmatmul_q4_0"};

// Checks the launch and fills |q|; returns the binding index of y, or -1.
static int qcheck(const accel_kernel_dispatch_t *d,
                  const accel_kernel_workgroup_t *wg, enum qformat format,
                  accel_kp_qmatmul_constants_t *c, qweights_t *q) {
  uint32_t bindings = format == Q_INT8 ? 4 : (format == Q_INT4 ? 5 : 3);
  if (!kp_signature(d, wg, bindings, c, sizeof(*c))) {
    return -1;
  }
  const char *name = k_names[format];
  uint32_t group = format == Q_INT4 ? c->group_size
                                    : (format == Q_INT8 ? 1 : ACCEL_KP_QK);
  uint32_t known = format == Q_INT4 ? ACCEL_KP_QFLAG_SIGNED_I4
                    : format == Q_INT8
                        ? 0
                        : ACCEL_KP_QFLAG_Q8_ACTIVATIONS |
                              ACCEL_KP_QFLAG_I16_ACTIVATIONS;
  if (format == Q_INT4 && group != 32 && group != 64 && group != 128) {
    kp_fail(d, wg, "%s: group_size %u must be 32, 64 or 128", name, group);
    return -1;
  }
  const uint32_t both =
      ACCEL_KP_QFLAG_Q8_ACTIVATIONS | ACCEL_KP_QFLAG_I16_ACTIVATIONS;
  if ((c->flags & both) == both) {
    kp_fail(d, wg, "%s: flags 0x%x ask for 8-bit and 16-bit activations at "
            "once", name, c->flags);
    return -1;
  }
  if (c->k % group != 0 || (c->flags & ~known) != 0 || c->tile_n > 4096 ||
      c->reserved[0] != 0 || c->reserved[1] != 0) {
    kp_fail(d, wg, "%s: k %u must be a multiple of %u; flags 0x%x, tile_n "
            "%u (at most 4096) and reserved fields must be valid", name, c->k,
            group, c->flags, c->tile_n);
    return -1;
  }
  *q = (qweights_t){.format = format,
                    .k = c->k,
                    .group = group,
                    .is_signed = (c->flags & ACCEL_KP_QFLAG_SIGNED_I4) != 0,
                    .w = d->bindings[1].data};
  typedef unsigned __int128 u128;
  if (!kp_binding_holds(d, wg, 0, "x", (u128)c->m * c->k * 4u) ||
      !kp_binding_holds(d, wg, 1, "w", (u128)c->n * row_bytes(q))) {
    return -1;
  }
  uint64_t groups = format == Q_INT8 ? 1 : c->k / group;
  if (format == Q_INT8 || format == Q_INT4) {
    q->scale = d->bindings[2].data;
    if (!kp_binding_holds(d, wg, 2, "scale", (u128)c->n * groups * 4u)) {
      return -1;
    }
  }
  if (format == Q_INT4) {
    q->zero = d->bindings[3].data;
    if (!q->is_signed &&
        !kp_binding_holds(d, wg, 3, "zero", (u128)c->n * groups)) {
      return -1;
    }
  }
  int y = (int)bindings - 1;
  return kp_binding_holds(d, wg, (uint32_t)y, "y", (u128)c->m * c->n * 4u)
             ? y
             : -1;
}

static int32_t qmatmul(const accel_kernel_dispatch_t *d,
                       const accel_kernel_workgroup_t *wg,
                       enum qformat format) {
  accel_kp_qmatmul_constants_t c;
  qweights_t q;
  int y_index = qcheck(d, wg, format, &c, &q);
  if (y_index < 0) {
    return 1;
  }
  uint64_t tile = c.tile_n ? c.tile_n : ACCEL_KP_QMM_TILE_N;
  if (c.flags & ACCEL_KP_QFLAG_Q8_ACTIVATIONS) {
    return qa_matmul(d, wg, &c, format == Q_Q8_0 ? QA_Q8_0 : QA_Q4_0, tile);
  }
  if (c.flags & ACCEL_KP_QFLAG_I16_ACTIVATIONS) {
    return qi_matmul(d, wg, &c, format == Q_Q8_0 ? QA_Q8_0 : QA_Q4_0, tile);
  }
  const float *x = d->bindings[0].data;
  float *y = d->bindings[y_index].data;
  int level = vector_level();
  kp_range_t units = kp_units(d, wg, accel_kp_qmatmul_units(&c));
  uint64_t j0 = units.begin * tile;
  uint64_t j1 = units.end * tile;
  if (j1 > c.n) j1 = c.n;
  // Four weight rows at a time, against every row of x while they are in
  // L1.
  for (uint64_t j = j0; j < j1; j += 4) {
    uint64_t rows = j1 - j < 4 ? j1 - j : 4;
    for (uint64_t r = 0; r < c.m; ++r) {
      float out[4];
#if defined(__x86_64__)
      // int8 stays on AVX2 (one row at a time): on the AMD EPYC this was
      // measured on, it took 1.13 ms per 4096x4096 GEMV against 1.64 ms
      // for four rows in AVX-512; the grouped formats gain from four rows
      // (int4: 1.83 ms against 2.5 ms on AVX2).
      if (level == 2 && q.format != Q_INT8) {
        uint64_t js[4];
        for (uint64_t t = 0; t < 4; ++t) js[t] = j + (t < rows ? t : rows - 1);
        dot4_groups_avx512(&q, x + r * c.k, js, out);
      } else
#endif
      {
        for (uint64_t t = 0; t < rows; ++t) {
          out[t] = row_dot(&q, level, x + r * c.k, j + t);
        }
      }
      for (uint64_t t = 0; t < rows; ++t) y[r * c.n + j + t] = out[t];
    }
  }
  return 0;
}

int32_t qmatmul_int8(const accel_kernel_dispatch_t *d,
                     const accel_kernel_workgroup_t *wg) {
  return qmatmul(d, wg, Q_INT8);
}

int32_t qmatmul_int4(const accel_kernel_dispatch_t *d,
                     const accel_kernel_workgroup_t *wg) {
  return qmatmul(d, wg, Q_INT4);
}

int32_t qmatmul_q8_0(const accel_kernel_dispatch_t *d,
                     const accel_kernel_workgroup_t *wg) {
  return qmatmul(d, wg, Q_Q8_0);
}

int32_t qmatmul_q4_0(const accel_kernel_dispatch_t *d,
                     const accel_kernel_workgroup_t *wg) {
  return qmatmul(d, wg, Q_Q4_0);
}

#ifndef ACCEL_KP_COMBINED
ACCEL_KP_FAMILY_LIBRARY("accel quantized matmul kernels", ACCEL_KP_QUANT_KERNELS, NULL, ACCEL_KP_META_QUANT)
#endif
