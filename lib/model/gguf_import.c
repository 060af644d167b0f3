// GGUF model -> decoder .axe (gguf_import.h; docs/gguf.md "Importing a
// model"). The reader has already checked every offset, count and size of
// the file; this file checks what the decoder needs of it (architecture,
// metadata, each tensor's presence, type and shape) and hands the tensors'
// bytes to the executable writer as they are.
#include "accel/gguf_import.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/gguf_import_impl.h"

// Tokens per KV-cache block of an imported model (the decoder's
// block_size): the serving engine's default granularity.
#define IMPORT_BLOCK_TOKENS 16u

typedef struct import {
  const accel_gguf_t *g;
  const gguf_import_sink_t *sink;
  char arch[32];
  const struct arch_info *info;
  uint32_t layers, dim, heads, kv_heads, head_dim, ffn, vocab;
  double rope_base, norm_eps;
  bool tied;  // no output.weight: the head reads the embedding
} import_t;

// The .axe name of each per-layer tensor and its GGUF name.
enum { P_ATTN_NORM, P_Q, P_K, P_V, P_O, P_MLP_NORM, P_GATE, P_UP, P_DOWN,
       P_COUNT };
static const char *const k_axe_parts[P_COUNT] = {
    "attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up",
    "w_down"};
static const char *const k_gguf_parts[P_COUNT] = {
    "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
    "ffn_gate", "ffn_up", "ffn_down"};

static accel_status_t meta_u32(const import_t *im, const char *suffix,
                               bool required, uint32_t fallback,
                               uint32_t *out) {
  char key[96];
  snprintf(key, sizeof(key), "%s.%s", im->arch, suffix);
  uint64_t v = 0;
  accel_status_t st = accel_gguf_find_u64(im->g, key, &v);
  if (st == ACCEL_ERROR_NOT_FOUND && !required) {
    *out = fallback;
    return ACCEL_OK;
  }
  if (st == ACCEL_ERROR_NOT_FOUND) {
    return accel_error(ACCEL_ERROR_FORMAT, "gguf import: no metadata \"%s\"",
                       key);
  }
  ACCEL_RETURN_IF_ERROR(st);
  if (v == 0 || v > (1u << 24)) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "gguf import: metadata \"%s\" is %llu, not in "
                       "1..16777216",
                       key, (unsigned long long)v);
  }
  *out = (uint32_t)v;
  return ACCEL_OK;
}

static accel_status_t meta_f64(const import_t *im, const char *suffix,
                               double fallback, double *out) {
  char key[96];
  snprintf(key, sizeof(key), "%s.%s", im->arch, suffix);
  double v = 0;
  accel_status_t st = accel_gguf_find_f64(im->g, key, &v);
  if (st == ACCEL_ERROR_NOT_FOUND) {
    *out = fallback;
    return ACCEL_OK;
  }
  ACCEL_RETURN_IF_ERROR(st);
  if (!(v > 0) || !isfinite(v)) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "gguf import: metadata \"%s\" is %g, not a positive "
                       "finite number",
                       key, v);
  }
  *out = v;
  return ACCEL_OK;
}

// The architectures the decoder runs: llama GGUF files hold Q and K
// permuted for rotation of adjacent pairs (llama.cpp's LLAMA_ROPE_TYPE_NORM);
// qwen2's are not permuted (LLAMA_ROPE_TYPE_NEOX, pairs (p, p + d / 2)) and
// add biases to Q, K and V.
typedef struct arch_info {
  const char *name;
  const char *rope_mode;  // decoder.rope_mode
  bool qkv_bias;
} arch_info_t;
static const arch_info_t k_archs[] = {
    {"llama", "interleaved", false},
    {"qwen2", "half", true},
};

static accel_status_t read_arch(import_t *im) {
  accel_gguf_string_t a;
  accel_status_t st = accel_gguf_find_string(im->g, "general.architecture", &a);
  if (st == ACCEL_ERROR_NOT_FOUND) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "gguf import: no metadata \"general.architecture\"");
  }
  ACCEL_RETURN_IF_ERROR(st);
  for (size_t i = 0; i < sizeof(k_archs) / sizeof(k_archs[0]); ++i) {
    if (a.size == strlen(k_archs[i].name) &&
        memcmp(a.data, k_archs[i].name, a.size) == 0) {
      im->info = &k_archs[i];
    }
  }
  if (im->info == NULL) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "gguf import: architecture \"%.*s\" is not supported "
                       "(llama, qwen2)",
                       (int)(a.size > 64 ? 64 : a.size), a.data);
  }
  snprintf(im->arch, sizeof(im->arch), "%.*s", (int)a.size, a.data);
  return ACCEL_OK;
}

static accel_status_t read_config(import_t *im) {
  ACCEL_RETURN_IF_ERROR(read_arch(im));
  ACCEL_RETURN_IF_ERROR(meta_u32(im, "block_count", true, 0, &im->layers));
  ACCEL_RETURN_IF_ERROR(meta_u32(im, "embedding_length", true, 0, &im->dim));
  ACCEL_RETURN_IF_ERROR(meta_u32(im, "feed_forward_length", true, 0, &im->ffn));
  ACCEL_RETURN_IF_ERROR(
      meta_u32(im, "attention.head_count", true, 0, &im->heads));
  ACCEL_RETURN_IF_ERROR(meta_u32(im, "attention.head_count_kv", false,
                                 im->heads, &im->kv_heads));
  ACCEL_RETURN_IF_ERROR(meta_f64(im, "rope.freq_base", 10000.0, &im->rope_base));
  ACCEL_RETURN_IF_ERROR(meta_f64(im, "attention.layer_norm_rms_epsilon", 1e-5,
                                 &im->norm_eps));
  if (im->dim % im->heads != 0 || im->heads % im->kv_heads != 0) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "gguf import: embedding_length %u, head_count %u, "
                       "head_count_kv %u: the width must be a multiple of the "
                       "heads and the heads of the KV heads",
                       im->dim, im->heads, im->kv_heads);
  }
  im->head_dim = im->dim / im->heads;
  uint32_t rot = 0;
  ACCEL_RETURN_IF_ERROR(
      meta_u32(im, "rope.dimension_count", false, im->head_dim, &rot));
  if (rot != im->head_dim) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "gguf import: rope.dimension_count %u is not the head "
                       "size %u (a partial rope)",
                       rot, im->head_dim);
  }
  char key[96];
  snprintf(key, sizeof(key), "%s.rope.scaling.type", im->arch);
  accel_gguf_string_t s;
  if (accel_gguf_find_string(im->g, key, &s) == ACCEL_OK &&
      !(s.size == 4 && memcmp(s.data, "none", 4) == 0)) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "gguf import: rope scaling \"%.*s\" is not supported",
                       (int)(s.size > 32 ? 32 : s.size), s.data);
  }
  return ACCEL_OK;
}

// The block types the decoder's kernels read in place, by their .axe name
// (decoder.type.<weight>); NULL for the others.
static const char *block_type_name(uint32_t type) {
  switch (type) {
    case ACCEL_GGUF_TYPE_Q8_0: return "q8_0";
    case ACCEL_GGUF_TYPE_Q4_0: return "q4_0";
    case ACCEL_GGUF_TYPE_Q4_1: return "q4_1";
    case ACCEL_GGUF_TYPE_Q5_0: return "q5_0";
    case ACCEL_GGUF_TYPE_Q5_1: return "q5_1";
    case ACCEL_GGUF_TYPE_Q4_K: return "q4_k";
    case ACCEL_GGUF_TYPE_Q5_K: return "q5_k";
    case ACCEL_GGUF_TYPE_Q6_K: return "q6_k";
    default: return NULL;
  }
}

#define IMPORT_TYPES \
  "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K"

static accel_dtype_t float_dtype(uint32_t type) {
  switch (type) {
    case ACCEL_GGUF_TYPE_F32:
      return ACCEL_DTYPE_F32;
    case ACCEL_GGUF_TYPE_F16:
      return ACCEL_DTYPE_F16;
    case ACCEL_GGUF_TYPE_BF16:
      return ACCEL_DTYPE_BF16;
    default:
      return ACCEL_DTYPE_INVALID;
  }
}

// Finds tensor |name| and checks its shape: [rows, cols] in the decoder's
// order (GGUF dims [cols, rows]); cols 0 for a vector of |rows|.
static accel_status_t lookup(const import_t *im, const char *name,
                             accel_gguf_tensor_t *t) {
  accel_status_t st = accel_gguf_find_tensor(im->g, name, t);
  if (st == ACCEL_ERROR_NOT_FOUND) {
    return accel_error(ACCEL_ERROR_FORMAT, "gguf import: no tensor \"%s\"",
                       name);
  }
  return st;
}

static accel_status_t find(const import_t *im, const char *name, uint64_t rows,
                           uint64_t cols, accel_gguf_tensor_t *t) {
  ACCEL_RETURN_IF_ERROR(lookup(im, name, t));
  uint32_t want_dims = cols ? 2 : 1;
  bool ok = t->n_dims == want_dims &&
            (cols ? t->dims[0] == cols && t->dims[1] == rows
                  : t->dims[0] == rows);
  if (!ok) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "gguf import: tensor \"%s\" has %u dims [%llu, %llu], "
                       "expected [%llu, %llu] (GGUF order)",
                       name, t->n_dims, (unsigned long long)t->dims[0],
                       (unsigned long long)(t->n_dims > 1 ? t->dims[1] : 0),
                       (unsigned long long)(cols ? cols : rows),
                       (unsigned long long)(cols ? rows : 0));
  }
  return ACCEL_OK;
}

static accel_status_t add(const import_t *im, const char *name,
                          accel_dtype_t dtype, uint64_t rows, uint64_t cols,
                          const void *data, uint64_t size) {
  accel_weight_info_t w = {.struct_size = sizeof(w),
                           .dtype = dtype,
                           .name = name,
                           .rank = cols ? 2 : 1,
                           .host_data = data,
                           .size_bytes = size};
  w.shape[0] = rows;
  w.shape[1] = cols;
  return im->sink->weight(im->sink->ctx, &w);
}

static accel_status_t unsupported_type(const char *name, uint32_t type,
                                       const char *allowed) {
  return accel_error(ACCEL_ERROR_UNSUPPORTED,
                     "gguf import: tensor \"%s\" has type %s, not supported "
                     "here (%s)",
                     name, accel_gguf_type_name(type), allowed);
}

// A norm's gain or a bias: f32 [rows].
static accel_status_t add_vector(const import_t *im, const char *gguf_name,
                                 const char *axe_name, uint32_t rows) {
  accel_gguf_tensor_t t;
  ACCEL_RETURN_IF_ERROR(find(im, gguf_name, rows, 0, &t));
  if (t.type != ACCEL_GGUF_TYPE_F32) {
    return unsupported_type(gguf_name, t.type, "F32");
  }
  return add(im, axe_name, ACCEL_DTYPE_F32, rows, 0, t.data, t.size_bytes);
}

// A projection [rows, cols] in its GGUF form: a float dtype, or U8 blocks
// [rows, row bytes] with "decoder.type.<name>" naming the block type.
static accel_status_t add_projection(const import_t *im,
                                     const accel_gguf_tensor_t *t,
                                     const char *gguf_name,
                                     const char *axe_name, uint64_t rows,
                                     uint64_t cols) {
  accel_dtype_t dtype = float_dtype(t->type);
  if (dtype != ACCEL_DTYPE_INVALID) {
    return add(im, axe_name, dtype, rows, cols, t->data, t->size_bytes);
  }
  const char *block = block_type_name(t->type);
  if (block == NULL) {
    return unsupported_type(gguf_name, t->type, IMPORT_TYPES);
  }
  char key[128];
  snprintf(key, sizeof(key), "decoder.type.%s", axe_name);
  ACCEL_RETURN_IF_ERROR(im->sink->metadata(im->sink->ctx, key, block));
  // The reader checked that rows * cols elements fill whole blocks of
  // size_bytes; one row is a whole number of blocks since cols is.
  return add(im, axe_name, ACCEL_DTYPE_U8, rows, t->size_bytes / rows, t->data,
             t->size_bytes);
}

static accel_status_t add_embedding(import_t *im) {
  accel_gguf_tensor_t t;
  ACCEL_RETURN_IF_ERROR(lookup(im, "token_embd.weight", &t));
  if (t.n_dims != 2 || t.dims[1] == 0 || t.dims[1] > (1u << 24)) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "gguf import: tensor \"token_embd.weight\" has %u dims, "
                       "expected [%u, vocabulary of 1..16777216]",
                       t.n_dims, im->dim);
  }
  im->vocab = (uint32_t)t.dims[1];
  ACCEL_RETURN_IF_ERROR(find(im, "token_embd.weight", im->vocab, im->dim, &t));
  // The embedding in its GGUF form too: the engine reads block rows with
  // embedding_gguf.
  ACCEL_RETURN_IF_ERROR(add_projection(im, &t, "token_embd.weight", "embed",
                                       im->vocab, im->dim));
  // The head: output.weight, or (tied) the embedding's own weight.
  accel_gguf_tensor_t head;
  accel_status_t st = accel_gguf_find_tensor(im->g, "output.weight", &head);
  if (st == ACCEL_ERROR_NOT_FOUND) {
    im->tied = true;
    return ACCEL_OK;
  }
  ACCEL_RETURN_IF_ERROR(st);
  ACCEL_RETURN_IF_ERROR(find(im, "output.weight", im->vocab, im->dim, &head));
  return add_projection(im, &head, "output.weight", "lm_head", im->vocab,
                        im->dim);
}

static accel_status_t add_layer(const import_t *im, uint32_t l) {
  uint32_t qd = im->heads * im->head_dim, kvd = im->kv_heads * im->head_dim;
  const uint32_t rows[P_COUNT] = {im->dim, qd, kvd, kvd, im->dim, im->dim,
                                  im->ffn, im->ffn, im->dim};
  const uint32_t cols[P_COUNT] = {0, im->dim, im->dim, im->dim, qd, 0,
                                  im->dim, im->dim, im->ffn};
  for (int p = 0; p < P_COUNT; ++p) {
    char gn[96], an[96];
    snprintf(gn, sizeof(gn), "blk.%u.%s.weight", l, k_gguf_parts[p]);
    snprintf(an, sizeof(an), "l%u.%s", l, k_axe_parts[p]);
    if (cols[p] == 0) {
      ACCEL_RETURN_IF_ERROR(add_vector(im, gn, an, im->dim));
      continue;
    }
    accel_gguf_tensor_t t;
    ACCEL_RETURN_IF_ERROR(find(im, gn, rows[p], cols[p], &t));
    ACCEL_RETURN_IF_ERROR(add_projection(im, &t, gn, an, rows[p], cols[p]));
    if (im->info->qkv_bias && (p == P_Q || p == P_K || p == P_V)) {
      snprintf(gn, sizeof(gn), "blk.%u.%s.bias", l, k_gguf_parts[p]);
      snprintf(an, sizeof(an), "l%u.%s.bias", l, k_axe_parts[p]);
      ACCEL_RETURN_IF_ERROR(add_vector(im, gn, an, rows[p]));
    }
  }
  return ACCEL_OK;
}

// Every tensor of the file must be one the decoder reads: anything else
// (rope frequency factors, biases, another model's parts) would be ignored
// silently and give other logits than the model's.
static accel_status_t check_known_tensors(const import_t *im) {
  uint64_t n = accel_gguf_tensor_count(im->g);
  uint64_t want =
      3 + (uint64_t)im->layers * (P_COUNT + (im->info->qkv_bias ? 3 : 0));
  accel_gguf_tensor_t t;
  if (im->tied) --want;
  if (n == want) {
    return ACCEL_OK;
  }
  // Name the first tensor that is not the decoder's.
  for (uint64_t i = 0; i < n; ++i) {
    ACCEL_RETURN_IF_ERROR(accel_gguf_tensor(im->g, i, &t));
    char name[ACCEL_GGUF_MAX_NAME + 1];
    snprintf(name, sizeof(name), "%.*s", (int)t.name.size, t.name.data);
    unsigned l = 0;
    char part[32] = {0}, kind[8] = {0};
    int used = 0;
    bool known = strcmp(name, "token_embd.weight") == 0 ||
                 strcmp(name, "output_norm.weight") == 0 ||
                 strcmp(name, "output.weight") == 0;
    if (!known &&
        sscanf(name, "blk.%u.%31[a-z_].%7[a-z]%n", &l, part, kind, &used) ==
            3 &&
        name[used] == '\0' && l < im->layers) {
      bool bias = strcmp(kind, "bias") == 0;
      for (int p = 0; p < P_COUNT; ++p) {
        bool qkv = p == P_Q || p == P_K || p == P_V;
        known |= strcmp(part, k_gguf_parts[p]) == 0 &&
                 (strcmp(kind, "weight") == 0 ||
                  (bias && qkv && im->info->qkv_bias));
      }
    }
    if (!known) {
      return accel_error(ACCEL_ERROR_UNSUPPORTED,
                         "gguf import: tensor \"%s\" is not part of a %s "
                         "decoder this runtime runs",
                         name, im->arch);
    }
  }
  return accel_error(ACCEL_ERROR_FORMAT,
                     "gguf import: %llu tensors, a %u-layer %s decoder has %llu",
                     (unsigned long long)n, im->layers, im->arch,
                     (unsigned long long)want);
}

static accel_status_t add_metadata(const import_t *im) {
  const struct {
    const char *key;
    uint32_t value;
  } counts[] = {{"layers", im->layers}, {"dim", im->dim},
                {"heads", im->heads}, {"kv_heads", im->kv_heads},
                {"head_dim", im->head_dim}, {"ffn", im->ffn},
                {"vocab", im->vocab}, {"block_size", IMPORT_BLOCK_TOKENS}};
  char key[64], value[64];
  ACCEL_RETURN_IF_ERROR(im->sink->metadata(im->sink->ctx, "model",
                                                       "decoder"));
  ACCEL_RETURN_IF_ERROR(
      im->sink->metadata(im->sink->ctx, "decoder.version", "2"));
  ACCEL_RETURN_IF_ERROR(
      im->sink->metadata(im->sink->ctx, "decoder.source", "gguf"));
  ACCEL_RETURN_IF_ERROR(
      im->sink->metadata(im->sink->ctx, "decoder.architecture", im->arch));
  if (im->tied) {
    ACCEL_RETURN_IF_ERROR(
        im->sink->metadata(im->sink->ctx, "decoder.tied_head", "1"));
  }
  for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); ++i) {
    snprintf(key, sizeof(key), "decoder.%s", counts[i].key);
    snprintf(value, sizeof(value), "%u", counts[i].value);
    ACCEL_RETURN_IF_ERROR(im->sink->metadata(im->sink->ctx, key, value));
  }
  // %.9g round-trips a float; the decoder computes in f32.
  snprintf(value, sizeof(value), "%.9g", (double)(float)im->rope_base);
  ACCEL_RETURN_IF_ERROR(
      im->sink->metadata(im->sink->ctx, "decoder.rope_base", value));
  snprintf(value, sizeof(value), "%.9g", (double)(float)im->norm_eps);
  ACCEL_RETURN_IF_ERROR(
      im->sink->metadata(im->sink->ctx, "decoder.norm_eps", value));
  return im->sink->metadata(im->sink->ctx, "decoder.rope_mode",
                                        im->info->rope_mode);
}

static accel_status_t build(import_t *im) {
  ACCEL_RETURN_IF_ERROR(read_config(im));
  ACCEL_RETURN_IF_ERROR(add_embedding(im));
  ACCEL_RETURN_IF_ERROR(
      add_vector(im, "output_norm.weight", "final_norm", im->dim));
  for (uint32_t l = 0; l < im->layers; ++l) {
    ACCEL_RETURN_IF_ERROR(add_layer(im, l));
  }
  ACCEL_RETURN_IF_ERROR(check_known_tensors(im));
  return add_metadata(im);
}

accel_status_t accel_gguf_import_build(const accel_gguf_t *gguf,
                                       const gguf_import_sink_t *sink) {
  import_t im = {.g = gguf, .sink = sink};
  return build(&im);
}

// The .axe writer as a sink: every weight mappable, in the image.
static accel_status_t builder_metadata(void *ctx, const char *key,
                                       const char *value) {
  return accel_exe_builder_add_metadata(ctx, key, value);
}

static accel_status_t builder_weight(void *ctx,
                                     const accel_weight_info_t *info) {
  accel_exe_weight_desc_t w = {.struct_size = sizeof(w), .mappable = 1,
                               .info = *info};
  return accel_exe_builder_add_weight(ctx, &w);
}

static accel_status_t import_run(const accel_gguf_t *gguf, const char *path,
                                 accel_exe_progress_fn_t progress,
                                 void *user_data, void **out_data,
                                 uint64_t *out_size) {
  accel_exe_builder_t *b = NULL;
  accel_status_t st = accel_exe_builder_create(&b);
  if (st != ACCEL_OK) {
    return st;
  }
  gguf_import_sink_t sink = {.metadata = builder_metadata,
                             .weight = builder_weight,
                             .ctx = b};
  st = accel_gguf_import_build(gguf, &sink);
  if (st == ACCEL_OK) {
    st = path != NULL
             ? accel_exe_builder_write_file(b, path, progress, user_data)
             : accel_exe_builder_write_memory(b, out_data, out_size);
  }
  accel_exe_builder_destroy(b);
  return st;
}
accel_status_t accel_gguf_import_file(const accel_gguf_t *gguf,
                                      const char *path,
                                      accel_exe_progress_fn_t progress,
                                      void *user_data) {
  ACCEL_CHECK_ARG(gguf != NULL, "gguf (NULL)");
  ACCEL_CHECK_ARG(path != NULL, "path (NULL)");
  return import_run(gguf, path, progress, user_data, NULL, NULL);
}

accel_status_t accel_gguf_import_memory(const accel_gguf_t *gguf,
                                        void **out_data, uint64_t *out_size) {
  ACCEL_CHECK_ARG(gguf != NULL, "gguf (NULL)");
  ACCEL_CHECK_ARG(out_data != NULL, "out_data (NULL)");
  ACCEL_CHECK_ARG(out_size != NULL, "out_size (NULL)");
  return import_run(gguf, NULL, NULL, NULL, out_data, out_size);
}
