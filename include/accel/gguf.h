// GGUF model files (llama.cpp's format, versions 2 and 3): a validating
// reader that maps the file once and hands out views of its metadata and
// tensors without copying. Everything an offset, count or size in the file
// says is checked before it is used (docs/gguf.md lists each check), so a
// file that opens can be walked without further bounds checks. It is what
// importing a GGUF model into an .axe and running a .gguf directly build on.
//
// Strings in a GGUF file are not NUL-terminated: they come as
// accel_gguf_string_t (pointer and length) and stay valid while the file is
// open. Numbers are little-endian, as the format has them; the reader runs
// on little-endian hosts and refuses big-endian files by name.
#ifndef ACCEL_GGUF_H_
#define ACCEL_GGUF_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_gguf accel_gguf_t;

// Metadata value types, numbered as the file stores them.
typedef enum accel_gguf_value_type {
  ACCEL_GGUF_VALUE_UINT8 = 0,
  ACCEL_GGUF_VALUE_INT8 = 1,
  ACCEL_GGUF_VALUE_UINT16 = 2,
  ACCEL_GGUF_VALUE_INT16 = 3,
  ACCEL_GGUF_VALUE_UINT32 = 4,
  ACCEL_GGUF_VALUE_INT32 = 5,
  ACCEL_GGUF_VALUE_FLOAT32 = 6,
  ACCEL_GGUF_VALUE_BOOL = 7,
  ACCEL_GGUF_VALUE_STRING = 8,
  ACCEL_GGUF_VALUE_ARRAY = 9,
  ACCEL_GGUF_VALUE_UINT64 = 10,
  ACCEL_GGUF_VALUE_INT64 = 11,
  ACCEL_GGUF_VALUE_FLOAT64 = 12,
  ACCEL_GGUF_VALUE_TYPE_COUNT = 13,
} accel_gguf_value_type_t;

// Tensor element types, numbered as ggml numbers them. The reader accepts the
// types whose block layout it knows (those named here); a file with any other
// type is refused naming it (for example "IQ2_XXS").
typedef enum accel_gguf_tensor_type {
  ACCEL_GGUF_TYPE_F32 = 0,
  ACCEL_GGUF_TYPE_F16 = 1,
  ACCEL_GGUF_TYPE_Q4_0 = 2,
  ACCEL_GGUF_TYPE_Q4_1 = 3,
  ACCEL_GGUF_TYPE_Q5_0 = 6,
  ACCEL_GGUF_TYPE_Q5_1 = 7,
  ACCEL_GGUF_TYPE_Q8_0 = 8,
  ACCEL_GGUF_TYPE_Q8_1 = 9,
  ACCEL_GGUF_TYPE_Q2_K = 10,
  ACCEL_GGUF_TYPE_Q3_K = 11,
  ACCEL_GGUF_TYPE_Q4_K = 12,
  ACCEL_GGUF_TYPE_Q5_K = 13,
  ACCEL_GGUF_TYPE_Q6_K = 14,
  ACCEL_GGUF_TYPE_Q8_K = 15,
  ACCEL_GGUF_TYPE_IQ4_NL = 20,
  ACCEL_GGUF_TYPE_IQ4_XS = 23,
  ACCEL_GGUF_TYPE_I8 = 24,
  ACCEL_GGUF_TYPE_I16 = 25,
  ACCEL_GGUF_TYPE_I32 = 26,
  ACCEL_GGUF_TYPE_I64 = 27,
  ACCEL_GGUF_TYPE_F64 = 28,
  ACCEL_GGUF_TYPE_BF16 = 30,
} accel_gguf_tensor_type_t;

// Most dimensions of a tensor (ggml's GGML_MAX_DIMS).
#define ACCEL_GGUF_MAX_DIMS 4
// Longest tensor name, in bytes (ggml's GGML_MAX_NAME less its NUL).
#define ACCEL_GGUF_MAX_NAME 63

// A string of the file: |size| bytes at |data|, not NUL-terminated, valid
// while the file is open.
typedef struct accel_gguf_string {
  const char *data;
  uint64_t size;
} accel_gguf_string_t;

// A metadata value. Scalars are widened into |u64| (unsigned types and
// bool), |i64| (signed types) or |f64| (floats); a string is |str|. For an
// ARRAY, |array_type| and |array_count| describe the elements; numeric and
// bool elements are |array_count| packed little-endian values at
// |array_data| (not necessarily aligned: read them with memcpy); string
// elements are read with accel_gguf_array_string.
typedef struct accel_gguf_value {
  uint32_t type;        // accel_gguf_value_type_t
  uint32_t array_type;  // ARRAY only: the elements' type (never ARRAY)
  uint64_t array_count;
  const void *array_data;
  uint64_t entry;  // the metadata entry this value is (accel_gguf_kv index)
  union {
    uint64_t u64;
    int64_t i64;
    double f64;
    accel_gguf_string_t str;
  } scalar;
} accel_gguf_value_t;

// A tensor's description and its bytes in the mapped file.
typedef struct accel_gguf_tensor {
  accel_gguf_string_t name;
  uint32_t type;    // accel_gguf_tensor_type_t
  uint32_t n_dims;  // 1..ACCEL_GGUF_MAX_DIMS
  uint64_t dims[ACCEL_GGUF_MAX_DIMS];  // dims[0] varies fastest; 1 past n_dims
  uint64_t element_count;
  uint64_t size_bytes;
  uint64_t file_offset;  // of the first byte, from the start of the file
  const void *data;      // aligned to the file's alignment within the file
} accel_gguf_tensor_t;

// Opens and validates the GGUF file at |path|, mapped read-only; the mapping
// lives until accel_gguf_close. |*out| is the caller's.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument. ACCEL_ERROR_NOT_FOUND: no
// such file. ACCEL_ERROR_IO: the file cannot be opened, is not a regular
// file, or cannot be mapped (the message says which). ACCEL_ERROR_FORMAT: the file breaks a rule of docs/gguf.md
// (the message names the field and the offset). ACCEL_ERROR_VERSION: a GGUF
// version other than 2 or 3. ACCEL_ERROR_UNSUPPORTED: a big-endian file or a
// tensor type the reader does not know (named). ACCEL_ERROR_OUT_OF_MEMORY.
// Thread-safe (no shared state).
ACCEL_API accel_status_t accel_gguf_open_file(const char *path,
                                              accel_gguf_t **out);

// Validates the GGUF image of |size| bytes at |data| and opens it without
// copying: the caller keeps |data| alive and unchanged until
// accel_gguf_close. Errors as accel_gguf_open_file (no IO). Thread-safe.
ACCEL_API accel_status_t accel_gguf_open_memory(const void *data, size_t size,
                                                accel_gguf_t **out);

// Closes |gguf| (unmaps a file it mapped); every view it handed out becomes
// invalid. NULL is ignored. Not to be called while another thread uses
// |gguf|.
ACCEL_API void accel_gguf_close(accel_gguf_t *gguf);

// Whether |path| names a regular file that starts with the GGUF magic (a
// cheap probe before choosing a loader; accel_gguf_open_file does the
// checks). False for NULL, a file that cannot be opened, or anything else.
// Never sets an error. Thread-safe.
ACCEL_API bool accel_gguf_file_is_gguf(const char *path);

// The file's GGUF version (2 or 3), its alignment (general.alignment, 32 when
// absent) and its number of metadata entries and tensors. Never fail on an
// open file. Thread-safe: an open file is read-only.
ACCEL_API uint32_t accel_gguf_version(const accel_gguf_t *gguf);
ACCEL_API uint32_t accel_gguf_alignment(const accel_gguf_t *gguf);
ACCEL_API uint64_t accel_gguf_kv_count(const accel_gguf_t *gguf);
ACCEL_API uint64_t accel_gguf_tensor_count(const accel_gguf_t *gguf);

// The metadata entry |index| (file order): its key and value.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or |index| out of range.
// Thread-safe.
ACCEL_API accel_status_t accel_gguf_kv(const accel_gguf_t *gguf,
                                       uint64_t index,
                                       accel_gguf_string_t *out_key,
                                       accel_gguf_value_t *out_value);

// Finds the metadata entry |key| (exact, NUL-terminated; keys are unique in
// a valid file) in O(log n).
// ACCEL_ERROR_NOT_FOUND: no such key. ACCEL_ERROR_INVALID_ARGUMENT: NULL
// argument. Thread-safe.
ACCEL_API accel_status_t accel_gguf_find_kv(const accel_gguf_t *gguf,
                                            const char *key,
                                            accel_gguf_value_t *out_value);

// Typed lookups of |key|: any unsigned or non-negative signed integer that
// fits (u64), any integer (i64), any float or integer (f64), a string.
// ACCEL_ERROR_NOT_FOUND: no such key. ACCEL_ERROR_FORMAT: the value has
// another type or does not fit (the message names the key and its type).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument. Thread-safe.
ACCEL_API accel_status_t accel_gguf_find_u64(const accel_gguf_t *gguf,
                                             const char *key,
                                             uint64_t *out_value);
ACCEL_API accel_status_t accel_gguf_find_f64(const accel_gguf_t *gguf,
                                             const char *key,
                                             double *out_value);
ACCEL_API accel_status_t accel_gguf_find_string(const accel_gguf_t *gguf,
                                                const char *key,
                                                accel_gguf_string_t *out_value);

// Element |index| of the string array |array| (a value this file handed
// out), in O(1).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, not a string array of this
// file, or |index| out of range. Thread-safe.
ACCEL_API accel_status_t accel_gguf_array_string(const accel_gguf_t *gguf,
                                                 const accel_gguf_value_t *array,
                                                 uint64_t index,
                                                 accel_gguf_string_t *out);

// Tensor |index| (file order).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or |index| out of range.
// Thread-safe.
ACCEL_API accel_status_t accel_gguf_tensor(const accel_gguf_t *gguf,
                                           uint64_t index,
                                           accel_gguf_tensor_t *out);

// Finds the tensor named |name| (NUL-terminated) in O(log n).
// ACCEL_ERROR_NOT_FOUND: no such tensor. ACCEL_ERROR_INVALID_ARGUMENT: NULL
// argument. Thread-safe.
ACCEL_API accel_status_t accel_gguf_find_tensor(const accel_gguf_t *gguf,
                                                const char *name,
                                                accel_gguf_tensor_t *out);

// ggml's name of tensor type |type| ("Q4_K"), also for types the reader
// refuses; "unknown" for a number ggml never used. Never NULL. Thread-safe.
ACCEL_API const char *accel_gguf_type_name(uint32_t type);

// The block of tensor type |type|: elements per block and bytes per block
// (F32: 1 and 4; Q4_K: 256 and 144).
// ACCEL_ERROR_UNSUPPORTED: a type the reader does not know (named).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument. Thread-safe.
ACCEL_API accel_status_t accel_gguf_type_block(uint32_t type,
                                               uint32_t *out_block_elements,
                                               uint32_t *out_block_bytes);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_GGUF_H_
