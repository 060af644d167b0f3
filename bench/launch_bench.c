// accel-bench launch: the cost of getting work to the host device and back.
//
// Figures, each the median of per-pair ratios against a baseline measured
// in the same run, interleaved pair by pair (bench.h, docs/benchmarks.md):
//  - roundtrip_empty_command: enqueue an empty host call and synchronize,
//    against bare_spin_handoff (a function pointer handed to a thread that
//    spins on a shared cache line, and spinning for the answer). Target 1.5x.
//  - bare_futex_handoff: the same handoff when the worker is parked on a
//    futex, against the spinning one, for reference (what a runtime that
//    does not spin pays).
//  - roundtrip_parked_worker: the round trip when the worker parks at once
//    (spin 1 ns), against bare_futex_handoff.
//  - enqueue_ns_per_command: enqueueing 1,000,000 empty commands, amortized.
//    Target < 100 ns.
//  - completed_ns_per_command: time per command from the first enqueue to the
//    last completion, against a bare single-producer/single-consumer ring
//    measured the same way. Target 2x.
//  - bare_spsc_64B_ns_per_command: the bare ring with 64-byte command slots
//    (accel's command size), against the 8-byte one. Reported, no target.
//  - idle_cpu_fraction: CPU used by an idle runtime with a stream, per
//    50 ms sample. Target <= 0.01.
//  - empty_kernel_roundtrip: accel_launch of an empty kernel (one work-group,
//    registered with accel_kernel_register, so the full launch path: checks,
//    launch record, ACCEL_CMD_LAUNCH, exec on the worker) and synchronize,
//    against roundtrip_empty_command. Target 1.2x.
// Command buffers (accel_stream_execute), one group measured side by side:
//  - replay_ns_per_command: a 1,000-command buffer of empty host calls
//    executed back to back (as many commands as a batch), per command, from
//    the first execute to the last completion, against the bare 8-byte ring
//    measured the same way. Target 1.5x.
//  - replay_vs_submitted_ns_per_command: the same, against the same 1,000
//    host calls submitted one by one (accel_stream_host_call). Target: at
//    least 4x faster (ratio <= 0.25).
//  - decoder_step_replay_host_us: host time per token of a decoder step of
//    40 launches (each binding an activation slot of the table, a weight
//    buffer and an output slot, with the token's constants) executed from a
//    buffer, against the same 40 accel_launch calls. Target 3x lower
//    (ratio <= 0.333).
//  - roundtrip_one_command_buffer: execute of a one-host-call buffer and
//    synchronize, against the bare spinning handoff. Target 1.5x.
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "accel/accel.h"
#include "bench.h"

static inline void cpu_relax(void) {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// ---- bare spinning handoff ------------------------------------------------

typedef void (*work_fn_t)(void);
static void empty_work(void) {}

// The parked-worker baseline: the same handoff as bench_spin_handoff_ns, but
// both sides sleep on futexes.
typedef struct handoff {
  work_fn_t fn;
  _Alignas(64) _Atomic uint32_t futex_req;
  _Alignas(64) _Atomic uint32_t futex_done;
  _Atomic int stop;
} handoff_t;

static void futex_wait(_Atomic uint32_t *w, uint32_t v) {
  syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}
static void futex_wake(_Atomic uint32_t *w) {
  syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *handoff_worker(void *arg) {
  handoff_t *h = arg;
  uint64_t seen = 0;
  for (;;) {
    uint32_t v;
    while ((v = atomic_load(&h->futex_req)) == (uint32_t)seen &&
           !atomic_load(&h->stop)) {
      futex_wait(&h->futex_req, v);
    }
    if (atomic_load(&h->stop)) {
      return NULL;
    }
    seen++;
    h->fn();
    atomic_store(&h->futex_done, (uint32_t)seen);
    futex_wake(&h->futex_done);
  }
}

// Returns mean ns per futex round trip over |iters|: each starts after an
// idle pause so that the worker really is parked, and only the handoff
// itself is timed.
static double handoff_run(handoff_t *h, int iters, uint64_t *seq) {
  uint64_t total = 0;
  for (int i = 0; i < iters; ++i) {
    usleep(300);
    uint64_t t0 = bench_now_ns();
    uint64_t s = ++*seq;
    h->fn = empty_work;
    atomic_store(&h->futex_req, (uint32_t)s);
    futex_wake(&h->futex_req);
    uint32_t v;
    while ((v = atomic_load(&h->futex_done)) != (uint32_t)s) {
      futex_wait(&h->futex_done, v);
    }
    total += bench_now_ns() - t0;
  }
  return (double)total / iters;
}

static handoff_t *futex_handoff_start(pthread_t *thread) {
  handoff_t *h = aligned_alloc(64, sizeof(*h));
  if (h == NULL) {
    return NULL;
  }
  *h = (handoff_t){.fn = empty_work};
  if (pthread_create(thread, NULL, handoff_worker, h) != 0) {
    free(h);
    return NULL;
  }
  return h;
}

static void futex_handoff_stop(handoff_t *h, pthread_t thread,
                               uint64_t seq) {
  atomic_store(&h->stop, 1);
  atomic_store(&h->futex_req, (uint32_t)(seq + 1));
  futex_wake(&h->futex_req);
  pthread_join(thread, NULL);
  free(h);
}

// ---- bare SPSC ring ---------------------------------------------------------

#define SPSC_SIZE 4096u
typedef struct spsc {
  _Alignas(64) _Atomic uint64_t head;
  _Alignas(64) _Atomic uint64_t tail;
  _Alignas(64) work_fn_t slots[SPSC_SIZE];
  uint64_t total;
} spsc_t;

static void *spsc_consumer(void *arg) {
  spsc_t *q = arg;
  uint64_t head = 0;
  while (head < q->total) {
    uint64_t tail = atomic_load_explicit(&q->tail, memory_order_acquire);
    while (head < tail) {
      q->slots[head % SPSC_SIZE]();
      head++;
    }
    atomic_store_explicit(&q->head, head, memory_order_release);
    if (head == tail) {
      cpu_relax();
    }
  }
  return NULL;
}

static double measure_spsc(uint64_t n) {
  spsc_t *q = aligned_alloc(64, sizeof(*q));
  atomic_init(&q->head, 0);
  atomic_init(&q->tail, 0);
  q->total = n;
  pthread_t t;
  uint64_t t0 = bench_now_ns();
  pthread_create(&t, NULL, spsc_consumer, q);
  for (uint64_t i = 0; i < n; ++i) {
    while (i - atomic_load_explicit(&q->head, memory_order_acquire) >=
           SPSC_SIZE) {
      cpu_relax();
    }
    q->slots[i % SPSC_SIZE] = empty_work;
    atomic_store_explicit(&q->tail, i + 1, memory_order_release);
  }
  pthread_join(t, NULL);
  double ns = (double)(bench_now_ns() - t0) / (double)n;
  free(q);
  return ns;
}

// ---- bare SPSC ring of 64-byte commands --------------------------------------
// The same ring carrying commands the size of accel's (one 64-byte slot per
// command, written in place and published by a sequence word in the slot
// that the consumer polls): what the slot size alone costs against the
// 8-byte ring above. Reported for reference, no target.

typedef struct cmd64 {
  uint64_t header;
  _Atomic uint64_t seq;
  work_fn_t fn;
  uint64_t args[5];
} cmd64_t;

typedef struct spsc64 {
  _Alignas(64) _Atomic uint64_t head;
  _Alignas(64) cmd64_t slots[SPSC_SIZE];
  uint64_t total;
} spsc64_t;

static void *spsc64_consumer(void *arg) {
  spsc64_t *q = arg;
  uint64_t head = 0;
  while (head < q->total) {
    cmd64_t *c = &q->slots[head % SPSC_SIZE];
    if (atomic_load_explicit(&c->seq, memory_order_acquire) == head + 1) {
      c->fn();
      head++;
      if ((head & 63) == 0) {
        atomic_store_explicit(&q->head, head, memory_order_release);
      }
    } else {
      atomic_store_explicit(&q->head, head, memory_order_release);
      cpu_relax();
    }
  }
  return NULL;
}

static double measure_spsc64(uint64_t n) {
  spsc64_t *q = aligned_alloc(64, sizeof(*q));
  memset(q, 0, sizeof(*q));
  q->total = n;
  pthread_t t;
  uint64_t t0 = bench_now_ns();
  pthread_create(&t, NULL, spsc64_consumer, q);
  for (uint64_t i = 0; i < n; ++i) {
    while (i - atomic_load_explicit(&q->head, memory_order_acquire) >=
           SPSC_SIZE - 64) {
      cpu_relax();
    }
    cmd64_t *slot = &q->slots[i % SPSC_SIZE];
    slot->header = 1;
    slot->fn = empty_work;
    for (int k = 0; k < 5; ++k) {
      slot->args[k] = i;
    }
    atomic_store_explicit(&slot->seq, i + 1, memory_order_release);
  }
  pthread_join(t, NULL);
  double ns = (double)(bench_now_ns() - t0) / (double)n;
  free(q);
  return ns;
}

// ---- accel -------------------------------------------------------------------

static accel_status_t empty_host_fn(void *user_data) { return ACCEL_OK; }

static int32_t empty_kernel(const accel_kernel_dispatch_t *dispatch,
                            const accel_kernel_workgroup_t *workgroup) {
  return 0;
}

static int check(accel_status_t st, const char *what) {
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-bench launch: %s: %s: %s\n", what,
            accel_status_name(st), accel_last_error());
    return 1;
  }
  return 0;
}

// |n| empty host calls, each enqueued and synchronized before the next.
static int host_round_trips(accel_stream_t *s, int n) {
  for (int i = 0; i < n; ++i) {
    if (check(accel_stream_host_call(s, empty_host_fn, NULL), "enqueue") ||
        check(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE), "sync")) {
      return 1;
    }
  }
  return 0;
}

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
         (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

// What the launch groups share. Each group's measure takes one run's
// samples side by side: the baseline first, then the subject.
typedef struct launch_bench {
  accel_stream_t *s;
  accel_device_t *dev;
  bool quick;
  int iters;   // round trips per sample
  int piters;  // parked round trips per sample (each after an idle pause)
  uint64_t batch;
  // The parked group's futex handoff and runtime whose worker parks at once.
  handoff_t *futex;
  pthread_t futex_thread;
  uint64_t futex_seq;
  accel_runtime_t *prt;
  accel_stream_t *ps;
  accel_kernel_t *kernel;
} launch_bench_t;

enum { RT_SPIN, RT_ACCEL, RT_SLOTS };

// Round trip: the bare spinning handoff (a fresh handoff thread each time,
// so that no third thread spins meanwhile), then enqueue + synchronize one
// at a time, warmed up like the handoff sample: the worker parked while the
// handoff ran, and its first command pays the wake-up.
static int roundtrip_measure(void *ctx, int run, double *out) {
  launch_bench_t *b = ctx;
  int iters = run < 0 ? b->iters / 10 : b->iters;  // a short warm-up
  out[RT_SPIN] = bench_spin_handoff_ns(iters) / 1000.0;  // us
  if (host_round_trips(b->s, iters / 10 + 1)) {
    return 1;
  }
  uint64_t t0 = bench_now_ns();
  if (host_round_trips(b->s, iters)) {
    return 1;
  }
  out[RT_ACCEL] = (double)(bench_now_ns() - t0) / iters / 1000.0;
  return 0;
}

static const bench_figure_t k_roundtrip_figures[] = {
    {"roundtrip_empty_command", "us", RT_ACCEL, "bare_spin_handoff", RT_SPIN,
     "<= 1.5", BENCH_PAIRED, false},
};

enum { PK_SPIN, PK_FUTEX, PK_ACCEL, PK_SLOTS };

// The parked figures: a runtime whose worker parks at once (spin 1 ns), what
// a runtime that never spins pays, and the bare futex handoff.
static int parked_setup(void *ctx) {
  launch_bench_t *b = ctx;
  accel_runtime_options_t opts;
  accel_runtime_options_init(&opts);
  opts.spin_ns = 1;
  accel_device_t *pdev = NULL;
  if (check(accel_runtime_create(&opts, &b->prt), "runtime (parked)")) {
    return 1;
  }
  if (check(accel_device_get(b->prt, 0, &pdev), "device (parked)") ||
      check(accel_stream_create(pdev, NULL, &b->ps), "stream (parked)")) {
    goto err_destroy_runtime;
  }
  b->futex = futex_handoff_start(&b->futex_thread);
  if (b->futex == NULL) {
    fprintf(stderr, "accel-bench launch: cannot start the futex handoff\n");
    goto err_destroy_stream;
  }
  b->futex_seq = 0;
  return 0;
err_destroy_stream:
  accel_stream_destroy(b->ps);
err_destroy_runtime:
  accel_runtime_destroy(b->prt);
  return 1;
}

static void parked_teardown(void *ctx) {
  launch_bench_t *b = ctx;
  futex_handoff_stop(b->futex, b->futex_thread, b->futex_seq);
  accel_stream_destroy(b->ps);
  accel_runtime_destroy(b->prt);
}

// Mean ns of |iters| parked round trips, each after an idle pause so that
// the worker really is parked; only the round trip itself is timed.
static double parked_round_trips(accel_stream_t *ps, int iters) {
  uint64_t total = 0;
  for (int i = 0; i < iters; ++i) {
    usleep(300);
    uint64_t t0 = bench_now_ns();
    accel_stream_host_call(ps, empty_host_fn, NULL);
    accel_stream_synchronize(ps, ACCEL_TIMEOUT_INFINITE);
    total += bench_now_ns() - t0;
  }
  return (double)total / iters;
}

static int parked_measure(void *ctx, int run, double *out) {
  (void)run;
  launch_bench_t *b = ctx;
  // The spinning handoff settles in far fewer round trips than the parked
  // ones take time: a tenth of the round-trip figure's.
  out[PK_SPIN] = bench_spin_handoff_ns(b->iters / 10) / 1000.0;
  out[PK_FUTEX] = handoff_run(b->futex, b->piters, &b->futex_seq) / 1000.0;
  out[PK_ACCEL] = parked_round_trips(b->ps, b->piters) / 1000.0;
  return 0;
}

static const bench_figure_t k_parked_figures[] = {
    {"bare_futex_handoff", "us", PK_FUTEX, "bare_spin_handoff", PK_SPIN, NULL,
     BENCH_PAIRED, false},
    {"roundtrip_parked_worker", "us", PK_ACCEL, "bare_futex_handoff",
     PK_FUTEX, NULL, BENCH_PAIRED, false},
};

// |iters| launches of |kernel|, each synchronized.
static int kernel_round_trips(accel_stream_t *s, accel_kernel_t *kernel,
                              int iters) {
  accel_launch_desc_t ld = {.struct_size = sizeof(ld),
                            .workgroup_count = {1, 1, 1}};
  for (int i = 0; i < iters; ++i) {
    if (check(accel_launch(s, kernel, &ld), "launch") ||
        check(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE), "sync")) {
      return 1;
    }
  }
  return 0;
}

static int kernel_setup(void *ctx) {
  launch_bench_t *b = ctx;
  accel_kernel_desc_t kd = {.struct_size = sizeof(kd),
                            .abi_version = ACCEL_KERNEL_ABI_VERSION,
                            .name = "empty", .fn = empty_kernel};
  return check(accel_kernel_register(b->dev, &kd, &b->kernel), "kernel");
}

static void kernel_teardown(void *ctx) {
  launch_bench_t *b = ctx;
  accel_kernel_release(b->kernel);
}

enum { KR_HOST, KR_KERNEL, KR_SLOTS };

// Empty kernel: the host-command loop, then the same loop through
// accel_launch, so that both see the same machine.
static int kernel_measure(void *ctx, int run, double *out) {
  launch_bench_t *b = ctx;
  int iters = run < 0 ? b->iters / 10 : b->iters;
  uint64_t t0 = bench_now_ns();
  if (host_round_trips(b->s, iters)) {
    return 1;
  }
  uint64_t t1 = bench_now_ns();
  if (kernel_round_trips(b->s, b->kernel, iters)) {
    return 1;
  }
  out[KR_HOST] = (double)(t1 - t0) / iters / 1000.0;  // us
  out[KR_KERNEL] = (double)(bench_now_ns() - t1) / iters / 1000.0;
  return 0;
}

static const bench_figure_t k_kernel_figures[] = {
    {"empty_kernel_roundtrip", "us", KR_KERNEL, "roundtrip_empty_command",
     KR_HOST, "<= 1.2", BENCH_PAIRED, false},
};

enum { BT_ENQ, BT_DONE, BT_BARE, BT_BARE64, BT_SLOTS };

// Batches: enqueue cost and completion rate, with a run of each bare ring,
// before the accel batch in every other run, so that neither side always
// comes first after the other's threads.
static int batch_measure(void *ctx, int run, double *out) {
  launch_bench_t *b = ctx;
  uint64_t batch = run < 0 ? b->batch / 10 : b->batch;  // a short warm-up
  if (run % 2 != 0) {
    out[BT_BARE] = measure_spsc(batch);
    out[BT_BARE64] = measure_spsc64(batch);
  }
  uint64_t t0 = bench_now_ns();
  for (uint64_t i = 0; i < batch; ++i) {
    accel_stream_host_call(b->s, empty_host_fn, NULL);
  }
  uint64_t t1 = bench_now_ns();
  if (check(accel_stream_synchronize(b->s, ACCEL_TIMEOUT_INFINITE), "sync")) {
    return 1;
  }
  uint64_t t2 = bench_now_ns();
  out[BT_ENQ] = (double)(t1 - t0) / (double)batch;
  out[BT_DONE] = (double)(t2 - t0) / (double)batch;
  if (run % 2 == 0) {
    out[BT_BARE] = measure_spsc(batch);
    out[BT_BARE64] = measure_spsc64(batch);
  }
  return 0;
}

static const bench_figure_t k_batch_figures[] = {
    {"enqueue_ns_per_command", "ns", BT_ENQ, NULL, 0, "< 100", BENCH_PAIRED,
     false},
    {"completed_ns_per_command", "ns", BT_DONE, "bare_spsc_ns_per_command",
     BT_BARE, "<= 2", BENCH_PAIRED, false},
    {"bare_spsc_64B_ns_per_command", "ns", BT_BARE64,
     "bare_spsc_ns_per_command", BT_BARE, NULL, BENCH_PAIRED, false},
};

// Idle: a runtime with a stream and nothing to do must not burn CPU. Each
// sample waits for the worker to park, then measures 50 ms.
static int idle_measure(void *ctx, int run, double *out) {
  (void)ctx, (void)run;
  usleep(20000);
  double c0 = cpu_seconds();
  uint64_t w0 = bench_now_ns();
  usleep(50000);
  out[0] = (cpu_seconds() - c0) / ((double)(bench_now_ns() - w0) * 1e-9);
  return 0;
}

static const bench_figure_t k_idle_figures[] = {
    {"idle_cpu_fraction", "cpu/s", 0, NULL, 0, "<= 0.01", BENCH_PAIRED,
     false},
};

#define FIGURES(f) .figures = (f), .figure_count = sizeof(f) / sizeof((f)[0])

#define CB_COMMANDS 1000u
#define DECODER_LAUNCHES 40u

enum {
  CB_SLOT_BARE,        // bare 8-byte ring, ns per command
  CB_SLOT_REPLAY,      // replays of the 1,000-command buffer, ns per command
  CB_SLOT_SUBMITTED,   // the same host calls one by one, ns per command
  CB_SLOT_SPIN,        // bare spinning handoff, us
  CB_SLOT_ROUNDTRIP,   // one-command buffer round trip, us
  CB_SLOT_STEP_DIRECT, // decoder step by accel_launch, host us per token
  CB_SLOT_STEP_REPLAY, // decoder step by accel_stream_execute, host us
  CB_SLOTS,
};

typedef struct cb_bench {
  launch_bench_t *b;
  accel_command_buffer_t *calls;  // CB_COMMANDS empty host calls
  accel_command_buffer_t *one;    // one empty host call
  accel_command_buffer_t *step;   // the decoder step
  accel_kernel_t *kernel;
  accel_buffer_t *weights[DECODER_LAUNCHES];
  accel_buffer_t *act[2];  // activations, swapped every token
  int tokens;
} cb_bench_t;

// A decoder layer's kernel shape: reads an activation and a weight, writes
// the next activation; the body is empty (host time is what is measured).
static int32_t step_kernel(const accel_kernel_dispatch_t *dispatch,
                           const accel_kernel_workgroup_t *workgroup) {
  return 0;
}

static const accel_kernel_binding_decl_t k_step_bindings[3] = {
    {.name = "x", .access = ACCEL_KERNEL_ACCESS_READ, .alignment = 64,
     .min_size_bytes = 4096},
    {.name = "w", .access = ACCEL_KERNEL_ACCESS_READ, .alignment = 64,
     .min_size_bytes = 4096},
    {.name = "y", .access = ACCEL_KERNEL_ACCESS_WRITE, .alignment = 64,
     .min_size_bytes = 4096},
};

static accel_buffer_t *cb_bench_buffer(accel_device_t *dev) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 4096};
  accel_buffer_t *b = NULL;
  return check(accel_buffer_alloc(dev, &d, &b), "buffer") ? NULL : b;
}

static int cb_record_step(cb_bench_t *c) {
  accel_command_buffer_desc_t d = {.struct_size = sizeof(d), .name = "step"};
  if (check(accel_command_buffer_create(c->b->dev, &d, &c->step), "step")) {
    return 1;
  }
  for (uint32_t i = 0; i < DECODER_LAUNCHES; ++i) {
    // Layer i reads slot i % 2 and writes the other: the table names the
    // token's two activation buffers.
    accel_command_buffer_ref_t binds[3] = {
        {.slot = i % 2},
        {.buffer = c->weights[i]},
        {.slot = (i + 1) % 2}};
    accel_command_buffer_launch_desc_t ld = {
        .struct_size = sizeof(ld),
        .workgroup_count = {1, 1, 1},
        .binding_count = 3,
        .constants_size = 8,
        .bindings = binds,
        .flags = ACCEL_COMMAND_BUFFER_LAUNCH_CONSTANTS_FROM_EXECUTE};
    if (check(accel_command_buffer_launch(c->step, c->kernel, &ld),
              "record launch")) {
      return 1;
    }
  }
  return check(accel_command_buffer_finalize(c->step), "finalize step");
}

static void cb_teardown(void *arg);

static int cb_setup_all(cb_bench_t *c) {
  accel_device_t *dev = c->b->dev;
  accel_command_buffer_desc_t d = {.struct_size = sizeof(d), .name = "calls"};
  if (check(accel_command_buffer_create(dev, &d, &c->calls), "calls") ||
      check(accel_command_buffer_create(dev, NULL, &c->one), "one")) {
    return 1;
  }
  for (uint32_t i = 0; i < CB_COMMANDS; ++i) {
    if (check(accel_command_buffer_host_call(c->calls, empty_host_fn, NULL),
              "record")) {
      return 1;
    }
  }
  if (check(accel_command_buffer_host_call(c->one, empty_host_fn, NULL),
            "record") ||
      check(accel_command_buffer_finalize(c->calls), "finalize") ||
      check(accel_command_buffer_finalize(c->one), "finalize")) {
    return 1;
  }
  accel_kernel_desc_t kd = {.struct_size = sizeof(kd),
                            .abi_version = ACCEL_KERNEL_ABI_VERSION,
                            .name = "layer",
                            .fn = step_kernel,
                            .binding_count = 3,
                            .constants_size = 8,
                            .bindings = k_step_bindings};
  if (check(accel_kernel_register(dev, &kd, &c->kernel), "kernel")) {
    return 1;
  }
  for (uint32_t i = 0; i < DECODER_LAUNCHES; ++i) {
    if ((c->weights[i] = cb_bench_buffer(dev)) == NULL) {
      return 1;
    }
  }
  if ((c->act[0] = cb_bench_buffer(dev)) == NULL ||
      (c->act[1] = cb_bench_buffer(dev)) == NULL) {
    return 1;
  }
  return cb_record_step(c);
}

static int cb_setup(void *arg) {
  if (cb_setup_all(arg)) {
    cb_teardown(arg);  // releases what was made (NULLs are ignored)
    return 1;
  }
  return 0;
}

static void cb_teardown(void *arg) {
  cb_bench_t *c = arg;
  accel_stream_synchronize(c->b->s, ACCEL_TIMEOUT_INFINITE);
  accel_command_buffer_release(c->calls);
  accel_command_buffer_release(c->one);
  accel_command_buffer_release(c->step);
  for (uint32_t i = 0; i < DECODER_LAUNCHES; ++i) {
    accel_buffer_release(c->weights[i]);
  }
  accel_buffer_release(c->act[0]);
  accel_buffer_release(c->act[1]);
  accel_kernel_release(c->kernel);
}

// Host time (ns) to submit the decoder step of |token|: 40 launches, or one
// execute; then waits for it, untimed.
static int cb_step(cb_bench_t *c, int token, bool replay, uint64_t *ns) {
  accel_stream_t *s = c->b->s;
  accel_buffer_t *x = c->act[token % 2], *y = c->act[(token + 1) % 2];
  uint32_t constants[2] = {(uint32_t)token, 0};
  uint64_t t0 = bench_now_ns();
  if (replay) {
    accel_command_buffer_binding_t table[2] = {{.buffer = x}, {.buffer = y}};
    accel_command_buffer_execute_desc_t ed = {.struct_size = sizeof(ed),
                                              .binding_count = 2,
                                              .bindings = table,
                                              .constants = constants,
                                              .constants_size = 8};
    if (check(accel_stream_execute(s, c->step, &ed), "execute step")) {
      return 1;
    }
  } else {
    for (uint32_t i = 0; i < DECODER_LAUNCHES; ++i) {
      accel_launch_binding_t binds[3] = {
          {.buffer = i % 2 ? y : x},
          {.buffer = c->weights[i]},
          {.buffer = i % 2 ? x : y}};
      accel_launch_desc_t ld = {.struct_size = sizeof(ld),
                                .workgroup_count = {1, 1, 1},
                                .binding_count = 3,
                                .constants_size = 8,
                                .bindings = binds,
                                .constants = constants};
      if (check(accel_launch(s, c->kernel, &ld), "launch")) {
        return 1;
      }
    }
  }
  *ns += bench_now_ns() - t0;
  return check(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE), "sync");
}

// ns per command of |reps| back-to-back replays of the 1,000-command buffer
// (|replay|) or of the same host calls submitted one by one, to the last
// completion.
static int cb_throughput(cb_bench_t *c, uint64_t reps, bool replay,
                         double *out) {
  accel_stream_t *s = c->b->s;
  uint64_t t0 = bench_now_ns();
  for (uint64_t r = 0; r < reps; ++r) {
    if (replay) {
      if (check(accel_stream_execute(s, c->calls, NULL), "execute")) {
        return 1;
      }
      continue;
    }
    for (uint32_t i = 0; i < CB_COMMANDS; ++i) {
      accel_stream_host_call(s, empty_host_fn, NULL);
    }
  }
  if (check(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE), "sync")) {
    return 1;
  }
  *out = (double)(bench_now_ns() - t0) / (double)(reps * CB_COMMANDS);
  return 0;
}

static int cb_measure(void *arg, int run, double *out) {
  cb_bench_t *c = arg;
  launch_bench_t *b = c->b;
  uint64_t reps = b->batch / CB_COMMANDS;
  // Alternate which side comes first, as measure_batches does.
  bool replay_first = run % 2 == 0;
  out[CB_SLOT_BARE] = measure_spsc(b->batch);
  if (cb_throughput(c, reps, replay_first,
                    &out[replay_first ? CB_SLOT_REPLAY : CB_SLOT_SUBMITTED]) ||
      cb_throughput(c, reps, !replay_first,
                    &out[replay_first ? CB_SLOT_SUBMITTED : CB_SLOT_REPLAY])) {
    return 1;
  }
  out[CB_SLOT_SPIN] = bench_spin_handoff_ns(b->iters) / 1000.0;
  int iters = b->iters;
  for (int i = 0; i < iters / 10 + 1; ++i) {  // the worker parked meanwhile
    if (check(accel_stream_execute(b->s, c->one, NULL), "execute") ||
        check(accel_stream_synchronize(b->s, ACCEL_TIMEOUT_INFINITE), "sync")) {
      return 1;
    }
  }
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < iters; ++i) {
    if (check(accel_stream_execute(b->s, c->one, NULL), "execute") ||
        check(accel_stream_synchronize(b->s, ACCEL_TIMEOUT_INFINITE), "sync")) {
      return 1;
    }
  }
  out[CB_SLOT_ROUNDTRIP] = (double)(bench_now_ns() - t0) / iters / 1000.0;
  uint64_t direct = 0, replay = 0;
  for (int t = 0; t < c->tokens; ++t) {
    if (cb_step(c, t, t % 2 == 0, t % 2 == 0 ? &replay : &direct)) {
      return 1;
    }
  }
  out[CB_SLOT_STEP_DIRECT] = (double)direct / (c->tokens / 2) / 1000.0;
  out[CB_SLOT_STEP_REPLAY] = (double)replay / (c->tokens / 2) / 1000.0;
  return 0;
}

static const bench_figure_t k_cb_figures[] = {
    {.name = "replay_ns_per_command", .unit = "ns",
     .value_slot = CB_SLOT_REPLAY, .baseline_name = "bare_spsc_ns_per_command",
     .baseline_slot = CB_SLOT_BARE, .target = "<= 1.5"},
    {.name = "replay_vs_submitted_ns_per_command", .unit = "ns",
     .value_slot = CB_SLOT_REPLAY,
     .baseline_name = "submitted_ns_per_command",
     .baseline_slot = CB_SLOT_SUBMITTED, .target = "<= 0.25"},
    {.name = "decoder_step_replay_host_us", .unit = "us",
     .value_slot = CB_SLOT_STEP_REPLAY,
     .baseline_name = "decoder_step_launches_host_us",
     .baseline_slot = CB_SLOT_STEP_DIRECT, .target = "<= 0.333"},
    {.name = "roundtrip_one_command_buffer", .unit = "us",
     .value_slot = CB_SLOT_ROUNDTRIP, .baseline_name = "bare_spin_handoff",
     .baseline_slot = CB_SLOT_SPIN, .target = "<= 1.5"},
};

static int measure_command_buffers(bench_report_t *report, launch_bench_t *b) {
  cb_bench_t c = {.b = b, .tokens = b->quick ? 100 : 1000};
  const bench_group_t group = {
      .runs = b->quick ? 5 : 11,
      .slots = CB_SLOTS,
      .setup = cb_setup,
      .measure = cb_measure,
      .teardown = cb_teardown,
      .figures = k_cb_figures,
      .figure_count = sizeof(k_cb_figures) / sizeof(k_cb_figures[0]),
  };
  return bench_group_run(report, &group, &c);
}

int accel_bench_launch(const bench_args_t *args) {
  launch_bench_t b = {.quick = args->quick,
                      .iters = args->quick ? 2000 : 20000,
                      .piters = args->quick ? 20 : 100,
                      .batch = args->quick ? 100000 : 1000000};
  int runs = args->quick ? 5 : 11;
  const bench_group_t groups[] = {
      {.runs = runs, .slots = RT_SLOTS, .measure = roundtrip_measure,
       FIGURES(k_roundtrip_figures)},
      {.runs = runs, .slots = PK_SLOTS, .setup = parked_setup,
       .measure = parked_measure, .teardown = parked_teardown,
       FIGURES(k_parked_figures)},
      {.runs = runs, .slots = KR_SLOTS, .setup = kernel_setup,
       .measure = kernel_measure, .teardown = kernel_teardown,
       FIGURES(k_kernel_figures)},
      {.runs = runs, .slots = BT_SLOTS, .measure = batch_measure,
       FIGURES(k_batch_figures)},
      {.runs = args->quick ? 3 : 5, .slots = 1, .measure = idle_measure,
       .max_runs = 40, FIGURES(k_idle_figures)},
  };
  accel_runtime_t *rt = NULL;
  if (check(accel_runtime_create(NULL, &rt), "runtime")) {
    return 1;
  }
  if (check(accel_device_get(rt, 0, &b.dev), "device") ||
      check(accel_stream_create(b.dev, NULL, &b.s), "stream")) {
    accel_runtime_destroy(rt);
    return 1;
  }
  bench_report_t report;
  bench_report_init(&report, "launch", b.dev);
  int failed = 0;
  for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]) && !failed; ++i) {
    failed = bench_group_run(&report, &groups[i], &b);
  }
  if (!failed) {
    failed = measure_command_buffers(&report, &b);
  }
  accel_stream_destroy(b.s);
  accel_runtime_destroy(rt);
  return failed ? 1 : bench_print(&report, args->json);
}
