// Elementwise reference kernels in CUDA: activation, swiglu, add, mul
// (kernels/README.md, "Elementwise kernels"; kernels/host/eltwise_kernels.c).
// Unit: ACCEL_KP_EW_CHUNK consecutive elements; the block's threads stride
// over its chunks. No reductions: each output is one expression, so the bits
// are the host kernels' (GELU erf: the device's erff, within 1 ulp of
// glibc's, which the emulator uses).
#include "kc_common.cuh"

enum kc_ew_kind { KC_EW_ACT, KC_EW_SWIGLU, KC_EW_ADD, KC_EW_MUL };

// Checks the constants and bindings of an elementwise launch.
KC_FN bool kc_ew_check(enum kc_ew_kind kind, uint64_t a_bytes,
                       uint64_t b_bytes, uint64_t y_bytes,
                       const accel_kp_eltwise_constants_t *c) {
  const char *name = kind == KC_EW_ACT      ? "activation"
                     : kind == KC_EW_SWIGLU ? "swiglu"
                     : kind == KC_EW_ADD    ? "add"
                                            : "mul";
  if (!kc_check_block(name)) {
    return false;
  }
  uint64_t period = c->b_count ? c->b_count : c->count;
  bool bad = c->reserved != 0;
  if (kind == KC_EW_ACT) {
    bad = bad || c->op == ACCEL_KP_ACT_NONE || c->op >= ACCEL_KP_ACT_COUNT ||
          c->b_count != 0;
  } else if (kind == KC_EW_SWIGLU) {
    bad = bad || c->op != 0 || c->b_count != 0;
  } else {
    bad = bad || c->op != 0 || (c->count != 0 && c->count % period != 0);
  }
  if (bad) {
    KC_FAIL("%s: constants not valid (count %u, b_count %u, op %u)", name,
            c->count, c->b_count, c->op);
    return false;
  }
  uint64_t in1 = kind == KC_EW_ADD || kind == KC_EW_MUL ? period : c->count;
  return kc_holds(name, 0, kind == KC_EW_SWIGLU ? "gate" : "a", a_bytes,
                  4ull * c->count) &&
         (kind == KC_EW_ACT ||
          kc_holds(name, 1, kind == KC_EW_SWIGLU ? "up" : "b", b_bytes,
                   4ull * in1)) &&
         kc_holds(name, kind == KC_EW_ACT ? 1 : 2, "y", y_bytes,
                  4ull * c->count);
}

// This block's elements [*first, *last).
KC_FN void kc_ew_range(const accel_kp_eltwise_constants_t *c, uint64_t *first,
                       uint64_t *last) {
  uint64_t b, e;
  kc_units(accel_kp_eltwise_units(c), &b, &e);
  *first = b * ACCEL_KP_EW_CHUNK;
  *last = e * ACCEL_KP_EW_CHUNK < c->count ? e * ACCEL_KP_EW_CHUNK : c->count;
}

KC_KERNEL activation(const float *x, float *y, uint64_t x_bytes,
                     uint64_t y_bytes, accel_kp_eltwise_constants_t c) {
  if (!kc_ew_check(KC_EW_ACT, x_bytes, 0, y_bytes, &c)) return;
  uint64_t first, last;
  kc_ew_range(&c, &first, &last);
  for (uint64_t i = first + threadIdx.x; i < last; i += KC_BLOCK) {
    float v = x[i];
    y[i] = c.op == ACCEL_KP_ACT_GELU_TANH ? kp_gelu_tanh(v)
           : c.op == ACCEL_KP_ACT_GELU_ERF ? kp_gelu_erf(v)
                                            : kp_silu(v);
  }
}

KC_KERNEL swiglu(const float *gate, const float *up, float *y,
                 uint64_t gate_bytes, uint64_t up_bytes, uint64_t y_bytes,
                 accel_kp_eltwise_constants_t c) {
  if (!kc_ew_check(KC_EW_SWIGLU, gate_bytes, up_bytes, y_bytes, &c)) return;
  uint64_t first, last;
  kc_ew_range(&c, &first, &last);
  for (uint64_t i = first + threadIdx.x; i < last; i += KC_BLOCK) {
    y[i] = kp_silu(gate[i]) * up[i];
  }
}

KC_FN void kc_binary(bool multiply, const float *a, const float *b, float *y,
                     const accel_kp_eltwise_constants_t *c) {
  uint64_t period = c->b_count ? c->b_count : c->count;
  uint64_t first, last;
  kc_ew_range(c, &first, &last);
  for (uint64_t i = first + threadIdx.x; i < last; i += KC_BLOCK) {
    float bv = b[i % period];
    y[i] = multiply ? a[i] * bv : a[i] + bv;
  }
}

KC_KERNEL add(const float *a, const float *b, float *y, uint64_t a_bytes,
              uint64_t b_bytes, uint64_t y_bytes,
              accel_kp_eltwise_constants_t c) {
  if (!kc_ew_check(KC_EW_ADD, a_bytes, b_bytes, y_bytes, &c)) return;
  kc_binary(false, a, b, y, &c);
}

KC_KERNEL mul(const float *a, const float *b, float *y, uint64_t a_bytes,
              uint64_t b_bytes, uint64_t y_bytes,
              accel_kp_eltwise_constants_t c) {
  if (!kc_ew_check(KC_EW_MUL, a_bytes, b_bytes, y_bytes, &c)) return;
  kc_binary(true, a, b, y, &c);
}
