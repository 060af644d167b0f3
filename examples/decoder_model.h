// The model of examples/decoder.c as its files describe it: the
// configuration (stored as .axe metadata "decoder.NAME"), the weight names,
// and the logits file (--logits) that tests/examples/decoder_test.c checks.
// The file format is specified in docs/serving.md ("The model format"): the
// serving engine (include/accel/serve.h, accel-serve) reads what
// decoder_pack writes, and tests/serve/engine_test.c checks that its logits
// equal this example's bit for bit.
//
// A Llama-shaped decoder-only transformer: token embedding (f32 [vocab,
// dim]); per layer: x += Wo attn(rope(Wq n), rope(Wk n), Wv n) with n =
// rmsnorm(x) * attn_norm, grouped-query causal attention (heads query heads
// over kv_heads KV heads of head_dim), rotary embedding in the half-split
// (GPT-NeoX / Llama) convention; then x += Wdown (silu(Wgate m) * (Wup m))
// with m = rmsnorm(x) * mlp_norm; finally logits = Wlm (rmsnorm(x) *
// final_norm). Every projection (Wq, Wk, Wv, Wo, Wgate, Wup, Wdown, Wlm) is
// int8 per output channel: W[j, i] = q[j, i] * scale[j], stored [out, in]
// (weight "NAME", i8, and "NAME.scale", f32 [out]).
#ifndef ACCEL_EXAMPLES_DECODER_MODEL_H_
#define ACCEL_EXAMPLES_DECODER_MODEL_H_

#include <stdint.h>
#include <stdio.h>

#define DECODER_ROPE_BASE 10000.0f
#define DECODER_NORM_EPS 1e-5f

// X(field, default): the configuration, each a uint32 stored as metadata
// "decoder.<field>" in decimal.
#define DECODER_CONFIG_FIELDS(X) \
  X(layers, 4)                   \
  X(dim, 1024)                   \
  X(heads, 16)                   \
  X(kv_heads, 4)                 \
  X(head_dim, 64)                \
  X(ffn, 2816)                   \
  X(vocab, 8192)                 \
  X(block_size, 16)              \
  X(seed, 1)

typedef struct decoder_config {
#define DECODER_FIELD(name, def) uint32_t name;
  DECODER_CONFIG_FIELDS(DECODER_FIELD)
#undef DECODER_FIELD
} decoder_config_t;

// Per-layer weights, in the order they are packed.
#define DECODER_LAYER_WEIGHTS(X) \
  X(attn_norm) X(wq) X(wk) X(wv) X(wo) X(mlp_norm) X(w_gate) X(w_up) X(w_down)

// Writes the name of layer |layer|'s weight |part| ("l3.wq") into |out|.
static inline void decoder_weight_name(char *out, size_t size, uint32_t layer,
                                       const char *part) {
  snprintf(out, size, "l%u.%s", layer, part);
}

// The logits file: this header, then the prompt (int32 [prompt]), the
// generated tokens (int32 [steps]), and the logits each generated token was
// chosen from (f32 [steps, vocab]; row 0 from the prefill's last position).
#define DECODER_LOGITS_MAGIC 0x54474c44u  // "DLGT"
typedef struct decoder_logits_header {
  uint32_t magic;
  uint32_t vocab;
  uint32_t prompt;
  uint32_t steps;
} decoder_logits_header_t;

#endif  // ACCEL_EXAMPLES_DECODER_MODEL_H_
