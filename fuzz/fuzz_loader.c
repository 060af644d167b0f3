// libFuzzer target for the .axe validator: every input must be either
// accepted or rejected with ACCEL_ERROR_FORMAT / ACCEL_ERROR_VERSION (or
// OUT_OF_MEMORY) and a message; anything else (a crash, a sanitizer report,
// another status) is a bug. An accepted input is walked through the view as
// the loader would use it, so that a validator gap shows up as an
// out-of-bounds read. Built by scripts/fuzz-loader.sh.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi/axe_reader.h"
#include "accel/executable.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t g_sink;

static void walk(const axe_view_t *v) {
  uint64_t acc = 0;
  for (uint32_t i = 0; i < v->kernel_count; ++i) {
    const axe_kernel_t *k = &v->kernels[i];
    acc += strlen(axe_string(v, k->name)) + strlen(axe_string(v, k->symbol));
    for (uint32_t b = 0; b < k->binding_count; ++b) {
      acc += v->bindings[k->binding_first + b].min_size_bytes;
    }
  }
  for (uint32_t i = 0; i < v->weight_count; ++i) {
    const axe_weight_t *w = &v->weights[i];
    const axe_section_t *s = &v->sections[w->data_section];
    const uint8_t *p = v->data + s->offset + w->data_offset;
    if (w->size_bytes > 0) {
      acc += p[0] + p[w->size_bytes - 1];
    }
    if (w->quant != AXE_NONE) {
      const axe_quant_t *q = &v->quants[w->quant];
      acc += strlen(axe_string(v, v->weights[q->scale].name));
    }
  }
  for (uint32_t i = 0; i < v->metadata_count; ++i) {
    acc += strlen(axe_string(v, v->metadata[i].key)) +
           strlen(axe_string(v, v->metadata[i].value));
  }
  for (uint32_t i = 0; i < v->section_count; ++i) {
    acc += strlen(axe_string(v, v->sections[i].name));
  }
  g_sink = acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // The loader gets page-aligned mappings; give the validator an aligned
  // copy of exactly |size| bytes so that reads past the end are caught.
  uint8_t *copy = aligned_alloc(64, size ? (size + 63) / 64 * 64 : 64);
  if (copy == NULL) {
    return 0;
  }
  memcpy(copy, data, size);
  // On inputs with bit 1 of the length set, repair the header hash first so
  // that mutations of the header and section table reach the checks behind
  // the hash (the fuzzer cannot compute it).
  if ((size & 2) != 0 && size >= sizeof(axe_header_t)) {
    axe_header_t *h = (axe_header_t *)copy;
    uint64_t table = (uint64_t)h->section_count * AXE_SECTION_ENTRY_SIZE;
    if (h->section_table_offset <= size && table <= size - h->section_table_offset) {
      h->header_hash =
          accel_axe_header_hash(h, copy + h->section_table_offset, table);
    }
  }
  axe_view_t view;
  // Skip hashes on even-length inputs so that mutations reach the table
  // checks behind them; check them on odd-length ones.
  accel_status_t st = accel_axe_parse(copy, size, (size & 1) == 0, &view);
  if (st == ACCEL_OK) {
    walk(&view);
  } else if (st != ACCEL_ERROR_FORMAT && st != ACCEL_ERROR_VERSION &&
             st != ACCEL_ERROR_OUT_OF_MEMORY) {
    abort();
  } else if (accel_last_error()[0] == '\0') {
    abort();  // every rejection carries a message
  }
  free(copy);
  return 0;
}
