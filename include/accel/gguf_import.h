// Importing a GGUF model into a decoder .axe (docs/gguf.md, "Importing a
// model"; the decoder format in docs/executable-format.md, "Decoder models"):
// what `accel-pack --from-gguf` writes and what the serving engine builds in
// memory when it is given a .gguf. Tensors keep the GGUF's own bytes (F32,
// F16, BF16 as they are; Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K
// in their block form, read directly by the block kernels), never widened
// to f32; a tied output head is the embedding weight itself.
#ifndef ACCEL_GGUF_IMPORT_H_
#define ACCEL_GGUF_IMPORT_H_

#include <stdint.h>

#include "accel/base.h"
#include "accel/executable.h"
#include "accel/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

// Writes the decoder .axe of the model in |gguf| to |path| (atomically, as
// accel_exe_builder_write_file). The architecture (general.architecture)
// must be "llama" or "qwen2" (Q, K and V biases); every tensor the model needs must be present with the
// shape the metadata implies and a supported type; the file's other tensors
// are refused by name. |progress| (may be NULL) is called as weight bytes are
// written.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL |gguf| or |path|.
// ACCEL_ERROR_UNSUPPORTED: another architecture, a tensor type other than
//   F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K (norms:
//   F32 only), a tensor the decoder does not use (rope frequency factors,
//   biases), rope scaling, or a rope over part of a head; each named.
// ACCEL_ERROR_FORMAT: missing or contradictory metadata, a missing tensor or
//   one of the wrong shape (named, with the shape found and expected).
// ACCEL_ERROR_IO: |path| cannot be written. ACCEL_ERROR_OUT_OF_MEMORY.
// Thread-safe: |gguf| is only read.
ACCEL_API accel_status_t accel_gguf_import_file(const accel_gguf_t *gguf,
                                                const char *path,
                                                accel_exe_progress_fn_t progress,
                                                void *user_data);

// Builds the same .axe image in memory: |*out_data| (64-byte aligned, the
// caller frees it with free()) and |*out_size|, ready for
// accel_executable_load_memory. Untouched on failure.
// Errors as accel_gguf_import_file, without ACCEL_ERROR_IO.
// Thread-safe: |gguf| is only read.
ACCEL_API accel_status_t accel_gguf_import_memory(const accel_gguf_t *gguf,
                                                  void **out_data,
                                                  uint64_t *out_size);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_GGUF_IMPORT_H_
