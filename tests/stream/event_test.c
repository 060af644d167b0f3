// Events: record, query, synchronize, cross-stream waits and timing.
#include <string.h>
#include <unistd.h>

#include "test_support.h"

static accel_status_t sleep_fn(void *user_data) {
  usleep((useconds_t)(uintptr_t)user_data);
  return ACCEL_OK;
}

// A new event is complete; a recorded one completes when the stream gets
// there, and elapsed time covers the work between two events.
static void test_event_record_query_synchronize_elapsed(void **state) {
  test_env_t *env = *state;
  accel_stream_t *s = NULL;
  accel_event_t *a = NULL, *b = NULL;
  accel_semaphore_t *gate = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  assert_accel_ok(accel_event_create(env->device, 0, &a));
  assert_accel_ok(accel_event_create(env->device, 0, &b));
  assert_accel_ok(accel_semaphore_create(env->device, 0, &gate));
  assert_accel_ok(accel_event_query(a));
  int64_t ns = 0;
  assert_accel_status(accel_event_elapsed_ns(a, b, &ns),
                      ACCEL_ERROR_INVALID_ARGUMENT);  // never recorded
  assert_accel_ok(accel_stream_wait(s, gate, 1));
  assert_accel_ok(accel_event_record(a, s));
  assert_accel_ok(accel_stream_host_call(s, sleep_fn, (void *)20000));
  assert_accel_ok(accel_event_record(b, s));
  assert_accel_status(accel_event_query(a), ACCEL_ERROR_NOT_READY);
  assert_accel_status(accel_event_synchronize(b, 1000), ACCEL_ERROR_TIMEOUT);
  assert_accel_status(accel_event_elapsed_ns(a, b, &ns),
                      ACCEL_ERROR_NOT_READY);
  assert_accel_ok(accel_semaphore_signal(gate, 1));
  assert_accel_ok(accel_event_synchronize(b, ACCEL_TIMEOUT_INFINITE));
  assert_accel_ok(accel_event_query(a));
  assert_accel_ok(accel_event_elapsed_ns(a, b, &ns));
  assert_true(ns >= 20000000);
  assert_true(ns < 2000000000);
  int64_t back = 0;
  assert_accel_ok(accel_event_elapsed_ns(b, a, &back));
  assert_int_equal(back, -ns);
  accel_event_release(a);
  accel_event_release(b);
  accel_semaphore_release(gate);
  accel_stream_destroy(s);
}

typedef struct stamp {
  _Atomic uint64_t clock;
  uint64_t producer_done;
  uint64_t consumer_start;
} stamp_t;

static accel_status_t producer_fn(void *user_data) {
  stamp_t *st = user_data;
  usleep(10000);
  st->producer_done = atomic_fetch_add(&st->clock, 1) + 1;
  return ACCEL_OK;
}

static accel_status_t consumer_fn(void *user_data) {
  stamp_t *st = user_data;
  st->consumer_start = atomic_fetch_add(&st->clock, 1) + 1;
  return ACCEL_OK;
}

// A stream waiting on an event runs after the recording stream reached it;
// a record made after the wait call does not affect it.
static void test_stream_wait_event_orders_streams(void **state) {
  test_env_t *env = *state;
  accel_stream_t *p = NULL, *c = NULL;
  accel_event_t *ev = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &p));
  assert_accel_ok(accel_stream_create(env->device, NULL, &c));
  assert_accel_ok(accel_event_create(env->device, 0, &ev));
  stamp_t st = {0};
  // Waiting on a never-recorded event is no wait.
  assert_accel_ok(accel_stream_wait_event(c, ev));
  assert_accel_ok(accel_stream_host_call(p, producer_fn, &st));
  assert_accel_ok(accel_event_record(ev, p));
  assert_accel_ok(accel_stream_wait_event(c, ev));
  assert_accel_ok(accel_stream_host_call(c, consumer_fn, &st));
  accel_semaphore_t *never = NULL;
  assert_accel_ok(accel_semaphore_create(env->device, 0, &never));
  assert_accel_ok(accel_stream_wait(p, never, 1));
  assert_accel_ok(accel_event_record(ev, p));  // later record: not awaited
  assert_accel_ok(accel_stream_synchronize(c, ACCEL_TIMEOUT_INFINITE));
  assert_true(st.producer_done < st.consumer_start);
  assert_accel_status(accel_event_query(ev), ACCEL_ERROR_NOT_READY);
  assert_accel_ok(accel_semaphore_signal(never, 1));
  assert_accel_ok(accel_event_synchronize(ev, ACCEL_TIMEOUT_INFINITE));
  accel_semaphore_release(never);
  accel_event_release(ev);
  accel_stream_destroy(p);
  accel_stream_destroy(c);
}

static accel_status_t failing_fn(void *user_data) {
  return ACCEL_ERROR_INTERNAL;
}

// An event behind a failed command reports the stream's error; recording it
// again on a healthy stream makes it usable again.
static void test_event_after_stream_failure_reports_and_recovers(
    void **state) {
  test_env_t *env = *state;
  accel_stream_t *bad = NULL, *good = NULL;
  accel_event_t *ev = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &bad));
  assert_accel_ok(accel_stream_create(env->device, NULL, &good));
  assert_accel_ok(accel_event_create(env->device, 0, &ev));
  accel_semaphore_t *gate = NULL;
  assert_accel_ok(accel_semaphore_create(env->device, 0, &gate));
  assert_accel_ok(accel_stream_wait(bad, gate, 1));  // fail after the record
  assert_accel_ok(accel_stream_host_call(bad, failing_fn, NULL));
  assert_accel_ok(accel_event_record(ev, bad));
  assert_accel_ok(accel_semaphore_signal(gate, 1));
  accel_semaphore_release(gate);
  assert_accel_status(accel_event_synchronize(ev, ACCEL_TIMEOUT_INFINITE),
                      ACCEL_ERROR_INTERNAL);
  assert_accel_status(accel_event_query(ev), ACCEL_ERROR_INTERNAL);
  assert_accel_ok(accel_event_record(ev, good));
  assert_accel_ok(accel_event_synchronize(ev, ACCEL_TIMEOUT_INFINITE));
  assert_accel_ok(accel_event_query(ev));
  accel_event_release(ev);
  accel_stream_destroy(bad);
  accel_stream_destroy(good);
}

// Timing can be disabled, and then elapsed time is refused.
static void test_event_disable_timing(void **state) {
  test_env_t *env = *state;
  accel_stream_t *s = NULL;
  accel_event_t *a = NULL, *b = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  assert_accel_ok(
      accel_event_create(env->device, ACCEL_EVENT_FLAG_DISABLE_TIMING, &a));
  assert_accel_ok(accel_event_create(env->device, 0, &b));
  assert_accel_ok(accel_event_record(a, s));
  assert_accel_ok(accel_event_record(b, s));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  int64_t ns;
  assert_accel_status(accel_event_elapsed_ns(a, b, &ns),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "DISABLE_TIMING"));
  accel_event_t *c = NULL;
  assert_accel_status(accel_event_create(env->device, 0x10, &c),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_event_create(NULL, 0, &c),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_event_record(NULL, s),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_event_record(a, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_event_query(NULL), ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_event_synchronize(NULL, 0),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_event_elapsed_ns(a, NULL, &ns),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_stream_wait_event(s, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_event_release(a);
  accel_event_release(b);
  accel_event_release(NULL);
  accel_stream_destroy(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_event_record_query_synchronize_elapsed),
      cmocka_unit_test(test_stream_wait_event_orders_streams),
      cmocka_unit_test(test_event_after_stream_failure_reports_and_recovers),
      cmocka_unit_test(test_event_disable_timing),
  };
  return cmocka_run_group_tests(tests, test_env_setup, test_env_teardown);
}
