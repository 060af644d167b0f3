#include "npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
  const char *descr;
  accel_dtype_t dtype;
} k_types[] = {
    {"<f4", ACCEL_DTYPE_F32}, {"<f2", ACCEL_DTYPE_F16}, {"<f8", ACCEL_DTYPE_F64},
    {"<i4", ACCEL_DTYPE_I32}, {"|i1", ACCEL_DTYPE_I8},  {"|u1", ACCEL_DTYPE_U8},
    {"<i2", ACCEL_DTYPE_I16}, {"<u2", ACCEL_DTYPE_U16}, {"<u4", ACCEL_DTYPE_U32},
    {"<i8", ACCEL_DTYPE_I64}, {"|b1", ACCEL_DTYPE_U8},
};

// Finds 'key': in the header dict and returns a pointer after the colon.
static const char *find_key(const char *h, const char *key) {
  char pat[32];
  snprintf(pat, sizeof(pat), "'%s'", key);
  const char *p = strstr(h, pat);
  if (p == NULL) {
    return NULL;
  }
  p = strchr(p + strlen(pat), ':');
  return p ? p + 1 : NULL;
}

int npy_parse(const uint8_t *data, uint64_t size, npy_info_t *out, char *err,
              size_t err_size) {
  if (size < 10 || memcmp(data, "\x93NUMPY", 6) != 0) {
    snprintf(err, err_size, "not a .npy file (bad magic)");
    return -1;
  }
  uint8_t major = data[6];
  uint64_t hlen, start;
  if (major == 1) {
    hlen = (uint64_t)data[8] | (uint64_t)data[9] << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) {
      snprintf(err, err_size, "truncated .npy header");
      return -1;
    }
    hlen = (uint64_t)data[8] | (uint64_t)data[9] << 8 |
           (uint64_t)data[10] << 16 | (uint64_t)data[11] << 24;
    start = 12;
  } else {
    snprintf(err, err_size, ".npy format version %u is not supported", major);
    return -1;
  }
  if (hlen > size - start || hlen > 65536) {
    snprintf(err, err_size, ".npy header of %llu bytes is truncated",
             (unsigned long long)hlen);
    return -1;
  }
  char *h = malloc(hlen + 1);
  if (h == NULL) {
    snprintf(err, err_size, "out of memory");
    return -1;
  }
  memcpy(h, data + start, hlen);
  h[hlen] = '\0';
  int rc = -1;
  *out = (npy_info_t){.data_offset = start + hlen};
  const char *d = find_key(h, "descr");
  const char *f = find_key(h, "fortran_order");
  const char *s = find_key(h, "shape");
  if (d == NULL || f == NULL || s == NULL) {
    snprintf(err, err_size, ".npy header lacks descr, fortran_order or shape");
    goto out;
  }
  while (*f == ' ') {
    f++;
  }
  if (strncmp(f, "False", 5) != 0) {
    snprintf(err, err_size, "Fortran-order .npy arrays are not supported");
    goto out;
  }
  const char *q = strchr(d, '\'');
  if (q == NULL) {
    snprintf(err, err_size, "bad descr in .npy header");
    goto out;
  }
  for (size_t i = 0; i < sizeof(k_types) / sizeof(k_types[0]); ++i) {
    if (strncmp(q + 1, k_types[i].descr, 3) == 0 && q[4] == '\'') {
      out->dtype = k_types[i].dtype;
    }
  }
  if (out->dtype == ACCEL_DTYPE_INVALID) {
    snprintf(err, err_size, "unsupported .npy dtype %.8s", q);
    goto out;
  }
  const char *p = strchr(s, '(');
  if (p == NULL) {
    snprintf(err, err_size, "bad shape in .npy header");
    goto out;
  }
  p++;
  for (;;) {
    while (*p == ' ' || *p == ',') {
      p++;
    }
    if (*p == ')') {
      break;
    }
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p || out->rank == ACCEL_WEIGHT_MAX_RANK) {
      snprintf(err, err_size, "bad or too long shape in .npy header");
      goto out;
    }
    out->shape[out->rank++] = v;
    p = end;
  }
  rc = 0;
out:
  free(h);
  return rc;
}
