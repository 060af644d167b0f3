// Elementwise kernels (kernel_params.h): activation, swiglu, add and mul.
// One unit is ACCEL_KP_EW_CHUNK consecutive elements; no reductions, so an
// element's value depends on its inputs only.
#include <stdint.h>

#include "kernel_list.h"
#include "kernel_util.h"

KP_VECTOR_CLONES static void swiglu_loop(const float *gate, const float *up,
                                         float *y, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) y[i] = kp_silu(gate[i]) * up[i];
}

// y[i] = a[i] op b[(first + i) % period] for i < n.
KP_VECTOR_CLONES static void binary_loop(int multiply, const float *a,
                                         const float *b, float *y, uint64_t n,
                                         uint64_t first, uint64_t period) {
  uint64_t j = first % period;
  uint64_t i = 0;
  while (i < n) {
    uint64_t run = period - j < n - i ? period - j : n - i;
    if (multiply) {
      for (uint64_t t = 0; t < run; ++t) y[i + t] = a[i + t] * b[j + t];
    } else {
      for (uint64_t t = 0; t < run; ++t) y[i + t] = a[i + t] + b[j + t];
    }
    i += run;
    j = 0;
  }
}

typedef enum ew_kind { EW_ACT, EW_SWIGLU, EW_ADD, EW_MUL } ew_kind_t;

static int32_t eltwise(const accel_kernel_dispatch_t *d,
                       const accel_kernel_workgroup_t *wg, ew_kind_t kind) {
  static const char *const names[] = {"activation", "swiglu", "add", "mul"};
  uint32_t bindings = kind == EW_ACT ? 2 : 3;
  accel_kp_eltwise_constants_t c;
  if (!kp_signature(d, wg, bindings, &c, sizeof(c))) {
    return 1;
  }
  uint64_t period = c.b_count ? c.b_count : c.count;
  int bad = c.reserved != 0;
  if (kind == EW_ACT) {
    bad |= c.op == ACCEL_KP_ACT_NONE || c.op >= ACCEL_KP_ACT_COUNT ||
           c.b_count != 0;
  } else if (kind == EW_SWIGLU) {
    bad |= c.op != 0 || c.b_count != 0;
  } else {
    bad |= c.op != 0 || (c.count != 0 && c.count % period != 0);
  }
  if (bad) {
    return kp_fail(d, wg, "%s: constants not valid (count %u, b_count %u, op "
                   "%u)", names[kind], c.count, c.b_count, c.op);
  }
  uint64_t in1 = kind == EW_ADD || kind == EW_MUL ? period : c.count;
  if (!kp_binding_holds(d, wg, 0, kind == EW_SWIGLU ? "gate" : "a", 4ull * c.count) ||
      (kind != EW_ACT &&
       !kp_binding_holds(d, wg, 1, kind == EW_SWIGLU ? "up" : "b", 4ull * in1)) ||
      !kp_binding_holds(d, wg, bindings - 1, "y", 4ull * c.count)) {
    return 1;
  }
  kp_range_t r = kp_units(d, wg, accel_kp_eltwise_units(&c));
  uint64_t first = r.begin * ACCEL_KP_EW_CHUNK;
  uint64_t last = r.end * ACCEL_KP_EW_CHUNK;
  if (last > c.count) last = c.count;
  if (first >= last) {
    return 0;
  }
  const float *a = (const float *)d->bindings[0].data + first;
  float *y = (float *)d->bindings[bindings - 1].data + first;
  const float *b = d->bindings[1].data;
  switch (kind) {
    case EW_ACT:
      kp_bias_activate(a, y, NULL, last - first, c.op);
      break;
    case EW_SWIGLU:
      swiglu_loop(a, b + first, y, last - first);
      break;
    default:
      binary_loop(kind == EW_MUL, a, b, y, last - first, first, period);
      break;
  }
  return 0;
}

int32_t activation(const accel_kernel_dispatch_t *d,
                   const accel_kernel_workgroup_t *wg) {
  return eltwise(d, wg, EW_ACT);
}

int32_t swiglu(const accel_kernel_dispatch_t *d,
               const accel_kernel_workgroup_t *wg) {
  return eltwise(d, wg, EW_SWIGLU);
}

int32_t add(const accel_kernel_dispatch_t *d,
            const accel_kernel_workgroup_t *wg) {
  return eltwise(d, wg, EW_ADD);
}

int32_t mul(const accel_kernel_dispatch_t *d,
            const accel_kernel_workgroup_t *wg) {
  return eltwise(d, wg, EW_MUL);
}

#ifndef ACCEL_KP_COMBINED
ACCEL_KP_FAMILY_LIBRARY("accel elementwise kernels", ACCEL_KP_ELTWISE_KERNELS, NULL, ACCEL_KP_META_ELTWISE)
#endif
