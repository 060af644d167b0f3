// The tuning cache file: parsing (every field checked: the file is input)
// and writing (docs/tuning.md).
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/tuning_cache.h"
#include "core/error.h"

#define HEADER "accel-tuning-cache"
#define MAX_LINE 4096u

// ---------------------------------------------------------------------------
// Parsing.

static bool token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' ||
         c == ':';
}

// Copies the token |t| (|len| bytes) into |out| when it is 1 to
// ACCEL_TUNING_MAX_TOKEN token characters.
static bool copy_token(const char *t, size_t len, char *out) {
  if (len == 0 || len > ACCEL_TUNING_MAX_TOKEN) {
    return false;
  }
  for (size_t i = 0; i < len; ++i) {
    if (!token_char(t[i])) {
      return false;
    }
  }
  memcpy(out, t, len);
  out[len] = '\0';
  return true;
}

// A decimal uint32 of 1 to 10 digits.
static bool parse_u32(const char *t, size_t len, uint32_t *out) {
  if (len == 0 || len > 10) {
    return false;
  }
  uint64_t v = 0;
  for (size_t i = 0; i < len; ++i) {
    if (t[i] < '0' || t[i] > '9') {
      return false;
    }
    v = v * 10 + (uint64_t)(t[i] - '0');
  }
  if (v > UINT32_MAX) {
    return false;
  }
  *out = (uint32_t)v;
  return true;
}

static int hex_digit(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                : -1;
}

static bool parse_hex(const char *t, size_t len, accel_tuning_entry_t *e) {
  if (len == 0 || len % 2 != 0 || len / 2 > ACCEL_TUNING_MAX_CONSTANTS ||
      len / 2 % 4 != 0) {
    return false;
  }
  for (size_t i = 0; i < len; i += 2) {
    int hi = hex_digit(t[i]), lo = hex_digit(t[i + 1]);
    if (hi < 0 || lo < 0) {
      return false;
    }
    e->constants[i / 2] = (uint8_t)(hi << 4 | lo);
  }
  e->constants_size = (uint32_t)(len / 2);
  return true;
}

// "name=value,name=value": names [a-z0-9_], values 1..2^32-1, unique.
static bool parse_values(const char *t, size_t len, accel_tuning_entry_t *e) {
  const char *end = t + len;
  e->value_count = 0;
  while (t < end) {
    const char *comma = memchr(t, ',', (size_t)(end - t));
    const char *stop = comma != NULL ? comma : end;
    const char *eq = memchr(t, '=', (size_t)(stop - t));
    if (eq == NULL || e->value_count == ACCEL_KERNEL_MAX_TUNABLES) {
      return false;
    }
    size_t nl = (size_t)(eq - t);
    if (nl == 0 || nl > ACCEL_KERNEL_MAX_TUNABLE_NAME) {
      return false;
    }
    char *name = e->names[e->value_count];
    for (size_t i = 0; i < nl; ++i) {
      char c = t[i];
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
        return false;
      }
      name[i] = c;
    }
    name[nl] = '\0';
    uint32_t v;
    if (!parse_u32(eq + 1, (size_t)(stop - eq - 1), &v) || v == 0) {
      return false;
    }
    for (uint32_t j = 0; j < e->value_count; ++j) {
      if (strcmp(e->names[j], name) == 0) {
        return false;
      }
    }
    e->values[e->value_count++] = v;
    t = comma != NULL ? comma + 1 : end;
    if (comma != NULL && t == end) {
      return false;  // trailing comma
    }
  }
  return e->value_count > 0;
}

// "ratio=<decimal in [0.0001, 1000000]>": what write_entry's "%.4f" gives
// back for any value in the range (a smaller one would be written as 0).
static bool parse_ratio(const char *t, size_t len, double *out) {
  if (len < 7 || len > 32 || memcmp(t, "ratio=", 6) != 0) {
    return false;
  }
  char buf[33];
  memcpy(buf, t + 6, len - 6);
  buf[len - 6] = '\0';
  for (size_t i = 0; buf[i] != '\0'; ++i) {
    if (!((buf[i] >= '0' && buf[i] <= '9') || buf[i] == '.')) {
      return false;
    }
  }
  char *stop = NULL;
  double v = strtod(buf, &stop);
  if (stop == buf || *stop != '\0' || !(v >= 1e-4 && v <= 1e6)) {
    return false;
  }
  *out = v;
  return true;
}

static bool same_key(const accel_tuning_entry_t *a,
                     const accel_tuning_entry_t *b) {
  return a->version == b->version && a->constants_size == b->constants_size &&
         strcmp(a->fingerprint, b->fingerprint) == 0 &&
         strcmp(a->kernel, b->kernel) == 0 &&
         memcmp(a->constants, b->constants, a->constants_size) == 0;
}

accel_status_t accel_tuning_cache_put(accel_tuning_cache_t *cache,
                                      const accel_tuning_entry_t *entry) {
  for (uint32_t i = 0; i < cache->count; ++i) {
    if (same_key(&cache->entries[i], entry)) {
      cache->entries[i] = *entry;
      return ACCEL_OK;
    }
  }
  if (cache->count == ACCEL_TUNING_MAX_ENTRIES) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "tuning cache: more than %u entries",
                       ACCEL_TUNING_MAX_ENTRIES);
  }
  if (cache->count == cache->capacity) {
    uint32_t cap = cache->capacity ? cache->capacity * 2 : 16;
    accel_tuning_entry_t *e =
        realloc(cache->entries, (size_t)cap * sizeof(*e));
    if (e == NULL) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "tuning cache: cannot grow to %u entries", cap);
    }
    cache->entries = e;
    cache->capacity = cap;
  }
  cache->entries[cache->count++] = *entry;
  return ACCEL_OK;
}

// Splits |line| (|len| bytes, no newline) at single spaces into at most
// |max| tokens; returns the count, or max + 1 when there are more.
static uint32_t split(const char *line, size_t len, const char **tok,
                      size_t *tok_len, uint32_t max) {
  uint32_t n = 0;
  size_t i = 0;
  while (i < len) {
    if (line[i] == ' ') {
      ++i;
      continue;
    }
    if (n == max) {
      return max + 1;
    }
    size_t start = i;
    while (i < len && line[i] != ' ') {
      ++i;
    }
    tok[n] = line + start;
    tok_len[n] = i - start;
    ++n;
  }
  return n;
}

static accel_status_t parse_entry(const char *line, size_t len,
                                  uint32_t line_no,
                                  accel_tuning_cache_t *out) {
  const char *tok[6];
  size_t tl[6];
  uint32_t n = split(line, len, tok, tl, 6);
  accel_tuning_entry_t e;
  memset(&e, 0, sizeof(e));
  const char *bad = NULL;
  if (n < 5 || n > 6) {
    bad = "fields (5 or 6 expected)";
  } else if (!copy_token(tok[0], tl[0], e.fingerprint)) {
    bad = "fingerprint";
  } else if (!copy_token(tok[1], tl[1], e.kernel)) {
    bad = "kernel";
  } else if (!parse_u32(tok[2], tl[2], &e.version)) {
    bad = "version";
  } else if (!parse_hex(tok[3], tl[3], &e)) {
    bad = "constants (lower-case hex of 4 to 256 bytes, a multiple of 4)";
  } else if (!parse_values(tok[4], tl[4], &e)) {
    bad = "values (name=value,... with names [a-z0-9_] and values >= 1)";
  } else if (n == 6 && !parse_ratio(tok[5], tl[5], &e.ratio)) {
    bad = "ratio";
  }
  if (bad != NULL) {
    return accel_error(ACCEL_ERROR_FORMAT, "tuning cache line %u: bad %s",
                       line_no, bad);
  }
  return accel_tuning_cache_put(out, &e);
}

accel_status_t accel_tuning_cache_parse(const char *data, size_t size,
                                        accel_tuning_cache_t *out) {
  memset(out, 0, sizeof(*out));
  if (size > ACCEL_TUNING_MAX_FILE_BYTES) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "tuning cache: %zu bytes, at most %u", size,
                       ACCEL_TUNING_MAX_FILE_BYTES);
  }
  size_t pos = 0;
  uint32_t line_no = 0;
  bool header = false;
  while (pos < size) {
    const char *nl = memchr(data + pos, '\n', size - pos);
    size_t len = nl != NULL ? (size_t)(nl - (data + pos)) : size - pos;
    const char *line = data + pos;
    pos += len + (nl != NULL ? 1 : 0);
    ++line_no;
    if (len > MAX_LINE || memchr(line, '\0', len) != NULL) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "tuning cache line %u: longer than %u bytes or "
                         "holds a NUL",
                         line_no, MAX_LINE);
    }
    if (!header) {
      uint32_t version;
      size_t hl = sizeof(HEADER) - 1;
      if (len <= hl + 1 || memcmp(line, HEADER " ", hl + 1) != 0 ||
          !parse_u32(line + hl + 1, len - hl - 1, &version)) {
        return accel_error(ACCEL_ERROR_FORMAT,
                           "tuning cache: line 1 is not \"" HEADER
                           " <version>\"");
      }
      if (version != ACCEL_TUNING_CACHE_VERSION) {
        return accel_error(ACCEL_ERROR_VERSION,
                           "tuning cache: version %u, this runtime reads %u",
                           version, ACCEL_TUNING_CACHE_VERSION);
      }
      header = true;
      continue;
    }
    if (len == 0 || line[0] == '#') {
      continue;
    }
    ACCEL_RETURN_IF_ERROR(parse_entry(line, len, line_no, out));
  }
  if (!header) {
    return accel_error(ACCEL_ERROR_FORMAT, "tuning cache: empty file");
  }
  return ACCEL_OK;
}

void accel_tuning_cache_fini(accel_tuning_cache_t *cache) {
  free(cache->entries);
  memset(cache, 0, sizeof(*cache));
}

accel_status_t accel_tuning_cache_read(const char *path,
                                       accel_tuning_cache_t *out) {
  memset(out, 0, sizeof(*out));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return ACCEL_OK;
    }
    return accel_error(ACCEL_ERROR_IO, "cannot open tuning cache %s: %s",
                       path, strerror(errno));
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
      (uint64_t)sb.st_size > ACCEL_TUNING_MAX_FILE_BYTES) {
    close(fd);
    return accel_error(ACCEL_ERROR_IO,
                       "tuning cache %s is not a regular file of at most %u "
                       "bytes",
                       path, ACCEL_TUNING_MAX_FILE_BYTES);
  }
  size_t size = (size_t)sb.st_size;
  char *data = malloc(size ? size : 1);
  if (data == NULL) {
    close(fd);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cannot allocate %zu bytes for tuning cache %s", size,
                       path);
  }
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, data + got, size - got);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) {
        continue;
      }
      break;
    }
    got += (size_t)r;
  }
  close(fd);
  accel_status_t st = got == size ? accel_tuning_cache_parse(data, size, out)
                                  : accel_error(ACCEL_ERROR_IO,
                                                "short read of tuning cache "
                                                "%s",
                                                path);
  free(data);
  return st;
}

// ---------------------------------------------------------------------------
// Writing.

static accel_status_t make_parent(const char *path) {
  char dir[4096];
  if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
    return accel_error(ACCEL_ERROR_IO, "tuning cache path is too long");
  }
  for (char *p = dir + 1; *p != '\0'; ++p) {
    if (*p != '/') {
      continue;
    }
    *p = '\0';
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
      return accel_error(ACCEL_ERROR_IO, "cannot create %s: %s", dir,
                         strerror(errno));
    }
    *p = '/';
  }
  return ACCEL_OK;
}

static void write_entry(FILE *f, const accel_tuning_entry_t *e) {
  fprintf(f, "%s %s %u ", e->fingerprint, e->kernel, e->version);
  for (uint32_t i = 0; i < e->constants_size; ++i) {
    fprintf(f, "%02x", e->constants[i]);
  }
  for (uint32_t i = 0; i < e->value_count; ++i) {
    fprintf(f, "%c%s=%u", i ? ',' : ' ', e->names[i], e->values[i]);
  }
  if (e->ratio > 0) {
    fprintf(f, " ratio=%.4f", e->ratio);
  }
  fputc('\n', f);
}

accel_status_t accel_tuning_cache_write(const char *path,
                                        const accel_tuning_cache_t *cache) {
  ACCEL_RETURN_IF_ERROR(make_parent(path));
  char tmp[4200];
  snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (f == NULL) {
    return accel_error(ACCEL_ERROR_IO, "cannot write %s: %s", tmp,
                       strerror(errno));
  }
  fprintf(f, HEADER " %u\n", ACCEL_TUNING_CACHE_VERSION);
  fprintf(f, "# fingerprint kernel version constants values [ratio]: "
             "docs/tuning.md\n");
  for (uint32_t i = 0; i < cache->count; ++i) {
    write_entry(f, &cache->entries[i]);
  }
  bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    int err = errno;
    unlink(tmp);
    return accel_error(ACCEL_ERROR_IO, "cannot write tuning cache %s: %s",
                       path, strerror(err));
  }
  return ACCEL_OK;
}

accel_status_t accel_tuning_cache_path(char *out, size_t size) {
  const char *env = getenv("ACCEL_TUNING_CACHE");
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  int n;
  if (env != NULL && env[0] != '\0') {
    n = snprintf(out, size, "%s", env);
  } else if (xdg != NULL && xdg[0] == '/') {
    n = snprintf(out, size, "%s/accel/tuning-cache", xdg);
  } else if (home != NULL && home[0] == '/') {
    n = snprintf(out, size, "%s/.cache/accel/tuning-cache", home);
  } else {
    return accel_error(ACCEL_ERROR_NOT_FOUND,
                       "no tuning cache path: ACCEL_TUNING_CACHE, "
                       "XDG_CACHE_HOME and HOME are unset");
  }
  if (n < 0 || (size_t)n >= size) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "tuning cache path is longer than %zu bytes", size);
  }
  return ACCEL_OK;
}

