// Gather and selection kernels (kernel_params.h): embedding, argmax, topk.
// No arithmetic on the values: results are exact and order-free.
#include <stdint.h>
#include <string.h>

#include "kernel_list.h"
#include "kernel_util.h"

int32_t embedding(const accel_kernel_dispatch_t *d,
                  const accel_kernel_workgroup_t *wg) {
  accel_kp_embedding_constants_t c;
  if (!kp_signature(d, wg, 3, &c, sizeof(c))) {
    return 1;
  }
  if (c.dtype < ACCEL_KP_DTYPE_F32 || c.dtype > ACCEL_KP_DTYPE_BF16) {
    return kp_fail(d, wg, "embedding: dtype %u must be 1 (f32), 2 (f16) or "
                   "3 (bf16)", c.dtype);
  }
  uint32_t esize = c.dtype == ACCEL_KP_DTYPE_F32 ? 4u : 2u;
  if (!kp_binding_holds(d, wg, 0, "table",
                        (unsigned __int128)c.vocab * c.dim * esize) ||
      !kp_binding_holds(d, wg, 1, "ids", 4ull * c.tokens) ||
      !kp_binding_holds(d, wg, 2, "out",
                        (unsigned __int128)c.tokens * c.dim * 4u)) {
    return 1;
  }
  const uint8_t *table = d->bindings[0].data;
  const int32_t *ids = d->bindings[1].data;
  kp_range_t r = kp_units(d, wg, c.tokens);
  for (uint64_t t = r.begin; t < r.end; ++t) {
    int32_t id = ids[t];
    if (id < 0 || (uint32_t)id >= c.vocab) {
      return kp_fail(d, wg, "embedding: token %llu has id %d, outside the "
                     "vocabulary of %u", (unsigned long long)t, id, c.vocab);
    }
    float *out = (float *)d->bindings[2].data + t * c.dim;
    const uint8_t *row = table + (uint64_t)id * c.dim * esize;
    if (c.dtype == ACCEL_KP_DTYPE_F32) {
      memcpy(out, row, (uint64_t)c.dim * 4u);
      continue;
    }
    const uint16_t *h = (const uint16_t *)row;
    for (uint32_t j = 0; j < c.dim; ++j) {
      out[j] = c.dtype == ACCEL_KP_DTYPE_BF16 ? accel_kp_bf16_to_f32(h[j])
                                              : accel_kp_f16_to_f32(h[j]);
    }
  }
  return 0;
}

static int select_check(const accel_kernel_dispatch_t *d,
                        const accel_kernel_workgroup_t *wg, int top,
                        accel_kp_select_constants_t *c) {
  if (!kp_signature(d, wg, top ? 3 : 2, c, sizeof(*c))) {
    return 0;
  }
  if (c->reserved != 0 || (top && c->rows != 0 &&
                           (c->k < 1 || c->k > c->cols ||
                            c->k > ACCEL_KP_TOPK_MAX))) {
    kp_fail(d, wg, "%s: k %u must be 1 to min(cols %u, %u); reserved 0",
            top ? "topk" : "argmax", c->k, c->cols, ACCEL_KP_TOPK_MAX);
    return 0;
  }
  if (!top && c->rows != 0 && c->cols == 0) {
    kp_fail(d, wg, "argmax: rows of 0 columns have no maximum");
    return 0;
  }
  if (!kp_binding_holds(d, wg, 0, "x",
                        (unsigned __int128)c->rows * c->cols * 4u)) {
    return 0;
  }
  if (!top) {
    return kp_binding_holds(d, wg, 1, "out", 4ull * c->rows);
  }
  unsigned __int128 out = (unsigned __int128)c->rows * c->k * 4u;
  return kp_binding_holds(d, wg, 1, "values", out) &&
         kp_binding_holds(d, wg, 2, "indices", out);
}

int32_t argmax(const accel_kernel_dispatch_t *d,
               const accel_kernel_workgroup_t *wg) {
  accel_kp_select_constants_t c;
  if (!select_check(d, wg, 0, &c)) {
    return 1;
  }
  int32_t *out = d->bindings[1].data;
  kp_range_t r = kp_units(d, wg, c.rows);
  for (uint64_t row = r.begin; row < r.end; ++row) {
    const float *x = (const float *)d->bindings[0].data + row * c.cols;
    int64_t best = -1;
    for (uint32_t i = 0; i < c.cols; ++i) {
      if (x[i] == x[i] && (best < 0 || x[i] > x[best])) {
        best = i;
      }
    }
    out[row] = best < 0 ? 0 : (int32_t)best;
  }
  return 0;
}

// Restores the heap below |i|: the root of a heap ranks last of its heap.
static void sift_down(float *v, int32_t *idx, uint32_t n, uint32_t i) {
  for (;;) {
    uint32_t worst = i, l = 2 * i + 1, r = l + 1;
    if (l < n && kp_ranks_before(v[worst], idx[worst], v[l], idx[l])) worst = l;
    if (r < n && kp_ranks_before(v[worst], idx[worst], v[r], idx[r])) worst = r;
    if (worst == i) return;
    float tv = v[i];
    int32_t ti = idx[i];
    v[i] = v[worst];
    idx[i] = idx[worst];
    v[worst] = tv;
    idx[worst] = ti;
    i = worst;
  }
}

int32_t topk(const accel_kernel_dispatch_t *d,
             const accel_kernel_workgroup_t *wg) {
  accel_kp_select_constants_t c;
  if (!select_check(d, wg, 1, &c)) {
    return 1;
  }
  kp_range_t r = kp_units(d, wg, c.rows);
  for (uint64_t row = r.begin; row < r.end; ++row) {
    const float *x = (const float *)d->bindings[0].data + row * c.cols;
    float *v = (float *)d->bindings[1].data + row * c.k;
    int32_t *idx = (int32_t *)d->bindings[2].data + row * c.k;
    // A heap of the k best so far, the one that ranks last at the root.
    for (uint32_t i = 0; i < c.k; ++i) {
      v[i] = x[i];
      idx[i] = (int32_t)i;
    }
    for (uint32_t i = c.k / 2; i-- > 0;) sift_down(v, idx, c.k, i);
    for (uint32_t i = c.k; i < c.cols; ++i) {
      if (kp_ranks_before(x[i], (int32_t)i, v[0], idx[0])) {
        v[0] = x[i];
        idx[0] = (int32_t)i;
        sift_down(v, idx, c.k, 0);
      }
    }
    // Heap sort: the last-ranked moves to the end each time.
    for (uint32_t n = c.k; n > 1; --n) {
      float tv = v[0];
      int32_t ti = idx[0];
      v[0] = v[n - 1];
      idx[0] = idx[n - 1];
      v[n - 1] = tv;
      idx[n - 1] = ti;
      sift_down(v, idx, n - 1, 0);
    }
  }
  return 0;
}

#ifndef ACCEL_KP_COMBINED
ACCEL_KP_FAMILY_LIBRARY("accel gather and selection kernels", ACCEL_KP_SELECT_KERNELS, NULL, ACCEL_KP_META_SELECT)
#endif
