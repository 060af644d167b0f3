// What the layers above (lib/abi's command buffers) reach of events: the
// step of a record that takes the event's next value, for a record that is
// submitted some other way than accel_event_record.
#ifndef ACCEL_STREAM_EVENT_IMPL_H_
#define ACCEL_STREAM_EVENT_IMPL_H_

#include <stdatomic.h>

#include "accel/event.h"
#include "accel/semaphore.h"

// Takes the next record of |event|: the semaphore to signal (retained for
// the caller; a fresh one when the last record's failed), the value to
// signal it to, and where the device time goes before the signal (NULL for
// an event without timing; valid while the event lives). The caller
// submits the SIGNAL, or fails the semaphore if it cannot (waiters on the
// event wait for that value from now on).
// ACCEL_ERROR_OUT_OF_MEMORY: a fresh semaphore cannot be created.
// Thread-safe.
accel_status_t accel_event_record_take(accel_event_t *event,
                                       accel_semaphore_t **out_semaphore,
                                       uint64_t *out_value,
                                       _Atomic uint64_t **out_timestamp);

// What a wait for |event| issued now waits for: the semaphore of its last
// record (retained for the caller) and that record's value (0 when never
// recorded: a wait for it is no wait). Thread-safe.
void accel_event_wait_target(accel_event_t *event, accel_semaphore_t **out_sem,
                             uint64_t *out_target);

// The device of |event| (borrowed).
accel_device_t *accel_event_device_of(const accel_event_t *event);

#endif  // ACCEL_STREAM_EVENT_IMPL_H_
