#ifndef ACCEL_DRV_HOST_HOST_QUEUE_IMPL_H
#define ACCEL_DRV_HOST_HOST_QUEUE_IMPL_H

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
//
// The code is in three files sharing this header: the record codec and the
// chunks records live in (host_queue_record.c), the producers' side
// (host_queue_submit.c), and the worker thread with the queue's lifecycle
// (host_queue_worker.c). What the hot paths rely on being inlined (the
// header codec, the record writer, the submit lock) is static inline here.
#include <sched.h>
#include <stdint.h>
#include <string.h>

#include "drv/host/host_internal.h"

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

// An EXECUTE of a whole recording without bases holding one reference (a
// command buffer whose commands take nothing per execute) takes 3 words:
// the header, the recording, the reference. The full form's 5 words span
// two cache lines at half the places a record can start, and each line the
// worker reads is a transfer from the producer's core (measured on the
// one-command buffer's round trip, best of 40 runs of 1,000: 1560-1580 ->
// 1330-1350 TSC cycles, with a host call's at 1060-1260 in the same runs).
#define RECORD_EXECUTE_WHOLE 0xfdu

// The number of commands of a recording (host_queue_replay.c).
uint32_t accel_host_recording_count(const accel_drv_recording_t *recording);

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
    [ACCEL_CMD_EXECUTE] = 3,
};
#define CMD_MEMBER_FITS(member, words) \
  _Static_assert(sizeof(((accel_cmd_t *)0)->member) <= (words) * 8, #member)
CMD_MEMBER_FITS(host_call, 2);
CMD_MEMBER_FITS(fill, 4);
CMD_MEMBER_FITS(copy, 3);
CMD_MEMBER_FITS(signal, 3);
CMD_MEMBER_FITS(wait, 2);
CMD_MEMBER_FITS(launch, 2);
CMD_MEMBER_FITS(execute, 3);
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
  // FAILED_POISONED by the worker; FAILED_ABORTED by queue_abort while the
  // worker has not poisoned the queue yet (producers then report the
  // abort's message, and do not wait for the worker: submit_finish).
  _Atomic uint32_t failed;
  // Once |failed| is set: the seq of the last command the worker skipped
  // (release, after its signal failed). A producer whose record raced the
  // failure waits for it before returning (submit_finish), so that every
  // skipped signal has failed by the time a synchronize sees the failure.
  _Atomic uint64_t skipped_through;
  accel_host_waiter_t waiter;  // the worker's futex word (also for waits)
  // queue_abort (host_fault.c's callers: the device's health): the first
  // abort claims |abort_claim|, writes its status and message, then sets
  // |abort_ready| (release) before |cancel|.
  _Atomic uint32_t abort_claim;
  _Atomic uint32_t abort_ready;
  accel_status_t abort_status;
  char abort_message[ACCEL_ERROR_MESSAGE_MAX];

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
  uint64_t quiet_executes;
  // The host calls and launches those executes replayed.
  uint64_t replayed_host_calls;
  uint64_t replayed_launches;
  // The first command of the running execute not run, when it failed
  // (host_queue_replay.c): its signals and those after it are failed.
  uint32_t replay_resume;
  bool poisoned;
  bool completion_fail_pending;  // poisoned; |completion| not failed yet
  accel_status_t poison_status;
  char poison_message[ACCEL_ERROR_MESSAGE_MAX];
};

enum {
  FAILED_POISONED = 1,
  FAILED_ABORTED = 2,
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

// The compact header of |cmd| if it is an EXECUTE of RECORD_EXECUTE_WHOLE's
// shape, else 0.
static inline uint64_t execute_whole_header(const accel_cmd_t *cmd) {
  if (cmd->execute.bases == NULL && cmd->execute.first == 0 &&
      cmd->refs[0] != NULL && cmd->refs[1] == NULL && cmd->flags == 0 &&
      cmd->execute.count ==
          accel_host_recording_count(cmd->execute.recording)) {
    return header_make(RECORD_EXECUTE_WHOLE, 3, 1, 0);
  }
  return 0;
}

// Writes |cmd| as the record |header| says (short or full) and publishes it.
static inline void record_write(record_word_t *rec, const accel_cmd_t *cmd,
                                uint64_t header, uint32_t refs) {
  if (header_kind(header) == RECORD_HOST_CALL_SHORT) {
    rec[1].p = cmd->host_call.user_data;
  } else if (header_kind(header) == RECORD_EXECUTE_WHOLE) {
    rec[1].p = cmd->execute.recording;
    rec[2].ref = cmd->refs[0];
  } else {
    record_write_body(rec, cmd, refs);
  }
  header_publish(rec, header);
}

// Rebuilds the command of the published record |rec| (header |h|) as
// number |seq|. Worker only.
void accel_host_queue_record_read(const accel_drv_queue_t *q,
                                  const record_word_t *rec, uint64_t h,
                                  uint64_t seq, accel_cmd_t *cmd);

// A zeroed chunk for records (a spare if there is one), or NULL when none
// can be allocated. Producer side.
chunk_t *accel_host_queue_chunk_get(accel_drv_queue_t *q);

// Takes back a chunk the worker has consumed, zeroed for its next use.
void accel_host_queue_chunk_put(accel_drv_queue_t *q, chunk_t *c);

// Starts a new tail chunk for a record of |words| words that does not fit
// in the current one (the slow path of tail_reserve). Producer side.
record_word_t *accel_host_queue_tail_new_chunk(accel_drv_queue_t *q,
                                               uint32_t words);

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
static inline void submit_lock(accel_drv_queue_t *q) {
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

static inline void submit_unlock(accel_drv_queue_t *q) {
  // Release: publishes the tail updates to the next holder.
  atomic_flag_clear_explicit(&q->submit_lock, memory_order_release);
}

// A host function returned |st| (not OK): sets the thread's message to say
// so, with the function's own message, and returns |st|.
accel_status_t accel_host_queue_fn_failed(accel_status_t st);

// Runs a host call's function. Returns non-OK with the thread message set
// on failure.
static inline accel_status_t run_host_fn(accel_drv_queue_t *q,
                                         accel_host_fn_t fn, void *user_data) {
  q->error_buffer[0] = '\0';  // attribute a message to this call only
  accel_status_t st = fn(user_data);
  if (__builtin_expect(st != ACCEL_OK, 0)) {
    return accel_host_queue_fn_failed(st);
  }
  return ACCEL_OK;
}

// Executes one command that is not an EXECUTE. Returns non-OK with the
// thread message set on failure. Worker only.
accel_status_t accel_host_queue_run_command(accel_drv_queue_t *q,
                                            accel_cmd_t *cmd);

// Runs the EXECUTE |cmd|: replays its range of the recording in order.
// On a failure sets q->replay_resume past the failed command and returns
// the error, its message naming the recording and the command's index.
// Worker only.
accel_status_t accel_host_queue_replay(accel_drv_queue_t *q,
                                       const accel_cmd_t *cmd);

// The EXECUTE |cmd| is skipped from its command |from| on (the queue is
// poisoned): fails the semaphores its SIGNALs would have raised with the
// poison. Worker only.
void accel_host_queue_replay_skip(accel_drv_queue_t *q, const accel_cmd_t *cmd,
                                  uint32_t from);

// True when the recording of an EXECUTE may block the worker (it waits).
bool accel_host_recording_waits(const accel_drv_recording_t *recording);

#endif  // ACCEL_DRV_HOST_HOST_QUEUE_IMPL_H
