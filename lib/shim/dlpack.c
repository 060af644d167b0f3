// DLPack 1.x exchange (include/accel/dlpack.h, docs/dlpack.md): buffers out
// as DLManagedTensorVersioned (or the legacy DLManagedTensor), tensors in as
// buffers that wrap the producer's memory or copy it.
#include "accel/dlpack.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/event.h"
#include "core/error.h"
#include "core/object.h"
#include "core/runtime_impl.h"
#include "mem/buffer_impl.h"

// accel_dtype_t -> DLPack type; bits 0 marks the types DLPack does not carry.
static const accel_dl_dtype_t k_dtypes[ACCEL_DTYPE_COUNT] = {
    [ACCEL_DTYPE_F32] = {ACCEL_DL_FLOAT, 32, 1},
    [ACCEL_DTYPE_F16] = {ACCEL_DL_FLOAT, 16, 1},
    [ACCEL_DTYPE_BF16] = {ACCEL_DL_BFLOAT, 16, 1},
    [ACCEL_DTYPE_F8E4M3] = {ACCEL_DL_FLOAT8_E4M3FN, 8, 1},
    [ACCEL_DTYPE_F8E5M2] = {ACCEL_DL_FLOAT8_E5M2, 8, 1},
    [ACCEL_DTYPE_I32] = {ACCEL_DL_INT, 32, 1},
    [ACCEL_DTYPE_I8] = {ACCEL_DL_INT, 8, 1},
    [ACCEL_DTYPE_U8] = {ACCEL_DL_UINT, 8, 1},
    [ACCEL_DTYPE_I16] = {ACCEL_DL_INT, 16, 1},
    [ACCEL_DTYPE_U16] = {ACCEL_DL_UINT, 16, 1},
    [ACCEL_DTYPE_U32] = {ACCEL_DL_UINT, 32, 1},
    [ACCEL_DTYPE_I64] = {ACCEL_DL_INT, 64, 1},
    [ACCEL_DTYPE_F64] = {ACCEL_DL_FLOAT, 64, 1},
};

accel_status_t accel_dlpack_dtype(accel_dtype_t dtype,
                                  accel_dl_dtype_t *out_dtype) {
  ACCEL_CHECK_ARG(out_dtype != NULL, "out_dtype (NULL)");
  if ((unsigned)dtype >= ACCEL_DTYPE_COUNT || dtype == ACCEL_DTYPE_INVALID) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "dlpack dtype: %u is not an accel_dtype_t",
                       (unsigned)dtype);
  }
  if (k_dtypes[dtype].bits == 0) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "dlpack dtype: %s is a packed sub-byte type, which "
                       "accel does not exchange through DLPack",
                       accel_dtype_name(dtype));
  }
  *out_dtype = k_dtypes[dtype];
  return ACCEL_OK;
}

// The DLPack device of memory of |kind| on |device|.
static accel_dl_device_t dl_device_of(const accel_device_t *device,
                                      uint32_t kind) {
  const accel_device_info_t *info = &device->info;
  if (strcmp(info->backend, "host") == 0) {
    return (accel_dl_device_t){ACCEL_DL_CPU, 0};
  }
  if (strcmp(info->backend, "cuda") == 0) {
    if (kind == ACCEL_MEMORY_KIND_HOST_PINNED) {
      return (accel_dl_device_t){ACCEL_DL_CUDA_HOST, 0};
    }
    return (accel_dl_device_t){ACCEL_DL_CUDA, (int32_t)device->ordinal};
  }
  return (accel_dl_device_t){ACCEL_DL_EXT_DEV, (int32_t)info->index};
}

accel_status_t accel_dlpack_device(const accel_device_t *device,
                                   accel_dl_device_t *out_device) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(out_device != NULL, "out_device (NULL)");
  *out_device = dl_device_of(device, ACCEL_MEMORY_KIND_DEVICE);
  return ACCEL_OK;
}

// The bytes a strided view addresses, relative to element 0: [lo, hi).
// Empty views (an extent of 0) address nothing: lo == hi == 0.
typedef struct span {
  int64_t lo;
  int64_t hi;
  uint64_t elem_bytes;
} span_t;

// Checks dtype, ndim, shape and strides (elements; NULL = compact) and
// computes the span. |what| names the direction in messages.
static accel_status_t view_span(const char *what, accel_dl_dtype_t dtype,
                                int32_t ndim, const int64_t *shape,
                                const int64_t *strides, span_t *out) {
  if (dtype.bits == 0 || dtype.bits % 8 != 0 || dtype.lanes == 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s: dtype (code %u, %u bits, %u lanes) is not whole "
                       "bytes with at least one lane",
                       what, dtype.code, dtype.bits, dtype.lanes);
  }
  if (ndim < 0 || ndim > ACCEL_DLPACK_MAX_NDIM) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s: ndim %d is outside 0..%d", what, ndim,
                       ACCEL_DLPACK_MAX_NDIM);
  }
  if (ndim > 0 && shape == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s: shape is NULL for ndim %d", what, ndim);
  }
  span_t s = {0, 0, (uint64_t)dtype.bits / 8 * dtype.lanes};
  int64_t elem = (int64_t)s.elem_bytes;
  int64_t compact = 1;  // row-major stride of the current dimension
  int64_t lo = 0, hi = 0;
  bool empty = false;
  for (int32_t d = ndim - 1; d >= 0; --d) {
    if (shape[d] < 0) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "%s: shape[%d] is negative (%lld)", what, d,
                         (long long)shape[d]);
    }
    int64_t stride = strides != NULL ? strides[d] : compact;
    if (shape[d] == 0) {
      empty = true;
    }
    int64_t step = 0;
    if (shape[d] > 1 &&
        (__builtin_mul_overflow(stride, shape[d] - 1, &step) ||
         __builtin_mul_overflow(step, elem, &step))) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "%s: dimension %d (extent %lld, stride %lld) "
                         "overflows 64-bit byte offsets",
                         what, d, (long long)shape[d], (long long)stride);
    }
    if ((step < 0 && __builtin_add_overflow(lo, step, &lo)) ||
        (step > 0 && __builtin_add_overflow(hi, step, &hi))) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "%s: the view's extent overflows 64-bit offsets",
                         what);
    }
    if (shape[d] > 0 &&
        __builtin_mul_overflow(compact, shape[d], &compact)) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "%s: the element count overflows 64 bits", what);
    }
  }
  if (!empty) {
    s.lo = lo;
    s.hi = hi + elem;
  }
  *out = s;
  return ACCEL_OK;
}

// ---------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------

// One allocation per exported tensor: the managed tensor (either form), the
// shape and strides it points at, and the buffer reference it holds.
typedef struct export_ctx {
  union {
    accel_dl_managed_tensor_versioned_t versioned;
    accel_dl_managed_tensor_t legacy;
  } m;
  accel_buffer_t *buffer;  // one reference
  int64_t dims[2 * ACCEL_DLPACK_MAX_NDIM];  // shape, then strides
} export_ctx_t;

static void export_versioned_deleter(accel_dl_managed_tensor_versioned_t *t) {
  export_ctx_t *ctx = t->manager_ctx;
  accel_buffer_release(ctx->buffer);
  free(ctx);
}

static void export_legacy_deleter(accel_dl_managed_tensor_t *t) {
  export_ctx_t *ctx = t->manager_ctx;
  accel_buffer_release(ctx->buffer);
  free(ctx);
}

// Orders the consumer after desc->producer_stream (the handshake at the top
// of include/accel/dlpack.h).
static accel_status_t export_handshake(const accel_buffer_t *buffer,
                                       const accel_dlpack_export_desc_t *d) {
  if (d->consumer_stream != NULL &&
      accel_stream_device(d->consumer_stream) != buffer->device) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "dlpack export: consumer stream is on %s, the buffer "
                       "on %s",
                       accel_stream_device(d->consumer_stream)->info.id,
                       buffer->device->info.id);
  }
  if (d->producer_stream == NULL || d->producer_stream == d->consumer_stream) {
    return ACCEL_OK;  // nothing in flight, or stream order already holds
  }
  if (d->consumer_stream == NULL) {
    return accel_error_context(
        accel_stream_synchronize(d->producer_stream, ACCEL_TIMEOUT_INFINITE),
        "dlpack export: producer stream");
  }
  accel_event_t *event = NULL;
  ACCEL_RETURN_IF_ERROR(
      accel_event_create(accel_stream_device(d->producer_stream), 0, &event));
  accel_status_t st = accel_event_record(event, d->producer_stream);
  if (st == ACCEL_OK) {
    st = accel_stream_wait_event(d->consumer_stream, event);
  }
  accel_event_release(event);
  return st;
}

// Validates |desc| against |buffer| and builds the context both forms share.
static accel_status_t export_prepare(accel_buffer_t *buffer,
                                     const accel_dlpack_export_desc_t *desc,
                                     bool legacy, export_ctx_t **out_ctx,
                                     bool *out_read_only) {
  ACCEL_CHECK_ARG(buffer != NULL, "buffer (NULL)");
  ACCEL_CHECK_ARG(desc != NULL, "desc (NULL)");
  if (desc->struct_size < sizeof(accel_dlpack_export_desc_t)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "dlpack export: desc struct_size %u is below %zu",
                       desc->struct_size, sizeof(accel_dlpack_export_desc_t));
  }
  if ((desc->flags & ~(uint32_t)ACCEL_DLPACK_EXPORT_READ_ONLY) != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "dlpack export: unknown flags 0x%x", desc->flags);
  }
  span_t s;
  ACCEL_RETURN_IF_ERROR(view_span("dlpack export", desc->dtype, desc->ndim,
                                  desc->shape, desc->strides, &s));
  uint64_t size = accel_buffer_size(buffer);
  if (desc->offset_bytes > size ||
      (s.hi > s.lo && ((s.lo < 0 && (uint64_t)-s.lo > desc->offset_bytes) ||
                       desc->offset_bytes + (uint64_t)s.hi > size))) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "dlpack export: the view addresses bytes [%lld, %lld) "
                       "of a buffer of %llu bytes",
                       (long long)desc->offset_bytes + (long long)s.lo,
                       (long long)desc->offset_bytes + (long long)s.hi,
                       (unsigned long long)size);
  }
  ACCEL_RETURN_IF_ERROR(accel_buffer_check_use(buffer, 0, 0,
                                               ACCEL_BUFFER_USE_READ,
                                               "dlpack export:"));
  bool read_only = buffer->read_only ||
                   (desc->flags & ACCEL_DLPACK_EXPORT_READ_ONLY) != 0;
  if (legacy && read_only) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "dlpack export: the view is read-only and the legacy "
                       "DLManagedTensor has no read-only flag (use the "
                       "versioned form)");
  }
  ACCEL_RETURN_IF_ERROR(export_handshake(buffer, desc));
  export_ctx_t *ctx = calloc(1, sizeof(*ctx));
  if (ctx == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "dlpack export: cannot allocate the tensor");
  }
  int64_t *shape = ctx->dims;
  int64_t *strides = ctx->dims + ACCEL_DLPACK_MAX_NDIM;
  int64_t compact = 1;
  for (int32_t d = desc->ndim - 1; d >= 0; --d) {
    shape[d] = desc->shape[d];
    strides[d] = desc->strides != NULL ? desc->strides[d] : compact;
    compact *= desc->shape[d] > 0 ? desc->shape[d] : 1;
  }
  void *data = NULL;
  if (accel_buffer_host_pointer(buffer, &data) != ACCEL_OK) {
    data = (void *)(uintptr_t)accel_buffer_address(buffer);
  }
  accel_dl_tensor_t t = {
      .data = data,
      .device = dl_device_of(buffer->device, buffer->kind),
      .ndim = desc->ndim,
      .dtype = desc->dtype,
      .shape = desc->ndim > 0 ? shape : NULL,
      .strides = desc->ndim > 0 ? strides : NULL,
      .byte_offset = desc->offset_bytes,
  };
  if (legacy) {
    ctx->m.legacy.dl_tensor = t;
  } else {
    ctx->m.versioned.dl_tensor = t;
  }
  accel_buffer_retain(buffer);
  ctx->buffer = buffer;
  *out_ctx = ctx;
  *out_read_only = read_only;
  return ACCEL_OK;
}

accel_status_t accel_buffer_to_dlpack(
    accel_buffer_t *buffer, const accel_dlpack_export_desc_t *desc,
    accel_dl_managed_tensor_versioned_t **out_tensor) {
  ACCEL_CHECK_ARG(out_tensor != NULL, "out_tensor (NULL)");
  export_ctx_t *ctx = NULL;
  bool read_only = false;
  ACCEL_RETURN_IF_ERROR(export_prepare(buffer, desc, false, &ctx, &read_only));
  accel_dl_managed_tensor_versioned_t *m = &ctx->m.versioned;
  m->version = (accel_dl_version_t){ACCEL_DLPACK_MAJOR_VERSION,
                                    ACCEL_DLPACK_MINOR_VERSION};
  m->manager_ctx = ctx;
  m->deleter = export_versioned_deleter;
  m->flags = read_only ? ACCEL_DL_FLAG_READ_ONLY : 0;
  *out_tensor = m;
  return ACCEL_OK;
}

accel_status_t accel_buffer_to_dlpack_legacy(
    accel_buffer_t *buffer, const accel_dlpack_export_desc_t *desc,
    accel_dl_managed_tensor_t **out_tensor) {
  ACCEL_CHECK_ARG(out_tensor != NULL, "out_tensor (NULL)");
  export_ctx_t *ctx = NULL;
  bool read_only = false;
  ACCEL_RETURN_IF_ERROR(export_prepare(buffer, desc, true, &ctx, &read_only));
  accel_dl_managed_tensor_t *m = &ctx->m.legacy;
  m->manager_ctx = ctx;
  m->deleter = export_legacy_deleter;
  *out_tensor = m;
  return ACCEL_OK;
}

// ---------------------------------------------------------------------------
// Import
// ---------------------------------------------------------------------------

// The producer's tensor in either form, with its deleter as one call.
typedef struct foreign {
  const accel_dl_tensor_t *t;
  void *managed;
  bool versioned;
  bool read_only;
} foreign_t;

static void foreign_delete(void *managed, bool versioned) {
  if (versioned) {
    accel_dl_managed_tensor_versioned_t *m = managed;
    if (m->deleter != NULL) {
      m->deleter(m);
    }
  } else {
    accel_dl_managed_tensor_t *m = managed;
    if (m->deleter != NULL) {
      m->deleter(m);
    }
  }
}

// A buffer over the producer's memory: the last reference calls the
// producer's deleter (once: the object is destroyed once).
typedef struct dlpack_buffer {
  accel_buffer_t buffer;  // first
  void *managed;
  bool versioned;
} dlpack_buffer_t;

static void dlpack_buffer_destroy(accel_object_t *object) {
  dlpack_buffer_t *b = (dlpack_buffer_t *)object;
  foreign_delete(b->managed, b->versioned);
  free(b);
}

static accel_status_t import_wrap(accel_device_t *device, const foreign_t *f,
                                  uint64_t start, uint64_t size,
                                  accel_buffer_t **out_buffer) {
  dlpack_buffer_t *b = calloc(1, sizeof(*b));
  if (b == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "dlpack import: cannot allocate a buffer object");
  }
  accel_object_init(&b->buffer.object, dlpack_buffer_destroy);
  b->buffer.device = device;
  b->buffer.address = start;
  b->buffer.size_bytes = size;
  b->buffer.kind = ACCEL_MEMORY_KIND_DEVICE;
  b->buffer.read_only = f->read_only;
  snprintf(b->buffer.tag, sizeof(b->buffer.tag), "dlpack import");
  b->managed = f->managed;
  b->versioned = f->versioned;
  *out_buffer = &b->buffer;
  return ACCEL_OK;
}

typedef struct deferred_delete {
  void *managed;
  bool versioned;
} deferred_delete_t;

// Host call behind a stream copy: the copy has completed, so the producer's
// memory is no longer needed.
static accel_status_t deferred_delete_run(void *user_data) {
  deferred_delete_t *d = user_data;
  foreign_delete(d->managed, d->versioned);
  free(d);
  return ACCEL_OK;
}

// Copies [start, start + size) of host memory into a new buffer of |device|.
// On success the producer's deleter has run, or is enqueued on |stream|
// behind the copy.
static accel_status_t import_copy(accel_device_t *device, const foreign_t *f,
                                  const accel_dlpack_import_desc_t *d,
                                  uint64_t start, uint64_t size,
                                  accel_buffer_t **out_buffer) {
  accel_buffer_desc_t bd = {
      .struct_size = sizeof(bd),
      .kind = ACCEL_MEMORY_KIND_DEVICE,
      .size_bytes = size > 0 ? size : 1,
      .tag = "dlpack import copy",
  };
  accel_buffer_t *buf = NULL;
  ACCEL_RETURN_IF_ERROR(accel_buffer_alloc(device, &bd, &buf));
  accel_status_t st = ACCEL_OK;
  deferred_delete_t *dd = NULL;
  accel_stream_t *own_stream = NULL;
  if (d->stream == NULL && size > 0) {
    void *host = NULL;
    if (accel_buffer_host_pointer(buf, &host) == ACCEL_OK) {
      memcpy(host, (const void *)(uintptr_t)start, size);
    } else {
      st = accel_stream_create(device, NULL, &own_stream);
      if (st != ACCEL_OK) {
        goto err_free_buffer;
      }
      st = accel_stream_copy_from_host(own_stream, buf, 0,
                                       (const void *)(uintptr_t)start, size);
      if (st == ACCEL_OK) {
        st = accel_stream_synchronize(own_stream, ACCEL_TIMEOUT_INFINITE);
      }
      accel_stream_destroy(own_stream);
      if (st != ACCEL_OK) {
        goto err_free_buffer;
      }
    }
  } else if (d->stream != NULL) {
    dd = malloc(sizeof(*dd));
    if (dd == NULL) {
      st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "dlpack import: cannot allocate the deleter record");
      goto err_free_buffer;
    }
    *dd = (deferred_delete_t){f->managed, f->versioned};
    if (size > 0) {
      st = accel_stream_copy_from_host(d->stream, buf, 0,
                                       (const void *)(uintptr_t)start, size);
      if (st != ACCEL_OK) {
        goto err_free_record;
      }
    }
    // A failure here leaves the copy enqueued: the stream is then failed
    // and the producer's memory is read by a copy that will not run.
    st = accel_stream_host_call(d->stream, deferred_delete_run, dd);
    if (st != ACCEL_OK) {
      goto err_free_record;
    }
    buf->read_only = f->read_only;
    *out_buffer = buf;
    return ACCEL_OK;
  }
  foreign_delete(f->managed, f->versioned);
  buf->read_only = f->read_only;
  *out_buffer = buf;
  return ACCEL_OK;

err_free_record:
  free(dd);
err_free_buffer:
  accel_buffer_release(buf);
  return st;
}

static accel_status_t import_tensor(accel_device_t *device, const foreign_t *f,
                                    const accel_dlpack_import_desc_t *d,
                                    accel_buffer_t **out_buffer,
                                    uint64_t *out_offset_bytes) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(d != NULL, "desc (NULL)");
  ACCEL_CHECK_ARG(out_buffer != NULL, "out_buffer (NULL)");
  if (d->struct_size < sizeof(accel_dlpack_import_desc_t)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "dlpack import: desc struct_size %u is below %zu",
                       d->struct_size, sizeof(accel_dlpack_import_desc_t));
  }
  const uint32_t known =
      ACCEL_DLPACK_IMPORT_COPY | ACCEL_DLPACK_IMPORT_NO_COPY;
  if ((d->flags & ~known) != 0 || (d->flags & known) == known) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "dlpack import: flags 0x%x (unknown bits, or both "
                       "COPY and NO_COPY)",
                       d->flags);
  }
  if (d->stream != NULL && accel_stream_device(d->stream) != device) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "dlpack import: stream is on %s, the device is %s",
                       accel_stream_device(d->stream)->info.id,
                       device->info.id);
  }
  const accel_dl_tensor_t *t = f->t;
  span_t s;
  ACCEL_RETURN_IF_ERROR(view_span("dlpack import", t->dtype, t->ndim,
                                  t->shape, t->strides, &s));
  if (t->data == NULL && s.hi > s.lo) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "dlpack import: data is NULL for a non-empty tensor");
  }
  // Bytes [start, start + size) hold every element; element 0 is at
  // |offset| in them.
  uint64_t elem0 = 0, end = 0;
  if (__builtin_add_overflow((uint64_t)(uintptr_t)t->data, t->byte_offset,
                             &elem0) ||
      __builtin_add_overflow(elem0, (uint64_t)s.hi, &end) ||
      elem0 < (uint64_t)-s.lo) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "dlpack import: the tensor's bytes (data %p, "
                       "byte_offset %llu, reach [%lld, %lld)) wrap around "
                       "the address space",
                       t->data, (unsigned long long)t->byte_offset,
                       (long long)s.lo, (long long)s.hi);
  }
  uint64_t start = elem0 - (uint64_t)-s.lo;
  uint64_t size = end - start;
  uint64_t offset = (uint64_t)-s.lo;
  accel_dl_device_t own = dl_device_of(device, ACCEL_MEMORY_KIND_DEVICE);
  bool host_visible = (device->info.caps & ACCEL_DEVICE_CAP_HOST_VISIBLE) != 0;
  bool addressable =
      (t->device.device_type == own.device_type &&
       t->device.device_id == own.device_id) ||
      (host_visible && t->device.device_type == ACCEL_DL_CPU);
  bool host_memory = t->device.device_type == ACCEL_DL_CPU ||
                     t->device.device_type == ACCEL_DL_CUDA_HOST ||
                     t->device.device_type == ACCEL_DL_ROCM_HOST;
  bool copy = (d->flags & ACCEL_DLPACK_IMPORT_COPY) != 0 || !addressable;
  if (copy && (d->flags & ACCEL_DLPACK_IMPORT_NO_COPY) != 0) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "dlpack import: %s cannot address memory of DLPack "
                       "device (%d, %d) and copying was not allowed",
                       device->info.id, t->device.device_type,
                       t->device.device_id);
  }
  if (copy && !host_memory && !addressable) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "dlpack import: %s cannot read memory of DLPack "
                       "device (%d, %d)",
                       device->info.id, t->device.device_type,
                       t->device.device_id);
  }
  if (d->ready_semaphore != NULL) {
    accel_status_t st =
        d->stream != NULL
            ? accel_stream_wait(d->stream, d->ready_semaphore, d->ready_value)
            : accel_semaphore_wait(d->ready_semaphore, d->ready_value,
                                   ACCEL_TIMEOUT_INFINITE);
    if (st != ACCEL_OK) {
      return accel_error_context(st, "dlpack import: ready semaphore");
    }
  }
  accel_buffer_t *buf = NULL;
  if (copy) {
    ACCEL_RETURN_IF_ERROR(import_copy(device, f, d, start, size, &buf));
  } else {
    ACCEL_RETURN_IF_ERROR(import_wrap(device, f, start, size, &buf));
  }
  *out_buffer = buf;
  if (out_offset_bytes != NULL) {
    *out_offset_bytes = offset;
  }
  return ACCEL_OK;
}

accel_status_t accel_buffer_from_dlpack(
    accel_device_t *device, accel_dl_managed_tensor_versioned_t *tensor,
    const accel_dlpack_import_desc_t *desc, accel_buffer_t **out_buffer,
    uint64_t *out_offset_bytes) {
  ACCEL_CHECK_ARG(tensor != NULL, "tensor (NULL)");
  if (tensor->version.major != ACCEL_DLPACK_MAJOR_VERSION) {
    return accel_error(ACCEL_ERROR_VERSION,
                       "dlpack import: tensor has DLPack version %u.%u; "
                       "accel reads major %d",
                       tensor->version.major, tensor->version.minor,
                       ACCEL_DLPACK_MAJOR_VERSION);
  }
  foreign_t f = {
      .t = &tensor->dl_tensor,
      .managed = tensor,
      .versioned = true,
      .read_only = (tensor->flags & ACCEL_DL_FLAG_READ_ONLY) != 0,
  };
  return import_tensor(device, &f, desc, out_buffer, out_offset_bytes);
}

accel_status_t accel_buffer_from_dlpack_legacy(
    accel_device_t *device, accel_dl_managed_tensor_t *tensor,
    const accel_dlpack_import_desc_t *desc, accel_buffer_t **out_buffer,
    uint64_t *out_offset_bytes) {
  ACCEL_CHECK_ARG(tensor != NULL, "tensor (NULL)");
  foreign_t f = {
      .t = &tensor->dl_tensor,
      .managed = tensor,
      .versioned = false,
      .read_only = false,
  };
  return import_tensor(device, &f, desc, out_buffer, out_offset_bytes);
}
