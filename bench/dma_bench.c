// accel-bench dma: DMA queue bandwidth and latency on the host device.
//
// Figures (DMA and baseline samples interleaved after a warm-up so that both
// see the same machine load, and each ratio the median of the per-run ratios
// of those pairs, with its interval; bench.h):
//  - copy_1_engine_<size>: device-to-device copy bandwidth of a queue with one
//    copy engine, against memcpy in one thread over the same buffers (a
//    helper thread that the caller wakes and waits for, as for the engine;
//    see "memcpy over helper threads"). Target >= 0.95 from 1 MiB up.
//  - copy_1_engine_<size>_vs_calling_thread: the same engine samples against
//    memcpy on the benchmark's own thread, for reference (no target).
//  - copy_all_engines_<size>: the same with a queue over every engine,
//    against memcpy split over as many helper threads as engines. Target
//    >= 0.9 from 64 MiB up.
//    Sizes 4 KiB to 1 GiB (--quick: to 64 MiB). Small sizes stream many
//    submits and synchronize once; the time is submit to completion.
//  - latency_4KiB_copy: submit one 4 KiB copy to an idle queue with default
//    flags and wait for its semaphore, against the bare spinning thread
//    handoff of `accel-bench launch` (measured here, in the same run).
//    Target <= 2. Between two 4 KiB buffers of its own (see below). On the
//    host device such a copy runs on the submitting thread (small copies on
//    idle queues, dma.h).
//  - latency_4KiB_copy_engine: the same on a queue created with
//    ACCEL_DMA_QUEUE_FLAG_NO_INLINE, so through a copy engine (two thread
//    handoffs), against the same baseline. Reported, no target.
//  - stream_copy_4KiB: a 4 KiB accel_stream_copy and a synchronize (the copy
//    runs on the stream's DMA queue: stream signal, engine, stream wait),
//    against a stream host call doing the same memcpy and a synchronize (what
//    the stream's own copy command cost). Reported, no target.
//  - h2d_pageable_staged / d2h_pageable_staged: 64 MiB copies from/to
//    pageable malloc memory (staged through bounce buffers) against the same
//    copies from/to a pinned host buffer. Target >= 0.7.
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "accel/accel.h"
#include "bench.h"

#define KIB 1024ull
#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)

static inline void cpu_relax(void) {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

static int check(accel_status_t st, const char *what) {
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-bench dma: %s: %s: %s\n", what,
            accel_status_name(st), accel_last_error());
    return 1;
  }
  return 0;
}

// ---- memcpy over helper threads ---------------------------------------------
// The baselines run on helper threads that the calling thread wakes and then
// waits for (spinning 100 us, then parked on a futex), as it does for copy
// engines: both sides are threads the scheduler places the same way. On these
// shared VMs the two vCPUs run at different speeds for seconds at a time, and
// the calling thread tends to sit on the other one from the threads it wakes:
// measured side by side, one engine came to 0.87-0.97x of memcpy on the
// calling thread and 0.96-1.03x of memcpy on a helper thread, in the same
// runs. Helpers spin for a while after a job, yielding, then park (as
// engines do), so that they do not steal the CPU from the DMA samples.

typedef struct pool pool_t;

typedef struct helper_arg {
  pool_t *pool;
  int index;
} helper_arg_t;

struct pool {
  int threads;  // helper threads; the caller only waits
  pthread_t tids[64];
  helper_arg_t args[64];
  _Alignas(64) _Atomic uint32_t job;  // futex word: job sequence
  _Atomic uint32_t stop;
  uint8_t *dst;
  const uint8_t *src;
  uint64_t size;
  int iters;
  _Alignas(64) _Atomic uint32_t done;  // futex word: helpers finished
};

static void part(pool_t *p, int index, uint64_t *lo, uint64_t *hi) {
  uint64_t step = (p->size / (uint64_t)p->threads + 4095) & ~4095ull;
  *lo = step * (uint64_t)index < p->size ? step * (uint64_t)index : p->size;
  *hi = index + 1 == p->threads || step * (uint64_t)(index + 1) > p->size
            ? p->size
            : step * (uint64_t)(index + 1);
}

static void futex_wait_u32(_Atomic uint32_t *word, uint32_t value) {
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word) {
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

// Spins for 100 us (the runtime's default spin), then parks, until *word
// holds |target|.
static void wait_for(_Atomic uint32_t *word, uint32_t target) {
  uint64_t spin_until = bench_now_ns() + 100000;
  uint32_t v;
  while ((v = atomic_load_explicit(word, memory_order_acquire)) != target) {
    if (bench_now_ns() < spin_until) {
      cpu_relax();
    } else {
      futex_wait_u32(word, v);
    }
  }
}

static void *helper_main(void *arg) {
  helper_arg_t *a = arg;
  pool_t *p = a->pool;
  uint32_t seen = 0;
  for (;;) {
    // As an idle engine does: spin 100 us, yielding every 20 us (so that a
    // thread woken meanwhile, an engine of the next sample, is not held up
    // behind us), then park.
    uint64_t now = bench_now_ns();
    uint64_t spin_until = now + 100000;
    uint64_t yield_at = now + 20000;
    uint32_t job;
    while ((job = atomic_load_explicit(&p->job, memory_order_acquire)) ==
               seen &&
           !atomic_load(&p->stop)) {
      now = bench_now_ns();
      if (now >= spin_until) {
        futex_wait_u32(&p->job, seen);
      } else if (now >= yield_at) {
        sched_yield();
        yield_at = now + 20000;
      } else {
        cpu_relax();
      }
    }
    if (atomic_load(&p->stop)) {
      return NULL;
    }
    seen = job;
    uint64_t lo, hi;
    part(p, a->index, &lo, &hi);
    for (int i = 0; i < p->iters; ++i) {
      memcpy(p->dst + lo, p->src + lo, hi - lo);
    }
    if (atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel) + 1 ==
        (uint32_t)p->threads) {
      futex_wake_all(&p->done);
    }
  }
}

static void pool_start(pool_t *p, int threads) {
  memset(p, 0, sizeof(*p));
  p->threads = threads;
  for (int i = 0; i < threads; ++i) {
    p->args[i] = (helper_arg_t){.pool = p, .index = i};
    pthread_create(&p->tids[i], NULL, helper_main, &p->args[i]);
  }
}

// |iters| copies of |size| bytes, each split over the helpers.
static void pool_memcpy(pool_t *p, uint8_t *dst, const uint8_t *src,
                        uint64_t size, int iters) {
  p->dst = dst;
  p->src = src;
  p->size = size;
  p->iters = iters;
  atomic_store(&p->done, 0);
  atomic_fetch_add_explicit(&p->job, 1, memory_order_release);
  futex_wake_all(&p->job);
  wait_for(&p->done, (uint32_t)p->threads);
}

static void pool_stop(pool_t *p) {
  atomic_store(&p->stop, 1);
  atomic_fetch_add(&p->job, 1);
  futex_wake_all(&p->job);
  for (int i = 0; i < p->threads; ++i) {
    pthread_join(p->tids[i], NULL);
  }
}

// |iters| copies of |size| bytes over the pool's threads, after an untimed
// warm-up that wakes them (as dma_copies wakes the engines); ns total.
static double memcpy_sample(pool_t *p, uint8_t *dst, const uint8_t *src,
                            uint64_t size, int iters) {
  pool_memcpy(p, dst, src, size < 2 * MIB ? size : 2 * MIB, 1);
  uint64_t t0 = bench_now_ns();
  pool_memcpy(p, dst, src, size, iters);
  return (double)(bench_now_ns() - t0);
}

// The same on the calling thread itself, after a warm-up copy; ns total.
static double caller_memcpy_sample(uint8_t *dst, const uint8_t *src,
                                   uint64_t size, int iters) {
  memcpy(dst, src, size < 2 * MIB ? size : 2 * MIB);
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < iters; ++i) {
    memcpy(dst, src, size);
  }
  return (double)(bench_now_ns() - t0);
}

// ---- DMA ------------------------------------------------------------------

typedef struct ctx {
  accel_device_t *dev;
  accel_semaphore_t *sem;
  uint64_t sem_value;
} ctx_t;

// Submits |iters| copies of |size| bytes and waits for the last; ns total.
static int dma_copies(ctx_t *c, accel_dma_queue_t *q, accel_dma_ref_t dst,
                      accel_dma_ref_t src, uint64_t size, int iters,
                      double *out_ns) {
  // Untimed warm-up: wakes the engines that parked during the baseline
  // sample (2 MiB reaches every engine of a split copy), as memcpy_sample does
  // for the memcpy threads.
  accel_dma_desc_t d = {.struct_size = sizeof(d),
                        .op = ACCEL_DMA_OP_COPY_1D,
                        .dst = dst,
                        .src = src,
                        .width_bytes = size < 2 * MIB ? size : 2 * MIB};
  uint64_t w = ++c->sem_value;
  if (check(accel_dma_submit(q, &d, 1, 0, NULL, NULL, 1, &c->sem, &w),
            "submit") ||
      check(accel_semaphore_wait(c->sem, w, ACCEL_TIMEOUT_INFINITE),
            "wait")) {
    return 1;
  }
  d.width_bytes = size;
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < iters; ++i) {
    uint64_t v = ++c->sem_value;
    bool last = i + 1 == iters;
    if (check(accel_dma_submit(q, &d, 1, 0, NULL, NULL, last ? 1 : 0,
                               last ? &c->sem : NULL, last ? &v : NULL),
              "submit")) {
      return 1;
    }
  }
  if (check(accel_semaphore_wait(c->sem, c->sem_value, ACCEL_TIMEOUT_INFINITE),
            "wait")) {
    return 1;
  }
  *out_ns = (double)(bench_now_ns() - t0);
  return 0;
}

// |n| times: submits |d| and waits for its semaphore before the next.
static int copies_one_at_a_time(ctx_t *c, accel_dma_queue_t *q,
                                const accel_dma_desc_t *d, int n) {
  for (int i = 0; i < n; ++i) {
    uint64_t v = ++c->sem_value;
    if (check(accel_dma_submit(q, d, 1, 0, NULL, NULL, 1, &c->sem, &v),
              "submit") ||
        check(accel_semaphore_wait(c->sem, v, ACCEL_TIMEOUT_INFINITE),
              "wait")) {
      return 1;
    }
  }
  return 0;
}

static const char *size_name(uint64_t size, char *buf, size_t n) {
  if (size >= GIB) {
    snprintf(buf, n, "%lluGiB", (unsigned long long)(size / GIB));
  } else if (size >= MIB) {
    snprintf(buf, n, "%lluMiB", (unsigned long long)(size / MIB));
  } else {
    snprintf(buf, n, "%lluKiB", (unsigned long long)(size / KIB));
  }
  return buf;
}

typedef struct memcpy_arg {
  uint8_t *dst;
  const uint8_t *src;
  uint64_t size;
} memcpy_arg_t;

static accel_status_t memcpy_fn(void *arg) {
  memcpy_arg_t *m = arg;
  memcpy(m->dst, m->src, m->size);
  return ACCEL_OK;
}

static accel_buffer_t *alloc(accel_device_t *dev, uint64_t size, uint32_t kind,
                             uint8_t **out) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d),
                           .kind = kind,
                           .size_bytes = size};
  accel_buffer_t *b = NULL;
  void *p = NULL;
  if (check(accel_buffer_alloc(dev, &d, &b), "buffer alloc") ||
      check(accel_buffer_host_pointer(b, &p), "host pointer")) {
    return NULL;
  }
  memset(p, 1, size);  // fault the pages in before timing
  *out = p;
  return b;
}

// ---- the figures -------------------------------------------------------------

// What every group of this subcommand shares: the device, the 1-engine and
// all-engine queues, the memcpy helper pools and the two big buffers.
typedef struct dma_bench {
  ctx_t c;
  bool quick;
  int engines;
  accel_dma_queue_t *q1, *qn;
  pool_t *pool1, *pooln;
  accel_buffer_t *src, *dst;
  uint8_t *sp, *dp;
  // The group being run.
  uint64_t size;
  int iters;
  accel_dma_queue_t *qi;             // latency: a default (inline) queue
  accel_buffer_t *lsrc, *ldst;       // latency: 4 KiB buffers of their own
  accel_stream_t *stream;            // stream copy
  accel_buffer_t *pinned;            // staging
  uint8_t *pageable;                 // staging
} dma_bench_t;

// Bandwidth samples, one slot each (GB/s).
enum { BW_MEMCPY_1, BW_ENGINE_1, BW_MEMCPY_CALLER, BW_MEMCPY_N, BW_ENGINE_N };

// The five bandwidth samples of one run: odd runs take them in the reverse
// order, so that neither side of a pair always follows the other (cache
// contents, threads waking up) or always comes first in a slowing machine.
static int bandwidth_measure(void *arg, int run, double *out) {
  dma_bench_t *b = arg;
  accel_dma_ref_t d = {.buffer = b->dst}, s = {.buffer = b->src};
  double t[5] = {0};
  for (int k = 0; k < 5; ++k) {
    int which = (run & 1) != 0 ? 4 - k : k;
    int failed = 0;
    switch (which) {
      case BW_MEMCPY_1:
        t[which] = memcpy_sample(b->pool1, b->dp, b->sp, b->size, b->iters);
        break;
      case BW_ENGINE_1:
        failed = dma_copies(&b->c, b->q1, d, s, b->size, b->iters, &t[which]);
        break;
      case BW_MEMCPY_CALLER:
        t[which] = caller_memcpy_sample(b->dp, b->sp, b->size, b->iters);
        break;
      case BW_MEMCPY_N:
        t[which] = memcpy_sample(b->pooln, b->dp, b->sp, b->size, b->iters);
        break;
      default:
        failed = dma_copies(&b->c, b->qn, d, s, b->size, b->iters, &t[which]);
        break;
    }
    if (failed) {
      return 1;
    }
  }
  double bytes = (double)b->size * b->iters;
  for (int k = 0; k < 5; ++k) {
    out[k] = bytes / t[k];  // bytes per ns = GB/s
  }
  return 0;
}

// The bandwidth figures of one copy size.
static int bandwidth_run(bench_report_t *report, dma_bench_t *b,
                         uint64_t size) {
  // Enough repetitions for a sample of ~32 MiB of small copies (many
  // submits) or ~128 MiB of large ones (tens of ms, so that neither a
  // scheduler hiccup nor the wake-up of the parked waiter at the end
  // decides a sample); at least one copy. Pairs of samples taken side by
  // side on these shared machines differ by 0.6-1.5x from one pair to the
  // next, so the run extends (bench_group_run) from 15 pairs, or from 9
  // above 64 MiB (one copy per sample, up to 41 pairs for time), until the
  // ratio's interval is narrow enough.
  uint64_t sample = size >= MIB ? 128 * MIB : 32 * MIB;
  if (b->quick) {
    sample /= 4;
  }
  b->size = size;
  b->iters = size >= sample ? 1 : (int)(sample / size);
  char sname[16], n1[64], nc[64], nn[64], bn[64];
  size_name(size, sname, sizeof(sname));
  snprintf(n1, sizeof(n1), "copy_1_engine_%s", sname);
  // For reference: the same engine samples against memcpy on the calling
  // thread (see "memcpy over helper threads" for why the target's baseline
  // is a helper thread).
  snprintf(nc, sizeof(nc), "copy_1_engine_%s_vs_calling_thread", sname);
  snprintf(nn, sizeof(nn), "copy_%d_engines_%s", b->engines, sname);
  snprintf(bn, sizeof(bn), "memcpy_%d_threads", b->engines);
  const bench_figure_t figures[] = {
      {n1, "GB/s", BW_ENGINE_1, "memcpy_1_thread", BW_MEMCPY_1,
       size >= MIB ? ">= 0.95" : NULL, BENCH_PAIRED, false},
      {nc, "GB/s", BW_ENGINE_1, "memcpy_calling_thread", BW_MEMCPY_CALLER,
       NULL, BENCH_PAIRED, false},
      {nn, "GB/s", BW_ENGINE_N, bn, BW_MEMCPY_N,
       size >= 64 * MIB ? ">= 0.9" : NULL, BENCH_PAIRED, false},
  };
  const bench_group_t group = {
      .runs = b->quick ? 5 : size <= 64 * MIB ? 15 : 9,
      .max_runs = size <= 64 * MIB ? 0 : 41,
      .slots = 5,
      .measure = bandwidth_measure,
      .figures = figures,
      .figure_count = 3,
  };
  return bench_group_run(report, &group, b);
}

// Latency of one 4 KiB copy: buffers of their own, since the first 4 KiB of
// the two 1 GiB buffers sit at addresses equal modulo 1 GiB, whose lines
// compete for the same cache sets and whose loads falsely alias the copy's
// stores (measured: 200-240 ns a copy there, against 100-150 ns 2 KiB apart
// or in buffers of their own), a cost of those addresses, not of the path.
static int latency_setup(void *arg) {
  dma_bench_t *b = arg;
  accel_dma_queue_desc_t qid = {.struct_size = sizeof(qid),
                                .engine_count = 1,
                                .name = "bench-latency"};
  if (check(accel_dma_queue_create(b->c.dev, &qid, &b->qi),
            "queue (latency)")) {
    return 1;
  }
  uint8_t *lsp = NULL, *ldp = NULL;
  b->lsrc = alloc(b->c.dev, 4 * KIB, ACCEL_MEMORY_KIND_DEVICE, &lsp);
  b->ldst = alloc(b->c.dev, 4 * KIB, ACCEL_MEMORY_KIND_DEVICE, &ldp);
  if (b->lsrc == NULL || b->ldst == NULL) {
    accel_buffer_release(b->lsrc);
    accel_buffer_release(b->ldst);
    accel_dma_queue_destroy(b->qi);
    return 1;
  }
  return 0;
}

static void latency_teardown(void *arg) {
  dma_bench_t *b = arg;
  accel_dma_queue_destroy(b->qi);
  accel_buffer_release(b->lsrc);
  accel_buffer_release(b->ldst);
}

enum { LAT_HANDOFF, LAT_INLINE, LAT_ENGINE };

static int latency_measure(void *arg, int run, double *out) {
  (void)run;
  dma_bench_t *b = arg;
  int iters = b->quick ? 2000 : 20000;
  accel_dma_desc_t d = {.struct_size = sizeof(d),
                        .op = ACCEL_DMA_OP_COPY_1D,
                        .dst = {.buffer = b->ldst},
                        .src = {.buffer = b->lsrc},
                        .width_bytes = 4 * KIB};
  // A fresh handoff thread per sample (bench_spin_handoff_ns): left
  // spinning, it would take a core from the DMA sample.
  out[LAT_HANDOFF] = bench_spin_handoff_ns(iters) / 1000.0;  // us
  accel_dma_queue_t *queues[2] = {b->qi, b->q1};
  for (int k = 0; k < 2; ++k) {
    // Warmed up the same way.
    if (copies_one_at_a_time(&b->c, queues[k], &d, iters / 10 + 1)) {
      return 1;
    }
    uint64_t t0 = bench_now_ns();
    if (copies_one_at_a_time(&b->c, queues[k], &d, iters)) {
      return 1;
    }
    out[LAT_INLINE + k] = (double)(bench_now_ns() - t0) / iters / 1000.0;
  }
  return 0;
}

static const bench_figure_t k_latency_figures[] = {
    {"latency_4KiB_copy", "us", LAT_INLINE, "bare_spin_handoff", LAT_HANDOFF,
     "<= 2", BENCH_PAIRED, false},
    {"latency_4KiB_copy_engine", "us", LAT_ENGINE, "bare_spin_handoff",
     LAT_HANDOFF, NULL, BENCH_PAIRED, false},
};

// A stream copy through DMA against the same memcpy on the stream's worker.
static int stream_setup(void *arg) {
  dma_bench_t *b = arg;
  return check(accel_stream_create(b->c.dev, NULL, &b->stream), "stream");
}

static void stream_teardown(void *arg) {
  dma_bench_t *b = arg;
  accel_stream_destroy(b->stream);
}

static int stream_measure(void *arg, int run, double *out) {
  (void)run;
  dma_bench_t *b = arg;
  int iters = b->quick ? 2000 : 20000;
  memcpy_arg_t m = {.dst = b->dp, .src = b->sp, .size = 4 * KIB};
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < iters; ++i) {
    if (check(accel_stream_copy(b->stream, b->dst, 0, b->src, 0, 4 * KIB),
              "copy") ||
        check(accel_stream_synchronize(b->stream, ACCEL_TIMEOUT_INFINITE),
              "synchronize")) {
      return 1;
    }
  }
  uint64_t t1 = bench_now_ns();
  for (int i = 0; i < iters; ++i) {
    if (check(accel_stream_host_call(b->stream, memcpy_fn, &m), "host call") ||
        check(accel_stream_synchronize(b->stream, ACCEL_TIMEOUT_INFINITE),
              "synchronize")) {
      return 1;
    }
  }
  uint64_t t2 = bench_now_ns();
  out[0] = (double)(t1 - t0) / iters / 1000.0;  // us
  out[1] = (double)(t2 - t1) / iters / 1000.0;
  return 0;
}

static const bench_figure_t k_stream_figures[] = {
    {"stream_copy_4KiB", "us", 0, "stream_host_call_memcpy", 1, NULL,
     BENCH_PAIRED, false},
};

// Pageable (staged) against pinned host memory, 64 MiB each way.
static int staging_setup(void *arg) {
  dma_bench_t *b = arg;
  uint8_t *pinned_ptr = NULL;
  b->pinned = alloc(b->c.dev, 64 * MIB, ACCEL_MEMORY_KIND_HOST_PINNED,
                    &pinned_ptr);
  b->pageable = malloc(64 * MIB);
  if (b->pinned == NULL || b->pageable == NULL) {
    accel_buffer_release(b->pinned);
    free(b->pageable);
    return 1;
  }
  memset(b->pageable, 2, 64 * MIB);
  return 0;
}

static void staging_teardown(void *arg) {
  dma_bench_t *b = arg;
  free(b->pageable);
  accel_buffer_release(b->pinned);
}

enum { ST_H2D_PINNED, ST_H2D_PAGEABLE, ST_D2H_PINNED, ST_D2H_PAGEABLE };

static int staging_measure(void *arg, int run, double *out) {
  (void)run;
  dma_bench_t *b = arg;
  uint64_t size = 64 * MIB;
  accel_dma_ref_t dev = {.buffer = b->dst};
  accel_dma_ref_t pin = {.buffer = b->pinned};
  accel_dma_ref_t pag = {.host = b->pageable};
  double t[4];
  if (dma_copies(&b->c, b->qn, dev, pin, size, 1, &t[ST_H2D_PINNED]) ||
      dma_copies(&b->c, b->qn, dev, pag, size, 1, &t[ST_H2D_PAGEABLE]) ||
      dma_copies(&b->c, b->qn, pin, dev, size, 1, &t[ST_D2H_PINNED]) ||
      dma_copies(&b->c, b->qn, pag, dev, size, 1, &t[ST_D2H_PAGEABLE])) {
    return 1;
  }
  for (int k = 0; k < 4; ++k) {
    out[k] = (double)size / t[k];
  }
  return 0;
}

static const bench_figure_t k_staging_figures[] = {
    {"h2d_pageable_staged_64MiB", "GB/s", ST_H2D_PAGEABLE, "h2d_pinned_64MiB",
     ST_H2D_PINNED, ">= 0.7", BENCH_PAIRED, false},
    {"d2h_pageable_staged_64MiB", "GB/s", ST_D2H_PAGEABLE, "d2h_pinned_64MiB",
     ST_D2H_PINNED, ">= 0.7", BENCH_PAIRED, false},
};

// Opens the runtime, the queues, the helper pools and the big buffers.
static int dma_bench_open(dma_bench_t *b, accel_runtime_t **rt,
                          uint64_t max_size) {
  if (check(accel_runtime_create(NULL, rt), "runtime") ||
      check(accel_device_get(*rt, 0, &b->c.dev), "device") ||
      check(accel_semaphore_create(b->c.dev, 0, &b->c.sem), "semaphore")) {
    return 1;
  }
  accel_device_info_t info = {.struct_size = sizeof(info)};
  accel_device_info(b->c.dev, &info);
  b->engines = (int)info.copy_queue_count;
  // Bandwidth is the engines' (small copies stay on them too).
  accel_dma_queue_desc_t qd = {.struct_size = sizeof(qd),
                               .flags = ACCEL_DMA_QUEUE_FLAG_NO_INLINE,
                               .engine_count = 1,
                               .name = "bench1"};
  if (check(accel_dma_queue_create(b->c.dev, &qd, &b->q1),
            "queue (1 engine)")) {
    return 1;
  }
  qd.engine_count = 0;
  qd.name = "benchN";
  if (check(accel_dma_queue_create(b->c.dev, &qd, &b->qn), "queue (all)")) {
    return 1;
  }
  b->src = alloc(b->c.dev, max_size, ACCEL_MEMORY_KIND_DEVICE, &b->sp);
  b->dst = alloc(b->c.dev, max_size, ACCEL_MEMORY_KIND_DEVICE, &b->dp);
  return b->src == NULL || b->dst == NULL;
}

// Releases what dma_bench_open acquired (the process exits after a failure).
static void dma_bench_close(dma_bench_t *b, accel_runtime_t *rt) {
  accel_buffer_release(b->src);
  accel_buffer_release(b->dst);
  accel_dma_queue_destroy(b->q1);
  accel_dma_queue_destroy(b->qn);
  accel_semaphore_release(b->c.sem);
  accel_runtime_destroy(rt);
}

// Every bandwidth size up to |max_size|, over helper pools started for them
// (and stopped after, so that no helper competes with the latency figures).
static int bandwidth_all(bench_report_t *report, dma_bench_t *b,
                         uint64_t max_size) {
  const uint64_t sizes[] = {4 * KIB,  64 * KIB,  MIB,     16 * MIB,
                            64 * MIB, 256 * MIB, GIB};
  b->pool1 = aligned_alloc(64, sizeof(pool_t));
  b->pooln = aligned_alloc(64, sizeof(pool_t));
  pool_start(b->pool1, 1);
  pool_start(b->pooln, b->engines);
  int failed = 0;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]) && !failed; ++i) {
    if (sizes[i] <= max_size) {
      failed = bandwidth_run(report, b, sizes[i]);
    }
  }
  pool_stop(b->pool1);
  pool_stop(b->pooln);
  free(b->pool1);
  free(b->pooln);
  return failed;
}

int accel_bench_dma(const bench_args_t *args) {
  int runs = args->quick ? 5 : 15;
  uint64_t max_size = args->quick ? 64 * MIB : GIB;
  accel_runtime_t *rt = NULL;
  dma_bench_t b = {.quick = args->quick};
  if (dma_bench_open(&b, &rt, max_size)) {
    return 1;
  }
  bench_report_t report;
  bench_report_init(&report, "dma", b.c.dev);
  const bench_group_t groups[] = {
      {.runs = runs, .slots = 3, .setup = latency_setup,
       .measure = latency_measure, .teardown = latency_teardown,
       .figures = k_latency_figures, .figure_count = 2},
      {.runs = runs, .slots = 2, .setup = stream_setup,
       .measure = stream_measure, .teardown = stream_teardown,
       .figures = k_stream_figures, .figure_count = 1},
      {.runs = runs, .slots = 4, .setup = staging_setup,
       .measure = staging_measure, .teardown = staging_teardown,
       .figures = k_staging_figures, .figure_count = 2},
  };
  int failed = bandwidth_all(&report, &b, max_size);
  for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]) && !failed; ++i) {
    failed = bench_group_run(&report, &groups[i], &b);
  }
  dma_bench_close(&b, rt);
  return failed ? 1 : bench_print(&report, args->json);
}
