// accel-pack MANIFEST -o OUT.axe [--progress] [--quiet]: builds an .axe file
// from a manifest (docs/executable-format.md, "accel-pack manifests"). Paths
// in the manifest are relative to the manifest's folder. Weight files are
// mapped, not copied, while the output is written.
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel/accel.h"
#include "npy.h"
#include "tool_cli.h"

#define MAX_FILES 4096

typedef struct mapped_file {
  void *data;
  uint64_t size;
} mapped_file_t;

typedef struct pack {
  const char *manifest;
  char dir[4096];
  int line;
  accel_exe_builder_t *builder;
  mapped_file_t files[MAX_FILES];
  int file_count;
  uint64_t weight_bytes;
} pack_t;

static int fail(pack_t *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int fail(pack_t *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "accel-pack: %s:%d: ", p->manifest, p->line);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return -1;
}

static int fail_accel(pack_t *p, accel_status_t st) {
  return fail(p, "%s: %s", accel_status_name(st), accel_last_error());
}

static int map_file(pack_t *p, const char *rel, mapped_file_t **out) {
  char path[8192];
  if (rel[0] == '/') {
    snprintf(path, sizeof(path), "%s", rel);
  } else {
    snprintf(path, sizeof(path), "%s/%s", p->dir, rel);
  }
  if (p->file_count == MAX_FILES) {
    return fail(p, "more than %d files", MAX_FILES);
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return fail(p, "cannot open %s: %s", path, strerror(errno));
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || sb.st_size == 0) {
    close(fd);
    return fail(p, "cannot use %s: empty or unreadable", path);
  }
  void *d = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (d == MAP_FAILED) {
    return fail(p, "cannot map %s: %s", path, strerror(errno));
  }
  mapped_file_t *f = &p->files[p->file_count++];
  f->data = d;
  f->size = (uint64_t)sb.st_size;
  *out = f;
  return 0;
}

static int parse_u64_list(const char *s, uint64_t *out, uint32_t max,
                          uint32_t *count) {
  *count = 0;
  if (*s == '\0') {
    return 0;  // scalar
  }
  while (*s) {
    char *end;
    if (*count == max) {
      return -1;
    }
    out[(*count)++] = strtoull(s, &end, 0);
    if (end == s || (*end != ',' && *end != '\0')) {
      return -1;
    }
    s = *end == ',' ? end + 1 : end;
  }
  return 0;
}

static accel_dtype_t dtype_by_name(const char *s) {
  for (int d = 1; d < ACCEL_DTYPE_COUNT; ++d) {
    if (strcmp(accel_dtype_name((accel_dtype_t)d), s) == 0) {
      return (accel_dtype_t)d;
    }
  }
  return ACCEL_DTYPE_INVALID;
}

static int do_kernel(pack_t *p, char **tok, int n) {
  accel_exe_kernel_desc_t k = {.struct_size = sizeof(k), .name = tok[1]};
  accel_kernel_binding_decl_t bindings[256];
  for (int i = 2; i < n; ++i) {
    char *v = strchr(tok[i], '=');
    if (v == NULL) {
      return fail(p, "kernel %s: option \"%s\" is not key=value", tok[1],
                  tok[i]);
    }
    *v++ = '\0';
    if (strcmp(tok[i], "symbol") == 0) {
      k.symbol = v;
    } else if (strcmp(tok[i], "constants") == 0) {
      k.constants_size = (uint32_t)strtoul(v, NULL, 0);
    } else if (strcmp(tok[i], "workgroup") == 0) {
      uint64_t wg[3] = {1, 1, 1};
      uint32_t c;
      if (parse_u64_list(v, wg, 3, &c) != 0) {
        return fail(p, "kernel %s: bad workgroup \"%s\"", tok[1], v);
      }
      for (int d = 0; d < 3; ++d) {
        k.workgroup_size[d] = (uint32_t)wg[d];
      }
    } else if (strcmp(tok[i], "binding") == 0) {
      // ACCESS:NAME[:MIN_SIZE[:ALIGN]]
      if (k.binding_count == 256) {
        return fail(p, "kernel %s: more than 256 bindings", tok[1]);
      }
      accel_kernel_binding_decl_t *b = &bindings[k.binding_count++];
      *b = (accel_kernel_binding_decl_t){0};
      char *f[4] = {0};
      int nf = 0;
      for (char *s = strtok(v, ":"); s && nf < 4; s = strtok(NULL, ":")) {
        f[nf++] = s;
      }
      if (nf < 2) {
        return fail(p, "kernel %s: binding needs ACCESS:NAME", tok[1]);
      }
      b->access = strcmp(f[0], "r") == 0    ? ACCEL_KERNEL_ACCESS_READ
                  : strcmp(f[0], "w") == 0  ? ACCEL_KERNEL_ACCESS_WRITE
                  : strcmp(f[0], "rw") == 0 ? ACCEL_KERNEL_ACCESS_READ |
                                                  ACCEL_KERNEL_ACCESS_WRITE
                                            : 0;
      if (b->access == 0) {
        return fail(p, "kernel %s: binding access \"%s\" is not r, w or rw",
                    tok[1], f[0]);
      }
      b->name = f[1];
      b->min_size_bytes = f[2] ? strtoull(f[2], NULL, 0) : 0;
      b->alignment = f[3] ? (uint32_t)strtoul(f[3], NULL, 0) : 0;
    } else {
      return fail(p, "kernel %s: unknown option \"%s\"", tok[1], tok[i]);
    }
  }
  k.bindings = bindings;
  accel_status_t st = accel_exe_builder_add_kernel(p->builder, &k);
  return st == ACCEL_OK ? 0 : fail_accel(p, st);
}

static int do_weight(pack_t *p, char **tok, int n) {
  accel_exe_weight_desc_t w = {.struct_size = sizeof(w)};
  accel_weight_info_t *in = &w.info;
  in->struct_size = sizeof(*in);
  in->name = tok[1];
  const char *file = NULL;
  uint64_t offset = 0;
  bool have_shape = false;
  for (int i = 2; i < n; ++i) {
    if (strcmp(tok[i], "map") == 0) {
      w.mappable = 1;
      continue;
    }
    char *v = strchr(tok[i], '=');
    if (v == NULL) {
      return fail(p, "weight %s: option \"%s\" is not key=value", tok[1],
                  tok[i]);
    }
    *v++ = '\0';
    uint32_t c;
    if (strcmp(tok[i], "file") == 0) {
      file = v;
    } else if (strcmp(tok[i], "dtype") == 0) {
      in->dtype = dtype_by_name(v);
      if (in->dtype == ACCEL_DTYPE_INVALID) {
        return fail(p, "weight %s: unknown dtype \"%s\"", tok[1], v);
      }
    } else if (strcmp(tok[i], "shape") == 0) {
      if (parse_u64_list(v, in->shape, ACCEL_WEIGHT_MAX_RANK, &in->rank)) {
        return fail(p, "weight %s: bad shape \"%s\"", tok[1], v);
      }
      have_shape = true;
    } else if (strcmp(tok[i], "strides") == 0) {
      if (parse_u64_list(v, in->strides, ACCEL_WEIGHT_MAX_RANK, &c)) {
        return fail(p, "weight %s: bad strides \"%s\"", tok[1], v);
      }
    } else if (strcmp(tok[i], "offset") == 0) {
      offset = strtoull(v, NULL, 0);
    } else if (strcmp(tok[i], "layout") == 0) {
      // blocked:ROWS,COLS
      uint64_t blk[2];
      if (strncmp(v, "blocked:", 8) != 0 ||
          parse_u64_list(v + 8, blk, 2, &c) != 0 || c != 2) {
        return fail(p, "weight %s: layout must be blocked:ROWS,COLS", tok[1]);
      }
      in->layout = ACCEL_WEIGHT_LAYOUT_BLOCKED;
      in->block[0] = (uint32_t)blk[0];
      in->block[1] = (uint32_t)blk[1];
    } else if (strcmp(tok[i], "quant") == 0) {
      in->quant_scheme = strcmp(v, "per_tensor") == 0    ? ACCEL_QUANT_PER_TENSOR
                         : strcmp(v, "per_channel") == 0 ? ACCEL_QUANT_PER_CHANNEL
                         : strcmp(v, "groupwise") == 0   ? ACCEL_QUANT_GROUPWISE
                                                         : 99;
      if (in->quant_scheme == 99) {
        return fail(p, "weight %s: unknown quant scheme \"%s\"", tok[1], v);
      }
    } else if (strcmp(tok[i], "axis") == 0) {
      in->quant_axis = (uint32_t)strtoul(v, NULL, 0);
    } else if (strcmp(tok[i], "group") == 0) {
      in->quant_group_size = (uint32_t)strtoul(v, NULL, 0);
    } else if (strcmp(tok[i], "scale") == 0) {
      in->quant_scale = v;
    } else if (strcmp(tok[i], "zero") == 0) {
      in->quant_zero_point = v;
    } else {
      return fail(p, "weight %s: unknown option \"%s\"", tok[1], tok[i]);
    }
  }
  if (file == NULL) {
    return fail(p, "weight %s: file= is required", tok[1]);
  }
  mapped_file_t *f;
  if (map_file(p, file, &f) != 0) {
    return -1;
  }
  size_t flen = strlen(file);
  if (flen > 4 && strcmp(file + flen - 4, ".npy") == 0) {
    npy_info_t npy;
    char err[256];
    if (npy_parse(f->data, f->size, &npy, err, sizeof(err)) != 0) {
      return fail(p, "weight %s: %s: %s", tok[1], file, err);
    }
    if (in->dtype != ACCEL_DTYPE_INVALID && in->dtype != npy.dtype) {
      return fail(p, "weight %s: dtype=%s but %s holds %s", tok[1],
                  accel_dtype_name(in->dtype), file,
                  accel_dtype_name(npy.dtype));
    }
    if (have_shape && (in->rank != npy.rank ||
                       memcmp(in->shape, npy.shape, sizeof(npy.shape)) != 0)) {
      return fail(p, "weight %s: shape= differs from the shape in %s", tok[1],
                  file);
    }
    in->dtype = npy.dtype;
    in->rank = npy.rank;
    memcpy(in->shape, npy.shape, sizeof(in->shape));
    offset = npy.data_offset;
  } else if (in->dtype == ACCEL_DTYPE_INVALID || !have_shape) {
    return fail(p, "weight %s: raw files need dtype= and shape=", tok[1]);
  }
  if (offset > f->size) {
    return fail(p, "weight %s: offset %llu is beyond %s (%llu bytes)", tok[1],
                (unsigned long long)offset, file,
                (unsigned long long)f->size);
  }
  in->host_data = (const uint8_t *)f->data + offset;
  in->size_bytes = f->size - offset;
  accel_status_t st = accel_exe_builder_add_weight(p->builder, &w);
  if (st != ACCEL_OK) {
    return fail_accel(p, st);
  }
  p->weight_bytes += in->size_bytes;
  return 0;
}

static int do_line(pack_t *p, char *line) {
  char *tok[300];
  int n = 0;
  char *rest = NULL;
  for (char *s = strtok_r(line, " \t\r\n", &rest); s && n < 300;
       s = strtok_r(NULL, " \t\r\n", &rest)) {
    if (n == 2 && strcmp(tok[0], "metadata") == 0) {
      // The value is the rest of the line.
      s[strlen(s)] = rest && *rest ? ' ' : '\0';
      s[strcspn(s, "\r\n")] = '\0';
      tok[n++] = s;
      break;
    }
    tok[n++] = s;
  }
  if (n == 0 || tok[0][0] == '#') {
    return 0;
  }
  accel_status_t st = ACCEL_OK;
  if (strcmp(tok[0], "kernel") == 0 && n >= 2) {
    return do_kernel(p, tok, n);
  }
  if (strcmp(tok[0], "weight") == 0 && n >= 2) {
    return do_weight(p, tok, n);
  }
  if (strcmp(tok[0], "metadata") == 0 && n == 3) {
    st = accel_exe_builder_add_metadata(p->builder, tok[1], tok[2]);
  } else if (strcmp(tok[0], "code") == 0 && n == 4) {
    accel_code_format_t fmt = strcmp(tok[2], "elf") == 0     ? ACCEL_CODE_FORMAT_ELF_SO
                              : strcmp(tok[2], "ptx") == 0   ? ACCEL_CODE_FORMAT_PTX
                              : strcmp(tok[2], "cubin") == 0 ? ACCEL_CODE_FORMAT_CUBIN
                                                             : ACCEL_CODE_FORMAT_INVALID;
    if (fmt == ACCEL_CODE_FORMAT_INVALID) {
      return fail(p, "code format \"%s\" is not elf, ptx or cubin", tok[2]);
    }
    mapped_file_t *f;
    if (map_file(p, tok[3], &f) != 0) {
      return -1;
    }
    st = accel_exe_builder_add_code(p->builder, tok[1], fmt, f->data, f->size);
  } else if (strcmp(tok[0], "uuid") == 0 && n == 2) {
    uint8_t uuid[16];
    const char *h = tok[1];
    for (int i = 0; i < 16; ++i) {
      while (*h == '-') {
        h++;
      }
      unsigned v;
      if (sscanf(h, "%2x", &v) != 1) {
        return fail(p, "bad uuid \"%s\"", tok[1]);
      }
      uuid[i] = (uint8_t)v;
      h += 2;
    }
    st = accel_exe_builder_set_uuid(p->builder, uuid);
  } else if (strcmp(tok[0], "requires") == 0) {
    accel_exe_requirements_t r = {.struct_size = sizeof(r)};
    for (int i = 1; i < n; ++i) {
      char *v = strchr(tok[i], '=');
      if (v == NULL) {
        return fail(p, "requires: \"%s\" is not key=value", tok[i]);
      }
      *v++ = '\0';
      if (strcmp(tok[i], "workspace") == 0) {
        r.workspace_bytes = strtoull(v, NULL, 0);
      } else if (strcmp(tok[i], "workspace_align") == 0) {
        r.workspace_alignment = strtoull(v, NULL, 0);
      } else if (strcmp(tok[i], "min_runtime") == 0) {
        unsigned ma = 0, mi = 0;
        if (sscanf(v, "%u.%u", &ma, &mi) != 2) {
          return fail(p, "requires: min_runtime must be MAJOR.MINOR");
        }
        r.min_runtime_version = ma << 16 | mi;
      } else if (strcmp(tok[i], "caps") == 0) {
        for (char *c = strtok(v, ","); c; c = strtok(NULL, ",")) {
          if (strcmp(c, "host_visible") == 0) {
            r.required_caps |= ACCEL_DEVICE_CAP_HOST_VISIBLE;
          } else if (strcmp(c, "host_kernels") == 0) {
            r.required_caps |= ACCEL_DEVICE_CAP_HOST_KERNELS;
          } else if (strcmp(c, "virtual_memory") == 0) {
            r.required_caps |= ACCEL_DEVICE_CAP_VIRTUAL_MEMORY;
          } else {
            return fail(p, "requires: unknown capability \"%s\"", c);
          }
        }
      } else {
        return fail(p, "requires: unknown key \"%s\"", tok[i]);
      }
    }
    st = accel_exe_builder_set_requirements(p->builder, &r);
  } else {
    return fail(p, "unknown or malformed directive \"%s\"", tok[0]);
  }
  return st == ACCEL_OK ? 0 : fail_accel(p, st);
}

typedef struct progress {
  bool enabled;
  int last_percent;
} progress_t;

static void show_progress(void *user_data, uint64_t done, uint64_t total) {
  progress_t *pr = user_data;
  if (!pr->enabled || total == 0) {
    return;
  }
  int percent = (int)(done * 100 / total);
  if (percent == pr->last_percent) {
    return;
  }
  pr->last_percent = percent;
  char bar[41];
  int fill = percent * 40 / 100;
  for (int i = 0; i < 40; ++i) {
    bar[i] = i < fill ? '#' : ' ';
  }
  bar[40] = '\0';
  fprintf(stderr, "\rweights [%s] %3d%% %llu/%llu MiB", bar, percent,
          (unsigned long long)(done >> 20), (unsigned long long)(total >> 20));
  if (done == total) {
    fprintf(stderr, "\n");
  }
}

static const accel_tool_option_t k_options[] = {
    {"-o", "OUT.axe", 0, "the executable to write (required)"},
    {"--progress", NULL, 1,
     "show a progress bar while weights are written, even when small or "
     "not on a terminal"},
    {"--quiet", NULL, 1, "print nothing but errors and warnings"},
};
enum { OPT_OUT, OPT_PROGRESS, OPT_QUIET };

static const accel_tool_spec_t k_spec = {
    .name = "accel-pack",
    .synopsis = "MANIFEST -o OUT.axe [--progress | --quiet]",
    .description = "Builds an .axe executable from a manifest (the directives "
                   "are in docs/executable-format.md).",
    .options = k_options,
    .option_count = sizeof(k_options) / sizeof(k_options[0]),
    .min_positional = 1,
    .max_positional = 1,
};

int main(int argc, char **argv) {
  accel_tool_args_t args;
  int parsed = accel_tool_parse(&k_spec, argc, argv, &args);
  if (parsed != ACCEL_TOOL_CONTINUE) {
    return parsed;
  }
  const char *manifest = args.positional[0], *out = args.values[OPT_OUT];
  bool force_progress = args.values[OPT_PROGRESS] != NULL;
  bool quiet = args.values[OPT_QUIET] != NULL;
  if (out == NULL) {
    return accel_tool_usage_error(&k_spec, "missing -o OUT.axe");
  }
  static pack_t p;
  p.manifest = manifest;
  char tmp[4096];
  snprintf(tmp, sizeof(tmp), "%s", manifest);
  snprintf(p.dir, sizeof(p.dir), "%s", dirname(tmp));
  FILE *f = fopen(manifest, "r");
  if (f == NULL) {
    fprintf(stderr, "accel-pack: cannot open %s: %s\n", manifest,
            strerror(errno));
    return 1;
  }
  int rc = 1;
  accel_status_t st = accel_exe_builder_create(&p.builder);
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-pack: %s\n", accel_last_error());
    goto out;
  }
  char line[16384];
  while (fgets(line, sizeof(line), f) != NULL) {
    p.line++;
    if (do_line(&p, line) != 0) {
      goto out;
    }
  }
  progress_t pr = {
      .enabled = !quiet && (force_progress ||
                            (isatty(2) && p.weight_bytes >= (64u << 20))),
      .last_percent = -1};
  st = accel_exe_builder_write_file(p.builder, out, show_progress, &pr);
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-pack: writing %s: %s: %s\n", out,
            accel_status_name(st), accel_last_error());
    goto out;
  }
  if (!quiet) {
    printf("accel-pack: wrote %s\n", out);
  }
  rc = 0;
out:
  accel_exe_builder_destroy(p.builder);
  for (int i = 0; i < p.file_count; ++i) {
    munmap(p.files[i].data, p.files[i].size);
  }
  fclose(f);
  return rc;
}
