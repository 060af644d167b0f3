// Streams: ordering, copies and fills against a reference, poisoning, destroy
// with pending work, concurrent enqueue, and argument checks.
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"

typedef struct order_log {
  uint32_t *entries;
  uint32_t count;
} order_log_t;

typedef struct order_item {
  order_log_t *log;
  uint32_t value;
} order_item_t;

static accel_status_t append_fn(void *user_data) {
  order_item_t *item = user_data;
  item->log->entries[item->log->count++] = item->value;
  return ACCEL_OK;
}

// 100,000 host commands on one stream run exactly once, in submission order.
static void test_stream_runs_100000_commands_in_order(void **state) {
  test_env_t *env = *state;
  enum { N = 100000 };
  order_log_t log = {.entries = calloc(N, sizeof(uint32_t))};
  order_item_t *items = calloc(N, sizeof(*items));
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  for (uint32_t i = 0; i < N; ++i) {
    items[i] = (order_item_t){.log = &log, .value = i};
    assert_accel_ok(accel_stream_host_call(s, append_fn, &items[i]));
  }
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_accel_ok(accel_stream_query(s));
  assert_int_equal(log.count, N);
  for (uint32_t i = 0; i < N; ++i) {
    assert_int_equal(log.entries[i], i);
  }
  accel_stream_destroy(s);
  free(items);
  free(log.entries);
}

static void reference_fill(uint8_t *dst, uint64_t size, uint64_t pattern,
                           uint32_t pattern_size) {
  for (uint64_t i = 0; i < size; ++i) {
    dst[i] = (uint8_t)(pattern >> (8 * (i % pattern_size)));
  }
}

// Random fills and copies (all directions) match a byte-by-byte reference.
static void test_stream_copies_and_fills_match_reference(void **state) {
  test_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  const uint64_t size = 1 << 16;
  accel_buffer_t *a = NULL, *b = NULL;
  accel_buffer_desc_t desc = {.struct_size = sizeof(desc), .size_bytes = size};
  assert_accel_ok(accel_buffer_alloc(env->device, &desc, &a));
  assert_accel_ok(accel_buffer_alloc(env->device, &desc, &b));
  uint8_t *ref_a = calloc(size, 1), *ref_b = calloc(size, 1);
  uint8_t *host = malloc(size), *out = malloc(size);
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  for (int iter = 0; iter < 300; ++iter) {
    int kind = (int)test_rng_range(&rng, 0, 3);
    uint64_t len = test_rng_range(&rng, 0, iter % 10 == 0 ? size : 257);
    uint64_t off_a = test_rng_range(&rng, 0, size - len);
    uint64_t off_b = test_rng_range(&rng, 0, size - len);
    if (kind == 0) {  // fill a
      uint32_t psize = 1u << test_rng_range(&rng, 0, 3);
      uint64_t pattern = test_rng_next(&rng);
      if (psize < 8) {
        pattern &= (1ull << (8 * psize)) - 1;
      }
      off_a -= off_a % psize;
      len -= len % psize;
      assert_accel_ok(accel_stream_fill(s, a, off_a, len, pattern, psize));
      reference_fill(ref_a + off_a, len, pattern, psize);
    } else if (kind == 1) {  // host -> a
      for (uint64_t i = 0; i < len; ++i) {
        host[i] = (uint8_t)test_rng_next(&rng);
      }
      assert_accel_ok(accel_stream_copy_from_host(s, a, off_a, host, len));
      memcpy(ref_a + off_a, host, len);
      // The host source must stay valid until the copy ran.
      assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    } else if (kind == 2) {  // a -> b
      assert_accel_ok(accel_stream_copy(s, b, off_b, a, off_a, len));
      memcpy(ref_b + off_b, ref_a + off_a, len);
    } else {  // a -> a, possibly overlapping (memmove semantics)
      assert_accel_ok(accel_stream_copy(s, a, off_b, a, off_a, len));
      memmove(ref_a + off_b, ref_a + off_a, len);
    }
  }
  assert_accel_ok(accel_stream_copy_to_host(s, out, a, 0, size));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_memory_equal(out, ref_a, size);
  assert_accel_ok(accel_stream_copy_to_host(s, out, b, 0, size));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_memory_equal(out, ref_b, size);
  accel_stream_destroy(s);
  accel_buffer_release(a);
  accel_buffer_release(b);
  free(ref_a);
  free(ref_b);
  free(host);
  free(out);
}

// Out-of-range copies and bad fills are rejected at enqueue with a message.
static void test_stream_rejects_bad_ranges(void **state) {
  test_env_t *env = *state;
  accel_buffer_t *buf = NULL;
  accel_buffer_desc_t desc = {.struct_size = sizeof(desc), .size_bytes = 100};
  assert_accel_ok(accel_buffer_alloc(env->device, &desc, &buf));
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  uint8_t host[200];
  assert_accel_status(accel_stream_copy_from_host(s, buf, 1, host, 100),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "outside the buffer"));
  assert_accel_status(
      accel_stream_copy_from_host(s, buf, UINT64_MAX, host, 2),
      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_copy(s, buf, 0, buf, 99, UINT64_MAX),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_fill(s, buf, 0, 100, 0, 3),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_fill(s, buf, 2, 8, 0, 4),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_fill(s, buf, 0, 8, 0x1ff, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_copy_to_host(s, NULL, buf, 0, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_copy(s, NULL, 0, buf, 0, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  // Zero-length copies are valid no-ops.
  assert_accel_ok(accel_stream_copy(s, buf, 100, buf, 100, 0));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  accel_stream_destroy(s);
  accel_buffer_release(buf);
}

// Objects of one device are rejected on another device's stream.
// Every command on one buffer whose owner freed it fails at enqueue.
static void expect_commands_refused(accel_stream_t *s, accel_buffer_t *freed,
                                    accel_buffer_t *live) {
  assert_accel_status(accel_stream_fill(s, freed, 0, 256, 0, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "was freed"));
  assert_non_null(strstr(accel_last_error(), "fill buffer"));
  assert_accel_status(accel_stream_copy(s, freed, 0, live, 0, 256),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "copy destination buffer"));
  assert_accel_status(accel_stream_copy(s, live, 0, freed, 0, 256),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "copy source buffer"));
  uint8_t host[256] = {0};
  assert_accel_status(accel_stream_copy_from_host(s, freed, 0, host, 256),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_copy_to_host(s, host, freed, 0, 256),
                      ACCEL_ERROR_INVALID_ARGUMENT);
}

// A command naming a buffer its owner freed fails at enqueue with a message
// naming the buffer, for every allocator (slab, paged, dedicated), on both
// sides of a copy (issue 15: the fill used to write freed memory). Paged and
// dedicated records are reused first in, first out, so a handle stays
// refused after the next allocation of its size too, and that buffer keeps
// its data; a slab block's record comes back with its block (docs/memory.md).
static void test_stream_rejects_freed_buffers_naming_them(void **state) {
  test_env_t *env = *state;
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  const uint64_t sizes[] = {256, 64 << 10, 4 << 20};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = sizes[i]};
    accel_buffer_t *live = NULL, *freed = NULL, *next = NULL;
    assert_accel_ok(accel_buffer_alloc(env->device, &d, &live));
    assert_accel_ok(accel_buffer_alloc(env->device, &d, &freed));
    assert_accel_ok(accel_buffer_free(freed));
    expect_commands_refused(s, freed, live);
    assert_accel_ok(accel_buffer_alloc(env->device, &d, &next));
    if (sizes[i] > (64 << 10)) {
      assert_ptr_not_equal(next, freed);
      expect_commands_refused(s, freed, live);
    }
    // Nothing reached the stream: it is healthy, and the new buffer holds
    // what it was given.
    assert_accel_ok(accel_stream_query(s));
    assert_accel_ok(accel_stream_fill(s, next, 0, sizes[i], 0x5a, 1));
    uint8_t back[256];
    assert_accel_ok(accel_stream_copy_to_host(s, back, next, 0, sizeof(back)));
    assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    for (size_t j = 0; j < sizeof(back); ++j) {
      assert_int_equal(back[j], 0x5a);
    }
    assert_accel_ok(accel_buffer_free(next));
    assert_accel_ok(accel_buffer_free(live));
  }
  accel_stream_destroy(s);
}

static void test_stream_rejects_objects_of_other_devices(void **state) {
  accel_runtime_options_t opts;
  accel_runtime_options_init(&opts);
  opts.host_device_count = 2;
  accel_runtime_t *rt = NULL;
  assert_accel_ok(accel_runtime_create(&opts, &rt));
  accel_device_t *d0 = NULL, *d1 = NULL;
  assert_accel_ok(accel_device_get(rt, 0, &d0));
  assert_accel_ok(accel_device_get(rt, 1, &d1));
  accel_stream_t *s = NULL;
  accel_buffer_t *buf = NULL;
  accel_semaphore_t *sem = NULL;
  accel_event_t *ev = NULL;
  accel_buffer_desc_t desc = {.struct_size = sizeof(desc), .size_bytes = 64};
  assert_accel_ok(accel_stream_create(d0, NULL, &s));
  assert_accel_ok(accel_buffer_alloc(d1, &desc, &buf));
  assert_accel_ok(accel_semaphore_create(d1, 0, &sem));
  assert_accel_ok(accel_event_create(d1, 0, &ev));
  assert_accel_status(accel_stream_fill(s, buf, 0, 64, 0, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_device_info_t info1 = {.struct_size = sizeof(info1)};
  assert_accel_ok(accel_device_info(d1, &info1));
  assert_non_null(strstr(accel_last_error(), info1.id));
  assert_accel_status(accel_stream_signal(s, sem, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_wait(s, sem, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_event_record(ev, s), ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_wait_event(s, ev),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_event_release(ev);
  accel_semaphore_release(sem);
  accel_buffer_release(buf);
  accel_stream_destroy(s);
  accel_runtime_destroy(rt);
}

// Fails the way a user callback would: a code, and a message left with
// accel's thread message through a failing accel call.
static accel_status_t fail_fn(void *user_data) {
  (void)user_data;
  accel_buffer_desc_t bad = {.struct_size = 1};
  accel_buffer_alloc(NULL, &bad, NULL);  // sets a message
  return ACCEL_ERROR_IO;
}

static int g_ran_after_failure;
static accel_status_t mark_fn(void *user_data) {
  g_ran_after_failure = 1;
  return ACCEL_OK;
}

// A failing command poisons the stream: later commands do not run, the
// semaphores it would signal fail, and every call reports the first error.
static accel_status_t fail_with_words(void *user_data) {
  return accel_host_fn_fail(ACCEL_ERROR_ABORTED, "checksum of %s differs",
                            (const char *)user_data);
}

// A host function fails its stream with its own message through
// accel_host_fn_fail, and synchronize reports it naming the command; the
// call refuses ACCEL_OK and a NULL format.
static void test_host_fn_fail_sets_the_stream_message(void **state) {
  test_env_t *env = *state;
  accel_stream_t *s = NULL;
  accel_stream_desc_t d = {.struct_size = sizeof(d), .name = "words"};
  assert_accel_ok(accel_stream_create(env->device, &d, &s));
  assert_accel_ok(accel_stream_host_call(s, fail_with_words, "layer7"));
  assert_accel_status(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE),
                      ACCEL_ERROR_ABORTED);
  assert_non_null(strstr(accel_last_error(), "stream \"words\" command #1"));
  assert_non_null(strstr(accel_last_error(), "checksum of layer7 differs"));
  accel_stream_destroy(s);
  assert_accel_status(accel_host_fn_fail(ACCEL_OK, "x"),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "fails nothing"));
  assert_accel_status(accel_host_fn_fail(ACCEL_ERROR_IO, "%s", "disk"),
                      ACCEL_ERROR_IO);
  assert_string_equal(accel_last_error(), "disk");
}

static void test_stream_failure_poisons_later_work(void **state) {
  test_env_t *env = *state;
  accel_stream_t *s = NULL;
  accel_stream_desc_t desc = {.struct_size = sizeof(desc), .name = "poison"};
  assert_accel_ok(accel_stream_create(env->device, &desc, &s));
  accel_semaphore_t *sem = NULL;
  assert_accel_ok(accel_semaphore_create(env->device, 0, &sem));
  g_ran_after_failure = 0;
  int dummy = 0;
  assert_accel_ok(accel_stream_host_call(s, mark_fn, &dummy));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  g_ran_after_failure = 0;
  // Hold the stream so that the failure happens after everything below was
  // enqueued (an enqueue after it would already return the stored error).
  accel_semaphore_t *gate = NULL;
  assert_accel_ok(accel_semaphore_create(env->device, 0, &gate));
  assert_accel_ok(accel_stream_wait(s, gate, 1));
  assert_accel_ok(accel_stream_host_call(s, fail_fn, NULL));
  assert_accel_ok(accel_stream_host_call(s, mark_fn, &dummy));
  assert_accel_ok(accel_stream_signal(s, sem, 5));
  assert_accel_ok(accel_semaphore_signal(gate, 1));
  accel_semaphore_release(gate);
  accel_status_t st = accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE);
  assert_int_equal(st, ACCEL_ERROR_IO);
  const char *msg = accel_last_error();
  assert_non_null(strstr(msg, "poison"));
  assert_non_null(strstr(msg, "#3"));
  assert_non_null(strstr(msg, "host_call"));
  assert_non_null(strstr(msg, "ACCEL_ERROR_IO"));
  assert_non_null(strstr(msg, "accel_buffer_alloc"));  // the callback's message
  assert_int_equal(g_ran_after_failure, 0);
  // The semaphore the stream would have signalled carries the error.
  assert_accel_status(accel_semaphore_wait(sem, 5, ACCEL_TIMEOUT_INFINITE),
                      ACCEL_ERROR_IO);
  // Later calls report the stored error.
  assert_accel_status(accel_stream_query(s), ACCEL_ERROR_IO);
  assert_accel_status(accel_stream_host_call(s, mark_fn, &dummy),
                      ACCEL_ERROR_IO);
  assert_non_null(strstr(accel_last_error(), "#3"));
  accel_semaphore_release(sem);
  accel_stream_destroy(s);
  assert_int_equal(g_ran_after_failure, 0);
}

// Every signal skipped after a failure has failed by the time synchronize
// returns the failure: querying each semaphore right after it never reads a
// healthy counter (before the fix, the completion failed first and most of
// the 2,000 semaphores still read 0 for a moment).
static void test_stream_skipped_signals_fail_before_synchronize(
    void **state) {
  test_env_t *env = *state;
  enum { SIGNALS = 2000, ROUNDS = 5 };
  accel_semaphore_t **sems = calloc(SIGNALS, sizeof(*sems));
  assert_non_null(sems);
  for (uint32_t i = 0; i < SIGNALS; ++i) {
    assert_accel_ok(accel_semaphore_create(env->device, 0, &sems[i]));
  }
  for (int round = 0; round < ROUNDS; ++round) {
    accel_stream_t *s = NULL;
    accel_stream_desc_t desc = {.struct_size = sizeof(desc), .name = "skip"};
    assert_accel_ok(accel_stream_create(env->device, &desc, &s));
    accel_semaphore_t *gate = NULL;
    assert_accel_ok(accel_semaphore_create(env->device, 0, &gate));
    assert_accel_ok(accel_stream_wait(s, gate, 1));
    assert_accel_ok(accel_stream_host_call(s, fail_with_words, "round"));
    for (uint32_t i = 0; i < SIGNALS; ++i) {
      assert_accel_ok(
          accel_stream_signal(s, sems[i], (uint64_t)round + 1));
    }
    assert_accel_ok(accel_semaphore_signal(gate, 1));
    accel_semaphore_release(gate);
    assert_accel_status(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE),
                        ACCEL_ERROR_ABORTED);
    for (uint32_t i = 0; i < SIGNALS; ++i) {
      uint64_t value = 0;
      accel_status_t st = accel_semaphore_query(sems[i], &value);
      if (st != ACCEL_ERROR_ABORTED) {
        fail_msg("round %d: semaphore %u of a skipped signal reads %s "
                 "(value %llu) after synchronize returned the failure",
                 round, i, accel_status_name(st),
                 (unsigned long long)value);
      }
      assert_non_null(strstr(accel_last_error(), "checksum of round"));
    }
    accel_stream_destroy(s);
    // Each round needs fresh semaphores: a failed one stays failed.
    for (uint32_t i = 0; i < SIGNALS; ++i) {
      accel_semaphore_release(sems[i]);
      assert_accel_ok(accel_semaphore_create(env->device, 0, &sems[i]));
    }
  }
  for (uint32_t i = 0; i < SIGNALS; ++i) {
    accel_semaphore_release(sems[i]);
  }
  free(sems);
}

static _Atomic uint32_t g_signals_submitted;

// Fails once the submitting thread has queued a few signals, so that the
// failure lands while it is still submitting.
static accel_status_t fail_while_submitting(void *user_data) {
  (void)user_data;
  while (atomic_load(&g_signals_submitted) < 64) {
    sched_yield();
  }
  return accel_host_fn_fail(ACCEL_ERROR_ABORTED, "failed mid-submission");
}

// The same when the signals race the failure: every signal whose submit
// returned OK has failed when synchronize returns, and the first refused
// submit reports the stream's failure.
static void test_stream_signals_racing_a_failure_fail_before_synchronize(
    void **state) {
  test_env_t *env = *state;
  enum { MAX_SIGNALS = 20000, ROUNDS = 20 };
  accel_semaphore_t **sems = calloc(MAX_SIGNALS, sizeof(*sems));
  assert_non_null(sems);
  for (int round = 0; round < ROUNDS; ++round) {
    accel_stream_t *s = NULL;
    accel_stream_desc_t desc = {.struct_size = sizeof(desc), .name = "race"};
    assert_accel_ok(accel_stream_create(env->device, &desc, &s));
    atomic_store(&g_signals_submitted, 0);
    assert_accel_ok(accel_stream_host_call(s, fail_while_submitting, NULL));
    uint32_t accepted = 0;
    accel_status_t st = ACCEL_OK;
    while (accepted < MAX_SIGNALS) {
      assert_accel_ok(accel_semaphore_create(env->device, 0, &sems[accepted]));
      st = accel_stream_signal(s, sems[accepted], 1);
      if (st != ACCEL_OK) {
        accel_semaphore_release(sems[accepted]);
        break;
      }
      accepted++;
      atomic_fetch_add(&g_signals_submitted, 1);
      if (accepted >= 256) {
        usleep(100);  // a starved worker (one CPU, a loaded machine) fails
      } else if (accepted >= 64) {
        sched_yield();  // one CPU (stream_one_cpu): let the worker fail
      }
    }
    assert_int_equal(st, ACCEL_ERROR_ABORTED);
    assert_non_null(strstr(accel_last_error(), "failed mid-submission"));
    assert_accel_status(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE),
                        ACCEL_ERROR_ABORTED);
    for (uint32_t i = 0; i < accepted; ++i) {
      uint64_t value = 0;
      if (accel_semaphore_query(sems[i], &value) != ACCEL_ERROR_ABORTED) {
        fail_msg("round %d: signal %u of %u was accepted and skipped but its "
                 "semaphore reads healthy (value %llu) after synchronize",
                 round, i, accepted, (unsigned long long)value);
      }
      accel_semaphore_release(sems[i]);
    }
    accel_stream_destroy(s);
  }
  free(sems);
}

typedef struct burst_call {
  uint32_t index;
  uint32_t fail_at;
  uint32_t *ran;  // how many ran, in order
} burst_call_t;

static accel_status_t burst_fn(void *user_data) {
  burst_call_t *c = user_data;
  if (*c->ran != c->index) {
    return ACCEL_ERROR_INTERNAL;  // out of order: fails the test below
  }
  (*c->ran)++;
  if (c->index == c->fail_at) {
    return fail_fn(NULL);
  }
  return ACCEL_OK;
}

// A host call failing in the middle of a burst (the worker runs a burst's
// calls back to back): the calls before it ran once each and in order, none
// after it ran, and the error names the failed call's number.
static void test_stream_failure_mid_burst_stops_the_burst(void **state) {
  test_env_t *env = *state;
  enum { N = 2000, ROUNDS = 10 };
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  burst_call_t *calls = calloc(N, sizeof(*calls));
  for (int round = 0; round < ROUNDS; ++round) {
    accel_stream_t *s = NULL;
    assert_accel_ok(accel_stream_create(env->device, NULL, &s));
    accel_semaphore_t *gate = NULL;
    assert_accel_ok(accel_semaphore_create(env->device, 0, &gate));
    // Everything is queued before the worker starts on it: one burst.
    assert_accel_ok(accel_stream_wait(s, gate, 1));
    uint32_t ran = 0;
    uint32_t fail_at = (uint32_t)test_rng_range(&rng, 1, N - 2);
    for (uint32_t i = 0; i < N; ++i) {
      calls[i] = (burst_call_t){.index = i, .fail_at = fail_at, .ran = &ran};
      assert_accel_ok(accel_stream_host_call(s, burst_fn, &calls[i]));
    }
    assert_accel_ok(accel_semaphore_signal(gate, 1));
    assert_accel_status(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE),
                        ACCEL_ERROR_IO);
    char expected[32];
    snprintf(expected, sizeof(expected), "#%u (host_call)", fail_at + 2);
    if (strstr(accel_last_error(), expected) == NULL) {
      fail_msg("expected %s in: %s", expected, accel_last_error());
    }
    assert_int_equal(ran, fail_at + 1);
    accel_semaphore_release(gate);
    accel_stream_destroy(s);
  }
  free(calls);
}

typedef struct counter {
  _Atomic uint32_t value;
} counter_t;

static accel_status_t count_fn(void *user_data) {
  counter_t *c = user_data;
  atomic_fetch_add(&c->value, 1);
  return ACCEL_OK;
}

// Destroy drains pending work by default.
static void test_stream_destroy_drains_pending_work(void **state) {
  test_env_t *env = *state;
  counter_t c = {0};
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  accel_semaphore_t *gate = NULL;
  assert_accel_ok(accel_semaphore_create(env->device, 0, &gate));
  assert_accel_ok(accel_stream_wait(s, gate, 1));
  for (int i = 0; i < 1000; ++i) {
    assert_accel_ok(accel_stream_host_call(s, count_fn, &c));
  }
  assert_int_equal(atomic_load(&c.value), 0);
  assert_accel_ok(accel_semaphore_signal(gate, 1));
  accel_stream_destroy(s);  // returns after all 1000 ran
  assert_int_equal(atomic_load(&c.value), 1000);
  accel_semaphore_release(gate);
}

// With the abort flag, destroy cancels pending work, including a blocked
// wait, and fails the semaphores it would have signalled with ABORTED.
static void test_stream_destroy_with_abort_cancels_pending_work(void **state) {
  test_env_t *env = *state;
  counter_t c = {0};
  accel_stream_desc_t desc = {.struct_size = sizeof(desc),
                              .flags = ACCEL_STREAM_FLAG_ABORT_ON_DESTROY};
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, &desc, &s));
  accel_semaphore_t *gate = NULL, *done = NULL;
  assert_accel_ok(accel_semaphore_create(env->device, 0, &gate));
  assert_accel_ok(accel_semaphore_create(env->device, 0, &done));
  assert_accel_ok(accel_stream_host_call(s, count_fn, &c));
  assert_accel_ok(accel_stream_wait(s, gate, 1));  // never signalled
  assert_accel_ok(accel_stream_host_call(s, count_fn, &c));
  assert_accel_ok(accel_stream_signal(s, done, 1));
  // The first call has run (waited for: a loaded machine under a sanitizer
  // can take longer than any fixed sleep to get the worker there), then
  // give the worker time to reach the wait and park on it.
  for (int i = 0; i < 10000 && atomic_load(&c.value) == 0; ++i) {
    usleep(1000);
  }
  usleep(20000);
  accel_stream_destroy(s);
  assert_int_equal(atomic_load(&c.value), 1);
  assert_accel_status(accel_semaphore_wait(done, 1, ACCEL_TIMEOUT_INFINITE),
                      ACCEL_ERROR_ABORTED);
  assert_non_null(strstr(accel_last_error(), "aborted"));
  accel_semaphore_release(gate);
  accel_semaphore_release(done);
}

typedef struct producer {
  accel_stream_t *stream;
  uint32_t id;
  uint32_t per_thread;
  uint32_t *last_seen;  // per producer, written by the worker only
  _Atomic uint32_t *misordered;
  order_item_t *items;
  _Atomic uint32_t progress;  // commands submitted so far
} producer_t;

static accel_status_t check_order_fn(void *user_data) {
  order_item_t *item = user_data;
  producer_t *p = (producer_t *)item->log;
  if (item->value != p->last_seen[p->id] + 1) {
    atomic_fetch_add(p->misordered, 1);
  }
  p->last_seen[p->id] = item->value;
  return ACCEL_OK;
}

static void *producer_main(void *arg) {
  producer_t *p = arg;
  for (uint32_t i = 0; i < p->per_thread; ++i) {
    p->items[i] = (order_item_t){.log = (order_log_t *)p, .value = i + 1};
    if (accel_stream_host_call(p->stream, check_order_fn, &p->items[i]) !=
        ACCEL_OK) {
      atomic_fetch_add(p->misordered, 1000000);
    }
    atomic_store_explicit(&p->progress, i + 1, memory_order_relaxed);
  }
  return NULL;
}

// Many threads enqueue to one stream at once; each thread's commands keep
// their order and none is lost (run under TSan too).
static void test_stream_concurrent_enqueue_keeps_per_thread_order(
    void **state) {
  test_env_t *env = *state;
  enum { THREADS = 8, PER = 20000 };
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  uint32_t last_seen[THREADS] = {0};
  _Atomic uint32_t misordered = 0;
  producer_t producers[THREADS];
  pthread_t threads[THREADS];
  for (uint32_t t = 0; t < THREADS; ++t) {
    producers[t] = (producer_t){.stream = s,
                                .id = t,
                                .per_thread = PER,
                                .last_seen = last_seen,
                                .misordered = &misordered,
                                .items = calloc(PER, sizeof(order_item_t))};
    pthread_create(&threads[t], NULL, producer_main, &producers[t]);
  }
  for (uint32_t t = 0; t < THREADS; ++t) {
    pthread_join(threads[t], NULL);
  }
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_int_equal(atomic_load(&misordered), 0);
  for (uint32_t t = 0; t < THREADS; ++t) {
    assert_int_equal(last_seen[t], PER);
    free(producers[t].items);
  }
  accel_stream_destroy(s);
}

typedef struct turn_taker {
  accel_stream_t *stream;
  uint32_t id;
  uint32_t threads;
  uint32_t total;
  _Atomic uint32_t *turn;
  uint32_t *next_value;  // touched only by the thread whose turn it is
  order_item_t *items;
  order_log_t *log;
  _Atomic uint32_t *errors;
} turn_taker_t;

static void *turn_taker_main(void *arg) {
  turn_taker_t *t = arg;
  test_rng_t rng;
  test_rng_init(&rng, "turn_taker");
  for (uint32_t k = 0; k < t->id; ++k) {
    (void)test_rng_next(&rng);  // a different burst sequence per thread
  }
  for (;;) {
    uint32_t turn;
    while ((turn = atomic_load(t->turn)) % t->threads != t->id &&
           turn != UINT32_MAX) {
      sched_yield();
    }
    if (turn == UINT32_MAX) {
      return NULL;
    }
    // Mostly short bursts, one in four long.
    uint32_t burst = test_rng_range(&rng, 0, 3) == 0
                         ? (uint32_t)test_rng_range(&rng, 1000, 1500)
                         : (uint32_t)test_rng_range(&rng, 1, 300);
    for (uint32_t i = 0; i < burst && *t->next_value < t->total; ++i) {
      uint32_t v = (*t->next_value)++;
      t->items[v] = (order_item_t){.log = t->log, .value = v};
      if (accel_stream_host_call(t->stream, append_fn, &t->items[v]) !=
          ACCEL_OK) {
        atomic_fetch_add(t->errors, 1);
      }
    }
    atomic_store(t->turn, *t->next_value < t->total ? turn + 1 : UINT32_MAX);
  }
}

// Threads take turns on one stream with bursts of random length (a handoff
// through an atomic, not through accel): every command runs once, in the
// global order the turns imply, so a submit orders after every submit that
// happened before it in another thread, not only after its own thread's.
static void test_stream_taking_turns_keeps_global_order(void **state) {
  test_env_t *env = *state;
  enum { THREADS = 3, TOTAL = 100000 };
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  order_log_t log = {.entries = calloc(TOTAL, sizeof(uint32_t))};
  order_item_t *items = calloc(TOTAL, sizeof(order_item_t));
  _Atomic uint32_t turn = 0;
  _Atomic uint32_t errors = 0;
  uint32_t next_value = 0;
  turn_taker_t takers[THREADS];
  pthread_t threads[THREADS];
  for (uint32_t t = 0; t < THREADS; ++t) {
    takers[t] = (turn_taker_t){.stream = s,
                               .id = t,
                               .threads = THREADS,
                               .total = TOTAL,
                               .turn = &turn,
                               .next_value = &next_value,
                               .items = items,
                               .log = &log,
                               .errors = &errors};
    pthread_create(&threads[t], NULL, turn_taker_main, &takers[t]);
  }
  for (uint32_t t = 0; t < THREADS; ++t) {
    pthread_join(threads[t], NULL);
  }
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_int_equal(atomic_load(&errors), 0);
  assert_int_equal(log.count, TOTAL);
  for (uint32_t i = 0; i < TOTAL; ++i) {
    if (log.entries[i] != i) {
      fail_msg("command %u ran as #%u", log.entries[i], i);
    }
  }
  accel_stream_destroy(s);
  free(items);
  free(log.entries);
}

// ---- Records of every shape ------------------------------------------------
// The host queue stores each command as a record of the words its kind uses
// (host calls in 2 words through a per-queue function table of 16 places,
// or 3 when their place is taken), in 1 KiB chunks.

#define MIXED_HOST_FNS 40  // more functions than the table has places

#define MIXED_FN(k)                                          \
  static accel_status_t mixed_fn_##k(void *user_data) {     \
    order_item_t *item = user_data;                          \
    item->log->entries[item->log->count++] = item->value * 64 + (k); \
    return ACCEL_OK;                                         \
  }
#define MIXED_FNS(X)                                                         \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) \
  X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25)   \
  X(26) X(27) X(28) X(29) X(30) X(31) X(32) X(33) X(34) X(35) X(36) X(37)   \
  X(38) X(39)
MIXED_FNS(MIXED_FN)
#define MIXED_FN_ENTRY(k) mixed_fn_##k,
static const accel_host_fn_t g_mixed_fns[MIXED_HOST_FNS] = {
    MIXED_FNS(MIXED_FN_ENTRY)};

enum { MIXED_TAG_SINGLE = 40, MIXED_TAG_CONSTANTS = 41 };

// Kernels get no user data: they log to this (one stream at a time).
static order_log_t *g_kernel_log;
static uint32_t g_single_launches;  // worker only

static int32_t mixed_single_kernel(const accel_kernel_dispatch_t *dispatch,
                                   const accel_kernel_workgroup_t *wg) {
  g_kernel_log->entries[g_kernel_log->count++] =
      g_single_launches++ * 64 + MIXED_TAG_SINGLE;
  return 0;
}

static int32_t mixed_constants_kernel(const accel_kernel_dispatch_t *dispatch,
                                      const accel_kernel_workgroup_t *wg) {
  uint32_t value;
  memcpy(&value, dispatch->constants, sizeof(value));
  g_kernel_log->entries[g_kernel_log->count++] =
      value * 64 + MIXED_TAG_CONSTANTS;
  return 0;
}

// Host calls of 40 functions, launches of two kernels (one without
// arguments, one with constants: records of 4 and 5 words), fills, and
// semaphore signals and waits, drawn at random, 30,000 commands: every call
// and launch runs once, in submission order, with its own arguments; the
// fills leave what a reference applying them in order leaves; the
// semaphore ends at the last value signalled.
static void test_stream_mixed_records_keep_order_and_arguments(void **state) {
  test_env_t *env = *state;
  enum { N = 30000, BUF = 4096 };
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  accel_kernel_t *single = NULL, *with_constants = NULL;
  accel_kernel_desc_t kd = {.struct_size = sizeof(kd),
                            .abi_version = ACCEL_KERNEL_ABI_VERSION,
                            .name = "mixed_single",
                            .fn = mixed_single_kernel};
  accel_device_info_t info = {.struct_size = sizeof(info)};
  assert_accel_ok(accel_device_info(env->device, &info));
  if ((info.caps & ACCEL_DEVICE_CAP_HOST_KERNELS) == 0) {
    // A device without host kernels (CUDA) refuses them; the mix of
    // launches this test is about does not apply there.
    assert_accel_status(accel_kernel_register(env->device, &kd, &single),
                        ACCEL_ERROR_UNSUPPORTED);
    accel_stream_destroy(s);
    return;
  }
  assert_accel_ok(accel_kernel_register(env->device, &kd, &single));
  kd.name = "mixed_constants";
  kd.fn = mixed_constants_kernel;
  kd.constants_size = sizeof(uint32_t);
  assert_accel_ok(accel_kernel_register(env->device, &kd, &with_constants));
  accel_buffer_desc_t bd = {.struct_size = sizeof(bd), .size_bytes = BUF};
  accel_buffer_t *buf = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &bd, &buf));
  assert_accel_ok(accel_stream_fill(s, buf, 0, BUF, 0, 1));
  accel_semaphore_t *sem = NULL;
  assert_accel_ok(accel_semaphore_create(env->device, 0, &sem));

  order_log_t log = {.entries = calloc(N, sizeof(uint32_t))};
  uint32_t *expected = calloc(N, sizeof(uint32_t));
  order_item_t *items = calloc(N, sizeof(*items));
  uint8_t reference[BUF] = {0};
  g_kernel_log = &log;
  g_single_launches = 0;
  uint32_t logged = 0, singles = 0;
  uint64_t signalled = 0;
  for (uint32_t i = 0; i < N; ++i) {
    uint64_t kind = test_rng_range(&rng, 0, 9);
    if (kind <= 4) {  // host calls, the commonest command
      uint32_t f = (uint32_t)test_rng_range(&rng, 0, MIXED_HOST_FNS - 1);
      items[i] = (order_item_t){.log = &log, .value = i};
      assert_accel_ok(accel_stream_host_call(s, g_mixed_fns[f], &items[i]));
      expected[logged++] = i * 64 + f;
    } else if (kind == 5) {
      accel_launch_desc_t ld = {.struct_size = sizeof(ld),
                                .workgroup_count = {1, 1, 1}};
      assert_accel_ok(accel_launch(s, single, &ld));
      expected[logged++] = singles++ * 64 + MIXED_TAG_SINGLE;
    } else if (kind == 6) {
      uint32_t value = i;
      accel_launch_desc_t ld = {.struct_size = sizeof(ld),
                                .workgroup_count = {1, 1, 1},
                                .constants_size = sizeof(value),
                                .constants = &value};
      assert_accel_ok(accel_launch(s, with_constants, &ld));
      expected[logged++] = i * 64 + MIXED_TAG_CONSTANTS;
    } else if (kind == 7) {
      uint64_t offset = test_rng_range(&rng, 0, BUF - 1);
      uint64_t size = test_rng_range(&rng, 0, BUF - offset);
      uint8_t pattern = (uint8_t)test_rng_next(&rng);
      assert_accel_ok(accel_stream_fill(s, buf, offset, size, pattern, 1));
      memset(reference + offset, pattern, size);
    } else if (kind == 8) {
      signalled += test_rng_range(&rng, 1, 3);
      assert_accel_ok(accel_stream_signal(s, sem, signalled));
    } else {
      // Reached by an earlier signal on this stream (or 0): never blocks.
      assert_accel_ok(accel_stream_wait(s, sem, signalled));
    }
  }
  uint8_t got[BUF];
  assert_accel_ok(accel_stream_copy_to_host(s, got, buf, 0, BUF));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_int_equal(log.count, logged);
  for (uint32_t i = 0; i < logged; ++i) {
    if (log.entries[i] != expected[i]) {
      fail_msg("entry %u: ran %u (command %u, tag %u), expected %u (command "
               "%u, tag %u)",
               i, log.entries[i], log.entries[i] / 64, log.entries[i] % 64,
               expected[i], expected[i] / 64, expected[i] % 64);
    }
  }
  assert_memory_equal(got, reference, BUF);
  uint64_t value = 0;
  assert_accel_ok(accel_semaphore_query(sem, &value));
  assert_int_equal(value, signalled);
  accel_stream_destroy(s);
  accel_semaphore_release(sem);
  accel_buffer_release(buf);
  accel_kernel_release(single);
  accel_kernel_release(with_constants);
  g_kernel_log = NULL;
  free(items);
  free(expected);
  free(log.entries);
}

// ---- Biased submission -----------------------------------------------------
// The first thread to submit to a stream submits without the lock until
// another thread submits; that one revokes the bias (a membarrier) and waits
// for the owner to leave its current submit.

// On 20 fresh streams created by the test thread: a first thread submits a
// burst (and becomes the owner), a second starts when the first is at a
// random point of it (so the revocation meets the owner in and out of its
// submits), then the test thread submits too. Every command runs once and
// each thread's commands keep their order.
static void test_stream_second_submitter_takes_over_mid_burst(void **state) {
  test_env_t *env = *state;
  enum { ROUNDS = 20, PER = 5000 };
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int round = 0; round < ROUNDS; ++round) {
    accel_stream_t *s = NULL;
    assert_accel_ok(accel_stream_create(env->device, NULL, &s));
    uint32_t last_seen[3] = {0};
    _Atomic uint32_t misordered = 0;
    producer_t bursts[3];
    for (uint32_t t = 0; t < 3; ++t) {
      bursts[t] = (producer_t){.stream = s,
                               .id = t,
                               .per_thread = t < 2 ? PER : 100,
                               .last_seen = last_seen,
                               .misordered = &misordered,
                               .items = calloc(PER, sizeof(order_item_t))};
    }
    pthread_t first, second;
    pthread_create(&first, NULL, producer_main, &bursts[0]);
    uint32_t start_at = (uint32_t)test_rng_range(&rng, 0, PER);
    while (atomic_load_explicit(&bursts[0].progress, memory_order_relaxed) <
               start_at &&
           atomic_load_explicit(&bursts[0].progress, memory_order_relaxed) <
               PER) {
      sched_yield();
    }
    pthread_create(&second, NULL, producer_main, &bursts[1]);
    pthread_join(first, NULL);
    pthread_join(second, NULL);
    producer_main(&bursts[2]);  // a third thread, after both
    assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    assert_int_equal(atomic_load(&misordered), 0);
    assert_int_equal(last_seen[0], PER);
    assert_int_equal(last_seen[1], PER);
    assert_int_equal(last_seen[2], 100);
    accel_stream_destroy(s);
    for (uint32_t t = 0; t < 3; ++t) {
      free(bursts[t].items);
    }
  }
}

// Stream descriptors are validated; priorities are accepted.
static void test_stream_create_validates_desc(void **state) {
  test_env_t *env = *state;
  accel_stream_t *s = NULL;
  accel_stream_desc_t desc = {.struct_size = sizeof(desc), .priority = 7};
  assert_accel_status(accel_stream_create(env->device, &desc, &s),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  desc = (accel_stream_desc_t){.struct_size = sizeof(desc), .flags = 0x80};
  assert_accel_status(accel_stream_create(env->device, &desc, &s),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  desc = (accel_stream_desc_t){.struct_size = 2};
  assert_accel_status(accel_stream_create(env->device, &desc, &s),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_create(NULL, NULL, &s),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_create(env->device, NULL, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_null(s);
  for (uint32_t p = ACCEL_STREAM_PRIORITY_NORMAL; p <= ACCEL_STREAM_PRIORITY_LOW;
       ++p) {
    desc = (accel_stream_desc_t){.struct_size = sizeof(desc), .priority = p};
    assert_accel_ok(accel_stream_create(env->device, &desc, &s));
    counter_t c = {0};
    assert_accel_ok(accel_stream_host_call(s, count_fn, &c));
    assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    assert_int_equal(atomic_load(&c.value), 1);
    assert_ptr_equal(accel_stream_device(s), env->device);
    accel_stream_destroy(s);
  }
  accel_stream_destroy(NULL);
  assert_null(accel_stream_device(NULL));
}

// Every stream entry point rejects NULL arguments.
static void test_stream_entry_points_reject_null(void **state) {
  accel_buffer_t *buf = (accel_buffer_t *)0;
  uint8_t host[4];
  assert_accel_status(accel_stream_host_call(NULL, count_fn, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_fill(NULL, buf, 0, 0, 0, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_copy(NULL, buf, 0, buf, 0, 0),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_copy_from_host(NULL, buf, 0, host, 0),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_copy_to_host(NULL, host, buf, 0, 0),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_signal(NULL, NULL, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_wait(NULL, NULL, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_synchronize(NULL, 0),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_query(NULL), ACCEL_ERROR_INVALID_ARGUMENT);
  test_env_t *env = *state;
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  assert_accel_status(accel_stream_host_call(s, NULL, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_signal(s, NULL, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_stream_destroy(s);
}

// Synchronize with a timeout returns TIMEOUT while work is blocked, and the
// stream recovers once the blocker is released.
static void test_stream_synchronize_times_out(void **state) {
  test_env_t *env = *state;
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  accel_semaphore_t *gate = NULL;
  assert_accel_ok(accel_semaphore_create(env->device, 0, &gate));
  assert_accel_ok(accel_stream_wait(s, gate, 1));
  uint64_t t0 = test_now_ns();
  assert_accel_status(accel_stream_synchronize(s, 20000000),
                      ACCEL_ERROR_TIMEOUT);
  uint64_t waited = test_now_ns() - t0;
  assert_true(waited >= 20000000);
  assert_true(waited < 2000000000);
  assert_accel_status(accel_stream_query(s), ACCEL_ERROR_NOT_READY);
  assert_accel_ok(accel_semaphore_signal(gate, 1));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  accel_stream_destroy(s);
  accel_semaphore_release(gate);
}

static accel_status_t spin_for_fn(void *user_data) {
  uint64_t ns = (uint64_t)(uintptr_t)user_data;
  uint64_t until = test_now_ns() + ns;
  while (test_now_ns() < until) {
  }
  return ACCEL_OK;
}

// The completion signal is a plain store whose ordering against a parking
// waiter rests on membarrier (host driver): with waits that park almost at
// once, commands of random length (0-20 us, so that the signal lands before,
// during and after the waiter's registration) never lose a wake-up. A lost
// one would show as a timeout.
static void test_stream_parked_synchronize_never_misses_completion(
    void **state) {
  (void)state;
  accel_runtime_options_t opts;
  accel_runtime_options_init(&opts);
  opts.spin_ns = 1;  // both the waiter and the worker park after 64 polls
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = NULL;
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_runtime_create(&opts, &rt));
  assert_accel_ok(accel_device_get(rt, 0, &dev));
  assert_accel_ok(accel_stream_create(dev, NULL, &s));
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int i = 0; i < 10000; ++i) {
    uintptr_t ns = (uintptr_t)test_rng_range(&rng, 0, 20000);
    assert_accel_ok(accel_stream_host_call(s, spin_for_fn, (void *)ns));
    assert_accel_ok(accel_stream_synchronize(s, 2000000000ull));
  }
  accel_stream_destroy(s);
  accel_runtime_destroy(rt);
}

// A child forked from a process whose runtime registered for membarrier
// makes its own runtime and parks on synchronizes without losing a wake-up
// (the registration is renewed in the child).
static void test_stream_parked_synchronize_in_forked_child(void **state) {
  (void)state;
#if defined(__SANITIZE_THREAD__)
  // TSan does not support starting threads after a multi-threaded fork.
  skip();
#endif
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    accel_runtime_options_t opts;
    accel_runtime_options_init(&opts);
    opts.spin_ns = 1;
    accel_runtime_t *rt = NULL;
    accel_device_t *dev = NULL;
    accel_stream_t *s = NULL;
    int bad = accel_runtime_create(&opts, &rt) != ACCEL_OK ||
              accel_device_get(rt, 0, &dev) != ACCEL_OK ||
              accel_stream_create(dev, NULL, &s) != ACCEL_OK;
    for (int i = 0; i < 2000 && !bad; ++i) {
      uintptr_t ns = (uintptr_t)(i % 7) * 3000;
      bad = accel_stream_host_call(s, spin_for_fn, (void *)ns) != ACCEL_OK ||
            accel_stream_synchronize(s, 2000000000ull) != ACCEL_OK;
    }
    accel_stream_destroy(s);
    accel_runtime_destroy(rt);
    _exit(bad ? 1 : 0);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stream_runs_100000_commands_in_order),
      cmocka_unit_test(test_stream_copies_and_fills_match_reference),
      cmocka_unit_test(test_stream_rejects_bad_ranges),
      cmocka_unit_test(test_stream_rejects_freed_buffers_naming_them),
      cmocka_unit_test(test_host_fn_fail_sets_the_stream_message),
      cmocka_unit_test(test_stream_rejects_objects_of_other_devices),
      cmocka_unit_test(test_stream_failure_poisons_later_work),
      cmocka_unit_test(test_stream_skipped_signals_fail_before_synchronize),
      cmocka_unit_test(
          test_stream_signals_racing_a_failure_fail_before_synchronize),
      cmocka_unit_test(test_stream_failure_mid_burst_stops_the_burst),
      cmocka_unit_test(test_stream_destroy_drains_pending_work),
      cmocka_unit_test(test_stream_destroy_with_abort_cancels_pending_work),
      cmocka_unit_test(test_stream_concurrent_enqueue_keeps_per_thread_order),
      cmocka_unit_test(test_stream_taking_turns_keeps_global_order),
      cmocka_unit_test(test_stream_mixed_records_keep_order_and_arguments),
      cmocka_unit_test(test_stream_second_submitter_takes_over_mid_burst),
      cmocka_unit_test(test_stream_create_validates_desc),
      cmocka_unit_test(test_stream_entry_points_reject_null),
      cmocka_unit_test(test_stream_synchronize_times_out),
      cmocka_unit_test(test_stream_parked_synchronize_never_misses_completion),
      cmocka_unit_test(test_stream_parked_synchronize_in_forked_child),
  };
  return cmocka_run_group_tests(tests, test_env_setup, test_env_teardown);
}
