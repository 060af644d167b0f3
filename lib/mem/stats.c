// Allocation counters and the memory report (accel_mem_report).
#include <stdarg.h>
#include <stdio.h>

#include "core/lock.h"
#include "mem/mem_internal.h"

static void raise_peak(_Atomic uint64_t *peak, uint64_t value) {
  uint64_t seen = atomic_load_explicit(peak, memory_order_relaxed);
  // Relaxed: a statistic; the loop only needs the max to win eventually.
  while (value > seen &&
         !atomic_compare_exchange_weak_explicit(peak, &seen, value,
                                                memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

void accel_mem_counters_alloc(accel_mem_counters_t *c, uint64_t bytes) {
  int64_t now = atomic_fetch_add_explicit(&c->bytes_in_use, (int64_t)bytes,
                                          memory_order_relaxed) +
                (int64_t)bytes;
  atomic_fetch_add_explicit(&c->live_count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&c->alloc_count, 1, memory_order_relaxed);
  if (now > 0) {
    raise_peak(&c->peak_in_use, (uint64_t)now);
  }
}

void accel_mem_counters_free(accel_mem_counters_t *c, uint64_t bytes) {
  atomic_fetch_sub_explicit(&c->bytes_in_use, (int64_t)bytes,
                            memory_order_relaxed);
  atomic_fetch_add_explicit(&c->free_count, 1, memory_order_relaxed);
  // Release, and last: a pool destroy that sees the count reach zero
  // (acquire) also sees that this free no longer touches the allocator.
  atomic_fetch_sub_explicit(&c->live_count, 1, memory_order_release);
}

void accel_mem_counters_reserve(accel_mem_counters_t *c, int64_t delta) {
  int64_t now = atomic_fetch_add_explicit(&c->bytes_reserved, delta,
                                          memory_order_relaxed) +
                delta;
  if (now > 0) {
    raise_peak(&c->peak_reserved, (uint64_t)now);
  }
}

static inline void add_i(_Atomic int64_t *c, int64_t d) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d,
                        memory_order_relaxed);
}

static inline void add_u(_Atomic uint64_t *c, uint64_t d) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d,
                        memory_order_relaxed);
}

static inline void raise_peak_single_writer(_Atomic uint64_t *peak, int64_t now) {
  if (now > 0 &&
      (uint64_t)now > atomic_load_explicit(peak, memory_order_relaxed)) {
    atomic_store_explicit(peak, (uint64_t)now, memory_order_relaxed);
  }
}

void accel_mem_counters_alloc_locked(accel_mem_counters_t *c, uint64_t bytes,
                                     const accel_mem_spinlock_t *held) {
  ACCEL_ASSERT_SPIN_HELD(
      atomic_load_explicit(&held->word, memory_order_relaxed) != 0);
  add_i(&c->bytes_in_use, (int64_t)bytes);
  add_i(&c->live_count, 1);
  add_u(&c->alloc_count, 1);
  raise_peak_single_writer(&c->peak_in_use,
              atomic_load_explicit(&c->bytes_in_use, memory_order_relaxed));
}

void accel_mem_counters_free_locked(accel_mem_counters_t *c, uint64_t bytes,
                                    const accel_mem_spinlock_t *held) {
  ACCEL_ASSERT_SPIN_HELD(
      atomic_load_explicit(&held->word, memory_order_relaxed) != 0);
  add_i(&c->bytes_in_use, -(int64_t)bytes);
  add_i(&c->live_count, -1);
  add_u(&c->free_count, 1);
}

void accel_mem_counters_reserve_locked(accel_mem_counters_t *c, int64_t delta,
                                       const accel_mem_spinlock_t *held) {
  ACCEL_ASSERT_SPIN_HELD(
      atomic_load_explicit(&held->word, memory_order_relaxed) != 0);
  add_i(&c->bytes_reserved, delta);
  raise_peak_single_writer(&c->peak_reserved,
              atomic_load_explicit(&c->bytes_reserved, memory_order_relaxed));
}

void accel_mem_counters_fail(accel_mem_counters_t *c) {
  atomic_fetch_add_explicit(&c->failure_count, 1, memory_order_relaxed);
}

static uint64_t clamp0(int64_t v) { return v > 0 ? (uint64_t)v : 0; }

void accel_mem_counters_read(const accel_mem_counters_t *c,
                             accel_mem_stats_t *out) {
  out->bytes_in_use = clamp0(
      atomic_load_explicit(&c->bytes_in_use, memory_order_relaxed));
  out->bytes_reserved = clamp0(
      atomic_load_explicit(&c->bytes_reserved, memory_order_relaxed));
  out->peak_bytes_in_use =
      atomic_load_explicit(&c->peak_in_use, memory_order_relaxed);
  out->peak_bytes_reserved =
      atomic_load_explicit(&c->peak_reserved, memory_order_relaxed);
  out->live_count =
      clamp0(atomic_load_explicit(&c->live_count, memory_order_relaxed));
  out->alloc_count =
      atomic_load_explicit(&c->alloc_count, memory_order_relaxed);
  out->free_count = atomic_load_explicit(&c->free_count, memory_order_relaxed);
  out->failure_count =
      atomic_load_explicit(&c->failure_count, memory_order_relaxed);
  out->fragmentation =
      out->bytes_in_use ? (double)out->bytes_reserved / out->bytes_in_use : 0;
}

void accel_mem_stats_add(accel_mem_stats_t *acc, const accel_mem_stats_t *in) {
  acc->bytes_in_use += in->bytes_in_use;
  acc->bytes_reserved += in->bytes_reserved;
  acc->peak_bytes_in_use += in->peak_bytes_in_use;
  acc->peak_bytes_reserved += in->peak_bytes_reserved;
  acc->live_count += in->live_count;
  acc->alloc_count += in->alloc_count;
  acc->free_count += in->free_count;
  acc->failure_count += in->failure_count;
  acc->fragmentation = acc->bytes_in_use
                           ? (double)acc->bytes_reserved / acc->bytes_in_use
                           : 0;
}

static void allocator_stats(const accel_mem_allocator_t *a,
                            accel_mem_stats_t *out) {
  accel_mem_counters_read(&a->counters, out);
  if (a->vt->stats != NULL) {
    a->vt->stats(a, out);
  }
  out->fragmentation =
      out->bytes_in_use ? (double)out->bytes_reserved / out->bytes_in_use : 0;
}

static accel_status_t check_stats_out(const accel_mem_stats_t *out) {
  ACCEL_CHECK_ARG(out != NULL, "out_stats (NULL)");
  if (out->struct_size < sizeof(accel_mem_stats_t)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "mem stats: struct_size %u is below %zu",
                       out->struct_size, sizeof(accel_mem_stats_t));
  }
  return ACCEL_OK;
}

accel_status_t accel_mempool_stats(const accel_mempool_t *pool,
                                   accel_mem_stats_t *out_stats) {
  ACCEL_CHECK_ARG(pool != NULL, "pool (NULL)");
  ACCEL_RETURN_IF_ERROR(check_stats_out(out_stats));
  accel_mem_stats_t s = {.struct_size = out_stats->struct_size};
  allocator_stats(&pool->base, &s);
  *out_stats = s;
  return ACCEL_OK;
}

// The device's figures: every allocator's, pooled memory counted once.
static void device_stats(accel_mem_device_t *mem, accel_mem_stats_t *out) {
  accel_mem_stats_t sum = {.struct_size = out->struct_size};
  uint64_t cached = 0, cached_blocks = 0;
  pthread_mutex_lock(&mem->lock);
  sum.alloc_count = mem->retired_allocs;
  sum.free_count = mem->retired_frees;
  sum.failure_count = mem->retired_failures;
  for (accel_mem_allocator_t *a = mem->allocators; a != NULL; a = a->next) {
    accel_mem_stats_t s = {0};
    allocator_stats(a, &s);
    // A stream-ordered pool's live buffers are also counted by the
    // allocator that backs them; count them once (in the backing one), and
    // count the cached free memory as its reservation only.
    if (a->type == ACCEL_MEMPOOL_TYPE_STREAM_ORDERED) {
      s.bytes_in_use = 0;
      s.peak_bytes_in_use = 0;
      s.live_count = 0;
      s.bytes_reserved = 0;
      s.peak_bytes_reserved = 0;
      uint64_t blocks = 0;
      cached += accel_mem_async_cached_backing(a, &blocks);
      cached_blocks += blocks;
    }
    accel_mem_stats_add(&sum, &s);
  }
  pthread_mutex_unlock(&mem->lock);
  accel_mem_stats_t pages = {0};
  accel_mem_counters_read(&mem->pages.counters, &pages);
  sum.bytes_in_use = sum.bytes_in_use > cached ? sum.bytes_in_use - cached : 0;
  // Blocks a stream-ordered pool caches are live in its backing allocator
  // but held by no user.
  sum.live_count =
      sum.live_count > cached_blocks ? sum.live_count - cached_blocks : 0;
  sum.bytes_reserved += pages.bytes_reserved;
  sum.failure_count += pages.failure_count;
  sum.fragmentation =
      sum.bytes_in_use ? (double)sum.bytes_reserved / sum.bytes_in_use : 0;
  *out = sum;
}

accel_status_t accel_device_mem_stats(accel_device_t *device,
                                      accel_mem_stats_t *out_stats) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_RETURN_IF_ERROR(check_stats_out(out_stats));
  accel_mem_device_t *mem = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_device_get(device, &mem));
  device_stats(mem, out_stats);
  return ACCEL_OK;
}

void accel_mem_trace_source(void *ctx, accel_trace_memory_t *out) {
  accel_mem_stats_t s = {.struct_size = sizeof(s)};
  device_stats(ctx, &s);
  out->bytes_in_use = s.bytes_in_use;
  out->bytes_reserved = s.bytes_reserved;
  out->bytes_peak = s.peak_bytes_in_use;
  out->allocations = s.alloc_count;
  out->frees = s.free_count;
  out->alloc_failures = s.failure_count;
}

typedef struct report_out {
  char *buf;
  size_t capacity;
  size_t length;
} report_out_t;

__attribute__((format(printf, 2, 3))) static void emit(report_out_t *r,
                                                       const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = r->length < r->capacity ? r->capacity - r->length : 0;
  int n = vsnprintf(room ? r->buf + r->length : NULL, room, fmt, ap);
  va_end(ap);
  if (n > 0) {
    r->length += (size_t)n;
  }
}

static const char *type_name(uint32_t type) {
  switch (type) {
    case ACCEL_MEMPOOL_TYPE_SLAB:
      return "slab";
    case ACCEL_MEMPOOL_TYPE_PAGED:
      return "paged";
    case ACCEL_MEMPOOL_TYPE_STREAM_ORDERED:
      return "stream-ordered";
    case ACCEL_MEM_TYPE_HOST_PINNED:
      return "host-pinned";
    case ACCEL_MEM_TYPE_DEDICATED:
      return "dedicated";
    default:
      return "unknown";
  }
}

accel_status_t accel_mem_report(accel_device_t *device, char *out,
                                size_t capacity, size_t *out_length) {
  ACCEL_CHECK_ARG(device != NULL, "device (NULL)");
  ACCEL_CHECK_ARG(out != NULL || capacity == 0, "out (NULL)");
  accel_mem_device_t *mem = NULL;
  ACCEL_RETURN_IF_ERROR(accel_mem_device_get(device, &mem));
  report_out_t r = {.buf = out, .capacity = capacity};
  accel_mem_stats_t total = {.struct_size = sizeof(total)};
  ACCEL_RETURN_IF_ERROR(accel_device_mem_stats(device, &total));
  emit(&r,
       "memory of %s: in use %llu B, reserved %llu B (peak %llu B), "
       "%llu live, %llu failures\n",
       device->info.id, (unsigned long long)total.bytes_in_use,
       (unsigned long long)total.bytes_reserved,
       (unsigned long long)total.peak_bytes_reserved,
       (unsigned long long)total.live_count,
       (unsigned long long)total.failure_count);
  emit(&r, "%-20s %-15s %14s %14s %14s %14s %10s %10s %8s %7s\n", "allocator",
       "type", "in_use", "reserved", "peak_in_use", "peak_reserved", "live",
       "allocs", "failures", "frag");
  pthread_mutex_lock(&mem->lock);
  for (accel_mem_allocator_t *a = mem->allocators; a != NULL; a = a->next) {
    accel_mem_stats_t s = {0};
    allocator_stats(a, &s);
    emit(&r, "%-20s %-15s %14llu %14llu %14llu %14llu %10llu %10llu %8llu "
             "%7.3f\n",
         a->name, type_name(a->type), (unsigned long long)s.bytes_in_use,
         (unsigned long long)s.bytes_reserved,
         (unsigned long long)s.peak_bytes_in_use,
         (unsigned long long)s.peak_bytes_reserved,
         (unsigned long long)s.live_count, (unsigned long long)s.alloc_count,
         (unsigned long long)s.failure_count, s.fragmentation);
  }
  pthread_mutex_unlock(&mem->lock);
  accel_mem_stats_t pages = {0};
  accel_mem_counters_read(&mem->pages.counters, &pages);
  emit(&r, "%-20s %-15s %14s %14llu %14s %14llu\n", "page-source", "pages",
       "-", (unsigned long long)pages.bytes_reserved, "-",
       (unsigned long long)pages.peak_bytes_reserved);
  emit(&r, "%-32s %14s %10s\n", "tag", "bytes", "live");
  pthread_mutex_lock(&mem->tag_lock);
  uint32_t n = mem->tag_count;
  pthread_mutex_unlock(&mem->tag_lock);
  for (uint32_t i = 1; i < n; ++i) {
    emit(&r, "%-32s %14lld %10lld\n", mem->tags[i].name,
         (long long)atomic_load_explicit(&mem->tags[i].bytes,
                                         memory_order_relaxed),
         (long long)atomic_load_explicit(&mem->tags[i].count,
                                         memory_order_relaxed));
  }
  if (out_length != NULL) {
    *out_length = r.length;
  }
  return ACCEL_OK;
}
