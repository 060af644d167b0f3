// Mixed multi-threaded stress: 8 threads, each with its own stream, run
// random rounds of plain and stream-ordered allocation, fills, device and
// host copies with content checks, events, and semaphores that tie each
// stream to its neighbour's, on one device at once. Every byte that comes
// back is checked against what the round wrote. In the suite it runs for a
// short time (also under ThreadSanitizer, which found the races this test
// guards: a paged record written after it was published, a detached
// stream-ordered record copied while a retire changed its count); for soak
// runs set ACCEL_STRESS_SECONDS (scripts/soak.sh).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

enum { THREADS = 8, MAX_BYTES = 1 << 20 };

typedef struct worker {
  accel_device_t *device;
  uint32_t id;
  uint64_t deadline_ns;
  uint64_t seed;
  accel_semaphore_t *sems[THREADS];  // shared: every thread's timeline
  uint64_t rounds;
  uint64_t bytes_checked;
  char failure[256];
} worker_t;

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

#define STRESS_CHECK(w, cond, ...)                               \
  do {                                                           \
    if (!(cond)) {                                               \
      snprintf((w)->failure, sizeof((w)->failure), __VA_ARGS__); \
      goto out;                                                  \
    }                                                            \
  } while (0)

// One round: a plain buffer filled with a pattern, copied into a
// stream-ordered buffer, then back to the host past an event; the
// neighbour's timeline waited on at a value it already reached, ours
// signalled.
static void *worker_main(void *arg) {
  worker_t *w = arg;
  accel_stream_t *s = NULL;
  accel_event_t *ev = NULL;
  uint8_t *host = malloc(MAX_BYTES);
  accel_status_t st = accel_stream_create(w->device, NULL, &s);
  STRESS_CHECK(w, st == ACCEL_OK, "stream create: %s", accel_last_error());
  st = accel_event_create(w->device, 0, &ev);
  STRESS_CHECK(w, st == ACCEL_OK, "event create: %s", accel_last_error());
  accel_semaphore_t *mine = w->sems[w->id];
  accel_semaphore_t *left = w->sems[(w->id + THREADS - 1) % THREADS];
  while (test_now_ns() < w->deadline_ns) {
    uint64_t size = 256 + next_rand(&w->seed) % (MAX_BYTES - 256);
    size &= ~(uint64_t)3;
    uint32_t pattern = (uint32_t)next_rand(&w->seed);
    accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = size};
    accel_buffer_t *a = NULL, *b = NULL;
    st = accel_buffer_alloc(w->device, &d, &a);
    STRESS_CHECK(w, st == ACCEL_OK, "alloc %llu: %s",
                 (unsigned long long)size, accel_last_error());
    st = accel_buffer_alloc_async(s, &d, &b);
    STRESS_CHECK(w, st == ACCEL_OK, "alloc async: %s", accel_last_error());
    uint64_t seen = 0;
    (void)accel_semaphore_query(left, &seen);
    STRESS_CHECK(w, accel_stream_wait(s, left, seen) == ACCEL_OK,
                 "wait: %s", accel_last_error());
    STRESS_CHECK(w, accel_stream_fill(s, a, 0, size, pattern, 4) == ACCEL_OK,
                 "fill: %s", accel_last_error());
    STRESS_CHECK(w, accel_stream_copy(s, b, 0, a, 0, size) == ACCEL_OK,
                 "copy: %s", accel_last_error());
    STRESS_CHECK(w, accel_stream_copy_to_host(s, host, b, 0, size) ==
                        ACCEL_OK,
                 "copy to host: %s", accel_last_error());
    STRESS_CHECK(w, accel_buffer_free_async(s, b) == ACCEL_OK,
                 "free async: %s", accel_last_error());
    STRESS_CHECK(w, accel_buffer_free(a) == ACCEL_OK,  // deferred by refs
                 "free: %s", accel_last_error());
    STRESS_CHECK(w, accel_stream_signal(s, mine, w->rounds + 1) == ACCEL_OK,
                 "signal: %s", accel_last_error());
    STRESS_CHECK(w, accel_event_record(ev, s) == ACCEL_OK, "record: %s",
                 accel_last_error());
    STRESS_CHECK(w,
                 accel_event_synchronize(ev, ACCEL_TIMEOUT_INFINITE) ==
                     ACCEL_OK,
                 "event synchronize: %s", accel_last_error());
    for (uint64_t i = 0; i < size; i += 4) {
      uint32_t v;
      memcpy(&v, host + i, 4);
      STRESS_CHECK(w, v == pattern,
                   "thread %u round %llu: byte %llu of %llu is 0x%08x, "
                   "expected 0x%08x",
                   w->id, (unsigned long long)w->rounds,
                   (unsigned long long)i, (unsigned long long)size, v,
                   pattern);
    }
    w->bytes_checked += size;
    w->rounds++;
  }
  st = accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE);
  STRESS_CHECK(w, st == ACCEL_OK, "synchronize: %s", accel_last_error());
out:
  accel_event_release(ev);
  accel_stream_destroy(s);
  free(host);
  return NULL;
}

// Eight threads of mixed work on one device keep every byte they wrote,
// fail nothing, and leave no buffer behind.
static void test_mixed_threads_keep_their_bytes(void **state) {
  test_env_t *env = *state;
  const char *env_s = getenv("ACCEL_STRESS_SECONDS");
  double seconds = env_s != NULL ? atof(env_s) : 1.5;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  accel_semaphore_t *sems[THREADS];
  for (int i = 0; i < THREADS; ++i) {
    assert_accel_ok(accel_semaphore_create(env->device, 0, &sems[i]));
  }
  worker_t w[THREADS];
  pthread_t t[THREADS];
  uint64_t deadline = test_now_ns() + (uint64_t)(seconds * 1e9);
  for (uint32_t i = 0; i < THREADS; ++i) {
    w[i] = (worker_t){.device = env->device, .id = i, .deadline_ns = deadline,
                      .seed = test_rng_next(&rng) | 1};
    memcpy(w[i].sems, sems, sizeof(sems));
    assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
  }
  uint64_t rounds = 0, bytes = 0;
  for (int i = 0; i < THREADS; ++i) {
    pthread_join(t[i], NULL);
    if (w[i].failure[0] != '\0') {
      fail_msg("thread %d: %s", i, w[i].failure);
    }
    assert_true(w[i].rounds > 0);
    rounds += w[i].rounds;
    bytes += w[i].bytes_checked;
  }
  printf("stress: %d threads, %.1f s, %llu rounds, %llu MiB checked\n",
         THREADS, seconds, (unsigned long long)rounds,
         (unsigned long long)(bytes >> 20));
  for (int i = 0; i < THREADS; ++i) {
    uint64_t v = 0;
    assert_accel_ok(accel_semaphore_query(sems[i], &v));
    assert_int_equal(v, w[i].rounds);
    accel_semaphore_release(sems[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mixed_threads_keep_their_bytes),
  };
  return cmocka_run_group_tests(tests, test_env_setup, test_env_teardown);
}
