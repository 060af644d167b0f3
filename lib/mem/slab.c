// Slab allocator: size classes from 256 B to 64 KiB, each served from 2 MiB
// chunks dedicated to the class, carved out of one virtual range reserved
// up front. Metadata lives on the host: a free-index stack per chunk, and a
// buffer record bound to each block once it was first used (the record
// travels with the block through the caches; lookups by address read it).
//
// Threads allocate through their own caches: per-class stacks (magazines) of
// ready records that only the owning thread touches, with no lock and no
// atomic read-modify-write on the hot path; the depot (per-class chunk
// lists, under a mutex) is reached only to refill or flush half a magazine.
// A thread's caches go back to the depot when it exits; a slab destroyed
// while a thread still has a cache for it marks the cache dead and the
// thread frees it on its next slab call or at exit. Empty chunks go
// back to the page source (which zeroes them) beyond one kept per class.
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/lock.h"
#include "mem/mem_internal.h"

#define SLAB_CLASS_COUNT 28
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

typedef struct slab slab_t;
typedef struct slab_tcache slab_tcache_t;

struct slab_tcache {
  // Written by the owning thread only (relaxed loads and stores), read by
  // statistics from any thread.
  _Atomic int64_t bytes_in_use;
  _Atomic int64_t live;
  _Atomic uint64_t allocs;
  _Atomic uint64_t frees;
  // The slab this cache serves; set to NULL (under |lock|) when it is
  // destroyed.
  _Atomic(slab_t *) slab;
  pthread_mutex_t lock;  // thread exit vs. slab destroy and adoption
  bool retired;          // guarded by |lock|: its thread exited
  slab_tcache_t *next_in_slab;  // guarded by slab->tc_lock
  slab_tcache_t *prev_in_slab;
  slab_tcache_t *next_in_thread;  // the owning thread's list
  struct {
    uint32_t count;
    accel_buffer_t *recs[SLAB_MAG];
  } mag[SLAB_CLASS_COUNT];
} __attribute__((aligned(64)));

struct slab {
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
  // Thread caches, live and retired (guarded by tc_lock). Lock order:
  // tc_lock, then a cache's lock; a cache's lock, then depot_lock.
  pthread_mutex_t tc_lock;
  slab_tcache_t *caches;
};

// This thread's caches, most recently used first.
static __thread slab_tcache_t *t_caches;
// A key whose destructor flushes a thread's caches when it exits.
static pthread_key_t g_tcache_key;
static pthread_once_t g_tcache_once = PTHREAD_ONCE_INIT;

// Single-writer counter update (only the owning thread writes).
static inline void counter_add_owned(_Atomic int64_t *c, int64_t d) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d,
                        memory_order_relaxed);
}
static inline void counter_inc_owned(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

// Sum of the caches' in-use bytes. tc_lock held.
static int64_t caches_in_use_locked(slab_t *s) {
  ACCEL_ASSERT_HELD(&s->tc_lock);
  int64_t sum = 0;
  for (slab_tcache_t *tc = s->caches; tc != NULL; tc = tc->next_in_slab) {
    sum += atomic_load_explicit(&tc->bytes_in_use, memory_order_relaxed);
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
  ACCEL_ASSERT_HELD(&s->depot_lock);
  accel_mem_device_t *mem = s->pool.base.mem;
  const accel_driver_t *drv = mem->device->driver;
  accel_mem_pages_give(mem, c->phys, c->address);
  drv->memory->phys_unmap(mem->device->drv, c->address, ACCEL_MEM_CHUNK_BYTES);
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
  ACCEL_ASSERT_HELD(&s->depot_lock);
  accel_mem_device_t *mem = s->pool.base.mem;
  accel_device_t *dev = mem->device;
  if (s->free_slot_count == 0) {
    // What is still free: blocks of other classes in the depot.
    uint64_t free_bytes = 0, largest = 0;
    for (int k = 0; k < SLAB_CLASS_COUNT; ++k) {
      for (accel_mem_slab_chunk_t *q = s->partial[k]; q != NULL;
           q = q->next) {
        free_bytes += (uint64_t)q->free_count * q->block_bytes;
        if (q->free_count > 0 && q->block_bytes > largest) {
          largest = q->block_bytes;
        }
      }
    }
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "slab \"%s\": all %u chunks of 2 MiB are in use "
                       "(limit %llu bytes reached); %llu bytes free in other "
                       "classes, largest free block %llu bytes",
                       s->pool.base.name, s->slot_count,
                       (unsigned long long)s->va_bytes,
                       (unsigned long long)free_bytes,
                       (unsigned long long)largest);
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
  st = dev->driver->memory->phys_map(dev->drv, c->address, c->phys, 0,
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
  void *host = dev->driver->memory->host_pointer(dev->drv, c->address);
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
  ACCEL_ASSERT_HELD(&s->depot_lock);
  if (s->spare_records != NULL) {
    *out = s->spare_records;
    s->spare_records = (*out)->next;
    return ACCEL_OK;
  }
  return accel_mem_record_alloc(s->pool.base.mem, out);
}

// Refills half a magazine of class |c| from the depot. Shard lock held.
static accel_status_t refill_magazine(slab_t *s, slab_tcache_t *sh, int c) {
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
      // Fields that stay while the record is bound to the block are set
      // once, here; an allocation then writes only what changes.
      accel_mem_record_init(
          rec, &s->pool.base,
          chunk->address + (uint64_t)block * chunk->block_bytes, 0,
          ACCEL_MEMORY_KIND_DEVICE);
      atomic_store_explicit(&rec->state, ACCEL_BUFFER_STATE_FREE,
                            memory_order_relaxed);
      rec->u.slab.chunk = chunk;
      rec->u.slab.block = block;
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
  pthread_mutex_unlock(&s->depot_lock);
  // The peak is sampled here, when a cache takes from the depot: exact to
  // within what the caches hold.
  pthread_mutex_lock(&s->tc_lock);
  int64_t in_use = caches_in_use_locked(s);
  uint64_t seen = atomic_load_explicit(&s->pool.base.counters.peak_in_use,
                                       memory_order_relaxed);
  if (in_use > 0 && (uint64_t)in_use > seen) {
    atomic_store_explicit(&s->pool.base.counters.peak_in_use,
                          (uint64_t)in_use, memory_order_relaxed);
  }
  pthread_mutex_unlock(&s->tc_lock);
  // Partial success is success: the magazine has something.
  return sh->mag[c].count > 0 ? ACCEL_OK : st;
}

// Returns |n| records of class |c| to their chunks. Depot lock held.
static void depot_put_locked(slab_t *s, accel_buffer_t **recs, uint32_t n) {
  ACCEL_ASSERT_HELD(&s->depot_lock);
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

static void flush_half(slab_t *s, slab_tcache_t *sh, int c) {
  uint32_t n = sh->mag[c].count / 2;
  pthread_mutex_lock(&s->depot_lock);
  depot_put_locked(s, &sh->mag[c].recs[sh->mag[c].count - n], n);
  pthread_mutex_unlock(&s->depot_lock);
  sh->mag[c].count -= n;
}

// Returns every cached record of |tc| to the depot.
static void flush_all(slab_t *s, slab_tcache_t *tc) {
  pthread_mutex_lock(&s->depot_lock);
  for (int c = 0; c < SLAB_CLASS_COUNT; ++c) {
    depot_put_locked(s, tc->mag[c].recs, tc->mag[c].count);
    tc->mag[c].count = 0;
  }
  pthread_mutex_unlock(&s->depot_lock);
}

static void tcache_free(slab_tcache_t *tc) {
  pthread_mutex_destroy(&tc->lock);
  free(tc);
}

// Thread exit: caches of live slabs are flushed and left to their slab
// (retired, adopted by a later thread); caches of destroyed slabs are freed.
static void tcache_thread_exit(void *unused) {
  slab_tcache_t *tc = t_caches;
  t_caches = NULL;
  while (tc != NULL) {
    slab_tcache_t *next = tc->next_in_thread;
    pthread_mutex_lock(&tc->lock);
    slab_t *s = atomic_load_explicit(&tc->slab, memory_order_relaxed);
    if (s != NULL) {
      flush_all(s, tc);
      tc->retired = true;
    }
    pthread_mutex_unlock(&tc->lock);
    if (s == NULL) {
      tcache_free(tc);
    }
    tc = next;
  }
}

static void tcache_key_create(void) {
  pthread_key_create(&g_tcache_key, tcache_thread_exit);
}

// Finds or makes this thread's cache for |s| (NULL when out of memory).
static __attribute__((noinline)) slab_tcache_t *tcache_slow(slab_t *s) {
  slab_tcache_t **link = &t_caches;
  while (*link != NULL) {
    slab_tcache_t *tc = *link;
    slab_t *owner = atomic_load_explicit(&tc->slab, memory_order_relaxed);
    if (owner == s) {
      *link = tc->next_in_thread;
      tc->next_in_thread = t_caches;
      t_caches = tc;
      return tc;
    }
    if (owner == NULL) {
      // Its slab is gone and handed it to us: free it (after the destroyer
      // let go of its lock).
      *link = tc->next_in_thread;
      pthread_mutex_lock(&tc->lock);
      pthread_mutex_unlock(&tc->lock);
      tcache_free(tc);
      continue;
    }
    link = &tc->next_in_thread;
  }
  pthread_once(&g_tcache_once, tcache_key_create);
  pthread_setspecific(g_tcache_key, (void *)1);
  slab_tcache_t *tc = NULL;
  pthread_mutex_lock(&s->tc_lock);
  for (slab_tcache_t *q = s->caches; q != NULL; q = q->next_in_slab) {
    pthread_mutex_lock(&q->lock);
    bool adopt = q->retired;
    q->retired = false;
    pthread_mutex_unlock(&q->lock);
    if (adopt) {
      tc = q;
      break;
    }
  }
  if (tc == NULL) {
    tc = aligned_alloc(64, accel_mem_round_up(sizeof(*tc), 64));
    if (tc != NULL) {
      memset(tc, 0, sizeof(*tc));
      pthread_mutex_init(&tc->lock, NULL);
      atomic_init(&tc->slab, s);
      tc->next_in_slab = s->caches;
      if (s->caches != NULL) {
        s->caches->prev_in_slab = tc;
      }
      s->caches = tc;
    }
  }
  pthread_mutex_unlock(&s->tc_lock);
  if (tc != NULL) {
    tc->next_in_thread = t_caches;
    t_caches = tc;
  }
  return tc;
}

static inline slab_tcache_t *my_cache(slab_t *s) {
  slab_tcache_t *tc = t_caches;
  if (__builtin_expect(
          tc != NULL &&
              atomic_load_explicit(&tc->slab, memory_order_relaxed) == s,
          1)) {
    return tc;
  }
  return tcache_slow(s);
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
  slab_tcache_t *sh = my_cache(s);
  if (sh == NULL) {
    accel_mem_counters_fail(&a->counters);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "slab \"%s\": cannot allocate a thread cache",
                       a->name);
  }
  if (sh->mag[c].count == 0) {
    accel_status_t st = refill_magazine(s, sh, c);
    if (st != ACCEL_OK) {
      accel_mem_counters_fail(&a->counters);
      return accel_error_context(
          st, "slab alloc of %llu bytes (class %u B, %u chunks of 2 MiB in "
              "use)",
          (unsigned long long)size, k_class_bytes[c], s->chunk_count);
    }
  }
  accel_buffer_t *rec = sh->mag[c].recs[--sh->mag[c].count];
  if (sh->mag[c].count > 0) {
    // The next allocation of this class writes that record: start the miss.
    __builtin_prefetch(sh->mag[c].recs[sh->mag[c].count - 1], 1, 3);
  }
  counter_add_owned(&sh->bytes_in_use, (int64_t)size);
  counter_add_owned(&sh->live, 1);
  counter_inc_owned(&sh->allocs);
  // The record is bound to its block: device, address, kind, allocator and
  // destroy function are already set (refill).
  atomic_init(&rec->object.ref_count, 1);
  rec->size_bytes = size;
  rec->tag_index = tag;
  // Relaxed: the handle reaches other threads through the caller's own
  // synchronization.
  atomic_store_explicit(&rec->state, ACCEL_BUFFER_STATE_LIVE,
                        memory_order_relaxed);
#if defined(__SANITIZE_ADDRESS__)
  void *host = a->device->driver->memory->host_pointer(a->device->drv, rec->address);
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
  void *host = a->device->driver->memory->host_pointer(a->device->drv, buf->address);
  if (host != NULL) {
    ACCEL_MEM_POISON(host, buf->reserved_bytes);
  }
#endif
  // Relaxed: the record passes to other threads only through the depot's
  // lock.
  atomic_store_explicit(&buf->state, ACCEL_BUFFER_STATE_FREE,
                        memory_order_relaxed);
  int c = (int)buf->size_class;
  slab_tcache_t *sh = my_cache(s);
  if (__builtin_expect(sh == NULL, 0)) {
    // No cache (out of host memory): straight to the depot.
    pthread_mutex_lock(&s->depot_lock);
    depot_put_locked(s, &buf, 1);
    pthread_mutex_unlock(&s->depot_lock);
    accel_mem_counters_free(&a->counters, buf->size_bytes);
    return;
  }
  if (sh->mag[c].count == SLAB_MAG) {
    flush_half(s, sh, c);
  }
  sh->mag[c].recs[sh->mag[c].count++] = buf;
  counter_add_owned(&sh->bytes_in_use, -(int64_t)buf->size_bytes);
  counter_inc_owned(&sh->frees);
  // Release, and last: a pool destroy that sees the live count drop
  // (acquire) also sees that this free is done with the slab.
  atomic_store_explicit(
      &sh->live, atomic_load_explicit(&sh->live, memory_order_relaxed) - 1,
      memory_order_release);
}

static void slab_trim(accel_mem_allocator_t *a, uint64_t keep) {
  slab_t *s = (slab_t *)a;
  // The caller's cache and the caches of exited threads go back to the
  // depot; live threads keep theirs (at most a magazine per class).
  slab_tcache_t *mine = my_cache(s);
  if (mine != NULL) {
    flush_all(s, mine);
  }
  pthread_mutex_lock(&s->tc_lock);
  for (slab_tcache_t *tc = s->caches; tc != NULL; tc = tc->next_in_slab) {
    pthread_mutex_lock(&tc->lock);
    if (tc->retired) {
      flush_all(s, tc);
    }
    pthread_mutex_unlock(&tc->lock);
  }
  pthread_mutex_unlock(&s->tc_lock);
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

// Sums the caches' counters (and the rare cache-less frees) into |out|.
static void sum_caches(slab_t *s, accel_mem_stats_t *out,
                       memory_order live_order) {
  const accel_mem_counters_t *k = &s->pool.base.counters;
  int64_t in_use = atomic_load_explicit(&k->bytes_in_use, memory_order_relaxed);
  int64_t live = atomic_load_explicit(&k->live_count, live_order);
  uint64_t allocs = 0, frees = 0;
  pthread_mutex_lock(&s->tc_lock);
  for (slab_tcache_t *tc = s->caches; tc != NULL; tc = tc->next_in_slab) {
    in_use += atomic_load_explicit(&tc->bytes_in_use, memory_order_relaxed);
    live += atomic_load_explicit(&tc->live, live_order);
    allocs += atomic_load_explicit(&tc->allocs, memory_order_relaxed);
    frees += atomic_load_explicit(&tc->frees, memory_order_relaxed);
  }
  pthread_mutex_unlock(&s->tc_lock);
  out->bytes_in_use = in_use > 0 ? (uint64_t)in_use : 0;
  out->live_count = live > 0 ? (uint64_t)live : 0;
  out->alloc_count = allocs;
  out->free_count = frees + atomic_load_explicit(&k->free_count,
                                                 memory_order_relaxed);
  if (out->bytes_in_use > out->peak_bytes_in_use) {
    out->peak_bytes_in_use = out->bytes_in_use;
  }
}

static void slab_stats(const accel_mem_allocator_t *a, accel_mem_stats_t *out) {
  sum_caches((slab_t *)a, out, memory_order_relaxed);
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
  accel_mem_stats_t st = {0};
  // Acquire: pairs with the release of the live count in slab_free.
  sum_caches((slab_t *)a, &st, memory_order_acquire);
  return st.live_count > 0;
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
  // Thread caches: mark them dead; exited threads' ones are freed here,
  // live threads free theirs on their next slab call or at exit.
  pthread_mutex_lock(&s->tc_lock);
  slab_tcache_t *tc = s->caches;
  while (tc != NULL) {
    slab_tcache_t *next = tc->next_in_slab;
    pthread_mutex_lock(&tc->lock);
    atomic_store_explicit(&tc->slab, NULL, memory_order_relaxed);
    bool retired = tc->retired;
    pthread_mutex_unlock(&tc->lock);
    if (retired) {
      tcache_free(tc);
    }
    tc = next;
  }
  s->caches = NULL;
  pthread_mutex_unlock(&s->tc_lock);
  pthread_mutex_destroy(&s->tc_lock);
  // Cached records are bound to their blocks: releasing the chunks moves
  // them to the spare list, which then goes back to the device. (No other
  // thread uses the slab any more; the depot lock is taken for the lock
  // assertion of chunk_release_locked.)
  pthread_mutex_lock(&s->depot_lock);
  for (uint32_t i = 0; i < s->slot_count; ++i) {
    accel_mem_slab_chunk_t *c = s->chunks[i];
    if (c != NULL) {
      chunk_release_locked(s, c);
    }
  }
  pthread_mutex_unlock(&s->depot_lock);
  while (s->spare_records != NULL) {
    accel_buffer_t *r = s->spare_records;
    s->spare_records = r->next;
    accel_mem_record_free(mem, r);
  }
  mem->device->driver->memory->va_release(mem->device->drv, s->base, s->va_bytes);
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
  st = dev->driver->memory->va_reserve(dev->drv, limit, ACCEL_MEM_CHUNK_BYTES,
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
  pthread_mutex_init(&s->tc_lock, NULL);
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
