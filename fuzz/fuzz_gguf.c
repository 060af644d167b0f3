// libFuzzer target for the GGUF reader: every input must be accepted or
// refused with FORMAT, VERSION, UNSUPPORTED (or OUT_OF_MEMORY) and a
// message; anything else (a crash, a sanitizer report, another status) is a
// bug. An accepted input is walked in full (every key, every string of every
// array, the first and last byte of every tensor), so that a gap in the
// checks shows up as an out-of-bounds read. A tokenizer is built from every
// accepted file: it must build or be refused with FORMAT, UNSUPPORTED,
// NOT_FOUND (or OUT_OF_MEMORY) and a message, and one that builds encodes
// the input itself and decodes the ids. Every accepted file is also
// imported as a decoder model (gguf_import.h): refused with FORMAT,
// UNSUPPORTED (or OUT_OF_MEMORY) and a message, or turned into an .axe
// image that the .axe validator accepts, hashes included; and the mapped
// run's pass over it (accel_gguf_import_build) must hand over only weights
// inside the input. Built by
// scripts/fuzz-gguf.sh.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi/axe_reader.h"
#include "accel/gguf.h"
#include "accel/gguf_import.h"
#include "accel/tokenizer.h"
#include "model/gguf_import_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t g_sink;

static void walk(const accel_gguf_t *g) {
  uint64_t acc = 0;
  for (uint64_t i = 0; i < accel_gguf_kv_count(g); ++i) {
    accel_gguf_string_t key;
    accel_gguf_value_t v;
    if (accel_gguf_kv(g, i, &key, &v) != ACCEL_OK) {
      abort();
    }
    acc += key.size ? (uint8_t)key.data[key.size - 1] : 0;
    if (v.type == ACCEL_GGUF_VALUE_STRING && v.scalar.str.size != 0) {
      acc += (uint8_t)v.scalar.str.data[v.scalar.str.size - 1];
    }
    if (v.type == ACCEL_GGUF_VALUE_ARRAY &&
        v.array_type == ACCEL_GGUF_VALUE_STRING) {
      for (uint64_t e = 0; e < v.array_count; ++e) {
        accel_gguf_string_t s;
        if (accel_gguf_array_string(g, &v, e, &s) != ACCEL_OK) {
          abort();
        }
        acc += s.size ? (uint8_t)s.data[s.size - 1] : 0;
      }
    }
    char name[80];
    size_t n = key.size < sizeof(name) - 1 ? key.size : sizeof(name) - 1;
    memcpy(name, key.data, n);
    name[n] = '\0';
    if (n == key.size && accel_gguf_find_kv(g, name, &v) != ACCEL_OK) {
      abort();  // every key is found by its name
    }
  }
  for (uint64_t i = 0; i < accel_gguf_tensor_count(g); ++i) {
    accel_gguf_tensor_t t;
    if (accel_gguf_tensor(g, i, &t) != ACCEL_OK) {
      abort();
    }
    if (t.size_bytes != 0) {
      const uint8_t *p = t.data;
      acc += p[0] + p[t.size_bytes - 1];
    }
  }
  g_sink = acc;
}

static void try_tokenizer(const accel_gguf_t *g, const uint8_t *data,
                          size_t size) {
  accel_tokenizer_t *t = NULL;
  accel_status_t st = accel_tokenizer_create_from_gguf(g, &t);
  if (st != ACCEL_OK) {
    if ((st != ACCEL_ERROR_FORMAT && st != ACCEL_ERROR_UNSUPPORTED &&
         st != ACCEL_ERROR_NOT_FOUND && st != ACCEL_ERROR_OUT_OF_MEMORY) ||
        t != NULL || accel_last_error()[0] == '\0') {
      abort();
    }
    return;
  }
  size_t len = size < 256 ? size : 256;
  size_t count = 0;
  int32_t ids[2048];
  st = accel_tokenizer_encode(t, (const char *)data, len,
                              ACCEL_TOKENIZER_ENCODE_ADD_SPECIAL, ids, 2048,
                              &count);
  // UNSUPPORTED: a BOS/EOS or byte token the vocabulary lacks.
  if (st != ACCEL_OK && st != ACCEL_ERROR_UNSUPPORTED) {
    abort();
  }
  accel_token_decoder_t *d;
  if (accel_token_decoder_create(t, ACCEL_TOKENIZER_PIECE_SPECIAL, &d) !=
      ACCEL_OK) {
    abort();
  }
  for (size_t i = 0; st == ACCEL_OK && i < count; ++i) {
    const char *text;
    size_t n;
    if (ids[i] < 0 || (uint32_t)ids[i] >= accel_tokenizer_vocab_size(t) ||
        accel_token_decoder_push(d, ids[i], &text, &n) != ACCEL_OK) {
      abort();
    }
    g_sink += n;
  }
  accel_token_decoder_destroy(d);
  accel_tokenizer_destroy(t);
}

static void try_import(const accel_gguf_t *g) {
  void *image = NULL;
  uint64_t image_size = 0;
  accel_status_t st = accel_gguf_import_memory(g, &image, &image_size);
  if (st != ACCEL_OK) {
    if ((st != ACCEL_ERROR_FORMAT && st != ACCEL_ERROR_UNSUPPORTED &&
         st != ACCEL_ERROR_OUT_OF_MEMORY) ||
        image != NULL || accel_last_error()[0] == '\0') {
      abort();
    }
    return;
  }
  axe_view_t view;
  if (accel_axe_parse(image, image_size, false, &view) != ACCEL_OK) {
    abort();  // the import wrote a file the loader refuses
  }
  free(image);
}

// The mapped run's pass (gguf_mapped.c takes its table from the same
// accel_gguf_import_build, through a sink): every weight it is handed must
// lie inside the input, its first and last byte readable.
typedef struct mapped_check {
  const uint8_t *data;
  size_t size;
  uint64_t acc;
} mapped_check_t;

static accel_status_t check_metadata(void *ctx, const char *key,
                                     const char *value) {
  mapped_check_t *c = ctx;
  c->acc += (uint8_t)key[0] + (uint8_t)value[0];
  return ACCEL_OK;
}

static accel_status_t check_weight(void *ctx, const accel_weight_info_t *w) {
  mapped_check_t *c = ctx;
  const uint8_t *p = w->host_data;
  if (p < c->data || w->size_bytes > c->size ||
      (size_t)(p - c->data) > c->size - w->size_bytes) {
    abort();  // a weight outside the file
  }
  if (w->size_bytes != 0) {
    c->acc += p[0] + p[w->size_bytes - 1];
  }
  return ACCEL_OK;
}

static void try_mapped(const accel_gguf_t *g, const uint8_t *data,
                       size_t size) {
  mapped_check_t c = {.data = data, .size = size};
  gguf_import_sink_t sink = {.metadata = check_metadata,
                             .weight = check_weight,
                             .ctx = &c};
  accel_status_t st = accel_gguf_import_build(g, &sink);
  if (st != ACCEL_OK &&
      ((st != ACCEL_ERROR_FORMAT && st != ACCEL_ERROR_UNSUPPORTED &&
        st != ACCEL_ERROR_OUT_OF_MEMORY) ||
       accel_last_error()[0] == '\0')) {
    abort();
  }
  g_sink = c.acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // A copy of exactly |size| bytes, so that any read past it is caught.
  uint8_t *copy = malloc(size != 0 ? size : 1);
  if (copy == NULL) {
    return 0;
  }
  memcpy(copy, data, size);
  accel_gguf_t *g = NULL;
  accel_status_t st = accel_gguf_open_memory(copy, size, &g);
  if (st == ACCEL_OK) {
    walk(g);
    try_tokenizer(g, data, size);
    try_import(g);
    try_mapped(g, copy, size);
    accel_gguf_close(g);
  } else if (st != ACCEL_ERROR_FORMAT && st != ACCEL_ERROR_VERSION &&
             st != ACCEL_ERROR_UNSUPPORTED &&
             st != ACCEL_ERROR_OUT_OF_MEMORY) {
    abort();
  } else if (g != NULL || accel_last_error()[0] == '\0') {
    abort();  // output untouched, and a message
  }
  free(copy);
  return 0;
}
