// Streams: in-order queues of device work on one device. Commands on a stream
// run in submission order, each after the previous one completed; ordering
// across streams is expressed with semaphores or events. Enqueueing never
// blocks on device work (the queue grows as needed).
//
// A command that fails poisons its stream: later commands are not run (their
// signals fail the semaphores they would have signalled, with the same error),
// and every later enqueue, query and synchronize returns the first error with
// a message naming the failed command and its sequence number.
//
// Host pointers passed to copies must stay valid until the copy completes.
#ifndef ACCEL_STREAM_H_
#define ACCEL_STREAM_H_

#include "accel/base.h"
#include "accel/device.h"
#include "accel/memory.h"
#include "accel/semaphore.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_stream accel_stream_t;

// Scheduling priority of a stream's worker (accel_stream_desc_t.priority).
typedef enum accel_stream_priority {
  ACCEL_STREAM_PRIORITY_NORMAL = 0,
  ACCEL_STREAM_PRIORITY_HIGH = 1,
  ACCEL_STREAM_PRIORITY_LOW = 2,
} accel_stream_priority_t;

// Stream flags (accel_stream_desc_t.flags).
typedef uint32_t accel_stream_flags_t;
enum accel_stream_flag_bits {
  ACCEL_STREAM_FLAG_NONE = 0,
  // accel_stream_destroy aborts pending commands (their signals fail with
  // ACCEL_ERROR_ABORTED) instead of draining them.
  ACCEL_STREAM_FLAG_ABORT_ON_DESTROY = 1u << 0,
};

typedef struct accel_stream_desc {
  // sizeof(accel_stream_desc_t) as the caller compiled it.
  uint32_t struct_size;
  // accel_stream_flag_bits.
  accel_stream_flags_t flags;
  // accel_stream_priority_t; 0 is normal.
  uint32_t priority;
  // Reserved, must be 0.
  uint32_t reserved0;
  // Name for traces and messages (copied; NULL means "stream<N>").
  const char *name;
  // Watchdog progress deadline in ns (docs/health.md): a command that has
  // not completed this long after the stream last made progress fails the
  // stream with ACCEL_ERROR_TIMEOUT and a message naming it and how long it
  // ran. 0 means the runtime's default (ACCEL_WATCHDOG_MS; off if unset).
  uint64_t watchdog_ns;
} accel_stream_desc_t;

// Creates a stream on |device|. |desc| may be NULL for defaults.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL device/out, bad desc.
// ACCEL_ERROR_OUT_OF_MEMORY: host allocation or thread creation failed.
// Thread-safe.
ACCEL_API accel_status_t accel_stream_create(accel_device_t *device,
                                             const accel_stream_desc_t *desc,
                                             accel_stream_t **out_stream);

// Destroys |stream|. Pending commands are drained (waits block until their
// semaphores are signalled) unless the stream was created with
// ACCEL_STREAM_FLAG_ABORT_ON_DESTROY, in which case they are aborted: not run,
// their references released, and the semaphores they would have signalled
// failed with ACCEL_ERROR_ABORTED. NULL is ignored.
// Not thread-safe: no other call on |stream| may run or follow.
ACCEL_API void accel_stream_destroy(accel_stream_t *stream);

// Returns the device of |stream| (borrowed), NULL for NULL. Thread-safe.
ACCEL_API accel_device_t *accel_stream_device(const accel_stream_t *stream);

// Host function run by a stream. Returning a status other than ACCEL_OK fails
// the command and poisons the stream; a message the function left with
// accel_last_error() on its thread is included in the stream's error.
typedef accel_status_t (*accel_host_fn_t)(void *user_data);

// Fails the calling host function with its own words: sets this thread's
// message (accel_last_error()) from |fmt| and returns |status|, so that a
// host function ends with
//   return accel_host_fn_fail(ACCEL_ERROR_ABORTED, "checksum of %s", name);
// and its stream fails with "stream "NAME" command #SEQ (host_call) failed:
// checksum of NAME". Also usable outside host functions: it only sets the
// message. Returns ACCEL_ERROR_INVALID_ARGUMENT (with that message) if
// |status| is ACCEL_OK, which would not fail anything, or if |fmt| is NULL.
// Thread-safe (the message is the calling thread's).
ACCEL_API accel_status_t accel_host_fn_fail(accel_status_t status,
                                            const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Enqueues a call of |fn|(|user_data|) on the device's host thread for this
// stream. |fn| must not block on work later in the same stream.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL stream or fn. The stream's stored error
// if it failed. Thread-safe.
ACCEL_API accel_status_t accel_stream_host_call(accel_stream_t *stream,
                                                accel_host_fn_t fn,
                                                void *user_data);

// Enqueues a fill of |size_bytes| at |offset| in |buffer| with the
// |pattern_size|-byte (1, 2, 4 or 8) little-endian |pattern|. Only the low
// |pattern_size| bytes of |pattern| may be non-zero: a bit set above them
// (pattern 0x1ff with pattern_size 1) is refused, not truncated.
// ACCEL_ERROR_INVALID_ARGUMENT: range outside the buffer, |offset| or
// |size_bytes| not a multiple of |pattern_size|, bad pattern size, pattern
// bits above |pattern_size| bytes, buffer of another device. Stored error if
// failed. Thread-safe.
ACCEL_API accel_status_t accel_stream_fill(accel_stream_t *stream,
                                           accel_buffer_t *buffer,
                                           uint64_t offset,
                                           uint64_t size_bytes,
                                           uint64_t pattern,
                                           uint32_t pattern_size);

// Enqueues a device-to-device copy of |size_bytes| from |src| at |src_offset|
// to |dst| at |dst_offset|. Both buffers are retained until it completes.
// A copy of at least the runtime's stream_copy_dma_min_bytes (default 1 MiB)
// runs on the device's copy engines (a DMA queue the stream creates on its
// first such copy, docs/dma.md), in the stream's order; a smaller one runs on
// the stream's own worker. A size of 0 enqueues nothing. Overlapping ranges
// of the same buffer, which copy engines reject, are copied by the stream
// itself as memmove would; so are all copies on a device without copy
// engines.
// ACCEL_ERROR_INVALID_ARGUMENT: a range outside its buffer, buffers of another
// device. Stored error if failed. Thread-safe.
ACCEL_API accel_status_t accel_stream_copy(accel_stream_t *stream,
                                           accel_buffer_t *dst,
                                           uint64_t dst_offset,
                                           accel_buffer_t *src,
                                           uint64_t src_offset,
                                           uint64_t size_bytes);

// Enqueues a host-to-device copy from |src| (valid until the copy completes),
// run on the copy engines like accel_stream_copy (pageable memory is staged
// through pinned bounce buffers). A size of 0 enqueues nothing.
// Errors as accel_stream_copy. Thread-safe.
ACCEL_API accel_status_t accel_stream_copy_from_host(accel_stream_t *stream,
                                                     accel_buffer_t *dst,
                                                     uint64_t dst_offset,
                                                     const void *src,
                                                     uint64_t size_bytes);

// Enqueues a device-to-host copy into |dst| (valid until the copy completes),
// run on the copy engines like accel_stream_copy. A size of 0 enqueues
// nothing. Errors as accel_stream_copy. Thread-safe.
ACCEL_API accel_status_t accel_stream_copy_to_host(accel_stream_t *stream,
                                                   void *dst,
                                                   accel_buffer_t *src,
                                                   uint64_t src_offset,
                                                   uint64_t size_bytes);

// Enqueues a signal of |semaphore| to |value| after all work submitted before
// it. |semaphore| is retained until the signal runs.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, semaphore of another device.
// If the stream fails first, |semaphore| is failed with the stream's error.
// Stored error if failed. Thread-safe.
ACCEL_API accel_status_t accel_stream_signal(accel_stream_t *stream,
                                             accel_semaphore_t *semaphore,
                                             uint64_t value);

// Enqueues a wait: later commands start once |semaphore| reaches |value|. If
// the semaphore fails, the stream fails with its error.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, semaphore of another device.
// Stored error if failed. Thread-safe.
ACCEL_API accel_status_t accel_stream_wait(accel_stream_t *stream,
                                           accel_semaphore_t *semaphore,
                                           uint64_t value);

// Blocks until every command submitted so far has completed, the stream
// fails, or |timeout_ns| passes.
// ACCEL_ERROR_TIMEOUT: work still pending. The stored error if the stream
// failed; by then every semaphore a skipped accel_stream_signal (or event
// record) would have signalled has failed too (docs/execution-model.md).
// Thread-safe.
ACCEL_API accel_status_t accel_stream_synchronize(accel_stream_t *stream,
                                                  uint64_t timeout_ns);

// Returns ACCEL_OK if every submitted command has completed,
// ACCEL_ERROR_NOT_READY if work is pending, or the stored error. Thread-safe.
ACCEL_API accel_status_t accel_stream_query(accel_stream_t *stream);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_STREAM_H_
