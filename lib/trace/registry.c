// The track registry: one entry per device, stream, DMA queue and thread that
// traces name, each with its perf counters; interned strings; device clock
// pairs; and accel_counters_snapshot().
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/lock.h"
#include "core/error.h"
#include "trace/trace_impl.h"

#define DEAD_KEPT 256u      // dead tracks kept for traces that still name them
#define STRINGS_MAX 4096u   // interned strings
#define CACHE_WAYS 4u       // per-thread key -> track cache
#define CLOCKS_MAX 64u      // devices with a clock pair

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
// Guarded by g_lock: tracks by id (index = id), NULL once freed.
static accel_trace_track_t **g_by_id;
static uint32_t g_id_capacity;
static uint32_t g_next_id = 2;  // id 1 is the process
static uint32_t g_dead[DEAD_KEPT];
static uint32_t g_dead_count;
// Bumped (release) by every removal so that per-thread caches refill.
_Atomic uint64_t accel_trace_remove_gen_g;
#define g_remove_gen accel_trace_remove_gen_g
__attribute__((tls_model("initial-exec"))) _Thread_local accel_trace_cache_t
    accel_trace_cache_g;
__attribute__((tls_model("initial-exec"))) _Thread_local accel_trace_current_t
    accel_trace_current_g;

static char *g_strings[STRINGS_MAX];
static _Atomic uint32_t g_string_count;

static struct {
  _Atomic uint32_t device;
  _Atomic uint64_t host_ns;
  _Atomic uint64_t device_ns;
} g_clocks[CLOCKS_MAX];

typedef struct cache_entry {
  uintptr_t key;
  accel_trace_track_t *track;
} cache_entry_t;
// Initial-exec: no __tls_get_addr call on the hot path.
#define TLS_IE __attribute__((tls_model("initial-exec")))
static TLS_IE _Thread_local cache_entry_t t_cache[CACHE_WAYS];
static TLS_IE _Thread_local uint64_t t_cache_gen;
static TLS_IE _Thread_local uint32_t t_cache_next;

static const struct {
  const char *name;
  const char *unit;
} k_counters[ACCEL_CTR_COUNT] = {
    [ACCEL_CTR_COMMANDS_ENQUEUED] = {"commands_enqueued", "count"},
    [ACCEL_CTR_COMMANDS_COMPLETED] = {"commands_completed", "count"},
    [ACCEL_CTR_QUEUE_OCCUPANCY] = {"queue_occupancy", "count"},
    [ACCEL_CTR_LAUNCHES] = {"launches", "count"},
    [ACCEL_CTR_COPIES] = {"copies", "count"},
    [ACCEL_CTR_COPY_BYTES_H2D] = {"copy_bytes_h2d", "bytes"},
    [ACCEL_CTR_COPY_BYTES_D2H] = {"copy_bytes_d2h", "bytes"},
    [ACCEL_CTR_COPY_BYTES_D2D] = {"copy_bytes_d2d", "bytes"},
    [ACCEL_CTR_FILLS] = {"fills", "count"},
    [ACCEL_CTR_FILL_BYTES] = {"fill_bytes", "bytes"},
    [ACCEL_CTR_HOST_CALLS] = {"host_calls", "count"},
    [ACCEL_CTR_SIGNALS] = {"signals", "count"},
    [ACCEL_CTR_WAITS] = {"waits", "count"},
    [ACCEL_CTR_WAIT_NS] = {"wait_ns", "ns"},
    [ACCEL_CTR_FAILURES] = {"failures", "count"},
    [ACCEL_CTR_REPLAYS] = {"replays", "count"},
    [ACCEL_CTR_REPLAYED_COMMANDS] = {"replayed_commands", "count"},
    [ACCEL_CTR_BYTES_IN_USE] = {"bytes_in_use", "bytes"},
    [ACCEL_CTR_BYTES_RESERVED] = {"bytes_reserved", "bytes"},
    [ACCEL_CTR_BYTES_PEAK] = {"bytes_peak", "bytes"},
    [ACCEL_CTR_ALLOCATIONS] = {"allocations", "count"},
    [ACCEL_CTR_FREES] = {"frees", "count"},
    [ACCEL_CTR_ALLOC_FAILURES] = {"alloc_failures", "count"},
    [ACCEL_CTR_HOST_WAITS] = {"host_waits", "count"},
    [ACCEL_CTR_HOST_WAIT_NS] = {"host_wait_ns", "ns"},
    [ACCEL_CTR_SIGNALS_HOST] = {"host_signals", "count"},
    [ACCEL_CTR_STREAMS] = {"streams", "count"},
};

const char *accel_counter_kind_name(uint32_t kind) {
  return kind < ACCEL_CTR_COUNT ? k_counters[kind].name : "unknown";
}

const char *accel_counter_kind_unit(uint32_t kind) {
  return kind < ACCEL_CTR_COUNT ? k_counters[kind].unit : "count";
}

bool accel_trace_counter_applies(uint32_t track_kind, uint32_t kind) {
  if (track_kind == ACCEL_TRACK_DEVICE) {
    return kind >= ACCEL_CTR_STREAM_COUNT && kind < ACCEL_CTR_COUNT;
  }
  if (track_kind == ACCEL_TRACK_STREAM || track_kind == ACCEL_TRACK_QUEUE) {
    return kind < ACCEL_CTR_STREAM_COUNT;
  }
  return false;
}

uint64_t accel_trace_counter_value(const accel_trace_track_t *track,
                                   uint32_t kind) {
  if (kind == ACCEL_CTR_COMMANDS_ENQUEUED || kind == ACCEL_CTR_QUEUE_OCCUPANCY) {
    uint64_t enq =
        track->enqueued_source != NULL
            ? atomic_load_explicit(track->enqueued_source, memory_order_relaxed)
            : atomic_load_explicit(&track->enqueued, memory_order_relaxed);
    if (kind == ACCEL_CTR_COMMANDS_ENQUEUED) {
      return enq;
    }
    uint64_t done = atomic_load_explicit(&track->processed, memory_order_relaxed);
    return enq > done ? enq - done : 0;
  }
  return atomic_load_explicit(&track->counters[kind], memory_order_relaxed);
}

static bool grow_ids_locked(uint32_t id) {
  ACCEL_ASSERT_HELD(&g_lock);
  if (id < g_id_capacity) {
    return true;
  }
  uint32_t cap = g_id_capacity ? g_id_capacity * 2 : 256;
  while (cap <= id) {
    cap *= 2;
  }
  accel_trace_track_t **grown = realloc(g_by_id, cap * sizeof(*grown));
  if (grown == NULL) {
    return false;
  }
  memset(grown + g_id_capacity, 0, (cap - g_id_capacity) * sizeof(*grown));
  g_by_id = grown;
  g_id_capacity = cap;
  return true;
}

accel_trace_track_t *accel_trace_track_add(uint32_t kind, uintptr_t key,
                                           uint32_t parent, const char *name) {
  accel_trace_track_t *t = aligned_alloc(64, sizeof(*t));
  if (t == NULL) {
    return NULL;
  }
  memset(t, 0, sizeof(*t));
  t->kind = kind;
  t->key = key;
  t->parent = parent;
  snprintf(t->name, sizeof(t->name), "%s", name != NULL ? name : "");
  atomic_init(&t->live, true);
  pthread_mutex_lock(&g_lock);
  uint32_t id = g_next_id;
  if (!grow_ids_locked(id)) {
    pthread_mutex_unlock(&g_lock);
    free(t);
    return NULL;
  }
  g_next_id++;
  t->id = id;
  g_by_id[id] = t;
  pthread_mutex_unlock(&g_lock);
  return t;
}

void accel_trace_track_set_enqueued_source(accel_trace_track_t *track,
                                           const _Atomic uint64_t *source) {
  pthread_mutex_lock(&g_lock);  // snapshots read it under the lock
  track->enqueued_source = source;
  pthread_mutex_unlock(&g_lock);
}

void accel_trace_track_remove(uintptr_t key) {
  pthread_mutex_lock(&g_lock);
  for (uint32_t id = g_next_id; id-- > 2;) {
    accel_trace_track_t *t = id < g_id_capacity ? g_by_id[id] : NULL;
    if (t != NULL && t->key == key &&
        atomic_load_explicit(&t->live, memory_order_relaxed)) {
      atomic_store_explicit(&t->live, false, memory_order_relaxed);
      // The queue's counter goes away with it: keep its last value.
      if (t->enqueued_source != NULL) {
        atomic_store_explicit(&t->enqueued,
                              atomic_load_explicit(t->enqueued_source,
                                                   memory_order_relaxed),
                              memory_order_relaxed);
        t->enqueued_source = NULL;
      }
      if (g_dead_count == DEAD_KEPT) {
        // Free the oldest dead track; traces written later name it by id.
        uint32_t old = g_dead[0];
        free(g_by_id[old]);
        g_by_id[old] = NULL;
        memmove(g_dead, g_dead + 1, (DEAD_KEPT - 1) * sizeof(g_dead[0]));
        g_dead_count--;
      }
      g_dead[g_dead_count++] = id;
      break;
    }
  }
  // Release: a thread that sees the new generation drops cached pointers.
  atomic_fetch_add_explicit(&g_remove_gen, 1, memory_order_release);
  pthread_mutex_unlock(&g_lock);
}

accel_trace_track_t *accel_trace_track_find(uintptr_t key) {
  // Acquire: pairs with the removal's release (see accel_trace_track_remove).
  uint64_t gen = atomic_load_explicit(&g_remove_gen, memory_order_acquire);
  if (gen == t_cache_gen) {
    for (uint32_t i = 0; i < CACHE_WAYS; ++i) {
      if (t_cache[i].key == key && t_cache[i].track != NULL) {
        return t_cache[i].track;
      }
    }
  } else {
    memset(t_cache, 0, sizeof(t_cache));
    t_cache_gen = gen;
  }
  accel_trace_track_t *found = NULL;
  pthread_mutex_lock(&g_lock);
  for (uint32_t id = g_next_id; id-- > 2;) {
    accel_trace_track_t *t = id < g_id_capacity ? g_by_id[id] : NULL;
    if (t != NULL && t->key == key &&
        atomic_load_explicit(&t->live, memory_order_relaxed)) {
      found = t;
      break;
    }
  }
  pthread_mutex_unlock(&g_lock);
  if (found != NULL) {
    t_cache[t_cache_next % CACHE_WAYS] = (cache_entry_t){key, found};
    t_cache_next++;
  }
  return found;
}

const accel_trace_track_t *accel_trace_track_by_id(uint32_t id, bool locked) {
  const accel_trace_track_t *t = NULL;
  if (locked) {
    pthread_mutex_lock(&g_lock);
  }
  if (id < g_id_capacity && g_by_id != NULL) {
    t = g_by_id[id];
  }
  if (locked) {
    pthread_mutex_unlock(&g_lock);
  }
  return t;
}

bool accel_trace_track_describe(uint32_t id, accel_trace_track_t *out) {
  bool ok = false;
  pthread_mutex_lock(&g_lock);
  if (id < g_id_capacity && g_by_id[id] != NULL) {
    const accel_trace_track_t *t = g_by_id[id];
    out->id = t->id;
    out->kind = t->kind;
    out->parent = t->parent;
    out->tid = t->tid;
    out->key = t->key;
    memcpy(out->name, t->name, sizeof(out->name));
    ok = true;
  }
  pthread_mutex_unlock(&g_lock);
  return ok;
}

void accel_trace_track_foreach(void (*fn)(const accel_trace_track_t *, void *),
                               void *ctx) {
  pthread_mutex_lock(&g_lock);
  for (uint32_t id = 2; id < g_next_id && id < g_id_capacity; ++id) {
    const accel_trace_track_t *t = g_by_id[id];
    if (t != NULL && atomic_load_explicit(&t->live, memory_order_relaxed) &&
        t->kind != ACCEL_TRACK_THREAD) {
      fn(t, ctx);
    }
  }
  pthread_mutex_unlock(&g_lock);
}

uint32_t accel_trace_intern(const char *text, bool dedupe) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&lock);
  uint32_t n = atomic_load_explicit(&g_string_count, memory_order_relaxed);
  if (dedupe) {
    for (uint32_t i = 0; i < n; ++i) {
      if (strcmp(g_strings[i], text) == 0) {
        pthread_mutex_unlock(&lock);
        return i + 1;
      }
    }
  }
  uint32_t id = 0;
  if (n < STRINGS_MAX) {
    g_strings[n] = strdup(text);
    if (g_strings[n] != NULL) {
      // Release: a reader that sees the count sees the string.
      atomic_store_explicit(&g_string_count, n + 1, memory_order_release);
      id = n + 1;
    }
  }
  pthread_mutex_unlock(&lock);
  return id;
}

const char *accel_trace_string(uint32_t id) {
  // Acquire: pairs with the release in accel_trace_intern.
  uint32_t n = atomic_load_explicit(&g_string_count, memory_order_acquire);
  return id >= 1 && id <= n ? g_strings[id - 1] : NULL;
}

void accel_trace_clock_set(uint32_t device, uint64_t host_ns,
                           uint64_t device_ns) {
  uint32_t slot = device % CLOCKS_MAX;
  atomic_store_explicit(&g_clocks[slot].host_ns, host_ns, memory_order_relaxed);
  atomic_store_explicit(&g_clocks[slot].device_ns, device_ns,
                        memory_order_relaxed);
  // Release: a reader that sees the device id sees its pair.
  atomic_store_explicit(&g_clocks[slot].device, device, memory_order_release);
}

uint64_t accel_trace_device_to_host_ns(uint32_t device, uint64_t device_ns) {
  uint32_t slot = device % CLOCKS_MAX;
  // Acquire: pairs with the release in accel_trace_clock_set.
  if (atomic_load_explicit(&g_clocks[slot].device, memory_order_acquire) !=
      device) {
    return device_ns;  // no pair: assume the device counts host time
  }
  uint64_t h = atomic_load_explicit(&g_clocks[slot].host_ns,
                                    memory_order_relaxed);
  uint64_t d = atomic_load_explicit(&g_clocks[slot].device_ns,
                                    memory_order_relaxed);
  return (uint64_t)((int64_t)h + ((int64_t)device_ns - (int64_t)d));
}

// ---------------------------------------------------------------------------
// accel_counters_snapshot
// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// Memory sources and counter collection
// ---------------------------------------------------------------------------

#define SOURCES_MAX 64u

// Guarded by g_sources_lock, which is held while a source runs (so that
// withdrawing a source waits for its calls) and is never taken by a hook
// that may run inside a source.
static pthread_mutex_t g_sources_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  uintptr_t key;    // the device (0: free slot)
  uint32_t device;  // its track id
  accel_trace_memory_fn_t fn;
  void *ctx;
} g_sources[SOURCES_MAX];

void accel_trace_device_memory_source(const void *device,
                                      accel_trace_memory_fn_t fn, void *ctx) {
  accel_trace_track_t *t = accel_trace_track_find((uintptr_t)device);
  pthread_mutex_lock(&g_sources_lock);
  uint32_t slot = SOURCES_MAX;
  for (uint32_t i = 0; i < SOURCES_MAX && slot == SOURCES_MAX; ++i) {
    if (g_sources[i].key == (uintptr_t)device) {
      slot = i;
    }
  }
  if (fn == NULL) {
    if (slot < SOURCES_MAX) {
      g_sources[slot].key = 0;
      g_sources[slot].device = 0;
    }
  } else if (t != NULL) {
    for (uint32_t i = 0; i < SOURCES_MAX && slot == SOURCES_MAX; ++i) {
      if (g_sources[i].key == 0) {
        slot = i;
      }
    }
    if (slot < SOURCES_MAX) {
      g_sources[slot].key = (uintptr_t)device;
      g_sources[slot].device = t->id;
      g_sources[slot].fn = fn;
      g_sources[slot].ctx = ctx;
    }
  }
  pthread_mutex_unlock(&g_sources_lock);
}

typedef struct collect_ctx {
  accel_trace_counter_item_t *items;
  size_t count;
  size_t capacity;
  bool failed;
} collect_ctx_t;

static void collect_track(const accel_trace_track_t *t, void *arg) {
  collect_ctx_t *ctx = arg;
  if (t->kind != ACCEL_TRACK_DEVICE && t->kind != ACCEL_TRACK_STREAM &&
      t->kind != ACCEL_TRACK_QUEUE) {
    return;
  }
  for (uint32_t k = 0; k < ACCEL_CTR_COUNT; ++k) {
    if (!accel_trace_counter_applies(t->kind, k)) {
      continue;
    }
    if (ctx->count == ctx->capacity) {
      size_t cap = ctx->capacity ? ctx->capacity * 2 : 64;
      void *grown = realloc(ctx->items, cap * sizeof(*ctx->items));
      if (grown == NULL) {
        ctx->failed = true;
        return;
      }
      ctx->items = grown;
      ctx->capacity = cap;
    }
    accel_trace_counter_item_t *it = &ctx->items[ctx->count++];
    it->owner = t->id;
    it->track_kind = t->kind;
    it->kind = k;
    it->value = accel_trace_counter_value(t, k);
    memcpy(it->scope, t->name, sizeof(it->scope));
  }
}

// Replaces the memory counters of sourced devices with their sources'
// figures. Called without the registry lock.
static void apply_memory_sources(accel_trace_counter_item_t *items,
                                 size_t count) {
  pthread_mutex_lock(&g_sources_lock);
  for (uint32_t s = 0; s < SOURCES_MAX; ++s) {
    if (g_sources[s].key == 0) {
      continue;
    }
    accel_trace_memory_t m = {0};
    bool read = false;
    for (size_t i = 0; i < count; ++i) {
      if (items[i].owner != g_sources[s].device) {
        continue;
      }
      if (!read) {
        g_sources[s].fn(g_sources[s].ctx, &m);
        read = true;
      }
      switch (items[i].kind) {
        case ACCEL_CTR_BYTES_IN_USE:
          items[i].value = m.bytes_in_use;
          break;
        case ACCEL_CTR_BYTES_RESERVED:
          items[i].value = m.bytes_reserved;
          break;
        case ACCEL_CTR_BYTES_PEAK:
          items[i].value = m.bytes_peak;
          break;
        case ACCEL_CTR_ALLOCATIONS:
          items[i].value = m.allocations;
          break;
        case ACCEL_CTR_FREES:
          items[i].value = m.frees;
          break;
        case ACCEL_CTR_ALLOC_FAILURES:
          items[i].value = m.alloc_failures;
          break;
        default:
          break;
      }
    }
  }
  pthread_mutex_unlock(&g_sources_lock);
}

accel_trace_counter_item_t *accel_trace_counters_collect(size_t *out_count,
                                                         bool *out_failed) {
  collect_ctx_t ctx = {0};
  accel_trace_track_foreach(collect_track, &ctx);
  *out_failed = ctx.failed;
  if (ctx.failed) {
    free(ctx.items);
    *out_count = 0;
    return NULL;
  }
  apply_memory_sources(ctx.items, ctx.count);
  *out_count = ctx.count;
  return ctx.items;
}

// ---------------------------------------------------------------------------
// accel_counters_snapshot
// ---------------------------------------------------------------------------

accel_status_t accel_counters_snapshot(accel_counter_t *counters,
                                       size_t capacity, size_t *out_count) {
  ACCEL_CHECK_ARG(out_count != NULL, "out_count (NULL)");
  ACCEL_CHECK_ARG(counters != NULL || capacity == 0,
                  "counters (NULL with a non-zero capacity)");
  size_t stride = sizeof(accel_counter_t);
  if (capacity > 0) {
    if (counters[0].struct_size < sizeof(accel_counter_t)) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "counters snapshot: counters[0].struct_size %u is "
                         "smaller than %zu",
                         counters[0].struct_size, sizeof(accel_counter_t));
    }
    stride = counters[0].struct_size;
  }
  size_t n = 0;
  bool failed = false;
  accel_trace_counter_item_t *items = accel_trace_counters_collect(&n, &failed);
  if (failed) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "counters snapshot: cannot allocate the copy of the "
                       "counters");
  }
  uint8_t *out = (uint8_t *)counters;
  for (size_t i = 0; i < n && i < capacity; ++i) {
    const accel_trace_counter_item_t *it = &items[i];
    accel_counter_t c;
    memset(&c, 0, sizeof(c));
    c.struct_size = (uint32_t)sizeof(c);
    c.scope = it->track_kind == ACCEL_TRACK_DEVICE ? ACCEL_COUNTER_SCOPE_DEVICE
              : it->track_kind == ACCEL_TRACK_STREAM
                  ? ACCEL_COUNTER_SCOPE_STREAM
                  : ACCEL_COUNTER_SCOPE_QUEUE;
    c.scope_id = it->owner;
    snprintf(c.scope_name, sizeof(c.scope_name), "%s", it->scope);
    snprintf(c.name, sizeof(c.name), "%s", k_counters[it->kind].name);
    snprintf(c.unit, sizeof(c.unit), "%s", k_counters[it->kind].unit);
    c.value = it->value;
    memcpy(out + i * stride, &c, sizeof(c));
  }
  free(items);
  *out_count = n;
  return ACCEL_OK;
}
