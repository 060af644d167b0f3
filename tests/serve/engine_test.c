// The serving engine (include/accel/serve.h) on the host device with a small
// decoder packed by examples/decoder_run.c. The independent reference is the
// example's own single-sequence run (dense prefill, then paged decode, greedy,
// a different code path): the engine's logits must equal it bit for bit.
// Then batches: every request's tokens and logits in a crowded engine
// (chunked prefill, prefix caching, preemption by recompute or swap) equal
// those of the same request run alone; releases return every block; the
// pull iterator streams what the callback sees; misuse is refused.
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

enum { MAX_REQ = 24, MAX_NEW = 24, VOCAB = 97 };

// What one request produced.
typedef struct run {
  int32_t tokens[MAX_NEW];
  float logits[MAX_NEW][VOCAB];
  uint32_t count;
  uint32_t end;
} run_t;

static void on_token(void *user, const accel_serve_token_t *t) {
  run_t *r = user;
  assert_int_equal(t->index, r->count);
  assert_int_equal(t->vocab, VOCAB);
  assert_true(r->count < MAX_NEW);
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
  char path[512];
  const char *files[] = {"model.axe", "decoder-prefill.pftrace",
                         "decoder-decode.pftrace"};
  for (size_t i = 0; i < 3; ++i) {
    snprintf(path, sizeof(path), "%s/%s", g_dir, files[i]);
    unlink(path);
  }
  rmdir(g_dir);
  return test_env_teardown(state);
}

// The engine's greedy run of one request equals examples/decoder.c's run
// (dense prefill, paged decode) bit for bit: tokens and every logit.
static void test_engine_matches_decoder_example_bit_for_bit(void **state) {
  test_env_t *env = *state;
  decoder_run_desc_t d = {.c = g_cfg, .prompt = 13, .steps = 9,
                          .reference_path = g_ref, .model_path = g_model,
                          .trace_dir = g_dir};
  decoder_result_t ref;
  decoder_run(env->runtime, &d, &ref);
  accel_serve_engine_t *e = engine_new(env->device, 0, 32, 64);
  run_t *r = calloc(1, sizeof(*r));
  accel_serve_request_desc_t rq = request(ref.tokens, 13, 9, r);
  uint64_t id = 0;
  assert_accel_ok(accel_serve_submit(e, &rq, &id));
  assert_true(id != 0);
  run_until_idle(e);
  assert_int_equal(r->count, 9);
  assert_int_equal(r->end, ACCEL_SERVE_END_LENGTH);
  for (uint32_t t = 0; t < 9; ++t) {
    assert_int_equal(r->tokens[t], ref.tokens[13 + t]);
    assert_memory_equal(r->logits[t], ref.logits + (uint64_t)t * VOCAB,
                        sizeof(float) * VOCAB);
  }
  assert_accel_ok(accel_serve_release(e, id));
  free(r);
  decoder_result_free(&ref);
  accel_serve_engine_destroy(e);
}

typedef struct workload {
  int32_t prompts[MAX_REQ][40];
  uint32_t lens[MAX_REQ], max_new[MAX_REQ];
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
    bool greedy = test_rng_range(rng, 0, 2) == 0;
    w->sampling[q] = (accel_sampling_params_t){
        .struct_size = sizeof(accel_sampling_params_t),
        .temperature = greedy ? 0.0f : 0.8f,
        .top_k = (uint32_t)test_rng_range(rng, 0, 20),
        .top_p = test_rng_range(rng, 0, 1) ? 0.9f : 1.0f,
        .seed = test_rng_next(rng)};
  }
}

// Runs every request of |w| alone (one engine, one at a time), then all of
// them together in a small, crowded engine with |flags|, and compares.
static void check_batched_equals_alone(accel_device_t *dev, uint32_t flags,
                                       uint64_t kv_blocks) {
  test_rng_t rng;
  test_rng_init(&rng, "engine batched");
  workload_t *w = calloc(1, sizeof(*w));
  make_workload(w, &rng);
  accel_serve_engine_t *alone = engine_new(dev, 0, 64, 64);
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

  accel_serve_engine_t *e = engine_new(dev, flags, kv_blocks, 16);
  uint64_t ids[MAX_REQ];
  uint32_t submitted = 0, pending = 1;
  // Arrivals spread over the steps: two requests every step.
  while (submitted < MAX_REQ || pending > 0) {
    for (int k = 0; k < 2 && submitted < MAX_REQ; ++k, ++submitted) {
      accel_serve_request_desc_t d =
          request(w->prompts[submitted], w->lens[submitted],
                  w->max_new[submitted], &w->batched[submitted]);
      d.sampling = w->sampling[submitted];
      d.priority = (int32_t)test_rng_range(&rng, 0, 2);
      assert_accel_ok(accel_serve_submit(e, &d, &ids[submitted]));
    }
    assert_accel_ok(accel_serve_step(e, &pending));
  }
  accel_serve_stats_t st = {.struct_size = sizeof(st)};
  assert_accel_ok(accel_serve_stats(e, &st));
  print_message("flags %u: %llu steps, %llu preemptions, prefix hits %llu of "
                "%llu\n", flags, (unsigned long long)st.steps,
                (unsigned long long)st.preemptions,
                (unsigned long long)st.prefix_hits,
                (unsigned long long)st.prefix_queries);
  for (int q = 0; q < MAX_REQ; ++q) {
    assert_int_equal(w->batched[q].count, w->alone[q].count);
    assert_int_equal(w->batched[q].count, w->max_new[q]);
    for (uint32_t t = 0; t < w->alone[q].count; ++t) {
      assert_int_equal(w->batched[q].tokens[t], w->alone[q].tokens[t]);
      assert_memory_equal(w->batched[q].logits[t], w->alone[q].logits[t],
                          sizeof(float) * VOCAB);
    }
    assert_accel_ok(accel_serve_release(e, ids[q]));
  }
  assert_accel_ok(accel_serve_stats(e, &st));
  assert_int_equal(st.kv_used_blocks, 0);
  assert_int_equal(st.requests, 0);
  accel_serve_engine_destroy(e);
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
      cmocka_unit_test(test_engine_matches_decoder_example_bit_for_bit),
      cmocka_unit_test(test_batched_logits_equal_single_sequence),
      cmocka_unit_test(test_prefix_caching_and_recompute_keep_logits),
      cmocka_unit_test(test_swap_preemption_keeps_logits),
      cmocka_unit_test(test_release_mid_stream_returns_every_block),
      cmocka_unit_test(test_iterator_streams_the_callback_tokens),
      cmocka_unit_test(test_submit_rejects_bad_requests),
      cmocka_unit_test(test_create_rejects_bad_descriptions),
      cmocka_unit_test(test_create_refuses_unknown_decoder_version),
      cmocka_unit_test(test_device_failure_ends_every_request),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
