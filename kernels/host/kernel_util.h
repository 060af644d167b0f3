// Internal helpers of the reference kernels (kernels/host/*_kernels.c): the
// grid-to-units split, launch checks that report through the ABI message
// channel, the fixed 16-lane reduction every kernel uses, and the f32
// elementary functions whose exact operation sequence kernels/README.md
// specifies (so that other backends can reproduce the bits). The kernels are
// built with -ffp-contract=off: every multiply and add rounds on its own, as
// written.
#ifndef ACCEL_KERNELS_HOST_KERNEL_UTIL_H_
#define ACCEL_KERNELS_HOST_KERNEL_UTIL_H_

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/kernel_abi.h"
#include "kernel_params.h"
#include "kp_math.h"

// Lanes of the fixed reduction: a sum over i accumulates element i into lane
// i % KP_LANES (in increasing i), then folds lanes l += l + 8, l += l + 4,
// l += l + 2, l += l + 1 and returns lane 0.
#define KP_LANES 16

#if defined(__x86_64__)
// Hot loops get an AVX2 and an AVX-512 clone next to the baseline one. With
// -ffp-contract=off the clones perform the same roundings in the same order,
// so every CPU gives the same bits.
#define KP_VECTOR_CLONES \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KP_VECTOR_CLONES
#endif

typedef struct kp_range {
  uint64_t begin, end;
} kp_range_t;

// Units [begin, end) of |units| that this work-group computes (the grid
// convention of kernel_params.h).
static inline kp_range_t kp_units(const accel_kernel_dispatch_t *d,
                                  const accel_kernel_workgroup_t *wg,
                                  uint64_t units) {
  const uint32_t *n = d->workgroup_count;
  unsigned __int128 groups = (unsigned __int128)n[0] * n[1] * n[2];
  unsigned __int128 g =
      wg->id[0] + (unsigned __int128)n[0] * (wg->id[1] + (uint64_t)n[1] * wg->id[2]);
  kp_range_t r = {(uint64_t)(g * units / groups),
                  (uint64_t)((g + 1) * units / groups)};
  return r;
}

// Reports a bad launch: an assertion through the message channel (the
// launch fails with this text) when the runtime offers one. Returns the
// kernel's non-zero return value.
__attribute__((format(printf, 3, 4), unused)) static int32_t kp_fail(
    const accel_kernel_dispatch_t *d, const accel_kernel_workgroup_t *wg,
    const char *format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  if (d->struct_size >= 80 && d->message != NULL) {
    d->message(d, wg, ACCEL_KERNEL_MESSAGE_ASSERT, text);
  }
  return 1;
}

// Scratch for a work-group: the runtime's per-thread block (kernel ABI 1.3)
// when it offers one (*owned = 0; *fresh = 0 when this thread's earlier
// work-groups of the launch left their contents there), else malloc
// (*owned = 1, *fresh = 1: free it with kp_scratch_free). NULL when
// neither can allocate.
static inline void *kp_scratch(const accel_kernel_dispatch_t *d,
                               const accel_kernel_workgroup_t *wg,
                               uint64_t bytes, int *fresh, int *owned) {
  if (d->struct_size >= offsetof(accel_kernel_dispatch_t, thread_scratch) +
                             sizeof(d->thread_scratch) &&
      d->thread_scratch != NULL) {
    int32_t f = 1;
    void *p = d->thread_scratch(d, wg, bytes, &f);
    if (p != NULL) {
      *fresh = f != 0;
      *owned = 0;
      return p;
    }
  }
  *fresh = 1;
  *owned = 1;
  return malloc(bytes);
}

static inline void kp_scratch_free(void *p, int owned) {
  if (owned) {
    free(p);
  }
}

// Returns 1 when binding |index| holds at least |bytes| (|bytes| computed
// without overflow by the caller), else reports it and returns 0.
static inline int kp_binding_holds(const accel_kernel_dispatch_t *d,
                                   const accel_kernel_workgroup_t *wg,
                                   uint32_t index, const char *name,
                                   unsigned __int128 bytes) {
  if (index < d->binding_count && d->bindings[index].size_bytes >= bytes) {
    return 1;
  }
  kp_fail(d, wg,
          "binding %u (%s) holds %llu bytes, the constants need %llu", index,
          name,
          (unsigned long long)(index < d->binding_count
                                   ? d->bindings[index].size_bytes
                                   : 0),
          bytes > UINT64_MAX ? (unsigned long long)UINT64_MAX
                             : (unsigned long long)bytes);
  return 0;
}

// Returns 1 when the launch passes |size| bytes of constants and |bindings|
// bindings, else reports it and returns 0. Copies the constants to |out|.
static inline int kp_signature(const accel_kernel_dispatch_t *d,
                               const accel_kernel_workgroup_t *wg,
                               uint32_t bindings, void *out, uint32_t size) {
  if (d->constants_size != size || d->constants == NULL ||
      d->binding_count != bindings) {
    kp_fail(d, wg,
            "kernel declared with %u bindings and %u bytes of constants, "
            "expects %u and %u",
            d->binding_count, d->constants_size, bindings, size);
    return 0;
  }
  memcpy(out, d->constants, size);
  return 1;
}

// Folds the lanes in the fixed order (see KP_LANES).
static inline float kp_fold(float acc[KP_LANES]) {
  for (int w = KP_LANES / 2; w >= 1; w /= 2) {
    for (int l = 0; l < w; ++l) {
      acc[l] = acc[l] + acc[l + w];
    }
  }
  return acc[0];
}

// 16 f32 lanes as one value (GCC/Clang vector extension): the compiler
// lowers each operation lane by lane to whatever the clone's ISA has, so the
// roundings are those of the scalar code.
// Always inlined: a clone's vector code must not call out to baseline-ISA
// helpers (slow, and 64-byte vectors passed by value need matching ABIs).
typedef float kp_v16 __attribute__((vector_size(64)));
#define KP_ALWAYS_INLINE static inline __attribute__((always_inline))
typedef int32_t kp_v16i __attribute__((vector_size(64)));

KP_ALWAYS_INLINE kp_v16 kp_load16(const float *p) {
  kp_v16 v;
  memcpy(&v, p, sizeof(v));
  return v;
}

KP_ALWAYS_INLINE void kp_store16(float *p, kp_v16 v) {
  memcpy(p, &v, sizeof(v));
}

KP_ALWAYS_INLINE kp_v16 kp_splat16(float f) {
  kp_v16 v = {f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f};
  return v;
}

// mask ? a : b per lane (mask lanes all ones or zero).
KP_ALWAYS_INLINE kp_v16 kp_select16(kp_v16i mask, kp_v16 a, kp_v16 b) {
  kp_v16i r = (mask & (kp_v16i)a) | (~mask & (kp_v16i)b);
  return (kp_v16)r;
}

// kp_expf on 16 lanes: the same operations in the same order.
KP_ALWAYS_INLINE kp_v16 kp_expf16(kp_v16 x) {
  const kp_v16 lo = kp_splat16(-87.33f), hi = kp_splat16(88.7228f);
  const kp_v16 magic = kp_splat16(12582912.0f);
  kp_v16 xc = kp_select16(x < lo, lo, kp_select16(x > hi, hi, x));
  kp_v16 n = (xc * kp_splat16(1.44269504f) + magic) - magic;
  kp_v16 r = (xc - n * kp_splat16(0.693359375f)) - n * kp_splat16(-2.12194440e-4f);
  kp_v16 p = kp_splat16(1.38888889e-3f);
  p = p * r + kp_splat16(8.33333333e-3f);
  p = p * r + kp_splat16(4.16666667e-2f);
  p = p * r + kp_splat16(1.66666667e-1f);
  p = p * r + kp_splat16(0.5f);
  p = p * r + kp_splat16(1.0f);
  p = p * r + kp_splat16(1.0f);
  kp_v16i k = __builtin_convertvector(n, kp_v16i);
  kp_v16i positive = k > 0;
  kp_v16i e = (k + (positive & -1)) + 127;  // k - 1 where k > 0
  kp_v16 y = p * (kp_v16)(e << 23);
  y = kp_select16(positive, y * kp_splat16(2.0f), y);
  y = kp_select16(x < lo, kp_splat16(0.0f), y);
  y = kp_select16(x > hi, kp_splat16(__builtin_inff()), y);
  return kp_select16(x != x, x, y);
}

// y[i] = act(x[i] + bias[i]) for i < n (x[i] alone when |bias| is NULL; y
// may be x), with the operation chosen outside the loops so that each loop
// vectorizes.
__attribute__((unused)) KP_VECTOR_CLONES static void kp_bias_activate(
    const float *x, float *y, const float *bias, uint64_t n, uint32_t op) {
  if (bias != NULL) {
    for (uint64_t i = 0; i < n; ++i) y[i] = x[i] + bias[i];
    x = y;
  }
  switch (op) {
    case ACCEL_KP_ACT_GELU_TANH:
      for (uint64_t i = 0; i < n; ++i) y[i] = kp_gelu_tanh(x[i]);
      break;
    case ACCEL_KP_ACT_GELU_ERF:
      for (uint64_t i = 0; i < n; ++i) y[i] = kp_gelu_erf(x[i]);
      break;
    case ACCEL_KP_ACT_SILU:
      for (uint64_t i = 0; i < n; ++i) y[i] = kp_silu(x[i]);
      break;
    default:
      if (x != y) memmove(y, x, n * sizeof(float));
      break;
  }
}

#endif  // ACCEL_KERNELS_HOST_KERNEL_UTIL_H_
