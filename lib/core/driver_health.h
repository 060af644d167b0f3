// Driver interface, health table: fault injection, the device's fault
// reports, aborting a queue from outside and reset (see driver.h and
// docs/health.md). Optional as a whole: a backend without it (cuda) answers
// ACCEL_ERROR_UNSUPPORTED to injection through the generic layer, and its
// queues are failed through their completion semaphores only.
#ifndef ACCEL_CORE_DRIVER_HEALTH_H_
#define ACCEL_CORE_DRIVER_HEALTH_H_

#include "accel/health.h"
#include "core/driver.h"

// A fault as the backend arms it (validated by lib/core). |queue_name| is
// copied by the backend.
typedef struct accel_drv_fault {
  uint32_t kind;  // accel_fault_kind_t
  uint64_t command_index;  // 0: the first eligible command
  uint64_t not_before_ns;  // CLOCK_MONOTONIC; 0: at once
  const char *queue_name;  // NULL: any queue
} accel_drv_fault_t;

// Where a backend reports a RAS fault its device raised: |ras_class|, the
// status the failed command got (ACCEL_OK for corrected faults) and a
// message naming the command or descriptor. Called from any thread (queue
// workers, copy engines), with no backend lock held.
typedef void (*accel_drv_fault_sink_fn_t)(void *ctx, uint32_t ras_class,
                                          accel_status_t status,
                                          const char *message);

struct accel_drv_health_ops {
  // Sets where |device| reports its faults; called once after open, before
  // any queue exists.
  void (*set_sink)(accel_drv_device_t *device, accel_drv_fault_sink_fn_t fn,
                   void *ctx);
  // Arms |fault|: the first eligible command (a queue command, or a COPY or
  // FILL descriptor of a copy engine) hits it. CORRECTED: reported, the
  // command runs. UNCORRECTED: reported, the command fails with
  // ACCEL_ERROR_IO. FATAL: reported, the command fails with
  // ACCEL_ERROR_DEVICE_LOST. HANG: the command does not complete until its
  // queue or ring is aborted. ACCEL_ERROR_OUT_OF_MEMORY when the backend's
  // table of armed faults is full.
  accel_status_t (*inject_fault)(accel_drv_device_t *device,
                                 const accel_drv_fault_t *fault);
  // Fails |queue| from outside its worker with |status| and |message|: its
  // completion semaphore fails at once (waits return), the command running
  // is cancelled where it waits (a WAIT, a HANG) and every command after it
  // is skipped, and later submits are refused with that error. Any thread.
  void (*queue_abort)(accel_drv_queue_t *queue, accel_status_t status,
                      const char *message);
  // Resets the backend's side of |device| at |scope| (accel_reset_scope_t):
  // CONTEXT and DEVICE clear the armed faults. The generic layer has failed
  // every queue and ring of the device before.
  accel_status_t (*reset)(accel_drv_device_t *device, uint32_t scope);
};

#endif  // ACCEL_CORE_DRIVER_HEALTH_H_
