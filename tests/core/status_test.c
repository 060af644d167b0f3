// Status codes, messages and the API version.
#include <pthread.h>
#include <string.h>

#include "core/error.h"
#include "test_support.h"

// Every code has its own constant name; unknown values are named as such.
static void test_status_name_names_every_code(void **state) {
  assert_string_equal(accel_status_name(ACCEL_OK), "ACCEL_OK");
  assert_string_equal(accel_status_name(ACCEL_ERROR_TIMEOUT),
                      "ACCEL_ERROR_TIMEOUT");
  assert_string_equal(accel_status_name(ACCEL_ERROR_DEVICE_LOST),
                      "ACCEL_ERROR_DEVICE_LOST");
  for (int i = 0; i < ACCEL_STATUS_COUNT; ++i) {
    const char *name = accel_status_name((accel_status_t)i);
    assert_true(strncmp(name, "ACCEL_", 6) == 0);
    for (int j = 0; j < i; ++j) {
      assert_string_not_equal(name, accel_status_name((accel_status_t)j));
    }
  }
  assert_string_equal(accel_status_name((accel_status_t)999),
                      "ACCEL_STATUS_UNKNOWN");
  assert_string_equal(accel_status_name((accel_status_t)-1),
                      "ACCEL_STATUS_UNKNOWN");
}

// The loaded library reports the version the headers were compiled with.
static void test_api_version_matches_headers(void **state) {
  assert_int_equal(accel_api_version(),
                   (ACCEL_API_VERSION_MAJOR << 16) | ACCEL_API_VERSION_MINOR);
}

static void *other_thread(void *arg) {
  accel_error(ACCEL_ERROR_IO, "message of the other thread");
  return NULL;
}

// Messages are per thread: another thread's failure does not overwrite ours.
static void test_last_error_is_thread_local(void **state) {
  accel_runtime_t *rt = NULL;
  assert_accel_status(accel_runtime_create(NULL, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  char mine[256];
  strcpy(mine, accel_last_error());
  pthread_t t;
  pthread_create(&t, NULL, other_thread, NULL);
  pthread_join(t, NULL);
  assert_string_equal(accel_last_error(), mine);
  assert_non_null(strstr(mine, "out_runtime"));
  (void)rt;
}

// A sticky state keeps the first failure and reports it on every read.
static void test_error_state_keeps_first_failure(void **state) {
  accel_error_state_t es;
  accel_error_state_init(&es);
  assert_int_equal(accel_error_state_report(&es), ACCEL_OK);
  assert_true(accel_error_state_set(&es, ACCEL_ERROR_ABORTED, "first %d", 1));
  assert_false(accel_error_state_set(&es, ACCEL_ERROR_IO, "second"));
  accel_error_clear();
  assert_int_equal(accel_error_state_report(&es), ACCEL_ERROR_ABORTED);
  assert_string_equal(accel_last_error(), "first 1");
}

// Context is prefixed to the callee's message, never replacing it.
static void test_error_context_prefixes_message(void **state) {
  accel_error(ACCEL_ERROR_IO, "read failed");
  accel_status_t st = accel_error_context(ACCEL_ERROR_IO, "loading %s", "x");
  assert_int_equal(st, ACCEL_ERROR_IO);
  assert_string_equal(accel_last_error(), "loading x: read failed");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_name_names_every_code),
      cmocka_unit_test(test_api_version_matches_headers),
      cmocka_unit_test(test_last_error_is_thread_local),
      cmocka_unit_test(test_error_state_keeps_first_failure),
      cmocka_unit_test(test_error_context_prefixes_message),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
