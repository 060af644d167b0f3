// The .axe writer (accel_exe_builder_*). The builder collects records and
// borrowed data; writing lays the file out (header, section table, tables,
// code objects, raw sections, weight data), hashes each section by streaming
// over its pieces, and writes the pieces (zero gaps come from the file being
// sized first).
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include "abi/axe_format.h"
#include "abi/axe_reader.h"
#include "accel/executable.h"
#include "core/error.h"

typedef struct code_entry {
  uint32_t target;  // string offset
  uint32_t format;
  const void *data;
  uint64_t size;
} code_entry_t;

typedef struct weight_entry {
  axe_weight_t rec;
  uint32_t scheme, axis, group_size;
  char *scale;  // companion names (owned), NULL when absent
  char *zero_point;
  const void *data;
  bool mappable;
} weight_entry_t;

typedef struct raw_entry {
  uint32_t kind;
  uint32_t required;
  const void *data;
  uint64_t size;
} raw_entry_t;

struct accel_exe_builder {
  uint8_t uuid[16];
  axe_requirements_t requirements;
  char *strings;
  uint64_t strings_size, strings_cap;
  axe_kernel_t *kernels;
  uint32_t kernel_count, kernel_cap;
  axe_binding_t *bindings;
  uint32_t binding_count, binding_cap;
  code_entry_t *code;
  uint32_t code_count, code_cap;
  weight_entry_t *weights;
  uint32_t weight_count, weight_cap;
  axe_metadata_t *metadata;
  uint32_t metadata_count, metadata_cap;
  raw_entry_t *raw;
  uint32_t raw_count, raw_cap;
};

// Grows |*array| to hold one more element of |elem| bytes.
static bool grow(void **array, uint32_t *cap, uint32_t count, size_t elem) {
  if (count < *cap) {
    return true;
  }
  uint32_t n = *cap ? *cap * 2 : 8;
  void *p = realloc(*array, (size_t)n * elem);
  if (p == NULL) {
    return false;
  }
  *array = p;
  *cap = n;
  return true;
}
#define GROW(b, field, one)                                          \
  grow((void **)&(b)->field, &(b)->one##_cap, (b)->one##_count,      \
       sizeof(*(b)->field))

static accel_status_t intern(accel_exe_builder_t *b, const char *s,
                             uint32_t *out) {
  size_t len = strlen(s) + 1;
  if (b->strings_size + len > UINT32_MAX) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "builder: string table above 4 GiB");
  }
  if (b->strings_size + len > b->strings_cap) {
    uint64_t cap = b->strings_cap * 2 + len;
    char *p = realloc(b->strings, cap);
    if (p == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "builder: cannot grow the string table to %llu bytes",
                         (unsigned long long)cap);
    }
    b->strings = p;
    b->strings_cap = cap;
  }
  memcpy(b->strings + b->strings_size, s, len);
  *out = (uint32_t)b->strings_size;
  b->strings_size += len;
  return ACCEL_OK;
}

static accel_status_t check_name(const char *name, const char *what) {
  if (name == NULL || name[0] == '\0') {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT, "builder: %s name is empty",
                       what);
  }
  if (strlen(name) > AXE_MAX_NAME) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "builder: %s name \"%.32s...\" is longer than %u bytes",
                       what, name, AXE_MAX_NAME);
  }
  return ACCEL_OK;
}

accel_status_t accel_exe_builder_create(accel_exe_builder_t **out_builder) {
  ACCEL_CHECK_ARG(out_builder != NULL, "out_builder (NULL)");
  accel_exe_builder_t *b = calloc(1, sizeof(*b));
  if (b == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "builder: cannot allocate %zu bytes", sizeof(*b));
  }
  b->strings = calloc(1, 256);
  if (b->strings == NULL) {
    free(b);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "builder: cannot allocate the string table");
  }
  b->strings_size = 1;  // offset 0 is ""
  b->strings_cap = 256;
  if (getrandom(b->uuid, sizeof(b->uuid), 0) != (ssize_t)sizeof(b->uuid)) {
    // Fall back to time and address entropy; a UUID needs uniqueness, not
    // secrecy.
    uint64_t t = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)b;
    XXH128_hash_t h = XXH3_128bits(&t, sizeof(t));
    memcpy(b->uuid, &h, 16);
  }
  b->uuid[6] = (uint8_t)((b->uuid[6] & 0x0f) | 0x40);  // version 4
  b->uuid[8] = (uint8_t)((b->uuid[8] & 0x3f) | 0x80);  // RFC 4122 variant
  b->requirements.min_runtime_version =
      (uint32_t)ACCEL_API_VERSION_MAJOR << 16 | ACCEL_API_VERSION_MINOR;
  b->requirements.kernel_abi_version = ACCEL_KERNEL_ABI_VERSION;
  *out_builder = b;
  return ACCEL_OK;
}

void accel_exe_builder_destroy(accel_exe_builder_t *b) {
  if (b == NULL) {
    return;
  }
  for (uint32_t i = 0; i < b->weight_count; ++i) {
    free(b->weights[i].scale);
    free(b->weights[i].zero_point);
  }
  free(b->strings);
  free(b->kernels);
  free(b->bindings);
  free(b->code);
  free(b->weights);
  free(b->metadata);
  free(b->raw);
  free(b);
}

accel_status_t accel_exe_builder_set_uuid(accel_exe_builder_t *b,
                                          const uint8_t uuid[16]) {
  ACCEL_CHECK_ARG(b != NULL, "builder (NULL)");
  ACCEL_CHECK_ARG(uuid != NULL, "uuid (NULL)");
  memcpy(b->uuid, uuid, 16);
  return ACCEL_OK;
}

accel_status_t accel_exe_builder_set_requirements(
    accel_exe_builder_t *b, const accel_exe_requirements_t *r) {
  ACCEL_CHECK_ARG(b != NULL, "builder (NULL)");
  ACCEL_CHECK_ARG(r != NULL, "requirements (NULL)");
  if (r->struct_size < sizeof(*r)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "requirements: struct_size %u is too small",
                       r->struct_size);
  }
  if (r->workspace_alignment != 0 &&
      ((r->workspace_alignment & (r->workspace_alignment - 1)) != 0 ||
       r->workspace_alignment > UINT32_MAX)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "requirements: workspace alignment %llu is not a power "
                       "of two below 2^32",
                       (unsigned long long)r->workspace_alignment);
  }
  b->requirements.required_caps = r->required_caps;
  if (r->min_runtime_version != 0) {
    b->requirements.min_runtime_version = r->min_runtime_version;
  }
  b->requirements.workspace_bytes = r->workspace_bytes;
  b->requirements.workspace_alignment = (uint32_t)r->workspace_alignment;
  return ACCEL_OK;
}

// The kernel's size, names and table limits, before anything is added.
static accel_status_t check_kernel_desc(const accel_exe_kernel_desc_t *k) {
  if (k->struct_size < sizeof(*k)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "kernel desc: struct_size %u is too small",
                       k->struct_size);
  }
  ACCEL_RETURN_IF_ERROR(check_name(k->name, "kernel"));
  if (k->symbol != NULL) {
    ACCEL_RETURN_IF_ERROR(check_name(k->symbol, "kernel symbol"));
  }
  if (k->binding_count > AXE_MAX_BINDINGS ||
      k->constants_size > AXE_MAX_CONSTANTS ||
      (k->binding_count > 0 && k->bindings == NULL)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "kernel \"%s\": %u bindings (max %u, array %s), %u "
                       "constant bytes (max %u)",
                       k->name, k->binding_count, AXE_MAX_BINDINGS,
                       k->bindings ? "set" : "NULL", k->constants_size,
                       AXE_MAX_CONSTANTS);
  }
  return ACCEL_OK;
}

static accel_status_t check_kernel_unique(const accel_exe_builder_t *b,
                                          const char *name) {
  for (uint32_t i = 0; i < b->kernel_count; ++i) {
    if (strcmp(b->strings + b->kernels[i].name, name) == 0) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "builder: kernel \"%s\" added twice", name);
    }
  }
  return ACCEL_OK;
}

static accel_status_t check_binding_decls(const accel_exe_kernel_desc_t *k) {
  for (uint32_t i = 0; i < k->binding_count; ++i) {
    uint32_t a = k->bindings[i].access;
    uint32_t al = k->bindings[i].alignment;
    if (a == 0 || (a & ~3u) != 0 || (al & (al - 1)) != 0) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "kernel \"%s\" binding %u: access 0x%x must be "
                         "read/write bits, alignment %u a power of two",
                         k->name, i, a, al);
    }
  }
  return ACCEL_OK;
}

// Appends the kernel's bindings to the binding table; a name is optional,
// and checked only when given.
static accel_status_t add_binding_records(accel_exe_builder_t *b,
                                          const accel_exe_kernel_desc_t *k) {
  for (uint32_t i = 0; i < k->binding_count; ++i) {
    if (!GROW(b, bindings, binding)) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "builder: binding table");
    }
    axe_binding_t br = {.access = k->bindings[i].access,
                        .alignment = k->bindings[i].alignment,
                        .min_size_bytes = k->bindings[i].min_size_bytes};
    if (k->bindings[i].name != NULL && k->bindings[i].name[0] != '\0') {
      ACCEL_RETURN_IF_ERROR(check_name(k->bindings[i].name, "binding"));
      ACCEL_RETURN_IF_ERROR(intern(b, k->bindings[i].name, &br.name));
    }
    b->bindings[b->binding_count++] = br;
  }
  return ACCEL_OK;
}

accel_status_t accel_exe_builder_add_kernel(accel_exe_builder_t *b,
                                            const accel_exe_kernel_desc_t *k) {
  ACCEL_CHECK_ARG(b != NULL, "builder (NULL)");
  ACCEL_CHECK_ARG(k != NULL, "kernel (NULL)");
  ACCEL_RETURN_IF_ERROR(check_kernel_desc(k));
  ACCEL_RETURN_IF_ERROR(check_kernel_unique(b, k->name));
  ACCEL_RETURN_IF_ERROR(check_binding_decls(k));
  if (!GROW(b, kernels, kernel)) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "builder: kernel table");
  }
  axe_kernel_t rec = {
      .abi_version = k->abi_version ? k->abi_version : ACCEL_KERNEL_ABI_VERSION,
      .binding_first = b->binding_count,
      .binding_count = k->binding_count,
      .constants_size = k->constants_size,
  };
  for (int d = 0; d < 3; ++d) {
    rec.workgroup_size[d] = k->workgroup_size[d] ? k->workgroup_size[d] : 1;
  }
  ACCEL_RETURN_IF_ERROR(intern(b, k->name, &rec.name));
  ACCEL_RETURN_IF_ERROR(intern(b, k->symbol ? k->symbol : k->name, &rec.symbol));
  ACCEL_RETURN_IF_ERROR(add_binding_records(b, k));
  b->kernels[b->kernel_count++] = rec;
  return ACCEL_OK;
}

accel_status_t accel_exe_builder_add_code(accel_exe_builder_t *b,
                                          const char *target,
                                          accel_code_format_t format,
                                          const void *data,
                                          uint64_t size_bytes) {
  ACCEL_CHECK_ARG(b != NULL, "builder (NULL)");
  ACCEL_CHECK_ARG(data != NULL && size_bytes > 0, "code data (NULL or empty)");
  ACCEL_RETURN_IF_ERROR(check_name(target, "target"));
  if (format < ACCEL_CODE_FORMAT_ELF_SO || format > ACCEL_CODE_FORMAT_CUBIN) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "builder: unknown code format %d", (int)format);
  }
  for (uint32_t i = 0; i < b->code_count; ++i) {
    if (strcmp(b->strings + b->code[i].target, target) == 0) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "builder: second code object for target \"%s\"",
                         target);
    }
  }
  if (!GROW(b, code, code)) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "builder: code table");
  }
  code_entry_t e = {.format = (uint32_t)format, .data = data, .size = size_bytes};
  ACCEL_RETURN_IF_ERROR(intern(b, target, &e.target));
  b->code[b->code_count++] = e;
  return ACCEL_OK;
}

static accel_status_t check_weight_unique(const accel_exe_builder_t *b,
                                          const char *name) {
  for (uint32_t i = 0; i < b->weight_count; ++i) {
    if (strcmp(b->strings + b->weights[i].rec.name, name) == 0) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "builder: weight \"%s\" added twice", name);
    }
  }
  return ACCEL_OK;
}

// The shape, dtype and layout against the bytes given: a dense weight
// (all strides 0) has exactly the bytes its shape needs, a strided one at
// least as many.
static accel_status_t check_weight_data(const accel_weight_info_t *in) {
  uint64_t need = 0;
  const char *why = NULL;
  if (!accel_axe_weight_extent(in->dtype, in->rank, in->shape, in->strides,
                               in->layout, in->block, &need, &why)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT, "weight \"%s\": %s",
                       in->name, why);
  }
  bool dense = true;
  for (int d = 0; d < ACCEL_WEIGHT_MAX_RANK; ++d) {
    dense &= in->strides[d] == 0;
  }
  if (dense ? in->size_bytes != need : in->size_bytes < need) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "weight \"%s\": %llu bytes given, the shape and dtype "
                       "need %llu",
                       in->name, (unsigned long long)in->size_bytes,
                       (unsigned long long)need);
  }
  if (in->size_bytes > 0 && in->host_data == NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "weight \"%s\": host_data is NULL", in->name);
  }
  return ACCEL_OK;
}

static accel_status_t check_weight_desc(const accel_exe_builder_t *b,
                                        const accel_exe_weight_desc_t *w) {
  if (w->struct_size < sizeof(*w) || w->info.struct_size < sizeof(w->info)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "weight desc: struct_size %u / info %u is too small",
                       w->struct_size, w->info.struct_size);
  }
  const accel_weight_info_t *in = &w->info;
  ACCEL_RETURN_IF_ERROR(check_name(in->name, "weight"));
  ACCEL_RETURN_IF_ERROR(check_weight_unique(b, in->name));
  ACCEL_RETURN_IF_ERROR(check_weight_data(in));
  if (in->quant_scheme > ACCEL_QUANT_GROUPWISE ||
      (in->quant_scheme != ACCEL_QUANT_NONE && in->quant_scale == NULL)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "weight \"%s\": quant scheme %u needs a scale name",
                       in->name, in->quant_scheme);
  }
  return ACCEL_OK;
}

// Copies the companions' names into |e|: the caller's strings are borrowed
// only for the call, and the companions are resolved when the file is laid
// out.
static accel_status_t copy_quant_names(const accel_weight_info_t *in,
                                       weight_entry_t *e) {
  if (in->quant_scheme == ACCEL_QUANT_NONE) {
    return ACCEL_OK;
  }
  e->scale = strdup(in->quant_scale);
  e->zero_point = in->quant_zero_point ? strdup(in->quant_zero_point) : NULL;
  if (e->scale == NULL || (in->quant_zero_point && e->zero_point == NULL)) {
    free(e->scale);
    free(e->zero_point);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "builder: weight names");
  }
  return ACCEL_OK;
}

accel_status_t accel_exe_builder_add_weight(accel_exe_builder_t *b,
                                            const accel_exe_weight_desc_t *w) {
  ACCEL_CHECK_ARG(b != NULL, "builder (NULL)");
  ACCEL_CHECK_ARG(w != NULL, "weight (NULL)");
  ACCEL_RETURN_IF_ERROR(check_weight_desc(b, w));
  const accel_weight_info_t *in = &w->info;
  if (!GROW(b, weights, weight)) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "builder: weight table");
  }
  weight_entry_t e = {
      .rec = {.dtype = in->dtype, .rank = in->rank, .layout = in->layout,
              .block = {in->block[0], in->block[1]}, .quant = AXE_NONE,
              .size_bytes = in->size_bytes},
      .scheme = in->quant_scheme,
      .axis = in->quant_axis,
      .group_size = in->quant_group_size,
      .data = in->host_data,
      .mappable = w->mappable != 0,
  };
  memcpy(e.rec.shape, in->shape, sizeof(e.rec.shape));
  memcpy(e.rec.strides, in->strides, sizeof(e.rec.strides));
  ACCEL_RETURN_IF_ERROR(copy_quant_names(in, &e));
  accel_status_t st = intern(b, in->name, &e.rec.name);
  if (st != ACCEL_OK) {
    free(e.scale);
    free(e.zero_point);
    return st;
  }
  b->weights[b->weight_count++] = e;
  return ACCEL_OK;
}

accel_status_t accel_exe_builder_add_metadata(accel_exe_builder_t *b,
                                              const char *key,
                                              const char *value) {
  ACCEL_CHECK_ARG(b != NULL, "builder (NULL)");
  ACCEL_CHECK_ARG(value != NULL, "value (NULL)");
  ACCEL_RETURN_IF_ERROR(check_name(key, "metadata key"));
  for (uint32_t i = 0; i < b->metadata_count; ++i) {
    if (strcmp(b->strings + b->metadata[i].key, key) == 0) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "builder: metadata key \"%s\" added twice", key);
    }
  }
  if (!GROW(b, metadata, metadata)) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "builder: metadata table");
  }
  axe_metadata_t m;
  ACCEL_RETURN_IF_ERROR(intern(b, key, &m.key));
  ACCEL_RETURN_IF_ERROR(intern(b, value, &m.value));
  b->metadata[b->metadata_count++] = m;
  return ACCEL_OK;
}

accel_status_t accel_exe_builder_add_raw_section(accel_exe_builder_t *b,
                                                 uint32_t kind,
                                                 uint32_t required,
                                                 const void *data,
                                                 uint64_t size_bytes) {
  ACCEL_CHECK_ARG(b != NULL, "builder (NULL)");
  ACCEL_CHECK_ARG(data != NULL || size_bytes == 0, "data (NULL)");
  if (kind <= AXE_SECTION_KIND_LAST && kind != AXE_SECTION_SIGNATURE) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "builder: raw section kind %u is defined (%s); use "
                       "the typed calls",
                       kind, accel_axe_section_kind_name(kind));
  }
  if (!GROW(b, raw, raw)) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "builder: raw sections");
  }
  b->raw[b->raw_count++] =
      (raw_entry_t){.kind = kind, .required = required != 0, .data = data,
                    .size = size_bytes};
  return ACCEL_OK;
}

// ---------------------------------------------------------------------------
// Layout and output.
// ---------------------------------------------------------------------------

typedef struct piece {
  const void *data;
  uint64_t size;
  uint64_t offset;  // within the section
} piece_t;

typedef struct out_section {
  axe_section_t entry;
  piece_t *pieces;
  uint32_t piece_count;
  bool is_weights;  // progress is reported for these pieces
} out_section_t;

typedef struct layout {
  axe_header_t header;
  axe_section_t *table;
  out_section_t *sections;
  uint32_t count;
  axe_quant_t *quants;
  axe_weight_t *weights;
  piece_t *all_pieces;
  uint64_t weight_bytes;
} layout_t;

static void layout_free(layout_t *l) {
  free(l->table);
  free(l->sections);
  free(l->quants);
  free(l->weights);
  free(l->all_pieces);
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static int32_t find_weight(const accel_exe_builder_t *b, const char *name) {
  for (uint32_t i = 0; i < b->weight_count; ++i) {
    if (strcmp(b->strings + b->weights[i].rec.name, name) == 0) {
      return (int32_t)i;
    }
  }
  return -1;
}

static void add_section(layout_t *l, piece_t **next_piece, uint32_t kind,
                        uint32_t flags, uint32_t alignment, uint32_t count,
                        const void *data, uint64_t size) {
  out_section_t *s = &l->sections[l->count++];
  s->entry = (axe_section_t){.kind = kind, .flags = flags, .size = size,
                             .count = count, .alignment = alignment,
                             .layout_major = AXE_TABLE_LAYOUT_MAJOR,
                             .layout_minor = AXE_TABLE_LAYOUT_MINOR};
  s->pieces = *next_piece;
  if (size > 0) {
    s->pieces[0] = (piece_t){.data = data, .size = size, .offset = 0};
    s->piece_count = 1;
    ++*next_piece;
  }
}

static accel_status_t layout_alloc(const accel_exe_builder_t *b,
                                   layout_t *l) {
  *l = (layout_t){0};
  uint32_t max_sections = 8 + b->code_count + b->raw_count;
  uint32_t max_pieces = max_sections + b->weight_count;
  l->sections = calloc(max_sections, sizeof(*l->sections));
  l->table = calloc(max_sections, sizeof(*l->table));
  l->all_pieces = calloc(max_pieces, sizeof(*l->all_pieces));
  l->quants = calloc(b->weight_count + 1, sizeof(*l->quants));
  l->weights = calloc(b->weight_count + 1, sizeof(*l->weights));
  if (!l->sections || !l->table || !l->all_pieces || !l->quants ||
      !l->weights) {
    layout_free(l);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "builder: cannot allocate the layout of %u sections",
                       max_sections);
  }
  return ACCEL_OK;
}

// Resolves quantization companions into QUANT records: copies the weight
// records into |l| and points each quantized one at its QUANT record.
static accel_status_t resolve_quants(const accel_exe_builder_t *b, layout_t *l,
                                     uint32_t *out_quant_count) {
  uint32_t quant_count = 0;
  for (uint32_t i = 0; i < b->weight_count; ++i) {
    const weight_entry_t *e = &b->weights[i];
    l->weights[i] = e->rec;
    if (e->scheme == ACCEL_QUANT_NONE) {
      continue;
    }
    int32_t s = find_weight(b, e->scale);
    int32_t z = e->zero_point ? find_weight(b, e->zero_point) : -1;
    if (s < 0 || (e->zero_point && z < 0)) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "weight \"%s\": quantization companion \"%s\" names "
                         "no weight",
                         b->strings + e->rec.name,
                         s < 0 ? e->scale : e->zero_point);
    }
    l->quants[quant_count] = (axe_quant_t){
        .scheme = e->scheme, .axis = e->axis, .group_size = e->group_size,
        .scale = (uint32_t)s,
        .zero_point = z < 0 ? AXE_NONE : (uint32_t)z};
    l->weights[i].quant = quant_count++;
  }
  *out_quant_count = quant_count;
  return ACCEL_OK;
}

// One table section: written only when it has records.
typedef struct table_section {
  uint32_t kind;
  uint32_t flags;
  uint32_t count;
  const void *records;
  size_t record_size;
} table_section_t;

// The string table, the requirements, then each non-empty table, in the
// order readers expect them.
static void add_table_sections(const accel_exe_builder_t *b, layout_t *l,
                               piece_t **np, uint32_t quant_count) {
  add_section(l, np, AXE_SECTION_STRINGS, AXE_SECTION_FLAG_REQUIRED, 8, 0,
              b->strings, b->strings_size);
  add_section(l, np, AXE_SECTION_REQUIREMENTS, AXE_SECTION_FLAG_REQUIRED, 8,
              1, &b->requirements, sizeof(b->requirements));
  const table_section_t tables[] = {
      {AXE_SECTION_KERNELS, AXE_SECTION_FLAG_REQUIRED, b->kernel_count,
       b->kernels, sizeof(axe_kernel_t)},
      {AXE_SECTION_BINDINGS, AXE_SECTION_FLAG_REQUIRED, b->binding_count,
       b->bindings, sizeof(axe_binding_t)},
      {AXE_SECTION_WEIGHTS, AXE_SECTION_FLAG_REQUIRED, b->weight_count,
       l->weights, sizeof(axe_weight_t)},
      {AXE_SECTION_QUANT, AXE_SECTION_FLAG_REQUIRED, quant_count, l->quants,
       sizeof(axe_quant_t)},
      {AXE_SECTION_METADATA, 0, b->metadata_count, b->metadata,
       sizeof(axe_metadata_t)},
  };
  for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); ++i) {
    const table_section_t *t = &tables[i];
    if (t->count) {
      add_section(l, np, t->kind, t->flags, 8, t->count, t->records,
                  (uint64_t)t->count * t->record_size);
    }
  }
}

// One CODE section per code object, named by its target, then the raw
// sections as given.
static void add_blob_sections(const accel_exe_builder_t *b, layout_t *l,
                              piece_t **np) {
  for (uint32_t i = 0; i < b->code_count; ++i) {
    add_section(l, np, AXE_SECTION_CODE, AXE_SECTION_FLAG_REQUIRED, 64, 0,
                b->code[i].data, b->code[i].size);
    out_section_t *s = &l->sections[l->count - 1];
    s->entry.name = b->code[i].target;
    s->entry.info = b->code[i].format;
    s->entry.layout_major = ACCEL_KERNEL_ABI_VERSION_MAJOR;
    s->entry.layout_minor = ACCEL_KERNEL_ABI_VERSION_MINOR;
  }
  for (uint32_t i = 0; i < b->raw_count; ++i) {
    add_section(l, np, b->raw[i].kind,
                b->raw[i].required ? AXE_SECTION_FLAG_REQUIRED : 0, 8, 0,
                b->raw[i].data, b->raw[i].size);
  }
}

// The WEIGHT_DATA section: one piece per non-empty weight, each at the
// alignment it asked for; the section is mappable (page-aligned) when any
// weight is.
static void add_weight_data_section(const accel_exe_builder_t *b, layout_t *l,
                                    piece_t **np) {
  bool any_map = false;
  for (uint32_t i = 0; i < b->weight_count; ++i) {
    any_map |= b->weights[i].mappable;
  }
  out_section_t *s = &l->sections[l->count];
  uint32_t data_index = l->count++;
  s->entry = (axe_section_t){
      .kind = AXE_SECTION_WEIGHT_DATA,
      .flags = AXE_SECTION_FLAG_REQUIRED |
               (any_map ? AXE_SECTION_FLAG_MAPPABLE : 0),
      .alignment = any_map ? AXE_MAP_ALIGNMENT : AXE_MIN_DATA_ALIGNMENT,
      .layout_major = ACCEL_EXE_WEIGHT_LAYOUT_VERSION_MAJOR,
      .layout_minor = ACCEL_EXE_WEIGHT_LAYOUT_VERSION_MINOR};
  s->pieces = *np;
  s->is_weights = true;
  uint64_t off = 0;
  for (uint32_t i = 0; i < b->weight_count; ++i) {
    const weight_entry_t *e = &b->weights[i];
    off = align_up(off, e->mappable ? AXE_MAP_ALIGNMENT
                                    : AXE_MIN_DATA_ALIGNMENT);
    l->weights[i].data_section = data_index;
    l->weights[i].data_offset = off;
    if (e->rec.size_bytes > 0) {
      s->pieces[s->piece_count++] =
          (piece_t){.data = e->data, .size = e->rec.size_bytes, .offset = off};
    }
    off += e->rec.size_bytes;
    l->weight_bytes += e->rec.size_bytes;
  }
  s->entry.size = off;
  *np += s->piece_count;
}

// Places the header, the table, then each section at its alignment, and
// fills the header.
static void place_sections(const accel_exe_builder_t *b, layout_t *l) {
  uint64_t off = AXE_HEADER_SIZE + (uint64_t)l->count * AXE_SECTION_ENTRY_SIZE;
  for (uint32_t i = 0; i < l->count; ++i) {
    axe_section_t *e = &l->sections[i].entry;
    off = align_up(off, e->alignment);
    e->offset = off;
    off += e->size;
  }
  l->header = (axe_header_t){
      .version_major = ACCEL_EXE_FORMAT_VERSION_MAJOR,
      .version_minor = ACCEL_EXE_FORMAT_VERSION_MINOR,
      .header_size = AXE_HEADER_SIZE,
      .file_size = off,
      .section_table_offset = AXE_HEADER_SIZE,
      .section_count = l->count,
      .section_entry_size = AXE_SECTION_ENTRY_SIZE,
  };
  memcpy(l->header.magic, AXE_MAGIC, AXE_MAGIC_SIZE);
  memcpy(l->header.uuid, b->uuid, 16);
}

static accel_status_t build_layout(accel_exe_builder_t *b, layout_t *l) {
  ACCEL_RETURN_IF_ERROR(layout_alloc(b, l));
  uint32_t quant_count = 0;
  accel_status_t st = resolve_quants(b, l, &quant_count);
  if (st != ACCEL_OK) {
    layout_free(l);
    return st;
  }
  piece_t *np = l->all_pieces;
  add_table_sections(b, l, &np, quant_count);
  add_blob_sections(b, l, &np);
  if (b->weight_count) {
    add_weight_data_section(b, l, &np);
  }
  place_sections(b, l);
  return ACCEL_OK;
}

// Hashes each section by streaming over its pieces (zero gaps included) and
// then the header over the finished table.
static void hash_layout(layout_t *l) {
  static const uint8_t zeros[4096];
  for (uint32_t i = 0; i < l->count; ++i) {
    out_section_t *s = &l->sections[i];
    XXH3_state_t state;
    XXH3_INITSTATE(&state);
    XXH3_128bits_reset(&state);
    uint64_t at = 0;
    for (uint32_t p = 0; p < s->piece_count; ++p) {
      while (at < s->pieces[p].offset) {
        uint64_t n = s->pieces[p].offset - at;
        n = n < sizeof(zeros) ? n : sizeof(zeros);
        XXH3_128bits_update(&state, zeros, (size_t)n);
        at += n;
      }
      XXH3_128bits_update(&state, s->pieces[p].data, (size_t)s->pieces[p].size);
      at += s->pieces[p].size;
    }
    while (at < s->entry.size) {
      uint64_t n = s->entry.size - at;
      n = n < sizeof(zeros) ? n : sizeof(zeros);
      XXH3_128bits_update(&state, zeros, (size_t)n);
      at += n;
    }
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&state));
    memcpy(s->entry.hash, c.digest, 16);
    l->table[i] = s->entry;
  }
  l->header.header_hash = accel_axe_header_hash(
      &l->header, l->table, (uint64_t)l->count * AXE_SECTION_ENTRY_SIZE);
}

accel_status_t accel_exe_builder_write_memory(accel_exe_builder_t *b,
                                              void **out_data,
                                              uint64_t *out_size) {
  ACCEL_CHECK_ARG(b != NULL, "builder (NULL)");
  ACCEL_CHECK_ARG(out_data != NULL && out_size != NULL, "out_data/out_size");
  layout_t l;
  ACCEL_RETURN_IF_ERROR(build_layout(b, &l));
  hash_layout(&l);
  uint64_t size = align_up(l.header.file_size, 64);
  uint8_t *img = aligned_alloc(64, size);
  if (img == NULL) {
    layout_free(&l);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "builder: cannot allocate a %llu-byte image",
                       (unsigned long long)size);
  }
  memset(img, 0, size);
  memcpy(img, &l.header, sizeof(l.header));
  memcpy(img + AXE_HEADER_SIZE, l.table,
         (size_t)l.count * AXE_SECTION_ENTRY_SIZE);
  for (uint32_t i = 0; i < l.count; ++i) {
    out_section_t *s = &l.sections[i];
    for (uint32_t p = 0; p < s->piece_count; ++p) {
      memcpy(img + s->entry.offset + s->pieces[p].offset, s->pieces[p].data,
             (size_t)s->pieces[p].size);
    }
  }
  *out_data = img;
  *out_size = l.header.file_size;
  layout_free(&l);
  return ACCEL_OK;
}

static accel_status_t write_all(int fd, const void *data, uint64_t size,
                                uint64_t offset, const char *path) {
  const uint8_t *p = data;
  while (size > 0) {
    size_t n = size > (1u << 30) ? (1u << 30) : (size_t)size;
    ssize_t w = pwrite(fd, p, n, (off_t)offset);
    if (w < 0) {
      if (errno == EINTR) {
        continue;
      }
      return accel_error(ACCEL_ERROR_IO, "writing %s at offset %llu: %s",
                         path, (unsigned long long)offset, strerror(errno));
    }
    p += w;
    size -= (uint64_t)w;
    offset += (uint64_t)w;
  }
  return ACCEL_OK;
}

// Writes one piece at its place in the file. Large pieces go out in 64 MiB
// steps so that progress moves; |*done| counts the weight bytes written.
static accel_status_t write_piece(int fd, const layout_t *l,
                                  const out_section_t *s, const piece_t *piece,
                                  const char *path,
                                  accel_exe_progress_fn_t progress,
                                  void *user_data, uint64_t *done) {
  accel_status_t st = ACCEL_OK;
  const uint8_t *data = piece->data;
  uint64_t left = piece->size;
  uint64_t at = s->entry.offset + piece->offset;
  while (left > 0 && st == ACCEL_OK) {
    uint64_t n = left < (64u << 20) ? left : (64u << 20);
    st = write_all(fd, data, n, at, path);
    data += n;
    at += n;
    left -= n;
    if (s->is_weights) {
      *done += n;
      if (progress != NULL) {
        progress(user_data, *done, l->weight_bytes);
      }
    }
  }
  return st;
}

// Writes the header, the section table and every section's pieces; the file
// is already sized, so gaps read as zeros.
static accel_status_t write_layout(int fd, const layout_t *l, const char *path,
                                   accel_exe_progress_fn_t progress,
                                   void *user_data) {
  accel_status_t st = write_all(fd, &l->header, sizeof(l->header), 0, path);
  if (st == ACCEL_OK) {
    st = write_all(fd, l->table, (uint64_t)l->count * AXE_SECTION_ENTRY_SIZE,
                   AXE_HEADER_SIZE, path);
  }
  uint64_t done = 0;
  for (uint32_t i = 0; i < l->count && st == ACCEL_OK; ++i) {
    const out_section_t *s = &l->sections[i];
    for (uint32_t p = 0; p < s->piece_count && st == ACCEL_OK; ++p) {
      st = write_piece(fd, l, s, &s->pieces[p], path, progress, user_data,
                       &done);
    }
  }
  return st;
}

accel_status_t accel_exe_builder_write_file(accel_exe_builder_t *b,
                                            const char *path,
                                            accel_exe_progress_fn_t progress,
                                            void *user_data) {
  ACCEL_CHECK_ARG(b != NULL, "builder (NULL)");
  ACCEL_CHECK_ARG(path != NULL, "path (NULL)");
  layout_t l;
  ACCEL_RETURN_IF_ERROR(build_layout(b, &l));
  hash_layout(&l);
  size_t tmp_len = strlen(path) + 16;
  char *tmp = malloc(tmp_len);
  accel_status_t st = ACCEL_OK;
  if (tmp == NULL) {
    st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "builder: path");
    goto err_free_layout;
  }
  snprintf(tmp, tmp_len, "%s.tmpXXXXXX", path);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    st = accel_error(ACCEL_ERROR_IO, "cannot create %s: %s", tmp,
                     strerror(errno));
    goto err_free_tmp;
  }
  if (ftruncate(fd, (off_t)l.header.file_size) != 0) {
    st = accel_error(ACCEL_ERROR_IO, "cannot size %s to %llu bytes: %s", tmp,
                     (unsigned long long)l.header.file_size, strerror(errno));
    goto err_unlink;
  }
  st = write_layout(fd, &l, tmp, progress, user_data);
  if (st != ACCEL_OK) {
    goto err_unlink;
  }
  if (close(fd) != 0) {
    fd = -1;
    st = accel_error(ACCEL_ERROR_IO, "closing %s: %s", tmp, strerror(errno));
    goto err_unlink;
  }
  fd = -1;
  if (rename(tmp, path) != 0) {
    st = accel_error(ACCEL_ERROR_IO, "renaming %s to %s: %s", tmp, path,
                     strerror(errno));
    goto err_unlink;
  }
  free(tmp);
  layout_free(&l);
  return ACCEL_OK;

err_unlink:
  if (fd >= 0) {
    close(fd);
  }
  unlink(tmp);
err_free_tmp:
  free(tmp);
err_free_layout:
  layout_free(&l);
  return st;
}
