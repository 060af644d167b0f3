// The decoder of examples/decoder.c (decoder_run.h): packing its model and
// running it on reference.axe. Shared by example-decoder and the decoder
// figures of accel-bench kernels. A failure of any accel call prints it and
// exits the program (this is an example's and a benchmark's code, not a
// library's).
#include "decoder_run.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention_params.h"
#include "kernel_params.h"

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
// Run side
// ---------------------------------------------------------------------------

typedef struct layer {
  accel_buffer_t *w[9];   // DECODER_LAYER_WEIGHTS order
  accel_buffer_t *s[9];   // scales of the int8 ones (NULL for norms)
  accel_buffer_t *k_cache, *v_cache;
} layer_t;

enum { W_ATTN_NORM, W_Q, W_K, W_V, W_O, W_MLP_NORM, W_GATE, W_UP, W_DOWN };

typedef struct model {
  decoder_config_t c;
  uint32_t prompt, steps, max_blocks, blocks;
  accel_device_t *dev;
  accel_stream_t *s;
  accel_executable_t *kernels, *weights;
  accel_kernel_t *k_embedding, *k_rmsnorm, *k_qmatmul, *k_rope, *k_add,
      *k_swiglu, *k_argmax, *k_prefill, *k_paged, *k_append;
  accel_buffer_t *embed, *final_norm, *lm_head, *lm_scale;
  layer_t *layers;
  accel_mempool_t *kv_pool;
  // Activations, sized for the prompt's rows.
  accel_buffer_t *x, *h, *q, *k, *v, *attn, *o, *gate, *up;
  // Per position: token ids (prompt, then generated), rope positions, cache
  // slots, context lengths; the block table; the logits of every step.
  accel_buffer_t *tokens, *positions, *slots, *ctx, *table, *logits;
  uint64_t launches;
} model_t;

typedef struct bind {
  accel_buffer_t *buffer;
  uint64_t offset;
} bind_t;

static void launch(model_t *m, accel_kernel_t *k, uint64_t units,
                   const bind_t *b, uint32_t n, const void *constants,
                   uint32_t constants_size) {
  accel_launch_binding_t lb[8];
  for (uint32_t i = 0; i < n; ++i) {
    lb[i] = (accel_launch_binding_t){.buffer = b[i].buffer,
                                     .offset = b[i].offset};
  }
  // As many work-groups as the kernel has units, up to 256 (any grid gives
  // the same bits; more than the threads only balances the load).
  uint32_t groups = units == 0 ? 1 : units > 256 ? 256 : (uint32_t)units;
  accel_launch_desc_t d = {.struct_size = sizeof(d),
                           .workgroup_count = {groups, 1, 1},
                           .binding_count = n,
                           .constants_size = constants_size,
                           .bindings = lb,
                           .constants = constants};
  CHECK(accel_launch(m->s, k, &d));
  m->launches++;
}

static void rmsnorm(model_t *m, bind_t x, accel_buffer_t *gamma, bind_t y,
                    uint32_t rows) {
  accel_kp_norm_constants_t c = {.rows = rows, .cols = m->c.dim,
                                 .eps = DECODER_NORM_EPS};
  bind_t b[3] = {x, {gamma, 0}, y};
  launch(m, m->k_rmsnorm, rows, b, 3, &c, sizeof(c));
}

// y[rows, out] = x[rows, in] W^T for an int8 projection.
static void project(model_t *m, bind_t x, accel_buffer_t *w,
                    accel_buffer_t *scale, bind_t y, uint32_t rows,
                    uint32_t out, uint32_t in) {
  accel_kp_qmatmul_constants_t c = {.m = rows, .n = out, .k = in};
  bind_t b[4] = {x, {w, 0}, {scale, 0}, y};
  launch(m, m->k_qmatmul, accel_kp_qmatmul_units(&c), b, 4, &c, sizeof(c));
}

static void rope(model_t *m, accel_buffer_t *x, uint32_t rows, uint32_t heads,
                 uint32_t first_pos) {
  accel_kp_rope_constants_t c = {.tokens = rows, .heads = heads,
                                 .head_dim = m->c.head_dim,
                                 .mode = ACCEL_KP_ROPE_HALF,
                                 .base = DECODER_ROPE_BASE};
  bind_t b[2] = {{x, 0}, {m->positions, 4ull * first_pos}};
  launch(m, m->k_rope, rows, b, 2, &c, sizeof(c));
}

// y = a + b over |count| elements.
static void add(model_t *m, accel_buffer_t *a, accel_buffer_t *b_,
                uint32_t count) {
  accel_kp_eltwise_constants_t c = {.count = count};
  bind_t b[3] = {{a, 0}, {b_, 0}, {a, 0}};
  launch(m, m->k_add, accel_kp_eltwise_units(&c), b, 3, &c, sizeof(c));
}

// One layer over |rows| tokens at positions first_pos.. (rows > 1: prefill
// from position 0 with dense attention; rows == 1: decode through the
// block table).
static void layer_forward(model_t *m, const layer_t *L, uint32_t rows,
                          uint32_t first_pos) {
  const decoder_config_t *c = &m->c;
  uint32_t qd = c->heads * c->head_dim, kvd = c->kv_heads * c->head_dim;
  rmsnorm(m, (bind_t){m->x, 0}, L->w[W_ATTN_NORM], (bind_t){m->h, 0}, rows);
  project(m, (bind_t){m->h, 0}, L->w[W_Q], L->s[W_Q], (bind_t){m->q, 0}, rows,
          qd, c->dim);
  project(m, (bind_t){m->h, 0}, L->w[W_K], L->s[W_K], (bind_t){m->k, 0}, rows,
          kvd, c->dim);
  project(m, (bind_t){m->h, 0}, L->w[W_V], L->s[W_V], (bind_t){m->v, 0}, rows,
          kvd, c->dim);
  rope(m, m->q, rows, c->heads, first_pos);
  rope(m, m->k, rows, c->kv_heads, first_pos);
  accel_kp_kv_append_constants_t ac = {.tokens = rows,
                                       .n_kv_heads = c->kv_heads,
                                       .head_dim = c->head_dim,
                                       .block_size = c->block_size,
                                       .num_blocks = m->blocks};
  bind_t ab[5] = {{m->k, 0}, {m->v, 0}, {m->slots, 4ull * first_pos},
                  {L->k_cache, 0}, {L->v_cache, 0}};
  launch(m, m->k_append, rows, ab, 5, &ac, sizeof(ac));
  float scale = 1.0f / sqrtf((float)c->head_dim);
  if (rows > 1 || first_pos == 0) {
    accel_kp_attn_prefill_constants_t pc = {.q_len = rows, .kv_len = rows,
                                            .n_heads = c->heads,
                                            .n_kv_heads = c->kv_heads,
                                            .head_dim = c->head_dim,
                                            .scale = scale};
    bind_t pb[4] = {{m->q, 0}, {m->k, 0}, {m->v, 0}, {m->attn, 0}};
    launch(m, m->k_prefill, (uint64_t)rows * c->kv_heads, pb, 4, &pc,
           sizeof(pc));
  } else {
    accel_kp_attn_paged_constants_t pc = {.num_seqs = 1,
                                          .n_heads = c->heads,
                                          .n_kv_heads = c->kv_heads,
                                          .head_dim = c->head_dim,
                                          .block_size = c->block_size,
                                          .num_blocks = m->blocks,
                                          .max_blocks_per_seq = m->max_blocks,
                                          .scale = scale};
    bind_t pb[6] = {{m->q, 0},         {L->k_cache, 0},
                    {L->v_cache, 0},   {m->table, 0},
                    {m->ctx, 4ull * first_pos}, {m->attn, 0}};
    launch(m, m->k_paged, c->kv_heads, pb, 6, &pc, sizeof(pc));
  }
  project(m, (bind_t){m->attn, 0}, L->w[W_O], L->s[W_O], (bind_t){m->o, 0},
          rows, c->dim, qd);
  add(m, m->x, m->o, rows * c->dim);
  rmsnorm(m, (bind_t){m->x, 0}, L->w[W_MLP_NORM], (bind_t){m->h, 0}, rows);
  project(m, (bind_t){m->h, 0}, L->w[W_GATE], L->s[W_GATE],
          (bind_t){m->gate, 0}, rows, c->ffn, c->dim);
  project(m, (bind_t){m->h, 0}, L->w[W_UP], L->s[W_UP], (bind_t){m->up, 0},
          rows, c->ffn, c->dim);
  accel_kp_eltwise_constants_t sc = {.count = rows * c->ffn};
  bind_t sb[3] = {{m->gate, 0}, {m->up, 0}, {m->gate, 0}};
  launch(m, m->k_swiglu, accel_kp_eltwise_units(&sc), sb, 3, &sc, sizeof(sc));
  project(m, (bind_t){m->gate, 0}, L->w[W_DOWN], L->s[W_DOWN],
          (bind_t){m->o, 0}, rows, c->dim, c->ffn);
  add(m, m->x, m->o, rows * c->dim);
}

// Grows every layer's K and V cache to |blocks| blocks (pages are mapped on
// demand; the addresses do not change, so earlier launches stay valid).
static void ensure_blocks(model_t *m, uint32_t blocks) {
  if (blocks <= m->blocks) {
    return;
  }
  uint64_t bytes = (uint64_t)blocks * m->c.block_size * m->c.kv_heads *
                   m->c.head_dim * 4;
  for (uint32_t l = 0; l < m->c.layers; ++l) {
    CHECK(accel_buffer_grow(m->layers[l].k_cache, bytes));
    CHECK(accel_buffer_grow(m->layers[l].v_cache, bytes));
  }
  m->blocks = blocks;
}

// Embeds |rows| tokens from token index |first|, runs every layer, and
// writes the logits of the last row to logits[step] and its argmax to
// tokens[first + rows].
static void forward(model_t *m, uint32_t rows, uint32_t first, uint32_t step) {
  const decoder_config_t *c = &m->c;
  ensure_blocks(m, (first + rows + c->block_size - 1) / c->block_size);
  accel_kp_embedding_constants_t ec = {.tokens = rows, .vocab = c->vocab,
                                       .dim = c->dim,
                                       .dtype = ACCEL_KP_DTYPE_F32};
  bind_t eb[3] = {{m->embed, 0}, {m->tokens, 4ull * first}, {m->x, 0}};
  launch(m, m->k_embedding, rows, eb, 3, &ec, sizeof(ec));
  for (uint32_t l = 0; l < c->layers; ++l) {
    layer_forward(m, &m->layers[l], rows, first);
  }
  uint64_t last = 4ull * (rows - 1) * c->dim;
  rmsnorm(m, (bind_t){m->x, last}, m->final_norm, (bind_t){m->h, 0}, 1);
  uint64_t lo = 4ull * step * c->vocab;
  project(m, (bind_t){m->h, 0}, m->lm_head, m->lm_scale,
          (bind_t){m->logits, lo}, 1, c->vocab, c->dim);
  accel_kp_select_constants_t sc = {.rows = 1, .cols = c->vocab};
  bind_t sb[2] = {{m->logits, lo}, {m->tokens, 4ull * (first + rows)}};
  launch(m, m->k_argmax, 1, sb, 2, &sc, sizeof(sc));
}

static accel_buffer_t *alloc_buffer(model_t *m, uint64_t bytes) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = bytes};
  accel_buffer_t *b = NULL;
  CHECK(accel_buffer_alloc(m->dev, &d, &b));
  return b;
}

static void *host(accel_buffer_t *b) {
  void *p = NULL;
  CHECK(accel_buffer_host_pointer(b, &p));
  return p;
}

static accel_buffer_t *weight(model_t *m, const char *name) {
  accel_buffer_t *b = NULL;
  CHECK(accel_executable_weight_buffer(m->weights, name, &b));
  return b;
}

static void model_open(model_t *m, accel_runtime_t *rt, const char *ref_path,
                       const char *model_path) {
  const decoder_config_t *c = &m->c;
  CHECK(accel_executable_load_file(rt, m->dev, ref_path, 0, &m->kernels));
  CHECK(accel_executable_load_file(rt, m->dev, model_path, 0, &m->weights));
  struct {
    accel_kernel_t **k;
    const char *name;
  } kernels[] = {
      {&m->k_embedding, "embedding"}, {&m->k_rmsnorm, "rmsnorm"},
      {&m->k_qmatmul, "qmatmul_int8"}, {&m->k_rope, "rope"},
      {&m->k_add, "add"}, {&m->k_swiglu, "swiglu"},
      {&m->k_argmax, "argmax"}, {&m->k_prefill, "attention_prefill"},
      {&m->k_paged, "attention_paged_decode"},
      {&m->k_append, "paged_kv_append"}};
  for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); ++i) {
    CHECK(accel_executable_kernel(m->kernels, kernels[i].name, kernels[i].k));
  }
  static const char *const parts[] = {
#define DECODER_PART(p) #p,
      DECODER_LAYER_WEIGHTS(DECODER_PART)
#undef DECODER_PART
  };
  m->layers = calloc(c->layers, sizeof(layer_t));
  accel_mempool_desc_t pd = {.struct_size = sizeof(pd),
                             .type = ACCEL_MEMPOOL_TYPE_PAGED,
                             .page_size_bytes = 64 << 10,
                             .name = "kv-cache"};
  CHECK(accel_mempool_create(m->dev, &pd, &m->kv_pool));
  uint64_t block_bytes =
      (uint64_t)c->block_size * c->kv_heads * c->head_dim * 4;
  for (uint32_t l = 0; l < c->layers; ++l) {
    for (int p = 0; p < 9; ++p) {
      char n[96];
      decoder_weight_name(n, sizeof(n), l, parts[p]);
      m->layers[l].w[p] = weight(m, n);
      if (p != W_ATTN_NORM && p != W_MLP_NORM) {
        char sn[112];
        snprintf(sn, sizeof(sn), "%s.scale", n);
        m->layers[l].s[p] = weight(m, sn);
      }
    }
    // One block to start with; room reserved for the whole sequence.
    accel_buffer_desc_t d = {.struct_size = sizeof(d),
                             .size_bytes = block_bytes,
                             .pool = m->kv_pool,
                             .max_size_bytes = block_bytes * m->max_blocks};
    CHECK(accel_buffer_alloc(m->dev, &d, &m->layers[l].k_cache));
    CHECK(accel_buffer_alloc(m->dev, &d, &m->layers[l].v_cache));
  }
  m->blocks = 1;
  m->embed = weight(m, "embed");
  m->final_norm = weight(m, "final_norm");
  m->lm_head = weight(m, "lm_head");
  m->lm_scale = weight(m, "lm_head.scale");
  uint64_t rows = m->prompt;
  uint64_t qd = c->heads * c->head_dim, kvd = c->kv_heads * c->head_dim;
  m->x = alloc_buffer(m, 4 * rows * c->dim);
  m->h = alloc_buffer(m, 4 * rows * c->dim);
  m->o = alloc_buffer(m, 4 * rows * c->dim);
  m->q = alloc_buffer(m, 4 * rows * qd);
  m->attn = alloc_buffer(m, 4 * rows * qd);
  m->k = alloc_buffer(m, 4 * rows * kvd);
  m->v = alloc_buffer(m, 4 * rows * kvd);
  m->gate = alloc_buffer(m, 4 * rows * c->ffn);
  m->up = alloc_buffer(m, 4 * rows * c->ffn);
  uint32_t positions = m->prompt + m->steps;
  m->tokens = alloc_buffer(m, 4ull * (positions + 1));
  m->positions = alloc_buffer(m, 4ull * positions);
  m->slots = alloc_buffer(m, 4ull * positions);
  m->ctx = alloc_buffer(m, 4ull * positions);
  m->table = alloc_buffer(m, 4ull * m->max_blocks);
  m->logits = alloc_buffer(m, 4ull * m->steps * c->vocab);
  // One sequence in a fresh pool: logical block b is physical block b, and
  // position p's slot is p. Context length at position p is p + 1.
  int32_t *pos = host(m->positions), *slots = host(m->slots);
  uint32_t *ctx = host(m->ctx), *table = host(m->table);
  for (uint32_t p = 0; p < positions; ++p) {
    pos[p] = (int32_t)p;
    ctx[p] = p + 1;
    uint32_t block = p / c->block_size;
    slots[p] = (int32_t)(block * c->block_size + p % c->block_size);
  }
  for (uint32_t b = 0; b < m->max_blocks; ++b) {
    table[b] = b;
  }
}

static void model_close(model_t *m) {
  accel_buffer_t *bufs[] = {m->x, m->h, m->o, m->q, m->attn, m->k, m->v,
                            m->gate, m->up, m->tokens, m->positions,
                            m->slots, m->ctx, m->table, m->logits, m->embed,
                            m->final_norm, m->lm_head, m->lm_scale};
  for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); ++i) {
    accel_buffer_release(bufs[i]);
  }
  for (uint32_t l = 0; l < m->c.layers; ++l) {
    for (int p = 0; p < 9; ++p) {
      accel_buffer_release(m->layers[l].w[p]);
      accel_buffer_release(m->layers[l].s[p]);
    }
    accel_buffer_release(m->layers[l].k_cache);
    accel_buffer_release(m->layers[l].v_cache);
  }
  free(m->layers);
  CHECK(accel_mempool_destroy(m->kv_pool));
  accel_executable_release(m->weights);
  accel_executable_release(m->kernels);
}

// ---------------------------------------------------------------------------
// A run: prefill, then greedy decode, each phase recorded in its own trace
// ---------------------------------------------------------------------------

// Stops the phase's recording and reads where its time went.
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
    }
  }
  phase->kernel_s = kernel_ns / 1e9;
}

void decoder_run(accel_runtime_t *rt, const decoder_run_desc_t *d,
                 decoder_result_t *out) {
  memset(out, 0, sizeof(*out));
  model_t m = {.c = d->c, .prompt = d->prompt, .steps = d->steps};
  m.max_blocks = (d->prompt + d->steps + d->c.block_size - 1) / d->c.block_size;
  CHECK(accel_device_get(rt, 0, &m.dev));
  accel_stream_desc_t sd = {.struct_size = sizeof(sd), .name = "decoder"};
  CHECK(accel_stream_create(m.dev, &sd, &m.s));
  model_open(&m, rt, d->reference_path, d->model_path);

  // The prompt: seeded random tokens.
  rng_t r = {.s = 0x2545f4914f6cdd1dull + d->c.seed};
  int32_t *tokens = host(m.tokens);
  for (uint32_t i = 0; i < d->prompt; ++i) {
    tokens[i] = (int32_t)(rng_next(&r) % d->c.vocab);
  }

  char path[4096];
  snprintf(path, sizeof(path), "%s/decoder-prefill.pftrace", d->trace_dir);
  CHECK(accel_trace_start(path));
  double t0 = now_s();
  forward(&m, d->prompt, 0, 0);
  CHECK(accel_stream_synchronize(m.s, ACCEL_TIMEOUT_INFINITE));
  out->prefill.wall_s = now_s() - t0;
  out->prefill.tokens = d->prompt;
  out->prefill.launches = m.launches;
  phase_end(path, &out->prefill);

  snprintf(path, sizeof(path), "%s/decoder-decode.pftrace", d->trace_dir);
  CHECK(accel_trace_start(path));
  t0 = now_s();
  for (uint32_t t = 1; t < d->steps; ++t) {
    forward(&m, 1, d->prompt + t - 1, t);
  }
  CHECK(accel_stream_synchronize(m.s, ACCEL_TIMEOUT_INFINITE));
  out->decode.wall_s = now_s() - t0;
  out->decode.tokens = d->steps - 1;
  out->decode.launches = m.launches - out->prefill.launches;
  phase_end(path, &out->decode);

  out->tokens = malloc(4ull * (d->prompt + d->steps));
  out->logits = malloc(4ull * d->steps * d->c.vocab);
  if (out->tokens == NULL || out->logits == NULL) {
    fprintf(stderr, "decoder: out of memory\n");
    exit(1);
  }
  memcpy(out->tokens, tokens, 4ull * (d->prompt + d->steps));
  memcpy(out->logits, host(m.logits), 4ull * d->steps * d->c.vocab);
  model_close(&m);
  accel_stream_destroy(m.s);
}

void decoder_result_free(decoder_result_t *r) {
  trace_summary_free(&r->prefill.trace);
  trace_summary_free(&r->decode.trace);
  free(r->tokens);
  free(r->logits);
  memset(r, 0, sizeof(*r));
}
