// Quantized matmul / GEMV reference kernels in CUDA: qmatmul_int8,
// qmatmul_int4, qmatmul_q8_0, qmatmul_q4_0 (kernels/README.md, "Quantized
// matmul / GEMV"; kernels/host/quant_kernels.c). Unit: 64 output columns
// for all m rows. Each output y[r, j] is one 16-lane group's: lane l keeps
// the host kernel's lane l (int8: acc += x[i] * q[i] for i % 16 == l;
// grouped formats: per group, t += x[e] * (q[e] - zero) over the lane's
// element of each 16-element chunk, then acc += scale * t), and the group
// folds the lanes in the fixed order: the host kernels' bits.
#include "kc_common.cuh"

enum kc_qformat { KC_Q_INT8, KC_Q_INT4, KC_Q_Q8_0, KC_Q_Q4_0 };

struct kc_qweights {
  enum kc_qformat format;
  uint32_t k, group;
  bool is_signed;
  const uint8_t *w;
  const float *scale;
  const uint8_t *zero;
};

KC_FN uint64_t kc_q_row_bytes(const struct kc_qweights *q) {
  switch (q->format) {
    case KC_Q_INT8:
      return q->k;
    case KC_Q_INT4:
      return q->k / 2;
    case KC_Q_Q8_0:
      return (uint64_t)q->k / ACCEL_KP_QK * 34u;
    default:
      return (uint64_t)q->k / ACCEL_KP_QK * 18u;
  }
}

// Lane |l|'s term of chunk |c| of group |g| of row |j|: the x index (from
// the group's first element) and the quantized value minus the zero point.
KC_FN float kc_q_term(const struct kc_qweights *q, const uint8_t *row,
                      uint64_t j, uint64_t g, uint32_t c, uint32_t l,
                      uint32_t *x_index) {
  int32_t v, zero;
  if (q->format == KC_Q_INT4) {
    const uint8_t *p = row + (g * q->group + 32u * (c / 2)) / 2;
    v = (p[l] >> (4 * (c & 1))) & 0x0f;
    v = q->is_signed ? v ^ 8 : v;
    zero = q->is_signed ? 8 : q->zero[j * (q->k / q->group) + g];
    *x_index = 32u * (c / 2) + 2u * l + (c & 1);
  } else if (q->format == KC_Q_Q8_0) {
    v = ((const int8_t *)(row + g * 34u + 2u + 16u * c))[l];
    zero = 0;
    *x_index = 16u * c + l;
  } else {
    v = (row[g * 18u + 2u + l] >> (4 * c)) & 0x0f;
    zero = 8;
    *x_index = 16u * c + l;
  }
  return (float)(v - zero);
}

KC_FN float kc_q_scale(const struct kc_qweights *q, const uint8_t *row,
                       uint64_t j, uint64_t g) {
  if (q->format == KC_Q_INT4) {
    return q->scale[j * (q->k / q->group) + g];
  }
  const uint8_t *d = row + g * (q->format == KC_Q_Q8_0 ? 34u : 18u);
  return accel_kp_f16_to_f32((uint16_t)(d[0] | (d[1] << 8)));
}

// y[r, j] for the calling group (every lane gets it).
KC_FN float kc_q_dot(const struct kc_qweights *q, const float *x, uint64_t j) {
  uint32_t l = kc_lane();
  const uint8_t *row = q->w + j * kc_q_row_bytes(q);
  float acc = 0.0f;
  if (q->format == KC_Q_INT8) {
    const int8_t *w = (const int8_t *)row;
    for (uint32_t i = l; i < q->k; i += KC_LANES) {
      acc = acc + x[i] * (float)w[i];
    }
    return kc_fold16(acc) * q->scale[j];
  }
  uint32_t chunks = q->group / 16;
  for (uint64_t g = 0; g < q->k / q->group; ++g) {
    float t = 0.0f;
    const float *xg = x + g * q->group;
    for (uint32_t c = 0; c < chunks; ++c) {
      uint32_t e;
      float v = kc_q_term(q, row, j, g, c, l, &e);
      t = t + xg[e] * v;
    }
    acc = acc + kc_q_scale(q, row, j, g) * t;
  }
  return kc_fold16(acc);
}

// Checks the launch (as the host kernel's qcheck) and fills |q|.
KC_FN bool kc_q_check(enum kc_qformat format,
                      const accel_kp_qmatmul_constants_t *c,
                      const uint64_t bytes[], struct kc_qweights *q) {
  const char *name = format == KC_Q_INT8   ? "qmatmul_int8"
                     : format == KC_Q_INT4 ? "qmatmul_int4"
                     : format == KC_Q_Q8_0 ? "qmatmul_q8_0"
                                           : "qmatmul_q4_0";
  if (!kc_check_block(name)) {
    return false;
  }
  uint32_t group = format == KC_Q_INT4   ? c->group_size
                   : format == KC_Q_INT8 ? 1u
                                         : ACCEL_KP_QK;
  uint32_t known = format == KC_Q_INT4 ? (uint32_t)ACCEL_KP_QFLAG_SIGNED_I4 : 0u;
  if (format == KC_Q_INT4 && group != 32 && group != 64 && group != 128) {
    KC_FAIL("%s: group_size %u must be 32, 64 or 128", name, group);
    return false;
  }
  // tile_n is the host kernels' tunable (kernel ABI 1.2): checked as they
  // check it, and not used here (a block's units are its rows).
  if (c->k % group != 0 || (c->flags & ~known) != 0 || c->tile_n > 4096 ||
      c->reserved[0] != 0 || c->reserved[1] != 0) {
    KC_FAIL("%s: k %u must be a multiple of %u; flags 0x%x, tile_n %u (at "
            "most 4096) and reserved fields must be valid",
            name, c->k, group, c->flags, c->tile_n);
    return false;
  }
  q->format = format;
  q->k = c->k;
  q->group = group;
  q->is_signed = (c->flags & ACCEL_KP_QFLAG_SIGNED_I4) != 0;
  uint32_t y = format == KC_Q_INT8 ? 3u : format == KC_Q_INT4 ? 4u : 2u;
  uint64_t groups = format == KC_Q_INT8 ? 1u : c->k / group;
  if (!kc_holds(name, 0, "x", bytes[0], (kc_u128)c->m * c->k * 4u) ||
      !kc_holds(name, 1, "w", bytes[1], (kc_u128)c->n * kc_q_row_bytes(q)) ||
      ((format == KC_Q_INT8 || format == KC_Q_INT4) &&
       !kc_holds(name, 2, "scale", bytes[2], (kc_u128)c->n * groups * 4u)) ||
      (format == KC_Q_INT4 && !q->is_signed &&
       !kc_holds(name, 3, "zero", bytes[3], (kc_u128)c->n * groups)) ||
      !kc_holds(name, y, "y", bytes[y], (kc_u128)c->m * c->n * 4u)) {
    return false;
  }
  return true;
}

// The block's outputs: (row r, column j) pairs of its column tiles, one
// per 16-lane group in turn.
KC_FN void kc_qmatmul(const struct kc_qweights *q, const float *x, float *y,
                      const accel_kp_qmatmul_constants_t *c) {
  uint64_t b, e;
  kc_units(accel_kp_qmatmul_units(c), &b, &e);
  uint64_t j0 = b * ACCEL_KP_QMM_TILE_N;
  uint64_t j1 = e * ACCEL_KP_QMM_TILE_N < c->n ? e * ACCEL_KP_QMM_TILE_N : c->n;
  uint64_t cols = j1 > j0 ? j1 - j0 : 0;
  uint64_t outputs = cols * c->m;
  for (uint64_t o = kc_group(); o < outputs; o += KC_GROUPS) {
    uint64_t r = o / cols, j = j0 + o % cols;
    float v = kc_q_dot(q, x + r * c->k, j);
    if (kc_lane() == 0) {
      y[r * c->n + j] = v;
    }
  }
}

KC_KERNEL qmatmul_int8(const float *x, const int8_t *w, const float *scale,
                       float *y, uint64_t x_bytes, uint64_t w_bytes,
                       uint64_t scale_bytes, uint64_t y_bytes,
                       accel_kp_qmatmul_constants_t c) {
  const uint64_t bytes[] = {x_bytes, w_bytes, scale_bytes, y_bytes};
  struct kc_qweights q;
  if (!kc_q_check(KC_Q_INT8, &c, bytes, &q)) return;
  q.w = (const uint8_t *)w;
  q.scale = scale;
  q.zero = NULL;
  kc_qmatmul(&q, x, y, &c);
}

KC_KERNEL qmatmul_int4(const float *x, const uint8_t *w, const float *scale,
                       const uint8_t *zero, float *y, uint64_t x_bytes,
                       uint64_t w_bytes, uint64_t scale_bytes,
                       uint64_t zero_bytes, uint64_t y_bytes,
                       accel_kp_qmatmul_constants_t c) {
  const uint64_t bytes[] = {x_bytes, w_bytes, scale_bytes, zero_bytes,
                            y_bytes};
  struct kc_qweights q;
  if (!kc_q_check(KC_Q_INT4, &c, bytes, &q)) return;
  q.w = w;
  q.scale = scale;
  q.zero = zero;
  kc_qmatmul(&q, x, y, &c);
}

// Q8_0 and Q4_0: x, w (GGUF blocks), y.
KC_FN void kc_qmatmul_gguf(enum kc_qformat format, const float *x,
                           const uint8_t *w, float *y, uint64_t x_bytes,
                           uint64_t w_bytes, uint64_t y_bytes,
                           const accel_kp_qmatmul_constants_t *c) {
  const uint64_t bytes[] = {x_bytes, w_bytes, y_bytes};
  struct kc_qweights q;
  if (!kc_q_check(format, c, bytes, &q)) return;
  q.w = w;
  q.scale = NULL;
  q.zero = NULL;
  kc_qmatmul(&q, x, y, c);
}

KC_KERNEL qmatmul_q8_0(const float *x, const uint8_t *w, float *y,
                       uint64_t x_bytes, uint64_t w_bytes, uint64_t y_bytes,
                       accel_kp_qmatmul_constants_t c) {
  kc_qmatmul_gguf(KC_Q_Q8_0, x, w, y, x_bytes, w_bytes, y_bytes, &c);
}

KC_KERNEL qmatmul_q4_0(const float *x, const uint8_t *w, float *y,
                       uint64_t x_bytes, uint64_t w_bytes, uint64_t y_bytes,
                       accel_kp_qmatmul_constants_t c) {
  kc_qmatmul_gguf(KC_Q_Q4_0, x, w, y, x_bytes, w_bytes, y_bytes, &c);
}
