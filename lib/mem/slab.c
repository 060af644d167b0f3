// Slab allocator: size classes from 256 B to 64 KiB, each served from 2 MiB
// chunks dedicated to the class, carved out of one virtual range reserved
// up front. Metadata lives on the host: a free-index stack per chunk, and a
// buffer record bound to each block once it was first used (the record
// travels with the block through the caches; lookups by address read it).
//
// Threads allocate through shards: small per-class caches (magazines) of
// ready records under a per-shard spin lock, picked by thread id, so that
// two threads rarely touch the same cache line; the depot (per-class chunk
// lists) is reached only to refill or flush half a magazine. Empty chunks go
// back to the page source (which zeroes them) beyond one kept per class.
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mem/mem_internal.h"

#define SLAB_CLASS_COUNT 28
#define SLAB_SHARDS 8
#define SLAB_MAG 64

static const uint32_t k_class_bytes[SLAB_CLASS_COUNT] = {
    256,   512,   768,   1024,  1280,  1536,  1792,  2048,  2560,  3072,
    3584,  4096,  5120,  6144,  7168,  8192,  10240, 12288, 14336, 16384,
    20480, 24576, 28672, 32768, 40960, 49152, 57344, 65536};

// Classes: 256, 512, 768, 1024, then four per doubling up to 64 KiB.
static inline int class_of_size(uint64_t size) {
  if (size <= 1024) {
    return size == 0 ? 0 : (int)((size + 255) >> 8) - 1;
  }
  int b = 63 - __builtin_clzll(size - 1);  // floor(log2(size - 1)), >= 10
  return 4 + (b - 10) * 4 + (int)(((size - 1) >> (b - 2)) & 3);
}

int accel_mem_slab_class(uint64_t size, uint64_t alignment) {
  if (size == 0 || size > ACCEL_MEM_SLAB_MAX_BYTES ||
      alignment > ACCEL_MEM_SLAB_MAX_BYTES) {
    return -1;
  }
  int c = class_of_size(size);
  if (alignment <= 256) {
    return c;  // every class is a multiple of 256
  }
  // A block's address is aligned to the largest power of two dividing its
  // class size (chunks are 2 MiB aligned).
  while (c < SLAB_CLASS_COUNT && (k_class_bytes[c] & (alignment - 1)) != 0) {
    c++;
  }
  return c < SLAB_CLASS_COUNT ? c : -1;
}

uint64_t accel_mem_slab_class_bytes(int size_class) {
  return k_class_bytes[size_class];
}

struct accel_mem_slab_chunk {
  uint64_t address;
  accel_drv_phys_t *phys;
  uint32_t size_class;
  uint32_t block_bytes;
  uint32_t capacity;
  uint32_t free_count;  // blocks in |free_stack| (depot-owned)
  uint32_t slot;
  uint32_t *free_stack;
  // The record bound to each block (NULL until the block is first used).
  // Written under the depot lock (or by the thread that owns the block).
  accel_buffer_t **recs;
  accel_mem_slab_chunk_t *next;  // class list (chunks with free blocks)
  accel_mem_slab_chunk_t *prev;
};

typedef struct slab_shard {
  _Atomic uint32_t lock;
  // Written under |lock| with relaxed stores, read by stats without it.
  _Atomic int64_t bytes_in_use;
  _Atomic int64_t live;
  _Atomic uint64_t allocs;
  _Atomic uint64_t frees;
  struct {
    uint32_t count;
    accel_buffer_t *recs[SLAB_MAG];
  } mag[SLAB_CLASS_COUNT];
} __attribute__((aligned(64))) slab_shard_t;

typedef struct slab {
  accel_mempool_t pool;  // first
  uint64_t base;
  uint64_t va_bytes;
  uint32_t slot_count;
  pthread_mutex_t depot_lock;
  // Guarded by depot_lock:
  accel_mem_slab_chunk_t **chunks;  // by slot
  uint32_t *free_slots;
  uint32_t free_slot_count;
  accel_mem_slab_chunk_t *partial[SLAB_CLASS_COUNT];  // chunks with free blocks
  uint32_t empty_chunks[SLAB_CLASS_COUNT];
  uint32_t chunk_count;
  accel_buffer_t *spare_records;
  slab_shard_t shards[SLAB_SHARDS];
} slab_t;

static __thread uint32_t t_shard = UINT32_MAX;

static inline slab_shard_t *my_shard(slab_t *s) {
  if (__builtin_expect(t_shard == UINT32_MAX, 0)) {
    t_shard = (uint32_t)syscall(SYS_gettid) % SLAB_SHARDS;
  }
  return &s->shards[t_shard];
}

static inline void shard_lock(slab_shard_t *sh) {
  // Acquire: the holder's writes to the shard become visible to us.
  while (atomic_exchange_explicit(&sh->lock, 1, memory_order_acquire) != 0) {
    while (atomic_load_explicit(&sh->lock, memory_order_relaxed) != 0) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
  }
}

static inline void shard_unlock(slab_shard_t *sh) {
  // Release: publishes our writes to the next holder.
  atomic_store_explicit(&sh->lock, 0, memory_order_release);
}

// Single-writer counter update (the shard lock is held).
static inline void bump(_Atomic int64_t *c, int64_t d) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d,
                        memory_order_relaxed);
}
static inline void bumpu(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

static int64_t shards_in_use(slab_t *s) {
  int64_t sum = 0;
  for (int i = 0; i < SLAB_SHARDS; ++i) {
    sum += atomic_load_explicit(&s->shards[i].bytes_in_use,
                                memory_order_relaxed);
  }
  return sum;
}

static void list_remove(slab_t *s, accel_mem_slab_chunk_t *c) {
  if (c->prev != NULL) {
    c->prev->next = c->next;
  } else {
    s->partial[c->size_class] = c->next;
  }
  if (c->next != NULL) {
    c->next->prev = c->prev;
  }
  c->next = c->prev = NULL;
}

static void list_push(slab_t *s, accel_mem_slab_chunk_t *c) {
  c->prev = NULL;
  c->next = s->partial[c->size_class];
  if (c->next != NULL) {
    c->next->prev = c;
  }
  s->partial[c->size_class] = c;
}

static void chunk_release_locked(slab_t *s, accel_mem_slab_chunk_t *c) {
  accel_mem_device_t *mem = s->pool.base.mem;
  const accel_driver_t *drv = mem->device->driver;
  accel_mem_pages_give(mem, c->phys, c->address);
  drv->phys_unmap(mem->device->drv, c->address, ACCEL_MEM_CHUNK_BYTES);
  s->chunks[c->slot] = NULL;
  s->free_slots[s->free_slot_count++] = c->slot;
  s->chunk_count--;
  accel_mem_counters_reserve(&s->pool.base.counters,
                             -(int64_t)ACCEL_MEM_CHUNK_BYTES);
  for (uint32_t i = 0; i < c->capacity; ++i) {
    if (c->recs[i] != NULL) {
      c->recs[i]->next = s->spare_records;
      s->spare_records = c->recs[i];
    }
  }
  free(c->free_stack);
  free(c->recs);
  free(c);
}

static accel_status_t chunk_create_locked(slab_t *s, int size_class,
                                          accel_mem_slab_chunk_t **out) {
  accel_mem_device_t *mem = s->pool.base.mem;
  accel_device_t *dev = mem->device;
  if (s->free_slot_count == 0) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "slab \"%s\": all %u chunks of 2 MiB are in use "
                       "(limit %llu bytes reached)",
                       s->pool.base.name, s->slot_count,
                       (unsigned long long)s->va_bytes);
  }
  accel_mem_slab_chunk_t *c = calloc(1, sizeof(*c));
  uint32_t block_bytes = k_class_bytes[size_class];
  uint32_t capacity = (uint32_t)(ACCEL_MEM_CHUNK_BYTES / block_bytes);
  if (c != NULL) {
    c->free_stack = malloc(capacity * sizeof(*c->free_stack));
    c->recs = calloc(capacity, sizeof(*c->recs));
  }
  if (c == NULL || c->free_stack == NULL || c->recs == NULL) {
    if (c != NULL) {
      free(c->free_stack);
      free(c->recs);
      free(c);
    }
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "slab: cannot allocate chunk metadata");
  }
  accel_status_t st = accel_mem_pages_take(mem, &c->phys);
  if (st != ACCEL_OK) {
    goto err_free_chunk;
  }
  c->slot = s->free_slots[s->free_slot_count - 1];
  c->address = s->base + (uint64_t)c->slot * ACCEL_MEM_CHUNK_BYTES;
  st = dev->driver->phys_map(dev->drv, c->address, c->phys, 0,
                             ACCEL_MEM_CHUNK_BYTES);
  if (st != ACCEL_OK) {
    goto err_give_page;
  }
  s->free_slot_count--;
  c->size_class = (uint32_t)size_class;
  c->block_bytes = block_bytes;
  c->capacity = capacity;
  c->free_count = capacity;
  // Lowest addresses first out.
  for (uint32_t i = 0; i < capacity; ++i) {
    c->free_stack[i] = capacity - 1 - i;
  }
  void *host = dev->driver->host_pointer(dev->drv, c->address);
  if (host != NULL) {
    ACCEL_MEM_POISON(host, ACCEL_MEM_CHUNK_BYTES);
  }
  s->chunks[c->slot] = c;
  s->chunk_count++;
  accel_mem_counters_reserve(&s->pool.base.counters,
                             (int64_t)ACCEL_MEM_CHUNK_BYTES);
  *out = c;
  return ACCEL_OK;

err_give_page:
  accel_mem_pages_give(mem, c->phys, 0);
err_free_chunk:
  free(c->free_stack);
  free(c->recs);
  free(c);
  return st;
}

static accel_status_t spare_record_locked(slab_t *s, accel_buffer_t **out) {
  if (s->spare_records != NULL) {
    *out = s->spare_records;
    s->spare_records = (*out)->next;
    return ACCEL_OK;
  }
  return accel_mem_record_alloc(s->pool.base.mem, out);
}

// Refills half a magazine of class |c| from the depot. Shard lock held.
static accel_status_t refill(slab_t *s, slab_shard_t *sh, int c) {
  pthread_mutex_lock(&s->depot_lock);
  accel_status_t st = ACCEL_OK;
  uint32_t want = SLAB_MAG / 2;
  if (k_class_bytes[c] >= 16384) {
    want = 4;  // few blocks per chunk: keep the caches from hoarding them
  }
  while (sh->mag[c].count < want) {
    accel_mem_slab_chunk_t *chunk = s->partial[c];
    if (chunk == NULL) {
      st = chunk_create_locked(s, c, &chunk);
      if (st != ACCEL_OK) {
        break;
      }
      list_push(s, chunk);
    } else if (chunk->free_count == chunk->capacity) {
      s->empty_chunks[c]--;
    }
    uint32_t block = chunk->free_stack[chunk->free_count - 1];
    accel_buffer_t *rec = chunk->recs[block];
    if (rec == NULL) {
      st = spare_record_locked(s, &rec);
      if (st != ACCEL_OK) {
        break;
      }
      rec->u.slab.chunk = chunk;
      rec->u.slab.block = block;
      rec->address = chunk->address + (uint64_t)block * chunk->block_bytes;
      rec->size_class = (uint32_t)c;
      rec->reserved_bytes = chunk->block_bytes;
      chunk->recs[block] = rec;
    }
    chunk->free_count--;
    sh->mag[c].recs[sh->mag[c].count++] = rec;
    if (chunk->free_count == 0) {
      list_remove(s, chunk);
    }
  }
  int64_t in_use = shards_in_use(s);
  if (in_use > 0) {
    uint64_t seen = atomic_load_explicit(&s->pool.base.counters.peak_in_use,
                                         memory_order_relaxed);
    if ((uint64_t)in_use > seen) {
      atomic_store_explicit(&s->pool.base.counters.peak_in_use,
                            (uint64_t)in_use, memory_order_relaxed);
    }
  }
  pthread_mutex_unlock(&s->depot_lock);
  // Partial success is success: the magazine has something.
  return sh->mag[c].count > 0 ? ACCEL_OK : st;
}

// Returns |n| records of class |c| to their chunks. Depot lock held.
static void depot_put_locked(slab_t *s, accel_buffer_t **recs, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    accel_buffer_t *rec = recs[i];
    accel_mem_slab_chunk_t *chunk = rec->u.slab.chunk;
    chunk->free_stack[chunk->free_count++] = rec->u.slab.block;
    if (chunk->free_count == 1) {
      list_push(s, chunk);
    }
    if (chunk->free_count == chunk->capacity) {
      // Hysteresis: one empty chunk per class stays for the next burst.
      if (s->empty_chunks[chunk->size_class] >= 1) {
        list_remove(s, chunk);
        chunk_release_locked(s, chunk);
      } else {
        s->empty_chunks[chunk->size_class]++;
      }
    }
  }
}

static void flush_half(slab_t *s, slab_shard_t *sh, int c) {
  uint32_t n = sh->mag[c].count / 2;
  pthread_mutex_lock(&s->depot_lock);
  depot_put_locked(s, &sh->mag[c].recs[sh->mag[c].count - n], n);
  pthread_mutex_unlock(&s->depot_lock);
  sh->mag[c].count -= n;
}

accel_status_t accel_mem_slab_alloc(accel_mem_allocator_t *a, uint64_t size,
                                    uint64_t alignment, uint32_t tag,
                                    accel_buffer_t **out) {
  slab_t *s = (slab_t *)a;
  int c = accel_mem_slab_class(size, alignment);
  if (c < 0) {
    accel_mem_counters_fail(&a->counters);
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "slab \"%s\": %llu bytes at alignment %llu is beyond "
                       "its largest class (64 KiB)",
                       a->name, (unsigned long long)size,
                       (unsigned long long)alignment);
  }
  slab_shard_t *sh = my_shard(s);
  shard_lock(sh);
  if (sh->mag[c].count == 0) {
    accel_status_t st = refill(s, sh, c);
    if (st != ACCEL_OK) {
      shard_unlock(sh);
      accel_mem_counters_fail(&a->counters);
      return accel_error_context(
          st, "slab alloc of %llu bytes (class %u B, %lld bytes in use)",
          (unsigned long long)size, k_class_bytes[c],
          (long long)shards_in_use(s));
    }
  }
  accel_buffer_t *rec = sh->mag[c].recs[--sh->mag[c].count];
  bump(&sh->bytes_in_use, (int64_t)size);
  bump(&sh->live, 1);
  bumpu(&sh->allocs);
  shard_unlock(sh);
  accel_mem_record_init(rec, a, rec->address, size,
                        ACCEL_MEMORY_KIND_DEVICE);
  rec->tag_index = tag;
#if defined(__SANITIZE_ADDRESS__)
  void *host = a->device->driver->host_pointer(a->device->drv, rec->address);
  if (host != NULL) {
    ACCEL_MEM_UNPOISON(host, size);
  }
#endif
  *out = rec;
  return ACCEL_OK;
}

static void slab_free(accel_mem_allocator_t *a, accel_buffer_t *buf) {
  slab_t *s = (slab_t *)a;
#if defined(__SANITIZE_ADDRESS__)
  // Freed device memory is poisoned so that a use after free is caught.
  void *host = a->device->driver->host_pointer(a->device->drv, buf->address);
  if (host != NULL) {
    ACCEL_MEM_POISON(host, buf->reserved_bytes);
  }
#endif
  // Relaxed: the shard lock below orders it for the next allocation.
  atomic_store_explicit(&buf->state, ACCEL_BUFFER_STATE_FREE,
                        memory_order_relaxed);
  int c = (int)buf->size_class;
  slab_shard_t *sh = my_shard(s);
  shard_lock(sh);
  if (sh->mag[c].count == SLAB_MAG) {
    flush_half(s, sh, c);
  }
  sh->mag[c].recs[sh->mag[c].count++] = buf;
  bump(&sh->bytes_in_use, -(int64_t)buf->size_bytes);
  bump(&sh->live, -1);
  bumpu(&sh->frees);
  shard_unlock(sh);
}

static void slab_trim(accel_mem_allocator_t *a, uint64_t keep) {
  slab_t *s = (slab_t *)a;
  // Flush every shard's caches, then release empty chunks.
  for (int i = 0; i < SLAB_SHARDS; ++i) {
    slab_shard_t *sh = &s->shards[i];
    shard_lock(sh);
    pthread_mutex_lock(&s->depot_lock);
    for (int c = 0; c < SLAB_CLASS_COUNT; ++c) {
      depot_put_locked(s, sh->mag[c].recs, sh->mag[c].count);
      sh->mag[c].count = 0;
    }
    pthread_mutex_unlock(&s->depot_lock);
    shard_unlock(sh);
  }
  pthread_mutex_lock(&s->depot_lock);
  for (int c = 0; c < SLAB_CLASS_COUNT; ++c) {
    accel_mem_slab_chunk_t *chunk = s->partial[c];
    while (chunk != NULL) {
      accel_mem_slab_chunk_t *next = chunk->next;
      if (chunk->free_count == chunk->capacity &&
          (uint64_t)s->chunk_count * ACCEL_MEM_CHUNK_BYTES > keep) {
        list_remove(s, chunk);
        chunk_release_locked(s, chunk);
        s->empty_chunks[c]--;
      }
      chunk = next;
    }
  }
  pthread_mutex_unlock(&s->depot_lock);
}

static void slab_stats(const accel_mem_allocator_t *a, accel_mem_stats_t *out) {
  slab_t *s = (slab_t *)a;
  int64_t in_use = 0, live = 0;
  uint64_t allocs = 0, frees = 0;
  for (int i = 0; i < SLAB_SHARDS; ++i) {
    const slab_shard_t *sh = &s->shards[i];
    in_use += atomic_load_explicit(&sh->bytes_in_use, memory_order_relaxed);
    live += atomic_load_explicit(&sh->live, memory_order_relaxed);
    allocs += atomic_load_explicit(&sh->allocs, memory_order_relaxed);
    frees += atomic_load_explicit(&sh->frees, memory_order_relaxed);
  }
  out->bytes_in_use = in_use > 0 ? (uint64_t)in_use : 0;
  out->live_count = live > 0 ? (uint64_t)live : 0;
  out->alloc_count = allocs;
  out->free_count = frees;
  if (out->bytes_in_use > out->peak_bytes_in_use) {
    out->peak_bytes_in_use = out->bytes_in_use;
  }
}

static void slab_rebind(accel_mem_allocator_t *a, accel_buffer_t *from,
                        accel_buffer_t *to) {
  slab_t *s = (slab_t *)a;
  // Under the depot lock: lookups read |live| under it.
  pthread_mutex_lock(&s->depot_lock);
  accel_buffer_t **slot = &from->u.slab.chunk->recs[from->u.slab.block];
  if (*slot == from) {
    *slot = to;
  }
  pthread_mutex_unlock(&s->depot_lock);
}

static bool slab_busy(accel_mem_allocator_t *a) {
  slab_t *s = (slab_t *)a;
  // Under each shard's lock: a free that updated a count has also left the
  // shard (nothing touches the slab after its unlock).
  int64_t live = 0;
  for (int i = 0; i < SLAB_SHARDS; ++i) {
    shard_lock(&s->shards[i]);
    live += atomic_load_explicit(&s->shards[i].live, memory_order_relaxed);
    shard_unlock(&s->shards[i]);
  }
  return live > 0;
}

static accel_status_t slab_lookup(accel_mem_allocator_t *a, uint64_t address,
                                  accel_buffer_t **out) {
  slab_t *s = (slab_t *)a;
  if (address < s->base || address >= s->base + s->va_bytes) {
    return ACCEL_ERROR_NOT_FOUND;
  }
  uint64_t off = address - s->base;
  pthread_mutex_lock(&s->depot_lock);
  accel_mem_slab_chunk_t *c = s->chunks[off / ACCEL_MEM_CHUNK_BYTES];
  accel_status_t st = ACCEL_OK;
  if (c == NULL) {
    st = accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                     "address 0x%llx lies in slab \"%s\" but in no chunk it "
                     "gave out",
                     (unsigned long long)address, a->name);
  } else {
    uint64_t in_chunk = address - c->address;
    uint64_t block = in_chunk / c->block_bytes;
    uint64_t within = in_chunk % c->block_bytes;
    accel_buffer_t *rec = block < c->capacity ? c->recs[block] : NULL;
    uint32_t state =
        rec != NULL ? atomic_load_explicit(&rec->state, memory_order_relaxed)
                    : ACCEL_BUFFER_STATE_FREE;
    if (state == ACCEL_BUFFER_STATE_FREE) {
      st = accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "address 0x%llx is not a live slab allocation (free, "
                       "cached or already freed)",
                       (unsigned long long)address);
    } else if (within != 0) {
      st = accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "address 0x%llx lies inside buffer 0x%llx at offset "
                       "%llu, not at its start",
                       (unsigned long long)address,
                       (unsigned long long)rec->address,
                       (unsigned long long)within);
    } else {
      *out = rec;
    }
  }
  pthread_mutex_unlock(&s->depot_lock);
  return st;
}

static void slab_destroy(accel_mem_allocator_t *a) {
  slab_t *s = (slab_t *)a;
  accel_mem_device_t *mem = a->mem;
  // Cached records are bound to their blocks: releasing the chunks moves
  // them to the spare list, which then goes back to the device.
  for (uint32_t i = 0; i < s->slot_count; ++i) {
    accel_mem_slab_chunk_t *c = s->chunks[i];
    if (c != NULL) {
      chunk_release_locked(s, c);
    }
  }
  while (s->spare_records != NULL) {
    accel_buffer_t *r = s->spare_records;
    s->spare_records = r->next;
    accel_mem_record_free(mem, r);
  }
  mem->device->driver->va_release(mem->device->drv, s->base, s->va_bytes);
  free(s->chunks);
  free(s->free_slots);
  pthread_mutex_destroy(&s->depot_lock);
  free(s);
}

static const accel_mem_allocator_vtable_t k_slab_vtable = {
    .destroy = slab_destroy,
    .free = slab_free,
    .trim = slab_trim,
    .stats = slab_stats,
    .lookup = slab_lookup,
    .busy = slab_busy,
    .rebind = slab_rebind,
};

accel_status_t accel_mem_slab_create(accel_mem_device_t *mem,
                                     const accel_mempool_desc_t *desc,
                                     accel_mem_allocator_t **out) {
  accel_device_t *dev = mem->device;
  uint64_t limit = desc->max_bytes ? desc->max_bytes : dev->info.memory_bytes;
  if (limit == 0) {
    limit = 1ull << 30;
  }
  limit = accel_mem_round_up(limit, ACCEL_MEM_CHUNK_BYTES);
  slab_t *s = aligned_alloc(64, accel_mem_round_up(sizeof(*s), 64));
  if (s == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "slab: cannot allocate %zu bytes", sizeof(*s));
  }
  memset(s, 0, sizeof(*s));
  s->va_bytes = limit;
  s->slot_count = (uint32_t)(limit / ACCEL_MEM_CHUNK_BYTES);
  s->chunks = calloc(s->slot_count, sizeof(*s->chunks));
  s->free_slots = malloc(s->slot_count * sizeof(*s->free_slots));
  accel_status_t st = ACCEL_OK;
  if (s->chunks == NULL || s->free_slots == NULL) {
    st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                     "slab: cannot allocate the chunk table of %u slots",
                     s->slot_count);
    goto err_free_slab;
  }
  st = dev->driver->va_reserve(dev->drv, limit, ACCEL_MEM_CHUNK_BYTES,
                               &s->base);
  if (st != ACCEL_OK) {
    goto err_free_slab;
  }
  // Lowest slot on top.
  for (uint32_t i = 0; i < s->slot_count; ++i) {
    s->free_slots[i] = s->slot_count - 1 - i;
  }
  s->free_slot_count = s->slot_count;
  pthread_mutex_init(&s->depot_lock, NULL);
  accel_mem_allocator_t *a = &s->pool.base;
  a->vt = &k_slab_vtable;
  a->mem = mem;
  a->device = dev;
  a->type = ACCEL_MEMPOOL_TYPE_SLAB;
  snprintf(a->name, sizeof(a->name), "%s", desc->name ? desc->name : "slab");
  accel_mem_register(mem, a);
  *out = a;
  return ACCEL_OK;

err_free_slab:
  free(s->chunks);
  free(s->free_slots);
  free(s);
  return accel_error_context(st, "creating slab allocator on %s",
                             dev->info.id);
}
