// accel-bench serve: the serving engine (include/accel/serve.h) on the host
// device under a synthetic ShareGPT-like workload, as issue #21 asks.
//
// Workload: requests with lognormal prompt and output lengths (medians 48
// and 96 tokens, sigma 0.6 and 0.9, clamped to [4, 512] and [4, 320]),
// arriving as a Poisson process (400 requests/s: the engine is kept busy,
// so throughput is the engine's, not the arrivals'). The model is
// examples/decoder.c's, small: 2 layers, dim 512, 8/2 heads of 64, ffn
// 1536, vocab 4096, KV blocks of 4 tokens; 96 requests (16 with --quick).
//
// Figures, in one run:
// - serve_throughput_continuous (tok/s of requested tokens) against
//   serve_throughput_static: the same engine and workload, requests run in
//   batches of max_step_seqs, each batch running as one padded batch until
//   its longest request ends, as static batching does (FasterTransformer,
//   Hugging Face generate: a finished row is computed until the batch
//   ends, its extra tokens discarded). Target: ratio >= 2.
// - serve_continuous_vs_unpadded: the same against static batches whose
//   finished rows leave the batch at once (no new request joins until the
//   batch ends): what continuous batching adds over early exit alone. No
//   target.
// - serve_kv_waste (%): allocated KV slots not holding a token, summed over
//   the continuous run's steps. Target: <= 2.
// - serve_ttft_p50/p99, serve_tpot_p50/p99 (ms) of the continuous run:
//   first token minus arrival; (last - first token) / (tokens - 1).
// - serve_shared_prefix (tok/s) with prefix caching against the same
//   engine without it, on requests sharing a 256-token system prompt with
//   their own 8-40-token questions and 16-token answers; and its
//   prefix-cache hit rate (% of full prompt blocks found cached).
// - serve_step_host_us (us): host time per step issuing its commands
//   (accel_serve_stats_t.step_host_ns / steps) of the continuous run
//   replaying step command buffers, against the same run submitting every
//   step launch by launch (ACCEL_SERVE_DIRECT_LAUNCH); with the share of
//   steps replayed and both runs' tok/s. No target.
// Each engine is created fresh per run (not timed), so no run starts with
// another's cache.
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accel/accel.h"
#include "bench.h"
#include "decoder_run.h"

#ifndef ACCEL_REFERENCE_AXE_PATH
#define ACCEL_REFERENCE_AXE_PATH ""
#endif

enum { MAX_REQ = 256, STEP_SEQS = 16 };

typedef struct req {
  double arrival_s;  // since the run's start
  uint32_t prompt_len, out_len;
  int32_t *prompt;
  double first_s, last_s;  // token times since the run's start
  uint32_t got;
} req_t;

typedef struct serve_bench {
  accel_runtime_t *rt;
  accel_device_t *dev;
  const char *ref;
  char dir[256], model[320];
  uint32_t n;  // requests per workload
  req_t reqs[MAX_REQ];
  uint64_t t0_ns;
} serve_bench_t;

typedef struct rng {
  uint64_t s;
} rng_t;

static double rng_unit(rng_t *r) {  // (0, 1)
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return ((double)(r->s >> 11) + 0.5) / 9007199254740992.0;
}

static uint32_t lognormal(rng_t *r, double median, double sigma, uint32_t lo,
                          uint32_t hi) {
  // Box-Muller: one standard normal.
  double z = sqrt(-2.0 * log(rng_unit(r))) * cos(2.0 * M_PI * rng_unit(r));
  double x = median * exp(sigma * z);
  return x < lo ? lo : x > hi ? hi : (uint32_t)x;
}

static double now_s(const serve_bench_t *b) {
  return (double)(bench_now_ns() - b->t0_ns) / 1e9;
}

static void free_prompts(serve_bench_t *b) {
  for (uint32_t i = 0; i < MAX_REQ; ++i) {
    free(b->reqs[i].prompt);
    b->reqs[i].prompt = NULL;
  }
}

// The ShareGPT-like workload (|shared| 0), or the shared-prefix one.
static int make_workload(serve_bench_t *b, uint64_t seed, uint32_t shared) {
  free_prompts(b);
  rng_t r = {.s = seed * 0x9e3779b97f4a7c15ull + 1};
  double t = 0;
  for (uint32_t i = 0; i < b->n; ++i) {
    req_t *q = &b->reqs[i];
    t += -log(rng_unit(&r)) / 400.0;
    q->arrival_s = t;
    q->prompt_len = shared ? shared + 8 + (uint32_t)(rng_unit(&r) * 32)
                           : lognormal(&r, 48, 0.6, 4, 512);
    q->out_len = shared ? 16 : lognormal(&r, 96, 0.9, 4, 320);
    q->prompt = malloc(sizeof(int32_t) * q->prompt_len);
    if (q->prompt == NULL) return 1;
    for (uint32_t k = 0; k < q->prompt_len; ++k) {
      // The shared prefix is the same for everyone (seeded by position).
      q->prompt[k] = k < shared ? (int32_t)((k * 2654435761u) % 4096)
                                : (int32_t)(rng_unit(&r) * 4096);
    }
    q->got = 0;
  }
  return 0;
}

static void on_token(void *user, const accel_serve_token_t *t) {
  serve_bench_t *b = user;
  req_t *q = &b->reqs[t->id - 1];
  double now = now_s(b);
  if (q->got++ == 0) q->first_s = now;
  q->last_s = now;
}

static accel_serve_engine_t *engine(serve_bench_t *b, uint32_t flags) {
  accel_serve_engine_desc_t d = {.struct_size = sizeof(d),
                                 .flags = flags | ACCEL_SERVE_CHUNKED_PREFILL,
                                 .model_path = b->model,
                                 .kernels_path = b->ref,
                                 .kv_bytes = 48ull << 20,
                                 .max_step_tokens = 512,
                                 .max_step_seqs = STEP_SEQS,
                                 .max_context = 1024};
  accel_serve_engine_t *e = NULL;
  if (accel_serve_engine_create(b->dev, &d, &e) != ACCEL_OK) {
    fprintf(stderr, "accel-bench serve: %s\n", accel_last_error());
    return NULL;
  }
  return e;
}

// Submits request |i| asking for |out_len| tokens (its own or, padded, its
// batch's longest).
static int submit(serve_bench_t *b, accel_serve_engine_t *e, uint32_t i,
                  uint32_t out_len) {
  req_t *q = &b->reqs[i];
  accel_serve_request_desc_t d = {.struct_size = sizeof(d),
                                  .prompt = q->prompt,
                                  .prompt_tokens = q->prompt_len,
                                  .max_new_tokens = out_len,
                                  .eos_token = -1,
                                  .on_token = on_token,
                                  .user = b};
  d.sampling = (accel_sampling_params_t){.struct_size = sizeof(d.sampling),
                                         .temperature = 0.8f, .top_p = 0.95f,
                                         .seed = i};
  uint64_t id = 0;
  if (accel_serve_submit(e, &d, &id) != ACCEL_OK || id != i + 1) {
    fprintf(stderr, "accel-bench serve: submit: %s\n", accel_last_error());
    return 1;
  }
  return 0;
}

// Runs the workload; |batch| 0: continuous (each request submitted at its
// arrival), else static batches of |batch|, |padded| or not. Returns the
// requested tokens generated per second (a padded row's tokens past its own
// length are not counted), or -1; |waste| receives the KV waste (%) over
// the steps.
static double run(serve_bench_t *b, accel_serve_engine_t *e, uint32_t batch,
                  bool padded, double *waste) {
  uint64_t slots = 0, tokens = 0, generated = 0;
  uint32_t next = 0, pending = 0, batch_end = 0;
  b->t0_ns = bench_now_ns();
  while (next < b->n || pending > 0) {
    double now = now_s(b);
    if (batch == 0) {
      while (next < b->n && b->reqs[next].arrival_s <= now) {
        if (submit(b, e, next, b->reqs[next].out_len) != 0) return -1;
        ++next;
      }
    } else if (pending == 0 && next < b->n) {
      // The next batch, once its last request has arrived.
      batch_end = next + batch < b->n ? next + batch : b->n;
      while (now_s(b) < b->reqs[batch_end - 1].arrival_s) {
      }
      uint32_t longest = 0;
      for (uint32_t i = next; i < batch_end; ++i) {
        if (b->reqs[i].out_len > longest) longest = b->reqs[i].out_len;
      }
      while (next < batch_end) {
        uint32_t out_len = padded ? longest : b->reqs[next].out_len;
        if (submit(b, e, next, out_len) != 0) return -1;
        ++next;
      }
    }
    if (accel_serve_step(e, &pending) != ACCEL_OK) {
      fprintf(stderr, "accel-bench serve: step: %s\n", accel_last_error());
      return -1;
    }
    accel_serve_stats_t st = {.struct_size = sizeof(st)};
    (void)accel_serve_stats(e, &st);
    slots += st.kv_token_slots;
    tokens += st.kv_tokens;
    if (pending == 0 && next < b->n && batch == 0) {
      // Idle until the next arrival.
      while (now_s(b) < b->reqs[next].arrival_s) {
      }
    }
  }
  double wall = now_s(b);
  for (uint32_t i = 0; i < b->n; ++i) {
    generated += b->reqs[i].got < b->reqs[i].out_len ? b->reqs[i].got
                                                     : b->reqs[i].out_len;
    (void)accel_serve_release(e, i + 1);
  }
  if (waste != NULL) {
    *waste = slots ? 100.0 * (double)(slots - tokens) / (double)slots : 0;
  }
  return (double)generated / wall;
}

static double percentile(double *v, uint32_t n, double p) {
  for (uint32_t i = 1; i < n; ++i) {  // insertion sort: n is small
    double x = v[i];
    uint32_t j = i;
    for (; j > 0 && v[j - 1] > x; --j) v[j] = v[j - 1];
    v[j] = x;
  }
  uint32_t k = (uint32_t)ceil(p * n) - 1;
  return v[k < n ? k : n - 1];
}

static int setup(void *ctx) {
  serve_bench_t *b = ctx;
  const char *tmp = getenv("TMPDIR");
  snprintf(b->dir, sizeof(b->dir), "%s/accel-bench-serve-XXXXXX",
           tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  if (mkdtemp(b->dir) == NULL) {
    fprintf(stderr, "accel-bench serve: cannot create %s\n", b->dir);
    return 1;
  }
  snprintf(b->model, sizeof(b->model), "%s/decoder.axe", b->dir);
  decoder_config_t c = {.layers = 2, .dim = 512, .heads = 8, .kv_heads = 2,
                        .head_dim = 64, .ffn = 1536, .vocab = 4096,
                        .block_size = 4, .seed = 3};
  decoder_pack(&c, b->model);
  return 0;
}

static void teardown(void *ctx) {
  serve_bench_t *b = ctx;
  free_prompts(b);
  unlink(b->model);
  rmdir(b->dir);
}

// Slots: continuous tok/s, static (padded) tok/s, waste %, TTFT p50, p99,
// TPOT p50, p99 (ms), static unpadded tok/s.
static int measure_batching(void *ctx, int run_index, double *out) {
  serve_bench_t *b = ctx;
  if (make_workload(b, 11 + (uint64_t)(run_index + 1), 0) != 0) return 1;
  accel_serve_engine_t *e = engine(b, 0);
  if (e == NULL) return 1;
  out[1] = run(b, e, STEP_SEQS, true, NULL);
  accel_serve_engine_destroy(e);
  for (uint32_t i = 0; i < b->n; ++i) b->reqs[i].got = 0;
  e = engine(b, 0);
  if (e == NULL) return 1;
  out[7] = run(b, e, STEP_SEQS, false, NULL);
  accel_serve_engine_destroy(e);
  for (uint32_t i = 0; i < b->n; ++i) b->reqs[i].got = 0;
  e = engine(b, 0);
  if (e == NULL) return 1;
  out[0] = run(b, e, 0, false, &out[2]);
  accel_serve_engine_destroy(e);
  if (out[0] < 0 || out[1] < 0 || out[7] < 0) return 1;
  double ttft[MAX_REQ], tpot[MAX_REQ];
  uint32_t m = 0;
  for (uint32_t i = 0; i < b->n; ++i) {
    req_t *q = &b->reqs[i];
    ttft[i] = 1e3 * (q->first_s - q->arrival_s);
    if (q->got > 1) tpot[m++] = 1e3 * (q->last_s - q->first_s) / (q->got - 1);
  }
  out[3] = percentile(ttft, b->n, 0.50);
  out[4] = percentile(ttft, b->n, 0.99);
  out[5] = m ? percentile(tpot, m, 0.50) : 0;
  out[6] = m ? percentile(tpot, m, 0.99) : 0;
  return 0;
}

// Slots: tok/s with prefix caching, tok/s without, hit rate (%).
static int measure_prefix(void *ctx, int run_index, double *out) {
  serve_bench_t *b = ctx;
  if (make_workload(b, 97 + (uint64_t)(run_index + 1), 256) != 0) return 1;
  for (int with = 0; with < 2; ++with) {
    accel_serve_engine_t *e = engine(b, with ? ACCEL_SERVE_PREFIX_CACHING : 0);
    if (e == NULL) return 1;
    for (uint32_t i = 0; i < b->n; ++i) b->reqs[i].got = 0;
    out[with ? 0 : 1] = run(b, e, 0, false, NULL);
    accel_serve_stats_t st = {.struct_size = sizeof(st)};
    (void)accel_serve_stats(e, &st);
    if (with) {
      out[2] = st.prefix_queries
                   ? 100.0 * (double)st.prefix_hits / (double)st.prefix_queries
                   : 0;
    }
    accel_serve_engine_destroy(e);
  }
  return out[0] < 0 || out[1] < 0;
}

// Slots: host us per step replaying, launching; % of steps replayed; tok/s
// replaying, launching.
static int measure_step_host(void *ctx, int run_index, double *out) {
  serve_bench_t *b = ctx;
  if (make_workload(b, 41 + (uint64_t)(run_index + 1), 0) != 0) return 1;
  for (int direct = 0; direct < 2; ++direct) {
    accel_serve_engine_t *e =
        engine(b, direct ? ACCEL_SERVE_DIRECT_LAUNCH : 0);
    if (e == NULL) return 1;
    for (uint32_t i = 0; i < b->n; ++i) b->reqs[i].got = 0;
    out[direct ? 4 : 3] = run(b, e, 0, false, NULL);
    accel_serve_stats_t st = {.struct_size = sizeof(st)};
    (void)accel_serve_stats(e, &st);
    accel_serve_engine_destroy(e);
    if (out[direct ? 4 : 3] < 0 || st.steps == 0) return 1;
    out[direct] = (double)st.step_host_ns / 1e3 / (double)st.steps;
    if (!direct) {
      out[2] = 100.0 * (double)st.steps_replayed / (double)st.steps;
    }
  }
  return 0;
}

static const bench_figure_t k_batching[] = {
    {.name = "serve_throughput_continuous", .unit = "tok/s", .value_slot = 0,
     .baseline_name = "serve_throughput_static", .baseline_slot = 1,
     .target = ">= 2"},
    {.name = "serve_continuous_vs_unpadded", .unit = "tok/s", .value_slot = 0,
     .baseline_name = "serve_throughput_static_unpadded", .baseline_slot = 7},
    {.name = "serve_kv_waste", .unit = "%", .value_slot = 2,
     .target = "<= 2"},
    {.name = "serve_ttft_p50", .unit = "ms", .value_slot = 3},
    {.name = "serve_ttft_p99", .unit = "ms", .value_slot = 4},
    {.name = "serve_tpot_p50", .unit = "ms", .value_slot = 5},
    {.name = "serve_tpot_p99", .unit = "ms", .value_slot = 6},
};

static const bench_figure_t k_prefix[] = {
    {.name = "serve_shared_prefix", .unit = "tok/s", .value_slot = 0,
     .baseline_name = "serve_shared_prefix_uncached", .baseline_slot = 1},
    {.name = "serve_prefix_hit_rate", .unit = "%", .value_slot = 2},
};

static const bench_figure_t k_step_host[] = {
    {.name = "serve_step_host_us", .unit = "us", .value_slot = 0,
     .baseline_name = "serve_step_host_us_launched", .baseline_slot = 1},
    {.name = "serve_steps_replayed", .unit = "%", .value_slot = 2},
    {.name = "serve_throughput_replayed", .unit = "tok/s", .value_slot = 3,
     .baseline_name = "serve_throughput_launched", .baseline_slot = 4},
};

int accel_bench_serve(const bench_args_t *args) {
  static serve_bench_t b;
  const char *ref = getenv("ACCEL_REFERENCE_AXE");
  b.ref = ref != NULL && ref[0] != '\0' ? ref : ACCEL_REFERENCE_AXE_PATH;
  b.n = args->quick ? 16 : 96;
  if (accel_runtime_create(NULL, &b.rt) != ACCEL_OK ||
      accel_device_get(b.rt, 0, &b.dev) != ACCEL_OK) {
    fprintf(stderr, "accel-bench serve: %s\n", accel_last_error());
    return 1;
  }
  bench_report_t report;
  bench_report_init(&report, "serve", b.dev);
  int runs = args->quick ? 1 : 3;
  bench_group_t g1 = {.runs = runs, .slots = 8, .setup = setup,
                      .measure = measure_batching, .teardown = teardown,
                      .figures = k_batching,
                      .figure_count = sizeof(k_batching) / sizeof(k_batching[0])};
  bench_group_t g2 = {.runs = runs, .slots = 3, .setup = setup,
                      .measure = measure_prefix, .teardown = teardown,
                      .figures = k_prefix,
                      .figure_count = sizeof(k_prefix) / sizeof(k_prefix[0])};
  bench_group_t g3 = {.runs = runs, .slots = 5, .setup = setup,
                      .measure = measure_step_host, .teardown = teardown,
                      .figures = k_step_host,
                      .figure_count =
                          sizeof(k_step_host) / sizeof(k_step_host[0])};
  int rc = bench_group_run(&report, &g1, &b);
  if (rc == 0) rc = bench_group_run(&report, &g2, &b);
  if (rc == 0) rc = bench_group_run(&report, &g3, &b);
  if (rc == 0) rc = bench_print(&report, args->json);
  accel_runtime_destroy(b.rt);
  return rc;
}
