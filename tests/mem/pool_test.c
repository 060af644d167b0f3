// Stream-ordered pool: reuse on the same stream at once, on another stream
// only after the free point has completed; release threshold; misuse.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

typedef struct fixture {
  test_env_t *env;
  accel_stream_t *s1;
  accel_stream_t *s2;
  accel_semaphore_t *gate;
} fixture_t;

static int setup(void **state) {
  if (test_env_setup(state) != 0) {
    return -1;
  }
  fixture_t *f = calloc(1, sizeof(*f));
  f->env = *state;
  if (accel_stream_create(f->env->device, NULL, &f->s1) != ACCEL_OK ||
      accel_stream_create(f->env->device, NULL, &f->s2) != ACCEL_OK) {
    return -1;
  }
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  accel_stream_destroy(f->s1);
  accel_stream_destroy(f->s2);
  *state = f->env;
  free(f);
  return test_env_teardown(state);
}

static accel_status_t gate_fn(void *user) {
  return accel_semaphore_wait(user, 1, ACCEL_TIMEOUT_INFINITE);
}

// Blocks |s| behind a host semaphore until open_gate.
static accel_semaphore_t *close_gate(fixture_t *f, accel_stream_t *s) {
  accel_semaphore_t *gate = NULL;
  assert_accel_ok(accel_semaphore_create(f->env->device, 0, &gate));
  assert_accel_ok(accel_stream_host_call(s, gate_fn, gate));
  return gate;
}

static void open_gate(accel_semaphore_t *gate, accel_stream_t *s) {
  assert_accel_ok(accel_semaphore_signal(gate, 1));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  accel_semaphore_release(gate);
}

static accel_buffer_t *alloc_async(accel_stream_t *s, uint64_t size,
                                   accel_mempool_t *pool) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = size,
                           .pool = pool};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc_async(s, &d, &b));
  return b;
}

// Memory freed on a stream is reused at once by the same stream, even while
// that stream's earlier work is still pending.
static void test_async_free_is_reused_at_once_on_the_same_stream(
    void **state) {
  fixture_t *f = *state;
  static const uint64_t sizes[] = {100, 65536, 300000, 3 << 20};
  for (int i = 0; i < 4; ++i) {
    accel_semaphore_t *gate = close_gate(f, f->s1);
    accel_buffer_t *a = alloc_async(f->s1, sizes[i], NULL);
    assert_accel_ok(accel_stream_fill(f->s1, a, 0, sizes[i], 0xab, 1));
    uint64_t addr = accel_buffer_address(a);
    assert_accel_ok(accel_buffer_free_async(f->s1, a));
    accel_buffer_t *b = alloc_async(f->s1, sizes[i], NULL);
    assert_int_equal(accel_buffer_address(b), addr);
    assert_accel_ok(accel_buffer_free_async(f->s1, b));
    open_gate(gate, f->s1);
  }
}

// Another stream gets different memory while the free point is pending, and
// the same memory once the freeing stream's work has completed.
static void test_async_free_is_reused_by_another_stream_only_after_completion(
    void **state) {
  fixture_t *f = *state;
  accel_semaphore_t *gate = close_gate(f, f->s1);
  accel_buffer_t *a = alloc_async(f->s1, 4096, NULL);
  uint64_t addr = accel_buffer_address(a);
  assert_accel_ok(accel_stream_fill(f->s1, a, 0, 4096, 0xcd, 1));
  assert_accel_ok(accel_buffer_free_async(f->s1, a));
  accel_buffer_t *b = alloc_async(f->s2, 4096, NULL);
  assert_int_not_equal(accel_buffer_address(b), addr);
  // The pending fill must land in memory nobody else owns: b stays as
  // written.
  void *p = NULL;
  assert_accel_ok(accel_buffer_host_pointer(b, &p));
  memset(p, 0x11, 4096);
  open_gate(gate, f->s1);
  assert_int_equal(((unsigned char *)p)[4095], 0x11);
  accel_buffer_t *c = alloc_async(f->s2, 4096, NULL);
  assert_int_equal(accel_buffer_address(c), addr);
  assert_accel_ok(accel_buffer_free_async(f->s2, b));
  assert_accel_ok(accel_buffer_free_async(f->s2, c));
  assert_accel_ok(accel_stream_synchronize(f->s2, ACCEL_TIMEOUT_INFINITE));
}

// Once the freeing stream's completion timeline has passed the free point
// (the queue posts it in batches, at the latest when it runs dry: after the
// event below completes, accel_stream_query turns OK), the other stream
// reuses the memory without any synchronize call.
static void test_async_reuse_follows_the_freeing_streams_timeline(
    void **state) {
  fixture_t *f = *state;
  accel_event_t *e = NULL;
  assert_accel_ok(accel_event_create(f->env->device, 0, &e));
  accel_semaphore_t *gate = close_gate(f, f->s1);
  accel_buffer_t *a = alloc_async(f->s1, 20000, NULL);
  uint64_t addr = accel_buffer_address(a);
  assert_accel_ok(accel_buffer_free_async(f->s1, a));
  assert_accel_ok(accel_event_record(e, f->s1));
  assert_accel_status(accel_event_query(e), ACCEL_ERROR_NOT_READY);
  assert_accel_ok(accel_semaphore_signal(gate, 1));
  assert_accel_ok(accel_event_synchronize(e, ACCEL_TIMEOUT_INFINITE));
  uint64_t deadline = test_now_ns() + 5000000000ull;
  while (accel_stream_query(f->s1) != ACCEL_OK && test_now_ns() < deadline) {
  }
  accel_buffer_t *b = alloc_async(f->s2, 20000, NULL);
  assert_int_equal(accel_buffer_address(b), addr);
  assert_accel_ok(accel_buffer_free_async(f->s2, b));
  assert_accel_ok(accel_stream_synchronize(f->s1, ACCEL_TIMEOUT_INFINITE));
  accel_semaphore_release(gate);
  accel_event_release(e);
}

// With a release threshold of 0 a pool keeps nothing once the free point
// has completed; with UINT64_MAX it keeps everything until trimmed.
// The device's figures count what users hold: after 100 stream-ordered
// alloc/free pairs nothing is live and no byte is in use (the pool's cached
// blocks, live in the allocator behind it, are not users' buffers; it said
// 51 live), three held buffers are three; and the alloc and free counts
// never go down, also when a pool is destroyed (issue 15).
static void test_device_stats_count_what_users_hold(void **state) {
  fixture_t *f = *state;
  accel_device_t *dev = f->env->device;
  accel_mem_stats_t before = {.struct_size = sizeof(before)};
  assert_accel_ok(accel_device_mem_stats(dev, &before));
  for (int i = 0; i < 100; ++i) {
    accel_buffer_t *b = alloc_async(f->s1, 256 + 64 * (uint64_t)i, NULL);
    assert_accel_ok(accel_buffer_free_async(f->s1, b));
  }
  assert_accel_ok(accel_stream_synchronize(f->s1, ACCEL_TIMEOUT_INFINITE));
  accel_mem_stats_t st = {.struct_size = sizeof(st)};
  assert_accel_ok(accel_device_mem_stats(dev, &st));
  assert_int_equal(st.live_count, before.live_count);
  assert_int_equal(st.bytes_in_use, before.bytes_in_use);
  accel_buffer_t *held[3];
  for (int i = 0; i < 3; ++i) {
    held[i] = alloc_async(f->s1, 1000, NULL);
  }
  assert_accel_ok(accel_device_mem_stats(dev, &st));
  assert_int_equal(st.live_count, before.live_count + 3);
  // In use: the blocks behind them (1000 bytes take a 1 KiB slab block).
  assert_int_equal(st.bytes_in_use, before.bytes_in_use + 3 * 1024);
  for (int i = 0; i < 3; ++i) {
    assert_accel_ok(accel_buffer_free_async(f->s1, held[i]));
  }
  // A pool's counts stay in the device's after the pool is gone.
  accel_mempool_desc_t pd = {.struct_size = sizeof(pd),
                             .type = ACCEL_MEMPOOL_TYPE_PAGED};
  accel_mempool_t *pool = NULL;
  assert_accel_ok(accel_mempool_create(dev, &pd, &pool));
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 4 << 20,
                           .pool = pool};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(dev, &d, &b));
  assert_accel_ok(accel_buffer_free(b));
  accel_mem_stats_t with = {.struct_size = sizeof(with)};
  assert_accel_ok(accel_device_mem_stats(dev, &with));
  assert_accel_ok(accel_mempool_destroy(pool));
  accel_mem_stats_t after = {.struct_size = sizeof(after)};
  assert_accel_ok(accel_device_mem_stats(dev, &after));
  assert_true(after.alloc_count >= with.alloc_count);
  assert_true(after.free_count >= with.free_count);
  assert_true(with.alloc_count > before.alloc_count);
}

static void test_async_release_threshold_bounds_cached_memory(void **state) {
  fixture_t *f = *state;
  accel_mempool_desc_t pd = {.struct_size = sizeof(pd),
                             .type = ACCEL_MEMPOOL_TYPE_STREAM_ORDERED,
                             .release_threshold_bytes = 0};
  accel_mempool_t *keep_none = NULL;
  assert_accel_ok(accel_mempool_create(f->env->device, &pd, &keep_none));
  pd.release_threshold_bytes = UINT64_MAX;
  accel_mempool_t *keep_all = NULL;
  assert_accel_ok(accel_mempool_create(f->env->device, &pd, &keep_all));
  accel_mem_stats_t st = {.struct_size = sizeof(st)};
  for (int i = 0; i < 8; ++i) {
    accel_buffer_t *a = alloc_async(f->s1, 3 << 20, keep_none);
    accel_buffer_t *b = alloc_async(f->s1, 3 << 20, keep_all);
    assert_accel_ok(accel_buffer_free_async(f->s1, a));
    assert_accel_ok(accel_buffer_free_async(f->s1, b));
  }
  assert_accel_ok(accel_mempool_stats(keep_none, &st));
  assert_int_equal(st.bytes_reserved, 0);
  assert_int_equal(st.alloc_count, 8);
  assert_accel_ok(accel_mempool_stats(keep_all, &st));
  assert_int_equal(st.bytes_reserved, 4 << 20);  // one block, reused
  assert_int_equal(st.bytes_in_use, 0);
  assert_accel_ok(accel_mempool_trim(NULL, keep_all, 0));
  assert_accel_ok(accel_mempool_stats(keep_all, &st));
  assert_int_equal(st.bytes_reserved, 0);
  assert_accel_ok(accel_mempool_destroy(keep_none));
  assert_accel_ok(accel_mempool_destroy(keep_all));
}

// A pool at its limit fails with the request in the message, after giving
// back what it could.
static void test_async_pool_limit_fails_cleanly(void **state) {
  fixture_t *f = *state;
  accel_mempool_desc_t pd = {.struct_size = sizeof(pd),
                             .type = ACCEL_MEMPOOL_TYPE_STREAM_ORDERED,
                             .max_bytes = 1 << 20,
                             .release_threshold_bytes = UINT64_MAX};
  accel_mempool_t *pool = NULL;
  assert_accel_ok(accel_mempool_create(f->env->device, &pd, &pool));
  accel_buffer_t *a = alloc_async(f->s1, 600000, pool);
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 600000,
                           .pool = pool};
  accel_buffer_t *b = NULL;
  assert_accel_status(accel_buffer_alloc_async(f->s2, &d, &b),
                      ACCEL_ERROR_OUT_OF_MEMORY);
  assert_non_null(strstr(accel_last_error(), "600000"));
  assert_accel_ok(accel_buffer_free_async(f->s1, a));
  assert_accel_ok(accel_stream_synchronize(f->s1, ACCEL_TIMEOUT_INFINITE));
  d.size_bytes = 900000;  // different size: the cached block must go first
  assert_accel_ok(accel_buffer_alloc_async(f->s2, &d, &b));
  assert_accel_ok(accel_buffer_free_async(f->s2, b));
  assert_accel_ok(accel_stream_synchronize(f->s2, ACCEL_TIMEOUT_INFINITE));
  assert_accel_ok(accel_mempool_destroy(pool));
}

// Misuse: double async free, wrong pool types, NULLs, a buffer of another
// stream-ordered pool's device; freeing a non-pool buffer in stream order
// defers it behind the stream's work.
static void test_async_misuse_is_rejected(void **state) {
  fixture_t *f = *state;
  accel_buffer_t *a = alloc_async(f->s1, 512, NULL);
  assert_accel_ok(accel_buffer_free_async(f->s1, a));
  assert_accel_status(accel_buffer_free_async(f->s1, a),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "double free"));
  assert_accel_status(accel_buffer_free_async(NULL, a),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_buffer_free_async(f->s1, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_mempool_desc_t pd = {.struct_size = sizeof(pd),
                             .type = ACCEL_MEMPOOL_TYPE_SLAB};
  accel_mempool_t *slab = NULL;
  assert_accel_ok(accel_mempool_create(f->env->device, &pd, &slab));
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 64,
                           .pool = slab};
  accel_buffer_t *b = NULL;
  assert_accel_status(accel_buffer_alloc_async(f->s1, &d, &b),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  pd.type = ACCEL_MEMPOOL_TYPE_STREAM_ORDERED;
  accel_mempool_t *so = NULL;
  assert_accel_ok(accel_mempool_create(f->env->device, &pd, &so));
  d.pool = so;
  assert_accel_status(accel_buffer_alloc(f->env->device, &d, &b),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  d.pool = NULL;
  d.kind = ACCEL_MEMORY_KIND_HOST_PINNED;
  assert_accel_status(accel_buffer_alloc_async(f->s1, &d, &b),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_null(b);
  // A slab buffer freed in stream order stays live until the stream passes
  // the free point.
  d.kind = ACCEL_MEMORY_KIND_DEVICE;
  d.pool = slab;
  assert_accel_ok(accel_buffer_alloc(f->env->device, &d, &b));
  accel_semaphore_t *gate = close_gate(f, f->s1);
  assert_accel_ok(accel_buffer_free_async(f->s1, b));
  accel_mem_stats_t st = {.struct_size = sizeof(st)};
  assert_accel_ok(accel_mempool_stats(slab, &st));
  assert_int_equal(st.live_count, 1);
  assert_accel_status(accel_buffer_free(b), ACCEL_ERROR_INVALID_ARGUMENT);
  open_gate(gate, f->s1);
  uint64_t deadline = test_now_ns() + 5000000000ull;
  do {
    assert_accel_ok(accel_mempool_stats(slab, &st));
  } while ((st.live_count != 0 || st.bytes_in_use != 0) &&
           test_now_ns() < deadline);
  assert_int_equal(st.live_count, 0);
  assert_accel_ok(accel_mempool_destroy(slab));
  assert_accel_ok(accel_mempool_destroy(so));
}

typedef struct async_worker {
  accel_device_t *device;
  uint64_t seed;
  int failures;
} async_worker_t;

static void *async_worker_main(void *arg) {
  async_worker_t *w = arg;
  accel_stream_t *s = NULL;
  if (accel_stream_create(w->device, NULL, &s) != ACCEL_OK) {
    w->failures++;
    return NULL;
  }
  test_rng_t rng = {.state = w->seed};
  accel_buffer_t *held[8] = {0};
  uint64_t tags[8] = {0};
  for (int i = 0; i < 4000; ++i) {
    int k = (int)test_rng_range(&rng, 0, 7);
    if (held[k] != NULL) {
      uint64_t *p = NULL;
      accel_buffer_host_pointer(held[k], (void **)&p);
      if (p[0] != tags[k]) {
        w->failures++;  // someone else wrote into our live buffer
      }
      if (accel_buffer_free_async(s, held[k]) != ACCEL_OK) {
        w->failures++;
      }
      held[k] = NULL;
    }
    accel_buffer_desc_t d = {.struct_size = sizeof(d),
                             .size_bytes = test_rng_range(&rng, 8, 200000)};
    if (accel_buffer_alloc_async(s, &d, &held[k]) != ACCEL_OK) {
      w->failures++;
      continue;
    }
    uint64_t *p = NULL;
    accel_buffer_host_pointer(held[k], (void **)&p);
    tags[k] = test_rng_next(&rng);
    p[0] = tags[k];
  }
  for (int k = 0; k < 8; ++k) {
    if (held[k] != NULL) {
      accel_buffer_free_async(s, held[k]);
    }
  }
  accel_stream_destroy(s);
  return NULL;
}

// Threads with their own streams share the default pool: blocks move
// between streams (their free points complete at once: no work is pending)
// and no live buffer is ever handed to another owner.
static void test_async_pool_is_shared_safely_by_threads(void **state) {
  fixture_t *f = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  async_worker_t w[3];
  pthread_t t[3];
  for (int i = 0; i < 3; ++i) {
    w[i] = (async_worker_t){.device = f->env->device,
                            .seed = test_rng_next(&rng) | 1};
    assert_int_equal(pthread_create(&t[i], NULL, async_worker_main, &w[i]),
                     0);
  }
  for (int i = 0; i < 3; ++i) {
    pthread_join(t[i], NULL);
    assert_int_equal(w[i].failures, 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_async_free_is_reused_at_once_on_the_same_stream),
      cmocka_unit_test(test_device_stats_count_what_users_hold),
      cmocka_unit_test(
          test_async_free_is_reused_by_another_stream_only_after_completion),
      cmocka_unit_test(test_async_reuse_follows_the_freeing_streams_timeline),
      cmocka_unit_test(test_async_release_threshold_bounds_cached_memory),
      cmocka_unit_test(test_async_pool_limit_fails_cleanly),
      cmocka_unit_test(test_async_misuse_is_rejected),
      cmocka_unit_test(test_async_pool_is_shared_safely_by_threads),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
