// Host code objects: ELF shared objects loaded from memory. The bytes are
// written to a memfd and dlopen'ed through /proc/self/fd/N. The memfd stays
// open while the library is loaded: the dynamic loader identifies libraries
// by path, and a closed descriptor number reused by a later load would name
// the old library again.
//
// dlopen runs the object's ELF constructors, so everything that can be
// checked from the bytes is checked first (accel_host_elf_open): a file the
// loader refuses for its header or for a missing symbol never runs code.
// These checks catch mistakes, not attacks: a crafted object can pass them
// and still run anything (docs/kernel-abi.md, "Trust").
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "abi/executable_impl.h"
#include "abi/kernel_meta.h"
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

#if defined(__x86_64__)
#define HOST_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_ELF_MACHINE EM_AARCH64
#else
#define HOST_ELF_MACHINE EM_NONE  // no host code objects on other machines
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_ELF_DATA ELFDATA2LSB
#else
#define HOST_ELF_DATA ELFDATA2MSB
#endif

static accel_status_t elf_check_header(const uint8_t *b, uint64_t size,
                                       const char *what, Elf64_Ehdr *eh) {
  if (size < EI_NIDENT || memcmp(b, ELFMAG, SELFMAG) != 0) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: not an ELF shared object (bad magic)", what);
  }
  if (b[EI_CLASS] != ELFCLASS64 || size < sizeof(*eh)) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: ELF class %u, expected 64-bit (2)", what,
                       b[EI_CLASS]);
  }
  memcpy(eh, b, sizeof(*eh));  // the bytes need not be aligned
  if (b[EI_DATA] != HOST_ELF_DATA) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: ELF byte order %u, this host's is %u", what,
                       b[EI_DATA], HOST_ELF_DATA);
  }
  if (eh->e_machine != HOST_ELF_MACHINE) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: ELF machine %u, this host's is %u", what,
                       eh->e_machine, HOST_ELF_MACHINE);
  }
  if (eh->e_type != ET_DYN) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: ELF type %u, expected a shared object (ET_DYN, "
                       "%u)",
                       what, eh->e_type, ET_DYN);
  }
  return ACCEL_OK;
}

// Section header |index|, bounds-checked against the file.
static bool elf_section(const uint8_t *b, uint64_t size, const Elf64_Ehdr *eh,
                        uint32_t index, Elf64_Shdr *out) {
  if (index >= eh->e_shnum || eh->e_shoff > size ||
      (size - eh->e_shoff) / sizeof(*out) <= index) {
    return false;
  }
  memcpy(out, b + eh->e_shoff + (uint64_t)index * sizeof(*out), sizeof(*out));
  return out->sh_offset <= size && out->sh_size <= size - out->sh_offset;
}

accel_status_t accel_host_elf_open(const void *data, uint64_t size,
                                   const char *what, accel_host_elf_t *out) {
  const uint8_t *b = data;
  Elf64_Ehdr eh;
  ACCEL_RETURN_IF_ERROR(elf_check_header(b, size, what, &eh));
  if (eh.e_shentsize != sizeof(Elf64_Shdr)) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: ELF e_shentsize %u, expected %zu", what,
                       eh.e_shentsize, sizeof(Elf64_Shdr));
  }
  for (uint32_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sym, str;
    if (!elf_section(b, size, &eh, i, &sym)) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "%s: ELF section header %u lies outside the %llu "
                         "bytes of the object",
                         what, i, (unsigned long long)size);
    }
    if (sym.sh_type != SHT_DYNSYM) {
      continue;
    }
    if (sym.sh_entsize != sizeof(Elf64_Sym) ||
        !elf_section(b, size, &eh, sym.sh_link, &str) ||
        str.sh_type != SHT_STRTAB) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "%s: ELF .dynsym (section %u) has entry size %llu or "
                         "a string table link %u that is not a string table "
                         "inside the object",
                         what, i, (unsigned long long)sym.sh_entsize,
                         sym.sh_link);
    }
    *out = (accel_host_elf_t){
        .symbols = b + sym.sh_offset,
        .symbol_count = sym.sh_size / sizeof(Elf64_Sym),
        .names = (const char *)b + str.sh_offset,
        .names_size = str.sh_size,
    };
    return ACCEL_OK;
  }
  return accel_error(ACCEL_ERROR_FORMAT,
                     "%s: no dynamic symbol table (.dynsym): nothing can be "
                     "exported",
                     what);
}

bool accel_host_elf_defines(const accel_host_elf_t *elf, const char *name) {
  size_t len = strlen(name);
  for (uint64_t i = 0; i < elf->symbol_count; ++i) {
    Elf64_Sym s;
    memcpy(&s, elf->symbols + i * sizeof(s), sizeof(s));
    unsigned bind = ELF64_ST_BIND(s.st_info);
    if (s.st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s.st_info) != STT_FUNC ||
        (bind != STB_GLOBAL && bind != STB_WEAK) ||
        s.st_name >= elf->names_size || elf->names_size - s.st_name <= len) {
      continue;
    }
    // Bounded compare: the name and its NUL lie inside .dynstr.
    if (memcmp(elf->names + s.st_name, name, len + 1) == 0) {
      return true;
    }
  }
  return false;
}

static int cmp_export_names(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// Export names are unique (kernel-abi.md): a repeated one would make the
// kernel a record names depend on the table's order.
static accel_status_t check_unique_exports(const accel_kernel_library_t *lib,
                                           const char *what) {
  const char **names = malloc(sizeof(*names) * (lib->export_count + 1u));
  if (names == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "%s: cannot allocate %u export names", what,
                       lib->export_count);
  }
  uint32_t n = 0;
  for (uint32_t i = 0; i < lib->export_count; ++i) {
    if (lib->exports[i].name != NULL) {
      names[n++] = lib->exports[i].name;
    }
  }
  qsort(names, n, sizeof(*names), cmp_export_names);
  accel_status_t st = ACCEL_OK;
  for (uint32_t i = 1; i < n && st == ACCEL_OK; ++i) {
    if (strcmp(names[i - 1], names[i]) == 0) {
      st = accel_error(ACCEL_ERROR_FORMAT,
                       "%s: export name \"%s\" appears more than once in "
                       "the library's export table",
                       what, names[i]);
    }
  }
  free(names);
  return st;
}

// What the library's descriptor says about itself: its size, its ABI
// version, and an export table with unique names.
static accel_status_t check_library(const accel_kernel_library_t *lib,
                                    const char *what) {
  if (lib->struct_size < ACCEL_KERNEL_LIBRARY_SIZE_1_0) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: library struct_size %u is below %u, the size of "
                       "accel_kernel_library_t in kernel ABI 1.0",
                       what, lib->struct_size, ACCEL_KERNEL_LIBRARY_SIZE_1_0);
  }
  uint32_t major = lib->abi_version >> 16;
  uint32_t minor = lib->abi_version & 0xffff;
  if (major != ACCEL_KERNEL_ABI_VERSION_MAJOR ||
      minor > ACCEL_KERNEL_ABI_VERSION_MINOR) {
    return accel_error(ACCEL_ERROR_VERSION,
                       "%s: library declares kernel ABI %u.%u, this runtime "
                       "provides %u.%u",
                       what, major, minor, ACCEL_KERNEL_ABI_VERSION_MAJOR,
                       ACCEL_KERNEL_ABI_VERSION_MINOR);
  }
  if (lib->export_count > 0 && lib->exports == NULL) {
    return accel_error(ACCEL_ERROR_FORMAT, "%s: %u exports but no table",
                       what, lib->export_count);
  }
  ACCEL_RETURN_IF_ERROR(check_unique_exports(lib, what));
  return accel_kernel_meta_check_library(lib, what);
}

accel_status_t accel_host_code_load(const void *data, uint64_t size,
                                    const char *what, accel_host_code_t *out) {
  accel_host_elf_t elf;
  ACCEL_RETURN_IF_ERROR(accel_host_elf_open(data, size, what, &elf));
  if (!accel_host_elf_defines(&elf, ACCEL_KERNEL_LIBRARY_QUERY_SYMBOL)) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s: does not export %s (checked before loading)", what,
                       ACCEL_KERNEL_LIBRARY_QUERY_SYMBOL);
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
  st = check_library(c.library, what);
  if (st != ACCEL_OK) {
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
