// The serving scheduler (docs/serving.md, "The scheduler"): iteration-level
// scheduling of requests over a KV-cache block manager, as vLLM does it.
// Each step it chooses which sequences run and how many of their tokens:
// decode steps of running sequences first, then swapped-out sequences
// brought back, then waiting prompts (first come, first served within a
// priority), all within a per-step token budget, with chunked prefill
// mixed with decode. When blocks run out it preempts the most recently
// admitted sequence of the lowest priority, by recompute or by swap.
//
// The scheduler owns the token lists; the caller (the model runner) executes
// each step's plan (copies first, then the model over the listed token
// ranges) and reports the sampled tokens with accel_sched_complete.
//
// Thread-safety: not thread-safe; one serving loop owns a scheduler and its
// KV cache. Objects handed out (plans) stay valid until the next call.
#ifndef ACCEL_SCHEDULER_H_
#define ACCEL_SCHEDULER_H_

#include <stdint.h>

#include "accel/base.h"
#include "accel/kv_cache.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_sched accel_sched_t;

typedef enum accel_sched_preempt {
  // Free the victim's blocks; it waits again and recomputes its tokens
  // (prefix caching may find them).
  ACCEL_SCHED_PREEMPT_RECOMPUTE = 0,
  // Move the victim's blocks to host memory; it resumes after a swap-in.
  ACCEL_SCHED_PREEMPT_SWAP = 1,
} accel_sched_preempt_t;

enum accel_sched_flag_bits {
  // Split a prompt over several steps when it does not fit the budget.
  // (A sequence preempted by recompute is always refilled in chunks.)
  ACCEL_SCHED_CHUNKED_PREFILL = 1u << 0,
};

typedef struct accel_sched_desc {
  uint32_t struct_size;       // sizeof(accel_sched_desc_t)
  uint32_t flags;             // accel_sched_flag_bits
  uint32_t max_step_tokens;   // token budget of one step, at least 1
  uint32_t max_step_seqs;     // sequences in one step, at least 1
  uint32_t preempt;           // accel_sched_preempt_t
  uint32_t reserved0;         // 0
} accel_sched_desc_t;

typedef struct accel_sched_request {
  uint32_t struct_size;       // sizeof(accel_sched_request_t)
  int32_t priority;           // higher runs first; equal: arrival order
  uint64_t id;                // unique among live requests
  const int32_t *prompt;      // copied
  uint32_t prompt_tokens;     // at least 1
  uint32_t max_new_tokens;    // at least 1
  int32_t eos_token;          // generation stops after it; -1: none
  uint32_t reserved0;         // 0
} accel_sched_request_t;

// One sequence's share of a step: compute the KV of its tokens
// [start, start + count) (tokens[i] for i in that range, reading the KV of
// every earlier token through |block_table|), and when |sample| is 1 sample
// the next token from the logits of the last one.
typedef struct accel_sched_entry {
  uint64_t id;
  const int32_t *tokens;        // the sequence's tokens so far
  uint32_t start;
  uint32_t count;
  const uint32_t *block_table;  // device blocks covering start + count
  uint32_t blocks;
  uint32_t sample;              // 1: the step ends this sequence's input
  uint32_t reserved0;
} accel_sched_entry_t;

// A step's plan. Run the copies in this order before the model: swap-outs
// (device block to host block), then swap-ins (host to device) and
// copies-on-write (device to device).
typedef struct accel_sched_plan {
  const accel_sched_entry_t *entries;
  uint32_t entry_count;
  uint32_t tokens;  // sum of the entries' counts (<= max_step_tokens)
  const accel_kv_copy_t *swap_out;
  uint32_t swap_out_count;
  const accel_kv_copy_t *swap_in;
  uint32_t swap_in_count;
  const accel_kv_copy_t *copy;
  uint32_t copy_count;
  const uint64_t *preempted;  // sequences preempted by this step
  uint32_t preempted_count;
  uint32_t reserved0;
} accel_sched_plan_t;

// A finished sequence, reported by accel_sched_complete.
typedef struct accel_sched_finished {
  uint64_t id;
  uint32_t generated;  // tokens generated
  uint32_t reason;     // 0: max_new_tokens reached, 1: EOS sampled
} accel_sched_finished_t;

typedef struct accel_sched_stats {
  uint32_t struct_size;
  uint32_t waiting, running, swapped;
  uint64_t steps, preemptions, swaps_out, swaps_in, finished, cancelled;
  uint64_t prefill_tokens, decode_tokens;
} accel_sched_stats_t;

// Creates a scheduler over |cache| (borrowed: it must outlive the
// scheduler and be used by nobody else). ACCEL_ERROR_INVALID_ARGUMENT: NULL
// argument, short struct_size, zero budget or sequence count, unknown flags
// or preemption mode, swap preemption with a cache without host blocks.
// ACCEL_ERROR_OUT_OF_MEMORY.
ACCEL_API accel_status_t accel_sched_create(const accel_sched_desc_t *desc,
                                            accel_kv_cache_t *cache,
                                            accel_sched_t **out);

// Destroys |sched|, freeing every sequence it has in the cache. NULL is
// ignored.
ACCEL_API void accel_sched_destroy(accel_sched_t *sched);

// Queues a request (waiting). ACCEL_ERROR_INVALID_ARGUMENT: NULL argument,
// short struct_size, empty prompt, max_new_tokens 0, a duplicate id, or (no
// chunked prefill) a prompt longer than the step budget; also a prompt that
// could never fit the cache. ACCEL_ERROR_OUT_OF_MEMORY.
ACCEL_API accel_status_t accel_sched_add(accel_sched_t *sched,
                                         const accel_sched_request_t *request);

// Cancels request |id| at any point: its blocks go back to the cache and it
// is forgotten. ACCEL_ERROR_NOT_FOUND: no such live request.
ACCEL_API accel_status_t accel_sched_cancel(accel_sched_t *sched, uint64_t id);

// Plans the next step into |*out| (empty when nothing can run). A plan
// must be completed (accel_sched_complete) before the next step.
// ACCEL_ERROR_BUSY: the previous plan was not completed.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument. ACCEL_ERROR_OUT_OF_MEMORY.
ACCEL_API accel_status_t accel_sched_step(accel_sched_t *sched,
                                          accel_sched_plan_t *out);

// Completes the last plan: |tokens[i]| is the token sampled for the i-th
// entry with sample = 1, in plan order (|count| their number). Marks the
// computed KV in the cache, appends the sampled tokens, and lists the
// sequences that finished (freed from the cache) in |finished| (up to
// |capacity|; |*out_finished| is how many finished, which may exceed
// capacity when |finished| is short). ACCEL_ERROR_INVALID_ARGUMENT: no plan
// to complete, or |count| is not the number of sampling entries.
ACCEL_API accel_status_t accel_sched_complete(
    accel_sched_t *sched, const int32_t *tokens, uint32_t count,
    accel_sched_finished_t *finished, uint32_t capacity,
    uint32_t *out_finished);

// The tokens of live request |id| (prompt then generated) and the prompt's
// length; valid until the next call. ACCEL_ERROR_NOT_FOUND.
ACCEL_API accel_status_t accel_sched_tokens(const accel_sched_t *sched,
                                            uint64_t id,
                                            const int32_t **out_tokens,
                                            uint32_t *out_count,
                                            uint32_t *out_prompt_tokens);

// Counters (|out->struct_size| set by the caller).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL or short struct_size.
ACCEL_API accel_status_t accel_sched_stats(const accel_sched_t *sched,
                                           accel_sched_stats_t *out);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_SCHEDULER_H_
