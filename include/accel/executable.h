// Executables and kernels: loading compiled .axe files (docs/executable-format.md),
// looking up their kernels and weights, registering run-time kernels, launching
// kernels on streams, and building .axe files (the writer side of the format).
//
// An executable is loaded for one device: its code object for the device's
// target is loaded, its weights are made visible to the device (mapped without
// copying on host-visible devices), and its kernels become launchable.
// Executables and kernels are ref-counted; a launch in flight holds its own
// references.
#ifndef ACCEL_EXECUTABLE_H_
#define ACCEL_EXECUTABLE_H_

#include "accel/base.h"
#include "accel/device.h"
#include "accel/kernel_abi.h"
#include "accel/memory.h"
#include "accel/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_executable accel_executable_t;
typedef struct accel_kernel accel_kernel_t;
typedef struct accel_exe_builder accel_exe_builder_t;

// Format version this runtime reads and writes (docs/versioning.md).
#define ACCEL_EXE_FORMAT_VERSION_MAJOR 1
#define ACCEL_EXE_FORMAT_VERSION_MINOR 0
// Weight-layout version (the WEIGHTS/QUANT record layouts), versioned apart
// from the code ABI (ACCEL_KERNEL_ABI_VERSION).
#define ACCEL_EXE_WEIGHT_LAYOUT_VERSION_MAJOR 1
#define ACCEL_EXE_WEIGHT_LAYOUT_VERSION_MINOR 0

// Load flags (accel_executable_load_*).
typedef uint32_t accel_executable_load_flags_t;
enum accel_executable_load_flag_bits {
  ACCEL_EXECUTABLE_LOAD_NONE = 0,
  // Skip the per-section content hashes (trusted files); structure is still
  // validated in full and the header hash is still checked.
  ACCEL_EXECUTABLE_LOAD_SKIP_HASHES = 1u << 0,
  // Make weights resident at load (prefault the mapping) instead of on first
  // touch.
  ACCEL_EXECUTABLE_LOAD_EAGER_WEIGHTS = 1u << 1,
};

// Element types of weights.
typedef enum accel_dtype {
  ACCEL_DTYPE_INVALID = 0,
  ACCEL_DTYPE_F32 = 1,
  ACCEL_DTYPE_F16 = 2,
  ACCEL_DTYPE_BF16 = 3,
  ACCEL_DTYPE_F8E4M3 = 4,
  ACCEL_DTYPE_F8E5M2 = 5,
  ACCEL_DTYPE_I32 = 6,
  ACCEL_DTYPE_I8 = 7,
  ACCEL_DTYPE_U8 = 8,
  // Two 4-bit values per byte, element 2k in the low nibble.
  ACCEL_DTYPE_I4 = 9,
  ACCEL_DTYPE_U4 = 10,
  ACCEL_DTYPE_I16 = 11,
  ACCEL_DTYPE_U16 = 12,
  ACCEL_DTYPE_U32 = 13,
  ACCEL_DTYPE_I64 = 14,
  ACCEL_DTYPE_F64 = 15,
  ACCEL_DTYPE_COUNT = 16,
} accel_dtype_t;

// Returns the bits per element of |dtype| (4 for packed i4/u4), 0 if unknown.
// Thread-safe.
ACCEL_API uint32_t accel_dtype_bits(accel_dtype_t dtype);

// Returns the lower-case name of |dtype| ("f32", "i4"), "invalid" if unknown.
// Thread-safe.
ACCEL_API const char *accel_dtype_name(accel_dtype_t dtype);

// Memory layouts of weights.
typedef enum accel_weight_layout {
  // Strided: element (i0..ir-1) at sum(i_k * stride_k) elements; strides of
  // all zero mean dense row-major.
  ACCEL_WEIGHT_LAYOUT_STRIDED = 0,
  // Blocked for matrix units: the last two dims are cut into block[0] x
  // block[1] tiles (padded with zeros); tiles in row-major order, elements
  // row-major inside a tile; leading dims row-major over tiles.
  ACCEL_WEIGHT_LAYOUT_BLOCKED = 1,
} accel_weight_layout_t;

// Quantization schemes.
typedef enum accel_quant_scheme {
  ACCEL_QUANT_NONE = 0,
  // One scale (and zero point) for the whole tensor.
  ACCEL_QUANT_PER_TENSOR = 1,
  // One per index along |axis|.
  ACCEL_QUANT_PER_CHANNEL = 2,
  // One per |group_size| consecutive elements along |axis|.
  ACCEL_QUANT_GROUPWISE = 3,
} accel_quant_scheme_t;

#define ACCEL_WEIGHT_MAX_RANK 8

// A weight as the executable describes it.
typedef struct accel_weight_info {
  // sizeof(accel_weight_info_t) as the caller compiled it.
  uint32_t struct_size;
  // accel_dtype_t.
  uint32_t dtype;
  // Name (borrowed from the executable).
  const char *name;
  // Number of dims (0 for a scalar), at most ACCEL_WEIGHT_MAX_RANK.
  uint32_t rank;
  // accel_weight_layout_t.
  uint32_t layout;
  // Extent of each dim; entries at and beyond |rank| are 0.
  uint64_t shape[ACCEL_WEIGHT_MAX_RANK];
  // Strides in elements for the strided layout (all 0: dense row-major).
  uint64_t strides[ACCEL_WEIGHT_MAX_RANK];
  // Tile rows and columns for the blocked layout; 0 otherwise.
  uint32_t block[2];
  // accel_quant_scheme_t.
  uint32_t quant_scheme;
  // Quantized axis (per-channel, group-wise); 0 otherwise.
  uint32_t quant_axis;
  // Elements per group (group-wise); 0 otherwise.
  uint32_t quant_group_size;
  // Reserved, zero.
  uint32_t reserved0;
  // Names of the companion scale and zero-point weights (borrowed), NULL when
  // absent.
  const char *quant_scale;
  const char *quant_zero_point;
  // Bytes of data.
  uint64_t size_bytes;
  // Host pointer to the data when the device is host-visible (read-only),
  // NULL otherwise.
  const void *host_data;
} accel_weight_info_t;

// What a kernel declares about one binding.
typedef struct accel_kernel_binding_decl {
  // Name for messages (NULL allowed for run-time kernels).
  const char *name;
  // accel_kernel_access_bits (READ, WRITE or both; not NONE).
  uint32_t access;
  // Required alignment of the bound address, a power of two; 0 means 1.
  uint32_t alignment;
  // Smallest length a launch may bind.
  uint64_t min_size_bytes;
} accel_kernel_binding_decl_t;

// A kernel's signature and shape.
typedef struct accel_kernel_info {
  // sizeof(accel_kernel_info_t) as the caller compiled it.
  uint32_t struct_size;
  // ACCEL_KERNEL_ABI_VERSION the kernel was compiled for.
  uint32_t abi_version;
  // Name (borrowed from the kernel).
  const char *name;
  // Entries in |bindings|.
  uint32_t binding_count;
  // Bytes of constants a launch must pass.
  uint32_t constants_size;
  // Declared bindings (borrowed).
  const accel_kernel_binding_decl_t *bindings;
  // Work-group shape.
  uint32_t workgroup_size[3];
  // Reserved, zero.
  uint32_t reserved0;
  // Since 0.2 (written when |struct_size| reaches them): the metadata its
  // code object declares (kernel ABI 1.2), all zero / NULL when none.
  // The kernel's version (the tuning cache ignores entries of another).
  uint32_t version;
  // Entries in |tunables|.
  uint32_t tunable_count;
  // Its tunable parameters and their candidate values (borrowed; lives as
  // long as the kernel), docs/tuning.md.
  const accel_kernel_tunable_t *tunables;
  // accel_kernel_elem_type of each binding (|binding_count| entries,
  // borrowed), or NULL when undeclared.
  const uint8_t *binding_types;
  // The feature bits its metadata declares (accel_kernel_meta_t.features;
  // their meaning is the kernel family's), 0 when none.
  uint32_t features;
  // Reserved, zero.
  uint32_t reserved1;
} accel_kernel_info_t;

// sizeof(accel_kernel_info_t) in API 0.1 (without the metadata fields).
#define ACCEL_KERNEL_INFO_SIZE_0_1 48u

// What an executable is.
typedef struct accel_executable_info {
  // sizeof(accel_executable_info_t) as the caller compiled it.
  uint32_t struct_size;
  // Format version of the file.
  uint16_t format_major;
  uint16_t format_minor;
  // The executable's UUID.
  uint8_t uuid[16];
  // Kernels, weights and metadata entries it holds.
  uint32_t kernel_count;
  uint32_t weight_count;
  uint32_t metadata_count;
  // Reserved, zero.
  uint32_t reserved0;
  // Scratch workspace bytes the executable declared (allocated at load).
  uint64_t workspace_bytes;
  // Target whose code object was loaded ("host-x86_64").
  char target[32];
} accel_executable_info_t;

// ---------------------------------------------------------------------------
// Loading.
// ---------------------------------------------------------------------------

// Loads the .axe file at |path| for |device|.
// The file is mapped read-only, every offset, size, count, alignment, string
// and cross-reference is checked before use, section hashes are verified
// (unless ACCEL_EXECUTABLE_LOAD_SKIP_HASHES), the requirements are checked
// against the runtime and device, the code object for the device's target is
// loaded (a host shared object by the runtime, with its library initialized;
// a CUDA PTX or cubin by the device's driver, every kernel's symbol looked
// up in it), and the workspace is allocated. Weights
// stay in the mapping (no copy) on host-visible devices.
// On success |*out_executable| holds one reference owned by the caller.
// Before anything else is read, the file must be a regular file (a FIFO, a
// device or a directory is refused without reading it) and its header must
// hold up on its own (magic, format major, sizes), so that a file that is
// no .axe costs one small read, whatever its size.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or unknown flags.
// ACCEL_ERROR_NOT_FOUND: no file at |path|.
// ACCEL_ERROR_IO: the file cannot be opened, sized, read or mapped, or is not
//   a regular file.
// ACCEL_ERROR_FORMAT: the file is malformed; the message names the section
//   and field.
// ACCEL_ERROR_VERSION: the file needs a newer format major, an unknown
//   required section or feature, a newer runtime, or another kernel ABI major.
// ACCEL_ERROR_UNSUPPORTED: no code object for the device's target, the
//   device cannot load its format, or the device lacks a required capability.
// ACCEL_ERROR_NOT_FOUND: a device code object lacks a kernel's symbol.
// ACCEL_ERROR_OUT_OF_MEMORY: the workspace or bookkeeping cannot be allocated.
// Thread-safe.
ACCEL_API accel_status_t accel_executable_load_file(
    accel_runtime_t *runtime, accel_device_t *device, const char *path,
    accel_executable_load_flags_t flags, accel_executable_t **out_executable);

// Loads an executable from the memory image [data, data + size_bytes), with
// the same checks as accel_executable_load_file. The image is borrowed: it
// must stay valid and unchanged until the executable's last reference is gone
// (weights point into it). The image must be 64-byte aligned so that weight
// alignment holds.
// Errors as accel_executable_load_file, without ACCEL_ERROR_IO; an unaligned
// image is ACCEL_ERROR_INVALID_ARGUMENT.
// Thread-safe.
ACCEL_API accel_status_t accel_executable_load_memory(
    accel_runtime_t *runtime, accel_device_t *device, const void *data,
    uint64_t size_bytes, accel_executable_load_flags_t flags,
    accel_executable_t **out_executable);

// Validates the .axe image [data, data + size_bytes) without loading it for
// a device: structure, versions and (unless SKIP_HASHES) hashes.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL data with a non-zero size, unknown flags.
// ACCEL_ERROR_FORMAT, ACCEL_ERROR_VERSION: as accel_executable_load_file.
// Thread-safe.
ACCEL_API accel_status_t accel_executable_verify(
    const void *data, uint64_t size_bytes, accel_executable_load_flags_t flags);

// Adds a reference to |executable|. Thread-safe.
ACCEL_API void accel_executable_retain(accel_executable_t *executable);

// Drops a reference; the last one (launches in flight hold their own) calls
// the library's fini, unloads the code object and unmaps the file. NULL is
// ignored. Thread-safe.
ACCEL_API void accel_executable_release(accel_executable_t *executable);

// Fills |*out_info| (caller sets struct_size) with what |executable| is.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or struct_size too small.
// Thread-safe.
ACCEL_API accel_status_t accel_executable_info(
    const accel_executable_t *executable, accel_executable_info_t *out_info);

// Returns in |*out_kernel| the kernel called |name| (borrowed: valid while the
// executable is; accel_kernel_retain keeps the executable alive).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument.
// ACCEL_ERROR_NOT_FOUND: no kernel of that name (the message lists a few).
// Thread-safe.
ACCEL_API accel_status_t accel_executable_kernel(
    accel_executable_t *executable, const char *name,
    accel_kernel_t **out_kernel);

// Returns in |*out_kernel| the kernel at |index| (< info.kernel_count).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or index out of range.
// Thread-safe.
ACCEL_API accel_status_t accel_executable_kernel_at(
    accel_executable_t *executable, uint32_t index,
    accel_kernel_t **out_kernel);

// Fills |*out_info| (caller sets struct_size) for the weight called |name|.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or struct_size too small.
// ACCEL_ERROR_NOT_FOUND: no weight of that name.
// Thread-safe.
ACCEL_API accel_status_t accel_executable_weight(
    const accel_executable_t *executable, const char *name,
    accel_weight_info_t *out_info);

// Returns in |*out_buffer| a read-only buffer over the weight called |name|,
// for binding it to launches (the buffer holds a reference to the
// executable; release it with accel_buffer_release). On host-visible devices
// it aliases the mapped file (no copy).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument.
// ACCEL_ERROR_NOT_FOUND: no weight of that name.
// ACCEL_ERROR_UNSUPPORTED: the device is not host-visible (weight upload
//   through DMA queues is not available yet).
// ACCEL_ERROR_OUT_OF_MEMORY: the buffer object cannot be allocated.
// Thread-safe.
ACCEL_API accel_status_t accel_executable_weight_buffer(
    accel_executable_t *executable, const char *name,
    accel_buffer_t **out_buffer);

// Returns in |*out_value| the user metadata value for |key| (borrowed).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument.
// ACCEL_ERROR_NOT_FOUND: no such key.
// Thread-safe.
ACCEL_API accel_status_t accel_executable_metadata(
    const accel_executable_t *executable, const char *key,
    const char **out_value);

// ---------------------------------------------------------------------------
// Kernels.
// ---------------------------------------------------------------------------

// A kernel that does not come from an executable (a framework's own host
// function), with the same ABI and the same launch checks.
typedef struct accel_kernel_desc {
  // sizeof(accel_kernel_desc_t) as the caller compiled it.
  uint32_t struct_size;
  // ACCEL_KERNEL_ABI_VERSION the function was compiled against.
  uint32_t abi_version;
  // Name for messages and traces (copied); must be non-empty.
  const char *name;
  // The host entry point (runs each work-group).
  accel_kernel_fn_t fn;
  // Entries in |bindings| (at most 256).
  uint32_t binding_count;
  // Bytes of constants each launch passes (at most 4096).
  uint32_t constants_size;
  // Declared bindings (copied).
  const accel_kernel_binding_decl_t *bindings;
  // Work-group shape; zeros mean 1.
  uint32_t workgroup_size[3];
  // Reserved, zero.
  uint32_t reserved0;
} accel_kernel_desc_t;

// Registers a run-time kernel for |device|.
// On success |*out_kernel| holds one reference owned by the caller.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, empty name, NULL fn, a binding
//   with no access or a non-power-of-two alignment, counts above the limits.
// ACCEL_ERROR_VERSION: |abi_version| has another major or a newer minor.
// ACCEL_ERROR_UNSUPPORTED: the device does not run host kernels.
// ACCEL_ERROR_OUT_OF_MEMORY: the kernel object cannot be allocated.
// Thread-safe.
ACCEL_API accel_status_t accel_kernel_register(accel_device_t *device,
                                               const accel_kernel_desc_t *desc,
                                               accel_kernel_t **out_kernel);

// Adds a reference to |kernel| (for a kernel of an executable: to the
// executable). Thread-safe.
ACCEL_API void accel_kernel_retain(accel_kernel_t *kernel);

// Drops a reference (for a kernel of an executable: to the executable). NULL
// is ignored. Thread-safe.
ACCEL_API void accel_kernel_release(accel_kernel_t *kernel);

// Fills |*out_info| (caller sets struct_size) with |kernel|'s signature and,
// as far as struct_size reaches, its metadata (version, tunables, binding
// element types). ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or
// struct_size below ACCEL_KERNEL_INFO_SIZE_0_1.
// Thread-safe.
ACCEL_API accel_status_t accel_kernel_info(const accel_kernel_t *kernel,
                                           accel_kernel_info_t *out_info);

// ---------------------------------------------------------------------------
// Launch.
// ---------------------------------------------------------------------------

// One binding of a launch: [offset, offset + length) of |buffer|.
typedef struct accel_launch_binding {
  // The buffer (on the stream's device); the launch retains it.
  accel_buffer_t *buffer;
  // Byte offset into the buffer.
  uint64_t offset;
  // Bytes bound; 0 means "to the end of the buffer".
  uint64_t length;
} accel_launch_binding_t;

// A launch.
typedef struct accel_launch_desc {
  // sizeof(accel_launch_desc_t) as the caller compiled it.
  uint32_t struct_size;
  // Work-groups in x, y, z (each >= 1).
  uint32_t workgroup_count[3];
  // Entries in |bindings|: must equal the kernel's declared count.
  uint32_t binding_count;
  // Bytes in |constants|: must equal the kernel's declared size.
  uint32_t constants_size;
  // The bindings, in declaration order (copied at enqueue).
  const accel_launch_binding_t *bindings;
  // The constants (copied at enqueue).
  const void *constants;
} accel_launch_desc_t;

// Enqueues a launch of |kernel| on |stream|: after all earlier work on the
// stream, every work-group runs (spread over the device's threads on the host
// device), then the launch completes like any other command. The descriptor
// is checked against the kernel's signature at enqueue; bindings and
// constants are copied, so |desc| may be reused at once.
// A kernel that returns non-zero fails the stream with ACCEL_ERROR_ABORTED and
// a message naming the kernel, the work-group and the value.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, struct_size too small, a zero
//   work-group count, binding count or constants size not as declared, a
//   buffer on another device, a range outside its buffer, shorter than
//   declared or misaligned, a write binding on a read-only weight buffer.
// ACCEL_ERROR_UNSUPPORTED: the kernel belongs to another device or the
//   device does not run host kernels.
// ACCEL_ERROR_OUT_OF_MEMORY: the launch record cannot be allocated.
// Otherwise the stream's stored error if it has failed.
// Thread-safe.
ACCEL_API accel_status_t accel_launch(accel_stream_t *stream,
                                      accel_kernel_t *kernel,
                                      const accel_launch_desc_t *desc);

// ---------------------------------------------------------------------------
// Writing (.axe builder). The builder keeps pointers to weight and code data
// (no copy) until it is destroyed; strings are copied.
// ---------------------------------------------------------------------------

// Code-object formats.
typedef enum accel_code_format {
  ACCEL_CODE_FORMAT_INVALID = 0,
  // ELF shared object exporting accel_kernel_library_query (host targets).
  ACCEL_CODE_FORMAT_ELF_SO = 1,
  // PTX text (cuda targets).
  ACCEL_CODE_FORMAT_PTX = 2,
  // cubin / fatbin (cuda targets).
  ACCEL_CODE_FORMAT_CUBIN = 3,
} accel_code_format_t;

// A kernel entry in an executable.
typedef struct accel_exe_kernel_desc {
  // sizeof(accel_exe_kernel_desc_t) as the caller compiled it.
  uint32_t struct_size;
  // ACCEL_KERNEL_ABI_VERSION the kernel was compiled for (0: this header's).
  uint32_t abi_version;
  // Kernel name (unique in the executable).
  const char *name;
  // Export name in the code objects (NULL: same as |name|).
  const char *symbol;
  // Entries in |bindings|.
  uint32_t binding_count;
  // Bytes of constants.
  uint32_t constants_size;
  // Declared bindings (names optional).
  const accel_kernel_binding_decl_t *bindings;
  // Work-group shape; zeros mean 1.
  uint32_t workgroup_size[3];
  // Reserved, zero.
  uint32_t reserved0;
} accel_exe_kernel_desc_t;

// A weight entry: |info| describes it (struct_size, dtype, name, rank, layout,
// shape, strides, block, quant_* as in accel_weight_info_t; host_data is the
// data and size_bytes its length). |mappable| asks for page alignment so that
// the weight can be mapped directly.
typedef struct accel_exe_weight_desc {
  // sizeof(accel_exe_weight_desc_t) as the caller compiled it.
  uint32_t struct_size;
  // Non-zero: align the data to 4096 bytes (mappable) instead of 64.
  uint32_t mappable;
  // The weight (name, dtype, shape..., host_data, size_bytes); borrowed.
  accel_weight_info_t info;
} accel_exe_weight_desc_t;

// Requirements an executable declares.
typedef struct accel_exe_requirements {
  // sizeof(accel_exe_requirements_t) as the caller compiled it.
  uint32_t struct_size;
  // accel_device_cap_bits the device must have.
  uint32_t required_caps;
  // Oldest accel API version (major << 16 | minor) that may load the file.
  uint32_t min_runtime_version;
  // Reserved, zero.
  uint32_t reserved0;
  // Scratch workspace bytes and their alignment (power of two; 0 means 64).
  uint64_t workspace_bytes;
  uint64_t workspace_alignment;
} accel_exe_requirements_t;

// Called while writing large data; |done| of |total| bytes written.
typedef void (*accel_exe_progress_fn_t)(void *user_data, uint64_t done,
                                        uint64_t total);

// Creates an empty builder with a random UUID.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument.
// ACCEL_ERROR_OUT_OF_MEMORY: allocation failed.
// Thread-safe.
ACCEL_API accel_status_t accel_exe_builder_create(
    accel_exe_builder_t **out_builder);

// Destroys |builder| (NULL ignored). Not thread-safe.
ACCEL_API void accel_exe_builder_destroy(accel_exe_builder_t *builder);

// Sets the executable's UUID. ACCEL_ERROR_INVALID_ARGUMENT: NULL argument.
// Not thread-safe.
ACCEL_API accel_status_t accel_exe_builder_set_uuid(
    accel_exe_builder_t *builder, const uint8_t uuid[16]);

// Sets the requirements. ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, small
// struct_size, alignment not a power of two. Not thread-safe.
ACCEL_API accel_status_t accel_exe_builder_set_requirements(
    accel_exe_builder_t *builder, const accel_exe_requirements_t *requirements);

// Adds a kernel. ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, empty or
// duplicate name, bad binding access or alignment. ACCEL_ERROR_OUT_OF_MEMORY.
// Not thread-safe.
ACCEL_API accel_status_t accel_exe_builder_add_kernel(
    accel_exe_builder_t *builder, const accel_exe_kernel_desc_t *kernel);

// Adds the code object for |target| ("host-x86_64"); |data| is borrowed.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, empty data, unknown format,
// duplicate target. ACCEL_ERROR_OUT_OF_MEMORY. Not thread-safe.
ACCEL_API accel_status_t accel_exe_builder_add_code(
    accel_exe_builder_t *builder, const char *target,
    accel_code_format_t format, const void *data, uint64_t size_bytes);

// Adds a weight; its data is borrowed. Quantization companions are referred
// to by name and resolved when writing.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, empty or duplicate name,
// unknown dtype/layout/scheme, rank above 8, size not matching the shape.
// ACCEL_ERROR_OUT_OF_MEMORY. Not thread-safe.
ACCEL_API accel_status_t accel_exe_builder_add_weight(
    accel_exe_builder_t *builder, const accel_exe_weight_desc_t *weight);

// Adds a user metadata entry (both strings copied).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL or empty key, duplicate key.
// ACCEL_ERROR_OUT_OF_MEMORY. Not thread-safe.
ACCEL_API accel_status_t accel_exe_builder_add_metadata(
    accel_exe_builder_t *builder, const char *key, const char *value);

// Adds a raw section of a kind this runtime may not know (for forward
// compatibility tests and tools); |data| is borrowed. |required| non-zero
// marks it required.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL data with a size, a kind this runtime
// defines. ACCEL_ERROR_OUT_OF_MEMORY. Not thread-safe.
ACCEL_API accel_status_t accel_exe_builder_add_raw_section(
    accel_exe_builder_t *builder, uint32_t kind, uint32_t required,
    const void *data, uint64_t size_bytes);

// Writes the .axe file to |path| (atomically: a temporary file renamed).
// |progress| (may be NULL) is called as weight bytes are written.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, a quantization companion that
//   names no weight.
// ACCEL_ERROR_IO: the file cannot be written.
// ACCEL_ERROR_OUT_OF_MEMORY.
// Not thread-safe.
ACCEL_API accel_status_t accel_exe_builder_write_file(
    accel_exe_builder_t *builder, const char *path,
    accel_exe_progress_fn_t progress, void *user_data);

// Writes the .axe image to memory: |*out_data| (64-byte aligned, free with
// free()) and |*out_size|. Errors as accel_exe_builder_write_file but IO.
// Not thread-safe.
ACCEL_API accel_status_t accel_exe_builder_write_memory(
    accel_exe_builder_t *builder, void **out_data, uint64_t *out_size);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_EXECUTABLE_H_
