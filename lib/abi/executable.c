// Executables: loading a validated .axe image for a device (requirements,
// code object, kernels, workspace), and the lookups on a loaded executable.
//
// Host-target code objects are ELF shared objects that any device with
// ACCEL_DEVICE_CAP_HOST_KERNELS runs on host threads, so loading them is
// generic and lives here. Device code objects (cuda-sm_XX: PTX or cubin) go
// to the device's driver (the dispatch table's module_load and kernel_get)
// and their kernels launch through its kernel_launch (launch.c).
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/executable_impl.h"
#include "abi/kernel_meta.h"
#include "abi/tuning.h"
#include "core/error.h"
#include "mem/buffer_impl.h"

#define KNOWN_LOAD_FLAGS \
  (ACCEL_EXECUTABLE_LOAD_SKIP_HASHES | ACCEL_EXECUTABLE_LOAD_EAGER_WEIGHTS)

static void executable_destroy(accel_object_t *object) {
  accel_executable_t *exe = (accel_executable_t *)object;
  accel_tuning_detach(exe);
  accel_host_code_unload(&exe->code);
  for (uint32_t i = 0; exe->kernels != NULL && i < exe->view.kernel_count; ++i) {
    free(exe->kernels[i].drv_kernel);  // the driver's kernel_get allocated it
  }
  if (exe->module != NULL) {
    exe->device->driver->dispatch->module_unload(exe->module);
  }
  accel_buffer_release(exe->workspace_buffer);
  for (uint32_t i = 0; exe->kernels != NULL && i < exe->view.kernel_count; ++i) {
    free(atomic_load_explicit(&exe->kernels[i].record_cache,
                              memory_order_acquire));
  }
  if (exe->mapped) {
    munmap((void *)exe->image, exe->image_size);
  }
  free(exe->kernels);
  free(exe->binding_decls);
  free(exe);
}

static accel_status_t check_requirements(accel_executable_t *exe) {
  const axe_requirements_t *r = exe->view.requirements;
  accel_device_t *dev = exe->device;
  uint32_t need = r->min_runtime_version;
  uint32_t have =
      (uint32_t)ACCEL_API_VERSION_MAJOR << 16 | ACCEL_API_VERSION_MINOR;
  if ((need >> 16) != ACCEL_API_VERSION_MAJOR || need > have) {
    return accel_error(ACCEL_ERROR_VERSION,
                       "requirements field min_runtime_version: the file "
                       "needs accel %u.%u, this runtime is %u.%u",
                       need >> 16, need & 0xffff, ACCEL_API_VERSION_MAJOR,
                       ACCEL_API_VERSION_MINOR);
  }
  uint32_t abi = r->kernel_abi_version;
  if ((abi >> 16) != ACCEL_KERNEL_ABI_VERSION_MAJOR ||
      (abi & 0xffff) > ACCEL_KERNEL_ABI_VERSION_MINOR) {
    return accel_error(ACCEL_ERROR_VERSION,
                       "requirements field kernel_abi_version: the file needs "
                       "kernel ABI %u.%u, this runtime provides %u.%u",
                       abi >> 16, abi & 0xffff, ACCEL_KERNEL_ABI_VERSION_MAJOR,
                       ACCEL_KERNEL_ABI_VERSION_MINOR);
  }
  uint32_t missing = r->required_caps & ~dev->info.caps;
  if (missing != 0) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "requirements field required_caps: %s lacks "
                       "capability bits 0x%x",
                       dev->info.id, missing);
  }
  if (dev->info.memory_bytes != 0 &&
      r->workspace_bytes > dev->info.memory_bytes) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "requirements field workspace_bytes: %llu bytes, %s "
                       "has %llu",
                       (unsigned long long)r->workspace_bytes, dev->info.id,
                       (unsigned long long)dev->info.memory_bytes);
  }
  return ACCEL_OK;
}

// Every kernel's symbol must be a function the code object's dynamic symbol
// table defines (docs/kernel-abi.md): checked from the bytes, before dlopen
// runs any of the object's code, so that a refused file never runs code.
static accel_status_t check_code_symbols(const axe_view_t *v,
                                         const axe_section_t *code,
                                         const char *what) {
  accel_host_elf_t elf;
  ACCEL_RETURN_IF_ERROR(
      accel_host_elf_open(v->data + code->offset, code->size, what, &elf));
  for (uint32_t i = 0; i < v->kernel_count; ++i) {
    const axe_kernel_t *k = &v->kernels[i];
    const char *sym = axe_string(v, k->symbol);
    if (!accel_host_elf_defines(&elf, sym)) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "kernel %u (\"%s\") field symbol: \"%s\" is not a "
                         "function in the dynamic symbol table of the %s",
                         i, axe_string(v, k->name), sym, what);
    }
  }
  return ACCEL_OK;
}

// The code section for |dev|'s target, or UNSUPPORTED naming the targets
// the file has.
static accel_status_t find_code(const axe_view_t *v, const accel_device_t *dev,
                                const axe_section_t **out_code) {
  const axe_section_t *code = NULL;
  char have[128] = "";
  size_t used = 0;
  for (uint32_t i = 0; i < v->section_count; ++i) {
    const axe_section_t *s = &v->sections[i];
    if (s->kind != AXE_SECTION_CODE) {
      continue;
    }
    const char *t = axe_string(v, s->name);
    if (strcmp(t, dev->info.target) == 0) {
      code = s;
    }
    if (used < sizeof(have)) {
      used += (size_t)snprintf(have + used, sizeof(have) - used, "%s%s",
                               used ? ", " : "", t);
    }
  }
  *out_code = code;
  if (code == NULL) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "no code object for target %s of %s (the file has: %s)",
                       dev->info.target, dev->info.id,
                       have[0] ? have : "none");
  }
  return ACCEL_OK;
}

// Loads a device code object (PTX or cubin) through |exe|'s driver and finds
// every kernel's symbol in it.
static accel_status_t load_device_code(accel_executable_t *exe,
                                       const axe_section_t *code) {
  const axe_view_t *v = &exe->view;
  accel_device_t *dev = exe->device;
  const accel_drv_dispatch_ops_t *ops = dev->driver->dispatch;
  if (ops == NULL || ops->module_load == NULL || ops->kernel_launch == NULL) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "%s cannot load code format %u for %s (its driver "
                       "loads no code objects)",
                       dev->info.id, code->info, dev->info.target);
  }
  accel_status_t st = ops->module_load(dev->drv, v->data + code->offset,
                                       code->size, &exe->module);
  if (st != ACCEL_OK) {
    return accel_error_context(st, "code object for %s", dev->info.target);
  }
  for (uint32_t i = 0; i < v->kernel_count; ++i) {
    const axe_kernel_t *k = &v->kernels[i];
    st = ops->kernel_get(exe->module, axe_string(v, k->symbol),
                         &exe->kernels[i].drv_kernel);
    if (st == ACCEL_ERROR_NOT_FOUND) {
      // A kernel the device code does not carry (reference.axe's GGUF
      // block kernels have host code only): the executable loads, and a
      // launch of that kernel on this device answers UNSUPPORTED.
      exe->kernels[i].drv_kernel = NULL;
      continue;
    }
    if (st != ACCEL_OK) {
      return accel_error_context(st, "kernel %u (\"%s\")", i,
                                 axe_string(v, k->name));
    }
  }
  return ACCEL_OK;
}

static accel_status_t load_code(accel_executable_t *exe) {
  const axe_view_t *v = &exe->view;
  accel_device_t *dev = exe->device;
  snprintf(exe->target, sizeof(exe->target), "%s", dev->info.target);
  if (v->kernel_count == 0) {
    return ACCEL_OK;  // weights-only executable
  }
  const axe_section_t *code;
  ACCEL_RETURN_IF_ERROR(find_code(v, dev, &code));
  if ((dev->info.caps & ACCEL_DEVICE_CAP_HOST_KERNELS) == 0 &&
      (code->info == ACCEL_CODE_FORMAT_PTX ||
       code->info == ACCEL_CODE_FORMAT_CUBIN)) {
    return load_device_code(exe, code);
  }
  if ((dev->info.caps & ACCEL_DEVICE_CAP_HOST_KERNELS) == 0 ||
      code->info != ACCEL_CODE_FORMAT_ELF_SO) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "%s cannot load code format %u for %s (only host "
                       "shared objects are loadable here)",
                       dev->info.id, code->info, dev->info.target);
  }
  char what[96];
  snprintf(what, sizeof(what), "code object for %s", dev->info.target);
  ACCEL_RETURN_IF_ERROR(check_code_symbols(v, code, what));
  ACCEL_RETURN_IF_ERROR(accel_host_code_load(v->data + code->offset,
                                             code->size, what, &exe->code));
  for (uint32_t i = 0; i < v->kernel_count; ++i) {
    const axe_kernel_t *k = &v->kernels[i];
    const char *sym = axe_string(v, k->symbol);
    const accel_kernel_export_t *e = accel_host_code_find(&exe->code, sym);
    if (e == NULL || e->fn == NULL) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "kernel %u (\"%s\") field symbol: \"%s\" is not "
                         "exported by the %s",
                         i, axe_string(v, k->name), sym, what);
    }
    if (e->setup != NULL) {
      int32_t r = e->setup();
      if (r != 0) {
        return accel_error(ACCEL_ERROR_ABORTED,
                           "kernel \"%s\": setup returned %d",
                           axe_string(v, k->name), r);
      }
    }
    const accel_kernel_meta_t *meta =
        accel_kernel_meta_find(exe->code.library, sym);
    if (meta != NULL) {
      ACCEL_RETURN_IF_ERROR(accel_kernel_meta_check_kernel(
          meta, axe_string(v, k->name), k->binding_count,
          k->constants_size));
    }
    exe->kernels[i].fn = e->fn;
    exe->kernels[i].meta = meta;
  }
  return accel_tuning_attach(exe);
}

static accel_status_t build_kernels(accel_executable_t *exe) {
  const axe_view_t *v = &exe->view;
  if (v->kernel_count == 0) {
    return ACCEL_OK;
  }
  exe->kernels = aligned_alloc(64, v->kernel_count * sizeof(*exe->kernels));
  if (exe->kernels != NULL) {
    memset(exe->kernels, 0, v->kernel_count * sizeof(*exe->kernels));
  }
  exe->binding_decls =
      calloc(v->binding_count ? v->binding_count : 1, sizeof(*exe->binding_decls));
  if (exe->kernels == NULL || exe->binding_decls == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cannot allocate %u kernels", v->kernel_count);
  }
  for (uint32_t i = 0; i < v->binding_count; ++i) {
    const axe_binding_t *b = &v->bindings[i];
    exe->binding_decls[i] = (accel_kernel_binding_decl_t){
        .name = b->name ? axe_string(v, b->name) : NULL,
        .access = b->access,
        .alignment = b->alignment ? b->alignment : 1,
        .min_size_bytes = b->min_size_bytes};
  }
  for (uint32_t i = 0; i < v->kernel_count; ++i) {
    const axe_kernel_t *r = &v->kernels[i];
    accel_kernel_t *k = &exe->kernels[i];
    k->owner = &exe->owner;
    k->device = exe->device;
    k->abi_version = r->abi_version;
    k->binding_count = r->binding_count;
    k->constants_size = r->constants_size;
    memcpy(k->workgroup_size, r->workgroup_size, sizeof(k->workgroup_size));
    k->bindings = exe->binding_decls + r->binding_first;
    k->name = (char *)axe_string(v, r->name);
    k->checks = exe->device->runtime->flags &
                (ACCEL_RUNTIME_FLAG_CHECK_NUMERICS |
                 ACCEL_RUNTIME_FLAG_TENSOR_SUMMARIES);
  }
  return ACCEL_OK;
}

static accel_status_t allocate_workspace(accel_executable_t *exe) {
  const axe_requirements_t *r = exe->view.requirements;
  if (r->workspace_bytes == 0) {
    return ACCEL_OK;
  }
  accel_buffer_desc_t d = {
      .struct_size = sizeof(d),
      .size_bytes = r->workspace_bytes,
      .alignment = r->workspace_alignment ? r->workspace_alignment : 64,
      .tag = "executable workspace"};
  ACCEL_RETURN_IF_ERROR(accel_buffer_alloc(exe->device, &d,
                                           &exe->workspace_buffer));
  if (accel_buffer_host_pointer(exe->workspace_buffer, &exe->workspace) !=
      ACCEL_OK) {
    exe->workspace = NULL;  // not host-visible: only device kernels use it
  }
  exe->workspace_size = r->workspace_bytes;
  return ACCEL_OK;
}

// Validates |image| and builds the executable around it. On failure the
// caller still owns the image.
static accel_status_t load_image(accel_device_t *device, const void *image,
                                 uint64_t size, bool mapped,
                                 accel_executable_load_flags_t flags,
                                 accel_executable_t **out) {
  accel_executable_t *exe = aligned_alloc(64, sizeof(*exe));
  if (exe != NULL) {
    memset(exe, 0, sizeof(*exe));
  }
  if (exe == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cannot allocate an executable");
  }
  accel_launch_owner_init(&exe->owner, executable_destroy);
  exe->device = device;
  exe->code.memfd = -1;
  accel_status_t st = accel_axe_parse(
      image, size, (flags & ACCEL_EXECUTABLE_LOAD_SKIP_HASHES) != 0,
      &exe->view);
  if (st == ACCEL_OK) {
    st = check_requirements(exe);
  }
  if (st == ACCEL_OK) {
    st = build_kernels(exe);
  }
  if (st == ACCEL_OK) {
    st = load_code(exe);
  }
  if (st == ACCEL_OK) {
    st = allocate_workspace(exe);
  }
  for (uint32_t i = 0; st == ACCEL_OK && i < exe->view.kernel_count; ++i) {
    exe->kernels[i].workspace = exe->workspace;
    exe->kernels[i].workspace_size = exe->workspace_size;
    exe->kernels[i].workspace_address =
        exe->workspace_buffer != NULL
            ? accel_buffer_address(exe->workspace_buffer)
            : 0;
    accel_kernel_init_single_dispatch(&exe->kernels[i]);
  }
  if (st != ACCEL_OK) {
    // The image stays the caller's: undo everything else.
    exe->mapped = false;
    executable_destroy(&exe->owner.object);
    return st;
  }
  exe->image = image;
  exe->image_size = size;
  exe->mapped = mapped;
  *out = exe;
  return ACCEL_OK;
}

static accel_status_t check_load_args(accel_runtime_t *runtime,
                                      accel_device_t *device,
                                      accel_executable_load_flags_t flags,
                                      accel_executable_t **out) {
  ACCEL_CHECK_ARG(runtime != NULL, "runtime (NULL)");
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(out != NULL, "out_executable (NULL)");
  if (device->runtime != runtime) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "device %s belongs to another runtime", device->info.id);
  }
  if ((flags & ~(uint32_t)KNOWN_LOAD_FLAGS) != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "unknown load flags 0x%x", flags);
  }
  return ACCEL_OK;
}

// Refuses what is not an .axe file before reading or mapping it: anything
// but a regular file (a FIFO would block, a device could be endless), an
// empty file, and a file whose header alone is wrong (an 8 GiB file with a
// bad magic is refused after reading 128 bytes, not after mapping it all).
static accel_status_t check_file_header(int fd, const char *path,
                                        uint64_t *out_size) {
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    return accel_error(ACCEL_ERROR_IO, "cannot stat %s: %s", path,
                       strerror(errno));
  }
  if (!S_ISREG(sb.st_mode)) {
    return accel_error(ACCEL_ERROR_IO,
                       "%s is not a regular file (%s): an executable is read "
                       "from a file",
                       path,
                       S_ISFIFO(sb.st_mode)   ? "a FIFO"
                       : S_ISDIR(sb.st_mode)  ? "a directory"
                       : S_ISCHR(sb.st_mode)  ? "a character device"
                       : S_ISBLK(sb.st_mode)  ? "a block device"
                       : S_ISSOCK(sb.st_mode) ? "a socket"
                                              : "not a file");
  }
  uint64_t size = (uint64_t)sb.st_size;
  _Alignas(8) uint8_t header[AXE_HEADER_SIZE];
  size_t want = size < sizeof(header) ? (size_t)size : sizeof(header);
  ssize_t got = pread(fd, header, want, 0);
  if (got < 0 || (size_t)got != want) {
    return accel_error(ACCEL_ERROR_IO, "cannot read the header of %s: %s",
                       path, got < 0 ? strerror(errno) : "short read");
  }
  accel_status_t st = accel_axe_check_header_prefix(header, size);
  if (st != ACCEL_OK) {
    return accel_error_context(st, "%s", path);
  }
  *out_size = size;
  return ACCEL_OK;
}

accel_status_t accel_executable_load_file(accel_runtime_t *runtime,
                                          accel_device_t *device,
                                          const char *path,
                                          accel_executable_load_flags_t flags,
                                          accel_executable_t **out_executable) {
  ACCEL_RETURN_IF_ERROR(check_load_args(runtime, device, flags, out_executable));
  ACCEL_CHECK_ARG(path != NULL, "path (NULL)");
  // O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return accel_error(errno == ENOENT ? ACCEL_ERROR_NOT_FOUND : ACCEL_ERROR_IO,
                       "cannot open %s: %s", path, strerror(errno));
  }
  uint64_t size = 0;
  accel_status_t checked = check_file_header(fd, path, &size);
  if (checked != ACCEL_OK) {
    close(fd);
    return checked;
  }
  // Prefault the whole mapping when every byte is about to be read anyway
  // (hash checking) or when asked to make weights resident: one populate
  // pass costs less than a fault per page range.
  int mflags = MAP_PRIVATE;
  if ((flags & (ACCEL_EXECUTABLE_LOAD_EAGER_WEIGHTS |
                ACCEL_EXECUTABLE_LOAD_SKIP_HASHES)) !=
      ACCEL_EXECUTABLE_LOAD_SKIP_HASHES) {
    mflags |= MAP_POPULATE;
  }
  void *p = mmap(NULL, size, PROT_READ, mflags, fd, 0);
  int e = errno;
  close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) {
    return accel_error(ACCEL_ERROR_IO, "cannot map %s (%llu bytes): %s", path,
                       (unsigned long long)size, strerror(e));
  }
  accel_status_t st = load_image(device, p, size, true, flags, out_executable);
  if (st != ACCEL_OK) {
    munmap(p, size);
    return accel_error_context(st, "loading %s", path);
  }
  return ACCEL_OK;
}

accel_status_t accel_executable_load_memory(
    accel_runtime_t *runtime, accel_device_t *device, const void *data,
    uint64_t size_bytes, accel_executable_load_flags_t flags,
    accel_executable_t **out_executable) {
  ACCEL_RETURN_IF_ERROR(check_load_args(runtime, device, flags, out_executable));
  ACCEL_CHECK_ARG(data != NULL, "data (NULL)");
  if (((uintptr_t)data & 63) != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "image at %p is not 64-byte aligned", data);
  }
  return load_image(device, data, size_bytes, false, flags, out_executable);
}

accel_status_t accel_executable_verify(const void *data, uint64_t size_bytes,
                                       accel_executable_load_flags_t flags) {
  ACCEL_CHECK_ARG(data != NULL || size_bytes == 0, "data (NULL)");
  if ((flags & ~(uint32_t)KNOWN_LOAD_FLAGS) != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "unknown load flags 0x%x", flags);
  }
  if (size_bytes < AXE_HEADER_SIZE) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "header: file is truncated: %llu bytes, the header "
                       "needs %u",
                       (unsigned long long)size_bytes, AXE_HEADER_SIZE);
  }
  const void *image = data;
  void *copy = NULL;
  if (((uintptr_t)data & 7) != 0) {
    copy = aligned_alloc(64, (size_bytes + 63) / 64 * 64);
    if (copy == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "cannot copy an unaligned %llu-byte image",
                         (unsigned long long)size_bytes);
    }
    memcpy(copy, data, size_bytes);
    image = copy;
  }
  axe_view_t view;
  accel_status_t st = accel_axe_parse(
      image, size_bytes, (flags & ACCEL_EXECUTABLE_LOAD_SKIP_HASHES) != 0,
      &view);
  free(copy);
  return st;
}

void accel_executable_retain(accel_executable_t *executable) {
  if (executable != NULL) {
    accel_launch_owner_retain(&executable->owner);
  }
}

void accel_executable_release(accel_executable_t *executable) {
  if (executable != NULL) {
    accel_launch_owner_release(&executable->owner);
  }
}

accel_status_t accel_executable_info(const accel_executable_t *exe,
                                     accel_executable_info_t *out_info) {
  ACCEL_CHECK_ARG(exe != NULL, "executable (NULL)");
  ACCEL_CHECK_ARG(out_info != NULL, "out_info (NULL)");
  if (out_info->struct_size < sizeof(*out_info)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "executable info: struct_size %u is too small",
                       out_info->struct_size);
  }
  const axe_view_t *v = &exe->view;
  accel_executable_info_t info = {
      .struct_size = out_info->struct_size,
      .format_major = v->header->version_major,
      .format_minor = v->header->version_minor,
      .kernel_count = v->kernel_count,
      .weight_count = v->weight_count,
      .metadata_count = v->metadata_count,
      .workspace_bytes = exe->workspace_size,
  };
  memcpy(info.uuid, v->header->uuid, 16);
  snprintf(info.target, sizeof(info.target), "%s", exe->target);
  *out_info = info;
  return ACCEL_OK;
}

accel_status_t accel_executable_kernel(accel_executable_t *exe,
                                       const char *name,
                                       accel_kernel_t **out_kernel) {
  ACCEL_CHECK_ARG(exe != NULL, "executable (NULL)");
  ACCEL_CHECK_ARG(name != NULL, "name (NULL)");
  ACCEL_CHECK_ARG(out_kernel != NULL, "out_kernel (NULL)");
  char have[160] = "";
  size_t used = 0;
  for (uint32_t i = 0; i < exe->view.kernel_count; ++i) {
    if (strcmp(exe->kernels[i].name, name) == 0) {
      *out_kernel = &exe->kernels[i];
      return ACCEL_OK;
    }
    if (used < sizeof(have)) {
      used += (size_t)snprintf(have + used, sizeof(have) - used, "%s%s",
                               used ? ", " : "", exe->kernels[i].name);
    }
  }
  return accel_error(ACCEL_ERROR_NOT_FOUND,
                     "no kernel \"%s\" in the executable (it has: %s)", name,
                     have[0] ? have : "none");
}

accel_status_t accel_executable_kernel_at(accel_executable_t *exe,
                                          uint32_t index,
                                          accel_kernel_t **out_kernel) {
  ACCEL_CHECK_ARG(exe != NULL, "executable (NULL)");
  ACCEL_CHECK_ARG(out_kernel != NULL, "out_kernel (NULL)");
  if (index >= exe->view.kernel_count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "kernel index %u is not below the kernel count %u",
                       index, exe->view.kernel_count);
  }
  *out_kernel = &exe->kernels[index];
  return ACCEL_OK;
}

static const axe_weight_t *find_weight(const accel_executable_t *exe,
                                       const char *name) {
  const axe_view_t *v = &exe->view;
  for (uint32_t i = 0; i < v->weight_count; ++i) {
    if (strcmp(axe_string(v, v->weights[i].name), name) == 0) {
      return &v->weights[i];
    }
  }
  return NULL;
}

static const uint8_t *weight_data(const accel_executable_t *exe,
                                  const axe_weight_t *w) {
  const axe_section_t *s = &exe->view.sections[w->data_section];
  return exe->view.data + s->offset + w->data_offset;
}

accel_status_t accel_executable_weight(const accel_executable_t *exe,
                                       const char *name,
                                       accel_weight_info_t *out_info) {
  ACCEL_CHECK_ARG(exe != NULL, "executable (NULL)");
  ACCEL_CHECK_ARG(name != NULL, "name (NULL)");
  ACCEL_CHECK_ARG(out_info != NULL, "out_info (NULL)");
  if (out_info->struct_size < sizeof(*out_info)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "weight info: struct_size %u is too small",
                       out_info->struct_size);
  }
  const axe_weight_t *w = find_weight(exe, name);
  if (w == NULL) {
    return accel_error(ACCEL_ERROR_NOT_FOUND,
                       "no weight \"%s\" in the executable", name);
  }
  const axe_view_t *v = &exe->view;
  accel_weight_info_t info = {
      .struct_size = out_info->struct_size,
      .dtype = w->dtype,
      .name = axe_string(v, w->name),
      .rank = w->rank,
      .layout = w->layout,
      .block = {w->block[0], w->block[1]},
      .size_bytes = w->size_bytes,
  };
  memcpy(info.shape, w->shape, sizeof(info.shape));
  memcpy(info.strides, w->strides, sizeof(info.strides));
  if (w->quant != AXE_NONE) {
    const axe_quant_t *q = &v->quants[w->quant];
    info.quant_scheme = q->scheme;
    info.quant_axis = q->axis;
    info.quant_group_size = q->group_size;
    info.quant_scale = axe_string(v, v->weights[q->scale].name);
    if (q->zero_point != AXE_NONE) {
      info.quant_zero_point = axe_string(v, v->weights[q->zero_point].name);
    }
  }
  if ((exe->device->info.caps & ACCEL_DEVICE_CAP_HOST_VISIBLE) != 0) {
    info.host_data = weight_data(exe, w);
  }
  *out_info = info;
  return ACCEL_OK;
}

// A read-only buffer aliasing weight data in the executable's image.
typedef struct weight_buffer {
  accel_buffer_t buffer;  // first
  accel_executable_t *executable;  // one reference
} weight_buffer_t;

static void weight_buffer_destroy(accel_object_t *object) {
  weight_buffer_t *wb = (weight_buffer_t *)object;
  accel_executable_release(wb->executable);
  free(wb);
}

accel_status_t accel_executable_weight_buffer(accel_executable_t *exe,
                                              const char *name,
                                              accel_buffer_t **out_buffer) {
  ACCEL_CHECK_ARG(exe != NULL, "executable (NULL)");
  ACCEL_CHECK_ARG(name != NULL, "name (NULL)");
  ACCEL_CHECK_ARG(out_buffer != NULL, "out_buffer (NULL)");
  const axe_weight_t *w = find_weight(exe, name);
  if (w == NULL) {
    return accel_error(ACCEL_ERROR_NOT_FOUND,
                       "no weight \"%s\" in the executable", name);
  }
  if ((exe->device->info.caps & ACCEL_DEVICE_CAP_HOST_VISIBLE) == 0) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "weight \"%s\": %s is not host-visible and weight "
                       "upload through DMA queues is not available yet",
                       name, exe->device->info.id);
  }
  weight_buffer_t *wb = calloc(1, sizeof(*wb));
  if (wb == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "weight \"%s\": cannot allocate a buffer object", name);
  }
  accel_buffer_init_read_only_alias(&wb->buffer, weight_buffer_destroy,
                                    exe->device, weight_data(exe, w),
                                    w->size_bytes, "weight", name);
  accel_executable_retain(exe);
  wb->executable = exe;
  *out_buffer = &wb->buffer;
  return ACCEL_OK;
}

accel_status_t accel_executable_metadata(const accel_executable_t *exe,
                                         const char *key,
                                         const char **out_value) {
  ACCEL_CHECK_ARG(exe != NULL, "executable (NULL)");
  ACCEL_CHECK_ARG(key != NULL, "key (NULL)");
  ACCEL_CHECK_ARG(out_value != NULL, "out_value (NULL)");
  const axe_view_t *v = &exe->view;
  for (uint32_t i = 0; i < v->metadata_count; ++i) {
    if (strcmp(axe_string(v, v->metadata[i].key), key) == 0) {
      *out_value = axe_string(v, v->metadata[i].value);
      return ACCEL_OK;
    }
  }
  return accel_error(ACCEL_ERROR_NOT_FOUND, "no metadata key \"%s\"", key);
}
