// A host code object for the loader's tests. Its ELF constructor leaves a
// marker in the process environment (ACCEL_TEST_CTOR_MARKER), so that a test
// can tell whether the loader ran any of its code. It exports the kernels
// "present" and "other"; ACCEL_TEST_LIBRARY_DEFECT makes its library
// descriptor defective: "short_struct" (a struct_size below the 1.0 size) or
// "repeated_export" (two exports named "present").
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accel/kernel_abi.h"

__attribute__((constructor)) static void leave_marker(void) {
  setenv("ACCEL_TEST_CTOR_MARKER", "constructor ran", 1);
}

ACCEL_KERNEL_ENTRY int32_t present(const accel_kernel_dispatch_t *d,
                                   const accel_kernel_workgroup_t *wg);
ACCEL_KERNEL_ENTRY int32_t present(const accel_kernel_dispatch_t *d,
                                   const accel_kernel_workgroup_t *wg) {
  (void)d;
  (void)wg;
  return 0;
}

ACCEL_KERNEL_ENTRY int32_t other(const accel_kernel_dispatch_t *d,
                                 const accel_kernel_workgroup_t *wg);
ACCEL_KERNEL_ENTRY int32_t other(const accel_kernel_dispatch_t *d,
                                 const accel_kernel_workgroup_t *wg) {
  (void)d;
  (void)wg;
  return 0;
}

static const accel_kernel_export_t k_exports[] = {
    {.name = "present", .fn = present},
    {.name = "other", .fn = other},
};

static const accel_kernel_export_t k_repeated[] = {
    {.name = "present", .fn = present},
    {.name = "other", .fn = other},
    {.name = "present", .fn = other},
};

static accel_kernel_library_t k_library = {
    .struct_size = sizeof(accel_kernel_library_t),
    .abi_version = ACCEL_KERNEL_ABI_VERSION,
    .name = "accel loader test kernels",
    .export_count = 2,
    .exports = k_exports,
};

ACCEL_KERNEL_EXPORT const accel_kernel_library_t *accel_kernel_library_query(
    uint32_t runtime_abi_version);

ACCEL_KERNEL_EXPORT const accel_kernel_library_t *accel_kernel_library_query(
    uint32_t runtime_abi_version) {
  (void)runtime_abi_version;
  const char *defect = getenv("ACCEL_TEST_LIBRARY_DEFECT");
  if (defect != NULL && strcmp(defect, "short_struct") == 0) {
    k_library.struct_size = offsetof(accel_kernel_library_t, exports);
  } else if (defect != NULL && strcmp(defect, "repeated_export") == 0) {
    k_library.export_count = 3;
    k_library.exports = k_repeated;
  }
  return &k_library;
}
