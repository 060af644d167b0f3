// Bounce buffers for copies from and to pageable host memory: one mapping per
// queue, populated at once and locked in memory when the limit allows it
// (RLIMIT_MEMLOCK), so that the engines never fault on it.
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "core/driver_memory.h"
#include "core/lock.h"
#include "core/error.h"
#include "core/runtime_impl.h"
#include "dma/dma_impl.h"

accel_status_t accel_dma_staging_ensure_locked(accel_dma_queue_t *q) {
  ACCEL_ASSERT_HELD(&q->submit_lock);
  accel_dma_staging_t *s = &q->staging;
  if (s->base != NULL) {
    return ACCEL_OK;
  }
  // The engines address bounce memory with host addresses: that needs a
  // device that reads host memory (the host device), or one that can pin it
  // at the same address (a discrete device with unified addressing).
  const accel_drv_memory_ops_t *mops = q->device->driver->memory;
  bool host_visible =
      (q->device->info.caps & ACCEL_DEVICE_CAP_HOST_VISIBLE) != 0;
  if (!host_visible && mops->host_register == NULL) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "dma queue \"%s\": staging of pageable memory needs a "
                       "host-visible device or one that pins host memory; "
                       "%s is neither",
                       q->name, q->device->info.id);
  }
  uint64_t size = (uint64_t)ACCEL_DMA_STAGING_SLOT_BYTES *
                  ACCEL_DMA_STAGING_SLOTS * q->ring_count;
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "dma queue \"%s\": cannot map %llu bytes of bounce "
                       "buffers: %s",
                       q->name, (unsigned long long)size, strerror(errno));
  }
  if (!host_visible) {
    uint64_t address = 0;
    accel_status_t st =
        mops->host_register(q->device->drv, p, size, &address);
    if (st == ACCEL_OK && address != (uint64_t)(uintptr_t)p) {
      mops->host_unregister(q->device->drv, p, size);
      st = accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "dma queue \"%s\": %s maps pinned host memory at "
                       "another address (no unified addressing)",
                       q->name, q->device->info.id);
    }
    if (st != ACCEL_OK) {
      munmap(p, size);
      return accel_error_context(st, "dma queue \"%s\": bounce buffers",
                                 q->name);
    }
    s->registered_on = q->device;
  } else {
    // Locking may exceed RLIMIT_MEMLOCK; populated memory still works, it
    // can only be paged out under pressure.
    s->locked = mlock(p, size) == 0;
  }
  s->base = p;
  s->size_bytes = size;
  return ACCEL_OK;
}

void accel_dma_staging_free(accel_dma_staging_t *s) {
  if (s->base == NULL) {
    return;
  }
  if (s->registered_on != NULL) {
    s->registered_on->driver->memory->host_unregister(
        s->registered_on->drv, s->base, s->size_bytes);
    s->registered_on = NULL;
  }
  if (s->locked) {
    munlock(s->base, s->size_bytes);
  }
  munmap(s->base, s->size_bytes);
  s->base = NULL;
}
