// DMA queues: creation, completion, counters. A queue owns one ring on each
// copy engine it uses; ring 0 (the home ring) runs every submit's semaphore
// waits and signals, and the other rings join it through their fences.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/lock.h"
#include "core/error.h"
#include "core/driver_sync.h"
#include "dma/dma_impl.h"
#include "mem/buffer_impl.h"
#include "trace/trace_hooks.h"

#define DEFAULT_RING_SIZE 1024u
#define MIN_RING_SIZE 16u
#define MAX_RING_SIZE 65536u

static void destroy_rings(accel_dma_queue_t *q, uint32_t count) {
  const accel_driver_t *drv = q->device->driver;
  // Every written descriptor retires (executed or aborted) before any ring
  // goes: rings wait on each other's fences, which must outlive the waits.
  for (uint32_t i = 0; i < count; ++i) {
    accel_dma_ring_state_t *r = &q->rings[i];
    (void)drv->copy->ring_wait(r->drv, r->tail, ACCEL_TIMEOUT_INFINITE);
  }
  for (uint32_t i = 0; i < count; ++i) {
    drv->copy->ring_destroy(q->rings[i].drv);
    accel_trace_stream_destroy(q->rings[i].drv);
  }
  for (uint32_t i = 0; i < count; ++i) {
    accel_semaphore_release(q->rings[i].fence);
  }
}

// Reads the caller's queue descriptor (any struct size from its first
// version on; NULL: defaults) into |*d| and checks it; |*out_ring_size| is
// the ring size it asks for or the default.
static accel_status_t read_queue_desc(const accel_dma_queue_desc_t *desc,
                                      accel_dma_queue_desc_t *d,
                                      uint32_t *out_ring_size) {
  *d = (accel_dma_queue_desc_t){.struct_size = sizeof(*d)};
  if (desc != NULL) {
    if (desc->struct_size < offsetof(accel_dma_queue_desc_t, name)) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "dma queue desc: struct_size %u is too small",
                         desc->struct_size);
    }
    memcpy(d, desc,
           desc->struct_size < sizeof(*d) ? desc->struct_size : sizeof(*d));
  }
  if ((d->flags & ~(uint32_t)(ACCEL_DMA_QUEUE_FLAG_NON_BLOCKING |
                             ACCEL_DMA_QUEUE_FLAG_ABORT_ON_DESTROY |
                             ACCEL_DMA_QUEUE_FLAG_NO_INLINE)) != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "dma queue desc: unknown flags 0x%x", d->flags);
  }
  uint32_t ring_size = d->ring_size != 0 ? d->ring_size : DEFAULT_RING_SIZE;
  if (ring_size < MIN_RING_SIZE || ring_size > MAX_RING_SIZE ||
      (ring_size & (ring_size - 1)) != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "dma queue desc: ring_size %u must be a power of two "
                       "from %u to %u",
                       d->ring_size, MIN_RING_SIZE, MAX_RING_SIZE);
  }
  *out_ring_size = ring_size;
  return ACCEL_OK;
}

// Creates the queue's |use| rings, rotating from engine |home| of |engines|,
// each with its fence and trace track; on failure destroys those made.
static accel_status_t create_rings(accel_dma_queue_t *q, uint32_t use,
                                   uint32_t home, uint32_t engines) {
  accel_device_t *device = q->device;
  for (uint32_t created = 0; created < use; ++created) {
    accel_dma_ring_state_t *r = &q->rings[created];
    accel_status_t st = accel_semaphore_create_internal(device, 0, &r->fence);
    if (st != ACCEL_OK) {
      destroy_rings(q, created);
      return st;
    }
    char ring_name[96];
    snprintf(ring_name, sizeof(ring_name), "%s/ring%u", q->name, created);
    accel_drv_dma_ring_params_t params = {
        .engine = (home + created) % engines,
        .slot_count = q->slot_count,
        .fence = r->fence->drv,
        .name = ring_name,
    };
    st = device->driver->copy->ring_create(device->drv, &params, &r->drv,
                                           &r->mem);
    if (st != ACCEL_OK) {
      accel_semaphore_release(r->fence);
      destroy_rings(q, created);
      return st;
    }
    // A track per ring (its engine's copies and fills for this queue).
    accel_trace_dma_queue_create(device, r->drv, ring_name,
                                 &r->trace_enqueued);
  }
  return ACCEL_OK;
}

// The queue as a member of its device's health (core/health_impl.h): failed
// through its rings' fences, which every wait and submit reports, and an
// abort of the rings, which ends what they would still run.
static void dma_health_fail(accel_health_member_t *member,
                            accel_status_t status, const char *message) {
  accel_dma_queue_t *q = (accel_dma_queue_t *)((char *)member -
                                               offsetof(accel_dma_queue_t,
                                                        health));
  const accel_driver_t *drv = q->device->driver;
  for (uint32_t i = 0; i < q->ring_count; ++i) {
    drv->sync->fail(q->rings[i].fence->drv, status, message);
  }
  // Release: a submitter that sees the flag finds the fences failed.
  atomic_store_explicit(&q->health_failed, 1, memory_order_release);
  if (drv->copy->ring_abort != NULL) {
    for (uint32_t i = 0; i < q->ring_count; ++i) {
      drv->copy->ring_abort(q->rings[i].drv);
    }
  }
}

static void dma_health_progress(accel_health_member_t *member,
                                uint64_t *out_retired,
                                uint64_t *out_submitted, bool *out_failed) {
  accel_dma_queue_t *q = (accel_dma_queue_t *)((char *)member -
                                               offsetof(accel_dma_queue_t,
                                                        health));
  // Relaxed: counts for the watchdog, which tolerates stale ones.
  *out_retired = atomic_load_explicit(q->rings[0].mem.head,
                                      memory_order_relaxed);
  *out_submitted = atomic_load_explicit(&q->last_tail, memory_order_relaxed);
  bool failed =
      atomic_load_explicit(&q->health_failed, memory_order_relaxed) != 0;
  for (uint32_t i = 0; i < q->ring_count && !failed; ++i) {
    failed = atomic_load_explicit(q->rings[i].mem.failed,
                                  memory_order_relaxed) != 0;
  }
  *out_failed = failed;
}

static const accel_health_member_ops_t k_dma_health_ops = {
    .fail = dma_health_fail,
    .progress = dma_health_progress,
};

accel_status_t accel_dma_queue_create(accel_device_t *device,
                                      const accel_dma_queue_desc_t *desc,
                                      accel_dma_queue_t **out_queue) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(out_queue != NULL, "out_queue (NULL)");
  accel_dma_queue_desc_t d;
  uint32_t ring_size = 0;
  ACCEL_RETURN_IF_ERROR(read_queue_desc(desc, &d, &ring_size));
  const accel_driver_t *drv = device->driver;
  // The copy table is optional as a whole: a backend without copy engines
  // leaves it NULL.
  uint32_t engines =
      drv->copy != NULL ? drv->copy->engine_count(device->drv) : 0;
  if (engines == 0) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "dma queue: device %s has no copy engines",
                       device->info.id);
  }
  uint32_t use = d.engine_count != 0 && d.engine_count < engines
                     ? d.engine_count
                     : engines;
  if (use > ACCEL_DMA_MAX_RINGS) {
    use = ACCEL_DMA_MAX_RINGS;
  }

  accel_dma_queue_t *q = calloc(1, sizeof(*q));
  if (q == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "dma queue: cannot allocate %zu bytes", sizeof(*q));
  }
  accel_status_t st = ACCEL_OK;
  q->rings = calloc(use, sizeof(*q->rings));
  if (q->rings == NULL) {
    st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                     "dma queue: cannot allocate %u ring records", use);
    goto err_free_queue;
  }
  uint32_t number = atomic_fetch_add_explicit(&device->dma_queue_counter, 1,
                                              memory_order_relaxed);
  q->device = device;
  q->flags = d.flags;
  q->slot_count = ring_size;
  q->inline_max_bytes =
      (d.flags & ACCEL_DMA_QUEUE_FLAG_NO_INLINE) != 0 ||
              drv->copy->ring_execute_now == NULL
          ? 0
          : device->runtime->dma_inline_max_bytes;
  if (d.name != NULL && d.name[0] != '\0') {
    snprintf(q->name, sizeof(q->name), "%s", d.name);
  } else {
    snprintf(q->name, sizeof(q->name), "dma%u", number);
  }
  // Home rings rotate over the engines so that queues share them evenly.
  st = create_rings(q, use, number % engines, engines);
  if (st != ACCEL_OK) {
    goto err_free_rings;
  }
  q->ring_count = use;
  pthread_mutex_init(&q->submit_lock, NULL);
  q->health = (accel_health_member_t){.ops = &k_dma_health_ops,
                                      .kind = "dma queue",
                                      .unit = "descriptor",
                                      .name = q->name,
                                      .watchdog_ns = d.watchdog_ns};
  st = accel_health_register(device, &q->health);
  if (st != ACCEL_OK) {
    goto err_destroy_rings;
  }
  *out_queue = q;
  return ACCEL_OK;

err_destroy_rings:
  pthread_mutex_destroy(&q->submit_lock);
  destroy_rings(q, use);
err_free_rings:
  free(q->rings);
err_free_queue:
  free(q);
  return accel_error_context(st, "creating dma queue on %s", device->info.id);
}

void accel_dma_queue_destroy(accel_dma_queue_t *queue) {
  if (queue == NULL) {
    return;
  }
  accel_health_unregister(queue->device, &queue->health);
  const accel_driver_t *drv = queue->device->driver;
  if ((queue->flags & ACCEL_DMA_QUEUE_FLAG_ABORT_ON_DESTROY) != 0 &&
      drv->copy->ring_abort != NULL) {
    for (uint32_t i = 0; i < queue->ring_count; ++i) {
      drv->copy->ring_abort(queue->rings[i].drv);
    }
  }
  destroy_rings(queue, queue->ring_count);
  // Nobody else calls on the queue any more; the lock is taken all the same
  // so that retire's lock assertion holds (core/lock.h).
  pthread_mutex_lock(&queue->submit_lock);
  accel_dma_queue_retire_locked(queue, UINT64_MAX);
  pthread_mutex_unlock(&queue->submit_lock);
  free(queue->held);
  accel_dma_staging_free(&queue->staging);
  pthread_mutex_destroy(&queue->submit_lock);
  free(queue->rings);
  free(queue);
}

accel_status_t accel_dma_queue_reserve_held_locked(accel_dma_queue_t *q,
                                                  uint64_t extra) {
  ACCEL_ASSERT_HELD(&q->submit_lock);
  if (q->held_count + extra <= q->held_capacity) {
    return ACCEL_OK;
  }
  uint64_t cap = q->held_capacity ? q->held_capacity : 64;
  while (cap < q->held_count + extra) {
    cap *= 2;
  }
  accel_dma_held_t *n = malloc(cap * sizeof(*n));
  if (n == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "dma queue \"%s\": cannot hold %llu references",
                       q->name, (unsigned long long)cap);
  }
  for (uint64_t i = 0; i < q->held_count; ++i) {
    n[i] = q->held[(q->held_front + i) & (q->held_capacity - 1)];
  }
  free(q->held);
  q->held = n;
  q->held_front = 0;
  q->held_capacity = cap;
  return ACCEL_OK;
}

void accel_dma_queue_hold_locked(accel_dma_queue_t *q,
                                 accel_object_t *object) {
  ACCEL_ASSERT_HELD(&q->submit_lock);
  accel_object_retain(object);
  uint64_t i = (q->held_front + q->held_count++) & (q->held_capacity - 1);
  q->held[i] = (accel_dma_held_t){.position = UINT64_MAX, .object = object};
}

void accel_dma_queue_seal_held_locked(accel_dma_queue_t *q, uint64_t count,
                                      uint64_t position) {
  ACCEL_ASSERT_HELD(&q->submit_lock);
  for (uint64_t k = q->held_count - count; k < q->held_count; ++k) {
    q->held[(q->held_front + k) & (q->held_capacity - 1)].position = position;
  }
}

void accel_dma_queue_retire_locked(accel_dma_queue_t *q, uint64_t head) {
  ACCEL_ASSERT_HELD(&q->submit_lock);
  while (q->held_count > 0) {
    accel_dma_held_t *h = &q->held[q->held_front & (q->held_capacity - 1)];
    if (h->position > head) {
      break;
    }
    accel_object_release(h->object);
    q->held_front++;
    q->held_count--;
  }
}

static void retire_head_locked(accel_dma_queue_t *q) {
  ACCEL_ASSERT_HELD(&q->submit_lock);
  // Acquire: the engine finished with what it retired.
  accel_dma_queue_retire_locked(
      q, atomic_load_explicit(q->rings[0].mem.head, memory_order_acquire));
}

// Retires if the lock is free and someone asked; the flag is set before the
// try and the holder reads it after its unlock (both behind full fences), so
// that one of the two sides sees the other and no request is lost.
static void retire_if_wanted(accel_dma_queue_t *q) {
  atomic_thread_fence(memory_order_seq_cst);
  while (atomic_load_explicit(&q->retire_wanted, memory_order_relaxed) != 0 &&
         pthread_mutex_trylock(&q->submit_lock) == 0) {
    atomic_store_explicit(&q->retire_wanted, 0, memory_order_relaxed);
    retire_head_locked(q);
    pthread_mutex_unlock(&q->submit_lock);
    atomic_thread_fence(memory_order_seq_cst);
  }
}

void accel_dma_queue_retire_soon(accel_dma_queue_t *q) {
  atomic_store_explicit(&q->retire_wanted, 1, memory_order_relaxed);
  retire_if_wanted(q);
}

uint64_t accel_dma_queue_submitted_tail(accel_dma_queue_t *q) {
  return atomic_load_explicit(&q->last_tail, memory_order_relaxed);
}

void accel_dma_queue_retire_through(accel_dma_queue_t *q, uint64_t tail) {
  (void)q->device->driver->copy->ring_wait(q->rings[0].drv, tail,
                                         ACCEL_TIMEOUT_INFINITE);
  accel_dma_queue_retire_soon(q);
}

void accel_dma_queue_unlock(accel_dma_queue_t *q) {
  pthread_mutex_unlock(&q->submit_lock);
  retire_if_wanted(q);
}

// Drops what completed work held, unless a submit holds the lock (which
// then retires as it unlocks).
static void retire_try(accel_dma_queue_t *q) {
  accel_dma_queue_retire_soon(q);
}

accel_status_t accel_dma_queue_check_failed(accel_dma_queue_t *queue) {
  // A lost device fails every queue at once (health.h).
  ACCEL_RETURN_IF_ERROR(accel_health_check_lost(queue->device));
  // Acquire: pairs with dma_health_fail's release (the fences failed).
  if (__builtin_expect(atomic_load_explicit(&queue->health_failed,
                                            memory_order_acquire) != 0,
                       0)) {
    uint64_t value = 0;
    return queue->device->driver->sync->query(queue->rings[0].fence->drv,
                                              &value);
  }
  for (uint32_t i = 0; i < queue->ring_count; ++i) {
    accel_dma_ring_state_t *r = &queue->rings[i];
    // Acquire: pairs with the engine's release after failing the fence.
    if (atomic_load_explicit(r->mem.failed, memory_order_acquire) != 0) {
      uint64_t value = 0;
      accel_status_t st =
          queue->device->driver->sync->query(r->fence->drv, &value);
      if (st != ACCEL_OK) {
        return st;
      }
    }
  }
  return ACCEL_OK;
}

accel_status_t accel_dma_queue_synchronize(accel_dma_queue_t *queue,
                                           uint64_t timeout_ns) {
  ACCEL_CHECK_ARG(queue != NULL, "queue (NULL)");
  // A queue the device's health failed returns at once (its rings may hold
  // a descriptor that never completes).
  if (atomic_load_explicit(&queue->health_failed, memory_order_relaxed) ||
      accel_health_check_lost(queue->device) != ACCEL_OK) {
    return accel_dma_queue_check_failed(queue);
  }
  // Acquire: pairs with the submit's release (the descriptors are written).
  uint64_t target =
      atomic_load_explicit(&queue->last_tail, memory_order_acquire);
  accel_status_t st = queue->device->driver->copy->ring_wait(
      queue->rings[0].drv, target, timeout_ns);
  if (st == ACCEL_ERROR_TIMEOUT) {
    return accel_error(ACCEL_ERROR_TIMEOUT,
                       "dma queue \"%s\": work not complete after %llu ns",
                       queue->name, (unsigned long long)timeout_ns);
  }
  if (st != ACCEL_OK) {
    return st;
  }
  retire_try(queue);
  return accel_dma_queue_check_failed(queue);
}

accel_status_t accel_dma_queue_query(accel_dma_queue_t *queue) {
  ACCEL_CHECK_ARG(queue != NULL, "queue (NULL)");
  uint64_t target =
      atomic_load_explicit(&queue->last_tail, memory_order_acquire);
  ACCEL_RETURN_IF_ERROR(accel_dma_queue_check_failed(queue));
  uint64_t head =
      atomic_load_explicit(queue->rings[0].mem.head, memory_order_acquire);
  if (head < target) {
    return accel_error(ACCEL_ERROR_NOT_READY,
                       "dma queue \"%s\": %llu ring descriptors pending",
                       queue->name, (unsigned long long)(target - head));
  }
  retire_try(queue);
  return ACCEL_OK;
}

accel_status_t accel_dma_queue_counters(
    accel_dma_queue_t *queue, accel_dma_queue_counters_t *out_counters) {
  ACCEL_CHECK_ARG(queue != NULL, "queue (NULL)");
  ACCEL_CHECK_ARG(out_counters != NULL, "out_counters (NULL)");
  uint32_t size = out_counters->struct_size;
  if (size < offsetof(accel_dma_queue_counters_t, bytes_host_to_device)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "dma queue counters: struct_size %u is too small",
                       size);
  }
  accel_dma_queue_counters_t c = {.struct_size = size};
  c.engine_count = queue->ring_count;
  uint64_t bytes[ACCEL_DMA_DIR_COUNT] = {0};
  for (uint32_t i = 0; i < queue->ring_count; ++i) {
    accel_dma_ring_state_t *r = &queue->rings[i];
    for (uint32_t dir = 0; dir < ACCEL_DMA_DIR_COUNT; ++dir) {
      bytes[dir] += atomic_load_explicit(&r->mem.bytes[dir],
                                         memory_order_relaxed);
    }
    c.ring_capacity += r->mem.slot_count;
  }
  // Not under the submit lock: a producer blocked on a full ring holds it.
  for (uint32_t i = 0; i < queue->ring_count; ++i) {
    accel_dma_ring_state_t *r = &queue->rings[i];
    uint64_t head = atomic_load_explicit(r->mem.head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&r->tail_seen, memory_order_relaxed);
    c.ring_occupancy += tail > head ? tail - head : 0;
  }
  c.bytes_host_to_device = bytes[ACCEL_DMA_DIR_HOST_TO_DEVICE];
  c.bytes_device_to_host = bytes[ACCEL_DMA_DIR_DEVICE_TO_HOST];
  c.bytes_device_to_device = bytes[ACCEL_DMA_DIR_DEVICE_TO_DEVICE];
  c.bytes_host_to_host = bytes[ACCEL_DMA_DIR_HOST_TO_HOST];
  c.bytes_staged = bytes[ACCEL_DMA_DIR_STAGING];
  c.submits = atomic_load_explicit(&queue->submits, memory_order_relaxed);
  c.descriptors =
      atomic_load_explicit(&queue->descriptors, memory_order_relaxed);
  c.ring_descriptors =
      atomic_load_explicit(&queue->ring_descriptors, memory_order_relaxed);
  c.ring_occupancy_peak =
      atomic_load_explicit(&queue->occupancy_peak, memory_order_relaxed);
  c.stalls = atomic_load_explicit(&queue->stalls, memory_order_relaxed);
  c.not_ready = atomic_load_explicit(&queue->not_ready, memory_order_relaxed);
  c.inline_copies =
      atomic_load_explicit(&queue->inline_copies, memory_order_relaxed);
  memcpy(out_counters, &c, size < sizeof(c) ? size : sizeof(c));
  return ACCEL_OK;
}

accel_status_t accel_dma_copy(accel_dma_queue_t *queue, accel_buffer_t *dst,
                              uint64_t dst_offset, accel_buffer_t *src,
                              uint64_t src_offset, uint64_t size_bytes) {
  ACCEL_CHECK_ARG(dst != NULL, "dst (NULL)");
  ACCEL_CHECK_ARG(src != NULL, "src (NULL)");
  accel_dma_desc_t d = {
      .struct_size = sizeof(d),
      .op = ACCEL_DMA_OP_COPY_1D,
      .dst = {.buffer = dst, .offset = dst_offset},
      .src = {.buffer = src, .offset = src_offset},
      .width_bytes = size_bytes,
  };
  return accel_dma_submit(queue, &d, 1, 0, NULL, NULL, 0, NULL, NULL);
}

accel_status_t accel_dma_copy_2d(accel_dma_queue_t *queue, accel_buffer_t *dst,
                                 uint64_t dst_offset, uint64_t dst_pitch,
                                 accel_buffer_t *src, uint64_t src_offset,
                                 uint64_t src_pitch, uint64_t width_bytes,
                                 uint64_t height) {
  ACCEL_CHECK_ARG(dst != NULL, "dst (NULL)");
  ACCEL_CHECK_ARG(src != NULL, "src (NULL)");
  accel_dma_desc_t d = {
      .struct_size = sizeof(d),
      .op = ACCEL_DMA_OP_COPY_2D,
      .dst = {.buffer = dst, .offset = dst_offset},
      .src = {.buffer = src, .offset = src_offset},
      .width_bytes = width_bytes,
      .height = height,
      .dst_pitch = dst_pitch,
      .src_pitch = src_pitch,
  };
  return accel_dma_submit(queue, &d, 1, 0, NULL, NULL, 0, NULL, NULL);
}
