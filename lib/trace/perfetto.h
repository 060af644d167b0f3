// A writer of Perfetto's native trace format (a protobuf `Trace` of
// `TracePacket`s), encoded by hand with no SDK and no allocation, so that it
// also runs inside a fatal-signal handler. It turns accel_trace_rec_t events
// into track descriptors, slices (commands, waits, launches), instants, flows
// from enqueue to execution and counter tracks. Used by the built-in
// recorder, the flight recorder and accel-trace.
//
// Field numbers are Perfetto's public ones (protos/perfetto/trace/
// trace_packet.proto, track_event/track_event.proto, track_descriptor.proto,
// clock_snapshot.proto); tests/trace/perfetto_subset.proto lists those used.
#ifndef ACCEL_TRACE_PERFETTO_H_
#define ACCEL_TRACE_PERFETTO_H_

#include <stdbool.h>
#include <stdint.h>

#include "trace/trace_impl.h"

#define ACCEL_PF_MAX_TRACKS 65536u   // ids beyond are written unbalanced
#define ACCEL_PF_FLOW_SLOTS 16384u   // pending flows (enqueued, not started)
#define ACCEL_PF_BUFFER 65536u

// Where the writer gets names: a track's description and interned strings.
typedef struct accel_pf_source {
  bool (*describe)(void *ctx, uint32_t id, accel_trace_track_t *out);
  const char *(*string)(void *ctx, uint32_t id);
  void *ctx;
} accel_pf_source_t;

typedef struct accel_pf_writer {
  int fd;
  bool failed;  // a write failed (errno kept in |error|)
  int error;
  int32_t pid;  // < 0: no default process (the source describes processes)
  const char *process_name;
  // XORed into every uuid and flow id written (see accel_pf_track_uuid), so
  // that the uuids of two traces never meet when they are joined.
  uint64_t uuid_mask;
  accel_pf_source_t source;
  uint64_t last_ts;
  size_t len;
  uint8_t buf[ACCEL_PF_BUFFER];
  uint8_t described[ACCEL_PF_MAX_TRACKS / 8];
  uint8_t counter_described[ACCEL_PF_MAX_TRACKS / 8];
  uint8_t depth[ACCEL_PF_MAX_TRACKS];
  // Sequences (one per producing thread) that have had their first packet.
  uint8_t sequence_started[(ACCEL_PF_MAX_TRACKS + 64) / 8];
  uint64_t flows[ACCEL_PF_FLOW_SLOTS];
  // When set, an enqueue carries a flow only if its start was announced with
  // accel_pf_expect_start() (partial traces: the flight recorder).
  bool filter_flows;
  uint64_t starts[ACCEL_PF_FLOW_SLOTS];
} accel_pf_writer_t;

// Starts a trace on |fd| (not owned): a clock snapshot and the process
// track. |process_name| may be NULL. With |pid| < 0 no process track is
// written: the source then describes processes as ACCEL_TRACK_PROCESS
// tracks (their |tid| is the pid), parents of the threads and devices of
// each process (accel-trace convert of a trace of several processes).
void accel_pf_begin(accel_pf_writer_t *w, int fd, int32_t pid,
                    const char *process_name, const accel_pf_source_t *source);

// Announces that a start of command |seq| on |stream| will be written, and
// turns on flow filtering (see filter_flows).
void accel_pf_expect_start(accel_pf_writer_t *w, uint32_t stream,
                           uint64_t seq);

// Writes one event recorded by the thread whose track is |thread_track|.
void accel_pf_event(accel_pf_writer_t *w, uint32_t thread_track,
                    const accel_trace_rec_t *ev);

// Writes a counter sample of |owner| (a device or stream track).
void accel_pf_counter(accel_pf_writer_t *w, uint64_t ts, uint32_t owner,
                      uint32_t kind, uint64_t value);

// Ends every slice still open at |end_ts| (closing the trace).
void accel_pf_close_slices(accel_pf_writer_t *w, uint64_t end_ts);

// Writes buffered bytes; returns false (and sets failed) on a write error.
bool accel_pf_flush(accel_pf_writer_t *w);

// The uuid of a track id before the writer's uuid_mask is applied
// (process = 1).
static inline uint64_t accel_pf_track_uuid(uint32_t id) {
  return 1000ull + id;
}
static inline uint64_t accel_pf_counter_uuid(uint32_t owner, uint32_t kind) {
  return (1ull << 40) | ((uint64_t)owner << 6) | kind;
}
// Flow id linking a command's enqueue to its execution.
static inline uint64_t accel_pf_flow_id(uint32_t stream, uint64_t seq) {
  return ((uint64_t)stream << 40) ^ (seq & 0xffffffffffull) ^ (1ull << 63);
}

// Slice name of a command (kind, copy direction, kernel).
const char *accel_pf_cmd_name(uint32_t kind, uint32_t dir);

#endif  // ACCEL_TRACE_PERFETTO_H_
