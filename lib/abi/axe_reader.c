// The .axe validator (see axe_reader.h and docs/executable-format.md).
// Order of checks: the header alone, the section table alone, each section's
// placement, overlaps, then each table's records and their cross-references,
// and last the content hashes (the only step that reads every byte).
#include "abi/axe_reader.h"

#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include "accel/executable.h"
#include "accel/kernel_abi.h"
#include "core/error.h"

#define FORMAT ACCEL_ERROR_FORMAT
#define VERSION ACCEL_ERROR_VERSION

static const char *const k_kind_names[] = {
    "unknown",  "strings",     "requirements", "kernels",
    "bindings", "code",        "weights",      "weight_data",
    "quant",    "metadata",    "signature",
};

const char *accel_axe_section_kind_name(uint32_t kind) {
  return kind <= AXE_SECTION_KIND_LAST ? k_kind_names[kind] : "unknown";
}

static const struct {
  const char *name;
  uint32_t bits;
} k_dtypes[ACCEL_DTYPE_COUNT] = {
    [ACCEL_DTYPE_INVALID] = {"invalid", 0}, [ACCEL_DTYPE_F32] = {"f32", 32},
    [ACCEL_DTYPE_F16] = {"f16", 16},        [ACCEL_DTYPE_BF16] = {"bf16", 16},
    [ACCEL_DTYPE_F8E4M3] = {"f8e4m3", 8},   [ACCEL_DTYPE_F8E5M2] = {"f8e5m2", 8},
    [ACCEL_DTYPE_I32] = {"i32", 32},        [ACCEL_DTYPE_I8] = {"i8", 8},
    [ACCEL_DTYPE_U8] = {"u8", 8},           [ACCEL_DTYPE_I4] = {"i4", 4},
    [ACCEL_DTYPE_U4] = {"u4", 4},           [ACCEL_DTYPE_I16] = {"i16", 16},
    [ACCEL_DTYPE_U16] = {"u16", 16},        [ACCEL_DTYPE_U32] = {"u32", 32},
    [ACCEL_DTYPE_I64] = {"i64", 64},        [ACCEL_DTYPE_F64] = {"f64", 64},
};

uint32_t accel_dtype_bits(accel_dtype_t dtype) {
  return (uint32_t)dtype < ACCEL_DTYPE_COUNT ? k_dtypes[dtype].bits : 0;
}

const char *accel_dtype_name(accel_dtype_t dtype) {
  return (uint32_t)dtype < ACCEL_DTYPE_COUNT ? k_dtypes[dtype].name
                                             : "invalid";
}

void accel_axe_hash128(const void *data, uint64_t size, uint8_t out[16]) {
  XXH128_hash_t h = XXH3_128bits(data, (size_t)size);
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  memcpy(out, c.digest, 16);
}

uint64_t accel_axe_header_hash(const axe_header_t *header, const void *table,
                               uint64_t table_size) {
  axe_header_t copy = *header;
  copy.header_hash = 0;
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, &copy, sizeof(copy));
  XXH3_64bits_update(&state, table, (size_t)table_size);
  return XXH3_64bits_digest(&state);
}

static bool mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static bool add_ok(uint64_t a, uint64_t b, uint64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
static bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

static bool is_float(uint32_t dtype) {
  return dtype == ACCEL_DTYPE_F32 || dtype == ACCEL_DTYPE_F16 ||
         dtype == ACCEL_DTYPE_BF16 || dtype == ACCEL_DTYPE_F64;
}

bool accel_axe_weight_extent(uint32_t dtype, uint32_t rank,
                             const uint64_t *shape, const uint64_t *strides,
                             uint32_t layout, const uint32_t *block,
                             uint64_t *out_bytes, const char **out_why) {
  uint32_t bits = accel_dtype_bits((accel_dtype_t)dtype);
  if (bits == 0) {
    *out_why = "unknown dtype";
    return false;
  }
  if (rank > ACCEL_WEIGHT_MAX_RANK) {
    *out_why = "rank above 8";
    return false;
  }
  uint64_t elements = 1;
  bool any_stride = false;
  for (uint32_t i = 0; i < rank; ++i) {
    any_stride |= strides[i] != 0;
  }
  for (uint32_t i = rank; i < ACCEL_WEIGHT_MAX_RANK; ++i) {
    if (shape[i] != 0 || strides[i] != 0) {
      *out_why = "shape or stride set beyond rank";
      return false;
    }
  }
  if (layout == ACCEL_WEIGHT_LAYOUT_STRIDED) {
    if (block[0] != 0 || block[1] != 0) {
      *out_why = "block set for the strided layout";
      return false;
    }
    if (!any_stride) {
      for (uint32_t i = 0; i < rank; ++i) {
        if (!mul_ok(elements, shape[i], &elements)) {
          *out_why = "element count overflows 64 bits";
          return false;
        }
      }
    } else {
      // Span of the strided view: 1 + sum((shape_i - 1) * stride_i).
      uint64_t span = 1;
      for (uint32_t i = 0; i < rank; ++i) {
        uint64_t term;
        if (shape[i] == 0) {
          span = 0;
          break;
        }
        if (!mul_ok(shape[i] - 1, strides[i], &term) ||
            !add_ok(span, term, &span)) {
          *out_why = "strided span overflows 64 bits";
          return false;
        }
      }
      elements = span;
    }
  } else if (layout == ACCEL_WEIGHT_LAYOUT_BLOCKED) {
    if (rank < 2 || block[0] == 0 || block[1] == 0) {
      *out_why = "blocked layout needs rank >= 2 and non-zero block dims";
      return false;
    }
    if (any_stride) {
      *out_why = "strides set for the blocked layout";
      return false;
    }
    for (uint32_t i = 0; i < rank; ++i) {
      uint64_t extent = shape[i];
      if (i + 2 >= rank) {
        uint64_t b = block[i + 2 - rank];
        uint64_t padded;
        if (!add_ok(extent, b - 1, &padded)) {
          *out_why = "padded extent overflows 64 bits";
          return false;
        }
        extent = padded / b * b;
      }
      if (!mul_ok(elements, extent, &elements)) {
        *out_why = "element count overflows 64 bits";
        return false;
      }
    }
  } else {
    *out_why = "unknown layout";
    return false;
  }
  uint64_t total_bits;
  if (!mul_ok(elements, bits, &total_bits)) {
    *out_why = "size in bits overflows 64 bits";
    return false;
  }
  *out_bytes = total_bits / 8 + (total_bits % 8 != 0);
  return true;
}

// ---------------------------------------------------------------------------

typedef struct parse {
  const uint8_t *data;
  uint64_t size;
  axe_view_t *view;
  // Index of the first section of each singleton kind, -1 when none yet.
  int64_t first[AXE_SECTION_KIND_LAST + 1];
} parse_t;

#define SECTION_FAIL(code, i, kind, field, fmt, ...)                   \
  accel_error((code), "section %u (%s) field %s: " fmt, (unsigned)(i), \
              accel_axe_section_kind_name(kind), (field), ##__VA_ARGS__)

// Checks that |offset| names a NUL-terminated string of the string table,
// non-empty and at most AXE_MAX_NAME bytes when |name| is set.
static accel_status_t check_string(const axe_view_t *v, uint32_t offset,
                                   bool name, const char *where,
                                   const char *field, uint32_t index) {
  if (offset >= v->strings_size) {
    return accel_error(FORMAT,
                       "%s %u field %s: string offset %u is beyond the string "
                       "table (%llu bytes)",
                       where, index, field, offset,
                       (unsigned long long)v->strings_size);
  }
  uint64_t room = v->strings_size - offset;
  uint64_t limit = room < AXE_MAX_NAME + 1 ? room : AXE_MAX_NAME + 1;
  const char *s = v->strings + offset;
  const char *nul = memchr(s, '\0', (size_t)limit);
  if (nul == NULL && limit == room) {
    return accel_error(FORMAT,
                       "%s %u field %s: string at offset %u has no terminator",
                       where, index, field, offset);
  }
  if (name) {
    if (nul == NULL) {
      return accel_error(FORMAT,
                         "%s %u field %s: name at offset %u is longer than %u "
                         "bytes",
                         where, index, field, offset, AXE_MAX_NAME);
    }
    if (nul == s) {
      return accel_error(FORMAT, "%s %u field %s: name is empty", where,
                         index, field);
    }
  }
  return ACCEL_OK;
}

static int cmp_offsets(const void *a, const void *b, void *arg) {
  const axe_section_t *s = arg;
  uint64_t x = s[*(const uint32_t *)a].offset;
  uint64_t y = s[*(const uint32_t *)b].offset;
  return x < y ? -1 : x > y;
}

static int cmp_names(const void *a, const void *b, void *arg) {
  const axe_view_t *v = arg;
  return strcmp(v->strings + *(const uint32_t *)a,
                v->strings + *(const uint32_t *)b);
}

// Rejects duplicate names among |count| string offsets (each validated).
static accel_status_t check_unique(const axe_view_t *v, const uint32_t *names,
                                   uint32_t count, const char *what) {
  if (count < 2) {
    return ACCEL_OK;
  }
  uint32_t *sorted = malloc(sizeof(uint32_t) * count);
  if (sorted == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cannot allocate %u %s names for checking", count,
                       what);
  }
  memcpy(sorted, names, sizeof(uint32_t) * count);
  qsort_r(sorted, count, sizeof(uint32_t), cmp_names, (void *)v);
  accel_status_t st = ACCEL_OK;
  for (uint32_t i = 1; i < count; ++i) {
    if (strcmp(v->strings + sorted[i - 1], v->strings + sorted[i]) == 0) {
      st = accel_error(FORMAT, "%s name \"%s\" appears twice", what,
                       v->strings + sorted[i]);
      break;
    }
  }
  free(sorted);
  return st;
}

accel_status_t accel_axe_check_header_prefix(const void *header,
                                             uint64_t size) {
  if (size < AXE_HEADER_SIZE) {
    return accel_error(FORMAT,
                       "header: file is truncated: %llu bytes, the header "
                       "needs %u",
                       (unsigned long long)size, AXE_HEADER_SIZE);
  }
  const axe_header_t *h = (const axe_header_t *)header;
  if (memcmp(h->magic, AXE_MAGIC, AXE_MAGIC_SIZE) != 0) {
    return accel_error(FORMAT, "header field magic: not an .axe file");
  }
  if (h->version_major != ACCEL_EXE_FORMAT_VERSION_MAJOR) {
    return accel_error(VERSION,
                       "header field version_major: file format %u.%u, this "
                       "runtime reads %u.x",
                       h->version_major, h->version_minor,
                       ACCEL_EXE_FORMAT_VERSION_MAJOR);
  }
  if (h->header_size != AXE_HEADER_SIZE) {
    return accel_error(FORMAT, "header field header_size: %u, expected %u",
                       h->header_size, AXE_HEADER_SIZE);
  }
  if (h->file_size != size) {
    return accel_error(FORMAT,
                       "header field file_size: %llu, but the image has %llu "
                       "bytes (truncated or padded file)",
                       (unsigned long long)h->file_size,
                       (unsigned long long)size);
  }
  return ACCEL_OK;
}

static accel_status_t parse_header(parse_t *p) {
  ACCEL_RETURN_IF_ERROR(accel_axe_check_header_prefix(p->data, p->size));
  const axe_header_t *h = (const axe_header_t *)p->data;
  if (h->required_features != 0) {
    return accel_error(VERSION,
                       "header field required_features: unknown feature bits "
                       "0x%llx (file needs a newer runtime)",
                       (unsigned long long)h->required_features);
  }
  if (h->section_entry_size != AXE_SECTION_ENTRY_SIZE) {
    return accel_error(FORMAT,
                       "header field section_entry_size: %u, expected %u",
                       h->section_entry_size, AXE_SECTION_ENTRY_SIZE);
  }
  if (h->section_count == 0 || h->section_count > AXE_MAX_SECTIONS) {
    return accel_error(FORMAT,
                       "header field section_count: %u is outside 1..%u",
                       h->section_count, AXE_MAX_SECTIONS);
  }
  uint64_t table_size = (uint64_t)h->section_count * AXE_SECTION_ENTRY_SIZE;
  uint64_t table_end;
  if (h->section_table_offset % 8 != 0 ||
      h->section_table_offset < AXE_HEADER_SIZE ||
      !add_ok(h->section_table_offset, table_size, &table_end) ||
      table_end > p->size) {
    return accel_error(FORMAT,
                       "header field section_table_offset: table of %u "
                       "entries at %llu does not fit in %llu bytes after the "
                       "header (or is not 8-byte aligned)",
                       h->section_count,
                       (unsigned long long)h->section_table_offset,
                       (unsigned long long)p->size);
  }
  const void *table = p->data + h->section_table_offset;
  uint64_t want = accel_axe_header_hash(h, table, table_size);
  if (want != h->header_hash) {
    return accel_error(FORMAT,
                       "header field header_hash: 0x%016llx does not match "
                       "the header and section table (0x%016llx)",
                       (unsigned long long)h->header_hash,
                       (unsigned long long)want);
  }
  p->view->header = h;
  p->view->sections = table;
  p->view->section_count = h->section_count;
  return ACCEL_OK;
}

// One section's placement, whatever its kind: kind non-zero, flags, bounds,
// clear of the header and table, alignment a power of two and respected,
// page alignment for mappable content.
static accel_status_t check_placement(const parse_t *p, uint32_t i,
                                      const axe_section_t *s) {
  const axe_header_t *h = p->view->header;
  uint64_t table_end = h->section_table_offset +
                       (uint64_t)p->view->section_count * AXE_SECTION_ENTRY_SIZE;
  uint64_t end;
  if (s->kind == 0) {
    return SECTION_FAIL(FORMAT, i, s->kind, "kind", "kind 0 is invalid");
  }
  if ((s->flags & ~AXE_SECTION_FLAGS_KNOWN) != 0) {
    return SECTION_FAIL(FORMAT, i, s->kind, "flags",
                        "reserved bits 0x%x are set", s->flags);
  }
  if (!add_ok(s->offset, s->size, &end) || end > p->size) {
    return SECTION_FAIL(FORMAT, i, s->kind, "size",
                        "[%llu, +%llu) is beyond the end of the file (%llu "
                        "bytes)",
                        (unsigned long long)s->offset,
                        (unsigned long long)s->size,
                        (unsigned long long)p->size);
  }
  if (s->size != 0 &&
      (s->offset < AXE_HEADER_SIZE ||
       (s->offset < table_end && end > h->section_table_offset))) {
    return SECTION_FAIL(FORMAT, i, s->kind, "offset",
                        "[%llu, %llu) overlaps the header or the section "
                        "table",
                        (unsigned long long)s->offset,
                        (unsigned long long)end);
  }
  if (!is_pow2(s->alignment)) {
    return SECTION_FAIL(FORMAT, i, s->kind, "alignment",
                        "%u is not a power of two", s->alignment);
  }
  if (s->offset % s->alignment != 0) {
    return SECTION_FAIL(FORMAT, i, s->kind, "offset",
                        "%llu is not a multiple of the section's alignment "
                        "%u",
                        (unsigned long long)s->offset, s->alignment);
  }
  if ((s->flags & AXE_SECTION_FLAG_MAPPABLE) != 0 &&
      s->alignment < AXE_MAP_ALIGNMENT) {
    return SECTION_FAIL(FORMAT, i, s->kind, "alignment",
                        "%u is below %u for a mappable section", s->alignment,
                        AXE_MAP_ALIGNMENT);
  }
  return ACCEL_OK;
}

// A section checker: what one kind adds to the placement checks.
typedef accel_status_t (*section_check_fn_t)(parse_t *p, uint32_t i,
                                             const axe_section_t *s);

// Kinds above AXE_SECTION_KIND_LAST: skipped unless marked required.
static accel_status_t check_unknown_section(parse_t *p, uint32_t i,
                                            const axe_section_t *s) {
  if ((s->flags & AXE_SECTION_FLAG_REQUIRED) != 0) {
    return SECTION_FAIL(VERSION, i, s->kind, "kind",
                        "unknown kind %u is marked required (the file needs "
                        "a newer runtime)",
                        s->kind);
  }
  p->view->skipped_sections++;
  return ACCEL_OK;
}

// Reserved: room for a signature, not interpreted in 1.x.
static accel_status_t check_signature_section(parse_t *p, uint32_t i,
                                              const axe_section_t *s) {
  (void)p;
  (void)i;
  (void)s;
  return ACCEL_OK;
}

static accel_status_t check_layout_major(uint32_t i, const axe_section_t *s) {
  if (s->layout_major != AXE_TABLE_LAYOUT_MAJOR) {
    return SECTION_FAIL(VERSION, i, s->kind, "layout_major",
                        "record layout %u.%u, this runtime reads %u.x",
                        s->layout_major, s->layout_minor,
                        AXE_TABLE_LAYOUT_MAJOR);
  }
  return ACCEL_OK;
}

// Strings and record tables appear at most once; |p->first| remembers where.
static accel_status_t check_singleton(parse_t *p, uint32_t i,
                                      const axe_section_t *s) {
  if (p->first[s->kind] >= 0) {
    return SECTION_FAIL(FORMAT, i, s->kind, "kind",
                        "second %s section (the first is section %lld)",
                        accel_axe_section_kind_name(s->kind),
                        (long long)p->first[s->kind]);
  }
  p->first[s->kind] = i;
  return ACCEL_OK;
}

static accel_status_t check_strings_section(parse_t *p, uint32_t i,
                                            const axe_section_t *s) {
  ACCEL_RETURN_IF_ERROR(check_layout_major(i, s));
  return check_singleton(p, i, s);
}

static uint64_t record_size(uint32_t kind) {
  switch (kind) {
    case AXE_SECTION_REQUIREMENTS:
      return sizeof(axe_requirements_t);
    case AXE_SECTION_KERNELS:
      return sizeof(axe_kernel_t);
    case AXE_SECTION_BINDINGS:
      return sizeof(axe_binding_t);
    case AXE_SECTION_WEIGHTS:
      return sizeof(axe_weight_t);
    case AXE_SECTION_QUANT:
      return sizeof(axe_quant_t);
    case AXE_SECTION_METADATA:
      return sizeof(axe_metadata_t);
    default:
      return 0;
  }
}

// Record tables: layout 1.x, 8-byte aligned, at most one, whole records.
static accel_status_t check_table_section(parse_t *p, uint32_t i,
                                          const axe_section_t *s) {
  ACCEL_RETURN_IF_ERROR(check_layout_major(i, s));
  if (s->alignment < 8) {
    return SECTION_FAIL(FORMAT, i, s->kind, "alignment",
                        "%u is below 8 for a record table", s->alignment);
  }
  ACCEL_RETURN_IF_ERROR(check_singleton(p, i, s));
  uint64_t need;
  if (!mul_ok(s->count, record_size(s->kind), &need) || need != s->size) {
    return SECTION_FAIL(FORMAT, i, s->kind, "count",
                        "%u records of %llu bytes do not fill the section's "
                        "%llu bytes",
                        s->count, (unsigned long long)record_size(s->kind),
                        (unsigned long long)s->size);
  }
  return ACCEL_OK;
}

// A CODE section's layout is the kernel ABI its code was built against
// (docs/kernel-abi.md): another major, or a newer minor, cannot be called.
static accel_status_t check_code_section(parse_t *p, uint32_t i,
                                         const axe_section_t *s) {
  (void)p;
  if (s->layout_major != ACCEL_KERNEL_ABI_VERSION_MAJOR) {
    return SECTION_FAIL(VERSION, i, s->kind, "layout_major",
                        "code built against kernel ABI %u.%u, this runtime "
                        "implements %u.x",
                        s->layout_major, s->layout_minor,
                        ACCEL_KERNEL_ABI_VERSION_MAJOR);
  }
  if (s->layout_minor > ACCEL_KERNEL_ABI_VERSION_MINOR) {
    return SECTION_FAIL(VERSION, i, s->kind, "layout_minor",
                        "code built against kernel ABI %u.%u, this runtime "
                        "implements %u.%u",
                        s->layout_major, s->layout_minor,
                        ACCEL_KERNEL_ABI_VERSION_MAJOR,
                        ACCEL_KERNEL_ABI_VERSION_MINOR);
  }
  return ACCEL_OK;
}

static accel_status_t check_weight_data_section(parse_t *p, uint32_t i,
                                                const axe_section_t *s) {
  (void)p;
  ACCEL_RETURN_IF_ERROR(check_layout_major(i, s));
  if (s->alignment < AXE_MIN_DATA_ALIGNMENT) {
    return SECTION_FAIL(FORMAT, i, s->kind, "alignment",
                        "%u is below %u for weight data", s->alignment,
                        AXE_MIN_DATA_ALIGNMENT);
  }
  return ACCEL_OK;
}

// One checker per known kind (kind 0 is refused by check_placement).
static const section_check_fn_t k_section_checks[AXE_SECTION_KIND_LAST + 1] = {
    [AXE_SECTION_STRINGS] = check_strings_section,
    [AXE_SECTION_REQUIREMENTS] = check_table_section,
    [AXE_SECTION_KERNELS] = check_table_section,
    [AXE_SECTION_BINDINGS] = check_table_section,
    [AXE_SECTION_CODE] = check_code_section,
    [AXE_SECTION_WEIGHTS] = check_table_section,
    [AXE_SECTION_WEIGHT_DATA] = check_weight_data_section,
    [AXE_SECTION_QUANT] = check_table_section,
    [AXE_SECTION_METADATA] = check_table_section,
    [AXE_SECTION_SIGNATURE] = check_signature_section,
};
_Static_assert(AXE_SECTION_KIND_LAST == AXE_SECTION_SIGNATURE,
               "a new section kind needs a checker in k_section_checks");

// No two non-empty sections overlap: sort by offset, compare neighbours.
static accel_status_t check_overlaps(const axe_view_t *v) {
  uint32_t *order = malloc(sizeof(uint32_t) * v->section_count);
  if (order == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cannot allocate the order of %u sections",
                       v->section_count);
  }
  uint32_t n = 0;
  for (uint32_t i = 0; i < v->section_count; ++i) {
    if (v->sections[i].size != 0) {
      order[n++] = i;
    }
  }
  qsort_r(order, n, sizeof(uint32_t), cmp_offsets, (void *)v->sections);
  accel_status_t st = ACCEL_OK;
  for (uint32_t j = 1; j < n; ++j) {
    const axe_section_t *a = &v->sections[order[j - 1]];
    const axe_section_t *b = &v->sections[order[j]];
    if (a->offset + a->size > b->offset) {
      uint32_t hi = order[j] > order[j - 1] ? order[j] : order[j - 1];
      uint32_t lo = order[j] > order[j - 1] ? order[j - 1] : order[j];
      st = accel_error(FORMAT,
                       "section %u (%s) field offset: overlaps section %u at "
                       "offset %llu",
                       hi, accel_axe_section_kind_name(v->sections[hi].kind),
                       lo, (unsigned long long)b->offset);
      break;
    }
  }
  free(order);
  return st;
}

// Points the view at the string table and the record tables.
static accel_status_t bind_tables(const parse_t *p) {
  axe_view_t *v = p->view;
  if (p->first[AXE_SECTION_STRINGS] < 0) {
    return accel_error(FORMAT, "no strings section (required)");
  }
  if (p->first[AXE_SECTION_REQUIREMENTS] < 0) {
    return accel_error(FORMAT, "no requirements section (required)");
  }
  const axe_section_t *ss = &v->sections[p->first[AXE_SECTION_STRINGS]];
  const char *strings = (const char *)p->data + ss->offset;
  if (ss->size == 0 || strings[0] != '\0' || strings[ss->size - 1] != '\0') {
    return SECTION_FAIL(FORMAT, p->first[AXE_SECTION_STRINGS],
                        AXE_SECTION_STRINGS, "size",
                        "the string table must start and end with a NUL byte");
  }
  v->strings = strings;
  v->strings_size = ss->size;
#define TABLE(kind, ptr, cnt)                                          \
  if (p->first[kind] >= 0) {                                           \
    const axe_section_t *t = &v->sections[p->first[kind]];             \
    v->ptr = (const void *)(p->data + t->offset);                      \
    v->cnt = t->count;                                                 \
  }
  TABLE(AXE_SECTION_KERNELS, kernels, kernel_count)
  TABLE(AXE_SECTION_BINDINGS, bindings, binding_count)
  TABLE(AXE_SECTION_WEIGHTS, weights, weight_count)
  TABLE(AXE_SECTION_QUANT, quants, quant_count)
  TABLE(AXE_SECTION_METADATA, metadata, metadata_count)
#undef TABLE
  const axe_section_t *rs = &v->sections[p->first[AXE_SECTION_REQUIREMENTS]];
  if (rs->count != 1) {
    return SECTION_FAIL(FORMAT, p->first[AXE_SECTION_REQUIREMENTS],
                        AXE_SECTION_REQUIREMENTS, "count",
                        "%u records, expected 1", rs->count);
  }
  v->requirements = (const axe_requirements_t *)(p->data + rs->offset);
  return ACCEL_OK;
}

// A code object names its target and has a known format and content.
static accel_status_t check_code_object(const axe_view_t *v, uint32_t i,
                                        const axe_section_t *s) {
  if (s->name == 0) {
    return SECTION_FAIL(FORMAT, i, s->kind, "name",
                        "a code object must name its target");
  }
  ACCEL_RETURN_IF_ERROR(check_string(v, s->name, true, "section", "name", i));
  if (s->info < ACCEL_CODE_FORMAT_ELF_SO || s->info > ACCEL_CODE_FORMAT_CUBIN) {
    return SECTION_FAIL(FORMAT, i, s->kind, "info", "unknown code format %u",
                        s->info);
  }
  if (s->size == 0) {
    return SECTION_FAIL(FORMAT, i, s->kind, "size", "empty code object");
  }
  return ACCEL_OK;
}

// Section names, code objects, and unique code targets (sorted, so that
// 65536 code sections stay cheap).
static accel_status_t check_section_names(const axe_view_t *v) {
  for (uint32_t i = 0; i < v->section_count; ++i) {
    const axe_section_t *s = &v->sections[i];
    if (s->name != 0) {
      ACCEL_RETURN_IF_ERROR(check_string(v, s->name, false, "section", "name", i));
    }
    if (s->kind == AXE_SECTION_CODE) {
      ACCEL_RETURN_IF_ERROR(check_code_object(v, i, s));
    }
  }
  uint32_t *targets = malloc(sizeof(uint32_t) * v->section_count);
  if (targets == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cannot allocate %u code targets", v->section_count);
  }
  uint32_t code_count = 0;
  for (uint32_t i = 0; i < v->section_count; ++i) {
    if (v->sections[i].kind == AXE_SECTION_CODE) {
      targets[code_count++] = v->sections[i].name;
    }
  }
  accel_status_t st = check_unique(v, targets, code_count, "code object target");
  free(targets);
  return st;
}

// Every section: placement, then its kind's checker; then overlaps, the
// tables the view points at, and names.
static accel_status_t parse_sections(parse_t *p) {
  axe_view_t *v = p->view;
  for (uint32_t k = 0; k <= AXE_SECTION_KIND_LAST; ++k) {
    p->first[k] = -1;
  }
  for (uint32_t i = 0; i < v->section_count; ++i) {
    const axe_section_t *s = &v->sections[i];
    ACCEL_RETURN_IF_ERROR(check_placement(p, i, s));
    ACCEL_RETURN_IF_ERROR(s->kind > AXE_SECTION_KIND_LAST
                              ? check_unknown_section(p, i, s)
                              : k_section_checks[s->kind](p, i, s));
  }
  ACCEL_RETURN_IF_ERROR(check_overlaps(v));
  ACCEL_RETURN_IF_ERROR(bind_tables(p));
  return check_section_names(v);
}

static accel_status_t parse_requirements(const axe_view_t *v) {
  const axe_requirements_t *r = v->requirements;
  if (r->workspace_alignment != 0 && !is_pow2(r->workspace_alignment)) {
    return accel_error(FORMAT,
                       "requirements field workspace_alignment: %u is not a "
                       "power of two",
                       r->workspace_alignment);
  }
  return ACCEL_OK;
}

static accel_status_t check_abi_version(uint32_t version, const char *where,
                                        uint32_t index) {
  uint32_t major = version >> 16, minor = version & 0xffff;
  if (major != ACCEL_KERNEL_ABI_VERSION_MAJOR ||
      minor > ACCEL_KERNEL_ABI_VERSION_MINOR) {
    return accel_error(VERSION,
                       "%s %u field abi_version: kernel ABI %u.%u, this "
                       "runtime provides %u.%u",
                       where, index, major, minor,
                       ACCEL_KERNEL_ABI_VERSION_MAJOR,
                       ACCEL_KERNEL_ABI_VERSION_MINOR);
  }
  return ACCEL_OK;
}

static accel_status_t parse_kernels(const axe_view_t *v) {
  for (uint32_t i = 0; i < v->binding_count; ++i) {
    const axe_binding_t *b = &v->bindings[i];
    if (b->name != 0) {
      ACCEL_RETURN_IF_ERROR(check_string(v, b->name, true, "binding", "name", i));
    }
    if (b->access == 0 ||
        (b->access & ~(uint32_t)(ACCEL_KERNEL_ACCESS_READ |
                                 ACCEL_KERNEL_ACCESS_WRITE)) != 0) {
      return accel_error(FORMAT, "binding %u field access: invalid value 0x%x",
                         i, b->access);
    }
    if (b->alignment != 0 && !is_pow2(b->alignment)) {
      return accel_error(FORMAT,
                         "binding %u field alignment: %u is not a power of two",
                         i, b->alignment);
    }
  }
  uint32_t *names = NULL;
  if (v->kernel_count > 0) {
    names = malloc(sizeof(uint32_t) * v->kernel_count);
    if (names == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "cannot allocate %u kernel names", v->kernel_count);
    }
  }
  accel_status_t st = ACCEL_OK;
  for (uint32_t i = 0; i < v->kernel_count && st == ACCEL_OK; ++i) {
    const axe_kernel_t *k = &v->kernels[i];
    names[i] = k->name;
    st = check_string(v, k->name, true, "kernel", "name", i);
    if (st == ACCEL_OK) {
      st = check_string(v, k->symbol, true, "kernel", "symbol", i);
    }
    if (st == ACCEL_OK) {
      st = check_abi_version(k->abi_version, "kernel", i);
    }
    if (st != ACCEL_OK) {
      break;
    }
    if (k->flags != 0) {
      st = accel_error(FORMAT, "kernel %u field flags: reserved bits 0x%x",
                       i, k->flags);
    } else if (k->binding_count > AXE_MAX_BINDINGS) {
      st = accel_error(FORMAT,
                       "kernel %u field binding_count: %u is above %u", i,
                       k->binding_count, AXE_MAX_BINDINGS);
    } else if ((uint64_t)k->binding_first + k->binding_count >
               v->binding_count) {
      st = accel_error(FORMAT,
                       "kernel %u field binding_first: bindings [%u, +%u) "
                       "dangle beyond the %u of the bindings table",
                       i, k->binding_first, k->binding_count,
                       v->binding_count);
    } else if (k->constants_size > AXE_MAX_CONSTANTS) {
      st = accel_error(FORMAT,
                       "kernel %u field constants_size: %u is above %u", i,
                       k->constants_size, AXE_MAX_CONSTANTS);
    } else if (k->workgroup_size[0] == 0 || k->workgroup_size[1] == 0 ||
               k->workgroup_size[2] == 0) {
      st = accel_error(FORMAT,
                       "kernel %u field workgroup_size: %ux%ux%u has a zero "
                       "dim",
                       i, k->workgroup_size[0], k->workgroup_size[1],
                       k->workgroup_size[2]);
    }
  }
  if (st == ACCEL_OK) {
    st = check_unique(v, names, v->kernel_count, "kernel");
  }
  free(names);
  return st;
}

static accel_status_t check_companion(const axe_view_t *v, uint32_t w_index,
                                      uint32_t q_index, uint32_t c_index,
                                      const char *field, uint64_t want) {
  const axe_weight_t *w = &v->weights[w_index];
  const axe_weight_t *c = &v->weights[c_index];
  const char *wn = axe_string(v, w->name);
  if (c_index == w_index) {
    return accel_error(FORMAT,
                       "quant %u field %s: weight \"%s\" refers to itself "
                       "(cycle)",
                       q_index, field, wn);
  }
  if (c->quant != AXE_NONE) {
    return accel_error(FORMAT,
                       "quant %u field %s: companion \"%s\" of weight \"%s\" "
                       "is itself quantized (chains and cycles are not "
                       "allowed)",
                       q_index, field, axe_string(v, c->name), wn);
  }
  if (strcmp(field, "scale") == 0 ? !is_float(c->dtype)
                                  : is_float(c->dtype)) {
    return accel_error(FORMAT,
                       "quant %u field %s: companion \"%s\" has dtype %s",
                       q_index, field, axe_string(v, c->name),
                       accel_dtype_name((accel_dtype_t)c->dtype));
  }
  uint64_t n = 1;
  for (uint32_t d = 0; d < c->rank; ++d) {
    if (!mul_ok(n, c->shape[d], &n)) {
      n = UINT64_MAX;  // cannot match |want|
      break;
    }
  }
  if (c->layout != ACCEL_WEIGHT_LAYOUT_STRIDED || n != want) {
    return accel_error(FORMAT,
                       "quant %u field %s: companion \"%s\" of weight \"%s\" "
                       "has %llu elements, the scheme needs %llu (dense)",
                       q_index, field, axe_string(v, c->name), wn,
                       (unsigned long long)n, (unsigned long long)want);
  }
  return ACCEL_OK;
}

static accel_status_t parse_weights(const axe_view_t *v) {
  uint32_t *names = NULL;
  if (v->weight_count > 0) {
    names = malloc(sizeof(uint32_t) * v->weight_count);
    if (names == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "cannot allocate %u weight names", v->weight_count);
    }
  }
  accel_status_t st = ACCEL_OK;
  for (uint32_t i = 0; i < v->weight_count; ++i) {
    const axe_weight_t *w = &v->weights[i];
    names[i] = w->name;
    st = check_string(v, w->name, true, "weight", "name", i);
    if (st != ACCEL_OK) {
      goto out;
    }
    const char *wn = axe_string(v, w->name);
    uint64_t need = 0;
    const char *why = NULL;
    if (!accel_axe_weight_extent(w->dtype, w->rank, w->shape, w->strides,
                                 w->layout, w->block, &need, &why)) {
      st = accel_error(FORMAT, "weight %u (\"%s\") field shape: %s", i, wn,
                       why);
      goto out;
    }
    bool dense = true;
    for (uint32_t d = 0; d < ACCEL_WEIGHT_MAX_RANK; ++d) {
      dense &= w->strides[d] == 0;
    }
    if (dense ? w->size_bytes != need : w->size_bytes < need) {
      st = accel_error(FORMAT,
                       "weight %u (\"%s\") field size_bytes: %llu, the shape "
                       "and dtype need %llu",
                       i, wn, (unsigned long long)w->size_bytes,
                       (unsigned long long)need);
      goto out;
    }
    if (w->data_section >= v->section_count ||
        v->sections[w->data_section].kind != AXE_SECTION_WEIGHT_DATA) {
      st = accel_error(FORMAT,
                       "weight %u (\"%s\") field data_section: %u is not a "
                       "weight_data section",
                       i, wn, w->data_section);
      goto out;
    }
    const axe_section_t *ds = &v->sections[w->data_section];
    uint64_t end;
    if (w->data_offset % AXE_MIN_DATA_ALIGNMENT != 0) {
      st = accel_error(FORMAT,
                       "weight %u (\"%s\") field data_offset: %llu is not "
                       "64-byte aligned",
                       i, wn, (unsigned long long)w->data_offset);
      goto out;
    }
    if (!add_ok(w->data_offset, w->size_bytes, &end) || end > ds->size) {
      st = accel_error(FORMAT,
                       "weight %u (\"%s\") field data_offset: [%llu, +%llu) "
                       "is beyond section %u (%llu bytes)",
                       i, wn, (unsigned long long)w->data_offset,
                       (unsigned long long)w->size_bytes, w->data_section,
                       (unsigned long long)ds->size);
      goto out;
    }
    if (w->quant != AXE_NONE && w->quant >= v->quant_count) {
      st = accel_error(FORMAT,
                       "weight %u (\"%s\") field quant: %u dangles (%u quant "
                       "records)",
                       i, wn, w->quant, v->quant_count);
      goto out;
    }
  }
  st = check_unique(v, names, v->weight_count, "weight");
  if (st != ACCEL_OK) {
    goto out;
  }
  for (uint32_t q = 0; q < v->quant_count; ++q) {
    const axe_quant_t *r = &v->quants[q];
    if (r->scheme < ACCEL_QUANT_PER_TENSOR || r->scheme > ACCEL_QUANT_GROUPWISE) {
      st = accel_error(FORMAT, "quant %u field scheme: unknown scheme %u", q,
                       r->scheme);
      goto out;
    }
    if (r->scale >= v->weight_count) {
      st = accel_error(FORMAT,
                       "quant %u field scale: weight %u dangles (%u weights)",
                       q, r->scale, v->weight_count);
      goto out;
    }
    if (r->zero_point != AXE_NONE && r->zero_point >= v->weight_count) {
      st = accel_error(FORMAT,
                       "quant %u field zero_point: weight %u dangles (%u "
                       "weights)",
                       q, r->zero_point, v->weight_count);
      goto out;
    }
  }
  for (uint32_t i = 0; i < v->weight_count; ++i) {
    const axe_weight_t *w = &v->weights[i];
    if (w->quant == AXE_NONE) {
      continue;
    }
    const axe_quant_t *r = &v->quants[w->quant];
    uint64_t numel = 1;
    for (uint32_t d = 0; d < w->rank; ++d) {
      if (!mul_ok(numel, w->shape[d], &numel)) {
        st = accel_error(FORMAT,
                         "weight %u (\"%s\") field shape: element count "
                         "overflows 64 bits",
                         i, axe_string(v, w->name));
        goto out;
      }
    }
    uint64_t want = 1;
    if (r->scheme != ACCEL_QUANT_PER_TENSOR) {
      if (r->axis >= w->rank) {
        st = accel_error(FORMAT,
                         "quant %u field axis: %u is not below the rank %u of "
                         "weight \"%s\"",
                         w->quant, r->axis, w->rank, axe_string(v, w->name));
        goto out;
      }
      want = w->shape[r->axis];
    }
    if (r->scheme == ACCEL_QUANT_GROUPWISE) {
      if (r->group_size == 0 || w->shape[r->axis] % r->group_size != 0) {
        st = accel_error(FORMAT,
                         "quant %u field group_size: %u does not divide dim "
                         "%u (%llu) of weight \"%s\"",
                         w->quant, r->group_size, r->axis,
                         (unsigned long long)w->shape[r->axis],
                         axe_string(v, w->name));
        goto out;
      }
      want = numel / r->group_size;
    }
    st = check_companion(v, i, w->quant, r->scale, "scale", want);
    if (st == ACCEL_OK && r->zero_point != AXE_NONE) {
      st = check_companion(v, i, w->quant, r->zero_point, "zero_point", want);
    }
    if (st != ACCEL_OK) {
      goto out;
    }
  }
out:
  free(names);
  return st;
}

static accel_status_t parse_metadata(const axe_view_t *v) {
  if (v->metadata_count == 0) {
    return ACCEL_OK;
  }
  uint32_t *keys = malloc(sizeof(uint32_t) * v->metadata_count);
  if (keys == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cannot allocate %u metadata keys", v->metadata_count);
  }
  accel_status_t st = ACCEL_OK;
  for (uint32_t i = 0; i < v->metadata_count && st == ACCEL_OK; ++i) {
    keys[i] = v->metadata[i].key;
    st = check_string(v, v->metadata[i].key, true, "metadata", "key", i);
    if (st == ACCEL_OK) {
      st = check_string(v, v->metadata[i].value, false, "metadata", "value",
                        i);
    }
  }
  if (st == ACCEL_OK) {
    st = check_unique(v, keys, v->metadata_count, "metadata key");
  }
  free(keys);
  return st;
}

static accel_status_t check_hashes(const axe_view_t *v) {
  for (uint32_t i = 0; i < v->section_count; ++i) {
    const axe_section_t *s = &v->sections[i];
    uint8_t h[16];
    accel_axe_hash128(v->data + s->offset, s->size, h);
    if (memcmp(h, s->hash, 16) != 0) {
      return SECTION_FAIL(FORMAT, i, s->kind, "hash",
                          "content hash mismatch (%llu bytes at offset %llu "
                          "are corrupt or were modified)",
                          (unsigned long long)s->size,
                          (unsigned long long)s->offset);
    }
  }
  return ACCEL_OK;
}

accel_status_t accel_axe_parse(const void *data, uint64_t size,
                               bool skip_hashes, axe_view_t *out_view) {
  axe_view_t v = {.data = data, .size = size};
  parse_t p = {.data = data, .size = size, .view = &v};
  if (data == NULL || ((uintptr_t)data & 7) != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "image must be non-NULL and 8-byte aligned");
  }
  ACCEL_RETURN_IF_ERROR(parse_header(&p));
  ACCEL_RETURN_IF_ERROR(parse_sections(&p));
  ACCEL_RETURN_IF_ERROR(parse_requirements(&v));
  ACCEL_RETURN_IF_ERROR(parse_kernels(&v));
  ACCEL_RETURN_IF_ERROR(parse_weights(&v));
  ACCEL_RETURN_IF_ERROR(parse_metadata(&v));
  if (!skip_hashes) {
    ACCEL_RETURN_IF_ERROR(check_hashes(&v));
  }
  *out_view = v;
  return ACCEL_OK;
}
