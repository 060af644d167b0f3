// Attention host kernels, one host code object (libaccel_attention_kernels.so;
// docs/kernel-abi.md). Layouts, bindings and constants are in
// attention_params.h; the reduction order, which the CUDA versions follow, is
// in kernels/README.md ("Attention").
//
//   attention_prefill       causal grouped-query attention over dense K/V
//   attention_decode        one query per sequence over a dense cache
//   attention_paged_decode  one query per sequence through a block table
//   paged_kv_append         writes new K/V rows into their cache slots
//
// Work split: every kernel has a fixed list of work items (a query row and
// KV head, a sequence and KV head, a token) and work-group i of n (ids in x,
// then y, then z) runs items [i * items / n, (i + 1) * items / n). Each
// output element is computed by one item in an order fixed by the kernel, so
// results are bit-identical for any grid, thread count and schedule.
//
// Every work-group checks the constants against the bound lengths (and each
// block id and slot against the cache) before it reads, and refuses a launch
// that does not fit with an assertion message naming what was wrong.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "accel/kernel_abi.h"
#include "attention_params.h"
#include "kernel_list.h"
#include "kernel_util.h"

ACCEL_KP_ATTENTION_KERNELS(ACCEL_KP_DECLARE)

// Bytes of a*b*c floats, in 128 bits: three u32 factors cannot overflow it,
// nor a fourth factor of head_dim (at most 512, checked first).
#define F32_BYTES(a, b, c) \
  ((unsigned __int128)(a) * (uint64_t)(b) * (uint64_t)(c) * 4u)

// Checks each binding against the bytes the constants need (computed in 128
// bits, so no product wraps around); reports the first that is too short.
static int32_t check_bindings(const accel_kernel_dispatch_t *d,
                              const accel_kernel_workgroup_t *wg,
                              const char *const *names,
                              const unsigned __int128 *bytes, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    if (!kp_binding_holds(d, wg, i, names[i], bytes[i])) {
      return 1;
    }
  }
  return 0;
}

// Checks the head shape shared by the attention kernels.
static int32_t check_heads(const accel_kernel_dispatch_t *d,
                           const accel_kernel_workgroup_t *wg,
                           const char *kernel, uint32_t n_heads,
                           uint32_t n_kv_heads, uint32_t head_dim) {
  if (n_heads == 0 || n_kv_heads == 0 || head_dim == 0) {
    return kp_fail(d, wg,
                  "%s: n_heads %u, n_kv_heads %u and head_dim %u must be "
                  "positive",
                  kernel, n_heads, n_kv_heads, head_dim);
  }
  if (n_heads % n_kv_heads != 0) {
    return kp_fail(d, wg, "%s: n_heads %u is not a multiple of n_kv_heads %u",
                  kernel, n_heads, n_kv_heads);
  }
  if (head_dim > ACCEL_KP_ATTN_MAX_HEAD_DIM ||
      (uint64_t)(n_heads / n_kv_heads) * head_dim >
          ACCEL_KP_ATTN_MAX_GROUP_FLOATS) {
    return kp_fail(d, wg,
                  "%s: head_dim %u (at most %u) times %u query heads per KV "
                  "head exceeds %u",
                  kernel, head_dim, ACCEL_KP_ATTN_MAX_HEAD_DIM,
                  n_heads / n_kv_heads, ACCEL_KP_ATTN_MAX_GROUP_FLOATS);
  }
  return 0;
}

// ---------------------------------------------------------------------------
// The one attention loop: |group| query heads (rows of |q|, |head_dim| apart)
// over keys 0..|len| - 1, whose rows the key source locates.
// ---------------------------------------------------------------------------

// Where key position j's K and V rows are: dense (|table| NULL) at
// j * |stride|, paged at (table[j / block_size] * block_size +
// j % block_size) * |stride| floats from |k| and |v|.
typedef struct kv_source {
  const float *k;
  const float *v;
  uint64_t stride;  // floats between consecutive positions
  const uint32_t *table;
  uint32_t block_size;
} kv_source_t;

static inline uint64_t kv_row(const kv_source_t *s, uint32_t j) {
  if (s->table == NULL) {
    return (uint64_t)j * s->stride;
  }
  uint64_t slot =
      (uint64_t)s->table[j / s->block_size] * s->block_size + j % s->block_size;
  return slot * s->stride;
}

typedef float v16f __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef float v2f __attribute__((vector_size(8)));

static inline v16f load16(const float *p) {
  v16f v;
  memcpy(&v, p, sizeof(v));
  return v;
}

// dot(a, b) in the fixed order of every reference kernel: lane i % 16
// accumulates a[i] * b[i] in increasing i, then the lanes fold as kp_fold
// does (l += l + 8, l += l + 4, l += l + 2, l += l + 1).
// The lanes live in one 16-float vector (GCC vector extensions): each lane
// rounds as scalar code would (no contraction), and the fold adds the halves
// in kp_fold's order without a trip through memory, which kp_fold's loop
// over an array costs (store-forwarding stalls, most of the kernel's time
// at head_dim 64).
static inline float dot_fixed(const float *restrict a,
                              const float *restrict b, uint32_t n) {
  v16f lane = {0};
  uint32_t i = 0;
  for (; i + KP_LANES <= n; i += KP_LANES) {
    lane += load16(a + i) * load16(b + i);
  }
  if (i < n) {
    // The tail as one more full step over zero-padded copies: lanes past
    // the tail add 0 * 0, which changes no value.
    float ta[KP_LANES] = {0}, tb[KP_LANES] = {0};
    memcpy(ta, a + i, (n - i) * sizeof(float));
    memcpy(tb, b + i, (n - i) * sizeof(float));
    lane += load16(ta) * load16(tb);
  }
  v8f s8 = __builtin_shufflevector(lane, lane, 0, 1, 2, 3, 4, 5, 6, 7) +
           __builtin_shufflevector(lane, lane, 8, 9, 10, 11, 12, 13, 14, 15);
  v4f s4 = __builtin_shufflevector(s8, s8, 0, 1, 2, 3) +
           __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
  v2f s2 = __builtin_shufflevector(s4, s4, 0, 1) +
           __builtin_shufflevector(s4, s4, 2, 3);
  return s2[0] + s2[1];
}

// y[i] += a * x[i] (restrict parameters: the accumulators never alias the
// cache, so the loop is vectorized without a runtime overlap check; not
// inlined, because GCC jams consecutive calls into one scalar loop).
__attribute__((noinline)) KP_VECTOR_CLONES static void axpy(float *restrict y, const float *restrict x, float a,
                        uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    y[i] += a * x[i];
  }
}

// out[g] = softmax(scale * q[g] . K^T) V over keys 0..len-1, with online
// softmax over key tiles of ACCEL_KP_ATTN_KEY_TILE positions in increasing
// order. len == 0 writes zeros.
KP_VECTOR_CLONES static void attend(const float *q, uint32_t group, uint32_t head_dim,
                   float scale, const kv_source_t *src, uint32_t len,
                   float *out) {
  float acc[ACCEL_KP_ATTN_MAX_GROUP_FLOATS];
  float m[ACCEL_KP_ATTN_MAX_GROUP_FLOATS];  // group <= MAX_GROUP_FLOATS
  float l[ACCEL_KP_ATTN_MAX_GROUP_FLOATS];
  float p[ACCEL_KP_ATTN_KEY_TILE];
  uint64_t rows[ACCEL_KP_ATTN_KEY_TILE];
  float s[ACCEL_KP_ATTN_KEY_TILE];
  memset(acc, 0, sizeof(float) * group * head_dim);
  for (uint32_t g = 0; g < group; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
  }
  for (uint32_t j0 = 0; j0 < len; j0 += ACCEL_KP_ATTN_KEY_TILE) {
    uint32_t t_count = len - j0 < ACCEL_KP_ATTN_KEY_TILE ? len - j0
                                                       : ACCEL_KP_ATTN_KEY_TILE;
    for (uint32_t t = 0; t < t_count; ++t) {
      rows[t] = kv_row(src, j0 + t);
    }
    for (uint32_t g = 0; g < group; ++g) {
      const float *qg = q + (uint64_t)g * head_dim;
      float tile_max = -INFINITY;
      for (uint32_t t = 0; t < t_count; ++t) {
        s[t] = scale * dot_fixed(qg, src->k + rows[t], head_dim);
        tile_max = s[t] > tile_max ? s[t] : tile_max;
      }
      float m_new = m[g] > tile_max ? m[g] : tile_max;
      // The first tile has nothing to rescale (m is -inf: exp would be 0,
      // but -inf - -inf is NaN when a score is -inf too).
      float corr = m[g] == -INFINITY ? 0.0f : kp_expf(m[g] - m_new);
      float sum = 0.0f;
      for (uint32_t t = 0; t < t_count; ++t) {
        p[t] = kp_expf(s[t] - m_new);
        sum += p[t];
      }
      l[g] = l[g] * corr + sum;
      m[g] = m_new;
      float *ag = acc + (uint64_t)g * head_dim;
      for (uint32_t i = 0; i < head_dim; ++i) {
        ag[i] *= corr;
      }
      for (uint32_t t = 0; t < t_count; ++t) {
        axpy(ag, src->v + rows[t], p[t], head_dim);
      }
    }
  }
  for (uint32_t g = 0; g < group; ++g) {
    float *og = out + (uint64_t)g * head_dim;
    const float *ag = acc + (uint64_t)g * head_dim;
    float inv = l[g] > 0.0f ? 1.0f / l[g] : 0.0f;
    for (uint32_t i = 0; i < head_dim; ++i) {
      og[i] = ag[i] * inv;
    }
  }
}

// ---------------------------------------------------------------------------
// attention_prefill
// ---------------------------------------------------------------------------

ACCEL_KERNEL_ENTRY int32_t attention_prefill(const accel_kernel_dispatch_t *d,
                                             const accel_kernel_workgroup_t *wg) {
  static const char *const k_names[] = {"q", "k", "v", "out"};
  accel_kp_attn_prefill_constants_t c;
  if (!kp_signature(d, wg, 4, &c, sizeof(c))) {
    return 1;
  }
  int32_t rc =
      check_heads(d, wg, "attention_prefill", c.n_heads, c.n_kv_heads,
                  c.head_dim);
  if (rc != 0) {
    return rc;
  }
  if (c.kv_len < c.q_len) {
    return kp_fail(d, wg, "attention_prefill: kv_len %u is below q_len %u",
                  c.kv_len, c.q_len);
  }
  unsigned __int128 q_bytes = F32_BYTES(c.q_len, c.n_heads, c.head_dim);
  unsigned __int128 kv_bytes = F32_BYTES(c.kv_len, c.n_kv_heads, c.head_dim);
  const unsigned __int128 bytes[] = {q_bytes, kv_bytes, kv_bytes, q_bytes};
  rc = check_bindings(d, wg, k_names, bytes, 4);
  if (rc != 0) {
    return rc;
  }
  uint32_t group = c.n_heads / c.n_kv_heads;
  kv_source_t src = {.k = d->bindings[1].data,
                     .v = d->bindings[2].data,
                     .stride = (uint64_t)c.n_kv_heads * c.head_dim};
  const float *q = d->bindings[0].data;
  float *out = d->bindings[3].data;
  // Items: (KV head, query row), rows fastest, so that a work-group's rows
  // share one head's keys in cache.
  kp_range_t items = kp_units(d, wg, (uint64_t)c.n_kv_heads * c.q_len);
  for (uint64_t it = items.begin; it < items.end; ++it) {
    uint32_t h = (uint32_t)(it / c.q_len);
    uint32_t row = (uint32_t)(it % c.q_len);
    uint32_t len = c.kv_len - c.q_len + row + 1;
    kv_source_t hs = src;
    hs.k += (uint64_t)h * c.head_dim;
    hs.v += (uint64_t)h * c.head_dim;
    uint64_t at = ((uint64_t)row * c.n_heads + (uint64_t)h * group) *
                  c.head_dim;
    attend(q + at, group, c.head_dim, c.scale, &hs, len, out + at);
  }
  return 0;
}

// ---------------------------------------------------------------------------
// attention_decode and attention_paged_decode
// ---------------------------------------------------------------------------

// Items: (sequence, KV head), heads fastest. |src| is the sequence's source
// with k and v at head 0; |seq_src| moves it to sequence |s|.
typedef void (*seq_source_fn)(const accel_kernel_dispatch_t *d, uint32_t s,
                              kv_source_t *src);

static void decode_items(const accel_kernel_dispatch_t *d,
                         const accel_kernel_workgroup_t *wg, uint32_t num_seqs,
                         uint32_t n_heads, uint32_t n_kv_heads,
                         uint32_t head_dim, float scale,
                         const uint32_t *context_lens, seq_source_fn seq_src,
                         const float *q, float *out) {
  uint32_t group = n_heads / n_kv_heads;
  kp_range_t items = kp_units(d, wg, (uint64_t)num_seqs * n_kv_heads);
  for (uint64_t it = items.begin; it < items.end; ++it) {
    uint32_t s = (uint32_t)(it / n_kv_heads);
    uint32_t h = (uint32_t)(it % n_kv_heads);
    kv_source_t src;
    seq_src(d, s, &src);
    src.k += (uint64_t)h * head_dim;
    src.v += (uint64_t)h * head_dim;
    uint64_t at = ((uint64_t)s * n_heads + (uint64_t)h * group) * head_dim;
    attend(q + at, group, head_dim, scale, &src, context_lens[s], out + at);
  }
}

static void dense_seq_source(const accel_kernel_dispatch_t *d, uint32_t s,
                             kv_source_t *src) {
  accel_kp_attn_decode_constants_t c;
  memcpy(&c, d->constants, sizeof(c));
  uint64_t stride = (uint64_t)c.n_kv_heads * c.head_dim;
  uint64_t seq = (uint64_t)s * c.max_len * stride;
  *src = (kv_source_t){.k = (const float *)d->bindings[1].data + seq,
                       .v = (const float *)d->bindings[2].data + seq,
                       .stride = stride};
}

ACCEL_KERNEL_ENTRY int32_t attention_decode(const accel_kernel_dispatch_t *d,
                                            const accel_kernel_workgroup_t *wg) {
  static const char *const k_names[] = {"q", "k", "v", "context_lens", "out"};
  accel_kp_attn_decode_constants_t c;
  if (!kp_signature(d, wg, 5, &c, sizeof(c))) {
    return 1;
  }
  int32_t rc = check_heads(d, wg, "attention_decode", c.n_heads, c.n_kv_heads,
                           c.head_dim);
  if (rc != 0) {
    return rc;
  }
  unsigned __int128 q_bytes = F32_BYTES(c.num_seqs, c.n_heads, c.head_dim);
  unsigned __int128 kv_bytes =
      F32_BYTES(c.num_seqs, c.max_len, c.n_kv_heads) * c.head_dim;
  const unsigned __int128 bytes[] = {q_bytes, kv_bytes, kv_bytes,
                                     F32_BYTES(c.num_seqs, 1, 1), q_bytes};
  rc = check_bindings(d, wg, k_names, bytes, 5);
  if (rc != 0) {
    return rc;
  }
  const uint32_t *lens = d->bindings[3].data;
  for (uint32_t s = 0; s < c.num_seqs; ++s) {
    if (lens[s] > c.max_len) {
      return kp_fail(d, wg,
                    "attention_decode: context_lens[%u] = %u exceeds max_len "
                    "%u",
                    s, lens[s], c.max_len);
    }
  }
  decode_items(d, wg, c.num_seqs, c.n_heads, c.n_kv_heads, c.head_dim,
               c.scale, lens, dense_seq_source, d->bindings[0].data,
               d->bindings[4].data);
  return 0;
}

static void paged_seq_source(const accel_kernel_dispatch_t *d, uint32_t s,
                             kv_source_t *src) {
  accel_kp_attn_paged_constants_t c;
  memcpy(&c, d->constants, sizeof(c));
  *src = (kv_source_t){
      .k = d->bindings[1].data,
      .v = d->bindings[2].data,
      .stride = (uint64_t)c.n_kv_heads * c.head_dim,
      .table = (const uint32_t *)d->bindings[3].data +
               (uint64_t)s * c.max_blocks_per_seq,
      .block_size = c.block_size};
}

// Checks every block id sequence |s| uses against the cache.
static int32_t check_block_table(const accel_kernel_dispatch_t *d,
                                 const accel_kernel_workgroup_t *wg,
                                 const accel_kp_attn_paged_constants_t *c,
                                 uint32_t s, uint32_t len) {
  if (len > (uint64_t)c->max_blocks_per_seq * c->block_size) {
    return kp_fail(d, wg,
                  "attention_paged_decode: context_lens[%u] = %u exceeds %u "
                  "blocks of %u positions",
                  s, len, c->max_blocks_per_seq, c->block_size);
  }
  const uint32_t *table =
      (const uint32_t *)d->bindings[3].data + (uint64_t)s * c->max_blocks_per_seq;
  uint32_t used = (uint32_t)(((uint64_t)len + c->block_size - 1) / c->block_size);
  for (uint32_t b = 0; b < used; ++b) {
    if (table[b] >= c->num_blocks) {
      return kp_fail(d, wg,
                    "attention_paged_decode: block_tables[%u][%u] = %u is "
                    "outside the cache's %u blocks",
                    s, b, table[b], c->num_blocks);
    }
  }
  return 0;
}

ACCEL_KERNEL_ENTRY int32_t attention_paged_decode(
    const accel_kernel_dispatch_t *d, const accel_kernel_workgroup_t *wg) {
  static const char *const k_names[] = {"q",           "k_cache",
                                        "v_cache",     "block_tables",
                                        "context_lens", "out"};
  accel_kp_attn_paged_constants_t c;
  if (!kp_signature(d, wg, 6, &c, sizeof(c))) {
    return 1;
  }
  int32_t rc = check_heads(d, wg, "attention_paged_decode", c.n_heads,
                           c.n_kv_heads, c.head_dim);
  if (rc != 0) {
    return rc;
  }
  if (c.block_size == 0) {
    return kp_fail(d, wg, "attention_paged_decode: block_size is 0");
  }
  unsigned __int128 q_bytes = F32_BYTES(c.num_seqs, c.n_heads, c.head_dim);
  unsigned __int128 cache_bytes =
      F32_BYTES(c.num_blocks, c.block_size, c.n_kv_heads) * c.head_dim;
  const unsigned __int128 bytes[] = {
      q_bytes,     cache_bytes, cache_bytes,
      F32_BYTES(c.num_seqs, c.max_blocks_per_seq, 1),
      F32_BYTES(c.num_seqs, 1, 1), q_bytes};
  rc = check_bindings(d, wg, k_names, bytes, 6);
  if (rc != 0) {
    return rc;
  }
  const uint32_t *lens = d->bindings[4].data;
  for (uint32_t s = 0; s < c.num_seqs; ++s) {
    rc = check_block_table(d, wg, &c, s, lens[s]);
    if (rc != 0) {
      return rc;
    }
  }
  decode_items(d, wg, c.num_seqs, c.n_heads, c.n_kv_heads, c.head_dim,
               c.scale, lens, paged_seq_source, d->bindings[0].data,
               d->bindings[5].data);
  return 0;
}

// ---------------------------------------------------------------------------
// paged_kv_append
// ---------------------------------------------------------------------------

ACCEL_KERNEL_ENTRY int32_t paged_kv_append(const accel_kernel_dispatch_t *d,
                                           const accel_kernel_workgroup_t *wg) {
  static const char *const k_names[] = {"k_new", "v_new", "slot_mapping",
                                        "k_cache", "v_cache"};
  accel_kp_kv_append_constants_t c;
  if (!kp_signature(d, wg, 5, &c, sizeof(c))) {
    return 1;
  }
  if (c.n_kv_heads == 0 || c.head_dim == 0 || c.block_size == 0) {
    return kp_fail(d, wg,
                  "paged_kv_append: n_kv_heads %u, head_dim %u and block_size "
                  "%u must be positive",
                  c.n_kv_heads, c.head_dim, c.block_size);
  }
  uint64_t row = (uint64_t)c.n_kv_heads * c.head_dim;
  uint64_t slots = (uint64_t)c.num_blocks * c.block_size;
  unsigned __int128 new_bytes = F32_BYTES(c.tokens, c.n_kv_heads, c.head_dim);
  unsigned __int128 cache_bytes =
      F32_BYTES(c.num_blocks, c.block_size, c.n_kv_heads) * c.head_dim;
  const unsigned __int128 bytes[] = {new_bytes, new_bytes,
                                     F32_BYTES(c.tokens, 1, 1), cache_bytes,
                                     cache_bytes};
  int32_t rc = check_bindings(d, wg, k_names, bytes, 5);
  if (rc != 0) {
    return rc;
  }
  const int32_t *slot_mapping = d->bindings[2].data;
  for (uint32_t t = 0; t < c.tokens; ++t) {
    if (slot_mapping[t] < -1 || (int64_t)slot_mapping[t] >= (int64_t)slots) {
      return kp_fail(d, wg,
                    "paged_kv_append: slot_mapping[%u] = %d is outside the "
                    "cache's %llu slots (-1 skips a token)",
                    t, slot_mapping[t], (unsigned long long)slots);
    }
  }
  const float *k_new = d->bindings[0].data;
  const float *v_new = d->bindings[1].data;
  float *k_cache = d->bindings[3].data;
  float *v_cache = d->bindings[4].data;
  kp_range_t items = kp_units(d, wg, c.tokens);
  for (uint64_t t = items.begin; t < items.end; ++t) {
    if (slot_mapping[t] < 0) {
      continue;
    }
    uint64_t at = (uint64_t)slot_mapping[t] * row;
    memcpy(k_cache + at, k_new + t * row, row * sizeof(float));
    memcpy(v_cache + at, v_new + t * row, row * sizeof(float));
  }
  return 0;
}

// ---------------------------------------------------------------------------
// The library (left out of libaccel_kernels.so, which has its own table)
// ---------------------------------------------------------------------------

#ifndef ACCEL_KP_COMBINED
ACCEL_KP_FAMILY_LIBRARY("accel attention kernels", ACCEL_KP_ATTENTION_KERNELS,
                        NULL, ACCEL_KP_META_ATTENTION)
#endif
