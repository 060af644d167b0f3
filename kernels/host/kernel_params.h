// The interface of the reference kernels (issue #17, first half): for each
// kernel its exported name, its bindings in declaration order (access and
// element type in the comment), its constants struct and its grid, plus the
// element-type helpers (bf16 / f16 <-> f32) and the quantized block layouts
// that callers pack weights with. kernels/README.md specifies the same with
// each kernel's reduction order. This header stands alone (<stdint.h> and
// <string.h> only) so that the kernels, the tests, the benchmarks
// and the examples all build against it.
//
// Conventions shared by every kernel here:
// - Every value is little-endian; every constants field is a uint32_t or a
//   float (IEEE binary32), natural alignment, no implicit padding (pinned by
//   _Static_assert). Fields named reserved* are zero.
// - Tensors are dense and row-major. "f32 [m, k]" means m rows of k floats.
//   Sizes are in elements unless a name ends in _bytes.
// - Bindings may alias only where a kernel says so (in-place is allowed for
//   the row kernels and the elementwise kernels, never for matmul).
// - Grid: every kernel splits its output into a fixed list of UNITS that
//   depends only on the constants (rows, or tiles of rows and columns; each
//   kernel names its unit). A launch may use any grid: with G = the product
//   of workgroup_count[0..2] work-groups and linear id
//   g = id[0] + count[0] * (id[1] + count[1] * id[2]), work-group g computes
//   units [g * U / G, (g + 1) * U / G) (integer division, 64-bit), so G > U
//   leaves some work-groups idle. Each output element is computed by exactly
//   one work-group in an order the kernel fixes, so results are bit-identical
//   for every grid, host thread count and schedule. ACCEL_KP_UNITS_FOR()
//   returns U, which is the most work-groups that are useful.
// - workgroup_size is not used by the host kernels (declare 1,1,1).
// - A kernel checks that every binding holds what the constants describe and
//   that the constants are legal; otherwise it reports a message through the
//   ABI 1.1 message channel (an assertion, which fails the launch with
//   ACCEL_ERROR_ABORTED and that message) and returns non-zero, before
//   touching any memory.
#ifndef ACCEL_KERNELS_HOST_KERNEL_PARAMS_H_
#define ACCEL_KERNELS_HOST_KERNEL_PARAMS_H_

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

// How the helpers below are declared: static inline for C; the CUDA kernels
// (kernels/cuda/kc_common.cuh) make them __host__ __device__ too.
#ifndef ACCEL_KP_FN
#define ACCEL_KP_FN static inline
#endif

// ---------------------------------------------------------------------------
// Element types. The values are those of accel_dtype_t (accel/executable.h),
// repeated here so that kernels build without the runtime headers.
enum accel_kp_dtype {
  ACCEL_KP_DTYPE_F32 = 1,
  ACCEL_KP_DTYPE_F16 = 2,
  ACCEL_KP_DTYPE_BF16 = 3,
};

// Activations a kernel applies after its main computation.
enum accel_kp_activation {
  ACCEL_KP_ACT_NONE = 0,
  // 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))
  ACCEL_KP_ACT_GELU_TANH = 1,
  // 0.5 v (1 + erf(v / sqrt(2)))
  ACCEL_KP_ACT_GELU_ERF = 2,
  // v / (1 + exp(-v))
  ACCEL_KP_ACT_SILU = 3,
  ACCEL_KP_ACT_COUNT = 4,
};

// Returns the f32 value of the bf16 |h| (exact).
ACCEL_KP_FN float accel_kp_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

// Returns |f| rounded to bf16, nearest-even; NaN stays a (quiet) NaN.
ACCEL_KP_FN uint16_t accel_kp_f32_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return (uint16_t)((bits >> 16) | 0x0040u);
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

// Returns the f32 value of the IEEE binary16 |h| (exact, subnormals too).
ACCEL_KP_FN __attribute__((always_inline)) float accel_kp_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1fu) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal: normalise the mantissa.
    uint32_t e = 113u;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

// Returns |f| rounded to binary16, nearest-even, overflow to infinity,
// subnormals kept; NaN stays a (quiet) NaN.
ACCEL_KP_FN uint16_t accel_kp_f32_to_f16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) {
    return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  if (abs >= 0x477ff000u) {  // rounds to 65536 or more: infinity
    return (uint16_t)(sign | 0x7c00u);
  }
  if (abs < 0x38800000u) {  // below 2^-14: subnormal or zero in f16
    if (abs < 0x33000000u) {  // below half the smallest subnormal (2^-25)
      return sign;
    }
    uint32_t e = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;  // value = mant * 2^(e - 150), in 2^-24 units
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) {
      ++q;
    }
    return (uint16_t)(sign | q);
  }
  uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u);
  return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

// ---------------------------------------------------------------------------
// Quantized layouts. Weights are [n, k]: n output channels (rows), k inputs
// along each row (the quantization axis is 1 for groups, 0 for channels).

// GGUF Q8_0: 32 consecutive values of one row, value i = qs[i] * d.
#define ACCEL_KP_QK 32
typedef struct accel_kp_block_q8_0 {
  uint16_t d;  // scale, IEEE binary16
  int8_t qs[ACCEL_KP_QK];
} accel_kp_block_q8_0_t;
_Static_assert(sizeof(accel_kp_block_q8_0_t) == 34, "GGUF block_q8_0 size");

// GGUF Q4_0: 32 consecutive values of one row; value i (i < 16) is
// ((qs[i] & 0x0f) - 8) * d and value i + 16 is ((qs[i] >> 4) - 8) * d.
typedef struct accel_kp_block_q4_0 {
  uint16_t d;  // scale, IEEE binary16
  uint8_t qs[ACCEL_KP_QK / 2];
} accel_kp_block_q4_0_t;
_Static_assert(sizeof(accel_kp_block_q4_0_t) == 18, "GGUF block_q4_0 size");

// int8 per-channel (executable format: dtype i8, per-channel axis 0, no zero
// point): value [j, i] = q[j * k + i] * scale[j].
//
// int4 group-wise (executable format: dtype u4 or i4, group-wise axis 1,
// group size 32, 64 or 128 dividing k): element [j, i] is nibble
// j * k + i of the packed bytes, the low nibble of byte b holding element 2b
// (so a row starts on a byte boundary when k is even, which group sizes
// guarantee). With g = i / group_size, value [j, i] =
// (q - zero[j * (k / group_size) + g]) * scale[j * (k / group_size) + g],
// q in 0..15 and zero a u8 in 0..15 (u4), or q in -8..7 and no zero point
// (i4, ACCEL_KP_QFLAG_SIGNED_I4).

// Returns element |i| of packed 4-bit data |packed| as an unsigned 0..15.
ACCEL_KP_FN uint32_t accel_kp_u4_get(const uint8_t *packed, uint64_t i) {
  return (packed[i >> 1] >> ((i & 1u) * 4u)) & 0x0fu;
}

// ---------------------------------------------------------------------------
// matmul: c = act(op(a) op(b) + bias), f32 output, f32 accumulation.
//   name "matmul"
//   bindings:
//     0 a     read   dtype_a [m, k], or [k, m] with ACCEL_KP_MM_TRANS_A
//     1 b     read   dtype_b [k, n], or [n, k] with ACCEL_KP_MM_TRANS_B
//     2 bias  read   f32 [n] with ACCEL_KP_MM_BIAS; otherwise ignored (bind
//                    any buffer of at least 4 bytes)
//     3 c     write  f32 [m, n]
//   dtype_a / dtype_b: ACCEL_KP_DTYPE_F32, _F16 or _BF16. f32 x f32 runs
//   cblas_sgemm (cblas_sgemv for a tile of one row); bf16 x bf16
//   cblas_sbgemm where the installed OpenBLAS exports it (built with
//   BUILD_BFLOAT16; Debian's 0.3.21 does not); other pairs convert each
//   tile's operands to f32 (exactly) and run the f32 path.
//   unit: an output tile of tile_m x tile_n (edge tiles smaller), numbered
//   row-major over the tile grid. tile_m / tile_n 0 pick the default
//   ACCEL_KP_MM_DEFAULT_TILE_M(m, n) / _N(m, n) (a function of the shape
//   only). The tile sizes are part of the result's definition: the same
//   constants give the same bits for any grid.
enum accel_kp_matmul_flags {
  ACCEL_KP_MM_TRANS_A = 1u << 0,
  ACCEL_KP_MM_TRANS_B = 1u << 1,
  ACCEL_KP_MM_BIAS = 1u << 2,
};
typedef struct accel_kp_matmul_constants {
  uint32_t m, n, k;      // m may be 1 (GEMV); 0 in any is legal (no work)
  uint32_t flags;        // accel_kp_matmul_flags
  uint32_t dtype_a;      // accel_kp_dtype
  uint32_t dtype_b;      // accel_kp_dtype
  uint32_t activation;   // accel_kp_activation, applied after the bias
  uint32_t tile_m;       // rows per tile, 0 = default
  uint32_t tile_n;       // columns per tile, 0 = default
  uint32_t reserved[3];  // zero
} accel_kp_matmul_constants_t;
_Static_assert(sizeof(accel_kp_matmul_constants_t) == 48, "matmul constants");
#define ACCEL_KP_MM_DEFAULT_TILE_M(m, n) ((m) <= 64u ? 64u : 256u)
#define ACCEL_KP_MM_DEFAULT_TILE_N(m, n) ((m) <= 64u ? 256u : 1024u)

// ---------------------------------------------------------------------------
// Quantized matmul / GEMV: y[r, j] = sum_i x[r, i] * W[j, i] with W the
// dequantized [n, k] weight (so y = x W^T, the nn.Linear convention). m = 1
// is the decode-shaped GEMV. Each y[r, j] depends only on row r of x and row
// j of W (not on m): the same token gives the same bits in prefill and
// decode.
//   names and bindings:
//   "qmatmul_int8"  0 x (read, f32 [m, k]), 1 w (read, i8 [n, k]),
//                   2 scale (read, f32 [n]), 3 y (write, f32 [m, n])
//   "qmatmul_int4"  0 x (read, f32 [m, k]), 1 w (read, u4/i4 [n, k] packed,
//                   n * k / 2 bytes), 2 scale (read, f32 [n, k / group]),
//                   3 zero (read, u8 [n, k / group]; ignored with
//                   ACCEL_KP_QFLAG_SIGNED_I4: bind any buffer of at least 1
//                   byte), 4 y (write, f32 [m, n])
//   "qmatmul_q8_0"  0 x (read, f32 [m, k]), 1 w (read, block_q8_0
//                   [n, k / 32]), 2 y (write, f32 [m, n])
//   "qmatmul_q4_0"  0 x (read, f32 [m, k]), 1 w (read, block_q4_0
//                   [n, k / 32]), 2 y (write, f32 [m, n])
//   "qmatmul_q4_1", "qmatmul_q5_0", "qmatmul_q5_1" (blocks of 32),
//   "qmatmul_q4_k", "qmatmul_q5_k", "qmatmul_q6_k" (super-blocks of 256):
//                   0 x (read, f32 [m, k]), 1 w (read, ggml's block_<type>
//                   [n, k / block], byte for byte as in a GGUF file),
//                   2 y (write, f32 [m, n]); k a multiple of the block;
//                   flags 0 or ACCEL_KP_QFLAG_Q8_ACTIVATIONS (q8_0 and
//                   q4_0: or ACCEL_KP_QFLAG_I16_ACTIVATIONS).
//                   kernels/README.md gives each block layout.
//   k must be a multiple of 32 for q8_0/q4_0, of group_size for int4
//   (group_size 32, 64 or 128); group_size is ignored by the others.
//   unit: tile_n (default ACCEL_KP_QMM_TILE_N) output columns for all m
//   rows (edge tile smaller).
#define ACCEL_KP_QMM_TILE_N 64u
enum accel_kp_qmatmul_flags {
  // int4 only: the nibbles are signed i4 (-8..7), no zero point.
  ACCEL_KP_QFLAG_SIGNED_I4 = 1u << 0,
  // GGUF block types only (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k;
  // host kernels): each row of x is quantized to groups of 32 int8 with an
  // f32 scale and meets the weights in exact integer dot products, as
  // llama.cpp computes them (kernels/README.md, "8-bit activations": a
  // different order and precision, several times faster).
  ACCEL_KP_QFLAG_Q8_ACTIVATIONS = 1u << 1,
  // q8_0 and q4_0 only (host kernels): the same with groups of 32 int16
  // (kernels/README.md, "16-bit activations": the activations' rounding 258
  // times finer than 8-bit, about as fast for these two types). Not with
  // ACCEL_KP_QFLAG_Q8_ACTIVATIONS.
  ACCEL_KP_QFLAG_I16_ACTIVATIONS = 1u << 2,
};
// The reference kernels' feature bits (accel_kernel_meta_t.features, read
// through accel_kernel_info): what a caller may ask of a kernel beyond
// what every backend's kernel of the name does.
enum accel_kp_features {
  // The kernel takes ACCEL_KP_QFLAG_Q8_ACTIVATIONS (the host GGUF block
  // kernels; the CUDA ones refuse it and do not declare it).
  ACCEL_KP_FEATURE_Q8_ACTIVATIONS = 1u << 0,
  // The kernel takes ACCEL_KP_QFLAG_I16_ACTIVATIONS (the host q8_0 and q4_0
  // kernels).
  ACCEL_KP_FEATURE_I16_ACTIVATIONS = 1u << 1,
};
typedef struct accel_kp_qmatmul_constants {
  uint32_t m, n, k;    // 0 in any is legal (no work)
  uint32_t group_size;  // int4: 32, 64 or 128; others: ignored
  uint32_t flags;       // accel_kp_qmatmul_flags
  // Output columns per unit, 1 to 4096; 0 = ACCEL_KP_QMM_TILE_N. A tunable
  // (kernel ABI 1.2): every value gives the same bits.
  uint32_t tile_n;
  uint32_t reserved[2];  // zero
} accel_kp_qmatmul_constants_t;
_Static_assert(sizeof(accel_kp_qmatmul_constants_t) == 32, "qmatmul constants");

// ---------------------------------------------------------------------------
// Row kernels. unit: one row.
//
// "softmax": y[r, :] = exp(x[r, :] * scale - max) / sum, numerically stable.
//   0 x (read, f32 [rows, cols]), 1 y (write, f32 [rows, cols]); y may be x.
//   scale 0 is taken as 1.
typedef struct accel_kp_softmax_constants {
  uint32_t rows, cols;   // cols >= 1 when rows >= 1
  float scale;           // multiplies x before the max (0 = 1)
  uint32_t reserved;     // zero
} accel_kp_softmax_constants_t;
_Static_assert(sizeof(accel_kp_softmax_constants_t) == 16, "softmax constants");

// "layernorm": y = (x - mean) / sqrt(var + eps) * gamma + beta, var the
//   biased (population) variance of the row.
//   0 x (read, f32 [rows, cols]), 1 gamma (read, f32 [cols]),
//   2 beta (read, f32 [cols]), 3 y (write, f32 [rows, cols]); y may be x.
// "rmsnorm": y = x / sqrt(mean(x^2) + eps) * gamma.
//   0 x (read, f32 [rows, cols]), 1 gamma (read, f32 [cols]),
//   2 y (write, f32 [rows, cols]); y may be x.
typedef struct accel_kp_norm_constants {
  uint32_t rows, cols;  // cols >= 1 when rows >= 1
  float eps;            // added to the variance / mean square, >= 0
  uint32_t reserved;    // zero
} accel_kp_norm_constants_t;
_Static_assert(sizeof(accel_kp_norm_constants_t) == 16, "norm constants");

// "rope": rotary position embedding, in place.
//   0 x (read-write, f32 [tokens, heads, head_dim]),
//   1 positions (read, i32 [tokens], each >= 0)
//   For pair p < rotary_dim / 2 of each head: theta_p = pos * base^(-2p /
//   rotary_dim) (computed in double), (a, b) = the pair's two elements,
//   a' = a cos - b sin, b' = a sin + b cos (cos and sin in double, rounded to
//   f32, products and sums in f32). Pairs: ACCEL_KP_ROPE_INTERLEAVED takes
//   elements (2p, 2p + 1) (GPT-J); ACCEL_KP_ROPE_HALF takes (p, p +
//   rotary_dim / 2) (GPT-NeoX / Llama). Elements at rotary_dim and beyond
//   are untouched. unit: one token (all its heads).
enum accel_kp_rope_mode {
  ACCEL_KP_ROPE_INTERLEAVED = 0,
  ACCEL_KP_ROPE_HALF = 1,
};
typedef struct accel_kp_rope_constants {
  uint32_t tokens, heads, head_dim;
  uint32_t rotary_dim;  // even, <= head_dim; 0 = head_dim
  uint32_t mode;        // accel_kp_rope_mode
  float base;           // theta base, > 0 (10000 for most models)
  uint32_t reserved[2];  // zero
} accel_kp_rope_constants_t;
_Static_assert(sizeof(accel_kp_rope_constants_t) == 32, "rope constants");

// ---------------------------------------------------------------------------
// Elementwise kernels. unit: ACCEL_KP_EW_CHUNK consecutive elements (the last
// one shorter). The output may alias an input.
#define ACCEL_KP_EW_CHUNK 16384u
//
// "activation": y[i] = act(x[i]).  0 x (read, f32 [count]),
//   1 y (write, f32 [count]); op = accel_kp_activation (not NONE).
// "swiglu": y[i] = silu(gate[i]) * up[i].  0 gate (read, f32 [count]),
//   1 up (read, f32 [count]), 2 y (write, f32 [count]); op and b_count 0.
// "add": y[i] = a[i] + b[i % b_count].  "mul": y[i] = a[i] * b[i % b_count].
//   0 a (read, f32 [count]), 1 b (read, f32 [b_count]),
//   2 y (write, f32 [count]); b_count 0 = count; b_count must divide count
//   (broadcast of a row over rows: b_count = row width).
typedef struct accel_kp_eltwise_constants {
  uint32_t count;       // elements of the output
  uint32_t b_count;     // add / mul: elements of b (0 = count); others: 0
  uint32_t op;          // activation: accel_kp_activation; others: 0
  uint32_t reserved;    // zero
} accel_kp_eltwise_constants_t;
_Static_assert(sizeof(accel_kp_eltwise_constants_t) == 16, "eltwise constants");

// ---------------------------------------------------------------------------
// "embedding": out[t, :] = table[ids[t], :] converted to f32.
//   0 table (read, dtype [vocab, dim]), 1 ids (read, i32 [tokens]),
//   2 out (write, f32 [tokens, dim]). An id outside 0..vocab-1 fails the
//   launch with a message naming the token and the id.
//   unit: one token.
typedef struct accel_kp_embedding_constants {
  uint32_t tokens, vocab, dim;
  uint32_t dtype;  // accel_kp_dtype of the table
} accel_kp_embedding_constants_t;
_Static_assert(sizeof(accel_kp_embedding_constants_t) == 16,
               "embedding constants");

// "embedding_gguf": out[t, :] = the dequantized row ids[t] of a table of
// ggml blocks (the GGUF token embedding, kept in its block form).
//   0 table (read, ggml block_<type> [vocab, dim / block]), 1 ids (read,
//   i32 [tokens]), 2 out (write, f32 [tokens, dim]). type: ggml's number
//   of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K or Q6_K; dim a multiple of
//   its block. Values as ggml's dequantize_row_<type> (kernels/README.md).
//   An id outside 0..vocab-1 fails the launch naming the token and the id.
//   unit: one token.
enum accel_kp_ggml_type {
  ACCEL_KP_GGML_Q4_0 = 2,
  ACCEL_KP_GGML_Q4_1 = 3,
  ACCEL_KP_GGML_Q5_0 = 6,
  ACCEL_KP_GGML_Q5_1 = 7,
  ACCEL_KP_GGML_Q8_0 = 8,
  ACCEL_KP_GGML_Q4_K = 12,
  ACCEL_KP_GGML_Q5_K = 13,
  ACCEL_KP_GGML_Q6_K = 14,
};
typedef struct accel_kp_embedding_gguf_constants {
  uint32_t tokens, vocab, dim;
  uint32_t type;      // accel_kp_ggml_type
  uint32_t reserved;  // zero
  uint32_t pad[3];    // zero (unread)
} accel_kp_embedding_gguf_constants_t;
_Static_assert(sizeof(accel_kp_embedding_gguf_constants_t) == 32,
               "embedding_gguf constants");

// "argmax": out[r] = the index of the largest x[r, :], the lowest index on
//   ties; NaN is never chosen unless the row is all NaN (then 0).
//   0 x (read, f32 [rows, cols]), 1 out (write, i32 [rows]). unit: one row.
// "topk": the k largest of each row, sorted by value descending (lower index
//   first on ties; NaN ranks below every number).
//   0 x (read, f32 [rows, cols]), 1 values (write, f32 [rows, k]),
//   2 indices (write, i32 [rows, k]). 1 <= k <= cols, k <= ACCEL_KP_TOPK_MAX.
//   unit: one row.
#define ACCEL_KP_TOPK_MAX 1024u
typedef struct accel_kp_select_constants {
  uint32_t rows, cols;
  uint32_t k;         // topk: how many; argmax: ignored
  uint32_t reserved;  // zero
} accel_kp_select_constants_t;
_Static_assert(sizeof(accel_kp_select_constants_t) == 16, "select constants");

// ---------------------------------------------------------------------------
// Units of each kernel, to size the grid (at most that many work-groups are
// useful). |c| points at the kernel's constants.
ACCEL_KP_FN uint64_t accel_kp_matmul_units(
    const accel_kp_matmul_constants_t *c) {
  uint64_t tm = c->tile_m ? c->tile_m : ACCEL_KP_MM_DEFAULT_TILE_M(c->m, c->n);
  uint64_t tn = c->tile_n ? c->tile_n : ACCEL_KP_MM_DEFAULT_TILE_N(c->m, c->n);
  return ((c->m + tm - 1) / tm) * ((c->n + tn - 1) / tn);
}
ACCEL_KP_FN uint64_t accel_kp_qmatmul_units(
    const accel_kp_qmatmul_constants_t *c) {
  uint64_t tn = c->tile_n ? c->tile_n : ACCEL_KP_QMM_TILE_N;
  return (c->n + tn - 1) / tn;
}
ACCEL_KP_FN uint64_t accel_kp_eltwise_units(
    const accel_kp_eltwise_constants_t *c) {
  return (c->count + (uint64_t)ACCEL_KP_EW_CHUNK - 1) / ACCEL_KP_EW_CHUNK;
}
// Row kernels (softmax, layernorm, rmsnorm, argmax, topk): rows; rope and
// embedding: tokens.

#ifdef __cplusplus
}
#endif

#endif  // ACCEL_KERNELS_HOST_KERNEL_PARAMS_H_
