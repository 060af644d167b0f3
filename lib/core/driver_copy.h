// Driver interface, copy-engine table: DMA descriptor rings consumed by copy
// engines (see driver.h).
#ifndef ACCEL_CORE_DRIVER_COPY_H_
#define ACCEL_CORE_DRIVER_COPY_H_

#include <stdatomic.h>

#include "core/driver.h"
// ---------------------------------------------------------------------------
// DMA rings: what a copy engine consumes. A ring is a power-of-two array of
// descriptors in memory shared by the host and the engine, in the shape of a
// hardware DMA ring: the host writes descriptors at its tail and rings the
// doorbell with the new tail; the engine executes them in order and writes
// back its head (descriptors retired, executed or aborted). Descriptors carry
// device addresses (virtual, so that physical pages may be remapped under
// queued work); the host keeps the objects they name alive until the ring's
// head has passed them (the engine never touches reference counts, which
// stay in the submitting thread's cache). Ordering between rings
// (and with streams) is by semaphore acquire (WAIT) and release (SIGNAL)
// descriptors, as on hardware copy engines.
// ---------------------------------------------------------------------------

typedef enum accel_dma_hw_op {
  ACCEL_DMA_HW_COPY = 0,    // strided 3D copy (1D: height = depth = 1)
  ACCEL_DMA_HW_FILL = 1,    // 1D fill with a 1/2/4/8-byte pattern
  ACCEL_DMA_HW_WAIT = 2,    // stall the ring until semaphore >= value
  ACCEL_DMA_HW_SIGNAL = 3,  // raise semaphore to value (never lowers it)
} accel_dma_hw_op_t;

// Byte counters by direction (accel_dma_hw_desc_t.direction).
enum {
  ACCEL_DMA_DIR_DEVICE_TO_DEVICE = 0,
  ACCEL_DMA_DIR_HOST_TO_DEVICE = 1,
  ACCEL_DMA_DIR_DEVICE_TO_HOST = 2,
  ACCEL_DMA_DIR_HOST_TO_HOST = 3,
  ACCEL_DMA_DIR_STAGING = 4,  // pageable <-> bounce buffer legs
  ACCEL_DMA_DIR_COUNT = 5,
};

// Descriptor hints (accel_dma_hw_desc_t.flags).
enum {
  // The destination will not be read again soon (the last leg of a staged
  // copy): an engine may write around its caches.
  ACCEL_DMA_HW_FLAG_STREAM_DST = 1u << 0,
};

typedef struct accel_dma_hw_desc {
  uint8_t op;         // accel_dma_hw_op_t
  uint8_t direction;  // ACCEL_DMA_DIR_* (COPY, FILL)
  uint8_t user_op;    // the public accel_dma_op_t it came from (messages)
  uint8_t flags;      // ACCEL_DMA_HW_FLAG_*
  uint32_t index;      // descriptor index in its submit; UINT32_MAX internal
  // Ownership word: the descriptor's ring position + 1, stored last (with
  // release, __atomic_store_n) by the host once the rest is written. The
  // engine may start on a descriptor whose word matches before the doorbell,
  // as hardware engines that poll their rings do; the doorbell wakes an
  // engine that stopped polling.
  uint64_t position;
  uint64_t submit_id;  // submit number in its queue, from 1 (messages)
  union {
    struct {
      uint64_t dst;  // device address of the first byte
      uint64_t src;
      uint64_t width;  // bytes per row
      uint32_t height;  // rows per slice (>= 1)
      uint32_t depth;   // slices (>= 1)
      uint64_t dst_pitch;  // bytes between rows
      uint64_t src_pitch;
      uint64_t dst_slice_pitch;  // bytes between slices
      uint64_t src_slice_pitch;
    } copy;
    struct {
      uint64_t dst;
      uint64_t size_bytes;
      uint64_t pattern;
      uint32_t pattern_size;
    } fill;
    struct {
      accel_drv_semaphore_t *semaphore;
      uint64_t value;
    } sem;  // WAIT, SIGNAL
  };
  // COPY, FILL: if not NULL, raised to |signal_value| once the descriptor
  // completed (a semaphore release folded into the descriptor, as hardware
  // copy engines offer), or failed with the ring's error if it did not.
  accel_drv_semaphore_t *signal_semaphore;
  uint64_t signal_value;
  // COPY, FILL: the descriptor's number among its ring's traced copies and
  // fills, from 1 (lib/trace: the engine reports its start and end with the
  // ring as the queue); 0: not traced (staging legs, host-to-host copies).
  uint64_t trace_seq;
  uint8_t pad1[16];
} accel_dma_hw_desc_t;

_Static_assert(sizeof(accel_dma_hw_desc_t) == 128,
               "a DMA descriptor is two cache lines");

// The bytes a COPY or FILL descriptor moves (0 for WAIT and SIGNAL): a plain
// number for whoever reports the descriptor (the trace hooks).
static inline uint64_t accel_dma_hw_desc_bytes(const accel_dma_hw_desc_t *d) {
  return d->op == ACCEL_DMA_HW_COPY
             ? d->copy.width * d->copy.height * d->copy.depth
         : d->op == ACCEL_DMA_HW_FILL ? d->fill.size_bytes
                                      : 0;
}

// The memory a ring shares between host and engine.
typedef struct accel_dma_ring_mem {
  accel_dma_hw_desc_t *slots;  // slot_count descriptors
  uint32_t slot_count;         // a power of two
  // Written back by the engine: descriptors retired. Acquire-load it before
  // reusing a slot.
  const _Atomic uint64_t *head;
  // Engine counters: bytes moved by direction (ACCEL_DMA_DIR_*).
  const _Atomic uint64_t *bytes;
  // Set (release) by the engine when the ring fails; its fence then holds
  // the error. A flag on its own cache line, cheap to poll.
  const _Atomic uint32_t *failed;
} accel_dma_ring_mem_t;

typedef struct accel_drv_dma_ring_params {
  uint32_t engine;      // copy engine index, < copy_engine_count
  uint32_t slot_count;  // a power of two, >= 2
  // Failed with the ring's error when a descriptor fails; from then on the
  // ring aborts every descriptor (SIGNALs fail their semaphores with the same
  // message). Not owned; outlives the ring.
  accel_drv_semaphore_t *fence;
  const char *name;  // for messages ("queue0/ring1")
} accel_drv_dma_ring_params_t;

struct accel_drv_copy_ops {
  uint32_t (*engine_count)(accel_drv_device_t *device);
  // Creates an empty ring on engine params->engine and describes its shared
  // memory in |*out_mem| (valid until destroy).
  accel_status_t (*ring_create)(accel_drv_device_t *device,
                                const accel_drv_dma_ring_params_t *params,
                                accel_drv_dma_ring_t **out_ring,
                                accel_dma_ring_mem_t *out_mem);
  // Destroys a ring whose descriptors have all retired (head == tail).
  void (*ring_destroy)(accel_drv_dma_ring_t *ring);
  // Publishes the descriptors written up to |tail| (absolute count, never
  // lower than before) to the engine and wakes it.
  void (*ring_doorbell)(accel_drv_dma_ring_t *ring, uint64_t tail);
  // Blocks until the engine's head reaches |head| (space to write), at most
  // |timeout_ns|: ACCEL_ERROR_TIMEOUT otherwise.
  accel_status_t (*ring_wait)(accel_drv_dma_ring_t *ring, uint64_t head,
                              uint64_t timeout_ns);
  // Makes the engine abort every descriptor of |ring| it has not started,
  // a WAIT it is stalled on included (ACCEL_ERROR_ABORTED: SIGNALs fail).
  void (*ring_abort)(accel_drv_dma_ring_t *ring);
  // Optional (NULL: never). Executes |desc|, a COPY with its folded signal,
  // at once on the calling thread, as if the ring's engine had: it counts
  // its bytes, reports its start and end to lib/trace when desc->trace_seq
  // is set, and raises desc->signal_semaphore. Only when the ring is idle
  // (every descriptor published retired, so nothing can come before it),
  // healthy, has no abort, and the device reaches the memory from the host;
  // otherwise it returns ACCEL_ERROR_NOT_READY and does nothing (the caller
  // writes the descriptor into the ring instead). The caller serializes it
  // with its writes and doorbells of the ring. A host device's "engine" is a
  // CPU thread: a small copy costs less than the two thread handoffs of the
  // ring, as CUDA runs small pageable copies on the calling thread.
  accel_status_t (*ring_execute_now)(accel_drv_dma_ring_t *ring,
                                     const accel_dma_hw_desc_t *desc);
};

#endif  // ACCEL_CORE_DRIVER_COPY_H_
