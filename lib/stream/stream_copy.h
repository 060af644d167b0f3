// The path from stream copies to DMA queues: a stream copy becomes a DMA
// submit ordered with the stream's other commands by one timeline semaphore.
// lib/stream calls this from its copy commands; the link is created on the
// first copy and destroyed with the stream.
#ifndef ACCEL_STREAM_STREAM_COPY_H_
#define ACCEL_STREAM_STREAM_COPY_H_

#include <stdatomic.h>

#include "accel/dma.h"
#include "accel/stream.h"

typedef struct accel_stream_copy_link accel_stream_copy_link_t;

// Runs |desc|, a 1D copy the stream validated, on |*link|'s DMA queue in |stream|'s order:
// the stream signals the link's semaphore to v, the DMA submit waits for v
// and signals v + 1, and the stream waits for v + 1, so later stream commands
// see the copy done and a DMA failure fails the stream with the message that
// names the descriptor; then the stream's worker drops the references the
// DMA queue holds for the copy (so that freed buffers return to their pools
// without a later call on the queue). Creates |*link| on first use (a DMA
// queue over all copy engines). Returns the stream's or the submit's error;
// an error of the last step (enqueueing the worker's release) leaves the copy
// enqueued and ordered, its references held until the queue's next call or
// its destroy (if the stream failed by then, possibly through this copy,
// that is the error returned).
// Thread-safe (copies on one stream from several threads are serialized).
accel_status_t accel_stream_copy_submit(accel_stream_t *stream,
                                     accel_stream_copy_link_t *_Atomic *link,
                                     const accel_dma_desc_t *desc);

// Destroys |link| (NULL is ignored) after the stream's queue was destroyed:
// waits for its DMA work.
void accel_stream_copy_link_destroy(accel_stream_copy_link_t *link);

// The DMA queue behind |link| (tests inject faults through it).
accel_dma_queue_t *accel_stream_copy_link_queue(accel_stream_copy_link_t *link);

#endif  // ACCEL_STREAM_STREAM_COPY_H_
