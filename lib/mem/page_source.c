// The per-device page source: 2 MiB physical pages shared by every
// allocator. Pages given back are zeroed here, before another allocator (or
// the system) can see them, and cached up to a limit so that a pool that
// shrinks and grows again does not pay the driver each time (first touch of
// fresh memory costs about 1.3 us per 4 KiB page on these machines).
#include <stdlib.h>

#include "mem/mem_internal.h"

#define PAGE_SOURCE_KEEP_BYTES (64ull << 20)

accel_status_t accel_mem_pages_init(accel_mem_page_source_t *src) {
  pthread_mutex_init(&src->lock, NULL);
  src->keep_bytes = PAGE_SOURCE_KEEP_BYTES;
  uint64_t v = 0;
  bool invalid = false;
  if (accel_env_u64("ACCEL_MEM_PAGE_CACHE_BYTES", &v, &invalid)) {
    src->keep_bytes = v;
  }
  if (invalid) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "ACCEL_MEM_PAGE_CACHE_BYTES is not a number");
  }
  return ACCEL_OK;
}

void accel_mem_pages_deinit(accel_mem_device_t *mem) {
  accel_mem_pages_trim(mem, 0);
  free(mem->pages.free_pages);
  pthread_mutex_destroy(&mem->pages.lock);
}

accel_status_t accel_mem_pages_take(accel_mem_device_t *mem,
                                    accel_drv_phys_t **out_phys) {
  accel_mem_page_source_t *src = &mem->pages;
  pthread_mutex_lock(&src->lock);
  if (src->free_count > 0) {
    *out_phys = src->free_pages[--src->free_count];
    accel_mem_counters_reserve(&src->counters,
                               -(int64_t)ACCEL_MEM_CHUNK_BYTES);
    pthread_mutex_unlock(&src->lock);
    return ACCEL_OK;
  }
  pthread_mutex_unlock(&src->lock);
  accel_device_t *dev = mem->device;
  accel_status_t st = dev->driver->memory->phys_create(dev->drv, ACCEL_MEM_CHUNK_BYTES,
                                               0, out_phys);
  if (st != ACCEL_OK) {
    accel_mem_counters_fail(&src->counters);
  }
  return st;
}

void accel_mem_pages_give(accel_mem_device_t *mem, accel_drv_phys_t *phys,
                          uint64_t mapped_at) {
  accel_mem_page_source_t *src = &mem->pages;
  accel_device_t *dev = mem->device;
  void *host = mapped_at != 0
                   ? dev->driver->memory->host_pointer(dev->drv, mapped_at)
                   : NULL;
  if (host == NULL) {
    // Cannot clear it here: the driver gets it back (and hands out only
    // zeroed memory).
    dev->driver->memory->phys_release(phys);
    return;
  }
  // Clear before anyone else can take the page: the next owner may be
  // another tenant's pool.
  ACCEL_MEM_UNPOISON(host, ACCEL_MEM_CHUNK_BYTES);
  memset(host, 0, ACCEL_MEM_CHUNK_BYTES);
  pthread_mutex_lock(&src->lock);
  bool keep = (uint64_t)(src->free_count + 1) * ACCEL_MEM_CHUNK_BYTES <=
              src->keep_bytes;
  if (keep && src->free_count == src->free_capacity) {
    uint32_t cap = src->free_capacity ? src->free_capacity * 2 : 32;
    accel_drv_phys_t **grown =
        realloc(src->free_pages, cap * sizeof(*grown));
    if (grown == NULL) {
      keep = false;
    } else {
      src->free_pages = grown;
      src->free_capacity = cap;
    }
  }
  if (keep) {
    src->free_pages[src->free_count++] = phys;
    accel_mem_counters_reserve(&src->counters,
                               (int64_t)ACCEL_MEM_CHUNK_BYTES);
  }
  pthread_mutex_unlock(&src->lock);
  if (!keep) {
    dev->driver->memory->phys_release(phys);
  }
}

void accel_mem_pages_trim(accel_mem_device_t *mem, uint64_t keep) {
  accel_mem_page_source_t *src = &mem->pages;
  for (;;) {
    pthread_mutex_lock(&src->lock);
    if ((uint64_t)src->free_count * ACCEL_MEM_CHUNK_BYTES <= keep ||
        src->free_count == 0) {
      pthread_mutex_unlock(&src->lock);
      return;
    }
    accel_drv_phys_t *phys = src->free_pages[--src->free_count];
    accel_mem_counters_reserve(&src->counters,
                               -(int64_t)ACCEL_MEM_CHUNK_BYTES);
    pthread_mutex_unlock(&src->lock);
    mem->device->driver->memory->phys_release(phys);
  }
}
