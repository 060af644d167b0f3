// Device memory: buffers allocated on a device. Buffers are ref-counted: the
// allocation returns one reference, work in flight holds its own, and the
// memory is reused only after the last reference is released.
//
// Allocators (all keep their metadata on the host, and all draw physical
// memory from one per-device page source through the driver interface):
//  - slab: size classes from 256 B to 64 KiB carved from 2 MiB chunks, O(1)
//    alloc and free, per-thread caches;
//  - paged: one large reserved virtual range per pool, physical pages (2 MiB
//    by default) mapped on demand; buffers grow in place
//    (accel_buffer_grow); with a block size it is a fixed-size block pool
//    (the shape of an LLM KV cache);
//  - stream-ordered: accel_buffer_alloc_async / accel_buffer_free_async;
//  - pinned host memory placed on a NUMA node, and registered host memory;
//  - dedicated exportable buffers for IPC (accel_buffer_export/import).
//
// Freeing a buffer that a pending stream command uses is safe: every stream
// command holds its own reference to the buffers it names, so the memory
// returns to its allocator only when the last such command has completed.
//
// Physical pages that leave an allocator (to the device's shared page
// source, and from there to another pool, or to the system) are zeroed
// first; memory shared with another process is dedicated, freshly created
// (zeroed) memory that never came from a pool. One tenant never reads
// another's data. Memory reused within one pool is not cleared unless
// ACCEL_BUFFER_FLAG_ZERO asks for it.
#ifndef ACCEL_MEMORY_H_
#define ACCEL_MEMORY_H_

#include "accel/base.h"
#include "accel/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_buffer accel_buffer_t;
typedef struct accel_mempool accel_mempool_t;
typedef struct accel_stream accel_stream_t;

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
  // Zero the contents before returning. Without it the contents are
  // undefined: allocators reuse memory within a pool without clearing it.
  ACCEL_BUFFER_FLAG_ZERO = 1u << 0,
  // accel_buffer_desc_t.numa_node chooses the NUMA node of a pinned host
  // buffer (without it: the device's node).
  ACCEL_BUFFER_FLAG_NUMA_NODE = 1u << 1,
  // The buffer can be exported to another process (accel_buffer_export): it
  // gets dedicated, freshly created memory instead of pool memory.
  ACCEL_BUFFER_FLAG_EXPORTABLE = 1u << 2,
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
  // Caller-given tag for usage reports (interned: the first 31 bytes count;
  // NULL for none).
  const char *tag;
  // --- Fields added in 0.2 (zero when an older caller omits them). ---
  // Pool to allocate from (borrowed for the call); NULL lets the device
  // choose: pinned host memory for ACCEL_MEMORY_KIND_HOST_PINNED, the slab
  // up to 64 KiB, the device's paged pool above.
  accel_mempool_t *pool;
  // Paged buffers: virtual room kept behind the buffer so that
  // accel_buffer_grow up to this size never fails for lack of address
  // space; 0 means size_bytes.
  uint64_t max_size_bytes;
  // NUMA node for pinned host memory when ACCEL_BUFFER_FLAG_NUMA_NODE is set.
  int32_t numa_node;
  // Reserved, must be 0.
  uint32_t reserved1;
} accel_buffer_desc_t;

// Kinds of explicit pools (accel_mempool_desc_t.type).
typedef enum accel_mempool_type {
  // Small buffers (256 B to 64 KiB) from size classes.
  ACCEL_MEMPOOL_TYPE_SLAB = 0,
  // Page-mapped buffers that can grow in place; a fixed-size block pool
  // when block_size_bytes is set.
  ACCEL_MEMPOOL_TYPE_PAGED = 1,
  // Stream-ordered pool for accel_buffer_alloc_async/free_async.
  ACCEL_MEMPOOL_TYPE_STREAM_ORDERED = 2,
} accel_mempool_type_t;

// What pool to create.
typedef struct accel_mempool_desc {
  // sizeof(accel_mempool_desc_t) as the caller compiled it.
  uint32_t struct_size;
  // accel_mempool_type_t.
  uint32_t type;
  // Most bytes the pool may hold (its reserve limit); 0 means the device's
  // memory size.
  uint64_t max_bytes;
  // Paged pools: physical page size, a multiple of the device page size; 0
  // means 2 MiB.
  uint64_t page_size_bytes;
  // Paged pools: when non-zero, the pool hands out blocks of exactly this
  // many bytes (a fixed-size block pool); 0 for variable sizes.
  uint64_t block_size_bytes;
  // Paged and stream-ordered pools: free bytes the pool keeps cached for
  // reuse; more is returned to the device (zeroed) as soon as it is free and
  // its last use has completed. 0 returns everything at once; UINT64_MAX
  // keeps everything until accel_mempool_trim.
  uint64_t release_threshold_bytes;
  // Name for reports (copied; NULL means "<type><N>").
  const char *name;
} accel_mempool_desc_t;

// Allocation statistics of one allocator or of a whole device.
typedef struct accel_mem_stats {
  // sizeof(accel_mem_stats_t) as the caller compiled it; fields beyond it
  // are not written.
  uint32_t struct_size;
  uint32_t reserved0;
  // Bytes of live buffers, as requested.
  uint64_t bytes_in_use;
  // Physical bytes the allocator holds (in use, cached free, and slack).
  uint64_t bytes_reserved;
  // Highest bytes_in_use seen since creation or the last reset.
  uint64_t peak_bytes_in_use;
  // Highest bytes_reserved seen.
  uint64_t peak_bytes_reserved;
  // Live buffers.
  uint64_t live_count;
  // Successful allocations since creation.
  uint64_t alloc_count;
  // Frees since creation.
  uint64_t free_count;
  // Allocations that failed (out of memory, limits).
  uint64_t failure_count;
  // bytes_reserved / bytes_in_use (1.0 is perfect; 0 when nothing is in
  // use).
  double fragmentation;
} accel_mem_stats_t;

#if !defined(__cplusplus) && UINTPTR_MAX == 0xffffffffffffffffu
// Layouts that cross the ABI (LP64); fields are only ever added at the end.
_Static_assert(sizeof(accel_buffer_desc_t) == 64, "accel_buffer_desc_t");
_Static_assert(sizeof(accel_mempool_desc_t) == 48, "accel_mempool_desc_t");
_Static_assert(sizeof(accel_mem_stats_t) == 80, "accel_mem_stats_t");
#endif

// Allocates a buffer of desc->size_bytes on |device|, from desc->pool or
// from the allocator the request calls for: pinned host memory for
// ACCEL_MEMORY_KIND_HOST_PINNED, dedicated memory for exportable buffers,
// the slab up to 64 KiB, a dedicated mapping below 2 MiB, and the device's
// paged pool for larger or growable (max_size_bytes) buffers.
// On success |*out_buffer| holds one reference owned by the caller.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, zero size, alignment not a
//   power of two, unknown kind or flags.
// ACCEL_ERROR_OUT_OF_MEMORY: the device cannot back the request; the message
//   gives the request and what is free.
// Thread-safe.
ACCEL_API accel_status_t accel_buffer_alloc(accel_device_t *device,
                                            const accel_buffer_desc_t *desc,
                                            accel_buffer_t **out_buffer);

// Drops the allocation's own reference to |buffer| with misuse checks (the
// checked form of accel_buffer_release for the owner). The memory returns to
// its allocator once pending stream commands that use it have completed.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL, a pointer that is not a live buffer
//   handle, or a buffer already freed (double free). Detection relies on the
//   handle's record, which accel keeps readable for the device's lifetime;
//   a record already reused by a later allocation cannot be told apart.
// Buffers made by other modules (an executable's weight buffers) are simply
// released.
// Thread-safe for different buffers; two frees of one buffer must not race
// (that is a double free the check may miss).
ACCEL_API accel_status_t accel_buffer_free(accel_buffer_t *buffer);

// Frees the live allocation that starts at device |address| on |device|
// (the cudaFree(ptr) form of accel_buffer_free).
// ACCEL_ERROR_INVALID_ARGUMENT: no allocator of |device| gave |address|, the
//   address lies inside a buffer instead of at its start (the message names
//   the buffer and offset), or the allocation was already freed.
// Thread-safe.
ACCEL_API accel_status_t accel_mem_free(accel_device_t *device,
                                        uint64_t address);

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

// Grows |buffer| to |new_size_bytes| in place: the address does not change
// and no byte is copied; new pages are mapped behind the old ones. Growing to
// a size not larger than the current one is a no-op success.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL buffer.
// ACCEL_ERROR_UNSUPPORTED: the buffer is not from a paged pool (or is a
//   fixed-size block).
// ACCEL_ERROR_OUT_OF_MEMORY: the pool is at its limit, or the virtual range
//   behind the buffer is taken (allocate with max_size_bytes to keep room).
// Thread-compatible: calls on the same |buffer| must be serialized, and no
//   device work may use the buffer's new tail before this call returns.
ACCEL_API accel_status_t accel_buffer_grow(accel_buffer_t *buffer,
                                           uint64_t new_size_bytes);

// Allocates a buffer in stream order on |stream| from desc->pool (a
// stream-ordered pool) or the device's default stream-ordered pool. The
// memory may be memory freed earlier with accel_buffer_free_async: on the
// same stream at once (stream order makes that safe), from another stream
// only once the work that stream had submitted before the free has
// completed. The buffer may be used by work on |stream| submitted after
// this call, and by other streams once they are ordered after it.
// Ownership as accel_buffer_alloc.
// ACCEL_ERROR_INVALID_ARGUMENT: as accel_buffer_alloc, or a pool that is not
//   stream-ordered or is on another device.
// ACCEL_ERROR_OUT_OF_MEMORY: the pool's limit is reached.
// The stream's stored error if it has failed.
// Thread-safe.
ACCEL_API accel_status_t accel_buffer_alloc_async(
    accel_stream_t *stream, const accel_buffer_desc_t *desc,
    accel_buffer_t **out_buffer);

// Frees |buffer| (drops the owner's reference) in stream order on |stream|.
// For stream-ordered buffers no command is enqueued: the memory may be
// reused at once by later work on |stream| (stream order protects the work
// already submitted), and by other streams once |stream|'s completion
// timeline has passed its last command submitted before this call. Work on
// other streams that uses the buffer must be ordered before this call, as
// with cudaFreeAsync. For buffers of other allocators a command holding the
// buffer is enqueued, and the memory returns when it completes.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL, a buffer already freed, or a buffer
//   of another device.
// The stream's stored error if it has failed (non-pool buffers; the
//   buffer is freed all the same).
// Thread-safe for different buffers (see accel_buffer_free).
ACCEL_API accel_status_t accel_buffer_free_async(accel_stream_t *stream,
                                                 accel_buffer_t *buffer);

// Pins |size_bytes| of host memory the caller owns at |host_ptr| and wraps it
// in a buffer of kind ACCEL_MEMORY_KIND_HOST_PINNED that stream copies use
// directly. |host_ptr| and |size_bytes| must be multiples of the host page
// size. The memory stays the caller's: it must outlive the buffer, and the
// buffer's release unpins it without freeing it. The range is checked page
// by page (mincore) before anything is pinned.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL or unaligned arguments, zero size, or a
//   range not all mapped.
// ACCEL_ERROR_OUT_OF_MEMORY: pinning failed (RLIMIT_MEMLOCK); the message
//   says so.
// ACCEL_ERROR_UNSUPPORTED: the device cannot register host memory.
// Thread-safe.
ACCEL_API accel_status_t accel_host_register(accel_device_t *device,
                                             void *host_ptr,
                                             uint64_t size_bytes,
                                             accel_buffer_t **out_buffer);

// Returns in |*out_fd| a file descriptor through which another process can
// import |buffer| (accel_buffer_import). The buffer must have been allocated
// with ACCEL_BUFFER_FLAG_EXPORTABLE. The caller owns the descriptor (close
// it; pass it with SCM_RIGHTS or inherit it).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, or a buffer not allocated as
//   exportable.
// ACCEL_ERROR_UNSUPPORTED: the device has no IPC.
// Thread-safe.
ACCEL_API accel_status_t accel_buffer_export(const accel_buffer_t *buffer,
                                             int *out_fd);

// Import flags (accel_buffer_import).
enum accel_import_flag_bits {
  ACCEL_IMPORT_FLAG_NONE = 0,
  // Map the memory read-only in this process.
  ACCEL_IMPORT_FLAG_READ_ONLY = 1u << 0,
};

// Maps memory another process exported (accel_buffer_export) on |device| as
// a buffer of |size_bytes|. |fd| is not consumed (close it after the call).
// Both processes see the same bytes; the memory is freed when every process
// has released its buffer. Only memory an accel runtime made is accepted:
// on the host device a memfd named "accel-host-phys" and sealed against
// resizing, which is what accel_buffer_export hands out; any other fd (a
// file, a pipe, another program's memfd) is refused. With
// ACCEL_IMPORT_FLAG_READ_ONLY every command that writes the buffer is
// refused at enqueue.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, zero size, unknown flags, or
//   an fd that is not exported memory of at least |size_bytes|.
// ACCEL_ERROR_UNSUPPORTED: the device has no IPC.
// Thread-safe.
ACCEL_API accel_status_t accel_buffer_import(accel_device_t *device, int fd,
                                             uint64_t size_bytes,
                                             uint32_t flags,
                                             accel_buffer_t **out_buffer);

// Returns in |*out_kind| the memory kind (accel_memory_kind_t) of |buffer|.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument. Thread-safe.
ACCEL_API accel_status_t accel_buffer_kind(const accel_buffer_t *buffer,
                                           uint32_t *out_kind);

// Creates an explicit pool on |device| (see accel_mempool_desc_t). Buffers
// come from it through accel_buffer_desc_t.pool.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, unknown type, page size not a
//   multiple of the device page size, block size too large for the pool.
// ACCEL_ERROR_OUT_OF_MEMORY: the virtual range cannot be reserved.
// Thread-safe.
ACCEL_API accel_status_t accel_mempool_create(accel_device_t *device,
                                              const accel_mempool_desc_t *desc,
                                              accel_mempool_t **out_pool);

// Destroys |pool| and returns its memory to the device (zeroed). NULL is
// ignored.
// ACCEL_ERROR_BUSY: buffers of the pool are still live; nothing changes.
// Not thread-safe: no other call may use |pool| concurrently.
ACCEL_API accel_status_t accel_mempool_destroy(accel_mempool_t *pool);

// Returns free memory cached by |pool| to the device (zeroed) until it
// caches at most |keep_bytes|. Stream-ordered memory whose free point has
// not completed stays. |pool| NULL trims every allocator of |device|
// (including the shared page source).
// ACCEL_ERROR_INVALID_ARGUMENT: both |device| and |pool| NULL.
// Thread-safe.
ACCEL_API accel_status_t accel_mempool_trim(accel_device_t *device,
                                            accel_mempool_t *pool,
                                            uint64_t keep_bytes);

// Fills |*out_stats| (the caller sets struct_size) with |pool|'s counters.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or struct_size too small.
// Thread-safe (counters are read without stopping allocations).
ACCEL_API accel_status_t accel_mempool_stats(const accel_mempool_t *pool,
                                             accel_mem_stats_t *out_stats);

// Fills |*out_stats| with the sum over every allocator of |device|, the
// device's default ones included.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or struct_size too small.
// Thread-safe.
ACCEL_API accel_status_t accel_device_mem_stats(accel_device_t *device,
                                                accel_mem_stats_t *out_stats);

// Writes a text report of |device|'s memory to |out| (at most |capacity|
// bytes, NUL-terminated): one line per allocator with its counters, then one
// line per caller-given tag with its live buffers and bytes. Sets
// |*out_length| (if not NULL) to the full length the report needs, which may
// exceed |capacity| (then the text is cut).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL device, or NULL |out| with a non-zero
//   capacity.
// Thread-safe.
ACCEL_API accel_status_t accel_mem_report(accel_device_t *device, char *out,
                                          size_t capacity,
                                          size_t *out_length);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_MEMORY_H_
