// matmul reference kernel in CUDA (kernels/README.md, "matmul";
// kernels/host/matmul_kernels.c): c = act(op(a) op(b) + bias), f32 output,
// operands f32, f16 or bf16 (widened exactly). Units are the host kernel's
// tiles (tile_m x tile_n, the same defaults); the block walks each of its
// tiles in 32 x 32 sub-tiles, staging 32 x 16 slices of op(a) and 16 x 32
// of op(b) in shared memory. Every element is one f32 accumulator over k in
// increasing order (products rounded, then added: -fmad=false), so the
// result is bit-reproducible for any grid; it is not OpenBLAS's order, and
// matches the host kernel within the tolerance kernels/README.md states.
// When both operands are f16 or both bf16, the sub-tiles run on tensor cores
// (WMMA 16 x 16 x 16 with f32 accumulators, kc_mm_sub_tc): the same units
// and tiles, each 32 x 32 sub-tile one 16 x 16 fragment per warp.
#include "kc_common.cuh"

#define KC_MM_SUB 32u  // sub-tile edge
#define KC_MM_K 16u    // k per shared-memory stage

KC_FN float kc_mm_act(float v, uint32_t activation) {
  switch (activation) {
    case ACCEL_KP_ACT_GELU_TANH:
      return kp_gelu_tanh(v);
    case ACCEL_KP_ACT_GELU_ERF:
      return kp_gelu_erf(v);
    case ACCEL_KP_ACT_SILU:
      return kp_silu(v);
    default:
      return v;
  }
}

KC_FN uint32_t kc_dtype_bytes(uint32_t dtype) {
  return dtype == ACCEL_KP_DTYPE_F32 ? 4u : 2u;
}

KC_FN bool kc_mm_check(const accel_kp_matmul_constants_t *c, uint64_t a_bytes,
                       uint64_t b_bytes, uint64_t bias_bytes,
                       uint64_t c_bytes) {
  if (!kc_check_block("matmul")) {
    return false;
  }
  const uint32_t known =
      ACCEL_KP_MM_TRANS_A | ACCEL_KP_MM_TRANS_B | ACCEL_KP_MM_BIAS;
  if (c->dtype_a < ACCEL_KP_DTYPE_F32 || c->dtype_a > ACCEL_KP_DTYPE_BF16 ||
      c->dtype_b < ACCEL_KP_DTYPE_F32 || c->dtype_b > ACCEL_KP_DTYPE_BF16) {
    KC_FAIL("matmul dtypes %u x %u: each must be 1 (f32), 2 (f16) or 3 "
            "(bf16)",
            c->dtype_a, c->dtype_b);
    return false;
  }
  if ((c->flags & ~known) != 0 || c->activation >= ACCEL_KP_ACT_COUNT ||
      c->reserved[0] != 0 || c->reserved[1] != 0 || c->reserved[2] != 0) {
    KC_FAIL("matmul flags 0x%x, activation %u or reserved fields not valid",
            c->flags, c->activation);
    return false;
  }
  if (c->m > INT32_MAX || c->n > INT32_MAX || c->k > INT32_MAX) {
    KC_FAIL("matmul %u x %u x %u exceeds the int range", c->m, c->n, c->k);
    return false;
  }
  return kc_holds("matmul", 0, "a", a_bytes,
                  (kc_u128)c->m * c->k * kc_dtype_bytes(c->dtype_a)) &&
         kc_holds("matmul", 1, "b", b_bytes,
                  (kc_u128)c->k * c->n * kc_dtype_bytes(c->dtype_b)) &&
         kc_holds("matmul", 2, "bias", bias_bytes,
                  (c->flags & ACCEL_KP_MM_BIAS) ? 4ull * c->n : 0) &&
         kc_holds("matmul", 3, "c", c_bytes, (kc_u128)c->m * c->n * 4u);
}

// One 32 x 32 sub-tile at (r0, c0), clipped to (r1, c1). Thread t computes
// column c0 + t % 32 of rows r0 + (t / 32) * 8 + 0..7.
KC_FN void kc_mm_sub(const void *a, const void *b, const float *bias, float *c,
                     const accel_kp_matmul_constants_t *k, uint64_t r0,
                     uint64_t c0, uint64_t r1, uint64_t c1) {
  __shared__ float as[KC_MM_SUB][KC_MM_K + 1];
  __shared__ float bs[KC_MM_K][KC_MM_SUB + 1];
  bool ta = (k->flags & ACCEL_KP_MM_TRANS_A) != 0;
  bool tb = (k->flags & ACCEL_KP_MM_TRANS_B) != 0;
  uint32_t t = threadIdx.x, col = t % KC_MM_SUB, row0 = t / KC_MM_SUB * 8u;
  float acc[8];
  for (int r = 0; r < 8; ++r) acc[r] = 0.0f;
  for (uint64_t k0 = 0; k0 < k->k; k0 += KC_MM_K) {
    // Stage op(a)[r0.., k0..] and op(b)[k0.., c0..]; zeros outside.
    for (uint32_t e = t; e < KC_MM_SUB * KC_MM_K; e += KC_BLOCK) {
      uint32_t i = e / KC_MM_K, kk = e % KC_MM_K;
      uint64_t gi = r0 + i, gk = k0 + kk;
      as[i][kk] = gi < r1 && gk < k->k
                      ? kc_load(a, k->dtype_a, ta ? gk * k->m + gi : gi * k->k + gk)
                      : 0.0f;
      uint32_t kb = e / KC_MM_SUB, j = e % KC_MM_SUB;
      uint64_t gj = c0 + j, gkb = k0 + kb;
      bs[kb][j] = gj < c1 && gkb < k->k
                      ? kc_load(b, k->dtype_b, tb ? gj * k->k + gkb : gkb * k->n + gj)
                      : 0.0f;
    }
    __syncthreads();  // the stage is complete before anyone reads it
    for (uint32_t kk = 0; kk < KC_MM_K; ++kk) {
      float bv = bs[kk][col];
      for (int r = 0; r < 8; ++r) acc[r] = acc[r] + as[row0 + r][kk] * bv;
    }
    __syncthreads();  // everyone has read the stage before it is replaced
  }
  uint64_t gj = c0 + col;
  if (gj >= c1) return;
  for (int r = 0; r < 8; ++r) {
    uint64_t gi = r0 + row0 + r;
    if (gi >= r1) break;
    float v = acc[r];
    if (k->flags & ACCEL_KP_MM_BIAS) v = v + bias[gj];
    c[gi * k->n + gj] = kc_mm_act(v, k->activation);
  }
}

// The same sub-tile on tensor cores, for operands that are both f16 or
// both bf16 (type T): 32 x 16 slices of op(a) and 16 x 32 of op(b) staged in
// shared memory as their 16-bit values (zeros outside), warp w computing the
// 16 x 16 block (w / 2, w % 2) with one accumulator fragment over k in steps
// of 16, then the epilogue (bias, activation) from a shared f32 tile.
template <typename T>
KC_FN void kc_mm_sub_tc(const void *a, const void *b, const float *bias,
                        float *c, const accel_kp_matmul_constants_t *k,
                        uint64_t r0, uint64_t c0, uint64_t r1, uint64_t c1) {
  namespace wmma = nvcuda::wmma;
  __shared__ __align__(32) uint16_t as16[KC_MM_SUB * KC_MM_K];
  __shared__ __align__(32) uint16_t bs16[KC_MM_K * KC_MM_SUB];
  __shared__ __align__(32) float cs[KC_MM_SUB * KC_MM_SUB];
  const uint16_t *a16 = (const uint16_t *)a, *b16 = (const uint16_t *)b;
  bool ta = (k->flags & ACCEL_KP_MM_TRANS_A) != 0;
  bool tb = (k->flags & ACCEL_KP_MM_TRANS_B) != 0;
  uint32_t t = threadIdx.x, w = t / 32u, wr = w / 2u, wc = w % 2u;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (uint64_t k0 = 0; k0 < k->k; k0 += KC_MM_K) {
    for (uint32_t e = t; e < KC_MM_SUB * KC_MM_K; e += KC_BLOCK) {
      uint32_t i = e / KC_MM_K, kk = e % KC_MM_K;
      uint64_t gi = r0 + i, gk = k0 + kk;
      as16[e] = gi < r1 && gk < k->k
                    ? a16[ta ? gk * k->m + gi : gi * k->k + gk]
                    : (uint16_t)0;
      uint32_t kb = e / KC_MM_SUB, j = e % KC_MM_SUB;
      uint64_t gj = c0 + j, gkb = k0 + kb;
      bs16[e] = gj < c1 && gkb < k->k
                    ? b16[tb ? gj * k->k + gkb : gkb * k->n + gj]
                    : (uint16_t)0;
    }
    __syncthreads();  // the stage is complete before any warp loads it
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
    wmma::load_matrix_sync(fa, (const T *)as16 + wr * 16u * KC_MM_K, KC_MM_K);
    wmma::load_matrix_sync(fb, (const T *)bs16 + wc * 16u, KC_MM_SUB);
    wmma::mma_sync(acc, fa, fb, acc);
    __syncthreads();  // every warp has loaded the stage before it is replaced
  }
  wmma::store_matrix_sync(cs + wr * 16u * KC_MM_SUB + wc * 16u, acc, KC_MM_SUB,
                          wmma::mem_row_major);
  __syncthreads();  // the whole tile is stored before the epilogue reads it
  for (uint32_t e = t; e < KC_MM_SUB * KC_MM_SUB; e += KC_BLOCK) {
    uint64_t gi = r0 + e / KC_MM_SUB, gj = c0 + e % KC_MM_SUB;
    if (gi < r1 && gj < c1) {
      float v = cs[e];
      if (k->flags & ACCEL_KP_MM_BIAS) v = v + bias[gj];
      c[gi * k->n + gj] = kc_mm_act(v, k->activation);
    }
  }
  __syncthreads();  // the epilogue has read the tile before the next stores
}

KC_KERNEL matmul(const void *a, const void *b, const float *bias, float *c,
                 uint64_t a_bytes, uint64_t b_bytes, uint64_t bias_bytes,
                 uint64_t c_bytes, accel_kp_matmul_constants_t k) {
  if (!kc_mm_check(&k, a_bytes, b_bytes, bias_bytes, c_bytes)) return;
  uint64_t tm = k.tile_m ? k.tile_m : ACCEL_KP_MM_DEFAULT_TILE_M(k.m, k.n);
  uint64_t tn = k.tile_n ? k.tile_n : ACCEL_KP_MM_DEFAULT_TILE_N(k.m, k.n);
  uint64_t tiles_n = (k.n + tn - 1) / tn;
  // Tensor cores: both operands f16, or both bf16.
  bool tensor = k.dtype_a == k.dtype_b && k.dtype_a != ACCEL_KP_DTYPE_F32;
  uint64_t begin, end;
  kc_units(accel_kp_matmul_units(&k), &begin, &end);
  for (uint64_t u = begin; u < end; ++u) {
    uint64_t tr0 = u / tiles_n * tm, tc0 = u % tiles_n * tn;
    uint64_t tr1 = tr0 + tm < k.m ? tr0 + tm : k.m;
    uint64_t tc1 = tc0 + tn < k.n ? tc0 + tn : k.n;
    for (uint64_t r0 = tr0; r0 < tr1; r0 += KC_MM_SUB) {
      for (uint64_t c0 = tc0; c0 < tc1; c0 += KC_MM_SUB) {
        if (tensor && k.dtype_a == ACCEL_KP_DTYPE_BF16) {
          kc_mm_sub_tc<__nv_bfloat16>(a, b, bias, c, &k, r0, c0, tr1, tc1);
        } else if (tensor) {
          kc_mm_sub_tc<__half>(a, b, bias, c, &k, r0, c0, tr1, tc1);
        } else {
          kc_mm_sub(a, b, bias, c, &k, r0, c0, tr1, tc1);
        }
      }
    }
  }
}
