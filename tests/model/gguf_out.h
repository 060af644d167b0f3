// A growing byte buffer for the tests that write GGUF images themselves
// (an independent writer of docs/gguf.md's layout): little-endian numbers
// and length-prefixed strings.
#ifndef ACCEL_TESTS_MODEL_GGUF_OUT_H_
#define ACCEL_TESTS_MODEL_GGUF_OUT_H_

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

typedef struct out {
  uint8_t *p;
  size_t n, cap;
} out_t;

static inline void put(out_t *o, const void *data, size_t n) {
  if (n == 0) {
    return;  // (data may be NULL: nothing to copy)
  }
  if (o->n + n > o->cap) {
    o->cap = (o->n + n) * 2 + 64;
    o->p = realloc(o->p, o->cap);
    assert_non_null(o->p);
  }
  memcpy(o->p + o->n, data, n);
  o->n += n;
}
static inline void put_u32(out_t *o, uint32_t v) { put(o, &v, 4); }
static inline void put_u64(out_t *o, uint64_t v) { put(o, &v, 8); }
static inline void put_str(out_t *o, const char *s, size_t n) {
  put_u64(o, n);
  put(o, s, n);
}
static inline void put_cstr(out_t *o, const char *s) {
  put_str(o, s, strlen(s));
}
static inline void pad_to(out_t *o, size_t alignment) {
  static const uint8_t zero[64] = {0};
  while (o->n % alignment != 0) {
    size_t k = alignment - o->n % alignment;
    put(o, zero, k < sizeof(zero) ? k : sizeof(zero));
  }
}

#endif  // ACCEL_TESTS_MODEL_GGUF_OUT_H_
