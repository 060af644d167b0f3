// The serving engine (include/accel/serve.h) on the host device with a small
// decoder packed by examples/decoder_run.c. The engine's logits against a
// float64 model of the decoder are checked by tests/examples/decoder_test.c
// (example-decoder runs on the engine). Here: every request's tokens and
// logits in a crowded engine (chunked prefill, prefix caching, preemption by
// recompute or swap), launched step by step and replayed from step command
// buffers, equal those of the same request run alone launch by launch; the
// step buffer cache stays bounded; a fault in a replayed step fails only
// that step's request; releases return every block; the pull iterator
// streams what the callback sees; misuse is refused.
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_support.h"

#include "decoder_run.h"
#include "fault_driver.h"

static const char *g_ref;         // reference.axe
static char g_model[256];         // the packed test model
static char g_dir[256];           // scratch directory
static decoder_config_t g_cfg = {.layers = 2, .dim = 64, .heads = 4,
                                 .kv_heads = 2, .head_dim = 16, .ffn = 96,
                                 .vocab = 97, .block_size = 4, .seed = 7};

// MAX_NEW: the most tokens of a random request; MAX_OUT: of any request.
enum { MAX_REQ = 24, MAX_NEW = 24, MAX_OUT = 108, VOCAB = 97 };

// What one request produced.
typedef struct run {
  int32_t tokens[MAX_OUT];
  float logits[MAX_OUT][VOCAB];
  uint32_t count;
  uint32_t end;
} run_t;

static void on_token(void *user, const accel_serve_token_t *t) {
  run_t *r = user;
  assert_int_equal(t->index, r->count);
  assert_int_equal(t->vocab, VOCAB);
  assert_true(r->count < MAX_OUT);
  r->tokens[r->count] = t->token;
  memcpy(r->logits[r->count], t->logits, sizeof(float) * VOCAB);
  r->count++;
  r->end = t->end;
}

static accel_serve_engine_t *engine_new(accel_device_t *dev, uint32_t flags,
                                        uint64_t kv_blocks,
                                        uint32_t step_tokens) {
  // Block bytes: layers x (K and V) x block_size x kv_heads x head_dim x 4.
  uint64_t block = 2ull * g_cfg.layers * g_cfg.block_size * g_cfg.kv_heads *
                   g_cfg.head_dim * 4;
  accel_serve_engine_desc_t d = {.struct_size = sizeof(d), .flags = flags,
                                 .model_path = g_model, .kernels_path = g_ref,
                                 .kv_bytes = kv_blocks * block,
                                 .swap_bytes = (flags & ACCEL_SERVE_PREEMPT_SWAP)
                                                   ? 64 * block : 0,
                                 .max_step_tokens = step_tokens,
                                 .max_step_seqs = 8, .max_context = 64};
  accel_serve_engine_t *e = NULL;
  assert_accel_ok(accel_serve_engine_create(dev, &d, &e));
  return e;
}

static void run_until_idle(accel_serve_engine_t *e) {
  uint32_t pending = 1;
  for (int i = 0; pending > 0; ++i) {
    assert_true(i < 100000);
    assert_accel_ok(accel_serve_step(e, &pending));
  }
}

static accel_serve_request_desc_t request(const int32_t *prompt, uint32_t n,
                                          uint32_t max_new, run_t *out) {
  accel_serve_request_desc_t d = {.struct_size = sizeof(d), .prompt = prompt,
                                  .prompt_tokens = n,
                                  .max_new_tokens = max_new, .eos_token = -1,
                                  .on_token = on_token, .user = out};
  d.sampling = (accel_sampling_params_t){.struct_size = sizeof(d.sampling),
                                         .top_p = 1.0f};
  return d;
}

static int group_setup(void **state) {
  g_ref = getenv("ACCEL_TEST_REFERENCE_AXE");
  if (g_ref == NULL) {
    fprintf(stderr, "ACCEL_TEST_REFERENCE_AXE is not set\n");
    return -1;
  }
  snprintf(g_dir, sizeof(g_dir), "/tmp/accel-engine-test-XXXXXX");
  if (mkdtemp(g_dir) == NULL) {
    return -1;
  }
  snprintf(g_model, sizeof(g_model), "%s/model.axe", g_dir);
  decoder_pack(&g_cfg, g_model);
  return test_env_setup(state);
}

static int group_teardown(void **state) {
  if (*state == NULL) {
    return 0;  // setup failed before the environment existed
  }
  unlink(g_model);
  rmdir(g_dir);
  return test_env_teardown(state);
}

typedef struct workload {
  int32_t prompts[MAX_REQ][40];
  uint32_t lens[MAX_REQ], max_new[MAX_REQ];
  int32_t priority[MAX_REQ];
  accel_sampling_params_t sampling[MAX_REQ];
  run_t alone[MAX_REQ];
  run_t batched[MAX_REQ];
} workload_t;

static void make_workload(workload_t *w, test_rng_t *rng) {
  int32_t shared[2][24];
  for (int s = 0; s < 2; ++s) {
    for (int i = 0; i < 24; ++i) {
      shared[s][i] = (int32_t)test_rng_range(rng, 0, VOCAB - 1);
    }
  }
  for (int q = 0; q < MAX_REQ; ++q) {
    w->lens[q] = (uint32_t)test_rng_range(rng, 1, 40);
    w->max_new[q] = (uint32_t)test_rng_range(rng, 1, MAX_NEW);
    uint32_t prefix = q % 3 == 2 ? 0 : (uint32_t)test_rng_range(rng, 0, 24);
    for (uint32_t i = 0; i < w->lens[q]; ++i) {
      w->prompts[q][i] = i < prefix ? shared[q % 3][i]
                                    : (int32_t)test_rng_range(rng, 0,
                                                              VOCAB - 1);
    }
    w->priority[q] = (int32_t)test_rng_range(rng, 0, 2);
    bool greedy = test_rng_range(rng, 0, 2) == 0;
    w->sampling[q] = (accel_sampling_params_t){
        .struct_size = sizeof(accel_sampling_params_t),
        .temperature = greedy ? 0.0f : 0.8f,
        .top_k = (uint32_t)test_rng_range(rng, 0, 20),
        .top_p = test_rng_range(rng, 0, 1) ? 0.9f : 1.0f,
        .seed = test_rng_next(rng)};
  }
}

// Runs every request of |w| together in a small, crowded engine with
// |flags| (arrivals spread over the steps: two requests every step) into
// |out|; returns the engine's counters.
static accel_serve_stats_t run_crowded(accel_device_t *dev, uint32_t flags,
                                       uint64_t kv_blocks, workload_t *w,
                                       run_t *out) {
  accel_serve_engine_t *e = engine_new(dev, flags, kv_blocks, 16);
  uint64_t ids[MAX_REQ];
  uint32_t submitted = 0, pending = 1;
  while (submitted < MAX_REQ || pending > 0) {
    for (int k = 0; k < 2 && submitted < MAX_REQ; ++k, ++submitted) {
      accel_serve_request_desc_t d =
          request(w->prompts[submitted], w->lens[submitted],
                  w->max_new[submitted], &out[submitted]);
      d.sampling = w->sampling[submitted];
      d.priority = w->priority[submitted];
      assert_accel_ok(accel_serve_submit(e, &d, &ids[submitted]));
    }
    assert_accel_ok(accel_serve_step(e, &pending));
  }
  accel_serve_stats_t st = {.struct_size = sizeof(st)};
  assert_accel_ok(accel_serve_stats(e, &st));
  print_message("flags 0x%x: %llu steps (%llu direct, %llu recorded, %llu "
                "replayed, %u buffers), %llu preemptions, prefix hits %llu "
                "of %llu\n", flags, (unsigned long long)st.steps,
                (unsigned long long)st.steps_direct,
                (unsigned long long)st.steps_recorded,
                (unsigned long long)st.steps_replayed, st.command_buffers,
                (unsigned long long)st.preemptions,
                (unsigned long long)st.prefix_hits,
                (unsigned long long)st.prefix_queries);
  for (int q = 0; q < MAX_REQ; ++q) {
    assert_accel_ok(accel_serve_release(e, ids[q]));
  }
  accel_serve_stats_t end = {.struct_size = sizeof(end)};
  assert_accel_ok(accel_serve_stats(e, &end));
  assert_int_equal(end.kv_used_blocks, 0);
  assert_int_equal(end.requests, 0);
  accel_serve_engine_destroy(e);
  return st;
}

static void expect_same_runs(const workload_t *w, const run_t *got,
                             const run_t *want) {
  for (int q = 0; q < MAX_REQ; ++q) {
    assert_int_equal(got[q].count, want[q].count);
    assert_int_equal(got[q].count, w->max_new[q]);
    for (uint32_t t = 0; t < want[q].count; ++t) {
      assert_int_equal(got[q].tokens[t], want[q].tokens[t]);
      assert_memory_equal(got[q].logits[t], want[q].logits[t],
                          sizeof(float) * VOCAB);
    }
  }
}

// Runs every request of |w| alone (one engine, one at a time, launch by
// launch), then all of them together in a small, crowded engine with
// |flags|, once launch by launch and once replaying step command buffers,
// and compares every token and logit with the lone runs.
static void check_batched_equals_alone(accel_device_t *dev, uint32_t flags,
                                       uint64_t kv_blocks) {
  test_rng_t rng;
  test_rng_init(&rng, "engine batched");
  workload_t *w = calloc(1, sizeof(*w));
  make_workload(w, &rng);
  accel_serve_engine_t *alone =
      engine_new(dev, ACCEL_SERVE_DIRECT_LAUNCH, 64, 64);
  for (int q = 0; q < MAX_REQ; ++q) {
    accel_serve_request_desc_t d =
        request(w->prompts[q], w->lens[q], w->max_new[q], &w->alone[q]);
    d.sampling = w->sampling[q];
    uint64_t id;
    assert_accel_ok(accel_serve_submit(alone, &d, &id));
    run_until_idle(alone);
    assert_accel_ok(accel_serve_release(alone, id));
  }
  accel_serve_engine_destroy(alone);

  accel_serve_stats_t st = run_crowded(dev, flags | ACCEL_SERVE_DIRECT_LAUNCH,
                                       kv_blocks, w, w->batched);
  assert_int_equal(st.steps_direct, st.steps);
  assert_int_equal(st.steps_recorded + st.steps_replayed, 0);
  expect_same_runs(w, w->batched, w->alone);
  memset(w->batched, 0, sizeof(w->batched));
  st = run_crowded(dev, flags, kv_blocks, w, w->batched);
  assert_int_equal(st.steps_direct + st.steps_recorded + st.steps_replayed,
                   st.steps);
  assert_true(st.steps_replayed > 0);
  assert_true(st.command_buffers <= 32);
  expect_same_runs(w, w->batched, w->alone);
  free(w);
}

// Batched decode (one GEMM over the batch, paged attention over the batch)
// and chunked prefill give every request the logits it gets alone.
static void test_batched_logits_equal_single_sequence(void **state) {
  test_env_t *env = *state;
  check_batched_equals_alone(env->device, ACCEL_SERVE_CHUNKED_PREFILL, 64);
}

// The same under prefix caching and preemption by recompute (a cache of 24
// blocks for 24 requests of up to 64 tokens).
static void test_prefix_caching_and_recompute_keep_logits(void **state) {
  test_env_t *env = *state;
  check_batched_equals_alone(env->device,
                             ACCEL_SERVE_CHUNKED_PREFILL |
                                 ACCEL_SERVE_PREFIX_CACHING,
                             24);
}

// The same with preemption by swap to host memory (the swap copies run on
// the engine's stream).
static void test_swap_preemption_keeps_logits(void **state) {
  test_env_t *env = *state;
  check_batched_equals_alone(env->device,
                             ACCEL_SERVE_CHUNKED_PREFILL |
                                 ACCEL_SERVE_PREEMPT_SWAP,
                             20);
}

// Releasing requests mid-stream (admitted, pending, swapped) returns every
// block at the next step, and no callback follows the release.
static void test_release_mid_stream_returns_every_block(void **state) {
  test_env_t *env = *state;
  accel_serve_engine_t *e = engine_new(env->device, ACCEL_SERVE_CHUNKED_PREFILL,
                                       32, 16);
  int32_t prompt[30];
  for (int i = 0; i < 30; ++i) prompt[i] = (i * 7) % VOCAB;
  run_t *runs = calloc(4, sizeof(run_t));
  uint64_t ids[4];
  for (int q = 0; q < 4; ++q) {
    accel_serve_request_desc_t d = request(prompt, 30 - q, 20, &runs[q]);
    assert_accel_ok(accel_serve_submit(e, &d, &ids[q]));
  }
  uint32_t pending;
  for (int s = 0; s < 5; ++s) {
    assert_accel_ok(accel_serve_step(e, &pending));
  }
  accel_serve_stats_t st = {.struct_size = sizeof(st)};
  assert_accel_ok(accel_serve_stats(e, &st));
  assert_true(st.kv_used_blocks > 0);
  uint32_t seen[4];
  for (int q = 0; q < 4; ++q) {
    seen[q] = runs[q].count;
    assert_accel_ok(accel_serve_release(e, ids[q]));
  }
  assert_accel_status(accel_serve_release(e, ids[0]), ACCEL_ERROR_NOT_FOUND);
  assert_accel_ok(accel_serve_step(e, &pending));
  assert_int_equal(pending, 0);
  assert_accel_ok(accel_serve_stats(e, &st));
  assert_int_equal(st.kv_used_blocks, 0);
  assert_int_equal(st.kv_free_blocks, 32);
  assert_int_equal(st.cancelled, 4);
  for (int q = 0; q < 4; ++q) {
    assert_int_equal(runs[q].count, seen[q]);
  }
  free(runs);
  accel_serve_engine_destroy(e);
}

typedef struct stepper {
  accel_serve_engine_t *e;
  atomic_int stop;
} stepper_t;

static void *step_loop(void *arg) {
  stepper_t *s = arg;
  while (!atomic_load(&s->stop)) {
    uint32_t pending = 0;
    assert_int_equal(accel_serve_step(s->e, &pending), ACCEL_OK);
    if (pending == 0) {
      (void)accel_serve_wait_work(s->e, 10 * 1000 * 1000);
    }
  }
  return NULL;
}

// The pull iterator, read from another thread than the stepping one, gives
// the tokens the callback gives, then the end; a timeout leaves the outputs.
static void test_iterator_streams_the_callback_tokens(void **state) {
  test_env_t *env = *state;
  accel_serve_engine_t *e = engine_new(env->device, 0, 32, 64);
  int32_t prompt[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  run_t *cb = calloc(1, sizeof(*cb));
  accel_serve_request_desc_t d = request(prompt, 9, 12, cb);
  d.sampling.temperature = 1.0f;
  d.sampling.seed = 42;
  uint64_t id_cb, id_it;
  assert_accel_ok(accel_serve_submit(e, &d, &id_cb));
  d.on_token = NULL;
  assert_accel_ok(accel_serve_submit(e, &d, &id_it));
  int32_t token = -5;
  uint32_t end = 9;
  assert_accel_status(accel_serve_next(e, id_it, 0, &token, &end),
                      ACCEL_ERROR_TIMEOUT);
  assert_int_equal(token, -5);
  stepper_t s = {.e = e};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, step_loop, &s), 0);
  int32_t got[12];
  uint32_t n = 0;
  for (;;) {
    assert_accel_ok(accel_serve_next(e, id_it, ACCEL_TIMEOUT_INFINITE, &token,
                                     &end));
    if (token < 0) break;
    assert_true(n < 12);
    got[n++] = token;
    if (end != ACCEL_SERVE_END_NONE) break;
  }
  assert_int_equal(n, 12);
  assert_int_equal(end, ACCEL_SERVE_END_LENGTH);
  assert_accel_ok(accel_serve_next(e, id_it, 0, &token, &end));
  assert_int_equal(token, -1);
  assert_int_equal(end, ACCEL_SERVE_END_LENGTH);
  atomic_store(&s.stop, 1);
  pthread_join(th, NULL);
  assert_int_equal(cb->count, 12);
  assert_memory_equal(got, cb->tokens, sizeof(got));
  assert_accel_ok(accel_serve_release(e, id_cb));
  assert_accel_ok(accel_serve_release(e, id_it));
  assert_accel_status(accel_serve_next(e, id_it, 0, &token, &end),
                      ACCEL_ERROR_NOT_FOUND);
  free(cb);
  accel_serve_engine_destroy(e);
}

// Bad requests are refused with a message and leave *out_id untouched.
static void test_submit_rejects_bad_requests(void **state) {
  test_env_t *env = *state;
  accel_serve_engine_t *e = engine_new(env->device, 0, 32, 16);
  int32_t prompt[20] = {0};
  run_t r;
  uint64_t id = 77;
  accel_serve_request_desc_t d = request(prompt, 4, 4, &r);
  assert_accel_status(accel_serve_submit(NULL, &d, &id),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_serve_submit(e, NULL, &id),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  static const char *const cases[] = {
      "short struct", "empty prompt", "no new tokens", "above context",
      "prompt above budget (no chunking)", "negative temperature",
      "nan temperature", "top_p 0", "top_p above 1", "eos outside",
      "reserved"};
  for (int i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); ++i) {
    accel_serve_request_desc_t x = d;
    switch (i) {
      case 0: x.struct_size = 8; break;
      case 1: x.prompt_tokens = 0; break;
      case 2: x.max_new_tokens = 0; break;
      case 3: x.max_new_tokens = 100000; break;
      case 4: x.prompt_tokens = 20; break;
      case 5: x.sampling.temperature = -1.0f; break;
      case 6: x.sampling.temperature = NAN; break;
      case 7: x.sampling.top_p = 0.0f; break;
      case 8: x.sampling.top_p = 1.5f; break;
      case 9: x.eos_token = VOCAB; break;
      default: x.reserved0 = 1; break;
    }
    print_message("case: %s\n", cases[i]);
    assert_accel_status(accel_serve_submit(e, &x, &id),
                        ACCEL_ERROR_INVALID_ARGUMENT);
    assert_int_equal(id, 77);
  }
  prompt[2] = VOCAB;
  assert_accel_status(accel_serve_submit(e, &d, &id),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "prompt token 2"));
  assert_accel_status(accel_serve_release(e, 12345), ACCEL_ERROR_NOT_FOUND);
  accel_serve_engine_destroy(e);
}

// Bad engine descriptions and models are refused with a message.
static void test_create_rejects_bad_descriptions(void **state) {
  test_env_t *env = *state;
  accel_serve_engine_t *e = (accel_serve_engine_t *)0x1;
  accel_serve_engine_desc_t d = {.struct_size = sizeof(d),
                                 .model_path = g_model, .kernels_path = g_ref,
                                 .max_context = 64};
  assert_accel_status(accel_serve_engine_create(NULL, &d, &e),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_serve_engine_desc_t bad = d;
  bad.flags = 1u << 9;
  assert_accel_status(accel_serve_engine_create(env->device, &bad, &e),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  bad = d;
  bad.flags = ACCEL_SERVE_PREEMPT_SWAP;
  assert_accel_status(accel_serve_engine_create(env->device, &bad, &e),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  bad = d;
  bad.kv_bytes = 4096;  // not one request's worth
  assert_accel_status(accel_serve_engine_create(env->device, &bad, &e),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  bad = d;
  bad.model_path = g_ref;  // kernels, not a decoder
  assert_accel_status(accel_serve_engine_create(env->device, &bad, &e),
                      ACCEL_ERROR_FORMAT);
  bad = d;
  bad.model_path = "/nonexistent/model.axe";
  assert_true(accel_serve_engine_create(env->device, &bad, &e) != ACCEL_OK);
  assert_ptr_equal(e, (accel_serve_engine_t *)0x1);
  accel_serve_model_info_t info = {.struct_size = sizeof(info)};
  e = engine_new(env->device, 0, 32, 16);
  assert_accel_ok(accel_serve_model_info(e, &info));
  assert_int_equal(info.vocab, VOCAB);
  assert_int_equal(info.device_blocks, 32);
  assert_int_equal(info.block_tokens, 4);
  accel_serve_engine_destroy(e);
}

// Runs |count| requests one at a time on an engine with |flags| (max_step_seqs
// |seqs|, max_context |context|): request q's prompt is prompts[q] of
// lens[q] tokens and it generates max_new[q] greedy tokens into out[q].
// Returns the engine's counters; checks after every step that at most 32
// step command buffers are cached.
static accel_serve_stats_t run_each(accel_device_t *dev, uint32_t flags,
                                    uint32_t seqs, uint32_t context,
                                    uint32_t count, const int32_t *prompts,
                                    const uint32_t *lens,
                                    const uint32_t *max_new, bool together,
                                    run_t *out) {
  uint64_t block = 2ull * g_cfg.layers * g_cfg.block_size * g_cfg.kv_heads *
                   g_cfg.head_dim * 4;
  accel_serve_engine_desc_t d = {
      .struct_size = sizeof(d), .flags = flags | ACCEL_SERVE_CHUNKED_PREFILL,
      .model_path = g_model, .kernels_path = g_ref,
      .kv_bytes = 2048 * block, .max_step_tokens = seqs > 16 ? seqs : 16,
      .max_step_seqs = seqs, .max_context = context};
  accel_serve_engine_t *e = NULL;
  assert_accel_ok(accel_serve_engine_create(dev, &d, &e));
  uint64_t *ids = calloc(count, sizeof(uint64_t));
  accel_serve_stats_t st = {.struct_size = sizeof(st)};
  for (uint32_t q = 0; q < count; ++q) {
    accel_serve_request_desc_t rq =
        request(prompts + (uint64_t)q * context, lens[q], max_new[q], &out[q]);
    assert_accel_ok(accel_serve_submit(e, &rq, &ids[q]));
    if (together && q + 1 < count) {
      continue;
    }
    uint32_t pending = 1;
    while (pending > 0) {
      assert_accel_ok(accel_serve_step(e, &pending));
      assert_accel_ok(accel_serve_stats(e, &st));
      assert_true(st.command_buffers <= 32);
    }
  }
  for (uint32_t q = 0; q < count; ++q) {
    assert_int_equal(out[q].count, max_new[q]);
    assert_accel_ok(accel_serve_release(e, ids[q]));
  }
  free(ids);
  accel_serve_engine_destroy(e);
  return st;
}

static void expect_same(const run_t *got, const run_t *want, uint32_t count) {
  for (uint32_t q = 0; q < count; ++q) {
    assert_int_equal(got[q].count, want[q].count);
    for (uint32_t t = 0; t < want[q].count; ++t) {
      assert_int_equal(got[q].tokens[t], want[q].tokens[t]);
      assert_memory_equal(got[q].logits[t], want[q].logits[t],
                          sizeof(float) * VOCAB);
    }
  }
}

// A replayed step whose prefill chunk continues a prompt reads the chunk's
// context through the binding table (the gathers' source blocks), so a
// replay with other block tables gives the launch-by-launch logits: 30-token
// prompts (chunks of 16 and 14) one after another, with short requests in
// between that move the free blocks around.
static void test_replayed_chunks_read_their_own_blocks(void **state) {
  test_env_t *env = *state;
  enum { N = 12, CTX = 64 };
  test_rng_t rng;
  test_rng_init(&rng, "engine replayed chunks");
  int32_t *prompts = calloc((uint64_t)N * CTX, sizeof(int32_t));
  uint32_t lens[N], max_new[N];
  for (uint32_t q = 0; q < N; ++q) {
    lens[q] = q % 2 == 0 ? 30 : 3 + q;
    max_new[q] = q % 2 == 0 ? 4 : 1;
    for (uint32_t i = 0; i < lens[q]; ++i) {
      prompts[q * CTX + i] = (int32_t)test_rng_range(&rng, 0, VOCAB - 1);
    }
  }
  run_t *direct = calloc(N, sizeof(run_t));
  run_t *replay = calloc(N, sizeof(run_t));
  run_each(env->device, ACCEL_SERVE_DIRECT_LAUNCH, 8, CTX, N, prompts, lens,
           max_new, false, direct);
  accel_serve_stats_t st = run_each(env->device, 0, 8, CTX, N, prompts, lens,
                                    max_new, false, replay);
  // Six 30-token prompts: their second chunk (14 rows over 30 positions)
  // is recorded at its second sight and replayed at the next four.
  assert_true(st.steps_replayed >= 4 * 5);
  expect_same(replay, direct, N);
  free(direct);
  free(replay);
  free(prompts);
}

// More step shapes than the cache holds: 36 one-token prompts generating
// 3, 6, ..., 108 tokens together make decode batches of 36, 35, ..., 1
// sequences, three steps each: every shape is recorded at its second step
// and replayed at its third, the least recently used buffer goes when 32
// are cached, and the tokens are those of launch-by-launch steps.
static void test_step_buffer_cache_stays_bounded(void **state) {
  test_env_t *env = *state;
  enum { N = 36, CTX = 112 };
  int32_t *prompts = calloc((uint64_t)N * CTX, sizeof(int32_t));
  uint32_t lens[N], max_new[N];
  for (uint32_t q = 0; q < N; ++q) {
    lens[q] = 1;
    max_new[q] = 3 * (q + 1);
    prompts[q * CTX] = (int32_t)(q * 5 % VOCAB);
  }
  run_t *direct = calloc(N, sizeof(run_t));
  run_t *replay = calloc(N, sizeof(run_t));
  run_each(env->device, ACCEL_SERVE_DIRECT_LAUNCH, N, CTX, N, prompts, lens,
           max_new, true, direct);
  accel_serve_stats_t st = run_each(env->device, 0, N, CTX, N, prompts, lens,
                                    max_new, true, replay);
  print_message("%llu steps: %llu direct, %llu recorded, %llu replayed, %u "
                "buffers\n", (unsigned long long)st.steps,
                (unsigned long long)st.steps_direct,
                (unsigned long long)st.steps_recorded,
                (unsigned long long)st.steps_replayed, st.command_buffers);
  assert_int_equal(st.steps, 3 * N);
  assert_int_equal(st.steps_direct, N);
  assert_int_equal(st.steps_recorded, N);
  assert_int_equal(st.steps_replayed, N);
  assert_int_equal(st.command_buffers, 32);
  expect_same(replay, direct, N);
  free(direct);
  free(replay);
  free(prompts);
}

// Runs request |a| (prompt 1..5, 40 greedy tokens) on an engine of |rt|;
// from step |b_at| on, also request |b| (prompt 6..11, 12 tokens). Returns
// the first failed step's status (ACCEL_OK: none) with its message in
// |why|, and the counters at the end.
static accel_status_t run_two(accel_runtime_t *rt, uint32_t b_at, run_t *a,
                              run_t *b, char *why, size_t why_size,
                              accel_serve_stats_t *out_stats) {
  accel_device_t *dev = NULL;
  assert_accel_ok(accel_device_get(rt, 0, &dev));
  accel_serve_engine_t *e = engine_new(dev, 0, 32, 64);
  int32_t pa[5] = {1, 2, 3, 4, 5}, pb[6] = {6, 7, 8, 9, 10, 11};
  accel_serve_request_desc_t da = request(pa, 5, 40, a);
  accel_serve_request_desc_t db = request(pb, 6, 12, b);
  uint64_t ia = 0, ib = 0;
  assert_accel_ok(accel_serve_submit(e, &da, &ia));
  accel_status_t first = ACCEL_OK;
  uint32_t pending = 1;
  for (uint32_t step = 0; pending > 0 || ib == 0; ++step) {
    assert_true(step < 1000);
    if (step == b_at) {
      assert_accel_ok(accel_serve_submit(e, &db, &ib));
    }
    accel_status_t s = accel_serve_step(e, &pending);
    if (s != ACCEL_OK && first == ACCEL_OK) {
      first = s;
      snprintf(why, why_size, "%s", accel_last_error());
    }
    if (s != ACCEL_OK) {
      pending = 1;  // the step's requests ended; step on for the others
    }
  }
  *out_stats = (accel_serve_stats_t){.struct_size = sizeof(*out_stats)};
  assert_accel_ok(accel_serve_stats(e, out_stats));
  assert_accel_ok(accel_serve_release(e, ia));
  assert_accel_ok(accel_serve_release(e, ib));
  accel_serve_engine_destroy(e);
  return first;
}

// A device fault inside a replayed step (ACCEL_FAULT_INJECT, an uncorrected
// error on the engine's stream "serve") fails that step's request with a
// message naming the failed execute of its command buffer, and the engine keeps
// serving: a request submitted afterwards gives the tokens and logits of a
// run with no fault.
static void test_fault_in_replayed_step_fails_its_requests_only(void **state) {
  (void)state;
  run_t *ref_a = calloc(1, sizeof(run_t)), *ref_b = calloc(1, sizeof(run_t));
  run_t *a = calloc(1, sizeof(run_t)), *b = calloc(1, sizeof(run_t));
  char why[512] = "";
  accel_serve_stats_t st;
  accel_runtime_t *rt = NULL;
  assert_accel_ok(accel_runtime_create(NULL, &rt));
  assert_accel_ok(run_two(rt, 30, ref_a, ref_b, why, sizeof(why), &st));
  accel_runtime_destroy(rt);
  assert_int_equal(ref_a->count, 40);
  assert_int_equal(ref_b->count, 12);

  // The first two steps go launch by launch (about 35 launches each), the
  // third records; each later step is one execute command on the stream,
  // so its 80th command is one of A's replayed decode steps.
  assert_int_equal(setenv("ACCEL_FAULT_INJECT",
                          "uncorrected,queue=serve,command=80", 1), 0);
  accel_status_t created = accel_runtime_create(NULL, &rt);
  unsetenv("ACCEL_FAULT_INJECT");
  assert_accel_ok(created);
  accel_status_t failed =
      run_two(rt, 30, a, b, why, sizeof(why), &st);
  accel_runtime_destroy(rt);
  print_message("failed step: %s: %s\n", accel_status_name(failed), why);
  assert_int_equal(failed, ACCEL_ERROR_IO);
  assert_non_null(strstr(why, "1 request failed"));
  assert_non_null(strstr(why, "(execute)"));
  assert_int_equal(st.failed_steps, 1);
  assert_true(st.steps_replayed > 0);
  // A ended at the failed step: its tokens until then are the reference's.
  assert_int_equal(a->end, ACCEL_SERVE_END_NONE);
  assert_true(a->count > 2 && a->count < 40);
  expect_same(a, ref_a, 0);
  for (uint32_t t = 0; t < a->count; ++t) {
    assert_int_equal(a->tokens[t], ref_a->tokens[t]);
  }
  // B, after the failure, is served in full.
  expect_same(b, ref_b, 1);
  assert_int_equal(b->end, ACCEL_SERVE_END_LENGTH);
  free(ref_a);
  free(ref_b);
  free(a);
  free(b);
}

// ACCEL_SERVE_COMMAND_BUFFERS=0 makes an engine step launch by launch;
// a value other than 0 or 1 is refused at creation, naming the variable.
static void test_env_turns_step_buffers_off(void **state) {
  test_env_t *env = *state;
  assert_int_equal(setenv("ACCEL_SERVE_COMMAND_BUFFERS", "yes", 1), 0);
  accel_serve_engine_desc_t d = {.struct_size = sizeof(d),
                                 .model_path = g_model, .kernels_path = g_ref};
  accel_serve_engine_t *e = NULL;
  assert_accel_status(accel_serve_engine_create(env->device, &d, &e),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_null(e);
  assert_non_null(strstr(accel_last_error(), "ACCEL_SERVE_COMMAND_BUFFERS"));
  assert_int_equal(setenv("ACCEL_SERVE_COMMAND_BUFFERS", "0", 1), 0);
  e = engine_new(env->device, 0, 32, 64);
  unsetenv("ACCEL_SERVE_COMMAND_BUFFERS");
  int32_t prompt[3] = {4, 5, 6};
  run_t *r = calloc(1, sizeof(*r));
  accel_serve_request_desc_t rq = request(prompt, 3, 8, r);
  uint64_t id = 0;
  assert_accel_ok(accel_serve_submit(e, &rq, &id));
  run_until_idle(e);
  accel_serve_stats_t st = {.struct_size = sizeof(st)};
  assert_accel_ok(accel_serve_stats(e, &st));
  assert_int_equal(st.steps, 8);
  assert_int_equal(st.steps_direct, 8);
  assert_int_equal(st.command_buffers, 0);
  assert_accel_ok(accel_serve_release(e, id));
  accel_serve_engine_destroy(e);
  free(r);
}

// Writes a decoder .axe of metadata only, with decoder.version |version|.
static void pack_versioned(const char *path, const char *version) {
  accel_exe_builder_t *b = NULL;
  assert_accel_ok(accel_exe_builder_create(&b));
  const char *kv[][2] = {{"model", "decoder"}, {"decoder.layers", "1"},
                         {"decoder.dim", "64"}, {"decoder.heads", "4"},
                         {"decoder.kv_heads", "2"}, {"decoder.head_dim", "16"},
                         {"decoder.ffn", "96"}, {"decoder.vocab", "97"},
                         {"decoder.block_size", "4"},
                         {"decoder.version", version}};
  for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); ++i) {
    assert_accel_ok(accel_exe_builder_add_metadata(b, kv[i][0], kv[i][1]));
  }
  assert_accel_ok(accel_exe_builder_write_file(b, path, NULL, NULL));
  accel_exe_builder_destroy(b);
}

// A decoder .axe of an unknown layout version is refused with
// ACCEL_ERROR_VERSION and a message naming the version, before any other
// key or weight is read (this file has no weights at all).
static void test_create_refuses_unknown_decoder_version(void **state) {
  test_env_t *env = *state;
  char path[300];
  snprintf(path, sizeof(path), "%s/v.axe", g_dir);
  const char *versions[] = {"3", "0", "2.1", "10"};
  for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); ++i) {
    pack_versioned(path, versions[i]);
    accel_serve_engine_desc_t d = {.struct_size = sizeof(d),
                                   .model_path = path, .kernels_path = g_ref,
                                   .max_context = 64};
    accel_serve_engine_t *e = (accel_serve_engine_t *)0x1;
    assert_accel_status(accel_serve_engine_create(env->device, &d, &e),
                        ACCEL_ERROR_VERSION);
    assert_ptr_equal(e, (accel_serve_engine_t *)0x1);
    char want[64];
    snprintf(want, sizeof(want), "decoder.version \"%s\"", versions[i]);
    assert_non_null(strstr(accel_last_error(), want));
  }
  unlink(path);
}

// A device failure in a step fails the step and every unfinished request
// (the iterator ends with ACCEL_SERVE_END_ERROR), and the engine stays
// failed: later steps and submits return the stored error.
static void test_device_failure_ends_every_request(void **state) {
  (void)state;
  fault_driver_reset();
  fault_driver_offer_direct_submit_ops(false);  // launches via queue_submit
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = NULL;
  assert_accel_ok(fault_runtime_create(NULL, &rt));
  assert_accel_ok(accel_device_get(rt, 0, &dev));
  accel_serve_engine_t *e = engine_new(dev, 0, 32, 64);
  int32_t prompt[5] = {1, 2, 3, 4, 5};
  accel_serve_request_desc_t d = request(prompt, 5, 8, NULL);
  d.on_token = NULL;
  uint64_t a, b;
  assert_accel_ok(accel_serve_submit(e, &d, &a));
  uint32_t pending = 0;
  assert_accel_ok(accel_serve_step(e, &pending));
  assert_accel_ok(accel_serve_submit(e, &d, &b));
  fault_driver_arm(FAULT_OP_QUEUE_SUBMIT, 3, ACCEL_ERROR_DEVICE_LOST);
  assert_true(accel_serve_step(e, &pending) != ACCEL_OK);
  int32_t token = 0;
  uint32_t end = 0;
  assert_accel_ok(accel_serve_next(e, a, 0, &token, &end));  // its 1st token
  assert_true(token >= 0);
  assert_accel_ok(accel_serve_next(e, a, 0, &token, &end));
  assert_int_equal(token, -1);
  assert_int_equal(end, ACCEL_SERVE_END_ERROR);
  assert_accel_ok(accel_serve_next(e, b, 0, &token, &end));
  assert_int_equal(token, -1);
  assert_int_equal(end, ACCEL_SERVE_END_ERROR);
  assert_true(accel_serve_step(e, &pending) != ACCEL_OK);
  assert_non_null(strstr(accel_last_error(), "engine failed"));
  uint64_t c = 99;
  assert_true(accel_serve_submit(e, &d, &c) != ACCEL_OK);
  assert_int_equal(c, 99);
  assert_accel_ok(accel_serve_release(e, a));
  assert_accel_ok(accel_serve_release(e, b));
  fault_driver_reset();
  accel_serve_engine_destroy(e);
  accel_runtime_destroy(rt);
  fault_driver_offer_direct_submit_ops(true);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batched_logits_equal_single_sequence),
      cmocka_unit_test(test_prefix_caching_and_recompute_keep_logits),
      cmocka_unit_test(test_swap_preemption_keeps_logits),
      cmocka_unit_test(test_replayed_chunks_read_their_own_blocks),
      cmocka_unit_test(test_step_buffer_cache_stays_bounded),
      cmocka_unit_test(test_release_mid_stream_returns_every_block),
      cmocka_unit_test(test_iterator_streams_the_callback_tokens),
      cmocka_unit_test(test_submit_rejects_bad_requests),
      cmocka_unit_test(test_create_rejects_bad_descriptions),
      cmocka_unit_test(test_env_turns_step_buffers_off),
      cmocka_unit_test(test_create_refuses_unknown_decoder_version),
      cmocka_unit_test(test_device_failure_ends_every_request),
      cmocka_unit_test(test_fault_in_replayed_step_fails_its_requests_only),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
