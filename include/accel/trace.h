// Tracing and perf counters.
//
// accel records what it does in three ways, all fed by the same hooks in the
// runtime's code paths (stream enqueue, command start and end, semaphores,
// events, buffers, errors, lifecycle):
//  - LTTng-UST tracepoints in provider `accel` (when the library was built
//    with LTTng-UST): `lttng enable-event -u 'accel:*'`. Near-free when no
//    session listens.
//  - A built-in recorder that writes Perfetto's native protobuf format
//    (`ACCEL_TRACE=out.pftrace`, or accel_trace_start()).
//  - A flight recorder: once on (ACCEL_FLIGHT_EVENTS=N or ACCEL_FLIGHT_DIR),
//    the last N events of every thread are kept in memory at all times and
//    written as a Perfetto file when a stream fails or the process receives a
//    fatal signal (into ACCEL_FLIGHT_DIR), or on demand.
// Perf counters (per device and per stream) are always counted and can be
// read with accel_counters_snapshot(); the recorders sample them into traces.
// See docs/tracing.md.
#ifndef ACCEL_TRACE_H_
#define ACCEL_TRACE_H_

#include <stddef.h>

#include "accel/base.h"

#ifdef __cplusplus
extern "C" {
#endif

// Starts the built-in recorder, writing a Perfetto trace to |path| (created
// or truncated). Events of every thread are buffered per thread without locks
// and written at accel_trace_flush(), accel_trace_stop() or process exit.
// Also started by accel_runtime_create() when ACCEL_TRACE=path is set.
// ACCEL_ERROR_INVALID_ARGUMENT: |path| is NULL or empty.
// ACCEL_ERROR_BUSY: a recording is already in progress (one per process).
// ACCEL_ERROR_IO: |path| cannot be created; the message gives errno's text.
// Thread-safe.
ACCEL_API accel_status_t accel_trace_start(const char *path);

// Writes every event recorded so far to the trace file and keeps recording.
// ACCEL_ERROR_NOT_READY: no recording is in progress.
// ACCEL_ERROR_IO: writing failed; the recording stops.
// Thread-safe.
ACCEL_API accel_status_t accel_trace_flush(void);

// Samples the perf counters a last time, writes what remains, closes every
// slice still open and closes the file. Events recorded by other threads
// while this runs may be left out.
// ACCEL_ERROR_NOT_READY: no recording is in progress.
// ACCEL_ERROR_IO: writing failed (the recording is stopped anyway).
// Thread-safe.
ACCEL_API accel_status_t accel_trace_stop(void);

// Writes the flight recorder (the last ACCEL_FLIGHT_EVENTS events of every
// thread, default 1024) to |path| as a Perfetto trace.
// ACCEL_ERROR_INVALID_ARGUMENT: |path| is NULL or empty.
// ACCEL_ERROR_UNAVAILABLE: the flight recorder is off (neither
//   ACCEL_FLIGHT_EVENTS nor ACCEL_FLIGHT_DIR was set when the first runtime
//   was created).
// ACCEL_ERROR_IO: |path| cannot be written.
// Thread-safe.
ACCEL_API accel_status_t accel_trace_flight_dump(const char *path);

// What a counter belongs to.
typedef enum accel_counter_scope {
  // A device: memory and host-side semaphore waits.
  ACCEL_COUNTER_SCOPE_DEVICE = 0,
  // A stream: its commands, copies and failures.
  ACCEL_COUNTER_SCOPE_STREAM = 1,
  // A hardware queue that is not a stream (DMA engines).
  ACCEL_COUNTER_SCOPE_QUEUE = 2,
} accel_counter_scope_t;

// One counter value.
typedef struct accel_counter {
  // sizeof(accel_counter_t) as the caller compiled it; only the first
  // element's is read, and it is the stride of the array.
  uint32_t struct_size;
  // accel_counter_scope_t.
  uint32_t scope;
  // Trace id of the device, stream or queue (the same id as in trace files);
  // never 0.
  uint32_t scope_id;
  // Reserved, written as 0.
  uint32_t reserved0;
  // "host:0" for a device, "host:0/stream0" for a stream.
  char scope_name[64];
  // Counter name: "commands_completed", "copy_bytes_h2d", "bytes_in_use", ...
  // (docs/tracing.md lists them).
  char name[32];
  // "count", "bytes" or "ns".
  char unit[8];
  // The value when the snapshot was taken. Gauges (bytes_in_use,
  // queue_occupancy) are current values; the others only grow.
  uint64_t value;
} accel_counter_t;

// Copies the current value of every counter of every live device and stream
// (of all runtimes in the process) into |counters|, at most |capacity| of
// them, and stores the number of counters there are in |*out_count| (which
// may exceed |capacity|: call again with a larger array). |counters| may be
// NULL when |capacity| is 0. Values are read without stopping the world, so
// counters of work running concurrently may be mutually inconsistent.
// ACCEL_ERROR_INVALID_ARGUMENT: |out_count| is NULL, |counters| is NULL with a
//   non-zero |capacity|, or counters[0].struct_size is smaller than the first
//   version of accel_counter_t.
// Thread-safe.
ACCEL_API accel_status_t accel_counters_snapshot(accel_counter_t *counters,
                                                 size_t capacity,
                                                 size_t *out_count);

#ifdef __cplusplus
}
#endif

#endif  // ACCEL_TRACE_H_
