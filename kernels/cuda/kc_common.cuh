// Shared helpers of the CUDA reference kernels (kernels/README.md, "CUDA
// kernels"): the grid-to-units split of every reference kernel, the fixed
// 16-lane reduction on a half-warp, launch checks, and dtype conversions.
// Compiles with nvcc (-fmad=false) and with the host C++ compiler for the
// SIMT emulator (simt.h).
//
// Every kernel runs with blockDim (128, 1, 1): eight groups of 16 lanes (a
// half-warp each). A 16-lane group computes one output of a reduction: lane l
// accumulates the terms i with i % 16 == l in increasing i, then the group
// folds with __shfl_down_sync at offsets 8, 4, 2, 1 (lane l adds lane l + w),
// exactly the host kernels' kp_fold. With -fmad=false every * and + rounds on
// its own, so these kernels give the host kernels' bits.
#ifndef ACCEL_KERNELS_CUDA_KC_COMMON_CUH_
#define ACCEL_KERNELS_CUDA_KC_COMMON_CUH_

#include "simt.h"

#ifdef __CUDACC__
#include <stdio.h>
#endif

#define KP_MATH_FN __device__ static __forceinline__
#define ACCEL_KP_FN __host__ __device__ static inline
// The parameter headers are C; C++ spells their layout pins static_assert.
#define _Static_assert static_assert
#include "attention_params.h"
#include "kernel_params.h"
#include "kp_math.h"
#undef _Static_assert

// The block every reference kernel is launched with (the executable's
// workgroup_size; the host kernels ignore it).
#define KC_BLOCK 128u
#define KC_LANES 16u
#define KC_GROUPS (KC_BLOCK / KC_LANES)

#ifdef __CUDACC__
#define KC_KERNEL extern "C" __global__ void __launch_bounds__(KC_BLOCK)
#else
#define KC_KERNEL static void
#endif
#define KC_FN __device__ static __forceinline__

typedef unsigned __int128 kc_u128;

// This block's units [*begin, *end) of |units| (kp_units of the host
// kernels: block g of G computes [g U / G, (g + 1) U / G)). In 64 bits
// (kc_check_block keeps G below 2^32): g U / G = g (U / G) + g (U % G) / G,
// and g (U % G) < 2^64. A 128-bit division would be a call, whose saved
// registers count as spills.
KC_FN uint64_t kc_unit_start(uint64_t g, uint64_t groups, uint64_t units) {
  return g * (units / groups) + g * (units % groups) / groups;
}
KC_FN void kc_units(uint64_t units, uint64_t *begin, uint64_t *end) {
  uint64_t groups = (uint64_t)gridDim.x * gridDim.y * gridDim.z;
  uint64_t g = blockIdx.x +
               (uint64_t)gridDim.x * (blockIdx.y + (uint64_t)gridDim.y * blockIdx.z);
  *begin = kc_unit_start(g, groups, units);
  *end = kc_unit_start(g + 1, groups, units);
}

// The calling thread's 16-lane group (0..7), its lane (0..15) and the warp
// mask of its group.
KC_FN uint32_t kc_group(void) { return threadIdx.x / KC_LANES; }
KC_FN uint32_t kc_lane(void) { return threadIdx.x % KC_LANES; }
KC_FN uint32_t kc_group_mask(void) {
  return 0xffffu << (16u * (kc_group() & 1u));
}

// Folds the 16 lanes of the group in the fixed order and returns the sum to
// every lane of the group.
KC_FN float kc_fold16(float v) {
  uint32_t mask = kc_group_mask();
  for (uint32_t w = KC_LANES / 2; w >= 1; w /= 2) {
    v = v + __shfl_down_sync(mask, v, w, KC_LANES);
  }
  return __shfl_sync(mask, v, 0, KC_LANES);
}

// The largest of the group's values (NaN ignored), to every lane.
KC_FN float kc_max16(float v) {
  uint32_t mask = kc_group_mask();
  for (uint32_t w = KC_LANES / 2; w >= 1; w /= 2) {
    float o = __shfl_xor_sync(mask, v, w, KC_LANES);
    v = o > v ? o : v;
  }
  return v;
}

// Checks the launch shape; every kernel calls it first.
KC_FN bool kc_check_block(const char *kernel) {
  if (blockDim.x != KC_BLOCK || blockDim.y != 1 || blockDim.z != 1) {
    KC_FAIL("%s: blockDim is (%u, %u, %u), the kernel needs (%u, 1, 1)",
            kernel, blockDim.x, blockDim.y, blockDim.z, KC_BLOCK);
    return false;
  }
  uint64_t groups = (uint64_t)gridDim.x * gridDim.y * gridDim.z;
  if (groups > 0xffffffffull) {
    KC_FAIL("%s: gridDim (%u, %u, %u) has more than 2^32 - 1 blocks", kernel,
            gridDim.x, gridDim.y, gridDim.z);
    return false;
  }
  return true;
}

// Checks that binding |index| (|name|) of |bytes| holds |need| bytes.
KC_FN bool kc_holds(const char *kernel, uint32_t index, const char *name,
                    uint64_t bytes, kc_u128 need) {
  if ((kc_u128)bytes >= need) {
    return true;
  }
  KC_FAIL("%s: binding %u (%s) holds %llu bytes, the constants need %llu",
          kernel, index, name, (unsigned long long)bytes,
          need > (kc_u128)UINT64_MAX ? (unsigned long long)UINT64_MAX
                                     : (unsigned long long)need);
  return false;
}

// Element |i| of a table of |dtype| (f32, f16 or bf16) as f32.
KC_FN float kc_load(const void *p, uint32_t dtype, uint64_t i) {
  if (dtype == ACCEL_KP_DTYPE_F32) {
    return ((const float *)p)[i];
  }
  uint16_t h = ((const uint16_t *)p)[i];
  return dtype == ACCEL_KP_DTYPE_BF16 ? accel_kp_bf16_to_f32(h)
                                     : accel_kp_f16_to_f32(h);
}

#endif  // ACCEL_KERNELS_CUDA_KC_COMMON_CUH_
