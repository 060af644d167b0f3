// accel_dma_submit: descriptors validated (dma_validate.c), then translated
// into ring descriptors. A submit is planned twice with the same code: once to
// count the ring descriptors it needs (non-blocking queues refuse it when the
// rings lack room, before anything is written), once to write them.
//
// Ordering: ring 0 (home) runs the submit's waits, then its descriptors in
// order, then its signals. Work placed on another ring (a piece of a split
// copy, a staging leg) first waits on the home fence for a ticket signalled
// after everything before it (a fork), and the home ring waits on that ring's
// fence before going on (a join): descriptors behave as if run one after the
// other, while pieces of one descriptor run concurrently.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/lock.h"
#include "core/error.h"
#include "dma/dma_impl.h"
#include "dma/dma_plan.h"
#include "mem/buffer_impl.h"
#include "trace/trace_hooks.h"

// Traced descriptor |d| (trace_seq |seq|) was written to |ring|: reported as
// a COPY or FILL command of that number, in the trace hooks' plain numbers.
static void trace_desc_enqueue(const void *ring, const accel_dma_hw_desc_t *d,
                               uint64_t seq, accel_trace_stamp_t when) {
  bool fill = d->op == ACCEL_DMA_HW_FILL;
  const accel_trace_cmd_t tc = {
      .kind = fill ? ACCEL_TRACE_CMD_FILL : ACCEL_TRACE_CMD_COPY,
      .direction = fill ? 0 : d->direction,
      .seq = seq,
      .bytes = accel_dma_hw_desc_bytes(d)};
  accel_trace_dma_enqueue(ring, &tc, when);
}


// ---------------------------------------------------------------------------
// Planning: turning descriptors into ring descriptors.
// ---------------------------------------------------------------------------


// Adds to a counter that only lock holders write.
static inline void counter_add(_Atomic uint64_t *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                        memory_order_relaxed);
}

static void emit_now(plan_t *p, uint32_t ring,
                     const accel_dma_hw_desc_t *src);

// Writes the home ring's held-back descriptor, if any.
static void flush_pending(plan_t *p) {
  if (p->has_pending) {
    p->has_pending = false;
    emit_now(p, 0, &p->pending);
  }
}

void accel_dma_flush_pending(plan_t *p) { flush_pending(p); }

// Publishes every ring's written descriptors to its engine.
static void doorbell_all(plan_t *p) {
  flush_pending(p);
  accel_dma_queue_t *q = p->q;
  for (uint32_t i = 0; i < q->ring_count; ++i) {
    accel_dma_ring_state_t *r = &q->rings[i];
    if (r->tail != r->published) {
      r->published = r->tail;
      q->device->driver->copy->ring_doorbell(r->drv, r->tail);
    }
  }
}

// Copies and fills between host and device or within the device are traced
// (staging legs and host-to-host copies are internal).
static bool is_traced(const accel_dma_hw_desc_t *d) {
  return (d->op == ACCEL_DMA_HW_COPY || d->op == ACCEL_DMA_HW_FILL) &&
         d->direction <= ACCEL_DMA_DIR_DEVICE_TO_HOST;
}

static void emit_now(plan_t *p, uint32_t ring,
                     const accel_dma_hw_desc_t *src) {
  if (!p->write) {
    p->need[ring]++;
    return;
  }
  accel_dma_queue_t *q = p->q;
  accel_dma_ring_state_t *r = &q->rings[ring];
  uint64_t slots = r->mem.slot_count;
  // Acquire: the engine is done with the slot once its head passed it. The
  // head is read only when the cached one says the ring is full, to keep its
  // cache line with the engine.
  if (r->tail - r->head_cached >= slots) {
    r->head_cached = atomic_load_explicit(r->mem.head, memory_order_acquire);
  }
  if (r->tail - r->head_cached >= slots) {
    // Back-pressure: publish what is written (the engines may need it to
    // make room: every wait refers to a signal written earlier), then block.
    // Wait for a quarter of the ring, not one slot, so that a producer that
    // parked is woken once per batch rather than per descriptor.
    counter_add(&q->stalls, 1);
    doorbell_all(p);
    uint64_t want = r->tail - slots + slots / 4;
    while (q->device->driver->copy->ring_wait(r->drv, want,
                                            ACCEL_TIMEOUT_INFINITE) !=
           ACCEL_OK) {
    }
    r->head_cached = atomic_load_explicit(r->mem.head, memory_order_acquire);
  }
  bool traced = is_traced(src);
  accel_trace_stamp_t enqueued_at = {0, 0};
  uint64_t trace_seq = 0;
  if (traced) {
    enqueued_at = accel_trace_cmd_enqueue_time();
    trace_seq =
        atomic_load_explicit(&r->trace_enqueued, memory_order_relaxed) + 1;
  }
  accel_dma_hw_desc_t *slot = &r->mem.slots[r->tail & (slots - 1)];
  // Everything but the ownership word, which is written last: the engine may
  // be polling it.
  const size_t own = offsetof(accel_dma_hw_desc_t, position);
  const size_t rest = offsetof(accel_dma_hw_desc_t, submit_id);
  memcpy(slot, src, own);
  memcpy((char *)slot + rest, (const char *)src + rest, sizeof(*slot) - rest);
  slot->submit_id = p->submit_id;
  slot->trace_seq = trace_seq;
  // Release: hands the descriptor over with its bytes.
  __atomic_store_n(&slot->position, r->tail + 1, __ATOMIC_RELEASE);
  r->tail++;
  atomic_store_explicit(&r->tail_seen, r->tail, memory_order_relaxed);
  p->written++;
  if (traced) {
    atomic_store_explicit(&r->trace_enqueued, trace_seq, memory_order_relaxed);
    trace_desc_enqueue(r->drv, src, trace_seq, enqueued_at);
  }
}

void accel_dma_emit_now(plan_t *p, uint32_t ring,
                        const accel_dma_hw_desc_t *src) {
  emit_now(p, ring, src);
}


// Does a written submit's bookkeeping, then rings the doorbells (holds the
// lock). The bookkeeping comes first: polling engines start on the handed
// over descriptors meanwhile, and the doorbell's full barrier then finds the
// descriptor stores done instead of waiting for them.
static void commit_locked(accel_dma_queue_t *q, plan_t *p,
                          uint32_t desc_count) {
  ACCEL_ASSERT_HELD(&q->submit_lock);
  flush_pending(p);
  accel_dma_queue_seal_held_locked(q, p->holds, q->rings[0].tail);
  q->submit_count = p->submit_id;
  uint64_t occupancy = 0;
  for (uint32_t i = 0; i < q->ring_count; ++i) {
    accel_dma_ring_state_t *r = &q->rings[i];
    occupancy += r->tail - r->head_cached;  // an upper bound: cheap
  }
  // Release: synchronize acquires it, then waits for the home head.
  atomic_store_explicit(&q->last_tail, q->rings[0].tail,
                        memory_order_release);
  if (occupancy >
      atomic_load_explicit(&q->occupancy_peak, memory_order_relaxed)) {
    atomic_store_explicit(&q->occupancy_peak, occupancy,
                          memory_order_relaxed);
  }
  // Plain load and store: only submitters (serialized by the lock) write
  // these; readers take a relaxed snapshot.
  counter_add(&q->submits, 1);
  counter_add(&q->descriptors, desc_count);
  counter_add(&q->ring_descriptors, p->written);
  doorbell_all(p);
}

// The latency path: one non-empty 1D copy between buffers, small enough not
// to be split, with no wait and at most one signal (folded into the copy),
// on a blocking queue.
// Writes what the general path would write, without planning.
static bool is_single_copy(const accel_dma_queue_t *q,
                           const accel_dma_desc_t *d, uint32_t desc_count,
                           uint32_t wait_count, uint32_t signal_count) {
  return desc_count == 1 && wait_count == 0 && signal_count <= 1 &&
         (q->flags & ACCEL_DMA_QUEUE_FLAG_NON_BLOCKING) == 0 &&
         d->struct_size == sizeof(*d) && d->op == ACCEL_DMA_OP_COPY_1D &&
         d->dst.buffer != NULL && d->src.buffer != NULL &&
         d->dst.host == NULL && d->src.host == NULL && d->width_bytes > 0 &&
         (q->ring_count < 2 || d->width_bytes < ACCEL_DMA_SPLIT_MIN_BYTES);
}

// Writes the ring descriptor of a single 1D copy between buffers (the latency
// path: planned by hand) into |d|, with the submit's one signal folded in.
// Filled in place, field by field: a descriptor built in a temporary and
// copied out is read back with 16-byte loads that span the 8-byte stores
// which just wrote it, and those loads cannot be forwarded from the store
// buffer (measured: a fifth of the time of a 4 KiB inline copy).
static void single_copy_desc(accel_dma_hw_desc_t *d, const plan_t *p,
                             const accel_dma_desc_t *desc,
                             accel_semaphore_t *sem, uint64_t value) {
  *d = k_zero_desc;
  d->op = ACCEL_DMA_HW_COPY;
  d->direction = p->direction;
  d->user_op = p->user_op;
  d->index = p->index;
  d->copy.dst = ref_address(&desc->dst);
  d->copy.src = ref_address(&desc->src);
  d->copy.width = desc->width_bytes;
  d->copy.height = 1;
  d->copy.depth = 1;
  if (sem != NULL) {
    d->signal_semaphore = sem->drv;
    d->signal_value = value;
  }
}

// Whether every ring of |q| retired everything written to it (nothing is
// pending that a new submit would have to run after). Needs the lock.
static bool queue_idle_locked(const accel_dma_queue_t *q) {
  ACCEL_ASSERT_HELD((pthread_mutex_t *)&q->submit_lock);
  for (uint32_t i = 0; i < q->ring_count; ++i) {
    const accel_dma_ring_state_t *r = &q->rings[i];
    // Acquire: the engine's work for the retired descriptors is visible.
    if (atomic_load_explicit(r->mem.head, memory_order_acquire) != r->tail) {
      return false;
    }
  }
  return true;
}

// Runs a validated single copy on the calling thread through the driver
// (small copies on idle queues, see dma.h). Needs the lock. Returns
// ACCEL_ERROR_NOT_READY, having done nothing, when the driver declines.
static accel_status_t execute_now_locked(accel_dma_queue_t *q,
                                         const accel_dma_desc_t *desc,
                                         accel_semaphore_t *sem,
                                         uint64_t value) {
  ACCEL_ASSERT_HELD(&q->submit_lock);
  accel_dma_ring_state_t *r = &q->rings[0];
  plan_t p = {
      .q = q,
      .submit_id = q->submit_count + 1,
      .ring_count = q->ring_count,
      .user_op = ACCEL_DMA_OP_COPY_1D,
      .direction = direction_of(desc),
  };
  accel_dma_hw_desc_t d;
  single_copy_desc(&d, &p, desc, sem, value);
  d.submit_id = p.submit_id;
  // Traced like a ring descriptor (emit_now): the enqueue, then the driver
  // reports start and end on the ring's track.
  bool traced = is_traced(&d);
  accel_trace_stamp_t enqueued_at = {0, 0};
  if (traced) {
    enqueued_at = accel_trace_cmd_enqueue_time();
    d.trace_seq =
        atomic_load_explicit(&r->trace_enqueued, memory_order_relaxed) + 1;
    trace_desc_enqueue(r->drv, &d, d.trace_seq, enqueued_at);
  }
  accel_status_t st =
      q->device->driver->copy->ring_execute_now(r->drv, &d);
  if (st != ACCEL_OK) {
    // The ring path reuses the trace number (the enqueue is then reported
    // twice for it, on this path that only an engine fault injected
    // concurrently or an abort can take).
    return st;
  }
  if (traced) {
    atomic_store_explicit(&r->trace_enqueued, d.trace_seq,
                          memory_order_relaxed);
  }
  q->submit_count = p.submit_id;
  counter_add(&q->submits, 1);
  counter_add(&q->descriptors, 1);
  counter_add(&q->inline_copies, 1);
  return ACCEL_OK;
}

static accel_status_t submit_single_copy(accel_dma_queue_t *q,
                                         const accel_dma_desc_t *desc,
                                         accel_semaphore_t *sem,
                                         uint64_t value, bool validated) {
  box_t b;
  accel_status_t st = validated ? ACCEL_OK : accel_dma_validate_desc(q, desc, &b);
  if (st != ACCEL_OK) {
    return accel_error_context(st, "dma submit to \"%s\": descriptor 0 (%s)",
                               q->name, accel_dma_op_name(desc->op));
  }
  pthread_mutex_lock(&q->submit_lock);
  st = accel_dma_queue_check_failed(q);
  if (st == ACCEL_OK && q->held_count >= 64) {
    // Acquire: the engine finished with what it retired.
    accel_dma_queue_retire_locked(
        q, atomic_load_explicit(q->rings[0].mem.head, memory_order_acquire));
  }
  if (st == ACCEL_OK && desc->width_bytes <= q->inline_max_bytes &&
      queue_idle_locked(q)) {
    accel_status_t now = execute_now_locked(q, desc, sem, value);
    if (now == ACCEL_OK) {
      accel_dma_queue_unlock(q);
      return ACCEL_OK;
    }
    // NOT_READY: the engine's state changed; the ring path below runs it.
  }
  if (st == ACCEL_OK) {
    st = accel_dma_queue_reserve_held_locked(q, 3);
  }
  if (st == ACCEL_OK) {
    plan_t p = {
        .q = q,
        .write = true,
        .submit_id = q->submit_count + 1,
        .ring_count = q->ring_count,
        .index = 0,
        .user_op = ACCEL_DMA_OP_COPY_1D,
        .direction = direction_of(desc),
    };
    accel_dma_hw_desc_t d;
    single_copy_desc(&d, &p, desc, sem, value);
    // Hand the descriptor over first, then take the references (room was
    // reserved): the caller's own references keep the objects alive during
    // the call, and the engine never drops references.
    emit_now(&p, 0, &d);
    hold(&p, &desc->dst.buffer->object);
    hold(&p, &desc->src.buffer->object);
    if (sem != NULL) {
      hold(&p, &sem->object);
    }
    commit_locked(q, &p, 1);
  }
  accel_dma_queue_unlock(q);
  return st;
}

// The box of a descriptor its caller validated (lib/stream's 1D copies).
static box_t validated_box(const accel_dma_desc_t *d) {
  return (box_t){.width = d->width_bytes, .height = 1, .depth = 1};
}

static accel_status_t dma_submit(
    accel_dma_queue_t *q, const accel_dma_desc_t *descs, uint32_t desc_count,
    uint32_t wait_count, accel_semaphore_t *const *wait_semaphores,
    const uint64_t *wait_values, uint32_t signal_count,
    accel_semaphore_t *const *signal_semaphores, const uint64_t *signal_values,
    bool validated);

accel_status_t accel_dma_submit(
    accel_dma_queue_t *queue, const accel_dma_desc_t *descs,
    uint32_t desc_count, uint32_t wait_count,
    accel_semaphore_t *const *wait_semaphores, const uint64_t *wait_values,
    uint32_t signal_count, accel_semaphore_t *const *signal_semaphores,
    const uint64_t *signal_values) {
  ACCEL_CHECK_ARG(queue != NULL, "queue (NULL)");
  ACCEL_CHECK_ARG(descs != NULL || desc_count == 0, "descs (NULL)");
  return dma_submit(queue, descs, desc_count, wait_count, wait_semaphores,
                    wait_values, signal_count, signal_semaphores,
                    signal_values, false);
}

accel_status_t accel_dma_submit_validated(
    accel_dma_queue_t *queue, const accel_dma_desc_t *desc,
    accel_semaphore_t *wait_semaphore, uint64_t wait_value,
    accel_semaphore_t *signal_semaphore, uint64_t signal_value) {
  return dma_submit(queue, desc, 1, 1, &wait_semaphore, &wait_value, 1,
                    &signal_semaphore, &signal_value, true);
}

// Validates a submit's |count| descriptors (|stride| bytes each) into
// |boxes|, or, for descriptors the caller |validated| (lib/stream's copies),
// only normalizes them; sets |*out_pageable| when one copy has a host side.
static accel_status_t validate_all(const accel_dma_queue_t *q,
                                   const accel_dma_desc_t *descs,
                                   uint32_t stride, uint32_t count,
                                   bool validated, box_t *boxes,
                                   bool *out_pageable) {
  for (uint32_t i = 0; i < count; ++i) {
    accel_dma_desc_t d;
    accel_dma_load_desc(descs, stride, i, &d);
    if (d.struct_size != stride) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "dma submit to \"%s\": descriptor %u has "
                         "struct_size %u but descriptor 0 has %u",
                         q->name, i, d.struct_size, stride);
    }
    accel_status_t st = ACCEL_OK;
    if (validated) {
      boxes[i] = validated_box(&d);
    } else {
      st = accel_dma_validate_desc(q, &d, &boxes[i]);
    }
    if (st != ACCEL_OK) {
      return accel_error_context(st,
                                 "dma submit to \"%s\": descriptor %u (%s)",
                                 q->name, i, accel_dma_op_name(d.op));
    }
    *out_pageable |= d.op != ACCEL_DMA_OP_FILL &&
                     (d.dst.host != NULL || d.src.host != NULL);
  }
  return ACCEL_OK;
}

// A non-blocking queue's submit fits its rings (the count pass of |p| says
// how many descriptors each ring needs) or is refused before anything is
// written. Submit lock held.
static accel_status_t check_room_locked(plan_t *p) {
  ACCEL_ASSERT_HELD(&p->q->submit_lock);
  accel_dma_queue_t *q = p->q;
  for (uint32_t i = 0; i < q->ring_count; ++i) {
    accel_dma_ring_state_t *r = &q->rings[i];
    uint64_t head = r->head_cached;
    if (r->tail - head + p->need[i] > r->mem.slot_count) {
      head = atomic_load_explicit(r->mem.head, memory_order_acquire);
      r->head_cached = head;
    }
    if (p->need[i] > r->mem.slot_count) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "dma submit to \"%s\": needs %llu descriptors on "
                         "ring %u, which holds %u; split the submit or use a "
                         "blocking queue",
                         q->name, (unsigned long long)p->need[i], i,
                         r->mem.slot_count);
    }
    if (r->tail - head + p->need[i] > r->mem.slot_count) {
      counter_add(&q->not_ready, 1);
      return accel_error(ACCEL_ERROR_NOT_READY,
                         "dma submit to \"%s\": ring %u has %llu of %u "
                         "descriptors free, the submit needs %llu",
                         q->name, i,
                         (unsigned long long)(r->mem.slot_count -
                                              (r->tail - head)),
                         r->mem.slot_count, (unsigned long long)p->need[i]);
    }
  }
  return ACCEL_OK;
}

// A submit's first steps under the submit lock: a failed queue stays failed
// (its stored error), pageable copies need the bounce buffers, and what
// earlier submits held is dropped now and then (reading the engine's head
// moves its cache line).
static accel_status_t prepare_locked(accel_dma_queue_t *q, bool pageable) {
  ACCEL_ASSERT_HELD(&q->submit_lock);
  ACCEL_RETURN_IF_ERROR(accel_dma_queue_check_failed(q));
  if (pageable) {
    ACCEL_RETURN_IF_ERROR(accel_dma_staging_ensure_locked(q));
  }
  if (q->held_count >= 64) {
    // Acquire: the engine finished with what it retired.
    accel_dma_queue_retire_locked(
        q, atomic_load_explicit(q->rings[0].mem.head, memory_order_acquire));
  }
  return ACCEL_OK;
}

// The planner's passes over a validated submit: a count pass for
// non-blocking queues (which must know that everything fits before
// writing), then the write pass, from which on nothing fails, and the
// commit. Submit lock held.
static accel_status_t plan_passes_locked(
    plan_t *p, const accel_dma_desc_t *descs, uint32_t stride,
    const box_t *boxes, uint32_t desc_count, uint32_t wait_count,
    accel_semaphore_t *const *wait_semaphores, const uint64_t *wait_values,
    uint32_t signal_count, accel_semaphore_t *const *signal_semaphores,
    const uint64_t *signal_values) {
  ACCEL_ASSERT_HELD(&p->q->submit_lock);
  accel_dma_queue_t *q = p->q;
  if ((q->flags & ACCEL_DMA_QUEUE_FLAG_NON_BLOCKING) != 0) {
    accel_dma_plan_submit(p, descs, stride, boxes, desc_count, wait_count,
                          wait_semaphores, wait_values, signal_count,
                          signal_semaphores, signal_values);
    ACCEL_RETURN_IF_ERROR(check_room_locked(p));
  }
  ACCEL_RETURN_IF_ERROR(accel_dma_queue_reserve_held_locked(q, p->holds));
  p->write = true;
  accel_dma_plan_submit(p, descs, stride, boxes, desc_count, wait_count,
                        wait_semaphores, wait_values, signal_count,
                        signal_semaphores, signal_values);
  for (uint32_t i = 0; i < q->ring_count; ++i) {
    q->rings[i].fence_next = p->fence_next[i];
  }
  commit_locked(q, p, desc_count);
  return ACCEL_OK;
}

static accel_status_t dma_submit(
    accel_dma_queue_t *q, const accel_dma_desc_t *descs, uint32_t desc_count,
    uint32_t wait_count, accel_semaphore_t *const *wait_semaphores,
    const uint64_t *wait_values, uint32_t signal_count,
    accel_semaphore_t *const *signal_semaphores, const uint64_t *signal_values,
    bool validated) {
  ACCEL_RETURN_IF_ERROR(accel_dma_check_semaphores(
      q, wait_count, wait_semaphores, wait_values, "wait"));
  ACCEL_RETURN_IF_ERROR(accel_dma_check_semaphores(
      q, signal_count, signal_semaphores, signal_values, "signal"));
  uint32_t stride = desc_count > 0 ? descs[0].struct_size : 0;
  if (desc_count > 0 && stride < sizeof(accel_dma_desc_t)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "dma submit to \"%s\": descriptor struct_size %u is "
                       "smaller than %zu",
                       q->name, stride, sizeof(accel_dma_desc_t));
  }
  if (is_single_copy(q, descs, desc_count, wait_count, signal_count)) {
    return submit_single_copy(q, descs,
                              signal_count ? signal_semaphores[0] : NULL,
                              signal_count ? signal_values[0] : 0, validated);
  }
  box_t boxes_stack[16];
  box_t *boxes = boxes_stack;
  if (desc_count > 16) {
    boxes = malloc(sizeof(*boxes) * desc_count);
    if (boxes == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "dma submit: cannot allocate %u descriptor records",
                         desc_count);
    }
  }
  bool pageable = false;
  accel_status_t st = validate_all(q, descs, stride, desc_count, validated,
                                   boxes, &pageable);
  if (st != ACCEL_OK) {
    goto out_free_boxes;
  }

  uint32_t n = q->ring_count;
  uint64_t scratch_stack[3 * 8 + 8 * 8];
  uint64_t *scratch = scratch_stack;
  size_t scratch_count = 2 * (size_t)n + (size_t)n * n;
  if (scratch_count > sizeof(scratch_stack) / sizeof(scratch_stack[0])) {
    scratch = malloc(scratch_count * sizeof(*scratch));
    if (scratch == NULL) {
      st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "dma submit: cannot allocate planning records");
      goto out_free_boxes;
    }
  }
  plan_t p = {
      .q = q,
      .ring_count = n,
      .need = scratch,
      .fence_next = scratch + n,
      .waited = scratch + 2 * n,
  };

  pthread_mutex_lock(&q->submit_lock);
  st = prepare_locked(q, pageable);
  if (st == ACCEL_OK) {
    p.submit_id = q->submit_count + 1;
    // Blocking queues reserve for the most references a submit can hold.
    p.holds = (uint64_t)wait_count + signal_count + 2ull * desc_count;
    st = plan_passes_locked(&p, descs, stride, boxes, desc_count, wait_count,
                            wait_semaphores, wait_values, signal_count,
                            signal_semaphores, signal_values);
  }
  accel_dma_queue_unlock(q);
  if (scratch != scratch_stack) {
    free(scratch);
  }
out_free_boxes:
  if (boxes != boxes_stack) {
    free(boxes);
  }
  return st;
}
