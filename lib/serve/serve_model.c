// The model runner under the serving engine (serve_model.h,
// docs/serving.md "The engine"). One step is one forward pass over all of
// the plan's tokens: the rows of every entry are stacked, decode-shaped
// entries (one token) first, so that every projection is one GEMM over the
// step and the decode attention is one attention_paged_decode over the
// batch; each prefill chunk runs attention_prefill over its own context.
#include "serve/serve_model.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention_params.h"
#include "accel/command_buffer.h"
#include "accel/health.h"
#include "accel/gguf_import.h"
#include "core/error.h"
#include "kernel_params.h"
#include "model/gguf_mapped.h"

// Defaults of the optional decoder.rope_base and decoder.norm_eps.
#define SERVE_ROPE_BASE 10000.0f
#define SERVE_NORM_EPS 1e-5f

enum { W_ATTN_NORM, W_Q, W_K, W_V, W_O, W_MLP_NORM, W_GATE, W_UP, W_DOWN,
       W_COUNT };
static const char *const kPartNames[W_COUNT] = {
    "attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up",
    "w_down"};

enum { K_EMBEDDING, K_RMSNORM, K_QMATMUL, K_ROPE, K_ADD, K_SWIGLU, K_PREFILL,
       K_PAGED, K_APPEND, K_MATMUL, K_EMBED_BLOCKS, K_Q8_0, K_Q4_0, K_Q4_1,
       K_Q5_0, K_Q5_1, K_Q4_K, K_Q5_K, K_Q6_K, K_COUNT };
static const char *const kKernelNames[K_COUNT] = {
    "embedding", "rmsnorm", "qmatmul_int8", "rope", "add", "swiglu",
    "attention_prefill", "attention_paged_decode", "paged_kv_append",
    "matmul", "embedding_gguf", "qmatmul_q8_0", "qmatmul_q4_0",
    "qmatmul_q4_1", "qmatmul_q5_0", "qmatmul_q5_1", "qmatmul_q4_k",
    "qmatmul_q5_k", "qmatmul_q6_k"};

// The GGUF block forms (docs/executable-format.md, "Decoder models"): the
// name in decoder.type.<weight>, the kernel, ggml's type number (for
// embedding_gguf), and the block.
static const struct block_form {
  const char *name;
  int kernel;
  uint32_t ggml_type, block, bytes;
} kBlockForms[] = {
    {"q8_0", K_Q8_0, ACCEL_KP_GGML_Q8_0, 32, 34},
    {"q4_0", K_Q4_0, ACCEL_KP_GGML_Q4_0, 32, 18},
    {"q4_1", K_Q4_1, ACCEL_KP_GGML_Q4_1, 32, 20},
    {"q5_0", K_Q5_0, ACCEL_KP_GGML_Q5_0, 32, 22},
    {"q5_1", K_Q5_1, ACCEL_KP_GGML_Q5_1, 32, 24},
    {"q4_k", K_Q4_K, ACCEL_KP_GGML_Q4_K, 256, 144},
    {"q5_k", K_Q5_K, ACCEL_KP_GGML_Q5_K, 256, 176},
    {"q6_k", K_Q6_K, ACCEL_KP_GGML_Q6_K, 256, 210},
};

// A projection's weight form (docs/executable-format.md, "Decoder models"),
// read per tensor: the kernel that multiplies by it.
typedef struct serve_proj {
  accel_buffer_t *w;
  accel_buffer_t *scale;  // int8: per-channel f32 scales; NULL otherwise
  accel_buffer_t *bias;   // "<name>.bias", f32 [out], added; NULL: none
  int kernel;             // K_QMATMUL (int8), K_MATMUL or a block kernel
  uint32_t dtype;         // K_MATMUL: the weight's accel_kp_dtype
  uint32_t ggml_type;     // a block form: ggml's type number
} serve_proj_t;

typedef struct serve_layer {
  accel_buffer_t *w[W_COUNT];  // the norms' gains (NULL for projections)
  serve_proj_t p[W_COUNT];     // the projections (empty for the norms)
  accel_buffer_t *k, *v;       // [device_blocks, block, kv_heads, head_dim]
  accel_buffer_t *hk, *hv;     // swap space, same layout, host_blocks
} serve_layer_t;

// Per-step inputs staged on the host and uploaded before the launches.
typedef struct serve_inputs {
  int32_t *tokens, *positions, *slots, *rows;
  uint32_t *tables, *ctx;
} serve_inputs_t;

// Step shapes the runner remembers (docs/serving.md, "Step command
// buffers"): at most SERVE_CB_CAP with a recorded command buffer, the rest
// seen once and not recorded yet. A decode-only batch has one shape per
// batch size, so 32 buffers cover every decode batch of a 32-sequence
// engine; mixed prefill steps rarely repeat and are recorded only when
// they do.
#define SERVE_CB_CAP 32
#define SERVE_SHAPES 96

typedef struct serve_shape {
  uint32_t *key;  // NULL: an empty slot
  uint32_t key_len;
  uint64_t hash;
  uint64_t last_use;          // m->clock at the last sight
  accel_command_buffer_t *cb;  // NULL: seen, not recorded
} serve_shape_t;

struct serve_model {
  serve_model_config_t c;
  serve_model_desc_t d;
  uint32_t qd, kvd, max_blocks;  // max_blocks: per sequence
  uint32_t device_blocks, host_blocks;
  uint64_t layer_block_bytes;    // one block of one layer's K (or V)
  accel_device_t *dev;
  accel_stream_t *s;
  accel_executable_t *kernels, *weights;
  // A .gguf run in place (|weights| NULL), or the .axe image imported from
  // a .gguf that cannot be (|weights| reads it).
  accel_gguf_mapped_t *mapped;
  void *image;
  accel_kernel_t *k[K_COUNT];
  accel_buffer_t *final_norm;
  // The embedding table (.w) in any projection form but int8; a tied head
  // (decoder.tied_head) is the same weight.
  serve_proj_t embed;
  serve_proj_t lm_head;
  float rope_base, norm_eps;
  uint32_t rope_mode;  // accel_kp_rope_mode
  serve_layer_t *layers;
  accel_mempool_t *kv_pool;
  // Activations of max_step_tokens rows; gather scratch of max_context rows.
  accel_buffer_t *x, *h, *o, *q, *attn, *kn, *vn, *gate, *up, *gk, *gv;
  // Inputs and the sampled rows' hidden states and logits.
  accel_buffer_t *tokens, *positions, *slots, *rows, *tables, *ctx, *fx, *fh,
      *logits;
  serve_inputs_t in;
  // Host-visible step buffers (the host device): the inputs are written in
  // place and the logits read in place, with no copy commands. Otherwise
  // |in| is host staging uploaded by stream copies.
  bool direct;
  // Per kernel, the flag that quantizes a block projection's activations:
  // ACCEL_KP_QFLAG_I16_ACTIVATIONS where the kernel declares
  // ACCEL_KP_FEATURE_I16_ACTIVATIONS (host Q8_0 and Q4_0), else
  // ACCEL_KP_QFLAG_Q8_ACTIVATIONS where it declares
  // ACCEL_KP_FEATURE_Q8_ACTIVATIONS (the other host block kernels); 0 with
  // f32_activations and for kernels that declare neither (CUDA).
  uint32_t activation_flags[K_COUNT];
  float *logits_host;
  // Order of the step's entries: decode-shaped first, then prefill chunks.
  uint32_t *order;
  // Step command buffers (docs/serving.md, "Step command buffers"): the
  // shapes seen, the recorded ones with their buffer; |rec| is the buffer
  // being recorded (launch() and gather() append to it instead of
  // submitting), |binds| the gathers' binding table of the step.
  bool replay;
  serve_shape_t shapes[SERVE_SHAPES];
  uint32_t *key;  // the step's shape key (scratch, 3 + 2 x max_step_seqs)
  uint32_t key_len;
  uint64_t clock;  // shape uses so far (LRU order)
  accel_command_buffer_t *rec;
  accel_command_buffer_binding_t *binds;
  uint32_t bind_count, bind_cap;
  serve_model_counters_t counters;
};

static void shape_clear(serve_shape_t *sh);

typedef struct bind {
  accel_buffer_t *buffer;
  uint64_t offset;
} bind_t;

// Records a launch into the buffer being recorded: every binding names its
// buffer (the model's buffers are the same for every step of a shape).
static accel_status_t record_launch(serve_model_t *m, int kernel,
                                    const accel_launch_desc_t *d) {
  accel_command_buffer_ref_t refs[8];
  for (uint32_t i = 0; i < d->binding_count; ++i) {
    refs[i] = (accel_command_buffer_ref_t){.buffer = d->bindings[i].buffer,
                                           .offset = d->bindings[i].offset};
  }
  accel_command_buffer_launch_desc_t ld = {
      .struct_size = sizeof(ld),
      .workgroup_count = {d->workgroup_count[0], d->workgroup_count[1],
                          d->workgroup_count[2]},
      .binding_count = d->binding_count,
      .constants_size = d->constants_size,
      .bindings = refs,
      .constants = d->constants};
  return accel_command_buffer_launch(m->rec, m->k[kernel], &ld);
}

static accel_status_t launch_groups(serve_model_t *m, int kernel,
                                    uint64_t units, uint32_t max_groups,
                                    const bind_t *b, uint32_t n,
                                    const void *constants,
                                    uint32_t constants_size) {
  accel_launch_binding_t lb[8];
  for (uint32_t i = 0; i < n; ++i) {
    lb[i] = (accel_launch_binding_t){.buffer = b[i].buffer,
                                     .offset = b[i].offset};
  }
  // Any grid gives the same bits (kernels/README.md); more groups than
  // threads only balance the load.
  uint32_t groups = units == 0            ? 1
                    : units > max_groups ? max_groups
                                         : (uint32_t)units;
  accel_launch_desc_t d = {.struct_size = sizeof(d),
                           .workgroup_count = {groups, 1, 1},
                           .binding_count = n,
                           .constants_size = constants_size,
                           .bindings = lb,
                           .constants = constants};
  if (m->rec != NULL) {
    return record_launch(m, kernel, &d);
  }
  return accel_launch(m->s, m->k[kernel], &d);
}

static accel_status_t launch(serve_model_t *m, int kernel, uint64_t units,
                             const bind_t *b, uint32_t n, const void *constants,
                             uint32_t constants_size) {
  return launch_groups(m, kernel, units, 256, b, n, constants,
                       constants_size);
}

// Work-groups of a launch with quantized activations (8 or 16 bits): each
// thread that runs any quantizes all of x (once per launch with kernel ABI
// 1.3's thread scratch, once per group before it), so a few per host thread
// only (enough to balance 2-4 threads).
#define QUANTIZED_ACTIVATION_GROUPS 16u

static accel_status_t rmsnorm(serve_model_t *m, bind_t x, accel_buffer_t *g,
                              bind_t y, uint32_t rows) {
  accel_kp_norm_constants_t c = {.rows = rows, .cols = m->c.dim,
                                 .eps = m->norm_eps};
  bind_t b[3] = {x, {g, 0}, y};
  return launch(m, K_RMSNORM, rows, b, 3, &c, sizeof(c));
}

static accel_status_t project_weight(serve_model_t *m, accel_buffer_t *x,
                                     const serve_proj_t *p, accel_buffer_t *y,
                                     uint32_t rows, uint32_t out, uint32_t in);

// y = x W^T (+ bias, broadcast over the rows) over |rows| rows with the
// kernel of the weight's form.
static accel_status_t project(serve_model_t *m, accel_buffer_t *x,
                              const serve_proj_t *p, accel_buffer_t *y,
                              uint32_t rows, uint32_t out, uint32_t in) {
  ACCEL_RETURN_IF_ERROR(project_weight(m, x, p, y, rows, out, in));
  if (p->bias == NULL || rows == 0) {
    return ACCEL_OK;
  }
  accel_kp_eltwise_constants_t c = {.count = rows * out, .b_count = out};
  bind_t b[3] = {{y, 0}, {p->bias, 0}, {y, 0}};
  return launch(m, K_ADD, accel_kp_eltwise_units(&c), b, 3, &c, sizeof(c));
}

static accel_status_t project_weight(serve_model_t *m, accel_buffer_t *x,
                                     const serve_proj_t *p, accel_buffer_t *y,
                                     uint32_t rows, uint32_t out, uint32_t in) {
  if (p->kernel == K_MATMUL) {
    accel_kp_matmul_constants_t c = {.m = rows, .n = out, .k = in,
                                     .flags = ACCEL_KP_MM_TRANS_B,
                                     .dtype_a = ACCEL_KP_DTYPE_F32,
                                     .dtype_b = p->dtype};
    // No bias: the bias binding is ignored; x stands in for it.
    bind_t b[4] = {{x, 0}, {p->w, 0}, {x, 0}, {y, 0}};
    return launch(m, K_MATMUL, accel_kp_matmul_units(&c), b, 4, &c,
                  sizeof(c));
  }
  accel_kp_qmatmul_constants_t c = {.m = rows, .n = out, .k = in};
  if (p->kernel == K_QMATMUL) {
    bind_t b[4] = {{x, 0}, {p->w, 0}, {p->scale, 0}, {y, 0}};
    return launch(m, K_QMATMUL, accel_kp_qmatmul_units(&c), b, 4, &c,
                  sizeof(c));
  }
  bind_t b[3] = {{x, 0}, {p->w, 0}, {y, 0}};
  if (m->activation_flags[p->kernel] != 0) {
    c.flags = m->activation_flags[p->kernel];
    return launch_groups(m, p->kernel, accel_kp_qmatmul_units(&c),
                         QUANTIZED_ACTIVATION_GROUPS, b, 3, &c, sizeof(c));
  }
  return launch(m, p->kernel, accel_kp_qmatmul_units(&c), b, 3, &c,
                sizeof(c));
}

static accel_status_t rope(serve_model_t *m, accel_buffer_t *x, uint32_t rows,
                           uint32_t heads) {
  accel_kp_rope_constants_t c = {.tokens = rows, .heads = heads,
                                 .head_dim = m->c.head_dim,
                                 .mode = m->rope_mode,
                                 .base = m->rope_base};
  bind_t b[2] = {{x, 0}, {m->positions, 0}};
  return launch(m, K_ROPE, rows, b, 2, &c, sizeof(c));
}

static accel_status_t add_into(serve_model_t *m, accel_buffer_t *a,
                               accel_buffer_t *b_, uint32_t count) {
  accel_kp_eltwise_constants_t c = {.count = count};
  bind_t b[3] = {{a, 0}, {b_, 0}, {a, 0}};
  return launch(m, K_ADD, accel_kp_eltwise_units(&c), b, 3, &c, sizeof(c));
}

// ---------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------

// The model's metadata and weights: a decoder .axe (|weights|) or a .gguf
// run in place (|mapped|), read alike.
static accel_status_t model_metadata(const serve_model_t *m, const char *key,
                                     const char **out) {
  return m->mapped != NULL ? accel_gguf_mapped_metadata(m->mapped, key, out)
                           : accel_executable_metadata(m->weights, key, out);
}

static accel_status_t model_weight(const serve_model_t *m, const char *name,
                                   accel_weight_info_t *info) {
  return m->mapped != NULL ? accel_gguf_mapped_weight(m->mapped, name, info)
                           : accel_executable_weight(m->weights, name, info);
}

static accel_status_t model_weight_buffer(serve_model_t *m, const char *name,
                                          accel_buffer_t **out) {
  return m->mapped != NULL
             ? accel_gguf_mapped_weight_buffer(m->mapped, name, out)
             : accel_executable_weight_buffer(m->weights, name, out);
}

static accel_status_t read_config(const serve_model_t *m,
                                  serve_model_config_t *c) {
  const char *v = NULL;
#define SERVE_MODEL_READ(name)                                                \
  if (model_metadata(m, "decoder." #name, &v) != ACCEL_OK) {                  \
    return accel_error(ACCEL_ERROR_FORMAT,                                    \
                       "model: no metadata \"decoder." #name "\"");          \
  }                                                                           \
  {                                                                           \
    char *end = NULL;                                                         \
    unsigned long n = strtoul(v, &end, 10);                                   \
    if (*v < '0' || *v > '9' || *end != '\0' || n == 0 || n > 1u << 24) {     \
      return accel_error(ACCEL_ERROR_FORMAT,                                  \
                         "model: metadata \"decoder." #name                   \
                         "\" is \"%.32s\", not a count in 1..16777216", v);   \
    }                                                                         \
    c->name = (uint32_t)n;                                                    \
  }
  SERVE_MODEL_CONFIG_FIELDS(SERVE_MODEL_READ)
#undef SERVE_MODEL_READ
  if (c->heads % c->kv_heads != 0 || c->head_dim % 2 != 0 ||
      c->head_dim > ACCEL_KP_ATTN_MAX_HEAD_DIM ||
      (uint64_t)c->heads / c->kv_heads * c->head_dim >
          ACCEL_KP_ATTN_MAX_GROUP_FLOATS ||
      c->block_size > 4096) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "model: heads %u, kv_heads %u, head_dim %u, block_size "
                       "%u: heads must be a multiple of kv_heads, head_dim even "
                       "and at most %u, block_size at most 4096",
                       c->heads, c->kv_heads, c->head_dim, c->block_size,
                       ACCEL_KP_ATTN_MAX_HEAD_DIM);
  }
  return ACCEL_OK;
}

// The optional decoder.version: layouts 1 and 2 (docs/executable-format.md
// "Decoder models"); checked before anything else is read, since another
// layout may give the same keys other meanings.
static accel_status_t check_version(const serve_model_t *m) {
  const char *version = NULL;
  if (model_metadata(m, "decoder.version", &version) == ACCEL_OK &&
      strcmp(version, "1") != 0 && strcmp(version, "2") != 0) {
    return accel_error(ACCEL_ERROR_VERSION,
                       "model: decoder.version \"%.16s\": this runtime reads "
                       "decoder layouts 1 and 2",
                       version);
  }
  return ACCEL_OK;
}

// The optional decoder.rope_base,
// decoder.norm_eps (positive finite floats) and decoder.rope_mode ("half",
// the default, or "interleaved"); docs/executable-format.md "Decoder
// models".
static accel_status_t read_rope_norm(serve_model_t *m) {
  const struct {
    const char *key;
    float *out, fallback;
  } floats[] = {{"decoder.rope_base", &m->rope_base, SERVE_ROPE_BASE},
                {"decoder.norm_eps", &m->norm_eps, SERVE_NORM_EPS}};
  for (size_t i = 0; i < sizeof(floats) / sizeof(floats[0]); ++i) {
    const char *v = NULL;
    *floats[i].out = floats[i].fallback;
    if (model_metadata(m, floats[i].key, &v) != ACCEL_OK) {
      continue;
    }
    char *end = NULL;
    float f = strtof(v, &end);
    if (end == v || *end != '\0' || !(f > 0) || !isfinite(f)) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "model: metadata \"%s\" is \"%.32s\", not a "
                         "positive finite number",
                         floats[i].key, v);
    }
    *floats[i].out = f;
  }
  const char *mode = NULL;
  m->rope_mode = ACCEL_KP_ROPE_HALF;
  if (model_metadata(m, "decoder.rope_mode", &mode) ==
      ACCEL_OK) {
    if (strcmp(mode, "interleaved") == 0) {
      m->rope_mode = ACCEL_KP_ROPE_INTERLEAVED;
    } else if (strcmp(mode, "half") != 0) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "model: metadata \"decoder.rope_mode\" is "
                         "\"%.32s\", not \"half\" or \"interleaved\"",
                         mode);
    }
  }
  return ACCEL_OK;
}

// Opens weight |name| after checking its dtype and shape (cols 0: rank 1).
static accel_status_t weight(serve_model_t *m, const char *name,
                             accel_dtype_t dtype, uint64_t rows,
                             uint64_t cols, accel_buffer_t **out) {
  accel_weight_info_t info = {.struct_size = sizeof(info)};
  if (model_weight(m, name, &info) != ACCEL_OK) {
    return accel_error(ACCEL_ERROR_FORMAT, "model: no weight \"%s\"", name);
  }
  uint32_t rank = cols ? 2 : 1;
  if (info.dtype != (uint32_t)dtype || info.rank != rank ||
      info.shape[0] != rows || (cols && info.shape[1] != cols)) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "model: weight \"%s\" is %s rank %u [%llu, %llu], "
                       "expected %s [%llu, %llu]",
                       name, accel_dtype_name(info.dtype), info.rank,
                       (unsigned long long)info.shape[0],
                       (unsigned long long)info.shape[1],
                       accel_dtype_name(dtype), (unsigned long long)rows,
                       (unsigned long long)cols);
  }
  return model_weight_buffer(m, name, out);
}

static uint32_t kp_float_dtype(uint32_t dtype) {
  switch (dtype) {
    case ACCEL_DTYPE_F32:
      return ACCEL_KP_DTYPE_F32;
    case ACCEL_DTYPE_F16:
      return ACCEL_KP_DTYPE_F16;
    case ACCEL_DTYPE_BF16:
      return ACCEL_KP_DTYPE_BF16;
    default:
      return 0;
  }
}

// A [out, in] projection in any form the decoder format allows: i8 with its
// f32 [out] scales "<name>.scale"; f32, f16 or bf16; or u8 GGUF blocks
// [out, in / 32 * block bytes] with "decoder.type.<name>" naming the block
// type (q8_0, q4_0).
static accel_status_t proj_form(serve_model_t *m, const char *name,
                                uint32_t out, uint32_t in, serve_proj_t *p);

// A projection in its form (proj_form) and its optional f32 [out] bias
// "<name>.bias".
static accel_status_t proj_weight(serve_model_t *m, const char *name,
                                  uint32_t out, uint32_t in, serve_proj_t *p) {
  ACCEL_RETURN_IF_ERROR(proj_form(m, name, out, in, p));
  char bn[128];
  snprintf(bn, sizeof(bn), "%s.bias", name);
  accel_weight_info_t info = {.struct_size = sizeof(info)};
  if (model_weight(m, bn, &info) != ACCEL_OK) {
    return ACCEL_OK;
  }
  return weight(m, bn, ACCEL_DTYPE_F32, out, 0, &p->bias);
}

static accel_status_t proj_form(serve_model_t *m, const char *name,
                                uint32_t out, uint32_t in, serve_proj_t *p) {
  accel_weight_info_t info = {.struct_size = sizeof(info)};
  if (model_weight(m, name, &info) != ACCEL_OK) {
    return accel_error(ACCEL_ERROR_FORMAT, "model: no weight \"%s\"", name);
  }
  if (info.dtype == ACCEL_DTYPE_I8) {
    char sn[128];
    snprintf(sn, sizeof(sn), "%s.scale", name);
    p->kernel = K_QMATMUL;
    ACCEL_RETURN_IF_ERROR(weight(m, sn, ACCEL_DTYPE_F32, out, 0, &p->scale));
    return weight(m, name, ACCEL_DTYPE_I8, out, in, &p->w);
  }
  if (kp_float_dtype(info.dtype) != 0) {
    p->kernel = K_MATMUL;
    p->dtype = kp_float_dtype(info.dtype);
    return weight(m, name, (accel_dtype_t)info.dtype, out, in, &p->w);
  }
  char key[128];
  const char *type = NULL;
  snprintf(key, sizeof(key), "decoder.type.%s", name);
  if (info.dtype != ACCEL_DTYPE_U8 ||
      model_metadata(m, key, &type) != ACCEL_OK) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "model: weight \"%s\" is %s with%s metadata \"%s\": a "
                       "projection is i8, f32, f16, bf16, or u8 blocks named "
                       "by that metadata",
                       name, accel_dtype_name(info.dtype),
                       type == NULL ? "out" : "", key);
  }
  const struct block_form *f = NULL;
  for (size_t i = 0; i < sizeof(kBlockForms) / sizeof(kBlockForms[0]); ++i) {
    if (strcmp(type, kBlockForms[i].name) == 0) f = &kBlockForms[i];
  }
  if (f == NULL || in % f->block != 0) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "model: weight \"%s\": block type \"%.16s\" with %u "
                       "inputs (q8_0, q4_0, q4_1, q5_0, q5_1 with inputs a "
                       "multiple of 32; q4_k, q5_k, q6_k of 256)",
                       name, type, in);
  }
  p->kernel = f->kernel;
  p->ggml_type = f->ggml_type;
  return weight(m, name, ACCEL_DTYPE_U8, out,
                (uint64_t)in / f->block * f->bytes, &p->w);
}

static accel_status_t open_weights(serve_model_t *m) {
  const serve_model_config_t *c = &m->c;
  ACCEL_RETURN_IF_ERROR(proj_weight(m, "embed", c->vocab, c->dim, &m->embed));
  if (m->embed.kernel == K_QMATMUL) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "model: weight \"embed\" is i8: the embedding is f32, "
                       "f16, bf16 or GGUF blocks");
  }
  ACCEL_RETURN_IF_ERROR(
      weight(m, "final_norm", ACCEL_DTYPE_F32, c->dim, 0, &m->final_norm));
  const char *tied = NULL;
  if (model_metadata(m, "decoder.tied_head", &tied) ==
          ACCEL_OK &&
      strcmp(tied, "1") == 0) {
    ACCEL_RETURN_IF_ERROR(
        proj_weight(m, "embed", c->vocab, c->dim, &m->lm_head));
  } else {
    ACCEL_RETURN_IF_ERROR(
        proj_weight(m, "lm_head", c->vocab, c->dim, &m->lm_head));
  }
  for (uint32_t l = 0; l < c->layers; ++l) {
    serve_layer_t *L = &m->layers[l];
    uint32_t out[W_COUNT] = {0, m->qd, m->kvd, m->kvd, c->dim, 0, c->ffn,
                             c->ffn, c->dim};
    uint32_t in[W_COUNT] = {0, c->dim, c->dim, c->dim, m->qd, 0, c->dim,
                            c->dim, c->ffn};
    for (int p = 0; p < W_COUNT; ++p) {
      char n[96];
      snprintf(n, sizeof(n), "l%u.%s", l, kPartNames[p]);
      if (p == W_ATTN_NORM || p == W_MLP_NORM) {
        ACCEL_RETURN_IF_ERROR(weight(m, n, ACCEL_DTYPE_F32, c->dim, 0,
                                     &L->w[p]));
      } else {
        ACCEL_RETURN_IF_ERROR(proj_weight(m, n, out[p], in[p], &L->p[p]));
      }
    }
  }
  return ACCEL_OK;
}

static accel_status_t alloc(serve_model_t *m, uint64_t bytes, uint32_t kind,
                            accel_mempool_t *pool, const char *tag,
                            accel_buffer_t **out) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .kind = kind,
                           .size_bytes = bytes ? bytes : 4, .tag = tag,
                           .pool = pool};
  return accel_buffer_alloc(m->dev, &d, out);
}

static accel_status_t alloc_cache(serve_model_t *m) {
  const serve_model_config_t *c = &m->c;
  accel_mempool_desc_t pd = {.struct_size = sizeof(pd),
                             .type = ACCEL_MEMPOOL_TYPE_PAGED,
                             .page_size_bytes = 64 << 10,
                             .name = "kv-cache"};
  ACCEL_RETURN_IF_ERROR(accel_mempool_create(m->dev, &pd, &m->kv_pool));
  uint64_t dev_bytes = (uint64_t)m->device_blocks * m->layer_block_bytes;
  uint64_t host_bytes = (uint64_t)m->host_blocks * m->layer_block_bytes;
  for (uint32_t l = 0; l < c->layers; ++l) {
    serve_layer_t *L = &m->layers[l];
    ACCEL_RETURN_IF_ERROR(alloc(m, dev_bytes, ACCEL_MEMORY_KIND_DEVICE,
                                m->kv_pool, "kv-k", &L->k));
    ACCEL_RETURN_IF_ERROR(alloc(m, dev_bytes, ACCEL_MEMORY_KIND_DEVICE,
                                m->kv_pool, "kv-v", &L->v));
    if (m->host_blocks > 0) {
      ACCEL_RETURN_IF_ERROR(alloc(m, host_bytes, ACCEL_MEMORY_KIND_HOST_PINNED,
                                  NULL, "kv-swap-k", &L->hk));
      ACCEL_RETURN_IF_ERROR(alloc(m, host_bytes, ACCEL_MEMORY_KIND_HOST_PINNED,
                                  NULL, "kv-swap-v", &L->hv));
    }
  }
  return ACCEL_OK;
}

static accel_status_t alloc_activations(serve_model_t *m) {
  const serve_model_config_t *c = &m->c;
  uint64_t t = m->d.max_step_tokens, s = m->d.max_step_seqs;
  uint64_t dev = ACCEL_MEMORY_KIND_DEVICE;
  struct {
    accel_buffer_t **b;
    uint64_t bytes;
  } bufs[] = {
      {&m->x, 4 * t * c->dim}, {&m->h, 4 * t * c->dim},
      {&m->o, 4 * t * c->dim}, {&m->q, 4 * t * m->qd},
      {&m->attn, 4 * t * m->qd}, {&m->kn, 4 * t * m->kvd},
      {&m->vn, 4 * t * m->kvd}, {&m->gate, 4 * t * c->ffn},
      {&m->up, 4 * t * c->ffn},
      {&m->gk, 4ull * m->d.max_context * m->kvd},
      {&m->gv, 4ull * m->d.max_context * m->kvd},
      {&m->tokens, 4 * t}, {&m->positions, 4 * t}, {&m->slots, 4 * t},
      {&m->rows, 4 * s}, {&m->tables, 4 * s * m->max_blocks},
      {&m->ctx, 4 * s}, {&m->fx, 4 * s * c->dim}, {&m->fh, 4 * s * c->dim},
      {&m->logits, 4 * s * c->vocab}};
  for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); ++i) {
    ACCEL_RETURN_IF_ERROR(alloc(m, bufs[i].bytes, (uint32_t)dev, NULL,
                                "serve-step", bufs[i].b));
  }
  void *p[7];
  accel_buffer_t *b[7] = {m->tokens, m->positions, m->slots, m->rows,
                          m->tables, m->ctx, m->logits};
  m->direct = true;
  for (int i = 0; i < 7 && m->direct; ++i) {
    m->direct = accel_buffer_host_pointer(b[i], &p[i]) == ACCEL_OK;
  }
  if (m->direct) {
    m->in = (serve_inputs_t){.tokens = p[0], .positions = p[1],
                             .slots = p[2], .rows = p[3], .tables = p[4],
                             .ctx = p[5]};
    m->logits_host = p[6];
  } else {
    m->in.tokens = calloc(t, 4);
    m->in.positions = calloc(t, 4);
    m->in.slots = calloc(t, 4);
    m->in.rows = calloc(s, 4);
    m->in.tables = calloc(s * m->max_blocks, 4);
    m->in.ctx = calloc(s, 4);
  }
  m->order = calloc(s, 4);
  m->replay = m->d.command_buffers;
  // rows, decodes, samples, then a count and a context per prefill chunk.
  m->key = calloc(3 + 2 * s, 4);
  if (!m->key || !m->in.tokens || !m->in.positions || !m->in.slots ||
      !m->in.rows || !m->in.tables || !m->in.ctx || !m->order) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "serve: cannot allocate the step's staging arrays");
  }
  return ACCEL_OK;
}

// Loads the model: an .axe as it is (mapped by the loader); a .gguf run in
// place over its mapping (gguf_mapped.h: the same checks as accel-pack
// --from-gguf, no weight copied) where the device reads host memory, else
// imported into an .axe image in memory (one copy of the weights; the
// file's mapping is closed before the image is loaded).
static accel_status_t load_weights(serve_model_t *m, accel_runtime_t *rt) {
  if (!accel_gguf_file_is_gguf(m->d.model_path)) {
    return accel_executable_load_file(rt, m->dev, m->d.model_path, 0,
                                      &m->weights);
  }
  accel_gguf_t *g = NULL;
  uint64_t size = 0;
  ACCEL_RETURN_IF_ERROR(accel_gguf_open_file(m->d.model_path, &g));
  if (accel_gguf_mapped_possible(m->dev, g, NULL, 0)) {
    accel_status_t st = accel_gguf_mapped_create(m->dev, g, true, &m->mapped);
    if (st != ACCEL_OK) {
      accel_gguf_close(g);
    }
    return st;
  }
  accel_status_t st = accel_gguf_import_memory(g, &m->image, &size);
  accel_gguf_close(g);
  if (st != ACCEL_OK) {
    return st;
  }
  // Built here from a checked file, so the section hashes are not re-read.
  return accel_executable_load_memory(rt, m->dev, m->image, size,
                                      ACCEL_EXECUTABLE_LOAD_SKIP_HASHES,
                                      &m->weights);
}

static accel_status_t model_open(serve_model_t *m) {
  accel_runtime_t *rt = accel_device_runtime(m->dev);
  accel_status_t st = accel_executable_load_file(rt, m->dev,
                                                 m->d.kernels_path, 0,
                                                 &m->kernels);
  if (st != ACCEL_OK) {
    return accel_error_context(st, "kernels %s", m->d.kernels_path);
  }
  st = load_weights(m, rt);
  if (st != ACCEL_OK) {
    return accel_error_context(st, "model %s", m->d.model_path);
  }
  for (int i = 0; i < K_COUNT; ++i) {
    st = accel_executable_kernel(m->kernels, kKernelNames[i], &m->k[i]);
    if (st != ACCEL_OK) {
      return accel_error_context(st, "kernels %s", m->d.kernels_path);
    }
    accel_kernel_info_t ki = {.struct_size = sizeof(ki)};
    if (!m->d.f32_activations &&
        accel_kernel_info(m->k[i], &ki) == ACCEL_OK) {
      m->activation_flags[i] =
          (ki.features & ACCEL_KP_FEATURE_I16_ACTIVATIONS)
              ? ACCEL_KP_QFLAG_I16_ACTIVATIONS
          : (ki.features & ACCEL_KP_FEATURE_Q8_ACTIVATIONS)
              ? ACCEL_KP_QFLAG_Q8_ACTIVATIONS
              : 0u;
    }
  }
  const char *kind = NULL;
  if (model_metadata(m, "model", &kind) != ACCEL_OK ||
      strcmp(kind, "decoder") != 0) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "model %s: metadata \"model\" is not \"decoder\"",
                       m->d.model_path);
  }
  st = check_version(m);
  if (st == ACCEL_OK) {
    st = read_config(m, &m->c);
  }
  if (st == ACCEL_OK) {
    st = read_rope_norm(m);
  }
  if (st != ACCEL_OK) {
    return accel_error_context(st, "%s", m->d.model_path);
  }
  const serve_model_config_t *c = &m->c;
  m->qd = c->heads * c->head_dim;
  m->kvd = c->kv_heads * c->head_dim;
  m->max_blocks = (m->d.max_context + c->block_size - 1) / c->block_size;
  m->layer_block_bytes = 4ull * c->block_size * m->kvd;
  uint64_t block_bytes = 2ull * c->layers * m->layer_block_bytes;
  uint64_t blocks = m->d.kv_bytes / block_bytes;
  if (blocks < m->max_blocks) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "serve: a KV budget of %llu bytes holds %llu blocks of "
                       "%llu bytes; one request of max_context %u tokens "
                       "needs %u",
                       (unsigned long long)m->d.kv_bytes,
                       (unsigned long long)blocks,
                       (unsigned long long)block_bytes, m->d.max_context,
                       m->max_blocks);
  }
  m->device_blocks = blocks > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t)blocks;
  uint64_t hb = m->d.swap_bytes / block_bytes;
  m->host_blocks = hb > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t)hb;
  m->layers = calloc(c->layers, sizeof(serve_layer_t));
  if (m->layers == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "serve: cannot allocate");
  }
  st = open_weights(m);
  if (st != ACCEL_OK) {
    return accel_error_context(st, "%s", m->d.model_path);
  }
  ACCEL_RETURN_IF_ERROR(alloc_cache(m));
  return alloc_activations(m);
}

accel_status_t serve_model_create(accel_device_t *device,
                                  const serve_model_desc_t *desc,
                                  serve_model_t **out) {
  serve_model_t *m = calloc(1, sizeof(*m));
  if (m == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "serve: cannot allocate");
  }
  m->dev = device;
  m->d = *desc;
  accel_stream_desc_t sd = {.struct_size = sizeof(sd), .name = "serve"};
  accel_status_t st = accel_stream_create(device, &sd, &m->s);
  if (st == ACCEL_OK) {
    st = model_open(m);
  }
  if (st != ACCEL_OK) {
    serve_model_destroy(m);
    return st;
  }
  *out = m;
  return ACCEL_OK;
}

void serve_model_destroy(serve_model_t *m) {
  if (m == NULL) {
    return;
  }
  if (m->s != NULL) {
    (void)accel_stream_synchronize(m->s, ACCEL_TIMEOUT_INFINITE);
  }
  for (uint32_t i = 0; i < SERVE_SHAPES; ++i) {
    shape_clear(&m->shapes[i]);
  }
  accel_buffer_t *bufs[] = {m->embed.w, m->embed.bias, m->final_norm,
                            m->lm_head.w, m->lm_head.scale, m->lm_head.bias,
                            m->x, m->h, m->o, m->q, m->attn, m->kn, m->vn,
                            m->gate, m->up, m->gk, m->gv, m->tokens,
                            m->positions, m->slots, m->rows, m->tables,
                            m->ctx, m->fx, m->fh, m->logits};
  for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); ++i) {
    if (bufs[i] != NULL) {
      accel_buffer_release(bufs[i]);
    }
  }
  if (m->layers != NULL) {
    for (uint32_t l = 0; l < m->c.layers; ++l) {
      serve_layer_t *L = &m->layers[l];
      accel_buffer_t *lb[] = {L->k, L->v, L->hk, L->hv};
      for (int p = 0; p < W_COUNT; ++p) {
        if (L->w[p] != NULL) accel_buffer_release(L->w[p]);
        if (L->p[p].w != NULL) accel_buffer_release(L->p[p].w);
        if (L->p[p].scale != NULL) accel_buffer_release(L->p[p].scale);
        if (L->p[p].bias != NULL) accel_buffer_release(L->p[p].bias);
      }
      for (int i = 0; i < 4; ++i) {
        if (lb[i] != NULL) accel_buffer_release(lb[i]);
      }
    }
    free(m->layers);
  }
  if (m->kv_pool != NULL) {
    (void)accel_mempool_destroy(m->kv_pool);
  }
  if (m->weights != NULL) accel_executable_release(m->weights);
  accel_gguf_mapped_release(m->mapped);
  free(m->image);
  if (m->kernels != NULL) accel_executable_release(m->kernels);
  if (m->s != NULL) accel_stream_destroy(m->s);
  if (!m->direct) {
    free(m->in.tokens);
    free(m->in.positions);
    free(m->in.slots);
    free(m->in.rows);
    free(m->in.tables);
    free(m->in.ctx);
  }
  free(m->order);
  free(m->key);
  free(m->binds);
  free(m);
}

const serve_model_config_t *serve_model_config(const serve_model_t *m) {
  return &m->c;
}
uint32_t serve_model_device_blocks(const serve_model_t *m) {
  return m->device_blocks;
}
uint32_t serve_model_host_blocks(const serve_model_t *m) {
  return m->host_blocks;
}
uint64_t serve_model_block_bytes(const serve_model_t *m) {
  return 2ull * m->c.layers * m->layer_block_bytes;
}

// ---------------------------------------------------------------------------
// A step
// ---------------------------------------------------------------------------

// Copies block |src| of |from| to block |dst| of |to| in every layer.
static accel_status_t copy_blocks(serve_model_t *m, const accel_kv_copy_t *cp,
                                  uint32_t count, bool from_host,
                                  bool to_host) {
  uint64_t bb = m->layer_block_bytes;
  for (uint32_t i = 0; i < count; ++i) {
    for (uint32_t l = 0; l < m->c.layers; ++l) {
      serve_layer_t *L = &m->layers[l];
      ACCEL_RETURN_IF_ERROR(accel_stream_copy(
          m->s, to_host ? L->hk : L->k, cp[i].dst * bb,
          from_host ? L->hk : L->k, cp[i].src * bb, bb));
      ACCEL_RETURN_IF_ERROR(accel_stream_copy(
          m->s, to_host ? L->hv : L->v, cp[i].dst * bb,
          from_host ? L->hv : L->v, cp[i].src * bb, bb));
    }
  }
  return ACCEL_OK;
}

// Appends a binding to the step's table.
static accel_status_t push_bind(serve_model_t *m, accel_buffer_t *buffer,
                                uint64_t offset, uint64_t length) {
  if (m->bind_count == m->bind_cap) {
    uint32_t cap = m->bind_cap ? 2 * m->bind_cap : 64;
    void *grown = realloc(m->binds, sizeof(*m->binds) * cap);
    if (grown == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "serve: cannot grow a step's binding table to %u",
                         cap);
    }
    m->binds = grown;
    m->bind_cap = cap;
  }
  m->binds[m->bind_count++] = (accel_command_buffer_binding_t){
      .buffer = buffer, .offset = offset, .length = length};
  return ACCEL_OK;
}

// One copy of a gather into |dst|: submitted; or recorded reading the next
// slot of the binding table (the block it reads comes from the step's block
// table, which changes from step to step); or, with |bind_only| (a replay),
// only that slot's binding.
static accel_status_t gather_copy(serve_model_t *m, bool bind_only,
                                  accel_buffer_t *dst, uint64_t dst_offset,
                                  accel_buffer_t *src, uint64_t src_offset,
                                  uint64_t size) {
  if (m->rec == NULL && !bind_only) {
    return accel_stream_copy(m->s, dst, dst_offset, src, src_offset, size);
  }
  uint32_t slot = m->bind_count;
  ACCEL_RETURN_IF_ERROR(push_bind(m, src, src_offset, size));
  if (bind_only) {
    return ACCEL_OK;
  }
  accel_command_buffer_ref_t d = {.buffer = dst, .offset = dst_offset};
  accel_command_buffer_ref_t r = {.slot = slot};
  return accel_command_buffer_copy(m->rec, &d, &r, size);
}

// Gathers the first |len| positions of a sequence's paged K and V of layer
// |L| into the dense scratch gk, gv ([len, kv_heads, head_dim]): a block is
// contiguous in both layouts, so one copy per block.
static accel_status_t gather(serve_model_t *m, const serve_layer_t *L,
                             const uint32_t *table, uint32_t len,
                             bool bind_only) {
  uint32_t bs = m->c.block_size;
  uint64_t row = 4ull * m->kvd;
  for (uint32_t b = 0; b * bs < len; ++b) {
    uint32_t n = len - b * bs < bs ? len - b * bs : bs;
    uint64_t src = (uint64_t)table[b] * m->layer_block_bytes;
    ACCEL_RETURN_IF_ERROR(gather_copy(m, bind_only, m->gk, b * bs * row, L->k,
                                      src, n * row));
    ACCEL_RETURN_IF_ERROR(gather_copy(m, bind_only, m->gv, b * bs * row, L->v,
                                      src, n * row));
  }
  return ACCEL_OK;
}

// The binding table of a replayed step: the gathers' sources in the order
// layer_forward records them.
static accel_status_t gather_bindings(serve_model_t *m,
                                      const accel_sched_plan_t *plan,
                                      uint32_t nd) {
  m->bind_count = 0;
  for (uint32_t l = 0; l < m->c.layers; ++l) {
    for (uint32_t i = nd; i < plan->entry_count; ++i) {
      const accel_sched_entry_t *e = &plan->entries[m->order[i]];
      if (e->start > 0) {
        ACCEL_RETURN_IF_ERROR(gather(m, &m->layers[l], e->block_table,
                                     e->start + e->count, true));
      }
    }
  }
  return ACCEL_OK;
}

// Attention of the step's rows: decode-shaped entries (rows 0..nd-1) in one
// paged launch, then each prefill chunk over its context.
static accel_status_t attention(serve_model_t *m, const serve_layer_t *L,
                                const accel_sched_plan_t *plan, uint32_t nd) {
  const serve_model_config_t *c = &m->c;
  float scale = 1.0f / sqrtf((float)c->head_dim);
  if (nd > 0) {
    accel_kp_attn_paged_constants_t pc = {
        .num_seqs = nd, .n_heads = c->heads, .n_kv_heads = c->kv_heads,
        .head_dim = c->head_dim, .block_size = c->block_size,
        .num_blocks = m->device_blocks, .max_blocks_per_seq = m->max_blocks,
        .scale = scale};
    bind_t pb[6] = {{m->q, 0}, {L->k, 0}, {L->v, 0},
                    {m->tables, 0}, {m->ctx, 0}, {m->attn, 0}};
    ACCEL_RETURN_IF_ERROR(launch(m, K_PAGED, (uint64_t)nd * c->kv_heads, pb,
                                 6, &pc, sizeof(pc)));
  }
  uint32_t row = nd;
  for (uint32_t i = nd; i < plan->entry_count; ++i) {
    const accel_sched_entry_t *e = &plan->entries[m->order[i]];
    uint32_t len = e->start + e->count;
    accel_kp_attn_prefill_constants_t pc = {
        .q_len = e->count, .kv_len = len, .n_heads = c->heads,
        .n_kv_heads = c->kv_heads, .head_dim = c->head_dim, .scale = scale};
    bind_t pb[4] = {{m->q, 4ull * row * m->qd}, {m->kn, 4ull * row * m->kvd},
                    {m->vn, 4ull * row * m->kvd},
                    {m->attn, 4ull * row * m->qd}};
    if (e->start > 0) {
      // Part of the context is cached: read all of it from the paged cache
      // (the new rows were appended above).
      ACCEL_RETURN_IF_ERROR(gather(m, L, e->block_table, len, false));
      pb[1] = (bind_t){m->gk, 0};
      pb[2] = (bind_t){m->gv, 0};
    }
    ACCEL_RETURN_IF_ERROR(launch(m, K_PREFILL,
                                 (uint64_t)e->count * c->kv_heads, pb, 4, &pc,
                                 sizeof(pc)));
    row += e->count;
  }
  return ACCEL_OK;
}

static accel_status_t layer_forward(serve_model_t *m, const serve_layer_t *L,
                                    const accel_sched_plan_t *plan,
                                    uint32_t rows, uint32_t nd) {
  const serve_model_config_t *c = &m->c;
  ACCEL_RETURN_IF_ERROR(rmsnorm(m, (bind_t){m->x, 0}, L->w[W_ATTN_NORM],
                                (bind_t){m->h, 0}, rows));
  ACCEL_RETURN_IF_ERROR(project(m, m->h, &L->p[W_Q], m->q, rows,
                                m->qd, c->dim));
  ACCEL_RETURN_IF_ERROR(project(m, m->h, &L->p[W_K], m->kn, rows,
                                m->kvd, c->dim));
  ACCEL_RETURN_IF_ERROR(project(m, m->h, &L->p[W_V], m->vn, rows,
                                m->kvd, c->dim));
  ACCEL_RETURN_IF_ERROR(rope(m, m->q, rows, c->heads));
  ACCEL_RETURN_IF_ERROR(rope(m, m->kn, rows, c->kv_heads));
  accel_kp_kv_append_constants_t ac = {.tokens = rows,
                                       .n_kv_heads = c->kv_heads,
                                       .head_dim = c->head_dim,
                                       .block_size = c->block_size,
                                       .num_blocks = m->device_blocks};
  bind_t ab[5] = {{m->kn, 0}, {m->vn, 0}, {m->slots, 0}, {L->k, 0},
                  {L->v, 0}};
  ACCEL_RETURN_IF_ERROR(launch(m, K_APPEND, rows, ab, 5, &ac, sizeof(ac)));
  ACCEL_RETURN_IF_ERROR(attention(m, L, plan, nd));
  ACCEL_RETURN_IF_ERROR(project(m, m->attn, &L->p[W_O], m->o, rows,
                                c->dim, m->qd));
  ACCEL_RETURN_IF_ERROR(add_into(m, m->x, m->o, rows * c->dim));
  ACCEL_RETURN_IF_ERROR(rmsnorm(m, (bind_t){m->x, 0}, L->w[W_MLP_NORM],
                                (bind_t){m->h, 0}, rows));
  ACCEL_RETURN_IF_ERROR(project(m, m->h, &L->p[W_GATE], m->gate,
                                rows, c->ffn, c->dim));
  ACCEL_RETURN_IF_ERROR(project(m, m->h, &L->p[W_UP], m->up, rows,
                                c->ffn, c->dim));
  accel_kp_eltwise_constants_t sc = {.count = rows * c->ffn};
  bind_t sb[3] = {{m->gate, 0}, {m->up, 0}, {m->gate, 0}};
  ACCEL_RETURN_IF_ERROR(launch(m, K_SWIGLU, accel_kp_eltwise_units(&sc), sb, 3,
                               &sc, sizeof(sc)));
  ACCEL_RETURN_IF_ERROR(project(m, m->gate, &L->p[W_DOWN], m->o,
                                rows, c->dim, c->ffn));
  return add_into(m, m->x, m->o, rows * c->dim);
}

// x = the embedding rows of the step's tokens.
static accel_status_t embed(serve_model_t *m, uint32_t rows) {
  const serve_model_config_t *c = &m->c;
  bind_t eb[3] = {{m->embed.w, 0}, {m->tokens, 0}, {m->x, 0}};
  if (m->embed.kernel == K_MATMUL) {
    accel_kp_embedding_constants_t ec = {.tokens = rows, .vocab = c->vocab,
                                         .dim = c->dim,
                                         .dtype = m->embed.dtype};
    return launch(m, K_EMBEDDING, rows, eb, 3, &ec, sizeof(ec));
  }
  accel_kp_embedding_gguf_constants_t ec = {.tokens = rows,
                                            .vocab = c->vocab,
                                            .dim = c->dim,
                                            .type = m->embed.ggml_type};
  return launch(m, K_EMBED_BLOCKS, rows, eb, 3, &ec, sizeof(ec));
}

// Orders the entries (decode-shaped first), fills the staging arrays, and
// returns the number of decode-shaped entries and of sampled rows.
static void stage(serve_model_t *m, const accel_sched_plan_t *plan,
                  uint32_t *out_nd, uint32_t *out_samples) {
  uint32_t n = 0, nd = 0;
  for (uint32_t i = 0; i < plan->entry_count; ++i) {
    if (plan->entries[i].count == 1) m->order[n++] = i;
  }
  nd = n;
  for (uint32_t i = 0; i < plan->entry_count; ++i) {
    if (plan->entries[i].count != 1) m->order[n++] = i;
  }
  uint32_t bs = m->c.block_size, row = 0;
  for (uint32_t j = 0; j < n; ++j) {
    const accel_sched_entry_t *e = &plan->entries[m->order[j]];
    for (uint32_t t = 0; t < e->count; ++t) {
      uint32_t p = e->start + t;
      m->in.tokens[row + t] = e->tokens[p];
      m->in.positions[row + t] = (int32_t)p;
      m->in.slots[row + t] = (int32_t)(e->block_table[p / bs] * bs + p % bs);
    }
    if (j < nd) {
      m->in.ctx[j] = e->start + 1;
      memset(m->in.tables + (uint64_t)j * m->max_blocks, 0,
             4ull * m->max_blocks);
      memcpy(m->in.tables + (uint64_t)j * m->max_blocks, e->block_table,
             4ull * e->blocks);
    }
    row += e->count;
    // in.rows[plan index] = the entry's last row (the one sampled from).
    m->in.rows[m->order[j]] = (int32_t)(row - 1);
  }
  // Compact the sampling entries' rows in plan order (the order
  // accel_sched_complete takes their tokens in); i >= s throughout.
  uint32_t s = 0;
  for (uint32_t i = 0; i < plan->entry_count; ++i) {
    if (plan->entries[i].sample) m->in.rows[s++] = m->in.rows[i];
  }
  *out_nd = nd;
  *out_samples = s;
}

// Uploads the staged inputs (a device whose step buffers the host cannot
// write).
static accel_status_t upload(serve_model_t *m, uint32_t rows, uint32_t samples,
                             uint32_t nd) {
  ACCEL_RETURN_IF_ERROR(accel_stream_copy_from_host(m->s, m->tokens, 0,
                                                    m->in.tokens, 4ull * rows));
  ACCEL_RETURN_IF_ERROR(accel_stream_copy_from_host(
      m->s, m->positions, 0, m->in.positions, 4ull * rows));
  ACCEL_RETURN_IF_ERROR(accel_stream_copy_from_host(m->s, m->slots, 0,
                                                    m->in.slots, 4ull * rows));
  ACCEL_RETURN_IF_ERROR(accel_stream_copy_from_host(
      m->s, m->rows, 0, m->in.rows, 4ull * (samples ? samples : 1)));
  if (nd > 0) {
    ACCEL_RETURN_IF_ERROR(accel_stream_copy_from_host(
        m->s, m->tables, 0, m->in.tables, 4ull * nd * m->max_blocks));
    ACCEL_RETURN_IF_ERROR(
        accel_stream_copy_from_host(m->s, m->ctx, 0, m->in.ctx, 4ull * nd));
  }
  return ACCEL_OK;
}

// The model over the staged step: the embedding, every layer, and the head
// over the sampled rows; submitted, or recorded into m->rec.
static accel_status_t forward(serve_model_t *m, const accel_sched_plan_t *plan,
                              uint32_t rows, uint32_t nd, uint32_t samples) {
  const serve_model_config_t *c = &m->c;
  ACCEL_RETURN_IF_ERROR(embed(m, rows));
  for (uint32_t l = 0; l < c->layers; ++l) {
    ACCEL_RETURN_IF_ERROR(layer_forward(m, &m->layers[l], plan, rows, nd));
  }
  if (samples == 0) {
    return ACCEL_OK;
  }
  // The sampled rows' hidden states, gathered by the embedding kernel (the
  // step's hidden states as its table), then the head over them only.
  accel_kp_embedding_constants_t gc = {.tokens = samples, .vocab = rows,
                                       .dim = c->dim,
                                       .dtype = ACCEL_KP_DTYPE_F32};
  bind_t gb[3] = {{m->x, 0}, {m->rows, 0}, {m->fx, 0}};
  ACCEL_RETURN_IF_ERROR(launch(m, K_EMBEDDING, samples, gb, 3, &gc,
                               sizeof(gc)));
  ACCEL_RETURN_IF_ERROR(rmsnorm(m, (bind_t){m->fx, 0}, m->final_norm,
                                (bind_t){m->fh, 0}, samples));
  return project(m, m->fh, &m->lm_head, m->logits, samples, c->vocab, c->dim);
}

// ---------------------------------------------------------------------------
// Step command buffers (docs/serving.md, "Step command buffers")
// ---------------------------------------------------------------------------

// The step's shape: what changes the commands a step issues (their grids,
// constants and gathers). Everything else a step reads (tokens, positions,
// slots, block tables, context lengths, sampled rows) is in the step's
// input buffers, the same buffers for every step.
static void shape_key(serve_model_t *m, const accel_sched_plan_t *plan,
                      uint32_t rows, uint32_t nd, uint32_t samples) {
  uint32_t n = 0;
  m->key[n++] = rows;
  m->key[n++] = nd;
  m->key[n++] = samples;
  for (uint32_t i = nd; i < plan->entry_count; ++i) {
    const accel_sched_entry_t *e = &plan->entries[m->order[i]];
    m->key[n++] = e->count;
    // A chunk that starts at 0 attends over its own rows; a later one over
    // its whole context, gathered block by block.
    m->key[n++] = e->start > 0 ? e->start + e->count : 0;
  }
  m->key_len = n;
}

static uint64_t key_hash(const uint32_t *key, uint32_t len) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (uint32_t i = 0; i < len; ++i) {
    h = (h ^ key[i]) * 1099511628211ull;
  }
  return h;
}

static void shape_clear(serve_shape_t *sh) {
  accel_command_buffer_release(sh->cb);
  free(sh->key);
  *sh = (serve_shape_t){0};
}

static serve_shape_t *shape_find(serve_model_t *m, uint64_t hash) {
  for (uint32_t i = 0; i < SERVE_SHAPES; ++i) {
    serve_shape_t *sh = &m->shapes[i];
    if (sh->key != NULL && sh->hash == hash && sh->key_len == m->key_len &&
        memcmp(sh->key, m->key, 4ull * m->key_len) == 0) {
      return sh;
    }
  }
  return NULL;
}

// The least recently used shape: among those with a buffer when |recorded|,
// else an empty slot first, then a shape without a buffer, then any.
static serve_shape_t *shape_victim(serve_model_t *m, bool recorded) {
  serve_shape_t *best = NULL;
  int best_rank = 3;
  for (uint32_t i = 0; i < SERVE_SHAPES; ++i) {
    serve_shape_t *sh = &m->shapes[i];
    int rank = recorded ? (sh->cb != NULL ? 0 : 3)
                        : sh->key == NULL ? 0 : sh->cb == NULL ? 1 : 2;
    if (rank < best_rank ||
        (rank == best_rank && rank < 3 && best != NULL &&
         sh->last_use < best->last_use)) {
      best = sh;
      best_rank = rank;
    }
  }
  return best;
}

// Remembers the step's shape as seen (not recorded).
static accel_status_t shape_insert(serve_model_t *m, uint64_t hash) {
  serve_shape_t *sh = shape_victim(m, false);
  uint32_t *key = malloc(4ull * m->key_len);
  if (key == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "serve: cannot remember a step shape");
  }
  if (sh->cb != NULL) {
    m->counters.command_buffers--;
  }
  shape_clear(sh);
  memcpy(key, m->key, 4ull * m->key_len);
  *sh = (serve_shape_t){.key = key, .key_len = m->key_len, .hash = hash,
                        .last_use = ++m->clock};
  return ACCEL_OK;
}

// Records the staged step into a new command buffer for |sh|, evicting the
// least recently used buffer when SERVE_CB_CAP are cached; leaves the
// gathers' bindings in m->binds.
static accel_status_t shape_record(serve_model_t *m, serve_shape_t *sh,
                                   const accel_sched_plan_t *plan,
                                   uint32_t rows, uint32_t nd,
                                   uint32_t samples) {
  if (m->counters.command_buffers == SERVE_CB_CAP) {
    serve_shape_t *old = shape_victim(m, true);
    accel_command_buffer_release(old->cb);
    old->cb = NULL;
    m->counters.command_buffers--;
  }
  accel_command_buffer_desc_t d = {.struct_size = sizeof(d),
                                   .name = "serve-step"};
  accel_command_buffer_t *cb = NULL;
  ACCEL_RETURN_IF_ERROR(accel_command_buffer_create(m->dev, &d, &cb));
  m->rec = cb;
  m->bind_count = 0;
  accel_status_t st = forward(m, plan, rows, nd, samples);
  m->rec = NULL;
  if (st == ACCEL_OK) {
    st = accel_command_buffer_finalize(cb);
  }
  if (st != ACCEL_OK) {
    accel_command_buffer_release(cb);
    return accel_error_context(st, "serve: recording a step of %u rows",
                               rows);
  }
  sh->cb = cb;
  m->counters.command_buffers++;
  return ACCEL_OK;
}

// Issues the staged step's model: replays its shape's buffer, records one
// on the shape's second sight, or submits launch by launch.
static accel_status_t issue(serve_model_t *m, const accel_sched_plan_t *plan,
                            uint32_t rows, uint32_t nd, uint32_t samples) {
  serve_shape_t *sh = NULL;
  if (m->replay) {
    shape_key(m, plan, rows, nd, samples);
    uint64_t hash = key_hash(m->key, m->key_len);
    sh = shape_find(m, hash);
    if (sh == NULL) {
      ACCEL_RETURN_IF_ERROR(shape_insert(m, hash));
    }
  }
  if (sh == NULL) {
    m->counters.steps_direct++;
    return forward(m, plan, rows, nd, samples);
  }
  sh->last_use = ++m->clock;
  if (sh->cb == NULL) {
    accel_status_t st = shape_record(m, sh, plan, rows, nd, samples);
    if (st == ACCEL_ERROR_UNSUPPORTED) {
      // The device's command buffers cannot hold these launches (a backend
      // without recorded kernels): launch by launch from now on.
      m->replay = false;
      m->counters.steps_direct++;
      return forward(m, plan, rows, nd, samples);
    }
    ACCEL_RETURN_IF_ERROR(st);
    m->counters.steps_recorded++;
  } else {
    ACCEL_RETURN_IF_ERROR(gather_bindings(m, plan, nd));
    m->counters.steps_replayed++;
  }
  accel_command_buffer_execute_desc_t ed = {.struct_size = sizeof(ed),
                                            .binding_count = m->bind_count,
                                            .bindings = m->binds};
  return accel_stream_execute(m->s, sh->cb, m->bind_count ? &ed : NULL);
}

// The stepping thread's CPU time: what issuing costs the host, not the
// time the thread waits for a core (the device's worker threads share the
// CPUs on the host device).
static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

accel_status_t serve_model_run(serve_model_t *m, const accel_sched_plan_t *plan,
                               float *logits) {
  const serve_model_config_t *c = &m->c;
  // Swap-outs first: a block they free may be a swap-in's or copy's target.
  ACCEL_RETURN_IF_ERROR(copy_blocks(m, plan->swap_out, plan->swap_out_count,
                                    false, true));
  ACCEL_RETURN_IF_ERROR(copy_blocks(m, plan->swap_in, plan->swap_in_count,
                                    true, false));
  ACCEL_RETURN_IF_ERROR(copy_blocks(m, plan->copy, plan->copy_count, false,
                                    false));
  uint32_t rows = plan->tokens, nd = 0, samples = 0;
  if (plan->entry_count == 0) {
    return accel_stream_synchronize(m->s, ACCEL_TIMEOUT_INFINITE);
  }
  uint64_t t0 = now_ns();
  stage(m, plan, &nd, &samples);
  // The previous step was waited for, so the inputs are free to rewrite.
  if (!m->direct) {
    ACCEL_RETURN_IF_ERROR(upload(m, rows, samples, nd));
  }
  ACCEL_RETURN_IF_ERROR(issue(m, plan, rows, nd, samples));
  if (samples > 0 && !m->direct) {
    ACCEL_RETURN_IF_ERROR(accel_stream_copy_to_host(
        m->s, logits, m->logits, 0, 4ull * samples * c->vocab));
  }
  m->counters.issue_ns += now_ns() - t0;
  ACCEL_RETURN_IF_ERROR(accel_stream_synchronize(m->s, ACCEL_TIMEOUT_INFINITE));
  if (m->direct && samples > 0) {
    memcpy(logits, m->logits_host, 4ull * samples * c->vocab);
  }
  return ACCEL_OK;
}

accel_status_t serve_model_recover(serve_model_t *m, accel_status_t failure) {
  accel_device_health_t h = {.struct_size = sizeof(h)};
  if (failure == ACCEL_ERROR_DEVICE_LOST ||
      (accel_device_health(m->dev, &h) == ACCEL_OK &&
       h.state == ACCEL_DEVICE_STATE_LOST)) {
    return accel_error(ACCEL_ERROR_DEVICE_LOST,
                       "serve: the device is lost; the engine stops");
  }
  // The old stream's commands after the failure were skipped; destroying
  // it waits for what still runs, so nothing of the failed step writes the
  // activations once the next step starts. The recorded buffers name no
  // stream and stay valid.
  accel_stream_destroy(m->s);
  m->s = NULL;
  accel_stream_desc_t sd = {.struct_size = sizeof(sd), .name = "serve"};
  accel_status_t st = accel_stream_create(m->dev, &sd, &m->s);
  if (st != ACCEL_OK) {
    return accel_error_context(st, "serve: replacing the failed stream");
  }
  return ACCEL_OK;
}

void serve_model_counters(const serve_model_t *m,
                          serve_model_counters_t *out) {
  *out = m->counters;
}
