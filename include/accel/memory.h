// Device memory: buffers allocated on a device. Buffers are ref-counted: the
// allocation returns one reference, work in flight holds its own, and the
// memory is reused only after the last reference is released.
#ifndef ACCEL_MEMORY_H_
#define ACCEL_MEMORY_H_

#include "accel/base.h"
#include "accel/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_buffer accel_buffer_t;

// Where a buffer lives.
typedef enum accel_memory_kind {
  // Device memory (on the host device: host memory the device owns).
  ACCEL_MEMORY_KIND_DEVICE = 0,
  // Pinned host memory that the device reads and writes directly.
  ACCEL_MEMORY_KIND_HOST_PINNED = 1,
} accel_memory_kind_t;

// Allocation flags (accel_buffer_desc_t.flags).
typedef uint32_t accel_buffer_flags_t;
enum accel_buffer_flag_bits {
  ACCEL_BUFFER_FLAG_NONE = 0,
  // Zero the contents before returning (fresh physical pages are always zero).
  ACCEL_BUFFER_FLAG_ZERO = 1u << 0,
};

// What to allocate.
typedef struct accel_buffer_desc {
  // sizeof(accel_buffer_desc_t) as the caller compiled it.
  uint32_t struct_size;
  // accel_memory_kind_t.
  uint32_t kind;
  // Bytes to allocate; must be > 0.
  uint64_t size_bytes;
  // Required alignment of the device address, a power of two; 0 means 256.
  uint64_t alignment;
  // accel_buffer_flag_bits.
  accel_buffer_flags_t flags;
  // Reserved, must be 0.
  uint32_t reserved0;
  // Caller-given tag for usage reports (copied; NULL for none).
  const char *tag;
} accel_buffer_desc_t;

// Allocates a buffer of desc->size_bytes on |device|.
// On success |*out_buffer| holds one reference owned by the caller.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, zero size, alignment not a
//   power of two, unknown kind or flags.
// ACCEL_ERROR_OUT_OF_MEMORY: the device cannot back the request; the message
//   gives the request and what is free.
// Thread-safe.
ACCEL_API accel_status_t accel_buffer_alloc(accel_device_t *device,
                                            const accel_buffer_desc_t *desc,
                                            accel_buffer_t **out_buffer);

// Adds a reference to |buffer|. Thread-safe.
ACCEL_API void accel_buffer_retain(accel_buffer_t *buffer);

// Drops a reference to |buffer|; the memory returns to its allocator when the
// last reference (including those held by pending stream commands) is gone.
// NULL is ignored. Thread-safe.
ACCEL_API void accel_buffer_release(accel_buffer_t *buffer);

// Returns the device address of |buffer| (0 for NULL). Thread-safe.
ACCEL_API uint64_t accel_buffer_address(const accel_buffer_t *buffer);

// Returns the size in bytes that was requested for |buffer| (0 for NULL).
// Thread-safe.
ACCEL_API uint64_t accel_buffer_size(const accel_buffer_t *buffer);

// Returns the device that owns |buffer| (borrowed), or NULL for NULL.
// Thread-safe.
ACCEL_API accel_device_t *accel_buffer_device(const accel_buffer_t *buffer);

// Returns in |*out_ptr| a host pointer to the buffer's first byte, for devices
// with ACCEL_DEVICE_CAP_HOST_VISIBLE and for pinned host buffers. Host access
// races with device work on the buffer unless the caller orders them (for
// example with accel_stream_synchronize).
// ACCEL_ERROR_UNSUPPORTED: the buffer is not host-visible on its device.
// Thread-safe.
ACCEL_API accel_status_t accel_buffer_host_pointer(const accel_buffer_t *buffer,
                                                   void **out_ptr);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_MEMORY_H_
