// The decoder of examples/decoder.c (decoder_run.h): packing its model and
// running it on reference.axe through the serving engine's public API
// (include/accel/serve.h), which owns the model step (lib/serve). Shared by
// example-decoder and the decoder figures of accel-bench kernels. A failure
// of any accel call prints it and exits the program (this is an example's
// and a benchmark's code, not a library's).
#include "decoder_run.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#define CHECK(expr)                                                  \
  do {                                                               \
    accel_status_t st_ = (expr);                                     \
    if (st_ != ACCEL_OK) {                                           \
      fprintf(stderr, "decoder: %s failed: %s: %s\n", #expr, \
              accel_status_name(st_), accel_last_error());           \
      exit(1);                                                       \
    }                                                                \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

// ---------------------------------------------------------------------------
// Compile side: seeded random weights packed into the model .axe
// ---------------------------------------------------------------------------

typedef struct rng {
  uint64_t s;
} rng_t;

static uint64_t rng_next(rng_t *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return r->s * 0x2545f4914f6cdd1dull;
}

// Uniform in [-1, 1).
static float rng_unit(rng_t *r) {
  return (float)((double)(rng_next(r) >> 40) / 8388608.0 - 1.0);
}

// Weights the builder points at until the file is written.
typedef struct packer {
  accel_exe_builder_t *builder;
  void *data[512];
  int count;
} packer_t;

static void *pack_keep(packer_t *p, uint64_t bytes) {
  if (p->count == (int)(sizeof(p->data) / sizeof(p->data[0]))) {
    fprintf(stderr, "decoder: too many weights\n");
    exit(1);
  }
  void *d = malloc(bytes);
  if (d == NULL) {
    fprintf(stderr, "decoder: out of memory\n");
    exit(1);
  }
  p->data[p->count++] = d;
  return d;
}

static void pack_weight(packer_t *p, const char *name, accel_dtype_t dtype,
                        uint64_t rows, uint64_t cols, const void *data,
                        const char *scale) {
  accel_exe_weight_desc_t w = {.struct_size = sizeof(w), .mappable = 1};
  w.info.struct_size = sizeof(w.info);
  w.info.dtype = dtype;
  w.info.name = name;
  w.info.rank = cols ? 2 : 1;
  w.info.shape[0] = rows;
  w.info.shape[1] = cols;
  w.info.size_bytes = rows * (cols ? cols : 1) * (accel_dtype_bits(dtype) / 8);
  w.info.host_data = data;
  if (scale != NULL) {
    w.info.quant_scheme = ACCEL_QUANT_PER_CHANNEL;
    w.info.quant_axis = 0;
    w.info.quant_scale = scale;
  }
  CHECK(accel_exe_builder_add_weight(p->builder, &w));
}

// An f32 vector of |n| values 1 + 0.1 u (norm gains) or u (embeddings).
static void pack_f32(packer_t *p, rng_t *r, const char *name, uint64_t rows,
                     uint64_t cols, float offset, float spread) {
  uint64_t n = rows * (cols ? cols : 1);
  float *d = pack_keep(p, n * 4);
  for (uint64_t i = 0; i < n; ++i) {
    d[i] = offset + spread * rng_unit(r);
  }
  pack_weight(p, name, ACCEL_DTYPE_F32, rows, cols, d, NULL);
}

// An int8 [out, in] projection with per-channel scales chosen so that the
// product keeps unit-scale activations near unit scale.
static void pack_int8(packer_t *p, rng_t *r, const char *name, uint32_t out,
                      uint32_t in) {
  int8_t *q = pack_keep(p, (uint64_t)out * in);
  float *scale = pack_keep(p, (uint64_t)out * 4);
  for (uint64_t i = 0; i < (uint64_t)out * in; ++i) {
    q[i] = (int8_t)((int64_t)(rng_next(r) % 255) - 127);
  }
  for (uint32_t j = 0; j < out; ++j) {
    scale[j] = (1.0f + 0.25f * rng_unit(r)) * 1.7f / (127.0f * sqrtf((float)in));
  }
  char scale_name[96];
  snprintf(scale_name, sizeof(scale_name), "%s.scale", name);
  pack_weight(p, scale_name, ACCEL_DTYPE_F32, out, 0, scale, NULL);
  pack_weight(p, name, ACCEL_DTYPE_I8, out, in, q, scale_name);
}

void decoder_pack(const decoder_config_t *c, const char *path) {
  packer_t p = {0};
  rng_t r = {.s = 0x853c49e6748fea9bull ^ ((uint64_t)c->seed << 17)};
  CHECK(accel_exe_builder_create(&p.builder));
  uint32_t qd = c->heads * c->head_dim, kvd = c->kv_heads * c->head_dim;
  pack_f32(&p, &r, "embed", c->vocab, c->dim, 0.0f, 1.0f);
  for (uint32_t l = 0; l < c->layers; ++l) {
    char n[96];
    decoder_weight_name(n, sizeof(n), l, "attn_norm");
    pack_f32(&p, &r, n, c->dim, 0, 1.0f, 0.1f);
    decoder_weight_name(n, sizeof(n), l, "wq");
    pack_int8(&p, &r, n, qd, c->dim);
    decoder_weight_name(n, sizeof(n), l, "wk");
    pack_int8(&p, &r, n, kvd, c->dim);
    decoder_weight_name(n, sizeof(n), l, "wv");
    pack_int8(&p, &r, n, kvd, c->dim);
    decoder_weight_name(n, sizeof(n), l, "wo");
    pack_int8(&p, &r, n, c->dim, qd);
    decoder_weight_name(n, sizeof(n), l, "mlp_norm");
    pack_f32(&p, &r, n, c->dim, 0, 1.0f, 0.1f);
    decoder_weight_name(n, sizeof(n), l, "w_gate");
    pack_int8(&p, &r, n, c->ffn, c->dim);
    decoder_weight_name(n, sizeof(n), l, "w_up");
    pack_int8(&p, &r, n, c->ffn, c->dim);
    decoder_weight_name(n, sizeof(n), l, "w_down");
    pack_int8(&p, &r, n, c->dim, c->ffn);
  }
  pack_f32(&p, &r, "final_norm", c->dim, 0, 1.0f, 0.1f);
  pack_int8(&p, &r, "lm_head", c->vocab, c->dim);
#define DECODER_META(name, def)                                          \
  {                                                                      \
    char value[16];                                                      \
    snprintf(value, sizeof(value), "%u", c->name);                       \
    CHECK(accel_exe_builder_add_metadata(p.builder, "decoder." #name, value)); \
  }
  DECODER_CONFIG_FIELDS(DECODER_META)
#undef DECODER_META
  CHECK(accel_exe_builder_add_metadata(p.builder, "model", "decoder"));
  CHECK(accel_exe_builder_write_file(p.builder, path, NULL, NULL));
  accel_exe_builder_destroy(p.builder);
  for (int i = 0; i < p.count; ++i) {
    free(p.data[i]);
  }
}

// ---------------------------------------------------------------------------
// Run side: one request on a serving engine, each phase recorded in its own
// trace
// ---------------------------------------------------------------------------

// What the request's callback collects: each generated token and the
// logits it was chosen from.
typedef struct collect {
  int32_t *tokens;  // generated part of the result's tokens
  float *logits;    // [steps, vocab]
  uint32_t count, steps, vocab;
} collect_t;

static void on_token(void *user, const accel_serve_token_t *t) {
  collect_t *c = user;
  if (c->count == c->steps || t->vocab != c->vocab) {
    fprintf(stderr, "decoder: token %u of %u with a vocabulary of %u\n",
            c->count, c->steps, t->vocab);
    exit(1);
  }
  c->tokens[c->count] = t->token;
  memcpy(c->logits + (uint64_t)c->count * c->vocab, t->logits,
         4ull * c->vocab);
  c->count++;
}

// Stops the phase's recording and reads where its time went: time inside
// kernels, and the launches (the kernel slices) it ran.
static void phase_end(const char *path, decoder_phase_t *phase) {
  CHECK(accel_trace_stop());
  if (trace_summary_read(path, &phase->trace) != 0) {
    fprintf(stderr, "decoder: cannot read the trace %s\n", path);
    exit(1);
  }
  double kernel_ns = 0;
  for (size_t i = 0; i < phase->trace.count; ++i) {
    if (strcmp(phase->trace.entries[i].category, "kernel") == 0) {
      kernel_ns += (double)phase->trace.entries[i].total_ns;
      phase->launches += phase->trace.entries[i].count;
    }
  }
  phase->kernel_s = kernel_ns / 1e9;
}

void decoder_run(accel_runtime_t *rt, const decoder_run_desc_t *d,
                 decoder_result_t *out) {
  memset(out, 0, sizeof(*out));
  const decoder_config_t *c = &d->c;
  accel_device_t *dev = NULL;
  CHECK(accel_device_get(rt, 0, &dev));
  // One step holds the whole prompt; the cache holds the request (blocks of
  // every layer's K and V, f32).
  uint32_t context = d->prompt + d->steps;
  uint64_t block_bytes =
      2ull * c->layers * c->block_size * c->kv_heads * c->head_dim * 4;
  accel_serve_engine_desc_t ed = {
      .struct_size = sizeof(ed), .model_path = d->model_path,
      .kernels_path = d->reference_path,
      .kv_bytes = (context + c->block_size - 1) / c->block_size * block_bytes,
      .max_step_tokens = d->prompt, .max_step_seqs = 1,
      .max_context = context};
  accel_serve_engine_t *engine = NULL;
  CHECK(accel_serve_engine_create(dev, &ed, &engine));

  out->tokens = malloc(4ull * context);
  out->logits = malloc(4ull * d->steps * c->vocab);
  if (out->tokens == NULL || out->logits == NULL) {
    fprintf(stderr, "decoder: out of memory\n");
    exit(1);
  }
  // The prompt: seeded random tokens.
  rng_t r = {.s = 0x2545f4914f6cdd1dull + c->seed};
  for (uint32_t i = 0; i < d->prompt; ++i) {
    out->tokens[i] = (int32_t)(rng_next(&r) % c->vocab);
  }
  collect_t got = {.tokens = out->tokens + d->prompt, .logits = out->logits,
                   .steps = d->steps, .vocab = c->vocab};
  accel_serve_request_desc_t rq = {
      .struct_size = sizeof(rq), .prompt = out->tokens,
      .prompt_tokens = d->prompt, .max_new_tokens = d->steps,
      .eos_token = -1, .on_token = on_token, .user = &got};
  // Temperature 0: greedy.
  rq.sampling = (accel_sampling_params_t){.struct_size = sizeof(rq.sampling),
                                          .top_p = 1.0f};
  uint64_t id = 0;
  CHECK(accel_serve_submit(engine, &rq, &id));

  // Prefill: the first step computes the prompt and samples the first
  // token.
  char path[4096];
  snprintf(path, sizeof(path), "%s/decoder-prefill.pftrace", d->trace_dir);
  CHECK(accel_trace_start(path));
  double t0 = now_s();
  uint32_t pending = 0;
  CHECK(accel_serve_step(engine, &pending));
  out->prefill.wall_s = now_s() - t0;
  out->prefill.tokens = d->prompt;
  phase_end(path, &out->prefill);

  // Decode: a step per token, each the same shape, so that the engine
  // replays one recorded command buffer from the third on.
  snprintf(path, sizeof(path), "%s/decoder-decode.pftrace", d->trace_dir);
  CHECK(accel_trace_start(path));
  t0 = now_s();
  while (pending > 0) {
    CHECK(accel_serve_step(engine, &pending));
  }
  out->decode.wall_s = now_s() - t0;
  out->decode.tokens = d->steps - 1;
  phase_end(path, &out->decode);
  if (got.count != d->steps) {
    fprintf(stderr, "decoder: %u tokens generated of %u\n", got.count,
            d->steps);
    exit(1);
  }
  CHECK(accel_serve_release(engine, id));
  accel_serve_engine_destroy(engine);
}

void decoder_result_free(decoder_result_t *r) {
  trace_summary_free(&r->prefill.trace);
  trace_summary_free(&r->decode.trace);
  free(r->tokens);
  free(r->logits);
  memset(r, 0, sizeof(*r));
}
