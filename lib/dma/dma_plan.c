// Planning a multi-part DMA submit: each descriptor becomes ring
// descriptors (copies split over engines, pageable copies staged through
// bounce buffers, fills), with the forks and joins that keep a submit's
// descriptors in order across rings (see dma_submit.c's header comment).
#include <string.h>

#include "core/error.h"
#include "dma/dma_plan.h"
#include "mem/buffer_impl.h"

// Queues |d| on |ring|. The home ring holds its last copy or fill back, so
// that the submit's first signal can be folded into it (one descriptor less
// for the engine to fetch on the latency path).
static void emit(plan_t *p, uint32_t ring, const accel_dma_hw_desc_t *d) {
  if (ring != 0) {
    accel_dma_emit_now(p, ring, d);
    return;
  }
  accel_dma_flush_pending(p);
  if (d->op == ACCEL_DMA_HW_COPY || d->op == ACCEL_DMA_HW_FILL) {
    p->pending = *d;
    p->has_pending = true;
    return;
  }
  accel_dma_emit_now(p, 0, d);
}

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
void accel_dma_plan_submit(plan_t *p, const accel_dma_desc_t *descs,
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
    accel_dma_load_desc(descs, stride, i, &d);
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
  accel_dma_flush_pending(p);
  for (uint32_t i = first_signal; i < signal_count; ++i) {
    accel_dma_hw_desc_t d = hw_desc(p, ACCEL_DMA_HW_SIGNAL, true);
    d.sem.semaphore = signal_sems[i]->drv;
    d.sem.value = signal_values[i];
    hold(p, &signal_sems[i]->object);
    emit(p, 0, &d);
  }
}
