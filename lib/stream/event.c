// Events over timeline semaphores: each record takes the next value of the
// event's private semaphore; the record command stores the device time and
// signals that value.
#include <pthread.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/lock.h"
#include "stream/event_impl.h"
#include "stream/stream_impl.h"
#include "trace/trace_hooks.h"

struct accel_event {
  accel_object_t object;  // first
  accel_device_t *device;
  accel_event_flags_t flags;
  pthread_mutex_t lock;
  // Guarded by |lock|: the semaphore and the value of the last record. A
  // semaphore failed by a stream failure is replaced at the next record, so
  // that an event can be reused after the failure is handled.
  accel_semaphore_t *semaphore;
  uint64_t target;
  // Device time of the most recently completed record (written by the
  // worker before it signals).
  _Atomic uint64_t timestamp_ns;
};

static void event_destroy(accel_object_t *object) {
  accel_event_t *event = (accel_event_t *)object;
  accel_semaphore_release(event->semaphore);
  pthread_mutex_destroy(&event->lock);
  free(event);
}

accel_status_t accel_event_create(accel_device_t *device,
                                  accel_event_flags_t flags,
                                  accel_event_t **out_event) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(out_event != NULL, "out_event (NULL)");
  if ((flags & ~(uint32_t)ACCEL_EVENT_FLAG_DISABLE_TIMING) != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "event create: unknown flags 0x%x", flags);
  }
  accel_event_t *event = calloc(1, sizeof(*event));
  if (event == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "event create: cannot allocate %zu bytes",
                       sizeof(*event));
  }
  accel_status_t st =
      accel_semaphore_create_internal(device, 0, &event->semaphore);
  if (st != ACCEL_OK) {
    free(event);
    return st;
  }
  accel_object_init(&event->object, event_destroy);
  pthread_mutex_init(&event->lock, NULL);
  event->device = device;
  event->flags = flags;
  *out_event = event;
  return ACCEL_OK;
}

void accel_event_retain(accel_event_t *event) {
  if (event != NULL) {
    accel_object_retain(&event->object);
  }
}

void accel_event_release(accel_event_t *event) {
  if (event != NULL) {
    accel_object_release(&event->object);
  }
}

// The semaphore of the next record: the event's, or a fresh one when the
// last record's failed (with a stream failure), so that an event can be
// reused after the failure is handled.
static accel_status_t fresh_semaphore_locked(accel_event_t *event) {
  ACCEL_ASSERT_HELD(&event->lock);
  const accel_driver_t *driver = event->device->driver;
  uint64_t value = 0;
  if (driver->sync->query(event->semaphore->drv, &value) == ACCEL_OK) {
    return ACCEL_OK;
  }
  accel_semaphore_t *fresh = NULL;
  ACCEL_RETURN_IF_ERROR(
      accel_semaphore_create_internal(event->device, 0, &fresh));
  accel_semaphore_release(event->semaphore);
  event->semaphore = fresh;
  event->target = 0;
  return ACCEL_OK;
}

accel_status_t accel_event_record_take(accel_event_t *event,
                                       accel_semaphore_t **out_semaphore,
                                       uint64_t *out_value,
                                       _Atomic uint64_t **out_timestamp) {
  pthread_mutex_lock(&event->lock);
  accel_status_t st = fresh_semaphore_locked(event);
  if (st == ACCEL_OK) {
    accel_semaphore_retain(event->semaphore);
    *out_semaphore = event->semaphore;
    *out_value = ++event->target;
    *out_timestamp = (event->flags & ACCEL_EVENT_FLAG_DISABLE_TIMING) == 0
                         ? &event->timestamp_ns
                         : NULL;
  }
  pthread_mutex_unlock(&event->lock);
  return st;
}

accel_device_t *accel_event_device_of(const accel_event_t *event) {
  return event->device;
}

accel_status_t accel_event_record(accel_event_t *event,
                                  accel_stream_t *stream) {
  ACCEL_CHECK_ARG(event != NULL, "event (NULL)");
  ACCEL_CHECK_ARG(stream != NULL, "stream (NULL)");
  if (event->device != stream->device) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "event record: event is on %s but the stream is on %s",
                       event->device->info.id, stream->device->info.id);
  }
  pthread_mutex_lock(&event->lock);
  accel_status_t fresh = fresh_semaphore_locked(event);
  if (fresh != ACCEL_OK) {
    pthread_mutex_unlock(&event->lock);
    return fresh;
  }
  accel_cmd_t cmd = {.kind = ACCEL_CMD_SIGNAL};
  cmd.signal.semaphore = event->semaphore->drv;
  cmd.signal.value = event->target + 1;
  if ((event->flags & ACCEL_EVENT_FLAG_DISABLE_TIMING) == 0) {
    cmd.signal.timestamp_out = &event->timestamp_ns;
  }
  // The event keeps the timestamp slot alive; the semaphore is held on its
  // own, since a later record may replace the event's semaphore.
  accel_object_retain(&event->object);
  cmd.refs[0] = &event->object;
  accel_object_retain(&event->semaphore->object);
  cmd.refs[1] = &event->semaphore->object;
  accel_status_t st = accel_stream_submit(stream, &cmd);
  if (st == ACCEL_OK) {
    event->target++;
    accel_trace_event_record(event, stream->queue, event->target);
  }
  pthread_mutex_unlock(&event->lock);
  return st;
}

// Snapshots the last record: a retained semaphore and its target value.
void accel_event_wait_target(accel_event_t *event, accel_semaphore_t **out_sem,
                             uint64_t *out_target) {
  pthread_mutex_lock(&event->lock);
  accel_semaphore_retain(event->semaphore);
  *out_sem = event->semaphore;
  *out_target = event->target;
  pthread_mutex_unlock(&event->lock);
}

accel_status_t accel_event_query(accel_event_t *event) {
  ACCEL_CHECK_ARG(event != NULL, "event (NULL)");
  accel_semaphore_t *sem;
  uint64_t target;
  accel_event_wait_target(event, &sem, &target);
  uint64_t value = 0;
  accel_status_t st =
      event->device->driver->sync->query(sem->drv, &value);
  if (st == ACCEL_OK && value < target) {
    st = accel_error(ACCEL_ERROR_NOT_READY,
                     "event record %llu not reached yet",
                     (unsigned long long)target);
  } else if (st != ACCEL_OK && value >= target) {
    st = ACCEL_OK;  // the failure came after this record completed
  }
  accel_semaphore_release(sem);
  return st;
}

accel_status_t accel_event_synchronize(accel_event_t *event,
                                       uint64_t timeout_ns) {
  ACCEL_CHECK_ARG(event != NULL, "event (NULL)");
  accel_semaphore_t *sem;
  uint64_t target;
  accel_event_wait_target(event, &sem, &target);
  accel_status_t st = event->device->driver->sync->wait(
      1, &sem->drv, &target, ACCEL_WAIT_ALL, timeout_ns, NULL);
  accel_semaphore_release(sem);
  return st;
}

accel_status_t accel_stream_wait_event(accel_stream_t *stream,
                                       accel_event_t *event) {
  ACCEL_CHECK_ARG(stream != NULL, "stream (NULL)");
  ACCEL_CHECK_ARG(event != NULL, "event (NULL)");
  if (event->device != stream->device) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "stream wait event: event is on %s but the stream is "
                       "on %s",
                       event->device->info.id, stream->device->info.id);
  }
  accel_semaphore_t *sem;
  uint64_t target;
  accel_event_wait_target(event, &sem, &target);
  if (target == 0) {
    accel_semaphore_release(sem);
    return ACCEL_OK;  // never recorded: nothing to wait for
  }
  accel_cmd_t cmd = {.kind = ACCEL_CMD_WAIT};
  cmd.wait.semaphore = sem->drv;
  cmd.wait.value = target;
  cmd.refs[0] = &sem->object;  // the snapshot's reference moves here
  return accel_stream_submit(stream, &cmd);
}

accel_status_t accel_event_elapsed_ns(accel_event_t *start, accel_event_t *end,
                                      int64_t *out_ns) {
  ACCEL_CHECK_ARG(start != NULL, "start (NULL)");
  ACCEL_CHECK_ARG(end != NULL, "end (NULL)");
  ACCEL_CHECK_ARG(out_ns != NULL, "out_ns (NULL)");
  if (start->device != end->device) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "event elapsed: events on %s and %s",
                       start->device->info.id, end->device->info.id);
  }
  accel_event_t *events[2] = {start, end};
  uint64_t ts[2];
  for (int i = 0; i < 2; ++i) {
    const char *which = i == 0 ? "start" : "end";
    if (events[i]->flags & ACCEL_EVENT_FLAG_DISABLE_TIMING) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "event elapsed: %s event was created with "
                         "ACCEL_EVENT_FLAG_DISABLE_TIMING",
                         which);
    }
    accel_semaphore_t *sem;
    uint64_t target;
    accel_event_wait_target(events[i], &sem, &target);
    uint64_t value = 0;
    accel_status_t st =
        events[i]->device->driver->sync->query(sem->drv, &value);
    accel_semaphore_release(sem);
    if (target == 0) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "event elapsed: %s event was never recorded", which);
    }
    if (value < target) {
      if (st != ACCEL_OK) {
        return st;
      }
      return accel_error(ACCEL_ERROR_NOT_READY,
                         "event elapsed: %s event not complete yet", which);
    }
    // Acquire: pairs with the worker's release store before its signal.
    ts[i] = atomic_load_explicit(&events[i]->timestamp_ns,
                                 memory_order_acquire);
  }
  *out_ns = (int64_t)(ts[1] - ts[0]);
  return ACCEL_OK;
}
