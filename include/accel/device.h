// Devices: the accelerators a runtime exposes. Device handles are borrowed
// from the runtime and live until accel_runtime_destroy.
#ifndef ACCEL_DEVICE_H_
#define ACCEL_DEVICE_H_

#include "accel/base.h"
#include "accel/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_device accel_device_t;

// Capability bits of a device (accel_device_info_t.caps).
typedef uint32_t accel_device_caps_t;
enum accel_device_cap_bits {
  ACCEL_DEVICE_CAP_NONE = 0,
  // Device memory is directly readable and writable by host code.
  ACCEL_DEVICE_CAP_HOST_VISIBLE = 1u << 0,
  // Virtual-address reserve and physical map/unmap are available.
  ACCEL_DEVICE_CAP_VIRTUAL_MEMORY = 1u << 1,
  // accel_semaphore_fd is available (pollable semaphore waits).
  ACCEL_DEVICE_CAP_SEMAPHORE_FD = 1u << 2,
  // Device memory can be exported to and imported from another process.
  ACCEL_DEVICE_CAP_IPC = 1u << 3,
  // Runs host-target (CPU) kernels.
  ACCEL_DEVICE_CAP_HOST_KERNELS = 1u << 4,
  // Stream priorities change scheduling.
  ACCEL_DEVICE_CAP_STREAM_PRIORITY = 1u << 5,
  // Event timestamps are taken on the device.
  ACCEL_DEVICE_CAP_TIMESTAMPS = 1u << 6,
};

// What a device is. Strings are NUL-terminated; unknown numbers are 0 or -1 as
// each field says.
typedef struct accel_device_info {
  // sizeof(accel_device_info_t) as the caller compiled it; fields beyond it
  // are not written.
  uint32_t struct_size;
  // Position of the device in this runtime (after ACCEL_VISIBLE_DEVICES).
  uint32_t index;
  // Stable id "backend:ordinal" ("host:0"), unaffected by visibility.
  char id[32];
  // Human-readable name ("host cpu: AMD EPYC 7B13, 2 threads").
  char name[128];
  // Backend name ("host", "cuda").
  char backend[16];
  // Code-object target this device runs ("host-x86_64", "cuda-sm_90").
  char target[32];
  // PCI bus id "dddd:bb:dd.f", or "" when the device is not on PCI.
  char pci_bus_id[32];
  // Device memory in bytes the device can allocate (0 if unknown).
  uint64_t memory_bytes;
  // Granularity of physical memory mapping in bytes.
  uint64_t page_size;
  // NUMA node closest to the device, or -1 if unknown.
  int32_t numa_node;
  // Compute queues that execute concurrently (streams beyond it share them).
  uint32_t compute_queue_count;
  // Copy engines.
  uint32_t copy_queue_count;
  // accel_device_cap_bits.
  accel_device_caps_t caps;
} accel_device_info_t;

// Returns in |*out_count| the number of devices |runtime| exposes.
// ACCEL_ERROR_INVALID_ARGUMENT: a NULL argument. Thread-safe.
ACCEL_API accel_status_t accel_device_count(const accel_runtime_t *runtime,
                                            uint32_t *out_count);

// Returns in |*out_device| the device at |index| (borrowed; lives as long as
// |runtime|).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or |index| >= device count.
// Thread-safe.
ACCEL_API accel_status_t accel_device_get(const accel_runtime_t *runtime,
                                          uint32_t index,
                                          accel_device_t **out_device);

// Fills |*out_info| (the caller sets out_info->struct_size first) with what
// |device| is.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or struct_size below the size of
// the version 0.1 struct. Thread-safe.
ACCEL_API accel_status_t accel_device_info(const accel_device_t *device,
                                           accel_device_info_t *out_info);

// Reads the host clock (CLOCK_MONOTONIC, ns) and |device|'s clock (the one
// its timestamps use: event times, trace device times) as close together as
// the backend can, so that a caller maps device times onto the host
// timeline: host = *out_host_ns + (device_time - *out_device_ns). On the host
// device both clocks are CLOCK_MONOTONIC and the two values are equal.
// ACCEL_ERROR_INVALID_ARGUMENT: a NULL argument. Thread-safe.
ACCEL_API accel_status_t accel_device_clock_pair(const accel_device_t *device,
                                                 uint64_t *out_host_ns,
                                                 uint64_t *out_device_ns);

// Returns the runtime that owns |device| (borrowed), or NULL for NULL.
// Thread-safe.
ACCEL_API accel_runtime_t *accel_device_runtime(const accel_device_t *device);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_DEVICE_H_
