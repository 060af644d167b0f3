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
//   passed the same mask; atomics are the compiler's atomic builtins; the
//   tensor-core API (nvcuda::wmma, 16 x 16 x 16 with f32 accumulators) is
//   warp-collective operations on fragments that hold the whole tile.
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
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
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

// ---- WMMA (nvcuda::wmma), 16 x 16 x 16 with f32 accumulators ---------------
//
// The tensor-core API the kernels use, emulated as warp-collective
// operations: every lane of the warp must call each operation with the same
// arguments (the emulator's warp barrier checks that all 32 lanes arrive;
// a lane that passes another address fails the launch). A fragment holds the
// whole 16 x 16 tile in every lane (the hardware spreads it over the lanes
// in an unspecified layout the kernels never rely on). mma_sync computes
// d[i][j] = c[i][j] + a[i][0] b[0][j] + ... + a[i][15] b[15][j] in that
// order, each product (exact for f16 and bf16 operands) and each addition
// rounded to f32: the order of the kernels' SIMT loops. A GPU's tensor cores
// add the 16 products in their own order and internal precision
// (kernels/README.md states the bound both meet).

typedef struct accel_simt_half {
  uint16_t bits;
} __half;
typedef __half half;
typedef struct accel_simt_bfloat16 {
  uint16_t bits;
} __nv_bfloat16;

static inline float accel_simt_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu,
           m = h & 0x3ffu, bits;
  if (e == 0x1f) {
    bits = sign | 0x7f800000u | (m << 13);
  } else if (e != 0) {
    bits = sign | ((e + 112u) << 23) | (m << 13);
  } else if (m == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    e = 113;
    while ((m & 0x400u) == 0) {
      m <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}
static inline float accel_simt_to_f32(__half h) {
  return accel_simt_f16_to_f32(h.bits);
}
static inline float accel_simt_to_f32(__nv_bfloat16 h) {
  uint32_t bits = (uint32_t)h.bits << 16;
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16,
                "the emulator has the 16 x 16 x 16 shape only");
  enum { num_elements = 256 };
  float x[256];  // element (i, j) at i * 16 + j, as f32
};

static inline constexpr bool accel_simt_is_col(const col_major *) {
  return true;
}
static inline constexpr bool accel_simt_is_col(const row_major *) {
  return false;
}

// Every lane of the warp arrives with the same |address|.
static inline void accel_simt_wmma_enter(const void *address, const char *op) {
  uint64_t mine = (uint64_t)(uintptr_t)address;
  uint64_t lane0 = __shfl_sync(0xffffffffu, mine, 0);
  if (mine != lane0) {
    accel_simt_fail("wmma::%s: lane %u passes %p, lane 0 %p", op,
                    threadIdx.x % 32u, address, (void *)(uintptr_t)lane0);
  }
}

template <typename Use, typename T, typename Layout>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f,
                                    const T *p, unsigned ldm) {
  accel_simt_wmma_enter(p, "load_matrix_sync");
  bool col = accel_simt_is_col((Layout *)nullptr);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      f.x[i * 16 + j] = accel_simt_to_f32(col ? p[j * ldm + i] : p[i * ldm + j]);
    }
  }
  __syncwarp();
}

static inline void fill_fragment(
    fragment<accumulator, 16, 16, 16, float, void> &f, float v) {
  for (int e = 0; e < 256; ++e) f.x[e] = v;
}

template <typename T, typename LA, typename LB>
static inline void mma_sync(fragment<accumulator, 16, 16, 16, float, void> &d,
                            const fragment<matrix_a, 16, 16, 16, T, LA> &a,
                            const fragment<matrix_b, 16, 16, 16, T, LB> &b,
                            const fragment<accumulator, 16, 16, 16, float, void> &c) {
  __syncwarp();  // fragments are each lane's own: only the arrival is checked
  float out[256];
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      float acc = c.x[i * 16 + j];
      for (int k = 0; k < 16; ++k) {
        acc = acc + a.x[i * 16 + k] * b.x[k * 16 + j];
      }
      out[i * 16 + j] = acc;
    }
  }
  memcpy(d.x, out, sizeof(out));
  __syncwarp();
}

// Lane l stores the elements e with e % 32 == l (the warp stores the tile
// together), after every lane arrived.
static inline void store_matrix_sync(
    float *p, const fragment<accumulator, 16, 16, 16, float, void> &f,
    unsigned ldm, layout_t layout) {
  accel_simt_wmma_enter(p, "store_matrix_sync");
  for (unsigned e = threadIdx.x % 32u; e < 256; e += 32) {
    unsigned i = e / 16, j = e % 16;
    p[layout == mem_row_major ? i * ldm + j : j * ldm + i] = f.x[e];
  }
  __syncwarp();
}

}  // namespace wmma
}  // namespace nvcuda

#define __align__(n) __attribute__((aligned(n)))

#endif  // __CUDACC__

#endif  // ACCEL_KERNELS_CUDA_SIMT_H_
