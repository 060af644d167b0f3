// Internal layout of the runtime and device objects, shared by lib/ modules.
#ifndef ACCEL_CORE_RUNTIME_IMPL_H_
#define ACCEL_CORE_RUNTIME_IMPL_H_

#include <stdbool.h>

#include "accel/device.h"
#include "accel/runtime.h"
#include "core/driver.h"

#define ACCEL_MAX_BACKENDS 8

struct accel_device {
  accel_runtime_t *runtime;
  const accel_driver_t *driver;  // borrowed; static table
  accel_drv_device_t *drv;       // owned
  accel_device_info_t info;      // filled at open; index set when visible
  uint32_t ordinal;              // within its backend
  _Atomic uint32_t stream_counter;  // numbers default stream names
  _Atomic uint32_t command_buffer_counter;  // and command buffer names
  // lib/mem's per-device state (allocators, statistics), created on first
  // use; |mem_fini| tears it down before the device closes. Core does not
  // look inside.
  _Atomic(void *) mem;
  void (*mem_fini)(accel_device_t *device);
  _Atomic uint32_t dma_queue_counter;  // numbers DMA queues (lib/dma)
  // Health state, watchdog and members (lib/core/health.c); set at open.
  struct accel_health *health;
};

struct accel_runtime {
  accel_drv_options_t options;
  // accel_runtime_flag_bits after the environment's overrides.
  accel_runtime_flags_t flags;
  // Stream copies of at least this many bytes run on copy engines (DMA
  // queues); smaller ones run on the stream's own queue.
  uint64_t stream_copy_dma_min_bytes;
  // DMA copies of at most this many bytes may run on the submitting thread
  // when their queue is idle (ACCEL_DMA_INLINE_MAX_BYTES; 0: never).
  uint64_t dma_inline_max_bytes;
  // Default progress deadline of streams and DMA queues whose desc says 0
  // (ACCEL_WATCHDOG_MS); 0: not watched.
  uint64_t watchdog_ns;
  uint32_t backend_count;
  struct {
    const accel_driver_t *driver;
    accel_drv_backend_t *backend;
  } backends[ACCEL_MAX_BACKENDS];
  // Backends whose probe answered ACCEL_ERROR_UNAVAILABLE, with the reason
  // (accel_runtime_backend_status, accel-info).
  uint32_t skipped_count;
  struct {
    const char *name;  // the driver's static name
    char reason[256];
  } skipped[ACCEL_MAX_BACKENDS];
  // Every opened device, in backend order (owned).
  uint32_t all_device_count;
  accel_device_t **all_devices;
  // The visible ones, in the order ACCEL_VISIBLE_DEVICES gave (borrowed).
  uint32_t device_count;
  accel_device_t **devices;
};

// Reads an unsigned integer environment variable; returns false when unset.
// Sets |*out_invalid| when set but malformed.
bool accel_env_u64(const char *name, uint64_t *out_value, bool *out_invalid);

#endif  // ACCEL_CORE_RUNTIME_IMPL_H_
