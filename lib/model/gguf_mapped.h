// A GGUF decoder model run in place (docs/gguf.md, "Running a .gguf
// mapped"): the import's checks (gguf_import_impl.h) over a file the reader
// has mapped read-only, with the decoder's metadata and weights kept as a
// table whose weights are read-only buffers aliasing the mapping, so that
// no weight byte is copied. The serving engine's model runner reads it as
// it reads a decoder .axe (metadata by key, weights by name).
#ifndef ACCEL_MODEL_GGUF_MAPPED_H_
#define ACCEL_MODEL_GGUF_MAPPED_H_

#include <stdbool.h>

#include "accel/device.h"
#include "accel/executable.h"
#include "accel/gguf.h"
#include "accel/memory.h"

typedef struct accel_gguf_mapped accel_gguf_mapped_t;

// Whether |gguf| can run in place on |device|: the device reads host memory
// (ACCEL_DEVICE_CAP_HOST_VISIBLE) and every tensor's bytes start at a
// multiple of 4 (the kernels read f32 and f16 elements where they lie; the
// GGUF default alignment is 32). When it cannot, |why| (may be NULL) gets
// the reason, and the caller imports the file into memory instead.
bool accel_gguf_mapped_possible(accel_device_t *device,
                                const accel_gguf_t *gguf, char *why,
                                size_t why_size);

// Checks |gguf| as accel_gguf_import_memory does and builds the model over
// its bytes. On success the model owns |gguf| (closed when the model and
// every weight buffer are released); on failure the caller still does.
// |populate|: read every weight page in now (the load does the file's I/O,
// not the first step). Errors as accel_gguf_import_memory;
// ACCEL_ERROR_UNSUPPORTED where accel_gguf_mapped_possible says no.
accel_status_t accel_gguf_mapped_create(accel_device_t *device,
                                        accel_gguf_t *gguf, bool populate,
                                        accel_gguf_mapped_t **out);

// Drops the caller's reference; weight buffers keep their own.
void accel_gguf_mapped_release(accel_gguf_mapped_t *model);

// As accel_executable_metadata: the value of |key| (owned by the model).
// ACCEL_ERROR_NOT_FOUND.
accel_status_t accel_gguf_mapped_metadata(const accel_gguf_mapped_t *model,
                                          const char *key,
                                          const char **out_value);

// As accel_executable_weight: |name|'s dtype, shape, size and host_data
// (inside the mapping). ACCEL_ERROR_NOT_FOUND.
accel_status_t accel_gguf_mapped_weight(const accel_gguf_mapped_t *model,
                                        const char *name,
                                        accel_weight_info_t *out_info);

// As accel_executable_weight_buffer: a new read-only buffer over |name|'s
// bytes in the mapping; it holds a reference on the model. The caller
// releases it (accel_buffer_release). ACCEL_ERROR_NOT_FOUND,
// ACCEL_ERROR_OUT_OF_MEMORY.
accel_status_t accel_gguf_mapped_weight_buffer(accel_gguf_mapped_t *model,
                                               const char *name,
                                               accel_buffer_t **out_buffer);

#endif  // ACCEL_MODEL_GGUF_MAPPED_H_
