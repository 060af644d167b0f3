// The CUDA reference kernels (kernels/cuda) built by the host compiler for
// the SIMT emulator: their sources, included as they are, and the table of
// accel_simt_kernel_find with a parameter-unpacking thunk per kernel.
#include <stddef.h>
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
};

template <auto F>
void run_kernel(void **params) {
  call_with(F, params,
            std::make_index_sequence<kernel_traits<decltype(F)>::count>{});
}

#define SIMT_KERNEL_ENTRY(name_) \
  {#name_, kernel_traits<decltype(&name_)>::count, run_kernel<&name_>},
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
