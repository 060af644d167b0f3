// Stream copies through DMA queues (see dma_stream.h).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "dma/dma_impl.h"
#include "dma/dma_stream.h"

struct accel_dma_stream_link {
  accel_dma_queue_t *queue;
  accel_semaphore_t *semaphore;
  pthread_mutex_t lock;  // serializes the signal/submit/wait triple
  uint64_t value;        // guarded by |lock|: last value handed out
};

void accel_dma_stream_link_destroy(accel_dma_stream_link_t *link) {
  if (link == NULL) {
    return;
  }
  accel_dma_queue_destroy(link->queue);
  accel_semaphore_release(link->semaphore);
  pthread_mutex_destroy(&link->lock);
  free(link);
}

accel_dma_queue_t *accel_dma_stream_link_queue(accel_dma_stream_link_t *link) {
  return link->queue;
}

static accel_status_t link_create(accel_stream_t *stream,
                                  accel_dma_stream_link_t **out) {
  accel_device_t *device = stream->device;
  accel_dma_stream_link_t *link = calloc(1, sizeof(*link));
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
  *out = link;
  return ACCEL_OK;

err_destroy_queue:
  accel_dma_queue_destroy(link->queue);
err_free_link:
  free(link);
  return st;
}

accel_status_t accel_dma_stream_copy(accel_stream_t *stream,
                                     accel_dma_stream_link_t *_Atomic *slot,
                                     const accel_dma_desc_t *desc) {
  // Acquire: pairs with the CAS below so that the link's fields are set.
  accel_dma_stream_link_t *link =
      atomic_load_explicit(slot, memory_order_acquire);
  if (link == NULL) {
    accel_dma_stream_link_t *fresh = NULL;
    ACCEL_RETURN_IF_ERROR(link_create(stream, &fresh));
    // Acq_rel: publishes |fresh|, or acquires the winner's link.
    if (atomic_compare_exchange_strong_explicit(slot, &link, fresh,
                                                memory_order_acq_rel,
                                                memory_order_acquire)) {
      link = fresh;
    } else {
      accel_dma_stream_link_destroy(fresh);
    }
  }
  pthread_mutex_lock(&link->lock);
  uint64_t ready = link->value + 1;
  uint64_t done = link->value + 2;
  accel_status_t st = accel_stream_signal(stream, link->semaphore, ready);
  if (st == ACCEL_OK) {
    link->value = done;
    st = accel_dma_submit(link->queue, desc, 1, 1, &link->semaphore, &ready,
                          1, &link->semaphore, &done);
    if (st == ACCEL_OK) {
      st = accel_stream_wait(stream, link->semaphore, done);
    }
  }
  pthread_mutex_unlock(&link->lock);
  return st;
}
