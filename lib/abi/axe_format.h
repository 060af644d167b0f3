// On-disk layout of .axe files (docs/executable-format.md is the
// specification; this header mirrors it). All integers are little-endian;
// records are packed by construction (explicit padding, sizes pinned).
#ifndef ACCEL_ABI_AXE_FORMAT_H_
#define ACCEL_ABI_AXE_FORMAT_H_

#include <stdint.h>

#define AXE_MAGIC "\x89" "AXE\r\n\x1a\n"
#define AXE_MAGIC_SIZE 8
#define AXE_HEADER_SIZE 128u
#define AXE_SECTION_ENTRY_SIZE 64u
#define AXE_MIN_DATA_ALIGNMENT 64u
#define AXE_MAP_ALIGNMENT 4096u
#define AXE_NONE 0xffffffffu  // "no reference" in u32 index fields

// Limits that keep a hostile file from asking for absurd work.
#define AXE_MAX_SECTIONS 65536u
#define AXE_MAX_NAME 255u
#define AXE_MAX_BINDINGS 256u
#define AXE_MAX_CONSTANTS 4096u

typedef struct axe_header {
  uint8_t magic[8];
  uint16_t version_major;
  uint16_t version_minor;
  uint32_t header_size;
  uint64_t file_size;
  uint64_t section_table_offset;
  uint32_t section_count;
  uint32_t section_entry_size;
  uint64_t required_features;  // unknown bit set: ACCEL_ERROR_VERSION
  uint64_t optional_features;  // unknown bits ignored
  uint8_t uuid[16];
  // XXH3-64 of the header (this field as 0) followed by the section table.
  uint64_t header_hash;
  uint8_t reserved[48];
} axe_header_t;
_Static_assert(sizeof(axe_header_t) == AXE_HEADER_SIZE, "header layout");

// Section kinds.
enum {
  AXE_SECTION_STRINGS = 1,
  AXE_SECTION_REQUIREMENTS = 2,
  AXE_SECTION_KERNELS = 3,
  AXE_SECTION_BINDINGS = 4,
  AXE_SECTION_CODE = 5,
  AXE_SECTION_WEIGHTS = 6,
  AXE_SECTION_WEIGHT_DATA = 7,
  AXE_SECTION_QUANT = 8,
  AXE_SECTION_METADATA = 9,
  AXE_SECTION_SIGNATURE = 10,
  AXE_SECTION_KIND_LAST = 10,
};

// Section flags.
enum {
  AXE_SECTION_FLAG_REQUIRED = 1u << 0,
  AXE_SECTION_FLAG_MAPPABLE = 1u << 1,  // page-aligned, meant to be mapped
  AXE_SECTION_FLAGS_KNOWN = 3u,
};

typedef struct axe_section {
  uint32_t kind;
  uint32_t flags;
  uint64_t offset;
  uint64_t size;
  uint32_t name;       // strings offset; 0 = unnamed
  uint32_t info;       // per kind: CODE: accel_code_format_t
  uint32_t count;      // records in the section (tables), 0 otherwise
  uint32_t alignment;  // power of two; offset % alignment == 0
  uint16_t layout_major;  // version of the section's record layout
  uint16_t layout_minor;
  uint32_t reserved0;
  uint8_t hash[16];    // XXH3-128 of the content, canonical (big-endian) form
} axe_section_t;
_Static_assert(sizeof(axe_section_t) == AXE_SECTION_ENTRY_SIZE,
               "section layout");

typedef struct axe_requirements {
  uint32_t min_runtime_version;  // accel API major << 16 | minor
  uint32_t kernel_abi_version;   // ACCEL_KERNEL_ABI_VERSION of the code
  uint32_t required_caps;        // accel_device_cap_bits
  uint32_t workspace_alignment;  // power of two, 0 = 64
  uint64_t workspace_bytes;
  uint64_t reserved[5];
} axe_requirements_t;
_Static_assert(sizeof(axe_requirements_t) == 64, "requirements layout");

typedef struct axe_kernel {
  uint32_t name;
  uint32_t symbol;
  uint32_t abi_version;
  uint32_t flags;  // zero
  uint32_t binding_first;  // index into BINDINGS
  uint32_t binding_count;
  uint32_t constants_size;
  uint32_t workgroup_size[3];
  uint32_t reserved[6];
} axe_kernel_t;
_Static_assert(sizeof(axe_kernel_t) == 64, "kernel layout");

typedef struct axe_binding {
  uint32_t name;
  uint32_t access;
  uint32_t alignment;
  uint32_t reserved0;
  uint64_t min_size_bytes;
} axe_binding_t;
_Static_assert(sizeof(axe_binding_t) == 24, "binding layout");

typedef struct axe_weight {
  uint32_t name;
  uint32_t dtype;
  uint32_t rank;
  uint32_t layout;
  uint64_t shape[8];
  uint64_t strides[8];
  uint32_t block[2];
  uint32_t data_section;  // section index of a WEIGHT_DATA section
  uint32_t quant;         // index into QUANT, or AXE_NONE
  uint64_t data_offset;   // within the data section, multiple of 64
  uint64_t size_bytes;
  uint64_t reserved[2];
} axe_weight_t;
_Static_assert(sizeof(axe_weight_t) == 192, "weight layout");

typedef struct axe_quant {
  uint32_t scheme;
  uint32_t axis;
  uint32_t group_size;
  uint32_t scale;       // weight index
  uint32_t zero_point;  // weight index or AXE_NONE
  uint32_t reserved[3];
} axe_quant_t;
_Static_assert(sizeof(axe_quant_t) == 32, "quant layout");

typedef struct axe_metadata {
  uint32_t key;
  uint32_t value;
} axe_metadata_t;
_Static_assert(sizeof(axe_metadata_t) == 8, "metadata layout");

// Record-layout versions this runtime reads, per section kind.
#define AXE_TABLE_LAYOUT_MAJOR 1
#define AXE_TABLE_LAYOUT_MINOR 0

#endif  // ACCEL_ABI_AXE_FORMAT_H_
