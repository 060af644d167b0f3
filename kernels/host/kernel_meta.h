// The reference kernels' metadata (kernel ABI 1.2): each kernel's version,
// the element type of each binding (what numerics checks and tensor
// summaries read) and its tunable parameters with the values worth trying.
// Every value gives the same bits (kernels/README.md, "Tunables"); the
// tests run each kernel's whole space on small shapes and compare bytes.
// Entries are listed by family, in the order of kernel_list.h, so that a
// family's code object points at its slice (ACCEL_KP_META_*).
#ifndef ACCEL_KERNELS_HOST_KERNEL_META_H_
#define ACCEL_KERNELS_HOST_KERNEL_META_H_

#include <stddef.h>

#include "accel/kernel_abi.h"
#include "kernel_params.h"

#define KP_F32 ACCEL_KERNEL_ELEM_F32
#define KP_I32 ACCEL_KERNEL_ELEM_I32
#define KP_OPQ ACCEL_KERNEL_ELEM_OPAQUE

// Versions: raise one when a kernel's code changes what a tuned
// configuration is worth (the tuning cache then ignores its entries).
#define ACCEL_KP_TUNING_VERSION 1u

static const uint32_t k_kp_workgroups[] = {1, 2, 4, 8, 16, 32, 64, 128};
static const uint32_t k_kp_qmm_tile_n[] = {16, 32, 64, 128, 256};

#define KP_TUNABLE_WORKGROUPS                                          \
  {.name = "workgroups", .kind = ACCEL_KERNEL_TUNABLE_WORKGROUPS,      \
   .value_count = sizeof(k_kp_workgroups) / sizeof(uint32_t),          \
   .values = k_kp_workgroups}
#define KP_TUNABLE_CONSTANT(name_, type_, field_, values_)              \
  {.name = name_, .kind = ACCEL_KERNEL_TUNABLE_CONSTANT,                \
   .constants_offset = (uint32_t)offsetof(type_, field_),               \
   .value_count = sizeof(values_) / sizeof(uint32_t), .values = values_}

static const accel_kernel_tunable_t k_kp_qmm_tunables[] = {
    KP_TUNABLE_CONSTANT("tile_n", accel_kp_qmatmul_constants_t, tile_n,
                        k_kp_qmm_tile_n),
    KP_TUNABLE_WORKGROUPS,
};
static const accel_kernel_tunable_t k_kp_grid_tunables[] = {
    KP_TUNABLE_WORKGROUPS,
};

#define KP_TYPES(...) (const uint8_t[]){__VA_ARGS__}
#define KP_NTYPES(...) (uint32_t)sizeof((const uint8_t[]){__VA_ARGS__})
#define KP_META_F(kernel_, features_, tunables_, tunable_count_, ...)   \
  {.kernel = #kernel_, .version = ACCEL_KP_TUNING_VERSION,             \
   .binding_count = KP_NTYPES(__VA_ARGS__),                            \
   .binding_types = KP_TYPES(__VA_ARGS__), .tunable_count = tunable_count_, \
   .features = features_, .tunables = tunables_}
#define KP_META(kernel_, tunables_, tunable_count_, ...) \
  KP_META_F(kernel_, 0u, tunables_, tunable_count_, __VA_ARGS__)
// The GGUF block kernels take 8-bit activations.
#define KP_Q8A ACCEL_KP_FEATURE_Q8_ACTIVATIONS
#define KP_I16A (ACCEL_KP_FEATURE_Q8_ACTIVATIONS | ACCEL_KP_FEATURE_I16_ACTIVATIONS)
#define KP_COUNT(a) (uint32_t)(sizeof(a) / sizeof((a)[0]))


static const accel_kernel_meta_t k_kp_metas[] __attribute__((unused)) = {
    // matmul family (0): a and b are f32, f16 or bf16 by the constants.
    // Its tile_m / tile_n are not tunables: they choose OpenBLAS's call
    // shape (sgemv for one-row tiles, the kernel for the tile's edges), and
    // with it the reduction order (kernels/README.md); only the grid is.
    KP_META(matmul, k_kp_grid_tunables, KP_COUNT(k_kp_grid_tunables), KP_OPQ,
            KP_OPQ, KP_F32, KP_F32),
    // quantized (1..4)
    KP_META(qmatmul_int8, k_kp_qmm_tunables, KP_COUNT(k_kp_qmm_tunables),
            KP_F32, KP_OPQ, KP_F32, KP_F32),
    KP_META(qmatmul_int4, k_kp_qmm_tunables, KP_COUNT(k_kp_qmm_tunables),
            KP_F32, KP_OPQ, KP_F32, KP_OPQ, KP_F32),
    KP_META_F(qmatmul_q8_0, KP_I16A, k_kp_qmm_tunables, KP_COUNT(k_kp_qmm_tunables),
              KP_F32, KP_OPQ, KP_F32),
    KP_META_F(qmatmul_q4_0, KP_I16A, k_kp_qmm_tunables, KP_COUNT(k_kp_qmm_tunables),
              KP_F32, KP_OPQ, KP_F32),
    // rows (5..8)
    KP_META(softmax, NULL, 0, KP_F32, KP_F32),
    KP_META(layernorm, NULL, 0, KP_F32, KP_F32, KP_F32, KP_F32),
    KP_META(rmsnorm, NULL, 0, KP_F32, KP_F32, KP_F32),
    KP_META(rope, NULL, 0, KP_F32, KP_I32),
    // elementwise (9..12)
    KP_META(activation, NULL, 0, KP_F32, KP_F32),
    KP_META(swiglu, NULL, 0, KP_F32, KP_F32, KP_F32),
    KP_META(add, NULL, 0, KP_F32, KP_F32, KP_F32),
    KP_META(mul, NULL, 0, KP_F32, KP_F32, KP_F32),
    // selection (13..15): the embedding table is f32, f16 or bf16.
    KP_META(embedding, NULL, 0, KP_OPQ, KP_I32, KP_F32),
    KP_META(argmax, NULL, 0, KP_F32, KP_I32),
    KP_META(topk, NULL, 0, KP_F32, KP_F32, KP_I32),
    // attention (16..19): context lengths and block tables are u32; the
    // caches paged_kv_append writes are opaque (slots it did not write may
    // hold anything).
    KP_META(attention_prefill, k_kp_grid_tunables,
            KP_COUNT(k_kp_grid_tunables), KP_F32, KP_F32, KP_F32, KP_F32),
    KP_META(attention_decode, k_kp_grid_tunables,
            KP_COUNT(k_kp_grid_tunables), KP_F32, KP_F32, KP_F32, KP_OPQ,
            KP_F32),
    KP_META(attention_paged_decode, k_kp_grid_tunables,
            KP_COUNT(k_kp_grid_tunables), KP_F32, KP_F32, KP_F32, KP_OPQ,
            KP_OPQ, KP_F32),
    KP_META(paged_kv_append, NULL, 0, KP_F32, KP_F32, KP_I32, KP_OPQ, KP_OPQ),
    // GGUF block kernels (20..26): no tunables (one row per unit).
    KP_META_F(qmatmul_q4_1, KP_Q8A, NULL, 0, KP_F32, KP_OPQ, KP_F32),
    KP_META_F(qmatmul_q5_0, KP_Q8A, NULL, 0, KP_F32, KP_OPQ, KP_F32),
    KP_META_F(qmatmul_q5_1, KP_Q8A, NULL, 0, KP_F32, KP_OPQ, KP_F32),
    KP_META_F(qmatmul_q4_k, KP_Q8A, NULL, 0, KP_F32, KP_OPQ, KP_F32),
    KP_META_F(qmatmul_q5_k, KP_Q8A, NULL, 0, KP_F32, KP_OPQ, KP_F32),
    KP_META_F(qmatmul_q6_k, KP_Q8A, NULL, 0, KP_F32, KP_OPQ, KP_F32),
    KP_META(embedding_gguf, NULL, 0, KP_OPQ, KP_I32, KP_F32),
};

// Each family's slice of k_kp_metas: first entry and count.
#define ACCEL_KP_META_MATMUL 0u, 1u
#define ACCEL_KP_META_QUANT 1u, 4u
#define ACCEL_KP_META_ROW 5u, 4u
#define ACCEL_KP_META_ELTWISE 9u, 4u
#define ACCEL_KP_META_SELECT 13u, 3u
#define ACCEL_KP_META_ATTENTION 16u, 4u
#define ACCEL_KP_META_GGUF 20u, 7u
#define ACCEL_KP_META_ALL 0u, 27u

#endif  // ACCEL_KERNELS_HOST_KERNEL_META_H_
