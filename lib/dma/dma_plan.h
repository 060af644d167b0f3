// DMA submit planning, shared by dma_plan.c (descriptors of a multi-part
// submit: split copies, staging legs, fills, forks and joins between rings)
// and dma_submit.c (the entry points, the single-copy latency path, and the
// writing of ring descriptors).
#ifndef ACCEL_DMA_DMA_PLAN_H_
#define ACCEL_DMA_DMA_PLAN_H_

#include "dma/dma_impl.h"
#include "dma/dma_validate.h"
#include "mem/buffer_impl.h"

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

// A zeroed descriptor, copied from a constant: compilers zero a struct this
// size with a string store (rep stos), which later loads of it cannot be
// forwarded from (they wait for it to reach the cache); a copy is plain
// vector moves.
static const accel_dma_hw_desc_t k_zero_desc;

static inline bool is_host_side(const accel_dma_ref_t *r) {
  return r->host != NULL ||
         r->buffer->kind == ACCEL_MEMORY_KIND_HOST_PINNED;
}

static inline uint8_t direction_of(const accel_dma_desc_t *d) {
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

static inline uint64_t ref_address(const accel_dma_ref_t *r) {
  return r->buffer != NULL ? r->buffer->address + r->offset
                           : (uint64_t)(uintptr_t)r->host + r->offset;
}

// Keeps a reference to |object| until the submit retires (write pass only).
static inline void hold(plan_t *p, accel_object_t *object) {
  if (p->write) {
    accel_dma_queue_hold_locked(p->q, object);
  }
  p->holds++;
}

// Writes |src| into ring |ring| now (or counts it, in the count pass).
void accel_dma_emit_now(plan_t *p, uint32_t ring,
                        const accel_dma_hw_desc_t *src);
// Writes the home ring's held-back descriptor, if any.
void accel_dma_flush_pending(plan_t *p);
// Plans a submit's waits, descriptors (with their validated |boxes|) and
// signals into |p|: counts them, or writes them when p->write.
void accel_dma_plan_submit(plan_t *p, const accel_dma_desc_t *descs,
                           uint32_t stride, const box_t *boxes,
                           uint32_t desc_count, uint32_t wait_count,
                           accel_semaphore_t *const *wait_semaphores,
                           const uint64_t *wait_values, uint32_t signal_count,
                           accel_semaphore_t *const *signal_semaphores,
                           const uint64_t *signal_values);

#endif  // ACCEL_DMA_DMA_PLAN_H_
