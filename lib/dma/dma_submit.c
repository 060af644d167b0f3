// accel_dma_submit: validation of descriptors, then their translation into
// ring descriptors. A submit is planned twice with the same code: once to
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

#include "core/error.h"
#include "dma/dma_impl.h"
#include "mem/buffer_impl.h"
#include "trace/trace_hooks.h"

#define MAX_OVERLAP_ROWS (1u << 20)

static const char *op_name(uint32_t op) {
  switch (op) {
    case ACCEL_DMA_OP_COPY_1D:
      return "copy 1d";
    case ACCEL_DMA_OP_COPY_2D:
      return "copy 2d";
    case ACCEL_DMA_OP_COPY_3D:
      return "copy 3d";
    case ACCEL_DMA_OP_COPY_SG:
      return "copy sg";
    case ACCEL_DMA_OP_FILL:
      return "fill";
    default:
      return "unknown";
  }
}

// ---------------------------------------------------------------------------
// Boxes: every copy is a 3D box of rows (1D: one row).
// ---------------------------------------------------------------------------

typedef struct box {
  uint64_t width;
  uint64_t height;
  uint64_t depth;
  uint64_t dst_pitch;
  uint64_t src_pitch;
  uint64_t dst_slice_pitch;
  uint64_t src_slice_pitch;
} box_t;

// Bytes from the first byte of a side of |b| to one past its last byte.
static bool box_extent(uint64_t width, uint64_t height, uint64_t depth,
                       uint64_t pitch, uint64_t slice_pitch,
                       uint64_t *out_extent) {
  uint64_t a = 0, b = 0, e = 0;
  if (__builtin_mul_overflow(depth - 1, slice_pitch, &a) ||
      __builtin_mul_overflow(height - 1, pitch, &b) ||
      __builtin_add_overflow(a, b, &e) ||
      __builtin_add_overflow(e, width, &e)) {
    return false;
  }
  *out_extent = e;
  return true;
}

// Offset of row |row| (slice-major) of a side.
static uint64_t row_offset(uint64_t row, uint64_t height, uint64_t pitch,
                           uint64_t slice_pitch) {
  return (row / height) * slice_pitch + (row % height) * pitch;
}

// Whether rows of two sides in the same memory intersect. Rows of one side
// are increasing and disjoint (validated), so a merge finds any overlap.
static bool sides_overlap(uint64_t a_off, uint64_t a_pitch, uint64_t a_slice,
                          uint64_t b_off, uint64_t b_pitch, uint64_t b_slice,
                          const box_t *b) {
  uint64_t a_ext = 0, b_ext = 0;
  box_extent(b->width, b->height, b->depth, a_pitch, a_slice, &a_ext);
  box_extent(b->width, b->height, b->depth, b_pitch, b_slice, &b_ext);
  if (a_off + a_ext <= b_off || b_off + b_ext <= a_off) {
    return false;
  }
  uint64_t rows = b->height * b->depth;
  if (rows == 1 || rows > MAX_OVERLAP_ROWS) {
    return true;  // 1D: extents are the rows; huge: conservative
  }
  uint64_t i = 0, j = 0;
  while (i < rows && j < rows) {
    uint64_t ai = a_off + row_offset(i, b->height, a_pitch, a_slice);
    uint64_t bj = b_off + row_offset(j, b->height, b_pitch, b_slice);
    if (ai + b->width <= bj) {
      i++;
    } else if (bj + b->width <= ai) {
      j++;
    } else {
      return true;
    }
  }
  return false;
}

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
// Validation.
// ---------------------------------------------------------------------------

static accel_status_t check_ref(const accel_dma_queue_t *q,
                                const accel_dma_ref_t *ref, const char *what) {
  if ((ref->buffer == NULL) == (ref->host == NULL)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s: set exactly one of buffer and host", what);
  }
  if (ref->buffer != NULL && ref->buffer->device != q->device) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s buffer is on %s but the queue is on %s", what,
                       ref->buffer->device->info.id, q->device->info.id);
  }
  return ACCEL_OK;
}

// Checks that a side of |extent| bytes at |ref| lies in its buffer (or in
// the address space for host pointers).
static accel_status_t check_side(const accel_dma_ref_t *ref, uint64_t offset,
                                 uint64_t extent, const char *what) {
  if (ref->buffer != NULL) {
    if (offset < ref->offset) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "%s offset overflows", what);
    }
    // Destinations are written; everything else is read.
    uint32_t use = strstr(what, "destination") != NULL
                       ? ACCEL_BUFFER_USE_WRITE
                       : ACCEL_BUFFER_USE_READ;
    return accel_buffer_check_use(ref->buffer, offset, extent, use, what);
  }
  uint64_t base = (uint64_t)(uintptr_t)ref->host;
  uint64_t end = 0;
  if (offset < ref->offset || __builtin_add_overflow(base, offset, &end) ||
      __builtin_add_overflow(end, extent, &end)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s host range [%p + %llu, +%llu) overflows the "
                       "address space",
                       what, ref->host, (unsigned long long)offset,
                       (unsigned long long)extent);
  }
  return ACCEL_OK;
}

// Reads descriptor |i| of the caller's array (its own struct size).
static void load_desc(const accel_dma_desc_t *descs, uint32_t stride,
                      uint32_t i, accel_dma_desc_t *out) {
  memset(out, 0, sizeof(*out));
  const char *p = (const char *)descs + (size_t)i * stride;
  memcpy(out, p, stride < sizeof(*out) ? stride : sizeof(*out));
}

// Normalizes |d| into |*b| (defaults for unused dimensions) and validates it.
static accel_status_t validate_desc(const accel_dma_queue_t *q,
                                    const accel_dma_desc_t *d, box_t *b) {
  if (d->op > ACCEL_DMA_OP_FILL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT, "unknown op %u", d->op);
  }
  ACCEL_RETURN_IF_ERROR(check_ref(q, &d->dst, "destination"));
  *b = (box_t){.width = d->width_bytes, .height = 1, .depth = 1};
  if (d->op == ACCEL_DMA_OP_FILL) {
    if (d->dst.buffer == NULL) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "fill destination must be a buffer, not a host "
                         "pointer");
    }
    uint32_t ps = d->pattern_size;
    if (ps != 1 && ps != 2 && ps != 4 && ps != 8) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "pattern_size %u must be 1, 2, 4 or 8", ps);
    }
    if (d->dst.offset % ps != 0 || d->width_bytes % ps != 0) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "offset %llu and size %llu must be multiples of the "
                         "pattern size %u",
                         (unsigned long long)d->dst.offset,
                         (unsigned long long)d->width_bytes, ps);
    }
    if (ps < 8 && (d->pattern >> (8 * ps)) != 0) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "pattern 0x%llx does not fit in %u byte(s)",
                         (unsigned long long)d->pattern, ps);
    }
    return check_side(&d->dst, d->dst.offset, d->width_bytes, "destination");
  }
  ACCEL_RETURN_IF_ERROR(check_ref(q, &d->src, "source"));
  if (d->dst.host != NULL && d->src.host != NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "source and destination are both host pointers (use "
                       "memcpy, or a pinned buffer on one side)");
  }
  if (d->op == ACCEL_DMA_OP_COPY_SG) {
    if (d->segment_count > 0 && d->segments == NULL) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "segments is NULL with segment_count %u",
                         d->segment_count);
    }
    bool same = d->dst.buffer != NULL && d->dst.buffer == d->src.buffer;
    for (uint32_t s = 0; s < d->segment_count; ++s) {
      const accel_dma_segment_t *g = &d->segments[s];
      char what[48];
      snprintf(what, sizeof(what), "segment %u destination", s);
      ACCEL_RETURN_IF_ERROR(check_side(
          &d->dst, d->dst.offset + g->dst_offset, g->size_bytes, what));
      snprintf(what, sizeof(what), "segment %u source", s);
      ACCEL_RETURN_IF_ERROR(check_side(
          &d->src, d->src.offset + g->src_offset, g->size_bytes, what));
      box_t sb = {.width = g->size_bytes, .height = 1, .depth = 1};
      if (same && g->size_bytes > 0 &&
          sides_overlap(d->dst.offset + g->dst_offset, 0, 0,
                        d->src.offset + g->src_offset, 0, 0, &sb)) {
        return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                           "segment %u: source [%llu, +%llu) overlaps "
                           "destination [%llu, +%llu) in the same buffer",
                           s,
                           (unsigned long long)(d->src.offset + g->src_offset),
                           (unsigned long long)g->size_bytes,
                           (unsigned long long)(d->dst.offset + g->dst_offset),
                           (unsigned long long)g->size_bytes);
      }
    }
    return ACCEL_OK;
  }
  if (d->op == ACCEL_DMA_OP_COPY_2D || d->op == ACCEL_DMA_OP_COPY_3D) {
    b->height = d->height != 0 ? d->height : 1;
    b->dst_pitch = d->dst_pitch;
    b->src_pitch = d->src_pitch;
    if (d->op == ACCEL_DMA_OP_COPY_3D) {
      b->depth = d->depth != 0 ? d->depth : 1;
      b->dst_slice_pitch = d->dst_slice_pitch;
      b->src_slice_pitch = d->src_slice_pitch;
    }
    if (b->height > UINT32_MAX || b->depth > UINT32_MAX) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "height %llu or depth %llu exceeds 2^32-1",
                         (unsigned long long)b->height,
                         (unsigned long long)b->depth);
    }
    if (b->height > 1 &&
        (b->dst_pitch < b->width || b->src_pitch < b->width)) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "pitches (dst %llu, src %llu) must be at least the "
                         "row width %llu",
                         (unsigned long long)b->dst_pitch,
                         (unsigned long long)b->src_pitch,
                         (unsigned long long)b->width);
    }
    if (b->depth > 1) {
      uint64_t de = 0, se = 0;
      if (!box_extent(b->width, b->height, 1, b->dst_pitch, 0, &de) ||
          !box_extent(b->width, b->height, 1, b->src_pitch, 0, &se) ||
          b->dst_slice_pitch < de || b->src_slice_pitch < se) {
        return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                           "slice pitches (dst %llu, src %llu) must cover a "
                           "slice (dst %llu, src %llu bytes)",
                           (unsigned long long)b->dst_slice_pitch,
                           (unsigned long long)b->src_slice_pitch,
                           (unsigned long long)de, (unsigned long long)se);
      }
    }
  }
  if (b->width == 0) {
    return ACCEL_OK;
  }
  uint64_t dext = 0, sext = 0;
  if (!box_extent(b->width, b->height, b->depth, b->dst_pitch,
                  b->dst_slice_pitch, &dext) ||
      !box_extent(b->width, b->height, b->depth, b->src_pitch,
                  b->src_slice_pitch, &sext)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "the copy's extent overflows 64 bits");
  }
  ACCEL_RETURN_IF_ERROR(
      check_side(&d->dst, d->dst.offset, dext, "destination"));
  ACCEL_RETURN_IF_ERROR(check_side(&d->src, d->src.offset, sext, "source"));
  if (d->dst.buffer != NULL && d->dst.buffer == d->src.buffer &&
      sides_overlap(d->dst.offset, b->dst_pitch, b->dst_slice_pitch,
                    d->src.offset, b->src_pitch, b->src_slice_pitch, b)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "source (offset %llu) overlaps destination (offset "
                       "%llu) in the same buffer",
                       (unsigned long long)d->src.offset,
                       (unsigned long long)d->dst.offset);
  }
  return ACCEL_OK;
}

static accel_status_t check_semaphores(const accel_dma_queue_t *q,
                                       uint32_t count,
                                       accel_semaphore_t *const *sems,
                                       const uint64_t *values,
                                       const char *what) {
  if (count == 0) {
    return ACCEL_OK;
  }
  if (sems == NULL || values == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s semaphores or values NULL with count %u", what,
                       count);
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (sems[i] == NULL) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "%s semaphore %u is NULL", what, i);
    }
    if (sems[i]->device != q->device) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "%s semaphore %u is on %s but the queue is on %s",
                         what, i, sems[i]->device->info.id,
                         q->device->info.id);
    }
  }
  return ACCEL_OK;
}

// ---------------------------------------------------------------------------
// Planning: turning descriptors into ring descriptors.
// ---------------------------------------------------------------------------

typedef struct plan {
  accel_dma_queue_t *q;
  bool write;  // false: only count
  uint64_t submit_id;
  uint32_t ring_count;
  uint64_t *need;        // [ring] descriptors (count pass)
  uint64_t *fence_next;  // [ring] local copy of the tickets
  uint64_t *waited;      // [ring * ring_count + other] ticket already waited
  // The descriptor being planned (messages).
  uint32_t index;
  uint8_t user_op;
  uint8_t direction;
  uint64_t written;
  uint64_t holds;  // references the submit holds
  // The home ring's last copy or fill, not written yet (see emit).
  bool has_pending;
  accel_dma_hw_desc_t pending;
} plan_t;

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

// Queues |d| on |ring|. The home ring holds its last copy or fill back, so
// that the submit's first signal can be folded into it (one descriptor less
// for the engine to fetch on the latency path).
static void emit(plan_t *p, uint32_t ring, const accel_dma_hw_desc_t *d) {
  if (ring != 0) {
    emit_now(p, ring, d);
    return;
  }
  flush_pending(p);
  if (d->op == ACCEL_DMA_HW_COPY || d->op == ACCEL_DMA_HW_FILL) {
    p->pending = *d;
    p->has_pending = true;
    return;
  }
  emit_now(p, 0, d);
}

// A zeroed descriptor, copied from a constant: compilers zero a struct this
// size with a string store (rep stos), which later loads of it cannot be
// forwarded from (they wait for it to reach the cache); a copy is plain
// vector moves.
static const accel_dma_hw_desc_t k_zero_desc;

static accel_dma_hw_desc_t hw_desc(plan_t *p, uint8_t op, bool internal) {
  accel_dma_hw_desc_t d = k_zero_desc;
  d.op = op;
  d.direction = p->direction;
  d.user_op = p->user_op;
  d.index = internal ? UINT32_MAX : p->index;
  return d;
}

// Signals |ring|'s fence to a new ticket; returns the point reached.
static accel_dma_dep_t fence_signal(plan_t *p, uint32_t ring) {
  uint64_t ticket = ++p->fence_next[ring];
  accel_dma_hw_desc_t d = hw_desc(p, ACCEL_DMA_HW_SIGNAL, true);
  d.sem.semaphore = p->q->rings[ring].fence->drv;
  d.sem.value = ticket;
  emit(p, ring, &d);
  return (accel_dma_dep_t){.ring = ring, .ticket = ticket};
}

// Makes |ring| wait for |dep| unless the ring's order already implies it.
static void fence_wait(plan_t *p, uint32_t ring, accel_dma_dep_t dep) {
  uint64_t *waited = &p->waited[ring * p->ring_count + dep.ring];
  if (dep.ticket == 0 || dep.ring == ring || *waited >= dep.ticket) {
    return;
  }
  accel_dma_hw_desc_t d = hw_desc(p, ACCEL_DMA_HW_WAIT, true);
  d.sem.semaphore = p->q->rings[dep.ring].fence->drv;
  d.sem.value = dep.ticket;
  *waited = dep.ticket;
  emit(p, ring, &d);
}

static void emit_copy(plan_t *p, uint32_t ring, uint64_t dst, uint64_t src,
                      uint64_t width, uint64_t height, uint64_t depth,
                      const box_t *b, uint8_t direction, uint8_t flags) {
  accel_dma_hw_desc_t d = hw_desc(p, ACCEL_DMA_HW_COPY, false);
  d.direction = direction;
  d.flags = flags;
  d.copy.dst = dst;
  d.copy.src = src;
  d.copy.width = width;
  d.copy.height = (uint32_t)height;
  d.copy.depth = (uint32_t)depth;
  d.copy.dst_pitch = b->dst_pitch;
  d.copy.src_pitch = b->src_pitch;
  d.copy.dst_slice_pitch = b->dst_slice_pitch;
  d.copy.src_slice_pitch = b->src_slice_pitch;
  emit(p, ring, &d);
}

// Number of pieces a box of |bytes| is split into.
static uint32_t piece_count(const plan_t *p, uint64_t bytes) {
  if (p->ring_count < 2 || bytes < ACCEL_DMA_SPLIT_MIN_BYTES) {
    return 1;
  }
  uint64_t k = bytes / ACCEL_DMA_PIECE_MIN_BYTES;
  return k < p->ring_count ? (uint32_t)k : p->ring_count;
}

// Emits piece |j| of |k| of a direct copy on |ring|: split by slices, rows or
// bytes, whichever dimension has at least |k| elements.
static void emit_piece(plan_t *p, uint32_t ring, uint64_t dst, uint64_t src,
                       const box_t *b, uint32_t j, uint32_t k) {
  if (b->depth >= k) {
    uint64_t lo = b->depth * j / k, hi = b->depth * (j + 1) / k;
    emit_copy(p, ring, dst + lo * b->dst_slice_pitch,
              src + lo * b->src_slice_pitch, b->width, b->height, hi - lo, b,
              p->direction, 0);
  } else if (b->depth == 1 && b->height >= k) {
    uint64_t lo = b->height * j / k, hi = b->height * (j + 1) / k;
    emit_copy(p, ring, dst + lo * b->dst_pitch, src + lo * b->src_pitch,
              b->width, hi - lo, 1, b, p->direction, 0);
  } else {
    // One row (piece_count only splits boxes that fit one of the cases):
    // 4 KiB-aligned pieces.
    uint64_t step = (b->width / k + 4095) & ~(uint64_t)4095;
    uint64_t lo = step * j < b->width ? step * j : b->width;
    uint64_t hi = j + 1 == k || step * (j + 1) > b->width ? b->width
                                                           : step * (j + 1);
    emit_copy(p, ring, dst + lo, src + lo, hi - lo, 1, 1, b, p->direction,
              0);
  }
}

static bool splittable(const box_t *b, uint32_t k) {
  return b->depth >= k || (b->depth == 1 && b->height >= k) ||
         (b->depth == 1 && b->height == 1);
}

// A copy between two buffers, split over the rings when large.
static void plan_direct(plan_t *p, uint64_t dst, uint64_t src,
                        const box_t *b) {
  uint64_t bytes = b->width * b->height * b->depth;
  uint32_t k = piece_count(p, bytes);
  if (k < 2 || !splittable(b, k)) {
    emit_copy(p, 0, dst, src, b->width, b->height, b->depth, b, p->direction,
              0);
    return;
  }
  accel_dma_dep_t fork = fence_signal(p, 0);
  accel_dma_dep_t done[ACCEL_DMA_MAX_RINGS];
  for (uint32_t j = 1; j < k; ++j) {
    fence_wait(p, j, fork);
    emit_piece(p, j, dst, src, b, j, k);
    done[j] = fence_signal(p, j);
  }
  emit_piece(p, 0, dst, src, b, 0, k);
  for (uint32_t j = 1; j < k; ++j) {
    fence_wait(p, 0, done[j]);
  }
}

static void plan_fill(plan_t *p, uint64_t dst, uint64_t size,
                      uint64_t pattern, uint32_t pattern_size) {
  uint32_t k = piece_count(p, size);
  accel_dma_hw_desc_t d = hw_desc(p, ACCEL_DMA_HW_FILL, false);
  d.fill.pattern = pattern;
  d.fill.pattern_size = pattern_size;
  if (k < 2) {
    d.fill.dst = dst;
    d.fill.size_bytes = size;
    emit(p, 0, &d);
    return;
  }
  // Pieces are multiples of 4 KiB, hence of the pattern size.
  uint64_t step = (size / k + 4095) & ~(uint64_t)4095;
  accel_dma_dep_t fork = fence_signal(p, 0);
  accel_dma_dep_t done[ACCEL_DMA_MAX_RINGS];
  for (uint32_t j = 0; j < k; ++j) {
    uint64_t lo = step * j < size ? step * j : size;
    uint64_t hi = j + 1 == k || step * (j + 1) > size ? size : step * (j + 1);
    d.fill.dst = dst + lo;
    d.fill.size_bytes = hi - lo;
    if (j > 0) {
      fence_wait(p, j, fork);
      emit(p, j, &d);
      done[j] = fence_signal(p, j);
    }
  }
  d.fill.dst = dst;
  d.fill.size_bytes = step < size ? step : size;
  emit(p, 0, &d);
  for (uint32_t j = 1; j < k; ++j) {
    fence_wait(p, 0, done[j]);
  }
}

// A copy with one side in pageable host memory, staged through bounce
// slots in chunks of at most one slot (rows of a slice, or pieces of a row).
// Each chunk's staging leg and transfer leg run on the same ring, back to
// back, so the chunk is still in the engine's cache for the second leg; a
// large copy spreads its chunks over the rings (fork and join as for direct
// copies), so that one engine stages while another transfers. A ring
// alternates between its slots: an engine that runs its legs asynchronously
// (a staging agent beside a hardware engine) overlaps them too. The ring's
// order makes a slot free again before its next use.
static void plan_staged(plan_t *p, uint64_t dst, uint64_t src, const box_t *b,
                        bool to_device) {
  const uint64_t slot_bytes = ACCEL_DMA_STAGING_SLOT_BYTES;
  uint64_t rows_per_chunk = b->width <= slot_bytes ? slot_bytes / b->width : 1;
  uint64_t x_chunks =
      b->width <= slot_bytes ? 1 : (b->width + slot_bytes - 1) / slot_bytes;
  uint64_t chunks = b->depth * x_chunks *
                    ((b->height + rows_per_chunk - 1) / rows_per_chunk);
  uint64_t k = piece_count(p, b->width * b->height * b->depth);
  if (k > chunks) {
    k = chunks;
  }
  accel_dma_dep_t fork = {0};
  if (k > 1) {
    fork = fence_signal(p, 0);
  }
  uint64_t c = 0;
  for (uint64_t z = 0; z < b->depth; ++z) {
    for (uint64_t y = 0; y < b->height;) {
      uint64_t ny = b->height - y < rows_per_chunk ? b->height - y
                                                    : rows_per_chunk;
      for (uint64_t x = 0; x < b->width; ++c) {
        uint64_t nx = b->width - x < slot_bytes ? b->width - x : slot_bytes;
        // Contiguous blocks of chunks per ring.
        uint32_t r = (uint32_t)(c * k / chunks);
        uint64_t first = (r * chunks + k - 1) / k;  // first chunk of ring r
        uint32_t s = r * ACCEL_DMA_STAGING_SLOTS +
                     (uint32_t)((c - first) % ACCEL_DMA_STAGING_SLOTS);
        uint64_t slot = (uint64_t)(uintptr_t)p->q->staging.base +
                        (uint64_t)s * slot_bytes;
        uint64_t doff = z * b->dst_slice_pitch + y * b->dst_pitch + x;
        uint64_t soff = z * b->src_slice_pitch + y * b->src_pitch + x;
        // The chunk packed in the slot: rows of nx bytes.
        box_t in = {.dst_pitch = nx, .src_pitch = b->src_pitch};
        box_t out = {.dst_pitch = b->dst_pitch, .src_pitch = nx};
        fence_wait(p, r, fork);
        emit_copy(p, r, slot, src + soff, nx, ny, 1, &in,
                  to_device ? ACCEL_DMA_DIR_STAGING : p->direction, 0);
        emit_copy(p, r, dst + doff, slot, nx, ny, 1, &out,
                  to_device ? p->direction : ACCEL_DMA_DIR_STAGING,
                  ACCEL_DMA_HW_FLAG_STREAM_DST);
        x += nx;
      }
      y += ny;
    }
  }
  if (k > 1) {
    accel_dma_dep_t done[ACCEL_DMA_MAX_RINGS];
    for (uint32_t r = 1; r < k; ++r) {
      done[r] = fence_signal(p, r);
    }
    for (uint32_t r = 1; r < k; ++r) {
      fence_wait(p, 0, done[r]);
    }
  }
}

static bool is_host_side(const accel_dma_ref_t *r) {
  return r->host != NULL ||
         r->buffer->kind == ACCEL_MEMORY_KIND_HOST_PINNED;
}

static uint8_t direction_of(const accel_dma_desc_t *d) {
  bool dh = is_host_side(&d->dst);
  if (d->op == ACCEL_DMA_OP_FILL) {
    return dh ? ACCEL_DMA_DIR_HOST_TO_HOST : ACCEL_DMA_DIR_DEVICE_TO_DEVICE;
  }
  bool sh = is_host_side(&d->src);
  if (dh && sh) return ACCEL_DMA_DIR_HOST_TO_HOST;
  if (sh) return ACCEL_DMA_DIR_HOST_TO_DEVICE;
  if (dh) return ACCEL_DMA_DIR_DEVICE_TO_HOST;
  return ACCEL_DMA_DIR_DEVICE_TO_DEVICE;
}

static uint64_t ref_address(const accel_dma_ref_t *r) {
  return r->buffer != NULL ? r->buffer->address + r->offset
                           : (uint64_t)(uintptr_t)r->host + r->offset;
}

// Plans one copy box (a whole 1D/2D/3D copy or one SG segment).
static void plan_box(plan_t *p, const accel_dma_desc_t *d, uint64_t dst,
                     uint64_t src, const box_t *b) {
  if (b->width == 0) {
    return;
  }
  if (d->src.host != NULL) {
    plan_staged(p, dst, src, b, true);
  } else if (d->dst.host != NULL) {
    plan_staged(p, dst, src, b, false);
  } else {
    plan_direct(p, dst, src, b);
  }
}

// Keeps a reference to |object| until the submit retires (write pass only).
static void hold(plan_t *p, accel_object_t *object) {
  if (p->write) {
    accel_dma_queue_hold_locked(p->q, object);
  }
  p->holds++;
}

// Plans descriptor |d|, holding its buffers until the submit retires.
static void plan_desc(plan_t *p, const accel_dma_desc_t *d, const box_t *b) {
  p->user_op = (uint8_t)d->op;
  p->direction = direction_of(d);
  uint64_t dst = ref_address(&d->dst);
  if (d->op == ACCEL_DMA_OP_FILL) {
    if (d->width_bytes > 0) {
      hold(p, &d->dst.buffer->object);
      plan_fill(p, dst, d->width_bytes, d->pattern, d->pattern_size);
    }
    return;
  }
  uint64_t src = ref_address(&d->src);
  bool any = b->width > 0;
  if (d->op == ACCEL_DMA_OP_COPY_SG) {
    any = false;
    for (uint32_t s = 0; s < d->segment_count && !any; ++s) {
      any = d->segments[s].size_bytes > 0;
    }
  }
  if (!any) {
    return;
  }
  if (d->dst.buffer != NULL) {
    hold(p, &d->dst.buffer->object);
  }
  if (d->src.buffer != NULL) {
    hold(p, &d->src.buffer->object);
  }
  if (d->op != ACCEL_DMA_OP_COPY_SG) {
    plan_box(p, d, dst, src, b);
    return;
  }
  for (uint32_t s = 0; s < d->segment_count; ++s) {
    const accel_dma_segment_t *g = &d->segments[s];
    box_t sb = {.width = g->size_bytes, .height = 1, .depth = 1};
    plan_box(p, d, dst + g->dst_offset, src + g->src_offset, &sb);
  }
}

// Plans the whole submit. The home ring's head passing its last descriptor
// means the submit completed (every other ring joins the home ring).
static void plan_submit(plan_t *p, const accel_dma_desc_t *descs,
                            uint32_t stride, const box_t *boxes,
                            uint32_t desc_count, uint32_t wait_count,
                            accel_semaphore_t *const *wait_sems,
                            const uint64_t *wait_values, uint32_t signal_count,
                            accel_semaphore_t *const *signal_sems,
                            const uint64_t *signal_values) {
  accel_dma_queue_t *q = p->q;
  for (uint32_t i = 0; i < q->ring_count; ++i) {
    p->fence_next[i] = q->rings[i].fence_next;
    p->need[i] = 0;
  }
  memset(p->waited, 0,
         sizeof(*p->waited) * (size_t)q->ring_count * q->ring_count);
  p->written = 0;
  p->holds = 0;
  p->has_pending = false;
  p->index = UINT32_MAX;
  p->user_op = 0;
  p->direction = 0;
  for (uint32_t i = 0; i < wait_count; ++i) {
    accel_dma_hw_desc_t d = hw_desc(p, ACCEL_DMA_HW_WAIT, true);
    d.sem.semaphore = wait_sems[i]->drv;
    d.sem.value = wait_values[i];
    hold(p, &wait_sems[i]->object);
    emit(p, 0, &d);
  }
  for (uint32_t i = 0; i < desc_count; ++i) {
    accel_dma_desc_t d;
    load_desc(descs, stride, i, &d);
    p->index = i;
    plan_desc(p, &d, &boxes[i]);
  }
  p->index = UINT32_MAX;
  uint32_t first_signal = 0;
  if (signal_count > 0 && p->has_pending) {
    p->pending.signal_semaphore = signal_sems[0]->drv;
    p->pending.signal_value = signal_values[0];
    hold(p, &signal_sems[0]->object);
    first_signal = 1;
  }
  flush_pending(p);
  for (uint32_t i = first_signal; i < signal_count; ++i) {
    accel_dma_hw_desc_t d = hw_desc(p, ACCEL_DMA_HW_SIGNAL, true);
    d.sem.semaphore = signal_sems[i]->drv;
    d.sem.value = signal_values[i];
    hold(p, &signal_sems[i]->object);
    emit(p, 0, &d);
  }
}

// Does a written submit's bookkeeping, then rings the doorbells (holds the
// lock). The bookkeeping comes first: polling engines start on the handed
// over descriptors meanwhile, and the doorbell's full barrier then finds the
// descriptor stores done instead of waiting for them.
static void commit_locked(accel_dma_queue_t *q, plan_t *p,
                          uint32_t desc_count) {
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
  accel_status_t st = validated ? ACCEL_OK : validate_desc(q, desc, &b);
  if (st != ACCEL_OK) {
    return accel_error_context(st, "dma submit to \"%s\": descriptor 0 (%s)",
                               q->name, op_name(desc->op));
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

static accel_status_t dma_submit(
    accel_dma_queue_t *q, const accel_dma_desc_t *descs, uint32_t desc_count,
    uint32_t wait_count, accel_semaphore_t *const *wait_semaphores,
    const uint64_t *wait_values, uint32_t signal_count,
    accel_semaphore_t *const *signal_semaphores, const uint64_t *signal_values,
    bool validated) {
  ACCEL_RETURN_IF_ERROR(check_semaphores(q, wait_count, wait_semaphores,
                                         wait_values, "wait"));
  ACCEL_RETURN_IF_ERROR(check_semaphores(q, signal_count, signal_semaphores,
                                         signal_values, "signal"));
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
  accel_status_t st = ACCEL_OK;
  bool pageable = false;
  for (uint32_t i = 0; i < desc_count; ++i) {
    accel_dma_desc_t d;
    load_desc(descs, stride, i, &d);
    if (d.struct_size != stride) {
      st = accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "dma submit to \"%s\": descriptor %u has struct_size "
                       "%u but descriptor 0 has %u",
                       q->name, i, d.struct_size, stride);
      goto out_free_boxes;
    }
    if (validated) {
      boxes[i] = validated_box(&d);
    } else {
      st = validate_desc(q, &d, &boxes[i]);
    }
    if (st != ACCEL_OK) {
      accel_error_context(st, "dma submit to \"%s\": descriptor %u (%s)",
                          q->name, i, op_name(d.op));
      goto out_free_boxes;
    }
    pageable |= d.op != ACCEL_DMA_OP_FILL &&
                (d.dst.host != NULL || d.src.host != NULL);
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
  // A failed queue stays failed: report its stored error.
  st = accel_dma_queue_check_failed(q);
  if (st != ACCEL_OK) {
    goto out_unlock;
  }
  if (pageable) {
    st = accel_dma_staging_ensure_locked(q);
    if (st != ACCEL_OK) {
      goto out_unlock;
    }
  }
  // Drop what earlier submits held, now and then (reading the engine's
  // head moves its cache line).
  if (q->held_count >= 64) {
    // Acquire: the engine finished with what it retired.
    accel_dma_queue_retire_locked(
        q, atomic_load_explicit(q->rings[0].mem.head, memory_order_acquire));
  }
  p.submit_id = q->submit_count + 1;
  // Count pass, for non-blocking queues (which must know that everything
  // fits before writing); blocking queues reserve for the most references
  // a submit can hold and stream into the rings.
  p.holds = (uint64_t)wait_count + signal_count + 2ull * desc_count;
  if ((q->flags & ACCEL_DMA_QUEUE_FLAG_NON_BLOCKING) != 0) {
    plan_submit(&p, descs, stride, boxes, desc_count, wait_count,
                wait_semaphores, wait_values, signal_count, signal_semaphores,
                signal_values);
    for (uint32_t i = 0; i < n; ++i) {
      accel_dma_ring_state_t *r = &q->rings[i];
      uint64_t head = r->head_cached;
      if (r->tail - head + p.need[i] > r->mem.slot_count) {
        head = atomic_load_explicit(r->mem.head, memory_order_acquire);
        r->head_cached = head;
      }
      if (p.need[i] > r->mem.slot_count) {
        st = accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "dma submit to \"%s\": needs %llu descriptors on "
                         "ring %u, which holds %u; split the submit or use a "
                         "blocking queue",
                         q->name, (unsigned long long)p.need[i], i,
                         r->mem.slot_count);
        goto out_unlock;
      }
      if (r->tail - head + p.need[i] > r->mem.slot_count) {
        counter_add(&q->not_ready, 1);
        st = accel_error(ACCEL_ERROR_NOT_READY,
                         "dma submit to \"%s\": ring %u has %llu of %u "
                         "descriptors free, the submit needs %llu",
                         q->name, i,
                         (unsigned long long)(r->mem.slot_count -
                                              (r->tail - head)),
                         r->mem.slot_count, (unsigned long long)p.need[i]);
        goto out_unlock;
      }
    }
  }
  st = accel_dma_queue_reserve_held_locked(q, p.holds);
  if (st != ACCEL_OK) {
    goto out_unlock;
  }
  // Write pass: from here on nothing fails.
  p.write = true;
  plan_submit(&p, descs, stride, boxes, desc_count, wait_count,
              wait_semaphores, wait_values, signal_count, signal_semaphores,
              signal_values);
  for (uint32_t i = 0; i < n; ++i) {
    q->rings[i].fence_next = p.fence_next[i];
  }
  commit_locked(q, &p, desc_count);

out_unlock:
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
