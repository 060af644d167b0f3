// The .axe validator: turns an image into a checked view. Every offset, size,
// count, alignment, string and cross-reference is checked (with
// overflow-safe arithmetic) before the view is returned, so that users of the
// view index its tables without further checks. Pure: no runtime, no device
// (the fuzz target links it alone).
#ifndef ACCEL_ABI_AXE_READER_H_
#define ACCEL_ABI_AXE_READER_H_

#include <stdbool.h>
#include <stdint.h>

#include "abi/axe_format.h"
#include "accel/base.h"

typedef struct axe_view {
  const uint8_t *data;
  uint64_t size;
  const axe_header_t *header;
  const axe_section_t *sections;
  uint32_t section_count;
  const char *strings;
  uint64_t strings_size;
  const axe_requirements_t *requirements;
  const axe_kernel_t *kernels;
  uint32_t kernel_count;
  const axe_binding_t *bindings;
  uint32_t binding_count;
  const axe_weight_t *weights;
  uint32_t weight_count;
  const axe_quant_t *quants;
  uint32_t quant_count;
  const axe_metadata_t *metadata;
  uint32_t metadata_count;
  uint32_t skipped_sections;  // optional sections of unknown kinds
} axe_view_t;

// Validates [data, data + size) (|data| 8-byte aligned at least) and fills
// |*out_view|. |skip_hashes| skips the per-section content hashes. Returns
// ACCEL_ERROR_FORMAT or ACCEL_ERROR_VERSION with a message naming the section
// and field.
accel_status_t accel_axe_parse(const void *data, uint64_t size,
                               bool skip_hashes, axe_view_t *out_view);

// Checks what the first AXE_HEADER_SIZE bytes of a file of |size| bytes say
// on their own (magic, format major, header size, file size), so that a
// loader refuses a file that is no .axe before it reads or maps the rest.
// |header| holds min(size, AXE_HEADER_SIZE) bytes, 8-byte aligned.
// ACCEL_ERROR_FORMAT or ACCEL_ERROR_VERSION as accel_axe_parse.
accel_status_t accel_axe_check_header_prefix(const void *header, uint64_t size);

// A string of the view's string table; |offset| was validated by
// accel_axe_parse.
static inline const char *axe_string(const axe_view_t *view, uint32_t offset) {
  return view->strings + offset;
}

// Names a section kind ("kernels"), "unknown" for others.
const char *accel_axe_section_kind_name(uint32_t kind);

// Bytes the weight's shape, layout and dtype need; false on overflow or on
// an invalid description (|*out_why| says which).
bool accel_axe_weight_extent(uint32_t dtype, uint32_t rank,
                             const uint64_t *shape, const uint64_t *strides,
                             uint32_t layout, const uint32_t *block,
                             uint64_t *out_bytes, const char **out_why);

// Content hash of a section (XXH3-128, canonical big-endian bytes).
void accel_axe_hash128(const void *data, uint64_t size, uint8_t out[16]);
// Header hash: XXH3-64 over the header with header_hash as 0, then the table.
uint64_t accel_axe_header_hash(const axe_header_t *header, const void *table,
                               uint64_t table_size);

#endif  // ACCEL_ABI_AXE_READER_H_
