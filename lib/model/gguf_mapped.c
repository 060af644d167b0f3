// A GGUF decoder model run in place (gguf_mapped.h; docs/gguf.md "Running a
// .gguf mapped"). The reader maps the file read-only and checks every
// offset and size; the import (gguf_import.c) checks what the decoder needs
// and hands over each weight with a pointer into the mapping, which this
// file keeps: no weight byte is copied, and resident memory is the file's
// page-cache pages (shared with every other process that maps the file).
#include "model/gguf_mapped.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "core/object.h"
#include "mem/buffer_impl.h"
#include "model/gguf_import_impl.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14
#endif

typedef struct mapped_meta {
  char *key, *value;
} mapped_meta_t;

typedef struct mapped_weight {
  char *name;
  accel_weight_info_t info;  // .name is |name|; .host_data in the mapping
} mapped_weight_t;

struct accel_gguf_mapped {
  accel_object_t object;  // the caller's reference and one per weight buffer
  accel_device_t *device;
  accel_gguf_t *gguf;  // owns the mapping
  mapped_meta_t *meta;
  uint32_t meta_count, meta_capacity;
  mapped_weight_t *weights;
  uint32_t weight_count, weight_capacity;
};

static void mapped_destroy(accel_object_t *object) {
  accel_gguf_mapped_t *m = (accel_gguf_mapped_t *)object;
  for (uint32_t i = 0; i < m->meta_count; ++i) {
    free(m->meta[i].key);
    free(m->meta[i].value);
  }
  for (uint32_t i = 0; i < m->weight_count; ++i) {
    free(m->weights[i].name);
  }
  free(m->meta);
  free(m->weights);
  accel_gguf_close(m->gguf);
  free(m);
}

// Grows |*array| of |size|-byte records to hold one more.
static accel_status_t grow(void **array, uint32_t count, uint32_t *capacity,
                           size_t size) {
  if (count < *capacity) {
    return ACCEL_OK;
  }
  uint32_t cap = *capacity ? *capacity * 2 : 32;
  void *p = realloc(*array, cap * size);
  if (p == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "gguf mapped: cannot grow a table to %u entries", cap);
  }
  *array = p;
  *capacity = cap;
  return ACCEL_OK;
}

static accel_status_t sink_metadata(void *ctx, const char *key,
                                    const char *value) {
  accel_gguf_mapped_t *m = ctx;
  ACCEL_RETURN_IF_ERROR(grow((void **)&m->meta, m->meta_count,
                             &m->meta_capacity, sizeof(*m->meta)));
  mapped_meta_t e = {strdup(key), strdup(value)};
  if (e.key == NULL || e.value == NULL) {
    free(e.key);
    free(e.value);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "gguf mapped: cannot copy metadata \"%s\"", key);
  }
  m->meta[m->meta_count++] = e;
  return ACCEL_OK;
}

static accel_status_t sink_weight(void *ctx, const accel_weight_info_t *info) {
  accel_gguf_mapped_t *m = ctx;
  ACCEL_RETURN_IF_ERROR(grow((void **)&m->weights, m->weight_count,
                             &m->weight_capacity, sizeof(*m->weights)));
  mapped_weight_t w = {.name = strdup(info->name), .info = *info};
  if (w.name == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "gguf mapped: cannot copy weight name \"%s\"",
                       info->name);
  }
  w.info.name = w.name;
  m->weights[m->weight_count++] = w;
  return ACCEL_OK;
}

bool accel_gguf_mapped_possible(accel_device_t *device,
                                const accel_gguf_t *gguf, char *why,
                                size_t why_size) {
  char none[1];
  if (why == NULL || why_size == 0) {
    why = none;
    why_size = sizeof(none);
  }
  accel_device_info_t info = {.struct_size = sizeof(info)};
  if (device == NULL || gguf == NULL ||
      accel_device_info(device, &info) != ACCEL_OK) {
    snprintf(why, why_size, "no device or no file");
    return false;
  }
  if ((info.caps & ACCEL_DEVICE_CAP_HOST_VISIBLE) == 0) {
    snprintf(why, why_size, "%s does not read host memory", info.id);
    return false;
  }
  uint64_t n = accel_gguf_tensor_count(gguf);
  for (uint64_t i = 0; i < n; ++i) {
    accel_gguf_tensor_t t;
    if (accel_gguf_tensor(gguf, i, &t) != ACCEL_OK) {
      snprintf(why, why_size, "tensor %llu cannot be read",
               (unsigned long long)i);
      return false;
    }
    if (((uintptr_t)t.data & 3) != 0) {
      snprintf(why, why_size,
               "tensor \"%.*s\" starts at a byte offset that is not a "
               "multiple of 4 (general.alignment %u)",
               (int)(t.name.size > 64 ? 64 : t.name.size), t.name.data,
               accel_gguf_alignment(gguf));
      return false;
    }
  }
  why[0] = '\0';
  return true;
}

// Maps the pages of [lo, hi) into the page tables now.
static void populate_range(uintptr_t lo, uintptr_t hi) {
  long ps = sysconf(_SC_PAGESIZE);
  uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096;
  lo &= ~(page - 1);
  if (hi <= lo ||
      madvise((void *)lo, hi - lo, MADV_POPULATE_READ) == 0) {
    return;
  }
  // An older kernel: touch one byte per page.
  volatile const uint8_t *b = (volatile const uint8_t *)lo;
  uint8_t sum = 0;
  for (uintptr_t off = 0; off < hi - lo; off += page) {
    sum ^= b[off];
  }
  (void)sum;
}

static bool meta_is(const accel_gguf_mapped_t *m, const char *key,
                    const char *value) {
  for (uint32_t i = 0; i < m->meta_count; ++i) {
    if (strcmp(m->meta[i].key, key) == 0) {
      return strcmp(m->meta[i].value, value) == 0;
    }
  }
  return false;
}

// Reads the pages of the weights every step reads into the page tables now:
// populate passes over the cached file instead of a fault per page range
// during the first step (the load then does the file's I/O). The token
// embedding table is left out unless the head reads it too (tied): a step
// reads only its tokens' rows, whose pages fault in as they are first used,
// so the table's untouched rows never count in resident memory (as with
// llama.cpp's mapping).
static void populate(const accel_gguf_mapped_t *m) {
  bool tied = meta_is(m, "decoder.tied_head", "1");
  // Weights lie in file order: one pass per run of consecutive weights.
  uintptr_t lo = 0, hi = 0;
  for (uint32_t i = 0; i < m->weight_count; ++i) {
    uintptr_t p = (uintptr_t)m->weights[i].info.host_data;
    uint64_t size = m->weights[i].info.size_bytes;
    if (size == 0) {
      continue;
    }
    if (!tied && strcmp(m->weights[i].name, "embed") == 0) {
      // No fault-around either: a row's fault maps its own pages, not the
      // 64 KiB around it (rows of 576 bytes would bring in 100 others).
      long ps = sysconf(_SC_PAGESIZE);
      uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096;
      uintptr_t a = (p + page - 1) & ~(page - 1), b = (p + size) & ~(page - 1);
      if (b > a) (void)madvise((void *)a, b - a, MADV_RANDOM);
      continue;
    }
    if (hi > lo && p >= lo && p <= hi + 4096) {
      hi = p + size > hi ? p + size : hi;
      continue;
    }
    populate_range(lo, hi);
    lo = p;
    hi = p + size;
  }
  populate_range(lo, hi);
}

accel_status_t accel_gguf_mapped_create(accel_device_t *device,
                                        accel_gguf_t *gguf, bool populate_now,
                                        accel_gguf_mapped_t **out) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(gguf != NULL, "gguf (NULL)");
  ACCEL_CHECK_ARG(out != NULL, "out (NULL)");
  char why[160];
  if (!accel_gguf_mapped_possible(device, gguf, why, sizeof(why))) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "gguf mapped: cannot run the file in place: %s", why);
  }
  accel_gguf_mapped_t *m = calloc(1, sizeof(*m));
  if (m == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "gguf mapped: cannot allocate a model");
  }
  accel_object_init(&m->object, mapped_destroy);
  m->device = device;
  gguf_import_sink_t sink = {.metadata = sink_metadata,
                             .weight = sink_weight,
                             .ctx = m};
  accel_status_t st = accel_gguf_import_build(gguf, &sink);
  if (st != ACCEL_OK) {
    mapped_destroy(&m->object);  // |gguf| is still NULL here: not closed
    return st;
  }
  if (populate_now) {
    populate(m);
  }
  m->gguf = gguf;
  *out = m;
  return ACCEL_OK;
}

void accel_gguf_mapped_release(accel_gguf_mapped_t *model) {
  if (model != NULL) {
    accel_object_release(&model->object);
  }
}

accel_status_t accel_gguf_mapped_metadata(const accel_gguf_mapped_t *m,
                                          const char *key,
                                          const char **out_value) {
  ACCEL_CHECK_ARG(m != NULL, "model (NULL)");
  ACCEL_CHECK_ARG(key != NULL, "key (NULL)");
  ACCEL_CHECK_ARG(out_value != NULL, "out_value (NULL)");
  for (uint32_t i = 0; i < m->meta_count; ++i) {
    if (strcmp(m->meta[i].key, key) == 0) {
      *out_value = m->meta[i].value;
      return ACCEL_OK;
    }
  }
  return accel_error(ACCEL_ERROR_NOT_FOUND, "no metadata key \"%s\"", key);
}

static const mapped_weight_t *find_weight(const accel_gguf_mapped_t *m,
                                          const char *name) {
  for (uint32_t i = 0; i < m->weight_count; ++i) {
    if (strcmp(m->weights[i].name, name) == 0) {
      return &m->weights[i];
    }
  }
  return NULL;
}

accel_status_t accel_gguf_mapped_weight(const accel_gguf_mapped_t *m,
                                        const char *name,
                                        accel_weight_info_t *out_info) {
  ACCEL_CHECK_ARG(m != NULL, "model (NULL)");
  ACCEL_CHECK_ARG(name != NULL, "name (NULL)");
  ACCEL_CHECK_ARG(out_info != NULL, "out_info (NULL)");
  if (out_info->struct_size < sizeof(*out_info)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "weight info: struct_size %u is too small",
                       out_info->struct_size);
  }
  const mapped_weight_t *w = find_weight(m, name);
  if (w == NULL) {
    return accel_error(ACCEL_ERROR_NOT_FOUND, "no weight \"%s\" in the model",
                       name);
  }
  *out_info = w->info;
  out_info->struct_size = (uint32_t)sizeof(*out_info);
  return ACCEL_OK;
}

// A read-only buffer over a weight's bytes in the mapping.
typedef struct mapped_buffer {
  accel_buffer_t buffer;      // first
  accel_gguf_mapped_t *model;  // one reference
} mapped_buffer_t;

static void mapped_buffer_destroy(accel_object_t *object) {
  mapped_buffer_t *b = (mapped_buffer_t *)object;
  accel_gguf_mapped_release(b->model);
  free(b);
}

accel_status_t accel_gguf_mapped_weight_buffer(accel_gguf_mapped_t *m,
                                               const char *name,
                                               accel_buffer_t **out_buffer) {
  ACCEL_CHECK_ARG(m != NULL, "model (NULL)");
  ACCEL_CHECK_ARG(name != NULL, "name (NULL)");
  ACCEL_CHECK_ARG(out_buffer != NULL, "out_buffer (NULL)");
  const mapped_weight_t *w = find_weight(m, name);
  if (w == NULL) {
    return accel_error(ACCEL_ERROR_NOT_FOUND, "no weight \"%s\" in the model",
                       name);
  }
  mapped_buffer_t *b = calloc(1, sizeof(*b));
  if (b == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "weight \"%s\": cannot allocate a buffer object", name);
  }
  accel_buffer_init_read_only_alias(&b->buffer, mapped_buffer_destroy,
                                    m->device, w->info.host_data,
                                    w->info.size_bytes, "gguf", name);
  accel_object_retain(&m->object);
  b->model = m;
  *out_buffer = &b->buffer;
  return ACCEL_OK;
}
