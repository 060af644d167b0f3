// Stream copies through DMA queues (see stream_copy.h): a plain downward
// use of accel_dma_submit, ordered with the stream by one semaphore.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/lock.h"
#include "core/error.h"
#include "dma/dma_impl.h"
#include "stream/stream_copy.h"
#include "stream/stream_impl.h"

struct accel_stream_copy_link {
  accel_dma_queue_t *queue;
  accel_semaphore_t *semaphore;
  pthread_mutex_t lock;  // serializes the signal/submit/wait triple
  uint64_t value;        // guarded by |lock|: last value handed out
  // Submits whose references the stream's worker retires once they are
  // done: a FIFO of (semaphore value signalled at completion, home-ring
  // tail after the submit), guarded by |done_lock|, which is never held
  // while blocking (the worker takes it).
  pthread_mutex_t done_lock;
  struct link_done {
    uint64_t value;
    uint64_t tail;
  } *done;
  uint32_t done_front, done_count, done_capacity;  // capacity: power of two
};

void accel_stream_copy_link_destroy(accel_stream_copy_link_t *link) {
  if (link == NULL) {
    return;
  }
  accel_dma_queue_destroy(link->queue);
  accel_semaphore_release(link->semaphore);
  pthread_mutex_destroy(&link->done_lock);
  pthread_mutex_destroy(&link->lock);
  free(link->done);
  free(link);
}

accel_dma_queue_t *accel_stream_copy_link_queue(accel_stream_copy_link_t *link) {
  return link->queue;
}

// Makes room for one more FIFO entry (under |done_lock|).
static accel_status_t done_reserve_locked(accel_stream_copy_link_t *link) {
  ACCEL_ASSERT_HELD(&link->done_lock);
  if (link->done_count < link->done_capacity) {
    return ACCEL_OK;
  }
  uint32_t cap = link->done_capacity != 0 ? link->done_capacity * 2 : 16;
  struct link_done *n = malloc(sizeof(*n) * cap);
  if (n == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "stream dma link: cannot track %u copies", cap);
  }
  for (uint32_t i = 0; i < link->done_count; ++i) {
    n[i] = link->done[(link->done_front + i) & (link->done_capacity - 1)];
  }
  free(link->done);
  link->done = n;
  link->done_front = 0;
  link->done_capacity = cap;
  return ACCEL_OK;
}

// Runs on the stream's worker after a copy's wait: the copies whose value
// the semaphore reached have executed, and the engine is about to move its
// head past them (it signals first); waits for that, which needs nothing
// else, and drops what the DMA queue held for them, so that a buffer freed
// meanwhile goes back to its pool without a later call on the queue.
static accel_status_t retire_fn(void *user_data) {
  accel_stream_copy_link_t *link = user_data;
  uint64_t reached = 0;
  (void)accel_semaphore_query(link->semaphore, &reached);
  uint64_t tail = 0;
  pthread_mutex_lock(&link->done_lock);
  while (link->done_count > 0) {
    struct link_done *e =
        &link->done[link->done_front & (link->done_capacity - 1)];
    if (e->value > reached) {
      break;
    }
    tail = e->tail;
    link->done_front++;
    link->done_count--;
  }
  pthread_mutex_unlock(&link->done_lock);
  if (tail != 0) {
    accel_dma_queue_retire_through(link->queue, tail);
  }
  return ACCEL_OK;
}

static accel_status_t link_create(accel_stream_t *stream,
                                  accel_stream_copy_link_t **out) {
  accel_device_t *device = stream->device;
  accel_stream_copy_link_t *link = calloc(1, sizeof(*link));
  if (link == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "stream dma link: cannot allocate %zu bytes",
                       sizeof(*link));
  }
  char name[96];
  snprintf(name, sizeof(name), "%s/dma", stream->name);
  accel_dma_queue_desc_t desc = {
      .struct_size = sizeof(desc),
      .ring_size = 256,
      .name = name,
  };
  accel_status_t st = accel_dma_queue_create(device, &desc, &link->queue);
  if (st != ACCEL_OK) {
    goto err_free_link;
  }
  st = accel_semaphore_create_internal(device, 0, &link->semaphore);
  if (st != ACCEL_OK) {
    goto err_destroy_queue;
  }
  pthread_mutex_init(&link->lock, NULL);
  pthread_mutex_init(&link->done_lock, NULL);
  *out = link;
  return ACCEL_OK;

err_destroy_queue:
  accel_dma_queue_destroy(link->queue);
err_free_link:
  free(link);
  return st;
}

accel_status_t accel_stream_copy_submit(accel_stream_t *stream,
                                     accel_stream_copy_link_t *_Atomic *slot,
                                     const accel_dma_desc_t *desc) {
  // Acquire: pairs with the CAS below so that the link's fields are set.
  accel_stream_copy_link_t *link =
      atomic_load_explicit(slot, memory_order_acquire);
  if (link == NULL) {
    accel_stream_copy_link_t *fresh = NULL;
    ACCEL_RETURN_IF_ERROR(link_create(stream, &fresh));
    // Acq_rel: publishes |fresh|, or acquires the winner's link.
    if (atomic_compare_exchange_strong_explicit(slot, &link, fresh,
                                                memory_order_acq_rel,
                                                memory_order_acquire)) {
      link = fresh;
    } else {
      accel_stream_copy_link_destroy(fresh);
    }
  }
  pthread_mutex_lock(&link->lock);
  pthread_mutex_lock(&link->done_lock);
  accel_status_t st = done_reserve_locked(link);
  pthread_mutex_unlock(&link->done_lock);
  if (st != ACCEL_OK) {
    goto out_unlock;
  }
  uint64_t ready = link->value + 1;
  uint64_t done = link->value + 2;
  st = accel_stream_signal(stream, link->semaphore, ready);
  if (st != ACCEL_OK) {
    goto out_unlock;
  }
  link->value = done;
  st = accel_dma_submit_validated(link->queue, desc, link->semaphore, ready,
                                  link->semaphore, done);
  if (st != ACCEL_OK) {
    goto out_unlock;
  }
  // Only this link submits to its queue, under |lock|.
  uint64_t tail = accel_dma_queue_submitted_tail(link->queue);
  pthread_mutex_lock(&link->done_lock);
  link->done[(link->done_front + link->done_count++) &
             (link->done_capacity - 1)] =
      (struct link_done){.value = done, .tail = tail};
  pthread_mutex_unlock(&link->done_lock);
  st = accel_stream_wait(stream, link->semaphore, done);
  if (st == ACCEL_OK) {
    // Fails only if the stream failed meanwhile (the copy itself may have:
    // its error is then the stream's) or cannot take a command: the copy is
    // in the stream, ordered, and the queue drops its references at its next
    // call or destroy.
    st = accel_stream_host_call(stream, retire_fn, link);
  }
out_unlock:
  pthread_mutex_unlock(&link->lock);
  return st;
}
