// Host queues' producer side: biased or locked entry, the tail, and the
// submit entries with their fast paths (docs/execution-model.md).
#include <stdio.h>
#include <stdlib.h>

#include "drv/host/host_queue_impl.h"

// Identifies the calling thread: a number drawn at its first submit, never
// 0 and never reused (a later thread at the same address is another owner).
static _Atomic uintptr_t thread_token_next = 1;
static __attribute__((tls_model("initial-exec"))) _Thread_local uintptr_t
    thread_token_value;
static inline uintptr_t thread_token(void) {
  if (__builtin_expect(thread_token_value == 0, 0)) {
    thread_token_value = atomic_fetch_add_explicit(&thread_token_next, 1,
                                                   memory_order_relaxed);
  }
  return thread_token_value;
}
// Enters the producer side: without the lock for the owner of a biased
// queue (returns true), else under the lock, taking ownership of a queue
// that has none or revoking another thread's.
static __attribute__((noinline)) bool submit_begin_shared(
    accel_drv_queue_t *q, uintptr_t self);

static inline bool submit_begin(accel_drv_queue_t *q) {
  uintptr_t self = thread_token();
  if (atomic_load_explicit(&q->owner, memory_order_relaxed) == self) {
    atomic_store_explicit(&q->owner_busy, 1, memory_order_relaxed);
    // Compiler barrier only: a revoking thread's membarrier orders the store
    // above before the load below (see the comment on BIAS_NONE).
    atomic_signal_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&q->bias, memory_order_relaxed) == BIAS_OWNED) {
      return true;
    }
    atomic_store_explicit(&q->owner_busy, 0, memory_order_relaxed);
  }
  return submit_begin_shared(q, self);
}

// submit_begin for every thread but a biased owner.
static bool submit_begin_shared(accel_drv_queue_t *q, uintptr_t self) {
  submit_lock(q);
  uint32_t bias = atomic_load_explicit(&q->bias, memory_order_relaxed);
  if (bias == BIAS_NONE && accel_host_asymmetric()) {
    atomic_store_explicit(&q->owner, self, memory_order_relaxed);
    atomic_store_explicit(&q->bias, BIAS_OWNED, memory_order_relaxed);
  } else if (bias == BIAS_OWNED &&
             atomic_load_explicit(&q->owner, memory_order_relaxed) != self) {
    atomic_store_explicit(&q->bias, BIAS_REVOKED, memory_order_relaxed);
    accel_host_heavy_fence();
    // Acquire: pairs with submit_end's release, so that the owner's last
    // submission (the tail it moved) is visible here.
    while (atomic_load_explicit(&q->owner_busy, memory_order_acquire) != 0) {
      sched_yield();
    }
  }
  return false;
}

static inline void submit_end(accel_drv_queue_t *q, bool owner) {
  if (owner) {
    // Release: see submit_begin's wait.
    atomic_store_explicit(&q->owner_busy, 0, memory_order_release);
  } else {
    submit_unlock(q);
  }
}
// The short-record header of a host call of |fn| if |fn| has (or now takes)
// a place in the function table; else 0. Producer side only.
static inline uint64_t short_host_call_header(accel_drv_queue_t *q,
                                              accel_host_fn_t fn) {
  uint32_t slot = fn_place(fn);
  if (q->fn_table[slot] != fn) {
    if (q->fn_table[slot] != NULL) {
      return 0;
    }
    q->fn_table[slot] = fn;
  }
  return header_make(RECORD_HOST_CALL_SHORT, 2, 0, 0) | ((uint64_t)slot << 24);
}
// Where the next record, of |words| words, goes (the caller writes it and
// publishes its header), or NULL when the ring cannot grow. Producer side.
static inline record_word_t *tail_reserve(accel_drv_queue_t *q,
                                          uint32_t words) {
  if (__builtin_expect(q->tail_pos + words <= CHUNK_WORDS, 1)) {
    record_word_t *rec = &q->tail_chunk->words[q->tail_pos];
    q->tail_pos += words;
    return rec;
  }
  return accel_host_queue_tail_new_chunk(q, words);
}

// The stored failure of a queue that has failed, else ACCEL_OK.
static inline accel_status_t submit_check_failed(accel_drv_queue_t *q) {
  // Acquire: pairs with poison_queue()'s release (or queue_abort's), so the
  // stored error is complete.
  uint32_t failed = atomic_load_explicit(&q->failed, memory_order_acquire);
  if (failed == FAILED_ABORTED) {
    return accel_error(q->abort_status, "%s", q->abort_message);
  }
  if (failed != 0) {
    return accel_error(q->poison_status, "%s", q->poison_message);
  }
  return ACCEL_OK;
}

// Waits until the worker of a failed queue has skipped every command up to
// |seq| (it does so without running anything, so this is short), so that
// each skipped signal has failed before the submit returns.
static __attribute__((noinline, cold)) void submit_wait_skipped(
    accel_drv_queue_t *q, uint64_t seq) {
  // Acquire: pairs with the worker's release after the signal failed.
  while (atomic_load_explicit(&q->skipped_through, memory_order_acquire) <
         seq) {
    if (atomic_load_explicit(&q->parked, memory_order_relaxed) != 0) {
      accel_host_waiter_wake(&q->waiter);
    }
    sched_yield();
  }
}

// Ends a submission that wrote |accepted| of |count| records: reports the
// last seq, leaves the producer side (submit_begin said how it entered) and
// wakes a parked worker.
static inline accel_status_t submit_finish(accel_drv_queue_t *q,
                                           bool owner, uint32_t accepted,
                                           uint32_t count,
                                           uint64_t *out_last_seq) {
  if (out_last_seq != NULL) {  // the direct ops' callers may not ask
    *out_last_seq = q->next_seq;
  }
  if (q->submitted_seq != NULL) {
    // Relaxed: a wait target only; the records are published by their
    // headers.
    atomic_store_explicit(q->submitted_seq, q->next_seq, memory_order_relaxed);
  }
  // Read under the lock, or after a light fence by the owner: see the
  // parking protocol at worker_park.
  if (owner) {
    accel_host_light_fence();
  }
  bool wake = accepted > 0 &&
              atomic_load_explicit(&q->parked, memory_order_relaxed) != 0;
  // The queue failed while we wrote: the worker's drain may have missed our
  // records (poison_queue), so wait below until it skipped them.
  // Not after an abort from outside (FAILED_ABORTED): the worker may be
  // stuck in the command the abort is about, and aborted work owes no
  // ordering of its skipped signals.
  bool raced = accepted > 0 &&
               atomic_load_explicit(&q->failed, memory_order_relaxed) ==
                   FAILED_POISONED;
  uint64_t last = q->next_seq;
  submit_end(q, owner);
  if (wake) {
    accel_host_waiter_wake(&q->waiter);
  }
  if (__builtin_expect(raced, 0)) {
    submit_wait_skipped(q, last);
  }
  if (accepted < count) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host queue: cannot grow the command ring (%u of %u "
                       "commands submitted)",
                       accepted, count);
  }
  return ACCEL_OK;
}

// Drops the references of commands [from, count) that the queue refused
// (the submit entries own what they are handed: driver_queue.h).
static void release_refused(const accel_cmd_t *commands, uint32_t from,
                            uint32_t count) {
  for (uint32_t i = from; i < count; ++i) {
    accel_object_release(commands[i].refs[0]);
    accel_object_release(commands[i].refs[1]);
  }
}

accel_status_t accel_host_queue_submit(accel_drv_queue_t *q,
                                       const accel_cmd_t *commands,
                                       uint32_t count, uint64_t *out_last_seq) {
  accel_status_t st = submit_check_failed(q);
  for (uint32_t i = 0; st == ACCEL_OK && i < count; ++i) {
    if (commands[i].kind >= ACCEL_CMD_KIND_COUNT) {
      st = accel_error(ACCEL_ERROR_INTERNAL,
                       "host queue: unknown command kind %u",
                       commands[i].kind);
    }
  }
  if (st != ACCEL_OK) {
    release_refused(commands, 0, count);
    return st;
  }
  bool owner = submit_begin(q);
  uint32_t accepted = 0;
  for (; accepted < count; ++accepted) {
    const accel_cmd_t *cmd = &commands[accepted];
    uint32_t kind = cmd->kind;
    uint32_t refs = 0;
    uint32_t words = 2;
    uint64_t header = 0;
    if (kind == ACCEL_CMD_HOST_CALL && cmd->flags == 0 &&
        cmd->refs[0] == NULL && cmd->refs[1] == NULL) {
      header = short_host_call_header(q, cmd->host_call.fn);
    } else if (kind == ACCEL_CMD_EXECUTE) {
      header = execute_whole_header(cmd);
      words = 3;
    }
    if (header == 0) {
      words = record_words(cmd, &refs);
      header = header_make(kind, words, refs, cmd->flags);
    }
    record_word_t *rec = tail_reserve(q, words);
    if (rec == NULL) {
      break;
    }
    record_write(rec, cmd, header, refs);
    ++q->next_seq;
  }
  st = submit_finish(q, owner, accepted, count, out_last_seq);
  if (st != ACCEL_OK) {
    release_refused(commands, accepted, count);
  }
  return st;
}

// accel_host_queue_host_call for every case but the fast one below.
static __attribute__((noinline)) accel_status_t host_call_general(
    accel_drv_queue_t *q, accel_host_fn_t fn, void *user_data,
    uint64_t *out_last_seq) {
  ACCEL_RETURN_IF_ERROR(submit_check_failed(q));
  bool owner = submit_begin(q);
  uint64_t header = short_host_call_header(q, fn);
  record_word_t *rec = tail_reserve(q, header != 0 ? 2 : 3);
  if (rec != NULL) {
    if (header != 0) {
      rec[1].p = user_data;
    } else {
      rec[1].host_fn = fn;
      rec[2].p = user_data;
      header = header_make(ACCEL_CMD_HOST_CALL, 3, 0, 0);
    }
    header_publish(rec, header);
    ++q->next_seq;
  }
  return submit_finish(q, owner, rec != NULL, 1, out_last_seq);
}

// The commonest submissions (a host call, a launch) by the biased owner of a
// healthy queue, whose record fits in the tail chunk: the same steps as
// submit_begin, tail_reserve and submit_finish, written out so that the path
// calls nothing and needs no callee-saved register. A command's cost is
// mostly the stores it makes, and saving six registers makes six more.
//
// Enters: returns where a record of |words| words goes, or NULL (nothing
// changed) when the general path must take the command.
static inline record_word_t *owner_fast_begin(accel_drv_queue_t *q,
                                              uint32_t words) {
  // Acquire on |failed|: as in submit_check_failed (here only to decide).
  if (atomic_load_explicit(&q->failed, memory_order_acquire) != 0 ||
      atomic_load_explicit(&q->owner, memory_order_relaxed) !=
          thread_token()) {
    return NULL;
  }
  atomic_store_explicit(&q->owner_busy, 1, memory_order_relaxed);
  // See submit_begin: a revoking thread's membarrier orders the two.
  atomic_signal_fence(memory_order_seq_cst);
  // The producer side is ours only once the bias is confirmed.
  if (atomic_load_explicit(&q->bias, memory_order_relaxed) != BIAS_OWNED ||
      q->tail_pos + words > CHUNK_WORDS) {
    atomic_store_explicit(&q->owner_busy, 0, memory_order_release);
    return NULL;
  }
  record_word_t *rec = &q->tail_chunk->words[q->tail_pos];
  q->tail_pos += words;
  return rec;
}

// Publishes the record the owner wrote at |rec| and leaves.
static inline accel_status_t owner_fast_end(accel_drv_queue_t *q,
                                            record_word_t *rec,
                                            uint64_t header,
                                            uint64_t *out_last_seq) {
  header_publish(rec, header);
  ++q->next_seq;
  return submit_finish(q, true, 1, 1, out_last_seq);
}

accel_status_t accel_host_queue_host_call(accel_drv_queue_t *q,
                                          accel_host_fn_t fn, void *user_data,
                                          uint64_t *out_last_seq) {
  record_word_t *rec = owner_fast_begin(q, 2);
  if (rec != NULL) {
    uint32_t slot = fn_place(fn);
    if (q->fn_table[slot] == fn) {
      rec[1].p = user_data;
      return owner_fast_end(
          q, rec,
          header_make(RECORD_HOST_CALL_SHORT, 2, 0, 0) | ((uint64_t)slot << 24),
          out_last_seq);
    }
    // Not in the table: give the 2 words back (still ours) and take the
    // general path, which places the function or writes the long form.
    q->tail_pos -= 2;
    atomic_store_explicit(&q->owner_busy, 0, memory_order_release);
  }
  return host_call_general(q, fn, user_data, out_last_seq);
}

// The words of a launch record holding |ref0| and |ref1|; |*mask| says
// which.
static inline uint32_t launch_words(const accel_object_t *ref0,
                                    const accel_object_t *ref1,
                                    uint32_t *mask) {
  *mask = (ref0 != NULL ? 1u : 0u) | (ref1 != NULL ? 2u : 0u);
  return 1u + body_words[ACCEL_CMD_LAUNCH] + (*mask & 1u) + (*mask >> 1);
}

// Writes a launch's body and references after |rec|'s header word.
static inline void launch_write(record_word_t *rec,
                                accel_launch_exec_fn_t exec, void *payload,
                                accel_object_t *ref0, accel_object_t *ref1,
                                uint32_t mask) {
  rec[1].exec = exec;
  rec[2].p = payload;
  record_word_t *w = rec + 3;
  if (mask & 1u) {
    (w++)->ref = ref0;
  }
  if (mask & 2u) {
    w->ref = ref1;
  }
}

// accel_host_queue_launch for every case but the owner's fast one.
static __attribute__((noinline)) accel_status_t launch_general(
    accel_drv_queue_t *q, accel_launch_exec_fn_t exec, void *payload,
    accel_object_t *ref0, accel_object_t *ref1, uint64_t *out_last_seq) {
  accel_status_t st = submit_check_failed(q);
  if (st == ACCEL_OK) {
    bool owner = submit_begin(q);
    uint32_t ref_mask;
    uint32_t words = launch_words(ref0, ref1, &ref_mask);
    record_word_t *rec = tail_reserve(q, words);
    if (rec != NULL) {
      launch_write(rec, exec, payload, ref0, ref1, ref_mask);
      header_publish(rec, header_make(ACCEL_CMD_LAUNCH, words, ref_mask, 0));
      ++q->next_seq;
    }
    st = submit_finish(q, owner, rec != NULL, 1, out_last_seq);
  }
  if (st != ACCEL_OK) {
    accel_object_release(ref0);  // ours from the call on (driver.h)
    accel_object_release(ref1);
  }
  return st;
}

accel_status_t accel_host_queue_launch(accel_drv_queue_t *q,
                                       accel_launch_exec_fn_t exec,
                                       void *payload, accel_object_t *ref0,
                                       accel_object_t *ref1,
                                       uint64_t *out_last_seq) {
  uint32_t ref_mask;
  uint32_t words = launch_words(ref0, ref1, &ref_mask);
  record_word_t *rec = owner_fast_begin(q, words);
  if (rec == NULL) {
    return launch_general(q, exec, payload, ref0, ref1, out_last_seq);
  }
  launch_write(rec, exec, payload, ref0, ref1, ref_mask);
  return owner_fast_end(q, rec,
                        header_make(ACCEL_CMD_LAUNCH, words, ref_mask, 0),
                        out_last_seq);
}
