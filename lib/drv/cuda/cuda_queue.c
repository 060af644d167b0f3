// Queues on the CUDA device: one CUstream each, commands enqueued at submit
// in queue order (the CUDA stream order is the order of the calls, which the
// queue's lock serializes):
//
//   HOST_CALL  cuLaunchHostFunc of a trampoline that calls fn(user_data)
//   FILL       cuMemsetD8/D16/D32Async, 8-byte patterns as two D2D32 fills
//   COPY       cuMemcpyAsync (unified addressing: host or device on each side)
//   SIGNAL     cuStreamWriteValue64 of the semaphore's word (a host function
//              first stores the timestamp of an event record)
//   WAIT       cuStreamWaitValue64 (GEQ), then a host function that fails
//              the queue if the semaphore failed instead of being reached
//   LAUNCH     a device kernel (cuda_module.c) through cuLaunchKernel; host
//              code objects: ACCEL_ERROR_UNSUPPORTED
//   EXECUTE    a range of a recording: node updates and cuGraphLaunch of
//              its CUgraphExec (cuda_graph.c)
//
// After each submit the stream writes the last seq into the completion
// semaphore's word. A failing host function or wait fails the queue: the
// completion semaphore and every SIGNAL not yet passed fail with "stream
// "NAME" command #SEQ (KIND) failed: WHY", later host functions are skipped,
// and submits return that error. Device work already enqueued behind the
// failure still runs (CUDA cannot take it back); what it signals reports the
// failure.
//
// Host functions run on a driver thread and must not call CUDA (the test
// double enforces it), so references are dropped by the submitting thread
// (at the next submit and at destroy) once the completion word passed them.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/lock.h"
#include "drv/cuda/cuda_internal.h"
#include "trace/trace_hooks.h"

static const char *kind_name(uint32_t kind) {
  return accel_cmd_kind_name(kind);
}

// Fails every pending SIGNAL after |seq| with |status| and |message|.
static void fail_pending_signals(accel_drv_queue_t *q, uint64_t seq,
                                 accel_status_t status, const char *message) {
  pthread_mutex_lock(&q->pending_lock);
  for (uint32_t i = 0; i < q->pending_count; ++i) {
    cuda_pending_t *p =
        &q->pending[(q->pending_head + i) & (q->pending_cap - 1)];
    if (p->signal != NULL && p->seq > seq) {
      accel_cuda_semaphore_fail(p->signal, status, message);
    }
  }
  pthread_mutex_unlock(&q->pending_lock);
}

// Fails the queue at command |seq| (first failure wins).
void accel_cuda_queue_fail(accel_drv_queue_t *q, uint64_t seq, uint32_t kind,
                       accel_status_t status, const char *why) {
  char message[ACCEL_ERROR_MESSAGE_MAX];
  snprintf(message, sizeof(message), "stream \"%s\" command #%llu (%s) "
           "failed: %s",
           q->name, (unsigned long long)seq, kind_name(kind), why);
  if (!accel_error_state_set(&q->error, status, "%s", message)) {
    return;  // the first failure wins
  }
  // Seq_cst: a submitter that adds a signal to the pending list after the
  // scan below sees the flag when it checks it after adding (submit).
  atomic_store_explicit(&q->failed, 1, memory_order_seq_cst);
  accel_trace_stream_fail(q, seq, status, message);
  fail_pending_signals(q, seq, status, message);
  accel_cuda_semaphore_fail(q->completion, status, message);
}

void accel_cuda_queue_lose_locked(accel_drv_queue_t *q, const char *message) {
  ACCEL_ASSERT_HELD(&q->device->objects_lock);
  if (!accel_error_state_set(&q->error, ACCEL_ERROR_DEVICE_LOST, "%s",
                             message)) {
    return;
  }
  // Seq_cst: as in queue_fail.
  atomic_store_explicit(&q->failed, 1, memory_order_seq_cst);
  fail_pending_signals(q, 0, ACCEL_ERROR_DEVICE_LOST, message);
  accel_cuda_semaphore_fail(q->completion, ACCEL_ERROR_DEVICE_LOST, message);
}

bool accel_cuda_queue_failed(accel_drv_queue_t *q) {
  // Acquire: pairs with queue_fail's exchange.
  return atomic_load_explicit(&q->failed, memory_order_acquire) != 0;
}

// Pending ring.

accel_status_t accel_cuda_queue_pending_push(accel_drv_queue_t *q,
                                             cuda_pending_t p) {
  pthread_mutex_lock(&q->pending_lock);
  if (q->pending_count == q->pending_cap) {
    uint32_t cap = q->pending_cap ? q->pending_cap * 2 : 64;
    cuda_pending_t *grown = malloc(cap * sizeof(*grown));
    if (grown == NULL) {
      pthread_mutex_unlock(&q->pending_lock);
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "stream \"%s\": cannot grow the pending list to %u",
                         q->name, cap);
    }
    for (uint32_t i = 0; i < q->pending_count; ++i) {
      grown[i] = q->pending[(q->pending_head + i) & (q->pending_cap - 1)];
    }
    free(q->pending);
    q->pending = grown;
    q->pending_cap = cap;
    q->pending_head = 0;
  }
  q->pending[(q->pending_head + q->pending_count) & (q->pending_cap - 1)] = p;
  q->pending_count++;
  pthread_mutex_unlock(&q->pending_lock);
  return ACCEL_OK;
}

// The seq up to which the stream has passed: the completion word while the
// queue is healthy; once failed (the word was raised by the failure), all
// of it only when the stream is idle, and everything when the device is lost.
static uint64_t retired_seq(accel_drv_queue_t *q) {
  if (!accel_cuda_queue_failed(q)) {
    return atomic_load_explicit(q->completion->word, memory_order_acquire);
  }
  if (accel_error_state_code(&q->device->lost) != ACCEL_OK) {
    return UINT64_MAX;
  }
  CUresult r = q->device->cu->cuStreamQuery(q->stream);
  return r == CUDA_SUCCESS || accel_cuda_result_is_sticky(r) ? UINT64_MAX : 0;
}

// The reaper: drops the references of completed commands soon after they
// complete, on a thread of the device's own (host functions must not, since
// a release may call CUDA). While references are pending it polls the
// queues' completion words, sleeping from ACCEL_CUDA_REAP_NAP_MIN_NS up to
// ACCEL_CUDA_REAP_NAP_MAX_NS; otherwise it sleeps until a submit wakes it.
#define ACCEL_CUDA_REAP_NAP_MIN_NS 20000ull
#define ACCEL_CUDA_REAP_NAP_MAX_NS 1000000ull

typedef struct ref_batch {
  accel_object_t **refs;
  size_t count, cap;
} ref_batch_t;

static void batch_add(ref_batch_t *b, accel_object_t *ref) {
  if (ref == NULL) {
    return;
  }
  if (b->count == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 64;
    accel_object_t **grown = realloc(b->refs, cap * sizeof(*grown));
    if (grown == NULL) {
      // Out of host memory: release it here (outside no lock the release
      // could need, as the caller holds only the pending lock).
      accel_object_release(ref);
      return;
    }
    b->refs = grown;
    b->cap = cap;
  }
  b->refs[b->count++] = ref;
}

// Moves the references of |q|'s commands up to |seq| into |b|; returns true
// if some remain pending.
static bool pending_take(accel_drv_queue_t *q, uint64_t seq, ref_batch_t *b) {
  pthread_mutex_lock(&q->pending_lock);
  // Opens the gates of the abortable queue's waits whose semaphores were
  // reached (or failed: the check after the wait reports it), in order.
  for (uint32_t i = 0; q->gate_word != NULL && i < q->pending_count; ++i) {
    cuda_pending_t *p =
        &q->pending[(q->pending_head + i) & (q->pending_cap - 1)];
    if (p->wait == NULL ||
        atomic_load_explicit(q->gate_word, memory_order_relaxed) >= p->gate) {
      continue;
    }
    uint64_t value = 0;
    accel_status_t st = accel_cuda_semaphore_query(p->wait, &value);
    if (st == ACCEL_OK && value < p->value) {
      break;
    }
    // Release: the stream that passes the gate sees the semaphore's work.
    atomic_store_explicit(q->gate_word, p->gate, memory_order_release);
  }
  while (q->pending_count != 0 && q->pending[q->pending_head].seq <= seq) {
    cuda_pending_t *p = &q->pending[q->pending_head];
    batch_add(b, p->refs[0]);
    batch_add(b, p->refs[1]);
    q->pending_head = (q->pending_head + 1) & (q->pending_cap - 1);
    q->pending_count--;
  }
  bool left = q->pending_count != 0;
  pthread_mutex_unlock(&q->pending_lock);
  accel_error_clear();  // a failed semaphore's query is not the reaper's error
  return left;
}

static void batch_release(ref_batch_t *b) {
  for (size_t i = 0; i < b->count; ++i) {
    accel_object_release(b->refs[i]);
  }
  b->count = 0;
}

static uint64_t retired_seq(accel_drv_queue_t *q);

// One pass over the device's queues; true if references remain pending.
static bool reap_device(accel_drv_device_t *d, ref_batch_t *b) {
  bool left = false;
  pthread_mutex_lock(&d->reap_lock);
  pthread_mutex_lock(&d->objects_lock);
  for (accel_cuda_list_t *n = d->queues.next; n != &d->queues; n = n->next) {
    accel_drv_queue_t *q = (accel_drv_queue_t *)n;
    left = pending_take(q, retired_seq(q), b) || left;
  }
  pthread_mutex_unlock(&d->objects_lock);
  // Outside objects_lock: a release may destroy a buffer or a semaphore.
  batch_release(b);
  pthread_mutex_unlock(&d->reap_lock);
  return left;
}

static void *reaper_main(void *arg) {
  accel_drv_device_t *d = arg;
  ref_batch_t batch = {0};
  (void)d->cu->cuCtxSetCurrent(d->ctx);
  uint64_t nap = ACCEL_CUDA_REAP_NAP_MIN_NS;
  bool left = false;
  pthread_mutex_lock(&d->reaper_lock);
  while (!d->reaper_stop) {
    if (d->reaper_work == 0 && !left) {
      pthread_cond_wait(&d->reaper_cond, &d->reaper_lock);
      nap = ACCEL_CUDA_REAP_NAP_MIN_NS;
      continue;
    }
    d->reaper_work = 0;
    pthread_mutex_unlock(&d->reaper_lock);
    left = reap_device(d, &batch);
    pthread_mutex_lock(&d->reaper_lock);
    if (left && d->reaper_work == 0 && !d->reaper_stop) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      uint64_t at = (uint64_t)ts.tv_nsec + nap;
      ts.tv_sec += (time_t)(at / 1000000000ull);
      ts.tv_nsec = (long)(at % 1000000000ull);
      pthread_cond_timedwait(&d->reaper_cond, &d->reaper_lock, &ts);
      nap = nap * 2 < ACCEL_CUDA_REAP_NAP_MAX_NS ? nap * 2
                                                 : ACCEL_CUDA_REAP_NAP_MAX_NS;
    } else {
      nap = ACCEL_CUDA_REAP_NAP_MIN_NS;
    }
  }
  pthread_mutex_unlock(&d->reaper_lock);
  free(batch.refs);
  return NULL;
}

static void reaper_wake(accel_drv_device_t *d) {
  pthread_mutex_lock(&d->reaper_lock);
  d->reaper_work++;
  pthread_cond_signal(&d->reaper_cond);
  pthread_mutex_unlock(&d->reaper_lock);
}

accel_status_t accel_cuda_reaper_start(accel_drv_device_t *d) {
  pthread_mutex_init(&d->reap_lock, NULL);
  pthread_mutex_init(&d->reaper_lock, NULL);
  pthread_cond_init(&d->reaper_cond, NULL);
  d->reaper_stop = false;
  d->reaper_work = 0;
  int e = pthread_create(&d->reaper, NULL, reaper_main, d);
  if (e != 0) {
    pthread_cond_destroy(&d->reaper_cond);
    pthread_mutex_destroy(&d->reaper_lock);
    pthread_mutex_destroy(&d->reap_lock);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cuda:%u: cannot start the reaper thread: %s",
                       d->ordinal, strerror(e));
  }
  d->reaper_started = true;
  return ACCEL_OK;
}

void accel_cuda_reaper_stop(accel_drv_device_t *d) {
  if (!d->reaper_started) {
    return;
  }
  pthread_mutex_lock(&d->reaper_lock);
  d->reaper_stop = true;
  pthread_cond_signal(&d->reaper_cond);
  pthread_mutex_unlock(&d->reaper_lock);
  pthread_join(d->reaper, NULL);
  pthread_cond_destroy(&d->reaper_cond);
  pthread_mutex_destroy(&d->reaper_lock);
  pthread_mutex_destroy(&d->reap_lock);
  d->reaper_started = false;
}

// Host functions.

typedef struct host_call_rec {
  // In the queue's list of records whose host function has not run yet
  // (pending_lock): a stream that dies (a sticky error) never runs them, and
  // destroy frees what is left.
  accel_cuda_list_t link;  // first
  accel_drv_queue_t *queue;
  uint64_t seq;
  uint32_t kind;
  union {
    struct {
      accel_host_fn_t fn;
      void *user_data;
    } call;
    _Atomic uint64_t *timestamp_out;
    struct {
      accel_drv_semaphore_t *semaphore;
      uint64_t value;
    } sem;
  };
} host_call_rec_t;

// Unlinks and frees a record whose host function ran.
static void rec_done(host_call_rec_t *rec) {
  accel_drv_queue_t *q = rec->queue;
  pthread_mutex_lock(&q->pending_lock);
  accel_cuda_list_del(&rec->link);
  pthread_mutex_unlock(&q->pending_lock);
  free(rec);
}

static void CUDA_CB host_call_tramp(void *arg) {
  host_call_rec_t *rec = arg;
  accel_drv_queue_t *q = rec->queue;
  if (!accel_cuda_queue_failed(q)) {
    accel_error_clear();
    accel_status_t st = rec->call.fn(rec->call.user_data);
    if (st != ACCEL_OK) {
      char why[ACCEL_ERROR_MESSAGE_MAX];
      const char *msg = accel_last_error();
      snprintf(why, sizeof(why), "host function returned %s%s%s",
               accel_status_name(st), msg[0] != '\0' ? ": " : "", msg);
      accel_cuda_queue_fail(q, rec->seq, ACCEL_CMD_HOST_CALL, st, why);
    }
  }
  rec_done(rec);
}

static void CUDA_CB timestamp_tramp(void *arg) {
  host_call_rec_t *rec = arg;
  // Release: the elapsed-time reader acquires it after seeing the signal.
  atomic_store_explicit(rec->timestamp_out, accel_cuda_now_ns(),
                        memory_order_release);
  rec_done(rec);
}

// After a device wait: the wait ended because the value was reached or
// because the semaphore failed (which raised the word); the latter fails
// the queue.
static void CUDA_CB wait_check_tramp(void *arg) {
  host_call_rec_t *rec = arg;
  accel_drv_semaphore_t *sem = rec->sem.semaphore;
  accel_status_t st = accel_error_state_code(&sem->error);
  if (st != ACCEL_OK) {
    accel_cuda_queue_fail(rec->queue, rec->seq, ACCEL_CMD_WAIT, st, sem->error.message);
  }
  rec_done(rec);
}

// Without 64-bit stream memory operations: the host function itself waits
// (blocking the driver's callback thread) and signals.
static void CUDA_CB host_wait_tramp(void *arg) {
  host_call_rec_t *rec = arg;
  accel_drv_semaphore_t *sem = rec->sem.semaphore;
  if (!accel_cuda_queue_failed(rec->queue)) {
    accel_status_t st = accel_cuda_semaphore_wait_ex(
        1, &sem, &rec->sem.value, ACCEL_WAIT_ALL, ACCEL_TIMEOUT_INFINITE,
        NULL, false);
    if (st != ACCEL_OK) {
      accel_cuda_queue_fail(rec->queue, rec->seq, ACCEL_CMD_WAIT, st, accel_last_error());
    }
  }
  rec_done(rec);
}

static void CUDA_CB host_signal_tramp(void *arg) {
  host_call_rec_t *rec = arg;
  accel_drv_semaphore_t *sem = rec->sem.semaphore;
  uint64_t cur = atomic_load_explicit(sem->word, memory_order_relaxed);
  // Release: the stream's work before the signal is visible to waiters.
  while (cur < rec->sem.value &&
         !atomic_compare_exchange_weak_explicit(sem->word, &cur,
                                                rec->sem.value,
                                                memory_order_release,
                                                memory_order_relaxed)) {
  }
  rec_done(rec);
}

static CUresult launch_host(accel_drv_queue_t *q, void (*fn)(void *),
                            host_call_rec_t rec) {
  host_call_rec_t *r = malloc(sizeof(*r));
  if (r == NULL) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *r = rec;
  r->queue = q;
  pthread_mutex_lock(&q->pending_lock);
  accel_cuda_list_add(&q->host_recs, &r->link);
  pthread_mutex_unlock(&q->pending_lock);
  CUresult res = q->device->cu->cuLaunchHostFunc(q->stream, fn, r);
  if (res != CUDA_SUCCESS) {
    rec_done(r);
  }
  return res;
}

// Commands.

uint32_t accel_cuda_fill_narrow(uint64_t *pattern, uint32_t size) {
  // An 8-byte pattern whose halves match is a 4-byte pattern, and so on
  // down: the narrowest fill the driver offers.
  uint64_t v = *pattern;
  if (size == 8 && (v >> 32) == (v & 0xffffffffu)) {
    size = 4;
    v &= 0xffffffffu;
  }
  if (size == 4 && (v >> 16) == (v & 0xffffu)) {
    size = 2;
    v &= 0xffffu;
  }
  if (size == 2 && (v >> 8) == (v & 0xffu)) {
    size = 1;
    v &= 0xffu;
  }
  *pattern = v;
  return size;
}

CUresult accel_cuda_enqueue_fill(accel_drv_device_t *device, CUstream stream,
                                 uint64_t dst, uint64_t size_bytes,
                                 uint64_t pattern, uint32_t pattern_size) {
  const accel_cuda_api_t *cu = device->cu;
  pattern_size = accel_cuda_fill_narrow(&pattern, pattern_size);
  switch (pattern_size) {
    case 1:
      return cu->cuMemsetD8Async(dst, (unsigned char)pattern, size_bytes,
                                 stream);
    case 2:
      return cu->cuMemsetD16Async(dst, (unsigned short)pattern,
                                  size_bytes / 2, stream);
    case 4:
      return cu->cuMemsetD32Async(dst, (unsigned int)pattern, size_bytes / 4,
                                  stream);
    default: {
      // Two strided 32-bit fills: the low words at 8-byte steps, then the
      // high words.
      CUresult r = cu->cuMemsetD2D32Async(dst, 8, (unsigned int)pattern, 1,
                                          size_bytes / 8, stream);
      if (r != CUDA_SUCCESS) {
        return r;
      }
      return cu->cuMemsetD2D32Async(dst + 4, 8, (unsigned int)(pattern >> 32),
                                    1, size_bytes / 8, stream);
    }
  }
}

// memmove semantics: an overlapping copy runs as pieces that do not overlap
// the part of the source still to be read (from the end when moving up).
static CUresult enqueue_copy(accel_drv_queue_t *q, const accel_cmd_t *cmd) {
  const accel_cuda_api_t *cu = q->device->cu;
  uint64_t dst = cmd->copy.dst, src = cmd->copy.src, n = cmd->copy.size_bytes;
  bool overlap = dst < src + n && src < dst + n && dst != src;
  if (!overlap) {
    return dst == src ? CUDA_SUCCESS : cu->cuMemcpyAsync(dst, src, n, q->stream);
  }
  uint64_t step = dst > src ? dst - src : src - dst;
  for (uint64_t done = 0; done < n;) {
    uint64_t len = n - done < step ? n - done : step;
    uint64_t off = dst > src ? n - done - len : done;
    CUresult r = cu->cuMemcpyAsync(dst + off, src + off, len, q->stream);
    if (r != CUDA_SUCCESS) {
      return r;
    }
    done += len;
  }
  return CUDA_SUCCESS;
}

static CUresult enqueue_signal(accel_drv_queue_t *q, const accel_cmd_t *cmd,
                               uint64_t seq) {
  CUresult r = CUDA_SUCCESS;
  if (cmd->signal.timestamp_out != NULL) {
    r = launch_host(q, timestamp_tramp,
                    (host_call_rec_t){.seq = seq,
                                      .timestamp_out =
                                          cmd->signal.timestamp_out});
    if (r != CUDA_SUCCESS) {
      return r;
    }
  }
  accel_drv_semaphore_t *sem = cmd->signal.semaphore;
  if (!q->device->stream_mem_ops) {
    return launch_host(q, host_signal_tramp,
                       (host_call_rec_t){.seq = seq,
                                         .sem = {sem, cmd->signal.value}});
  }
  return q->device->cu->cuStreamWriteValue64(q->stream, sem->word_device,
                                             cmd->signal.value, 0);
}

static CUresult enqueue_wait(accel_drv_queue_t *q, const accel_cmd_t *cmd,
                             uint64_t seq) {
  host_call_rec_t rec = {.seq = seq,
                         .sem = {cmd->wait.semaphore, cmd->wait.value}};
  if (!q->device->stream_mem_ops) {
    return launch_host(q, host_wait_tramp, rec);
  }
  CUresult r = q->gate_word != NULL
                   ? q->device->cu->cuStreamWaitValue64(
                         q->stream, q->gate_word_device, q->gate_count + 1,
                         CU_STREAM_WAIT_VALUE_GEQ)
                   : q->device->cu->cuStreamWaitValue64(
                         q->stream, cmd->wait.semaphore->word_device,
                         cmd->wait.value, CU_STREAM_WAIT_VALUE_GEQ);
  if (r != CUDA_SUCCESS) {
    return r;
  }
  return launch_host(q, wait_check_tramp, rec);
}

// Enqueues one command; a refusal sets the message.
static accel_status_t enqueue(accel_drv_queue_t *q, const accel_cmd_t *cmd,
                              uint64_t seq) {
  CUresult r = CUDA_SUCCESS;
  switch (cmd->kind) {
    case ACCEL_CMD_HOST_CALL:
      r = launch_host(q, host_call_tramp,
                      (host_call_rec_t){.seq = seq,
                                        .call = {cmd->host_call.fn,
                                                 cmd->host_call.user_data}});
      break;
    case ACCEL_CMD_FILL:
      r = accel_cuda_enqueue_fill(q->device, q->stream, cmd->fill.dst,
                                  cmd->fill.size_bytes, cmd->fill.pattern,
                                  cmd->fill.pattern_size);
      break;
    case ACCEL_CMD_COPY:
      r = enqueue_copy(q, cmd);
      break;
    case ACCEL_CMD_SIGNAL:
      r = enqueue_signal(q, cmd, seq);
      break;
    case ACCEL_CMD_WAIT:
      r = enqueue_wait(q, cmd, seq);
      break;
    case ACCEL_CMD_LAUNCH:
      if (cmd->launch.exec == accel_cuda_launch_marker) {
        const accel_cuda_launch_cmd_t *l = cmd->launch.payload;
        r = accel_cuda_enqueue_launch(l->kernel, l->launch, q->stream);
        break;
      }
      return accel_error(ACCEL_ERROR_UNSUPPORTED,
                         "stream \"%s\" command #%llu (launch): the CUDA "
                         "device runs no host code objects",
                         q->name, (unsigned long long)seq);
    case ACCEL_CMD_EXECUTE:
      return accel_cuda_graph_execute(q, cmd, seq);
    default:
      return accel_error(ACCEL_ERROR_INTERNAL,
                         "stream \"%s\": unknown command kind %u", q->name,
                         cmd->kind);
  }
  if (r != CUDA_SUCCESS) {
    return accel_cuda_check(q->device, r, "stream \"%s\" command #%llu (%s)",
                            q->name, (unsigned long long)seq,
                            kind_name(cmd->kind));
  }
  return ACCEL_OK;
}

static void release_refs(const accel_cmd_t *commands, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    accel_object_release(commands[i].refs[0]);
    accel_object_release(commands[i].refs[1]);
  }
}

accel_status_t accel_cuda_queue_submit(accel_drv_queue_t *q,
                                       const accel_cmd_t *commands,
                                       uint32_t count, uint64_t *out_last_seq) {
  pthread_mutex_lock(&q->submit_lock);
  accel_status_t st = ACCEL_OK;
  if (accel_cuda_queue_failed(q)) {
    st = accel_error_state_report(&q->error);
    goto err_refuse;
  }
  st = accel_cuda_enter(q->device);
  if (st != ACCEL_OK) {
    goto err_refuse;
  }
  uint32_t i = 0;
  bool had_refs = false;
  for (; i < count; ++i) {
    const accel_cmd_t *cmd = &commands[i];
    uint64_t seq = q->last_seq + 1;
    st = enqueue(q, cmd, seq);
    if (st != ACCEL_OK) {
      // The stream may hold part of the command: the queue is failed.
      accel_cuda_queue_fail(q, seq, cmd->kind, st, accel_last_error());
      st = accel_error_state_report(&q->error);
      break;
    }
    q->last_seq = seq;
    bool gated = cmd->kind == ACCEL_CMD_WAIT && q->gate_word != NULL &&
                 q->device->stream_mem_ops;
    if (gated) {
      q->gate_count++;
    }
    if (cmd->refs[0] != NULL || cmd->refs[1] != NULL ||
        cmd->kind == ACCEL_CMD_SIGNAL || gated) {
      had_refs = true;
      cuda_pending_t p = {
          .seq = seq,
          .refs = {cmd->refs[0], cmd->refs[1]},
          .signal = cmd->kind == ACCEL_CMD_SIGNAL ? cmd->signal.semaphore
                                                  : NULL,
          .wait = gated ? cmd->wait.semaphore : NULL,
          .value = gated ? cmd->wait.value : 0,
          .gate = gated ? q->gate_count : 0,
      };
      if (accel_cuda_queue_pending_push(q, p) != ACCEL_OK) {
        // Out of host memory for the list: keep the references alive by
        // waiting for the stream instead.
        (void)q->device->cu->cuStreamSynchronize(q->stream);
        accel_object_release(p.refs[0]);
        accel_object_release(p.refs[1]);
      }
      // A host function that failed the queue since this submit began
      // scanned the pending list before this signal was in it: the signal
      // is skipped work, and reports the failure itself. Seq_cst: pairs
      // with queue_fail's store (see there).
      if (p.signal != NULL &&
          atomic_load_explicit(&q->failed, memory_order_seq_cst) != 0) {
        accel_cuda_semaphore_fail(p.signal, accel_error_state_code(&q->error),
                                  q->error.message);
      }
    }
  }
  if (i > 0) {
    CUresult r =
        q->device->stream_mem_ops
            ? q->device->cu->cuStreamWriteValue64(
                  q->stream, q->completion->word_device, q->last_seq, 0)
            : launch_host(q, host_signal_tramp,
                          (host_call_rec_t){.seq = q->last_seq,
                                            .sem = {q->completion,
                                                    q->last_seq}});
    if (r != CUDA_SUCCESS) {
      accel_status_t wst = accel_cuda_check(
          q->device, r, "stream \"%s\": completion write", q->name);
      accel_cuda_queue_fail(q, q->last_seq, ACCEL_CMD_SIGNAL, wst, accel_last_error());
    }
    if (q->submitted_seq != NULL) {
      // Release: a waiter that reads the seq finds its commands enqueued.
      atomic_store_explicit(q->submitted_seq, q->last_seq,
                            memory_order_release);
    }
  }
  if (out_last_seq != NULL && st == ACCEL_OK) {
    *out_last_seq = q->last_seq;
  }
  pthread_mutex_unlock(&q->submit_lock);
  release_refs(commands + i, count - i);
  if (had_refs) {
    reaper_wake(q->device);
  }
  return st;

err_refuse:
  pthread_mutex_unlock(&q->submit_lock);
  release_refs(commands, count);
  return st;
}

accel_status_t accel_cuda_queue_create(accel_drv_device_t *device,
                                       const accel_drv_queue_params_t *params,
                                       accel_drv_queue_t **out_queue) {
  ACCEL_RETURN_IF_ERROR(accel_cuda_enter(device));
  accel_drv_queue_t *q = calloc(1, sizeof(*q));
  if (q == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cuda queue: cannot allocate %zu bytes", sizeof(*q));
  }
  // accel priorities: 0 normal, then high, then low
  // (accel_stream_priority_t); CUDA's: lower numbers run first.
  int priority = params->priority == ACCEL_STREAM_PRIORITY_HIGH
                     ? device->priority_greatest
                 : params->priority == ACCEL_STREAM_PRIORITY_LOW
                     ? device->priority_least
                     : (device->priority_least + device->priority_greatest) / 2;
  CUresult r = device->cu->cuStreamCreateWithPriority(
      &q->stream, CU_STREAM_NON_BLOCKING, priority);
  if (r != CUDA_SUCCESS) {
    free(q);
    return accel_cuda_check(device, r, "cuda:%u: cuStreamCreateWithPriority",
                            device->ordinal);
  }
  if (params->abort_on_destroy) {
    void *word = NULL;
    r = device->cu->cuMemHostAlloc(
        &word, sizeof(uint64_t),
        CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    if (r == CUDA_SUCCESS) {
      r = device->cu->cuMemHostGetDevicePointer(&q->gate_word_device, word,
                                                0);
      if (r != CUDA_SUCCESS) {
        (void)device->cu->cuMemFreeHost(word);
      }
    }
    if (r != CUDA_SUCCESS) {
      (void)device->cu->cuStreamDestroy(q->stream);
      free(q);
      return accel_cuda_check(device, r, "cuda:%u: stream gate word",
                              device->ordinal);
    }
    q->gate_word = word;
    atomic_init(q->gate_word, 0);
  }
  q->device = device;
  accel_error_state_init(&q->error);
  q->completion = params->completion;
  q->submitted_seq = params->submitted_seq;
  q->abort_on_destroy = params->abort_on_destroy;
  snprintf(q->name, sizeof(q->name), "%s",
           params->name != NULL ? params->name : "queue");
  pthread_mutex_init(&q->submit_lock, NULL);
  pthread_mutex_init(&q->pending_lock, NULL);
  accel_cuda_list_init(&q->host_recs);
  pthread_mutex_lock(&device->objects_lock);
  accel_cuda_list_add(&device->queues, &q->link);
  pthread_mutex_unlock(&device->objects_lock);
  *out_queue = q;
  return ACCEL_OK;
}

void accel_cuda_queue_destroy(accel_drv_queue_t *q) {
  accel_drv_device_t *device = q->device;
  if (q->abort_on_destroy) {
    accel_cuda_queue_fail(q, 0, ACCEL_CMD_HOST_CALL, ACCEL_ERROR_ABORTED,
               "aborted: the stream was destroyed with abort_on_destroy");
    // Release: interrupts every gated wait; the commands behind them are
    // skipped (host functions) or report the abort (signals).
    atomic_store_explicit(q->gate_word, ACCEL_CUDA_GATE_OPEN,
                          memory_order_release);
  }
  if (device->cu->cuCtxSetCurrent(device->ctx) == CUDA_SUCCESS) {
    CUresult r = device->cu->cuStreamSynchronize(q->stream);
    if (accel_cuda_result_is_sticky(r)) {
      (void)accel_cuda_check(device, r, "stream \"%s\": destroy", q->name);
    }
  }
  pthread_mutex_lock(&device->objects_lock);
  accel_cuda_list_del(&q->link);
  pthread_mutex_unlock(&device->objects_lock);
  // The stream is idle or dead: host functions not run by now never will.
  while (q->host_recs.next != &q->host_recs) {
    accel_cuda_list_t *n = q->host_recs.next;
    accel_cuda_list_del(n);
    free(n);  // the record's first member
  }
  // Unlinked: the reaper no longer sees the queue. A pass that took some of
  // its references may still be dropping them: wait for it to end.
  pthread_mutex_lock(&device->reap_lock);
  pthread_mutex_unlock(&device->reap_lock);
  // What the reaper left is ours.
  ref_batch_t batch = {0};
  (void)pending_take(q, UINT64_MAX, &batch);
  batch_release(&batch);
  free(batch.refs);
  if (device->cu->cuCtxSetCurrent(device->ctx) == CUDA_SUCCESS) {
    (void)device->cu->cuStreamDestroy(q->stream);
    if (q->gate_word != NULL) {
      (void)device->cu->cuMemFreeHost((void *)q->gate_word);
    }
  }
  pthread_mutex_destroy(&q->pending_lock);
  pthread_mutex_destroy(&q->submit_lock);
  free(q->pending);
  free(q);
}
