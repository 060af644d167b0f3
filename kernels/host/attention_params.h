// Constants blocks and binding orders of the attention kernels
// (attention_kernels.c; kernels/README.md, "Attention"). Shared by the
// kernels, their tests, benchmarks and examples, so that a launch and a
// kernel never disagree on a layout. Stands alone (<stdint.h> only), like
// accel/kernel_abi.h.
//
// Layouts (all f32, row-major, C order):
//   q, out          [tokens, n_heads, head_dim]
//   dense k, v      prefill: [kv_len, n_kv_heads, head_dim];
//                   decode:  [num_seqs, max_len, n_kv_heads, head_dim]
//   paged k, v      [num_blocks, block_size, n_kv_heads, head_dim] (vLLM's
//                   flash-attention cache layout: one block holds block_size
//                   consecutive positions of every KV head)
//   block_tables    uint32 [num_seqs, max_blocks_per_seq]: logical block b of
//                   sequence s lives in physical block block_tables[s][b]
//   context_lens    uint32 [num_seqs]: positions of the sequence in the cache,
//                   the new token's included
//   slot_mapping    int32 [tokens]: block * block_size + offset, -1 to skip
// Query head h reads KV head h / (n_heads / n_kv_heads) (grouped-query
// attention; n_heads a multiple of n_kv_heads).
#ifndef ACCEL_KERNELS_HOST_ATTENTION_PARAMS_H_
#define ACCEL_KERNELS_HOST_ATTENTION_PARAMS_H_

#include <stdint.h>

// The attention family's kernels: X(name) names both the export and its C
// entry point.
#define ACCEL_KP_ATTENTION_KERNELS(X) \
  X(attention_prefill) X(attention_decode) X(attention_paged_decode) \
  X(paged_kv_append)

// Largest head_dim and largest n_heads / n_kv_heads * head_dim (one work
// item's accumulators live on the stack) the kernels take.
#define ACCEL_KP_ATTN_MAX_HEAD_DIM 512u
#define ACCEL_KP_ATTN_MAX_GROUP_FLOATS 8192u
// Keys are folded into the online softmax in tiles of this many positions
// (part of the reduction order: kernels/README.md).
#define ACCEL_KP_ATTN_KEY_TILE 32u

// attention_prefill: causal attention of q_len queries over kv_len keys;
// query i sits at position kv_len - q_len + i and sees keys 0..that.
// bindings: 0 q (r), 1 k (r), 2 v (r), 3 out (w).
typedef struct accel_kp_attn_prefill_constants {
  uint32_t q_len;
  uint32_t kv_len;  // >= q_len
  uint32_t n_heads;
  uint32_t n_kv_heads;
  uint32_t head_dim;
  float scale;  // usually 1 / sqrt(head_dim)
  uint32_t reserved[2];
} accel_kp_attn_prefill_constants_t;

// attention_decode: one query token per sequence over a dense cache.
// bindings: 0 q (r), 1 k (r), 2 v (r), 3 context_lens (r), 4 out (w).
typedef struct accel_kp_attn_decode_constants {
  uint32_t num_seqs;
  uint32_t max_len;  // positions per sequence in k and v
  uint32_t n_heads;
  uint32_t n_kv_heads;
  uint32_t head_dim;
  float scale;
  uint32_t reserved[2];
} accel_kp_attn_decode_constants_t;

// attention_paged_decode: one query token per sequence over a paged cache.
// bindings: 0 q (r), 1 k_cache (r), 2 v_cache (r), 3 block_tables (r),
//           4 context_lens (r), 5 out (w).
typedef struct accel_kp_attn_paged_constants {
  uint32_t num_seqs;
  uint32_t n_heads;
  uint32_t n_kv_heads;
  uint32_t head_dim;
  uint32_t block_size;  // positions per block
  uint32_t num_blocks;  // blocks in k_cache and v_cache
  uint32_t max_blocks_per_seq;  // columns of block_tables
  float scale;
} accel_kp_attn_paged_constants_t;

// paged_kv_append: writes token t's K and V rows to slot slot_mapping[t].
// bindings: 0 k_new (r), 1 v_new (r), 2 slot_mapping (r), 3 k_cache (rw),
//           4 v_cache (rw).
typedef struct accel_kp_kv_append_constants {
  uint32_t tokens;
  uint32_t n_kv_heads;
  uint32_t head_dim;
  uint32_t block_size;
  uint32_t num_blocks;
  uint32_t reserved[3];
} accel_kp_kv_append_constants_t;

_Static_assert(sizeof(accel_kp_attn_prefill_constants_t) == 32, "layout");
_Static_assert(sizeof(accel_kp_attn_decode_constants_t) == 32, "layout");
_Static_assert(sizeof(accel_kp_attn_paged_constants_t) == 32, "layout");
_Static_assert(sizeof(accel_kp_kv_append_constants_t) == 32, "layout");

#endif  // ACCEL_KERNELS_HOST_ATTENTION_PARAMS_H_
