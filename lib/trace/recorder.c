// The built-in recorder and the flight recorder.
//
// Every thread that emits an event gets a buffer of its own (registered once
// under a lock, then written without locks):
//  - a flight ring of the last ACCEL_FLIGHT_EVENTS events, overwritten in
//    place; readers detect overwritten slots with a claimed/committed pair of
//    counters (a per-ring seqlock);
//  - while recording, an unbounded single-producer/single-consumer list of
//    chunks that accel_trace_flush() drains, merging threads by timestamp,
//    into the Perfetto writer.
// A sampler thread (one per process while a runtime exists or a recording
// runs) samples the perf counters into the recorder and LTTng.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/lock.h"
#include "accel_config.h"
#include "core/error.h"
#include "trace/perfetto.h"
#include "trace/trace_impl.h"

#if ACCEL_HAVE_LTTNG
#include "trace/tp.h"
#endif

#define CHUNK_EVENTS 1024u
#define FLIGHT_DEFAULT 1024u
#define FLIGHT_MAX (1u << 20)
#define FLIGHT_FILES_MAX 4u
#define SAMPLE_PERIOD_NS 10000000ull  // 10 ms, while something samples
#define IDLE_PERIOD_NS 250000000ull   // 250 ms between checks otherwise
#define EXITED_KEPT 32u

_Atomic uint32_t accel_trace_mask_g = ACCEL_TRACE_M_COUNTERS;
_Atomic bool accel_trace_tsc_g;

// Tick-to-ns mapping, written once under g_clock_once.
static pthread_once_t g_clock_once = PTHREAD_ONCE_INIT;
static uint64_t g_anchor_ticks;
static uint64_t g_anchor_ns;
static double g_ns_per_tick = 1.0;

// A (ticks, ns) pair: the ns reading bracketed by two tick readings.
static void anchor_now(uint64_t *ticks, uint64_t *ns) {
  uint64_t t1 = accel_trace_ticks();
  *ns = accel_trace_now_ns();
  uint64_t t2 = accel_trace_ticks();
  *ticks = t1 + (t2 - t1) / 2;
}

// The TSC is used only where the kernel keeps CLOCK_MONOTONIC on it (which
// it does only when the TSC is invariant and synchronized across CPUs).
static bool tsc_usable(void) {
#if defined(__x86_64__)
  char text[32] = "";
  int fd = open("/sys/devices/system/clocksource/clocksource0/"
                "current_clocksource",
                O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return false;
  }
  ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  return n >= 3 && strncmp(text, "tsc", 3) == 0 &&
         (n == 3 || text[3] == '\n');
#else
  return false;
#endif
}

static void clock_init_once(void) {
  if (!tsc_usable()) {
    return;  // ticks are ns
  }
  atomic_store(&accel_trace_tsc_g, true);
  uint64_t t0, n0, t1, n1;
  anchor_now(&t0, &n0);
  struct timespec pause = {.tv_sec = 0, .tv_nsec = 10000000};
  while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
  }
  anchor_now(&t1, &n1);
  if (t1 <= t0 || n1 <= n0) {
    atomic_store(&accel_trace_tsc_g, false);
    return;
  }
  g_ns_per_tick = (double)(n1 - n0) / (double)(t1 - t0);
  g_anchor_ticks = t1;
  g_anchor_ns = n1;
}

void accel_trace_clock_init(void) { pthread_once(&g_clock_once, clock_init_once); }

uint64_t accel_trace_ticks_to_ns(uint64_t ticks) {
  if (!atomic_load_explicit(&accel_trace_tsc_g, memory_order_relaxed)) {
    return ticks;
  }
  double delta = (double)(int64_t)(ticks - g_anchor_ticks) * g_ns_per_tick;
  return (uint64_t)((int64_t)g_anchor_ns + (int64_t)delta);
}

typedef struct rec_chunk {
  struct rec_chunk *_Atomic next;
  accel_trace_event_t ev[CHUNK_EVENTS];
} rec_chunk_t;

typedef struct tbuf {
  struct tbuf *next;  // g_threads list, guarded by g_threads_lock
  uint32_t track;     // this thread's track id
  _Atomic bool exited;
  // Flight ring (owner writes; dumps read).
  accel_trace_event_t *ring;
  uint32_t ring_mask;
  _Atomic uint64_t claimed;    // slots claimed for writing
  _Atomic uint64_t committed;  // slots fully written
  // Recorder: producer side (owner thread only).
  rec_chunk_t *tail;
  uint32_t tail_n;
  rec_chunk_t *_Atomic first;        // the first chunk, published once
  _Atomic uint64_t published;        // events appended
  // Recorder: consumer side (guarded by g_rec_lock).
  rec_chunk_t *head;
  uint32_t head_n;
  uint64_t consumed;
} tbuf_t;

static pthread_mutex_t g_threads_lock = PTHREAD_MUTEX_INITIALIZER;
static tbuf_t *g_threads;  // guarded by g_threads_lock
static pthread_key_t g_thread_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static __attribute__((tls_model("initial-exec"))) _Thread_local tbuf_t *t_self;
static __attribute__((tls_model("initial-exec"))) _Thread_local bool t_busy;

static _Atomic uint32_t g_flight_events = FLIGHT_DEFAULT;  // ring size
// The flight recorder is on when ACCEL_FLIGHT_EVENTS > 0 or ACCEL_FLIGHT_DIR
// is set (it costs a clock read and a ring write per traced moment).
static _Atomic bool g_flight_on;
static _Atomic bool g_disabled;  // accel_trace_set_enabled(false)

// Recorder state, guarded by g_rec_lock.
static pthread_mutex_t g_rec_lock = PTHREAD_MUTEX_INITIALIZER;
static bool g_recording;
static bool g_env_started;
static int g_rec_fd = -1;
static _Atomic uint64_t g_rec_start_ticks;
static accel_pf_writer_t g_rec_writer;

// Flight dumps (one writer, used under g_flight_lock or by the signal
// handler when it wins g_flight_busy).
static pthread_mutex_t g_flight_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_flag g_flight_busy = ATOMIC_FLAG_INIT;
static accel_pf_writer_t g_flight_writer;
static char g_flight_dir[256];
static _Atomic uint32_t g_flight_files;

// Sampler and attach state, guarded by g_attach_lock.
static pthread_mutex_t g_attach_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_sampler_cond;
static uint32_t g_attach_count;
static uint32_t g_sampler_refs;
static bool g_sampler_stop;
static pthread_t g_sampler;

// ---------------------------------------------------------------------------
// Per-thread buffers.
// ---------------------------------------------------------------------------

static void thread_exit(void *arg) {
  tbuf_t *t = arg;
  atomic_store_explicit(&t->exited, true, memory_order_release);
  accel_trace_track_remove((uintptr_t)t);
}

static void make_key(void) { pthread_key_create(&g_thread_key, thread_exit); }

static void free_tbuf(tbuf_t *t) {
  rec_chunk_t *c = t->head != NULL
                       ? t->head
                       : atomic_load_explicit(&t->first, memory_order_acquire);
  while (c != NULL) {
    rec_chunk_t *next = atomic_load_explicit(&c->next, memory_order_relaxed);
    free(c);
    c = next;
  }
  free(t->ring);
  free(t);
}

// Frees buffers of exited threads beyond the most recent EXITED_KEPT whose
// recorded events were all written. Called with g_rec_lock and
// g_threads_lock held.
static void reap_exited_locked(void) {
  ACCEL_ASSERT_HELD(&g_rec_lock);
  ACCEL_ASSERT_HELD(&g_threads_lock);
  uint32_t exited = 0;
  tbuf_t **link = &g_threads;
  while (*link != NULL) {
    tbuf_t *t = *link;
    if (atomic_load_explicit(&t->exited, memory_order_acquire)) {
      exited++;
      if (exited > EXITED_KEPT &&
          t->consumed ==
              atomic_load_explicit(&t->published, memory_order_acquire)) {
        *link = t->next;
        free_tbuf(t);
        continue;
      }
    }
    link = &t->next;
  }
}

static tbuf_t *self_slow(void) {
  pthread_once(&g_key_once, make_key);
  tbuf_t *t = calloc(1, sizeof(*t));
  if (t == NULL) {
    return NULL;
  }
  uint32_t n = atomic_load_explicit(&g_flight_events, memory_order_relaxed);
  if (n > 0) {
    t->ring = calloc(n, sizeof(*t->ring));
    if (t->ring == NULL) {
      free(t);
      return NULL;
    }
    t->ring_mask = n - 1;
  }
  char name[32] = "thread";
  pthread_getname_np(pthread_self(), name, sizeof(name));
  int32_t tid = (int32_t)syscall(SYS_gettid);
  accel_trace_track_t *track =
      accel_trace_track_add(ACCEL_TRACK_THREAD, (uintptr_t)t, 0, name);
  if (track == NULL) {
    free(t->ring);
    free(t);
    return NULL;
  }
  track->tid = tid;
  t->track = track->id;
  // Reaping reads the flusher's cursors: only when no flush runs (trylock,
  // since an error reported while a flush holds the lock may land here).
  bool rec_locked = pthread_mutex_trylock(&g_rec_lock) == 0;
  pthread_mutex_lock(&g_threads_lock);
  if (rec_locked) {
    reap_exited_locked();
  }
  t->next = g_threads;
  g_threads = t;
  pthread_mutex_unlock(&g_threads_lock);
  if (rec_locked) {
    pthread_mutex_unlock(&g_rec_lock);
  }
  pthread_setspecific(g_thread_key, t);
  t_self = t;
  return t;
}

static void record_append(tbuf_t *t, uint64_t ts, uint64_t head, uint64_t a,
                          uint64_t b) {
  if (t->tail == NULL || t->tail_n == CHUNK_EVENTS) {
    rec_chunk_t *c = malloc(sizeof(*c));
    if (c == NULL) {
      return;  // dropped: out of memory
    }
    atomic_init(&c->next, NULL);
    if (t->tail == NULL) {
      // Release: the consumer that loads |first| sees an initialized chunk.
      atomic_store_explicit(&t->first, c, memory_order_release);
    } else {
      // Release: the consumer follows |next| only after seeing |published|
      // cover an event in |c|, but the link must be complete first.
      atomic_store_explicit(&t->tail->next, c, memory_order_release);
    }
    t->tail = c;
    t->tail_n = 0;
  }
  accel_trace_event_t *e = &t->tail->ev[t->tail_n++];
  atomic_store_explicit(&e->ts, ts, memory_order_relaxed);
  atomic_store_explicit(&e->head, head, memory_order_relaxed);
  atomic_store_explicit(&e->a, a, memory_order_relaxed);
  atomic_store_explicit(&e->b, b, memory_order_relaxed);
  uint64_t p = atomic_load_explicit(&t->published, memory_order_relaxed);
  // Release: publishes the event words (and chunk links) to the flusher.
  atomic_store_explicit(&t->published, p + 1, memory_order_release);
}

void accel_trace_emit_at(uint64_t ts, uint32_t type, uint32_t aux,
                         uint32_t track, uint64_t a, uint64_t b) {
  uint32_t m = atomic_load_explicit(&accel_trace_mask_g, memory_order_relaxed);
  if ((m & ACCEL_TRACE_M_EVENTS) == 0) {
    return;
  }
  tbuf_t *t = t_self;
  if (t == NULL) {
    if (t_busy) {
      return;
    }
    t_busy = true;  // registration may emit errors of its own
    t = self_slow();
    t_busy = false;
    if (t == NULL) {
      return;
    }
  }
  uint64_t head = (uint64_t)type | ((uint64_t)(aux & 0xffffff) << 8) |
                  ((uint64_t)track << 32);
  if ((m & ACCEL_TRACE_M_FLIGHT) && t->ring != NULL) {
    uint64_t h = atomic_load_explicit(&t->claimed, memory_order_relaxed);
    atomic_store_explicit(&t->claimed, h + 1, memory_order_relaxed);
    // Release fence: a reader that sees any word written below also sees
    // |claimed| advanced, and discards this slot's old contents.
    atomic_thread_fence(memory_order_release);
    accel_trace_event_t *e = &t->ring[h & t->ring_mask];
    atomic_store_explicit(&e->ts, ts, memory_order_relaxed);
    atomic_store_explicit(&e->head, head, memory_order_relaxed);
    atomic_store_explicit(&e->a, a, memory_order_relaxed);
    atomic_store_explicit(&e->b, b, memory_order_relaxed);
    // Release: readers that see |committed| see the words.
    atomic_store_explicit(&t->committed, h + 1, memory_order_release);
  }
  if (m & ACCEL_TRACE_M_RECORD) {
    // Events older than the recording's start are dropped when written.
    record_append(t, ts, head, a, b);
  }
}

void accel_trace_emit(uint32_t type, uint32_t aux, uint32_t track, uint64_t a,
                      uint64_t b) {
  // The clock is read only when something records.
  if ((atomic_load_explicit(&accel_trace_mask_g, memory_order_relaxed) &
       ACCEL_TRACE_M_EVENTS) == 0) {
    return;
  }
  accel_trace_emit_at(accel_trace_ticks(), type, aux, track, a, b);
}

static void load_rec(const accel_trace_event_t *e, accel_trace_rec_t *out) {
  out->ts = atomic_load_explicit(&e->ts, memory_order_relaxed);
  uint64_t head = atomic_load_explicit(&e->head, memory_order_relaxed);
  out->type = (uint32_t)(head & 0xff);
  out->aux = (uint32_t)((head >> 8) & 0xffffff);
  out->track = (uint32_t)(head >> 32);
  out->a = atomic_load_explicit(&e->a, memory_order_relaxed);
  out->b = atomic_load_explicit(&e->b, memory_order_relaxed);
}

void accel_trace_set_enabled(bool enabled) {
  atomic_store(&g_disabled, !enabled);
  uint32_t m = 0;
  if (enabled) {
    m = ACCEL_TRACE_M_COUNTERS;
    if (atomic_load(&g_flight_on)) {
      m |= ACCEL_TRACE_M_FLIGHT;
    }
    pthread_mutex_lock(&g_rec_lock);
    if (g_recording) {
      m |= ACCEL_TRACE_M_RECORD;
    }
    pthread_mutex_unlock(&g_rec_lock);
  }
  atomic_store(&accel_trace_mask_g, m);
}

// ---------------------------------------------------------------------------
// Writing.
// ---------------------------------------------------------------------------

// Describes track |id| through the registry, which takes its own lock (the
// writer's path); describe_signal_safe below reads it without any lock (a
// flight dump from a signal handler).
static bool describe_from_registry(void *ctx, uint32_t id,
                                   accel_trace_track_t *out) {
  return accel_trace_track_describe(id, out);
}

static bool describe_signal_safe(void *ctx, uint32_t id,
                              accel_trace_track_t *out) {
  const accel_trace_track_t *t = accel_trace_track_by_id(id, false);
  if (t == NULL) {
    return false;
  }
  out->id = t->id;
  out->kind = t->kind;
  out->parent = t->parent;
  out->tid = t->tid;
  memcpy(out->name, t->name, sizeof(out->name));
  return true;
}

static const char *string_of(void *ctx, uint32_t id) {
  return accel_trace_string(id);
}

// Reads the first |size| - 1 bytes of |path| into |out| (NUL-terminated);
// returns the count. open/read/close only: the flight recorder calls this
// from a fatal-signal handler.
static size_t read_proc_file(const char *path, char *out, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, out, size - 1) : -1;
  if (fd >= 0) {
    close(fd);
  }
  out[n > 0 ? n : 0] = '\0';
  return n > 0 ? (size_t)n : 0;
}

// The process's name for traces: its command line with the program's folder
// left out ("trainer --steps 10"), cut to |size| - 1 bytes; /proc/self/comm
// (at most 15 characters) only where the command line cannot be read.
static void process_name(char *out, size_t size) {
  char line[256];
  size_t n = read_proc_file("/proc/self/cmdline", line, sizeof(line));
  if (n == 0) {
    if (read_proc_file("/proc/self/comm", out, size) == 0) {
      snprintf(out, size, "accel");
    }
    out[strcspn(out, "\n")] = '\0';
    return;
  }
  const char *base = line;
  for (const char *c = line; *c != '\0'; ++c) {
    if (*c == '/') {
      base = c + 1;
    }
  }
  size_t o = 0;
  for (const char *c = base; c < line + n && o + 1 < size; ++c) {
    out[o++] = *c != '\0' ? *c : ' ';
  }
  while (o > 0 && out[o - 1] == ' ') {
    o--;
  }
  out[o] = '\0';
}

static pthread_once_t g_cmdline_once = PTHREAD_ONCE_INIT;
static char g_cmdline[64];

static void read_cmdline_once(void) {
  process_name(g_cmdline, sizeof(g_cmdline));
}

const char *accel_trace_cmdline(void) {
  pthread_once(&g_cmdline_once, read_cmdline_once);
  return g_cmdline;
}

static void write_samples(accel_pf_writer_t *w, uint64_t ts) {
  size_t n = 0;
  bool failed = false;
  accel_trace_counter_item_t *items = accel_trace_counters_collect(&n, &failed);
  for (size_t i = 0; i < n; ++i) {
    accel_pf_counter(w, ts, items[i].owner, items[i].kind, items[i].value);
  }
  free(items);
}

// Drains every thread's recorded events (merged by timestamp) into the
// writer. Called with g_rec_lock held.
static void drain_locked(void) {
  ACCEL_ASSERT_HELD(&g_rec_lock);
  enum { MAX_THREADS = 1024 };
  tbuf_t *threads[MAX_THREADS];
  uint64_t limit[MAX_THREADS];
  uint32_t n = 0;
  pthread_mutex_lock(&g_threads_lock);
  for (tbuf_t *t = g_threads; t != NULL && n < MAX_THREADS; t = t->next) {
    threads[n] = t;
    // Acquire: pairs with record_append's release; events below are complete.
    limit[n] = atomic_load_explicit(&t->published, memory_order_acquire);
    if (t->head == NULL) {
      t->head = atomic_load_explicit(&t->first, memory_order_acquire);
    }
    n++;
  }
  pthread_mutex_unlock(&g_threads_lock);
  accel_trace_clock_init();
  uint64_t start =
      atomic_load_explicit(&g_rec_start_ticks, memory_order_relaxed);
  for (;;) {
    int best = -1;
    uint64_t best_ts = UINT64_MAX;
    accel_trace_rec_t best_rec;
    for (uint32_t i = 0; i < n; ++i) {
      tbuf_t *t = threads[i];
      while (t->consumed < limit[i] && t->head_n == CHUNK_EVENTS) {
        rec_chunk_t *next =
            atomic_load_explicit(&t->head->next, memory_order_acquire);
        free(t->head);
        t->head = next;
        t->head_n = 0;
      }
      if (t->consumed >= limit[i]) {
        continue;
      }
      accel_trace_rec_t rec;
      load_rec(&t->head->ev[t->head_n], &rec);
      if (rec.ts < best_ts) {
        best_ts = rec.ts;
        best = (int)i;
        best_rec = rec;
      }
    }
    if (best < 0) {
      break;
    }
    tbuf_t *t = threads[best];
    t->head_n++;
    t->consumed++;
    if (best_rec.ts >= start) {
      best_rec.ts = accel_trace_ticks_to_ns(best_rec.ts);
      accel_pf_event(&g_rec_writer, t->track, &best_rec);
    }
  }
}

static accel_status_t write_failure_locked(const char *what) {
  ACCEL_ASSERT_HELD(&g_rec_lock);
  return accel_error(ACCEL_ERROR_IO, "trace %s: write failed: %s", what,
                     strerror(g_rec_writer.error));
}

static void sampler_ref(void);
static void sampler_unref(void);

static void stop_at_exit(void) {
  pthread_mutex_lock(&g_rec_lock);
  bool recording = g_recording;
  pthread_mutex_unlock(&g_rec_lock);
  if (recording) {
    (void)accel_trace_stop();
  }
}

accel_status_t accel_trace_start(const char *path) {
  ACCEL_CHECK_ARG(path != NULL && path[0] != '\0', "path (NULL or empty)");
  pthread_mutex_lock(&g_rec_lock);
  if (g_recording) {
    pthread_mutex_unlock(&g_rec_lock);
    return accel_error(ACCEL_ERROR_BUSY,
                       "trace start \"%s\": a recording is already in "
                       "progress",
                       path);
  }
  accel_trace_clock_init();
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    pthread_mutex_unlock(&g_rec_lock);
    return accel_error(ACCEL_ERROR_IO, "trace start: cannot create \"%s\": %s",
                       path, strerror(err));
  }
  char name[64];
  process_name(name, sizeof(name));
  accel_pf_source_t source = {describe_from_registry, string_of, NULL};
  accel_pf_begin(&g_rec_writer, fd, (int32_t)getpid(), name, &source);
  g_rec_fd = fd;
  g_recording = true;
  atomic_store_explicit(&g_rec_start_ticks, accel_trace_ticks(),
                        memory_order_relaxed);
  // Discard what earlier recordings left unwritten.
  drain_locked();
  if (!atomic_load(&g_disabled)) {
    atomic_fetch_or(&accel_trace_mask_g, ACCEL_TRACE_M_RECORD);
  }
  pthread_mutex_unlock(&g_rec_lock);
  static _Atomic bool exit_hooked;
  if (!atomic_exchange(&exit_hooked, true)) {
    atexit(stop_at_exit);
  }
  sampler_ref();
  return ACCEL_OK;
}

accel_status_t accel_trace_flush(void) {
  pthread_mutex_lock(&g_rec_lock);
  if (!g_recording) {
    pthread_mutex_unlock(&g_rec_lock);
    return accel_error(ACCEL_ERROR_NOT_READY,
                       "trace flush: no recording in progress");
  }
  drain_locked();
  accel_status_t st = ACCEL_OK;
  if (!accel_pf_flush(&g_rec_writer)) {
    st = write_failure_locked("flush");
  }
  pthread_mutex_unlock(&g_rec_lock);
  return st;
}

accel_status_t accel_trace_stop(void) {
  pthread_mutex_lock(&g_rec_lock);
  if (!g_recording) {
    pthread_mutex_unlock(&g_rec_lock);
    return accel_error(ACCEL_ERROR_NOT_READY,
                       "trace stop: no recording in progress");
  }
  atomic_fetch_and(&accel_trace_mask_g, ~(uint32_t)ACCEL_TRACE_M_RECORD);
  drain_locked();
  uint64_t end = accel_trace_now_ns();
  accel_pf_close_slices(&g_rec_writer, end);
  if (g_rec_writer.last_ts > end) {
    end = g_rec_writer.last_ts;
  }
  write_samples(&g_rec_writer, end);
  accel_status_t st = ACCEL_OK;
  if (!accel_pf_flush(&g_rec_writer)) {
    st = write_failure_locked("stop");
  }
  if (close(g_rec_fd) != 0 && st == ACCEL_OK) {
    st = accel_error(ACCEL_ERROR_IO, "trace stop: close failed: %s",
                     strerror(errno));
  }
  g_rec_fd = -1;
  g_recording = false;
  g_env_started = false;
  pthread_mutex_unlock(&g_rec_lock);
  sampler_unref();
  return st;
}

// ---------------------------------------------------------------------------
// Flight recorder.
// ---------------------------------------------------------------------------

enum { FLIGHT_DUMP_MAX_THREADS = 256 };

// One thread's ring as a dump reads it: records [lo, hi) are still to be
// written.
typedef struct flight_cursor {
  tbuf_t *t;
  uint64_t lo, hi;
} flight_cursor_t;

// Takes a cursor over the committed records of every thread with a ring.
// Returns the number of cursors.
static uint32_t flight_snapshot(flight_cursor_t *cursors) {
  uint32_t n = 0;
  for (tbuf_t *t = g_threads; t != NULL && n < FLIGHT_DUMP_MAX_THREADS;
       t = t->next) {
    if (t->ring == NULL) {
      continue;
    }
    // Acquire: pairs with the writer's release of |committed|.
    uint64_t c = atomic_load_explicit(&t->committed, memory_order_acquire);
    uint64_t size = (uint64_t)t->ring_mask + 1;
    cursors[n] = (flight_cursor_t){.t = t, .lo = c > size ? c - size : 0,
                                   .hi = c};
    n++;
  }
  return n;
}

// The rings hold partial histories: link an enqueue to its execution only
// when the execution's start is in the dump too.
static void flight_expect_starts(const flight_cursor_t *cursors, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    const tbuf_t *t = cursors[i].t;
    for (uint64_t k = cursors[i].lo; k < cursors[i].hi; ++k) {
      accel_trace_rec_t rec;
      load_rec(&t->ring[k & t->ring_mask], &rec);
      if (rec.type == ACCEL_TEV_CMD_START) {
        accel_pf_expect_start(&g_flight_writer, rec.track, rec.a);
      }
    }
  }
}

// Reads the cursor's next record that was not overwritten while it was read,
// skipping those that were. Returns false when the cursor is exhausted.
// Kept out of line: inlined into its caller, the fence below is reported by
// GCC's TSan build as unsupported (-Wtsan), which -Werror makes fatal.
static __attribute__((noinline)) bool flight_peek(flight_cursor_t *cur,
                                                 accel_trace_rec_t *out) {
  tbuf_t *t = cur->t;
  while (cur->lo < cur->hi) {
    load_rec(&t->ring[cur->lo & t->ring_mask], out);
    // Acquire fence: orders the reads above before the |claimed| load;
    // a slot claimed again since is discarded.
    atomic_thread_fence(memory_order_acquire);
    uint64_t claimed = atomic_load_explicit(&t->claimed, memory_order_relaxed);
    if (claimed > cur->lo + t->ring_mask + 1) {
      cur->lo++;  // overwritten while we read
      continue;
    }
    return true;
  }
  return false;
}

// The cursor whose next record is the oldest, and that record; -1 when all
// are exhausted.
static int flight_oldest(flight_cursor_t *cursors, uint32_t n,
                         accel_trace_rec_t *out) {
  int best = -1;
  uint64_t best_ts = UINT64_MAX;
  for (uint32_t i = 0; i < n; ++i) {
    accel_trace_rec_t rec;
    if (flight_peek(&cursors[i], &rec) && rec.ts < best_ts) {
      best_ts = rec.ts;
      best = (int)i;
      *out = rec;
    }
  }
  return best;
}

// Writes every thread's ring, merged by timestamp, to |fd|. |locked| false in
// the signal handler (no locks, best effort).
static bool flight_write(int fd, bool locked) {
  if (locked) {
    accel_trace_clock_init();
  }
  // Static, not on the stack: the signal handler may run on a small
  // alternate stack (SA_ONSTACK).
  static flight_cursor_t cursors[FLIGHT_DUMP_MAX_THREADS];
  if (locked) {
    pthread_mutex_lock(&g_threads_lock);
  }
  uint32_t n = flight_snapshot(cursors);
  char name[64];
  process_name(name, sizeof(name));
  accel_pf_source_t source = {locked ? describe_from_registry : describe_signal_safe,
                              string_of, NULL};
  accel_pf_begin(&g_flight_writer, fd, (int32_t)getpid(), name, &source);
  flight_expect_starts(cursors, n);
  for (;;) {
    accel_trace_rec_t rec;
    int best = flight_oldest(cursors, n, &rec);
    if (best < 0) {
      break;
    }
    cursors[best].lo++;
    rec.ts = accel_trace_ticks_to_ns(rec.ts);
    accel_pf_event(&g_flight_writer, cursors[best].t->track, &rec);
  }
  if (locked) {
    pthread_mutex_unlock(&g_threads_lock);
  }
  accel_pf_close_slices(&g_flight_writer, g_flight_writer.last_ts);
  return accel_pf_flush(&g_flight_writer);
}

accel_status_t accel_trace_flight_dump(const char *path) {
  ACCEL_CHECK_ARG(path != NULL && path[0] != '\0', "path (NULL or empty)");
  if (!atomic_load(&g_flight_on)) {
    return accel_error(ACCEL_ERROR_UNAVAILABLE,
                       "flight recorder is off (turn it on with "
                       "ACCEL_FLIGHT_EVENTS=N or ACCEL_FLIGHT_DIR=dir)");
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return accel_error(ACCEL_ERROR_IO,
                       "flight dump: cannot create \"%s\": %s", path,
                       strerror(errno));
  }
  pthread_mutex_lock(&g_flight_lock);
  while (atomic_flag_test_and_set(&g_flight_busy)) {
    sched_yield();
  }
  bool ok = flight_write(fd, true);
  int err = g_flight_writer.error;
  atomic_flag_clear(&g_flight_busy);
  pthread_mutex_unlock(&g_flight_lock);
  close(fd);
  if (!ok) {
    return accel_error(ACCEL_ERROR_IO, "flight dump to \"%s\": %s", path,
                       strerror(err));
  }
  return ACCEL_OK;
}

void accel_trace_flight_on_failure(uint32_t track) {
  if (g_flight_dir[0] == '\0' ||
      (atomic_load_explicit(&accel_trace_mask_g, memory_order_relaxed) &
       ACCEL_TRACE_M_FLIGHT) == 0) {
    return;
  }
  uint32_t n = atomic_fetch_add(&g_flight_files, 1);
  if (n >= FLIGHT_FILES_MAX) {
    return;
  }
  char path[384];
  snprintf(path, sizeof(path), "%s/accel-flight-%d-%u.pftrace", g_flight_dir,
           (int)getpid(), n);
  (void)accel_trace_flight_dump(path);
}

static void fatal_signal(int sig) {
  if (!atomic_flag_test_and_set(&g_flight_busy)) {
    char path[384];
    snprintf(path, sizeof(path), "%s/accel-flight-%d-signal%d.pftrace",
             g_flight_dir, (int)getpid(), sig);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      flight_write(fd, false);
      close(fd);
    }
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

static void install_signal_handlers(void) {
  static const int k_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  for (size_t i = 0; i < sizeof(k_signals) / sizeof(k_signals[0]); ++i) {
    struct sigaction old;
    if (sigaction(k_signals[i], NULL, &old) == 0 &&
        old.sa_handler != SIG_DFL) {
      continue;  // the application (or a sanitizer) handles it
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = fatal_signal;
    sa.sa_flags = SA_RESETHAND | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(k_signals[i], &sa, NULL);
  }
}

// ---------------------------------------------------------------------------
// Counter sampling and attach.
// ---------------------------------------------------------------------------

bool accel_trace_sample_counters(void) {
  uint32_t m = atomic_load_explicit(&accel_trace_mask_g, memory_order_relaxed);
  bool lttng = false;
#if ACCEL_HAVE_LTTNG
  lttng = lttng_ust_tracepoint_enabled(accel, counter_sample);
#endif
  if ((m & ACCEL_TRACE_M_RECORD) == 0 && !lttng) {
    return false;
  }
  size_t n = 0;
  bool failed = false;
  accel_trace_counter_item_t *items = accel_trace_counters_collect(&n, &failed);
  uint64_t ts = accel_trace_ticks();
  for (size_t i = 0; i < n; ++i) {
    if (m & ACCEL_TRACE_M_RECORD) {
      accel_trace_emit_at(ts, ACCEL_TEV_COUNTER, items[i].kind, items[i].owner,
                          items[i].value, 0);
    }
#if ACCEL_HAVE_LTTNG
    lttng_ust_tracepoint(accel, counter_sample, items[i].owner,
                         items[i].scope, accel_counter_kind_name(items[i].kind),
                         items[i].value);
#endif
  }
  free(items);
  return true;
}

static void *sampler_main(void *arg) {
  pthread_setname_np(pthread_self(), "accel-sampler");
  pthread_mutex_lock(&g_attach_lock);
  bool active = false;
  while (!g_sampler_stop) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t deadline = (uint64_t)ts.tv_sec * 1000000000ull +
                        (uint64_t)ts.tv_nsec +
                        (active ? SAMPLE_PERIOD_NS : IDLE_PERIOD_NS);
    ts.tv_sec = (time_t)(deadline / 1000000000ull);
    ts.tv_nsec = (long)(deadline % 1000000000ull);
    pthread_cond_timedwait(&g_sampler_cond, &g_attach_lock, &ts);
    if (g_sampler_stop) {
      break;
    }
    pthread_mutex_unlock(&g_attach_lock);
    active = accel_trace_sample_counters();
    pthread_mutex_lock(&g_attach_lock);
  }
  pthread_mutex_unlock(&g_attach_lock);
  return NULL;
}

static void sampler_ref(void) {
  pthread_mutex_lock(&g_attach_lock);
  if (g_sampler_refs++ == 0) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&g_sampler_cond, &attr);
    pthread_condattr_destroy(&attr);
    g_sampler_stop = false;
    if (pthread_create(&g_sampler, NULL, sampler_main, NULL) != 0) {
      g_sampler_refs = 0;  // no periodic samples; final ones still written
      pthread_cond_destroy(&g_sampler_cond);
    }
  }
  pthread_mutex_unlock(&g_attach_lock);
}

static void sampler_unref(void) {
  pthread_mutex_lock(&g_attach_lock);
  if (g_sampler_refs == 0 || --g_sampler_refs > 0) {
    pthread_mutex_unlock(&g_attach_lock);
    return;
  }
  g_sampler_stop = true;
  pthread_cond_signal(&g_sampler_cond);
  pthread_mutex_unlock(&g_attach_lock);
  pthread_join(g_sampler, NULL);
  pthread_cond_destroy(&g_sampler_cond);
}

// ACCEL_FLIGHT_EVENTS=N: the ring size, rounded up to a power of two; 0
// turns the flight recorder off.
static accel_status_t read_flight_events(const char *text) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || text[0] == '-' || v > FLIGHT_MAX) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "ACCEL_FLIGHT_EVENTS=\"%s\" must be 0 to %u", text,
                       FLIGHT_MAX);
  }
  uint32_t n = 0;
  if (v > 0) {
    n = 1;
    while (n < v) {
      n <<= 1;  // rings are powers of two
    }
  }
  // Only threads that register later see a new size.
  atomic_store(&g_flight_events, n);
  atomic_store(&g_flight_on, n > 0);
  return ACCEL_OK;
}

// ACCEL_FLIGHT_DIR=dir: where fatal signals dump the rings; turns the flight
// recorder on at the default size unless ACCEL_FLIGHT_EVENTS chose one.
static accel_status_t read_flight_dir(const char *dir, bool events_set) {
  if (strlen(dir) >= sizeof(g_flight_dir)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "ACCEL_FLIGHT_DIR is longer than %zu characters",
                       sizeof(g_flight_dir) - 1);
  }
  snprintf(g_flight_dir, sizeof(g_flight_dir), "%s", dir);
  if (!events_set) {
    atomic_store(&g_flight_on, true);  // default ring size
  }
  install_signal_handlers();
  return ACCEL_OK;
}

static accel_status_t read_flight_env(void) {
  const char *text = getenv("ACCEL_FLIGHT_EVENTS");
  bool events_set = text != NULL && text[0] != '\0';
  if (events_set) {
    ACCEL_RETURN_IF_ERROR(read_flight_events(text));
  }
  const char *dir = getenv("ACCEL_FLIGHT_DIR");
  if (dir != NULL && dir[0] != '\0') {
    ACCEL_RETURN_IF_ERROR(read_flight_dir(dir, events_set));
  }
  if (atomic_load(&g_flight_on) && atomic_load(&g_flight_events) > 0 &&
      !atomic_load(&g_disabled)) {
    accel_trace_clock_init();
    atomic_fetch_or(&accel_trace_mask_g, ACCEL_TRACE_M_FLIGHT);
  } else {
    atomic_fetch_and(&accel_trace_mask_g, ~(uint32_t)ACCEL_TRACE_M_FLIGHT);
  }
  return ACCEL_OK;
}

accel_status_t accel_trace_runtime_attach(void) {
  pthread_mutex_lock(&g_attach_lock);
  bool first = g_attach_count == 0;
  pthread_mutex_unlock(&g_attach_lock);
  if (first) {
    ACCEL_RETURN_IF_ERROR(read_flight_env());
    const char *path = getenv("ACCEL_TRACE");
    if (path != NULL && path[0] != '\0') {
      pthread_mutex_lock(&g_rec_lock);
      bool recording = g_recording;
      pthread_mutex_unlock(&g_rec_lock);
      if (!recording) {
        accel_status_t st = accel_trace_start(path);
        if (st != ACCEL_OK) {
          return accel_error_context(st, "ACCEL_TRACE");
        }
        pthread_mutex_lock(&g_rec_lock);
        g_env_started = true;
        pthread_mutex_unlock(&g_rec_lock);
      }
    }
  }
  pthread_mutex_lock(&g_attach_lock);
  g_attach_count++;
  pthread_mutex_unlock(&g_attach_lock);
  sampler_ref();
  return ACCEL_OK;
}

void accel_trace_runtime_detach(void) {
  pthread_mutex_lock(&g_attach_lock);
  bool last = g_attach_count > 0 && --g_attach_count == 0;
  pthread_mutex_unlock(&g_attach_lock);
  sampler_unref();
  if (last) {
    pthread_mutex_lock(&g_rec_lock);
    bool env = g_env_started && g_recording;
    pthread_mutex_unlock(&g_rec_lock);
    if (env) {
      (void)accel_trace_stop();
    }
  }
}
