// DMA descriptor validation (accel_dma_submit's first step): one checker per
// op and one line of dispatch, as IREE keeps command-buffer validation in a
// file of its own. Buffers are checked by lib/mem's accel_buffer_check_use.
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "dma/dma_validate.h"
#include "mem/buffer_impl.h"

#define MAX_OVERLAP_ROWS (1u << 20)

const char *accel_dma_op_name(uint32_t op) {
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
                                 uint64_t extent, uint32_t use,
                                 const char *what) {
  if (ref->buffer != NULL) {
    if (offset < ref->offset) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "%s offset overflows", what);
    }
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
void accel_dma_load_desc(const accel_dma_desc_t *descs, uint32_t stride,
                      uint32_t i, accel_dma_desc_t *out) {
  memset(out, 0, sizeof(*out));
  const char *p = (const char *)descs + (size_t)i * stride;
  memcpy(out, p, stride < sizeof(*out) ? stride : sizeof(*out));
}

// A checker per op: normalizes |d| into |*b| (a 1D box of width_bytes on
// entry) and checks what the op reads and writes. The destination reference
// was checked before dispatch.
typedef accel_status_t (*desc_checker_fn)(const accel_dma_queue_t *q,
                                          const accel_dma_desc_t *d, box_t *b);

static accel_status_t check_fill(const accel_dma_queue_t *q,
                                 const accel_dma_desc_t *d, box_t *b) {
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
  return check_side(&d->dst, d->dst.offset, d->width_bytes,
                    ACCEL_BUFFER_USE_WRITE, "destination");
}

// The source reference of a copy, and the rule that one side is device
// memory.
static accel_status_t check_copy_refs(const accel_dma_queue_t *q,
                                      const accel_dma_desc_t *d) {
  ACCEL_RETURN_IF_ERROR(check_ref(q, &d->src, "source"));
  if (d->dst.host != NULL && d->src.host != NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "source and destination are both host pointers (use "
                       "memcpy, or a pinned buffer on one side)");
  }
  return ACCEL_OK;
}

// One scatter-gather segment: both sides in range, no overlap within one
// buffer.
static accel_status_t check_segment(const accel_dma_desc_t *d, uint32_t s,
                                    bool same) {
  const accel_dma_segment_t *g = &d->segments[s];
  char what[48];
  snprintf(what, sizeof(what), "segment %u destination", s);
  ACCEL_RETURN_IF_ERROR(
      check_side(&d->dst, d->dst.offset + g->dst_offset, g->size_bytes,
                 ACCEL_BUFFER_USE_WRITE, what));
  snprintf(what, sizeof(what), "segment %u source", s);
  ACCEL_RETURN_IF_ERROR(
      check_side(&d->src, d->src.offset + g->src_offset, g->size_bytes,
                 ACCEL_BUFFER_USE_READ, what));
  box_t sb = {.width = g->size_bytes, .height = 1, .depth = 1};
  if (same && g->size_bytes > 0 &&
      sides_overlap(d->dst.offset + g->dst_offset, 0, 0,
                    d->src.offset + g->src_offset, 0, 0, &sb)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "segment %u: source [%llu, +%llu) overlaps "
                       "destination [%llu, +%llu) in the same buffer",
                       s, (unsigned long long)(d->src.offset + g->src_offset),
                       (unsigned long long)g->size_bytes,
                       (unsigned long long)(d->dst.offset + g->dst_offset),
                       (unsigned long long)g->size_bytes);
  }
  return ACCEL_OK;
}

static accel_status_t check_copy_sg(const accel_dma_queue_t *q,
                                    const accel_dma_desc_t *d, box_t *b) {
  ACCEL_RETURN_IF_ERROR(check_copy_refs(q, d));
  if (d->segment_count > 0 && d->segments == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "segments is NULL with segment_count %u",
                       d->segment_count);
  }
  bool same = d->dst.buffer != NULL && d->dst.buffer == d->src.buffer;
  for (uint32_t s = 0; s < d->segment_count; ++s) {
    ACCEL_RETURN_IF_ERROR(check_segment(d, s, same));
  }
  return ACCEL_OK;
}

// The rows and slices of a 2D or 3D copy: counts in range, pitches that
// cover a row and slice pitches that cover a slice.
static accel_status_t check_box_shape(const accel_dma_desc_t *d, box_t *b) {
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
  if (b->height > 1 && (b->dst_pitch < b->width || b->src_pitch < b->width)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "pitches (dst %llu, src %llu) must be at least the "
                       "row width %llu",
                       (unsigned long long)b->dst_pitch,
                       (unsigned long long)b->src_pitch,
                       (unsigned long long)b->width);
  }
  if (b->depth <= 1) {
    return ACCEL_OK;
  }
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
  return ACCEL_OK;
}

// 1D, 2D and 3D copies: the box's shape, both sides in range, and no
// overlap within one buffer.
static accel_status_t check_copy_box(const accel_dma_queue_t *q,
                                     const accel_dma_desc_t *d, box_t *b) {
  ACCEL_RETURN_IF_ERROR(check_copy_refs(q, d));
  if (d->op != ACCEL_DMA_OP_COPY_1D) {
    ACCEL_RETURN_IF_ERROR(check_box_shape(d, b));
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
      check_side(&d->dst, d->dst.offset, dext, ACCEL_BUFFER_USE_WRITE,
                 "destination"));
  ACCEL_RETURN_IF_ERROR(check_side(&d->src, d->src.offset, sext,
                                   ACCEL_BUFFER_USE_READ, "source"));
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

static const desc_checker_fn k_desc_checkers[] = {
    [ACCEL_DMA_OP_COPY_1D] = check_copy_box,
    [ACCEL_DMA_OP_COPY_2D] = check_copy_box,
    [ACCEL_DMA_OP_COPY_3D] = check_copy_box,
    [ACCEL_DMA_OP_COPY_SG] = check_copy_sg,
    [ACCEL_DMA_OP_FILL] = check_fill,
};

accel_status_t accel_dma_validate_desc(const accel_dma_queue_t *q,
                                       const accel_dma_desc_t *d, box_t *b) {
  if (d->op >= sizeof(k_desc_checkers) / sizeof(k_desc_checkers[0])) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT, "unknown op %u", d->op);
  }
  ACCEL_RETURN_IF_ERROR(check_ref(q, &d->dst, "destination"));
  *b = (box_t){.width = d->width_bytes, .height = 1, .depth = 1};
  return k_desc_checkers[d->op](q, d, b);
}

accel_status_t accel_dma_check_semaphores(const accel_dma_queue_t *q,
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
