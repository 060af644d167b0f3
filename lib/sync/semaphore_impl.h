// Internal layout of timeline semaphores (lib/sync): the ordering primitive
// under memory, DMA and streams. A semaphore wraps one backend semaphore of
// its device and nothing else.
#ifndef ACCEL_SYNC_SEMAPHORE_IMPL_H_
#define ACCEL_SYNC_SEMAPHORE_IMPL_H_

#include "accel/semaphore.h"
#include "core/driver.h"
#include "core/driver_sync.h"
#include "core/object.h"
#include "core/runtime_impl.h"

struct accel_semaphore {
  accel_object_t object;  // first
  accel_device_t *device;
  accel_drv_semaphore_t *drv;
};

// Creates a semaphore without argument checks (streams, events, DMA queues
// and pools use it).
accel_status_t accel_semaphore_create_internal(accel_device_t *device,
                                               uint64_t initial_value,
                                               accel_semaphore_t **out);

#endif  // ACCEL_SYNC_SEMAPHORE_IMPL_H_
