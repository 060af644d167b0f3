// Internal layout of a buffer, shared with lib/stream and lib/dma (which
// resolve addresses and hold references through |object|).
//
// A buffer is a host-side record; device memory holds no allocator header.
// Records come from per-device arenas (mem_device.c, one cache-line-aligned
// slot each) and stay readable until the device closes, so that a second
// free of the same handle reads a record marked free instead of freed host
// memory. Other modules may embed a buffer to wrap memory they own: they set
// object, device, address, size_bytes and kind, leave |allocator| NULL, and
// free it through their own destroy function.
#ifndef ACCEL_MEM_BUFFER_IMPL_H_
#define ACCEL_MEM_BUFFER_IMPL_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "accel/memory.h"
#include "core/driver.h"
#include "core/driver_memory.h"
#include "core/object.h"

typedef struct accel_mem_allocator accel_mem_allocator_t;
typedef struct accel_mem_slab_chunk accel_mem_slab_chunk_t;
typedef struct accel_mem_page accel_mem_page_t;

// accel_buffer.state values.
enum {
  ACCEL_BUFFER_STATE_FREE = 0x46524545u,   // "FREE": in a cache or arena
  ACCEL_BUFFER_STATE_LIVE = 0x4c495645u,   // "LIVE": owner still holds it
  ACCEL_BUFFER_STATE_OWNER_FREED = 0x4f574e46u,  // owner freed, refs remain
};

struct accel_buffer {
  accel_object_t object;  // first: commands release buffers through it
  accel_device_t *device;
  uint64_t address;     // device address of byte 0
  uint64_t size_bytes;  // as requested
  uint8_t kind;         // accel_memory_kind_t
  // Set once before the handle is returned: no command may write the
  // buffer (an executable's weights, a read-only import). In the first
  // cache line, which every command's buffer check reads anyway.
  bool read_only;
  uint8_t pad0[2];
  // ACCEL_BUFFER_STATE_*; atomic so that racing frees see each other.
  _Atomic uint32_t state;
  // Who takes the memory back when the last reference goes.
  accel_mem_allocator_t *allocator;
  uint32_t tag_index;  // 0: untagged; else index into the device tag table
  uint32_t size_class;  // slab class, block index in a block pool
  // (The fields above share the first cache line: the slab's alloc and
  // free touch nothing else.)
  // Bytes of device memory this buffer holds (block, pages, mapping).
  uint64_t reserved_bytes;
  // Stream-ordered pools: the allocator that backs the memory, and the point
  // after which it is free (completion timeline of the freeing stream).
  accel_mem_allocator_t *backing;
  accel_object_t *free_timeline;  // accel_semaphore_t (retained) or NULL
  uint64_t free_seq;
  uint64_t backing_size;  // size_bytes as the backing allocator gave it
  union {
    struct {
      accel_mem_slab_chunk_t *chunk;
      uint32_t block;
    } slab;
    struct {
      uint64_t va_bytes;  // reserved virtual room
      uint32_t page_count;
      uint32_t page_capacity;
      accel_mem_page_t **pages;  // NULL for a fixed-size block
    } paged;
    struct {
      void *host_ptr;
      uint64_t mapped_bytes;
      bool user_owned;  // registered memory: unpin, do not free
    } host;
    struct {
      uint64_t mapped_bytes;
      accel_drv_phys_t *phys;
      bool exportable;
    } dedicated;
  } u;
  accel_buffer_t *next;  // free lists and caches
  // The dedicated allocator's list of live buffers.
  accel_buffer_t *owner_next;
  accel_buffer_t *owner_prev;
  // Buffers made outside lib/mem (lib/abi's weight buffers alias an
  // executable's image) have |allocator| NULL, and a label here.
  char tag[32];
};

// Makes |buffer| (zeroed, embedded first in its owner's record) a
// read-only device buffer over |size_bytes| of host memory at |data| that
// its owner keeps alive (an executable's weights, a mapped model's
// tensors): |destroy| frees the record when the last reference goes.
static inline void accel_buffer_init_read_only_alias(
    accel_buffer_t *buffer, accel_object_destroy_fn_t destroy,
    accel_device_t *device, const void *data, uint64_t size_bytes,
    const char *tag_prefix, const char *name) {
  accel_object_init(&buffer->object, destroy);
  buffer->device = device;
  buffer->address = (uint64_t)(uintptr_t)data;
  buffer->size_bytes = size_bytes;
  buffer->kind = ACCEL_MEMORY_KIND_DEVICE;
  buffer->read_only = true;
  snprintf(buffer->tag, sizeof(buffer->tag), "%s %s", tag_prefix, name);
}

// How a command uses a buffer (accel_buffer_check_use).
enum {
  ACCEL_BUFFER_USE_READ = 1u << 0,
  ACCEL_BUFFER_USE_WRITE = 1u << 1,
};

// True when accel_buffer_check_use accepts the use, without a message: for
// callers that check often and format their |what| only for a refusal.
static inline bool accel_buffer_use_allowed(const accel_buffer_t *buffer,
                                            uint64_t offset,
                                            uint64_t size_bytes, uint32_t use) {
  // Relaxed: as accel_buffer_check_use.
  uint32_t state = atomic_load_explicit(&buffer->state, memory_order_relaxed);
  return state != ACCEL_BUFFER_STATE_FREE &&
         state != ACCEL_BUFFER_STATE_OWNER_FREED &&
         ((use & ACCEL_BUFFER_USE_WRITE) == 0 || !buffer->read_only) &&
         offset <= buffer->size_bytes &&
         size_bytes <= buffer->size_bytes - offset;
}

// The one check of a buffer named by a command (stream fills and copies,
// DMA descriptors, launch bindings), owned by lib/mem: the handle is still
// its owner's (not freed: a freed record stays readable until its device
// closes, so this reads no freed memory), [offset, offset + size) lies in
// it, and a write (ACCEL_BUFFER_USE_WRITE) is allowed (not read-only).
// Messages name |what| ("copy destination") and the buffer.
accel_status_t accel_buffer_check_use(const accel_buffer_t *buffer,
                                      uint64_t offset, uint64_t size_bytes,
                                      uint32_t use, const char *what);

#endif  // ACCEL_MEM_BUFFER_IMPL_H_
