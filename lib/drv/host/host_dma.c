// Host copy engines: each engine is one worker thread that consumes the DMA
// rings attached to it, in the shape of a hardware copy engine serving several
// channels. An engine executes a ring's descriptors in order until the ring is
// empty or stalls on a semaphore acquire (WAIT), then moves to its next ring,
// so that one stalled ring never blocks the others. Idle engines spin for a
// bounded time, then park on a futex (or on the semaphores their stalled
// rings wait for); the doorbell wakes them. Engines start with the first ring
// created on the device and run on the device's CPUs (its NUMA node's cores,
// set through device_set_affinity when the topology is known).
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/lock.h"
#include "drv/host/host_internal.h"
#include "trace/trace_hooks.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define MAX_ENGINES 64u

typedef struct host_engine host_engine_t;

struct accel_drv_dma_ring {
  host_engine_t *engine;
  accel_drv_semaphore_t *fence;  // borrowed
  char name[64];
  accel_dma_hw_desc_t *slots;
  uint32_t mask;

  // Doorbell: descriptors published by the host (read by the engine only
  // when it parks; a running engine polls the slots' ownership words).
  _Alignas(64) _Atomic uint64_t tail;
  // Write-back: descriptors retired by the engine.
  _Alignas(64) _Atomic uint64_t head;
  // Lowest head a parked dma_ring_wait needs (UINT64_MAX: none); the engine
  // bumps |head_word| and wakes the waiters when its head reaches it.
  _Atomic uint64_t wake_at;
  _Atomic uint32_t head_word;
  _Atomic uint64_t bytes[ACCEL_DMA_DIR_COUNT];
  _Atomic int inject_status;  // test hook: fail the next COPY/FILL
  _Atomic uint32_t abort;     // dma_ring_abort was called
  // Rarely written, read by both sides: set once poisoned; and the CPU of
  // the thread that rang the doorbell last (-1: unknown; stored only when it
  // changes), on which an engine yields after its pass (see engine_main).
  _Alignas(64) _Atomic uint32_t failed;
  _Atomic int producer_cpu;

  // Engine side (its thread only).
  _Alignas(64) uint64_t consumed;
  bool stalled;           // the last service_ring() stopped at a WAIT
  // An injected HANG hit the descriptor at |consumed|: the ring stalls on
  // |hang_desc| (a WAIT on the device's never-signalled semaphore) until
  // an abort poisons it.
  bool hung;
  accel_dma_hw_desc_t hang_desc;
  bool poisoned;
  accel_status_t poison_status;
  char poison_message[ACCEL_ERROR_MESSAGE_MAX];
};

struct host_engine {
  accel_drv_device_t *device;
  uint32_t index;
  pthread_t thread;
  bool started;

  // Guards |rings| and |ring_count|; the engine copies them into its own
  // snapshot when |generation| moves and acknowledges in |seen_generation|.
  pthread_mutex_t lock;
  accel_drv_dma_ring_t **rings;
  uint32_t ring_count;
  uint32_t ring_capacity;
  _Atomic uint64_t generation;
  _Atomic uint64_t seen_generation;
  _Atomic uint32_t ack_word;  // futex bumped after an ack when waited for
  _Atomic uint32_t ack_waiters;

  // Wake-up protocol (see engine_park): a running engine polls the next
  // slot's ownership word of each ring; a parked one sets |parked| and is
  // woken by a doorbell through |waiter| with |kick| set, which also cancels
  // its semaphore wait.
  _Alignas(64) _Atomic uint32_t kick;
  _Atomic uint32_t parked;
  _Atomic uint32_t stopping;
  accel_host_waiter_t waiter;  // .cancel = &kick
};

struct accel_host_dma {
  pthread_mutex_t lock;  // guards engine start-up
  uint32_t engine_count;
  host_engine_t engines[];
};

// ---------------------------------------------------------------------------
// Descriptor execution.
// ---------------------------------------------------------------------------

// Traced descriptor |d| in the trace hooks' plain numbers: a COPY or FILL
// command numbered by its trace_seq on the ring's track.
static accel_trace_cmd_t trace_desc(const accel_dma_hw_desc_t *d) {
  bool fill = d->op == ACCEL_DMA_HW_FILL;
  return (accel_trace_cmd_t){
      .kind = fill ? ACCEL_TRACE_CMD_FILL : ACCEL_TRACE_CMD_COPY,
      .direction = fill ? 0 : d->direction,
      .seq = d->trace_seq,
      .bytes = accel_dma_hw_desc_bytes(d)};
}

static void trace_desc_start(const accel_drv_dma_ring_t *r,
                             const accel_dma_hw_desc_t *d) {
  const accel_trace_cmd_t tc = trace_desc(d);
  accel_trace_dma_start(r, &tc);
}

static void trace_desc_end(const accel_drv_dma_ring_t *r,
                           const accel_dma_hw_desc_t *d,
                           accel_status_t status) {
  const accel_trace_cmd_t tc = trace_desc(d);
  accel_trace_dma_end(r, &tc, status);
}

static const char *hw_op_name(const accel_dma_hw_desc_t *d) {
  switch (d->op) {
    case ACCEL_DMA_HW_COPY:
      return "copy";
    case ACCEL_DMA_HW_FILL:
      return "fill";
    case ACCEL_DMA_HW_WAIT:
      return "semaphore wait";
    case ACCEL_DMA_HW_SIGNAL:
      return "semaphore signal";
    default:
      return "unknown";
  }
}

static void fill_pattern(uint8_t *dst, uint64_t size, uint64_t pattern,
                         uint32_t pattern_size) {
  if (pattern_size == 1) {
    memset(dst, (int)(pattern & 0xff), size);
    return;
  }
  // One cache-resident block holding the pattern, then block copies; offset
  // and size are multiples of pattern_size, so the phase is preserved.
  uint8_t block[4096];
  uint64_t n = size < sizeof(block) ? size : sizeof(block);
  for (uint64_t i = 0; i < n; ++i) {
    block[i] = (uint8_t)(pattern >> (8 * (i % pattern_size)));
  }
  for (uint64_t i = 0; i < size; i += n) {
    memcpy(dst + i, block, size - i < n ? size - i : n);
  }
}

// memcpy with non-temporal stores for destinations that will not be read
// soon (the last leg of a staged copy): the lines go to memory without first
// being read into the cache.
static void copy_streaming(uint8_t *dst, const uint8_t *src, uint64_t n) {
#if defined(__SSE2__)
  uint64_t head = (16 - ((uintptr_t)dst & 15)) & 15;
  if (n < 256 || head > n) {
    memcpy(dst, src, n);
    return;
  }
  memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  uint64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
    __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
    __m128i e = _mm_loadu_si128((const __m128i *)(src + i + 48));
    _mm_stream_si128((__m128i *)(dst + i), a);
    _mm_stream_si128((__m128i *)(dst + i + 16), b);
    _mm_stream_si128((__m128i *)(dst + i + 32), c);
    _mm_stream_si128((__m128i *)(dst + i + 48), e);
  }
  // Non-temporal stores are weakly ordered: fence them before the engine
  // publishes the descriptor as done.
  _mm_sfence();
  memcpy(dst + i, src + i, n - i);
#else
  memcpy(dst, src, n);
#endif
}

static void execute_copy(const accel_dma_hw_desc_t *d) {
  uint8_t *dst = (uint8_t *)(uintptr_t)d->copy.dst;
  const uint8_t *src = (const uint8_t *)(uintptr_t)d->copy.src;
  uint64_t width = d->copy.width;
  if ((d->flags & ACCEL_DMA_HW_FLAG_STREAM_DST) != 0) {
    for (uint32_t z = 0; z < d->copy.depth; ++z) {
      for (uint32_t y = 0; y < d->copy.height; ++y) {
        copy_streaming(dst + z * d->copy.dst_slice_pitch +
                           y * d->copy.dst_pitch,
                       src + z * d->copy.src_slice_pitch +
                           y * d->copy.src_pitch,
                       width);
      }
    }
    return;
  }
  if (d->copy.height == 1 && d->copy.depth == 1) {
    memcpy(dst, src, width);
    return;
  }
  for (uint32_t z = 0; z < d->copy.depth; ++z) {
    uint8_t *drow = dst + z * d->copy.dst_slice_pitch;
    const uint8_t *srow = src + z * d->copy.src_slice_pitch;
    for (uint32_t y = 0; y < d->copy.height; ++y) {
      memcpy(drow, srow, width);
      drow += d->copy.dst_pitch;
      srow += d->copy.src_pitch;
    }
  }
}

static uint64_t hw_bytes(const accel_dma_hw_desc_t *d) {
  if (d->op == ACCEL_DMA_HW_FILL) {
    return d->fill.size_bytes;
  }
  return d->copy.width * d->copy.height * d->copy.depth;
}

static void count_bytes(accel_drv_dma_ring_t *r, const accel_dma_hw_desc_t *d) {
  uint32_t dir = d->direction < ACCEL_DMA_DIR_COUNT ? d->direction : 0;
  // Relaxed: the engine is the only writer; readers want a recent value.
  uint64_t v = atomic_load_explicit(&r->bytes[dir], memory_order_relaxed);
  atomic_store_explicit(&r->bytes[dir], v + hw_bytes(d), memory_order_relaxed);
}

// Records the ring's first failure: the fence fails with a message that names
// the descriptor; everything after it is aborted.
static void poison_ring(accel_drv_dma_ring_t *r, const accel_dma_hw_desc_t *d,
                   accel_status_t st, const char *why) {
  r->poisoned = true;
  r->poison_status = st;
  if (d->index == UINT32_MAX) {
    snprintf(r->poison_message, sizeof(r->poison_message),
             "dma ring \"%s\" submit #%llu (internal %s) failed: %s", r->name,
             (unsigned long long)d->submit_id, hw_op_name(d), why);
  } else {
    snprintf(r->poison_message, sizeof(r->poison_message),
             "dma ring \"%s\" submit #%llu descriptor %u (%s) failed: %s",
             r->name, (unsigned long long)d->submit_id, d->index,
             hw_op_name(d), why);
  }
  accel_host_semaphore_fail(r->fence, st, r->poison_message);
  // Release: a host that sees the flag finds the fence failed.
  atomic_store_explicit(&r->failed, 1, memory_order_release);
}

// The semaphore release folded into a COPY or FILL: raised when the ring is
// healthy, failed with its error when the descriptor failed or was aborted.
static void finish_signal(accel_drv_dma_ring_t *r,
                          const accel_dma_hw_desc_t *d) {
  if (d->signal_semaphore == NULL ||
      (d->op != ACCEL_DMA_HW_COPY && d->op != ACCEL_DMA_HW_FILL)) {
    return;
  }
  if (r->poisoned) {
    accel_host_semaphore_fail(d->signal_semaphore, r->poison_status,
                              r->poison_message);
  } else {
    accel_host_semaphore_signal_max(d->signal_semaphore, d->signal_value);
  }
}

// Moves the bytes of a healthy COPY or FILL whose start was reported, counts
// them and reports its end (the engine's pass and dma_ring_execute_now).
static void transfer_bytes(accel_drv_dma_ring_t *r, const accel_dma_hw_desc_t *d) {
  if (d->op == ACCEL_DMA_HW_COPY) {
    execute_copy(d);
  } else {
    fill_pattern((uint8_t *)(uintptr_t)d->fill.dst, d->fill.size_bytes,
                 d->fill.pattern, d->fill.pattern_size);
  }
  count_bytes(r, d);
  if (d->trace_seq != 0) {
    trace_desc_end(r, d, ACCEL_OK);
  }
}

// Applies the injected fault, if any, that the COPY or FILL |d| hits
// (docs/health.md, "Fault injection"): a corrected one is reported and |d|
// runs; an uncorrected or fatal one is reported and poisons the ring with
// |d| (its signal failed). Returns false when |d| hangs instead.
static bool execute_fault(accel_drv_dma_ring_t *r, accel_dma_hw_desc_t *d) {
  int kind = accel_host_fault_take_slow(r->engine->device, r->name);
  if (kind < 0) {
    return true;
  }
  char what[192];
  snprintf(what, sizeof(what), "dma ring \"%s\" submit #%llu (%s)", r->name,
           (unsigned long long)d->submit_id, hw_op_name(d));
  if (kind == ACCEL_FAULT_HANG) {
    r->hung = true;
    r->hang_desc = (accel_dma_hw_desc_t){.op = ACCEL_DMA_HW_WAIT,
                                         .index = UINT32_MAX};
    r->hang_desc.sem.semaphore = r->engine->device->hang_semaphore;
    r->hang_desc.sem.value = 1;
    return false;
  }
  if (kind == ACCEL_FAULT_CORRECTED) {
    accel_host_fault_report(r->engine->device, ACCEL_RAS_CORRECTED, ACCEL_OK,
                            what);
    return true;
  }
  bool fatal = kind == ACCEL_FAULT_FATAL;
  accel_host_fault_report(r->engine->device,
                          fatal ? ACCEL_RAS_FATAL : ACCEL_RAS_UNCORRECTED,
                          fatal ? ACCEL_ERROR_DEVICE_LOST : ACCEL_ERROR_IO,
                          what);
  poison_ring(r, d, fatal ? ACCEL_ERROR_DEVICE_LOST : ACCEL_ERROR_IO,
              fatal ? "fatal device error (injected fault)"
                    : "uncorrected device error (injected fault)");
  finish_signal(r, d);
  return true;
}

// Executes one descriptor. Returns false (nothing done) if it is a WAIT whose
// value is not reached yet, with the semaphore and value in |*out_stall|.
static bool execute_desc(accel_drv_dma_ring_t *r, accel_dma_hw_desc_t *d,
                    accel_dma_hw_desc_t **out_stall) {
  if (r->poisoned) {
    if (d->op == ACCEL_DMA_HW_SIGNAL) {
      accel_host_semaphore_fail(d->sem.semaphore, r->poison_status,
                                r->poison_message);
    }
    if (d->trace_seq != 0) {
      trace_desc_end(r, d, r->poison_status);
    }
    finish_signal(r, d);
    return true;
  }
  switch (d->op) {
    case ACCEL_DMA_HW_COPY:
    case ACCEL_DMA_HW_FILL: {
      if (__builtin_expect(r->hung, 0) ||
          (__builtin_expect(atomic_load_explicit(&r->engine->device->faults_armed,
                                                 memory_order_relaxed) != 0,
                            0) &&
           !execute_fault(r, d))) {
        *out_stall = &r->hang_desc;
        return false;
      }
      if (r->poisoned) {
        return true;  // the fault failed it
      }
      if (d->trace_seq != 0) {
        trace_desc_start(r, d);
      }
      int injected = atomic_load_explicit(&r->inject_status,
                                          memory_order_relaxed);
      if (injected != 0 &&
          atomic_exchange_explicit(&r->inject_status, 0,
                                   memory_order_relaxed) != 0) {
        char why[128];
        snprintf(why, sizeof(why), "engine %u error: injected fault (%s)",
                 r->engine->index, accel_status_name(injected));
        poison_ring(r, d, (accel_status_t)injected, why);
        if (d->trace_seq != 0) {
          trace_desc_end(r, d, r->poison_status);
        }
        finish_signal(r, d);
        return true;
      }
      transfer_bytes(r, d);
      finish_signal(r, d);
      return true;
    }
    case ACCEL_DMA_HW_SIGNAL:
      accel_host_semaphore_signal_max(d->sem.semaphore, d->sem.value);
      return true;
    case ACCEL_DMA_HW_WAIT: {
      uint64_t value = 0;
      accel_status_t st = accel_host_semaphore_query(d->sem.semaphore, &value);
      if (value >= d->sem.value) {
        return true;
      }
      if (st != ACCEL_OK) {
        char why[ACCEL_ERROR_MESSAGE_MAX];
        snprintf(why, sizeof(why), "waited semaphore failed: %s",
                 accel_last_error());
        poison_ring(r, d, st, why);
        return true;
      }
      *out_stall = d;
      return false;
    }
    default: {
      char why[64];
      snprintf(why, sizeof(why), "unknown descriptor op %u", d->op);
      poison_ring(r, d, ACCEL_ERROR_INTERNAL, why);
      return true;
    }
  }
}

// Whether the descriptor at |pos| has been handed over (its ownership word
// is written last, with release, by the host).
static inline bool slot_ready(const accel_drv_dma_ring_t *r, uint64_t pos,
                              int order) {
  return __atomic_load_n(&r->slots[pos & r->mask].position, order) == pos + 1;
}

// Runs |r| until it is empty or stalls. Returns true if it retired anything;
// a stall is reported in |*out_stall|.
static bool service_ring(accel_drv_dma_ring_t *r, accel_dma_hw_desc_t **out_stall) {
  r->stalled = false;
  bool progress = false;
  // Acquire: pairs with the host's release of the ownership word, so that
  // the descriptor bytes written before it are visible.
  while (slot_ready(r, r->consumed, __ATOMIC_ACQUIRE)) {
    accel_dma_hw_desc_t *d = &r->slots[r->consumed & r->mask];
    // Acquire: pairs with dma_ring_abort's release.
    if (!r->poisoned &&
        atomic_load_explicit(&r->abort, memory_order_acquire) != 0) {
      poison_ring(r, d, ACCEL_ERROR_ABORTED,
             "aborted: dma queue destroyed with pending work");
    }
    if (!execute_desc(r, d, out_stall)) {
      r->stalled = true;
      break;
    }
    r->consumed++;
    progress = true;
    // Seq_cst: the head store must precede the |wake_at| load (Dekker with
    // dma_ring_wait's publication then head load). Release at least: the
    // host reuses the slot, and drops what the descriptor named, only after
    // seeing this.
    atomic_store_explicit(&r->head, r->consumed, memory_order_seq_cst);
    if (r->consumed >=
        atomic_load_explicit(&r->wake_at, memory_order_seq_cst)) {
      // Reset, then bump the word: a waiter whose target this reset erased
      // read the word before and wakes to publish it again.
      atomic_store_explicit(&r->wake_at, UINT64_MAX, memory_order_relaxed);
      atomic_fetch_add_explicit(&r->head_word, 1, memory_order_release);
      accel_host_futex_wake_all(&r->head_word);
    }
  }
  return progress;
}

// ---------------------------------------------------------------------------
// Engine threads.
// ---------------------------------------------------------------------------

// Whether |r| has a descriptor for the engine: its next slot was handed
// over. A stalled ring's next slot is its WAIT: only the semaphore (checked
// by the caller) is news, since what follows runs after the WAIT anyway.
// Polling the slot, not the tail, keeps the engine to one cache line per ring
// that the host writes.
static bool ring_has_new(accel_drv_dma_ring_t *r) {
  return slot_ready(r, r->consumed, __ATOMIC_RELAXED) &&
         (!r->stalled ||
          atomic_load_explicit(&r->abort, memory_order_relaxed) != 0);
}

// The same check before parking. Seq_cst on the tail: either this load sees
// the doorbell's tail (and then, through it, the ownership word), or the
// doorbell's |parked| load that follows its tail store sees the engine parked
// (see engine_park).
static bool ring_has_new_parking(accel_drv_dma_ring_t *r) {
  (void)atomic_load_explicit(&r->tail, memory_order_seq_cst);
  return slot_ready(r, r->consumed, __ATOMIC_ACQUIRE) &&
         (!r->stalled ||
          atomic_load_explicit(&r->abort, memory_order_seq_cst) != 0);
}

static bool stalled_moved(uint32_t stall_count,
                          accel_drv_semaphore_t *const *sems,
                          const uint64_t *values) {
  for (uint32_t i = 0; i < stall_count; ++i) {
    uint64_t v = 0;
    accel_status_t st = accel_host_semaphore_query(sems[i], &v);
    if (v >= values[i] || st != ACCEL_OK) {
      return true;
    }
  }
  return false;
}

// Parks the engine until a doorbell, a ring-list change or, if
// |stall_count| > 0, until one of the semaphores its stalled rings wait for
// moves.
static void engine_park(host_engine_t *e, accel_drv_dma_ring_t *const *rings,
                        uint32_t ring_count, uint64_t seen_gen,
                        uint32_t stall_count,
                        accel_drv_semaphore_t *const *sems,
                        const uint64_t *values) {
  atomic_store_explicit(&e->waiter.word, 0, memory_order_relaxed);
  atomic_store_explicit(&e->kick, 0, memory_order_relaxed);
  // Seq_cst: the |parked| store must precede the re-checks below, against a
  // doorbell's tail store then |parked| load (and the same for the ring list
  // and |stopping|): one side sees the other, so no wake-up is lost.
  atomic_store_explicit(&e->parked, 1, memory_order_seq_cst);
  bool idle =
      atomic_load_explicit(&e->generation, memory_order_seq_cst) ==
          seen_gen &&
      !atomic_load_explicit(&e->stopping, memory_order_seq_cst);
  for (uint32_t i = 0; i < ring_count && idle; ++i) {
    idle = !ring_has_new_parking(rings[i]);
  }
  if (idle) {
    if (stall_count == 0) {
      accel_host_futex_wait(&e->waiter.word, 0, UINT64_MAX);
    } else {
      // Returns when a value is reached, a semaphore fails, or |kick| is set
      // (the waiter's cancel word): all are reasons to rescan.
      (void)accel_host_semaphore_wait_ex(stall_count, sems, values,
                                         ACCEL_WAIT_ANY,
                                         ACCEL_TIMEOUT_INFINITE, NULL,
                                         &e->waiter, 0);
    }
  }
  atomic_store_explicit(&e->parked, 0, memory_order_relaxed);
}

// Wakes |e| if it is parked; call after publishing the reason (a tail, the
// ring list, |stopping|) with a seq_cst store.
static void wake_engine(host_engine_t *e) {
  // Seq_cst: see engine_park.
  if (atomic_load_explicit(&e->parked, memory_order_seq_cst)) {
    // Release: the woken engine rescans after seeing the kick or the word.
    atomic_store_explicit(&e->kick, 1, memory_order_release);
    accel_host_waiter_wake(&e->waiter);
  }
}

// What an engine thread keeps between passes: its copy of the ring list
// (taken when |generation| moves) and the semaphores its stalled rings wait
// for, found by the last pass.
typedef struct engine_view {
  accel_drv_dma_ring_t **rings;
  uint32_t ring_count;
  uint32_t capacity;  // of |rings|, |stall_sems| and |stall_values|
  uint64_t seen;      // the generation |rings| was copied at
  uint32_t stall_count;
  accel_drv_semaphore_t **stall_sems;
  uint64_t *stall_values;
} engine_view_t;

// Runs the engine thread on its device's cores (from lib/topo; best effort:
// the engine runs unbound if the set is refused).
static void engine_bind_cpus(host_engine_t *e) {
  if (e->device->has_affinity) {
    (void)pthread_setaffinity_np(pthread_self(), sizeof(e->device->affinity),
                                 &e->device->affinity);
  }
}

// Grows |v|'s arrays to |cap| rings. On failure keeps the old capacity (the
// arrays that did grow stay, larger than needed).
static void engine_view_grow(engine_view_t *v, uint32_t cap) {
  accel_drv_dma_ring_t **ns = realloc(v->rings, cap * sizeof(*ns));
  if (ns != NULL) v->rings = ns;
  accel_drv_semaphore_t **nsem = realloc(v->stall_sems, cap * sizeof(*nsem));
  if (nsem != NULL) v->stall_sems = nsem;
  uint64_t *nval = realloc(v->stall_values, cap * sizeof(*nval));
  if (nval != NULL) v->stall_values = nval;
  if (ns != NULL && nsem != NULL && nval != NULL) {
    v->capacity = cap;
  }
}

// Tells a detaching thread waiting in engine_await_generation that the
// engine now holds generation |v->seen|'s ring list.
static void engine_ack_generation(host_engine_t *e, const engine_view_t *v) {
  // Seq_cst: the ack must precede the |ack_waiters| load (Dekker with
  // engine_await_generation); a detaching thread that sees it knows the
  // engine no longer holds the old snapshot.
  atomic_store_explicit(&e->seen_generation, v->seen, memory_order_seq_cst);
  if (atomic_load_explicit(&e->ack_waiters, memory_order_seq_cst) != 0) {
    atomic_fetch_add_explicit(&e->ack_word, 1, memory_order_release);
    accel_host_futex_wake_all(&e->ack_word);
  }
}

// Copies the ring list of generation |gen| into |v| and acknowledges it.
// Keeps the previous copy if growing it failed and retries on the next pass
// (the ring list stays ahead of |v->seen|).
static void engine_view_refresh(host_engine_t *e, engine_view_t *v,
                                uint64_t gen) {
  pthread_mutex_lock(&e->lock);
  if (e->ring_count > v->capacity) {
    engine_view_grow(v, e->ring_capacity);
  }
  if (e->ring_count <= v->capacity) {
    if (e->ring_count > 0) {  // both may be NULL with no rings
      memcpy(v->rings, e->rings, e->ring_count * sizeof(*v->rings));
    }
    v->ring_count = e->ring_count;
    v->seen = gen;
  }
  pthread_mutex_unlock(&e->lock);
  engine_ack_generation(e, v);
}

// One pass over the rings: services each, and collects the semaphores of
// the rings stalled on a WAIT. Returns whether any ring made progress;
// |*out_share_cpu| says whether one of those rings' producer runs on this
// CPU.
static bool engine_service_rings(engine_view_t *v, bool *out_share_cpu) {
  int my_cpu = sched_getcpu();
  bool progress = false;
  bool share_cpu = false;
  v->stall_count = 0;
  for (uint32_t i = 0; i < v->ring_count; ++i) {
    accel_dma_hw_desc_t *stall = NULL;
    if (service_ring(v->rings[i], &stall)) {
      progress = true;
      share_cpu |= atomic_load_explicit(&v->rings[i]->producer_cpu,
                                        memory_order_relaxed) == my_cpu;
    }
    if (stall != NULL) {
      v->stall_sems[v->stall_count] = stall->sem.semaphore;
      v->stall_values[v->stall_count] = stall->sem.value;
      v->stall_count++;
    }
  }
  *out_share_cpu = share_cpu && my_cpu >= 0;
  return progress;
}

// Whether anything the engine waits for happened: a doorbell, a stalled
// semaphore moved, a ring-list change or a stop.
static bool engine_has_news(host_engine_t *e, const engine_view_t *v) {
  for (uint32_t i = 0; i < v->ring_count; ++i) {
    if (ring_has_new(v->rings[i])) {
      return true;
    }
  }
  return stalled_moved(v->stall_count, v->stall_sems, v->stall_values) ||
         atomic_load_explicit(&e->generation, memory_order_relaxed) !=
             v->seen ||
         atomic_load_explicit(&e->stopping, memory_order_relaxed);
}

// Spins on the rings' tails (the doorbells), the stalled semaphores and the
// ring list for up to |spin_ns| before the caller parks: a parked engine
// takes tens of microseconds to wake. Returns whether news came.
static bool engine_spin_for_news(host_engine_t *e, const engine_view_t *v,
                                 uint64_t spin_ns) {
  accel_host_spin_t spin =
      accel_host_spin_start(spin_ns, ACCEL_HOST_SPIN_YIELD_NS);
  for (;;) {
    accel_host_cpu_relax();
    if (engine_has_news(e, v)) {
      return true;
    }
    if (!accel_host_spin_continue(&spin)) {
      return false;
    }
  }
}

static void *engine_main(void *arg) {
  host_engine_t *e = arg;
  engine_bind_cpus(e);
  uint64_t spin_ns = e->device->spin_ns;
  engine_view_t view = {.seen = UINT64_MAX};
  for (;;) {
    // Acquire: pairs with the release in attach/detach so that the ring list
    // read under the lock is the one of this generation.
    uint64_t gen = atomic_load_explicit(&e->generation, memory_order_acquire);
    if (gen != view.seen) {
      engine_view_refresh(e, &view, gen);
    }
    bool share_cpu;
    if (engine_service_rings(&view, &share_cpu)) {
      // The submitter runs on this CPU (an oversubscribed machine put us
      // together): it cannot see our signals, or submit more, while we spin,
      // so hand the CPU over now rather than after the spin's yield period.
      if (share_cpu) {
        sched_yield();
      }
      continue;
    }
    if (atomic_load_explicit(&e->stopping, memory_order_acquire)) {
      break;
    }
    if (!engine_spin_for_news(e, &view, spin_ns)) {
      engine_park(e, view.rings, view.ring_count, view.seen, view.stall_count,
                  view.stall_sems, view.stall_values);
    }
  }
  free(view.rings);
  free(view.stall_sems);
  free(view.stall_values);
  return NULL;
}

// Starts engine |e|'s thread; called with the dma lock held.
static accel_status_t engine_start_locked(host_engine_t *e) {
  ACCEL_ASSERT_HELD(&e->device->dma->lock);
  int rc = pthread_create(&e->thread, NULL, engine_main, e);
  if (rc != 0) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host copy engine %u: cannot start its thread: %s",
                       e->index, strerror(rc));
  }
  char name[16];
  snprintf(name, sizeof(name), "accel-ce%u", e->index);
  pthread_setname_np(e->thread, name);
  e->started = true;
  return ACCEL_OK;
}

// Waits until the engine has taken a snapshot of generation |gen| or later.
static void engine_await_generation(host_engine_t *e, uint64_t gen) {
  if (!e->started) {
    return;
  }
  wake_engine(e);
  atomic_fetch_add_explicit(&e->ack_waiters, 1, memory_order_seq_cst);
  for (;;) {
    uint32_t word = atomic_load_explicit(&e->ack_word, memory_order_seq_cst);
    // Seq_cst: Dekker with the engine's ack store then ack_waiters load.
    uint64_t seen =
        atomic_load_explicit(&e->seen_generation, memory_order_seq_cst);
    if (seen != UINT64_MAX && seen >= gen) {
      break;
    }
    accel_host_futex_wait(&e->ack_word, word, accel_host_deadline(1000000));
    wake_engine(e);
  }
  atomic_fetch_sub_explicit(&e->ack_waiters, 1, memory_order_relaxed);
}

// ---------------------------------------------------------------------------
// Driver entry points.
// ---------------------------------------------------------------------------

uint32_t accel_host_copy_engine_default(int32_t numa_node) {
  char path[96];
  snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist",
           numa_node);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  uint32_t count = cpus > 0 ? (uint32_t)cpus : 1;
  FILE *f = fopen(path, "r");
  if (f != NULL) {
    uint32_t n = 0;
    unsigned lo = 0, hi = 0;
    char sep = 0;
    int got;
    while ((got = fscanf(f, "%u", &lo)) == 1) {
      hi = lo;
      if (fscanf(f, "%c", &sep) == 1 && sep == '-') {
        if (fscanf(f, "%u", &hi) != 1) {
          break;
        }
        (void)fscanf(f, "%c", &sep);
      }
      n += hi >= lo ? hi - lo + 1 : 1;
    }
    fclose(f);
    if (n > 0) {
      count = n;
    }
  }
  return count > 4 ? 4 : count;
}

accel_status_t accel_host_dma_init(accel_drv_device_t *device,
                                   uint32_t engine_count) {
  if (engine_count == 0) {
    engine_count = accel_host_copy_engine_default(device->numa_node);
  }
  if (engine_count > MAX_ENGINES) {
    engine_count = MAX_ENGINES;
  }
  accel_host_dma_t *dma =
      calloc(1, sizeof(*dma) + engine_count * sizeof(host_engine_t));
  if (dma == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host copy engines: cannot allocate %u engines",
                       engine_count);
  }
  pthread_mutex_init(&dma->lock, NULL);
  dma->engine_count = engine_count;
  for (uint32_t i = 0; i < engine_count; ++i) {
    host_engine_t *e = &dma->engines[i];
    e->device = device;
    e->index = i;
    pthread_mutex_init(&e->lock, NULL);
    atomic_init(&e->seen_generation, UINT64_MAX);
    e->waiter.cancel = &e->kick;
  }
  device->dma = dma;
  return ACCEL_OK;
}

void accel_host_dma_fini(accel_drv_device_t *device) {
  accel_host_dma_t *dma = device->dma;
  if (dma == NULL) {
    return;
  }
  for (uint32_t i = 0; i < dma->engine_count; ++i) {
    host_engine_t *e = &dma->engines[i];
    if (e->started) {
      atomic_store_explicit(&e->stopping, 1, memory_order_seq_cst);
      wake_engine(e);
      pthread_join(e->thread, NULL);
    }
    free(e->rings);
    pthread_mutex_destroy(&e->lock);
  }
  pthread_mutex_destroy(&dma->lock);
  free(dma);
  device->dma = NULL;
}

uint32_t accel_host_copy_engine_count(accel_drv_device_t *device) {
  return device->dma != NULL ? device->dma->engine_count : 0;
}

accel_status_t accel_host_dma_ring_create(
    accel_drv_device_t *device, const accel_drv_dma_ring_params_t *params,
    accel_drv_dma_ring_t **out_ring, accel_dma_ring_mem_t *out_mem) {
  accel_host_dma_t *dma = device->dma;
  host_engine_t *e = &dma->engines[params->engine];
  accel_drv_dma_ring_t *r = aligned_alloc(64, sizeof(*r));
  if (r == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "dma ring: cannot allocate %zu bytes", sizeof(*r));
  }
  memset(r, 0, sizeof(*r));
  accel_status_t st = ACCEL_OK;
  size_t slots_bytes = (size_t)params->slot_count * sizeof(accel_dma_hw_desc_t);
  r->slots = aligned_alloc(64, slots_bytes);
  if (r->slots == NULL) {
    st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                     "dma ring: cannot allocate %u descriptors (%zu bytes)",
                     params->slot_count, slots_bytes);
    goto err_free_ring;
  }
  memset(r->slots, 0, slots_bytes);
  r->engine = e;
  r->fence = params->fence;
  atomic_init(&r->wake_at, UINT64_MAX);
  atomic_init(&r->producer_cpu, -1);
  r->mask = params->slot_count - 1;
  snprintf(r->name, sizeof(r->name), "%s",
           params->name != NULL ? params->name : "ring");

  pthread_mutex_lock(&dma->lock);
  if (!e->started) {
    st = engine_start_locked(e);
  }
  pthread_mutex_unlock(&dma->lock);
  if (st != ACCEL_OK) {
    goto err_free_slots;
  }
  pthread_mutex_lock(&e->lock);
  if (e->ring_count == e->ring_capacity) {
    uint32_t cap = e->ring_capacity ? e->ring_capacity * 2 : 8;
    accel_drv_dma_ring_t **nr = realloc(e->rings, cap * sizeof(*nr));
    if (nr == NULL) {
      pthread_mutex_unlock(&e->lock);
      st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "dma ring: cannot grow engine %u's ring list to %u",
                       e->index, cap);
      goto err_free_slots;
    }
    e->rings = nr;
    e->ring_capacity = cap;
  }
  e->rings[e->ring_count++] = r;
  // Seq_cst: the engine acquires the generation, then reads the list; and
  // the change must precede wake_engine's |parked| load.
  atomic_fetch_add_explicit(&e->generation, 1, memory_order_seq_cst);
  pthread_mutex_unlock(&e->lock);
  wake_engine(e);

  *out_mem = (accel_dma_ring_mem_t){
      .slots = r->slots,
      .slot_count = params->slot_count,
      .head = &r->head,
      .bytes = r->bytes,
      .failed = &r->failed,
  };
  *out_ring = r;
  return ACCEL_OK;

err_free_slots:
  free(r->slots);
err_free_ring:
  free(r);
  return st;
}

void accel_host_dma_ring_destroy(accel_drv_dma_ring_t *r) {
  host_engine_t *e = r->engine;
  pthread_mutex_lock(&e->lock);
  for (uint32_t i = 0; i < e->ring_count; ++i) {
    if (e->rings[i] == r) {
      e->rings[i] = e->rings[--e->ring_count];
      break;
    }
  }
  // Seq_cst: as in ring creation.
  uint64_t gen =
      atomic_fetch_add_explicit(&e->generation, 1, memory_order_seq_cst) + 1;
  pthread_mutex_unlock(&e->lock);
  // The engine may still hold |r| in its snapshot: wait for a newer one.
  engine_await_generation(e, gen);
  free(r->slots);
  free(r);
}

void accel_host_dma_ring_doorbell(accel_drv_dma_ring_t *r, uint64_t tail) {
  // Seq_cst (release at least): publishes the descriptor bytes written
  // before the new tail, and orders the store before wake_engine's |parked|
  // load (see engine_park).
  atomic_store_explicit(&r->tail, tail, memory_order_seq_cst);
  host_engine_t *e = r->engine;
  wake_engine(e);
  // The engine yields after a pass when its submitter shares its CPU (an
  // oversubscribed machine), so that the submitter sees its signals. The
  // submitter itself does not yield here: one that yielded at each doorbell
  // of a burst and an engine that yielded back after each descriptor kept
  // each other on one CPU, one descriptor per switch (measured: 5 us lost per
  // 1 MiB copy, a fifth of the engine's bandwidth, with the other CPU idle).
  // A submitter that then waits gives the engine the CPU as its wait starts
  // (host waits yield at their first clock check, then every 20 us).
  int cpu = sched_getcpu();
  if (cpu != atomic_load_explicit(&r->producer_cpu, memory_order_relaxed)) {
    atomic_store_explicit(&r->producer_cpu, cpu, memory_order_relaxed);
  }
}

accel_status_t accel_host_dma_ring_execute_now(accel_drv_dma_ring_t *r,
                                              const accel_dma_hw_desc_t *d) {
  // Acquire on the head: the engine's last writes for this ring (its byte
  // counters, the slots it retired) happen before our own; the next doorbell
  // (a release) orders ours before the engine's next pass.
  if (d->op != ACCEL_DMA_HW_COPY ||
      atomic_load_explicit(&r->failed, memory_order_acquire) != 0 ||
      atomic_load_explicit(&r->inject_status, memory_order_relaxed) != 0 ||
      // Armed faults apply on the engine (execute_fault), not here.
      atomic_load_explicit(&r->engine->device->faults_armed,
                           memory_order_relaxed) != 0 ||
      atomic_load_explicit(&r->abort, memory_order_relaxed) != 0 ||
      atomic_load_explicit(&r->head, memory_order_acquire) !=
          atomic_load_explicit(&r->tail, memory_order_relaxed)) {
    return ACCEL_ERROR_NOT_READY;
  }
  if (d->trace_seq != 0) {
    trace_desc_start(r, d);
  }
  transfer_bytes(r, d);
  // Not finish_signal: it reads |poisoned|, which the engine thread owns;
  // the checks above found the ring healthy.
  if (d->signal_semaphore != NULL) {
    accel_host_semaphore_signal_max(d->signal_semaphore, d->signal_value);
  }
  return ACCEL_OK;
}

accel_status_t accel_host_dma_ring_wait(accel_drv_dma_ring_t *r, uint64_t head,
                                        uint64_t timeout_ns) {
  if (atomic_load_explicit(&r->head, memory_order_acquire) >= head) {
    return ACCEL_OK;
  }
  uint64_t start = accel_host_now_ns();
  uint64_t deadline = accel_host_deadline(timeout_ns);
  uint64_t spin_ns = r->engine->device->spin_ns;
  // The first yield at the first clock read: the engine may be on our CPU.
  accel_host_spin_t spin =
      accel_host_spin_start(spin_ns < timeout_ns ? spin_ns : timeout_ns, 0);
  do {
    accel_host_cpu_relax();
    if (atomic_load_explicit(&r->head, memory_order_acquire) >= head) {
      return ACCEL_OK;
    }
  } while (accel_host_spin_continue(&spin));
  accel_status_t st = ACCEL_OK;
  for (;;) {
    uint32_t word = atomic_load_explicit(&r->head_word, memory_order_seq_cst);
    // Publish the target (the lowest of all waiters') so that the engine
    // wakes us only when it is reached. Seq_cst: Dekker with the engine's
    // head store then |wake_at| load.
    uint64_t at = atomic_load_explicit(&r->wake_at, memory_order_relaxed);
    while (head < at &&
           !atomic_compare_exchange_weak_explicit(&r->wake_at, &at, head,
                                                  memory_order_seq_cst,
                                                  memory_order_relaxed)) {
    }
    if (atomic_load_explicit(&r->head, memory_order_seq_cst) >= head) {
      break;
    }
    uint64_t now = accel_host_now_ns();
    if (now >= deadline) {
      st = accel_error(ACCEL_ERROR_TIMEOUT,
                       "dma ring \"%s\": no space after %llu ns (engine at "
                       "%llu, need %llu)",
                       r->name, (unsigned long long)(now - start),
                       (unsigned long long)atomic_load(&r->head),
                       (unsigned long long)head);
      break;
    }
    accel_host_futex_wait(&r->head_word, word, deadline);
  }
  return st;
}

void accel_host_dma_ring_abort(accel_drv_dma_ring_t *r) {
  // Seq_cst: like a doorbell, the flag must precede wake_engine's |parked|
  // load (see engine_park), so a parked engine wakes and sees it.
  atomic_store_explicit(&r->abort, 1, memory_order_seq_cst);
  host_engine_t *e = r->engine;
  // A stalled engine may be in a semaphore wait whatever |parked| says:
  // the kick cancels it.
  atomic_store_explicit(&e->kick, 1, memory_order_release);
  accel_host_waiter_wake(&e->waiter);
}

void accel_host_dma_ring_inject_fault(accel_drv_dma_ring_t *r,
                                      accel_status_t status) {
  // Relaxed: the hook is ordered with the descriptors it should hit by the
  // doorbell that publishes them.
  atomic_store_explicit(&r->inject_status, (int)status, memory_order_relaxed);
}
