// The GGUF reader against files this test writes itself (an independent
// writer of the format as docs/gguf.md gives it): random valid files read
// back field by field, every truncation and each broken rule refused with
// its message, and the file entry points.
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_support.h"

#include "accel/gguf.h"
#include "gguf_out.h"

// What a random file holds, to compare with what the reader returns.
enum { MAX_KV = 24, MAX_TENSORS = 12, MAX_ARRAY = 40 };

typedef struct want_kv {
  char key[48];
  uint32_t type, array_type;
  uint64_t count;
  uint8_t scalar[8];  // raw bytes of a scalar
  char str[32];       // a string value
  uint8_t array[MAX_ARRAY * 8];
  char strings[MAX_ARRAY][16];
} want_kv_t;

typedef struct want_tensor {
  char name[64];
  uint32_t type, n_dims;
  uint64_t dims[4];
  uint64_t size, offset;  // offset relative to the data section
  uint8_t fill;           // every byte of the data
} want_tensor_t;

typedef struct want_file {
  uint32_t version, alignment;
  bool explicit_alignment;
  uint32_t kv_count, tensor_count;
  want_kv_t kv[MAX_KV];
  want_tensor_t t[MAX_TENSORS];
} want_file_t;

static const uint32_t k_scalar_bytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
// Supported tensor types with their blocks, written down here from ggml.
static const struct {
  uint32_t type, block_elements, block_bytes;
  const char *name;
} k_tensor_types[] = {
    {0, 1, 4, "F32"},       {1, 1, 2, "F16"},       {2, 32, 18, "Q4_0"},
    {3, 32, 20, "Q4_1"},    {6, 32, 22, "Q5_0"},    {7, 32, 24, "Q5_1"},
    {8, 32, 34, "Q8_0"},    {9, 32, 36, "Q8_1"},    {10, 256, 84, "Q2_K"},
    {11, 256, 110, "Q3_K"}, {12, 256, 144, "Q4_K"}, {13, 256, 176, "Q5_K"},
    {14, 256, 210, "Q6_K"}, {15, 256, 292, "Q8_K"}, {20, 32, 18, "IQ4_NL"},
    {23, 256, 136, "IQ4_XS"}, {24, 1, 1, "I8"},     {25, 1, 2, "I16"},
    {26, 1, 4, "I32"},      {27, 1, 8, "I64"},      {28, 1, 8, "F64"},
    {30, 1, 2, "BF16"},
};
#define TENSOR_TYPE_COUNT (sizeof(k_tensor_types) / sizeof(k_tensor_types[0]))

static void random_file(test_rng_t *rng, want_file_t *w) {
  memset(w, 0, sizeof(*w));
  w->version = test_rng_range(rng, 0, 1) ? 3 : 2;
  w->explicit_alignment = test_rng_range(rng, 0, 2) != 0;
  w->alignment = w->explicit_alignment ? 1u << test_rng_range(rng, 0, 7) : 32;
  w->kv_count = (uint32_t)test_rng_range(rng, 0, MAX_KV - 1);
  for (uint32_t i = 0; i < w->kv_count; ++i) {
    want_kv_t *k = &w->kv[i];
    snprintf(k->key, sizeof(k->key), "test.key%u.%llu", i,
             (unsigned long long)test_rng_range(rng, 0, 1u << 30));
    k->type = (uint32_t)test_rng_range(rng, 0, 12);
    if (k->type == 9) {
      do {
        k->array_type = (uint32_t)test_rng_range(rng, 0, 12);
      } while (k->array_type == 9);
      k->count = test_rng_range(rng, 0, MAX_ARRAY);
      for (size_t b = 0; b < sizeof(k->array); ++b) {
        k->array[b] = (uint8_t)test_rng_next(rng);
      }
      for (uint64_t e = 0; e < k->count; ++e) {
        size_t len = test_rng_range(rng, 0, sizeof(k->strings[e]) - 1);
        for (size_t c = 0; c < len; ++c) {
          k->strings[e][c] = (char)test_rng_range(rng, 'a', 'z');
        }
      }
      if (k->array_type == 7) {  // bools are 0 or 1
        for (uint64_t e = 0; e < k->count; ++e) {
          k->array[e] &= 1;
        }
      }
    } else if (k->type == 8) {
      size_t len = test_rng_range(rng, 0, sizeof(k->str) - 1);
      for (size_t c = 0; c < len; ++c) {
        k->str[c] = (char)test_rng_range(rng, 32, 126);
      }
    } else {
      for (size_t b = 0; b < 8; ++b) {
        k->scalar[b] = (uint8_t)test_rng_next(rng);
      }
      if (k->type == 7) {
        k->scalar[0] &= 1;
      }
    }
  }
  w->tensor_count = (uint32_t)test_rng_range(rng, 1, MAX_TENSORS);
  for (uint32_t i = 0; i < w->tensor_count; ++i) {
    want_tensor_t *t = &w->t[i];
    snprintf(t->name, sizeof(t->name), "blk.%u.weight", i);
    uint32_t ti = (uint32_t)test_rng_range(rng, 0, TENSOR_TYPE_COUNT - 1);
    t->type = k_tensor_types[ti].type;
    t->n_dims = (uint32_t)test_rng_range(rng, 1, 4);
    uint64_t elements = 1;
    for (uint32_t d = 0; d < 4; ++d) {
      t->dims[d] = d < t->n_dims ? test_rng_range(rng, 1, 5) : 1;
      if (d == 0) {
        t->dims[0] *= k_tensor_types[ti].block_elements;
      }
      elements *= t->dims[d];
    }
    t->size = elements / k_tensor_types[ti].block_elements *
              k_tensor_types[ti].block_bytes;
    t->fill = (uint8_t)test_rng_next(rng);
  }
  // Data laid out in a shuffled order, with random gaps, the last ending at
  // the end of the file.
  uint32_t order[MAX_TENSORS];
  for (uint32_t i = 0; i < w->tensor_count; ++i) {
    order[i] = i;
  }
  for (uint32_t i = w->tensor_count; i > 1; --i) {
    uint32_t j = (uint32_t)test_rng_range(rng, 0, i - 1);
    uint32_t x = order[i - 1];
    order[i - 1] = order[j];
    order[j] = x;
  }
  uint64_t at = 0;
  for (uint32_t i = 0; i < w->tensor_count; ++i) {
    want_tensor_t *t = &w->t[order[i]];
    at += test_rng_range(rng, 0, 2) * w->alignment;
    t->offset = at;
    at = (at + t->size + w->alignment - 1) / w->alignment * w->alignment;
  }
}

static void write_file(const want_file_t *w, out_t *o) {
  o->n = 0;
  put(o, "GGUF", 4);
  put_u32(o, w->version);
  put_u64(o, w->tensor_count);
  put_u64(o, w->kv_count + (w->explicit_alignment ? 1 : 0));
  if (w->explicit_alignment) {
    put_cstr(o, "general.alignment");
    put_u32(o, 4);
    put_u32(o, w->alignment);
  }
  for (uint32_t i = 0; i < w->kv_count; ++i) {
    const want_kv_t *k = &w->kv[i];
    put_cstr(o, k->key);
    put_u32(o, k->type);
    if (k->type == 9) {
      put_u32(o, k->array_type);
      put_u64(o, k->count);
      for (uint64_t e = 0; e < k->count; ++e) {
        if (k->array_type == 8) {
          put_cstr(o, k->strings[e]);
        } else {
          put(o, k->array + e * k_scalar_bytes[k->array_type],
              k_scalar_bytes[k->array_type]);
        }
      }
    } else if (k->type == 8) {
      put_cstr(o, k->str);
    } else {
      put(o, k->scalar, k_scalar_bytes[k->type]);
    }
  }
  for (uint32_t i = 0; i < w->tensor_count; ++i) {
    const want_tensor_t *t = &w->t[i];
    put_cstr(o, t->name);
    put_u32(o, t->n_dims);
    for (uint32_t d = 0; d < t->n_dims; ++d) {
      put_u64(o, t->dims[d]);
    }
    put_u32(o, t->type);
    put_u64(o, t->offset);
  }
  pad_to(o, w->alignment);
  size_t data_start = o->n;
  uint64_t end = 0;
  for (uint32_t i = 0; i < w->tensor_count; ++i) {
    if (w->t[i].offset + w->t[i].size > end) {
      end = w->t[i].offset + w->t[i].size;
    }
  }
  uint8_t *zeros = calloc(1, end + 1);
  put(o, zeros, end);
  free(zeros);
  for (uint32_t i = 0; i < w->tensor_count; ++i) {
    memset(o->p + data_start + w->t[i].offset, w->t[i].fill, w->t[i].size);
  }
}

static bool str_is(accel_gguf_string_t s, const char *want) {
  return s.size == strlen(want) && memcmp(s.data, want, s.size) == 0;
}

// The scalar as the reader widens it, computed here from the raw bytes.
static void check_scalar(const want_kv_t *k, const accel_gguf_value_t *v) {
  switch (k->type) {
    case 0: case 7: assert_int_equal(v->scalar.u64, k->scalar[0]); break;
    case 1: assert_int_equal(v->scalar.i64, (int8_t)k->scalar[0]); break;
    case 2: {
      uint16_t x; memcpy(&x, k->scalar, 2);
      assert_int_equal(v->scalar.u64, x);
      break;
    }
    case 3: {
      int16_t x; memcpy(&x, k->scalar, 2);
      assert_int_equal(v->scalar.i64, x);
      break;
    }
    case 4: {
      uint32_t x; memcpy(&x, k->scalar, 4);
      assert_int_equal(v->scalar.u64, x);
      break;
    }
    case 5: {
      int32_t x; memcpy(&x, k->scalar, 4);
      assert_int_equal(v->scalar.i64, x);
      break;
    }
    case 6: {
      float x; memcpy(&x, k->scalar, 4);
      double y = v->scalar.f64;
      assert_memory_equal(&(double){x}, &y, 8);  // NaNs compare by bits
      break;
    }
    case 10: case 11: assert_memory_equal(&v->scalar.u64, k->scalar, 8); break;
    default: assert_memory_equal(&v->scalar.f64, k->scalar, 8); break;
  }
}

static void check_file(const want_file_t *w, const out_t *o,
                       const accel_gguf_t *g) {
  assert_int_equal(accel_gguf_version(g), w->version);
  assert_int_equal(accel_gguf_alignment(g), w->alignment);
  uint32_t skip = w->explicit_alignment ? 1 : 0;
  assert_int_equal(accel_gguf_kv_count(g), w->kv_count + skip);
  assert_int_equal(accel_gguf_tensor_count(g), w->tensor_count);
  for (uint32_t i = 0; i < w->kv_count; ++i) {
    const want_kv_t *k = &w->kv[i];
    accel_gguf_string_t key;
    accel_gguf_value_t v, found;
    assert_accel_ok(accel_gguf_kv(g, i + skip, &key, &v));
    assert_true(str_is(key, k->key));
    assert_accel_ok(accel_gguf_find_kv(g, k->key, &found));
    assert_int_equal(found.entry, i + skip);
    assert_int_equal(v.type, k->type);
    if (k->type == 9) {
      assert_int_equal(v.array_type, k->array_type);
      assert_int_equal(v.array_count, k->count);
      for (uint64_t e = 0; e < k->count; ++e) {
        if (k->array_type == 8) {
          accel_gguf_string_t s;
          assert_accel_ok(accel_gguf_array_string(g, &found, e, &s));
          assert_true(str_is(s, k->strings[e]));
        } else {
          uint32_t b = k_scalar_bytes[k->array_type];
          assert_memory_equal((const uint8_t *)v.array_data + e * b,
                              k->array + e * b, b);
        }
      }
      accel_gguf_string_t s;
      assert_accel_status(accel_gguf_array_string(g, &v, k->count, &s),
                          ACCEL_ERROR_INVALID_ARGUMENT);
    } else if (k->type == 8) {
      assert_true(str_is(v.scalar.str, k->str));
      accel_gguf_string_t s;
      assert_accel_ok(accel_gguf_find_string(g, k->key, &s));
      assert_true(str_is(s, k->str));
    } else {
      check_scalar(k, &v);
    }
  }
  for (uint32_t i = 0; i < w->tensor_count; ++i) {
    const want_tensor_t *t = &w->t[i];
    accel_gguf_tensor_t got, found;
    assert_accel_ok(accel_gguf_tensor(g, i, &got));
    assert_accel_ok(accel_gguf_find_tensor(g, t->name, &found));
    assert_memory_equal(&got, &found, sizeof(got));
    assert_true(str_is(got.name, t->name));
    assert_int_equal(got.type, t->type);
    assert_int_equal(got.n_dims, t->n_dims);
    uint64_t elements = 1;
    for (uint32_t d = 0; d < 4; ++d) {
      assert_int_equal(got.dims[d], t->dims[d]);
      elements *= t->dims[d];
    }
    assert_int_equal(got.element_count, elements);
    assert_int_equal(got.size_bytes, t->size);
    assert_int_equal(got.file_offset % w->alignment, 0);
    assert_ptr_equal(got.data, o->p + got.file_offset);
    for (uint64_t b = 0; b < t->size; ++b) {
      if (((const uint8_t *)got.data)[b] != t->fill) {
        fail_msg("tensor %s byte %llu", t->name, (unsigned long long)b);
      }
    }
  }
}

static void test_random_files_read_back_exactly(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  out_t o = {0};
  for (int round = 0; round < 200; ++round) {
    want_file_t *w = calloc(1, sizeof(*w));
    random_file(&rng, w);
    write_file(w, &o);
    accel_gguf_t *g = NULL;
    accel_status_t st = accel_gguf_open_memory(o.p, o.n, &g);
    if (st != ACCEL_OK) {
      fail_msg("round %d: %s: %s", round, accel_status_name(st),
               accel_last_error());
    }
    check_file(w, &o, g);
    accel_gguf_value_t v;
    assert_accel_status(accel_gguf_find_kv(g, "no.such.key", &v),
                        ACCEL_ERROR_NOT_FOUND);
    accel_gguf_tensor_t t;
    assert_accel_status(accel_gguf_find_tensor(g, "no.such.tensor", &t),
                        ACCEL_ERROR_NOT_FOUND);
    accel_gguf_close(g);
    free(w);
  }
  free(o.p);
}

// Every prefix of a valid file is refused as FORMAT (its last tensor ends
// at the end of the file, so no prefix is whole), never read past.
static void test_every_truncation_is_refused(void **state) {
  (void)state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  out_t o = {0};
  for (int round = 0; round < 5; ++round) {
    want_file_t *w = calloc(1, sizeof(*w));
    random_file(&rng, w);
    write_file(w, &o);
    for (size_t n = 0; n < o.n; ++n) {
      // A fresh copy of exactly n bytes, so that ASan sees a read past it.
      uint8_t *copy = malloc(n != 0 ? n : 1);
      memcpy(copy, o.p, n);
      accel_gguf_t *g = (accel_gguf_t *)&rng;  // untouched on failure
      accel_status_t st = accel_gguf_open_memory(copy, n, &g);
      if (st != ACCEL_ERROR_FORMAT) {
        fail_msg("prefix of %zu of %zu bytes: %s (%s)", n, o.n,
                 accel_status_name(st), accel_last_error());
      }
      assert_ptr_equal(g, (accel_gguf_t *)&rng);
      assert_true(strlen(accel_last_error()) > 10);
      free(copy);
    }
    free(w);
  }
  free(o.p);
}

// A small valid file: one u32 key, one F32 tensor of 8 elements.
typedef struct small_file {
  uint32_t magic_version[2];
  uint64_t tensor_count, kv_count;
  const char *key;
  uint32_t value_type;
  uint64_t value;  // written with the type's width
  const char *name;
  uint32_t n_dims;
  uint64_t dims[5];
  uint32_t tensor_type;
  uint64_t offset;
  uint64_t data_bytes;
  const char *extra_key;  // a second entry (a string) when not NULL
  const char *second_tensor;  // a second F32 tensor of 8 at offset 0
} small_file_t;

static small_file_t small_file(void) {
  return (small_file_t){.magic_version = {0x46554747u, 3},
                        .tensor_count = 1,
                        .kv_count = 1,
                        .key = "general.alignment",
                        .value_type = 4,
                        .value = 32,
                        .name = "tok_embd.weight",
                        .n_dims = 1,
                        .dims = {8, 1, 1, 1, 1},
                        .tensor_type = 0,
                        .offset = 0,
                        .data_bytes = 32};
}

static void write_small(const small_file_t *f, out_t *o) {
  o->n = 0;
  put(o, f->magic_version, 8);
  put_u64(o, f->tensor_count);
  put_u64(o, f->kv_count);
  put_cstr(o, f->key);
  put_u32(o, f->value_type);
  if (f->value_type == 9) {  // an array of arrays
    put_u32(o, 9);
    put_u64(o, 1);
  } else {
    put(o, &f->value, f->value_type == 7 || f->value_type == 0 ? 1 : 4);
  }
  if (f->extra_key != NULL) {
    put_cstr(o, f->extra_key);
    put_u32(o, 8);
    put_cstr(o, "text");
  }
  put_cstr(o, f->name);
  put_u32(o, f->n_dims);
  for (uint32_t d = 0; d < f->n_dims && d < 5; ++d) {
    put_u64(o, f->dims[d]);
  }
  put_u32(o, f->tensor_type);
  put_u64(o, f->offset);
  if (f->second_tensor != NULL) {
    put_cstr(o, f->second_tensor);
    put_u32(o, 1);
    put_u64(o, 8);
    put_u32(o, 0);
    put_u64(o, 0);
  }
  pad_to(o, 32);
  uint8_t data[256] = {0};
  put(o, data, f->data_bytes);
}

static void expect_refused(const small_file_t *f, accel_status_t want,
                           const char *words) {
  out_t o = {0};
  write_small(f, &o);
  accel_gguf_t *g = NULL;
  accel_status_t st = accel_gguf_open_memory(o.p, o.n, &g);
  if (st != want || strstr(accel_last_error(), words) == NULL) {
    fail_msg("expected %s with \"%s\", got %s: %s", accel_status_name(want),
             words, accel_status_name(st), accel_last_error());
  }
  assert_null(g);
  free(o.p);
}

static void test_broken_rules_are_refused_by_name(void **state) {
  (void)state;
  out_t o = {0};
  small_file_t f = small_file();
  write_small(&f, &o);
  accel_gguf_t *g = NULL;
  assert_accel_ok(accel_gguf_open_memory(o.p, o.n, &g));
  accel_gguf_close(g);
  free(o.p);

  f = small_file();
  f.magic_version[0] = 0x46554746u;
  expect_refused(&f, ACCEL_ERROR_FORMAT, "not a GGUF file");
  f = small_file();
  f.magic_version[1] = 1;
  expect_refused(&f, ACCEL_ERROR_VERSION, "version 1");
  f.magic_version[1] = 0x03000000u;
  expect_refused(&f, ACCEL_ERROR_UNSUPPORTED, "big-endian");
  f = small_file();
  f.kv_count = 1ull << 40;
  expect_refused(&f, ACCEL_ERROR_FORMAT, "metadata entries cannot fit");
  f = small_file();
  f.tensor_count = 1ull << 40;
  expect_refused(&f, ACCEL_ERROR_FORMAT, "tensors cannot fit");
  f = small_file();
  f.value_type = 13;
  expect_refused(&f, ACCEL_ERROR_FORMAT, "unknown value type 13");
  f.value_type = 9;
  expect_refused(&f, ACCEL_ERROR_FORMAT, "array of arrays");
  f = small_file();
  f.key = "";
  expect_refused(&f, ACCEL_ERROR_FORMAT, "empty key");
  f = small_file();
  f.key = "flag";
  f.value_type = 7;
  f.value = 2;
  expect_refused(&f, ACCEL_ERROR_FORMAT, "neither 0 nor 1");
  f = small_file();
  f.value = 48;
  expect_refused(&f, ACCEL_ERROR_FORMAT, "general.alignment 48");
  f.value = 0;
  expect_refused(&f, ACCEL_ERROR_FORMAT, "general.alignment 0");
  f = small_file();
  f.value_type = 5;  // int32
  expect_refused(&f, ACCEL_ERROR_FORMAT, "general.alignment is a int32");
  f = small_file();
  f.key = "general.name";
  f.value_type = 4;
  f.extra_key = "general.name";
  f.kv_count = 2;
  expect_refused(&f, ACCEL_ERROR_FORMAT, "\"general.name\" appears twice");
  f = small_file();
  f.name = "";
  expect_refused(&f, ACCEL_ERROR_FORMAT, "name of 0 bytes");
  f.name = "a.name.that.is.longer.than.sixty.three.bytes.which.ggml.refuses.x";
  expect_refused(&f, ACCEL_ERROR_FORMAT, "name of 65 bytes (1 to 63 allowed)");
  f = small_file();
  f.n_dims = 0;
  expect_refused(&f, ACCEL_ERROR_FORMAT, "0 dimensions");
  f.n_dims = 5;
  expect_refused(&f, ACCEL_ERROR_FORMAT, "5 dimensions");
  f = small_file();
  f.dims[0] = 1ull << 63;
  expect_refused(&f, ACCEL_ERROR_FORMAT, "negative as ggml reads it");
  f = small_file();
  f.n_dims = 4;
  f.dims[0] = f.dims[1] = f.dims[2] = f.dims[3] = 1ull << 20;
  expect_refused(&f, ACCEL_ERROR_FORMAT, "element count overflows");
  f = small_file();
  f.tensor_type = 16;
  expect_refused(&f, ACCEL_ERROR_UNSUPPORTED, "type IQ2_XXS (16)");
  f.tensor_type = 99;
  expect_refused(&f, ACCEL_ERROR_UNSUPPORTED, "type unknown (99)");
  f = small_file();
  f.tensor_type = 8;  // Q8_0 needs 32 elements a block
  expect_refused(&f, ACCEL_ERROR_FORMAT, "not a multiple of the Q8_0 block");
  f = small_file();
  f.offset = 16;
  expect_refused(&f, ACCEL_ERROR_FORMAT, "offset 16 is not a multiple");
  f = small_file();
  f.data_bytes = 31;
  expect_refused(&f, ACCEL_ERROR_FORMAT, "extends past the end");
  f = small_file();
  f.offset = UINT64_MAX - 31;
  expect_refused(&f, ACCEL_ERROR_FORMAT, "extends past the end");
  f = small_file();
  f.tensor_count = 2;
  f.second_tensor = "tok_embd.weight";
  expect_refused(&f, ACCEL_ERROR_FORMAT, "\"tok_embd.weight\" appears twice");
  f.second_tensor = "output.weight";
  expect_refused(&f, ACCEL_ERROR_FORMAT, "overlap");
}

static void test_file_entry_points(void **state) {
  (void)state;
  char dir[] = "/tmp/accel-gguf-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128];
  accel_gguf_t *g = NULL;
  snprintf(path, sizeof(path), "%s/missing.gguf", dir);
  assert_accel_status(accel_gguf_open_file(path, &g), ACCEL_ERROR_NOT_FOUND);
  assert_accel_status(accel_gguf_open_file(dir, &g), ACCEL_ERROR_IO);
  assert_non_null(strstr(accel_last_error(), "not a regular file"));
  snprintf(path, sizeof(path), "%s/fifo", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  assert_accel_status(accel_gguf_open_file(path, &g), ACCEL_ERROR_IO);
  unlink(path);
  snprintf(path, sizeof(path), "%s/model.gguf", dir);
  out_t o = {0};
  small_file_t f = small_file();
  write_small(&f, &o);
  FILE *fp = fopen(path, "wb");
  assert_int_equal(fwrite(o.p, 1, o.n, fp), o.n);
  fclose(fp);
  assert_accel_ok(accel_gguf_open_file(path, &g));
  accel_gguf_tensor_t t;
  assert_accel_ok(accel_gguf_find_tensor(g, "tok_embd.weight", &t));
  assert_int_equal(t.size_bytes, 32);
  uint64_t alignment = 0;
  assert_accel_ok(accel_gguf_find_u64(g, "general.alignment", &alignment));
  assert_int_equal(alignment, 32);
  double fa = 0;
  assert_accel_ok(accel_gguf_find_f64(g, "general.alignment", &fa));
  assert_true(fa == 32.0);
  accel_gguf_string_t s;
  assert_accel_status(accel_gguf_find_string(g, "general.alignment", &s),
                      ACCEL_ERROR_FORMAT);
  assert_non_null(strstr(accel_last_error(), "is a uint32, not a string"));
  accel_gguf_close(g);
  // A file that is not GGUF is refused before it is mapped.
  fp = fopen(path, "wb");
  fputs("not a model", fp);
  fclose(fp);
  g = NULL;
  assert_accel_status(accel_gguf_open_file(path, &g), ACCEL_ERROR_FORMAT);
  assert_null(g);
  unlink(path);
  rmdir(dir);
  free(o.p);
}

static void test_misuse_is_refused(void **state) {
  (void)state;
  out_t o = {0};
  small_file_t f = small_file();
  write_small(&f, &o);
  accel_gguf_t *g = NULL;
  assert_accel_status(accel_gguf_open_memory(NULL, 8, &g),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_gguf_open_memory(o.p, o.n, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_gguf_open_file(NULL, &g),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_ok(accel_gguf_open_memory(o.p, o.n, &g));
  accel_gguf_string_t key;
  accel_gguf_value_t v;
  accel_gguf_tensor_t t;
  assert_accel_status(accel_gguf_kv(g, 1, &key, &v),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_gguf_kv(NULL, 0, &key, &v),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_gguf_tensor(g, 1, &t),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_gguf_find_kv(g, NULL, &v),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_ok(accel_gguf_kv(g, 0, &key, &v));
  accel_gguf_string_t s;
  assert_accel_status(accel_gguf_array_string(g, &v, 0, &s),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "not an array of strings"));
  // A forged array value that is not one of the file's.
  accel_gguf_value_t forged = {.type = ACCEL_GGUF_VALUE_ARRAY,
                               .array_type = ACCEL_GGUF_VALUE_STRING,
                               .array_count = 5,
                               .entry = 0};
  assert_accel_status(accel_gguf_array_string(g, &forged, 0, &s),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  forged.entry = 12345;
  assert_accel_status(accel_gguf_array_string(g, &forged, 0, &s),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_gguf_close(g);
  accel_gguf_close(NULL);
  free(o.p);
}

static void test_type_table(void **state) {
  (void)state;
  for (size_t i = 0; i < TENSOR_TYPE_COUNT; ++i) {
    uint32_t be = 0, bb = 0;
    assert_accel_ok(accel_gguf_type_block(k_tensor_types[i].type, &be, &bb));
    assert_int_equal(be, k_tensor_types[i].block_elements);
    assert_int_equal(bb, k_tensor_types[i].block_bytes);
    assert_string_equal(accel_gguf_type_name(k_tensor_types[i].type),
                        k_tensor_types[i].name);
  }
  uint32_t be, bb;
  assert_accel_status(accel_gguf_type_block(19, &be, &bb),
                      ACCEL_ERROR_UNSUPPORTED);
  assert_non_null(strstr(accel_last_error(), "IQ1_S"));
  assert_string_equal(accel_gguf_type_name(4), "Q4_2");
  assert_string_equal(accel_gguf_type_name(1000), "unknown");
  assert_accel_status(accel_gguf_type_block(0, NULL, &bb),
                      ACCEL_ERROR_INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_files_read_back_exactly),
      cmocka_unit_test(test_every_truncation_is_refused),
      cmocka_unit_test(test_broken_rules_are_refused_by_name),
      cmocka_unit_test(test_file_entry_points),
      cmocka_unit_test(test_misuse_is_refused),
      cmocka_unit_test(test_type_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
