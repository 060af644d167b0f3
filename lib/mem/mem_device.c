// Per-device memory state: the default allocators, the list of pools, the
// buffer-record arenas and the tag table. Created on first use and torn down
// by the runtime (accel_device.mem_fini) before the device closes.
#include <stdio.h>
#include <stdlib.h>

#include "mem/mem_internal.h"
#include "trace/trace_hooks.h"

#define RECORDS_PER_ARENA 256

// One record per cache-line-aligned slot: the slab's hot fields then share
// one line.
typedef struct record_slot {
  accel_buffer_t record;
} __attribute__((aligned(64))) record_slot_t;

static void mem_device_destroy(accel_mem_device_t *mem) {
  // Defaults and user pools alike; user pools still alive at runtime
  // destruction are reclaimed here (their buffers must be gone by then).
  // Stream-ordered pools first: they give their cached memory back to the
  // allocators behind them.
  for (accel_mem_allocator_t **p = &mem->allocators; *p != NULL;) {
    accel_mem_allocator_t *a = *p;
    if (a->type == ACCEL_MEMPOOL_TYPE_STREAM_ORDERED) {
      *p = a->next;
      a->vt->destroy(a);
    } else {
      p = &a->next;
    }
  }
  while (mem->allocators != NULL) {
    accel_mem_allocator_t *a = mem->allocators;
    mem->allocators = a->next;
    a->vt->destroy(a);
  }
  accel_mem_pages_deinit(mem);
  for (uint32_t i = 0; i < mem->arena_count; ++i) {
    free(mem->arenas[i]);
  }
  free(mem->arenas);
  pthread_mutex_destroy(&mem->lock);
  pthread_mutex_destroy(&mem->record_lock);
  pthread_mutex_destroy(&mem->tag_lock);
  free(mem);
}

static void mem_fini(accel_device_t *device) {
  accel_mem_device_t *mem =
      atomic_load_explicit(&device->mem, memory_order_acquire);
  if (mem != NULL) {
    accel_trace_device_memory_source(device, NULL, NULL);
    mem_device_destroy(mem);
    atomic_store_explicit(&device->mem, NULL, memory_order_relaxed);
  }
}

static void detached_free(accel_mem_allocator_t *a, accel_buffer_t *buf) {
  accel_mem_record_free(a->mem, buf);
}

static void detached_destroy(accel_mem_allocator_t *a) {}

static const accel_mem_allocator_vtable_t k_detached_vtable = {
    .destroy = detached_destroy,
    .free = detached_free,
};

static accel_status_t mem_device_create(accel_device_t *device,
                                        accel_mem_device_t **out) {
  accel_mem_device_t *mem = calloc(1, sizeof(*mem));
  if (mem == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "memory state: cannot allocate %zu bytes",
                       sizeof(*mem));
  }
  mem->device = device;
  pthread_mutex_init(&mem->lock, NULL);
  pthread_mutex_init(&mem->record_lock, NULL);
  pthread_mutex_init(&mem->tag_lock, NULL);
  mem->tag_count = 1;
  mem->detached.vt = &k_detached_vtable;
  mem->detached.mem = mem;
  mem->detached.device = device;
  mem->detached.type = ACCEL_MEM_TYPE_DEDICATED;
  snprintf(mem->detached.name, sizeof(mem->detached.name), "detached");
  snprintf(mem->tags[0].name, sizeof(mem->tags[0].name), "(untagged)");
  accel_status_t st = accel_mem_pages_init(&mem->pages);
  if (st != ACCEL_OK) {
    goto err_destroy;
  }
  accel_mempool_desc_t slab_desc = {.struct_size = sizeof(slab_desc),
                                    .type = ACCEL_MEMPOOL_TYPE_SLAB,
                                    .name = "slab"};
  st = accel_mem_slab_create(mem, &slab_desc, &mem->slab);
  if (st != ACCEL_OK) {
    goto err_destroy;
  }
  accel_mempool_desc_t paged_desc = {
      .struct_size = sizeof(paged_desc),
      .type = ACCEL_MEMPOOL_TYPE_PAGED,
      .release_threshold_bytes = 64ull << 20,
      .name = "paged"};
  st = accel_mem_paged_create(mem, &paged_desc, &mem->paged);
  if (st != ACCEL_OK) {
    goto err_destroy;
  }
  accel_mempool_desc_t async_desc = {
      .struct_size = sizeof(async_desc),
      .type = ACCEL_MEMPOOL_TYPE_STREAM_ORDERED,
      .release_threshold_bytes = 64ull << 20,
      .name = "stream-ordered"};
  st = accel_mem_async_create(mem, &async_desc, &mem->async);
  if (st != ACCEL_OK) {
    goto err_destroy;
  }
  st = accel_mem_host_create(mem, &mem->host);
  if (st != ACCEL_OK) {
    goto err_destroy;
  }
  st = accel_mem_dedicated_create(mem, &mem->dedicated);
  if (st != ACCEL_OK) {
    goto err_destroy;
  }
  *out = mem;
  return ACCEL_OK;

err_destroy:
  mem_device_destroy(mem);
  return accel_error_context(st, "memory state of %s", device->info.id);
}

accel_status_t accel_mem_device_get(accel_device_t *device,
                                    accel_mem_device_t **out_mem) {
  // Acquire: pairs with the release CAS below, so that a thread seeing the
  // pointer sees the initialized state.
  accel_mem_device_t *mem =
      atomic_load_explicit(&device->mem, memory_order_acquire);
  if (mem != NULL) {
    *out_mem = mem;
    return ACCEL_OK;
  }
  accel_mem_device_t *fresh = NULL;
  ACCEL_RETURN_IF_ERROR(mem_device_create(device, &fresh));
  void *expected = NULL;
  // Release: publishes the initialized state; acquire on failure to read the
  // winner's.
  if (atomic_compare_exchange_strong_explicit(&device->mem, &expected, fresh,
                                              memory_order_acq_rel,
                                              memory_order_acquire)) {
    device->mem_fini = mem_fini;
    accel_trace_device_memory_source(device, accel_mem_trace_source, fresh);
    *out_mem = fresh;
  } else {
    mem_device_destroy(fresh);
    *out_mem = expected;
  }
  return ACCEL_OK;
}

void accel_mem_register(accel_mem_device_t *mem, accel_mem_allocator_t *a) {
  pthread_mutex_lock(&mem->lock);
  a->next = mem->allocators;
  mem->allocators = a;
  pthread_mutex_unlock(&mem->lock);
}

void accel_mem_unregister(accel_mem_device_t *mem, accel_mem_allocator_t *a) {
  pthread_mutex_lock(&mem->lock);
  for (accel_mem_allocator_t **p = &mem->allocators; *p != NULL;
       p = &(*p)->next) {
    if (*p == a) {
      *p = a->next;
      // Its counts stay in the device's: counters only ever grow.
      mem->retired_allocs +=
          atomic_load_explicit(&a->counters.alloc_count, memory_order_relaxed);
      mem->retired_frees +=
          atomic_load_explicit(&a->counters.free_count, memory_order_relaxed);
      mem->retired_failures += atomic_load_explicit(
          &a->counters.failure_count, memory_order_relaxed);
      break;
    }
  }
  pthread_mutex_unlock(&mem->lock);
}

accel_status_t accel_mem_record_alloc(accel_mem_device_t *mem,
                                      accel_buffer_t **out) {
  pthread_mutex_lock(&mem->record_lock);
  if (mem->free_records == NULL) {
    if (mem->arena_count == mem->arena_capacity) {
      uint32_t cap = mem->arena_capacity ? mem->arena_capacity * 2 : 16;
      void **grown = realloc(mem->arenas, cap * sizeof(*grown));
      if (grown == NULL) {
        pthread_mutex_unlock(&mem->record_lock);
        return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                           "buffer records: cannot grow the arena list to %u",
                           cap);
      }
      mem->arenas = grown;
      mem->arena_capacity = cap;
    }
    record_slot_t *arena = aligned_alloc(
        _Alignof(record_slot_t), RECORDS_PER_ARENA * sizeof(record_slot_t));
    if (arena != NULL) {
      memset(arena, 0, RECORDS_PER_ARENA * sizeof(record_slot_t));
    }
    if (arena == NULL) {
      pthread_mutex_unlock(&mem->record_lock);
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "buffer records: cannot allocate %zu bytes",
                         RECORDS_PER_ARENA * sizeof(*arena));
    }
    mem->arenas[mem->arena_count++] = arena;
    for (uint32_t i = RECORDS_PER_ARENA; i > 0; --i) {
      accel_buffer_t *rec = &arena[i - 1].record;
      atomic_init(&rec->state, ACCEL_BUFFER_STATE_FREE);
      rec->next = mem->free_records;
      mem->free_records = rec;
    }
    mem->free_records_tail = &arena[RECORDS_PER_ARENA - 1].record;
  }
  accel_buffer_t *rec = mem->free_records;
  mem->free_records = rec->next;
  if (mem->free_records == NULL) {
    mem->free_records_tail = NULL;
  }
  pthread_mutex_unlock(&mem->record_lock);
  rec->next = NULL;
  *out = rec;
  return ACCEL_OK;
}

void accel_mem_record_free(accel_mem_device_t *mem, accel_buffer_t *rec) {
  // Relaxed: the record lock below orders the store for the next taker.
  atomic_store_explicit(&rec->state, ACCEL_BUFFER_STATE_FREE,
                        memory_order_relaxed);
  rec->next = NULL;
  pthread_mutex_lock(&mem->record_lock);
  if (mem->free_records_tail != NULL) {
    mem->free_records_tail->next = rec;
  } else {
    mem->free_records = rec;
  }
  mem->free_records_tail = rec;
  pthread_mutex_unlock(&mem->record_lock);
}

static void buffer_last_ref(accel_object_t *object) {
  accel_buffer_t *buf = (accel_buffer_t *)object;
  accel_mem_allocator_t *a = buf->allocator;
  if (buf->tag_index != 0) {
    accel_mem_tag_account(a->mem, buf->tag_index,
                          -(int64_t)buf->size_bytes, -1);
  }
  accel_trace_buffer_free(buf->device, buf->address, buf->size_bytes,
                          buf->reserved_bytes);
  a->vt->free(a, buf);
}

void accel_mem_record_init(accel_buffer_t *rec, accel_mem_allocator_t *a,
                           uint64_t address, uint64_t size, uint32_t kind) {
  accel_object_init(&rec->object, buffer_last_ref);
  rec->device = a->device;
  rec->address = address;
  rec->size_bytes = size;
  rec->kind = kind;
  rec->allocator = a;
  rec->read_only = false;
  // Relaxed: the record is published to other threads through the caller's
  // own synchronization (returning the handle).
  atomic_store_explicit(&rec->state, ACCEL_BUFFER_STATE_LIVE,
                        memory_order_relaxed);
}

uint32_t accel_mem_tag_intern(accel_mem_device_t *mem, const char *tag) {
  if (tag == NULL || tag[0] == '\0') {
    return 0;
  }
  pthread_mutex_lock(&mem->tag_lock);
  uint32_t found = 0;
  for (uint32_t i = 1; i < mem->tag_count; ++i) {
    if (strncmp(mem->tags[i].name, tag, ACCEL_MEM_TAG_LEN - 1) == 0) {
      found = i;
      break;
    }
  }
  if (found == 0 && mem->tag_count < ACCEL_MEM_TAG_MAX) {
    found = mem->tag_count++;
    snprintf(mem->tags[found].name, sizeof(mem->tags[found].name), "%s", tag);
  }
  pthread_mutex_unlock(&mem->tag_lock);
  return found;
}

void accel_mem_tag_account(accel_mem_device_t *mem, uint32_t index,
                           int64_t bytes, int64_t count) {
  // Relaxed: independent counters.
  atomic_fetch_add_explicit(&mem->tags[index].bytes, bytes,
                            memory_order_relaxed);
  atomic_fetch_add_explicit(&mem->tags[index].count, count,
                            memory_order_relaxed);
}

accel_status_t accel_mem_owner_free_misuse(accel_buffer_t *buf,
                                          uint32_t state, const char *what) {
  if (state == ACCEL_BUFFER_STATE_FREE ||
      state == ACCEL_BUFFER_STATE_OWNER_FREED) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s: buffer %p (address 0x%llx) was already freed "
                       "(double free)",
                       what, (void *)buf, (unsigned long long)buf->address);
  }
  return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                     "%s: %p is not a buffer handle from accel", what,
                     (void *)buf);
}

accel_status_t accel_mem_zero(accel_device_t *device, uint64_t address,
                              uint64_t size) {
  void *p = device->driver->memory->host_pointer(device->drv, address);
  if (p == NULL && device->driver->memory->zero != NULL) {
    return device->driver->memory->zero(device->drv, address, size);
  }
  if (p == NULL) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "zeroing memory on %s needs a host-visible device",
                       device->info.id);
  }
  memset(p, 0, size);
  return ACCEL_OK;
}
