// Row reference kernels in CUDA: softmax, layernorm, rmsnorm, rope
// (kernels/README.md, "Row kernels"; kernels/host/row_kernels.c). Unit: one
// row (rope: one token). Each 16-lane group of the block takes the block's
// rows in turn (row begin + group, stepping by 8); lane l owns the columns
// i with i % 16 == l, so every sum is the fixed 16-lane reduction and the
// results are the host kernels' bits.
#include "kc_common.cuh"

// Checks a row kernel's block, reserved field and [rows, cols] bindings
// (gamma and beta: [cols]).
KC_FN bool kc_rows_check(const char *name, uint32_t rows, uint32_t cols,
                         uint32_t reserved, uint32_t count,
                         const char *const names[], const uint64_t bytes[]) {
  if (!kc_check_block(name)) {
    return false;
  }
  if (reserved != 0) {
    KC_FAIL("%s: reserved constant must be 0", name);
    return false;
  }
  for (uint32_t b = 0; b < count; ++b) {
    bool vec = names[b][0] == 'g' || names[b][0] == 'b';
    if (!kc_holds(name, b, names[b], bytes[b],
                  vec ? (kc_u128)4u * cols : (kc_u128)rows * cols * 4u)) {
      return false;
    }
  }
  return true;
}

KC_KERNEL softmax(const float *x, float *y, uint64_t x_bytes,
                  uint64_t y_bytes, accel_kp_softmax_constants_t c) {
  const char *const names[] = {"x", "y"};
  const uint64_t bytes[] = {x_bytes, y_bytes};
  if (!kc_rows_check("softmax", c.rows, c.cols, c.reserved, 2, names, bytes)) {
    return;
  }
  float s = c.scale == 0.0f ? 1.0f : c.scale;
  uint64_t begin, end;
  kc_units(c.rows, &begin, &end);
  uint32_t lane = kc_lane();
  for (uint64_t row = begin + kc_group(); row < end; row += KC_GROUPS) {
    const float *xr = x + row * c.cols;
    float *yr = y + row * c.cols;
    float m = -INFINITY;
    for (uint64_t i = lane; i < c.cols; i += KC_LANES) {
      float v = xr[i] * s;
      m = v > m ? v : m;
    }
    m = kc_max16(m);
    float acc = 0.0f;
    for (uint64_t i = lane; i < c.cols; i += KC_LANES) {
      float e = kp_expf(xr[i] * s - m);
      yr[i] = e;
      acc = acc + e;
    }
    float inv = 1.0f / kc_fold16(acc);
    for (uint64_t i = lane; i < c.cols; i += KC_LANES) {
      yr[i] = yr[i] * inv;
    }
  }
}

// layernorm (|beta| set) and rmsnorm (|beta| NULL) of the block's rows.
KC_FN void kc_norm(const float *x, const float *gamma, const float *beta,
                   float *y, const accel_kp_norm_constants_t *c) {
  uint64_t begin, end;
  kc_units(c->rows, &begin, &end);
  uint32_t lane = kc_lane();
  float n = (float)c->cols;
  for (uint64_t row = begin + kc_group(); row < end; row += KC_GROUPS) {
    const float *xr = x + row * c->cols;
    float *yr = y + row * c->cols;
    float mean = 0.0f;
    if (beta != NULL) {
      float acc = 0.0f;
      for (uint64_t i = lane; i < c->cols; i += KC_LANES) acc = acc + xr[i];
      mean = kc_fold16(acc) / n;
    }
    float acc = 0.0f;
    for (uint64_t i = lane; i < c->cols; i += KC_LANES) {
      float v = xr[i] - mean;
      acc = acc + v * v;
    }
    float var = kc_fold16(acc) / n;
    float rstd = 1.0f / sqrtf(var + c->eps);
    for (uint64_t i = lane; i < c->cols; i += KC_LANES) {
      float v = ((xr[i] - mean) * rstd) * gamma[i];
      yr[i] = beta != NULL ? v + beta[i] : v;
    }
  }
}

KC_FN bool kc_norm_check(const char *name, const accel_kp_norm_constants_t *c,
                         uint32_t count, const char *const names[],
                         const uint64_t bytes[]) {
  if (!kc_rows_check(name, c->rows, c->cols, c->reserved, count, names,
                     bytes)) {
    return false;
  }
  if (!(c->eps >= 0.0f) || (c->rows != 0 && c->cols == 0)) {
    KC_FAIL("%s: eps %g must be >= 0 and cols >= 1", name, (double)c->eps);
    return false;
  }
  return true;
}

KC_KERNEL layernorm(const float *x, const float *gamma, const float *beta,
                    float *y, uint64_t x_bytes, uint64_t gamma_bytes,
                    uint64_t beta_bytes, uint64_t y_bytes,
                    accel_kp_norm_constants_t c) {
  const char *const names[] = {"x", "gamma", "beta", "y"};
  const uint64_t bytes[] = {x_bytes, gamma_bytes, beta_bytes, y_bytes};
  if (!kc_norm_check("layernorm", &c, 4, names, bytes)) return;
  kc_norm(x, gamma, beta, y, &c);
}

KC_KERNEL rmsnorm(const float *x, const float *gamma, float *y,
                  uint64_t x_bytes, uint64_t gamma_bytes, uint64_t y_bytes,
                  accel_kp_norm_constants_t c) {
  const char *const names[] = {"x", "gamma", "y"};
  const uint64_t bytes[] = {x_bytes, gamma_bytes, y_bytes};
  if (!kc_norm_check("rmsnorm", &c, 3, names, bytes)) return;
  kc_norm(x, gamma, NULL, y, &c);
}

// Each group takes a token; lane l rotates the pairs p with p % 16 == l of
// every head (theta in double, as the host kernel computes it).
KC_KERNEL rope(float *x, const int32_t *positions, uint64_t x_bytes,
               uint64_t positions_bytes, accel_kp_rope_constants_t c) {
  if (!kc_check_block("rope")) return;
  uint32_t rd = c.rotary_dim ? c.rotary_dim : c.head_dim;
  if (rd % 2 != 0 || rd > c.head_dim || c.mode > ACCEL_KP_ROPE_HALF ||
      !(c.base > 0.0f) || c.reserved[0] != 0 || c.reserved[1] != 0) {
    KC_FAIL("rope: rotary_dim %u must be even and <= head_dim %u, mode %u 0 "
            "or 1, base %g > 0, reserved 0",
            rd, c.head_dim, c.mode, (double)c.base);
    return;
  }
  if (!kc_holds("rope", 0, "x", x_bytes,
                (kc_u128)c.tokens * c.heads * c.head_dim * 4u) ||
      !kc_holds("rope", 1, "positions", positions_bytes, 4ull * c.tokens)) {
    return;
  }
  uint64_t begin, end;
  kc_units(c.tokens, &begin, &end);
  for (uint64_t t = begin; t < end; ++t) {
    if (positions[t] < 0) {
      KC_FAIL("rope: position %d of token %llu is negative", positions[t],
              (unsigned long long)t);
      return;
    }
  }
  uint32_t half = rd / 2;
  for (uint64_t t = begin + kc_group(); t < end; t += KC_GROUPS) {
    float *tok = x + t * c.heads * c.head_dim;
    for (uint32_t p = kc_lane(); p < half; p += KC_LANES) {
      uint32_t i0 = c.mode == ACCEL_KP_ROPE_HALF ? p : 2u * p;
      uint32_t i1 = c.mode == ACCEL_KP_ROPE_HALF ? p + half : 2u * p + 1u;
      kp_rope_pair(tok, c.heads, c.head_dim, c.base, p, rd, positions[t], i0,
                   i1);
    }
  }
}
