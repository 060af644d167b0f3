// Row kernels (kernel_params.h): softmax, layernorm, rmsnorm and rotary
// position embedding. One unit is one row (one token for rope); each row's
// sums use the fixed 16-lane order of kernel_util.h, written as loops over
// 16 lanes that the compiler turns into vector code.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernel_list.h"
#include "kernel_util.h"

// The row loops work on 16-lane vectors (kernel_util.h): lane l of each
// vector takes elements i with i % 16 == l, exactly the fixed reduction's
// lanes; the tail (n % 16 elements) is added to the stored lanes in order.

// Largest of x[i] * s (NaN ignored; -inf for an all-NaN row).
KP_VECTOR_CLONES static float row_max(const float *x, uint64_t n, float s) {
  kp_v16 m = kp_splat16(-__builtin_inff()), sv = kp_splat16(s);
  uint64_t i = 0;
  for (; i + KP_LANES <= n; i += KP_LANES) {
    kp_v16 v = kp_load16(x + i) * sv;
    m = kp_select16(v > m, v, m);
  }
  float lanes[KP_LANES];
  kp_store16(lanes, m);
  for (; i < n; ++i) {
    float v = x[i] * s;
    lanes[i % KP_LANES] = v > lanes[i % KP_LANES] ? v : lanes[i % KP_LANES];
  }
  float r = lanes[0];
  for (int l = 1; l < KP_LANES; ++l) r = lanes[l] > r ? lanes[l] : r;
  return r;
}

// y[i] = exp(x[i] * s - max); returns their sum in the lane order.
KP_VECTOR_CLONES static float row_exp(const float *x, float *y, uint64_t n,
                                      float s, float max) {
  kp_v16 acc = kp_splat16(0.0f), sv = kp_splat16(s), mv = kp_splat16(max);
  uint64_t i = 0;
  for (; i + KP_LANES <= n; i += KP_LANES) {
    kp_v16 e = kp_expf16(kp_load16(x + i) * sv - mv);
    kp_store16(y + i, e);
    acc = acc + e;
  }
  float lanes[KP_LANES];
  kp_store16(lanes, acc);
  for (; i < n; ++i) {
    float e = kp_expf(x[i] * s - max);
    y[i] = e;
    lanes[i % KP_LANES] = lanes[i % KP_LANES] + e;
  }
  return kp_fold(lanes);
}

KP_VECTOR_CLONES static void row_scale(float *y, uint64_t n, float f) {
  for (uint64_t i = 0; i < n; ++i) y[i] = y[i] * f;
}

// Sum of x[i] (square = 0) or of (x[i] - center)^2 (square = 1), lane order.
KP_VECTOR_CLONES static float row_sum(const float *x, uint64_t n, int square,
                                      float center) {
  kp_v16 acc = kp_splat16(0.0f), cv = kp_splat16(center);
  uint64_t i = 0;
  if (square) {
    for (; i + KP_LANES <= n; i += KP_LANES) {
      kp_v16 v = kp_load16(x + i) - cv;
      acc = acc + v * v;
    }
  } else {
    for (; i + KP_LANES <= n; i += KP_LANES) acc = acc + kp_load16(x + i);
  }
  float lanes[KP_LANES];
  kp_store16(lanes, acc);
  for (; i < n; ++i) {
    float v = x[i] - center;
    lanes[i % KP_LANES] = lanes[i % KP_LANES] + (square ? v * v : x[i]);
  }
  return kp_fold(lanes);
}

// y[i] = ((x[i] - center) * rstd) * gamma[i] (+ beta[i] when beta is set).
KP_VECTOR_CLONES static void row_affine(const float *x, float *y, uint64_t n,
                                        float center, float rstd,
                                        const float *gamma, const float *beta) {
  if (beta != NULL) {
    for (uint64_t i = 0; i < n; ++i) {
      y[i] = ((x[i] - center) * rstd) * gamma[i] + beta[i];
    }
  } else {
    for (uint64_t i = 0; i < n; ++i) y[i] = ((x[i] - center) * rstd) * gamma[i];
  }
}

// Checks a row kernel's constants and its [rows, cols] bindings.
static int rows_check(const accel_kernel_dispatch_t *d,
                      const accel_kernel_workgroup_t *wg, const char *name,
                      uint32_t rows, uint32_t cols, uint32_t reserved,
                      uint32_t bindings, const char *const names[]) {
  if (reserved != 0) {
    kp_fail(d, wg, "%s: reserved constant must be 0", name);
    return 0;
  }
  unsigned __int128 matrix = (unsigned __int128)rows * cols * 4u;
  for (uint32_t b = 0; b < bindings; ++b) {
    // Bindings named "gamma" and "beta" are vectors of cols.
    int vec = names[b][0] == 'g' || names[b][0] == 'b';
    if (!kp_binding_holds(d, wg, b, names[b], vec ? 4ull * cols : matrix)) {
      return 0;
    }
  }
  return 1;
}

int32_t softmax(const accel_kernel_dispatch_t *d,
                const accel_kernel_workgroup_t *wg) {
  static const char *const names[] = {"x", "y"};
  accel_kp_softmax_constants_t c;
  if (!kp_signature(d, wg, 2, &c, sizeof(c)) ||
      !rows_check(d, wg, "softmax", c.rows, c.cols, c.reserved, 2, names)) {
    return 1;
  }
  float s = c.scale == 0.0f ? 1.0f : c.scale;
  kp_range_t r = kp_units(d, wg, c.rows);
  for (uint64_t row = r.begin; row < r.end; ++row) {
    const float *x = (const float *)d->bindings[0].data + row * c.cols;
    float *y = (float *)d->bindings[1].data + row * c.cols;
    float max = row_max(x, c.cols, s);
    float sum = row_exp(x, y, c.cols, s, max);
    row_scale(y, c.cols, 1.0f / sum);
  }
  return 0;
}

static int32_t norm(const accel_kernel_dispatch_t *d,
                    const accel_kernel_workgroup_t *wg, int layer) {
  static const char *const ln_names[] = {"x", "gamma", "beta", "y"};
  static const char *const rms_names[] = {"x", "gamma", "y"};
  const char *name = layer ? "layernorm" : "rmsnorm";
  uint32_t bindings = layer ? 4 : 3;
  accel_kp_norm_constants_t c;
  if (!kp_signature(d, wg, bindings, &c, sizeof(c)) ||
      !rows_check(d, wg, name, c.rows, c.cols, c.reserved, bindings,
                  layer ? ln_names : rms_names)) {
    return 1;
  }
  if (!(c.eps >= 0.0f) || (c.rows != 0 && c.cols == 0)) {
    return kp_fail(d, wg, "%s: eps %g must be >= 0 and cols >= 1", name,
                   (double)c.eps);
  }
  const float *gamma = d->bindings[1].data;
  const float *beta = layer ? d->bindings[2].data : NULL;
  kp_range_t r = kp_units(d, wg, c.rows);
  for (uint64_t row = r.begin; row < r.end; ++row) {
    const float *x = (const float *)d->bindings[0].data + row * c.cols;
    float *y = (float *)d->bindings[bindings - 1].data + row * c.cols;
    float n = (float)c.cols;
    float mean = layer ? row_sum(x, c.cols, 0, 0.0f) / n : 0.0f;
    float var = row_sum(x, c.cols, 1, mean) / n;
    float rstd = 1.0f / sqrtf(var + c.eps);
    row_affine(x, y, c.cols, mean, rstd, gamma, beta);
  }
  return 0;
}

int32_t layernorm(const accel_kernel_dispatch_t *d,
                  const accel_kernel_workgroup_t *wg) {
  return norm(d, wg, 1);
}

int32_t rmsnorm(const accel_kernel_dispatch_t *d,
                const accel_kernel_workgroup_t *wg) {
  return norm(d, wg, 0);
}

// The last position's rotations, per thread: a decoder ropes q and k of
// every layer at the same positions, so most launches find them here
// instead of calling pow, cos and sin per pair (the same values, the same
// bits).
#define ROPE_CACHE_PAIRS 256u
// Zero-initialized: rd 0 holds no pairs, so it matches only a launch with
// none to rotate.
static __thread struct {
  float base;
  uint32_t rd;
  int32_t pos;
  float cs[ROPE_CACHE_PAIRS], sn[ROPE_CACHE_PAIRS];
} rope_cache;

// The rotations of the |rd| / 2 pairs at |pos| (cos in *cs, sin in *sn),
// from this thread's cache; 0 when there are more pairs than it holds.
static int rope_angles(float base, uint32_t rd, int32_t pos, const float **cs,
                       const float **sn) {
  uint32_t half = rd / 2;
  if (half > ROPE_CACHE_PAIRS) {
    return 0;
  }
  if (!(rope_cache.pos == pos && rope_cache.rd == rd &&
        rope_cache.base == base)) {
    for (uint32_t p = 0; p < half; ++p) {
      kp_rope_angle(base, p, rd, pos, &rope_cache.cs[p], &rope_cache.sn[p]);
    }
    rope_cache.base = base;
    rope_cache.rd = rd;
    rope_cache.pos = pos;
  }
  *cs = rope_cache.cs;
  *sn = rope_cache.sn;
  return 1;
}

int32_t rope(const accel_kernel_dispatch_t *d,
             const accel_kernel_workgroup_t *wg) {
  accel_kp_rope_constants_t c;
  if (!kp_signature(d, wg, 2, &c, sizeof(c))) {
    return 1;
  }
  uint32_t rd = c.rotary_dim ? c.rotary_dim : c.head_dim;
  if (rd % 2 != 0 || rd > c.head_dim || c.mode > ACCEL_KP_ROPE_HALF ||
      !(c.base > 0.0f) || c.reserved[0] != 0 || c.reserved[1] != 0) {
    return kp_fail(d, wg, "rope: rotary_dim %u must be even and <= head_dim "
                   "%u, mode %u 0 or 1, base %g > 0, reserved 0",
                   rd, c.head_dim, c.mode, (double)c.base);
  }
  if (!kp_binding_holds(d, wg, 0, "x",
                        (unsigned __int128)c.tokens * c.heads * c.head_dim * 4u) ||
      !kp_binding_holds(d, wg, 1, "positions", 4ull * c.tokens)) {
    return 1;
  }
  float *x = d->bindings[0].data;
  const int32_t *positions = d->bindings[1].data;
  uint32_t half = rd / 2;
  kp_range_t r = kp_units(d, wg, c.tokens);
  for (uint64_t t = r.begin; t < r.end; ++t) {
    if (positions[t] < 0) {
      return kp_fail(d, wg, "rope: position %d of token %llu is negative",
                     positions[t], (unsigned long long)t);
    }
    float *tok = x + t * c.heads * c.head_dim;
    const float *cs = NULL, *sn = NULL;
    int cached = rope_angles(c.base, rd, positions[t], &cs, &sn);
    for (uint32_t p = 0; p < half; ++p) {
      uint32_t i0 = c.mode == ACCEL_KP_ROPE_HALF ? p : 2u * p;
      uint32_t i1 = c.mode == ACCEL_KP_ROPE_HALF ? p + half : 2u * p + 1u;
      if (cached) {
        kp_rope_rotate(tok, c.heads, c.head_dim, cs[p], sn[p], i0, i1);
      } else {
        kp_rope_pair(tok, c.heads, c.head_dim, c.base, p, rd, positions[t],
                     i0, i1);
      }
    }
  }
  return 0;
}

#ifndef ACCEL_KP_COMBINED
ACCEL_KP_FAMILY_LIBRARY("accel row kernels", ACCEL_KP_ROW_KERNELS, NULL, ACCEL_KP_META_ROW)
#endif
