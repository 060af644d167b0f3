// The CUDA dialect the reference kernels (kernels/cuda/*.cu) are written in,
// for two compilers:
//
// - nvcc (__CUDACC__ defined): nothing is redefined; the kernels are CUDA C.
// - the host C++ compiler: the same source becomes ordinary C++ that runs on
//   the SIMT emulator of the tests (tests/cuda_kernels/simt_emulator.cpp).
//   Each CUDA thread is a fiber; threadIdx, blockIdx, blockDim and gridDim
//   are the running fiber's; __shared__ variables live in one ELF section
//   ("accel_simt_shared") that the emulator poisons before every block (a
//   read of shared memory that no barrier made valid sees NaN, not a stale
//   value); __syncthreads() is a barrier of the block's fibers; the warp
//   functions (__shfl_*_sync, __ballot_sync, __any_sync, __all_sync,
//   __syncwarp) wait for every lane of their mask and check that each lane
//   passed the same mask; atomics are the compiler's atomic builtins.
//
// What the emulator cannot see (docs/cuda-backend.md, "The SIMT emulator"):
// the memory model between blocks (blocks run one after another), timing,
// occupancy and register limits, and the device's own math library (the
// emulator links glibc's sqrtf/erff/cos/sin/pow).
//
// A kernel reports a bad launch with KC_FAIL(format, ...): on the GPU thread
// 0 of the block prints the message and the kernel traps (the launch fails
// and the CUDA backend marks the device lost, docs/cuda-backend.md); in the
// emulator the launch fails with the message. Either way the calling thread
// returns at once after KC_FAIL.
#ifndef ACCEL_KERNELS_CUDA_SIMT_H_
#define ACCEL_KERNELS_CUDA_SIMT_H_

#include <stdint.h>

#ifdef __CUDACC__

#define KC_EMULATED 0
// One printf call: arguments live across a second call would be spilled.
#define KC_FAIL(format, ...)                                              \
  do {                                                                    \
    if (threadIdx.x == 0) {                                               \
      printf("accel kernel assertion failed: " format "\n", ##__VA_ARGS__); \
    }                                                                     \
    __trap();                                                             \
  } while (0)

#else  // the host compiler: the SIMT emulator

#include <math.h>
#include <string.h>

#define KC_EMULATED 1

struct accel_simt_dim3 {
  unsigned int x, y, z;
};
typedef struct accel_simt_dim3 dim3;
typedef struct accel_simt_dim3 uint3;

// The running fiber's coordinates (valid only inside a kernel).
typedef struct accel_simt_coords {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
} accel_simt_coords_t;

// Warp operations the emulator resolves at the warp barrier.
enum accel_simt_warp_op {
  ACCEL_SIMT_SHFL_IDX = 0,
  ACCEL_SIMT_SHFL_UP = 1,
  ACCEL_SIMT_SHFL_DOWN = 2,
  ACCEL_SIMT_SHFL_XOR = 3,
  ACCEL_SIMT_BALLOT = 4,
  ACCEL_SIMT_ANY = 5,
  ACCEL_SIMT_ALL = 6,
  ACCEL_SIMT_SYNCWARP = 7,
};

extern "C" {
// The emulator's side (tests/cuda_kernels/simt_emulator.cpp).
const accel_simt_coords_t *accel_simt_coords(void);
void accel_simt_syncthreads(void);
// Performs warp operation |op| for the calling lane: waits until every lane
// of |mask| has called a warp operation with the same |mask|, then returns
// the lane's result (shuffles: the 64-bit |value| of the source lane; votes:
// the ballot bits or 0/1). |arg| is the lane, delta or xor mask of a
// shuffle; |width| its segment width.
uint64_t accel_simt_warp(int op, uint32_t mask, uint64_t value, int32_t arg,
                         int32_t width);
__attribute__((format(printf, 1, 2))) void accel_simt_fail(const char *format,
                                                           ...);
}

#define threadIdx (accel_simt_coords()->thread_idx)
#define blockIdx (accel_simt_coords()->block_idx)
#define blockDim (accel_simt_coords()->block_dim)
#define gridDim (accel_simt_coords()->grid_dim)
#define warpSize 32

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __launch_bounds__(...)
// One section for every __shared__ variable, poisoned before each block.
#define __shared__ static __attribute__((section("accel_simt_shared")))

#define KC_FAIL(...) accel_simt_fail(__VA_ARGS__)

static inline void __syncthreads(void) { accel_simt_syncthreads(); }
static inline void __syncwarp(uint32_t mask = 0xffffffffu) {
  accel_simt_warp(ACCEL_SIMT_SYNCWARP, mask, 0, 0, 32);
}

template <typename T>
static inline T accel_simt_shfl(int op, uint32_t mask, T value, int32_t arg,
                                int32_t width) {
  static_assert(sizeof(T) <= 8, "shuffles move at most 64 bits");
  uint64_t bits = 0;
  memcpy(&bits, &value, sizeof(T));
  bits = accel_simt_warp(op, mask, bits, arg, width);
  T out;
  memcpy(&out, &bits, sizeof(T));
  return out;
}
template <typename T>
static inline T __shfl_sync(uint32_t mask, T v, int lane, int width = 32) {
  return accel_simt_shfl(ACCEL_SIMT_SHFL_IDX, mask, v, lane, width);
}
template <typename T>
static inline T __shfl_up_sync(uint32_t mask, T v, unsigned d, int width = 32) {
  return accel_simt_shfl(ACCEL_SIMT_SHFL_UP, mask, v, (int32_t)d, width);
}
template <typename T>
static inline T __shfl_down_sync(uint32_t mask, T v, unsigned d,
                                 int width = 32) {
  return accel_simt_shfl(ACCEL_SIMT_SHFL_DOWN, mask, v, (int32_t)d, width);
}
template <typename T>
static inline T __shfl_xor_sync(uint32_t mask, T v, int m, int width = 32) {
  return accel_simt_shfl(ACCEL_SIMT_SHFL_XOR, mask, v, m, width);
}
static inline uint32_t __ballot_sync(uint32_t mask, int p) {
  return (uint32_t)accel_simt_warp(ACCEL_SIMT_BALLOT, mask, p != 0, 0, 32);
}
static inline int __any_sync(uint32_t mask, int p) {
  return (int)accel_simt_warp(ACCEL_SIMT_ANY, mask, p != 0, 0, 32);
}
static inline int __all_sync(uint32_t mask, int p) {
  return (int)accel_simt_warp(ACCEL_SIMT_ALL, mask, p != 0, 0, 32);
}

// Atomics: relaxed, as CUDA's (the emulator runs one fiber at a time, but
// the kernels' atomics stay atomic operations).
template <typename T>
static inline T atomicAdd(T *p, T v) {
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
static inline float atomicAdd(float *p, float v) {
  float old, sum;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  do {
    sum = old + v;
  } while (!__atomic_compare_exchange(p, &old, &sum, 0, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED));
  return old;
}
template <typename T>
static inline T atomicMax(T *p, T v) {
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, 0,
                                                 __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED)) {
  }
  return old;
}
template <typename T>
static inline T atomicExch(T *p, T v) {
  return __atomic_exchange_n(p, v, __ATOMIC_RELAXED);
}
template <typename T>
static inline T atomicCAS(T *p, T expected, T desired) {
  __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_RELAXED,
                              __ATOMIC_RELAXED);
  return expected;
}
static inline void __threadfence(void) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);  // CUDA's device-scope fence
}

// Intrinsics the kernels use: correctly rounded f32 operations (the
// emulator builds with -ffp-contract=off, so * and + round on their own).
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __int_as_float(int i) {
  float f;
  memcpy(&f, &i, sizeof(f));
  return f;
}
static inline int __float_as_int(float f) {
  int i;
  memcpy(&i, &f, sizeof(i));
  return i;
}

#endif  // __CUDACC__

#endif  // ACCEL_KERNELS_CUDA_SIMT_H_
