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

// The better of two candidates (value, index): larger value, numbers before
// NaN, lower index on ties; index -1 is no candidate.
KC_FN void kc_better(float *v, int64_t *i, float ov, int64_t oi) {
  if (oi < 0) return;
  bool take = *i < 0 || (ov > *v) || (ov == *v && oi < *i) ||
              (*v != *v && ov == ov) || (*v != *v && ov != ov && oi < *i);
  if (take) {
    *v = ov;
    *i = oi;
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
  uint32_t mask = kc_group_mask();
  for (uint64_t row = begin + kc_group(); row < end; row += KC_GROUPS) {
    const float *xr = x + row * c.cols;
    float v = 0.0f;
    int64_t best = -1;
    for (uint64_t i = kc_lane(); i < c.cols; i += KC_LANES) {
      kc_better(&v, &best, xr[i], (int64_t)i);
    }
    for (uint32_t w = KC_LANES / 2; w >= 1; w /= 2) {
      float ov = __shfl_xor_sync(mask, v, w, KC_LANES);
      int64_t oi = __shfl_xor_sync(mask, best, w, KC_LANES);
      kc_better(&v, &best, ov, oi);
    }
    if (kc_lane() == 0) {
      out[row] = (int32_t)(best < 0 ? 0 : best);
    }
  }
}

// 1 when (va, ia) ranks before (vb, ib): larger value, numbers before NaN,
// lower index on ties (the host kernel's ranking, a total order).
KC_FN bool kc_ranks_before(float va, int64_t ia, float vb, int64_t ib) {
  bool na = va != va, nb = vb != vb;
  if (na != nb) return nb;
  if (!na && va != vb) return va > vb;
  return ia < ib;
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
  uint32_t mask = kc_group_mask();
  for (uint64_t row = begin + kc_group(); row < end; row += KC_GROUPS) {
    const float *xr = x + row * c.cols;
    float prev_v = 0.0f;
    int64_t prev_i = -1;
    for (uint32_t o = 0; o < c.k; ++o) {
      float v = 0.0f;
      int64_t best = -1;
      for (uint64_t i = kc_lane(); i < c.cols; i += KC_LANES) {
        float xv = xr[i];
        if ((prev_i < 0 || kc_ranks_before(prev_v, prev_i, xv, (int64_t)i)) &&
            (best < 0 || kc_ranks_before(xv, (int64_t)i, v, best))) {
          v = xv;
          best = (int64_t)i;
        }
      }
      for (uint32_t w = KC_LANES / 2; w >= 1; w /= 2) {
        float ov = __shfl_xor_sync(mask, v, w, KC_LANES);
        int64_t oi = __shfl_xor_sync(mask, best, w, KC_LANES);
        if (oi >= 0 && (best < 0 || kc_ranks_before(ov, oi, v, best))) {
          v = ov;
          best = oi;
        }
      }
      if (kc_lane() == 0) {
        values[row * c.k + o] = v;
        indices[row * c.k + o] = (int32_t)best;
      }
      prev_v = v;
      prev_i = best;
    }
  }
}
