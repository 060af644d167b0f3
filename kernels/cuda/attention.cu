// Attention reference kernels in CUDA: attention_prefill, attention_decode,
// attention_paged_decode, paged_kv_append (kernels/README.md, "Attention";
// kernels/host/attention_kernels.c). Work items as on the host; the block's
// (item, query head of the item's group) pairs go to its 16-lane groups in
// turn, and one group computes one output row in the host kernel's order:
// scores by the fixed 16-lane dot, online softmax over tiles of 32 keys
// (tile max, correction, p_j, their sum left to right), the accumulator
// rescaled then updated key by key, the output scaled by 1 / l. Each lane
// owns the accumulator elements i with i % 16 == l; the tile's scores and
// probabilities pass through shared memory, published with __syncwarp.
#include "kc_common.cuh"

// Where position j's K and V rows are (kv_source_t of the host kernels).
struct kc_kv {
  const float *k, *v;
  uint64_t stride;
  const uint32_t *table;  // NULL: dense
  uint32_t block_size;
};

KC_FN uint64_t kc_kv_row(const struct kc_kv *s, uint32_t j) {
  if (s->table == NULL) {
    return (uint64_t)j * s->stride;
  }
  uint64_t slot =
      (uint64_t)s->table[j / s->block_size] * s->block_size + j % s->block_size;
  return slot * s->stride;
}

// One output row: |q| over keys 0..len-1 of |src|, into |out|.
KC_FN void kc_attend(const float *q, uint32_t head_dim, float scale,
                     const struct kc_kv *src, uint32_t len, float *out) {
  __shared__ float acc_all[KC_GROUPS][ACCEL_KP_ATTN_MAX_HEAD_DIM];
  __shared__ float p_all[KC_GROUPS][ACCEL_KP_ATTN_KEY_TILE];
  uint32_t lane = kc_lane(), mask = kc_group_mask();
  float *acc = acc_all[kc_group()];
  float *p = p_all[kc_group()];
  for (uint32_t i = lane; i < head_dim; i += KC_LANES) acc[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (uint32_t j0 = 0; j0 < len; j0 += ACCEL_KP_ATTN_KEY_TILE) {
    uint32_t count = len - j0 < ACCEL_KP_ATTN_KEY_TILE ? len - j0
                                                       : ACCEL_KP_ATTN_KEY_TILE;
    float tile_max = -INFINITY;
    for (uint32_t t = 0; t < count; ++t) {
      const float *k = src->k + kc_kv_row(src, j0 + t);
      float part = 0.0f;
      for (uint32_t i = lane; i < head_dim; i += KC_LANES) {
        part = part + q[i] * k[i];
      }
      float s = scale * kc_fold16(part);
      if (lane == 0) p[t] = s;
      tile_max = s > tile_max ? s : tile_max;
    }
    float m_new = m > tile_max ? m : tile_max;
    float corr = m == -INFINITY ? 0.0f : kp_expf(m - m_new);
    __syncwarp(mask);  // lane 0's scores are visible to the group
    for (uint32_t t = lane; t < count; t += KC_LANES) {
      p[t] = kp_expf(p[t] - m_new);
    }
    __syncwarp(mask);  // every p_j is visible to the group
    float sum = 0.0f;
    for (uint32_t t = 0; t < count; ++t) sum += p[t];
    l = l * corr + sum;
    m = m_new;
    for (uint32_t i = lane; i < head_dim; i += KC_LANES) {
      float a = acc[i] * corr;
      for (uint32_t t = 0; t < count; ++t) {
        a += p[t] * src->v[kc_kv_row(src, j0 + t) + i];
      }
      acc[i] = a;
    }
    __syncwarp(mask);  // the next tile overwrites p
  }
  float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (uint32_t i = lane; i < head_dim; i += KC_LANES) out[i] = acc[i] * inv;
}

// The block's (item, query head) pairs, walked without 64-bit division (a
// call on the GPU, whose saved registers would count as spills). An item is
// (outer, inner) with inner fastest: (sequence, KV head) for decode, (KV
// head, query row) for prefill. Group q of the block takes pairs q, q + 8,
// q + 16, ...
struct kc_pairs {
  uint64_t left;          // pairs still to visit, this one included
  uint32_t outer, inner;  // the current item
  uint32_t g;             // the current query head of the item's group
  uint32_t inner_count, group;
};

KC_FN void kc_pairs_step(struct kc_pairs *p, uint32_t n) {
  for (uint32_t i = 0; i < n && p->left > 0; ++i) {
    --p->left;
    if (++p->g == p->group) {
      p->g = 0;
      if (++p->inner == p->inner_count) {
        p->inner = 0;
        ++p->outer;
      }
    }
  }
}

// Starts the calling group's walk over |inner_count|-item rows with
// |group| heads per item.
KC_FN void kc_pairs_start(struct kc_pairs *p, uint64_t items,
                          uint32_t inner_count, uint32_t group) {
  uint64_t begin, end;
  kc_units(items, &begin, &end);
  p->left = (end - begin) * group;
  p->outer = (uint32_t)(begin / inner_count);
  p->inner = (uint32_t)(begin % inner_count);
  p->g = 0;
  p->inner_count = inner_count;
  p->group = group;
  kc_pairs_step(p, kc_group());
}

KC_FN bool kc_check_heads(const char *kernel, uint32_t n_heads,
                          uint32_t n_kv_heads, uint32_t head_dim) {
  if (!kc_check_block(kernel)) {
    return false;
  }
  if (n_heads == 0 || n_kv_heads == 0 || head_dim == 0) {
    KC_FAIL("%s: n_heads %u, n_kv_heads %u and head_dim %u must be positive",
            kernel, n_heads, n_kv_heads, head_dim);
    return false;
  }
  if (n_heads % n_kv_heads != 0) {
    KC_FAIL("%s: n_heads %u is not a multiple of n_kv_heads %u", kernel,
            n_heads, n_kv_heads);
    return false;
  }
  if (head_dim > ACCEL_KP_ATTN_MAX_HEAD_DIM ||
      (uint64_t)(n_heads / n_kv_heads) * head_dim >
          ACCEL_KP_ATTN_MAX_GROUP_FLOATS) {
    KC_FAIL("%s: head_dim %u (at most %u) times %u query heads per KV head "
            "exceeds %u",
            kernel, head_dim, ACCEL_KP_ATTN_MAX_HEAD_DIM,
            n_heads / n_kv_heads, ACCEL_KP_ATTN_MAX_GROUP_FLOATS);
    return false;
  }
  return true;
}

KC_FN kc_u128 kc_f32_bytes(uint64_t a, uint64_t b, uint64_t c) {
  return (kc_u128)a * b * c * 4u;
}

KC_KERNEL attention_prefill(const float *q, const float *k, const float *v,
                            float *out, uint64_t q_bytes, uint64_t k_bytes,
                            uint64_t v_bytes, uint64_t out_bytes,
                            accel_kp_attn_prefill_constants_t c) {
  const char *name = "attention_prefill";
  if (!kc_check_heads(name, c.n_heads, c.n_kv_heads, c.head_dim)) return;
  if (c.kv_len < c.q_len) {
    KC_FAIL("attention_prefill: kv_len %u is below q_len %u", c.kv_len,
            c.q_len);
    return;
  }
  kc_u128 qb = kc_f32_bytes(c.q_len, c.n_heads, c.head_dim);
  kc_u128 kvb = kc_f32_bytes(c.kv_len, c.n_kv_heads, c.head_dim);
  if (!kc_holds(name, 0, "q", q_bytes, qb) ||
      !kc_holds(name, 1, "k", k_bytes, kvb) ||
      !kc_holds(name, 2, "v", v_bytes, kvb) ||
      !kc_holds(name, 3, "out", out_bytes, qb)) {
    return;
  }
  uint32_t group = c.n_heads / c.n_kv_heads;
  struct kc_pairs pairs;
  kc_pairs_start(&pairs, (uint64_t)c.n_kv_heads * c.q_len, c.q_len, group);
  for (; pairs.left > 0; kc_pairs_step(&pairs, KC_GROUPS)) {
    uint32_t h = pairs.outer, row = pairs.inner, g = pairs.g;
    struct kc_kv src = {k + (uint64_t)h * c.head_dim,
                        v + (uint64_t)h * c.head_dim,
                        (uint64_t)c.n_kv_heads * c.head_dim, NULL, 1};
    uint64_t at = ((uint64_t)row * c.n_heads + (uint64_t)h * group + g) *
                  c.head_dim;
    kc_attend(q + at, c.head_dim, c.scale, &src, c.kv_len - c.q_len + row + 1,
              out + at);
  }
}

KC_KERNEL attention_decode(const float *q, const float *k, const float *v,
                           const uint32_t *context_lens, float *out,
                           uint64_t q_bytes, uint64_t k_bytes, uint64_t v_bytes,
                           uint64_t lens_bytes, uint64_t out_bytes,
                           accel_kp_attn_decode_constants_t c) {
  const char *name = "attention_decode";
  if (!kc_check_heads(name, c.n_heads, c.n_kv_heads, c.head_dim)) return;
  kc_u128 qb = kc_f32_bytes(c.num_seqs, c.n_heads, c.head_dim);
  kc_u128 kvb = kc_f32_bytes(c.num_seqs, c.max_len, c.n_kv_heads) * c.head_dim;
  if (!kc_holds(name, 0, "q", q_bytes, qb) ||
      !kc_holds(name, 1, "k", k_bytes, kvb) ||
      !kc_holds(name, 2, "v", v_bytes, kvb) ||
      !kc_holds(name, 3, "context_lens", lens_bytes, 4ull * c.num_seqs) ||
      !kc_holds(name, 4, "out", out_bytes, qb)) {
    return;
  }
  for (uint32_t s = 0; s < c.num_seqs; ++s) {
    if (context_lens[s] > c.max_len) {
      KC_FAIL("attention_decode: context_lens[%u] = %u exceeds max_len %u", s,
              context_lens[s], c.max_len);
      return;
    }
  }
  uint32_t group = c.n_heads / c.n_kv_heads;
  uint64_t stride = (uint64_t)c.n_kv_heads * c.head_dim;
  struct kc_pairs pairs;
  kc_pairs_start(&pairs, (uint64_t)c.num_seqs * c.n_kv_heads, c.n_kv_heads,
                 group);
  for (; pairs.left > 0; kc_pairs_step(&pairs, KC_GROUPS)) {
    uint32_t s = pairs.outer, h = pairs.inner, g = pairs.g;
    uint64_t seq = (uint64_t)s * c.max_len * stride + (uint64_t)h * c.head_dim;
    struct kc_kv src = {k + seq, v + seq, stride, NULL, 1};
    uint64_t at = ((uint64_t)s * c.n_heads + (uint64_t)h * group + g) *
                  c.head_dim;
    kc_attend(q + at, c.head_dim, c.scale, &src, context_lens[s], out + at);
  }
}

KC_KERNEL attention_paged_decode(
    const float *q, const float *k_cache, const float *v_cache,
    const uint32_t *block_tables, const uint32_t *context_lens, float *out,
    uint64_t q_bytes, uint64_t k_bytes, uint64_t v_bytes, uint64_t table_bytes,
    uint64_t lens_bytes, uint64_t out_bytes,
    accel_kp_attn_paged_constants_t c) {
  const char *name = "attention_paged_decode";
  if (!kc_check_heads(name, c.n_heads, c.n_kv_heads, c.head_dim)) return;
  if (c.block_size == 0) {
    KC_FAIL("attention_paged_decode: block_size is 0");
    return;
  }
  kc_u128 qb = kc_f32_bytes(c.num_seqs, c.n_heads, c.head_dim);
  kc_u128 cb =
      kc_f32_bytes(c.num_blocks, c.block_size, c.n_kv_heads) * c.head_dim;
  if (!kc_holds(name, 0, "q", q_bytes, qb) ||
      !kc_holds(name, 1, "k_cache", k_bytes, cb) ||
      !kc_holds(name, 2, "v_cache", v_bytes, cb) ||
      !kc_holds(name, 3, "block_tables", table_bytes,
                kc_f32_bytes(c.num_seqs, c.max_blocks_per_seq, 1)) ||
      !kc_holds(name, 4, "context_lens", lens_bytes, 4ull * c.num_seqs) ||
      !kc_holds(name, 5, "out", out_bytes, qb)) {
    return;
  }
  for (uint32_t s = 0; s < c.num_seqs; ++s) {
    uint32_t len = context_lens[s];
    if (len > (uint64_t)c.max_blocks_per_seq * c.block_size) {
      KC_FAIL("attention_paged_decode: context_lens[%u] = %u exceeds %u "
              "blocks of %u positions",
              s, len, c.max_blocks_per_seq, c.block_size);
      return;
    }
    const uint32_t *table = block_tables + (uint64_t)s * c.max_blocks_per_seq;
    uint32_t used = (uint32_t)(((uint64_t)len + c.block_size - 1) / c.block_size);
    for (uint32_t b = 0; b < used; ++b) {
      if (table[b] >= c.num_blocks) {
        KC_FAIL("attention_paged_decode: block_tables[%u][%u] = %u is outside "
                "the cache's %u blocks",
                s, b, table[b], c.num_blocks);
        return;
      }
    }
  }
  uint32_t group = c.n_heads / c.n_kv_heads;
  struct kc_pairs pairs;
  kc_pairs_start(&pairs, (uint64_t)c.num_seqs * c.n_kv_heads, c.n_kv_heads,
                 group);
  for (; pairs.left > 0; kc_pairs_step(&pairs, KC_GROUPS)) {
    uint32_t s = pairs.outer, h = pairs.inner, g = pairs.g;
    struct kc_kv src = {k_cache + (uint64_t)h * c.head_dim,
                        v_cache + (uint64_t)h * c.head_dim,
                        (uint64_t)c.n_kv_heads * c.head_dim,
                        block_tables + (uint64_t)s * c.max_blocks_per_seq,
                        c.block_size};
    uint64_t at = ((uint64_t)s * c.n_heads + (uint64_t)h * group + g) *
                  c.head_dim;
    kc_attend(q + at, c.head_dim, c.scale, &src, context_lens[s], out + at);
  }
}

KC_KERNEL paged_kv_append(const float *k_new, const float *v_new,
                          const int32_t *slot_mapping, float *k_cache,
                          float *v_cache, uint64_t k_new_bytes,
                          uint64_t v_new_bytes, uint64_t slots_bytes,
                          uint64_t k_cache_bytes, uint64_t v_cache_bytes,
                          accel_kp_kv_append_constants_t c) {
  const char *name = "paged_kv_append";
  if (!kc_check_block(name)) return;
  if (c.n_kv_heads == 0 || c.head_dim == 0 || c.block_size == 0) {
    KC_FAIL("paged_kv_append: n_kv_heads %u, head_dim %u and block_size %u "
            "must be positive",
            c.n_kv_heads, c.head_dim, c.block_size);
    return;
  }
  uint64_t row = (uint64_t)c.n_kv_heads * c.head_dim;
  uint64_t slots = (uint64_t)c.num_blocks * c.block_size;
  kc_u128 nb = kc_f32_bytes(c.tokens, c.n_kv_heads, c.head_dim);
  kc_u128 cb =
      kc_f32_bytes(c.num_blocks, c.block_size, c.n_kv_heads) * c.head_dim;
  if (!kc_holds(name, 0, "k_new", k_new_bytes, nb) ||
      !kc_holds(name, 1, "v_new", v_new_bytes, nb) ||
      !kc_holds(name, 2, "slot_mapping", slots_bytes, 4ull * c.tokens) ||
      !kc_holds(name, 3, "k_cache", k_cache_bytes, cb) ||
      !kc_holds(name, 4, "v_cache", v_cache_bytes, cb)) {
    return;
  }
  for (uint32_t t = 0; t < c.tokens; ++t) {
    if (slot_mapping[t] < -1 || (int64_t)slot_mapping[t] >= (int64_t)slots) {
      KC_FAIL("paged_kv_append: slot_mapping[%u] = %d is outside the cache's "
              "%llu slots (-1 skips a token)",
              t, slot_mapping[t], (unsigned long long)slots);
      return;
    }
  }
  uint64_t begin, end;
  kc_units(c.tokens, &begin, &end);
  for (uint64_t t = begin + kc_group(); t < end; t += KC_GROUPS) {
    if (slot_mapping[t] < 0) continue;
    uint64_t at = (uint64_t)slot_mapping[t] * row;
    for (uint64_t i = kc_lane(); i < row; i += KC_LANES) {
      k_cache[at + i] = k_new[t * row + i];
      v_cache[at + i] = v_new[t * row + i];
    }
  }
}
