// Buffers: the one front door (accel_buffer_alloc picks the allocator from
// the request), ref counting, checked frees, growth, and the accessors.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem/mem_internal.h"
#include "trace/trace_hooks.h"

// Validates |desc|; |*out| points at it, or at |copy| holding it with the
// trailing fields an older caller omitted set to zero.
static accel_status_t check_desc_limits(const accel_buffer_desc_t *d,
                                        uint64_t alignment);

static accel_status_t read_desc(const accel_buffer_desc_t *desc,
                                accel_buffer_desc_t *copy,
                                const accel_buffer_desc_t **out,
                                uint64_t *alignment) {
  if (desc->struct_size < offsetof(accel_buffer_desc_t, tag)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer desc: struct_size %u is too small",
                       desc->struct_size);
  }
  const accel_buffer_desc_t *d = desc;
  if (desc->struct_size < sizeof(*d)) {
    memset(copy, 0, sizeof(*copy));
    memcpy(copy, desc, desc->struct_size);
    d = copy;
  }
  *out = d;
  if (d->size_bytes == 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer alloc: size_bytes is 0");
  }
  if (d->kind > ACCEL_MEMORY_KIND_HOST_PINNED) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer alloc: unknown memory kind %u", d->kind);
  }
  *alignment = d->alignment ? d->alignment : 256;
  if ((*alignment & (*alignment - 1)) != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer alloc: alignment %llu is not a power of two",
                       (unsigned long long)*alignment);
  }
  const uint32_t known = ACCEL_BUFFER_FLAG_ZERO | ACCEL_BUFFER_FLAG_NUMA_NODE |
                         ACCEL_BUFFER_FLAG_EXPORTABLE;
  if ((d->flags & ~known) != 0 || d->reserved0 != 0 || d->reserved1 != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer alloc: unknown flags 0x%x or reserved fields "
                       "set",
                       d->flags & ~known);
  }
  return check_desc_limits(d, *alignment);
}

// The sizes of a descriptor whose fields are known: below the address
// space, a max_size_bytes that holds size_bytes, an alignment the
// allocators can give; and the flags' pairings.
static accel_status_t check_desc_limits(const accel_buffer_desc_t *d,
                                        uint64_t alignment) {
  if (__builtin_expect(d->size_bytes > ACCEL_MEM_MAX_BYTES, 0)) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "buffer alloc: %llu bytes exceeds the address space",
                       (unsigned long long)d->size_bytes);
  }
  if (d->max_size_bytes != 0 && d->max_size_bytes < d->size_bytes) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer alloc: max_size_bytes %llu is below "
                       "size_bytes %llu",
                       (unsigned long long)d->max_size_bytes,
                       (unsigned long long)d->size_bytes);
  }
  if (alignment > ACCEL_MEM_MAX_ALIGNMENT) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer alloc: alignment %llu exceeds the largest "
                       "supported, %llu (1 GiB)",
                       (unsigned long long)alignment,
                       (unsigned long long)ACCEL_MEM_MAX_ALIGNMENT);
  }
  if ((d->flags & ACCEL_BUFFER_FLAG_NUMA_NODE) &&
      d->kind != ACCEL_MEMORY_KIND_HOST_PINNED) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer alloc: a NUMA node applies to pinned host "
                       "memory only");
  }
  if ((d->flags & ACCEL_BUFFER_FLAG_EXPORTABLE) &&
      (d->kind != ACCEL_MEMORY_KIND_DEVICE || d->pool != NULL)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer alloc: exportable buffers are device memory "
                       "outside pools");
  }
  return ACCEL_OK;
}

accel_status_t accel_mem_alloc_backing(accel_mem_device_t *mem, uint64_t size,
                                       uint64_t alignment,
                                       accel_buffer_t **out) {
  if (accel_mem_slab_class(size, alignment) >= 0) {
    return accel_mem_slab_alloc(mem->slab, size, alignment, 0, out);
  }
  if (size < ACCEL_MEM_CHUNK_BYTES) {
    return accel_mem_dedicated_alloc(mem->dedicated, size, alignment, false, 0,
                                     out);
  }
  return accel_mem_paged_alloc(mem->paged, size, alignment, size, 0, out);
}

static accel_status_t alloc_from(accel_mem_device_t *mem,
                                 const accel_buffer_desc_t *d,
                                 uint64_t alignment, uint32_t tag,
                                 accel_buffer_t **out) {
  if (d->kind == ACCEL_MEMORY_KIND_HOST_PINNED) {
    int32_t node = (d->flags & ACCEL_BUFFER_FLAG_NUMA_NODE)
                       ? d->numa_node
                       : mem->device->info.numa_node;
    return accel_mem_host_alloc(mem->host, d->size_bytes, node, tag, out);
  }
  if (d->flags & ACCEL_BUFFER_FLAG_EXPORTABLE) {
    return accel_mem_dedicated_alloc(mem->dedicated, d->size_bytes, alignment,
                                     true, tag, out);
  }
  if (d->pool != NULL) {
    accel_mem_allocator_t *a = &d->pool->base;
    switch (a->type) {
      case ACCEL_MEMPOOL_TYPE_SLAB:
        return accel_mem_slab_alloc(a, d->size_bytes, alignment, tag, out);
      case ACCEL_MEMPOOL_TYPE_PAGED:
        return accel_mem_paged_alloc(a, d->size_bytes, alignment,
                                     d->max_size_bytes, tag, out);
      default:
        return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                           "buffer alloc: pool \"%s\" is stream-ordered; use "
                           "accel_buffer_alloc_async",
                           a->name);
    }
  }
  if (d->max_size_bytes <= d->size_bytes &&
      accel_mem_slab_class(d->size_bytes, alignment) >= 0) {
    return accel_mem_slab_alloc(mem->slab, d->size_bytes, alignment, tag, out);
  }
  if (d->max_size_bytes <= d->size_bytes &&
      d->size_bytes < ACCEL_MEM_CHUNK_BYTES) {
    return accel_mem_dedicated_alloc(mem->dedicated, d->size_bytes, alignment,
                                     false, tag, out);
  }
  return accel_mem_paged_alloc(mem->paged, d->size_bytes, alignment,
                               d->max_size_bytes, tag, out);
}

static accel_status_t finish_alloc(accel_mem_device_t *mem,
                                   const accel_buffer_desc_t *d,
                                   accel_buffer_t *buf) {
  if (buf->tag_index != 0) {
    accel_mem_tag_account(mem, buf->tag_index, (int64_t)buf->size_bytes, 1);
  }
  if (d->flags & ACCEL_BUFFER_FLAG_ZERO) {
    accel_status_t st = accel_mem_zero(mem->device, buf->address,
                                       buf->size_bytes);
    if (st != ACCEL_OK) {
      accel_buffer_release(buf);
      return st;
    }
  }
  return ACCEL_OK;
}

accel_status_t accel_buffer_alloc(accel_device_t *device,
                                  const accel_buffer_desc_t *desc,
                                  accel_buffer_t **out_buffer) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(desc != NULL, "desc (NULL)");
  ACCEL_CHECK_ARG(out_buffer != NULL, "out_buffer (NULL)");
  // Fast path: a plain small device buffer (the slab's sizes).
  accel_mem_device_t *fast_mem =
      atomic_load_explicit(&device->mem, memory_order_acquire);
  if (fast_mem != NULL &&
      accel_buffer_desc_is_plain(desc, ACCEL_MEM_SLAB_MAX_BYTES)) {
    accel_status_t st = accel_mem_slab_alloc(fast_mem->slab, desc->size_bytes,
                                             256, 0, out_buffer);
    if (__builtin_expect(st != ACCEL_OK, 0)) {
      accel_trace_buffer_alloc_failed(device, desc->size_bytes, st);
      return accel_error_context(st, "buffer alloc of %llu bytes on %s",
                                 (unsigned long long)desc->size_bytes,
                                 device->info.id);
    }
    accel_trace_buffer_alloc(device, (*out_buffer)->address,
                             (*out_buffer)->size_bytes,
                             (*out_buffer)->reserved_bytes,
                             (*out_buffer)->kind);
    return ACCEL_OK;
  }
  accel_buffer_desc_t copy;
  const accel_buffer_desc_t *dp = NULL;
  uint64_t alignment = 0;
  ACCEL_RETURN_IF_ERROR(read_desc(desc, &copy, &dp, &alignment));
  const accel_buffer_desc_t *d = dp;
  if (d->pool != NULL && d->pool->base.device != device) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer alloc: pool \"%s\" is on %s, not %s",
                       d->pool->base.name, d->pool->base.device->info.id,
                       device->info.id);
  }
  accel_mem_device_t *mem = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_device_get(device, &mem));
  uint32_t tag = accel_mem_tag_intern(mem, d->tag);
  accel_buffer_t *buf = NULL;
  accel_status_t st = alloc_from(mem, d, alignment, tag, &buf);
  if (st != ACCEL_OK) {
    accel_trace_buffer_alloc_failed(device, d->size_bytes, st);
    return accel_error_context(st, "buffer alloc of %llu bytes on %s",
                               (unsigned long long)d->size_bytes,
                               device->info.id);
  }
  ACCEL_RETURN_IF_ERROR(finish_alloc(mem, d, buf));
  accel_trace_buffer_alloc(device, buf->address, buf->size_bytes,
                           buf->reserved_bytes, buf->kind);
  *out_buffer = buf;
  return ACCEL_OK;
}

accel_status_t accel_mem_alloc_async_checked(accel_device_t *device,
                                             accel_semaphore_t *timeline,
                                             const accel_buffer_desc_t *desc,
                                             accel_buffer_t **out_buffer) {
  accel_buffer_desc_t copy;
  const accel_buffer_desc_t *dp = NULL;
  uint64_t alignment = 0;
  ACCEL_RETURN_IF_ERROR(read_desc(desc, &copy, &dp, &alignment));
  const accel_buffer_desc_t *d = dp;
  if (d->kind != ACCEL_MEMORY_KIND_DEVICE ||
      (d->flags & ACCEL_BUFFER_FLAG_EXPORTABLE) || d->max_size_bytes != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "alloc async: only plain device memory (no pinned, "
                       "exportable or growable buffers)");
  }
  accel_mem_device_t *mem = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_device_get(device, &mem));
  accel_mem_allocator_t *a = mem->async;
  if (d->pool != NULL) {
    a = &d->pool->base;
    if (a->type != ACCEL_MEMPOOL_TYPE_STREAM_ORDERED || a->device != device) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "alloc async: pool \"%s\" is not a stream-ordered "
                         "pool of %s",
                         a->name, device->info.id);
    }
  }
  uint32_t tag = d->tag != NULL ? accel_mem_tag_intern(mem, d->tag) : 0;
  accel_buffer_t *buf = NULL;
  accel_status_t st =
      accel_mem_async_alloc(a, timeline, d, alignment, tag, &buf);
  if (st != ACCEL_OK) {
    accel_trace_buffer_alloc_failed(device, d->size_bytes, st);
    return accel_error_context(st, "alloc async on %s", device->info.id);
  }
  ACCEL_RETURN_IF_ERROR(finish_alloc(mem, d, buf));
  accel_trace_buffer_alloc(device, buf->address, buf->size_bytes,
                           buf->reserved_bytes, buf->kind);
  *out_buffer = buf;
  return ACCEL_OK;
}

accel_status_t accel_buffer_free(accel_buffer_t *buffer) {
  ACCEL_CHECK_ARG(buffer != NULL, "buffer (NULL)");
  if (buffer->allocator == NULL) {
    // A buffer another module made (an executable's weights): the owner's
    // free is a release.
    accel_object_release(&buffer->object);
    return ACCEL_OK;
  }
  ACCEL_RETURN_IF_ERROR(accel_mem_owner_free(buffer, "buffer free"));
  // Sole holder: nobody else can retain (that needs a reference), so the
  // count can be dropped without a locked instruction.
  // Acquire: pairs with the release of the last other holder's drop.
  if (atomic_load_explicit(&buffer->object.ref_count, memory_order_acquire) ==
      1) {
    atomic_store_explicit(&buffer->object.ref_count, 0, memory_order_relaxed);
    buffer->object.destroy(&buffer->object);
    return ACCEL_OK;
  }
  accel_object_release(&buffer->object);
  return ACCEL_OK;
}

accel_status_t accel_mem_free(accel_device_t *device, uint64_t address) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  accel_mem_device_t *mem = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_device_get(device, &mem));
  accel_buffer_t *found = NULL;
  accel_status_t st = ACCEL_ERROR_NOT_FOUND;
  pthread_mutex_lock(&mem->lock);
  for (accel_mem_allocator_t *a = mem->allocators; a != NULL; a = a->next) {
    if (a->vt->lookup == NULL) {
      continue;
    }
    st = a->vt->lookup(a, address, &found);
    if (st != ACCEL_ERROR_NOT_FOUND) {
      break;
    }
  }
  pthread_mutex_unlock(&mem->lock);
  if (st == ACCEL_ERROR_NOT_FOUND) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "mem free: no allocator of %s gave address 0x%llx",
                       device->info.id, (unsigned long long)address);
  }
  if (st != ACCEL_OK) {
    return accel_error_context(st, "mem free on %s", device->info.id);
  }
  return accel_buffer_free(found);
}

void accel_buffer_retain(accel_buffer_t *buffer) {
  if (buffer != NULL) {
    accel_object_retain(&buffer->object);
  }
}

void accel_buffer_release(accel_buffer_t *buffer) {
  if (buffer != NULL) {
    accel_object_release(&buffer->object);
  }
}

uint64_t accel_buffer_address(const accel_buffer_t *buffer) {
  return buffer != NULL ? buffer->address : 0;
}

uint64_t accel_buffer_size(const accel_buffer_t *buffer) {
  return buffer != NULL ? buffer->size_bytes : 0;
}

accel_device_t *accel_buffer_device(const accel_buffer_t *buffer) {
  return buffer != NULL ? buffer->device : NULL;
}

accel_status_t accel_buffer_kind(const accel_buffer_t *buffer,
                                 uint32_t *out_kind) {
  ACCEL_CHECK_ARG(buffer != NULL, "buffer (NULL)");
  ACCEL_CHECK_ARG(out_kind != NULL, "out_kind (NULL)");
  *out_kind = buffer->kind;
  return ACCEL_OK;
}

accel_status_t accel_buffer_host_pointer(const accel_buffer_t *buffer,
                                         void **out_ptr) {
  ACCEL_CHECK_ARG(buffer != NULL, "buffer (NULL)");
  ACCEL_CHECK_ARG(out_ptr != NULL, "out_ptr (NULL)");
  if (buffer->allocator != NULL &&
      buffer->kind == ACCEL_MEMORY_KIND_HOST_PINNED) {
    *out_ptr = buffer->u.host.host_ptr;
    return ACCEL_OK;
  }
  void *p = buffer->device->driver->memory->host_pointer(buffer->device->drv,
                                                 buffer->address);
  if (p == NULL) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "buffer on %s is not host-visible",
                       buffer->device->info.id);
  }
  *out_ptr = p;
  return ACCEL_OK;
}

accel_status_t accel_buffer_grow(accel_buffer_t *buffer,
                                 uint64_t new_size_bytes) {
  ACCEL_CHECK_ARG(buffer != NULL, "buffer (NULL)");
  ACCEL_RETURN_IF_ERROR(accel_buffer_check_use(
      buffer, 0, 0, ACCEL_BUFFER_USE_WRITE, "buffer grow:"));
  if (new_size_bytes > ACCEL_MEM_MAX_BYTES) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "buffer grow: %llu bytes exceeds the address space "
                       "(the buffer keeps its %llu bytes)",
                       (unsigned long long)new_size_bytes,
                       (unsigned long long)buffer->size_bytes);
  }
  accel_mem_allocator_t *a = buffer->allocator;
  if (a == NULL || a->vt->grow == NULL) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "buffer grow: buffers of \"%s\" cannot grow in place "
                       "(allocate from a paged pool, or with max_size_bytes)",
                       a != NULL ? a->name : buffer->tag);
  }
  return a->vt->grow(a, buffer, new_size_bytes);
}

// Names a buffer in messages: its label when it has one, else its address.
static void buffer_label(const accel_buffer_t *buffer, char *out, size_t n) {
  if (buffer->tag[0] != '\0') {
    snprintf(out, n, "\"%s\" (address 0x%llx)", buffer->tag,
             (unsigned long long)buffer->address);
  } else {
    snprintf(out, n, "%p (address 0x%llx)", (const void *)buffer,
             (unsigned long long)buffer->address);
  }
}

static accel_status_t refuse_use(const accel_buffer_t *buffer,
                                 const char *what, const char *why) {
  char label[96];
  buffer_label(buffer, label, sizeof(label));
  return accel_error(ACCEL_ERROR_INVALID_ARGUMENT, "%s buffer %s %s", what,
                     label, why);
}

accel_status_t accel_buffer_check_use(const accel_buffer_t *buffer,
                                      uint64_t offset, uint64_t size_bytes,
                                      uint32_t use, const char *what) {
  if (__builtin_expect(accel_buffer_use_allowed(buffer, offset, size_bytes, use),
                       1)) {
    return ACCEL_OK;
  }
  // Which rule refused it. Relaxed: a handle used after its owner's free is
  // a race the caller lost; what matters is that a sequential use after
  // free is refused.
  uint32_t state = atomic_load_explicit(&buffer->state, memory_order_relaxed);
  if (state == ACCEL_BUFFER_STATE_FREE ||
      state == ACCEL_BUFFER_STATE_OWNER_FREED) {
    return refuse_use(buffer, what, "was freed");
  }
  if ((use & ACCEL_BUFFER_USE_WRITE) != 0 && buffer->read_only) {
    return refuse_use(buffer, what, "is read-only");
  }
  // The only rule left: the range.
  return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                     "%s range [%llu, +%llu) is outside the buffer of %llu "
                     "bytes",
                     what, (unsigned long long)offset,
                     (unsigned long long)size_bytes,
                     (unsigned long long)buffer->size_bytes);
}
