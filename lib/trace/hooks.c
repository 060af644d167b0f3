// Out-of-line halves of the trace hooks: counters, recorder events and LTTng
// tracepoints for each traced moment (see trace_hooks.h).
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "trace/trace_hooks.h"

#if ACCEL_HAVE_LTTNG
#define ACCEL_TP(event, ...) lttng_ust_tracepoint(accel, event, __VA_ARGS__)
#else
#define ACCEL_TP(event, ...) \
  do {                       \
  } while (0)
#endif

static inline uint32_t track_id(const accel_trace_track_t *t) {
  return t != NULL ? t->id : 0;
}

static inline void ctr_add(accel_trace_track_t *t, uint32_t k, uint64_t v) {
  atomic_fetch_add_explicit(&t->counters[k], v, memory_order_relaxed);
}

static inline uint32_t cmd_aux(const accel_trace_cmd_t *cmd) {
  uint32_t dir = cmd->kind == ACCEL_TRACE_CMD_COPY ? (cmd->direction & 0xff) : 0;
  return (uint32_t)cmd->kind | (dir << 8);
}

// --- lifecycle -------------------------------------------------------------

accel_status_t accel_trace_runtime_create_slow(void) {
  ACCEL_RETURN_IF_ERROR(accel_trace_lttng_load_from_env());
  return accel_trace_runtime_attach();
}

void accel_trace_runtime_ready_slow(const void *runtime, uint32_t devices) {
  accel_trace_emit(ACCEL_TEV_LIFECYCLE, ACCEL_TRACE_LIFE_RUNTIME_CREATE, 0,
                   (uint64_t)(uintptr_t)runtime, devices);
  ACCEL_TP(runtime_create, (uint64_t)(uintptr_t)runtime, devices,
           accel_trace_cmdline());
}

void accel_trace_runtime_destroy_slow(const void *runtime) {
  if (runtime != NULL) {
    accel_trace_emit(ACCEL_TEV_LIFECYCLE, ACCEL_TRACE_LIFE_RUNTIME_DESTROY, 0,
                     (uint64_t)(uintptr_t)runtime, 0);
    ACCEL_TP(runtime_destroy, (uint64_t)(uintptr_t)runtime);
  }
  accel_trace_runtime_detach();
}

void accel_trace_device_open_slow(const void *device, const char *name,
                                  uint64_t host_ns, uint64_t device_ns) {
  accel_trace_track_t *t =
      accel_trace_track_add(ACCEL_TRACK_DEVICE, (uintptr_t)device, 0, name);
  if (t == NULL) {
    return;
  }
  accel_trace_clock_set(t->id, host_ns, device_ns);
  accel_trace_emit(ACCEL_TEV_LIFECYCLE, ACCEL_TRACE_LIFE_DEVICE_OPEN, t->id,
                   0, 0);
  accel_trace_emit(ACCEL_TEV_CLOCK_PAIR, 0, t->id, host_ns, device_ns);
  ACCEL_TP(device_open, t->id, name, host_ns, device_ns);
}

void accel_trace_device_close_slow(const void *device) {
  accel_trace_track_t *t = accel_trace_track_lookup((uintptr_t)device);
  if (t == NULL) {
    return;
  }
  accel_trace_device_memory_source(device, NULL, NULL);
  accel_trace_emit(ACCEL_TEV_LIFECYCLE, ACCEL_TRACE_LIFE_DEVICE_CLOSE, t->id,
                   0, 0);
  ACCEL_TP(device_close, t->id);
  accel_trace_track_remove((uintptr_t)device);
}

void accel_trace_queue_create_slow(uint32_t kind, const void *device,
                                   const void *queue, const char *name,
                                   const _Atomic uint64_t *enqueued) {
  accel_trace_track_t *dev = accel_trace_track_lookup((uintptr_t)device);
  char full[64];
  snprintf(full, sizeof(full), "%s/%s", dev != NULL ? dev->name : "device",
           name);
  accel_trace_track_t *t =
      accel_trace_track_add(kind, (uintptr_t)queue, track_id(dev), full);
  if (t == NULL) {
    return;
  }
  accel_trace_track_set_enqueued_source(t, enqueued);
  if (dev != NULL) {
    ctr_add(dev, ACCEL_CTR_STREAMS, 1);
  }
  accel_trace_emit(ACCEL_TEV_LIFECYCLE, ACCEL_TRACE_LIFE_STREAM_CREATE, t->id,
                   0, 0);
  ACCEL_TP(stream_create, t->id, track_id(dev), full);
}

void accel_trace_queue_destroy_slow(const void *queue) {
  accel_trace_track_t *t = accel_trace_track_lookup((uintptr_t)queue);
  if (t == NULL) {
    return;
  }
  // Final values of the stream's counters, for traces that outlive it.
  uint64_t now = accel_trace_ticks();
  bool record = (accel_trace_mask() & ACCEL_TRACE_M_RECORD) != 0;
  for (uint32_t k = 0; k < ACCEL_CTR_STREAM_COUNT; ++k) {
    if (record) {
      accel_trace_emit_at(now, ACCEL_TEV_COUNTER, k, t->id,
                          accel_trace_counter_value(t, k), 0);
    }
    ACCEL_TP(counter_sample, t->id, t->name, accel_counter_kind_name(k),
             accel_trace_counter_value(t, k));
  }
  accel_trace_track_t *dev =
      (accel_trace_track_t *)accel_trace_track_by_id(t->parent, true);
  if (dev != NULL) {
    ctr_add(dev, ACCEL_CTR_STREAMS, (uint64_t)-1);
  }
  accel_trace_emit(ACCEL_TEV_LIFECYCLE, ACCEL_TRACE_LIFE_STREAM_DESTROY, t->id,
                   0, 0);
  ACCEL_TP(stream_destroy, t->id);
  accel_trace_track_remove((uintptr_t)queue);
}

// --- commands ----------------------------------------------------------------

void accel_trace_cmd_enqueue_slow(uint32_t mask, const void *queue,
                                  const accel_trace_cmd_t *cmd, uint64_t seq,
                                  uint64_t enqueue_ticks, uint64_t enqueue_ns) {
  accel_trace_track_t *t = accel_trace_track_lookup((uintptr_t)queue);
  if (t == NULL) {
    return;
  }
  uint64_t bytes = cmd->bytes;
  if (mask & ACCEL_TRACE_M_EVENTS) {
    // 0: recording began during the submit.
    accel_trace_emit_at(enqueue_ticks != 0 ? enqueue_ticks : accel_trace_ticks(),
                        ACCEL_TEV_CMD_ENQUEUE, cmd_aux(cmd), t->id, seq,
                        bytes);
  }
  ACCEL_TP(cmd_enqueue, t->id, cmd->kind, cmd->direction, seq, bytes,
           enqueue_ns != 0 ? enqueue_ns : accel_trace_now_ns());
  if (cmd->kind == ACCEL_TRACE_CMD_COPY) {
    ACCEL_TP(copy_submit, t->id, cmd->direction, bytes, seq);
  }
}

void accel_trace_cmd_start_slow(uint32_t mask, const void *queue,
                                const accel_trace_cmd_t *cmd) {
  accel_trace_track_t *t = accel_trace_track_lookup((uintptr_t)queue);
  if (t == NULL) {
    return;
  }
  if ((mask & ACCEL_TRACE_M_COUNTERS) && cmd->kind == ACCEL_TRACE_CMD_WAIT) {
    t->wait_start_ns = accel_trace_now_ns();
  }
  if (mask & ACCEL_TRACE_M_EVENTS) {
    accel_trace_emit_at(accel_trace_ticks(), ACCEL_TEV_CMD_START,
                        cmd_aux(cmd), t->id, cmd->seq, cmd->bytes);
  }
  ACCEL_TP(cmd_start, t->id, cmd->kind, cmd->direction, cmd->seq, cmd->bytes);
  accel_trace_current_g =
      (accel_trace_current_t){.track = t->id, .seq = cmd->seq};
  if (cmd->kind == ACCEL_TRACE_CMD_COPY) {
    ACCEL_TP(copy_start, t->id, cmd->direction, cmd->bytes, cmd->seq);
  }
}

// An event record ended (|cmd| is its SIGNAL): its device timestamp, mapped
// to host time, lies between the command's start and end, so it is emitted
// before the end, at |ticks|.
static void trace_event_complete(uint32_t mask, const accel_trace_track_t *t,
                                 const accel_trace_cmd_t *cmd,
                                 uint64_t ticks) {
  // Acquire: pairs with the worker's release store of the timestamp.
  uint64_t dev_ns = atomic_load_explicit(cmd->timestamp, memory_order_acquire);
  uint64_t host_ns = accel_trace_device_to_host_ns(t->parent, dev_ns);
  if (mask & ACCEL_TRACE_M_EVENTS) {
    // At the command's end; the device time, mapped to host time, goes
    // along as a value.
    accel_trace_emit_at(ticks, ACCEL_TEV_EVENT_COMPLETE, 0, t->id, cmd->event,
                        host_ns);
  }
  ACCEL_TP(event_complete, cmd->event, t->id, dev_ns, host_ns);
}

// The launch this command ran ends with it: the recorders close the
// launch's slice with the command's (one event less per launch); LTTng gets
// its own event.
static void trace_launch_close(const accel_trace_track_t *t,
                               const accel_trace_cmd_t *cmd,
                               accel_status_t status) {
  accel_trace_current_t *cur = &accel_trace_current_g;
  if (cur->launch_open && cur->track == t->id && cur->seq == cmd->seq) {
    cur->launch_open = false;
    ACCEL_TP(launch_end, t->id, cmd->seq, (uint32_t)status);
  }
}

// The end of |cmd| on |queue|: a queue command's, or (|nested|) that of a
// command an execute replays, which counts as replayed, not as completed.
static void trace_cmd_end(uint32_t mask, const void *queue,
                          const accel_trace_cmd_t *cmd, accel_status_t status,
                          bool nested) {
  accel_trace_track_t *t = accel_trace_track_lookup((uintptr_t)queue);
  if (t == NULL) {
    return;
  }
  bool counters = (mask & ACCEL_TRACE_M_COUNTERS) != 0;
  bool events = (mask & ACCEL_TRACE_M_EVENTS) != 0;
  // ns, for the wait counter; ticks, for the event time.
  uint64_t now = counters && cmd->kind == ACCEL_TRACE_CMD_WAIT
                     ? accel_trace_now_ns()
                     : 0;
  uint64_t ticks = events ? accel_trace_ticks() : 0;
  if (counters && !nested) {
    accel_trace_count_end(t, cmd, status, now);
  } else if (counters && status == ACCEL_OK) {
    accel_trace_ctr_add_single(t, ACCEL_CTR_REPLAYED_COMMANDS, 1);
    accel_trace_count_kind(t, cmd, now);
  }
  if (cmd->kind == ACCEL_TRACE_CMD_SIGNAL && cmd->timestamp != NULL &&
      status == ACCEL_OK && (events || ACCEL_TP_ON(event_complete))) {
    trace_event_complete(mask, t, cmd, ticks);
  }
  trace_launch_close(t, cmd, status);
  if (events) {
    accel_trace_emit_at(ticks, ACCEL_TEV_CMD_END,
                        (uint32_t)cmd->kind | ((uint32_t)status << 8), t->id,
                        cmd->seq, 0);
  }
  ACCEL_TP(cmd_end, t->id, cmd->kind, cmd->seq, (uint32_t)status);
  if (cmd->kind == ACCEL_TRACE_CMD_COPY) {
    ACCEL_TP(copy_end, t->id, cmd->direction, cmd->bytes, cmd->seq);
  }
}

void accel_trace_cmd_end_slow(uint32_t mask, const void *queue,
                              const accel_trace_cmd_t *cmd,
                              accel_status_t status) {
  trace_cmd_end(mask, queue, cmd, status, false);
}

void accel_trace_nested_end_slow(uint32_t mask, const void *queue,
                                 const accel_trace_cmd_t *cmd,
                                 accel_status_t status) {
  trace_cmd_end(mask, queue, cmd, status, true);
}

void accel_trace_stream_fail_slow(const void *queue, uint64_t seq,
                                  accel_status_t status, const char *message) {
  accel_trace_track_t *t = accel_trace_track_lookup((uintptr_t)queue);
  uint32_t id = track_id(t);
  if (t != NULL && (accel_trace_mask() & ACCEL_TRACE_M_COUNTERS)) {
    // Before the stream reports its failure, so that waiters see it counted.
    accel_trace_ctr_add_single(t, ACCEL_CTR_FAILURES, 1);
  }
  accel_trace_emit(ACCEL_TEV_STREAM_FAIL, (uint32_t)status, id, seq, 0);
  ACCEL_TP(stream_fail, id, seq, (uint32_t)status, message);
  accel_trace_flight_on_failure(id);
}

// Kernel name -> string id, cached per thread: a launch's name pointer is
// stable while its kernel lives, and a hit is confirmed by comparing the
// text (a pointer reused by another kernel misses).
static uint32_t kernel_name_id(const char *kernel) {
  enum { WAYS = 8 };
  static __attribute__((tls_model("initial-exec"))) _Thread_local struct {
    const char *ptr;
    uint32_t id;
  } cache[WAYS];
  static __attribute__((tls_model("initial-exec"))) _Thread_local uint32_t
      next;
  for (uint32_t i = 0; i < WAYS; ++i) {
    if (cache[i].ptr == kernel) {
      const char *text = accel_trace_string(cache[i].id);
      if (text != NULL && strcmp(text, kernel) == 0) {
        return cache[i].id;
      }
    }
  }
  uint32_t id = accel_trace_intern(kernel, true);
  cache[next % WAYS].ptr = kernel;
  cache[next % WAYS].id = id;
  next++;
  return id;
}

void accel_trace_launch_begin_slow(const char *kernel, uint32_t grid_x,
                                   uint32_t grid_y, uint32_t grid_z) {
  accel_trace_current_t *cur = &accel_trace_current_g;
  if (accel_trace_mask() & ACCEL_TRACE_M_EVENTS) {
    accel_trace_emit(ACCEL_TEV_LAUNCH_BEGIN, 0, cur->track, cur->seq,
                     kernel_name_id(kernel));
  }
  ACCEL_TP(launch_begin, cur->track, cur->seq, kernel, grid_x, grid_y, grid_z);
  cur->launch_open = true;
}

// --- semaphores and events -------------------------------------------------------

void accel_trace_semaphore_signal_slow(const void *device, const void *sem,
                                       uint64_t value) {
  accel_trace_track_t *dev = accel_trace_track_lookup((uintptr_t)device);
  uint32_t m = accel_trace_mask();
  if (dev != NULL && (m & ACCEL_TRACE_M_COUNTERS)) {
    ctr_add(dev, ACCEL_CTR_SIGNALS_HOST, 1);
  }
  accel_trace_emit(ACCEL_TEV_SEM_SIGNAL, 0, track_id(dev),
                   (uint64_t)(uintptr_t)sem, value);
  ACCEL_TP(semaphore_signal, track_id(dev), (uint64_t)(uintptr_t)sem, value,
           0);
}

uint64_t accel_trace_semaphore_wait_slow(const void *device, const void *sem,
                                         uint64_t value) {
  uint64_t now = accel_trace_now_ns();
  accel_trace_track_t *dev = accel_trace_track_lookup((uintptr_t)device);
  accel_trace_emit(ACCEL_TEV_SEM_WAIT, 0, track_id(dev),
                   (uint64_t)(uintptr_t)sem, value);
  ACCEL_TP(semaphore_wait, track_id(dev), (uint64_t)(uintptr_t)sem, value, 0);
  return now;
}

void accel_trace_semaphore_wait_satisfied_slow(const void *device) {
  accel_trace_track_t *dev = accel_trace_track_lookup((uintptr_t)device);
  if (dev != NULL) {
    ctr_add(dev, ACCEL_CTR_HOST_WAITS, 1);
  }
}

void accel_trace_semaphore_wake_slow(const void *device, const void *sem,
                                     uint64_t value, accel_status_t status,
                                     uint64_t start_ns) {
  uint64_t now = accel_trace_now_ns();
  accel_trace_track_t *dev = accel_trace_track_lookup((uintptr_t)device);
  uint32_t m = accel_trace_mask();
  if (dev != NULL && (m & ACCEL_TRACE_M_COUNTERS)) {
    ctr_add(dev, ACCEL_CTR_HOST_WAITS, 1);
    if (start_ns != 0 && now > start_ns) {
      ctr_add(dev, ACCEL_CTR_HOST_WAIT_NS, now - start_ns);
    }
  }
  accel_trace_emit(ACCEL_TEV_SEM_WAKE, (uint32_t)status, track_id(dev),
                   (uint64_t)(uintptr_t)sem, value);
  ACCEL_TP(semaphore_wake, track_id(dev), (uint64_t)(uintptr_t)sem, value,
           (uint32_t)status);
}

void accel_trace_event_record_slow(const void *event, const void *queue,
                                   uint64_t value) {
  uint32_t id = track_id(accel_trace_track_lookup((uintptr_t)queue));
  accel_trace_emit(ACCEL_TEV_EVENT_RECORD, 0, id, (uint64_t)(uintptr_t)event,
                   value);
  ACCEL_TP(event_record, (uint64_t)(uintptr_t)event, id, value);
}

// --- memory and errors ---------------------------------------------------------

// Buffer events. The device's memory counters come from its memory layer
// (accel_trace_device_memory_source), which counts every allocator.
void accel_trace_buffer_alloc_slow(const void *device, uint64_t address,
                                   uint64_t size_bytes, uint64_t mapped_bytes,
                                   uint32_t kind) {
  uint32_t id = track_id(accel_trace_track_lookup((uintptr_t)device));
  accel_trace_emit(ACCEL_TEV_BUF_ALLOC, kind, id, address, size_bytes);
  ACCEL_TP(buffer_alloc, id, address, size_bytes, kind);
}

void accel_trace_buffer_free_slow(const void *device, uint64_t address,
                                  uint64_t size_bytes, uint64_t mapped_bytes) {
  uint32_t id = track_id(accel_trace_track_lookup((uintptr_t)device));
  accel_trace_emit(ACCEL_TEV_BUF_FREE, 0, id, address, size_bytes);
  ACCEL_TP(buffer_free, id, address, size_bytes);
}

void accel_trace_buffer_alloc_failed_slow(const void *device,
                                          uint64_t size_bytes,
                                          accel_status_t status) {
  uint32_t id = track_id(accel_trace_track_lookup((uintptr_t)device));
  accel_trace_emit(ACCEL_TEV_BUF_ALLOC, (uint32_t)status << 8, id, 0,
                   size_bytes);
}

void accel_trace_error_slow(accel_status_t status, const char *message) {
  if (accel_trace_mask() & ACCEL_TRACE_M_EVENTS) {
    accel_trace_emit(ACCEL_TEV_ERROR, (uint32_t)status, 0,
                     accel_trace_intern(message, false), 0);
  }
  ACCEL_TP(error, (uint32_t)status, message);
}

void accel_trace_kernel_message_slow(uint32_t kind, const char *kernel,
                                     const uint32_t group[3],
                                     const char *text) {
  if (accel_trace_mask() & ACCEL_TRACE_M_EVENTS) {
    char line[1200];
    snprintf(line, sizeof(line), "kernel \"%s\" work-group (%u, %u, %u): %s",
             kernel, group[0], group[1], group[2], text);
    accel_trace_emit(ACCEL_TEV_KERNEL_MESSAGE, kind, 0,
                     accel_trace_intern(line, false), 0);
  }
  ACCEL_TP(kernel_message, kind, kernel, group[0], group[1], group[2], text);
}

void accel_trace_tensor_summary_slow(const accel_trace_tensor_summary_t *s) {
  if (accel_trace_mask() & ACCEL_TRACE_M_EVENTS) {
    char text[512];
    accel_trace_tensor_summary_format(s, text, sizeof(text));
    accel_trace_emit(ACCEL_TEV_TENSOR_SUMMARY, 0, 0,
                     accel_trace_intern(text, false), 0);
  }
#if ACCEL_HAVE_LTTNG
  // The launch the worker runs (set by the command's start, whose hook runs
  // while accel:tensor_summary is enabled).
  accel_trace_tensor_summary_t copy = *s;
  copy.kernel = s->kernel != NULL ? s->kernel : "";
  copy.name = s->name != NULL ? s->name : "";
  const accel_trace_current_t *cur = &accel_trace_current_g;
  ACCEL_TP(tensor_summary, cur->track, cur->seq, &copy);
#endif
}

bool accel_trace_lttng_listening(void) {
  return ACCEL_TP_ON(cmd_enqueue) != 0;
}

// lib/core reports failures through one observer; this is lib/trace's,
// installed when the library loads so that failures before the first runtime
// (bad options) reach an LTTng session too.
static void trace_error_observer(accel_status_t status, const char *message) {
  accel_trace_error(status, message);
}

__attribute__((constructor)) static void trace_install_error_observer(void) {
  accel_error_set_observer(trace_error_observer);
}
