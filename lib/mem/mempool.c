// Explicit pools (accel_mempool_*).
#include <stdio.h>
#include <stdlib.h>

#include "mem/mem_internal.h"
#include "sync/semaphore_impl.h"

accel_status_t accel_mempool_create(accel_device_t *device,
                                    const accel_mempool_desc_t *desc,
                                    accel_mempool_t **out_pool) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(desc != NULL, "desc (NULL)");
  ACCEL_CHECK_ARG(out_pool != NULL, "out_pool (NULL)");
  if (desc->struct_size < sizeof(accel_mempool_desc_t)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "mempool desc: struct_size %u is below %zu",
                       desc->struct_size, sizeof(accel_mempool_desc_t));
  }
  accel_mempool_desc_t d = *desc;
  if (d.type > ACCEL_MEMPOOL_TYPE_STREAM_ORDERED) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "mempool desc: unknown type %u", d.type);
  }
  if (d.type != ACCEL_MEMPOOL_TYPE_PAGED &&
      (d.page_size_bytes != 0 || d.block_size_bytes != 0)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "mempool desc: page and block sizes apply to paged "
                       "pools only");
  }
  accel_mem_device_t *mem = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_device_get(device, &mem));
  char name[48];
  pthread_mutex_lock(&mem->lock);
  uint32_t n = mem->pool_counter++;
  pthread_mutex_unlock(&mem->lock);
  static const char *const k_prefix[] = {"slab", "paged", "stream-ordered"};
  if (d.name == NULL || d.name[0] == '\0') {
    snprintf(name, sizeof(name), "%s%u", k_prefix[d.type], n);
    d.name = name;
  }
  accel_mem_allocator_t *a = NULL;
  accel_status_t st;
  switch (d.type) {
    case ACCEL_MEMPOOL_TYPE_SLAB:
      st = accel_mem_slab_create(mem, &d, &a);
      break;
    case ACCEL_MEMPOOL_TYPE_PAGED:
      st = accel_mem_paged_create(mem, &d, &a);
      break;
    default:
      st = accel_mem_async_create(mem, &d, &a);
      break;
  }
  if (st != ACCEL_OK) {
    return st;
  }
  a->is_pool = true;
  *out_pool = (accel_mempool_t *)a;
  return ACCEL_OK;
}

accel_status_t accel_mempool_destroy(accel_mempool_t *pool) {
  if (pool == NULL) {
    return ACCEL_OK;
  }
  accel_mem_allocator_t *a = &pool->base;
  if (!a->is_pool) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "mempool destroy: \"%s\" is a device default "
                       "allocator, not a pool you created",
                       a->name);
  }
  if (a->vt->busy != NULL && a->vt->busy(a)) {
    accel_mem_stats_t s = {.struct_size = sizeof(s)};
    accel_mempool_stats(pool, &s);
    return accel_error(ACCEL_ERROR_BUSY,
                       "mempool destroy: \"%s\" still has %llu live buffers "
                       "(%llu bytes)",
                       a->name, (unsigned long long)s.live_count,
                       (unsigned long long)s.bytes_in_use);
  }
  accel_mem_unregister(a->mem, a);
  a->vt->destroy(a);
  return ACCEL_OK;
}

accel_status_t accel_mempool_trim(accel_device_t *device,
                                  accel_mempool_t *pool, uint64_t keep_bytes) {
  if (pool != NULL) {
    if (pool->base.vt->trim != NULL) {
      pool->base.vt->trim(&pool->base, keep_bytes);
    }
    return ACCEL_OK;
  }
  ACCEL_CHECK_ARG(device != NULL, "device and pool (both NULL)");
  accel_mem_device_t *mem = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_device_get(device, &mem));
  // Stream-ordered pools first: what they give back lands in the others.
  for (int pass = 0; pass < 2; ++pass) {
    pthread_mutex_lock(&mem->lock);
    for (accel_mem_allocator_t *a = mem->allocators; a != NULL; a = a->next) {
      bool async = a->type == ACCEL_MEMPOOL_TYPE_STREAM_ORDERED;
      if (a->vt->trim != NULL && async == (pass == 0)) {
        a->vt->trim(a, keep_bytes);
      }
    }
    pthread_mutex_unlock(&mem->lock);
  }
  accel_mem_pages_trim(mem, keep_bytes);
  return ACCEL_OK;
}
