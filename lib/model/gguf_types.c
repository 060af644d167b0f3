// GGUF tensor types: ggml's names for every number it ever used, and the
// block layout of those the reader accepts (docs/gguf.md, "Tensor types").
#include "accel/gguf.h"
#include "core/error.h"

typedef struct type_info {
  const char *name;
  uint32_t block_elements;  // 0: the reader does not accept the type
  uint32_t block_bytes;
} type_info_t;

// Indexed by ggml's type number. Blocks of 32 hold one f16 scale (and
// a minimum or a sum where the name says _1) before the quants; K-quant
// super-blocks hold 256 elements.
static const type_info_t k_types[] = {
    [0] = {"F32", 1, 4},
    [1] = {"F16", 1, 2},
    [2] = {"Q4_0", 32, 18},   // f16 d, 16 bytes of nibbles
    [3] = {"Q4_1", 32, 20},   // f16 d, f16 m, 16 bytes of nibbles
    [4] = {"Q4_2", 0, 0},     // removed from ggml
    [5] = {"Q4_3", 0, 0},     // removed from ggml
    [6] = {"Q5_0", 32, 22},   // f16 d, 4 bytes of high bits, 16 of nibbles
    [7] = {"Q5_1", 32, 24},   // f16 d, f16 m, 4 + 16 bytes
    [8] = {"Q8_0", 32, 34},   // f16 d, 32 int8
    [9] = {"Q8_1", 32, 36},   // f16 d, f16 s, 32 int8
    [10] = {"Q2_K", 256, 84},   // 16 scales, 64 quants, f16 d, f16 dmin
    [11] = {"Q3_K", 256, 110},  // 32 hmask, 64 quants, 12 scales, f16 d
    [12] = {"Q4_K", 256, 144},  // f16 d, f16 dmin, 12 scales, 128 quants
    [13] = {"Q5_K", 256, 176},  // f16 d, f16 dmin, 12 scales, 32 qh, 128 qs
    [14] = {"Q6_K", 256, 210},  // 128 ql, 64 qh, 16 scales, f16 d
    [15] = {"Q8_K", 256, 292},  // f32 d, 256 int8, 16 int16 sums
    [16] = {"IQ2_XXS", 0, 0},
    [17] = {"IQ2_XS", 0, 0},
    [18] = {"IQ3_XXS", 0, 0},
    [19] = {"IQ1_S", 0, 0},
    [20] = {"IQ4_NL", 32, 18},   // f16 d, 16 bytes of nibbles (table values)
    [21] = {"IQ3_S", 0, 0},
    [22] = {"IQ2_S", 0, 0},
    [23] = {"IQ4_XS", 256, 136},  // f16 d, u16 scales_h, 4 scales_l, 128 qs
    [24] = {"I8", 1, 1},
    [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},
    [27] = {"I64", 1, 8},
    [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 0, 0},
    [30] = {"BF16", 1, 2},
    [31] = {"Q4_0_4_4", 0, 0},  // removed from GGUF files
    [32] = {"Q4_0_4_8", 0, 0},
    [33] = {"Q4_0_8_8", 0, 0},
    [34] = {"TQ1_0", 0, 0},
    [35] = {"TQ2_0", 0, 0},
    [36] = {"IQ4_NL_4_4", 0, 0},
    [37] = {"IQ4_NL_4_8", 0, 0},
    [38] = {"IQ4_NL_8_8", 0, 0},
    [39] = {"MXFP4", 0, 0},
};

#define TYPE_COUNT (sizeof(k_types) / sizeof(k_types[0]))

const char *accel_gguf_type_name(uint32_t type) {
  return type < TYPE_COUNT && k_types[type].name != NULL ? k_types[type].name
                                                         : "unknown";
}

accel_status_t accel_gguf_type_block(uint32_t type,
                                     uint32_t *out_block_elements,
                                     uint32_t *out_block_bytes) {
  ACCEL_CHECK_ARG(out_block_elements != NULL, "out_block_elements (NULL)");
  ACCEL_CHECK_ARG(out_block_bytes != NULL, "out_block_bytes (NULL)");
  if (type >= TYPE_COUNT || k_types[type].block_elements == 0) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "GGUF tensor type %u (%s) is not supported", type,
                       accel_gguf_type_name(type));
  }
  *out_block_elements = k_types[type].block_elements;
  *out_block_bytes = k_types[type].block_bytes;
  return ACCEL_OK;
}
