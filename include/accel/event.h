// Events: markers recorded into a stream. An event completes when its stream
// reaches it, and then carries the device time at which it did. Events are a
// convenience over timeline semaphores; they are ref-counted.
#ifndef ACCEL_EVENT_H_
#define ACCEL_EVENT_H_

#include "accel/base.h"
#include "accel/device.h"
#include "accel/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_event accel_event_t;

typedef uint32_t accel_event_flags_t;
enum accel_event_flag_bits {
  ACCEL_EVENT_FLAG_NONE = 0,
  // Take no timestamp; accel_event_elapsed_ns then fails.
  ACCEL_EVENT_FLAG_DISABLE_TIMING = 1u << 0,
};

// Creates an event on |device|. A new event is complete (never recorded).
// |*out_event| holds one reference owned by the caller.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or unknown flags. Thread-safe.
ACCEL_API accel_status_t accel_event_create(accel_device_t *device,
                                            accel_event_flags_t flags,
                                            accel_event_t **out_event);

// Adds a reference. Thread-safe.
ACCEL_API void accel_event_retain(accel_event_t *event);

// Drops a reference; pending records keep their own. NULL is ignored.
// Thread-safe.
ACCEL_API void accel_event_release(accel_event_t *event);

// Records |event| on |stream|: the event's state becomes that of this point in
// the stream (a later record replaces an earlier one for query, synchronize
// and waits issued after it).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, devices differ. The stream's
// stored error if it failed. Thread-safe.
ACCEL_API accel_status_t accel_event_record(accel_event_t *event,
                                            accel_stream_t *stream);

// Returns ACCEL_OK if the last record completed (or none was made),
// ACCEL_ERROR_NOT_READY if not, or the error of the stream that failed before
// reaching it. Thread-safe.
ACCEL_API accel_status_t accel_event_query(accel_event_t *event);

// Blocks until the last record completes, fails, or |timeout_ns| passes.
// ACCEL_ERROR_TIMEOUT if not complete in time; the stream's error if it
// failed. Thread-safe.
ACCEL_API accel_status_t accel_event_synchronize(accel_event_t *event,
                                                 uint64_t timeout_ns);

// Enqueues on |stream| a wait for the last record of |event| as of this call
// (a record made later does not affect it). An event never recorded is no
// wait. Errors as accel_stream_wait. Thread-safe.
ACCEL_API accel_status_t accel_stream_wait_event(accel_stream_t *stream,
                                                 accel_event_t *event);

// Returns in |*out_ns| the device time from |start| to |end| (negative if end
// came first). Both must be complete and timed.
// ACCEL_ERROR_NOT_READY: a record is pending. ACCEL_ERROR_INVALID_ARGUMENT:
// NULL argument, an event never recorded or created with
// ACCEL_EVENT_FLAG_DISABLE_TIMING, events of different devices.
// Thread-safe.
ACCEL_API accel_status_t accel_event_elapsed_ns(accel_event_t *start,
                                                accel_event_t *end,
                                                int64_t *out_ns);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_EVENT_H_
