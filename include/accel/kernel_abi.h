// The custom-kernel ABI: what a host kernel receives from accel and what a
// host code object (an ELF shared object inside an .axe file, or a library a
// framework registers at run time) exports. This header stands alone (only
// <stdint.h> and <stddef.h>) so that kernels include it without the runtime.
// The full specification is docs/kernel-abi.md.
//
// Versioning: ACCEL_KERNEL_ABI_VERSION_MAJOR changes when a field below changes
// meaning or moves; a runtime refuses a code object of another major with
// ACCEL_ERROR_VERSION. MINOR grows when fields are appended at the end of a
// struct (a kernel reads them only after checking |struct_size|) or when new
// optional exports appear. A runtime accepts code objects whose minor is at
// most its own. Every struct has explicit padding and reserved fields that are
// zero.
#ifndef ACCEL_KERNEL_ABI_H_
#define ACCEL_KERNEL_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ACCEL_KERNEL_ABI_VERSION_MAJOR 1
#define ACCEL_KERNEL_ABI_VERSION_MINOR 3
// The version as one number: major << 16 | minor.
#define ACCEL_KERNEL_ABI_VERSION \
  ((uint32_t)ACCEL_KERNEL_ABI_VERSION_MAJOR << 16 | ACCEL_KERNEL_ABI_VERSION_MINOR)

// Marks a symbol that a host code object exports (the library query below).
#define ACCEL_KERNEL_EXPORT __attribute__((visibility("default")))

// Marks a kernel entry point. Every kernel an .axe file names must be a
// function defined in its code object's dynamic symbol table under the name
// of its export, so that the loader checks it before the object's code runs
// (docs/kernel-abi.md). Protected visibility: exported, yet the library's own
// references (its export table) bind to its own definition, never to a
// function of the same name elsewhere in the process.
#define ACCEL_KERNEL_ENTRY __attribute__((visibility("protected")))

// Access a kernel declares for a binding (bit set).
enum accel_kernel_access_bits {
  ACCEL_KERNEL_ACCESS_NONE = 0,
  // The kernel reads the binding.
  ACCEL_KERNEL_ACCESS_READ = 1u << 0,
  // The kernel writes the binding.
  ACCEL_KERNEL_ACCESS_WRITE = 1u << 1,
};

// One entry of the binding table: a host-visible range of device memory.
typedef struct accel_kernel_binding {
  // First byte of the range (the launch's buffer address plus its offset).
  void *data;
  // Length of the range in bytes (never below the declared minimum).
  uint64_t size_bytes;
  // accel_kernel_access_bits declared for this binding.
  uint32_t access;
  // Reserved, zero.
  uint32_t reserved0;
} accel_kernel_binding_t;

// Kinds of message a kernel sends through accel_kernel_dispatch_t.message.
enum accel_kernel_message_kind {
  // A line of output (printf-style, formatted by the kernel).
  ACCEL_KERNEL_MESSAGE_PRINT = 0,
  // An assertion failed: the launch fails (and poisons its stream) with
  // this text, whatever the work-group then returns. The kernel should
  // return promptly after sending it.
  ACCEL_KERNEL_MESSAGE_ASSERT = 1,
};

struct accel_kernel_dispatch;
struct accel_kernel_workgroup;

// The runtime's message channel (kernel ABI 1.1). A kernel passes the
// |dispatch| and |workgroup| pointers it was called with (not copies), a
// kind, and NUL-terminated text it formatted itself (at most 1024 bytes are
// delivered). Returns 0 when delivered, -1 for an unknown kind or a NULL
// |workgroup|. Safe to call from concurrent work-groups; valid only during
// the kernel call.
typedef int32_t (*accel_kernel_message_fn_t)(
    const struct accel_kernel_dispatch *dispatch,
    const struct accel_kernel_workgroup *workgroup, uint32_t kind,
    const char *text);

// The runtime's per-thread scratch (kernel ABI 1.3). Returns this thread's
// scratch block, at least |bytes| bytes (> 0) and 64-byte aligned, or NULL
// when it cannot be allocated (or an argument is NULL or 0). Sets *fresh
// to 1 when the block was not handed to this thread earlier in this launch
// (its contents are undefined), to 0 when it was and is no smaller than
// then: its contents are what this thread's earlier work-groups of the
// launch left there. So a kernel can do per-thread work once per launch (an
// input quantized for every group, say) instead of once per group. The
// block belongs to the runtime: valid until the kernel call returns, never
// freed by the kernel; each thread has its own, so no locking.
typedef void *(*accel_kernel_thread_scratch_fn_t)(
    const struct accel_kernel_dispatch *dispatch,
    const struct accel_kernel_workgroup *workgroup, uint64_t bytes,
    int32_t *fresh);

// What every work-group of one launch receives (shared, read-only).
typedef struct accel_kernel_dispatch {
  // sizeof(accel_kernel_dispatch_t) as the runtime compiled it.
  uint32_t struct_size;
  // ACCEL_KERNEL_ABI_VERSION of the runtime running the launch.
  uint32_t abi_version;
  // Number of work-groups in x, y and z (each >= 1).
  uint32_t workgroup_count[3];
  // Work-group shape the kernel declared (items per group in x, y, z; >= 1).
  uint32_t workgroup_size[3];
  // Entries in |bindings| (exactly the declared count).
  uint32_t binding_count;
  // Bytes in |constants| (exactly the declared constants size).
  uint32_t constants_size;
  // The binding table, in declaration order; NULL when binding_count is 0.
  const accel_kernel_binding_t *bindings;
  // The constants block (aligned to 16 bytes); NULL when constants_size is 0.
  const void *constants;
  // The executable's scratch workspace (its requirements section sizes it),
  // shared by all launches of the executable's kernels; NULL when none.
  void *workspace;
  // Bytes in |workspace|.
  uint64_t workspace_size;
  // Since 1.1 (read only when |struct_size| >= 80): the message channel
  // for printf-style output and assertion failures. NULL when the runtime
  // provides none.
  accel_kernel_message_fn_t message;
  // Since 1.3 (read only when |struct_size| >= 88): per-thread scratch
  // that persists across the work-groups a thread runs in one launch. NULL
  // when the runtime provides none.
  accel_kernel_thread_scratch_fn_t thread_scratch;
} accel_kernel_dispatch_t;

// Which work-group a call runs.
typedef struct accel_kernel_workgroup {
  // Work-group id in x, y, z: 0 <= id[i] < workgroup_count[i].
  uint32_t id[3];
  // Reserved, zero.
  uint32_t reserved0;
} accel_kernel_workgroup_t;

// A host kernel: runs one work-group. Work-groups of one launch may run
// concurrently on different threads and in any order. Returns 0 on success;
// any other value fails the launch (and poisons its stream) with a message
// that gives the value.
typedef int32_t (*accel_kernel_fn_t)(const accel_kernel_dispatch_t *dispatch,
                                     const accel_kernel_workgroup_t *workgroup);

// One kernel a code object exports.
typedef struct accel_kernel_export {
  // Symbol name the executable's kernel table refers to (NUL-terminated);
  // also the name of |fn| in the code object's dynamic symbol table
  // (ACCEL_KERNEL_ENTRY). Unique within the library.
  const char *name;
  // The entry point.
  accel_kernel_fn_t fn;
  // Optional: called once when the code object is loaded, before any launch;
  // a non-zero return fails the load. NULL for none.
  int32_t (*setup)(void);
} accel_kernel_export_t;

// Element types a kernel declares for its bindings (kernel ABI 1.2): what
// the runtime's numerics checks and tensor summaries read a binding as.
enum accel_kernel_elem_type {
  // Not scanned (bytes, indices, quantized blocks, anything else).
  ACCEL_KERNEL_ELEM_OPAQUE = 0,
  // IEEE binary32.
  ACCEL_KERNEL_ELEM_F32 = 1,
  // IEEE binary16.
  ACCEL_KERNEL_ELEM_F16 = 2,
  // bfloat16 (the top half of a binary32).
  ACCEL_KERNEL_ELEM_BF16 = 3,
  // int32 (never NaN: summarized, not checked).
  ACCEL_KERNEL_ELEM_I32 = 4,
  ACCEL_KERNEL_ELEM_COUNT = 5,
};

// How a tunable parameter reaches the kernel (kernel ABI 1.2).
enum accel_kernel_tunable_kind {
  // A uint32_t field of the constants at |constants_offset| (4-byte
  // aligned), where 0 asks for the kernel's default. A launch that passes
  // 0 there may run with a tuned value instead; a non-zero value the caller
  // passes is kept.
  ACCEL_KERNEL_TUNABLE_CONSTANT = 1,
  // The number of work-groups: the launch runs on a grid of {value, 1, 1}
  // instead of the caller's. Declaring it promises that the kernel's
  // results do not depend on the grid.
  ACCEL_KERNEL_TUNABLE_WORKGROUPS = 2,
};

// One tunable parameter of a kernel and the values worth trying. Every
// value must give bit-identical results (the kernel's reduction order does
// not depend on it); a tuner only changes speed.
typedef struct accel_kernel_tunable {
  // Name ("tile_n", "workgroups"; NUL-terminated, at most 31 bytes of
  // [a-z0-9_]).
  const char *name;
  // accel_kernel_tunable_kind.
  uint32_t kind;
  // CONSTANT: byte offset of the uint32_t field in the constants; else 0.
  uint32_t constants_offset;
  // Entries in |values| (1 to 64).
  uint32_t value_count;
  // Reserved, zero.
  uint32_t reserved0;
  // The candidate values, each >= 1.
  const uint32_t *values;
} accel_kernel_tunable_t;

// What a code object says about one of its kernels beyond the executable's
// kernel record (kernel ABI 1.2): its version, the element type of each
// binding, and its tunable parameters.
typedef struct accel_kernel_meta {
  // Export name of the kernel it describes (one entry per kernel at most).
  const char *kernel;
  // The kernel's version: raised when its code changes in a way that makes
  // tuned configurations stale (the tuning cache ignores other versions).
  uint32_t version;
  // Entries in |binding_types| (0 or the kernel's binding count).
  uint32_t binding_count;
  // accel_kernel_elem_type of each binding in declaration order; NULL when
  // |binding_count| is 0.
  const uint8_t *binding_types;
  // Entries in |tunables| (0 to 8).
  uint32_t tunable_count;
  // Optional behaviours the kernel's constants may ask for, as bits its
  // kernel family defines (the reference kernels: ACCEL_KP_FEATURE_*); the
  // runtime passes them on through accel_kernel_info and reads none. 0:
  // none (the field was reserved, zero, before API 0.2's kernel info had
  // it).
  uint32_t features;
  // The tunable parameters; NULL when |tunable_count| is 0.
  const accel_kernel_tunable_t *tunables;
} accel_kernel_meta_t;

// What a host code object describes about itself. The runtime refuses a
// library whose |struct_size| is below 48 (the ABI 1.0 layout) or whose
// export table repeats a name, with ACCEL_ERROR_FORMAT. The fields after
// |exports| (ABI 1.2) are read only when |struct_size| >= 64.
typedef struct accel_kernel_library {
  // sizeof(accel_kernel_library_t) as the library compiled it (>= 48).
  uint32_t struct_size;
  // ACCEL_KERNEL_ABI_VERSION the library was built against.
  uint32_t abi_version;
  // Library name for messages (NUL-terminated).
  const char *name;
  // Optional: called once after loading, before any setup; non-zero fails the
  // load. NULL for none.
  int32_t (*init)(void);
  // Optional: called once before the code object is unloaded (after the last
  // launch completed). NULL for none.
  void (*fini)(void);
  // Entries in |exports|.
  uint32_t export_count;
  // Reserved, zero.
  uint32_t reserved0;
  // The kernels, in any order; names are unique (a repeated name fails the
  // load).
  const accel_kernel_export_t *exports;
  // Since 1.2: entries in |metas| (0 to |export_count|).
  uint32_t meta_count;
  // Reserved, zero.
  uint32_t reserved1;
  // Since 1.2: per-kernel metadata, in any order; NULL when |meta_count| is
  // 0. A kernel without an entry has version 0, opaque bindings and no
  // tunables.
  const accel_kernel_meta_t *metas;
} accel_kernel_library_t;

// sizeof(accel_kernel_library_t) in ABI 1.0 and 1.1 (without |metas|).
#define ACCEL_KERNEL_LIBRARY_SIZE_1_0 48u

// The one symbol a host code object must export. The runtime passes its own
// ACCEL_KERNEL_ABI_VERSION; the library returns its descriptor (static
// storage), or NULL when it cannot serve that runtime's major version.
#define ACCEL_KERNEL_LIBRARY_QUERY_SYMBOL "accel_kernel_library_query"
typedef const accel_kernel_library_t *(*accel_kernel_library_query_fn_t)(
    uint32_t runtime_abi_version);

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(accel_kernel_binding_t) == 24, "kernel ABI layout");
_Static_assert(offsetof(accel_kernel_dispatch_t, bindings) == 40,
               "kernel ABI layout");
_Static_assert(offsetof(accel_kernel_dispatch_t, message) == 72,
               "kernel ABI layout");
_Static_assert(offsetof(accel_kernel_dispatch_t, thread_scratch) == 80,
               "kernel ABI layout");
_Static_assert(sizeof(accel_kernel_dispatch_t) == 88, "kernel ABI layout");
_Static_assert(sizeof(accel_kernel_workgroup_t) == 16, "kernel ABI layout");
_Static_assert(offsetof(accel_kernel_export_t, name) == 0, "kernel ABI layout");
_Static_assert(offsetof(accel_kernel_export_t, fn) == 8, "kernel ABI layout");
_Static_assert(offsetof(accel_kernel_export_t, setup) == 16,
               "kernel ABI layout");
_Static_assert(sizeof(accel_kernel_export_t) == 24, "kernel ABI layout");
_Static_assert(offsetof(accel_kernel_library_t, abi_version) == 4,
               "kernel ABI layout");
_Static_assert(offsetof(accel_kernel_library_t, name) == 8,
               "kernel ABI layout");
_Static_assert(offsetof(accel_kernel_library_t, init) == 16,
               "kernel ABI layout");
_Static_assert(offsetof(accel_kernel_library_t, fini) == 24,
               "kernel ABI layout");
_Static_assert(offsetof(accel_kernel_library_t, export_count) == 32,
               "kernel ABI layout");
_Static_assert(offsetof(accel_kernel_library_t, exports) == 40,
               "kernel ABI layout");
_Static_assert(offsetof(accel_kernel_library_t, meta_count) == 48,
               "kernel ABI layout");
_Static_assert(offsetof(accel_kernel_library_t, metas) == 56,
               "kernel ABI layout");
_Static_assert(sizeof(accel_kernel_library_t) == 64, "kernel ABI layout");
_Static_assert(sizeof(accel_kernel_tunable_t) == 32, "kernel ABI layout");
_Static_assert(offsetof(accel_kernel_meta_t, binding_types) == 16,
               "kernel ABI layout");
_Static_assert(offsetof(accel_kernel_meta_t, tunables) == 32,
               "kernel ABI layout");
_Static_assert(sizeof(accel_kernel_meta_t) == 40, "kernel ABI layout");
#endif

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_KERNEL_ABI_H_
