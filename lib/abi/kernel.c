// Kernels: run-time registration (a framework's own host functions) and the
// accessors shared with executable kernels.
#include <stdlib.h>
#include <string.h>

#include "abi/executable_impl.h"
#include "core/error.h"

static void kernel_destroy(accel_object_t *object) {
  accel_kernel_t *k = (accel_kernel_t *)object;
  if (k->owns_strings) {
    for (uint32_t i = 0; i < k->binding_count; ++i) {
      free((char *)k->bindings[i].name);
    }
    free(k->name);
  }
  free(atomic_load_explicit(&k->record_cache, memory_order_acquire));
  free(k->bindings);
  free(k);
}

// A descriptor's binding declarations: within the limits, each with access
// bits and a power-of-two (or zero) alignment.
static accel_status_t check_desc_bindings(const accel_kernel_desc_t *desc) {
  if (desc->binding_count > AXE_MAX_BINDINGS ||
      desc->constants_size > AXE_MAX_CONSTANTS ||
      (desc->binding_count > 0 && desc->bindings == NULL)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "kernel \"%s\": %u bindings (max %u), %u constant "
                       "bytes (max %u), bindings array %s",
                       desc->name, desc->binding_count, AXE_MAX_BINDINGS,
                       desc->constants_size, AXE_MAX_CONSTANTS,
                       desc->bindings ? "set" : "NULL");
  }
  for (uint32_t i = 0; i < desc->binding_count; ++i) {
    uint32_t a = desc->bindings[i].access, al = desc->bindings[i].alignment;
    if (a == 0 || (a & ~3u) != 0 || (al & (al - 1)) != 0) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "kernel \"%s\" binding %u: access 0x%x must be "
                         "read/write bits, alignment %u a power of two",
                         desc->name, i, a, al);
    }
  }
  return ACCEL_OK;
}

// Everything accel_kernel_register checks before it allocates.
static accel_status_t check_desc(const accel_device_t *device,
                                 const accel_kernel_desc_t *desc) {
  if (desc->struct_size < sizeof(*desc)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "kernel desc: struct_size %u is too small",
                       desc->struct_size);
  }
  if (desc->name == NULL || desc->name[0] == '\0' ||
      strlen(desc->name) > AXE_MAX_NAME) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "kernel desc: name must be 1 to %u bytes", AXE_MAX_NAME);
  }
  if (desc->fn == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "kernel \"%s\": fn is NULL", desc->name);
  }
  uint32_t major = desc->abi_version >> 16, minor = desc->abi_version & 0xffff;
  if (major != ACCEL_KERNEL_ABI_VERSION_MAJOR ||
      minor > ACCEL_KERNEL_ABI_VERSION_MINOR) {
    return accel_error(ACCEL_ERROR_VERSION,
                       "kernel \"%s\": compiled for kernel ABI %u.%u, this "
                       "runtime provides %u.%u",
                       desc->name, major, minor, ACCEL_KERNEL_ABI_VERSION_MAJOR,
                       ACCEL_KERNEL_ABI_VERSION_MINOR);
  }
  ACCEL_RETURN_IF_ERROR(check_desc_bindings(desc));
  if ((device->info.caps & ACCEL_DEVICE_CAP_HOST_KERNELS) == 0) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "kernel \"%s\": %s does not run host kernels",
                       desc->name, device->info.id);
  }
  return ACCEL_OK;
}

// Copies the name and the binding declarations (names included) into |k|;
// false when out of memory, with |k| still safe to destroy.
static bool copy_declaration(accel_kernel_t *k,
                             const accel_kernel_desc_t *desc) {
  k->name = strdup(desc->name);
  k->bindings = calloc(desc->binding_count ? desc->binding_count : 1,
                       sizeof(*k->bindings));
  if (k->name == NULL || k->bindings == NULL) {
    return false;
  }
  for (uint32_t i = 0; i < desc->binding_count; ++i) {
    k->bindings[i] = desc->bindings[i];
    k->bindings[i].name = NULL;
    if (k->bindings[i].alignment == 0) {
      k->bindings[i].alignment = 1;
    }
    // Count first so that destroy frees exactly what was copied.
    k->binding_count = i + 1;
    if (desc->bindings[i].name != NULL) {
      k->bindings[i].name = strdup(desc->bindings[i].name);
      if (k->bindings[i].name == NULL) {
        return false;
      }
    }
  }
  k->binding_count = desc->binding_count;
  return true;
}

accel_status_t accel_kernel_register(accel_device_t *device,
                                     const accel_kernel_desc_t *desc,
                                     accel_kernel_t **out_kernel) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(desc != NULL, "desc (NULL)");
  ACCEL_CHECK_ARG(out_kernel != NULL, "out_kernel (NULL)");
  ACCEL_RETURN_IF_ERROR(check_desc(device, desc));
  accel_kernel_t *k = aligned_alloc(64, sizeof(*k));
  if (k == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "kernel \"%s\": cannot allocate", desc->name);
  }
  memset(k, 0, sizeof(*k));
  accel_launch_owner_init(&k->self, kernel_destroy);
  k->owner = &k->self;
  k->owns_strings = true;
  k->device = device;
  k->fn = desc->fn;
  k->abi_version = desc->abi_version;
  k->constants_size = desc->constants_size;
  k->checks = device->runtime->flags & (ACCEL_RUNTIME_FLAG_CHECK_NUMERICS |
                                        ACCEL_RUNTIME_FLAG_TENSOR_SUMMARIES);
  for (int d = 0; d < 3; ++d) {
    k->workgroup_size[d] = desc->workgroup_size[d] ? desc->workgroup_size[d] : 1;
  }
  if (!copy_declaration(k, desc)) {
    goto err_destroy;
  }
  accel_kernel_init_single_dispatch(k);
  *out_kernel = k;
  return ACCEL_OK;

err_destroy:
  kernel_destroy(&k->self.object);
  return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                     "kernel \"%s\": cannot copy its declaration", desc->name);
}

void accel_kernel_retain(accel_kernel_t *kernel) {
  if (kernel != NULL) {
    accel_launch_owner_retain(kernel->owner);
  }
}

void accel_kernel_release(accel_kernel_t *kernel) {
  if (kernel != NULL) {
    accel_launch_owner_release(kernel->owner);
  }
}

accel_status_t accel_kernel_info(const accel_kernel_t *kernel,
                                 accel_kernel_info_t *out_info) {
  ACCEL_CHECK_ARG(kernel != NULL, "kernel (NULL)");
  ACCEL_CHECK_ARG(out_info != NULL, "out_info (NULL)");
  uint32_t size = out_info->struct_size;
  if (size < ACCEL_KERNEL_INFO_SIZE_0_1) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "kernel info: struct_size %u is too small (at least "
                       "%u)",
                       size, ACCEL_KERNEL_INFO_SIZE_0_1);
  }
  const accel_kernel_meta_t *m = kernel->meta;
  accel_kernel_info_t info = {
      .struct_size = size,
      .abi_version = kernel->abi_version,
      .name = kernel->name,
      .binding_count = kernel->binding_count,
      .constants_size = kernel->constants_size,
      .bindings = kernel->bindings,
      .version = m != NULL ? m->version : 0,
      .tunable_count = m != NULL ? m->tunable_count : 0,
      .tunables = m != NULL && m->tunable_count ? m->tunables : NULL,
      .binding_types = m != NULL && m->binding_count ? m->binding_types : NULL,
      .features = m != NULL ? m->features : 0,
  };
  memcpy(info.workgroup_size, kernel->workgroup_size,
         sizeof(info.workgroup_size));
  // A caller built against 0.1 gets the fields its struct has.
  memcpy(out_info, &info, size < sizeof(info) ? size : sizeof(info));
  return ACCEL_OK;
}
