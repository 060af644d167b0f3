// The reference kernels by family (one host code object per family, and all
// of them in libaccel_kernels.so, which reference.axe packs). X(name) names
// both the export and its C entry point.
#ifndef ACCEL_KERNELS_HOST_KERNEL_LIST_H_
#define ACCEL_KERNELS_HOST_KERNEL_LIST_H_

#include "accel/kernel_abi.h"
#include "kernel_meta.h"

#define ACCEL_KP_MATMUL_KERNELS(X) X(matmul)
#define ACCEL_KP_QUANT_KERNELS(X) \
  X(qmatmul_int8) X(qmatmul_int4) X(qmatmul_q8_0) X(qmatmul_q4_0)
#define ACCEL_KP_GGUF_KERNELS(X)                                        \
  X(qmatmul_q4_1) X(qmatmul_q5_0) X(qmatmul_q5_1) X(qmatmul_q4_k)       \
  X(qmatmul_q5_k) X(qmatmul_q6_k) X(embedding_gguf)
#define ACCEL_KP_ROW_KERNELS(X) X(softmax) X(layernorm) X(rmsnorm) X(rope)
#define ACCEL_KP_ELTWISE_KERNELS(X) X(activation) X(swiglu) X(add) X(mul)
#define ACCEL_KP_SELECT_KERNELS(X) X(embedding) X(argmax) X(topk)

#define ACCEL_KP_DECLARE(kernel_)                                     \
  ACCEL_KERNEL_ENTRY int32_t kernel_(const accel_kernel_dispatch_t *d, \
                                  const accel_kernel_workgroup_t *wg);
ACCEL_KP_MATMUL_KERNELS(ACCEL_KP_DECLARE)
ACCEL_KP_QUANT_KERNELS(ACCEL_KP_DECLARE)
ACCEL_KP_GGUF_KERNELS(ACCEL_KP_DECLARE)
ACCEL_KP_ROW_KERNELS(ACCEL_KP_DECLARE)
ACCEL_KP_ELTWISE_KERNELS(ACCEL_KP_DECLARE)
ACCEL_KP_SELECT_KERNELS(ACCEL_KP_DECLARE)

#define ACCEL_KP_EXPORT(kernel_) {.name = #kernel_, .fn = kernel_},

// Defines the library table and accel_kernel_library_query of a code object
// whose exports are |exports_| (an array of accel_kernel_export_t).
// |metas_| is a slice of k_kp_metas (kernel_meta.h): first, count.
#define ACCEL_KP_DEFINE_LIBRARY(title, exports_, init_fn, ...)            \
  ACCEL_KP_DEFINE_LIBRARY_(title, exports_, init_fn, __VA_ARGS__)
#define ACCEL_KP_DEFINE_LIBRARY_(title, exports_, init_fn, first_, count_) \
  static const accel_kernel_library_t k_library = {                        \
      .struct_size = sizeof(accel_kernel_library_t),                       \
      .abi_version = ACCEL_KERNEL_ABI_VERSION,                             \
      .name = title,                                                       \
      .init = init_fn,                                                     \
      .export_count = sizeof(exports_) / sizeof(exports_[0]),              \
      .exports = exports_,                                                 \
      .meta_count = count_,                                                \
      .metas = k_kp_metas + first_,                                        \
  };                                                                       \
  ACCEL_KERNEL_EXPORT const accel_kernel_library_t *                       \
  accel_kernel_library_query(uint32_t runtime_abi_version);                \
  ACCEL_KERNEL_EXPORT const accel_kernel_library_t *                       \
  accel_kernel_library_query(uint32_t runtime_abi_version) {               \
    return (runtime_abi_version >> 16) == ACCEL_KERNEL_ABI_VERSION_MAJOR   \
               ? &k_library                                                \
               : NULL;                                                     \
  }

// The library of one family: |list| is one of the lists above.
#define ACCEL_KP_FAMILY_LIBRARY(title, list, init_fn, ...)             \
  static const accel_kernel_export_t k_exports[] = {list(ACCEL_KP_EXPORT)}; \
  ACCEL_KP_DEFINE_LIBRARY_(title, k_exports, init_fn, __VA_ARGS__)

#endif  // ACCEL_KERNELS_HOST_KERNEL_LIST_H_
