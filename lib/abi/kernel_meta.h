// Kernel metadata from a host code object (kernel ABI 1.2): per-kernel
// version, binding element types and tunable parameters, checked once when
// the code object loads and then read without further checks.
#ifndef ACCEL_ABI_KERNEL_META_H_
#define ACCEL_ABI_KERNEL_META_H_

#include "accel/kernel_abi.h"
#include "core/error.h"

// Most tunables per kernel and values per tunable.
#define ACCEL_KERNEL_MAX_TUNABLES 8u
#define ACCEL_KERNEL_MAX_TUNABLE_VALUES 64u
// Longest tunable name, in bytes.
#define ACCEL_KERNEL_MAX_TUNABLE_NAME 31u

// Checks the metadata table of |lib| (its struct_size already checked):
// every entry names an export once, the counts are within the limits, the
// pointers are present where counts say so, names are [a-z0-9_], kinds and
// element types known, values >= 1. ACCEL_ERROR_FORMAT naming the entry and
// field otherwise. Libraries older than ABI 1.2 pass.
accel_status_t accel_kernel_meta_check_library(
    const accel_kernel_library_t *lib, const char *what);

// The metadata entry of export |name| in |lib|; NULL when it has none.
const accel_kernel_meta_t *accel_kernel_meta_find(
    const accel_kernel_library_t *lib, const char *name);

// Checks |meta| against the kernel record it is attached to: the binding
// count matches (or is 0) and every CONSTANT tunable's field lies inside
// |constants_size|. ACCEL_ERROR_FORMAT otherwise.
accel_status_t accel_kernel_meta_check_kernel(const accel_kernel_meta_t *meta,
                                              const char *kernel,
                                              uint32_t binding_count,
                                              uint32_t constants_size);

#endif  // ACCEL_ABI_KERNEL_META_H_
