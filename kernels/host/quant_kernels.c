// Quantized matmul / GEMV (kernel_params.h, "qmatmul_*"): y = x W^T with W
// int8 per-channel, int4 group-wise, GGUF Q8_0 or Q4_0. Decode (m = 1) reads
// every weight byte once and is bound by memory bandwidth, so the weights are
// never expanded to f32 in memory: each 16-element chunk is decoded into
// registers and multiplied there.
//
// Reduction order (kernels/README.md): 16 lanes, element i of a row in lane
// i % 16. int8: acc[l] += x[i] * q[i] over the row, y = fold(acc) * scale.
// Grouped formats: per group, t[l] += x[i] * (float)(q[i] - zero) over the
// group, then acc[l] += scale * t[l]; y = fold(acc). The AVX2 path performs
// the same roundings in the same order as the portable one (no FMA: the
// kernels build with -ffp-contract=off).
#include <stdint.h>
#include <string.h>

#include "kernel_list.h"
#include "kernel_util.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

static uint64_t row_bytes(const qweights_t *q) {
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
static float group_scale(const qweights_t *q, const uint8_t *row, uint64_t j,
                         uint64_t g) {
  if (q->format == Q_INT4) {
    return q->scale[j * (q->k / q->group) + g];
  }
  uint16_t d;
  memcpy(&d, row + g * (q->format == Q_Q8_0 ? 34u : 18u), sizeof(d));
  return accel_kp_f16_to_f32(d);
}

static int32_t group_zero(const qweights_t *q, uint64_t j, uint64_t g) {
  if (q->format == Q_Q4_0) {
    return 8;
  }
  if (q->format == Q_INT4) {
    return q->is_signed ? 8 : q->zero[j * (q->k / q->group) + g];
  }
  return 0;
}

// The 16 quantized values of chunk |c| (elements 16c .. 16c + 15) of group
// |g| of |row|, as stored (before the zero point); i4 nibbles are flipped
// (v ^ 8) so that q - 8 is their signed value.
static void chunk_values(const qweights_t *q, const uint8_t *row, uint64_t g,
                         uint32_t c, int32_t out[16]) {
  if (q->format == Q_INT4) {
    const uint8_t *p = row + (g * q->group + 16u * c) / 2;
    for (int l = 0; l < 16; ++l) {
      int32_t v = (p[l >> 1] >> ((l & 1) * 4)) & 0x0f;
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
      const float *xc = x + g * q->group + 16u * c;
      for (int l = 0; l < 16; ++l) {
        t[l] = t[l] + xc[l] * (float)(v[l] - zero);
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

// The 16 values of one chunk as two int32 vectors (see chunk_values).
KP_AVX2 static void chunk_avx2(const qweights_t *q, const uint8_t *row,
                               uint64_t g, uint32_t c, __m256i *v0,
                               __m256i *v1) {
  __m128i bytes;
  const __m128i low4 = _mm_set1_epi8(0x0f);
  if (q->format == Q_INT4) {
    __m128i p = _mm_loadl_epi64(
        (const __m128i *)(row + (g * q->group + 16u * c) / 2));
    __m128i lo = _mm_and_si128(p, low4);
    __m128i hi = _mm_and_si128(_mm_srli_epi16(p, 4), low4);
    bytes = _mm_unpacklo_epi8(lo, hi);
    if (q->is_signed) {
      bytes = _mm_xor_si128(bytes, _mm_set1_epi8(8));
    }
  } else if (q->format == Q_Q8_0) {
    __m128i p = _mm_loadu_si128((const __m128i *)(row + g * 34u + 2u + 16u * c));
    *v0 = _mm256_cvtepi8_epi32(p);
    *v1 = _mm256_cvtepi8_epi32(_mm_srli_si128(p, 8));
    return;
  } else {
    __m128i p = _mm_loadu_si128((const __m128i *)(row + g * 18u + 2u));
    bytes = _mm_and_si128(c ? _mm_srli_epi16(p, 4) : p, low4);
  }
  *v0 = _mm256_cvtepu8_epi32(bytes);
  *v1 = _mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8));
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
      const float *xc = x + g * q->group + 16u * c;
      __m256 w0 = _mm256_cvtepi32_ps(_mm256_sub_epi32(v0, zero));
      __m256 w1 = _mm256_cvtepi32_ps(_mm256_sub_epi32(v1, zero));
      t0 = _mm256_add_ps(t0, _mm256_mul_ps(_mm256_loadu_ps(xc), w0));
      t1 = _mm256_add_ps(t1, _mm256_mul_ps(_mm256_loadu_ps(xc + 8), w1));
    }
    __m256 s = _mm256_set1_ps(group_scale(q, row, j, g));
    a0 = _mm256_add_ps(a0, _mm256_mul_ps(s, t0));
    a1 = _mm256_add_ps(a1, _mm256_mul_ps(s, t1));
  }
  return fold_avx2(a0, a1);
}

static int have_avx2(void) {
  return __builtin_cpu_supports("avx2");
}
#else
static int have_avx2(void) {
  return 0;
}
#endif

static float row_dot(const qweights_t *q, int avx2, const float *x,
                     uint64_t j) {
#if defined(__x86_64__)
  if (avx2) {
    return q->format == Q_INT8
               ? dot_int8_avx2(x, (const int8_t *)q->w + j * q->k, q->k) *
                     q->scale[j]
               : dot_groups_avx2(q, x, j);
  }
#endif
  (void)avx2;
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
  uint32_t known = format == Q_INT4 ? ACCEL_KP_QFLAG_SIGNED_I4 : 0;
  if (format == Q_INT4 && group != 32 && group != 64 && group != 128) {
    kp_fail(d, wg, "%s: group_size %u must be 32, 64 or 128", name, group);
    return -1;
  }
  if (c->k % group != 0 || (c->flags & ~known) != 0 || c->reserved[0] != 0 ||
      c->reserved[1] != 0 || c->reserved[2] != 0) {
    kp_fail(d, wg, "%s: k %u must be a multiple of %u; flags 0x%x and "
            "reserved fields must be valid", name, c->k, group, c->flags);
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
  const float *x = d->bindings[0].data;
  float *y = d->bindings[y_index].data;
  int avx2 = have_avx2();
  kp_range_t units = kp_units(d, wg, accel_kp_qmatmul_units(&c));
  uint64_t j0 = units.begin * ACCEL_KP_QMM_TILE_N;
  uint64_t j1 = units.end * ACCEL_KP_QMM_TILE_N;
  if (j1 > c.n) j1 = c.n;
  for (uint64_t j = j0; j < j1; ++j) {
    // All rows of x against weight row j while it is in L1.
    for (uint64_t r = 0; r < c.m; ++r) {
      y[r * c.n + j] = row_dot(&q, avx2, x + r * c.k, j);
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
ACCEL_KP_FAMILY_LIBRARY("accel quantized matmul kernels", ACCEL_KP_QUANT_KERNELS, NULL)
#endif
