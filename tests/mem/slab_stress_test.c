// Randomised stress across every allocator: mixed alloc/free of random
// sizes, checking after every step that no two live buffers overlap and that
// buffers hold the pattern written into them; then the same from several
// threads (run it under TSan), with buffers freed by other threads than
// those that allocated them.
//
// ACCEL_MEM_STRESS_OPS sets the operation count (default 200000; set it to
// millions for a long run). The seed is printed; replay with
// ACCEL_TEST_SEED.
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

typedef struct live {
  accel_buffer_t *buf;
  uint64_t address;
  uint64_t size;
  uint64_t id;
} live_t;

static uint64_t ops_from_env(uint64_t dflt) {
#if defined(__SANITIZE_THREAD__)
  dflt /= 4;  // ThreadSanitizer runs about 10x slower
#endif
  const char *t = getenv("ACCEL_MEM_STRESS_OPS");
  return t != NULL ? strtoull(t, NULL, 0) : dflt;
}

// Pattern word at byte offset |off| (a multiple of 8) of buffer |id|.
static inline uint64_t pattern(uint64_t id, uint64_t off) {
  return (id * 0x9e3779b97f4a7c15ull) ^ (off * 0xff51afd7ed558ccdull);
}

// Offsets that carry the pattern: every word of the first and last 4 KiB,
// and the first word of every 4 KiB page in between (so big buffers stay
// cheap to write and check).
#define FOR_PATTERN_OFFSETS(size, off)                                        \
  for (uint64_t off = 0; off + 8 <= (size);                                   \
       off = (off < 4096 || off + 8 + 4096 >= (size))                         \
                 ? off + 8                                                    \
                 : ((size) - 4096 > off + 4096 ? (off & ~4095ull) + 4096      \
                                               : ((size) - 4096) & ~7ull))

static void write_pattern(const live_t *l) {
  void *p = NULL;
  assert_accel_ok(accel_buffer_host_pointer(l->buf, &p));
  unsigned char *b = p;
  FOR_PATTERN_OFFSETS(l->size, off) {
    uint64_t v = pattern(l->id, off);
    memcpy(b + off, &v, 8);
  }
}

static void check_pattern(const live_t *l, uint64_t seed_hint) {
  void *p = NULL;
  assert_accel_ok(accel_buffer_host_pointer(l->buf, &p));
  const unsigned char *b = p;
  FOR_PATTERN_OFFSETS(l->size, off) {
    uint64_t v;
    memcpy(&v, b + off, 8);
    if (v != pattern(l->id, off)) {
      print_error("buffer %llu (0x%llx, %llu bytes) lost its pattern at "
                  "offset %llu (seed %llu)\n",
                  (unsigned long long)l->id, (unsigned long long)l->address,
                  (unsigned long long)l->size, (unsigned long long)off,
                  (unsigned long long)seed_hint);
      fail();
    }
  }
}

// Live set sorted by address, for O(log n) overlap checks.
typedef struct live_set {
  live_t *items;
  size_t count;
  size_t capacity;
} live_set_t;

static size_t lower_bound(const live_set_t *s, uint64_t address) {
  size_t lo = 0, hi = s->count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (s->items[mid].address < address) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

static void set_insert_checked(live_set_t *s, live_t l, uint64_t seed) {
  size_t i = lower_bound(s, l.address);
  bool overlap =
      (i < s->count && s->items[i].address < l.address + l.size) ||
      (i > 0 && s->items[i - 1].address + s->items[i - 1].size > l.address);
  if (overlap) {
    print_error("buffer 0x%llx (+%llu) overlaps a live buffer (seed %llu)\n",
                (unsigned long long)l.address, (unsigned long long)l.size,
                (unsigned long long)seed);
    fail();
  }
  if (s->count == s->capacity) {
    s->capacity = s->capacity ? s->capacity * 2 : 1024;
    s->items = realloc(s->items, s->capacity * sizeof(*s->items));
    assert_non_null(s->items);
  }
  memmove(&s->items[i + 1], &s->items[i], (s->count - i) * sizeof(live_t));
  s->items[i] = l;
  s->count++;
}

static live_t set_take(live_set_t *s, size_t i) {
  live_t l = s->items[i];
  memmove(&s->items[i], &s->items[i + 1],
          (s->count - i - 1) * sizeof(live_t));
  s->count--;
  return l;
}

static uint64_t random_size(test_rng_t *rng) {
  uint64_t r = test_rng_range(rng, 0, 999);
  if (r < 970) {
    return test_rng_range(rng, 1, 65536);  // slab
  }
  if (r < 997) {
    return test_rng_range(rng, 65537, 2 << 20);  // dedicated
  }
  return test_rng_range(rng, 2 << 20, 6 << 20);  // paged
}

// Single thread, every allocator (slab, dedicated, paged, a block pool and
// the stream-ordered pool), with checks after every step.
static void test_stress_random_ops_keep_buffers_disjoint_and_intact(
    void **state) {
  test_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  uint64_t seed = rng.state;
  uint64_t ops = ops_from_env(200000);
  accel_mempool_desc_t bd = {.struct_size = sizeof(bd),
                             .type = ACCEL_MEMPOOL_TYPE_PAGED,
                             .block_size_bytes = 256 << 10,
                             .release_threshold_bytes = 4 << 20};
  accel_mempool_t *blocks = NULL;
  assert_accel_ok(accel_mempool_create(env->device, &bd, &blocks));
  accel_stream_t *stream = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &stream));
  live_set_t set = {0};
  uint64_t next_id = 1;
  for (uint64_t op = 0; op < ops; ++op) {
    bool do_alloc = set.count < 64 ||
                    (set.count < 2000 && test_rng_range(&rng, 0, 1) == 0);
    if (do_alloc) {
      live_t l = {.id = next_id++};
      uint64_t which = test_rng_range(&rng, 0, 19);
      accel_buffer_desc_t d = {.struct_size = sizeof(d)};
      if (which == 0) {
        d.size_bytes = test_rng_range(&rng, 1, 256 << 10);
        d.pool = blocks;
        assert_accel_ok(accel_buffer_alloc(env->device, &d, &l.buf));
      } else if (which == 1) {
        d.size_bytes = test_rng_range(&rng, 1, 100000);
        assert_accel_ok(accel_buffer_alloc_async(stream, &d, &l.buf));
      } else {
        d.size_bytes = random_size(&rng);
        assert_accel_ok(accel_buffer_alloc(env->device, &d, &l.buf));
      }
      l.address = accel_buffer_address(l.buf);
      l.size = d.size_bytes;
      assert_int_equal(accel_buffer_size(l.buf), l.size);
      set_insert_checked(&set, l, seed);
      write_pattern(&l);
      check_pattern(&l, seed);
    } else {
      size_t i = (size_t)test_rng_range(&rng, 0, set.count - 1);
      live_t l = set_take(&set, i);
      check_pattern(&l, seed);
      if (test_rng_range(&rng, 0, 1) == 0) {
        assert_accel_ok(accel_buffer_free(l.buf));
      } else {
        assert_accel_ok(accel_mem_free(env->device, l.address));
      }
    }
    // A neighbour of a random live buffer keeps its pattern too.
    if (set.count > 0) {
      check_pattern(&set.items[test_rng_range(&rng, 0, set.count - 1)],
                    seed);
    }
    if (op % 20000 == 0) {
      for (size_t i = 0; i < set.count; ++i) {
        check_pattern(&set.items[i], seed);
      }
    }
  }
  for (size_t i = 0; i < set.count; ++i) {
    check_pattern(&set.items[i], seed);
    accel_buffer_release(set.items[i].buf);
  }
  free(set.items);
  accel_mem_stats_t st = {.struct_size = sizeof(st)};
  assert_accel_ok(accel_mempool_stats(blocks, &st));
  assert_int_equal(st.live_count, 0);
  assert_accel_ok(accel_mempool_destroy(blocks));
  accel_stream_destroy(stream);
  assert_accel_ok(accel_mempool_trim(env->device, NULL, 0));
  accel_mem_stats_t dev = {.struct_size = sizeof(dev)};
  assert_accel_ok(accel_device_mem_stats(env->device, &dev));
  assert_int_equal(dev.bytes_in_use, 0);
  assert_int_equal(dev.live_count, 0);
}

// Shared state of the threaded stress.
typedef struct mt_shared {
  accel_device_t *device;
  pthread_mutex_t lock;
  live_set_t set;  // every live buffer of every thread (guarded by lock)
  // Buffers handed to another thread to free (guarded by lock).
  live_t handoff[256];
  int handoff_count;
  uint64_t ops;
  uint64_t seed;
  _Atomic uint64_t next_id;
} mt_shared_t;

typedef struct mt_thread {
  mt_shared_t *shared;
  uint64_t seed;
} mt_thread_t;

static void *mt_worker(void *arg) {
  mt_thread_t *t = arg;
  mt_shared_t *sh = t->shared;
  test_rng_t rng = {.state = t->seed};
  live_t mine[512];
  int n = 0;
  for (uint64_t op = 0; op < sh->ops; ++op) {
    if (n < 512 && (n < 16 || test_rng_range(&rng, 0, 1) == 0)) {
      live_t l = {.id = atomic_fetch_add(&sh->next_id, 1)};
      accel_buffer_desc_t d = {.struct_size = sizeof(d),
                               .size_bytes = test_rng_range(&rng, 1, 65536)};
      if (accel_buffer_alloc(sh->device, &d, &l.buf) != ACCEL_OK) {
        fprintf(stderr, "alloc failed: %s\n", accel_last_error());
        abort();
      }
      l.address = accel_buffer_address(l.buf);
      l.size = d.size_bytes;
      write_pattern(&l);
      pthread_mutex_lock(&sh->lock);
      set_insert_checked(&sh->set, l, sh->seed);
      pthread_mutex_unlock(&sh->lock);
      mine[n++] = l;
    } else {
      int i = (int)test_rng_range(&rng, 0, (uint64_t)n - 1);
      live_t l = mine[i];
      mine[i] = mine[--n];
      check_pattern(&l, sh->seed);
      pthread_mutex_lock(&sh->lock);
      size_t k = lower_bound(&sh->set, l.address);
      assert_true(k < sh->set.count && sh->set.items[k].id == l.id);
      set_take(&sh->set, k);
      bool give = sh->handoff_count < 256 && test_rng_range(&rng, 0, 3) == 0;
      live_t other = {0};
      if (give) {
        sh->handoff[sh->handoff_count++] = l;
      } else if (sh->handoff_count > 0) {
        other = sh->handoff[--sh->handoff_count];
      }
      pthread_mutex_unlock(&sh->lock);
      if (!give) {
        assert_accel_ok(accel_buffer_free(l.buf));
      }
      if (other.buf != NULL) {
        check_pattern(&other, sh->seed);
        assert_accel_ok(accel_buffer_free(other.buf));
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    check_pattern(&mine[i], sh->seed);
    pthread_mutex_lock(&sh->lock);
    set_take(&sh->set, lower_bound(&sh->set, mine[i].address));
    pthread_mutex_unlock(&sh->lock);
    accel_buffer_release(mine[i].buf);
  }
  return NULL;
}

// Several threads allocate and free slab buffers, handing some to each other
// to free; no overlap, no lost pattern, counters back to zero.
static void test_stress_threads_share_the_slab_safely(void **state) {
  test_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  enum { kThreads = 3 };
  mt_shared_t sh = {.device = env->device,
                    .ops = ops_from_env(200000) / 4 / kThreads,
                    .seed = rng.state};
  atomic_init(&sh.next_id, 1);
  pthread_mutex_init(&sh.lock, NULL);
  accel_mem_stats_t before = {.struct_size = sizeof(before)};
  assert_accel_ok(accel_device_mem_stats(env->device, &before));
  mt_thread_t th[kThreads];
  pthread_t tid[kThreads];
  for (int i = 0; i < kThreads; ++i) {
    th[i].shared = &sh;
    th[i].seed = test_rng_next(&rng) | 1;
    assert_int_equal(pthread_create(&tid[i], NULL, mt_worker, &th[i]), 0);
  }
  for (int i = 0; i < kThreads; ++i) {
    pthread_join(tid[i], NULL);
  }
  for (int i = 0; i < sh.handoff_count; ++i) {
    check_pattern(&sh.handoff[i], sh.seed);
    assert_accel_ok(accel_buffer_free(sh.handoff[i].buf));
  }
  accel_mem_stats_t after = {.struct_size = sizeof(after)};
  assert_accel_ok(accel_device_mem_stats(env->device, &after));
  assert_int_equal(after.bytes_in_use, before.bytes_in_use);
  assert_int_equal(after.live_count, before.live_count);
  free(sh.set.items);
  pthread_mutex_destroy(&sh.lock);
}

typedef struct cache_life {
  accel_device_t *device;
  accel_mempool_t *pool;
  accel_semaphore_t *step;  // 1: thread used pool; 2: main swapped pools
} cache_life_t;

static void *cache_life_thread(void *arg) {
  cache_life_t *cl = arg;
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 700,
                           .pool = cl->pool};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(cl->device, &d, &b));
  assert_accel_ok(accel_buffer_free(b));
  assert_accel_ok(accel_semaphore_signal(cl->step, 1));
  assert_accel_ok(accel_semaphore_wait(cl->step, 2, ACCEL_TIMEOUT_INFINITE));
  d.pool = cl->pool;  // the new pool
  for (int i = 0; i < 100; ++i) {
    assert_accel_ok(accel_buffer_alloc(cl->device, &d, &b));
    assert_accel_ok(accel_buffer_free(b));
  }
  return NULL;
}

// A slab destroyed while another thread still has a cache for it: the cache
// dies with it, the thread moves on to another slab and exits cleanly; the
// exited thread's cache of the new slab is adopted by the next thread.
static void test_slab_thread_caches_survive_pool_destroy_and_thread_exit(
    void **state) {
  test_env_t *env = *state;
  accel_mempool_desc_t pd = {.struct_size = sizeof(pd),
                             .type = ACCEL_MEMPOOL_TYPE_SLAB};
  cache_life_t cl = {.device = env->device};
  assert_accel_ok(accel_mempool_create(env->device, &pd, &cl.pool));
  assert_accel_ok(accel_semaphore_create(env->device, 0, &cl.step));
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, cache_life_thread, &cl), 0);
  assert_accel_ok(accel_semaphore_wait(cl.step, 1, ACCEL_TIMEOUT_INFINITE));
  accel_mem_stats_t st = {.struct_size = sizeof(st)};
  assert_accel_ok(accel_mempool_stats(cl.pool, &st));
  assert_int_equal(st.live_count, 0);
  assert_int_equal(st.alloc_count, 1);
  assert_accel_ok(accel_mempool_destroy(cl.pool));
  assert_accel_ok(accel_mempool_create(env->device, &pd, &cl.pool));
  assert_accel_ok(accel_semaphore_signal(cl.step, 2));
  pthread_join(t, NULL);
  assert_accel_ok(accel_mempool_stats(cl.pool, &st));
  assert_int_equal(st.alloc_count, 100);
  assert_int_equal(st.live_count, 0);
  // A second thread adopts the exited one's cache (counts carry on).
  accel_semaphore_release(cl.step);
  assert_accel_ok(accel_semaphore_create(env->device, 0, &cl.step));
  assert_int_equal(pthread_create(&t, NULL, cache_life_thread, &cl), 0);
  assert_accel_ok(accel_semaphore_wait(cl.step, 1, ACCEL_TIMEOUT_INFINITE));
  assert_accel_ok(accel_semaphore_signal(cl.step, 2));
  pthread_join(t, NULL);
  assert_accel_ok(accel_mempool_stats(cl.pool, &st));
  assert_int_equal(st.alloc_count, 201);
  assert_accel_ok(accel_mempool_trim(NULL, cl.pool, 0));
  assert_accel_ok(accel_mempool_stats(cl.pool, &st));
  assert_int_equal(st.bytes_reserved, 0);
  assert_accel_ok(accel_mempool_destroy(cl.pool));
  accel_semaphore_release(cl.step);
}

typedef struct churn {
  accel_device_t *device;
  accel_mempool_t *pool;
} churn_t;

static void *churn_thread(void *arg) {
  churn_t *c = arg;
  accel_buffer_t *b[224];
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 65536,
                           .pool = c->pool};
  for (int i = 0; i < 224; ++i) {
    assert_accel_ok(accel_buffer_alloc(c->device, &d, &b[i]));
  }
  for (int i = 0; i < 224; ++i) {
    assert_accel_ok(accel_buffer_free(b[i]));
  }
  return NULL;  // exit: the thread's cache goes back to the depot
}

// Empty chunks go back to the page source, but one per class stays for the
// next burst (hysteresis); trim returns that one too.
static void test_slab_returns_empty_chunks_keeping_one(void **state) {
  test_env_t *env = *state;
  accel_mempool_desc_t pd = {.struct_size = sizeof(pd),
                             .type = ACCEL_MEMPOOL_TYPE_SLAB};
  churn_t c = {.device = env->device};
  assert_accel_ok(accel_mempool_create(env->device, &pd, &c.pool));
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, churn_thread, &c), 0);
  pthread_join(t, NULL);
  accel_mem_stats_t st = {.struct_size = sizeof(st)};
  assert_accel_ok(accel_mempool_stats(c.pool, &st));
  assert_int_equal(st.peak_bytes_reserved, 7 * (2 << 20));  // 32 a chunk
  assert_int_equal(st.bytes_reserved, 2 << 20);
  assert_int_equal(st.bytes_in_use, 0);
  assert_accel_ok(accel_mempool_trim(NULL, c.pool, 0));
  assert_accel_ok(accel_mempool_stats(c.pool, &st));
  assert_int_equal(st.bytes_reserved, 0);
  assert_accel_ok(accel_mempool_destroy(c.pool));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_stress_random_ops_keep_buffers_disjoint_and_intact),
      cmocka_unit_test(test_stress_threads_share_the_slab_safely),
      cmocka_unit_test(
          test_slab_thread_caches_survive_pool_destroy_and_thread_exit),
      cmocka_unit_test(test_slab_returns_empty_chunks_keeping_one),
  };
  return cmocka_run_group_tests(tests, test_env_setup, test_env_teardown);
}
