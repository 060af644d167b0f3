#include <string.h>

#include "accel/device.h"
#include "core/driver_device.h"
#include "core/error.h"
#include "core/runtime_impl.h"

accel_status_t accel_device_count(const accel_runtime_t *runtime,
                                  uint32_t *out_count) {
  ACCEL_CHECK_ARG(runtime != NULL, "runtime (NULL)");
  ACCEL_CHECK_ARG(out_count != NULL, "out_count (NULL)");
  *out_count = runtime->device_count;
  return ACCEL_OK;
}

accel_status_t accel_device_get(const accel_runtime_t *runtime, uint32_t index,
                                accel_device_t **out_device) {
  ACCEL_CHECK_ARG(runtime != NULL, "runtime (NULL)");
  ACCEL_CHECK_ARG(out_device != NULL, "out_device (NULL)");
  if (index >= runtime->device_count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "device index %u out of range: the runtime has %u "
                       "device(s)",
                       index, runtime->device_count);
  }
  *out_device = runtime->devices[index];
  return ACCEL_OK;
}

// The size of accel_device_info_t in API 0.1; older callers cannot exist yet,
// so this is also the minimum.
#define ACCEL_DEVICE_INFO_MIN_SIZE sizeof(accel_device_info_t)

accel_status_t accel_device_info(const accel_device_t *device,
                                 accel_device_info_t *out_info) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(out_info != NULL, "out_info (NULL)");
  if (out_info->struct_size < ACCEL_DEVICE_INFO_MIN_SIZE) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_device_info: struct_size %u is below the "
                       "minimum %zu (set it to sizeof(accel_device_info_t))",
                       out_info->struct_size, ACCEL_DEVICE_INFO_MIN_SIZE);
  }
  uint32_t caller_size = out_info->struct_size;
  memcpy(out_info, &device->info, sizeof(device->info));
  out_info->struct_size = caller_size < sizeof(device->info)
                              ? caller_size
                              : (uint32_t)sizeof(device->info);
  return ACCEL_OK;
}

accel_runtime_t *accel_device_runtime(const accel_device_t *device) {
  return device != NULL ? device->runtime : NULL;
}

accel_status_t accel_device_clock_pair(const accel_device_t *device,
                                       uint64_t *out_host_ns,
                                       uint64_t *out_device_ns) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(out_host_ns != NULL, "out_host_ns (NULL)");
  ACCEL_CHECK_ARG(out_device_ns != NULL, "out_device_ns (NULL)");
  uint64_t host_ns = 0, device_ns = 0;
  device->driver->device->clock_pair(device->drv, &host_ns, &device_ns);
  *out_host_ns = host_ns;
  *out_device_ns = device_ns;
  return ACCEL_OK;
}
