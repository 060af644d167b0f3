// The GGUF reader: one pass over the header, the metadata and the tensor
// descriptions that checks every count, length and offset against the bytes
// that remain before using it (docs/gguf.md), then indexes keys and tensor
// names for lookups. Nothing is copied: values and tensors point into the
// image.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel/gguf.h"
#include "core/error.h"

#define GGUF_MAGIC 0x46554747u  // "GGUF" read as a little-endian uint32
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_ALIGNMENT (1u << 20)

typedef struct kv_entry {
  accel_gguf_string_t key;
  accel_gguf_value_t value;
  // String arrays: where each element (its length field) starts.
  uint64_t *string_offsets;
} kv_entry_t;

struct accel_gguf {
  const uint8_t *data;
  uint64_t size;
  bool mapped;
  uint32_t version;
  uint32_t alignment;
  uint64_t kv_count;
  uint64_t tensor_count;
  kv_entry_t *kvs;
  uint64_t *kv_by_key;  // indices of |kvs| sorted by key
  accel_gguf_tensor_t *tensors;
  uint64_t *tensor_by_name;  // indices of |tensors| sorted by name
};

// A read position in the image; every read checks the bytes that remain.
typedef struct cursor {
  const uint8_t *data;
  uint64_t size;
  uint64_t pos;
} cursor_t;

static inline uint64_t remaining(const cursor_t *c) { return c->size - c->pos; }

static accel_status_t truncated(const cursor_t *c, const char *what,
                                uint64_t need) {
  return accel_error(ACCEL_ERROR_FORMAT,
                     "GGUF: %s at offset %llu needs %llu bytes, %llu remain "
                     "(file truncated?)",
                     what, (unsigned long long)c->pos,
                     (unsigned long long)need,
                     (unsigned long long)remaining(c));
}

static accel_status_t read_bytes(cursor_t *c, void *out, uint64_t n,
                                 const char *what) {
  if (remaining(c) < n) {
    return truncated(c, what, n);
  }
  memcpy(out, c->data + c->pos, n);
  c->pos += n;
  return ACCEL_OK;
}

static accel_status_t read_u32(cursor_t *c, uint32_t *out, const char *what) {
  return read_bytes(c, out, sizeof(*out), what);
}

static accel_status_t read_u64(cursor_t *c, uint64_t *out, const char *what) {
  return read_bytes(c, out, sizeof(*out), what);
}

// A string: uint64 length, then the bytes (no NUL). |what| names it.
static accel_status_t read_string(cursor_t *c, accel_gguf_string_t *out,
                                  const char *what) {
  uint64_t n = 0;
  ACCEL_RETURN_IF_ERROR(read_u64(c, &n, what));
  if (remaining(c) < n) {
    c->pos -= 8;
    return truncated(c, what, 8 + n);
  }
  out->data = (const char *)c->data + c->pos;
  out->size = n;
  c->pos += n;
  return ACCEL_OK;
}

// Bytes of one scalar of |type|, or 0 for STRING and ARRAY.
static uint32_t scalar_bytes(uint32_t type) {
  static const uint8_t k_bytes[ACCEL_GGUF_VALUE_TYPE_COUNT] = {
      [ACCEL_GGUF_VALUE_UINT8] = 1,   [ACCEL_GGUF_VALUE_INT8] = 1,
      [ACCEL_GGUF_VALUE_UINT16] = 2,  [ACCEL_GGUF_VALUE_INT16] = 2,
      [ACCEL_GGUF_VALUE_UINT32] = 4,  [ACCEL_GGUF_VALUE_INT32] = 4,
      [ACCEL_GGUF_VALUE_FLOAT32] = 4, [ACCEL_GGUF_VALUE_BOOL] = 1,
      [ACCEL_GGUF_VALUE_UINT64] = 8,  [ACCEL_GGUF_VALUE_INT64] = 8,
      [ACCEL_GGUF_VALUE_FLOAT64] = 8,
  };
  return type < ACCEL_GGUF_VALUE_TYPE_COUNT ? k_bytes[type] : 0;
}

static const char *value_type_name(uint32_t type) {
  static const char *const k_names[ACCEL_GGUF_VALUE_TYPE_COUNT] = {
      "uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
      "bool",  "string", "array",  "uint64", "int64",  "float64"};
  return type < ACCEL_GGUF_VALUE_TYPE_COUNT ? k_names[type] : "unknown";
}

// Widens the scalar of |type| at |p| into |v|.
static void widen_scalar(uint32_t type, const uint8_t *p,
                         accel_gguf_value_t *v) {
  uint8_t u8;
  int8_t i8;
  uint16_t u16;
  int16_t i16;
  uint32_t u32;
  int32_t i32;
  float f32;
  switch (type) {
    case ACCEL_GGUF_VALUE_UINT8:
    case ACCEL_GGUF_VALUE_BOOL:
      memcpy(&u8, p, 1);
      v->scalar.u64 = u8;
      break;
    case ACCEL_GGUF_VALUE_INT8:
      memcpy(&i8, p, 1);
      v->scalar.i64 = i8;
      break;
    case ACCEL_GGUF_VALUE_UINT16:
      memcpy(&u16, p, 2);
      v->scalar.u64 = u16;
      break;
    case ACCEL_GGUF_VALUE_INT16:
      memcpy(&i16, p, 2);
      v->scalar.i64 = i16;
      break;
    case ACCEL_GGUF_VALUE_UINT32:
      memcpy(&u32, p, 4);
      v->scalar.u64 = u32;
      break;
    case ACCEL_GGUF_VALUE_INT32:
      memcpy(&i32, p, 4);
      v->scalar.i64 = i32;
      break;
    case ACCEL_GGUF_VALUE_FLOAT32:
      memcpy(&f32, p, 4);
      v->scalar.f64 = f32;
      break;
    case ACCEL_GGUF_VALUE_UINT64:
      memcpy(&v->scalar.u64, p, 8);
      break;
    case ACCEL_GGUF_VALUE_INT64:
      memcpy(&v->scalar.i64, p, 8);
      break;
    default:  // FLOAT64
      memcpy(&v->scalar.f64, p, 8);
      break;
  }
}

// Checks that |s| holds no NUL (a key or a name is used as a C string).
static accel_status_t check_no_nul(const accel_gguf_string_t *s,
                                   const char *what, uint64_t offset) {
  if (memchr(s->data, '\0', s->size) != NULL) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: %s at offset %llu contains a NUL byte", what,
                       (unsigned long long)offset);
  }
  return ACCEL_OK;
}

// Reads the array value of |e| (after its type field).
static accel_status_t read_array(cursor_t *c, kv_entry_t *e) {
  accel_gguf_value_t *v = &e->value;
  uint64_t at = c->pos;
  ACCEL_RETURN_IF_ERROR(read_u32(c, &v->array_type, "array element type"));
  ACCEL_RETURN_IF_ERROR(read_u64(c, &v->array_count, "array length"));
  const int key_len = e->key.size > 64 ? 64 : (int)e->key.size;
  if (v->array_type == ACCEL_GGUF_VALUE_ARRAY) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: key \"%.*s\" at offset %llu is an array of "
                       "arrays, which no model uses and the reader refuses",
                       key_len, e->key.data, (unsigned long long)at);
  }
  if (v->array_type >= ACCEL_GGUF_VALUE_TYPE_COUNT) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: key \"%.*s\": unknown array element type %u at "
                       "offset %llu",
                       key_len, e->key.data, v->array_type,
                       (unsigned long long)at);
  }
  v->array_data = c->data + c->pos;
  if (v->array_type != ACCEL_GGUF_VALUE_STRING) {
    uint32_t size = scalar_bytes(v->array_type);
    if (v->array_count > remaining(c) / size) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "GGUF: key \"%.*s\": %llu %s elements need more "
                         "than the %llu bytes that remain at offset %llu",
                         key_len, e->key.data,
                         (unsigned long long)v->array_count,
                         value_type_name(v->array_type),
                         (unsigned long long)remaining(c),
                         (unsigned long long)c->pos);
    }
    c->pos += v->array_count * size;
    return ACCEL_OK;
  }
  // Each string takes at least its 8-byte length, which bounds the index.
  if (v->array_count > remaining(c) / 8) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: key \"%.*s\": %llu strings cannot fit in the "
                       "%llu bytes that remain at offset %llu",
                       key_len, e->key.data,
                       (unsigned long long)v->array_count,
                       (unsigned long long)remaining(c),
                       (unsigned long long)c->pos);
  }
  e->string_offsets =
      malloc((v->array_count != 0 ? v->array_count : 1) * sizeof(uint64_t));
  if (e->string_offsets == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "GGUF: cannot index %llu strings of key \"%.*s\"",
                       (unsigned long long)v->array_count, key_len,
                       e->key.data);
  }
  for (uint64_t i = 0; i < v->array_count; ++i) {
    e->string_offsets[i] = c->pos;
    accel_gguf_string_t s;
    ACCEL_RETURN_IF_ERROR(read_string(c, &s, "array string"));
  }
  return ACCEL_OK;
}

static accel_status_t read_kv(cursor_t *c, uint64_t index, kv_entry_t *e) {
  uint64_t at = c->pos;
  ACCEL_RETURN_IF_ERROR(read_string(c, &e->key, "metadata key"));
  if (e->key.size == 0) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: metadata entry %llu at offset %llu has an "
                       "empty key",
                       (unsigned long long)index, (unsigned long long)at);
  }
  ACCEL_RETURN_IF_ERROR(check_no_nul(&e->key, "metadata key", at));
  uint64_t type_at = c->pos;
  ACCEL_RETURN_IF_ERROR(read_u32(c, &e->value.type, "metadata value type"));
  const int key_len = e->key.size > 64 ? 64 : (int)e->key.size;
  uint32_t type = e->value.type;
  if (type >= ACCEL_GGUF_VALUE_TYPE_COUNT) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: key \"%.*s\": unknown value type %u at offset "
                       "%llu",
                       key_len, e->key.data, type,
                       (unsigned long long)type_at);
  }
  if (type == ACCEL_GGUF_VALUE_ARRAY) {
    return read_array(c, e);
  }
  if (type == ACCEL_GGUF_VALUE_STRING) {
    return read_string(c, &e->value.scalar.str, "string value");
  }
  uint32_t size = scalar_bytes(type);
  if (remaining(c) < size) {
    return truncated(c, "scalar value", size);
  }
  widen_scalar(type, c->data + c->pos, &e->value);
  if (type == ACCEL_GGUF_VALUE_BOOL && e->value.scalar.u64 > 1) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: key \"%.*s\": bool value %llu at offset %llu "
                       "is neither 0 nor 1",
                       key_len, e->key.data,
                       (unsigned long long)e->value.scalar.u64,
                       (unsigned long long)c->pos);
  }
  c->pos += size;
  return ACCEL_OK;
}

static int string_compare(const accel_gguf_string_t *a,
                          const accel_gguf_string_t *b) {
  uint64_t n = a->size < b->size ? a->size : b->size;
  int r = memcmp(a->data, b->data, n);
  if (r != 0) {
    return r;
  }
  return a->size < b->size ? -1 : a->size > b->size ? 1 : 0;
}

static int compare_kv(const void *a, const void *b, void *ctx) {
  const kv_entry_t *kvs = ctx;
  return string_compare(&kvs[*(const uint64_t *)a].key,
                        &kvs[*(const uint64_t *)b].key);
}

static int compare_tensor_name(const void *a, const void *b, void *ctx) {
  const accel_gguf_tensor_t *t = ctx;
  return string_compare(&t[*(const uint64_t *)a].name,
                        &t[*(const uint64_t *)b].name);
}

static int compare_tensor_offset(const void *a, const void *b, void *ctx) {
  const accel_gguf_tensor_t *t = ctx;
  uint64_t x = t[*(const uint64_t *)a].file_offset;
  uint64_t y = t[*(const uint64_t *)b].file_offset;
  return x < y ? -1 : x > y ? 1 : 0;
}

static uint64_t *identity_index(uint64_t n) {
  uint64_t *idx = malloc((n != 0 ? n : 1) * sizeof(uint64_t));
  if (idx != NULL) {
    for (uint64_t i = 0; i < n; ++i) {
      idx[i] = i;
    }
  }
  return idx;
}

static accel_status_t read_metadata(cursor_t *c, accel_gguf_t *g) {
  // Each entry takes at least a length, one key byte, a type and one value
  // byte: that bounds the count before anything is allocated.
  if (g->kv_count > remaining(c) / 14) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: %llu metadata entries cannot fit in a file of "
                       "%llu bytes",
                       (unsigned long long)g->kv_count,
                       (unsigned long long)c->size);
  }
  g->kvs = calloc(g->kv_count != 0 ? g->kv_count : 1, sizeof(kv_entry_t));
  if (g->kvs == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "GGUF: cannot allocate %llu metadata entries",
                       (unsigned long long)g->kv_count);
  }
  for (uint64_t i = 0; i < g->kv_count; ++i) {
    g->kvs[i].value.entry = i;
    ACCEL_RETURN_IF_ERROR(read_kv(c, i, &g->kvs[i]));
  }
  g->kv_by_key = identity_index(g->kv_count);
  if (g->kv_by_key == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "GGUF: key index");
  }
  qsort_r(g->kv_by_key, g->kv_count, sizeof(uint64_t), compare_kv, g->kvs);
  for (uint64_t i = 1; i < g->kv_count; ++i) {
    const kv_entry_t *e = &g->kvs[g->kv_by_key[i]];
    if (string_compare(&g->kvs[g->kv_by_key[i - 1]].key, &e->key) == 0) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "GGUF: metadata key \"%.*s\" appears twice",
                         e->key.size > 64 ? 64 : (int)e->key.size,
                         e->key.data);
    }
  }
  return ACCEL_OK;
}

static const kv_entry_t *find_entry(const accel_gguf_t *g, const char *key);

static accel_status_t read_alignment(accel_gguf_t *g) {
  g->alignment = GGUF_DEFAULT_ALIGNMENT;
  const kv_entry_t *e = find_entry(g, "general.alignment");
  if (e == NULL) {
    return ACCEL_OK;
  }
  accel_gguf_value_t v = e->value;
  if (v.type != ACCEL_GGUF_VALUE_UINT32) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: general.alignment is a %s, not a uint32",
                       value_type_name(v.type));
  }
  uint64_t a = v.scalar.u64;
  if (a == 0 || (a & (a - 1)) != 0 || a > GGUF_MAX_ALIGNMENT) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: general.alignment %llu is not a power of two "
                       "between 1 and %u",
                       (unsigned long long)a, GGUF_MAX_ALIGNMENT);
  }
  g->alignment = (uint32_t)a;
  return ACCEL_OK;
}

// Reads the description of tensor |index|; its offset is still relative to
// the data section (read_tensors places it).
static accel_status_t read_tensor_info(cursor_t *c, const accel_gguf_t *g,
                                       uint64_t index,
                                       accel_gguf_tensor_t *t) {
  uint64_t at = c->pos;
  ACCEL_RETURN_IF_ERROR(read_string(c, &t->name, "tensor name"));
  const int name_len = t->name.size > 64 ? 64 : (int)t->name.size;
  if (t->name.size == 0 || t->name.size > ACCEL_GGUF_MAX_NAME) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: tensor %llu at offset %llu: name of %llu bytes "
                       "(1 to %d allowed)",
                       (unsigned long long)index, (unsigned long long)at,
                       (unsigned long long)t->name.size, ACCEL_GGUF_MAX_NAME);
  }
  ACCEL_RETURN_IF_ERROR(check_no_nul(&t->name, "tensor name", at));
  ACCEL_RETURN_IF_ERROR(read_u32(c, &t->n_dims, "tensor dimension count"));
  if (t->n_dims == 0 || t->n_dims > ACCEL_GGUF_MAX_DIMS) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: tensor \"%.*s\": %u dimensions (1 to %d "
                       "allowed)",
                       name_len, t->name.data, t->n_dims, ACCEL_GGUF_MAX_DIMS);
  }
  uint64_t elements = 1;
  bool overflow = false;
  for (uint32_t d = 0; d < ACCEL_GGUF_MAX_DIMS; ++d) {
    t->dims[d] = 1;
    if (d < t->n_dims) {
      ACCEL_RETURN_IF_ERROR(read_u64(c, &t->dims[d], "tensor dimension"));
      if (t->dims[d] > (uint64_t)INT64_MAX) {
        return accel_error(ACCEL_ERROR_FORMAT,
                           "GGUF: tensor \"%.*s\": dimension %u is %llu "
                           "(negative as ggml reads it)",
                           name_len, t->name.data, d,
                           (unsigned long long)t->dims[d]);
      }
      overflow |= __builtin_mul_overflow(elements, t->dims[d], &elements);
    }
  }
  if (overflow || elements > (uint64_t)INT64_MAX) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: tensor \"%.*s\": the element count overflows",
                       name_len, t->name.data);
  }
  t->element_count = elements;
  ACCEL_RETURN_IF_ERROR(read_u32(c, &t->type, "tensor type"));
  uint32_t block_elements = 0, block_bytes = 0;
  if (accel_gguf_type_block(t->type, &block_elements, &block_bytes) !=
      ACCEL_OK) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "GGUF: tensor \"%.*s\" has type %s (%u), which the "
                       "reader does not support",
                       name_len, t->name.data, accel_gguf_type_name(t->type),
                       t->type);
  }
  if (t->dims[0] % block_elements != 0) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: tensor \"%.*s\": first dimension %llu is not a "
                       "multiple of the %s block (%u elements)",
                       name_len, t->name.data,
                       (unsigned long long)t->dims[0],
                       accel_gguf_type_name(t->type), block_elements);
  }
  if (__builtin_mul_overflow(elements / block_elements, (uint64_t)block_bytes,
                             &t->size_bytes)) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: tensor \"%.*s\": its size overflows", name_len,
                       t->name.data);
  }
  ACCEL_RETURN_IF_ERROR(read_u64(c, &t->file_offset, "tensor offset"));
  if (t->file_offset % g->alignment != 0) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: tensor \"%.*s\": offset %llu is not a multiple "
                       "of the alignment %u",
                       name_len, t->name.data,
                       (unsigned long long)t->file_offset, g->alignment);
  }
  return ACCEL_OK;
}

static accel_status_t check_tensor_names(accel_gguf_t *g) {
  g->tensor_by_name = identity_index(g->tensor_count);
  if (g->tensor_by_name == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "GGUF: tensor index");
  }
  qsort_r(g->tensor_by_name, g->tensor_count, sizeof(uint64_t),
          compare_tensor_name, g->tensors);
  for (uint64_t i = 1; i < g->tensor_count; ++i) {
    const accel_gguf_tensor_t *t = &g->tensors[g->tensor_by_name[i]];
    if (string_compare(&g->tensors[g->tensor_by_name[i - 1]].name,
                       &t->name) == 0) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "GGUF: tensor name \"%.*s\" appears twice",
                         (int)t->name.size, t->name.data);
    }
  }
  return ACCEL_OK;
}

// Places every tensor in the data section and checks that each lies inside
// the file and that no two overlap.
static accel_status_t place_tensors(accel_gguf_t *g, uint64_t data_start) {
  for (uint64_t i = 0; i < g->tensor_count; ++i) {
    accel_gguf_tensor_t *t = &g->tensors[i];
    uint64_t start, end;
    if (__builtin_add_overflow(data_start, t->file_offset, &start) ||
        __builtin_add_overflow(start, t->size_bytes, &end) || end > g->size) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "GGUF: tensor \"%.*s\" (%llu bytes at data offset "
                         "%llu) extends past the end of the file (%llu "
                         "bytes, data section at %llu)",
                         (int)t->name.size, t->name.data,
                         (unsigned long long)t->size_bytes,
                         (unsigned long long)t->file_offset,
                         (unsigned long long)g->size,
                         (unsigned long long)data_start);
    }
    t->file_offset = start;
    t->data = g->data + start;
  }
  uint64_t *by_offset = identity_index(g->tensor_count);
  if (by_offset == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "GGUF: offset index");
  }
  qsort_r(by_offset, g->tensor_count, sizeof(uint64_t), compare_tensor_offset,
          g->tensors);
  accel_status_t st = ACCEL_OK;
  for (uint64_t i = 1; i < g->tensor_count && st == ACCEL_OK; ++i) {
    const accel_gguf_tensor_t *a = &g->tensors[by_offset[i - 1]];
    const accel_gguf_tensor_t *b = &g->tensors[by_offset[i]];
    if (a->file_offset + a->size_bytes > b->file_offset) {
      st = accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: tensors \"%.*s\" and \"%.*s\" overlap at file "
                       "offset %llu",
                       (int)a->name.size, a->name.data, (int)b->name.size,
                       b->name.data, (unsigned long long)b->file_offset);
    }
  }
  free(by_offset);
  return st;
}

static accel_status_t read_tensors(cursor_t *c, accel_gguf_t *g) {
  // Each description takes at least 8 + 1 + 4 + 8 + 4 + 8 bytes.
  if (g->tensor_count > remaining(c) / 33) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: %llu tensors cannot fit in a file of %llu "
                       "bytes",
                       (unsigned long long)g->tensor_count,
                       (unsigned long long)c->size);
  }
  g->tensors = calloc(g->tensor_count != 0 ? g->tensor_count : 1,
                      sizeof(accel_gguf_tensor_t));
  if (g->tensors == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "GGUF: cannot allocate %llu tensors",
                       (unsigned long long)g->tensor_count);
  }
  for (uint64_t i = 0; i < g->tensor_count; ++i) {
    ACCEL_RETURN_IF_ERROR(read_tensor_info(c, g, i, &g->tensors[i]));
  }
  ACCEL_RETURN_IF_ERROR(check_tensor_names(g));
  uint64_t data_start =
      (c->pos + g->alignment - 1) / g->alignment * g->alignment;
  return place_tensors(g, data_start);
}

static accel_status_t read_header(cursor_t *c, accel_gguf_t *g) {
  uint32_t magic = 0;
  ACCEL_RETURN_IF_ERROR(read_u32(c, &magic, "magic"));
  if (magic != GGUF_MAGIC) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "not a GGUF file: magic 0x%08x, expected \"GGUF\"",
                       magic);
  }
  ACCEL_RETURN_IF_ERROR(read_u32(c, &g->version, "version"));
  if (g->version == 0x02000000u || g->version == 0x03000000u) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "GGUF: the file is big-endian (version %u byte-"
                       "swapped); only little-endian files are read",
                       __builtin_bswap32(g->version));
  }
  if (g->version != 2 && g->version != 3) {
    return accel_error(ACCEL_ERROR_VERSION,
                       "GGUF: version %u; versions 2 and 3 are read",
                       g->version);
  }
  ACCEL_RETURN_IF_ERROR(read_u64(c, &g->tensor_count, "tensor count"));
  return read_u64(c, &g->kv_count, "metadata entry count");
}

accel_status_t accel_gguf_open_memory(const void *data, size_t size,
                                      accel_gguf_t **out) {
  ACCEL_CHECK_ARG(data != NULL || size == 0, "data (NULL)");
  ACCEL_CHECK_ARG(out != NULL, "out (NULL)");
  accel_gguf_t *g = calloc(1, sizeof(*g));
  if (g == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "GGUF: cannot allocate");
  }
  g->data = data;
  g->size = size;
  cursor_t c = {.data = data, .size = size};
  accel_status_t st = read_header(&c, g);
  if (st == ACCEL_OK) {
    st = read_metadata(&c, g);
  }
  if (st == ACCEL_OK) {
    st = read_alignment(g);
  }
  if (st == ACCEL_OK) {
    st = read_tensors(&c, g);
  }
  if (st != ACCEL_OK) {
    accel_gguf_close(g);
    return st;
  }
  *out = g;
  return ACCEL_OK;
}

bool accel_gguf_file_is_gguf(const char *path) {
  if (path == NULL) {
    return false;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return false;
  }
  struct stat sb;
  uint32_t magic = 0;
  bool yes = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
             pread(fd, &magic, 4, 0) == 4 && magic == GGUF_MAGIC;
  close(fd);
  return yes;
}

accel_status_t accel_gguf_open_file(const char *path, accel_gguf_t **out) {
  ACCEL_CHECK_ARG(path != NULL, "path (NULL)");
  ACCEL_CHECK_ARG(out != NULL, "out (NULL)");
  // O_NONBLOCK: a FIFO must not block the open.
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return accel_error(errno == ENOENT ? ACCEL_ERROR_NOT_FOUND : ACCEL_ERROR_IO,
                       "cannot open %s: %s", path, strerror(errno));
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return accel_error(ACCEL_ERROR_IO, "%s is not a regular file", path);
  }
  uint64_t size = (uint64_t)sb.st_size;
  // Refuse a wrong magic before mapping (a large file of something else).
  uint32_t magic = 0;
  if (size < 4 || pread(fd, &magic, 4, 0) != 4 || magic != GGUF_MAGIC) {
    close(fd);
    return accel_error(ACCEL_ERROR_FORMAT,
                       "%s is not a GGUF file (no \"GGUF\" magic)", path);
  }
  void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    return accel_error(ACCEL_ERROR_IO, "cannot map %s (%llu bytes): %s", path,
                       (unsigned long long)size, strerror(e));
  }
  accel_gguf_t *g = NULL;
  accel_status_t st = accel_gguf_open_memory(p, size, &g);
  if (st != ACCEL_OK) {
    munmap(p, size);
    return accel_error_context(st, "%s", path);
  }
  g->mapped = true;
  *out = g;
  return ACCEL_OK;
}

void accel_gguf_close(accel_gguf_t *g) {
  if (g == NULL) {
    return;
  }
  if (g->kvs != NULL) {
    for (uint64_t i = 0; i < g->kv_count; ++i) {
      free(g->kvs[i].string_offsets);
    }
  }
  free(g->kvs);
  free(g->kv_by_key);
  free(g->tensors);
  free(g->tensor_by_name);
  if (g->mapped) {
    munmap((void *)g->data, g->size);
  }
  free(g);
}

uint32_t accel_gguf_version(const accel_gguf_t *g) {
  return g != NULL ? g->version : 0;
}
uint32_t accel_gguf_alignment(const accel_gguf_t *g) {
  return g != NULL ? g->alignment : 0;
}
uint64_t accel_gguf_kv_count(const accel_gguf_t *g) {
  return g != NULL ? g->kv_count : 0;
}
uint64_t accel_gguf_tensor_count(const accel_gguf_t *g) {
  return g != NULL ? g->tensor_count : 0;
}

accel_status_t accel_gguf_kv(const accel_gguf_t *g, uint64_t index,
                             accel_gguf_string_t *out_key,
                             accel_gguf_value_t *out_value) {
  ACCEL_CHECK_ARG(g != NULL, "gguf (NULL)");
  ACCEL_CHECK_ARG(out_key != NULL && out_value != NULL, "output (NULL)");
  if (index >= g->kv_count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "metadata entry %llu of %llu",
                       (unsigned long long)index,
                       (unsigned long long)g->kv_count);
  }
  *out_key = g->kvs[index].key;
  *out_value = g->kvs[index].value;
  return ACCEL_OK;
}

// Binary search of |index| (|n| indices into |base|, items of |stride| bytes
// sorted by the accel_gguf_string_t at |name_offset| in each) for |name|.
static const void *find_sorted(const uint64_t *index, uint64_t n,
                               const char *name, const void *base,
                               size_t stride, size_t name_offset) {
  accel_gguf_string_t want = {.data = name, .size = strlen(name)};
  uint64_t lo = 0, hi = n;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    const char *item = (const char *)base + index[mid] * stride;
    const accel_gguf_string_t *s =
        (const accel_gguf_string_t *)(item + name_offset);
    int r = string_compare(s, &want);
    if (r == 0) {
      return item;
    }
    if (r < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return NULL;
}

static const kv_entry_t *find_entry(const accel_gguf_t *g, const char *key) {
  return find_sorted(g->kv_by_key, g->kv_count, key, g->kvs,
                     sizeof(kv_entry_t), offsetof(kv_entry_t, key));
}

accel_status_t accel_gguf_find_kv(const accel_gguf_t *g, const char *key,
                                  accel_gguf_value_t *out_value) {
  ACCEL_CHECK_ARG(g != NULL, "gguf (NULL)");
  ACCEL_CHECK_ARG(key != NULL, "key (NULL)");
  ACCEL_CHECK_ARG(out_value != NULL, "out_value (NULL)");
  const kv_entry_t *e = find_entry(g, key);
  if (e == NULL) {
    return accel_error(ACCEL_ERROR_NOT_FOUND, "GGUF: no metadata key \"%s\"",
                       key);
  }
  *out_value = e->value;
  return ACCEL_OK;
}

static bool is_unsigned(uint32_t t) {
  return t == ACCEL_GGUF_VALUE_UINT8 || t == ACCEL_GGUF_VALUE_UINT16 ||
         t == ACCEL_GGUF_VALUE_UINT32 || t == ACCEL_GGUF_VALUE_UINT64 ||
         t == ACCEL_GGUF_VALUE_BOOL;
}

static bool is_signed(uint32_t t) {
  return t == ACCEL_GGUF_VALUE_INT8 || t == ACCEL_GGUF_VALUE_INT16 ||
         t == ACCEL_GGUF_VALUE_INT32 || t == ACCEL_GGUF_VALUE_INT64;
}

accel_status_t accel_gguf_find_u64(const accel_gguf_t *g, const char *key,
                                   uint64_t *out_value) {
  ACCEL_CHECK_ARG(out_value != NULL, "out_value (NULL)");
  accel_gguf_value_t v;
  ACCEL_RETURN_IF_ERROR(accel_gguf_find_kv(g, key, &v));
  if (is_unsigned(v.type)) {
    *out_value = v.scalar.u64;
    return ACCEL_OK;
  }
  if (is_signed(v.type) && v.scalar.i64 >= 0) {
    *out_value = (uint64_t)v.scalar.i64;
    return ACCEL_OK;
  }
  return accel_error(ACCEL_ERROR_FORMAT,
                     "GGUF: key \"%s\" is a %s, not a non-negative integer",
                     key, value_type_name(v.type));
}

accel_status_t accel_gguf_find_f64(const accel_gguf_t *g, const char *key,
                                   double *out_value) {
  ACCEL_CHECK_ARG(out_value != NULL, "out_value (NULL)");
  accel_gguf_value_t v;
  ACCEL_RETURN_IF_ERROR(accel_gguf_find_kv(g, key, &v));
  if (v.type == ACCEL_GGUF_VALUE_FLOAT32 || v.type == ACCEL_GGUF_VALUE_FLOAT64) {
    *out_value = v.scalar.f64;
  } else if (is_unsigned(v.type)) {
    *out_value = (double)v.scalar.u64;
  } else if (is_signed(v.type)) {
    *out_value = (double)v.scalar.i64;
  } else {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: key \"%s\" is a %s, not a number", key,
                       value_type_name(v.type));
  }
  return ACCEL_OK;
}

accel_status_t accel_gguf_find_string(const accel_gguf_t *g, const char *key,
                                      accel_gguf_string_t *out_value) {
  ACCEL_CHECK_ARG(out_value != NULL, "out_value (NULL)");
  accel_gguf_value_t v;
  ACCEL_RETURN_IF_ERROR(accel_gguf_find_kv(g, key, &v));
  if (v.type != ACCEL_GGUF_VALUE_STRING) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "GGUF: key \"%s\" is a %s, not a string", key,
                       value_type_name(v.type));
  }
  *out_value = v.scalar.str;
  return ACCEL_OK;
}

accel_status_t accel_gguf_array_string(const accel_gguf_t *g,
                                       const accel_gguf_value_t *array,
                                       uint64_t index,
                                       accel_gguf_string_t *out) {
  ACCEL_CHECK_ARG(g != NULL, "gguf (NULL)");
  ACCEL_CHECK_ARG(array != NULL, "array (NULL)");
  ACCEL_CHECK_ARG(out != NULL, "out (NULL)");
  if (array->type != ACCEL_GGUF_VALUE_ARRAY ||
      array->array_type != ACCEL_GGUF_VALUE_STRING) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "GGUF: the value is a %s, not an array of strings",
                       array->type == ACCEL_GGUF_VALUE_ARRAY
                           ? value_type_name(array->array_type)
                           : value_type_name(array->type));
  }
  // The value is a copy: its entry must be this file's string array.
  const kv_entry_t *e =
      array->entry < g->kv_count ? &g->kvs[array->entry] : NULL;
  if (e == NULL || e->string_offsets == NULL ||
      e->value.array_data != array->array_data) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "GGUF: the array is not one of this file's");
  }
  if (index >= e->value.array_count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "GGUF: string %llu of an array of %llu",
                       (unsigned long long)index,
                       (unsigned long long)e->value.array_count);
  }
  uint64_t at = e->string_offsets[index];
  uint64_t n;
  memcpy(&n, g->data + at, 8);
  out->data = (const char *)g->data + at + 8;
  out->size = n;
  return ACCEL_OK;
}

accel_status_t accel_gguf_tensor(const accel_gguf_t *g, uint64_t index,
                                 accel_gguf_tensor_t *out) {
  ACCEL_CHECK_ARG(g != NULL, "gguf (NULL)");
  ACCEL_CHECK_ARG(out != NULL, "out (NULL)");
  if (index >= g->tensor_count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT, "tensor %llu of %llu",
                       (unsigned long long)index,
                       (unsigned long long)g->tensor_count);
  }
  *out = g->tensors[index];
  return ACCEL_OK;
}

accel_status_t accel_gguf_find_tensor(const accel_gguf_t *g, const char *name,
                                      accel_gguf_tensor_t *out) {
  ACCEL_CHECK_ARG(g != NULL, "gguf (NULL)");
  ACCEL_CHECK_ARG(name != NULL, "name (NULL)");
  ACCEL_CHECK_ARG(out != NULL, "out (NULL)");
  const accel_gguf_tensor_t *t = find_sorted(
      g->tensor_by_name, g->tensor_count, name, g->tensors,
      sizeof(accel_gguf_tensor_t), offsetof(accel_gguf_tensor_t, name));
  if (t == NULL) {
    return accel_error(ACCEL_ERROR_NOT_FOUND, "GGUF: no tensor \"%s\"", name);
  }
  *out = *t;
  return ACCEL_OK;
}
