// DMA descriptor validation, shared by the submit paths (dma_validate.c).
#ifndef ACCEL_DMA_DMA_VALIDATE_H_
#define ACCEL_DMA_DMA_VALIDATE_H_

#include "dma/dma_impl.h"

// Every copy is a 3D box of rows (1D: one row).
typedef struct box {
  uint64_t width;
  uint64_t height;
  uint64_t depth;
  uint64_t dst_pitch;
  uint64_t src_pitch;
  uint64_t dst_slice_pitch;
  uint64_t src_slice_pitch;
} box_t;

// Names a public op for messages ("copy 2d").
const char *accel_dma_op_name(uint32_t op);

// Reads descriptor |i| of the caller's array (its own struct size |stride|)
// into |*out|, zero-extended.
void accel_dma_load_desc(const accel_dma_desc_t *descs, uint32_t stride,
                         uint32_t i, accel_dma_desc_t *out);

// Validates |d| for |q| and normalizes it into |*b| (defaults for unused
// dimensions). The message names the field at fault; the caller adds the
// descriptor's index.
accel_status_t accel_dma_validate_desc(const accel_dma_queue_t *q,
                                       const accel_dma_desc_t *d, box_t *b);

// Checks a submit's |count| wait or signal semaphores (|what|): present and
// on |q|'s device.
accel_status_t accel_dma_check_semaphores(const accel_dma_queue_t *q,
                                          uint32_t count,
                                          accel_semaphore_t *const *sems,
                                          const uint64_t *values,
                                          const char *what);

#endif  // ACCEL_DMA_DMA_VALIDATE_H_
