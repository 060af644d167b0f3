// The KV-cache block manager of the serving stack (docs/serving.md): which
// fixed-size KV blocks each sequence owns, in order (its block table), with
// prefix caching, copy-on-write and swap to host memory, the way vLLM's
// block manager works. It manages block numbers only: the KV bytes live in
// device buffers that the attention kernels index by block number
// (kernels/README.md, paged attention), and the copies it asks for (a
// copy-on-write, a swap) are the caller's to run, on a DMA queue or stream.
//
// Blocks hold |block_tokens| tokens. A sequence's block i holds its tokens
// [i * block_tokens, (i + 1) * block_tokens). With prefix caching, a full
// block is known by a hash of its tokens and of every token before it; a
// new sequence whose prompt starts with the same full blocks shares them
// (their reference count grows), and a block nobody references stays cached
// until its space is needed, then is evicted least recently used first.
//
// Thread-safety: a cache is not thread-safe; one scheduler owns it (calls
// from several threads must be serialized by the caller). Distinct caches
// are independent.
#ifndef ACCEL_KV_CACHE_H_
#define ACCEL_KV_CACHE_H_

#include <stdint.h>

#include "accel/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_kv_cache accel_kv_cache_t;

enum accel_kv_cache_flag_bits {
  // Share full blocks between sequences with the same prefix, and keep
  // unreferenced full blocks cached until their space is needed.
  ACCEL_KV_CACHE_PREFIX_CACHING = 1u << 0,
};

typedef struct accel_kv_cache_desc {
  uint32_t struct_size;    // sizeof(accel_kv_cache_desc_t)
  uint32_t flags;          // accel_kv_cache_flag_bits
  uint32_t block_tokens;   // tokens per block, 1 to 4096
  uint32_t device_blocks;  // blocks in device memory, at least 1
  uint32_t host_blocks;    // blocks of host swap space (0: no swapping)
  uint32_t reserved0;      // 0
} accel_kv_cache_desc_t;

// A block to copy: from |src| to |dst| (device blocks, or for a swap a
// device block and a host block as the call says).
typedef struct accel_kv_copy {
  uint32_t src;
  uint32_t dst;
} accel_kv_copy_t;

typedef struct accel_kv_cache_stats {
  uint32_t struct_size;
  uint32_t block_tokens;   // as created
  uint32_t host_blocks;    // as created
  uint32_t device_blocks;  // total
  uint32_t free_blocks;    // neither referenced nor cached
  uint32_t used_blocks;    // referenced by at least one sequence
  uint32_t cached_blocks;  // unreferenced, kept for prefix hits (evictable)
  uint32_t host_used_blocks;  // holding swapped-out sequences
  uint32_t sequences;      // live sequences (swapped ones included)
  uint32_t swapped_sequences;
  uint64_t token_slots;    // block_tokens x blocks referenced by sequences
  uint64_t tokens;         // tokens those blocks hold (a shared block once)
  uint64_t prefix_queries;  // full prompt blocks looked up
  uint64_t prefix_hits;     // of those, found cached
  uint64_t evictions;       // cached blocks reused for other contents
  uint64_t copies_on_write;
} accel_kv_cache_stats_t;

// Creates a cache of |desc->device_blocks| free blocks. |*out| is the
// caller's. ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, a short
// struct_size, unknown flags, block_tokens or device_blocks out of range,
// reserved field set. ACCEL_ERROR_OUT_OF_MEMORY.
ACCEL_API accel_status_t accel_kv_cache_create(
    const accel_kv_cache_desc_t *desc, accel_kv_cache_t **out);

// Destroys |cache| and every sequence in it. NULL is ignored.
ACCEL_API void accel_kv_cache_destroy(accel_kv_cache_t *cache);

// Adds sequence |seq| with its prompt |tokens| (|count| >= 1): allocates the
// blocks that hold them, sharing cached full blocks of the same prefix
// (prefix caching). |*out_cached_tokens| (may be NULL) receives how many
// leading prompt tokens are already in the cache (a multiple of
// block_tokens, and never the whole prompt: the last token is always
// computed, so that its logits exist). Nothing changes on failure.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, count 0, or |seq| already
// present. ACCEL_ERROR_OUT_OF_MEMORY: not enough free or evictable blocks
// (the scheduler should preempt; accel_kv_cache_can_add says beforehand).
ACCEL_API accel_status_t accel_kv_cache_add(accel_kv_cache_t *cache,
                                            uint64_t seq,
                                            const int32_t *tokens,
                                            uint32_t count,
                                            uint32_t *out_cached_tokens);

// Whether a prompt of |count| tokens (|tokens|, may be NULL to count no
// prefix hits) can be added now. Never fails; false for NULL.
ACCEL_API int accel_kv_cache_can_add(const accel_kv_cache_t *cache,
                                     const int32_t *tokens, uint32_t count);

// Appends |token| to |seq| (a decode step's new token). Allocates a block
// when the last one is full; when the last block is shared and not full, the
// sequence gets a copy (copy-on-write): |*out_copy| receives the device
// blocks to copy and |*out_copied| is 1 (else 0). Nothing changes on
// failure. ACCEL_ERROR_NOT_FOUND: no such sequence. ACCEL_ERROR_BUSY: the
// sequence is swapped out. ACCEL_ERROR_OUT_OF_MEMORY: no block free or
// evictable. ACCEL_ERROR_INVALID_ARGUMENT: NULL argument.
ACCEL_API accel_status_t accel_kv_cache_append(accel_kv_cache_t *cache,
                                               uint64_t seq, int32_t token,
                                               accel_kv_copy_t *out_copy,
                                               uint32_t *out_copied);

// Forks |parent| into the new sequence |child| (parallel sampling, beam
// search): the child shares every block of the parent; the first append to
// a shared, partly full block copies it. ACCEL_ERROR_NOT_FOUND: no parent.
// ACCEL_ERROR_INVALID_ARGUMENT: |child| exists, or NULL argument.
// ACCEL_ERROR_BUSY: the parent is swapped out.
ACCEL_API accel_status_t accel_kv_cache_fork(accel_kv_cache_t *cache,
                                             uint64_t parent, uint64_t child);

// Records that the KV of |seq|'s first |tokens| tokens has been computed
// (after the model step that wrote them): with prefix caching, its full
// blocks among them become findable by later prompts with the same prefix.
// A block is never shared by accel_kv_cache_add before this is called for
// it, so no sequence reads KV that is not written yet.
// ACCEL_ERROR_NOT_FOUND: no such sequence. ACCEL_ERROR_INVALID_ARGUMENT:
// |tokens| beyond the sequence's length. ACCEL_ERROR_BUSY: swapped out.
ACCEL_API accel_status_t accel_kv_cache_set_computed(accel_kv_cache_t *cache,
                                                     uint64_t seq,
                                                     uint64_t tokens);

// Frees |seq| (finished, cancelled, or preempted by recompute): its blocks
// lose a reference; with prefix caching, full blocks nobody references stay
// cached, others become free. A swapped-out sequence frees its host
// blocks. ACCEL_ERROR_NOT_FOUND: no such sequence.
ACCEL_API accel_status_t accel_kv_cache_free(accel_kv_cache_t *cache,
                                             uint64_t seq);

// The block table of |seq|: up to |capacity| device block numbers in
// order into |blocks| (may be NULL when |capacity| is 0), the table's length
// in |*out_count| and the sequence's token count in |*out_tokens| (each may
// be NULL). ACCEL_ERROR_NOT_FOUND: no such sequence. ACCEL_ERROR_BUSY:
// swapped out (its blocks are on the host).
ACCEL_API accel_status_t accel_kv_cache_block_table(
    const accel_kv_cache_t *cache, uint64_t seq, uint32_t *blocks,
    uint32_t capacity, uint32_t *out_count, uint64_t *out_tokens);

// Swaps |seq| out to host blocks: its device blocks that no other sequence
// references are freed (cached ones stay cached) and every block's contents
// are to be copied to a host block: |copies| receives up to |capacity|
// (device src, host dst) pairs and |*out_count| their number (capacity must
// be at least the sequence's block count). Nothing changes on failure.
// ACCEL_ERROR_NOT_FOUND, ACCEL_ERROR_BUSY (already swapped),
// ACCEL_ERROR_OUT_OF_MEMORY (not enough host blocks),
// ACCEL_ERROR_INVALID_ARGUMENT (capacity short, NULL argument).
ACCEL_API accel_status_t accel_kv_cache_swap_out(accel_kv_cache_t *cache,
                                                 uint64_t seq,
                                                 accel_kv_copy_t *copies,
                                                 uint32_t capacity,
                                                 uint32_t *out_count);

// Swaps |seq| back in: new device blocks for each of its host blocks, whose
// (host src, device dst) pairs go to |copies| as for swap_out; the host
// blocks are freed. Nothing changes on failure. ACCEL_ERROR_NOT_FOUND,
// ACCEL_ERROR_BUSY (not swapped out), ACCEL_ERROR_OUT_OF_MEMORY (not enough
// device blocks), ACCEL_ERROR_INVALID_ARGUMENT.
ACCEL_API accel_status_t accel_kv_cache_swap_in(accel_kv_cache_t *cache,
                                                uint64_t seq,
                                                accel_kv_copy_t *copies,
                                                uint32_t capacity,
                                                uint32_t *out_count);

// Counters and occupancy (|out->struct_size| set by the caller).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL or short struct_size.
ACCEL_API accel_status_t accel_kv_cache_stats(const accel_kv_cache_t *cache,
                                              accel_kv_cache_stats_t *out);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_KV_CACHE_H_
