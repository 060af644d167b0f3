// accel-pack MANIFEST -o OUT.axe [--progress] [--quiet]: builds an .axe file
// from a manifest (docs/executable-format.md, "accel-pack manifests"). Paths
// in the manifest are relative to the manifest's folder. Weight files are
// mapped, not copied, while the output is written.
// accel-pack --from-gguf MODEL.gguf -o OUT.axe: imports a GGUF model into a
// decoder .axe (gguf_import.h, docs/gguf.md "Importing a model").
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
  int kernel_count;  // kernel directives added
  int code_count;    // code objects added
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

// ---------------------------------------------------------------------------
// Directive options: KEY=VALUE words after a directive's name, each handled
// by one entry of a table (the key, and a function that stores the value in
// the directive's state).
// ---------------------------------------------------------------------------

typedef int (*option_fn)(pack_t *p, void *state, const char *what, char *v);

typedef struct option_entry {
  const char *key;
  option_fn fn;
} option_entry_t;

// Applies every KEY=VALUE word of |tok|[first..n) through |table|. |what|
// names the directive in errors ("kernel k", "requires"). Words equal to
// |bare| (when not NULL) call |bare_fn| with a NULL value instead.
typedef struct option_table {
  const option_entry_t *entries;
  size_t count;
  const char *bare;  // a word with no '=' that the directive accepts
  option_fn bare_fn;
} option_table_t;

static int apply_options(pack_t *p, const option_table_t *t, void *state,
                         const char *what, char **tok, int first, int n) {
  for (int i = first; i < n; ++i) {
    if (t->bare != NULL && strcmp(tok[i], t->bare) == 0) {
      if (t->bare_fn(p, state, what, NULL) != 0) {
        return -1;
      }
      continue;
    }
    char *v = strchr(tok[i], '=');
    if (v == NULL) {
      return fail(p, "%s: option \"%s\" is not key=value", what, tok[i]);
    }
    *v++ = '\0';
    size_t k = 0;
    while (k < t->count && strcmp(t->entries[k].key, tok[i]) != 0) {
      k++;
    }
    if (k == t->count) {
      return fail(p, "%s: unknown option \"%s\"", what, tok[i]);
    }
    if (t->entries[k].fn(p, state, what, v) != 0) {
      return -1;
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------
// kernel NAME [symbol=S] [constants=N] [workgroup=X[,Y[,Z]]] [binding=...]...
// ---------------------------------------------------------------------------

typedef struct kernel_state {
  accel_exe_kernel_desc_t desc;
  accel_kernel_binding_decl_t bindings[256];
} kernel_state_t;

static int kernel_symbol(pack_t *p, void *state, const char *what, char *v) {
  (void)p, (void)what;
  ((kernel_state_t *)state)->desc.symbol = v;
  return 0;
}

static int kernel_constants(pack_t *p, void *state, const char *what,
                            char *v) {
  (void)p, (void)what;
  ((kernel_state_t *)state)->desc.constants_size =
      (uint32_t)strtoul(v, NULL, 0);
  return 0;
}

static int kernel_workgroup(pack_t *p, void *state, const char *what,
                            char *v) {
  kernel_state_t *k = state;
  uint64_t wg[3] = {1, 1, 1};
  uint32_t c;
  if (parse_u64_list(v, wg, 3, &c) != 0) {
    return fail(p, "%s: bad workgroup \"%s\"", what, v);
  }
  for (int d = 0; d < 3; ++d) {
    k->desc.workgroup_size[d] = (uint32_t)wg[d];
  }
  return 0;
}

static uint32_t access_by_name(const char *s) {
  static const struct {
    const char *name;
    uint32_t access;
  } k_access[] = {
      {"r", ACCEL_KERNEL_ACCESS_READ},
      {"w", ACCEL_KERNEL_ACCESS_WRITE},
      {"rw", ACCEL_KERNEL_ACCESS_READ | ACCEL_KERNEL_ACCESS_WRITE},
  };
  for (size_t i = 0; i < sizeof(k_access) / sizeof(k_access[0]); ++i) {
    if (strcmp(s, k_access[i].name) == 0) {
      return k_access[i].access;
    }
  }
  return 0;
}

// ACCESS:NAME[:MIN_SIZE[:ALIGN]]
static int kernel_binding(pack_t *p, void *state, const char *what, char *v) {
  kernel_state_t *k = state;
  if (k->desc.binding_count == 256) {
    return fail(p, "%s: more than 256 bindings", what);
  }
  char *f[4] = {0};
  int nf = 0;
  char *rest = NULL;
  for (char *s = strtok_r(v, ":", &rest); s && nf < 4;
       s = strtok_r(NULL, ":", &rest)) {
    f[nf++] = s;
  }
  if (nf < 2) {
    return fail(p, "%s: binding needs ACCESS:NAME", what);
  }
  accel_kernel_binding_decl_t *b = &k->bindings[k->desc.binding_count++];
  *b = (accel_kernel_binding_decl_t){.access = access_by_name(f[0])};
  if (b->access == 0) {
    return fail(p, "%s: binding access \"%s\" is not r, w or rw", what, f[0]);
  }
  b->name = f[1];
  b->min_size_bytes = f[2] ? strtoull(f[2], NULL, 0) : 0;
  b->alignment = f[3] ? (uint32_t)strtoul(f[3], NULL, 0) : 0;
  return 0;
}

static const option_entry_t k_kernel_options[] = {
    {"symbol", kernel_symbol},
    {"constants", kernel_constants},
    {"workgroup", kernel_workgroup},
    {"binding", kernel_binding},
};

static int do_kernel(pack_t *p, char **tok, int n) {
  kernel_state_t k = {.desc = {.struct_size = sizeof(k.desc)}};
  k.desc.name = tok[1];
  char what[320];
  snprintf(what, sizeof(what), "kernel %s", tok[1]);
  const option_table_t t = {k_kernel_options,
                            sizeof(k_kernel_options) / sizeof(k_kernel_options[0]),
                            NULL, NULL};
  if (apply_options(p, &t, &k, what, tok, 2, n) != 0) {
    return -1;
  }
  k.desc.bindings = k.bindings;
  accel_status_t st = accel_exe_builder_add_kernel(p->builder, &k.desc);
  if (st != ACCEL_OK) {
    return fail_accel(p, st);
  }
  p->kernel_count++;
  return 0;
}

// ---------------------------------------------------------------------------
// weight NAME file=F [map] [dtype=] [shape=] [strides=] [offset=] [layout=]
//   [quant=] [axis=] [group=] [scale=] [zero=]
// ---------------------------------------------------------------------------

typedef struct weight_state {
  accel_exe_weight_desc_t desc;
  const char *file;
  uint64_t offset;
  bool have_shape;
} weight_state_t;

static int weight_map(pack_t *p, void *state, const char *what, char *v) {
  (void)p, (void)what, (void)v;
  ((weight_state_t *)state)->desc.mappable = 1;
  return 0;
}

static int weight_file(pack_t *p, void *state, const char *what, char *v) {
  (void)p, (void)what;
  ((weight_state_t *)state)->file = v;
  return 0;
}

static int weight_dtype(pack_t *p, void *state, const char *what, char *v) {
  weight_state_t *w = state;
  w->desc.info.dtype = dtype_by_name(v);
  if (w->desc.info.dtype == ACCEL_DTYPE_INVALID) {
    return fail(p, "%s: unknown dtype \"%s\"", what, v);
  }
  return 0;
}

static int weight_shape(pack_t *p, void *state, const char *what, char *v) {
  weight_state_t *w = state;
  if (parse_u64_list(v, w->desc.info.shape, ACCEL_WEIGHT_MAX_RANK,
                     &w->desc.info.rank) != 0) {
    return fail(p, "%s: bad shape \"%s\"", what, v);
  }
  w->have_shape = true;
  return 0;
}

static int weight_strides(pack_t *p, void *state, const char *what, char *v) {
  weight_state_t *w = state;
  uint32_t c;
  if (parse_u64_list(v, w->desc.info.strides, ACCEL_WEIGHT_MAX_RANK, &c) !=
      0) {
    return fail(p, "%s: bad strides \"%s\"", what, v);
  }
  return 0;
}

static int weight_offset(pack_t *p, void *state, const char *what, char *v) {
  (void)p, (void)what;
  ((weight_state_t *)state)->offset = strtoull(v, NULL, 0);
  return 0;
}

// blocked:ROWS,COLS
static int weight_layout(pack_t *p, void *state, const char *what, char *v) {
  accel_weight_info_t *in = &((weight_state_t *)state)->desc.info;
  uint64_t blk[2];
  uint32_t c;
  if (strncmp(v, "blocked:", 8) != 0 ||
      parse_u64_list(v + 8, blk, 2, &c) != 0 || c != 2) {
    return fail(p, "%s: layout must be blocked:ROWS,COLS", what);
  }
  in->layout = ACCEL_WEIGHT_LAYOUT_BLOCKED;
  in->block[0] = (uint32_t)blk[0];
  in->block[1] = (uint32_t)blk[1];
  return 0;
}

static int weight_quant(pack_t *p, void *state, const char *what, char *v) {
  static const struct {
    const char *name;
    uint32_t scheme;
  } k_schemes[] = {
      {"per_tensor", ACCEL_QUANT_PER_TENSOR},
      {"per_channel", ACCEL_QUANT_PER_CHANNEL},
      {"groupwise", ACCEL_QUANT_GROUPWISE},
  };
  for (size_t i = 0; i < sizeof(k_schemes) / sizeof(k_schemes[0]); ++i) {
    if (strcmp(v, k_schemes[i].name) == 0) {
      ((weight_state_t *)state)->desc.info.quant_scheme = k_schemes[i].scheme;
      return 0;
    }
  }
  return fail(p, "%s: unknown quant scheme \"%s\"", what, v);
}

static int weight_axis(pack_t *p, void *state, const char *what, char *v) {
  (void)p, (void)what;
  ((weight_state_t *)state)->desc.info.quant_axis =
      (uint32_t)strtoul(v, NULL, 0);
  return 0;
}

static int weight_group(pack_t *p, void *state, const char *what, char *v) {
  (void)p, (void)what;
  ((weight_state_t *)state)->desc.info.quant_group_size =
      (uint32_t)strtoul(v, NULL, 0);
  return 0;
}

static int weight_scale(pack_t *p, void *state, const char *what, char *v) {
  (void)p, (void)what;
  ((weight_state_t *)state)->desc.info.quant_scale = v;
  return 0;
}

static int weight_zero(pack_t *p, void *state, const char *what, char *v) {
  (void)p, (void)what;
  ((weight_state_t *)state)->desc.info.quant_zero_point = v;
  return 0;
}

static const option_entry_t k_weight_options[] = {
    {"file", weight_file},       {"dtype", weight_dtype},
    {"shape", weight_shape},     {"strides", weight_strides},
    {"offset", weight_offset},   {"layout", weight_layout},
    {"quant", weight_quant},     {"axis", weight_axis},
    {"group", weight_group},     {"scale", weight_scale},
    {"zero", weight_zero},
};

// Takes dtype, shape and the data offset from a .npy header, checking them
// against what the manifest said.
static int weight_from_npy(pack_t *p, weight_state_t *w, const char *what,
                           const mapped_file_t *f) {
  accel_weight_info_t *in = &w->desc.info;
  npy_info_t npy;
  char err[256];
  if (npy_parse(f->data, f->size, &npy, err, sizeof(err)) != 0) {
    return fail(p, "%s: %s: %s", what, w->file, err);
  }
  if (in->dtype != ACCEL_DTYPE_INVALID && in->dtype != npy.dtype) {
    return fail(p, "%s: dtype=%s but %s holds %s", what,
                accel_dtype_name(in->dtype), w->file,
                accel_dtype_name(npy.dtype));
  }
  if (w->have_shape && (in->rank != npy.rank ||
                        memcmp(in->shape, npy.shape, sizeof(npy.shape)) != 0)) {
    return fail(p, "%s: shape= differs from the shape in %s", what, w->file);
  }
  in->dtype = npy.dtype;
  in->rank = npy.rank;
  memcpy(in->shape, npy.shape, sizeof(in->shape));
  w->offset = npy.data_offset;
  return 0;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n > m && strcmp(s + n - m, suffix) == 0;
}

static int do_weight(pack_t *p, char **tok, int n) {
  weight_state_t w = {.desc = {.struct_size = sizeof(w.desc)}};
  accel_weight_info_t *in = &w.desc.info;
  in->struct_size = sizeof(*in);
  in->name = tok[1];
  char what[320];
  snprintf(what, sizeof(what), "weight %s", tok[1]);
  const option_table_t t = {k_weight_options,
                            sizeof(k_weight_options) / sizeof(k_weight_options[0]),
                            "map", weight_map};
  if (apply_options(p, &t, &w, what, tok, 2, n) != 0) {
    return -1;
  }
  if (w.file == NULL) {
    return fail(p, "%s: file= is required", what);
  }
  mapped_file_t *f;
  if (map_file(p, w.file, &f) != 0) {
    return -1;
  }
  if (ends_with(w.file, ".npy")) {
    if (weight_from_npy(p, &w, what, f) != 0) {
      return -1;
    }
  } else if (in->dtype == ACCEL_DTYPE_INVALID || !w.have_shape) {
    return fail(p, "%s: raw files need dtype= and shape=", what);
  }
  if (w.offset > f->size) {
    return fail(p, "%s: offset %llu is beyond %s (%llu bytes)", what,
                (unsigned long long)w.offset, w.file,
                (unsigned long long)f->size);
  }
  in->host_data = (const uint8_t *)f->data + w.offset;
  in->size_bytes = f->size - w.offset;
  accel_status_t st = accel_exe_builder_add_weight(p->builder, &w.desc);
  if (st != ACCEL_OK) {
    return fail_accel(p, st);
  }
  p->weight_bytes += in->size_bytes;
  return 0;
}

// ---------------------------------------------------------------------------
// requires [workspace=N] [workspace_align=N] [min_runtime=M.m] [caps=a,b]
// ---------------------------------------------------------------------------

static int requires_workspace(pack_t *p, void *state, const char *what,
                              char *v) {
  (void)p, (void)what;
  ((accel_exe_requirements_t *)state)->workspace_bytes = strtoull(v, NULL, 0);
  return 0;
}

static int requires_workspace_align(pack_t *p, void *state, const char *what,
                                    char *v) {
  (void)p, (void)what;
  ((accel_exe_requirements_t *)state)->workspace_alignment =
      strtoull(v, NULL, 0);
  return 0;
}

static int requires_min_runtime(pack_t *p, void *state, const char *what,
                                char *v) {
  unsigned ma = 0, mi = 0;
  if (sscanf(v, "%u.%u", &ma, &mi) != 2) {
    return fail(p, "%s: min_runtime must be MAJOR.MINOR", what);
  }
  ((accel_exe_requirements_t *)state)->min_runtime_version = ma << 16 | mi;
  return 0;
}

static int requires_caps(pack_t *p, void *state, const char *what, char *v) {
  static const struct {
    const char *name;
    accel_device_caps_t bit;
  } k_caps[] = {
      {"host_visible", ACCEL_DEVICE_CAP_HOST_VISIBLE},
      {"host_kernels", ACCEL_DEVICE_CAP_HOST_KERNELS},
      {"virtual_memory", ACCEL_DEVICE_CAP_VIRTUAL_MEMORY},
  };
  accel_exe_requirements_t *r = state;
  char *rest = NULL;
  for (char *c = strtok_r(v, ",", &rest); c; c = strtok_r(NULL, ",", &rest)) {
    size_t i = 0;
    while (i < sizeof(k_caps) / sizeof(k_caps[0]) &&
           strcmp(c, k_caps[i].name) != 0) {
      i++;
    }
    if (i == sizeof(k_caps) / sizeof(k_caps[0])) {
      return fail(p, "%s: unknown capability \"%s\"", what, c);
    }
    r->required_caps |= k_caps[i].bit;
  }
  return 0;
}

static const option_entry_t k_requires_options[] = {
    {"workspace", requires_workspace},
    {"workspace_align", requires_workspace_align},
    {"min_runtime", requires_min_runtime},
    {"caps", requires_caps},
};

static int do_requires(pack_t *p, char **tok, int n) {
  accel_exe_requirements_t r = {.struct_size = sizeof(r)};
  const option_table_t t = {
      k_requires_options,
      sizeof(k_requires_options) / sizeof(k_requires_options[0]), NULL, NULL};
  if (apply_options(p, &t, &r, "requires", tok, 1, n) != 0) {
    return -1;
  }
  accel_status_t st = accel_exe_builder_set_requirements(p->builder, &r);
  return st == ACCEL_OK ? 0 : fail_accel(p, st);
}

// ---------------------------------------------------------------------------
// metadata KEY VALUE..., code TARGET FORMAT FILE, uuid HEX
// ---------------------------------------------------------------------------

static int do_metadata(pack_t *p, char **tok, int n) {
  (void)n;
  accel_status_t st = accel_exe_builder_add_metadata(p->builder, tok[1], tok[2]);
  return st == ACCEL_OK ? 0 : fail_accel(p, st);
}

static int do_code(pack_t *p, char **tok, int n) {
  (void)n;
  static const struct {
    const char *name;
    accel_code_format_t format;
  } k_formats[] = {
      {"elf", ACCEL_CODE_FORMAT_ELF_SO},
      {"ptx", ACCEL_CODE_FORMAT_PTX},
      {"cubin", ACCEL_CODE_FORMAT_CUBIN},
  };
  size_t i = 0;
  while (i < sizeof(k_formats) / sizeof(k_formats[0]) &&
         strcmp(tok[2], k_formats[i].name) != 0) {
    i++;
  }
  if (i == sizeof(k_formats) / sizeof(k_formats[0])) {
    return fail(p, "code format \"%s\" is not elf, ptx or cubin", tok[2]);
  }
  mapped_file_t *f;
  if (map_file(p, tok[3], &f) != 0) {
    return -1;
  }
  accel_status_t st = accel_exe_builder_add_code(
      p->builder, tok[1], k_formats[i].format, f->data, f->size);
  if (st != ACCEL_OK) {
    return fail_accel(p, st);
  }
  p->code_count++;
  return 0;
}

static int do_uuid(pack_t *p, char **tok, int n) {
  (void)n;
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
  accel_status_t st = accel_exe_builder_set_uuid(p->builder, uuid);
  return st == ACCEL_OK ? 0 : fail_accel(p, st);
}

// ---------------------------------------------------------------------------
// One line: split into words, then one table lookup by directive.
// ---------------------------------------------------------------------------

typedef struct directive {
  const char *name;
  int min_words, max_words;  // the directive's name counted
  int (*fn)(pack_t *p, char **tok, int n);
} directive_t;

static const directive_t k_directives[] = {
    {"kernel", 2, 300, do_kernel},  {"weight", 2, 300, do_weight},
    {"metadata", 3, 3, do_metadata}, {"code", 4, 4, do_code},
    {"uuid", 2, 2, do_uuid},        {"requires", 1, 300, do_requires},
};

// Splits |line| into at most |max| words; a metadata line's third word is
// the rest of the line.
static int split_words(char *line, char **tok, int max) {
  int n = 0;
  char *rest = NULL;
  for (char *s = strtok_r(line, " \t\r\n", &rest); s && n < max;
       s = strtok_r(NULL, " \t\r\n", &rest)) {
    if (n == 2 && strcmp(tok[0], "metadata") == 0) {
      s[strlen(s)] = rest && *rest ? ' ' : '\0';
      s[strcspn(s, "\r\n")] = '\0';
      tok[n++] = s;
      break;
    }
    tok[n++] = s;
  }
  return n;
}

static int do_line(pack_t *p, char *line) {
  char *tok[300];
  int n = split_words(line, tok, 300);
  if (n == 0 || tok[0][0] == '#') {
    return 0;
  }
  for (size_t i = 0; i < sizeof(k_directives) / sizeof(k_directives[0]); ++i) {
    const directive_t *d = &k_directives[i];
    if (strcmp(tok[0], d->name) == 0 && n >= d->min_words &&
        n <= d->max_words) {
      return d->fn(p, tok, n);
    }
  }
  return fail(p, "unknown or malformed directive \"%s\"", tok[0]);
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

// The file is well-formed, but no device can launch kernels that have no
// code object: say so.
static void warn_kernels_without_code(const pack_t *p, const char *out) {
  if (p->kernel_count == 0 || p->code_count != 0) {
    return;
  }
  fprintf(stderr,
          "accel-pack: warning: %s: %d kernel%s but no code object: no "
          "device can run %s (add a \"code TARGET FORMAT FILE\" line); "
          "writing %s anyway\n",
          p->manifest, p->kernel_count, p->kernel_count == 1 ? "" : "s",
          p->kernel_count == 1 ? "it" : "them", out);
}

static const accel_tool_option_t k_options[] = {
    {"-o", "OUT.axe", 0, "the executable to write (required)"},
    {"--progress", NULL, 1,
     "show a progress bar while weights are written, even when small or "
     "not on a terminal"},
    {"--quiet", NULL, 1, "print nothing but errors and warnings"},
    {"--from-gguf", "FILE", 0,
     "import a GGUF model (llama, qwen2) into a decoder .axe instead of "
     "reading a "
     "manifest"},
};
enum { OPT_OUT, OPT_PROGRESS, OPT_QUIET, OPT_FROM_GGUF };

static const accel_tool_spec_t k_spec = {
    .name = "accel-pack",
    .synopsis = "(MANIFEST | --from-gguf FILE) -o OUT.axe "
                "[--progress | --quiet]",
    .description = "Builds an .axe executable from a manifest (the directives "
                   "are in docs/executable-format.md), or imports a GGUF "
                   "model into a decoder .axe (docs/gguf.md).",
    .options = k_options,
    .option_count = sizeof(k_options) / sizeof(k_options[0]),
    .min_positional = 0,
    .max_positional = 1,
};

// --from-gguf: the reader's checks, then the import's.
static int pack_gguf(const char *model, const char *out, bool force_progress,
                     bool quiet) {
  accel_gguf_t *g = NULL;
  accel_status_t st = accel_gguf_open_file(model, &g);
  if (st == ACCEL_OK) {
    progress_t pr = {.enabled = !quiet && (force_progress || isatty(2)),
                     .last_percent = -1};
    st = accel_gguf_import_file(g, out, show_progress, &pr);
  }
  if (st != ACCEL_OK) {
    fprintf(stderr, "accel-pack: %s: %s: %s\n", model, accel_status_name(st),
            accel_last_error());
    accel_gguf_close(g);
    return 1;
  }
  accel_gguf_close(g);
  if (!quiet) {
    printf("accel-pack: wrote %s\n", out);
  }
  return 0;
}

int main(int argc, char **argv) {
  accel_tool_args_t args;
  int parsed = accel_tool_parse(&k_spec, argc, argv, &args);
  if (parsed != ACCEL_TOOL_CONTINUE) {
    return parsed;
  }
  const char *out = args.values[OPT_OUT];
  const char *gguf = args.values[OPT_FROM_GGUF];
  bool force_progress = args.values[OPT_PROGRESS] != NULL;
  bool quiet = args.values[OPT_QUIET] != NULL;
  if (out == NULL) {
    return accel_tool_usage_error(&k_spec, "missing -o OUT.axe");
  }
  if ((gguf != NULL) == (args.positional_count != 0)) {
    return accel_tool_usage_error(
        &k_spec, "give either a MANIFEST or --from-gguf MODEL.gguf");
  }
  if (gguf != NULL) {
    return pack_gguf(gguf, out, force_progress, quiet);
  }
  const char *manifest = args.positional[0];
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
  warn_kernels_without_code(&p, out);
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
