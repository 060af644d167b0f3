// The SIMT emulator: runs CUDA kernels compiled by the host compiler through
// kernels/cuda/simt.h, one fiber per CUDA thread, so that the kernels' own
// source is tested where no GPU exists (docs/cuda-backend.md, "The SIMT
// emulator"). Blocks run one after another (in a seeded order); within a
// block, the fibers run in the order a launch chooses (forward, reverse or
// seeded random, drawn again at every barrier), each until it reaches a
// barrier, a warp operation or its end. A kernel that misses a
// __syncthreads therefore reads poisoned or stale shared memory in some
// order, and its result changes with the order.
//
// C API, so that C tests and the driver API test double can call it.
#ifndef ACCEL_TESTS_CUDA_KERNELS_SIMT_EMULATOR_H_
#define ACCEL_TESTS_CUDA_KERNELS_SIMT_EMULATOR_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// One kernel the emulator can run: |run| unpacks |params| (the kernelParams
// of cuLaunchKernel: one pointer to each parameter's value) and calls the
// kernel. |launch| (the reference kernels only, else NULL) runs a whole grid
// in a seeded random order with the shape of the driver API test double's
// host stand-ins (cuda_double_register_kernel), printing a refused launch's
// message to stderr; |param_sizes| are the parameters' sizes in bytes.
typedef struct accel_simt_kernel {
  const char *name;
  uint32_t param_count;
  void (*run)(void **params);
  const size_t *param_sizes;
  void (*launch)(void **params, const unsigned grid[3],
                 const unsigned block[3]);
} accel_simt_kernel_t;

// The order of the fibers of a block between barriers.
typedef enum accel_simt_order {
  ACCEL_SIMT_ORDER_FORWARD = 0,  // thread 0 first
  ACCEL_SIMT_ORDER_REVERSE = 1,  // the last thread first
  ACCEL_SIMT_ORDER_RANDOM = 2,   // a seeded shuffle, drawn again each round
} accel_simt_order_t;

typedef struct accel_simt_launch {
  const accel_simt_kernel_t *kernel;
  uint32_t grid[3];   // gridDim, each >= 1
  uint32_t block[3];  // blockDim, each >= 1, product <= 1024
  void **params;      // kernel->param_count entries
  accel_simt_order_t order;
  uint64_t seed;      // ACCEL_SIMT_ORDER_RANDOM, and the order of blocks
} accel_simt_launch_t;

// Results of accel_simt_run.
enum accel_simt_result {
  ACCEL_SIMT_OK = 0,
  // The kernel refused the launch (KC_FAIL); |message| holds its text.
  ACCEL_SIMT_KERNEL_FAILED = 1,
  // The kernel broke a CUDA rule the emulator checks: a deadlock (threads
  // waiting at different barriers), a warp operation whose lanes passed
  // different masks or operations, a mask without the calling lane or with
  // a lane that exited, a shuffle from a lane outside the mask, a bad width;
  // or the launch itself was malformed. |message| says which.
  ACCEL_SIMT_MISUSE = 2,
};

// Runs |launch| to completion on the calling thread (launches from several
// threads are serialized: __shared__ variables are process-wide). Returns an
// accel_simt_result; |message| (|message_size| bytes, may be 0) receives the
// reason of a failure, or "" on success.
int accel_simt_run(const accel_simt_launch_t *launch, char *message,
                   size_t message_size);

// The reference kernels of kernels/cuda built for the emulator
// (simt_kernels.cpp): the kernel named |name|, or NULL.
const accel_simt_kernel_t *accel_simt_kernel_find(const char *name);
// All of them: |*out_count| entries.
const accel_simt_kernel_t *accel_simt_kernels(size_t *out_count);

#ifdef __cplusplus
}
#endif

#endif  // ACCEL_TESTS_CUDA_KERNELS_SIMT_EMULATOR_H_
