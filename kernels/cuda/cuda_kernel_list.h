// The CUDA reference kernels (kernels/cuda/*.cu): X(name) for each, the
// export of the CUDA code object and of the emulator build. Every kernel runs
// with blockDim (128, 1, 1) (kc_common.cuh) and takes the parameters of
// docs/kernel-abi.md: one pointer per binding, one uint64_t length per
// binding, then the constants struct by value.
#ifndef ACCEL_KERNELS_CUDA_CUDA_KERNEL_LIST_H_
#define ACCEL_KERNELS_CUDA_CUDA_KERNEL_LIST_H_

#define ACCEL_KC_KERNELS(X)                                                  \
  X(matmul)                                                                  \
  X(qmatmul_int8) X(qmatmul_int4) X(qmatmul_q8_0) X(qmatmul_q4_0)            \
  X(softmax) X(layernorm) X(rmsnorm) X(rope)                                 \
  X(activation) X(swiglu) X(add) X(mul)                                      \
  X(embedding) X(argmax) X(topk)                                             \
  X(attention_prefill) X(attention_decode) X(attention_paged_decode)         \
  X(paged_kv_append)

#endif  // ACCEL_KERNELS_CUDA_CUDA_KERNEL_LIST_H_
