// The CUDA reference kernels (kernels/cuda) built by the host compiler for
// the SIMT emulator: their sources, included as they are, and the table of
// accel_simt_kernel_find with a parameter-unpacking thunk per kernel.
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <type_traits>
#include <utility>

#include "simt_emulator.h"

#include "attention.cu"
#include "eltwise.cu"
#include "cuda_kernel_list.h"
#include "matmul.cu"
#include "quant.cu"
#include "rows.cu"
#include "select.cu"

namespace {

// Calls |f| with each parameter read from params[i] (cuLaunchKernel's
// kernelParams: a pointer to each value).
template <typename... A, size_t... I>
void call_with(void (*f)(A...), void **params, std::index_sequence<I...>) {
  f(*static_cast<typename std::remove_cv<A>::type *>(params[I])...);
}

template <typename F>
struct kernel_traits;
template <typename... A>
struct kernel_traits<void (*)(A...)> {
  static constexpr uint32_t count = sizeof...(A);
  static constexpr size_t sizes[] = {sizeof(A)...};
};

template <auto F>
void run_kernel(void **params) {
  call_with(F, params,
            std::make_index_sequence<kernel_traits<decltype(F)>::count>{});
}

// Kernel |F| over a whole grid in a seeded random order (the shape of the
// driver API test double's stand-ins). The kernels' own messages name them.
template <auto F>
void launch_kernel(void **params, const unsigned grid[3],
                   const unsigned block[3]) {
  static const accel_simt_kernel_t self = {
      "", kernel_traits<decltype(F)>::count, run_kernel<F>, nullptr, nullptr};
  static uint64_t launches;
  accel_simt_launch_t l = {&self,
                           {grid[0], grid[1], grid[2]},
                           {block[0], block[1], block[2]},
                           params,
                           ACCEL_SIMT_ORDER_RANDOM,
                           __atomic_fetch_add(&launches, 1, __ATOMIC_RELAXED)};
  char message[1024];
  if (accel_simt_run(&l, message, sizeof(message)) != ACCEL_SIMT_OK) {
    fprintf(stderr, "simt: launch failed: %s\n", message);
  }
}

#define SIMT_KERNEL_ENTRY(name_)                                       \
  {#name_, kernel_traits<decltype(&name_)>::count, run_kernel<&name_>, \
   kernel_traits<decltype(&name_)>::sizes, launch_kernel<&name_>},
const accel_simt_kernel_t k_kernels[] = {ACCEL_KC_KERNELS(SIMT_KERNEL_ENTRY)};

}  // namespace

extern "C" const accel_simt_kernel_t *accel_simt_kernel_find(const char *name) {
  for (const accel_simt_kernel_t &k : k_kernels) {
    if (name != nullptr && strcmp(k.name, name) == 0) return &k;
  }
  return nullptr;
}

extern "C" const accel_simt_kernel_t *accel_simt_kernels(size_t *out_count) {
  *out_count = sizeof(k_kernels) / sizeof(k_kernels[0]);
  return k_kernels;
}
