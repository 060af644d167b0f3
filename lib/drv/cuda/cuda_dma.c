// Copy engines on the CUDA device: each DMA ring is a dedicated CUstream.
// The doorbell turns the descriptors published up to the new tail into
// stream operations, in ring order:
//
//   COPY    cuMemcpyAsync (1D), cuMemcpy2DAsync (2D), cuMemcpy3DAsync (3D
//           whose slice pitch is a whole number of rows; else one 2D copy
//           per slice), both sides CU_MEMORYTYPE_UNIFIED
//   FILL    cuMemsetD8/D16/D32Async (cuda_queue.c's fill)
//   WAIT    cuStreamWaitValue64 (GEQ) and a host function that fails the
//           ring if the semaphore failed
//   SIGNAL  cuStreamWriteValue64 of the semaphore's word
//
// and after each descriptor the stream writes the ring's byte counters (for
// a COPY or FILL) and its head (the descriptors retired) into pinned host
// words that lib/dma reads, as a hardware engine writes back its head. A
// descriptor doorbelled after the ring failed or was aborted is not run: its
// SIGNAL (or folded signal) fails with the ring's error, and its head write
// is still enqueued so that the head passes it in order.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#include "drv/cuda/cuda_internal.h"

// Copy engines used per device when ACCEL_COPY_ENGINES does not say: the
// device's asynchronous engines, at most this many.
#define ACCEL_CUDA_DEFAULT_COPY_ENGINES 4u

// Pinned words shared with the stream: the head, then the byte counters, each
// on its own line.
typedef struct cuda_ring_words {
  _Atomic uint64_t head;
  uint8_t pad0[56];
  _Atomic uint64_t bytes[ACCEL_DMA_DIR_COUNT];
} cuda_ring_words_t;

struct accel_drv_dma_ring {
  accel_drv_device_t *device;
  CUstream stream;
  accel_dma_hw_desc_t *slots;
  uint32_t slot_count;
  cuda_ring_words_t *words;  // pinned host memory, mapped for the device
  CUdeviceptr words_device;
  accel_drv_semaphore_t *fence;
  char name[64];
  // Serializes doorbells (the stream's order is the order of the calls).
  pthread_mutex_t doorbell_lock;
  uint64_t enqueued;  // descriptors turned into stream work (doorbell_lock)
  uint64_t bytes_total[ACCEL_DMA_DIR_COUNT];  // doorbell_lock
  // The semaphore each enqueued, not yet retired descriptor signals, by
  // slot (signal_lock): failed with the ring if it fails before them.
  pthread_mutex_t signal_lock;
  struct {
    accel_drv_semaphore_t *semaphore;
    uint64_t pos;
  } *signals;
  _Atomic uint32_t failed;  // set (release) when the ring fails
  _Atomic uint32_t aborted;
  accel_cuda_list_t wait_checks;  // signal_lock: ring_wait_rec_t not run
};

uint32_t accel_cuda_copy_engine_count(accel_drv_device_t *device) {
  if (!device->stream_mem_ops) {
    // The rings write their heads back with cuStreamWriteValue64: without
    // stream memory operations there are no copy engines (stream copies
    // then run on the streams themselves).
    return 0;
  }
  uint32_t want = device->backend->options.copy_engine_count;
  if (want == 0) {
    want = device->copy_engines > 0 ? (uint32_t)device->copy_engines : 1;
    if (want > ACCEL_CUDA_DEFAULT_COPY_ENGINES) {
      want = ACCEL_CUDA_DEFAULT_COPY_ENGINES;
    }
  }
  return want;
}

static void ring_fail(accel_drv_dma_ring_t *ring, uint64_t pos,
                      accel_status_t status, const char *why) {
  char message[ACCEL_ERROR_MESSAGE_MAX];
  snprintf(message, sizeof(message), "%s descriptor #%llu failed: %s",
           ring->name, (unsigned long long)pos + 1, why);
  uint32_t expected = 0;
  // Release: a reader of the flag finds the fence failed.
  if (!atomic_compare_exchange_strong_explicit(
          &ring->failed, &expected, 1, memory_order_acq_rel,
          memory_order_acquire)) {
    return;
  }
  accel_cuda_semaphore_fail(ring->fence, status, message);
  // Acquire: descriptors below the head ran and signalled for real.
  uint64_t head = atomic_load_explicit(&ring->words->head,
                                       memory_order_acquire);
  pthread_mutex_lock(&ring->signal_lock);
  for (uint32_t i = 0; i < ring->slot_count; ++i) {
    if (ring->signals[i].semaphore != NULL && ring->signals[i].pos > pos &&
        ring->signals[i].pos >= head) {
      accel_cuda_semaphore_fail(ring->signals[i].semaphore, status, message);
    }
  }
  pthread_mutex_unlock(&ring->signal_lock);
}

typedef struct ring_wait_rec {
  // In the ring's list of checks not run yet (signal_lock): a dead stream
  // never runs them, and destroy frees what is left.
  accel_cuda_list_t link;  // first
  accel_drv_dma_ring_t *ring;
  accel_drv_semaphore_t *semaphore;
  uint64_t pos;
} ring_wait_rec_t;

static void CUDA_CB ring_wait_check(void *arg) {
  ring_wait_rec_t *rec = arg;
  accel_status_t st = accel_error_state_code(&rec->semaphore->error);
  if (st != ACCEL_OK) {
    ring_fail(rec->ring, rec->pos, st, rec->semaphore->error.message);
  }
  pthread_mutex_lock(&rec->ring->signal_lock);
  accel_cuda_list_del(&rec->link);
  pthread_mutex_unlock(&rec->ring->signal_lock);
  free(rec);
}

static CUresult enqueue_copy(accel_drv_dma_ring_t *ring,
                             const accel_dma_hw_desc_t *d) {
  const accel_cuda_api_t *cu = ring->device->cu;
  if (d->copy.height == 1 && d->copy.depth == 1) {
    return cu->cuMemcpyAsync(d->copy.dst, d->copy.src, d->copy.width,
                             ring->stream);
  }
  bool whole_rows = d->copy.depth > 1 && d->copy.src_pitch != 0 &&
                    d->copy.dst_pitch != 0 &&
                    d->copy.src_slice_pitch % d->copy.src_pitch == 0 &&
                    d->copy.dst_slice_pitch % d->copy.dst_pitch == 0;
  if (whole_rows) {
    CUDA_MEMCPY3D m = {
        .srcMemoryType = CU_MEMORYTYPE_UNIFIED,
        .srcDevice = d->copy.src,
        .srcPitch = d->copy.src_pitch,
        .srcHeight = d->copy.src_slice_pitch / d->copy.src_pitch,
        .dstMemoryType = CU_MEMORYTYPE_UNIFIED,
        .dstDevice = d->copy.dst,
        .dstPitch = d->copy.dst_pitch,
        .dstHeight = d->copy.dst_slice_pitch / d->copy.dst_pitch,
        .WidthInBytes = d->copy.width,
        .Height = d->copy.height,
        .Depth = d->copy.depth,
    };
    return cu->cuMemcpy3DAsync(&m, ring->stream);
  }
  for (uint32_t z = 0; z < d->copy.depth; ++z) {
    CUDA_MEMCPY2D m = {
        .srcMemoryType = CU_MEMORYTYPE_UNIFIED,
        .srcDevice = d->copy.src + z * d->copy.src_slice_pitch,
        .srcPitch = d->copy.src_pitch,
        .dstMemoryType = CU_MEMORYTYPE_UNIFIED,
        .dstDevice = d->copy.dst + z * d->copy.dst_slice_pitch,
        .dstPitch = d->copy.dst_pitch,
        .WidthInBytes = d->copy.width,
        .Height = d->copy.height,
    };
    CUresult r = cu->cuMemcpy2DAsync(&m, ring->stream);
    if (r != CUDA_SUCCESS) {
      return r;
    }
  }
  return CUDA_SUCCESS;
}

static CUresult write_word(accel_drv_dma_ring_t *ring, CUdeviceptr at,
                           uint64_t value) {
  return ring->device->cu->cuStreamWriteValue64(ring->stream, at, value, 0);
}

// The operation of descriptor |d| at |pos|, without its write-backs.
static CUresult enqueue_op(accel_drv_dma_ring_t *ring,
                           const accel_dma_hw_desc_t *d, uint64_t pos) {
  switch (d->op) {
    case ACCEL_DMA_HW_COPY:
      return enqueue_copy(ring, d);
    case ACCEL_DMA_HW_FILL:
      return accel_cuda_enqueue_fill(ring->device, ring->stream, d->fill.dst,
                                     d->fill.size_bytes, d->fill.pattern,
                                     d->fill.pattern_size);
    case ACCEL_DMA_HW_WAIT: {
      CUresult r = ring->device->cu->cuStreamWaitValue64(
          ring->stream, d->sem.semaphore->word_device, d->sem.value,
          CU_STREAM_WAIT_VALUE_GEQ);
      if (r != CUDA_SUCCESS) {
        return r;
      }
      ring_wait_rec_t *rec = malloc(sizeof(*rec));
      if (rec == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
      *rec = (ring_wait_rec_t){.ring = ring,
                               .semaphore = d->sem.semaphore,
                               .pos = pos};
      pthread_mutex_lock(&ring->signal_lock);
      accel_cuda_list_add(&ring->wait_checks, &rec->link);
      pthread_mutex_unlock(&ring->signal_lock);
      r = ring->device->cu->cuLaunchHostFunc(ring->stream, ring_wait_check,
                                             rec);
      if (r != CUDA_SUCCESS) {
        pthread_mutex_lock(&ring->signal_lock);
        accel_cuda_list_del(&rec->link);
        pthread_mutex_unlock(&ring->signal_lock);
        free(rec);
      }
      return r;
    }
    case ACCEL_DMA_HW_SIGNAL:
      return write_word(ring, d->sem.semaphore->word_device, d->sem.value);
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// Enqueues descriptor |d| at |pos| and its write-backs; a descriptor of a
// failed or aborted ring only fails what it signals.
static void enqueue_desc(accel_drv_dma_ring_t *ring,
                         const accel_dma_hw_desc_t *d, uint64_t pos) {
  uint32_t slot = (uint32_t)(pos & (ring->slot_count - 1));
  accel_drv_semaphore_t *signal =
      d->op == ACCEL_DMA_HW_SIGNAL ? d->sem.semaphore : d->signal_semaphore;
  bool skip = atomic_load_explicit(&ring->failed, memory_order_acquire) ||
              atomic_load_explicit(&ring->aborted, memory_order_acquire);
  if (!skip) {
    CUresult r = enqueue_op(ring, d, pos);
    if (r == CUDA_SUCCESS && d->op != ACCEL_DMA_HW_SIGNAL &&
        signal != NULL) {
      r = write_word(ring, signal->word_device, d->signal_value);
    }
    if (r == CUDA_SUCCESS &&
        (d->op == ACCEL_DMA_HW_COPY || d->op == ACCEL_DMA_HW_FILL) &&
        d->direction < ACCEL_DMA_DIR_COUNT) {
      ring->bytes_total[d->direction] += accel_dma_hw_desc_bytes(d);
      r = write_word(ring,
                     ring->words_device +
                         offsetof(cuda_ring_words_t, bytes) +
                         d->direction * sizeof(uint64_t),
                     ring->bytes_total[d->direction]);
    }
    if (r != CUDA_SUCCESS) {
      accel_status_t st = accel_cuda_check(ring->device, r, "%s descriptor "
                                           "#%llu", ring->name,
                                           (unsigned long long)pos + 1);
      ring_fail(ring, pos, st, accel_last_error());
      skip = true;
    }
  }
  if (skip && signal != NULL) {
    accel_status_t st = atomic_load_explicit(&ring->failed,
                                             memory_order_acquire)
                            ? accel_error_state_code(&ring->fence->error)
                            : ACCEL_ERROR_ABORTED;
    accel_cuda_semaphore_fail(signal, st != ACCEL_OK ? st : ACCEL_ERROR_ABORTED,
                              st != ACCEL_OK && st != ACCEL_ERROR_ABORTED
                                  ? ring->fence->error.message
                                  : "DMA ring aborted");
  } else if (signal != NULL) {
    pthread_mutex_lock(&ring->signal_lock);
    ring->signals[slot].semaphore = signal;
    ring->signals[slot].pos = pos;
    pthread_mutex_unlock(&ring->signal_lock);
  }
  // The head passes the descriptor in ring order whether it ran or not.
  (void)write_word(ring, ring->words_device + offsetof(cuda_ring_words_t, head),
                   pos + 1);
}

void accel_cuda_dma_ring_doorbell(accel_drv_dma_ring_t *ring, uint64_t tail) {
  pthread_mutex_lock(&ring->doorbell_lock);
  if (accel_cuda_enter(ring->device) != ACCEL_OK) {
    // A lost device fails the fence (its semaphores failed with it).
    atomic_store_explicit(&ring->failed, 1, memory_order_release);
    pthread_mutex_unlock(&ring->doorbell_lock);
    return;
  }
  for (uint64_t pos = ring->enqueued; pos < tail; ++pos) {
    const accel_dma_hw_desc_t *d = &ring->slots[pos & (ring->slot_count - 1)];
    enqueue_desc(ring, d, pos);
  }
  if (tail > ring->enqueued) {
    ring->enqueued = tail;
  }
  pthread_mutex_unlock(&ring->doorbell_lock);
}

accel_status_t accel_cuda_dma_ring_wait(accel_drv_dma_ring_t *ring,
                                        uint64_t head, uint64_t timeout_ns) {
  uint64_t start = accel_cuda_now_ns();
  uint64_t nap_ns = 1000;
  for (;;) {
    // Acquire: the stream's head write publishes the descriptor's effects.
    if (atomic_load_explicit(&ring->words->head, memory_order_acquire) >=
        head) {
      return ACCEL_OK;
    }
    ACCEL_RETURN_IF_ERROR(accel_cuda_device_poll(ring->device));
    uint64_t elapsed = accel_cuda_now_ns() - start;
    if (timeout_ns != ACCEL_TIMEOUT_INFINITE && elapsed >= timeout_ns) {
      return accel_error(ACCEL_ERROR_TIMEOUT,
                         "%s: head did not reach %llu within %llu ns",
                         ring->name, (unsigned long long)head,
                         (unsigned long long)timeout_ns);
    }
    if (elapsed < ring->device->spin_ns) {
      sched_yield();
      continue;
    }
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)nap_ns};
    nanosleep(&ts, NULL);
    if (nap_ns < 200000) {
      nap_ns *= 2;
    }
  }
}

void accel_cuda_dma_ring_abort(accel_drv_dma_ring_t *ring) {
  // Release: a doorbell that sees the flag skips what it has not enqueued.
  atomic_store_explicit(&ring->aborted, 1, memory_order_release);
}

accel_status_t accel_cuda_dma_ring_create(
    accel_drv_device_t *device, const accel_drv_dma_ring_params_t *params,
    accel_drv_dma_ring_t **out_ring, accel_dma_ring_mem_t *out_mem) {
  ACCEL_RETURN_IF_ERROR(accel_cuda_enter(device));
  const accel_cuda_api_t *cu = device->cu;
  accel_status_t st = ACCEL_OK;
  accel_drv_dma_ring_t *ring = calloc(1, sizeof(*ring));
  if (ring == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cuda dma ring: cannot allocate %zu bytes",
                       sizeof(*ring));
  }
  ring->device = device;
  ring->slot_count = params->slot_count;
  ring->fence = params->fence;
  snprintf(ring->name, sizeof(ring->name), "%s",
           params->name != NULL ? params->name : "ring");
  ring->slots = aligned_alloc(64, (size_t)params->slot_count *
                                      sizeof(accel_dma_hw_desc_t));
  ring->signals = calloc(params->slot_count, sizeof(*ring->signals));
  if (ring->slots == NULL || ring->signals == NULL) {
    st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                     "cuda dma ring: cannot allocate %u slots",
                     params->slot_count);
    goto err_free_ring;
  }
  memset(ring->slots, 0,
         (size_t)params->slot_count * sizeof(accel_dma_hw_desc_t));
  void *words = NULL;
  CUresult r = cu->cuMemHostAlloc(
      &words, sizeof(cuda_ring_words_t),
      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  if (r != CUDA_SUCCESS) {
    st = accel_cuda_check(device, r, "%s: pinned head words", ring->name);
    goto err_free_ring;
  }
  memset(words, 0, sizeof(cuda_ring_words_t));
  ring->words = words;
  r = cu->cuMemHostGetDevicePointer(&ring->words_device, words, 0);
  if (r != CUDA_SUCCESS) {
    st = accel_cuda_check(device, r, "%s: device address of the head",
                          ring->name);
    goto err_free_words;
  }
  r = cu->cuStreamCreateWithPriority(&ring->stream, CU_STREAM_NON_BLOCKING,
                                     device->priority_least);
  if (r != CUDA_SUCCESS) {
    st = accel_cuda_check(device, r, "%s: stream", ring->name);
    goto err_free_words;
  }
  pthread_mutex_init(&ring->doorbell_lock, NULL);
  pthread_mutex_init(&ring->signal_lock, NULL);
  accel_cuda_list_init(&ring->wait_checks);
  *out_mem = (accel_dma_ring_mem_t){
      .slots = ring->slots,
      .slot_count = ring->slot_count,
      .head = &ring->words->head,
      .bytes = ring->words->bytes,
      .failed = &ring->failed,
  };
  *out_ring = ring;
  return ACCEL_OK;

err_free_words:
  (void)cu->cuMemFreeHost(words);
err_free_ring:
  free(ring->signals);
  free(ring->slots);
  free(ring);
  return st;
}

void accel_cuda_dma_ring_destroy(accel_drv_dma_ring_t *ring) {
  accel_drv_device_t *device = ring->device;
  if (device->cu->cuCtxSetCurrent(device->ctx) == CUDA_SUCCESS) {
    (void)device->cu->cuStreamSynchronize(ring->stream);
    (void)device->cu->cuStreamDestroy(ring->stream);
    (void)device->cu->cuMemFreeHost(ring->words);
  }
  // The stream is idle or dead: checks not run by now never will.
  while (ring->wait_checks.next != &ring->wait_checks) {
    accel_cuda_list_t *n = ring->wait_checks.next;
    accel_cuda_list_del(n);
    free(n);  // the record's first member
  }
  pthread_mutex_destroy(&ring->signal_lock);
  pthread_mutex_destroy(&ring->doorbell_lock);
  free(ring->signals);
  free(ring->slots);
  free(ring);
}
