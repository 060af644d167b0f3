// Gather and selection reference kernels in CUDA: embedding, argmax, topk
// (kernels/README.md, "Gather and selection"). No arithmetic: results are
// exact and order-free. Unit: one token / one row, one 16-lane group each.
#include "kc_common.cuh"

KC_KERNEL embedding(const void *table, const int32_t *ids, float *out,
                    uint64_t table_bytes, uint64_t ids_bytes,
                    uint64_t out_bytes, accel_kp_embedding_constants_t c) {
  if (!kc_check_block("embedding")) return;
  if (c.dtype < ACCEL_KP_DTYPE_F32 || c.dtype > ACCEL_KP_DTYPE_BF16) {
    KC_FAIL("embedding: dtype %u must be 1 (f32), 2 (f16) or 3 (bf16)",
            c.dtype);
    return;
  }
  uint32_t esize = c.dtype == ACCEL_KP_DTYPE_F32 ? 4u : 2u;
  if (!kc_holds("embedding", 0, "table", table_bytes,
                (kc_u128)c.vocab * c.dim * esize) ||
      !kc_holds("embedding", 1, "ids", ids_bytes, 4ull * c.tokens) ||
      !kc_holds("embedding", 2, "out", out_bytes,
                (kc_u128)c.tokens * c.dim * 4u)) {
    return;
  }
  uint64_t begin, end;
  kc_units(c.tokens, &begin, &end);
  for (uint64_t t = begin; t < end; ++t) {
    if (ids[t] < 0 || (uint32_t)ids[t] >= c.vocab) {
      KC_FAIL("embedding: token %llu has id %d, outside the vocabulary of %u",
              (unsigned long long)t, ids[t], c.vocab);
      return;
    }
  }
  for (uint64_t t = begin + kc_group(); t < end; t += KC_GROUPS) {
    uint64_t row = (uint64_t)ids[t] * c.dim;
    for (uint64_t j = kc_lane(); j < c.dim; j += KC_LANES) {
      out[t * c.dim + j] = kc_load(table, c.dtype, row + j);
    }
  }
}

// kp_ranks_before (kp_math.h) is the ranking: argmax is its first entry,
// since an all-NaN row's first entry is index 0.

// Keeps in (*v, *i) the better of itself and (ov, oi); index -1 is none.
KC_FN void kc_keep_better(float *v, int64_t *i, float ov, int64_t oi) {
  if (oi >= 0 && (*i < 0 || kp_ranks_before(ov, oi, *v, *i))) {
    *v = ov;
    *i = oi;
  }
}

// The best candidate of the group's 16 lanes, to every lane.
KC_FN void kc_best16(float *v, int64_t *i) {
  uint32_t mask = kc_group_mask();
  for (uint32_t w = KC_LANES / 2; w >= 1; w /= 2) {
    float ov = __shfl_xor_sync(mask, *v, w, KC_LANES);
    int64_t oi = __shfl_xor_sync(mask, *i, w, KC_LANES);
    kc_keep_better(v, i, ov, oi);
  }
}

KC_KERNEL argmax(const float *x, int32_t *out, uint64_t x_bytes,
                 uint64_t out_bytes, accel_kp_select_constants_t c) {
  if (!kc_check_block("argmax")) return;
  if (c.reserved != 0) {
    KC_FAIL("argmax: k %u must be 1 to min(cols %u, %u); reserved 0", c.k,
            c.cols, ACCEL_KP_TOPK_MAX);
    return;
  }
  if (c.rows != 0 && c.cols == 0) {
    KC_FAIL("argmax: rows of 0 columns have no maximum");
    return;
  }
  if (!kc_holds("argmax", 0, "x", x_bytes, (kc_u128)c.rows * c.cols * 4u) ||
      !kc_holds("argmax", 1, "out", out_bytes, 4ull * c.rows)) {
    return;
  }
  uint64_t begin, end;
  kc_units(c.rows, &begin, &end);
  for (uint64_t row = begin + kc_group(); row < end; row += KC_GROUPS) {
    const float *xr = x + row * c.cols;
    float v = 0.0f;
    int64_t best = -1;
    for (uint64_t i = kc_lane(); i < c.cols; i += KC_LANES) {
      kc_keep_better(&v, &best, xr[i], (int64_t)i);
    }
    kc_best16(&v, &best);
    if (kc_lane() == 0) {
      out[row] = (int32_t)(best < 0 ? 0 : best);
    }
  }
}

// The k best of each row by that ranking, in ranking order. Selection: for
// each output in turn, every lane finds the best of its columns that ranks
// after the previous output, and the group keeps the best of its lanes.
// Exact, so the host kernel's bits (not its speed: O(k cols / 16) per row).
KC_KERNEL topk(const float *x, float *values, int32_t *indices,
               uint64_t x_bytes, uint64_t values_bytes,
               uint64_t indices_bytes, accel_kp_select_constants_t c) {
  if (!kc_check_block("topk")) return;
  if (c.reserved != 0 ||
      (c.rows != 0 && (c.k < 1 || c.k > c.cols || c.k > ACCEL_KP_TOPK_MAX))) {
    KC_FAIL("topk: k %u must be 1 to min(cols %u, %u); reserved 0", c.k,
            c.cols, ACCEL_KP_TOPK_MAX);
    return;
  }
  kc_u128 out = (kc_u128)c.rows * c.k * 4u;
  if (!kc_holds("topk", 0, "x", x_bytes, (kc_u128)c.rows * c.cols * 4u) ||
      !kc_holds("topk", 1, "values", values_bytes, out) ||
      !kc_holds("topk", 2, "indices", indices_bytes, out)) {
    return;
  }
  uint64_t begin, end;
  kc_units(c.rows, &begin, &end);
  for (uint64_t row = begin + kc_group(); row < end; row += KC_GROUPS) {
    const float *xr = x + row * c.cols;
    float prev_v = 0.0f;
    int64_t prev_i = -1;
    for (uint32_t o = 0; o < c.k; ++o) {
      float v = 0.0f;
      int64_t best = -1;
      for (uint64_t i = kc_lane(); i < c.cols; i += KC_LANES) {
        float xv = xr[i];
        if (prev_i < 0 || kp_ranks_before(prev_v, prev_i, xv, (int64_t)i)) {
          kc_keep_better(&v, &best, xv, (int64_t)i);
        }
      }
      kc_best16(&v, &best);
      if (kc_lane() == 0) {
        values[row * c.k + o] = v;
        indices[row * c.k + o] = (int32_t)best;
      }
      prev_v = v;
      prev_i = best;
    }
  }
}
