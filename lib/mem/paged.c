// Paged allocator: one large virtual range reserved per pool; physical pages
// (2 MiB by default) mapped on demand. A buffer is a run of virtual pages,
// with room kept behind it (max_size_bytes) so that it grows in place: growth
// maps more pages, never copies. Freed pages stay in the pool for reuse up to
// the release threshold; beyond it, and on trim, they go back to the page
// source (2 MiB pages, zeroed there) or to the driver (zeroed here first).
//
// With a block size the pool is a fixed-size block pool (an LLM KV cache):
// pages are cut into blocks, each page keeps its own free-block stack, and a
// page whose blocks are all free can be returned.
#include <stdio.h>
#include <stdlib.h>

#include "core/lock.h"
#include "mem/mem_internal.h"

struct accel_mem_page {
  accel_drv_phys_t *phys;
  uint64_t address;  // block pools: where the page is mapped
  // Block pools:
  uint32_t live_blocks;
  uint32_t free_count;
  uint32_t *free_blocks;
  accel_buffer_t **recs;  // live block records
  accel_mem_page_t *next;  // free-page stack, or pages with free blocks
  accel_mem_page_t *prev;
};

typedef struct va_extent {
  uint64_t start;
  uint64_t bytes;
} va_extent_t;

typedef struct paged {
  accel_mempool_t pool;  // first
  uint64_t base;
  uint64_t va_bytes;
  uint64_t page_bytes;
  uint64_t block_bytes;  // 0: variable sizes
  uint32_t blocks_per_page;
  uint64_t limit_bytes;  // physical limit
  uint64_t release_threshold;
  pthread_mutex_t lock;
  // Guarded by |lock|:
  va_extent_t *free_va;  // sorted by start, coalesced
  uint32_t free_va_count;
  uint32_t free_va_capacity;
  accel_buffer_t **live;  // variable-size buffers sorted by address
  uint32_t live_count;
  uint32_t live_capacity;
  accel_mem_page_t *free_pages;  // unmapped, ready to map
  uint64_t free_page_count;
  uint64_t pages_held;             // physical pages owned (mapped or free)
  accel_mem_page_t **page_by_slot;  // block pools: page mapped at a slot
  accel_mem_page_t *block_pages;   // block pools: pages with free blocks
} paged_t;

static accel_mem_page_t *page_new(void) {
  return calloc(1, sizeof(accel_mem_page_t));
}

// Takes a physical page (from the pool's free pages, else the page source or
// the driver), within the pool's limit. Lock held.
static accel_status_t page_take_locked(paged_t *p, accel_mem_page_t **out) {
  ACCEL_ASSERT_HELD(&p->lock);
  accel_mem_allocator_t *a = &p->pool.base;
  if (p->free_pages != NULL) {
    accel_mem_page_t *pg = p->free_pages;
    p->free_pages = pg->next;
    p->free_page_count--;
    pg->next = NULL;
    *out = pg;
    return ACCEL_OK;
  }
  if ((p->pages_held + 1) * p->page_bytes > p->limit_bytes) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "paged pool \"%s\" is at its limit of %llu bytes "
                       "(%llu pages of %llu bytes held, 0 bytes free, "
                       "largest free block 0 bytes)",
                       a->name, (unsigned long long)p->limit_bytes,
                       (unsigned long long)p->pages_held,
                       (unsigned long long)p->page_bytes);
  }
  accel_mem_page_t *pg = page_new();
  if (pg == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "paged pool: cannot allocate a page record");
  }
  accel_status_t st;
  if (p->page_bytes == ACCEL_MEM_CHUNK_BYTES) {
    st = accel_mem_pages_take(a->mem, &pg->phys);
  } else {
    st = a->device->driver->memory->phys_create(a->device->drv, p->page_bytes, 0,
                                        &pg->phys);
  }
  if (st != ACCEL_OK) {
    free(pg);
    return st;
  }
  p->pages_held++;
  accel_mem_counters_reserve(&a->counters, (int64_t)p->page_bytes);
  *out = pg;
  return ACCEL_OK;
}

// Clears |pg| by the backend (phys_clear: pages never touched are not
// faulted in to be zeroed); false when the backend has no phys_clear or it
// failed.
static bool page_clear_phys(paged_t *p, accel_mem_page_t *pg) {
  const accel_drv_memory_ops_t *m = p->pool.base.device->driver->memory;
  return m->phys_clear != NULL && m->phys_clear(pg->phys) == ACCEL_OK;
}

// Zeroes the page mapped at |mapped_at| through its host mapping.
static void page_zero_mapped(paged_t *p, uint64_t mapped_at) {
  accel_device_t *dev = p->pool.base.device;
  void *host = dev->driver->memory->host_pointer(dev->drv, mapped_at);
  if (host != NULL) {
    ACCEL_MEM_UNPOISON(host, p->page_bytes);
    memset(host, 0, p->page_bytes);
  }
}

// Returns a page to the device. A page mapped at |mapped_at| is cleared
// first, by the backend when it can, else through the mapping (a whole
// chunk by accel_mem_pages_give); 0: not mapped, the caller cleared it or
// nothing could. Lock held.
static void page_return_locked(paged_t *p, accel_mem_page_t *pg,
                               uint64_t mapped_at) {
  ACCEL_ASSERT_HELD(&p->lock);
  accel_mem_allocator_t *a = &p->pool.base;
  accel_device_t *dev = a->device;
  if (p->page_bytes == ACCEL_MEM_CHUNK_BYTES) {
    accel_mem_pages_give(a->mem, pg->phys, mapped_at);
  } else {
    if (mapped_at != 0 && !page_clear_phys(p, pg)) {
      page_zero_mapped(p, mapped_at);
    }
    dev->driver->memory->phys_release(pg->phys);
  }
  p->pages_held--;
  accel_mem_counters_reserve(&a->counters, -(int64_t)p->page_bytes);
  free(pg->free_blocks);
  free(pg->recs);
  free(pg);
}

// Releases free pages beyond |keep| bytes. They are unmapped: the backend
// clears them (phys_clear), else each is mapped at a scratch address and
// cleared there (a chunk by accel_mem_pages_give), each way once. Lock held.
static void trim_locked(paged_t *p, uint64_t keep) {
  ACCEL_ASSERT_HELD(&p->lock);
  accel_device_t *dev = p->pool.base.device;
  const accel_drv_memory_ops_t *m = dev->driver->memory;
  bool chunk = p->page_bytes == ACCEL_MEM_CHUNK_BYTES;
  while (p->free_pages != NULL && p->free_page_count * p->page_bytes > keep) {
    accel_mem_page_t *pg = p->free_pages;
    p->free_pages = pg->next;
    p->free_page_count--;
    // The last page of the range is never handed out; it is the scratch
    // mapping for clearing.
    uint64_t scratch = p->base + p->va_bytes;
    if (!chunk && page_clear_phys(p, pg)) {
      page_return_locked(p, pg, 0);  // cleared by the backend, unmapped
    } else if (m->phys_map(dev->drv, scratch, pg->phys, 0, p->page_bytes) ==
               ACCEL_OK) {
      if (!chunk) {
        page_zero_mapped(p, scratch);  // the backend could not clear it
      }
      page_return_locked(p, pg, chunk ? scratch : 0);
      m->phys_unmap(dev->drv, scratch, p->page_bytes);
    } else {
      page_return_locked(p, pg, 0);
    }
  }
}

// ---------------------------------------------------------------------------
// Virtual ranges.
// ---------------------------------------------------------------------------

static bool va_alloc_locked(paged_t *p, uint64_t bytes, uint64_t alignment,
                            uint64_t *out) {
  ACCEL_ASSERT_HELD(&p->lock);
  for (uint32_t i = 0; i < p->free_va_count; ++i) {
    va_extent_t *e = &p->free_va[i];
    uint64_t start = accel_mem_round_up(e->start, alignment);
    if (start - e->start > e->bytes || e->bytes - (start - e->start) < bytes) {
      continue;
    }
    uint64_t head = start - e->start;
    uint64_t tail = e->bytes - head - bytes;
    if (head == 0) {
      e->start += bytes;
      e->bytes -= bytes;
      if (e->bytes == 0) {
        memmove(e, e + 1, (p->free_va_count - i - 1) * sizeof(*e));
        p->free_va_count--;
      }
    } else if (tail == 0) {
      e->bytes = head;
    } else {
      if (p->free_va_count == p->free_va_capacity) {
        uint32_t cap = p->free_va_capacity * 2;
        va_extent_t *grown = realloc(p->free_va, cap * sizeof(*grown));
        if (grown == NULL) {
          return false;
        }
        p->free_va = grown;
        p->free_va_capacity = cap;
        e = &p->free_va[i];
      }
      memmove(e + 2, e + 1, (p->free_va_count - i - 1) * sizeof(*e));
      p->free_va_count++;
      e[1].start = start + bytes;
      e[1].bytes = tail;
      e->bytes = head;
    }
    *out = start;
    return true;
  }
  return false;
}

static void va_free_locked(paged_t *p, uint64_t start, uint64_t bytes) {
  ACCEL_ASSERT_HELD(&p->lock);
  uint32_t i = 0;
  while (i < p->free_va_count && p->free_va[i].start < start) {
    i++;
  }
  bool merge_prev = i > 0 && p->free_va[i - 1].start +
                                     p->free_va[i - 1].bytes ==
                                 start;
  bool merge_next =
      i < p->free_va_count && start + bytes == p->free_va[i].start;
  if (merge_prev && merge_next) {
    p->free_va[i - 1].bytes += bytes + p->free_va[i].bytes;
    memmove(&p->free_va[i], &p->free_va[i + 1],
            (p->free_va_count - i - 1) * sizeof(va_extent_t));
    p->free_va_count--;
  } else if (merge_prev) {
    p->free_va[i - 1].bytes += bytes;
  } else if (merge_next) {
    p->free_va[i].start = start;
    p->free_va[i].bytes += bytes;
  } else {
    if (p->free_va_count == p->free_va_capacity) {
      uint32_t cap = p->free_va_capacity * 2;
      va_extent_t *grown = realloc(p->free_va, cap * sizeof(*grown));
      if (grown == NULL) {
        return;  // the range leaks from this pool's view; never corrupts
      }
      p->free_va = grown;
      p->free_va_capacity = cap;
    }
    memmove(&p->free_va[i + 1], &p->free_va[i],
            (p->free_va_count - i) * sizeof(va_extent_t));
    p->free_va[i].start = start;
    p->free_va[i].bytes = bytes;
    p->free_va_count++;
  }
}

// Takes [start, start + bytes) out of the free ranges if all of it is free.
static bool va_claim_locked(paged_t *p, uint64_t start, uint64_t bytes) {
  ACCEL_ASSERT_HELD(&p->lock);
  for (uint32_t i = 0; i < p->free_va_count; ++i) {
    va_extent_t *e = &p->free_va[i];
    if (e->start == start && e->bytes >= bytes) {
      e->start += bytes;
      e->bytes -= bytes;
      if (e->bytes == 0) {
        memmove(e, e + 1, (p->free_va_count - i - 1) * sizeof(*e));
        p->free_va_count--;
      }
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------
// Live buffer index (variable sizes).
// ---------------------------------------------------------------------------

static uint32_t live_find_locked(paged_t *p, uint64_t address) {
  ACCEL_ASSERT_HELD(&p->lock);
  uint32_t lo = 0, hi = p->live_count;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (p->live[mid]->address < address) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

static bool live_insert_locked(paged_t *p, accel_buffer_t *buf) {
  ACCEL_ASSERT_HELD(&p->lock);
  if (p->live_count == p->live_capacity) {
    uint32_t cap = p->live_capacity ? p->live_capacity * 2 : 64;
    accel_buffer_t **grown = realloc(p->live, cap * sizeof(*grown));
    if (grown == NULL) {
      return false;
    }
    p->live = grown;
    p->live_capacity = cap;
  }
  uint32_t i = live_find_locked(p, buf->address);
  memmove(&p->live[i + 1], &p->live[i],
          (p->live_count - i) * sizeof(*p->live));
  p->live[i] = buf;
  p->live_count++;
  return true;
}

static void live_remove_locked(paged_t *p, accel_buffer_t *buf) {
  ACCEL_ASSERT_HELD(&p->lock);
  uint32_t i = live_find_locked(p, buf->address);
  if (i < p->live_count && p->live[i] == buf) {
    memmove(&p->live[i], &p->live[i + 1],
            (p->live_count - i - 1) * sizeof(*p->live));
    p->live_count--;
  }
}

// ---------------------------------------------------------------------------
// Variable-size buffers.
// ---------------------------------------------------------------------------

// Maps pages [from, to) of |buf|. On failure the pages mapped by this call
// are unmapped and returned to the free list. Lock held.
static accel_status_t map_pages_locked(paged_t *p, accel_buffer_t *buf,
                                       uint32_t to) {
  ACCEL_ASSERT_HELD(&p->lock);
  accel_device_t *dev = p->pool.base.device;
  if (to > buf->u.paged.page_capacity) {
    uint32_t cap = buf->u.paged.page_capacity ? buf->u.paged.page_capacity
                                              : 4;
    while (cap < to) {
      cap *= 2;
    }
    accel_mem_page_t **grown =
        realloc(buf->u.paged.pages, cap * sizeof(*grown));
    if (grown == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "paged pool: cannot grow a page list to %u", cap);
    }
    buf->u.paged.pages = grown;
    buf->u.paged.page_capacity = cap;
  }
  uint32_t from = buf->u.paged.page_count;
  for (uint32_t i = from; i < to; ++i) {
    accel_mem_page_t *pg = NULL;
    accel_status_t st = page_take_locked(p, &pg);
    uint64_t at = buf->address + (uint64_t)i * p->page_bytes;
    if (st == ACCEL_OK) {
      st = dev->driver->memory->phys_map(dev->drv, at, pg->phys, 0, p->page_bytes);
      if (st != ACCEL_OK) {
        pg->next = p->free_pages;
        p->free_pages = pg;
        p->free_page_count++;
      }
    }
    if (st != ACCEL_OK) {
      for (uint32_t k = i; k > from; --k) {
        accel_mem_page_t *undo = buf->u.paged.pages[k - 1];
        dev->driver->memory->phys_unmap(dev->drv,
                                buf->address + (uint64_t)(k - 1) * p->page_bytes,
                                p->page_bytes);
        undo->next = p->free_pages;
        p->free_pages = undo;
        p->free_page_count++;
      }
      buf->u.paged.page_count = from;
      return st;
    }
    buf->u.paged.pages[i] = pg;
    buf->u.paged.page_count = i + 1;
  }
  return ACCEL_OK;
}

static void unmap_all_locked(paged_t *p, accel_buffer_t *buf) {
  ACCEL_ASSERT_HELD(&p->lock);
  accel_device_t *dev = p->pool.base.device;
  void *host = dev->driver->memory->host_pointer(dev->drv, buf->address);
  if (host != NULL) {
    ACCEL_MEM_UNPOISON(host, (uint64_t)buf->u.paged.page_count * p->page_bytes);
  }
  for (uint32_t i = buf->u.paged.page_count; i > 0; --i) {
    accel_mem_page_t *pg = buf->u.paged.pages[i - 1];
    dev->driver->memory->phys_unmap(dev->drv,
                            buf->address + (uint64_t)(i - 1) * p->page_bytes,
                            p->page_bytes);
    pg->next = p->free_pages;
    p->free_pages = pg;
    p->free_page_count++;
  }
  buf->u.paged.page_count = 0;
}

static accel_status_t block_alloc(paged_t *p, uint64_t size, uint32_t tag,
                                  accel_buffer_t **out);

accel_status_t accel_mem_paged_alloc(accel_mem_allocator_t *a, uint64_t size,
                                     uint64_t alignment, uint64_t max_size,
                                     uint32_t tag, accel_buffer_t **out) {
  paged_t *p = (paged_t *)a;
  if (p->block_bytes != 0) {
    if (size > p->block_bytes) {
      accel_mem_counters_fail(&a->counters);
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "block pool \"%s\" hands out blocks of %llu bytes, "
                         "not %llu",
                         a->name, (unsigned long long)p->block_bytes,
                         (unsigned long long)size);
    }
    return block_alloc(p, size, tag, out);
  }
  if (alignment > p->page_bytes && (alignment & (alignment - 1)) == 0) {
    // fine: va_alloc aligns the start
  }
  if (max_size < size) {
    max_size = size;
  }
  if (max_size > p->va_bytes) {
    accel_mem_counters_fail(&a->counters);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "paged pool \"%s\": %llu bytes exceed its range of "
                       "%llu bytes",
                       a->name, (unsigned long long)max_size,
                       (unsigned long long)p->va_bytes);
  }
  uint64_t va_bytes = accel_mem_round_up(max_size, p->page_bytes);
  uint32_t pages = (uint32_t)(accel_mem_round_up(size, p->page_bytes) /
                              p->page_bytes);
  accel_buffer_t *buf = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_record_alloc(a->mem, &buf));
  memset(&buf->u, 0, sizeof(buf->u));
  pthread_mutex_lock(&p->lock);
  uint64_t address = 0;
  accel_status_t st = ACCEL_OK;
  if (!va_alloc_locked(p, va_bytes,
                       alignment > p->page_bytes ? alignment : p->page_bytes,
                       &address)) {
    uint64_t largest = 0;
    for (uint32_t i = 0; i < p->free_va_count; ++i) {
      if (p->free_va[i].bytes > largest) {
        largest = p->free_va[i].bytes;
      }
    }
    st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                     "paged pool \"%s\": no free range of %llu bytes "
                     "(largest free range %llu bytes)",
                     a->name, (unsigned long long)va_bytes,
                     (unsigned long long)largest);
    goto err_unlock;
  }
  buf->address = address;
  buf->u.paged.va_bytes = va_bytes;
  st = map_pages_locked(p, buf, pages);
  if (st != ACCEL_OK) {
    goto err_free_va;
  }
  // The record is complete before it is published in the live index: a
  // lookup by address on another thread reads it under the lock, and must
  // not race with these stores (ThreadSanitizer caught the record being
  // written after the unlock).
  accel_mem_record_init(buf, a, address, size, ACCEL_MEMORY_KIND_DEVICE);
  buf->reserved_bytes = (uint64_t)pages * p->page_bytes;
  buf->tag_index = tag;
  if (!live_insert_locked(p, buf)) {
    st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                     "paged pool: cannot grow the buffer index");
    goto err_unmap;
  }
  accel_mem_counters_alloc(&a->counters, size);
  pthread_mutex_unlock(&p->lock);
  *out = buf;
  return ACCEL_OK;

err_unmap:
  unmap_all_locked(p, buf);
err_free_va:
  va_free_locked(p, address, va_bytes);
err_unlock:
  accel_mem_counters_fail(&a->counters);
  trim_locked(p, p->release_threshold);
  pthread_mutex_unlock(&p->lock);
  free(buf->u.paged.pages);
  buf->u.paged.pages = NULL;
  accel_mem_record_free(a->mem, buf);
  return accel_error_context(st, "paged alloc of %llu bytes",
                             (unsigned long long)size);
}

static accel_status_t paged_grow(accel_mem_allocator_t *a, accel_buffer_t *buf,
                                 uint64_t new_size) {
  paged_t *p = (paged_t *)a;
  if (p->block_bytes != 0) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "buffer grow: blocks of block pool \"%s\" have a "
                       "fixed size",
                       a->name);
  }
  if (new_size <= buf->size_bytes) {
    return ACCEL_OK;
  }
  pthread_mutex_lock(&p->lock);
  accel_status_t st = ACCEL_OK;
  uint64_t va_needed = accel_mem_round_up(new_size, p->page_bytes);
  if (va_needed > buf->u.paged.va_bytes) {
    uint64_t extra = va_needed - buf->u.paged.va_bytes;
    if (!va_claim_locked(p, buf->address + buf->u.paged.va_bytes, extra)) {
      st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "buffer grow to %llu bytes: the %llu bytes of virtual "
                       "range behind the buffer are taken (allocate with "
                       "max_size_bytes to keep room)",
                       (unsigned long long)new_size,
                       (unsigned long long)extra);
      goto out_unlock;
    }
    buf->u.paged.va_bytes = va_needed;
  }
  uint32_t pages = (uint32_t)(va_needed / p->page_bytes);
  uint32_t before = buf->u.paged.page_count;
  st = map_pages_locked(p, buf, pages);
  if (st != ACCEL_OK) {
    accel_mem_counters_fail(&a->counters);
    st = accel_error_context(st, "buffer grow from %llu to %llu bytes",
                             (unsigned long long)buf->size_bytes,
                             (unsigned long long)new_size);
    goto out_unlock;
  }
  accel_mem_counters_alloc(&a->counters, new_size - buf->size_bytes);
  // A grow is not an allocation: undo the count the helper added.
  atomic_fetch_sub_explicit(&a->counters.alloc_count, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&a->counters.live_count, 1, memory_order_relaxed);
  if (buf->tag_index != 0) {
    accel_mem_tag_account(a->mem, buf->tag_index,
                          (int64_t)(new_size - buf->size_bytes), 0);
  }
  buf->reserved_bytes += (uint64_t)(pages - before) * p->page_bytes;
  buf->size_bytes = new_size;
out_unlock:
  pthread_mutex_unlock(&p->lock);
  return st;
}

static void block_free(paged_t *p, accel_buffer_t *buf);

static void paged_free(accel_mem_allocator_t *a, accel_buffer_t *buf) {
  paged_t *p = (paged_t *)a;
  if (p->block_bytes != 0) {
    block_free(p, buf);
    return;
  }
  pthread_mutex_lock(&p->lock);
  live_remove_locked(p, buf);
  unmap_all_locked(p, buf);
  va_free_locked(p, buf->address, buf->u.paged.va_bytes);
  trim_locked(p, p->release_threshold);
  pthread_mutex_unlock(&p->lock);
  free(buf->u.paged.pages);
  buf->u.paged.pages = NULL;
  uint64_t size = buf->size_bytes;
  accel_mem_record_free(a->mem, buf);
  accel_mem_counters_free(&a->counters, size);  // last: see its comment
}

// ---------------------------------------------------------------------------
// Fixed-size blocks.
// ---------------------------------------------------------------------------

static accel_status_t block_page_add_locked(paged_t *p) {
  ACCEL_ASSERT_HELD(&p->lock);
  accel_device_t *dev = p->pool.base.device;
  accel_mem_page_t *pg = NULL;
  ACCEL_RETURN_IF_ERROR(page_take_locked(p, &pg));
  accel_status_t st = ACCEL_OK;
  uint64_t at = 0;
  if (!va_alloc_locked(p, p->page_bytes, p->page_bytes, &at)) {
    st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                     "block pool \"%s\": its virtual range is full",
                     p->pool.base.name);
    goto err_put_page;
  }
  if (pg->free_blocks == NULL) {
    pg->free_blocks = malloc(p->blocks_per_page * sizeof(*pg->free_blocks));
    pg->recs = calloc(p->blocks_per_page, sizeof(*pg->recs));
    if (pg->free_blocks == NULL || pg->recs == NULL) {
      st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "block pool: cannot allocate page metadata");
      goto err_free_va;
    }
  }
  st = dev->driver->memory->phys_map(dev->drv, at, pg->phys, 0, p->page_bytes);
  if (st != ACCEL_OK) {
    goto err_free_va;
  }
  pg->address = at;
  pg->live_blocks = 0;
  pg->free_count = p->blocks_per_page;
  for (uint32_t i = 0; i < p->blocks_per_page; ++i) {
    pg->free_blocks[i] = p->blocks_per_page - 1 - i;
  }
  p->page_by_slot[(at - p->base) / p->page_bytes] = pg;
  pg->prev = NULL;
  pg->next = p->block_pages;
  if (pg->next != NULL) {
    pg->next->prev = pg;
  }
  p->block_pages = pg;
  return ACCEL_OK;

err_free_va:
  va_free_locked(p, at, p->page_bytes);
err_put_page:
  pg->next = p->free_pages;
  p->free_pages = pg;
  p->free_page_count++;
  return st;
}

static void block_list_remove(paged_t *p, accel_mem_page_t *pg) {
  if (pg->prev != NULL) {
    pg->prev->next = pg->next;
  } else {
    p->block_pages = pg->next;
  }
  if (pg->next != NULL) {
    pg->next->prev = pg->prev;
  }
  pg->next = pg->prev = NULL;
}

static accel_status_t block_alloc(paged_t *p, uint64_t size, uint32_t tag,
                                  accel_buffer_t **out) {
  accel_mem_allocator_t *a = &p->pool.base;
  accel_buffer_t *buf = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_record_alloc(a->mem, &buf));
  memset(&buf->u, 0, sizeof(buf->u));
  pthread_mutex_lock(&p->lock);
  if (p->block_pages == NULL) {
    accel_status_t st = block_page_add_locked(p);
    if (st != ACCEL_OK) {
      accel_mem_counters_fail(&a->counters);
      pthread_mutex_unlock(&p->lock);
      accel_mem_record_free(a->mem, buf);
      return accel_error_context(st, "block alloc of %llu bytes",
                                 (unsigned long long)size);
    }
  }
  accel_mem_page_t *pg = p->block_pages;
  uint32_t block = pg->free_blocks[--pg->free_count];
  uint64_t address = pg->address + (uint64_t)block * p->block_bytes;
  // Complete before it is published in recs[] (as in the paged path).
  accel_mem_record_init(buf, a, address, size, ACCEL_MEMORY_KIND_DEVICE);
  buf->reserved_bytes = p->block_bytes;
  buf->tag_index = tag;
  buf->size_class = block;
  pg->live_blocks++;
  pg->recs[block] = buf;
  if (pg->free_count == 0) {
    block_list_remove(p, pg);
  }
  accel_mem_counters_alloc(&a->counters, size);
  pthread_mutex_unlock(&p->lock);
  void *host = a->device->driver->memory->host_pointer(a->device->drv, address);
  if (host != NULL) {
    ACCEL_MEM_UNPOISON(host, size);
  }
  *out = buf;
  return ACCEL_OK;
}

static void block_free(paged_t *p, accel_buffer_t *buf) {
  accel_mem_allocator_t *a = &p->pool.base;
  accel_device_t *dev = a->device;
  void *host = dev->driver->memory->host_pointer(dev->drv, buf->address);
  if (host != NULL) {
    ACCEL_MEM_POISON(host, p->block_bytes);
  }
  pthread_mutex_lock(&p->lock);
  accel_mem_page_t *pg =
      p->page_by_slot[(buf->address - p->base) / p->page_bytes];
  uint32_t block = buf->size_class;
  pg->recs[block] = NULL;
  pg->free_blocks[pg->free_count++] = block;
  pg->live_blocks--;
  if (pg->free_count == 1) {
    pg->prev = NULL;
    pg->next = p->block_pages;
    if (pg->next != NULL) {
      pg->next->prev = pg;
    }
    p->block_pages = pg;
  }
  // An empty page beyond the threshold leaves: unmap it into the free pages
  // (then trim clears and returns what exceeds the threshold).
  if (pg->live_blocks == 0) {
    uint64_t cached = 0;
    for (accel_mem_page_t *q = p->block_pages; q != NULL; q = q->next) {
      if (q->live_blocks == 0) {
        cached += p->page_bytes;
      }
    }
    if (cached > p->release_threshold) {
      block_list_remove(p, pg);
      p->page_by_slot[(pg->address - p->base) / p->page_bytes] = NULL;
      if (host != NULL) {
        ACCEL_MEM_UNPOISON(
            dev->driver->memory->host_pointer(dev->drv, pg->address), p->page_bytes);
      }
      dev->driver->memory->phys_unmap(dev->drv, pg->address, p->page_bytes);
      va_free_locked(p, pg->address, p->page_bytes);
      pg->next = p->free_pages;
      p->free_pages = pg;
      p->free_page_count++;
      trim_locked(p, 0);
    }
  }
  pthread_mutex_unlock(&p->lock);
  uint64_t size = buf->size_bytes;
  accel_mem_record_free(a->mem, buf);
  accel_mem_counters_free(&a->counters, size);  // last: see its comment
}

static void paged_trim(accel_mem_allocator_t *a, uint64_t keep) {
  paged_t *p = (paged_t *)a;
  accel_device_t *dev = a->device;
  pthread_mutex_lock(&p->lock);
  if (p->block_bytes != 0) {
    accel_mem_page_t *pg = p->block_pages;
    while (pg != NULL) {
      accel_mem_page_t *next = pg->next;
      if (pg->live_blocks == 0 && p->pages_held * p->page_bytes > keep) {
        block_list_remove(p, pg);
        p->page_by_slot[(pg->address - p->base) / p->page_bytes] = NULL;
        void *host = dev->driver->memory->host_pointer(dev->drv, pg->address);
        if (host != NULL) {
          ACCEL_MEM_UNPOISON(host, p->page_bytes);
        }
        uint64_t at = pg->address;
        page_return_locked(p, pg, at);  // frees |pg|
        dev->driver->memory->phys_unmap(dev->drv, at, p->page_bytes);
        va_free_locked(p, at, p->page_bytes);
      }
      pg = next;
    }
  }
  trim_locked(p, keep);
  pthread_mutex_unlock(&p->lock);
}

static bool paged_busy(accel_mem_allocator_t *a) {
  // Acquire: pairs with the release in accel_mem_counters_free.
  return atomic_load_explicit(&a->counters.live_count,
                              memory_order_acquire) > 0;
}

static accel_status_t paged_lookup(accel_mem_allocator_t *a, uint64_t address,
                                   accel_buffer_t **out) {
  paged_t *p = (paged_t *)a;
  if (address < p->base || address >= p->base + p->va_bytes) {
    return ACCEL_ERROR_NOT_FOUND;
  }
  accel_status_t st = ACCEL_OK;
  pthread_mutex_lock(&p->lock);
  accel_buffer_t *hit = NULL;
  uint64_t within = 0;
  if (p->block_bytes != 0) {
    accel_mem_page_t *pg =
        p->page_by_slot[(address - p->base) / p->page_bytes];
    if (pg != NULL) {
      uint64_t off = address - pg->address;
      uint64_t block = off / p->block_bytes;
      within = off % p->block_bytes;
      hit = block < p->blocks_per_page ? pg->recs[block] : NULL;
    }
  } else {
    uint32_t i = live_find_locked(p, address);
    if (i < p->live_count && p->live[i]->address == address) {
      hit = p->live[i];
    } else if (i > 0 && address < p->live[i - 1]->address +
                                      p->live[i - 1]->u.paged.va_bytes) {
      hit = p->live[i - 1];
      within = address - hit->address;
    }
  }
  if (hit == NULL) {
    st = accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                     "address 0x%llx lies in paged pool \"%s\" but is not a "
                     "live allocation (never given or already freed)",
                     (unsigned long long)address, a->name);
  } else if (within != 0) {
    st = accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                     "address 0x%llx lies inside buffer 0x%llx at offset "
                     "%llu, not at its start",
                     (unsigned long long)address,
                     (unsigned long long)hit->address,
                     (unsigned long long)within);
  } else {
    *out = hit;
  }
  pthread_mutex_unlock(&p->lock);
  return st;
}

static void paged_rebind(accel_mem_allocator_t *a, accel_buffer_t *from,
                         accel_buffer_t *to) {
  paged_t *p = (paged_t *)a;
  pthread_mutex_lock(&p->lock);
  if (p->block_bytes != 0) {
    accel_mem_page_t *pg =
        p->page_by_slot[(from->address - p->base) / p->page_bytes];
    if (pg != NULL && pg->recs[from->size_class] == from) {
      pg->recs[from->size_class] = to;
    }
  } else {
    uint32_t i = live_find_locked(p, from->address);
    if (i < p->live_count && p->live[i] == from) {
      p->live[i] = to;
    }
  }
  pthread_mutex_unlock(&p->lock);
}

static void paged_destroy(accel_mem_allocator_t *a) {
  paged_t *p = (paged_t *)a;
  accel_device_t *dev = a->device;
  // Live buffers at this point are leaks of the caller; their pages still go
  // back (cleared) so that nothing outlives the pool.
  pthread_mutex_lock(&p->lock);
  for (uint32_t i = 0; i < p->live_count; ++i) {
    unmap_all_locked(p, p->live[i]);
    free(p->live[i]->u.paged.pages);
    p->live[i]->u.paged.pages = NULL;
  }
  if (p->block_bytes != 0) {
    pthread_mutex_unlock(&p->lock);
    paged_trim(a, 0);
    pthread_mutex_lock(&p->lock);
    for (uint64_t i = 0; i < p->va_bytes / p->page_bytes; ++i) {
      accel_mem_page_t *pg = p->page_by_slot[i];
      if (pg != NULL) {
        uint64_t at = pg->address;
        page_return_locked(p, pg, at);  // frees |pg|
        dev->driver->memory->phys_unmap(dev->drv, at, p->page_bytes);
      }
    }
  }
  trim_locked(p, 0);
  pthread_mutex_unlock(&p->lock);
  dev->driver->memory->va_release(dev->drv, p->base, p->va_bytes + p->page_bytes);
  free(p->free_va);
  free(p->live);
  free(p->page_by_slot);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

static const accel_mem_allocator_vtable_t k_paged_vtable = {
    .destroy = paged_destroy,
    .free = paged_free,
    .grow = paged_grow,
    .trim = paged_trim,
    .lookup = paged_lookup,
    .busy = paged_busy,
    .rebind = paged_rebind,
};

accel_status_t accel_mem_paged_create(accel_mem_device_t *mem,
                                      const accel_mempool_desc_t *desc,
                                      accel_mem_allocator_t **out) {
  accel_device_t *dev = mem->device;
  uint64_t page = desc->page_size_bytes ? desc->page_size_bytes
                                        : ACCEL_MEM_CHUNK_BYTES;
  if (page % dev->info.page_size != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "paged pool: page size %llu is not a multiple of the "
                       "device page size %llu",
                       (unsigned long long)page,
                       (unsigned long long)dev->info.page_size);
  }
  if (desc->block_size_bytes > page ||
      (desc->block_size_bytes != 0 && desc->block_size_bytes % 256 != 0)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "block pool: block size %llu must be a multiple of "
                       "256 and at most the page size %llu",
                       (unsigned long long)desc->block_size_bytes,
                       (unsigned long long)page);
  }
  uint64_t limit = desc->max_bytes ? desc->max_bytes : dev->info.memory_bytes;
  if (limit == 0) {
    limit = 1ull << 30;
  }
  limit = accel_mem_round_up(limit, page);
  // Virtual room: address space is cheap, so keep 4x the physical limit for
  // buffers' growth headroom (at least 64 GiB).
  uint64_t va = limit * 4 < (64ull << 30) ? (64ull << 30) : limit * 4;
  if (desc->block_size_bytes != 0) {
    va = limit;  // blocks never grow
  }
  va = accel_mem_round_up(va, page);
  paged_t *p = calloc(1, sizeof(*p));
  if (p == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "paged pool: cannot allocate %zu bytes", sizeof(*p));
  }
  accel_status_t st = ACCEL_OK;
  p->page_bytes = page;
  p->block_bytes = desc->block_size_bytes;
  p->blocks_per_page =
      p->block_bytes ? (uint32_t)(page / p->block_bytes) : 0;
  p->limit_bytes = limit;
  p->va_bytes = va;
  p->release_threshold = desc->release_threshold_bytes;
  p->free_va_capacity = 16;
  p->free_va = malloc(p->free_va_capacity * sizeof(*p->free_va));
  if (p->block_bytes != 0) {
    p->page_by_slot = calloc(va / page, sizeof(*p->page_by_slot));
  }
  if (p->free_va == NULL || (p->block_bytes != 0 && p->page_by_slot == NULL)) {
    st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                     "paged pool: cannot allocate its tables");
    goto err_free_pool;
  }
  // One extra page at the end: scratch mapping for clearing pages.
  st = dev->driver->memory->va_reserve(dev->drv, va + page, page, &p->base);
  if (st != ACCEL_OK) {
    goto err_free_pool;
  }
  p->free_va[0].start = p->base;
  p->free_va[0].bytes = va;
  p->free_va_count = 1;
  pthread_mutex_init(&p->lock, NULL);
  accel_mem_allocator_t *a = &p->pool.base;
  a->vt = &k_paged_vtable;
  a->mem = mem;
  a->device = dev;
  a->type = ACCEL_MEMPOOL_TYPE_PAGED;
  snprintf(a->name, sizeof(a->name), "%s", desc->name ? desc->name : "paged");
  accel_mem_register(mem, a);
  *out = a;
  return ACCEL_OK;

err_free_pool:
  free(p->free_va);
  free(p->page_by_slot);
  free(p);
  return accel_error_context(st, "creating paged pool on %s", dev->info.id);
}
