// Bounce buffers for copies from and to pageable host memory: one mapping per
// queue, populated at once and locked in memory when the limit allows it
// (RLIMIT_MEMLOCK), so that the engines never fault on it.
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "core/lock.h"
#include "core/error.h"
#include "dma/dma_impl.h"

accel_status_t accel_dma_staging_ensure_locked(accel_dma_queue_t *q) {
  ACCEL_ASSERT_HELD(&q->submit_lock);
  accel_dma_staging_t *s = &q->staging;
  if (s->base != NULL) {
    return ACCEL_OK;
  }
  // The engines address bounce memory with host addresses: that needs a
  // device that reads host memory (the host device). A discrete device
  // would map pinned host buffers from lib/mem here.
  if ((q->device->info.caps & ACCEL_DEVICE_CAP_HOST_VISIBLE) == 0) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "dma queue \"%s\": staging of pageable memory needs a "
                       "host-visible device; %s is not",
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
  // Locking may exceed RLIMIT_MEMLOCK; populated memory still works, it can
  // only be paged out under pressure.
  s->locked = mlock(p, size) == 0;
  s->base = p;
  s->size_bytes = size;
  return ACCEL_OK;
}

void accel_dma_staging_free(accel_dma_staging_t *s) {
  if (s->base == NULL) {
    return;
  }
  if (s->locked) {
    munlock(s->base, s->size_bytes);
  }
  munmap(s->base, s->size_bytes);
  s->base = NULL;
}
