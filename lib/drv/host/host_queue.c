// Host queues: an unbounded ring of commands (a list of fixed-size chunks)
// written by any thread (without a lock by the thread that submits to the
// queue alone, else under a short lock: see submit_begin) and consumed by
// one worker thread that spins for a bounded time, then parks on a futex.
//
// Commands are stored as compact records of 8-byte words, not as the 64-byte
// accel_cmd_t of the driver interface: a header word, then only the words
// the command's kind uses, then its references if it holds any. A host call
// takes 2 words (its function named by a place in a per-queue table), so a
// cache line carries 4 of them and the producer and the worker trade a line
// every 4 commands instead of every command. docs/execution-model.md ("Host
// queues") gives the design and what each step measured.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/resource.h>

#include "drv/host/host_internal.h"
#include "trace/trace_hooks.h"

// Small chunks (1 KiB of records, then the jump word and the link) and a
// few spares: a queue that keeps up cycles through about 9 KiB, which stays
// in both cores' L1 caches, where larger chunks cycled through hundreds of
// KiB and each record line came from L2 or the other core's cache (measured
// with 64 KiB chunks: empty-command round trip 186-190 ns -> 138-154 ns). A
// backlog still grows without bound, one malloc per chunk.
#define CHUNK_WORDS 128u
#define SPARE_CHUNKS 8
// The worker posts its completion at least every this many commands.
#define COMPLETION_BATCH 64u

// One word of a record: the header's bits, or a command field.
typedef union record_word {
  uint64_t u;
  void *p;
  accel_host_fn_t host_fn;
  accel_launch_exec_fn_t exec;
  accel_drv_semaphore_t *semaphore;
  _Atomic uint64_t *timestamp;
  accel_object_t *ref;
} record_word_t;

_Static_assert(sizeof(record_word_t) == 8, "records are 8-byte words");

typedef struct chunk {
  // A record never spans two chunks; the word after the last holds the jump
  // to the next chunk when a record did not fit (a JUMP header).
  record_word_t words[CHUNK_WORDS + 1];
  struct chunk *_Atomic next;
} chunk_t;

// Header word: bits 0-7 the kind (accel_cmd_kind_t, or RECORD_JUMP), bits
// 8-15 the record's size in words (header included, so never 0), bits 16-17
// which of refs[0] and refs[1] follow the body, bits 32-63 accel_cmd_t.flags.
// A record is published by the release store of its nonzero header; chunks
// are zeroed before they are used again, so a word not yet written reads 0.
// The seq is not stored: the worker counts records.
#define RECORD_JUMP 0xffu

// A host call without references or flags whose function has a place in the
// queue's function table takes 2 words, 4 to a cache line: the header's bits
// 24-31 name the place and the body is the user data. The table is
// direct-mapped on the function's address and filled by producers (a place,
// once set, never changes; a function whose place is taken by another uses
// the 3-word form); the worker reads a place only after the header of a
// record that names it, which was stored after the place.
#define RECORD_HOST_CALL_SHORT 0xfeu
#define FN_TABLE_SIZE 16u

static inline uint64_t header_make(uint32_t kind, uint32_t words,
                                   uint32_t refs, uint32_t flags) {
  return (uint64_t)kind | ((uint64_t)words << 8) | ((uint64_t)refs << 16) |
         ((uint64_t)flags << 32);
}
static inline uint32_t header_kind(uint64_t h) { return (uint32_t)(h & 0xff); }
static inline uint32_t header_words(uint64_t h) {
  return (uint32_t)((h >> 8) & 0xff);
}
static inline uint32_t header_refs(uint64_t h) {
  return (uint32_t)((h >> 16) & 3);
}
static inline uint32_t header_flags(uint64_t h) { return (uint32_t)(h >> 32); }
static inline uint32_t header_fn_slot(uint64_t h) {
  return (uint32_t)((h >> 24) & 0xff);
}

// The place of |fn| in a queue's function table (RECORD_HOST_CALL_SHORT).
static inline uint32_t fn_place(accel_host_fn_t fn) {
  uintptr_t a = (uintptr_t)fn;
  return (uint32_t)((a >> 4) ^ (a >> 12)) & (FN_TABLE_SIZE - 1);
}

// Words each kind's body takes: the first words of accel_cmd_t's union,
// which hold its member's fields in order (copied as they are; a fill's
// pattern_size is the low half of its fourth word).
static const uint8_t body_words[ACCEL_CMD_KIND_COUNT] = {
    [ACCEL_CMD_HOST_CALL] = 2, [ACCEL_CMD_FILL] = 4, [ACCEL_CMD_COPY] = 3,
    [ACCEL_CMD_SIGNAL] = 3,    [ACCEL_CMD_WAIT] = 2, [ACCEL_CMD_LAUNCH] = 2,
};
#define CMD_MEMBER_FITS(member, words) \
  _Static_assert(sizeof(((accel_cmd_t *)0)->member) <= (words) * 8, #member)
CMD_MEMBER_FITS(host_call, 2);
CMD_MEMBER_FITS(fill, 4);
CMD_MEMBER_FITS(copy, 3);
CMD_MEMBER_FITS(signal, 3);
CMD_MEMBER_FITS(wait, 2);
CMD_MEMBER_FITS(launch, 2);
_Static_assert(offsetof(accel_cmd_t, host_call) == 16 &&
                   offsetof(accel_cmd_t, refs) == 16 + 4 * 8,
               "header, seq, a union of 4 words, refs");

struct accel_drv_queue {
  accel_drv_device_t *device;
  accel_drv_semaphore_t *completion;  // borrowed from the stream
  char name[64];
  uint32_t priority;
  bool abort_on_destroy;
  pthread_t thread;

  // Producer side, guarded by |submit_lock| (a spinlock: held for a few
  // stores, so parking would cost more than it saves), or owned by the
  // queue's biased owner: see submit_begin.
  _Alignas(64) atomic_flag submit_lock;
  _Atomic uint32_t bias;        // BIAS_*
  _Atomic uintptr_t owner;      // thread_token() of the owner (BIAS_OWNED)
  _Atomic uint32_t owner_busy;  // 1 while the owner submits without the lock
  chunk_t *tail_chunk;
  uint32_t tail_pos;  // next free word of |tail_chunk|
  uint64_t next_seq;  // seq of the last command written
  _Atomic uint64_t *submitted_seq;  // params.submitted_seq (may be NULL)

  // Written by producers (rarely), read by the worker: see
  // RECORD_HOST_CALL_SHORT.
  _Alignas(64) accel_host_fn_t fn_table[FN_TABLE_SIZE];

  // Shared flags.
  _Alignas(64) _Atomic uint32_t parked;  // the worker is (about to be) asleep
  _Atomic uint32_t stopping;             // destroy called
  _Atomic uint32_t cancel;               // abort pending work
  // Set (release) once the queue has failed, after |poison_message| and
  // before |completion| holds the error (so that a thread that saw the
  // completion fail, in a synchronize, sees it set); producers check it
  // instead of reading the completion semaphore, whose line the worker
  // writes on every batch, and report the poison message.
  _Atomic uint32_t failed;
  accel_host_waiter_t waiter;  // the worker's futex word (also for waits)

  // Spare chunks handed from the consumer back to producers, so that a
  // backlog that comes and goes does not allocate each time.
  chunk_t *_Atomic spare[SPARE_CHUNKS];

  // Consumer side (worker thread only).
  _Alignas(64) chunk_t *head_chunk;
  uint32_t head_pos;           // word of the next record in |head_chunk|
  uint64_t consumed;           // seq of the last command processed
  uint64_t completion_posted;  // last seq signalled on |completion|
  char *error_buffer;  // the worker thread's accel_last_error() storage
  // accel_trace_cmd_hooks_quiet(), as read when the worker woke or posted
  // its last completion batch, and the host calls and launches run since
  // without the trace hooks, not yet counted.
  bool quiet;
  uint64_t quiet_host_calls;
  uint64_t quiet_launches;
  bool poisoned;
  accel_status_t poison_status;
  char poison_message[ACCEL_ERROR_MESSAGE_MAX];
};

static inline uint64_t header_acquire(const record_word_t *w) {
  // Acquire: pairs with the producer's publishing store of the header, so
  // that the record's other words are visible.
  return __atomic_load_n(&w->u, __ATOMIC_ACQUIRE);
}

static inline void header_publish(record_word_t *w, uint64_t header) {
  // Release: publishes the record's body (and a jump's link) to the worker.
  __atomic_store_n(&w->u, header, __ATOMIC_RELEASE);
}

// Words |cmd| takes as a record. Reads fields one at a time, as the caller
// stored them (a wider load spanning two fresh stores cannot be forwarded
// from the store buffer and waits for both to reach the cache).
static inline uint32_t record_words(const accel_cmd_t *cmd, uint32_t *refs) {
  *refs = (cmd->refs[0] != NULL ? 1u : 0u) | (cmd->refs[1] != NULL ? 2u : 0u);
  return 1u + body_words[cmd->kind] + (*refs & 1u) + (*refs >> 1);
}

// Writes |cmd|'s body and references after |rec|'s header word (which the
// caller publishes afterwards).
static inline void record_write_body(record_word_t *rec,
                                     const accel_cmd_t *cmd, uint32_t refs) {
  record_word_t *w = rec + 1;
  const unsigned char *body = (const unsigned char *)&cmd->host_call;
  for (uint32_t i = 0; i < body_words[cmd->kind]; ++i) {
    memcpy(&w[i].u, body + 8 * i, 8);
  }
  w += body_words[cmd->kind];
  if (refs & 1u) {
    (w++)->ref = cmd->refs[0];
  }
  if (refs & 2u) {
    w->ref = cmd->refs[1];
  }
}

// Writes |cmd| as the record |header| says (short or full) and publishes it.
static inline void record_write(record_word_t *rec, const accel_cmd_t *cmd,
                                uint64_t header, uint32_t refs) {
  if (header_kind(header) == RECORD_HOST_CALL_SHORT) {
    rec[1].p = cmd->host_call.user_data;
  } else {
    record_write_body(rec, cmd, refs);
  }
  header_publish(rec, header);
}

// Rebuilds the command of the published record |rec| (header |h|) as
// number |seq|.
static void record_read(const accel_drv_queue_t *q, const record_word_t *rec,
                        uint64_t h, uint64_t seq, accel_cmd_t *cmd) {
  uint32_t kind = header_kind(h);
  if (kind == RECORD_HOST_CALL_SHORT) {
    *cmd = (accel_cmd_t){.kind = ACCEL_CMD_HOST_CALL, .seq = seq};
    cmd->host_call.fn = q->fn_table[header_fn_slot(h)];
    cmd->host_call.user_data = rec[1].p;
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

// Biased submission. Most streams are fed by one thread, and the submit
// lock's locked instruction is a full fence: it waits for the stores of the
// previous command to reach the cache, lines that the worker holds, and
// that costs the producer a cross-core round trip per command. So the first
// thread that submits to a queue becomes its owner and submits without the
// lock, announcing itself in |owner_busy| (a plain store, ordered before its
// read of |bias| by a compiler barrier only). The first other thread to
// submit revokes the bias for good: it stores BIAS_REVOKED, issues
// accel_host_heavy_fence (membarrier: a full fence on every thread, so that
// either it sees |owner_busy| set or the owner sees the revocation) and
// waits until the owner is out; from then on every submit takes the lock.
// Without membarrier there is no owner.
enum {
  BIAS_NONE = 0,     // no owner yet: submits take the lock
  BIAS_OWNED = 1,    // |owner| submits without the lock
  BIAS_REVOKED = 2,  // a second thread submitted: everyone takes the lock
};

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

static void submit_lock(accel_drv_queue_t *q) {
  uint32_t spins = 0;
  // Acquire: the holder's writes to the tail are visible after we take it.
  while (atomic_flag_test_and_set_explicit(&q->submit_lock,
                                           memory_order_acquire)) {
    if (++spins < 64) {
      accel_host_cpu_relax();
    } else {
      sched_yield();  // the holder was preempted (more threads than cores)
    }
  }
}

static void submit_unlock(accel_drv_queue_t *q) {
  // Release: publishes the tail updates to the next holder.
  atomic_flag_clear_explicit(&q->submit_lock, memory_order_release);
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

static chunk_t *chunk_get(accel_drv_queue_t *q) {
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
static void chunk_put(accel_drv_queue_t *q, chunk_t *c) {
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

static void release_refs(accel_cmd_t *cmd) {
  accel_object_release(cmd->refs[0]);
  accel_object_release(cmd->refs[1]);
}

static void fill_pattern(uint8_t *dst, uint64_t size, uint64_t pattern,
                         uint32_t pattern_size) {
  if (pattern_size == 1) {
    memset(dst, (int)(pattern & 0xff), size);
    return;
  }
  uint8_t bytes[8];
  for (uint32_t i = 0; i < 8; ++i) {
    bytes[i] = (uint8_t)(pattern >> (8 * (i % pattern_size)));
  }
  // Fill 8 bytes at a time with the pattern repeated (size and offset are
  // multiples of pattern_size, so phase is preserved).
  uint64_t word;
  memcpy(&word, bytes, 8);
  uint64_t i = 0;
  for (; i + 8 <= size; i += 8) {
    memcpy(dst + i, &word, 8);
  }
  for (; i < size; ++i) {
    dst[i] = bytes[i % 8];
  }
}

// Runs a host call's function. Returns non-OK with the thread message set
// on failure.
// A host function returned |st| (not OK): sets the thread's message to say
// so, with the function's own message, and returns |st|.
static __attribute__((noinline)) accel_status_t run_host_fn_status(
    accel_status_t st) {
  char msg[ACCEL_ERROR_MESSAGE_MAX];
  snprintf(msg, sizeof(msg), "%s", accel_last_error());
  return accel_error(st, "host function returned %s%s%s",
                     accel_status_name(st), msg[0] ? ": " : "", msg);
}

static inline accel_status_t run_host_fn(accel_drv_queue_t *q,
                                         accel_host_fn_t fn, void *user_data) {
  q->error_buffer[0] = '\0';  // attribute a message to this call only
  accel_status_t st = fn(user_data);
  if (__builtin_expect(st != ACCEL_OK, 0)) {
    return run_host_fn_status(st);
  }
  return ACCEL_OK;
}

// Executes one command. Returns non-OK with the thread message set on failure.
static accel_status_t execute(accel_drv_queue_t *q, accel_cmd_t *cmd) {
  switch (cmd->kind) {
    case ACCEL_CMD_HOST_CALL:
      return run_host_fn(q, cmd->host_call.fn, cmd->host_call.user_data);
    case ACCEL_CMD_FILL:
      fill_pattern((uint8_t *)(uintptr_t)cmd->fill.dst, cmd->fill.size_bytes,
                   cmd->fill.pattern, cmd->fill.pattern_size);
      return ACCEL_OK;
    case ACCEL_CMD_COPY:
      memmove((void *)(uintptr_t)cmd->copy.dst,
              (const void *)(uintptr_t)cmd->copy.src, cmd->copy.size_bytes);
      return ACCEL_OK;
    case ACCEL_CMD_SIGNAL:
      if (cmd->signal.timestamp_out != NULL) {
        // Release: a reader that sees the signalled value sees this time.
        atomic_store_explicit(cmd->signal.timestamp_out, accel_host_now_ns(),
                              memory_order_release);
      }
      accel_host_semaphore_signal_max(cmd->signal.semaphore,
                                      cmd->signal.value);
      return ACCEL_OK;
    case ACCEL_CMD_WAIT: {
      accel_drv_semaphore_t *sem = cmd->wait.semaphore;
      accel_status_t st = accel_host_semaphore_wait_ex(
          1, &sem, &cmd->wait.value, ACCEL_WAIT_ALL, ACCEL_TIMEOUT_INFINITE,
          NULL, &q->waiter, q->device->spin_ns);
      if (st == ACCEL_ERROR_ABORTED) {
        return accel_error(st, "aborted: stream destroyed with pending work");
      }
      if (st != ACCEL_OK) {
        return accel_error_context(st, "waited semaphore failed");
      }
      return ACCEL_OK;
    }
    case ACCEL_CMD_LAUNCH:
      return cmd->launch.exec(cmd->launch.payload, q->device);
    default:
      return accel_error(ACCEL_ERROR_INTERNAL, "unknown command kind %u",
                         cmd->kind);
  }
}

// Counts the host calls that ran without the trace hooks; before their
// completion is posted or the queue fails.
static void count_quiet_calls(accel_drv_queue_t *q) {
  if (q->quiet_host_calls + q->quiet_launches != 0) {
    accel_trace_count_quiet(q, q->quiet_host_calls, q->quiet_launches);
    q->quiet_host_calls = 0;
    q->quiet_launches = 0;
  }
}

// Records the first failure; the queue then aborts everything after it.
static void poison(accel_drv_queue_t *q, accel_cmd_t *cmd, accel_status_t st,
                   const char *why) {
  count_quiet_calls(q);
  q->poisoned = true;
  q->poison_status = st;
  snprintf(q->poison_message, sizeof(q->poison_message),
           "stream \"%s\" command #%llu (%s) failed: %s", q->name,
           (unsigned long long)cmd->seq, accel_cmd_kind_name(cmd->kind), why);
  accel_trace_stream_fail(q, cmd->seq, st, q->poison_message);
  // Release: a producer that sees the flag finds the stored message. Before
  // the completion fails: a synchronize that returns the failure wakes up
  // after it, and a submit that follows must be refused.
  atomic_store_explicit(&q->failed, 1, memory_order_release);
  accel_host_semaphore_fail(q->completion, st, q->poison_message);
}

// Handles a command that will not run: its signal fails with the poison.
static void skip(accel_drv_queue_t *q, accel_cmd_t *cmd) {
  if (cmd->kind == ACCEL_CMD_SIGNAL) {
    accel_host_semaphore_fail(cmd->signal.semaphore, q->poison_status,
                              q->poison_message);
  }
}

// |cmd| failed with |st| (the thread's message says why): poisons the queue.
static void fail(accel_drv_queue_t *q, accel_cmd_t *cmd, accel_status_t st) {
  char why[ACCEL_ERROR_MESSAGE_MAX];
  snprintf(why, sizeof(why), "%s", accel_last_error());
  poison(q, cmd, st, why);
  skip(q, cmd);
}

// |cmd| in the plain numbers the trace hooks take.
static inline accel_trace_cmd_t trace_cmd(const accel_cmd_t *cmd) {
  return (accel_trace_cmd_t){.kind = cmd->kind,
                             .direction = accel_cmd_direction(cmd),
                             .seq = cmd->seq,
                             .bytes = accel_cmd_bytes(cmd),
                             .event = accel_cmd_event_id(cmd),
                             .timestamp = cmd->kind == ACCEL_CMD_SIGNAL
                                              ? cmd->signal.timestamp_out
                                              : NULL};
}

static void process(accel_drv_queue_t *q, accel_cmd_t *cmd) {
  const accel_trace_cmd_t tc = trace_cmd(cmd);
  accel_trace_cmd_start(q, &tc);
  if (!q->poisoned &&
      atomic_load_explicit(&q->cancel, memory_order_acquire)) {
    char why[96];
    snprintf(why, sizeof(why), "aborted: stream destroyed with pending work");
    poison(q, cmd, ACCEL_ERROR_ABORTED, why);
  }
  if (q->poisoned) {
    accel_trace_cmd_end(q, &tc, q->poison_status);
    skip(q, cmd);
  } else {
    accel_status_t st = execute(q, cmd);
    accel_trace_cmd_end(q, &tc, st);
    if (st != ACCEL_OK) {
      fail(q, cmd, st);
    }
  }
  release_refs(cmd);
}

// The quiet record |rec| failed with |st| (the thread's message says why):
// the full path's end of a command, which poisons the queue.
static void quiet_failed(accel_drv_queue_t *q, const record_word_t *rec,
                         uint64_t header, accel_status_t st) {
  accel_cmd_t cmd;
  record_read(q, rec, header, q->consumed + 1, &cmd);
  const accel_trace_cmd_t tc = trace_cmd(&cmd);
  accel_trace_cmd_end(q, &tc, st);
  fail(q, &cmd, st);
  release_refs(&cmd);
}

// True for the records process_quiet runs: host calls without references
// (short or full) and launches.
static inline bool quiet_shape(uint64_t header) {
  uint64_t shape = header & 0xffffffu;  // all but a short call's place
  return shape == header_make(RECORD_HOST_CALL_SHORT, 2, 0, 0) ||
         header == header_make(ACCEL_CMD_HOST_CALL, 3, 0, 0) ||
         header_kind(header) == ACCEL_CMD_LAUNCH;
}

// Runs the record |rec| of quiet_shape when the trace hooks are quiet and
// the queue healthy, without building its command or calling the hooks,
// and counts it for count_quiet_calls.
static inline void process_quiet(accel_drv_queue_t *q,
                                 const record_word_t *rec, uint64_t header) {
  accel_status_t st;
  uint32_t kind = header_kind(header);
  if (kind == ACCEL_CMD_LAUNCH) {
    st = rec[1].exec(rec[2].p, q->device);
    if (__builtin_expect(st == ACCEL_OK, 1)) {
      q->quiet_launches++;
      const record_word_t *ref = rec + 1 + body_words[ACCEL_CMD_LAUNCH];
      for (uint32_t refs = header_refs(header); refs != 0; refs >>= 1) {
        if (refs & 1u) {
          accel_object_release((ref++)->ref);
        }
      }
      return;
    }
  } else {
    st = kind == RECORD_HOST_CALL_SHORT
             ? run_host_fn(q, q->fn_table[header_fn_slot(header)], rec[1].p)
             : run_host_fn(q, rec[1].host_fn, rec[2].p);
    if (__builtin_expect(st == ACCEL_OK, 1)) {
      q->quiet_host_calls++;
      return;
    }
  }
  quiet_failed(q, rec, header, st);
}

// Runs the short host calls that follow, back to back, while they are
// published and the completion batch lasts, with the worker's cursor in
// registers: the commonest stretch of a busy queue. Stops before anything
// else (another kind, a jump, a record not yet published), which the main
// loop takes.
static void run_quiet_burst(accel_drv_queue_t *q) {
  record_word_t *words = q->head_chunk->words;
  uint32_t pos = q->head_pos;
  uint64_t consumed = q->consumed;
  uint64_t calls = 0;
  uint64_t end = q->completion_posted + COMPLETION_BATCH;
  while (consumed < end) {
    uint64_t h = header_acquire(&words[pos]);
    if ((h & 0xffffffu) != header_make(RECORD_HOST_CALL_SHORT, 2, 0, 0) ||
        atomic_load_explicit(&q->cancel, memory_order_relaxed)) {
      break;
    }
    accel_status_t st =
        run_host_fn(q, q->fn_table[header_fn_slot(h)], words[pos + 1].p);
    if (__builtin_expect(st != ACCEL_OK, 0)) {
      q->head_pos = pos + 2;
      q->consumed = consumed;
      q->quiet_host_calls += calls;
      quiet_failed(q, &words[pos], h, st);
      q->consumed++;
      return;
    }
    pos += 2;
    consumed++;
    calls++;
  }
  q->head_pos = pos;
  q->consumed = consumed;
  q->quiet_host_calls += calls;
}

// Publishes progress: the completion semaphore reaches the last command that
// ran (batched, so that a burst of commands costs one signal).
static void post_completion(accel_drv_queue_t *q) {
  count_quiet_calls(q);
  if (!q->poisoned && q->completion_posted != q->consumed) {
    q->completion_posted = q->consumed;
    accel_host_semaphore_signal_single(q->completion, q->consumed);
  }
}

static void set_priority(uint32_t priority) {
  int nice_value = 0;
  if (priority == ACCEL_STREAM_PRIORITY_HIGH) {
    nice_value = -5;
  } else if (priority == ACCEL_STREAM_PRIORITY_LOW) {
    nice_value = 5;
  }
  if (nice_value != 0) {
    // Raising priority needs CAP_SYS_NICE; without it the worker stays at
    // normal priority (documented in stream.h).
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice_value);
  }
}

// Returns the next published record, its header in |*out_header|, or NULL
// if none is ready. Follows (and recycles past) jumps to the next chunk.
static record_word_t *next_ready(accel_drv_queue_t *q, uint64_t *out_header) {
  for (;;) {
    record_word_t *rec = &q->head_chunk->words[q->head_pos];
    uint64_t h = header_acquire(rec);
    if (h == 0) {
      return NULL;
    }
    if (header_kind(h) != RECORD_JUMP) {
      *out_header = h;
      return rec;
    }
    // Relaxed: the link was stored before the jump's header, which we read
    // with acquire.
    chunk_t *next =
        atomic_load_explicit(&q->head_chunk->next, memory_order_relaxed);
    chunk_put(q, q->head_chunk);
    q->head_chunk = next;
    q->head_pos = 0;
  }
}

static bool has_ready(accel_drv_queue_t *q) {
  uint64_t h;
  return next_ready(q, &h) != NULL;
}


static void *worker_main(void *arg) {
  accel_drv_queue_t *q = arg;
  q->error_buffer = accel_error_buffer();
  if (q->device->has_affinity) {
    // Best effort: a failure leaves the thread where the scheduler puts it.
    pthread_setaffinity_np(pthread_self(), sizeof(q->device->affinity),
                           &q->device->affinity);
  }
  set_priority(q->priority);
  uint64_t spin_ns = q->device->spin_ns;
  // True while the worker found the queue empty before its current command:
  // such a command is most likely waited for on its own (a submit then a
  // synchronize), so its completion is posted at once instead of after a
  // poll of the next record's header, whose line is usually not in this
  // core's cache.
  bool was_idle = true;
  for (;;) {
    uint64_t header;
    record_word_t *rec = next_ready(q, &header);
    if (rec != NULL) {
      if (was_idle) {
        q->quiet = accel_trace_cmd_hooks_quiet();
      }
      // The record stays in place (its chunk is recycled only once the
      // worker moved past it); the next one starts after it.
      q->head_pos += header_words(header);
      if (quiet_shape(header) && q->quiet && !q->poisoned &&
          !atomic_load_explicit(&q->cancel, memory_order_relaxed)) {
        process_quiet(q, rec, header);
        q->consumed++;
        if (!was_idle && !q->poisoned) {
          // In a burst: the calls that follow, without the loop's steps.
          run_quiet_burst(q);
        }
      } else {
        accel_cmd_t cmd;
        record_read(q, rec, header, q->consumed + 1, &cmd);
        if (cmd.kind == ACCEL_CMD_WAIT) {
          post_completion(q);  // waits may block: report what ran before
        }
        process(q, &cmd);
        q->consumed++;
      }
      if (was_idle ||
          q->consumed - q->completion_posted >= COMPLETION_BATCH) {
        post_completion(q);
        q->quiet = accel_trace_cmd_hooks_quiet();
        was_idle = false;
      }
      continue;
    }
    was_idle = true;
    post_completion(q);
    // Acquire: destroy is called after every submit returned; seeing the
    // flag makes their commands visible to next_ready below.
    if (atomic_load_explicit(&q->stopping, memory_order_acquire)) {
      if (!has_ready(q)) {
        break;
      }
      continue;
    }
    // Spin for new work before parking. The clock is first read after 64
    // polls: the next command of a tight submit/synchronize loop arrives
    // within a few hundred ns, and a clock read there would delay seeing it.
    uint64_t spin_until = 0;
    bool found = false;
    uint32_t iter = 0;
    for (;;) {
      if (has_ready(q) ||
          atomic_load_explicit(&q->stopping, memory_order_relaxed)) {
        found = true;
        break;
      }
      accel_host_cpu_relax();
      if ((++iter & 63) == 0) {
        uint64_t now = accel_host_now_ns();
        if (spin_until == 0) {
          spin_until = now + spin_ns;
        } else if (now >= spin_until) {
          break;
        }
      }
    }
    if (found) {
      continue;
    }
    // Parking protocol: |parked| is set under the submit lock, and read
    // under it by producers that take it. A producer whose critical section
    // came first has published its command and the re-check below sees it;
    // one that comes after sees |parked| and sets the futex word, which we
    // cleared before taking the lock. A biased owner does not take the lock:
    // it publishes, then reads |parked| after a light fence, and the heavy
    // fence here pairs with it (either the re-check sees its command or it
    // sees |parked|).
    atomic_store_explicit(&q->waiter.word, 0, memory_order_relaxed);
    submit_lock(q);
    atomic_store_explicit(&q->parked, 1, memory_order_relaxed);
    bool biased = atomic_load_explicit(&q->bias, memory_order_relaxed) ==
                  BIAS_OWNED;
    submit_unlock(q);
    if (biased) {
      accel_host_heavy_fence();
    }
    if (!has_ready(q) &&
        !atomic_load_explicit(&q->stopping, memory_order_acquire)) {
      accel_host_futex_wait(&q->waiter.word, 0, UINT64_MAX);
    }
    // A stale 1 seen by a producer only costs it a spare wake-up.
    atomic_store_explicit(&q->parked, 0, memory_order_relaxed);
  }
  return NULL;
}


accel_status_t accel_host_queue_create(accel_drv_device_t *device,
                                       const accel_drv_queue_params_t *params,
                                       accel_drv_queue_t **out_queue) {
  accel_drv_queue_t *q = aligned_alloc(64, sizeof(*q));
  if (q == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host queue: cannot allocate %zu bytes", sizeof(*q));
  }
  memset(q, 0, sizeof(*q));
  q->device = device;
  q->completion = params->completion;
  q->submitted_seq = params->submitted_seq;
  q->priority = params->priority;
  q->abort_on_destroy = params->abort_on_destroy;
  snprintf(q->name, sizeof(q->name), "%s",
           params->name != NULL ? params->name : "stream");
  q->waiter.cancel = &q->cancel;
  accel_status_t st;
  q->tail_chunk = chunk_get(q);
  if (q->tail_chunk == NULL) {
    st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                     "host queue: cannot allocate the first command chunk");
    goto err_free_queue;
  }
  q->head_chunk = q->tail_chunk;
  atomic_flag_clear(&q->submit_lock);
  int rc = pthread_create(&q->thread, NULL, worker_main, q);
  if (rc != 0) {
    st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                     "host queue: cannot start a worker thread: %s",
                     strerror(rc));
    goto err_free_chunk;
  }
  char thread_name[16];
  snprintf(thread_name, sizeof(thread_name), "accel-q-%.7s", q->name);
  pthread_setname_np(q->thread, thread_name);
  *out_queue = q;
  return ACCEL_OK;

err_free_chunk:
  free(q->tail_chunk);
err_free_queue:
  free(q);
  return st;
}

void accel_host_queue_destroy(accel_drv_queue_t *q) {
  if (q->abort_on_destroy) {
    // Release: the worker reads |cancel| before deciding to run a command.
    atomic_store_explicit(&q->cancel, 1, memory_order_release);
  }
  // Under the lock, like a submit: see the parking protocol in worker_main.
  submit_lock(q);
  atomic_store_explicit(&q->stopping, 1, memory_order_release);
  submit_unlock(q);
  accel_host_waiter_wake(&q->waiter);
  pthread_join(q->thread, NULL);
  // Everything submitted was processed; the worker left at most the current
  // head chunk and the spare.
  free(q->head_chunk);
  for (int i = 0; i < SPARE_CHUNKS; ++i) {
    free(atomic_load_explicit(&q->spare[i], memory_order_relaxed));
  }
  free(q);
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

// Starts a new chunk for a record of |words| words that does not fit in the
// tail chunk, jumping there from the tail. Returns where the record goes, or
// NULL when no chunk can be allocated. The jump is published before the
// record: the worker then polls the new chunk's first word, which reads 0
// until the record's header is published there.
static __attribute__((noinline)) record_word_t *tail_reserve_in_new_chunk(
    accel_drv_queue_t *q, uint32_t words) {
  chunk_t *c = chunk_get(q);
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

// Where the next record, of |words| words, goes (the caller writes it and
// publishes its header), or NULL when the ring cannot grow. Producer side.
static inline record_word_t *tail_reserve(accel_drv_queue_t *q,
                                          uint32_t words) {
  if (__builtin_expect(q->tail_pos + words <= CHUNK_WORDS, 1)) {
    record_word_t *rec = &q->tail_chunk->words[q->tail_pos];
    q->tail_pos += words;
    return rec;
  }
  return tail_reserve_in_new_chunk(q, words);
}

// The stored failure of a queue that has failed, else ACCEL_OK.
static inline accel_status_t submit_check_failed(accel_drv_queue_t *q) {
  // Acquire: pairs with poison()'s release, so the stored error is complete.
  if (atomic_load_explicit(&q->failed, memory_order_acquire)) {
    return accel_error(q->poison_status, "%s", q->poison_message);
  }
  return ACCEL_OK;
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
  // parking protocol in worker_main.
  if (owner) {
    accel_host_light_fence();
  }
  bool wake = accepted > 0 &&
              atomic_load_explicit(&q->parked, memory_order_relaxed) != 0;
  submit_end(q, owner);
  if (wake) {
    accel_host_waiter_wake(&q->waiter);
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
