// Dedicated buffers (one reserved range, one physical allocation, one
// mapping) for mid-size requests, and for memory shared between processes:
// export as a file descriptor, import in another process (the shape of
// cuMemExportToShareableHandle / cuMemImportFromShareableHandle).
//
// Exportable memory is always dedicated and freshly created by the driver
// (zeroed): it never held another tenant's data, and it never returns to a
// pool, so what another process sees is only what its owner wrote.
#include <stdio.h>
#include <stdlib.h>

#include "mem/mem_internal.h"

typedef struct dedicated {
  accel_mempool_t pool;  // first
  pthread_mutex_t lock;
  // Live buffers (guarded by |lock|), for lookups by address.
  accel_buffer_t *live;
} dedicated_t;

static accel_status_t map_dedicated(accel_mem_allocator_t *a,
                                    accel_drv_phys_t *phys, uint64_t mapped,
                                    uint64_t alignment, uint32_t access,
                                    uint64_t *out_address) {
  accel_device_t *dev = a->device;
  const accel_driver_t *drv = dev->driver;
  accel_status_t st = drv->memory->va_reserve(dev->drv, mapped, alignment, out_address);
  if (st != ACCEL_OK) {
    return st;
  }
  st = drv->memory->phys_map(dev->drv, *out_address, phys, 0, mapped);
  if (st != ACCEL_OK) {
    goto err_release_va;
  }
  if (access != ACCEL_DRV_ACCESS_READ_WRITE) {
    st = drv->memory->va_set_access != NULL
             ? drv->memory->va_set_access(dev->drv, *out_address, mapped, access)
             : accel_error(ACCEL_ERROR_UNSUPPORTED,
                           "backend \"%s\" cannot set access modes",
                           drv->name);
    if (st != ACCEL_OK) {
      goto err_unmap;
    }
  }
  return ACCEL_OK;

err_unmap:
  drv->memory->phys_unmap(dev->drv, *out_address, mapped);
err_release_va:
  drv->memory->va_release(dev->drv, *out_address, mapped);
  return st;
}

static void dedicated_track_live(dedicated_t *d, accel_buffer_t *buf) {
  pthread_mutex_lock(&d->lock);
  buf->owner_prev = NULL;
  buf->owner_next = d->live;
  if (d->live != NULL) {
    d->live->owner_prev = buf;
  }
  d->live = buf;
  pthread_mutex_unlock(&d->lock);
}

static accel_status_t dedicated_record_init(
    accel_mem_allocator_t *a, accel_buffer_t *buf, accel_drv_phys_t *phys,
    uint64_t address, uint64_t size, uint64_t mapped, bool exportable,
    uint32_t tag) {
  accel_mem_record_init(buf, a, address, size, ACCEL_MEMORY_KIND_DEVICE);
  memset(&buf->u, 0, sizeof(buf->u));
  buf->u.dedicated.phys = phys;
  buf->u.dedicated.mapped_bytes = mapped;
  buf->u.dedicated.exportable = exportable;
  buf->reserved_bytes = mapped;
  buf->tag_index = tag;
  accel_mem_counters_alloc(&a->counters, size);
  accel_mem_counters_reserve(&a->counters, (int64_t)mapped);
  dedicated_track_live((dedicated_t *)a, buf);
  return ACCEL_OK;
}

accel_status_t accel_mem_dedicated_alloc(accel_mem_allocator_t *a,
                                         uint64_t size, uint64_t alignment,
                                         bool exportable, uint32_t tag,
                                         accel_buffer_t **out) {
  accel_device_t *dev = a->device;
  if (exportable && dev->driver->memory->phys_export_fd == NULL) {
    accel_mem_counters_fail(&a->counters);
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "exportable buffer: backend \"%s\" has no IPC",
                       dev->driver->name);
  }
  uint64_t mapped = accel_mem_round_up(size, dev->info.page_size);
  accel_buffer_t *buf = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_record_alloc(a->mem, &buf));
  accel_drv_phys_t *phys = NULL;
  accel_status_t st = dev->driver->memory->phys_create(dev->drv, mapped, 0, &phys);
  if (st != ACCEL_OK) {
    goto err_free_record;
  }
  uint64_t address = 0;
  st = map_dedicated(a, phys, mapped, alignment, ACCEL_DRV_ACCESS_READ_WRITE,
                     &address);
  if (st != ACCEL_OK) {
    goto err_release_phys;
  }
  dedicated_record_init(a, buf, phys, address, size, mapped, exportable, tag);
  *out = buf;
  return ACCEL_OK;

err_release_phys:
  dev->driver->memory->phys_release(phys);
err_free_record:
  accel_mem_record_free(a->mem, buf);
  accel_mem_counters_fail(&a->counters);
  return st;
}

accel_status_t accel_mem_dedicated_import(accel_mem_allocator_t *a, int fd,
                                          uint64_t size, uint32_t flags,
                                          accel_buffer_t **out) {
  accel_device_t *dev = a->device;
  if (dev->driver->memory->phys_import_fd == NULL) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "buffer import: backend \"%s\" has no IPC",
                       dev->driver->name);
  }
  uint64_t mapped = accel_mem_round_up(size, dev->info.page_size);
  accel_buffer_t *buf = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_record_alloc(a->mem, &buf));
  accel_drv_phys_t *phys = NULL;
  accel_status_t st = dev->driver->memory->phys_import_fd(dev->drv, fd, mapped, &phys);
  if (st != ACCEL_OK) {
    goto err_free_record;
  }
  uint64_t address = 0;
  uint32_t access = (flags & ACCEL_IMPORT_FLAG_READ_ONLY)
                        ? ACCEL_DRV_ACCESS_READ
                        : ACCEL_DRV_ACCESS_READ_WRITE;
  st = map_dedicated(a, phys, mapped, dev->info.page_size, access, &address);
  if (st != ACCEL_OK) {
    goto err_release_phys;
  }
  dedicated_record_init(a, buf, phys, address, size, mapped, false, 0);
  buf->read_only = (flags & ACCEL_IMPORT_FLAG_READ_ONLY) != 0;
  *out = buf;
  return ACCEL_OK;

err_release_phys:
  dev->driver->memory->phys_release(phys);
err_free_record:
  accel_mem_record_free(a->mem, buf);
  return st;
}

static void dedicated_free(accel_mem_allocator_t *a, accel_buffer_t *buf) {
  dedicated_t *d = (dedicated_t *)a;
  accel_device_t *dev = a->device;
  pthread_mutex_lock(&d->lock);
  if (buf->owner_prev != NULL) {
    buf->owner_prev->owner_next = buf->owner_next;
  } else {
    d->live = buf->owner_next;
  }
  if (buf->owner_next != NULL) {
    buf->owner_next->owner_prev = buf->owner_prev;
  }
  pthread_mutex_unlock(&d->lock);
  uint64_t mapped = buf->u.dedicated.mapped_bytes;
  // The physical memory goes back to the driver (never to a pool); the
  // driver hands out only zeroed memory, and shared memory stays alive for
  // the other process until it releases its mapping.
  dev->driver->memory->phys_unmap(dev->drv, buf->address, mapped);
  dev->driver->memory->va_release(dev->drv, buf->address, mapped);
  dev->driver->memory->phys_release(buf->u.dedicated.phys);
  accel_mem_counters_reserve(&a->counters, -(int64_t)mapped);
  uint64_t size = buf->size_bytes;
  accel_mem_record_free(a->mem, buf);
  accel_mem_counters_free(&a->counters, size);  // last: see its comment
}

static accel_status_t dedicated_lookup(accel_mem_allocator_t *a,
                                       uint64_t address,
                                       accel_buffer_t **out) {
  dedicated_t *d = (dedicated_t *)a;
  accel_status_t st = ACCEL_ERROR_NOT_FOUND;
  pthread_mutex_lock(&d->lock);
  for (accel_buffer_t *b = d->live; b != NULL; b = b->owner_next) {
    if (address == b->address) {
      *out = b;
      st = ACCEL_OK;
      break;
    }
    if (address > b->address &&
        address < b->address + b->u.dedicated.mapped_bytes) {
      st = accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "address 0x%llx lies inside buffer 0x%llx at offset "
                       "%llu, not at its start",
                       (unsigned long long)address,
                       (unsigned long long)b->address,
                       (unsigned long long)(address - b->address));
      break;
    }
  }
  pthread_mutex_unlock(&d->lock);
  return st;
}

static void dedicated_rebind(accel_mem_allocator_t *a, accel_buffer_t *from,
                             accel_buffer_t *to) {
  dedicated_t *d = (dedicated_t *)a;
  pthread_mutex_lock(&d->lock);
  to->owner_prev = from->owner_prev;
  to->owner_next = from->owner_next;
  if (to->owner_prev != NULL) {
    to->owner_prev->owner_next = to;
  } else {
    d->live = to;
  }
  if (to->owner_next != NULL) {
    to->owner_next->owner_prev = to;
  }
  pthread_mutex_unlock(&d->lock);
}

static bool dedicated_busy(accel_mem_allocator_t *a) {
  // Acquire: pairs with the release in accel_mem_counters_free.
  return atomic_load_explicit(&a->counters.live_count,
                              memory_order_acquire) > 0;
}

static void dedicated_destroy(accel_mem_allocator_t *a) {
  dedicated_t *d = (dedicated_t *)a;
  pthread_mutex_destroy(&d->lock);
  free(d);
}

static const accel_mem_allocator_vtable_t k_dedicated_vtable = {
    .destroy = dedicated_destroy,
    .free = dedicated_free,
    .lookup = dedicated_lookup,
    .busy = dedicated_busy,
    .rebind = dedicated_rebind,
};

accel_status_t accel_mem_dedicated_create(accel_mem_device_t *mem,
                                          accel_mem_allocator_t **out) {
  dedicated_t *d = calloc(1, sizeof(*d));
  if (d == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "dedicated allocator: cannot allocate %zu bytes",
                       sizeof(*d));
  }
  pthread_mutex_init(&d->lock, NULL);
  accel_mem_allocator_t *a = &d->pool.base;
  a->vt = &k_dedicated_vtable;
  a->mem = mem;
  a->device = mem->device;
  a->type = ACCEL_MEM_TYPE_DEDICATED;
  snprintf(a->name, sizeof(a->name), "dedicated");
  accel_mem_register(mem, a);
  *out = a;
  return ACCEL_OK;
}

accel_status_t accel_buffer_export(const accel_buffer_t *buffer, int *out_fd) {
  ACCEL_CHECK_ARG(buffer != NULL, "buffer (NULL)");
  ACCEL_CHECK_ARG(out_fd != NULL, "out_fd (NULL)");
  if (buffer->allocator == NULL ||
      buffer->allocator->type != ACCEL_MEM_TYPE_DEDICATED ||
      !buffer->u.dedicated.exportable) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer export: buffer 0x%llx was not allocated with "
                       "ACCEL_BUFFER_FLAG_EXPORTABLE",
                       (unsigned long long)buffer->address);
  }
  return buffer->device->driver->memory->phys_export_fd(buffer->u.dedicated.phys,
                                                out_fd);
}

accel_status_t accel_buffer_import(accel_device_t *device, int fd,
                                   uint64_t size_bytes, uint32_t flags,
                                   accel_buffer_t **out_buffer) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(out_buffer != NULL, "out_buffer (NULL)");
  if (fd < 0 || size_bytes == 0 ||
      (flags & ~(uint32_t)ACCEL_IMPORT_FLAG_READ_ONLY) != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer import: fd %d, size %llu, flags 0x%x (need a "
                       "valid fd, a non-zero size, known flags)",
                       fd, (unsigned long long)size_bytes, flags);
  }
  accel_mem_device_t *mem = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_device_get(device, &mem));
  accel_status_t st = accel_mem_dedicated_import(mem->dedicated, fd,
                                                 size_bytes, flags,
                                                 out_buffer);
  if (st != ACCEL_OK) {
    return accel_error_context(st, "buffer import on %s", device->info.id);
  }
  return ACCEL_OK;
}
