// Host queues' worker thread: runs the records in order (the quiet fast
// path without the trace hooks, bursts of short host calls), posts
// completions in batches, poisons the queue on the first failure, spins
// then parks; and the queue's create and destroy, which start and stop it.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "drv/host/host_queue_impl.h"
#include "trace/trace_hooks.h"

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

accel_status_t accel_host_queue_fn_failed(accel_status_t st) {
  char msg[ACCEL_ERROR_MESSAGE_MAX];
  snprintf(msg, sizeof(msg), "%s", accel_last_error());
  return accel_error(st, "host function returned %s%s%s",
                     accel_status_name(st), msg[0] ? ": " : "", msg);
}

accel_status_t accel_host_queue_run_command(accel_drv_queue_t *q,
                                            accel_cmd_t *cmd) {
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
    case ACCEL_CMD_EXECUTE:
      return accel_host_queue_replay(q, cmd);
    default:
      return accel_error(ACCEL_ERROR_INTERNAL, "unknown command kind %u",
                         cmd->kind);
  }
}

// Counts the host calls that ran without the trace hooks; before their
// completion is posted or the queue fails.
static void count_quiet_calls(accel_drv_queue_t *q) {
  if (q->quiet_host_calls + q->quiet_launches + q->quiet_executes != 0) {
    accel_trace_count_quiet(q, q->quiet_host_calls, q->quiet_launches,
                            q->quiet_executes);
    q->quiet_host_calls = 0;
    q->quiet_launches = 0;
    q->quiet_executes = 0;
  }
  if (q->replayed_host_calls + q->replayed_launches != 0) {
    accel_trace_count_replayed(q, q->replayed_host_calls,
                               q->replayed_launches);
    q->replayed_host_calls = 0;
    q->replayed_launches = 0;
  }
}

// Tells producers that the worker poisoned the queue (its poison_status and
// poison_message are set).
static void publish_failed(accel_drv_queue_t *q) {
  // Release: a producer that sees the flag finds the stored message. Set
  // under the submit lock (a biased owner: after the heavy fence), as
  // worker_park sets |parked|: a producer whose critical section came first
  // has published its record, which the drain sees; one that comes after
  // sees the flag, and is refused or (submit_finish) waits for its record
  // to be skipped.
  submit_lock(q);
  atomic_store_explicit(&q->failed, FAILED_POISONED, memory_order_release);
  bool biased = atomic_load_explicit(&q->bias, memory_order_relaxed) ==
                BIAS_OWNED;
  submit_unlock(q);
  if (biased) {
    accel_host_heavy_fence();
  }
}

// Records the first failure; the queue then aborts everything after it.
static void poison_queue(accel_drv_queue_t *q, accel_cmd_t *cmd, accel_status_t st,
                   const char *why) {
  count_quiet_calls(q);
  q->poisoned = true;
  q->poison_status = st;
  snprintf(q->poison_message, sizeof(q->poison_message),
           "stream \"%s\" command #%llu (%s) failed: %s", q->name,
           (unsigned long long)cmd->seq, accel_cmd_kind_name(cmd->kind), why);
  accel_trace_stream_fail(q, cmd->seq, st, q->poison_message);
  publish_failed(q);
  // The completion fails once every published command was skipped (its
  // signal failed): see fail_completion_when_drained.
  q->completion_fail_pending = true;
}

// Fails the completion of a poisoned queue once the worker found no
// published record left: each skipped signal failed before any synchronize
// can return the failure (docs/execution-model.md, "When a command fails").
static void fail_completion_when_drained(accel_drv_queue_t *q) {
  if (q->completion_fail_pending) {
    q->completion_fail_pending = false;
    accel_host_semaphore_fail(q->completion, q->poison_status,
                              q->poison_message);
  }
}

// Handles a command that will not run: its signal fails with the poison.
static void skip_command(accel_drv_queue_t *q, accel_cmd_t *cmd) {
  if (cmd->kind == ACCEL_CMD_SIGNAL) {
    accel_host_semaphore_fail(cmd->signal.semaphore, q->poison_status,
                              q->poison_message);
  } else if (cmd->kind == ACCEL_CMD_EXECUTE) {
    accel_host_queue_replay_skip(q, cmd, q->replay_resume);
  }
}

// |cmd| failed with |st| (the thread's message says why): poisons the queue.
static void fail_command(accel_drv_queue_t *q, accel_cmd_t *cmd, accel_status_t st) {
  char why[ACCEL_ERROR_MESSAGE_MAX];
  // A command interrupted by an abort from outside (a wait, or an injected
  // hang, woken by accel_host_queue_abort) fails with the abort's error:
  // the poison replaces the abort's refusal of submits, which must keep
  // reporting what the abort said (device lost, watchdog, reset).
  // Acquire: pairs with queue_abort's release after its message.
  if (st == ACCEL_ERROR_ABORTED &&
      atomic_load_explicit(&q->abort_ready, memory_order_acquire)) {
    st = q->abort_status;
    snprintf(why, sizeof(why), "%s", q->abort_message);
  } else {
    snprintf(why, sizeof(why), "%s", accel_last_error());
  }
  poison_queue(q, cmd, st, why);
  skip_command(q, cmd);
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

// Blocks like a command that never completes, until the queue is aborted
// (an injected HANG).
static accel_status_t hang_until_aborted(accel_drv_queue_t *q) {
  while (!atomic_load_explicit(&q->cancel, memory_order_acquire)) {
    atomic_store_explicit(&q->waiter.word, 0, memory_order_relaxed);
    if (atomic_load_explicit(&q->cancel, memory_order_acquire)) {
      break;
    }
    // Bounded: the abort's wake-up may come between the check and the wait.
    accel_host_futex_wait(&q->waiter.word, 0,
                          accel_host_now_ns() + 10000000ull);
  }
  return accel_error(ACCEL_ERROR_ABORTED,
                     "hung (injected fault) until the stream was failed");
}

// Runs |cmd| while faults are armed on the device: the one it hits, if any,
// applies (docs/health.md, "Fault injection").
static accel_status_t run_command_faulty(accel_drv_queue_t *q,
                                         accel_cmd_t *cmd) {
  int kind = accel_host_fault_take_slow(q->device, q->name);
  if (kind < 0) {
    return accel_host_queue_run_command(q, cmd);
  }
  char what[192];
  snprintf(what, sizeof(what), "stream \"%s\" command #%llu (%s)", q->name,
           (unsigned long long)cmd->seq, accel_cmd_kind_name(cmd->kind));
  switch (kind) {
    case ACCEL_FAULT_CORRECTED:
      accel_host_fault_report(q->device, ACCEL_RAS_CORRECTED, ACCEL_OK, what);
      return accel_host_queue_run_command(q, cmd);
    case ACCEL_FAULT_UNCORRECTED:
      accel_host_fault_report(q->device, ACCEL_RAS_UNCORRECTED, ACCEL_ERROR_IO,
                              what);
      return accel_error(ACCEL_ERROR_IO,
                         "uncorrected device error (injected fault)");
    case ACCEL_FAULT_FATAL:
      accel_host_fault_report(q->device, ACCEL_RAS_FATAL,
                              ACCEL_ERROR_DEVICE_LOST, what);
      return accel_error(ACCEL_ERROR_DEVICE_LOST,
                         "fatal device error (injected fault)");
    default:
      return hang_until_aborted(q);
  }
}

// The queue was aborted while idle: it fails now, so that submits are
// refused with the abort's error (its completion failed already).
static void poison_aborted_idle(accel_drv_queue_t *q) {
  count_quiet_calls(q);
  q->poisoned = true;
  q->poison_status = q->abort_status;
  snprintf(q->poison_message, sizeof(q->poison_message), "%s",
           q->abort_message);
  publish_failed(q);
}

void accel_host_queue_abort(accel_drv_queue_t *q, accel_status_t status,
                            const char *message) {
  uint32_t unclaimed = 0;
  if (atomic_compare_exchange_strong_explicit(&q->abort_claim, &unclaimed, 1,
                                              memory_order_relaxed,
                                              memory_order_relaxed)) {
    q->abort_status = status;
    snprintf(q->abort_message, sizeof(q->abort_message), "%s", message);
    // Release: the worker that sees the flag sees the status and message.
    atomic_store_explicit(&q->abort_ready, 1, memory_order_release);
    // Producers refuse new work from now on, with this message (release:
    // they read it after seeing the flag); a queue the worker poisoned
    // already keeps its own.
    uint32_t healthy = 0;
    atomic_compare_exchange_strong_explicit(&q->failed, &healthy,
                                            FAILED_ABORTED,
                                            memory_order_release,
                                            memory_order_relaxed);
  }
  // Waits on the stream return now, with this error (the first failure of
  // the completion wins: a queue that failed before keeps its own).
  accel_host_semaphore_fail(q->completion, status, message);
  // Release: the worker reads |cancel| before deciding to run a command.
  atomic_store_explicit(&q->cancel, 1, memory_order_release);
  accel_host_waiter_wake(&q->waiter);
}

static void process_command(accel_drv_queue_t *q, accel_cmd_t *cmd) {
  const accel_trace_cmd_t tc = trace_cmd(cmd);
  accel_trace_cmd_start(q, &tc);
  if (!q->poisoned &&
      atomic_load_explicit(&q->cancel, memory_order_acquire)) {
    // Acquire: pairs with queue_abort's release after its message.
    if (atomic_load_explicit(&q->abort_ready, memory_order_acquire)) {
      poison_queue(q, cmd, q->abort_status, q->abort_message);
    } else {
      poison_queue(q, cmd, ACCEL_ERROR_ABORTED,
                   "aborted: stream destroyed with pending work");
    }
  }
  if (cmd->kind == ACCEL_CMD_EXECUTE) {
    q->replay_resume = cmd->execute.first;  // all of it, unless it runs
  }
  if (q->poisoned) {
    accel_trace_cmd_end(q, &tc, q->poison_status);
    skip_command(q, cmd);
  } else {
    accel_status_t st =
        __builtin_expect(atomic_load_explicit(&q->device->faults_armed,
                                              memory_order_relaxed) != 0,
                         0)
            ? run_command_faulty(q, cmd)
            : accel_host_queue_run_command(q, cmd);
    accel_trace_cmd_end(q, &tc, st);
    if (st != ACCEL_OK) {
      fail_command(q, cmd, st);
    }
  }
  release_refs(cmd);
}

// The quiet record |rec| failed with |st| (the thread's message says why):
// the full path's end of a command, which poisons the queue.
static void quiet_failed(accel_drv_queue_t *q, const record_word_t *rec,
                         uint64_t header, accel_status_t st) {
  accel_cmd_t cmd;
  accel_host_queue_record_read(q, rec, header, q->consumed + 1, &cmd);
  const accel_trace_cmd_t tc = trace_cmd(&cmd);
  accel_trace_cmd_end(q, &tc, st);
  fail_command(q, &cmd, st);
  release_refs(&cmd);
}

// True for the records process_quiet runs: host calls without references
// (short or full), launches, and executes of recordings that do not wait
// (a wait needs the completions posted before it).
static inline bool quiet_shape(const record_word_t *rec, uint64_t header) {
  uint64_t shape = header & 0xffffffu;  // all but a short call's place
  uint32_t kind = header_kind(header);
  return shape == header_make(RECORD_HOST_CALL_SHORT, 2, 0, 0) ||
         header == header_make(ACCEL_CMD_HOST_CALL, 3, 0, 0) ||
         kind == ACCEL_CMD_LAUNCH ||
         ((kind == ACCEL_CMD_EXECUTE || kind == RECORD_EXECUTE_WHOLE) &&
          !accel_host_recording_waits(rec[1].p));
}

// Drops the references a record holds after its body.
static inline void release_record_refs(const record_word_t *rec,
                                       uint64_t header) {
  uint32_t kind = header_kind(header);
  const record_word_t *ref =
      rec + 1 + (kind == RECORD_EXECUTE_WHOLE ? 1 : body_words[kind]);
  for (uint32_t refs = header_refs(header); refs != 0; refs >>= 1) {
    if (refs & 1u) {
      accel_object_release((ref++)->ref);
    }
  }
}

// Runs the record |rec| of quiet_shape when the trace hooks are quiet and
// the queue healthy, without building its command (but an execute's) or
// calling the hooks, and counts it for count_quiet_calls.
static inline void process_quiet(accel_drv_queue_t *q,
                                 const record_word_t *rec, uint64_t header) {
  accel_status_t st;
  uint32_t kind = header_kind(header);
  if (kind == ACCEL_CMD_LAUNCH) {
    st = rec[1].exec(rec[2].p, q->device);
    if (__builtin_expect(st == ACCEL_OK, 1)) {
      q->quiet_launches++;
      release_record_refs(rec, header);
      return;
    }
  } else if (kind == ACCEL_CMD_EXECUTE || kind == RECORD_EXECUTE_WHOLE) {
    accel_cmd_t cmd;
    accel_host_queue_record_read(q, rec, header, q->consumed + 1, &cmd);
    q->replay_resume = cmd.execute.first;
    st = accel_host_queue_replay(q, &cmd);
    if (__builtin_expect(st == ACCEL_OK, 1)) {
      q->quiet_executes++;
      release_record_refs(rec, header);
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
        atomic_load_explicit(&q->cancel, memory_order_relaxed) ||
        atomic_load_explicit(&q->device->faults_armed,
                             memory_order_relaxed) != 0) {
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
static inline void post_completion(accel_drv_queue_t *q) {
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
    accel_host_queue_chunk_put(q, q->head_chunk);
    q->head_chunk = next;
    q->head_pos = 0;
  }
}

static bool has_ready(accel_drv_queue_t *q) {
  uint64_t h;
  return next_ready(q, &h) != NULL;
}


// Runs the worker on its device's cores at the stream's priority (both best
// effort: a failure leaves the thread where and as the scheduler puts it).
static void worker_bind_cpus(accel_drv_queue_t *q) {
  if (q->device->has_affinity) {
    pthread_setaffinity_np(pthread_self(), sizeof(q->device->affinity),
                           &q->device->affinity);
  }
  set_priority(q->priority);
}

// Runs the published record |rec| (header |header|) and posts completion
// when due. |*was_idle| is true while the worker found the queue empty
// before this record: such a command is most likely waited for on its own
// (a submit then a synchronize), so its completion is posted at once
// instead of after a poll of the next record's header, whose line is
// usually not in this core's cache.
static inline void worker_run_record(accel_drv_queue_t *q,
                                     record_word_t *rec, uint64_t header,
                                     bool *was_idle) {
  if (*was_idle) {
    q->quiet = accel_trace_cmd_hooks_quiet();
  }
  // The record stays in place (its chunk is recycled only once the worker
  // moved past it); the next one starts after it.
  q->head_pos += header_words(header);
  if (quiet_shape(rec, header) && q->quiet && !q->poisoned &&
      !atomic_load_explicit(&q->cancel, memory_order_relaxed) &&
      atomic_load_explicit(&q->device->faults_armed, memory_order_relaxed) ==
          0) {
    process_quiet(q, rec, header);
    q->consumed++;
    if (!*was_idle && !q->poisoned) {
      // In a burst: the calls that follow, without the loop's steps.
      run_quiet_burst(q);
    }
  } else {
    accel_cmd_t cmd;
    accel_host_queue_record_read(q, rec, header, q->consumed + 1, &cmd);
    if (cmd.kind == ACCEL_CMD_WAIT ||
        (cmd.kind == ACCEL_CMD_EXECUTE &&
         accel_host_recording_waits(cmd.execute.recording))) {
      post_completion(q);  // waits may block: report what ran before
    }
    process_command(q, &cmd);
    q->consumed++;
  }
  if (__builtin_expect(q->poisoned, 0)) {
    // Release: after the command's signal failed (submit_finish).
    atomic_store_explicit(&q->skipped_through, q->consumed,
                          memory_order_release);
  }
  if (*was_idle || q->consumed - q->completion_posted >= COMPLETION_BATCH) {
    post_completion(q);
    q->quiet = accel_trace_cmd_hooks_quiet();
    *was_idle = false;
  }
}

// Spins for new work (or a stop) for up to |spin_ns| before the caller
// parks. The clock is first read after 64 polls: the next command of a
// tight submit/synchronize loop arrives within a few hundred ns, and a
// clock read there would delay seeing it. A spin shorter than those 64
// polls (ACCEL_SPIN_NS below 1 us) reads the clock at every poll instead,
// so that it is as short as asked. Returns whether work came.
static bool worker_spin_for_work(accel_drv_queue_t *q, uint64_t spin_ns) {
  uint64_t spin_until = 0;
  uint32_t iter = 0;
  const uint32_t clock_mask = spin_ns < 1000 ? 0 : 63;
  for (;;) {
    if (has_ready(q) ||
        atomic_load_explicit(&q->stopping, memory_order_relaxed)) {
      return true;
    }
    accel_host_cpu_relax();
    if ((++iter & clock_mask) == 0) {
      uint64_t now = accel_host_now_ns();
      if (spin_until == 0) {
        spin_until = now + spin_ns;
      } else if (now >= spin_until) {
        return false;
      }
    }
  }
}

// Parks the worker until a producer wakes it. Parking protocol: |parked| is
// set under the submit lock, and read under it by producers that take it.
// A producer whose critical section came first has published its command
// and the re-check below sees it; one that comes after sees |parked| and
// sets the futex word, which we cleared before taking the lock. A biased
// owner does not take the lock: it publishes, then reads |parked| after a
// light fence, and the heavy fence here pairs with it (either the re-check
// sees its command or it sees |parked|).
static void worker_park(accel_drv_queue_t *q) {
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

static void *worker_main(void *arg) {
  accel_drv_queue_t *q = arg;
  q->error_buffer = accel_error_buffer();
  worker_bind_cpus(q);
  uint64_t spin_ns = q->device->spin_ns;
  bool was_idle = true;  // see worker_run_record
  for (;;) {
    uint64_t header;
    record_word_t *rec = next_ready(q, &header);
    if (rec != NULL) {
      worker_run_record(q, rec, header, &was_idle);
      continue;
    }
    was_idle = true;
    // Acquire: pairs with queue_abort's release after its message.
    if (__builtin_expect(!q->poisoned &&
                             atomic_load_explicit(&q->abort_ready,
                                                  memory_order_acquire),
                         0)) {
      poison_aborted_idle(q);
    }
    fail_completion_when_drained(q);
    post_completion(q);
    // Acquire: destroy is called after every submit returned; seeing the
    // flag makes their commands visible to next_ready below.
    if (atomic_load_explicit(&q->stopping, memory_order_acquire)) {
      if (!has_ready(q)) {
        break;
      }
      continue;
    }
    if (!worker_spin_for_work(q, spin_ns)) {
      worker_park(q);
    }
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
  q->tail_chunk = accel_host_queue_chunk_get(q);
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
  // Under the lock, like a submit: see the parking protocol at worker_park.
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
