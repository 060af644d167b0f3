// Driver interface, sync table: timeline semaphores, a 64-bit value that
// only grows, with a sticky failure (see driver.h).
#ifndef ACCEL_CORE_DRIVER_SYNC_H_
#define ACCEL_CORE_DRIVER_SYNC_H_

#include "accel/semaphore.h"
#include "core/driver.h"
struct accel_drv_sync_ops {
  accel_status_t (*create)(accel_drv_device_t *device, uint64_t initial_value,
                           accel_drv_semaphore_t **out_semaphore);
  void (*destroy)(accel_drv_semaphore_t *semaphore);
  // Returns the stored failure (with message) or OK, and the value.
  accel_status_t (*query)(accel_drv_semaphore_t *semaphore,
                          uint64_t *out_value);
  accel_status_t (*signal)(accel_drv_semaphore_t *semaphore, uint64_t value);
  void (*fail)(accel_drv_semaphore_t *semaphore, accel_status_t status,
               const char *message);
  accel_status_t (*wait)(uint32_t count,
                         accel_drv_semaphore_t *const *semaphores,
                         const uint64_t *values, accel_wait_mode_t mode,
                         uint64_t timeout_ns, uint32_t *out_index);
  // Optional. A file descriptor that becomes readable once the value
  // reaches |value| (or the semaphore fails).
  accel_status_t (*export_fd)(accel_drv_semaphore_t *semaphore, uint64_t value,
                              int *out_fd);
};

#endif  // ACCEL_CORE_DRIVER_SYNC_H_
