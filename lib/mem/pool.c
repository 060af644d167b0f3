// Stream-ordered pool (accel_buffer_alloc_async / accel_buffer_free_async),
// with the semantics of cudaMallocAsync: memory freed on a stream is reused
// at once by later allocations on the same stream (stream order makes it
// safe), and by other streams only once the freeing stream's completion
// timeline shows that the work submitted before the free has completed.
//
// The pool caches freed blocks in bins (the slab's size classes up to
// 64 KiB, one best-fit list above), each tagged with the freeing stream's
// completion semaphore (retained) and the sequence number of its last
// command at the time of the free. No command is enqueued on free: the free
// point is the stream's last submitted command. Memory comes from the
// device's own allocators (slab, dedicated, paged); cached bytes beyond the
// release threshold go back to them as soon as their free point completed.
#include <stdio.h>
#include <stdlib.h>

#include "core/lock.h"
#include "mem/mem_internal.h"
#include "sync/semaphore_impl.h"

#define ASYNC_BINS 29  // 28 slab classes + one list of large blocks
#define ASYNC_SCAN 8   // cached entries examined per allocation

typedef struct async_pool {
  accel_mempool_t pool;  // first
  uint64_t release_threshold;
  uint64_t limit_bytes;
  accel_mem_spinlock_t lock;
  // Guarded by |lock|:
  accel_buffer_t *bins[ASYNC_BINS];
  uint64_t cached_bytes;         // reserved bytes of cached blocks
  uint64_t cached_backing_use;   // backing size of cached blocks
  uint64_t cached_blocks;        // how many (live in the backing allocator)
  uint64_t held_bytes;           // reserved bytes of cached + live blocks
} async_pool_t;

static bool point_done(const accel_buffer_t *rec) {
  if (rec->free_timeline == NULL) {
    return true;
  }
  const accel_semaphore_t *sem = (const accel_semaphore_t *)rec->free_timeline;
  uint64_t value = 0;
  if (sem->device->driver->sync->query(sem->drv, &value) != ACCEL_OK) {
    return false;  // failed stream: keep it until a trim or destroy
  }
  return value >= rec->free_seq;
}

static void drop_timeline(accel_buffer_t *rec) {
  accel_object_release(rec->free_timeline);
  rec->free_timeline = NULL;
}

// Gives a cached block back to its backing allocator. Lock not held.
static void give_back(accel_buffer_t *rec) {
  drop_timeline(rec);
  accel_mem_allocator_t *backing = rec->backing;
  rec->allocator = backing;
  rec->size_bytes = rec->backing_size;
  rec->backing = NULL;
  backing->vt->free(backing, rec);
}

// Unlinks cached blocks while more than |keep| bytes are cached, collecting
// those whose free point completed (or all of them with |force|) into
// |*out|. Lock held.
static void collect_locked(async_pool_t *p, uint64_t keep, bool force,
                           accel_buffer_t **out) {
  ACCEL_ASSERT_SPIN_HELD(atomic_load_explicit(&p->lock.word, memory_order_relaxed) != 0);
  for (int b = ASYNC_BINS - 1; b >= 0 && p->cached_bytes > keep; --b) {
    accel_buffer_t **link = &p->bins[b];
    while (*link != NULL && p->cached_bytes > keep) {
      accel_buffer_t *rec = *link;
      if (force || point_done(rec)) {
        *link = rec->next;
        p->cached_bytes -= rec->reserved_bytes;
        p->cached_backing_use -= rec->backing_size;
        p->cached_blocks--;
        p->held_bytes -= rec->reserved_bytes;
        accel_mem_counters_reserve_locked(&p->pool.base.counters,
                                   -(int64_t)rec->reserved_bytes, &p->lock);
        rec->next = *out;
        *out = rec;
      } else {
        link = &rec->next;
      }
    }
  }
}

static void give_back_list(accel_buffer_t *list) {
  while (list != NULL) {
    accel_buffer_t *next = list->next;
    give_back(list);
    list = next;
  }
}

static int bin_of(uint64_t size, uint64_t alignment) {
  int c = accel_mem_slab_class(size, alignment);
  return c >= 0 ? c : ASYNC_BINS - 1;
}

accel_status_t accel_mem_async_alloc(accel_mem_allocator_t *a,
                                     accel_semaphore_t *timeline,
                                     const accel_buffer_desc_t *desc,
                                     uint64_t alignment, uint32_t tag,
                                     accel_buffer_t **out) {
  async_pool_t *p = (async_pool_t *)a;
  uint64_t size = desc->size_bytes;
  int b = bin_of(size, alignment);
  accel_object_t *mine = &timeline->object;
  accel_buffer_t *hit = NULL;
  accel_mem_spin_lock(&p->lock);
  accel_buffer_t **link = &p->bins[b];
  accel_buffer_t **best = NULL;
  for (int n = 0; *link != NULL && n < ASYNC_SCAN; ++n) {
    accel_buffer_t *rec = *link;
    bool fits = b < ASYNC_BINS - 1 ||
                (rec->backing_size >= size &&
                 rec->address % alignment == 0 &&
                 rec->backing_size <= size + size / 4 + (2ull << 20));
    if (fits && (rec->free_timeline == mine || point_done(rec))) {
      best = link;
      break;
    }
    link = &rec->next;
  }
  if (best != NULL) {
    hit = *best;
    *best = hit->next;
    p->cached_bytes -= hit->reserved_bytes;
    p->cached_backing_use -= hit->backing_size;
    p->cached_blocks--;
    accel_mem_counters_alloc_locked(&a->counters, size, &p->lock);
  }
  accel_mem_spin_unlock(&p->lock);
  if (hit == NULL) {
    uint64_t backing_size =
        b < ASYNC_BINS - 1 ? accel_mem_slab_class_bytes(b) : size;
    accel_mem_spin_lock(&p->lock);
    bool over = p->held_bytes + backing_size > p->limit_bytes;
    accel_buffer_t *victims = NULL;
    if (over) {
      // Make room from what is cached and complete.
      collect_locked(p, 0, false, &victims);
      over = p->held_bytes + backing_size > p->limit_bytes;
    }
    uint64_t held = p->held_bytes, cached = p->cached_bytes;
    accel_mem_spin_unlock(&p->lock);
    give_back_list(victims);
    if (over) {
      accel_mem_counters_fail(&a->counters);
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "stream-ordered pool \"%s\": %llu bytes would pass "
                         "its limit of %llu bytes (%llu held, %llu of them "
                         "free but still in use by pending stream work)",
                         a->name, (unsigned long long)size,
                         (unsigned long long)p->limit_bytes,
                         (unsigned long long)held,
                         (unsigned long long)cached);
    }
    accel_status_t st =
        accel_mem_alloc_backing(a->mem, backing_size, alignment, &hit);
    if (st != ACCEL_OK) {
      accel_mem_counters_fail(&a->counters);
      return accel_error_context(st, "stream-ordered alloc of %llu bytes",
                                 (unsigned long long)size);
    }
    hit->backing = hit->allocator;
    hit->backing_size = hit->size_bytes;
    hit->free_timeline = NULL;
    accel_mem_spin_lock(&p->lock);
    p->held_bytes += hit->reserved_bytes;
    accel_mem_counters_reserve_locked(&a->counters,
                                      (int64_t)hit->reserved_bytes, &p->lock);
    accel_mem_counters_alloc_locked(&a->counters, size, &p->lock);
    accel_mem_spin_unlock(&p->lock);
  }
  // A reused block keeps its last freeing stream's timeline (retained):
  // a later free on the same stream then costs no reference traffic. Free
  // point 0 means "free at once" for a release without a stream.
  hit->free_seq = 0;
  accel_mem_record_init(hit, a, hit->address, size, ACCEL_MEMORY_KIND_DEVICE);
  hit->tag_index = tag;
  *out = hit;
  return ACCEL_OK;
}

// Cached blocks are not poisoned under AddressSanitizer: work already
// submitted to the freeing stream may still use them, legitimately.
static void async_free(accel_mem_allocator_t *a, accel_buffer_t *buf) {
  async_pool_t *p = (async_pool_t *)a;
  // Relaxed: the pool lock orders it for the next allocation.
  atomic_store_explicit(&buf->state, ACCEL_BUFFER_STATE_FREE,
                        memory_order_relaxed);
  int b = bin_of(buf->backing_size, 1);
  accel_buffer_t *victims = NULL;
  accel_mem_spin_lock(&p->lock);
  accel_mem_counters_free_locked(&a->counters, buf->size_bytes, &p->lock);
  buf->next = p->bins[b];
  p->bins[b] = buf;
  p->cached_bytes += buf->reserved_bytes;
  p->cached_backing_use += buf->backing_size;
  p->cached_blocks++;
  if (p->cached_bytes > p->release_threshold) {
    collect_locked(p, p->release_threshold, false, &victims);
  }
  accel_mem_spin_unlock(&p->lock);
  give_back_list(victims);
}

static void async_trim(accel_mem_allocator_t *a, uint64_t keep) {
  async_pool_t *p = (async_pool_t *)a;
  accel_buffer_t *victims = NULL;
  accel_mem_spin_lock(&p->lock);
  collect_locked(p, keep, false, &victims);
  accel_mem_spin_unlock(&p->lock);
  give_back_list(victims);
}

static void async_stats(const accel_mem_allocator_t *a,
                        accel_mem_stats_t *out) {
  async_pool_t *p = (async_pool_t *)a;
  accel_mem_spin_lock(&p->lock);
  // Borrowed for reporting only: how much of the backing allocators' "in
  // use" is really cached here (accel_device_mem_stats subtracts it).
  out->reserved0 = 0;
  out->bytes_reserved = p->held_bytes;
  accel_mem_spin_unlock(&p->lock);
}

static bool async_busy(accel_mem_allocator_t *a) {
  async_pool_t *p = (async_pool_t *)a;
  // Under the lock: a free that updated the count has also left the pool.
  accel_mem_spin_lock(&p->lock);
  bool busy = atomic_load_explicit(&a->counters.live_count,
                                   memory_order_relaxed) > 0;
  accel_mem_spin_unlock(&p->lock);
  return busy;
}

static void async_destroy(accel_mem_allocator_t *a) {
  async_pool_t *p = (async_pool_t *)a;
  accel_buffer_t *victims = NULL;
  accel_mem_spin_lock(&p->lock);
  collect_locked(p, 0, true, &victims);
  accel_mem_spin_unlock(&p->lock);
  give_back_list(victims);
  free(p);
}

uint64_t accel_mem_async_cached_backing(accel_mem_allocator_t *a,
                                        uint64_t *out_blocks) {
  async_pool_t *p = (async_pool_t *)a;
  accel_mem_spin_lock(&p->lock);
  uint64_t v = p->cached_backing_use;
  *out_blocks = p->cached_blocks;
  accel_mem_spin_unlock(&p->lock);
  return v;
}

accel_status_t accel_mem_async_detach(accel_buffer_t *buf,
                                      accel_buffer_t **out_carrier) {
  accel_mem_allocator_t *a = buf->allocator;
  accel_buffer_t *carrier = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_record_alloc(a->mem, &carrier));
  // Field by field, never the atomics: pending commands (a DMA retire on
  // another thread) change |buf|'s reference count meanwhile, and a struct
  // copy read it plainly (ThreadSanitizer caught it).
  accel_object_init(&carrier->object, buf->object.destroy);
  carrier->device = buf->device;
  carrier->address = buf->address;
  carrier->size_bytes = buf->size_bytes;
  carrier->kind = buf->kind;
  atomic_init(&carrier->state, ACCEL_BUFFER_STATE_OWNER_FREED);
  carrier->allocator = buf->allocator;
  carrier->tag_index = buf->tag_index;
  carrier->size_class = buf->size_class;
  carrier->reserved_bytes = buf->reserved_bytes;
  carrier->backing = buf->backing;
  carrier->free_timeline = buf->free_timeline;
  carrier->free_seq = buf->free_seq;
  carrier->backing_size = buf->backing_size;
  carrier->u = buf->u;
  carrier->next = NULL;
  // The owner's list links are read and moved by rebind, under the backing
  // allocator's lock (another thread's free rewrites them).
  carrier->owner_next = NULL;
  carrier->owner_prev = NULL;
  memcpy(carrier->tag, buf->tag, sizeof(carrier->tag));
  carrier->read_only = buf->read_only;
  if (carrier->backing->vt->rebind != NULL) {
    carrier->backing->vt->rebind(carrier->backing, buf, carrier);
  }
  // The old record keeps only the commands' references; its tag and timeline
  // moved with the memory.
  buf->free_timeline = NULL;
  buf->tag_index = 0;
  buf->allocator = &a->mem->detached;
  *out_carrier = carrier;
  return ACCEL_OK;
}

static const accel_mem_allocator_vtable_t k_async_vtable = {
    .destroy = async_destroy,
    .free = async_free,
    .trim = async_trim,
    .stats = async_stats,
    .busy = async_busy,
};

accel_status_t accel_mem_async_create(accel_mem_device_t *mem,
                                      const accel_mempool_desc_t *desc,
                                      accel_mem_allocator_t **out) {
  async_pool_t *p = calloc(1, sizeof(*p));
  if (p == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "stream-ordered pool: cannot allocate %zu bytes",
                       sizeof(*p));
  }
  p->release_threshold = desc->release_threshold_bytes;
  p->limit_bytes = desc->max_bytes ? desc->max_bytes
                                   : (mem->device->info.memory_bytes
                                          ? mem->device->info.memory_bytes
                                          : UINT64_MAX);
  accel_mem_allocator_t *a = &p->pool.base;
  a->vt = &k_async_vtable;
  a->mem = mem;
  a->device = mem->device;
  a->type = ACCEL_MEMPOOL_TYPE_STREAM_ORDERED;
  snprintf(a->name, sizeof(a->name), "%s",
           desc->name ? desc->name : "stream-ordered");
  accel_mem_register(mem, a);
  *out = a;
  return ACCEL_OK;
}

void accel_mem_async_free_at(accel_buffer_t *buffer,
                             accel_semaphore_t *timeline, uint64_t value) {
  buffer->free_seq = value;
  accel_object_t *mine = &timeline->object;
  if (buffer->free_timeline != mine) {
    accel_object_retain(mine);
    accel_object_release(buffer->free_timeline);
    buffer->free_timeline = mine;
  }
  // Sole holder: drop without a locked instruction (nobody can retain).
  // Acquire: pairs with the release of the last other holder's drop.
  if (atomic_load_explicit(&buffer->object.ref_count, memory_order_acquire) ==
      1) {
    atomic_store_explicit(&buffer->object.ref_count, 0, memory_order_relaxed);
    buffer->object.destroy(&buffer->object);
    return;
  }
  accel_object_release(&buffer->object);
}
