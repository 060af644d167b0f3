// Minimal reader for NumPy .npy headers (format versions 1.0 to 3.0):
// little-endian dtypes, C order.
#ifndef ACCEL_TOOLS_NPY_H_
#define ACCEL_TOOLS_NPY_H_

#include <stdint.h>

#include "accel/executable.h"

typedef struct npy_info {
  accel_dtype_t dtype;
  uint32_t rank;
  uint64_t shape[ACCEL_WEIGHT_MAX_RANK];
  uint64_t data_offset;  // bytes from the file start to the array data
} npy_info_t;

// Parses the header in [data, data + size). Returns 0, or -1 with a message
// in |err| (|err_size| bytes).
int npy_parse(const uint8_t *data, uint64_t size, npy_info_t *out, char *err,
              size_t err_size);

#endif  // ACCEL_TOOLS_NPY_H_
