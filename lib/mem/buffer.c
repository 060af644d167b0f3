#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/runtime_impl.h"
#include "mem/buffer_impl.h"
#include "trace/trace_hooks.h"

static void buffer_destroy(accel_object_t *object) {
  accel_buffer_t *buf = (accel_buffer_t *)object;
  const accel_driver_t *drv = buf->device->driver;
  accel_trace_buffer_free(buf->device, buf->address, buf->size_bytes,
                          buf->mapped_bytes);
  drv->phys_unmap(buf->device->drv, buf->address, buf->mapped_bytes);
  drv->va_release(buf->device->drv, buf->address, buf->mapped_bytes);
  drv->phys_release(buf->phys);
  free(buf);
}

accel_status_t accel_buffer_alloc(accel_device_t *device,
                                  const accel_buffer_desc_t *desc,
                                  accel_buffer_t **out_buffer) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(desc != NULL, "desc (NULL)");
  ACCEL_CHECK_ARG(out_buffer != NULL, "out_buffer (NULL)");
  if (desc->struct_size < offsetof(accel_buffer_desc_t, tag)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer desc: struct_size %u is too small",
                       desc->struct_size);
  }
  if (desc->size_bytes == 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer alloc: size_bytes is 0");
  }
  if (desc->kind > ACCEL_MEMORY_KIND_HOST_PINNED) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer alloc: unknown memory kind %u", desc->kind);
  }
  uint64_t alignment = desc->alignment ? desc->alignment : 256;
  if ((alignment & (alignment - 1)) != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer alloc: alignment %llu is not a power of two",
                       (unsigned long long)alignment);
  }
  if ((desc->flags & ~(uint32_t)ACCEL_BUFFER_FLAG_ZERO) != 0 ||
      desc->reserved0 != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "buffer alloc: unknown flags 0x%x", desc->flags);
  }
  const accel_driver_t *drv = device->driver;
  uint64_t page = device->info.page_size;
  if (desc->size_bytes > UINT64_MAX - page) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "buffer alloc: %llu bytes exceeds the address space",
                       (unsigned long long)desc->size_bytes);
  }
  uint64_t mapped = (desc->size_bytes + page - 1) / page * page;

  accel_buffer_t *buf = calloc(1, sizeof(*buf));
  if (buf == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "buffer alloc: cannot allocate the host record");
  }
  accel_status_t st =
      drv->va_reserve(device->drv, mapped, alignment, &buf->address);
  if (st != ACCEL_OK) {
    goto err_free_buffer;
  }
  st = drv->phys_create(device->drv, mapped, 0, &buf->phys);
  if (st != ACCEL_OK) {
    goto err_release_va;
  }
  st = drv->phys_map(device->drv, buf->address, buf->phys, 0, mapped);
  if (st != ACCEL_OK) {
    goto err_release_phys;
  }
  accel_object_init(&buf->object, buffer_destroy);
  buf->device = device;
  buf->size_bytes = desc->size_bytes;
  buf->kind = desc->kind;
  buf->mapped_bytes = mapped;
  if (desc->struct_size > offsetof(accel_buffer_desc_t, tag) &&
      desc->tag != NULL) {
    snprintf(buf->tag, sizeof(buf->tag), "%s", desc->tag);
  }
  accel_trace_buffer_alloc(device, buf->address, buf->size_bytes, mapped,
                           buf->kind);
  *out_buffer = buf;
  return ACCEL_OK;

err_release_phys:
  drv->phys_release(buf->phys);
err_release_va:
  drv->va_release(device->drv, buf->address, mapped);
err_free_buffer:
  free(buf);
  accel_trace_buffer_alloc_failed(device, desc->size_bytes, st);
  return accel_error_context(st, "buffer alloc of %llu bytes on %s",
                             (unsigned long long)desc->size_bytes,
                             device->info.id);
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

accel_status_t accel_buffer_host_pointer(const accel_buffer_t *buffer,
                                         void **out_ptr) {
  ACCEL_CHECK_ARG(buffer != NULL, "buffer (NULL)");
  ACCEL_CHECK_ARG(out_ptr != NULL, "out_ptr (NULL)");
  void *p = buffer->device->driver->host_pointer(buffer->device->drv,
                                                 buffer->address);
  if (p == NULL) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "buffer on %s is not host-visible",
                       buffer->device->info.id);
  }
  *out_ptr = p;
  return ACCEL_OK;
}

accel_status_t accel_buffer_check_range(const accel_buffer_t *buffer,
                                        uint64_t offset, uint64_t size_bytes,
                                        const char *what) {
  if (offset > buffer->size_bytes ||
      size_bytes > buffer->size_bytes - offset) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s range [%llu, +%llu) is outside the buffer of %llu "
                       "bytes",
                       what, (unsigned long long)offset,
                       (unsigned long long)size_bytes,
                       (unsigned long long)buffer->size_bytes);
  }
  return ACCEL_OK;
}
