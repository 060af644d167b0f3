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
};

}  // namespace

extern "C" const accel_simt_kernel_t *simt_test_kernel(const char *name);
extern "C" const accel_simt_kernel_t *simt_test_kernel(const char *name) {
  for (const accel_simt_kernel_t &k : k_test_kernels) {
    if (strcmp(k.name, name) == 0) return &k;
  }
  return nullptr;
}
