// Trace hooks: one call per traced moment in the runtime's code paths. Each
// is an inline check of one relaxed word (what accel records) and of the
// LTTng tracepoints' own enabled flags, so that with nothing listening and
// counters off the cost is a predictable branch; the work happens out of
// line in lib/trace/hooks.c. Objects are named by their pointer value, used
// as a key and never dereferenced by lib/trace.
#ifndef ACCEL_TRACE_TRACE_HOOKS_H_
#define ACCEL_TRACE_TRACE_HOOKS_H_

#include <stdint.h>

#include "accel_config.h"
#include "accel/base.h"
#include "trace/tensor_summary.h"
#include "trace/trace_impl.h"

#if ACCEL_HAVE_LTTNG
#include "trace/tp.h"
#define ACCEL_TP_ON(event) lttng_ust_tracepoint_enabled(accel, event)
#else
#define ACCEL_TP_ON(event) 0
#endif

#define ACCEL_TRACE_UNLIKELY(x) __builtin_expect(!!(x), 0)

static inline uint32_t accel_trace_mask(void) {
  return atomic_load_explicit(&accel_trace_mask_g, memory_order_relaxed);
}

// Out-of-line halves (hooks.c).
accel_status_t accel_trace_runtime_create_slow(void);
void accel_trace_runtime_ready_slow(const void *runtime, uint32_t devices);
void accel_trace_runtime_destroy_slow(const void *runtime);
void accel_trace_device_open_slow(const void *device, const char *name,
                                  uint64_t host_ns, uint64_t device_ns);
void accel_trace_device_close_slow(const void *device);
void accel_trace_queue_create_slow(uint32_t kind, const void *device,
                                   const void *queue, const char *name,
                                   const _Atomic uint64_t *enqueued);
void accel_trace_queue_destroy_slow(const void *queue);
void accel_trace_cmd_enqueue_slow(uint32_t mask, const void *queue,
                                  const accel_trace_cmd_t *cmd, uint64_t seq,
                                  uint64_t enqueue_ticks, uint64_t enqueue_ns);
void accel_trace_cmd_start_slow(uint32_t mask, const void *queue,
                                const accel_trace_cmd_t *cmd);
void accel_trace_cmd_end_slow(uint32_t mask, const void *queue,
                              const accel_trace_cmd_t *cmd, accel_status_t status);
void accel_trace_nested_end_slow(uint32_t mask, const void *queue,
                                 const accel_trace_cmd_t *cmd,
                                 accel_status_t status);
void accel_trace_stream_fail_slow(const void *queue, uint64_t seq,
                                  accel_status_t status, const char *message);
void accel_trace_launch_begin_slow(const char *kernel, uint32_t grid_x,
                                   uint32_t grid_y, uint32_t grid_z);
void accel_trace_semaphore_signal_slow(const void *device, const void *sem,
                                       uint64_t value);
uint64_t accel_trace_semaphore_wait_slow(const void *device, const void *sem,
                                         uint64_t value);
void accel_trace_semaphore_wait_satisfied_slow(const void *device);
void accel_trace_semaphore_wake_slow(const void *device, const void *sem,
                                     uint64_t value, accel_status_t status,
                                     uint64_t start_ns);
void accel_trace_event_record_slow(const void *event, const void *queue,
                                   uint64_t value);
void accel_trace_buffer_alloc_slow(const void *device, uint64_t address,
                                   uint64_t size_bytes, uint64_t mapped_bytes,
                                   uint32_t kind);
void accel_trace_buffer_free_slow(const void *device, uint64_t address,
                                  uint64_t size_bytes, uint64_t mapped_bytes);
void accel_trace_buffer_alloc_failed_slow(const void *device,
                                          uint64_t size_bytes,
                                          accel_status_t status);
void accel_trace_error_slow(accel_status_t status, const char *message);
void accel_trace_kernel_message_slow(uint32_t kind, const char *kernel,
                                     const uint32_t group[3],
                                     const char *text);

// Single-writer counter update (the queue's worker): a relaxed load and
// store, no read-modify-write.
static inline void accel_trace_ctr_add_single(accel_trace_track_t *t,
                                              uint32_t k, uint64_t v) {
  atomic_store_explicit(
      &t->counters[k],
      atomic_load_explicit(&t->counters[k], memory_order_relaxed) + v,
      memory_order_relaxed);
}

// Counts a command of kind |cmd->kind| that completed on |t|'s queue in the
// counter of its kind (worker only). |now_ns| is the end time for WAIT
// commands (their time goes to wait_ns), else unused.
static inline void accel_trace_count_kind(accel_trace_track_t *t,
                                          const accel_trace_cmd_t *cmd,
                                          uint64_t now_ns) {
  switch (cmd->kind) {
    case ACCEL_TRACE_CMD_EXECUTE:
      accel_trace_ctr_add_single(t, ACCEL_CTR_REPLAYS, 1);
      break;
    case ACCEL_TRACE_CMD_LAUNCH:
      accel_trace_ctr_add_single(t, ACCEL_CTR_LAUNCHES, 1);
      break;
    case ACCEL_TRACE_CMD_COPY:
      accel_trace_ctr_add_single(t, ACCEL_CTR_COPIES, 1);
      accel_trace_ctr_add_single(t,
                                 cmd->direction == ACCEL_TRACE_DIR_HOST_TO_DEVICE
                                     ? ACCEL_CTR_COPY_BYTES_H2D
                                 : cmd->direction == ACCEL_TRACE_DIR_DEVICE_TO_HOST
                                     ? ACCEL_CTR_COPY_BYTES_D2H
                                     : ACCEL_CTR_COPY_BYTES_D2D,
                                 cmd->bytes);
      break;
    case ACCEL_TRACE_CMD_FILL:
      accel_trace_ctr_add_single(t, ACCEL_CTR_FILLS, 1);
      accel_trace_ctr_add_single(t, ACCEL_CTR_FILL_BYTES,
                                 cmd->bytes);
      break;
    case ACCEL_TRACE_CMD_HOST_CALL:
      accel_trace_ctr_add_single(t, ACCEL_CTR_HOST_CALLS, 1);
      break;
    case ACCEL_TRACE_CMD_SIGNAL:
      accel_trace_ctr_add_single(t, ACCEL_CTR_SIGNALS, 1);
      break;
    case ACCEL_TRACE_CMD_WAIT:
      accel_trace_ctr_add_single(t, ACCEL_CTR_WAITS, 1);
      if (t->wait_start_ns != 0 && now_ns > t->wait_start_ns) {
        accel_trace_ctr_add_single(t, ACCEL_CTR_WAIT_NS,
                                   now_ns - t->wait_start_ns);
      }
      break;
    default:
      break;
  }
}

// Counts a command that ended on |t|'s queue (worker only); |now_ns| as
// accel_trace_count_kind.
static inline void accel_trace_count_end(accel_trace_track_t *t,
                                         const accel_trace_cmd_t *cmd,
                                         accel_status_t status,
                                         uint64_t now_ns) {
  atomic_store_explicit(
      &t->processed,
      atomic_load_explicit(&t->processed, memory_order_relaxed) + 1,
      memory_order_relaxed);
  if (status != ACCEL_OK) {
    return;  // failures are counted once per stream, at the failure
  }
  accel_trace_ctr_add_single(t, ACCEL_CTR_COMMANDS_COMPLETED, 1);
  accel_trace_count_kind(t, cmd, now_ns);
}

// --- lifecycle (rare: always out of line) -----------------------------------

// At the start of runtime creation: reads the tracing environment
// (ACCEL_TRACE starts the recorder). Undone by accel_trace_runtime_destroy.
static inline accel_status_t accel_trace_runtime_create(void) {
  return accel_trace_runtime_create_slow();
}
// Once the runtime is created.
static inline void accel_trace_runtime_ready(const void *runtime,
                                             uint32_t device_count) {
  accel_trace_runtime_ready_slow(runtime, device_count);
}
// At runtime destruction, or on a failed creation with |runtime| NULL.
static inline void accel_trace_runtime_destroy(const void *runtime) {
  accel_trace_runtime_destroy_slow(runtime);
}
// A device opened: registers its track and counters and its clock pair.
static inline void accel_trace_device_open(const void *device,
                                           const char *name, uint64_t host_ns,
                                           uint64_t device_ns) {
  accel_trace_device_open_slow(device, name, host_ns, device_ns);
}
static inline void accel_trace_device_close(const void *device) {
  accel_trace_device_close_slow(device);
}
// A stream's hardware queue |queue| was created on |device|; |enqueued| is
// the stream's count of commands handed to the queue (read, never written,
// until accel_trace_stream_destroy), the commands_enqueued counter.
static inline void accel_trace_stream_create(const void *device,
                                             const void *queue,
                                             const char *name,
                                             const _Atomic uint64_t *enqueued) {
  accel_trace_queue_create_slow(ACCEL_TRACK_STREAM, device, queue, name,
                                enqueued);
}
// A DMA queue (copy engine) was created on |device| (as above).
static inline void accel_trace_dma_queue_create(
    const void *device, const void *queue, const char *name,
    const _Atomic uint64_t *enqueued) {
  accel_trace_queue_create_slow(ACCEL_TRACK_QUEUE, device, queue, name,
                                enqueued);
}
// A stream's or DMA queue's |queue| was destroyed (after its worker ended).
static inline void accel_trace_stream_destroy(const void *queue) {
  accel_trace_queue_destroy_slow(queue);
}

// --- commands ---------------------------------------------------------------

// When a command was handed to its queue: event ticks for the recorders and
// CLOCK_MONOTONIC ns for LTTng, each 0 when nothing records it.
typedef struct accel_trace_stamp {
  uint64_t ticks;
  uint64_t ns;
} accel_trace_stamp_t;

// Before a command is handed to a queue (the worker may start the command
// before the submit returns, so the enqueue time is taken first).
static inline accel_trace_stamp_t accel_trace_cmd_enqueue_time(void) {
  accel_trace_stamp_t s = {0, 0};
  if (ACCEL_TRACE_UNLIKELY((accel_trace_mask() & ACCEL_TRACE_M_EVENTS) != 0)) {
    s.ticks = accel_trace_ticks();
  }
  if (ACCEL_TRACE_UNLIKELY(ACCEL_TP_ON(cmd_enqueue))) {
    s.ns = accel_trace_now_ns();
  }
  return s;
}

// True when accel_trace_cmd_enqueue records something (a caller that has no
// command at hand builds one only then).
static inline bool accel_trace_cmd_enqueue_wanted(void) {
  return (accel_trace_mask() & ACCEL_TRACE_M_EVENTS) != 0 ||
         ACCEL_TP_ON(cmd_enqueue) || ACCEL_TP_ON(copy_submit);
}

// |cmd| was accepted by |queue| as number |seq|; |when| is what
// accel_trace_cmd_enqueue_time() returned before the submit.
static inline void accel_trace_cmd_enqueue(const void *queue,
                                           const accel_trace_cmd_t *cmd,
                                           uint64_t seq,
                                           accel_trace_stamp_t when) {
  if (ACCEL_TRACE_UNLIKELY(accel_trace_cmd_enqueue_wanted())) {
    accel_trace_cmd_enqueue_slow(accel_trace_mask(), queue, cmd, seq,
                                 when.ticks, when.ns);
  }
}

// The worker of |queue| starts |cmd|.
static inline void accel_trace_cmd_start(const void *queue,
                                         const accel_trace_cmd_t *cmd) {
  uint32_t m = accel_trace_mask();
  if (ACCEL_TRACE_UNLIKELY((m & ACCEL_TRACE_M_EVENTS) != 0 ||
                           ((m & ACCEL_TRACE_M_COUNTERS) != 0 &&
                            cmd->kind == ACCEL_TRACE_CMD_WAIT) ||
                           ACCEL_TP_ON(cmd_start) ||
                           ACCEL_TP_ON(copy_start) ||
                           ACCEL_TP_ON(launch_begin) ||
                           ACCEL_TP_ON(tensor_summary))) {
    accel_trace_cmd_start_slow(m, queue, cmd);
  }
}

// The worker of |queue| finished |cmd| with |status| (the poison status for
// commands skipped after a failure), before it signals the completion, so
// that counters are current when a synchronize returns.
static inline void accel_trace_cmd_end(const void *queue,
                                       const accel_trace_cmd_t *cmd,
                                       accel_status_t status) {
  uint32_t m = accel_trace_mask();
  bool tp = ACCEL_TP_ON(cmd_end) || ACCEL_TP_ON(copy_end) ||
            ACCEL_TP_ON(event_complete) || ACCEL_TP_ON(launch_end);
  if (m == ACCEL_TRACE_M_COUNTERS && !tp && cmd->kind != ACCEL_TRACE_CMD_WAIT) {
    // The common case, counters only: inline, no clock read.
    accel_trace_track_t *t = accel_trace_track_lookup((uintptr_t)queue);
    if (t != NULL) {
      accel_trace_count_end(t, cmd, status, 0);
    }
  } else if (ACCEL_TRACE_UNLIKELY(m != 0 || tp)) {
    accel_trace_cmd_end_slow(m, queue, cmd, status);
  }
}

// True while starting and ending a host call or a launch records nothing
// but counters (no recorder events, no LTTng command or launch
// tracepoints). A queue worker then runs those commands without the two
// hooks above and counts them in bulk with accel_trace_count_quiet. Workers
// read this when they wake and once per completion batch, so a recorder or
// LTTng session started while a burst runs sees its commands from the next
// batch on.
static inline bool accel_trace_cmd_hooks_quiet(void) {
  uint32_t m = accel_trace_mask();
  return (m & ~(uint32_t)ACCEL_TRACE_M_COUNTERS) == 0 &&
         !ACCEL_TP_ON(cmd_start) && !ACCEL_TP_ON(cmd_end) &&
         !ACCEL_TP_ON(launch_begin) && !ACCEL_TP_ON(launch_end) &&
         !ACCEL_TP_ON(tensor_summary);
}

// |host_calls| host calls, |launches| launches and |executes| executes
// completed (with ACCEL_OK) on |queue| while the hooks were quiet: counted
// as accel_trace_cmd_end would have counted them. Called by the worker
// before it posts their completion.
static inline void accel_trace_count_quiet(const void *queue,
                                           uint64_t host_calls,
                                           uint64_t launches,
                                           uint64_t executes) {
  if ((accel_trace_mask() & ACCEL_TRACE_M_COUNTERS) == 0) {
    return;
  }
  accel_trace_track_t *t = accel_trace_track_lookup((uintptr_t)queue);
  if (t != NULL) {
    uint64_t n = host_calls + launches + executes;
    atomic_store_explicit(
        &t->processed,
        atomic_load_explicit(&t->processed, memory_order_relaxed) + n,
        memory_order_relaxed);
    accel_trace_ctr_add_single(t, ACCEL_CTR_COMMANDS_COMPLETED, n);
    accel_trace_ctr_add_single(t, ACCEL_CTR_HOST_CALLS, host_calls);
    accel_trace_ctr_add_single(t, ACCEL_CTR_LAUNCHES, launches);
    accel_trace_ctr_add_single(t, ACCEL_CTR_REPLAYS, executes);
  }
}

// --- commands replayed by an execute ----------------------------------------

// The worker of |queue| starts |cmd|, a command of the recording that the
// execute numbered |cmd->seq| replays: recorded as a queue command's start
// (same seq), which the recorders nest in the execute's slice, open on the
// same track. Not a queue command of its own: the execute is the one the
// queue numbers and completes (see accel_trace_nested_end).
static inline void accel_trace_nested_start(const void *queue,
                                            const accel_trace_cmd_t *cmd) {
  accel_trace_cmd_start(queue, cmd);
}

// |cmd| of accel_trace_nested_start ended with |status|: counted in its
// kind's counter and in replayed_commands (not in commands_completed).
static inline void accel_trace_nested_end(const void *queue,
                                          const accel_trace_cmd_t *cmd,
                                          accel_status_t status) {
  uint32_t m = accel_trace_mask();
  if (ACCEL_TRACE_UNLIKELY(m != 0 || ACCEL_TP_ON(cmd_end) ||
                           ACCEL_TP_ON(copy_end) ||
                           ACCEL_TP_ON(event_complete) ||
                           ACCEL_TP_ON(launch_end))) {
    accel_trace_nested_end_slow(m, queue, cmd, status);
  }
}

// |host_calls| host calls and |launches| launches that replays ran on
// |queue| without the nested hooks (while accel_trace_cmd_hooks_quiet()),
// all with ACCEL_OK: counted as accel_trace_nested_end would have. Called
// by the worker before it posts their completion.
static inline void accel_trace_count_replayed(const void *queue,
                                              uint64_t host_calls,
                                              uint64_t launches) {
  if ((accel_trace_mask() & ACCEL_TRACE_M_COUNTERS) == 0 ||
      host_calls + launches == 0) {
    return;
  }
  accel_trace_track_t *t = accel_trace_track_lookup((uintptr_t)queue);
  if (t != NULL) {
    accel_trace_ctr_add_single(t, ACCEL_CTR_REPLAYED_COMMANDS,
                               host_calls + launches);
    accel_trace_ctr_add_single(t, ACCEL_CTR_HOST_CALLS, host_calls);
    accel_trace_ctr_add_single(t, ACCEL_CTR_LAUNCHES, launches);
  }
}

// |queue| failed at command |seq| (its stream is poisoned): records it and
// writes the flight recorder when ACCEL_FLIGHT_DIR is set.
static inline void accel_trace_stream_fail(const void *queue, uint64_t seq,
                                           accel_status_t status,
                                           const char *message) {
  accel_trace_stream_fail_slow(queue, seq, status, message);
}

// The launch command the calling queue worker is running starts kernel
// |kernel| (borrowed for the call) on a grid of |grid_x| x |grid_y| x
// |grid_z| work-groups. Called by the code that executes launch payloads, on
// the worker; the launch's end is recorded with the command's end.
static inline void accel_trace_launch_begin(const char *kernel,
                                            uint32_t grid_x, uint32_t grid_y,
                                            uint32_t grid_z) {
  if (ACCEL_TRACE_UNLIKELY((accel_trace_mask() & ACCEL_TRACE_M_EVENTS) != 0 ||
                           ACCEL_TP_ON(launch_begin))) {
    accel_trace_launch_begin_slow(kernel, grid_x, grid_y, grid_z);
  }
}

// --- copy engines ------------------------------------------------------------
// A DMA ring is traced as a queue (its key: the backend's ring), its copies
// and fills as COPY and FILL commands numbered by the descriptor's trace_seq,
// so that they have the same events, tracepoints and counters as stream
// commands had. Staging legs and host-to-host copies are not traced
// (trace_seq 0).

// Descriptor |cmd| (kind COPY or FILL, numbered by its trace_seq) was
// written to |ring|; |when| as for accel_trace_cmd_enqueue.
static inline void accel_trace_dma_enqueue(const void *ring,
                                           const accel_trace_cmd_t *cmd,
                                           accel_trace_stamp_t when) {
  uint32_t m = accel_trace_mask();
  if (ACCEL_TRACE_UNLIKELY((m & ACCEL_TRACE_M_EVENTS) != 0 ||
                           ACCEL_TP_ON(cmd_enqueue) ||
                           ACCEL_TP_ON(copy_submit))) {
    accel_trace_cmd_enqueue_slow(m, ring, cmd, cmd->seq, when.ticks, when.ns);
  }
}

// The engine serving |ring| starts traced descriptor |cmd|.
static inline void accel_trace_dma_start(const void *ring,
                                         const accel_trace_cmd_t *cmd) {
  uint32_t m = accel_trace_mask();
  if (ACCEL_TRACE_UNLIKELY((m & ACCEL_TRACE_M_EVENTS) != 0 ||
                           ACCEL_TP_ON(cmd_start) ||
                           ACCEL_TP_ON(copy_start))) {
    accel_trace_cmd_start_slow(m, ring, cmd);
  }
}

// The engine finished (or aborted) traced descriptor |cmd| with |status|,
// before it signals the descriptor's semaphore.
static inline void accel_trace_dma_end(const void *ring,
                                       const accel_trace_cmd_t *cmd,
                                       accel_status_t status) {
  uint32_t m = accel_trace_mask();
  if (ACCEL_TRACE_UNLIKELY(m != 0 || ACCEL_TP_ON(cmd_end) ||
                           ACCEL_TP_ON(copy_end))) {
    accel_trace_cmd_end(ring, cmd, status);
  }
}

// --- semaphores and events ----------------------------------------------------

// The host signals |sem| (of |device|) to |value|.
static inline void accel_trace_semaphore_signal(const void *device,
                                                const void *sem,
                                                uint64_t value) {
  uint32_t m = accel_trace_mask();
  if (ACCEL_TRACE_UNLIKELY(m != 0 || ACCEL_TP_ON(semaphore_signal))) {
    accel_trace_semaphore_signal_slow(device, sem, value);
  }
}

// The host starts waiting for |sem| >= |value|; returns the start time to
// hand to accel_trace_semaphore_wake (0 when nothing measures it).
static inline uint64_t accel_trace_semaphore_wait(const void *device,
                                                  const void *sem,
                                                  uint64_t value) {
  uint32_t m = accel_trace_mask();
  if (ACCEL_TRACE_UNLIKELY(m != 0 || ACCEL_TP_ON(semaphore_wait))) {
    return accel_trace_semaphore_wait_slow(device, sem, value);
  }
  return 0;
}

// A host wait on |device| found its value already reached. Returns true when
// only counters listen (it then counted the wait, which took no time, without
// reading the clock) or nothing does: the caller skips the wait and wake
// hooks. False: the caller reports the wait in full.
static inline bool accel_trace_semaphore_wait_satisfied(const void *device) {
  uint32_t m = accel_trace_mask();
  if (ACCEL_TRACE_UNLIKELY((m & ~(uint32_t)ACCEL_TRACE_M_COUNTERS) != 0 ||
                           ACCEL_TP_ON(semaphore_wait) ||
                           ACCEL_TP_ON(semaphore_wake))) {
    return false;
  }
  if (m != 0) {
    accel_trace_semaphore_wait_satisfied_slow(device);
  }
  return true;
}

// The host wait started at |start_ns| returned |status|.
static inline void accel_trace_semaphore_wake(const void *device,
                                              const void *sem, uint64_t value,
                                              accel_status_t status,
                                              uint64_t start_ns) {
  uint32_t m = accel_trace_mask();
  if (ACCEL_TRACE_UNLIKELY(m != 0 || ACCEL_TP_ON(semaphore_wake))) {
    accel_trace_semaphore_wake_slow(device, sem, value, status, start_ns);
  }
}

// |event| was recorded on |queue|'s stream as record |value|.
static inline void accel_trace_event_record(const void *event,
                                            const void *queue,
                                            uint64_t value) {
  if (ACCEL_TRACE_UNLIKELY((accel_trace_mask() & ACCEL_TRACE_M_EVENTS) != 0 ||
                           ACCEL_TP_ON(event_record))) {
    accel_trace_event_record_slow(event, queue, value);
  }
}

// --- memory and errors ------------------------------------------------------

static inline void accel_trace_buffer_alloc(const void *device,
                                            uint64_t address,
                                            uint64_t size_bytes,
                                            uint64_t mapped_bytes,
                                            uint32_t kind) {
  if (ACCEL_TRACE_UNLIKELY((accel_trace_mask() & ACCEL_TRACE_M_EVENTS) != 0 ||
                           ACCEL_TP_ON(buffer_alloc))) {
    accel_trace_buffer_alloc_slow(device, address, size_bytes, mapped_bytes,
                                  kind);
  }
}

static inline void accel_trace_buffer_free(const void *device,
                                           uint64_t address,
                                           uint64_t size_bytes,
                                           uint64_t mapped_bytes) {
  if (ACCEL_TRACE_UNLIKELY((accel_trace_mask() & ACCEL_TRACE_M_EVENTS) != 0 ||
                           ACCEL_TP_ON(buffer_free))) {
    accel_trace_buffer_free_slow(device, address, size_bytes, mapped_bytes);
  }
}

static inline void accel_trace_buffer_alloc_failed(const void *device,
                                                   uint64_t size_bytes,
                                                   accel_status_t status) {
  if ((accel_trace_mask() & ACCEL_TRACE_M_EVENTS) != 0) {
    accel_trace_buffer_alloc_failed_slow(device, size_bytes, status);
  }
}

// Any failure reported through accel_error().
static inline void accel_trace_error(accel_status_t status,
                                     const char *message) {
  if (ACCEL_TRACE_UNLIKELY((accel_trace_mask() & ACCEL_TRACE_M_EVENTS) != 0 ||
                           ACCEL_TP_ON(error))) {
    accel_trace_error_slow(status, message);
  }
}

// A kernel's message (kernel ABI 1.1: print or assertion) from work-group
// |group| of |kernel|: an instant event on the calling thread's track and
// the accel:kernel_message tracepoint.
static inline void accel_trace_kernel_message(uint32_t kind,
                                              const char *kernel,
                                              const uint32_t group[3],
                                              const char *text) {
  if (ACCEL_TRACE_UNLIKELY((accel_trace_mask() & ACCEL_TRACE_M_EVENTS) != 0 ||
                           ACCEL_TP_ON(kernel_message))) {
    accel_trace_kernel_message_slow(kind, kernel, group, text);
  }
}

void accel_trace_tensor_summary_slow(const accel_trace_tensor_summary_t *s);

// Whether a tensor summary would be recorded now (the built-in recorder is
// on, or an LTTng session listens to accel:tensor_summary), so that callers
// compute one only then, once for both.
static inline bool accel_trace_tensor_summary_wanted(void) {
  return ACCEL_TRACE_UNLIKELY((accel_trace_mask() & ACCEL_TRACE_M_EVENTS) !=
                                  0 ||
                              ACCEL_TP_ON(tensor_summary));
}

// A summary of one tensor the launch the calling queue worker runs wrote
// (|s| borrowed for the call): a "tensor summary" instant on the thread's
// track (its args the text of accel_trace_tensor_summary_format) and the
// accel:tensor_summary tracepoint with the launch's stream and seq.
static inline void accel_trace_tensor_summary(
    const accel_trace_tensor_summary_t *s) {
  if (accel_trace_tensor_summary_wanted()) {
    accel_trace_tensor_summary_slow(s);
  }
}

#endif  // ACCEL_TRACE_TRACE_HOOKS_H_
