// Internals of lib/mem: the allocator base shared by the slab, paged,
// stream-ordered, host and dedicated allocators; the per-device state that
// owns them; the shared page source; buffer-record arenas; tags; counters.
#ifndef ACCEL_MEM_MEM_INTERNAL_H_
#define ACCEL_MEM_MEM_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "core/error.h"
#include "core/runtime_impl.h"
#include "mem/buffer_impl.h"
#include "sync/semaphore_impl.h"
#include "trace/trace_impl.h"

// The largest buffer and the largest alignment any allocator gives: sizes
// beyond 2^56 exceed every device's address space, and alignments beyond
// 1 GiB exceed what a reservation can honour (an alignment of 2^63 once
// failed as "mmap of 8 EiB failed").
#define ACCEL_MEM_MAX_BYTES (1ull << 56)
#define ACCEL_MEM_MAX_ALIGNMENT (1ull << 30)

// True for the commonest descriptor, which read_desc (buffer.c) accepts with
// an alignment of 256 and nothing else to check: current struct size, a
// size of 1 to |max_bytes| bytes, an alignment of at most 256, device memory
// with no flags, pool, tag or max_size_bytes. The fast paths of
// accel_buffer_alloc and accel_buffer_alloc_async call this instead of
// restating read_desc's checks; anything else takes read_desc.
static inline bool accel_buffer_desc_is_plain(const accel_buffer_desc_t *d,
                                              uint64_t max_bytes) {
  return d->struct_size >= sizeof(*d) && d->size_bytes - 1 < max_bytes &&
         d->alignment <= 256 && (d->alignment & (d->alignment - 1)) == 0 &&
         (d->kind | d->flags | d->reserved0 | d->reserved1) == 0 &&
         d->pool == NULL && d->tag == NULL && d->max_size_bytes == 0;
}

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define ACCEL_MEM_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define ACCEL_MEM_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define ACCEL_MEM_POISON(p, n) ((void)(p), (void)(n))
#define ACCEL_MEM_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define ACCEL_MEM_CHUNK_BYTES (2ull << 20)  // slab chunks, default page
#define ACCEL_MEM_SLAB_MAX_BYTES (64ull << 10)
#define ACCEL_MEM_TAG_MAX 64
#define ACCEL_MEM_TAG_LEN 32

typedef struct accel_mem_device accel_mem_device_t;

// Counters of one allocator. Updated with relaxed atomics (each is an
// independent statistic; readers want a recent value, not a snapshot).
typedef struct accel_mem_counters {
  _Atomic int64_t bytes_in_use;
  _Atomic int64_t bytes_reserved;
  _Atomic uint64_t peak_in_use;
  _Atomic uint64_t peak_reserved;
  _Atomic int64_t live_count;
  _Atomic uint64_t alloc_count;
  _Atomic uint64_t free_count;
  _Atomic uint64_t failure_count;
} accel_mem_counters_t;

void accel_mem_counters_alloc(accel_mem_counters_t *c, uint64_t bytes);
void accel_mem_counters_free(accel_mem_counters_t *c, uint64_t bytes);
void accel_mem_counters_reserve(accel_mem_counters_t *c, int64_t delta);
void accel_mem_counters_fail(accel_mem_counters_t *c);
typedef struct accel_mem_spinlock accel_mem_spinlock_t;

// The same updates for counters whose writers all hold one lock, |held|
// (checked in debug builds): plain loads and stores instead of locked
// instructions (failure_count excepted).
void accel_mem_counters_alloc_locked(accel_mem_counters_t *c, uint64_t bytes,
                                     const accel_mem_spinlock_t *held);
void accel_mem_counters_free_locked(accel_mem_counters_t *c, uint64_t bytes,
                                    const accel_mem_spinlock_t *held);
void accel_mem_counters_reserve_locked(accel_mem_counters_t *c, int64_t delta,
                                       const accel_mem_spinlock_t *held);

// A test-and-test-and-set spin lock for short critical sections on hot
// paths (uncontended cost: one exchange and one store).
struct accel_mem_spinlock {
  _Atomic uint32_t word;
};

static inline void accel_mem_spin_lock(accel_mem_spinlock_t *l) {
  // Acquire: the previous holder's writes become visible to us.
  while (atomic_exchange_explicit(&l->word, 1, memory_order_acquire) != 0) {
    while (atomic_load_explicit(&l->word, memory_order_relaxed) != 0) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
  }
}

static inline void accel_mem_spin_unlock(accel_mem_spinlock_t *l) {
  // Release: publishes our writes to the next holder.
  atomic_store_explicit(&l->word, 0, memory_order_release);
}
void accel_mem_counters_read(const accel_mem_counters_t *c,
                             accel_mem_stats_t *out);
// Adds |in| to |acc| (peaks add too: a device peak is bounded by the sum).
void accel_mem_stats_add(accel_mem_stats_t *acc, const accel_mem_stats_t *in);

// lib/trace's source of the device's memory counters (|ctx| is the
// accel_mem_device_t), registered with accel_trace_device_memory_source.
void accel_mem_trace_source(void *ctx, accel_trace_memory_t *out);

typedef struct accel_mem_allocator_vtable {
  void (*destroy)(accel_mem_allocator_t *a);
  // Takes back the memory of |buf| (its last reference is gone). The record
  // goes back with it.
  void (*free)(accel_mem_allocator_t *a, accel_buffer_t *buf);
  // Optional: grows |buf| in place.
  accel_status_t (*grow)(accel_mem_allocator_t *a, accel_buffer_t *buf,
                         uint64_t new_size);
  // Optional: returns cached free memory until at most |keep| bytes stay.
  void (*trim)(accel_mem_allocator_t *a, uint64_t keep);
  // Optional: fills counters beyond the shared ones (slab shards).
  void (*stats)(const accel_mem_allocator_t *a, accel_mem_stats_t *out);
  // Optional: the live buffer starting at |address| (borrowed), or a
  // message-setting INVALID_ARGUMENT; NOT_FOUND when |address| is not in
  // this allocator's ranges at all.
  accel_status_t (*lookup)(accel_mem_allocator_t *a, uint64_t address,
                           accel_buffer_t **out);
  // Optional: true while buffers are live (pool destroy refuses).
  bool (*busy)(accel_mem_allocator_t *a);
  // Optional: |to| now stands for the memory of |from| (the stream-ordered
  // pool moves memory out of a record that pending commands still hold);
  // updates the allocator's indexes that point at records.
  void (*rebind)(accel_mem_allocator_t *a, accel_buffer_t *from,
                 accel_buffer_t *to);
} accel_mem_allocator_vtable_t;

struct accel_mem_allocator {
  const accel_mem_allocator_vtable_t *vt;
  accel_mem_device_t *mem;
  accel_device_t *device;
  uint32_t type;  // accel_mempool_type_t, or the internal kinds below
  bool is_pool;   // an accel_mempool_t the user created
  char name[48];
  accel_mem_counters_t counters;
  accel_mem_allocator_t *next;  // device list (guarded by mem->lock)
};

// Internal allocator kinds (beyond accel_mempool_type_t).
enum {
  ACCEL_MEM_TYPE_HOST_PINNED = 100,
  ACCEL_MEM_TYPE_DEDICATED = 101,
};

// The user's accel_mempool_t is an allocator.
struct accel_mempool {
  accel_mem_allocator_t base;
};

// Physical pages shared by every allocator of a device. Pages cached here
// are zero: a page is cleared when it comes back, before anyone else can
// take it.
typedef struct accel_mem_page_source {
  pthread_mutex_t lock;
  accel_drv_phys_t **free_pages;  // 2 MiB pages (guarded by lock)
  uint32_t free_count;
  uint32_t free_capacity;
  uint64_t keep_bytes;  // cache limit (hysteresis)
  accel_mem_counters_t counters;  // reserved = cached bytes
} accel_mem_page_source_t;

struct accel_mem_device {
  accel_device_t *device;
  pthread_mutex_t lock;  // guards |allocators|, pool numbering
  accel_mem_allocator_t *allocators;
  uint32_t pool_counter;
  accel_mem_page_source_t pages;
  // Defaults, created with the state.
  accel_mem_allocator_t *slab;
  accel_mem_allocator_t *paged;
  accel_mem_allocator_t *async;
  accel_mem_allocator_t *host;
  accel_mem_allocator_t *dedicated;
  // Owner of records whose memory moved elsewhere: frees only the record.
  accel_mem_allocator_t detached;
  // Counts of allocators destroyed so far (allocations, frees, failures),
  // under |lock|: the device's counters only ever grow.
  uint64_t retired_allocs;
  uint64_t retired_frees;
  uint64_t retired_failures;
  // Record arenas (guarded by record_lock).
  pthread_mutex_t record_lock;
  // Free records, first out the one freed longest ago (a FIFO, under
  // |record_lock|): a handle freed by its owner stays refused by every
  // command (accel_buffer_check_use) until every other free record was
  // handed out, instead of naming the next buffer at once.
  accel_buffer_t *free_records;
  accel_buffer_t *free_records_tail;
  void **arenas;
  uint32_t arena_count;
  uint32_t arena_capacity;
  // Tags (guarded by tag_lock): index 0 is "untagged".
  pthread_mutex_t tag_lock;
  uint32_t tag_count;
  struct {
    char name[ACCEL_MEM_TAG_LEN];
    _Atomic int64_t bytes;
    _Atomic int64_t count;
  } tags[ACCEL_MEM_TAG_MAX];
};

// Returns the memory state of |device|, creating it on first use.
accel_status_t accel_mem_device_get(accel_device_t *device,
                                    accel_mem_device_t **out_mem);

// Adds / removes an allocator from the device list.
void accel_mem_register(accel_mem_device_t *mem, accel_mem_allocator_t *a);
void accel_mem_unregister(accel_mem_device_t *mem, accel_mem_allocator_t *a);

// Records. A new record is zeroed but for state (FREE).
accel_status_t accel_mem_record_alloc(accel_mem_device_t *mem,
                                      accel_buffer_t **out);
void accel_mem_record_free(accel_mem_device_t *mem, accel_buffer_t *rec);
// Makes |rec| a live buffer with one reference.
void accel_mem_record_init(accel_buffer_t *rec, accel_mem_allocator_t *a,
                           uint64_t address, uint64_t size, uint32_t kind);

// Tags: interns |tag| and returns its index (0 for NULL or a full table).
uint32_t accel_mem_tag_intern(accel_mem_device_t *mem, const char *tag);
void accel_mem_tag_account(accel_mem_device_t *mem, uint32_t index,
                           int64_t bytes, int64_t count);

// Page source (page_source.c). Pages are ACCEL_MEM_CHUNK_BYTES.
accel_status_t accel_mem_pages_init(accel_mem_page_source_t *src);
void accel_mem_pages_deinit(accel_mem_device_t *mem);
// Takes a zeroed page.
accel_status_t accel_mem_pages_take(accel_mem_device_t *mem,
                                    accel_drv_phys_t **out_phys);
// Gives back a page that is mapped at |mapped_at| (0 if not mapped: then it
// cannot be cleared through the host and goes back to the driver). The page
// is zeroed before it can be taken again.
void accel_mem_pages_give(accel_mem_device_t *mem, accel_drv_phys_t *phys,
                          uint64_t mapped_at);
void accel_mem_pages_trim(accel_mem_device_t *mem, uint64_t keep);

// Constructors (each returns an allocator registered with |mem|).
accel_status_t accel_mem_slab_create(accel_mem_device_t *mem,
                                     const accel_mempool_desc_t *desc,
                                     accel_mem_allocator_t **out);
accel_status_t accel_mem_paged_create(accel_mem_device_t *mem,
                                      const accel_mempool_desc_t *desc,
                                      accel_mem_allocator_t **out);
accel_status_t accel_mem_async_create(accel_mem_device_t *mem,
                                      const accel_mempool_desc_t *desc,
                                      accel_mem_allocator_t **out);
accel_status_t accel_mem_host_create(accel_mem_device_t *mem,
                                     accel_mem_allocator_t **out);
accel_status_t accel_mem_dedicated_create(accel_mem_device_t *mem,
                                          accel_mem_allocator_t **out);

// Allocation entry points per allocator (arguments already validated).
accel_status_t accel_mem_slab_alloc(accel_mem_allocator_t *a, uint64_t size,
                                    uint64_t alignment, uint32_t tag,
                                    accel_buffer_t **out);
accel_status_t accel_mem_paged_alloc(accel_mem_allocator_t *a, uint64_t size,
                                     uint64_t alignment, uint64_t max_size,
                                     uint32_t tag, accel_buffer_t **out);
accel_status_t accel_mem_async_alloc(accel_mem_allocator_t *a,
                                     accel_semaphore_t *timeline,
                                     const accel_buffer_desc_t *desc,
                                     uint64_t alignment, uint32_t tag,
                                     accel_buffer_t **out);
accel_status_t accel_mem_host_alloc(accel_mem_allocator_t *a, uint64_t size,
                                    int32_t numa_node, uint32_t tag,
                                    accel_buffer_t **out);
accel_status_t accel_mem_host_register(accel_mem_allocator_t *a, void *ptr,
                                       uint64_t size, accel_buffer_t **out);
accel_status_t accel_mem_dedicated_alloc(accel_mem_allocator_t *a,
                                         uint64_t size, uint64_t alignment,
                                         bool exportable, uint32_t tag,
                                         accel_buffer_t **out);
accel_status_t accel_mem_dedicated_import(accel_mem_allocator_t *a, int fd,
                                          uint64_t size, uint32_t flags,
                                          accel_buffer_t **out);

// The slab's size class for |size| at |alignment|, or -1 when the slab
// cannot serve it; and a class's block size.
int accel_mem_slab_class(uint64_t size, uint64_t alignment);
uint64_t accel_mem_slab_class_bytes(int size_class);

// Front door without argument checks, used by the stream-ordered pool to
// get backing memory: picks slab, dedicated or paged like accel_buffer_alloc.
accel_status_t accel_mem_alloc_backing(accel_mem_device_t *mem, uint64_t size,
                                       uint64_t alignment,
                                       accel_buffer_t **out);

// Stream-ordered allocation after the caller's checks (lib/stream's
// accel_buffer_alloc_async): a block is reused at once when it was freed on
// |timeline| (stream order protects it), otherwise only once its free point
// on its own timeline has passed.
accel_status_t accel_mem_alloc_async_checked(accel_device_t *device,
                                             accel_semaphore_t *timeline,
                                             const accel_buffer_desc_t *desc,
                                             accel_buffer_t **out_buffer);
// Moves the memory of stream-ordered |buf| (still referenced by pending
// commands) to a new record |*out_carrier| holding one reference; |buf|
// then frees only itself when its last reference goes.
accel_status_t accel_mem_async_detach(accel_buffer_t *buf,
                                      accel_buffer_t **out_carrier);
// Frees stream-ordered |buffer| (the owner's reference, already claimed by
// accel_mem_owner_free) at the timepoint (|timeline|, |value|): the pool
// hands the block to |timeline|'s own later allocations at once and to
// others once |timeline| reaches |value|.
void accel_mem_async_free_at(accel_buffer_t *buffer,
                             accel_semaphore_t *timeline, uint64_t value);
// Backing bytes of the blocks a stream-ordered pool caches (counted as in
// use by the allocators behind it).
// and in |*out_blocks| how many blocks those are (live buffers of the
// backing allocators that no user holds).
uint64_t accel_mem_async_cached_backing(accel_mem_allocator_t *a,
                                        uint64_t *out_blocks);

// Reports a free of a buffer whose state is not live.
accel_status_t accel_mem_owner_free_misuse(accel_buffer_t *buf,
                                          uint32_t state, const char *what);

// Checks that the buffer's owner has not freed it yet and marks it freed;
// INVALID_ARGUMENT with a message for a double free or a foreign handle.
// A load and a store, not a compare-exchange: frees of one handle from two
// threads at once are a data race of the caller's anyway; what this catches
// is the common bug, a second free after the first. Relaxed: the state only
// has to be seen by the same handle's later calls, which the caller orders.
static inline accel_status_t accel_mem_owner_free(accel_buffer_t *buf,
                                                  const char *what) {
  uint32_t state = atomic_load_explicit(&buf->state, memory_order_relaxed);
  if (__builtin_expect(state == ACCEL_BUFFER_STATE_LIVE, 1)) {
    atomic_store_explicit(&buf->state, ACCEL_BUFFER_STATE_OWNER_FREED,
                          memory_order_relaxed);
    return ACCEL_OK;
  }
  return accel_mem_owner_free_misuse(buf, state, what);
}

// Clears |size| bytes at device |address| (host-visible devices), for
// ACCEL_BUFFER_FLAG_ZERO.
accel_status_t accel_mem_zero(accel_device_t *device, uint64_t address,
                              uint64_t size);

// Round-up helper.
static inline uint64_t accel_mem_round_up(uint64_t x, uint64_t to) {
  return (x + to - 1) / to * to;
}

#endif  // ACCEL_MEM_MEM_INTERNAL_H_
