#include <stdlib.h>

#include "core/error.h"
#include "sync/semaphore_impl.h"
#include "trace/trace_hooks.h"

static void semaphore_destroy(accel_object_t *object) {
  accel_semaphore_t *sem = (accel_semaphore_t *)object;
  sem->device->driver->sync->destroy(sem->drv);
  free(sem);
}

accel_status_t accel_semaphore_create_internal(accel_device_t *device,
                                               uint64_t initial_value,
                                               accel_semaphore_t **out) {
  accel_semaphore_t *sem = calloc(1, sizeof(*sem));
  if (sem == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "semaphore: cannot allocate %zu bytes", sizeof(*sem));
  }
  accel_status_t st =
      device->driver->sync->create(device->drv, initial_value, &sem->drv);
  if (st != ACCEL_OK) {
    free(sem);
    return st;
  }
  accel_object_init(&sem->object, semaphore_destroy);
  sem->device = device;
  *out = sem;
  return ACCEL_OK;
}

accel_status_t accel_semaphore_create(accel_device_t *device,
                                      uint64_t initial_value,
                                      accel_semaphore_t **out_semaphore) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(out_semaphore != NULL, "out_semaphore (NULL)");
  return accel_semaphore_create_internal(device, initial_value, out_semaphore);
}

void accel_semaphore_retain(accel_semaphore_t *semaphore) {
  if (semaphore != NULL) {
    accel_object_retain(&semaphore->object);
  }
}

void accel_semaphore_release(accel_semaphore_t *semaphore) {
  if (semaphore != NULL) {
    accel_object_release(&semaphore->object);
  }
}

accel_status_t accel_semaphore_query(accel_semaphore_t *semaphore,
                                     uint64_t *out_value) {
  ACCEL_CHECK_ARG(semaphore != NULL, "semaphore (NULL)");
  ACCEL_CHECK_ARG(out_value != NULL, "out_value (NULL)");
  return semaphore->device->driver->sync->query(semaphore->drv, out_value);
}

accel_status_t accel_semaphore_signal(accel_semaphore_t *semaphore,
                                      uint64_t value) {
  ACCEL_CHECK_ARG(semaphore != NULL, "semaphore (NULL)");
  accel_trace_semaphore_signal(semaphore->device, semaphore, value);
  accel_status_t st = semaphore->device->driver->sync->signal(semaphore->drv,
                                                              value);
  if (st != ACCEL_OK) {
    // Say which call was refused: a failed semaphore's stored message alone
    // reads as if this signal had failed the work it names.
    return accel_error_context(st, "semaphore signal to %llu refused",
                               (unsigned long long)value);
  }
  return ACCEL_OK;
}

accel_status_t accel_semaphore_fail(accel_semaphore_t *semaphore,
                                    accel_status_t status,
                                    const char *message) {
  ACCEL_CHECK_ARG(semaphore != NULL, "semaphore (NULL)");
  if (status == ACCEL_OK || (unsigned)status >= ACCEL_STATUS_COUNT) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "semaphore fail: status %d is not a failure code",
                       (int)status);
  }
  semaphore->device->driver->sync->fail(semaphore->drv, status, message);
  return ACCEL_OK;
}

accel_status_t accel_semaphore_wait(accel_semaphore_t *semaphore,
                                    uint64_t value, uint64_t timeout_ns) {
  ACCEL_CHECK_ARG(semaphore != NULL, "semaphore (NULL)");
  // Already reached (a failure does not undo a reached value): no wait, and
  // unless events are recorded, no clock read to time it.
  uint64_t current = 0;
  (void)semaphore->device->driver->sync->query(semaphore->drv, &current);
  if (current >= value &&
      accel_trace_semaphore_wait_satisfied(semaphore->device)) {
    return ACCEL_OK;
  }
  uint64_t t0 = accel_trace_semaphore_wait(semaphore->device, semaphore, value);
  accel_status_t st = semaphore->device->driver->sync->wait(
      1, &semaphore->drv, &value, ACCEL_WAIT_ALL, timeout_ns, NULL);
  accel_trace_semaphore_wake(semaphore->device, semaphore, value, st, t0);
  return st;
}

#define ACCEL_MAX_WAIT_COUNT 64u

accel_status_t accel_semaphore_wait_many(uint32_t count,
                                         accel_semaphore_t *const *semaphores,
                                         const uint64_t *values,
                                         accel_wait_mode_t mode,
                                         uint64_t timeout_ns,
                                         uint32_t *out_index) {
  // The count first: a count of 0 is the mistake to name, whatever the
  // arrays are.
  if (count == 0 || count > ACCEL_MAX_WAIT_COUNT) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "semaphore wait: count %u must be 1 to %u", count,
                       ACCEL_MAX_WAIT_COUNT);
  }
  ACCEL_CHECK_ARG(semaphores != NULL, "semaphores (NULL)");
  ACCEL_CHECK_ARG(values != NULL, "values (NULL)");
  if (mode != ACCEL_WAIT_ALL && mode != ACCEL_WAIT_ANY) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "semaphore wait: unknown mode %d", (int)mode);
  }
  accel_drv_semaphore_t *drv[ACCEL_MAX_WAIT_COUNT];
  for (uint32_t i = 0; i < count; ++i) {
    if (semaphores[i] == NULL) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "semaphore wait: semaphores[%u] is NULL", i);
    }
    if (semaphores[i]->device != semaphores[0]->device) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "semaphore wait: semaphores[%u] is on %s, "
                         "semaphores[0] on %s",
                         i, semaphores[i]->device->info.id,
                         semaphores[0]->device->info.id);
    }
    drv[i] = semaphores[i]->drv;
  }
  const accel_driver_t *driver = semaphores[0]->device->driver;
  return driver->sync->wait(count, drv, values, mode, timeout_ns,
                                out_index);
}

accel_status_t accel_semaphore_fd(accel_semaphore_t *semaphore, uint64_t value,
                                  int *out_fd) {
  ACCEL_CHECK_ARG(semaphore != NULL, "semaphore (NULL)");
  ACCEL_CHECK_ARG(out_fd != NULL, "out_fd (NULL)");
  const accel_driver_t *driver = semaphore->device->driver;
  if (driver->sync->export_fd == NULL) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "semaphore fd: backend %s has no pollable semaphores",
                       driver->name);
  }
  return driver->sync->export_fd(semaphore->drv, value, out_fd);
}
