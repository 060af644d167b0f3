// accel-bench alloc: lib/mem's allocators against general-purpose ones, on
// the same replayed traces.
//
// Figures (medians of per-run ratios against a baseline measured in the same
// run, after a warm-up; times are each
// thread's CPU time, so that preemption on a shared machine is not counted;
// the subjects take turns within each repetition):
//  - slab_pair_1t / slab_pair_2t: ns per free+alloc pair on a working set of
//    4096 live blocks of random sizes (256 B to 64 KiB, log-uniform), one
//    thread and two threads (each with its own trace, same allocator),
//    through accel_buffer_alloc/accel_buffer_free on the device slab;
//    baseline: the fastest of glibc malloc, jemalloc and mimalloc on the same
//    trace (each also reported). Target <= 1.0. These never touch the
//    blocks they allocate.
//  - slab_pair_write_1t / slab_pair_write_2t (and each baseline's
//    *_pair_write_<n>t): the same replay writing every block once after it
//    is allocated, on both sides, against the same baseline. Target <= 1.0.
//    (The async round trip has none: its block is usable in stream order
//    only, so a host write would race the stream.)
//  - paged_kv_blocks / paged_kv_grow: peak reserved / peak in use of a paged
//    pool on an LLM-serving trace: sequences arrive with random prompts,
//    grow by 16-token blocks as they decode, and finish at random; as a
//    fixed-size block pool (one block per 16 tokens), and as one buffer per
//    sequence grown in place. Target <= 1.05.
//  - async_roundtrip: ns per accel_buffer_alloc_async + accel_buffer_free_async
//    on one stream, against the slab's alloc+free round trip on the same
//    sizes. Target <= 2.
//
// jemalloc and mimalloc are dlopen'ed (RTLD_LOCAL | RTLD_DEEPBIND) and
// called through their own malloc/free (jemalloc) and mi_malloc/mi_free
// (mimalloc) so that they never replace the process's malloc; a missing
// library is skipped with a note.
#include <dlfcn.h>
#include <unistd.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accel/accel.h"
#include "bench.h"

#define WORKING_SET 4096

// CPU time of the calling thread in ns: on a shared machine, time a thread
// spends preempted is not the allocator's.
static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct trace {
  uint32_t *slot;  // which live block to replace
  uint32_t *size;  // the size of its replacement
  uint32_t steps;
} trace_t;

static uint64_t rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *s = x;
  return x * 0x2545f4914f6cdd1dull;
}

static uint32_t log_uniform(uint64_t *s, double lo, double hi) {
  double u = (double)(rng_next(s) >> 11) / 9007199254740992.0;
  return (uint32_t)exp(log(lo) + u * (log(hi) - log(lo)));
}

static void trace_make(trace_t *t, uint32_t steps, uint64_t seed) {
  t->steps = steps;
  t->slot = malloc(steps * sizeof(*t->slot));
  t->size = malloc((steps + WORKING_SET) * sizeof(*t->size));
  for (uint32_t i = 0; i < steps; ++i) {
    t->slot[i] = (uint32_t)(rng_next(&seed) % WORKING_SET);
  }
  for (uint32_t i = 0; i < steps + WORKING_SET; ++i) {
    t->size[i] = log_uniform(&seed, 256, 65536);
  }
}

static void trace_free(trace_t *t) {
  free(t->slot);
  free(t->size);
}

// An allocator under test: alloc returns a handle, free takes it.
typedef struct subject {
  const char *name;
  void *(*alloc)(void *ctx, uint32_t size);
  void (*free)(void *ctx, void *handle);
  void *ctx;
  // The block's bytes, for the figures that write every block once.
  void *(*address)(void *ctx, void *handle);
} subject_t;

static void *(*g_je_malloc)(size_t);
static void (*g_je_free)(void *);
static void *(*g_mi_malloc)(size_t);
static void (*g_mi_free)(void *);

static void *glibc_alloc(void *ctx, uint32_t size) { return malloc(size); }
static void glibc_free(void *ctx, void *h) { free(h); }
static void *je_alloc(void *ctx, uint32_t size) { return g_je_malloc(size); }
static void je_free(void *ctx, void *h) { g_je_free(h); }
static void *mi_alloc(void *ctx, uint32_t size) { return g_mi_malloc(size); }
static void mi_free_(void *ctx, void *h) { g_mi_free(h); }

static void *slab_alloc(void *ctx, uint32_t size) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = size};
  accel_buffer_t *b = NULL;
  if (accel_buffer_alloc(ctx, &d, &b) != ACCEL_OK) {
    fprintf(stderr, "accel-bench alloc: %s\n", accel_last_error());
    abort();
  }
  return b;
}
static void slab_free_(void *ctx, void *h) { accel_buffer_free(h); }
static void *plain_address(void *ctx, void *h) { return h; }
static void *slab_address(void *ctx, void *h) {
  void *p = NULL;
  if (accel_buffer_host_pointer(h, &p) != ACCEL_OK) {
    fprintf(stderr, "accel-bench alloc: %s\n", accel_last_error());
    abort();
  }
  return p;
}

// Allocates |size| bytes from |s| and, with |touch|, writes all of them once
// (what a user of the block does; a fresh page's first touch is paid here).
static void *alloc_block(const subject_t *s, uint32_t size, bool touch) {
  void *h = s->alloc(s->ctx, size);
  if (touch) {
    memset(s->address(s->ctx, h), 0x5a, size);
  }
  return h;
}

// Replays |t| against |s|: fills the working set, then times the pairs;
// with |touch| every block allocated is written once.
static double replay(const subject_t *s, const trace_t *t, bool touch) {
  void **live = malloc(WORKING_SET * sizeof(void *));
  for (uint32_t i = 0; i < WORKING_SET; ++i) {
    live[i] = alloc_block(s, t->size[i], touch);
  }
  const uint32_t *sizes = t->size + WORKING_SET;
  uint64_t t0 = thread_cpu_ns();
  for (uint32_t i = 0; i < t->steps; ++i) {
    uint32_t k = t->slot[i];
    s->free(s->ctx, live[k]);
    live[k] = alloc_block(s, sizes[i], touch);
  }
  double ns = (double)(thread_cpu_ns() - t0) / t->steps;
  for (uint32_t i = 0; i < WORKING_SET; ++i) {
    s->free(s->ctx, live[i]);
  }
  free(live);
  return ns;
}

typedef struct replay_job {
  const subject_t *s;
  const trace_t *t;
  double ns;
  pthread_barrier_t *start;
  bool touch;
} replay_job_t;

static void *replay_thread(void *arg) {
  replay_job_t *j = arg;
  pthread_barrier_wait(j->start);
  j->ns = replay(j->s, j->t, j->touch);
  return NULL;
}

// Two threads, each on its own trace; returns the mean ns per pair.
static double replay2(const subject_t *s, const trace_t *t, bool touch) {
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, 2);
  replay_job_t jobs[2] = {{s, &t[0], 0, &start, touch},
                          {s, &t[1], 0, &start, touch}};
  pthread_t tid[2];
  for (int i = 0; i < 2; ++i) {
    pthread_create(&tid[i], NULL, replay_thread, &jobs[i]);
  }
  for (int i = 0; i < 2; ++i) {
    pthread_join(tid[i], NULL);
  }
  pthread_barrier_destroy(&start);
  return (jobs[0].ns + jobs[1].ns) / 2;
}

// ---- LLM-serving trace on a paged pool --------------------------------------

typedef struct kv_seq {
  uint32_t tokens;
  uint32_t target;
  uint32_t block_count;
  accel_buffer_t **blocks;  // block mode
  accel_buffer_t *buffer;   // grow mode
} kv_seq_t;

#define KV_BLOCK_TOKENS 16
#define KV_BYTES_PER_TOKEN 2048u  // a small model's K+V per token
#define KV_BLOCK_BYTES (KV_BLOCK_TOKENS * KV_BYTES_PER_TOKEN)
#define KV_MAX_TOKENS 4096
#define KV_CONCURRENT 48

static int kv_grow(accel_device_t *dev, accel_mempool_t *pool, kv_seq_t *q,
                   bool grow_mode) {
  uint32_t need = (q->tokens + KV_BLOCK_TOKENS - 1) / KV_BLOCK_TOKENS;
  while (q->block_count < need) {
    if (grow_mode) {
      uint64_t size = (uint64_t)(q->block_count + 1) * KV_BLOCK_BYTES;
      if (q->buffer == NULL) {
        accel_buffer_desc_t d = {
            .struct_size = sizeof(d), .size_bytes = size, .pool = pool,
            .max_size_bytes = (uint64_t)KV_MAX_TOKENS * KV_BYTES_PER_TOKEN};
        if (accel_buffer_alloc(dev, &d, &q->buffer) != ACCEL_OK) {
          return -1;
        }
      } else if (accel_buffer_grow(q->buffer, size) != ACCEL_OK) {
        return -1;
      }
    } else {
      accel_buffer_desc_t d = {.struct_size = sizeof(d),
                               .size_bytes = KV_BLOCK_BYTES, .pool = pool};
      if (accel_buffer_alloc(dev, &d, &q->blocks[q->block_count]) !=
          ACCEL_OK) {
        return -1;
      }
    }
    q->block_count++;
  }
  return 0;
}

static void kv_finish(kv_seq_t *q) {
  accel_buffer_free(q->buffer);
  for (uint32_t i = 0; i < q->block_count && q->buffer == NULL; ++i) {
    accel_buffer_free(q->blocks[i]);
  }
  q->buffer = NULL;
  q->block_count = 0;
  q->tokens = 0;
}

// Runs the serving trace; returns peak reserved / peak in use of the pool.
static double kv_trace(accel_device_t *dev, bool grow_mode, uint32_t finished,
                       uint64_t seed) {
  accel_mempool_desc_t pd = {
      .struct_size = sizeof(pd),
      .type = ACCEL_MEMPOOL_TYPE_PAGED,
      // Grow mode maps one page per block; block mode cuts 2 MiB pages.
      .page_size_bytes = grow_mode ? KV_BLOCK_BYTES : 0,
      .block_size_bytes = grow_mode ? 0 : KV_BLOCK_BYTES,
      .release_threshold_bytes = 0};
  accel_mempool_t *pool = NULL;
  if (accel_mempool_create(dev, &pd, &pool) != ACCEL_OK) {
    fprintf(stderr, "accel-bench alloc: %s\n", accel_last_error());
    return -1;
  }
  kv_seq_t seqs[KV_CONCURRENT];
  memset(seqs, 0, sizeof(seqs));
  for (int i = 0; i < KV_CONCURRENT; ++i) {
    seqs[i].blocks =
        calloc(KV_MAX_TOKENS / KV_BLOCK_TOKENS + 1, sizeof(accel_buffer_t *));
  }
  uint32_t done = 0;
  int rc = 0;
  while (done < finished && rc == 0) {
    for (int i = 0; i < KV_CONCURRENT && rc == 0; ++i) {
      kv_seq_t *q = &seqs[i];
      if (q->tokens == 0) {
        // A new request: its prompt is prefilled at once.
        q->tokens = 16 + (uint32_t)(rng_next(&seed) % 2048);
        q->target = q->tokens + 1 + (uint32_t)(rng_next(&seed) % 1024);
      } else {
        q->tokens++;  // one decoded token
      }
      rc = kv_grow(dev, pool, q, grow_mode);
      // Requests finish at their length, or early (stop token) at random.
      if (q->tokens >= q->target || rng_next(&seed) % 2000 == 0) {
        kv_finish(q);
        done++;
      }
    }
  }
  for (int i = 0; i < KV_CONCURRENT; ++i) {
    kv_finish(&seqs[i]);
    free(seqs[i].blocks);
  }
  accel_mem_stats_t st = {.struct_size = sizeof(st)};
  accel_mempool_stats(pool, &st);
  accel_mempool_destroy(pool);
  if (rc != 0) {
    fprintf(stderr, "accel-bench alloc: kv trace: %s\n", accel_last_error());
    return -1;
  }
  return (double)st.peak_bytes_reserved / (double)st.peak_bytes_in_use;
}

// ---- stream-ordered round trip ------------------------------------------

typedef struct rt_ctx {
  accel_device_t *dev;
  accel_stream_t *stream;
} rt_ctx_t;

static double roundtrip_slab(const subject_t *s, const trace_t *t) {
  uint64_t t0 = thread_cpu_ns();
  for (uint32_t i = 0; i < t->steps; ++i) {
    s->free(s->ctx, s->alloc(s->ctx, t->size[i]));
  }
  return (double)(thread_cpu_ns() - t0) / t->steps;
}

static void *async_alloc(void *ctx, uint32_t size) {
  rt_ctx_t *c = ctx;
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = size};
  accel_buffer_t *b = NULL;
  if (accel_buffer_alloc_async(c->stream, &d, &b) != ACCEL_OK) {
    fprintf(stderr, "accel-bench alloc: %s\n", accel_last_error());
    abort();
  }
  return b;
}

static void async_free(void *ctx, void *h) {
  rt_ctx_t *c = ctx;
  accel_buffer_free_async(c->stream, h);
}

// ---- the figures -------------------------------------------------------------

// The subjects (the slab first, then the general allocators found) and the
// two traces every pair figure replays.
typedef struct alloc_bench {
  subject_t all[4];
  const char *names[4];
  int count;
  trace_t traces[2];
  int threads;  // 1 or 2 replaying threads
  bool touch;   // write every block once
  subject_t async;
} alloc_bench_t;

// One run: the subjects take turns, so that the machine's noise (shared, 2
// cores) falls on all of them alike.
static int pairs_measure(void *arg, int run, double *out) {
  (void)run;
  alloc_bench_t *b = arg;
  for (int i = 0; i < b->count; ++i) {
    out[i] = b->threads == 1 ? replay(&b->all[i], b->traces, b->touch)
                             : replay2(&b->all[i], b->traces, b->touch);
  }
  return 0;
}

// slab_pair_<n>t against the fastest general allocator, each of those
// reported too; with |touch| the *_pair_write_<n>t figures, every block
// written once on both sides. The write figures keep the target of the
// plain ones.
static int pairs_run(bench_report_t *report, alloc_bench_t *b, int runs,
                     int threads, bool touch) {
  b->threads = threads;
  b->touch = touch;
  char names[4][64];
  bench_figure_t figures[4];
  for (int i = 0; i < b->count; ++i) {
    snprintf(names[i], sizeof(names[i]), "%s_pair_%s%dt",
             i == 0 ? "slab" : b->all[i].name, touch ? "write_" : "", threads);
    figures[i] = (bench_figure_t){.name = names[i], .unit = "ns",
                                  .value_slot = i};
  }
  figures[0].target = "<= 1.0";
  figures[0].baseline_lowest = b->count > 1;
  const bench_group_t group = {
      .runs = runs, .slots = b->count, .measure = pairs_measure,
      .figures = figures, .figure_count = b->count, .slot_names = b->names};
  return bench_group_run(report, &group, b);
}

static int roundtrip_measure(void *arg, int run, double *out) {
  (void)run;
  alloc_bench_t *b = arg;
  out[0] = roundtrip_slab(&b->all[0], b->traces);
  out[1] = roundtrip_slab(&b->async, b->traces);
  return 0;
}

static const bench_figure_t k_roundtrip_figures[] = {
    {"async_roundtrip", "ns", 1, "slab_roundtrip", 0, "<= 2", BENCH_PAIRED,
     false},
};

// Opens jemalloc and mimalloc (as the header comment says), or re-executes
// the process once with the static TLS reserve jemalloc needs; returns
// false when that re-execution failed.
static bool open_general_allocators(const bench_args_t *args,
                                    accel_runtime_t *rt,
                                    accel_stream_t *stream) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Sanitizer runtimes refuse RTLD_DEEPBIND (and would not see inside these
  // allocators anyway): compare with glibc only.
  (void)args, (void)rt, (void)stream;
  void *je = NULL, *mi = NULL;
  fprintf(stderr, "accel-bench alloc: sanitizer build: jemalloc and "
                  "mimalloc skipped\n");
#else
  void *je = dlopen("libjemalloc.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (je == NULL && getenv("ACCEL_BENCH_ALLOC_REEXEC") == NULL &&
      strstr(dlerror(), "static TLS") != NULL) {
    // jemalloc uses initial-exec TLS: it loads after start only with a
    // larger static TLS reserve, which glibc sets at process start. Run
    // again with it (this benchmark only).
    accel_stream_destroy(stream);
    accel_runtime_destroy(rt);
    setenv("ACCEL_BENCH_ALLOC_REEXEC", "1", 1);
    setenv("GLIBC_TUNABLES", "glibc.rtld.optional_static_tls=65536", 1);
    char *argv[5] = {"accel-bench", "alloc", NULL, NULL, NULL};
    int n = 2;
    if (args->json) {
      argv[n++] = "--json";
    }
    if (args->quick) {
      argv[n++] = "--quick";
    }
    execv("/proc/self/exe", argv);
    return false;
  }
  void *mi = dlopen("libmimalloc.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
#endif
  if (je != NULL) {
    g_je_malloc = (void *(*)(size_t))dlsym(je, "malloc");
    g_je_free = (void (*)(void *))dlsym(je, "free");
  }
  if (mi != NULL) {
    g_mi_malloc = (void *(*)(size_t))dlsym(mi, "mi_malloc");
    g_mi_free = (void (*)(void *))dlsym(mi, "mi_free");
  }
  return true;
}

// The slab, then glibc malloc and whichever of jemalloc and mimalloc loaded.
static void add_subjects(alloc_bench_t *b, accel_device_t *dev) {
  b->all[b->count++] = (subject_t){"accel_slab", slab_alloc, slab_free_, dev,
                                   slab_address};
  b->all[b->count++] = (subject_t){"glibc_malloc", glibc_alloc, glibc_free,
                                   NULL, plain_address};
  if (g_je_malloc != NULL && g_je_free != NULL) {
    b->all[b->count++] = (subject_t){"jemalloc", je_alloc, je_free, NULL,
                                     plain_address};
  } else {
    fprintf(stderr, "accel-bench alloc: jemalloc not found, skipped\n");
  }
  if (g_mi_malloc != NULL && g_mi_free != NULL) {
    b->all[b->count++] = (subject_t){"mimalloc", mi_alloc, mi_free_, NULL,
                                     plain_address};
  } else {
    fprintf(stderr, "accel-bench alloc: mimalloc not found, skipped\n");
  }
  for (int i = 0; i < b->count; ++i) {
    b->names[i] = b->all[i].name;
  }
}

// The paged pool's two serving-trace figures (one run each: deterministic).
static int kv_run(bench_report_t *report, accel_device_t *dev, bool quick) {
  uint32_t finished = quick ? 200 : 1000;
  double kv_blocks = kv_trace(dev, false, finished, 42);
  double kv_grow_ratio = kv_trace(dev, true, finished, 42);
  if (kv_blocks < 0 || kv_grow_ratio < 0) {
    return 1;
  }
  // Exact: a deterministic replay of a seeded trace.
  bench_add(report, "paged_kv_blocks_reserved_per_use", kv_blocks, "x", NULL,
            0, "<= 1.05", 1);
  bench_add(report, "paged_kv_grow_reserved_per_use", kv_grow_ratio, "x",
            NULL, 0, "<= 1.05", 1);
  return 0;
}

int accel_bench_alloc(const bench_args_t *args) {
  int runs = args->quick ? 3 : 9;
  uint32_t steps = args->quick ? 100000 : 1000000;
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = NULL;
  accel_stream_t *stream = NULL;
  if (accel_runtime_create(NULL, &rt) != ACCEL_OK ||
      accel_device_get(rt, 0, &dev) != ACCEL_OK ||
      accel_stream_create(dev, NULL, &stream) != ACCEL_OK) {
    fprintf(stderr, "accel-bench alloc: %s\n", accel_last_error());
    return 1;
  }
  if (!open_general_allocators(args, rt, stream)) {
    return 1;
  }
  bench_report_t report;
  bench_report_init(&report, "alloc", dev);
  alloc_bench_t b = {0};
  add_subjects(&b, dev);
  trace_make(&b.traces[0], steps, 0x1234567ull);
  trace_make(&b.traces[1], steps, 0x89abcdefull);
  rt_ctx_t ctx = {dev, stream};
  b.async = (subject_t){"async", async_alloc, async_free, &ctx, NULL};
  const bench_group_t roundtrip = {
      .runs = runs, .slots = 2, .measure = roundtrip_measure,
      .figures = k_roundtrip_figures, .figure_count = 1};
  int failed = pairs_run(&report, &b, runs, 1, false) ||
               pairs_run(&report, &b, runs, 2, false) ||
               kv_run(&report, dev, args->quick) ||
               bench_group_run(&report, &roundtrip, &b) ||
               pairs_run(&report, &b, runs, 1, true) ||
               pairs_run(&report, &b, runs, 2, true);
  trace_free(&b.traces[0]);
  trace_free(&b.traces[1]);
  accel_stream_destroy(stream);
  accel_runtime_destroy(rt);
  return failed ? 1 : bench_print(&report, args->json);
}
