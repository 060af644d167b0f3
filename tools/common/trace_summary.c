// A reader of the Perfetto subset that accel's recorders write (the
// built-in recorder and accel-trace convert): slices per name with their
// durations, as trace_summary.h describes.
#include "trace_summary.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


typedef struct rd {
  const uint8_t *p;
  const uint8_t *end;
  bool bad;
} rd_t;

static uint64_t rd_varint(rd_t *r) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (r->p >= r->end) {
      r->bad = true;
      return 0;
    }
    uint8_t b = *r->p++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      return v;
    }
  }
  r->bad = true;
  return 0;
}

// Reads the next field: its number, wire type, and value or payload.
static bool rd_field(rd_t *r, uint32_t *field, uint32_t *wire, uint64_t *v,
                     rd_t *sub) {
  if (r->p >= r->end || r->bad) {
    return false;
  }
  uint64_t key = rd_varint(r);
  *field = (uint32_t)(key >> 3);
  *wire = (uint32_t)(key & 7);
  switch (*wire) {
    case 0:
      *v = rd_varint(r);
      break;
    case 1:
      if (r->end - r->p < 8) {
        r->bad = true;
        return false;
      }
      r->p += 8;
      break;
    case 2: {
      uint64_t len = rd_varint(r);
      if ((uint64_t)(r->end - r->p) < len) {
        r->bad = true;
        return false;
      }
      *sub = (rd_t){r->p, r->p + len, false};
      r->p += len;
      break;
    }
    case 5:
      if (r->end - r->p < 4) {
        r->bad = true;
        return false;
      }
      r->p += 4;
      break;
    default:
      r->bad = true;
      return false;
  }
  return !r->bad;
}

typedef struct open_slice {
  uint64_t track;
  char name[96];
  uint64_t ts;
  uint64_t bytes;
  bool has_child;  // a slice began on the same track while this one was open
} open_slice_t;

typedef struct stat_entry {
  char name[96];
  uint64_t count;
  uint64_t bytes;
  uint64_t *durations;
  size_t cap;
} stat_entry_t;

typedef struct summary {
  open_slice_t *open;
  size_t open_count, open_cap;
  stat_entry_t *stats;
  size_t stat_count, stat_cap;
} summary_t;

static bool grow(void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) {
    return true;
  }
  size_t c = *cap ? *cap * 2 : 64;
  while (c < need) {
    c *= 2;
  }
  void *n = realloc(*p, c * size);
  if (n == NULL) {
    return false;
  }
  *p = n;
  *cap = c;
  return true;
}

static void add_duration(summary_t *s, const char *name, uint64_t ns,
                         uint64_t bytes) {
  stat_entry_t *e = NULL;
  for (size_t i = 0; i < s->stat_count; ++i) {
    if (strcmp(s->stats[i].name, name) == 0) {
      e = &s->stats[i];
    }
  }
  if (e == NULL) {
    if (!grow((void **)&s->stats, &s->stat_cap, s->stat_count + 1,
              sizeof(*s->stats))) {
      return;
    }
    e = &s->stats[s->stat_count++];
    memset(e, 0, sizeof(*e));
    snprintf(e->name, sizeof(e->name), "%s", name);
  }
  if (!grow((void **)&e->durations, &e->cap, e->count + 1, sizeof(uint64_t))) {
    return;
  }
  e->durations[e->count++] = ns;
  e->bytes += bytes;
}

// The fields of a TrackEvent that summary reads.
typedef struct te_fields {
  uint64_t type;
  uint64_t track;
  uint64_t bytes;  // the "bytes" debug annotation, 0 if none
  char name[96];
} te_fields_t;

// Reads a DebugAnnotation; returns its value when it is named "bytes".
static uint64_t annotation_bytes(rd_t da) {
  uint32_t f, w;
  uint64_t v = 0, value = 0;
  rd_t sub;
  bool is_bytes = false;
  while (rd_field(&da, &f, &w, &v, &sub)) {
    if (f == 10 && w == 2) {
      is_bytes =
          (size_t)(sub.end - sub.p) == 5 && memcmp(sub.p, "bytes", 5) == 0;
    } else if (f == 3 && w == 0) {
      value = v;
    }
  }
  return is_bytes ? value : 0;
}

static void read_track_event(rd_t te, te_fields_t *out) {
  uint32_t f, w;
  uint64_t v = 0;
  rd_t sub;
  memset(out, 0, sizeof(*out));
  while (rd_field(&te, &f, &w, &v, &sub)) {
    if (f == 9 && w == 0) {
      out->type = v;
    } else if (f == 11 && w == 0) {
      out->track = v;
    } else if (f == 23 && w == 2) {
      size_t n = (size_t)(sub.end - sub.p);
      n = n < sizeof(out->name) - 1 ? n : sizeof(out->name) - 1;
      memcpy(out->name, sub.p, n);
      out->name[n] = '\0';
    } else if (f == 4 && w == 2 && out->bytes == 0) {
      out->bytes = annotation_bytes(sub);
    }
  }
}

// The innermost open slice on |track|, or NULL.
static open_slice_t *innermost(summary_t *s, uint64_t track) {
  for (size_t i = s->open_count; i-- > 0;) {
    if (s->open[i].track == track) {
      return &s->open[i];
    }
  }
  return NULL;
}

static void track_event(summary_t *s, uint64_t ts, rd_t te) {
  te_fields_t e;
  read_track_event(te, &e);
  if (e.type == 1) {
    open_slice_t *parent = innermost(s, e.track);
    if (parent != NULL) {
      parent->has_child = true;
    }
    if (grow((void **)&s->open, &s->open_cap, s->open_count + 1,
             sizeof(*s->open))) {
      open_slice_t *o = &s->open[s->open_count++];
      *o = (open_slice_t){.track = e.track, .ts = ts, .bytes = e.bytes};
      snprintf(o->name, sizeof(o->name), "%s", e.name);
    }
  } else if (e.type == 2) {
    open_slice_t *top = innermost(s, e.track);
    if (top == NULL) {
      return;
    }
    open_slice_t o = *top;
    size_t i = (size_t)(top - s->open);
    memmove(&s->open[i], &s->open[i + 1],
            (s->open_count - i - 1) * sizeof(*s->open));
    s->open_count--;
    // A launch command holds its kernel's slice: the kernel's row counts
    // that time, so the launch row keeps only launches with no kernel slice
    // (those that failed before their kernel ran).
    if (strcmp(o.name, "launch") == 0 && o.has_child) {
      return;
    }
    add_duration(s, o.name, ts >= o.ts ? ts - o.ts : 0, o.bytes);
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int cmp_stat(const void *a, const void *b) {
  return strcmp(((const stat_entry_t *)a)->name,
                ((const stat_entry_t *)b)->name);
}

// The summary's category of a slice name: "host" for host calls, "copy",
// "command" for the other stream commands, and "kernel" for kernel launches
// (their slices are named by the kernel).
static const char *category(const char *name) {
  static const char *const k_commands[] = {"fill", "signal", "wait",
                                           "semaphore wait", "launch",
                                           "execute"};
  if (strcmp(name, "host_call") == 0) {
    return "host";
  }
  if (strncmp(name, "copy ", 5) == 0) {
    return "copy";
  }
  for (size_t i = 0; i < sizeof(k_commands) / sizeof(k_commands[0]); ++i) {
    if (strcmp(name, k_commands[i]) == 0) {
      return "command";
    }
  }
  return "kernel";
}

// Nearest-rank percentile of sorted |d|.
static uint64_t percentile(const uint64_t *d, uint64_t n, unsigned pct) {
  uint64_t rank = (n * pct + 99) / 100;
  return d[rank > 0 ? rank - 1 : 0];
}


// Reads the whole file at |path| into a new buffer.
static uint8_t *read_all(const char *path, uint64_t *out_size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    fprintf(stderr, "accel-trace: cannot open \"%s\": %s\n", path,
            strerror(errno));
    if (fd >= 0) {
      close(fd);
    }
    return NULL;
  }
  uint8_t *data = malloc(st.st_size > 0 ? (size_t)st.st_size : 1);
  ssize_t got = data != NULL ? read(fd, data, (size_t)st.st_size) : -1;
  close(fd);
  if (got != st.st_size) {
    fprintf(stderr, "accel-trace: cannot read \"%s\"\n", path);
    free(data);
    return NULL;
  }
  *out_size = (uint64_t)st.st_size;
  return data;
}

int trace_summary_read(const char *path, trace_summary_t *out) {
  uint64_t size = 0;
  uint8_t *data = read_all(path, &size);
  if (data == NULL) {
    return 1;
  }
  int rc = trace_summary_parse(data, size, out);
  free(data);
  if (rc != 0) {
    fprintf(stderr, "accel-trace: \"%s\" is not a Perfetto trace\n", path);
  }
  return rc;
}

int trace_summary_parse(const uint8_t *data, size_t size,
                        trace_summary_t *out) {
  summary_t s = {0};
  rd_t r = {data, data + size, false};
  uint32_t f, w;
  uint64_t v = 0;
  rd_t packet;
  uint64_t packets = 0;
  while (rd_field(&r, &f, &w, &v, &packet)) {
    if (f != 1 || w != 2) {
      continue;
    }
    packets++;
    uint64_t ts = 0;
    rd_t te = {0};
    bool has_te = false;
    rd_t sub;
    while (rd_field(&packet, &f, &w, &v, &sub)) {
      if (f == 8 && w == 0) {
        ts = v;
      } else if (f == 11 && w == 2) {
        te = sub;
        has_te = true;
      }
    }
    if (has_te) {
      track_event(&s, ts, te);
    }
  }
  free(s.open);
  if (r.bad || packets == 0) {
    for (size_t i = 0; i < s.stat_count; ++i) {
      free(s.stats[i].durations);
    }
    free(s.stats);
    return 1;
  }
  if (s.stat_count > 0) {  // a trace with no slices has no table at all
    qsort(s.stats, s.stat_count, sizeof(*s.stats), cmp_stat);
  }
  out->entries = calloc(s.stat_count ? s.stat_count : 1, sizeof(*out->entries));
  out->count = 0;
  static const char *const k_order[] = {"kernel", "host", "copy", "command"};
  for (size_t c = 0; c < sizeof(k_order) / sizeof(k_order[0]); ++c) {
    for (size_t i = 0; out->entries != NULL && i < s.stat_count; ++i) {
      stat_entry_t *e = &s.stats[i];
      if (strcmp(category(e->name), k_order[c]) != 0) {
        continue;
      }
      qsort(e->durations, e->count, sizeof(uint64_t), cmp_u64);
      trace_summary_entry_t *o = &out->entries[out->count++];
      snprintf(o->name, sizeof(o->name), "%s", e->name);
      o->category = k_order[c];
      o->count = e->count;
      o->bytes = e->bytes;
      for (uint64_t k = 0; k < e->count; ++k) {
        o->total_ns += e->durations[k];
      }
      o->p50_ns = percentile(e->durations, e->count, 50);
      o->p99_ns = percentile(e->durations, e->count, 99);
    }
  }
  for (size_t i = 0; i < s.stat_count; ++i) {
    free(s.stats[i].durations);
  }
  free(s.stats);
  if (out->entries == NULL) {
    return 1;
  }
  return 0;
}

void trace_summary_free(trace_summary_t *summary) {
  free(summary->entries);
  summary->entries = NULL;
  summary->count = 0;
}
