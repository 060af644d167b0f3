// Internal layout of streams (lib/stream): what the layers above (lib/abi's
// launches) reach through this header.
#ifndef ACCEL_STREAM_STREAM_IMPL_H_
#define ACCEL_STREAM_STREAM_IMPL_H_

#include "accel/event.h"
#include "accel/stream.h"
#include "core/driver.h"
#include "core/driver_queue.h"
#include "core/health_impl.h"
#include "core/object.h"
#include "core/runtime_impl.h"
#include "sync/semaphore_impl.h"

struct accel_stream {
  // The device's queue table (the driver's, cached: every command calls it).
  const accel_drv_queue_ops_t *qops;
  accel_drv_queue_t *queue;
  accel_device_t *device;
  // Signalled to each command's seq as it completes; failed when the stream
  // fails (the stream's sticky error lives here).
  accel_semaphore_t *completion;
  // Seq of the last command the queue accepted (written by the queue).
  _Atomic uint64_t last_seq;
  char name[64];
  // The path of this stream's copies to the DMA queues (lib/dma), created by
  // the first copy; destroyed after the queue (stream_copy.h).
  struct accel_stream_copy_link *_Atomic dma_link;
  // The device's health drives the stream's failure (fatal faults, the
  // watchdog, resets) through this (lib/core/health.c).
  accel_health_member_t health;
};

// Submits one command built by a public entry point. The queue reports the
// stream's sticky error, and owns the command's references from the call on
// (it drops them itself when it refuses the command).
accel_status_t accel_stream_submit(accel_stream_t *stream, accel_cmd_t *cmd);

// Submits a launch of |exec| on |payload| holding |ref0| and |ref1| (either
// may be NULL; both are the stream's from here, dropped on failure):
// through the driver's queue_launch when it has one, else as an
// accel_cmd_t through accel_stream_submit.
accel_status_t accel_stream_submit_launch(accel_stream_t *stream,
                                          accel_launch_exec_fn_t exec,
                                          void *payload, accel_object_t *ref0,
                                          accel_object_t *ref1);

// The stream's rules for a fill's pattern (size 1, 2, 4 or 8; |offset| and
// |size_bytes| multiples of it; no bits above it), the buffer aside.
// Messages start with |prefix| ("" or "command #3 (fill): ").
accel_status_t accel_stream_check_fill(uint64_t offset, uint64_t size_bytes,
                                       uint64_t pattern, uint32_t pattern_size,
                                       const char *prefix);

#endif  // ACCEL_STREAM_STREAM_IMPL_H_
