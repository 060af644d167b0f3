// Matrix multiply (kernel_params.h, "matmul"): c = act(op(a) op(b) + bias)
// over fixed output tiles, each tile one OpenBLAS call with one OpenBLAS
// thread, so that an element's reduction order depends on the tile sizes
// and the shape only, never on the grid or the host thread count.
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_list.h"
#include "kernel_util.h"

static uint32_t dtype_bytes(uint32_t dtype) {
  return dtype == ACCEL_KP_DTYPE_F32 ? 4u : 2u;
}

// Converts rows [r0, r0 + rows) x columns [c0, c0 + cols) of the row-major
// [*, ld] matrix |src| of |dtype| to a dense f32 [rows, cols] at |dst|.
static void to_f32(const void *src, uint32_t dtype, uint64_t ld, uint64_t r0,
                   uint64_t rows, uint64_t c0, uint64_t cols, float *dst) {
  for (uint64_t r = 0; r < rows; ++r) {
    uint64_t base = (r0 + r) * ld + c0;
    float *out = dst + r * cols;
    if (dtype == ACCEL_KP_DTYPE_F32) {
      memcpy(out, (const float *)src + base, cols * sizeof(float));
    } else if (dtype == ACCEL_KP_DTYPE_BF16) {
      const uint16_t *in = (const uint16_t *)src + base;
      for (uint64_t j = 0; j < cols; ++j) out[j] = accel_kp_bf16_to_f32(in[j]);
    } else {
      const uint16_t *in = (const uint16_t *)src + base;
      for (uint64_t j = 0; j < cols; ++j) out[j] = accel_kp_f16_to_f32(in[j]);
    }
  }
}

typedef struct mm_tile {
  uint64_t r0, rows, c0, cols;
} mm_tile_t;

// The operand tiles of op(a) rows [r0, r0 + rows) and op(b) columns
// [c0, c0 + cols), as f32 where a conversion is needed (|scratch| holds
// them; the caller frees it).
typedef struct mm_operands {
  const void *a, *b;
  int lda, ldb;
  enum CBLAS_TRANSPOSE ta, tb;
} mm_operands_t;

static int32_t mm_convert(const accel_kp_matmul_constants_t *c, const void *a,
                          const void *b, const mm_tile_t *t,
                          mm_operands_t *op, float **scratch) {
  int trans_a = (c->flags & ACCEL_KP_MM_TRANS_A) != 0;
  int trans_b = (c->flags & ACCEL_KP_MM_TRANS_B) != 0;
  uint64_t a_elems = t->rows * c->k, b_elems = (uint64_t)c->k * t->cols;
  float *buf = malloc((a_elems + b_elems) * sizeof(float) + 1);
  if (buf == NULL) {
    return 0;
  }
  // Converted tiles keep the operand's orientation: a [rows, k] or [k, rows].
  if (trans_a) {
    to_f32(a, c->dtype_a, c->m, 0, c->k, t->r0, t->rows, buf);
  } else {
    to_f32(a, c->dtype_a, c->k, t->r0, t->rows, 0, c->k, buf);
  }
  float *bb = buf + a_elems;
  if (trans_b) {
    to_f32(b, c->dtype_b, c->k, t->c0, t->cols, 0, c->k, bb);
  } else {
    to_f32(b, c->dtype_b, c->n, 0, c->k, t->c0, t->cols, bb);
  }
  op->a = buf;
  op->lda = trans_a ? (int)t->rows : (int)c->k;
  op->b = bb;
  op->ldb = trans_b ? (int)c->k : (int)t->cols;
  *scratch = buf;
  return 1;
}

static int32_t mm_tile(const accel_kp_matmul_constants_t *c, const void *a,
                       const void *b, const float *bias, float *out,
                       const mm_tile_t *t) {
  int trans_a = (c->flags & ACCEL_KP_MM_TRANS_A) != 0;
  int trans_b = (c->flags & ACCEL_KP_MM_TRANS_B) != 0;
  float *cc = out + t->r0 * c->n + t->c0;
  if (c->k == 0) {
    for (uint64_t r = 0; r < t->rows; ++r) {
      memset(cc + r * c->n, 0, t->cols * sizeof(float));
    }
  } else {
    mm_operands_t op = {.ta = trans_a ? CblasTrans : CblasNoTrans,
                        .tb = trans_b ? CblasTrans : CblasNoTrans};
    float *scratch = NULL;
#ifdef ACCEL_KP_HAVE_SBGEMM
    int bf16 = c->dtype_a == ACCEL_KP_DTYPE_BF16 &&
               c->dtype_b == ACCEL_KP_DTYPE_BF16;
#else
    const int bf16 = 0;
#endif
    if (c->dtype_a == ACCEL_KP_DTYPE_F32 && c->dtype_b == ACCEL_KP_DTYPE_F32) {
      op.a = (const float *)a + (trans_a ? t->r0 : t->r0 * c->k);
      op.lda = trans_a ? (int)c->m : (int)c->k;
      op.b = (const float *)b + (trans_b ? t->c0 * c->k : t->c0);
      op.ldb = trans_b ? (int)c->k : (int)c->n;
    } else if (bf16) {
      op.a = (const uint16_t *)a + (trans_a ? t->r0 : t->r0 * c->k);
      op.lda = trans_a ? (int)c->m : (int)c->k;
      op.b = (const uint16_t *)b + (trans_b ? t->c0 * c->k : t->c0);
      op.ldb = trans_b ? (int)c->k : (int)c->n;
    } else if (!mm_convert(c, a, b, t, &op, &scratch)) {
      return 0;
    }
#ifdef ACCEL_KP_HAVE_SBGEMM
    if (bf16) {
      cblas_sbgemm(CblasRowMajor, op.ta, op.tb, (int)t->rows, (int)t->cols,
                   (int)c->k, 1.0f, op.a, op.lda, op.b, op.ldb, 0.0f, cc,
                   (int)c->n);
    } else
#endif
    if (t->rows == 1) {
      // One row: y = op(b)^T x with x the row of op(a).
      int incx = trans_a ? (scratch ? (int)t->rows : (int)c->m) : 1;
      if (trans_b) {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)t->cols, (int)c->k,
                    1.0f, op.b, op.ldb, op.a, incx, 0.0f, cc, 1);
      } else {
        cblas_sgemv(CblasRowMajor, CblasTrans, (int)c->k, (int)t->cols, 1.0f,
                    op.b, op.ldb, op.a, incx, 0.0f, cc, 1);
      }
    } else {
      cblas_sgemm(CblasRowMajor, op.ta, op.tb, (int)t->rows, (int)t->cols,
                  (int)c->k, 1.0f, op.a, op.lda, op.b, op.ldb, 0.0f, cc,
                  (int)c->n);
    }
    free(scratch);
  }
  if ((c->flags & ACCEL_KP_MM_BIAS) || c->activation != ACCEL_KP_ACT_NONE) {
    const float *tile_bias = (c->flags & ACCEL_KP_MM_BIAS) ? bias + t->c0 : NULL;
    for (uint64_t r = 0; r < t->rows; ++r) {
      kp_bias_activate(cc + r * c->n, cc + r * c->n, tile_bias, t->cols,
                       c->activation);
    }
  }
  return 1;
}

static int mm_check(const accel_kernel_dispatch_t *d,
                    const accel_kernel_workgroup_t *wg,
                    const accel_kp_matmul_constants_t *c) {
  const uint32_t known = ACCEL_KP_MM_TRANS_A | ACCEL_KP_MM_TRANS_B |
                         ACCEL_KP_MM_BIAS;
  if (c->dtype_a < ACCEL_KP_DTYPE_F32 || c->dtype_a > ACCEL_KP_DTYPE_BF16 ||
      c->dtype_b < ACCEL_KP_DTYPE_F32 || c->dtype_b > ACCEL_KP_DTYPE_BF16) {
    kp_fail(d, wg, "matmul dtypes %u x %u: each must be 1 (f32), 2 (f16) or 3 "
            "(bf16)", c->dtype_a, c->dtype_b);
    return 0;
  }
  if ((c->flags & ~known) != 0 || c->activation >= ACCEL_KP_ACT_COUNT ||
      c->reserved[0] != 0 || c->reserved[1] != 0 || c->reserved[2] != 0) {
    kp_fail(d, wg, "matmul flags 0x%x, activation %u or reserved fields not "
            "valid", c->flags, c->activation);
    return 0;
  }
  if (c->m > INT32_MAX || c->n > INT32_MAX || c->k > INT32_MAX) {
    kp_fail(d, wg, "matmul %u x %u x %u exceeds BLAS's int range", c->m, c->n,
            c->k);
    return 0;
  }
  typedef unsigned __int128 u128;
  return kp_binding_holds(d, wg, 0, "a", (u128)c->m * c->k * dtype_bytes(c->dtype_a)) &&
         kp_binding_holds(d, wg, 1, "b", (u128)c->k * c->n * dtype_bytes(c->dtype_b)) &&
         kp_binding_holds(d, wg, 2, "bias",
                          (c->flags & ACCEL_KP_MM_BIAS) ? 4ull * c->n : 0) &&
         kp_binding_holds(d, wg, 3, "c", (u128)c->m * c->n * 4u);
}

int32_t matmul(const accel_kernel_dispatch_t *d,
               const accel_kernel_workgroup_t *wg) {
  accel_kp_matmul_constants_t c;
  if (!kp_signature(d, wg, 4, &c, sizeof(c)) || !mm_check(d, wg, &c)) {
    return 1;
  }
  uint64_t tm = c.tile_m ? c.tile_m : ACCEL_KP_MM_DEFAULT_TILE_M(c.m, c.n);
  uint64_t tn = c.tile_n ? c.tile_n : ACCEL_KP_MM_DEFAULT_TILE_N(c.m, c.n);
  uint64_t tiles_n = (c.n + tn - 1) / tn;
  kp_range_t units = kp_units(d, wg, accel_kp_matmul_units(&c));
  for (uint64_t u = units.begin; u < units.end; ++u) {
    mm_tile_t t = {.r0 = u / tiles_n * tm, .c0 = u % tiles_n * tn};
    t.rows = c.m - t.r0 < tm ? c.m - t.r0 : tm;
    t.cols = c.n - t.c0 < tn ? c.n - t.c0 : tn;
    if (!mm_tile(&c, d->bindings[0].data, d->bindings[1].data,
                 d->bindings[2].data, d->bindings[3].data, &t)) {
      return kp_fail(d, wg, "matmul: cannot allocate %llu bytes to convert a "
                     "tile", (unsigned long long)((t.rows + t.cols) * c.k * 4));
    }
  }
  return 0;
}

#ifndef ACCEL_KP_COMBINED
void openblas_set_num_threads(int num_threads);

// One OpenBLAS thread per call: the host device spreads work-groups over its
// own threads, and a fixed thread count keeps the blocking fixed.
static int32_t library_init(void) {
  openblas_set_num_threads(1);
  return 0;
}

ACCEL_KP_FAMILY_LIBRARY("accel matmul kernels", ACCEL_KP_MATMUL_KERNELS, library_init, ACCEL_KP_META_MATMUL)
#endif
