// Block-quantized matmul / GEMV with 16-bit activations
// (ACCEL_KP_QFLAG_I16_ACTIVATIONS on qmatmul_q8_0 and qmatmul_q4_0): each
// row of x is quantized once per launch and thread to groups of 32 int16
// with an f32 scale, and every 32-element group of a weight row meets it in
// an exact integer dot product. Against 8-bit activations
// (q8_activations.h, llama.cpp's scheme for these types) the activations'
// rounding is 258 times finer, so the result is about as close to the f32
// one as the f32 accumulation allows. Decode runs as fast (bound by the
// weights' bytes; vpdpwssd / vpmaddwd need no sign tricks for a signed
// weight, where vpdpbusd / vpmaddubsw do); batches at about three quarters
// of the 8-bit speed (16 products per instruction, not 32).
//
// The order (kernels/README.md, "16-bit activations"), per row r of x:
// - group g (elements 32g .. 32g + 31): amax = max |x| (a NaN never wins),
//   d = amax / 32767, id = amax > 0 ? 32767 / amax : 0, q = nearbyint(
//   clamp(x id, -32767, 32767)) (clamp: v > -32767 ? v : -32767, then
//   v < 32767 ? v : 32767; nearest-even), S = sum q;
// - weight row j, group g: its integers w as qa_unpack_* stores them (Q8_0
//   signed, Q4_0 unsigned 0 .. 15) and float A (the block's scale);
//   I = sum w q - offset S (offset 8 for Q4_0, else 0; exact in 32 bits:
//   at most 32 x 128 x 32767);
// - c = (d A) (float)I; acc[g % 8] = acc[g % 8] + c in increasing g;
// - y = ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7)).
// The vector path (AVX2, with AVX512-VNNI where present) decodes each
// group of a weight row in registers and meets up to four rows of x there;
// integer sums are exact in any order, and the float steps are the ones
// above, so every path gives the same bits.
#ifndef ACCEL_KERNELS_HOST_I16_ACTIVATIONS_H_
#define ACCEL_KERNELS_HOST_I16_ACTIVATIONS_H_

#include "q8_activations.h"

// Rows of x a weight group meets while it is in registers.
#define QI_TILE 4u

static void qi_quantize_portable(const float *x, uint64_t k, int16_t *q,
                                 float *d, int32_t *s) {
  qa_quantize_levels(x, k, 32767.0f, NULL, q, d, s);
}

// One weight row (unpacked by the format's qa_unpack_*) against one row of
// x, in the order above.
static float qi_dot_portable(const qa_format_t *f, const int16_t *xq,
                             const float *xd, const int32_t *xs,
                             const qa_wrow_t *w, uint64_t k) {
  float acc[8] = {0};
  for (uint64_t g = 0; g < k / QA_GROUP; ++g) {
    int32_t i = 0;
    for (uint32_t e = 0; e < QA_GROUP; ++e) {
      i += (int32_t)w->q[g * QA_GROUP + e] * xq[g * QA_GROUP + e];
    }
    i -= f->offset * xs[g];
    acc[g % 8] = acc[g % 8] + (xd[g] * w->a[g]) * (float)i;
  }
  return qa_fold8(acc);
}

#if defined(__x86_64__)
QA_AVX2 static void qi_quantize_avx2(const float *x, uint64_t k, int16_t *q,
                                     float *d, int32_t *s) {
  qa_quantize_levels_avx2(x, k, 32767.0f, NULL, q, d, s, NULL);
}

// Group h of a Q8_0 / Q4_0 weight row widened to int16: elements 0-15 in
// |lo|, 16-31 in |hi| (Q4_0 unsigned, its offset taken off later).
QA_AVX2 QA_INLINE void qi_group(enum qa_type type, const uint8_t *row,
                                uint64_t h, __m256i *lo, __m256i *hi) {
  if (type == QA_Q8_0) {
    const uint8_t *blk = row + 34 * h;
    *lo = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 2)));
    *hi = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 18)));
  } else {
    const __m128i low4 = _mm_set1_epi8(0x0f);
    __m128i v = _mm_loadu_si128((const __m128i *)(row + 18 * h + 2));
    *lo = _mm256_cvtepu8_epi16(_mm_and_si128(v, low4));
    *hi = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), low4));
  }
}

// The exact products of one widened group and 32 int16 of x, as eight
// 32-bit lanes (AVX2: vpmaddwd; VNNI: vpdpwssd).
QA_AVX2 QA_INLINE __m256i qi_dot_avx2(__m256i lo, __m256i hi,
                                      const int16_t *xq) {
  return _mm256_add_epi32(
      _mm256_madd_epi16(lo, _mm256_loadu_si256((const __m256i *)xq)),
      _mm256_madd_epi16(hi, _mm256_loadu_si256((const __m256i *)(xq + 16))));
}

#define QI_VNNI __attribute__((target("avx2,f16c,avx512vl,avx512vnni")))
QI_VNNI QA_INLINE __m256i qi_dot_vnni(__m256i lo, __m256i hi,
                                      const int16_t *xq) {
  __m256i p = _mm256_dpwssd_epi32(
      _mm256_setzero_si256(), lo, _mm256_loadu_si256((const __m256i *)xq));
  return _mm256_dpwssd_epi32(
      p, hi, _mm256_loadu_si256((const __m256i *)(xq + 16)));
}

// One weight row (|a|: its groups' A) against |xrows| rows of x (a
// constant where this inlines) under TARGET, products by DOT.
#define QI_DEFINE_ROW(NAME, TARGET, DOT)                                      \
  TARGET QA_INLINE void NAME##_row(enum qa_type type, const uint8_t *row,     \
                                   const float *a, const int16_t *const *xq,  \
                                   const float *const *xd,                    \
                                   const int32_t *const *xs, uint32_t xrows,  \
                                   uint64_t k, float *y) {                    \
    uint64_t groups = k / QA_GROUP, g = 0;                                    \
    int32_t offset = k_qa_formats[type].offset;                               \
    __m256 acc[QI_TILE];                                                      \
    for (uint32_t r = 0; r < xrows; ++r) acc[r] = _mm256_setzero_ps();       \
    for (; g + 8 <= groups; g += 8) {                                         \
      __m256i p[QI_TILE][8];                                                  \
      for (int i = 0; i < 8; ++i) {                                           \
        __m256i lo, hi;                                                       \
        qi_group(type, row, g + i, &lo, &hi);                                 \
        for (uint32_t r = 0; r < xrows; ++r) {                                \
          p[r][i] = DOT(lo, hi, xq[r] + (g + i) * QA_GROUP);                  \
        }                                                                     \
      }                                                                       \
      __m256 va = _mm256_loadu_ps(a + g);                                     \
      for (uint32_t r = 0; r < xrows; ++r) {                                  \
        __m256i sum = _mm256_sub_epi32(                                       \
            qa_hsum8(p[r]),                                                   \
            _mm256_mullo_epi32(                                               \
                _mm256_set1_epi32(offset),                                    \
                _mm256_loadu_si256((const __m256i *)(xs[r] + g))));           \
        __m256 c = _mm256_mul_ps(                                             \
            _mm256_mul_ps(_mm256_loadu_ps(xd[r] + g), va),                    \
            _mm256_cvtepi32_ps(sum));                                         \
        acc[r] = _mm256_add_ps(acc[r], c);                                    \
      }                                                                       \
    }                                                                         \
    float lanes[QI_TILE][8];                                                  \
    for (uint32_t r = 0; r < xrows; ++r) _mm256_storeu_ps(lanes[r], acc[r]);  \
    for (uint64_t h = g; h < groups; ++h) {                                   \
      __m256i lo, hi;                                                         \
      qi_group(type, row, h, &lo, &hi);                                       \
      for (uint32_t r = 0; r < xrows; ++r) {                                  \
        int32_t i = qa_hsum(DOT(lo, hi, xq[r] + h * QA_GROUP)) -              \
                    offset * xs[r][h];                                        \
        lanes[r][h % 8] = lanes[r][h % 8] + (xd[r][h] * a[h]) * (float)i;     \
      }                                                                       \
    }                                                                         \
    for (uint32_t r = 0; r < xrows; ++r) y[r] = qa_fold8(lanes[r]);           \
  }                                                                           \
  /* Weight rows [j0, j1) against every row of x, QI_TILE rows at a time;  \
     the switches make the type and the tile's row count constants. */     \
  TARGET static void NAME(enum qa_type type, const uint8_t *w,                \
                          uint64_t row_bytes, uint64_t j0, uint64_t j1,       \
                          const int16_t *xq, const float *xd,                 \
                          const int32_t *xs, uint64_t m, uint64_t k,          \
                          float *a, float *y, uint64_t ldy) {                 \
    uint64_t groups = k / QA_GROUP, bytes = type == QA_Q8_0 ? 34 : 18;       \
    for (uint64_t j = j0; j < j1; ++j) {                                      \
      const uint8_t *row = w + j * row_bytes;                                 \
      for (uint64_t h = 0; h < groups; ++h) a[h] = qa_f16_f16c(row + h * bytes); \
      for (uint64_t r0 = 0; r0 < m; r0 += QI_TILE) {                          \
        uint32_t rows = m - r0 < QI_TILE ? (uint32_t)(m - r0) : QI_TILE;     \
        const int16_t *tq[QI_TILE];                                           \
        const float *td[QI_TILE];                                             \
        const int32_t *ts[QI_TILE];                                           \
        for (uint32_t r = 0; r < rows; ++r) {                                 \
          tq[r] = xq + (r0 + r) * k;                                          \
          td[r] = xd + (r0 + r) * groups;                                     \
          ts[r] = xs + (r0 + r) * groups;                                     \
        }                                                                     \
        float o[QI_TILE];                                                     \
        if (type == QA_Q8_0) {                                                \
          switch (rows) {                                                     \
            case 1: NAME##_row(QA_Q8_0, row, a, tq, td, ts, 1, k, o); break;  \
            case 2: NAME##_row(QA_Q8_0, row, a, tq, td, ts, 2, k, o); break;  \
            case 3: NAME##_row(QA_Q8_0, row, a, tq, td, ts, 3, k, o); break;  \
            default: NAME##_row(QA_Q8_0, row, a, tq, td, ts, 4, k, o);        \
          }                                                                   \
        } else {                                                              \
          switch (rows) {                                                     \
            case 1: NAME##_row(QA_Q4_0, row, a, tq, td, ts, 1, k, o); break;  \
            case 2: NAME##_row(QA_Q4_0, row, a, tq, td, ts, 2, k, o); break;  \
            case 3: NAME##_row(QA_Q4_0, row, a, tq, td, ts, 3, k, o); break;  \
            default: NAME##_row(QA_Q4_0, row, a, tq, td, ts, 4, k, o);        \
          }                                                                   \
        }                                                                     \
        for (uint32_t r = 0; r < rows; ++r) y[(r0 + r) * ldy + j] = o[r];     \
      }                                                                       \
    }                                                                         \
  }

QI_DEFINE_ROW(qi_rows_avx2, QA_AVX2_F16C, qi_dot_avx2)
QI_DEFINE_ROW(qi_rows_vnni, QI_VNNI, qi_dot_vnni)

// Batches (more than QI_TILE rows of x, as prefill has) interleave each run
// of eight groups so that 32-bit lane l of every product vector belongs to
// group l: step t (0 .. 15) of a run holds elements 2t and 2t + 1 of its
// eight groups, and the sixteen steps' vpdpwssd / vpmaddwd accumulate each
// group's exact sum in its own lane, with no horizontal sums. x is
// interleaved once per launch and thread, weight rows once per tile of four
// that meets every row of x, two at a time.

// The 8 x 8 transpose of 32-bit lanes: out[t] lane l = in[l] lane t.
QA_AVX2 QA_INLINE void qi_transpose8(const __m256i in[8], __m256i out[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    out[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
    out[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
  }
}

// The complete runs of |groups| groups of 32 int16 at |q| (group-major)
// interleaved into |out| (steps as above).
QA_AVX2 static void qi_interleave(const int16_t *q, uint64_t groups,
                                  int16_t *out) {
  for (uint64_t b = 0; b + 8 <= groups; b += 8) {
    __m256i in[8], tr[8];
    for (int half = 0; half < 2; ++half) {
      for (int l = 0; l < 8; ++l) {
        in[l] = _mm256_loadu_si256(
            (const __m256i *)(q + (b + l) * QA_GROUP + 16 * half));
      }
      qi_transpose8(in, tr);
      for (int t = 0; t < 8; ++t) {
        _mm256_storeu_si256(
            (__m256i *)(out + b * QA_GROUP + (8 * half + t) * 16), tr[t]);
      }
    }
  }
}

// Weight row |row| widened (qi_group) and interleaved into |out|, its
// groups' A into |a|.
QA_AVX2_F16C static void qi_interleave_row(enum qa_type type,
                                           const uint8_t *row,
                                           uint64_t groups, int16_t *out,
                                           float *a) {
  uint64_t bytes = type == QA_Q8_0 ? 34 : 18;
  for (uint64_t h = 0; h < groups; ++h) a[h] = qa_f16_f16c(row + h * bytes);
  for (uint64_t b = 0; b + 8 <= groups; b += 8) {
    __m256i lo[8], hi[8], tr[8];
    for (int l = 0; l < 8; ++l) qi_group(type, row, b + l, &lo[l], &hi[l]);
    qi_transpose8(lo, tr);
    for (int t = 0; t < 8; ++t) {
      _mm256_storeu_si256((__m256i *)(out + b * QA_GROUP + t * 16), tr[t]);
    }
    qi_transpose8(hi, tr);
    for (int t = 0; t < 8; ++t) {
      _mm256_storeu_si256((__m256i *)(out + b * QA_GROUP + (8 + t) * 16),
                          tr[t]);
    }
  }
}

QA_AVX2 QA_INLINE __m256i qi_acc_avx2(__m256i acc, __m256i w, __m256i x) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(w, x));
}
QI_VNNI QA_INLINE __m256i qi_acc_vnni(__m256i acc, __m256i w, __m256i x) {
  return _mm256_dpwssd_epi32(acc, w, x);
}

// One tile: |wrows| interleaved weight rows against |xrows| rows of x
// (both constants where this inlines) into out[r][t], under TARGET with
// ACC; the groups past the last run from the row bytes and the plain x, as
// qi_rows does them.
#define QI_DEFINE_TILE(NAME, TARGET, ACC, DOT)                                \
  TARGET QA_INLINE void NAME##_tile(                                          \
      enum qa_type type, const int16_t *const *wi, const float *const *a,     \
      const uint8_t *const *rows, uint32_t wrows, const int16_t *const *xi,   \
      const int16_t *const *xq, const float *const *xd,                       \
      const int32_t *const *xs, uint32_t xrows, uint64_t k,                   \
      float out[2][QA_ROWS]) {                                                \
    uint64_t groups = k / QA_GROUP, g = 0;                                    \
    int32_t offset = k_qa_formats[type].offset;                               \
    __m256 f[2][QA_ROWS];                                                     \
    for (uint32_t r = 0; r < xrows; ++r)                                      \
      for (uint32_t t = 0; t < wrows; ++t) f[r][t] = _mm256_setzero_ps();     \
    for (; g + 8 <= groups; g += 8) {                                         \
      __m256i acc[2][QA_ROWS];                                                \
      for (uint32_t r = 0; r < xrows; ++r)                                    \
        for (uint32_t t = 0; t < wrows; ++t)                                  \
          acc[r][t] = _mm256_setzero_si256();                                 \
      for (int step = 0; step < 16; ++step) {                                 \
        __m256i xv[2];                                                        \
        for (uint32_t r = 0; r < xrows; ++r) {                                \
          xv[r] = _mm256_loadu_si256(                                         \
              (const __m256i *)(xi[r] + g * QA_GROUP + 16 * step));           \
        }                                                                     \
        for (uint32_t t = 0; t < wrows; ++t) {                                \
          __m256i wv = _mm256_loadu_si256(                                    \
              (const __m256i *)(wi[t] + g * QA_GROUP + 16 * step));           \
          for (uint32_t r = 0; r < xrows; ++r) {                              \
            acc[r][t] = ACC(acc[r][t], wv, xv[r]);                            \
          }                                                                   \
        }                                                                     \
      }                                                                       \
      for (uint32_t r = 0; r < xrows; ++r) {                                  \
        __m256 vd = _mm256_loadu_ps(xd[r] + g);                               \
        __m256i vs = _mm256_mullo_epi32(                                      \
            _mm256_set1_epi32(offset),                                        \
            _mm256_loadu_si256((const __m256i *)(xs[r] + g)));                \
        for (uint32_t t = 0; t < wrows; ++t) {                                \
          __m256 c = _mm256_mul_ps(                                           \
              _mm256_mul_ps(vd, _mm256_loadu_ps(a[t] + g)),                   \
              _mm256_cvtepi32_ps(_mm256_sub_epi32(acc[r][t], vs)));           \
          f[r][t] = _mm256_add_ps(f[r][t], c);                                \
        }                                                                     \
      }                                                                       \
    }                                                                         \
    for (uint32_t r = 0; r < xrows; ++r) {                                    \
      for (uint32_t t = 0; t < wrows; ++t) {                                  \
        float lanes[8];                                                       \
        _mm256_storeu_ps(lanes, f[r][t]);                                     \
        for (uint64_t h = g; h < groups; ++h) {                               \
          __m256i lo, hi;                                                     \
          qi_group(type, rows[t], h, &lo, &hi);                               \
          int32_t i = qa_hsum(DOT(lo, hi, xq[r] + h * QA_GROUP)) -            \
                      offset * xs[r][h];                                      \
          lanes[h % 8] = lanes[h % 8] + (xd[r][h] * a[t][h]) * (float)i;      \
        }                                                                     \
        out[r][t] = qa_fold8(lanes);                                          \
      }                                                                       \
    }                                                                         \
  }                                                                           \
  /* The tile with its row counts and type made constants. */              \
  TARGET QA_INLINE void NAME##_tile_w(                                        \
      enum qa_type type, const int16_t *const *wi, const float *const *a,     \
      const uint8_t *const *rows, uint32_t wrows, const int16_t *const *xi,   \
      const int16_t *const *xq, const float *const *xd,                       \
      const int32_t *const *xs, uint32_t xrows, uint64_t k,                   \
      float out[2][QA_ROWS]) {                                                \
    switch (wrows * 2 + xrows) {                                              \
      case 3: NAME##_tile(type, wi, a, rows, 1, xi, xq, xd, xs, 1, k, out); return; \
      case 4: NAME##_tile(type, wi, a, rows, 1, xi, xq, xd, xs, 2, k, out); return; \
      case 5: NAME##_tile(type, wi, a, rows, 2, xi, xq, xd, xs, 1, k, out); return; \
      case 6: NAME##_tile(type, wi, a, rows, 2, xi, xq, xd, xs, 2, k, out); return; \
      case 7: NAME##_tile(type, wi, a, rows, 3, xi, xq, xd, xs, 1, k, out); return; \
      case 8: NAME##_tile(type, wi, a, rows, 3, xi, xq, xd, xs, 2, k, out); return; \
      case 9: NAME##_tile(type, wi, a, rows, 4, xi, xq, xd, xs, 1, k, out); return; \
      default: NAME##_tile(type, wi, a, rows, 4, xi, xq, xd, xs, 2, k, out); \
    }                                                                         \
  }                                                                           \
  /* Weight rows [j0, j1), QA_ROWS at a time, against every row of x (|xi|  \
     interleaved); |wi| and |a| scratch for QA_ROWS rows. */                \
  TARGET static void NAME(enum qa_type type, const uint8_t *w,                \
                          uint64_t row_bytes, uint64_t j0, uint64_t j1,       \
                          const int16_t *xi, const int16_t *xq,               \
                          const float *xd, const int32_t *xs, uint64_t m,     \
                          uint64_t k, int16_t *wi, float *a, float *y,        \
                          uint64_t ldy) {                                     \
    uint64_t groups = k / QA_GROUP;                                           \
    for (uint64_t j = j0; j < j1; j += QA_ROWS) {                             \
      uint32_t wrows = j1 - j < QA_ROWS ? (uint32_t)(j1 - j) : QA_ROWS;      \
      const int16_t *tw[QA_ROWS];                                             \
      const float *ta[QA_ROWS];                                               \
      const uint8_t *tr[QA_ROWS];                                             \
      for (uint32_t t = 0; t < wrows; ++t) {                                  \
        tr[t] = w + (j + t) * row_bytes;                                      \
        qi_interleave_row(type, tr[t], groups, wi + t * k, a + t * groups);   \
        tw[t] = wi + t * k;                                                   \
        ta[t] = a + t * groups;                                               \
      }                                                                       \
      for (uint64_t r0 = 0; r0 < m; r0 += 2) {                                \
        uint32_t xrows = m - r0 < 2 ? 1 : 2;                                  \
        const int16_t *txi[2], *txq[2];                                       \
        const float *txd[2];                                                  \
        const int32_t *txs[2];                                                \
        for (uint32_t r = 0; r < xrows; ++r) {                                \
          txi[r] = xi + (r0 + r) * k;                                         \
          txq[r] = xq + (r0 + r) * k;                                         \
          txd[r] = xd + (r0 + r) * groups;                                    \
          txs[r] = xs + (r0 + r) * groups;                                    \
        }                                                                     \
        float out[2][QA_ROWS];                                                \
        if (type == QA_Q8_0) {                                                \
          NAME##_tile_w(QA_Q8_0, tw, ta, tr, wrows, txi, txq, txd, txs,       \
                        xrows, k, out);                                       \
        } else {                                                              \
          NAME##_tile_w(QA_Q4_0, tw, ta, tr, wrows, txi, txq, txd, txs,       \
                        xrows, k, out);                                       \
        }                                                                     \
        for (uint32_t r = 0; r < xrows; ++r)                                  \
          for (uint32_t t = 0; t < wrows; ++t)                                \
            y[(r0 + r) * ldy + j + t] = out[r][t];                            \
      }                                                                       \
    }                                                                         \
  }

QI_DEFINE_TILE(qi_tiles_avx2, QA_AVX2_F16C, qi_acc_avx2, qi_dot_avx2)
QI_DEFINE_TILE(qi_tiles_vnni, QI_VNNI, qi_acc_vnni, qi_dot_vnni)
#endif

// Runs a checked launch of |type| (QA_Q8_0 or QA_Q4_0) with
// ACCEL_KP_QFLAG_I16_ACTIVATIONS: x, w and y are bindings 0, 1 and 2 and
// hold what |c| describes; |tile| output columns per unit.
static int32_t qi_matmul(const accel_kernel_dispatch_t *d,
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
  uint64_t row_bytes = groups * f->bytes;
  // x quantized (m k int16, m groups scales and sums) and for batches
  // interleaved (m k int16), kept across the thread's work-groups of the
  // launch (kernel ABI 1.3); then QA_ROWS weight rows, interleaved (k
  // int16 each) with their A (groups floats each), or for the portable
  // path one row unpacked (k int8, A and B, 2 groups M).
  int level = qa_vector_level(), batch = level >= 1 && m > QI_TILE;
  uint64_t x_bytes = m * k * sizeof(int16_t) * (batch ? 2 : 1) +
                     m * groups * (sizeof(float) + sizeof(int32_t));
  uint64_t w_bytes = QA_ROWS * (k * sizeof(int16_t) + groups * sizeof(float));
  int fresh, owned;
  uint8_t *scratch = qa_scratch(d, wg, f, x_bytes + w_bytes, &fresh, &owned);
  if (scratch == NULL) {
    return 1;
  }
  float *xd = (float *)scratch;
  int32_t *xs = (int32_t *)(xd + m * groups);
  float *wa = (float *)(xs + m * groups);  // QA_ROWS groups
  int16_t *xq = (int16_t *)(wa + QA_ROWS * groups);
  int16_t *wi = xq + m * k;  // QA_ROWS k
  int16_t *xi = wi + QA_ROWS * k;  // batches: m k
  for (uint64_t r = 0; fresh && r < m; ++r) {
#if defined(__x86_64__)
    if (level >= 1) {
      qi_quantize_avx2(x + r * k, k, xq + r * k, xd + r * groups,
                       xs + r * groups);
      if (batch) qi_interleave(xq + r * k, groups, xi + r * k);
      continue;
    }
#endif
    qi_quantize_portable(x + r * k, k, xq + r * k, xd + r * groups,
                         xs + r * groups);
  }
#if defined(__x86_64__)
  if (level == 2 && batch) {
    qi_tiles_vnni(type, wbytes, row_bytes, j0, j1, xi, xq, xd, xs, m, k, wi,
                  wa, y, c->n);
  } else if (level == 1 && batch) {
    qi_tiles_avx2(type, wbytes, row_bytes, j0, j1, xi, xq, xd, xs, m, k, wi,
                  wa, y, c->n);
  } else if (level == 2) {
    qi_rows_vnni(type, wbytes, row_bytes, j0, j1, xq, xd, xs, m, k, wa, y,
                 c->n);
  } else if (level == 1) {
    qi_rows_avx2(type, wbytes, row_bytes, j0, j1, xq, xd, xs, m, k, wa, y,
                 c->n);
  }
  if (level >= 1) {
    kp_scratch_free(scratch, owned);
    return 0;
  }
#endif
  // The portable path unpacks one row into the interleaved rows' space.
  int8_t *wq = (int8_t *)wi;
  float *wb = wa + groups;
  int16_t *wm = (int16_t *)(wb + groups);
  qa_wrow_t w = {.q = wq, .a = wa, .b = wb, .mult = wm};
  for (uint64_t j = j0; j < j1; ++j) {
    const uint8_t *row = wbytes + j * row_bytes;
    for (uint64_t b = 0; b < groups; ++b) {
      f->unpack(row + b * f->bytes, w.q + b * QA_GROUP, w.a + b, w.b + b,
                w.mult + 2 * b);
    }
    for (uint64_t r = 0; r < m; ++r) {
      y[r * c->n + j] = qi_dot_portable(f, xq + r * k, xd + r * groups,
                                        xs + r * groups, &w, k);
    }
  }
  kp_scratch_free(scratch, owned);
  return 0;
}

#endif  // ACCEL_KERNELS_HOST_I16_ACTIVATIONS_H_
