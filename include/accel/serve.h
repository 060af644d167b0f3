// The serving engine (docs/serving.md, "The engine"): the model runner of the
// serving stack. It loads a decoder model .axe (the format of docs/serving.md,
// "The model format") and the reference kernels (reference.axe), keeps the KV
// cache as one device buffer per layer for K and one for V, [blocks,
// block_tokens, kv_heads, head_dim] f32, from a paged pool sized by a memory
// budget, and runs the scheduler's plans (include/accel/scheduler.h): the
// plan's copies on the engine's stream, every decoding sequence in one batch
// (one GEMM per projection over all of the step's tokens,
// attention_paged_decode over the batch), prefill chunks with
// paged_kv_append and causal attention over their paged context, then
// sampling per request (accel_sample, seeded per request).
//
// Requests stream their tokens two ways: a callback called on the stepping
// thread for every token, and a pull iterator (accel_serve_next) that any
// thread may block on. A request lives until accel_serve_release, which also
// cancels it at any point: its KV blocks return to the cache at the next
// step.
//
// Thread-safety: accel_serve_submit, accel_serve_release, accel_serve_next,
// accel_serve_stats and accel_serve_model_info are thread-safe;
// accel_serve_step must be called by one thread at a time (the serving
// loop). Callbacks run on the stepping thread without the engine's lock
// held.
#ifndef ACCEL_SERVE_H_
#define ACCEL_SERVE_H_

#include <stdint.h>

#include "accel/base.h"
#include "accel/device.h"
#include "accel/sampling.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_serve_engine accel_serve_engine_t;

enum accel_serve_flag_bits {
  // Share computed full KV blocks between requests with the same prefix.
  ACCEL_SERVE_PREFIX_CACHING = 1u << 0,
  // Split prompts longer than the step budget over several steps.
  ACCEL_SERVE_CHUNKED_PREFILL = 1u << 1,
  // Preempt by swapping KV blocks to pinned host memory (needs
  // swap_bytes); without it preempted requests recompute.
  ACCEL_SERVE_PREEMPT_SWAP = 1u << 2,
  // Submit every step launch by launch. Without it the engine records one
  // command buffer per step shape seen twice and replays it
  // (docs/serving.md, "Step command buffers"); the tokens and logits are
  // the same either way. ACCEL_SERVE_COMMAND_BUFFERS=0 sets it for every
  // engine.
  ACCEL_SERVE_DIRECT_LAUNCH = 1u << 3,
  // Keep the activations of GGUF block-quantized projections in f32 (the
  // exact order of kernels/README.md). Without it, each projection whose
  // kernel declares ACCEL_KP_FEATURE_I16_ACTIVATIONS (accel_kernel_info; the
  // host Q8_0 and Q4_0 kernels) has its input rows quantized to 16 bits, and
  // one that declares ACCEL_KP_FEATURE_Q8_ACTIVATIONS only (the host
  // K-quant and other block kernels) to 8 bits, as llama.cpp does, and
  // multiplied in integers: several times faster; logits within about 1% of
  // their spread of a float64 evaluation with 8 bits, about 1e-4 with 16,
  // instead of 1e-5.
  ACCEL_SERVE_F32_ACTIVATIONS = 1u << 4,
};

typedef struct accel_serve_engine_desc {
  uint32_t struct_size;      // sizeof(accel_serve_engine_desc_t)
  uint32_t flags;            // accel_serve_flag_bits
  const char *model_path;    // the decoder model: an .axe, or a GGUF file
                             // (run mapped in place, docs/gguf.md);
                             // borrowed for the call
  const char *kernels_path;  // reference.axe (borrowed for the call)
  uint64_t kv_bytes;         // device KV-cache budget; 0: 64 MiB
  uint64_t swap_bytes;       // pinned host swap space; 0: none
  uint32_t max_step_tokens;  // tokens of one step; 0: 256
  uint32_t max_step_seqs;    // sequences of one step; 0: 64
  uint32_t max_context;      // prompt + generated tokens of one request;
                             // 0: 2048
  uint32_t reserved0;        // 0
} accel_serve_engine_desc_t;

// The model and the cache as the engine built them.
typedef struct accel_serve_model_info {
  uint32_t struct_size;   // set by the caller
  uint32_t layers, dim, heads, kv_heads, head_dim, ffn, vocab;
  uint32_t block_tokens;  // tokens per KV block
  uint32_t device_blocks;  // KV blocks in device memory
  uint32_t host_blocks;    // KV blocks of host swap space
  uint32_t max_context;    // as created (0 resolved)
  uint32_t max_step_tokens;
  uint64_t block_bytes;    // bytes of one block: every layer's K and V
} accel_serve_model_info_t;

// Why a request's stream ended.
typedef enum accel_serve_end {
  ACCEL_SERVE_END_NONE = 0,    // not ended
  ACCEL_SERVE_END_LENGTH = 1,  // max_new_tokens generated
  ACCEL_SERVE_END_EOS = 2,     // the EOS token was generated (and delivered)
  ACCEL_SERVE_END_ERROR = 3,   // a step failed (the engine's error), or
                               // the scheduler refused the request
} accel_serve_end_t;

// One generated token, as a callback sees it.
typedef struct accel_serve_token {
  uint64_t id;           // the request
  int32_t token;         // the token
  uint32_t index;        // 0 for the request's first generated token
  uint32_t end;          // accel_serve_end_t: non-zero on the last token
  uint32_t vocab;        // length of logits
  const float *logits;   // the logits it was sampled from (borrowed for the
                         // call)
} accel_serve_token_t;

// Called on the stepping thread for every generated token of a request.
// Must not call accel_serve_step; may call the thread-safe functions.
typedef void (*accel_serve_token_fn)(void *user,
                                     const accel_serve_token_t *token);

typedef struct accel_serve_request_desc {
  uint32_t struct_size;     // sizeof(accel_serve_request_desc_t)
  int32_t priority;         // higher runs first; equal: arrival order
  const int32_t *prompt;    // token ids, copied
  uint32_t prompt_tokens;   // at least 1
  uint32_t max_new_tokens;  // at least 1
  int32_t eos_token;        // generation stops after it; -1: none
  uint32_t reserved0;       // 0
  accel_sampling_params_t sampling;  // temperature 0: greedy
  accel_serve_token_fn on_token;     // NULL: none (use accel_serve_next)
  void *user;                        // passed to on_token
} accel_serve_request_desc_t;

typedef struct accel_serve_stats {
  uint32_t struct_size;  // set by the caller
  uint32_t waiting;      // requests not yet admitted (submitted included)
  uint32_t running;
  uint32_t swapped;
  uint32_t requests;     // live request records (not yet released)
  uint32_t kv_used_blocks;
  uint32_t kv_cached_blocks;
  uint32_t kv_free_blocks;
  uint64_t kv_token_slots;  // block_tokens x used blocks
  uint64_t kv_tokens;       // tokens those blocks hold
  uint64_t prefix_queries, prefix_hits;
  uint64_t steps, preemptions;
  uint64_t prefill_tokens, decode_tokens;  // computed by steps
  uint64_t generated_tokens, finished, cancelled;
  // How steps were issued (docs/serving.md, "Step command buffers").
  uint64_t steps_direct;     // launch by launch
  uint64_t steps_recorded;   // recorded into a command buffer, then run
  uint64_t steps_replayed;   // by replaying a recorded command buffer
  uint64_t step_host_ns;     // CPU time of the stepping thread issuing
                             // the steps' commands (from staging the
                             // inputs to the last submit, not the wait for
                             // the device), summed
  uint32_t command_buffers;  // recorded step command buffers cached now
                             // (at most 32)
  uint32_t failed_steps;     // steps that failed (their requests ended
                             // with ACCEL_SERVE_END_ERROR)
} accel_serve_stats_t;

// Creates an engine on |device|: loads the model and the kernels, checks
// the model's configuration against the kernels' limits, and allocates the
// KV cache (device_blocks = kv_bytes / block_bytes), the swap space and the
// activations of a step. ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, short
// struct_size, unknown flags, reserved field set, swap preemption without
// swap_bytes, a budget smaller than one request of max_context tokens.
// ACCEL_ERROR_FORMAT: the model lacks a configuration entry or a weight, or
// one has the wrong dtype or shape (named). ACCEL_ERROR_VERSION: a
// decoder.version this runtime does not read. Loader errors as
// accel_executable_load_file; a GGUF model's as accel_gguf_open_file and
// accel_gguf_import_memory. ACCEL_ERROR_OUT_OF_MEMORY.
// Thread-safe.
ACCEL_API accel_status_t accel_serve_engine_create(
    accel_device_t *device, const accel_serve_engine_desc_t *desc,
    accel_serve_engine_t **out_engine);

// Destroys |engine| and every request in it (no callback is called). NULL
// is ignored. Not thread-safe: nothing else may use the engine.
ACCEL_API void accel_serve_engine_destroy(accel_serve_engine_t *engine);

// Writes the model and cache sizes to |*out| (|out->struct_size| set).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL or short struct_size. Thread-safe.
ACCEL_API accel_status_t accel_serve_model_info(
    const accel_serve_engine_t *engine, accel_serve_model_info_t *out);

// Queues a request; it is admitted by a later accel_serve_step. Writes its
// id (never 0) to |*out_id|. The request lives until accel_serve_release.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, short struct_size, reserved
// field set, empty prompt, a token outside the vocabulary (named by its
// index), max_new_tokens 0, prompt + max_new_tokens above max_context,
// bad sampling parameters (as accel_sample). ACCEL_ERROR_OUT_OF_MEMORY.
// Thread-safe.
ACCEL_API accel_status_t accel_serve_submit(
    accel_serve_engine_t *engine, const accel_serve_request_desc_t *desc,
    uint64_t *out_id);

// Ends request |id|: a request still running is cancelled (its KV blocks
// return to the cache at the next step, no more callbacks) and its record
// and undelivered tokens are forgotten. A thread blocked in accel_serve_next
// on it returns ACCEL_ERROR_NOT_FOUND. ACCEL_ERROR_NOT_FOUND: no such
// request. Thread-safe.
ACCEL_API accel_status_t accel_serve_release(accel_serve_engine_t *engine,
                                             uint64_t id);

// The pull iterator: waits up to |timeout_ns| (0: do not wait;
// ACCEL_TIMEOUT_INFINITE) for request |id|'s next undelivered token and
// writes it to |*out_token| with |*out_end| (accel_serve_end_t, non-zero
// when it is the last). After the last token it answers with |*out_token|
// -1 and |*out_end| set. ACCEL_ERROR_TIMEOUT: none in time (outputs
// untouched). ACCEL_ERROR_NOT_FOUND: no such request (or released while
// waiting). ACCEL_ERROR_INVALID_ARGUMENT: NULL argument. Thread-safe (one
// reader per request).
ACCEL_API accel_status_t accel_serve_next(accel_serve_engine_t *engine,
                                          uint64_t id, uint64_t timeout_ns,
                                          int32_t *out_token,
                                          uint32_t *out_end);

// Runs one scheduler step: admits submitted requests, applies releases,
// runs the plan's copies and the model over its entries, samples, and
// delivers the tokens (callbacks, iterators). Writes to |*out_pending| the
// requests still waiting, running or swapped (0: idle; the loop may sleep
// until the next submit). A failure of the step's commands (a device fault
// in one of them, a replayed command buffer that fails) ends the step's
// requests with ACCEL_SERVE_END_ERROR, counts in failed_steps and is
// returned with a message naming the failed command; the engine replaces
// its stream and later steps run (the other requests go on). A lost device
// (ACCEL_ERROR_DEVICE_LOST), or a failure outside the device, fails every
// unfinished request and the engine stays failed: later steps and submits
// return the stored error.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument. Device and stream errors as
// accel_launch and accel_stream_synchronize. ACCEL_ERROR_OUT_OF_MEMORY.
// Not thread-safe: one serving thread calls it.
ACCEL_API accel_status_t accel_serve_step(accel_serve_engine_t *engine,
                                          uint32_t *out_pending);

// Waits up to |timeout_ns| until a request is submitted or released (the
// idle serving loop's sleep). ACCEL_ERROR_TIMEOUT: nothing happened.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL engine. Thread-safe.
ACCEL_API accel_status_t accel_serve_wait_work(accel_serve_engine_t *engine,
                                               uint64_t timeout_ns);

// Counters (|out->struct_size| set by the caller).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL or short struct_size. Thread-safe.
ACCEL_API accel_status_t accel_serve_stats(const accel_serve_engine_t *engine,
                                           accel_serve_stats_t *out);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_SERVE_H_
