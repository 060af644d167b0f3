// accel-bench launch: the cost of getting work to the host device and back.
//
// Figures (medians of repeated runs after a warm-up; ratios are medians of
// the per-run ratios of samples taken side by side, bench_add_paired):
//  - roundtrip_empty_command: enqueue an empty host call and synchronize,
//    against bare_spin_handoff (a function pointer handed to a thread that
//    spins on a shared cache line, and spinning for the answer). Target 1.5x.
//  - bare_futex_handoff: the same handoff when the worker is parked on a
//    futex, for reference (what a runtime that does not spin pays).
//  - enqueue_ns_per_command: enqueueing 1,000,000 empty commands, amortized.
//    Target < 100 ns.
//  - completed_ns_per_command: time per command from the first enqueue to the
//    last completion, against a bare single-producer/single-consumer ring
//    measured the same way. Target 2x.
//  - bare_spsc_64B_ns_per_command: the bare ring with 64-byte command slots
//    (accel's command size), against the 8-byte one. Reported, no target.
//  - idle_cpu_fraction: CPU used by an idle runtime with a stream over 200 ms.
//  - empty_kernel_roundtrip: accel_launch of an empty kernel (one work-group,
//    registered with accel_kernel_register, so the full launch path: checks,
//    launch record, ACCEL_CMD_LAUNCH, exec on the worker) and synchronize,
//    against roundtrip_empty_command measured in the same run, interleaved
//    run by run with it.
//    Target 1.2x.
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

static double measure_futex_handoff(int runs, int iters) {
  handoff_t *h = aligned_alloc(64, sizeof(*h));
  *h = (handoff_t){.fn = empty_work};
  pthread_t t;
  pthread_create(&t, NULL, handoff_worker, h);
  uint64_t seq = 0;
  handoff_run(h, iters / 10 + 1, &seq);  // warm-up
  double samples[64];
  for (int r = 0; r < runs; ++r) {
    samples[r] = handoff_run(h, iters, &seq);
  }
  atomic_store(&h->stop, 1);
  atomic_store(&h->futex_req, (uint32_t)(seq + 1));
  futex_wake(&h->futex_req);
  pthread_join(t, NULL);
  free(h);
  return bench_median(samples, runs);
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

// Every sample the launch figures come from. The steps are not a
// bench_group_t: their warm-ups differ (per sample, per step, none), and
// figures of one step take their baselines from another (the futex handoff
// against the spinning one; the parked round trip against the futex
// handoff).
typedef struct launch_bench {
  accel_stream_t *s;
  accel_device_t *dev;
  bool quick;
  int runs, iters, batch_runs;
  uint64_t batch;
  double parked;     // bare futex handoff, ns
  double parked_rt;  // round trip with a worker that parks at once, ns
  double rt_samples[64], spin_samples[64];
  double kr_samples[64], hc_samples[64];
  double enq[32], done[32], bare[32], bare64[32];
  double idle;
} launch_bench_t;

// Round trip: enqueue + synchronize, one at a time. Each run of it is
// paired with a run of the bare spinning handoff just before it (a fresh
// handoff thread each time, so that no third thread spins meanwhile), so
// that both see the same machine load.
static int measure_roundtrip(launch_bench_t *b) {
  for (int r = 0; r < b->runs; ++r) {
    b->spin_samples[r] = bench_spin_handoff_ns(b->iters);
    // Warmed up like the handoff sample (bench_spin_handoff_ns): the worker
    // parked while the handoff ran, and its first command pays the wake-up.
    if (host_round_trips(b->s, b->iters / 10 + 1)) {
      return 1;
    }
    uint64_t t0 = bench_now_ns();
    if (host_round_trips(b->s, b->iters)) {
      return 1;
    }
    b->rt_samples[r] = (double)(bench_now_ns() - t0) / b->iters / 1000.0;
    b->spin_samples[r] /= 1000.0;  // us
  }
  return 0;
}

// The same round trip when the worker parks at once (spin 1 ns): what a
// runtime that never spins pays, against the bare futex handoff.
static int measure_parked(launch_bench_t *b) {
  accel_runtime_options_t opts;
  accel_runtime_options_init(&opts);
  opts.spin_ns = 1;
  accel_runtime_t *prt = NULL;
  accel_device_t *pdev = NULL;
  accel_stream_t *ps = NULL;
  if (check(accel_runtime_create(&opts, &prt), "runtime (parked)") ||
      check(accel_device_get(prt, 0, &pdev), "device (parked)") ||
      check(accel_stream_create(pdev, NULL, &ps), "stream (parked)")) {
    return 1;
  }
  int piters = b->quick ? 20 : 100;
  double ps_samples[64];
  for (int r = 0; r < b->runs; ++r) {
    uint64_t total = 0;
    for (int i = 0; i < piters; ++i) {
      usleep(300);  // the worker is parked by now
      uint64_t t0 = bench_now_ns();
      accel_stream_host_call(ps, empty_host_fn, NULL);
      accel_stream_synchronize(ps, ACCEL_TIMEOUT_INFINITE);
      total += bench_now_ns() - t0;
    }
    ps_samples[r] = (double)total / piters;
  }
  b->parked_rt = bench_median(ps_samples, b->runs);
  accel_stream_destroy(ps);
  accel_runtime_destroy(prt);
  return 0;
}

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

// Empty kernel: the host-command loop through accel_launch, interleaved with
// the host-command loop so that both see the same machine (other processes
// on a shared host shift absolute times).
static int measure_kernel(launch_bench_t *b) {
  accel_kernel_desc_t kd = {.struct_size = sizeof(kd),
                            .abi_version = ACCEL_KERNEL_ABI_VERSION,
                            .name = "empty", .fn = empty_kernel};
  accel_kernel_t *kernel = NULL;
  if (check(accel_kernel_register(b->dev, &kd, &kernel), "kernel")) {
    return 1;
  }
  int failed = kernel_round_trips(b->s, kernel, b->iters / 10);  // warm-up
  for (int r = 0; r < b->runs && !failed; ++r) {
    uint64_t t0 = bench_now_ns();
    failed = host_round_trips(b->s, b->iters);
    uint64_t t1 = bench_now_ns();
    failed = failed || kernel_round_trips(b->s, kernel, b->iters);
    b->hc_samples[r] = (double)(t1 - t0) / b->iters / 1000.0;  // us
    b->kr_samples[r] = (double)(bench_now_ns() - t1) / b->iters / 1000.0;
  }
  accel_kernel_release(kernel);
  return failed;
}

static void measure_bare_rings(launch_bench_t *b, int r) {
  b->bare[r] = measure_spsc(b->batch);
  b->bare64[r] = measure_spsc64(b->batch);
}

// Batches: enqueue cost and completion rate. Each accel batch is paired
// with a run of each bare ring, before it in every other pair, so that
// neither side always comes first after the other's threads.
static int measure_batches(launch_bench_t *b) {
  for (int r = 0; r < b->batch_runs; ++r) {
    if (r % 2 == 1) {
      measure_bare_rings(b, r);
    }
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < b->batch; ++i) {
      accel_stream_host_call(b->s, empty_host_fn, NULL);
    }
    uint64_t t1 = bench_now_ns();
    if (check(accel_stream_synchronize(b->s, ACCEL_TIMEOUT_INFINITE),
              "sync")) {
      return 1;
    }
    uint64_t t2 = bench_now_ns();
    b->enq[r] = (double)(t1 - t0) / (double)b->batch;
    b->done[r] = (double)(t2 - t0) / (double)b->batch;
    if (r % 2 == 0) {
      measure_bare_rings(b, r);
    }
  }
  return 0;
}

// Idle: a runtime with a stream and nothing to do must not burn CPU.
static void measure_idle(launch_bench_t *b) {
  usleep(20000);
  double c0 = cpu_seconds();
  uint64_t w0 = bench_now_ns();
  usleep(200000);
  b->idle = (cpu_seconds() - c0) / ((double)(bench_now_ns() - w0) * 1e-9);
}

static void add_figures(bench_report_t *report, const launch_bench_t *b) {
  int runs = b->runs, batch_runs = b->batch_runs;
  double spin = bench_median(b->spin_samples, runs);  // us
  bench_add_paired(report, "roundtrip_empty_command", b->rt_samples, "us",
                   "bare_spin_handoff", b->spin_samples, runs, "<= 1.5");
  bench_add(report, "bare_futex_handoff", b->parked / 1000.0, "us",
            "bare_spin_handoff", spin, NULL, runs);
  bench_add(report, "roundtrip_parked_worker", b->parked_rt / 1000.0, "us",
            "bare_futex_handoff", b->parked / 1000.0, NULL, runs);
  bench_add(report, "enqueue_ns_per_command", bench_median(b->enq, batch_runs),
            "ns", NULL, 0, "< 100", batch_runs);
  bench_add_paired(report, "completed_ns_per_command", b->done, "ns",
                   "bare_spsc_ns_per_command", b->bare, batch_runs, "<= 2");
  bench_add_paired(report, "bare_spsc_64B_ns_per_command", b->bare64, "ns",
                   "bare_spsc_ns_per_command", b->bare, batch_runs, NULL);
  bench_add(report, "idle_cpu_fraction", b->idle, "cpu/s", NULL, 0, "<= 0.01",
            1);
  bench_add_paired(report, "empty_kernel_roundtrip", b->kr_samples, "us",
                   "roundtrip_empty_command", b->hc_samples, runs, "<= 1.2");
}

// ---- command buffers ---------------------------------------------------------

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
      .runs = b->batch_runs,
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
  launch_bench_t *b = calloc(1, sizeof(*b));
  if (b == NULL) {
    return 1;
  }
  b->quick = args->quick;
  b->runs = args->quick ? 5 : 21;
  b->iters = args->quick ? 2000 : 20000;
  b->batch = args->quick ? 100000 : 1000000;
  b->batch_runs = args->quick ? 5 : 21;
  accel_runtime_t *rt = NULL;
  if (check(accel_runtime_create(NULL, &rt), "runtime") ||
      check(accel_device_get(rt, 0, &b->dev), "device") ||
      check(accel_stream_create(b->dev, NULL, &b->s), "stream")) {
    free(b);
    return 1;
  }
  bench_report_t report;
  bench_report_init(&report, "launch", b->dev);
  b->parked = measure_futex_handoff(b->runs, args->quick ? 20 : 100);
  int failed = measure_roundtrip(b) || measure_parked(b) ||
               measure_kernel(b) || measure_batches(b);
  if (!failed) {
    measure_idle(b);
    add_figures(&report, b);
    failed = measure_command_buffers(&report, b);
  }
  accel_stream_destroy(b->s);
  accel_runtime_destroy(rt);
  free(b);
  return failed ? 1 : bench_print(&report, args->json);
}
