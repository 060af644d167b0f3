// Internal layout of DMA queues (lib/dma), shared by its files and by the
// stream layer's copy path (lib/stream/stream_copy.h).
#ifndef ACCEL_DMA_DMA_IMPL_H_
#define ACCEL_DMA_DMA_IMPL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "accel/dma.h"
#include "core/driver.h"
#include "core/driver_copy.h"
#include "core/health_impl.h"
#include "core/runtime_impl.h"
#include "sync/semaphore_impl.h"

// Bounce buffers: each ring owns ACCEL_DMA_STAGING_SLOTS slots of this
// size, used alternately; small enough that a chunk staged by an engine is
// still in its cache when the same engine transfers it.
#define ACCEL_DMA_STAGING_SLOT_BYTES (256u * 1024u)
#define ACCEL_DMA_STAGING_SLOTS 2u
// A 1D copy or fill of at least this many bytes is split over the queue's
// engines, in pieces of at least ACCEL_DMA_PIECE_MIN_BYTES.
#define ACCEL_DMA_SPLIT_MIN_BYTES (2u * 1024u * 1024u)
#define ACCEL_DMA_PIECE_MIN_BYTES (1024u * 1024u)

// Rings per queue at most (one per engine used).
#define ACCEL_DMA_MAX_RINGS 64u

// A point in a ring's execution: its fence reached |ticket| (0: none).
typedef struct accel_dma_dep {
  uint32_t ring;
  uint64_t ticket;
} accel_dma_dep_t;

typedef struct accel_dma_ring_state {
  accel_drv_dma_ring_t *drv;
  accel_dma_ring_mem_t mem;
  // Signalled by the ring's SIGNAL descriptors to increasing tickets; failed
  // by the engine when the ring fails.
  accel_semaphore_t *fence;
  // Producer side, guarded by the queue's submit lock.
  uint64_t tail;        // descriptors written
  uint64_t head_cached;  // engine head last read (reloaded when full)
  uint64_t published;   // tail last given to the doorbell
  uint64_t fence_next;  // last ticket handed out
  // |tail| for readers outside the lock (counters); relaxed.
  _Atomic uint64_t tail_seen;
  // Copies and fills written that the engine traces (trace_seq), the ring's
  // commands_enqueued counter in lib/trace; written under the lock.
  _Atomic uint64_t trace_enqueued;
} accel_dma_ring_state_t;

// Pinned bounce memory for pageable copies (dma_staging.c): ring r owns
// slots [r * ACCEL_DMA_STAGING_SLOTS, (r + 1) * ACCEL_DMA_STAGING_SLOTS).
typedef struct accel_dma_staging {
  uint8_t *base;  // NULL until the first pageable copy
  uint64_t size_bytes;
  bool locked;  // mlock succeeded
  // Pinned for a device that does not read host memory by itself
  // (host_register: cuMemHostRegister on CUDA); unregistered at free.
  accel_device_t *registered_on;
} accel_dma_staging_t;

// An object (buffer, semaphore) a submit uses, held until the home ring's
// head passes |position| (the submit's last descriptor). The submitting side
// takes and drops these references, never the engines, so that reference
// counts stay in the submitter's cache.
typedef struct accel_dma_held {
  uint64_t position;
  accel_object_t *object;
} accel_dma_held_t;

struct accel_dma_queue {
  accel_device_t *device;
  char name[64];
  uint32_t flags;
  uint32_t ring_count;  // ring 0 is the home ring, where every submit joins
  // Largest copy that may run on the submitting thread (0: none).
  uint64_t inline_max_bytes;
  uint32_t slot_count;  // per ring
  accel_dma_ring_state_t *rings;
  // Serializes submits: guards the rings' producer side, |submit_count| and
  // |staging|.
  pthread_mutex_t submit_lock;
  uint64_t submit_count;
  accel_dma_staging_t staging;
  // Held references: a FIFO ring of |held_capacity| (a power of two)
  // entries, guarded by the submit lock; retired at submits (past a
  // threshold), synchronize, query and destroy.
  accel_dma_held_t *held;
  uint64_t held_front;
  uint64_t held_count;
  uint64_t held_capacity;
  // Set by accel_dma_queue_retire_soon when the submit lock was busy: the
  // holder retires before it leaves (accel_dma_queue_unlock).
  _Atomic uint32_t retire_wanted;
  // Home-ring tail after the last submit (synchronize waits for the head).
  _Atomic uint64_t last_tail;
  // Counters (relaxed: statistics only).
  _Atomic uint64_t submits;
  _Atomic uint64_t descriptors;
  _Atomic uint64_t ring_descriptors;
  _Atomic uint64_t occupancy_peak;
  _Atomic uint64_t stalls;
  _Atomic uint64_t not_ready;
  _Atomic uint64_t inline_copies;
  // Set (release) once the device's health failed the queue (a fatal fault,
  // the watchdog, a reset), after its rings' fences hold the error.
  _Atomic uint32_t health_failed;
  accel_health_member_t health;  // lib/core/health.c
};

// Returns ACCEL_OK, or the stored error of a failed ring (its fence's code
// and message) if the queue failed.
accel_status_t accel_dma_queue_check_failed(accel_dma_queue_t *queue);

// Makes room for |extra| more held references; needs the submit lock.
accel_status_t accel_dma_queue_reserve_held_locked(accel_dma_queue_t *queue,
                                                  uint64_t extra);
// Retains |object| and holds it (room reserved before); needs the lock.
void accel_dma_queue_hold_locked(accel_dma_queue_t *queue,
                                 accel_object_t *object);
// Sets the retire position of the last |count| held references.
void accel_dma_queue_seal_held_locked(accel_dma_queue_t *queue, uint64_t count,
                                      uint64_t position);
// Drops the held references whose position the home head reached.
void accel_dma_queue_retire_locked(accel_dma_queue_t *queue, uint64_t head);

// Drops the held references of completed work now, or makes the submitter
// holding the lock do it as it unlocks. Never blocks (stream workers and
// other completion paths call it). Thread-safe.
void accel_dma_queue_retire_soon(accel_dma_queue_t *queue);
// accel_dma_submit of one 1D copy that its caller validated already, with
// one wait and one signal (lib/stream's copies: the stream checked both
// buffers with accel_buffer_check_use, the one check of a buffer's use).
// Skips the descriptor checks; the semaphores' and the queue's state are
// still checked. Thread-safe.
accel_status_t accel_dma_submit_validated(
    accel_dma_queue_t *queue, const accel_dma_desc_t *desc,
    accel_semaphore_t *wait_semaphore, uint64_t wait_value,
    accel_semaphore_t *signal_semaphore, uint64_t signal_value);

// The home ring's tail after the last submit (a position to retire through).
// Call it under the caller's own serialization of its submits.
uint64_t accel_dma_queue_submitted_tail(accel_dma_queue_t *queue);
// Waits until the home ring's engine has moved its head to |tail| (the
// engine signals a descriptor's semaphore before it retires it, so a caller
// that saw the signal waits only for that step) and drops the references
// held for the work before it. Never needs another thread's progress but the
// engine's. Thread-safe.
void accel_dma_queue_retire_through(accel_dma_queue_t *queue, uint64_t tail);
// Unlocks the submit lock, retiring first if accel_dma_queue_retire_soon
// asked for it meanwhile.
void accel_dma_queue_unlock(accel_dma_queue_t *queue);

// Allocates the bounce buffers if not yet done; needs the submit lock.
accel_status_t accel_dma_staging_ensure_locked(accel_dma_queue_t *queue);
void accel_dma_staging_free(accel_dma_staging_t *staging);


#endif  // ACCEL_DMA_DMA_IMPL_H_
