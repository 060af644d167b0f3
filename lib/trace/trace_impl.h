// Internals of lib/trace: the event record shared by the recorders and the
// Perfetto writer, the track registry (devices, streams, queues, threads)
// with their perf counters, and the recorder entry points used by the hooks
// in trace_hooks.h. lib/trace calls nothing but LTTng-UST and its own writer.
#ifndef ACCEL_TRACE_TRACE_IMPL_H_
#define ACCEL_TRACE_TRACE_IMPL_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "accel/trace.h"

// A command as the hooks see it: plain numbers, which the module that runs
// or queues the command fills in (lib/stream for enqueues, a backend's queue
// worker or copy engine for starts and ends), so that no command layout of
// the driver interface reaches the tracer.
enum {
  ACCEL_TRACE_CMD_HOST_CALL = 0,
  ACCEL_TRACE_CMD_FILL = 1,
  ACCEL_TRACE_CMD_COPY = 2,
  ACCEL_TRACE_CMD_SIGNAL = 3,
  ACCEL_TRACE_CMD_WAIT = 4,
  ACCEL_TRACE_CMD_LAUNCH = 5,
  // A replay of a command buffer; the commands it runs are traced nested
  // under it (accel_trace_nested_start/end) with its seq.
  ACCEL_TRACE_CMD_EXECUTE = 6,
};
// Copy directions (accel_trace_cmd_t.direction).
enum {
  ACCEL_TRACE_DIR_DEVICE_TO_DEVICE = 0,
  ACCEL_TRACE_DIR_HOST_TO_DEVICE = 1,
  ACCEL_TRACE_DIR_DEVICE_TO_HOST = 2,
};

typedef struct accel_trace_cmd {
  uint32_t kind;       // ACCEL_TRACE_CMD_*
  uint32_t direction;  // copies: ACCEL_TRACE_DIR_*; 0 otherwise
  uint64_t seq;        // the command's number in its queue, from 1
  uint64_t bytes;      // copies and fills; 0 otherwise
  // A SIGNAL that records an event: the event's id and where the device
  // time is stored before the signal; 0 and NULL otherwise.
  uint64_t event;
  const _Atomic uint64_t *timestamp;
} accel_trace_cmd_t;

// ---------------------------------------------------------------------------
// Events: four 64-bit words, written with relaxed atomic stores so that a
// reader of a ring that is being overwritten (the flight recorder) races with
// nothing; torn records are detected by the ring's head, not by the words.
// ---------------------------------------------------------------------------

typedef enum accel_trace_event_type {
  ACCEL_TEV_NONE = 0,
  ACCEL_TEV_CMD_ENQUEUE = 1,   // track=stream aux=kind|dir<<8 a=seq b=bytes
  ACCEL_TEV_CMD_START = 2,     // track=stream aux=kind|dir<<8 a=seq b=bytes
  ACCEL_TEV_CMD_END = 3,       // track=stream aux=kind|status<<8 a=seq
  ACCEL_TEV_LAUNCH_BEGIN = 4,  // track=stream a=seq b=kernel name string id
  ACCEL_TEV_LAUNCH_END = 5,    // track=stream aux=status a=seq (from LTTng
                               // only: the recorder ends a launch with its
                               // command)
  ACCEL_TEV_SEM_SIGNAL = 6,    // track=device a=semaphore id b=value
  ACCEL_TEV_SEM_WAIT = 7,      // track=device a=semaphore id b=value
  ACCEL_TEV_SEM_WAKE = 8,      // track=device aux=status a=semaphore id b=value
  ACCEL_TEV_EVENT_RECORD = 9,  // track=stream a=event id b=record value
  ACCEL_TEV_EVENT_COMPLETE = 10,  // track=stream a=event id b=host ns of
                                  // the device timestamp
  ACCEL_TEV_BUF_ALLOC = 11,    // track=device aux=kind|status<<8 a=address
                               // (0: failed) b=bytes
  ACCEL_TEV_BUF_FREE = 12,     // track=device a=address b=bytes
  ACCEL_TEV_ERROR = 13,        // aux=status a=message string id
  ACCEL_TEV_STREAM_FAIL = 14,  // track=stream aux=status a=seq
  ACCEL_TEV_LIFECYCLE = 15,    // track=object aux=accel_trace_life_t
  ACCEL_TEV_COUNTER = 16,      // track=owner aux=counter kind a=value
  ACCEL_TEV_CLOCK_PAIR = 17,   // track=device a=host ns b=device ns
  ACCEL_TEV_KERNEL_MESSAGE = 18,  // aux=kind (kernel ABI message kind)
                                  // a=line string id ("kernel "K"
                                  // work-group (x, y, z): TEXT")
  ACCEL_TEV_TENSOR_SUMMARY = 19,  // a=summary string id ("key=value"
                                  // pairs separated by spaces)
  ACCEL_TEV_TYPE_COUNT = 20,
} accel_trace_event_type_t;

typedef enum accel_trace_life {
  ACCEL_TRACE_LIFE_RUNTIME_CREATE = 0,
  ACCEL_TRACE_LIFE_RUNTIME_DESTROY = 1,
  ACCEL_TRACE_LIFE_DEVICE_OPEN = 2,
  ACCEL_TRACE_LIFE_DEVICE_CLOSE = 3,
  ACCEL_TRACE_LIFE_STREAM_CREATE = 4,
  ACCEL_TRACE_LIFE_STREAM_DESTROY = 5,
} accel_trace_life_t;

typedef struct accel_trace_event {
  _Atomic uint64_t ts;    // ticks (accel_trace_ticks)
  _Atomic uint64_t head;  // type | aux << 8 | track << 32
  _Atomic uint64_t a;
  _Atomic uint64_t b;
} accel_trace_event_t;

// A plain copy of an event, for readers and the writer.
typedef struct accel_trace_rec {
  uint64_t ts;  // ticks in buffers; CLOCK_MONOTONIC ns for the writer
  uint32_t type;
  uint32_t aux;
  uint32_t track;
  uint64_t a;
  uint64_t b;
} accel_trace_rec_t;

static inline uint64_t accel_trace_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// Event timestamps are "ticks": the CPU's invariant time-stamp counter where
// the kernel itself derives CLOCK_MONOTONIC from it (a third of the cost of
// clock_gettime), CLOCK_MONOTONIC ns otherwise. The writers map ticks to
// CLOCK_MONOTONIC ns with a (ticks, ns) anchor and a rate calibrated over
// 10 ms when the first recorder is switched on (accel_trace_ticks_to_ns).
extern _Atomic bool accel_trace_tsc_g;

static inline uint64_t accel_trace_ticks(void) {
#if defined(__x86_64__)
  if (atomic_load_explicit(&accel_trace_tsc_g, memory_order_relaxed)) {
    return __builtin_ia32_rdtsc();
  }
#endif
  return accel_trace_now_ns();
}

// Maps event ticks to CLOCK_MONOTONIC ns (async-signal-safe once
// accel_trace_clock_init() returned).
uint64_t accel_trace_ticks_to_ns(uint64_t ticks);

// Decides once whether events use the TSC, and calibrates it; called before
// any event-recording mode is switched on and before converting.
void accel_trace_clock_init(void);

// ---------------------------------------------------------------------------
// Tracks and counters.
// ---------------------------------------------------------------------------

typedef enum accel_trace_track_kind {
  ACCEL_TRACK_PROCESS = 0,
  ACCEL_TRACK_DEVICE = 1,
  ACCEL_TRACK_STREAM = 2,
  ACCEL_TRACK_QUEUE = 3,  // DMA engine
  ACCEL_TRACK_THREAD = 4,
} accel_trace_track_kind_t;

// Counter kinds. Each belongs to device scope or stream/queue scope.
typedef enum accel_counter_kind {
  // Stream / queue counters. Written by the queue's worker only (single
  // writer), except commands_enqueued (the queue's own sequence number).
  ACCEL_CTR_COMMANDS_ENQUEUED = 0,
  ACCEL_CTR_COMMANDS_COMPLETED,
  ACCEL_CTR_QUEUE_OCCUPANCY,  // derived: enqueued - completed
  ACCEL_CTR_LAUNCHES,
  ACCEL_CTR_COPIES,
  ACCEL_CTR_COPY_BYTES_H2D,
  ACCEL_CTR_COPY_BYTES_D2H,
  ACCEL_CTR_COPY_BYTES_D2D,
  ACCEL_CTR_FILLS,
  ACCEL_CTR_FILL_BYTES,
  ACCEL_CTR_HOST_CALLS,
  ACCEL_CTR_SIGNALS,
  ACCEL_CTR_WAITS,
  ACCEL_CTR_WAIT_NS,
  ACCEL_CTR_FAILURES,  // times the stream failed (0 or 1 per stream)
  ACCEL_CTR_REPLAYS,   // command-buffer executes completed
  ACCEL_CTR_REPLAYED_COMMANDS,  // commands those executes ran
  ACCEL_CTR_STREAM_COUNT,  // number of stream counters
  // Device counters (atomic read-modify-write: any thread).
  ACCEL_CTR_BYTES_IN_USE = ACCEL_CTR_STREAM_COUNT,
  ACCEL_CTR_BYTES_RESERVED,
  ACCEL_CTR_BYTES_PEAK,
  ACCEL_CTR_ALLOCATIONS,
  ACCEL_CTR_FREES,
  ACCEL_CTR_ALLOC_FAILURES,
  ACCEL_CTR_HOST_WAITS,
  ACCEL_CTR_HOST_WAIT_NS,
  ACCEL_CTR_SIGNALS_HOST,
  ACCEL_CTR_STREAMS,
  ACCEL_CTR_COUNT,
} accel_counter_kind_t;

// Name and unit of a counter kind.
const char *accel_counter_kind_name(uint32_t kind);
const char *accel_counter_kind_unit(uint32_t kind);

// Memory figures of a device, filled by the memory layer's source function
// (accel_trace_device_memory_source) when counters are read.
typedef struct accel_trace_memory {
  uint64_t bytes_in_use;
  uint64_t bytes_reserved;
  uint64_t bytes_peak;
  uint64_t allocations;
  uint64_t frees;
  uint64_t alloc_failures;
} accel_trace_memory_t;

typedef void (*accel_trace_memory_fn_t)(void *ctx, accel_trace_memory_t *out);

// The memory layer of |device| reports the device's memory counters through
// |fn|(|ctx|, out), called when counters are read (not under any lock of
// lib/trace's that a hook takes); NULL |fn| withdraws it (before |ctx| goes
// away; returns once no call is in progress). A device without a source
// reports its memory counters as 0.
void accel_trace_device_memory_source(const void *device,
                                      accel_trace_memory_fn_t fn, void *ctx);

typedef struct accel_trace_track {
  uint32_t id;      // never 0; ids are never reused
  uint32_t kind;    // accel_trace_track_kind_t
  uint32_t parent;  // device id for streams/queues, 0 for none
  int32_t tid;      // threads
  uintptr_t key;    // the object this track stands for (an id, never read)
  _Atomic bool live;
  char name[64];
  // The queue's own count of commands handed out (its last sequence number),
  // read for commands_enqueued; NULL: |enqueued| is kept here instead.
  const _Atomic uint64_t *enqueued_source;
  // Counters, written by the queue's worker (stream counters) or by any
  // thread (device counters).
  _Alignas(64) _Atomic uint64_t counters[ACCEL_CTR_COUNT];
  uint64_t wait_start_ns;  // worker only: start of the current WAIT command
  _Atomic uint64_t processed;  // worker only: commands ended (any status)
  // Submit side, on its own cache line (no sharing with the worker).
  _Alignas(64) _Atomic uint64_t enqueued;
} accel_trace_track_t;

// Registers a track for |key| (a pointer value used as an id) and returns
// it, or NULL when out of memory (tracing of that object is then skipped).
accel_trace_track_t *accel_trace_track_add(uint32_t kind, uintptr_t key,
                                           uint32_t parent, const char *name);
// Sets where commands_enqueued is read from (before the track is used).
void accel_trace_track_set_enqueued_source(accel_trace_track_t *track,
                                           const _Atomic uint64_t *source);
// Marks the track of |key| dead (kept for traces that still name it).
void accel_trace_track_remove(uintptr_t key);
// The live track of |key|, or NULL. Lock-free on the hot path (a per-thread
// cache in front of the locked table).
accel_trace_track_t *accel_trace_track_find(uintptr_t key);

// The command a queue worker is running (set at its start when anything
// records launches), so that code running inside it (launch payloads) can
// report without knowing its queue.
typedef struct accel_trace_current {
  uint32_t track;
  bool launch_open;  // a launch_begin was recorded for this command
  uint64_t seq;
} accel_trace_current_t;
extern __attribute__((tls_model("initial-exec"))) _Thread_local
    accel_trace_current_t accel_trace_current_g;

// Bumped by every track removal; per-thread caches are valid while it holds.
extern _Atomic uint64_t accel_trace_remove_gen_g;

// A two-entry per-thread cache in front of accel_trace_track_find, read
// inline by the hooks (two: a thread often alternates between two tracks, a
// DMA ring's and its device's, when it submits copies and waits for them).
typedef struct accel_trace_cache {
  uintptr_t key[2];
  accel_trace_track_t *track[2];
  uint64_t gen;
} accel_trace_cache_t;
extern __attribute__((tls_model("initial-exec"))) _Thread_local
    accel_trace_cache_t accel_trace_cache_g;

static inline accel_trace_track_t *accel_trace_track_lookup(uintptr_t key) {
  accel_trace_cache_t *c = &accel_trace_cache_g;
  // Acquire: pairs with the removal's release (a removed track's pointer is
  // never used after the generation moved).
  uint64_t gen =
      atomic_load_explicit(&accel_trace_remove_gen_g, memory_order_acquire);
  if (c->gen == gen) {
    if (c->key[0] == key && c->track[0] != NULL) {
      return c->track[0];
    }
    if (c->key[1] == key && c->track[1] != NULL) {
      return c->track[1];
    }
  } else {
    c->key[0] = c->key[1] = 0;
    c->track[0] = c->track[1] = NULL;
    c->gen = gen;
  }
  accel_trace_track_t *t = accel_trace_track_find(key);
  // Most recent first.
  c->key[1] = c->key[0];
  c->track[1] = c->track[0];
  c->key[0] = key;
  c->track[0] = t;
  return t;
}
// The track with |id| (live or dead, if still kept), or NULL. |locked| false
// reads without the registry lock (signal handlers).
const accel_trace_track_t *accel_trace_track_by_id(uint32_t id, bool locked);
// Copies a track's description under the registry lock.
bool accel_trace_track_describe(uint32_t id, accel_trace_track_t *out);
// Calls |fn| for every live device and stream track, under the lock.
void accel_trace_track_foreach(void (*fn)(const accel_trace_track_t *, void *),
                               void *ctx);
// Current value of a counter (derives queue_occupancy).
uint64_t accel_trace_counter_value(const accel_trace_track_t *track,
                                   uint32_t kind);
// Whether counter |kind| applies to tracks of |track_kind|.
bool accel_trace_counter_applies(uint32_t track_kind, uint32_t kind);

// One counter value read from the registry.
typedef struct accel_trace_counter_item {
  uint32_t owner;       // track id
  uint32_t track_kind;  // accel_trace_track_kind_t
  uint32_t kind;        // accel_counter_kind_t
  uint64_t value;
  char scope[64];
} accel_trace_counter_item_t;

// Reads every counter of every live device and stream (memory counters from
// their sources, outside the registry lock). Returns a malloc'ed array (NULL
// when there are none) of |*out_count| items; |*out_failed| when out of
// memory.
accel_trace_counter_item_t *accel_trace_counters_collect(size_t *out_count,
                                                         bool *out_failed);

// Interned strings (kernel names, error messages): returns an id > 0, or 0
// when the table is full. accel_trace_string() returns NULL for unknown ids.
uint32_t accel_trace_intern(const char *text, bool dedupe);
const char *accel_trace_string(uint32_t id);

// ---------------------------------------------------------------------------
// Recorder state.
// ---------------------------------------------------------------------------

// Bits of accel_trace_mask_g.
enum {
  ACCEL_TRACE_M_RECORD = 1u << 0,   // built-in recorder on
  ACCEL_TRACE_M_FLIGHT = 1u << 1,   // flight recorder on
  ACCEL_TRACE_M_COUNTERS = 1u << 2, // perf counters on
  ACCEL_TRACE_M_EVENTS = ACCEL_TRACE_M_RECORD | ACCEL_TRACE_M_FLIGHT,
};

// What the hooks do; read relaxed on every hook (a predictable branch).
extern _Atomic uint32_t accel_trace_mask_g;


// Records one event in this thread's buffers (flight ring and/or recorder).
void accel_trace_emit(uint32_t type, uint32_t aux, uint32_t track, uint64_t a,
                      uint64_t b);
void accel_trace_emit_at(uint64_t ts, uint32_t type, uint32_t aux,
                         uint32_t track, uint64_t a, uint64_t b);

// Switches every hook off (counters, flight recorder and recorder) or back to
// the defaults: the benchmark's "tracing compiled out" baseline.
void accel_trace_set_enabled(bool enabled);

// Whether an LTTng session records accel:cmd_enqueue (benchmarks wait for
// the session to reach this process).
bool accel_trace_lttng_listening(void);

// Called by runtime creation/destruction: reads ACCEL_TRACE,
// ACCEL_FLIGHT_EVENTS, ACCEL_FLIGHT_DIR, starts the counter sampler.
// Fails (with a message) when ACCEL_TRACE names a file that cannot be created
// or a variable is malformed.
accel_status_t accel_trace_runtime_attach(void);

// Loads the LTTng provider library when ACCEL_LTTNG asks for it (once per
// process; lttng_load.c). ACCEL_ERROR_UNAVAILABLE with the paths tried when
// it cannot be loaded, ACCEL_ERROR_UNSUPPORTED in a build without LTTng-UST.
accel_status_t accel_trace_lttng_load_from_env(void);
void accel_trace_runtime_detach(void);

// Samples every counter into the recorder and LTTng (one sample per
// counter); returns false when neither records them.
bool accel_trace_sample_counters(void);

// Writes the flight recorder to ACCEL_FLIGHT_DIR (if set) after a failure of
// |track|; at most a few files per process.
void accel_trace_flight_on_failure(uint32_t track);

// Device clock correlation: converts a device time of device track |device|
// to host CLOCK_MONOTONIC ns using the latest (host, device) pair.
void accel_trace_clock_set(uint32_t device, uint64_t host_ns,
                           uint64_t device_ns);
uint64_t accel_trace_device_to_host_ns(uint32_t device, uint64_t device_ns);

// The process's command line for traces ("trainer --steps 10": the
// program without its folder, then its arguments), cut to 63 bytes; read
// once. Thread-safe.
const char *accel_trace_cmdline(void);

#endif  // ACCEL_TRACE_TRACE_IMPL_H_
