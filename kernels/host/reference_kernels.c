// Reference host kernels, built as one host code object
// (libaccel_host_kernels.so) that tests and benchmarks pack into .axe files.
// They follow docs/kernel-abi.md: one call per work-group, bindings and
// constants in declaration order.
//
//   empty       no bindings, no constants: the launch-overhead kernel.
//   vector_add  out[i] = a[i] + b[i] for i < n; 256 items per work-group.
//               bindings: a (read), b (read), out (write), f32.
//               constants: uint32 n.
//   reduce_sum  sum of n f32 values across all work-groups, in double.
//               bindings: in (read, f32), out (write, one double),
//               scratch (read-write: a uint32 arrival counter, padding to 64
//               bytes, then one double per work-group). Each group writes its
//               partial sum; the last group to arrive (atomic counter) adds
//               the partials in group order, writes out, and resets the
//               counter so that the launch can be repeated.
//               constants: uint32 n, uint32 items_per_group.
//   fail_at     returns 7 from work-group x == constant (error paths).
#include <stdatomic.h>
#include <stdint.h>

#include "accel/kernel_abi.h"

#define VECTOR_ADD_ITEMS 256u

ACCEL_KERNEL_ENTRY int32_t empty(const accel_kernel_dispatch_t *d,
                                 const accel_kernel_workgroup_t *wg);
ACCEL_KERNEL_ENTRY int32_t empty(const accel_kernel_dispatch_t *d,
                                 const accel_kernel_workgroup_t *wg) {
  (void)d;
  (void)wg;
  return 0;
}

ACCEL_KERNEL_ENTRY int32_t vector_add(const accel_kernel_dispatch_t *d,
                                      const accel_kernel_workgroup_t *wg);
ACCEL_KERNEL_ENTRY int32_t vector_add(const accel_kernel_dispatch_t *d,
                                      const accel_kernel_workgroup_t *wg) {
  const float *a = d->bindings[0].data;
  const float *b = d->bindings[1].data;
  float *out = d->bindings[2].data;
  uint32_t n;
  __builtin_memcpy(&n, d->constants, sizeof(n));
  uint64_t first = (uint64_t)wg->id[0] * VECTOR_ADD_ITEMS;
  uint64_t last = first + VECTOR_ADD_ITEMS < n ? first + VECTOR_ADD_ITEMS : n;
  for (uint64_t i = first; i < last; ++i) {
    out[i] = a[i] + b[i];
  }
  return 0;
}

ACCEL_KERNEL_ENTRY int32_t reduce_sum(const accel_kernel_dispatch_t *d,
                                      const accel_kernel_workgroup_t *wg);
ACCEL_KERNEL_ENTRY int32_t reduce_sum(const accel_kernel_dispatch_t *d,
                                      const accel_kernel_workgroup_t *wg) {
  const float *in = d->bindings[0].data;
  double *out = d->bindings[1].data;
  uint8_t *scratch = d->bindings[2].data;
  _Atomic uint32_t *arrived = (_Atomic uint32_t *)scratch;
  double *partials = (double *)(scratch + 64);
  uint32_t c[2];
  __builtin_memcpy(c, d->constants, sizeof(c));
  uint32_t n = c[0], per = c[1];
  uint32_t groups = d->workgroup_count[0];
  if (per == 0 || d->bindings[2].size_bytes < 64 + 8ull * groups) {
    return 1;  // the host passed a scratch too small for this grid
  }
  uint64_t first = (uint64_t)wg->id[0] * per;
  uint64_t last = first + per < n ? first + per : n;
  double sum = 0;
  for (uint64_t i = first; i < last; ++i) {
    sum += in[i];
  }
  partials[wg->id[0]] = sum;
  // Acq_rel: publishes this group's partial and, for the last arrival,
  // acquires every other group's.
  uint32_t before = atomic_fetch_add_explicit(arrived, 1, memory_order_acq_rel);
  if (before + 1 == groups) {
    double total = 0;
    for (uint32_t g = 0; g < groups; ++g) {
      total += partials[g];
    }
    *out = total;
    atomic_store_explicit(arrived, 0, memory_order_relaxed);
  }
  return 0;
}

ACCEL_KERNEL_ENTRY int32_t fail_at(const accel_kernel_dispatch_t *d,
                                   const accel_kernel_workgroup_t *wg);
ACCEL_KERNEL_ENTRY int32_t fail_at(const accel_kernel_dispatch_t *d,
                                   const accel_kernel_workgroup_t *wg) {
  uint32_t at;
  __builtin_memcpy(&at, d->constants, sizeof(at));
  return wg->id[0] == at ? 7 : 0;
}

static const accel_kernel_export_t k_exports[] = {
    {.name = "empty", .fn = empty},
    {.name = "vector_add", .fn = vector_add},
    {.name = "reduce_sum", .fn = reduce_sum},
    {.name = "fail_at", .fn = fail_at},
};

static const accel_kernel_library_t k_library = {
    .struct_size = sizeof(accel_kernel_library_t),
    .abi_version = ACCEL_KERNEL_ABI_VERSION,
    .name = "accel reference host kernels",
    .export_count = sizeof(k_exports) / sizeof(k_exports[0]),
    .exports = k_exports,
};

ACCEL_KERNEL_EXPORT const accel_kernel_library_t *accel_kernel_library_query(
    uint32_t runtime_abi_version);

ACCEL_KERNEL_EXPORT const accel_kernel_library_t *accel_kernel_library_query(
    uint32_t runtime_abi_version) {
  if ((runtime_abi_version >> 16) != ACCEL_KERNEL_ABI_VERSION_MAJOR) {
    return NULL;
  }
  return &k_library;
}
