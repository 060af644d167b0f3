// Host code objects: ELF shared objects loaded from memory. The bytes are
// written to a memfd and dlopen'ed through /proc/self/fd/N. The memfd stays
// open while the library is loaded: the dynamic loader identifies libraries
// by path, and a closed descriptor number reused by a later load would name
// the old library again.
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "abi/executable_impl.h"
#include "core/error.h"

static accel_status_t write_fd(int fd, const uint8_t *data, uint64_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size > (1u << 30) ? (1u << 30) : (size_t)size);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return accel_error(ACCEL_ERROR_IO, "writing the code object to a memfd: %s",
                         strerror(errno));
    }
    data += n;
    size -= (uint64_t)n;
  }
  return ACCEL_OK;
}

accel_status_t accel_host_code_load(const void *data, uint64_t size,
                                    const char *what, accel_host_code_t *out) {
  if (size < 4 || memcmp(data, "\x7f" "ELF", 4) != 0) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: not an ELF shared object (bad magic)", what);
  }
  accel_host_code_t c = {.memfd = -1};
  accel_status_t st;
  c.memfd = memfd_create("accel-code", MFD_CLOEXEC);
  if (c.memfd < 0) {
    return accel_error(ACCEL_ERROR_IO, "%s: memfd_create: %s", what,
                       strerror(errno));
  }
  st = write_fd(c.memfd, data, size);
  if (st != ACCEL_OK) {
    goto err_close_fd;
  }
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", c.memfd);
  c.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (c.handle == NULL) {
    const char *e = dlerror();
    st = accel_error(ACCEL_ERROR_FORMAT, "%s: dlopen failed: %s", what,
                     e ? e : "unknown error");
    goto err_close_fd;
  }
  accel_kernel_library_query_fn_t query;
  *(void **)&query = dlsym(c.handle, ACCEL_KERNEL_LIBRARY_QUERY_SYMBOL);
  if (query == NULL) {
    st = accel_error(ACCEL_ERROR_FORMAT, "%s: does not export %s", what,
                     ACCEL_KERNEL_LIBRARY_QUERY_SYMBOL);
    goto err_dlclose;
  }
  c.library = query(ACCEL_KERNEL_ABI_VERSION);
  if (c.library == NULL) {
    st = accel_error(ACCEL_ERROR_VERSION,
                     "%s: the library cannot serve kernel ABI %u.%u", what,
                     ACCEL_KERNEL_ABI_VERSION_MAJOR,
                     ACCEL_KERNEL_ABI_VERSION_MINOR);
    goto err_dlclose;
  }
  uint32_t major = c.library->abi_version >> 16;
  uint32_t minor = c.library->abi_version & 0xffff;
  if (c.library->struct_size < sizeof(accel_kernel_library_t) ||
      major != ACCEL_KERNEL_ABI_VERSION_MAJOR ||
      minor > ACCEL_KERNEL_ABI_VERSION_MINOR) {
    st = accel_error(ACCEL_ERROR_VERSION,
                     "%s: library declares kernel ABI %u.%u (struct_size "
                     "%u), this runtime provides %u.%u",
                     what, major, minor, c.library->struct_size,
                     ACCEL_KERNEL_ABI_VERSION_MAJOR,
                     ACCEL_KERNEL_ABI_VERSION_MINOR);
    goto err_dlclose;
  }
  if (c.library->export_count > 0 && c.library->exports == NULL) {
    st = accel_error(ACCEL_ERROR_FORMAT, "%s: %u exports but no table", what,
                     c.library->export_count);
    goto err_dlclose;
  }
  if (c.library->init != NULL) {
    int32_t r = c.library->init();
    if (r != 0) {
      st = accel_error(ACCEL_ERROR_ABORTED, "%s: library init returned %d",
                       what, r);
      goto err_dlclose;
    }
  }
  *out = c;
  return ACCEL_OK;

err_dlclose:
  dlclose(c.handle);
err_close_fd:
  close(c.memfd);
  return st;
}

void accel_host_code_unload(accel_host_code_t *code) {
  if (code->handle == NULL) {
    return;
  }
  if (code->library != NULL && code->library->fini != NULL) {
    code->library->fini();
  }
  dlclose(code->handle);
  close(code->memfd);
  code->handle = NULL;
  code->memfd = -1;
}

const accel_kernel_export_t *accel_host_code_find(const accel_host_code_t *code,
                                                  const char *name) {
  const accel_kernel_library_t *lib = code->library;
  for (uint32_t i = 0; i < lib->export_count; ++i) {
    if (lib->exports[i].name != NULL && strcmp(lib->exports[i].name, name) == 0) {
      return &lib->exports[i];
    }
  }
  return NULL;
}
