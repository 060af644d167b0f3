// DMA queues: rings of copy descriptors consumed by a device's copy engines,
// in the shape of hardware DMA rings. A queue owns one ring per copy engine it
// uses; copies, strided 2D/3D copies, scatter-gather lists and fills are
// written into the rings and complete by signalling timeline semaphores, so
// that DMA work joins stream work without host round trips.
//
// Semantics of a queue: submits execute in submission order, and the
// descriptors of one submit execute in array order (each descriptor starts
// after the previous one completed), like the commands of a stream. Inside one
// descriptor, a large copy or fill is split into pieces spread over the
// queue's engines. Copies from or to pageable host memory (a plain host
// pointer) are staged through pinned bounce buffers owned by the queue, in
// chunks spread over the engines so that one engine stages while another
// transfers; buffers (device memory or ACCEL_MEMORY_KIND_HOST_PINNED) are
// accessed directly.
//
// Small copies on idle queues: a 1D copy between two buffers of at most
// ACCEL_DMA_INLINE_MAX_BYTES (default 16384; 0 turns it off), submitted with
// no wait and at most one signal to a queue with nothing pending, may run on
// the submitting thread during accel_dma_submit when the device reaches the
// memory from the host (the host device does): its semaphore is signalled
// before the call returns. Nothing is reordered (nothing was pending) and
// everything else about it is as if an engine had run it (counters, traces).
// A copy engine of the host device is a CPU thread, and two thread handoffs
// cost more than copying 16 KiB, as they do in CUDA, which runs small copies
// of pageable memory on the calling thread. ACCEL_DMA_QUEUE_FLAG_NO_INLINE
// keeps every copy of a queue on its engines.
//
// A descriptor that fails (an engine error) fails the queue: the semaphores of
// its submit and of every later submit fail with a message naming the
// descriptor, queued work behind it is aborted (not executed), and later
// calls return the stored error.
#ifndef ACCEL_DMA_H_
#define ACCEL_DMA_H_

#include "accel/base.h"
#include "accel/device.h"
#include "accel/memory.h"
#include "accel/semaphore.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_dma_queue accel_dma_queue_t;

// Queue creation flags (accel_dma_queue_desc_t.flags).
typedef uint32_t accel_dma_queue_flags_t;
enum accel_dma_queue_flag_bits {
  ACCEL_DMA_QUEUE_FLAG_NONE = 0,
  // accel_dma_submit returns ACCEL_ERROR_NOT_READY instead of blocking when
  // the rings lack space for the whole submit.
  ACCEL_DMA_QUEUE_FLAG_NON_BLOCKING = 1u << 0,
  // accel_dma_queue_destroy aborts the work that has not started (its
  // semaphores fail with ACCEL_ERROR_ABORTED), including submits waiting on
  // semaphores that will never be signalled, instead of waiting for it.
  ACCEL_DMA_QUEUE_FLAG_ABORT_ON_DESTROY = 1u << 1,
  // Every copy runs on the queue's engines, small copies to an idle queue
  // included (see "Small copies on idle queues" above).
  ACCEL_DMA_QUEUE_FLAG_NO_INLINE = 1u << 2,
};

// How to create a queue.
typedef struct accel_dma_queue_desc {
  // sizeof(accel_dma_queue_desc_t) as the caller compiled it.
  uint32_t struct_size;
  // accel_dma_queue_flag_bits.
  accel_dma_queue_flags_t flags;
  // Descriptors per ring, a power of two from 16 to 65536; 0 means 1024.
  uint32_t ring_size;
  // Copy engines the queue spreads work over; 0 means all of the device's.
  // Larger than the device has: clamped to what it has.
  uint32_t engine_count;
  // Name for messages and traces (copied); NULL for "dmaN".
  const char *name;
  // Watchdog progress deadline in ns (docs/health.md): a descriptor that
  // has not retired this long after the queue last made progress fails the
  // queue with ACCEL_ERROR_TIMEOUT. 0 means the runtime's default
  // (ACCEL_WATCHDOG_MS; off if unset).
  uint64_t watchdog_ns;
} accel_dma_queue_desc_t;

// Descriptor kinds (accel_dma_desc_t.op).
typedef enum accel_dma_op {
  // Copies width_bytes bytes.
  ACCEL_DMA_OP_COPY_1D = 0,
  // Copies |height| rows of width_bytes bytes, rows |*_pitch| bytes apart.
  ACCEL_DMA_OP_COPY_2D = 1,
  // Copies |depth| slices of |height| rows; slices |*_slice_pitch| apart.
  ACCEL_DMA_OP_COPY_3D = 2,
  // Copies each of |segments| (offsets relative to dst and src).
  ACCEL_DMA_OP_COPY_SG = 3,
  // Fills width_bytes bytes at dst with |pattern| (pattern_size bytes,
  // little-endian); dst's offset and the size are multiples of pattern_size.
  ACCEL_DMA_OP_FILL = 4,
} accel_dma_op_t;

// One side of a copy: a buffer and an offset into it, or a host pointer.
typedef struct accel_dma_ref {
  // A buffer on the queue's device (device memory or pinned host memory,
  // including host memory registered with accel_host_register, which is
  // then copied directly), or NULL to use |host|.
  accel_buffer_t *buffer;
  // Pageable host memory when |buffer| is NULL (staged through bounce
  // buffers); must stay valid and unchanged (source) or untouched
  // (destination) until the submit completes.
  void *host;
  // Bytes from the start of |buffer| (or from |host|).
  uint64_t offset;
} accel_dma_ref_t;

// One scatter-gather segment.
typedef struct accel_dma_segment {
  uint64_t dst_offset;  // bytes, added to the descriptor's dst offset
  uint64_t src_offset;  // bytes, added to the descriptor's src offset
  uint64_t size_bytes;  // bytes to copy; 0 is a no-op
} accel_dma_segment_t;

// One DMA descriptor.
typedef struct accel_dma_desc {
  // sizeof(accel_dma_desc_t) as the caller compiled it.
  uint32_t struct_size;
  // accel_dma_op_t.
  uint32_t op;
  // Destination; for FILL it must be a buffer.
  accel_dma_ref_t dst;
  // Source; ignored by FILL.
  accel_dma_ref_t src;
  // Bytes per row (1D: bytes to copy or fill). 0 is a no-op.
  uint64_t width_bytes;
  // Rows per slice for 2D/3D, at most 2^32-1; 0 means 1. Ignored otherwise.
  uint64_t height;
  // Slices for 3D, at most 2^32-1; 0 means 1. Ignored otherwise.
  uint64_t depth;
  // Bytes between rows (2D/3D); >= width_bytes when height > 1.
  uint64_t dst_pitch;
  uint64_t src_pitch;
  // Bytes between slices (3D); >= pitch * height when depth > 1.
  uint64_t dst_slice_pitch;
  uint64_t src_slice_pitch;
  // FILL: the pattern and its size (1, 2, 4 or 8). Only the low
  // |pattern_size| bytes of |pattern| may be non-zero: a descriptor with a
  // bit set above them is refused (ACCEL_ERROR_INVALID_ARGUMENT), not
  // truncated.
  uint64_t pattern;
  uint32_t pattern_size;
  // COPY_SG: number of segments, and the array (read during the call).
  uint32_t segment_count;
  const accel_dma_segment_t *segments;
} accel_dma_desc_t;

// Per-queue counters (accel_dma_queue_counters).
typedef struct accel_dma_queue_counters {
  // sizeof(accel_dma_queue_counters_t) as the caller compiled it.
  uint32_t struct_size;
  // Copy engines (and rings) the queue uses.
  uint32_t engine_count;
  // Bytes moved by completed descriptors, by direction (host means pageable
  // or pinned host memory).
  uint64_t bytes_host_to_device;
  uint64_t bytes_device_to_host;
  uint64_t bytes_device_to_device;
  uint64_t bytes_host_to_host;
  // Bytes copied between pageable memory and bounce buffers (the staging
  // legs of pageable copies, on top of their transfer bytes above).
  uint64_t bytes_staged;
  // Successful accel_dma_submit calls and the descriptors they carried.
  uint64_t submits;
  uint64_t descriptors;
  // Ring descriptors written (pieces, staging legs, semaphore operations).
  uint64_t ring_descriptors;
  // Ring descriptors written but not yet retired by the engines, now and at
  // most (sampled at each submit), out of ring_capacity (all rings).
  uint64_t ring_occupancy;
  uint64_t ring_occupancy_peak;
  uint64_t ring_capacity;
  // Times a blocking submit waited for ring space (back-pressure).
  uint64_t stalls;
  // Submits refused with ACCEL_ERROR_NOT_READY (non-blocking queues).
  uint64_t not_ready;
  // Copies that ran on the submitting thread (small copies on an idle
  // queue); their bytes are in the byte counters above.
  uint64_t inline_copies;
} accel_dma_queue_counters_t;

// Creates a DMA queue on |device| with one ring per copy engine it uses.
// |desc| may be NULL for defaults. On success |*out_queue| is owned by the
// caller, who destroys it with accel_dma_queue_destroy.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL device or out_queue, struct_size too
//   small, unknown flags, ring_size not a power of two in [16, 65536].
// ACCEL_ERROR_UNSUPPORTED: the device has no copy engines.
// ACCEL_ERROR_OUT_OF_MEMORY: the rings or their engines could not be set up.
// Thread-safe.
ACCEL_API accel_status_t accel_dma_queue_create(
    accel_device_t *device, const accel_dma_queue_desc_t *desc,
    accel_dma_queue_t **out_queue);

// Waits for every submit on |queue| to complete (or be aborted), then frees
// it. Semaphores it was to signal are signalled (or failed) before this
// returns. Without ACCEL_DMA_QUEUE_FLAG_ABORT_ON_DESTROY, a submit waiting on
// a semaphore that is never signalled makes this block forever; with it, work
// not started is aborted. NULL is ignored.
// Not thread-safe: no other call on |queue| may run or follow.
ACCEL_API void accel_dma_queue_destroy(accel_dma_queue_t *queue);

// Submits |desc_count| descriptors to |queue|: they run after every
// wait_semaphores[i] reached wait_values[i], in order after earlier submits;
// when all completed, each signal_semaphores[i] is raised to
// signal_values[i] (a semaphore already higher is left as is).
// Every descriptor is validated before anything is queued: on failure nothing
// is queued. Buffers and semaphores are retained until the queue sees the
// work complete (at a later submit, synchronize, query or destroy); host
// pointers are borrowed and must stay valid until the signal. Descriptors are
// never dropped: when the rings are full the call blocks until the engines
// make room (or, on a non-blocking queue, returns ACCEL_ERROR_NOT_READY).
// A submit with no descriptors orders its signals after its waits.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL arrays with non-zero counts; a
//   descriptor with a bad op, struct_size, pattern, pitch or size, a range
//   outside its buffer, a buffer on another device, two host pointers, or a
//   source overlapping its destination; the message names the descriptor.
//   Also a semaphore on another device, or a submit that needs more ring
//   descriptors than a non-blocking queue's ring holds.
// ACCEL_ERROR_NOT_READY: non-blocking queue whose rings lack space now.
// ACCEL_ERROR_OUT_OF_MEMORY: bounce buffers could not be allocated.
// Other codes: the queue failed earlier (its stored error and message).
// Thread-safe (submits from several threads are serialized).
ACCEL_API accel_status_t accel_dma_submit(
    accel_dma_queue_t *queue, const accel_dma_desc_t *descs,
    uint32_t desc_count, uint32_t wait_count,
    accel_semaphore_t *const *wait_semaphores, const uint64_t *wait_values,
    uint32_t signal_count, accel_semaphore_t *const *signal_semaphores,
    const uint64_t *signal_values);

// Submits one 1D copy of |size_bytes| bytes between two buffers (the
// accel_dma_submit contract, without semaphores).
// Thread-safe.
ACCEL_API accel_status_t accel_dma_copy(accel_dma_queue_t *queue,
                                        accel_buffer_t *dst,
                                        uint64_t dst_offset,
                                        accel_buffer_t *src,
                                        uint64_t src_offset,
                                        uint64_t size_bytes);

// Submits one 2D copy of |height| rows of |width_bytes| between two buffers
// (the accel_dma_submit contract, without semaphores).
// Thread-safe.
ACCEL_API accel_status_t accel_dma_copy_2d(
    accel_dma_queue_t *queue, accel_buffer_t *dst, uint64_t dst_offset,
    uint64_t dst_pitch, accel_buffer_t *src, uint64_t src_offset,
    uint64_t src_pitch, uint64_t width_bytes, uint64_t height);

// Waits until everything submitted to |queue| before this call completed.
// A submit's semaphores are signalled just before the queue counts it
// complete, so a thread woken by them may still see the queue busy briefly.
// ACCEL_ERROR_TIMEOUT: not complete after |timeout_ns|
//   (ACCEL_TIMEOUT_INFINITE waits forever).
// Other codes: the queue failed (its stored error, naming the descriptor).
// Thread-safe.
ACCEL_API accel_status_t accel_dma_queue_synchronize(accel_dma_queue_t *queue,
                                                     uint64_t timeout_ns);

// Returns ACCEL_OK if everything submitted to |queue| completed,
// ACCEL_ERROR_NOT_READY if not, or the queue's stored error.
// Thread-safe.
ACCEL_API accel_status_t accel_dma_queue_query(accel_dma_queue_t *queue);

// Reads |queue|'s counters into |*out_counters| (struct_size set by the
// caller; fields past it are not written).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or struct_size too small.
// Thread-safe.
ACCEL_API accel_status_t accel_dma_queue_counters(
    accel_dma_queue_t *queue, accel_dma_queue_counters_t *out_counters);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_DMA_H_
