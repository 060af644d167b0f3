// Host queues: an unbounded ring of commands (a list of fixed-size chunks)
// written by any thread under a short lock and consumed by one worker thread
// that spins for a bounded time, then parks on a futex.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/resource.h>

#include "drv/host/host_internal.h"
#include "trace/trace_hooks.h"

// Small chunks (1 KiB) and a few spares: a queue that keeps up cycles through
// about 9 KiB of slots, which stay in both cores' L1 caches, where 1024-slot
// chunks cycled through 320 KiB and each slot line came from L2 or the other
// core's cache (measured: empty-command round trip 186-190 ns -> 138-154 ns,
// a burst of submits 47-50 -> 25-45 ns per command). A backlog still grows
// without bound, one malloc per 16 commands.
#define CHUNK_COMMANDS 16u
#define SPARE_CHUNKS 8

typedef struct chunk {
  accel_cmd_t commands[CHUNK_COMMANDS];
  struct chunk *_Atomic next;
} chunk_t;

struct accel_drv_queue {
  accel_drv_device_t *device;
  accel_drv_semaphore_t *completion;  // borrowed from the stream
  char name[64];
  uint32_t priority;
  bool abort_on_destroy;
  pthread_t thread;

  // Producer side, guarded by |submit_lock| (a spinlock: held for a few
  // stores, so parking would cost more than it saves).
  _Alignas(64) atomic_flag submit_lock;
  chunk_t *tail_chunk;
  uint32_t tail_index;
  uint64_t next_seq;  // seq of the last command written
  _Atomic uint64_t *submitted_seq;  // params.submitted_seq (may be NULL)

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
  // backlog that comes and goes does not allocate and zero memory each time.
  chunk_t *_Atomic spare[SPARE_CHUNKS];

  // Consumer side (worker thread only).
  _Alignas(64) chunk_t *head_chunk;
  uint32_t head_index;
  uint64_t consumed;           // seq of the last command processed
  uint64_t completion_posted;  // last seq signalled on |completion|
  char *error_buffer;  // the worker thread's accel_last_error() storage
  bool poisoned;
  accel_status_t poison_status;
  char poison_message[ACCEL_ERROR_MESSAGE_MAX];
};

// A slot is published when its |seq| (written last, with release) equals the
// seq the worker expects next. Recycled chunks hold smaller, older seqs and
// fresh chunks are zeroed, so a stale slot never matches.
static inline uint64_t slot_seq_acquire(const accel_cmd_t *slot) {
  return __atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE);
}

// Writes |src| into |slot| and publishes it with the release store of |seq|.
// The command is read in 8-byte words (volatile, so that the compiler does
// not merge them into wider loads): the caller has just built it on its
// stack with stores of 8 bytes or less, and a wider load spanning two of
// them cannot be forwarded from the store buffer; it then waits for every
// older store to reach the cache, the previous command's slot included,
// whose line the worker is polling. Measured with a burst of empty host
// calls: about 15% fewer ns per command.
static inline void slot_write(accel_cmd_t *slot, const accel_cmd_t *src,
                              uint64_t seq) {
  _Static_assert(offsetof(accel_cmd_t, seq) == 8, "header, seq, then body");
  _Static_assert(sizeof(accel_cmd_t) % 8 == 0, "whole words");
  const volatile uint64_t *from = (const volatile uint64_t *)(const void *)src;
  uint64_t *to = (uint64_t *)(void *)slot;
  for (size_t i = 2; i < sizeof(accel_cmd_t) / 8; ++i) {
    to[i] = from[i];
  }
  to[0] = from[0];
  // Release: publishes the command's fields to the worker.
  __atomic_store_n(&slot->seq, seq, __ATOMIC_RELEASE);
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

static chunk_t *chunk_get(accel_drv_queue_t *q) {
  chunk_t *c = NULL;
  for (int i = 0; i < SPARE_CHUNKS && c == NULL; ++i) {
    // Acquire: pairs with chunk_put's release, so the consumer's last reads
    // of the chunk happen before our writes.
    c = atomic_exchange_explicit(&q->spare[i], NULL, memory_order_acquire);
  }
  if (c == NULL) {
    c = calloc(1, sizeof(*c));  // zeroed seqs: never mistaken as published
    if (c == NULL) {
      return NULL;
    }
  }
  atomic_store_explicit(&c->next, NULL, memory_order_relaxed);
  return c;
}

static void chunk_put(accel_drv_queue_t *q, chunk_t *c) {
  for (int i = 0; i < SPARE_CHUNKS; ++i) {
    chunk_t *expected = NULL;
    // Release: the next producer to take it must not see our stale reads.
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

// Executes one command. Returns non-OK with the thread message set on failure.
static accel_status_t execute(accel_drv_queue_t *q, accel_cmd_t *cmd) {
  switch (cmd->kind) {
    case ACCEL_CMD_HOST_CALL: {
      q->error_buffer[0] = '\0';  // attribute a message to this call only
      accel_status_t st = cmd->host_call.fn(cmd->host_call.user_data);
      if (st != ACCEL_OK) {
        char msg[ACCEL_ERROR_MESSAGE_MAX];
        snprintf(msg, sizeof(msg), "%s", accel_last_error());
        return accel_error(st, "host function returned %s%s%s",
                           accel_status_name(st), msg[0] ? ": " : "", msg);
      }
      return ACCEL_OK;
    }
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

// Records the first failure; the queue then aborts everything after it.
static void poison(accel_drv_queue_t *q, accel_cmd_t *cmd, accel_status_t st,
                   const char *why) {
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

static void process(accel_drv_queue_t *q, accel_cmd_t *cmd) {
  accel_trace_cmd_start(q, cmd);
  if (!q->poisoned &&
      atomic_load_explicit(&q->cancel, memory_order_acquire)) {
    char why[96];
    snprintf(why, sizeof(why), "aborted: stream destroyed with pending work");
    poison(q, cmd, ACCEL_ERROR_ABORTED, why);
  }
  if (q->poisoned) {
    accel_trace_cmd_end(q, cmd, q->poison_status);
    skip(q, cmd);
  } else {
    accel_status_t st = execute(q, cmd);
    accel_trace_cmd_end(q, cmd, st);
    if (st != ACCEL_OK) {
      char why[ACCEL_ERROR_MESSAGE_MAX];
      snprintf(why, sizeof(why), "%s", accel_last_error());
      poison(q, cmd, st, why);
      skip(q, cmd);
    }
  }
  release_refs(cmd);
}

// Publishes progress: the completion semaphore reaches the last command that
// ran (batched, so that a burst of commands costs one signal).
static void post_completion(accel_drv_queue_t *q) {
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

// Returns the next published command, or NULL if none is ready.
static accel_cmd_t *next_ready(accel_drv_queue_t *q) {
  if (q->head_index == CHUNK_COMMANDS) {
    // Acquire: the link was stored (release) before the first command of the
    // new chunk was published.
    chunk_t *next =
        atomic_load_explicit(&q->head_chunk->next, memory_order_acquire);
    if (next == NULL) {
      return NULL;
    }
    chunk_put(q, q->head_chunk);
    q->head_chunk = next;
    q->head_index = 0;
  }
  accel_cmd_t *slot = &q->head_chunk->commands[q->head_index];
  // Acquire: pairs with the producer's publishing store of |seq|, so that
  // the command's other fields are visible.
  return slot_seq_acquire(slot) == q->consumed + 1 ? slot : NULL;
}

#define COMPLETION_BATCH 64u

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
  // poll of the next slot, whose line is usually not in this core's cache.
  bool was_idle = true;
  for (;;) {
    accel_cmd_t *cmd = next_ready(q);
    if (cmd != NULL) {
      if (cmd->kind == ACCEL_CMD_WAIT) {
        post_completion(q);  // waits may block: report what ran before
      }
      q->head_index++;
      process(q, cmd);
      q->consumed++;
      if (was_idle ||
          q->consumed - q->completion_posted >= COMPLETION_BATCH) {
        post_completion(q);
        was_idle = false;
      }
      continue;
    }
    was_idle = true;
    post_completion(q);
    // Acquire: destroy is called after every submit returned; seeing the
    // flag makes their commands visible to next_ready below.
    if (atomic_load_explicit(&q->stopping, memory_order_acquire)) {
      if (next_ready(q) == NULL) {
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
      if (next_ready(q) != NULL ||
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
    // Parking protocol: |parked| is set and read only under the submit lock.
    // A producer whose critical section came first has published its command
    // and the re-check below sees it; one that comes after sees |parked| and
    // sets the futex word, which we cleared before taking the lock.
    atomic_store_explicit(&q->waiter.word, 0, memory_order_relaxed);
    submit_lock(q);
    atomic_store_explicit(&q->parked, 1, memory_order_relaxed);
    submit_unlock(q);
    if (next_ready(q) == NULL &&
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

accel_status_t accel_host_queue_submit(accel_drv_queue_t *q,
                                       const accel_cmd_t *commands,
                                       uint32_t count, uint64_t *out_last_seq) {
  // Acquire: pairs with poison()'s release, so the stored error is complete.
  if (atomic_load_explicit(&q->failed, memory_order_acquire)) {
    return accel_error(q->poison_status, "%s", q->poison_message);
  }
  submit_lock(q);
  uint32_t accepted = 0;
  for (; accepted < count; ++accepted) {
    if (q->tail_index == CHUNK_COMMANDS) {
      chunk_t *c = chunk_get(q);
      if (c == NULL) {
        break;
      }
      // Release: the worker follows |next| with acquire before reading the
      // new chunk's slots.
      atomic_store_explicit(&q->tail_chunk->next, c, memory_order_release);
      q->tail_chunk = c;
      q->tail_index = 0;
    }
    accel_cmd_t *slot = &q->tail_chunk->commands[q->tail_index++];
    slot_write(slot, &commands[accepted], ++q->next_seq);
  }
  *out_last_seq = q->next_seq;
  if (q->submitted_seq != NULL) {
    // Relaxed: a wait target only; the command itself is ordered by |seq|.
    atomic_store_explicit(q->submitted_seq, q->next_seq, memory_order_relaxed);
  }
  // Read under the lock: see the parking protocol in worker_main.
  bool wake = accepted > 0 &&
              atomic_load_explicit(&q->parked, memory_order_relaxed) != 0;
  submit_unlock(q);
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
