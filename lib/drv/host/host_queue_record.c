// Host queues' record codec (the reading half; the writing half is inline
// in host_queue_impl.h for the producers) and the chunks records live in.
#include <stdlib.h>
#include <string.h>

#include "drv/host/host_queue_impl.h"

// Rebuilds the command of the published record |rec| (header |h|) as
// number |seq|.
void accel_host_queue_record_read(const accel_drv_queue_t *q,
                                  const record_word_t *rec, uint64_t h,
                                  uint64_t seq, accel_cmd_t *cmd) {
  uint32_t kind = header_kind(h);
  if (kind == RECORD_HOST_CALL_SHORT) {
    *cmd = (accel_cmd_t){.kind = ACCEL_CMD_HOST_CALL, .seq = seq};
    cmd->host_call.fn = q->fn_table[header_fn_slot(h)];
    cmd->host_call.user_data = rec[1].p;
    return;
  }
  if (kind == RECORD_EXECUTE_WHOLE) {
    *cmd = (accel_cmd_t){.kind = ACCEL_CMD_EXECUTE, .seq = seq};
    cmd->execute.recording = rec[1].p;
    cmd->execute.count = accel_host_recording_count(rec[1].p);
    cmd->refs[0] = rec[2].ref;
    return;
  }
  *cmd = (accel_cmd_t){.kind = (uint8_t)kind, .flags = header_flags(h),
                       .seq = seq};
  const record_word_t *w = rec + 1;
  unsigned char *body = (unsigned char *)&cmd->host_call;
  for (uint32_t i = 0; i < body_words[kind]; ++i) {
    memcpy(body + 8 * i, &w[i].u, 8);
  }
  w += body_words[kind];
  uint32_t refs = header_refs(h);
  if (refs & 1u) {
    cmd->refs[0] = (w++)->ref;
  }
  if (refs & 2u) {
    cmd->refs[1] = w->ref;
  }
}
chunk_t *accel_host_queue_chunk_get(accel_drv_queue_t *q) {
  chunk_t *c = NULL;
  for (int i = 0; i < SPARE_CHUNKS && c == NULL; ++i) {
    if (atomic_load_explicit(&q->spare[i], memory_order_relaxed) == NULL) {
      continue;  // no locked instruction for an empty place
    }
    // Acquire: pairs with chunk_put's release, so the consumer's zeroing of
    // the chunk happens before our writes.
    c = atomic_exchange_explicit(&q->spare[i], NULL, memory_order_acquire);
  }
  if (c == NULL) {
    c = calloc(1, sizeof(*c));  // zeroed: no record published yet
    if (c == NULL) {
      return NULL;
    }
  }
  atomic_store_explicit(&c->next, NULL, memory_order_relaxed);
  return c;
}

// Takes back a chunk the worker has consumed, zeroed for its next use.
void accel_host_queue_chunk_put(accel_drv_queue_t *q, chunk_t *c) {
  memset(c->words, 0, sizeof(c->words));
  for (int i = 0; i < SPARE_CHUNKS; ++i) {
    chunk_t *expected = NULL;
    // Release: the next producer to take it sees it zeroed.
    if (atomic_compare_exchange_strong_explicit(&q->spare[i], &expected, c,
                                                memory_order_release,
                                                memory_order_relaxed)) {
      return;
    }
  }
  free(c);
}
// Starts a new chunk for a record of |words| words that does not fit in the
// tail chunk, jumping there from the tail. Returns where the record goes, or
// NULL when no chunk can be allocated. The jump is published before the
// record: the worker then polls the new chunk's first word, which reads 0
// until the record's header is published there.
record_word_t *accel_host_queue_tail_new_chunk(accel_drv_queue_t *q,
                                               uint32_t words) {
  chunk_t *c = accel_host_queue_chunk_get(q);
  if (c == NULL) {
    return NULL;
  }
  // Relaxed: published by the jump's header, which the worker reads with
  // acquire before it follows the link.
  atomic_store_explicit(&q->tail_chunk->next, c, memory_order_relaxed);
  header_publish(&q->tail_chunk->words[q->tail_pos],
                 header_make(RECORD_JUMP, 1, 0, 0));
  q->tail_chunk = c;
  q->tail_pos = words;
  return &c->words[0];
}
