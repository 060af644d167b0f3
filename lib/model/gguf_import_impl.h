// The GGUF import's checks with the output left open (gguf_import.c): the
// decoder .axe writer (accel_gguf_import_file/_memory) and the mapped model
// (gguf_mapped.c) both take the same metadata and the same weights from
// one pass over the file.
#ifndef ACCEL_MODEL_GGUF_IMPORT_IMPL_H_
#define ACCEL_MODEL_GGUF_IMPORT_IMPL_H_

#include "accel/executable.h"
#include "accel/gguf.h"

// Where the import puts what it found. Both functions copy what they keep
// (the strings; |info| is borrowed for the call and its host_data points
// into the GGUF's bytes); a failure stops the import with that status.
typedef struct gguf_import_sink {
  accel_status_t (*metadata)(void *ctx, const char *key, const char *value);
  accel_status_t (*weight)(void *ctx, const accel_weight_info_t *info);
  void *ctx;
} gguf_import_sink_t;

// Checks |gguf| as accel_gguf_import_file does and hands the decoder's
// metadata ("model", "decoder.*") and weights (by their .axe names, with
// their GGUF bytes as host_data) to |sink|. Errors as accel_gguf_import_file
// (without ACCEL_ERROR_IO), or the sink's.
accel_status_t accel_gguf_import_build(const accel_gguf_t *gguf,
                                       const gguf_import_sink_t *sink);

#endif  // ACCEL_MODEL_GGUF_IMPORT_IMPL_H_
