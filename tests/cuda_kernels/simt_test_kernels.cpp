// Kernels written to break CUDA's rules, for the emulator's own tests
// (cuda_kernels_test.c): the emulator must catch each.
#include <string.h>

#include "simt.h"
#include "simt_emulator.h"

namespace {

// out[i] = in[n - 1 - i] through shared memory, with (correct) or without
// (planted bug) the barrier between the writes and the reads.
template <bool kBarrier>
void reverse(const float *in, float *out) {
  __shared__ float s[256];
  unsigned t = threadIdx.x, n = blockDim.x;
  s[t] = in[blockIdx.x * n + t];
  if (kBarrier) __syncthreads();
  out[blockIdx.x * n + t] = s[n - 1 - t];
}

void reverse_ok(const float *in, float *out) { reverse<true>(in, out); }
void reverse_racy(const float *in, float *out) { reverse<false>(in, out); }

// A warp sum with __shfl_xor_sync over the full warp, every lane gets it.
void warp_sum(const float *in, float *out) {
  float v = in[threadIdx.x];
  for (int w = 16; w >= 1; w /= 2) v += __shfl_xor_sync(0xffffffffu, v, w);
  out[threadIdx.x] = v;
  unsigned ballot = __ballot_sync(0xffffffffu, in[threadIdx.x] > 0.0f);
  if (threadIdx.x == 0) memcpy(out + 32, &ballot, sizeof(ballot));
}

// Lanes disagree on the mask of a shuffle.
void mask_mismatch(const float *in, float *out) {
  unsigned mask = threadIdx.x < 16 ? 0x0000ffffu : 0xffffffffu;
  out[threadIdx.x] = __shfl_down_sync(mask, in[threadIdx.x], 1);
}

// Lanes 16..31 wait at a warp barrier naming lanes 0..15, which wait at
// __syncthreads with the rest of the block.
void deadlock(const float *in, float *out) {
  if (threadIdx.x >= 16 && threadIdx.x < 32) {
    __syncwarp(0xffffffffu);
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = in[threadIdx.x];
}

// One warp per block: out = A B^T through WMMA (A row-major, B loaded as a
// col_major matrix_b: the fragment is B^T), with A and B the block's two
// 16 x 16 floats of |in| (small integers: exact in bf16 and in f32).
void wmma_product(const float *in, float *out) {
  namespace wmma = nvcuda::wmma;
  __shared__ __align__(32) __nv_bfloat16 a[256], b[256];
  __shared__ __align__(32) float c[256];
  const float *x = in + blockIdx.x * 512;
  for (unsigned e = threadIdx.x; e < 256; e += 32) {
    uint32_t bits;
    memcpy(&bits, &x[e], 4);
    a[e].bits = (uint16_t)(bits >> 16);
    memcpy(&bits, &x[256 + e], 4);
    b[e].bits = (uint16_t)(bits >> 16);
  }
  __syncwarp();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.5f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
  __syncwarp();
  for (unsigned e = threadIdx.x; e < 256; e += 32) {
    out[blockIdx.x * 256 + e] = c[e];
  }
}

// Lanes pass different addresses to a warp-collective WMMA load.
void wmma_lanes_disagree(const float *in, float *out) {
  namespace wmma = nvcuda::wmma;
  __shared__ __align__(32) __half h[512];
  for (unsigned e = threadIdx.x; e < 512; e += 32) h[e].bits = 0;
  __syncwarp();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, h + threadIdx.x % 32u, 16);
  out[threadIdx.x] = in[threadIdx.x];
}

template <auto F>
void run2(void **params) {
  F(*static_cast<const float **>(params[0]), *static_cast<float **>(params[1]));
}

const accel_simt_kernel_t k_test_kernels[] = {
    {"reverse_ok", 2, run2<reverse_ok>, nullptr, nullptr},
    {"reverse_racy", 2, run2<reverse_racy>, nullptr, nullptr},
    {"warp_sum", 2, run2<warp_sum>, nullptr, nullptr},
    {"mask_mismatch", 2, run2<mask_mismatch>, nullptr, nullptr},
    {"deadlock", 2, run2<deadlock>, nullptr, nullptr},
    {"wmma_product", 2, run2<wmma_product>, nullptr, nullptr},
    {"wmma_lanes_disagree", 2, run2<wmma_lanes_disagree>, nullptr, nullptr},
};

}  // namespace

extern "C" const accel_simt_kernel_t *simt_test_kernel(const char *name);
extern "C" const accel_simt_kernel_t *simt_test_kernel(const char *name) {
  for (const accel_simt_kernel_t &k : k_test_kernels) {
    if (strcmp(k.name, name) == 0) return &k;
  }
  return nullptr;
}
