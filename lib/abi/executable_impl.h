// Internal layout of executables and kernels (lib/abi).
#ifndef ACCEL_ABI_EXECUTABLE_IMPL_H_
#define ACCEL_ABI_EXECUTABLE_IMPL_H_

#include <stdatomic.h>

#include "abi/axe_reader.h"
#include "abi/launch_owner.h"
#include "accel/executable.h"
#include "core/driver_dispatch.h"
#include "core/object.h"
#include "core/runtime_impl.h"

// A loaded host code object (code_host.c).
typedef struct accel_host_code {
  int memfd;     // kept open while loaded: /proc/self/fd/N names the library
  void *handle;  // dlopen handle
  const accel_kernel_library_t *library;
} accel_host_code_t;

struct accel_kernel {
  // Written per launch (by the submitter and by the queue worker): kept on
  // their own cache line, away from the read-mostly fields below.
  // Lifetime of a run-time kernel (unused for executable kernels); its
  // |started| counter sits on a line of its own.
  accel_launch_owner_t self;
  // One cached launch record (launch.c), freed with the kernel.
  void *_Atomic record_cache;

  // Read-mostly from here on.
  // What launches hold: the executable's owner for executable kernels,
  // |self| for run-time kernels.
  _Alignas(64) accel_launch_owner_t *owner;
  accel_device_t *device;
  accel_kernel_fn_t fn;
  uint32_t abi_version;
  uint32_t binding_count;
  uint32_t constants_size;
  uint32_t workgroup_size[3];
  accel_kernel_binding_decl_t *bindings;  // owned
  char *name;                             // owned (run-time) or borrowed
  bool owns_strings;
  // The executable's workspace (NULL for run-time kernels; NULL on devices
  // that are not host-visible, where |workspace_address| is its address).
  void *workspace;
  uint64_t workspace_size;
  uint64_t workspace_address;
  // Kernels of a device code object (CUDA PTX or cubin): the driver's
  // kernel, launched through its dispatch table's kernel_launch (owned,
  // freed before the module is unloaded); NULL for host kernels.
  accel_drv_kernel_t *drv_kernel;
  // The dispatch of a launch with one work-group, no bindings and no
  // constants: such launches point the queue at this (immutable) record
  // instead of building one.
  accel_kernel_dispatch_t single_dispatch;
  // Kernel ABI 1.2 metadata, borrowed from the loaded code object; NULL
  // when it declares none (and for run-time kernels).
  const accel_kernel_meta_t *meta;
  // Tuned configurations of this kernel on its device (tuning_cache.c),
  // owned by the executable; NULL when none apply.
  const struct accel_tuning_set *tuning;
  // ACCEL_RUNTIME_FLAG_CHECK_NUMERICS / _TENSOR_SUMMARIES of the runtime:
  // work after each launch (numerics.c); 0 for none.
  uint32_t checks;
};

// Fills |kernel|->single_dispatch from the kernel's fields (call again when
// the workspace changes).
void accel_kernel_init_single_dispatch(accel_kernel_t *kernel);

struct accel_executable {
  accel_launch_owner_t owner;  // first
  accel_device_t *device;
  axe_view_t view;
  // The image: a read-only file mapping (|mapped|) or a borrowed buffer.
  const void *image;
  uint64_t image_size;
  bool mapped;
  accel_host_code_t code;  // handle NULL when no code was loaded
  // The device code object loaded through the driver (CUDA), or NULL.
  accel_drv_module_t *module;
  accel_kernel_t *kernels;  // view.kernel_count entries
  accel_kernel_binding_decl_t *binding_decls;  // all kernels' declarations
  // Tuned configurations (tuning_cache.c); NULL when none were loaded.
  struct accel_tuning_sets *tuning;
  accel_buffer_t *workspace_buffer;  // owned; NULL when none declared
  void *workspace;                   // host pointer into it, or NULL
  uint64_t workspace_size;
  char target[32];
};

// The dynamic symbol table of a host code object, found without loading it
// (code_host.c): bounds-checked views into the caller's bytes.
typedef struct accel_host_elf {
  const uint8_t *symbols;  // .dynsym entries (Elf64_Sym, possibly unaligned)
  uint64_t symbol_count;
  const char *names;  // .dynstr
  uint64_t names_size;
} accel_host_elf_t;

// Checks the ELF header of |data| (64-bit, this host's byte order and
// machine, ET_DYN) and finds its .dynsym and .dynstr, all before any code of
// it runs. ACCEL_ERROR_FORMAT naming the field when one is wrong.
accel_status_t accel_host_elf_open(const void *data, uint64_t size,
                                   const char *what, accel_host_elf_t *out);

// True when |elf| defines the function |name| in its dynamic symbol table.
bool accel_host_elf_defines(const accel_host_elf_t *elf, const char *name);

// Loads the host code object |data| (an ELF shared object), checks the ABI
// version it declares, and runs its init. |what| names it in messages.
accel_status_t accel_host_code_load(const void *data, uint64_t size,
                                    const char *what, accel_host_code_t *out);

// Runs fini and unloads.
void accel_host_code_unload(accel_host_code_t *code);

// Finds an export by name; NULL if absent.
const accel_kernel_export_t *accel_host_code_find(const accel_host_code_t *code,
                                                  const char *name);


#endif  // ACCEL_ABI_EXECUTABLE_IMPL_H_
