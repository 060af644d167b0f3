// Host device fault injection (the driver's health table): a small table of
// armed faults per device, consulted by the queue workers and copy engines
// only while |faults_armed| is set (one relaxed load per command or
// descriptor otherwise), and the reports that go to lib/core's sink.
#include <stdio.h>
#include <string.h>

#include "drv/host/host_internal.h"

// Whether |queue| ("q0", or a DMA ring "q0/ring1") belongs to |want|.
static bool queue_matches(const char *want, const char *queue) {
  if (want[0] == '\0') {
    return true;
  }
  size_t n = strlen(want);
  return strncmp(queue, want, n) == 0 && (queue[n] == '\0' || queue[n] == '/');
}

int accel_host_fault_take_slow(accel_drv_device_t *d, const char *queue) {
  int kind = -1;
  int hit = -1;
  pthread_mutex_lock(&d->fault_lock);
  uint64_t now = 0;
  for (uint32_t i = 0; i < d->fault_count; ++i) {
    accel_host_fault_t *f = &d->faults[i];
    if (!queue_matches(f->queue, queue)) {
      continue;
    }
    if (f->not_before_ns != 0) {
      if (now == 0) {
        now = accel_host_now_ns();
      }
      if (now < f->not_before_ns) {
        continue;
      }
    }
    // Every armed fault counts the command; the first one due takes it.
    if (++f->seen >= f->command_index && hit < 0) {
      hit = (int)i;
    }
  }
  if (hit >= 0) {
    kind = (int)d->faults[hit].kind;
    d->faults[hit] = d->faults[--d->fault_count];
  }
  // Relaxed: a worker that misses the change takes the slow path once more.
  atomic_store_explicit(&d->faults_armed, d->fault_count,
                        memory_order_relaxed);
  pthread_mutex_unlock(&d->fault_lock);
  return kind;
}

void accel_host_fault_report(accel_drv_device_t *d, uint32_t ras_class,
                             accel_status_t status, const char *message) {
  if (d->fault_sink != NULL) {
    d->fault_sink(d->fault_sink_ctx, ras_class, status, message);
  }
}

void accel_host_health_set_sink(accel_drv_device_t *d,
                                accel_drv_fault_sink_fn_t fn, void *ctx) {
  d->fault_sink = fn;
  d->fault_sink_ctx = ctx;
}

accel_status_t accel_host_inject_fault(accel_drv_device_t *d,
                                       const accel_drv_fault_t *fault) {
  pthread_mutex_lock(&d->fault_lock);
  if (d->fault_count == ACCEL_HOST_MAX_FAULTS) {
    pthread_mutex_unlock(&d->fault_lock);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "%d faults are armed already (the most a host device "
                       "keeps)",
                       ACCEL_HOST_MAX_FAULTS);
  }
  if (fault->kind == ACCEL_FAULT_HANG && d->hang_semaphore == NULL) {
    accel_status_t st =
        accel_host_semaphore_create(d, 0, &d->hang_semaphore);
    if (st != ACCEL_OK) {
      pthread_mutex_unlock(&d->fault_lock);
      return st;
    }
  }
  accel_host_fault_t *f = &d->faults[d->fault_count++];
  *f = (accel_host_fault_t){.kind = fault->kind,
                            .command_index = fault->command_index,
                            .not_before_ns = fault->not_before_ns};
  snprintf(f->queue, sizeof(f->queue), "%s",
           fault->queue_name != NULL ? fault->queue_name : "");
  // Release: a worker that sees the count sees the hang semaphore (read
  // without the lock by the copy engines).
  atomic_store_explicit(&d->faults_armed, d->fault_count,
                        memory_order_release);
  pthread_mutex_unlock(&d->fault_lock);
  return ACCEL_OK;
}

accel_status_t accel_host_health_reset(accel_drv_device_t *d,
                                       uint32_t scope) {
  (void)scope;  // CONTEXT and DEVICE: the host device has no more to reset
  pthread_mutex_lock(&d->fault_lock);
  d->fault_count = 0;
  atomic_store_explicit(&d->faults_armed, 0, memory_order_relaxed);
  pthread_mutex_unlock(&d->fault_lock);
  return ACCEL_OK;
}
