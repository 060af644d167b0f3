#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/driver_copy.h"
#include "core/driver_health.h"
#include "core/driver_sync.h"
#include "core/error.h"
#include "stream/stream_copy.h"
#include "mem/buffer_impl.h"
#include "stream/stream_impl.h"
#include "trace/trace_hooks.h"

// The stream as a member of its device's health (core/health_impl.h).
static void stream_health_fail(accel_health_member_t *member,
                               accel_status_t status, const char *message) {
  accel_stream_t *s = (accel_stream_t *)((char *)member -
                                         offsetof(accel_stream_t, health));
  const accel_drv_health_ops_t *ops = s->device->driver->health;
  if (ops != NULL) {
    ops->queue_abort(s->queue, status, message);
  } else {
    // A backend without the health table: the completion fails, so that
    // waits return; the queue keeps what it has.
    s->device->driver->sync->fail(s->completion->drv, status, message);
  }
}

static void stream_health_progress(accel_health_member_t *member,
                                   uint64_t *out_retired,
                                   uint64_t *out_submitted, bool *out_failed) {
  accel_stream_t *s = (accel_stream_t *)((char *)member -
                                         offsetof(accel_stream_t, health));
  uint64_t value = 0;
  accel_status_t st = s->device->driver->sync->query(s->completion->drv,
                                                     &value);
  *out_retired = value;
  // Relaxed: a count for the watchdog, which tolerates a stale one.
  *out_submitted = atomic_load_explicit(&s->last_seq, memory_order_relaxed);
  *out_failed = st != ACCEL_OK;
}

static const accel_health_member_ops_t k_stream_health_ops = {
    .fail = stream_health_fail,
    .progress = stream_health_progress,
};

accel_status_t accel_stream_create(accel_device_t *device,
                                   const accel_stream_desc_t *desc,
                                   accel_stream_t **out_stream) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(out_stream != NULL, "out_stream (NULL)");
  accel_stream_desc_t d = {.struct_size = sizeof(d)};
  if (desc != NULL) {
    if (desc->struct_size < offsetof(accel_stream_desc_t, name)) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "stream desc: struct_size %u is too small",
                         desc->struct_size);
    }
    memcpy(&d, desc,
           desc->struct_size < sizeof(d) ? desc->struct_size : sizeof(d));
  }
  if ((d.flags & ~(uint32_t)ACCEL_STREAM_FLAG_ABORT_ON_DESTROY) != 0 ||
      d.reserved0 != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "stream desc: unknown flags 0x%x", d.flags);
  }
  if (d.priority > ACCEL_STREAM_PRIORITY_LOW) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "stream desc: unknown priority %u", d.priority);
  }
  accel_stream_t *s = calloc(1, sizeof(*s));
  if (s == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "stream: cannot allocate %zu bytes", sizeof(*s));
  }
  s->device = device;
  if (d.name != NULL && d.name[0] != '\0') {
    snprintf(s->name, sizeof(s->name), "%s", d.name);
  } else {
    snprintf(s->name, sizeof(s->name), "stream%u",
             atomic_fetch_add_explicit(&device->stream_counter, 1,
                                       memory_order_relaxed));
  }
  accel_status_t st = accel_semaphore_create_internal(device, 0, &s->completion);
  if (st != ACCEL_OK) {
    goto err_free_stream;
  }
  accel_drv_queue_params_t params = {
      .priority = d.priority,
      .abort_on_destroy = (d.flags & ACCEL_STREAM_FLAG_ABORT_ON_DESTROY) != 0,
      .completion = s->completion->drv,
      .submitted_seq = &s->last_seq,
      .name = s->name,
  };
  s->qops = device->driver->queue;
  st = s->qops->create(device->drv, &params, &s->queue);
  if (st != ACCEL_OK) {
    goto err_release_completion;
  }
  s->health = (accel_health_member_t){.ops = &k_stream_health_ops,
                                      .kind = "stream",
                                      .unit = "command",
                                      .name = s->name,
                                      .watchdog_ns = d.watchdog_ns};
  st = accel_health_register(device, &s->health);
  if (st != ACCEL_OK) {
    goto err_destroy_queue;
  }
  accel_trace_stream_create(device, s->queue, s->name, &s->last_seq);
  *out_stream = s;
  return ACCEL_OK;

err_destroy_queue:
  s->qops->destroy(s->queue);
err_release_completion:
  accel_semaphore_release(s->completion);
err_free_stream:
  free(s);
  return accel_error_context(st, "creating stream on %s", device->info.id);
}

void accel_stream_destroy(accel_stream_t *stream) {
  if (stream == NULL) {
    return;
  }
  accel_health_unregister(stream->device, &stream->health);
  stream->qops->destroy(stream->queue);
  accel_trace_stream_destroy(stream->queue);
  // After the queue: its commands wait on the link's DMA work.
  accel_stream_copy_link_destroy(
      atomic_load_explicit(&stream->dma_link, memory_order_acquire));
  accel_semaphore_release(stream->completion);
  free(stream);
}

accel_device_t *accel_stream_device(const accel_stream_t *stream) {
  return stream != NULL ? stream->device : NULL;
}

// The trace hooks number command kinds and copy directions as the driver
// interface does; they take plain numbers, so the two are tied here.
_Static_assert((int)ACCEL_TRACE_CMD_EXECUTE == (int)ACCEL_CMD_EXECUTE &&
                   (int)ACCEL_TRACE_CMD_LAUNCH == (int)ACCEL_CMD_LAUNCH &&
                   (int)ACCEL_TRACE_CMD_WAIT == (int)ACCEL_CMD_WAIT &&
                   (int)ACCEL_TRACE_CMD_SIGNAL == (int)ACCEL_CMD_SIGNAL &&
                   (int)ACCEL_TRACE_CMD_COPY == (int)ACCEL_CMD_COPY &&
                   (int)ACCEL_TRACE_CMD_FILL == (int)ACCEL_CMD_FILL &&
                   (int)ACCEL_TRACE_CMD_HOST_CALL == (int)ACCEL_CMD_HOST_CALL,
               "trace command kinds are the driver's");
_Static_assert((int)ACCEL_TRACE_DIR_HOST_TO_DEVICE == (int)ACCEL_COPY_HOST_TO_DEVICE &&
                   (int)ACCEL_TRACE_DIR_DEVICE_TO_HOST == (int)ACCEL_COPY_DEVICE_TO_HOST,
               "trace copy directions are the driver's");

// Records that |cmd| was accepted as number |seq| (a trace is listening).
static void trace_enqueue(const accel_stream_t *stream, const accel_cmd_t *cmd,
                          uint64_t seq, accel_trace_stamp_t enqueued_at) {
  const accel_trace_cmd_t tc = {.kind = cmd->kind,
                                .direction = accel_cmd_direction(cmd),
                                .seq = seq,
                                .bytes = accel_cmd_bytes(cmd)};
  accel_trace_cmd_enqueue(stream->queue, &tc, seq, enqueued_at);
}

accel_status_t accel_stream_submit(accel_stream_t *stream, accel_cmd_t *cmd) {
  // The queue reports the stream's stored error itself when it has failed
  // (driver.h), so the fast path reads no line the worker writes.
  uint64_t seq = 0;
  accel_trace_stamp_t enqueued_at = accel_trace_cmd_enqueue_time();
  accel_status_t st =
      stream->qops->submit(stream->queue, cmd, 1, &seq);
  if (st == ACCEL_OK) {
    trace_enqueue(stream, cmd, seq, enqueued_at);
  }
  // The queue owns the command's references either way (driver_queue.h) and
  // updated stream->last_seq when it accepted it.
  return st;
}

// The launch command of accel_stream_submit_launch, for the generic path and
// for traces.
static accel_cmd_t launch_cmd(accel_launch_exec_fn_t exec, void *payload,
                              accel_object_t *ref0, accel_object_t *ref1) {
  accel_cmd_t cmd = {.kind = ACCEL_CMD_LAUNCH};
  cmd.launch.exec = exec;
  cmd.launch.payload = payload;
  cmd.refs[0] = ref0;
  cmd.refs[1] = ref1;
  return cmd;
}

// accel_stream_submit_launch without the driver's op, or while a trace
// records the enqueue (which needs the command and its number).
static __attribute__((noinline)) accel_status_t submit_launch_slow(
    accel_stream_t *stream, accel_launch_exec_fn_t exec, void *payload,
    accel_object_t *ref0, accel_object_t *ref1) {
  const accel_drv_queue_ops_t *ops = stream->qops;
  accel_cmd_t cmd = launch_cmd(exec, payload, ref0, ref1);
  if (ops->launch == NULL) {
    return accel_stream_submit(stream, &cmd);
  }
  uint64_t seq = 0;
  accel_trace_stamp_t enqueued_at = accel_trace_cmd_enqueue_time();
  // The queue owns the references from here, also on failure.
  ACCEL_RETURN_IF_ERROR(
      ops->launch(stream->queue, exec, payload, ref0, ref1, &seq));
  trace_enqueue(stream, &cmd, seq, enqueued_at);
  return ACCEL_OK;
}

accel_status_t accel_stream_submit_launch(accel_stream_t *stream,
                                          accel_launch_exec_fn_t exec,
                                          void *payload, accel_object_t *ref0,
                                          accel_object_t *ref1) {
  const accel_drv_queue_ops_t *ops = stream->qops;
  if (ops->launch == NULL ||
      ACCEL_TRACE_UNLIKELY(accel_trace_cmd_enqueue_wanted())) {
    return submit_launch_slow(stream, exec, payload, ref0, ref1);
  }
  // The direct path: no command built, no number asked for, and the
  // references handed over (a tail call).
  return ops->launch(stream->queue, exec, payload, ref0, ref1, NULL);
}

// The checks of a buffer a stream command names: on the stream's device,
// then lib/mem's one check of a use (live, in range, writable for writes).
static accel_status_t check_buffer(const accel_stream_t *stream,
                                   const accel_buffer_t *buffer,
                                   uint64_t offset, uint64_t size_bytes,
                                   uint32_t use, const char *what) {
  if (buffer == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT, "%s buffer is NULL",
                       what);
  }
  if (buffer->device != stream->device) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s buffer is on %s but the stream is on %s", what,
                       buffer->device->info.id, stream->device->info.id);
  }
  return accel_buffer_check_use(buffer, offset, size_bytes, use, what);
}

accel_status_t accel_stream_check_fill(uint64_t offset, uint64_t size_bytes,
                                       uint64_t pattern, uint32_t pattern_size,
                                       const char *prefix) {
  if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 &&
      pattern_size != 8) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%sfill: pattern_size %u must be 1, 2, 4 or 8", prefix,
                       pattern_size);
  }
  if (offset % pattern_size != 0 || size_bytes % pattern_size != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%sfill: offset %llu and size %llu must be multiples "
                       "of the pattern size %u",
                       prefix, (unsigned long long)offset,
                       (unsigned long long)size_bytes, pattern_size);
  }
  if (pattern_size < 8 && (pattern >> (8 * pattern_size)) != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%sfill: pattern 0x%llx does not fit in %u byte(s)",
                       prefix, (unsigned long long)pattern, pattern_size);
  }
  return ACCEL_OK;
}

static accel_cmd_t host_call_cmd(accel_host_fn_t fn, void *user_data) {
  accel_cmd_t cmd = {.kind = ACCEL_CMD_HOST_CALL};
  cmd.host_call.fn = fn;
  cmd.host_call.user_data = user_data;
  return cmd;
}

// accel_stream_host_call without the driver's op, or while a trace records
// the enqueue (which needs the command and its number).
static __attribute__((noinline)) accel_status_t host_call_slow(
    accel_stream_t *stream, accel_host_fn_t fn, void *user_data) {
  const accel_drv_queue_ops_t *ops = stream->qops;
  accel_cmd_t cmd = host_call_cmd(fn, user_data);
  if (ops->host_call == NULL) {
    return accel_stream_submit(stream, &cmd);
  }
  uint64_t seq = 0;
  accel_trace_stamp_t enqueued_at = accel_trace_cmd_enqueue_time();
  ACCEL_RETURN_IF_ERROR(
      ops->host_call(stream->queue, fn, user_data, &seq));
  trace_enqueue(stream, &cmd, seq, enqueued_at);
  return ACCEL_OK;
}

accel_status_t accel_stream_host_call(accel_stream_t *stream,
                                      accel_host_fn_t fn, void *user_data) {
  ACCEL_CHECK_ARG(stream != NULL, "stream (NULL)");
  ACCEL_CHECK_ARG(fn != NULL, "fn (NULL)");
  const accel_drv_queue_ops_t *ops = stream->qops;
  if (ops->host_call == NULL ||
      ACCEL_TRACE_UNLIKELY(accel_trace_cmd_enqueue_wanted())) {
    return host_call_slow(stream, fn, user_data);
  }
  // The direct path: no command built, and no number asked for (a tail
  // call: this frame stores nothing).
  return ops->host_call(stream->queue, fn, user_data, NULL);
}

accel_status_t accel_stream_fill(accel_stream_t *stream,
                                 accel_buffer_t *buffer, uint64_t offset,
                                 uint64_t size_bytes, uint64_t pattern,
                                 uint32_t pattern_size) {
  ACCEL_CHECK_ARG(stream != NULL, "stream (NULL)");
  ACCEL_RETURN_IF_ERROR(check_buffer(stream, buffer, offset, size_bytes,
                                     ACCEL_BUFFER_USE_WRITE, "fill"));
  ACCEL_RETURN_IF_ERROR(
      accel_stream_check_fill(offset, size_bytes, pattern, pattern_size, ""));
  accel_cmd_t cmd = {.kind = ACCEL_CMD_FILL};
  cmd.fill.dst = buffer->address + offset;
  cmd.fill.size_bytes = size_bytes;
  cmd.fill.pattern = pattern;
  cmd.fill.pattern_size = pattern_size;
  accel_object_retain(&buffer->object);
  cmd.refs[0] = &buffer->object;
  return accel_stream_submit(stream, &cmd);
}

// A copy command on the stream's own queue (memmove semantics): for an
// overlapping copy within one buffer, which DMA descriptors reject, and on
// devices without copy engines.
static accel_status_t submit_stream_copy(accel_stream_t *stream,
                                         accel_dma_ref_t dst,
                                         accel_dma_ref_t src, uint64_t size) {
  uint32_t direction = dst.host != NULL   ? ACCEL_COPY_DEVICE_TO_HOST
                       : src.host != NULL ? ACCEL_COPY_HOST_TO_DEVICE
                                          : ACCEL_COPY_DEVICE_TO_DEVICE;
  accel_cmd_t cmd = {.kind = ACCEL_CMD_COPY, .flags = direction};
  cmd.copy.dst = dst.host != NULL ? (uint64_t)(uintptr_t)dst.host
                                  : dst.buffer->address + dst.offset;
  cmd.copy.src = src.host != NULL ? (uint64_t)(uintptr_t)src.host
                                  : src.buffer->address + src.offset;
  cmd.copy.size_bytes = size;
  accel_buffer_t *refs[2] = {dst.buffer != NULL ? dst.buffer : src.buffer,
                             dst.buffer != NULL && src.buffer != dst.buffer
                                 ? src.buffer
                                 : NULL};
  for (int i = 0; i < 2; ++i) {
    if (refs[i] != NULL) {
      accel_object_retain(&refs[i]->object);
      cmd.refs[i] = &refs[i]->object;
    }
  }
  return accel_stream_submit(stream, &cmd);
}

// Runs a 1D copy between |dst| and |src| on the stream's DMA link, in the
// stream's order. Copies below the runtime's stream_copy_dma_min_bytes, and
// all copies on a device without copy engines, run on the stream itself: a
// copy through the engines costs two more thread handoffs, which only pays
// once the copy itself is long (or is split over several engines).
static accel_status_t submit_dma_copy(accel_stream_t *stream,
                                      accel_dma_ref_t dst, accel_dma_ref_t src,
                                      uint64_t size) {
  const accel_driver_t *drv = stream->device->driver;
  if (size < stream->device->runtime->stream_copy_dma_min_bytes ||
      drv->copy == NULL || drv->copy->engine_count(stream->device->drv) == 0) {
    return submit_stream_copy(stream, dst, src, size);
  }
  accel_dma_desc_t d = {
      .struct_size = sizeof(d),
      .op = ACCEL_DMA_OP_COPY_1D,
      .dst = dst,
      .src = src,
      .width_bytes = size,
  };
  return accel_stream_copy_submit(stream, &stream->dma_link, &d);
}

accel_status_t accel_stream_copy(accel_stream_t *stream, accel_buffer_t *dst,
                                 uint64_t dst_offset, accel_buffer_t *src,
                                 uint64_t src_offset, uint64_t size_bytes) {
  ACCEL_CHECK_ARG(stream != NULL, "stream (NULL)");
  ACCEL_RETURN_IF_ERROR(check_buffer(stream, dst, dst_offset, size_bytes,
                                     ACCEL_BUFFER_USE_WRITE,
                                     "copy destination"));
  ACCEL_RETURN_IF_ERROR(check_buffer(stream, src, src_offset, size_bytes,
                                     ACCEL_BUFFER_USE_READ, "copy source"));
  if (size_bytes == 0) {
    return ACCEL_OK;
  }
  if (dst == src && dst_offset < src_offset + size_bytes &&
      src_offset < dst_offset + size_bytes) {
    return submit_stream_copy(
        stream, (accel_dma_ref_t){.buffer = dst, .offset = dst_offset},
        (accel_dma_ref_t){.buffer = src, .offset = src_offset}, size_bytes);
  }
  return submit_dma_copy(stream,
                         (accel_dma_ref_t){.buffer = dst, .offset = dst_offset},
                         (accel_dma_ref_t){.buffer = src, .offset = src_offset},
                         size_bytes);
}

accel_status_t accel_stream_copy_from_host(accel_stream_t *stream,
                                           accel_buffer_t *dst,
                                           uint64_t dst_offset,
                                           const void *src,
                                           uint64_t size_bytes) {
  ACCEL_CHECK_ARG(stream != NULL, "stream (NULL)");
  ACCEL_CHECK_ARG(src != NULL || size_bytes == 0, "src (NULL)");
  ACCEL_RETURN_IF_ERROR(check_buffer(stream, dst, dst_offset, size_bytes,
                                     ACCEL_BUFFER_USE_WRITE,
                                     "copy destination"));
  if (size_bytes == 0) {
    return ACCEL_OK;
  }
  return submit_dma_copy(
      stream, (accel_dma_ref_t){.buffer = dst, .offset = dst_offset},
      (accel_dma_ref_t){.host = (void *)(uintptr_t)src}, size_bytes);
}

accel_status_t accel_stream_copy_to_host(accel_stream_t *stream, void *dst,
                                         accel_buffer_t *src,
                                         uint64_t src_offset,
                                         uint64_t size_bytes) {
  ACCEL_CHECK_ARG(stream != NULL, "stream (NULL)");
  ACCEL_CHECK_ARG(dst != NULL || size_bytes == 0, "dst (NULL)");
  ACCEL_RETURN_IF_ERROR(check_buffer(stream, src, src_offset, size_bytes,
                                     ACCEL_BUFFER_USE_READ, "copy source"));
  if (size_bytes == 0) {
    return ACCEL_OK;
  }
  return submit_dma_copy(
      stream, (accel_dma_ref_t){.host = dst},
      (accel_dma_ref_t){.buffer = src, .offset = src_offset}, size_bytes);
}

static accel_status_t check_semaphore(const accel_stream_t *stream,
                                      const accel_semaphore_t *sem) {
  if (sem == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT, "semaphore is NULL");
  }
  if (sem->device != stream->device) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "semaphore is on %s but the stream is on %s",
                       sem->device->info.id, stream->device->info.id);
  }
  return ACCEL_OK;
}

accel_status_t accel_stream_signal(accel_stream_t *stream,
                                   accel_semaphore_t *semaphore,
                                   uint64_t value) {
  ACCEL_CHECK_ARG(stream != NULL, "stream (NULL)");
  ACCEL_RETURN_IF_ERROR(check_semaphore(stream, semaphore));
  accel_cmd_t cmd = {.kind = ACCEL_CMD_SIGNAL};
  cmd.signal.semaphore = semaphore->drv;
  cmd.signal.value = value;
  accel_object_retain(&semaphore->object);
  cmd.refs[0] = &semaphore->object;
  return accel_stream_submit(stream, &cmd);
}

accel_status_t accel_stream_wait(accel_stream_t *stream,
                                 accel_semaphore_t *semaphore,
                                 uint64_t value) {
  ACCEL_CHECK_ARG(stream != NULL, "stream (NULL)");
  ACCEL_RETURN_IF_ERROR(check_semaphore(stream, semaphore));
  accel_cmd_t cmd = {.kind = ACCEL_CMD_WAIT};
  cmd.wait.semaphore = semaphore->drv;
  cmd.wait.value = value;
  accel_object_retain(&semaphore->object);
  cmd.refs[0] = &semaphore->object;
  return accel_stream_submit(stream, &cmd);
}

accel_status_t accel_stream_synchronize(accel_stream_t *stream,
                                        uint64_t timeout_ns) {
  ACCEL_CHECK_ARG(stream != NULL, "stream (NULL)");
  uint64_t target = atomic_load_explicit(&stream->last_seq,
                                         memory_order_relaxed);
  accel_status_t st = stream->device->driver->sync->wait(
      1, &stream->completion->drv, &target, ACCEL_WAIT_ALL, timeout_ns, NULL);
  if (st == ACCEL_OK) {
    // A lost device fails every stream at once (health.h), this one too
    // even if its own work had completed.
    return accel_health_check_lost(stream->device);
  }
  if (st == ACCEL_ERROR_TIMEOUT) {
    uint64_t value = 0;
    // The stream's own failure (the watchdog's is a TIMEOUT too) keeps its
    // message.
    ACCEL_RETURN_IF_ERROR(
        stream->device->driver->sync->query(stream->completion->drv, &value));
    return accel_error(ACCEL_ERROR_TIMEOUT,
                       "stream \"%s\": command #%llu not complete after %llu "
                       "ns",
                       stream->name, (unsigned long long)target,
                       (unsigned long long)timeout_ns);
  }
  return st;
}

accel_status_t accel_stream_query(accel_stream_t *stream) {
  ACCEL_CHECK_ARG(stream != NULL, "stream (NULL)");
  uint64_t target = atomic_load_explicit(&stream->last_seq,
                                         memory_order_relaxed);
  uint64_t value = 0;
  ACCEL_RETURN_IF_ERROR(
      stream->device->driver->sync->query(stream->completion->drv, &value));
  ACCEL_RETURN_IF_ERROR(accel_health_check_lost(stream->device));
  if (value < target) {
    return accel_error(ACCEL_ERROR_NOT_READY,
                       "stream \"%s\": %llu of %llu commands complete",
                       stream->name, (unsigned long long)value,
                       (unsigned long long)target);
  }
  return ACCEL_OK;
}

accel_status_t accel_host_fn_fail(accel_status_t status, const char *fmt,
                                  ...) {
  if (fmt == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_host_fn_fail: fmt is NULL");
  }
  if (status == ACCEL_OK) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_host_fn_fail: status ACCEL_OK fails nothing");
  }
  char message[ACCEL_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof(message), fmt, ap);
  va_end(ap);
  return accel_error(status, "%s", message);
}
