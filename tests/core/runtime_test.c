// Runtime creation, options, environment overrides and device enumeration.
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_support.h"

static void clear_env(void) {
  unsetenv("ACCEL_VISIBLE_DEVICES");
  unsetenv("ACCEL_HOST_DEVICES");
  unsetenv("ACCEL_SPIN_NS");
}

// With no options the runtime exposes the host device, with sane properties.
static void test_runtime_default_has_host_device(void **state) {
  clear_env();
  accel_runtime_t *rt = NULL;
  assert_accel_ok(accel_runtime_create(NULL, &rt));
  uint32_t n = 0;
  assert_accel_ok(accel_device_count(rt, &n));
  assert_int_equal(n, 1);
  accel_device_t *dev = NULL;
  assert_accel_ok(accel_device_get(rt, 0, &dev));
  assert_ptr_equal(accel_device_runtime(dev), rt);
  accel_device_info_t info = {.struct_size = sizeof(info)};
  assert_accel_ok(accel_device_info(dev, &info));
  assert_string_equal(info.id, "host:0");
  assert_string_equal(info.backend, "host");
  assert_int_equal(info.index, 0);
  assert_true(info.memory_bytes > 0);
  assert_true(info.page_size >= 4096);
  assert_true((info.page_size & (info.page_size - 1)) == 0);
  assert_true(info.compute_queue_count >= 1);
  assert_true(info.caps & ACCEL_DEVICE_CAP_HOST_VISIBLE);
  assert_true(info.numa_node >= 0);
  assert_true(strncmp(info.target, "host-", 5) == 0);
  accel_runtime_destroy(rt);
}

// ACCEL_HOST_DEVICES and ACCEL_VISIBLE_DEVICES choose and order devices.
// accel_device_clock_pair gives the host and device clocks read together:
// on the host device both are CLOCK_MONOTONIC, so they are equal and lie
// between two readings of that clock; NULL arguments are refused by name.
static void test_device_clock_pair_matches_the_host_clock(void **state) {
  (void)state;
  accel_runtime_t *rt = NULL;
  assert_accel_ok(accel_runtime_create(NULL, &rt));
  accel_device_t *dev = NULL;
  assert_accel_ok(accel_device_get(rt, 0, &dev));
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t before = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  uint64_t host_ns = 0, device_ns = 0;
  assert_accel_ok(accel_device_clock_pair(dev, &host_ns, &device_ns));
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t after = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  assert_true(before <= host_ns && host_ns <= after);
  assert_int_equal(host_ns, device_ns);
  assert_accel_status(accel_device_clock_pair(dev, NULL, &device_ns),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "out_host_ns"));
  assert_accel_status(accel_device_clock_pair(NULL, &host_ns, &device_ns),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_runtime_destroy(rt);
}

static void test_visible_devices_choose_and_order(void **state) {
  clear_env();
  setenv("ACCEL_HOST_DEVICES", "3", 1);
  setenv("ACCEL_VISIBLE_DEVICES", "2,host:0", 1);
  accel_runtime_t *rt = NULL;
  assert_accel_ok(accel_runtime_create(NULL, &rt));
  uint32_t n = 0;
  assert_accel_ok(accel_device_count(rt, &n));
  assert_int_equal(n, 2);
  accel_device_t *dev = NULL;
  accel_device_info_t info = {.struct_size = sizeof(info)};
  assert_accel_ok(accel_device_get(rt, 0, &dev));
  assert_accel_ok(accel_device_info(dev, &info));
  assert_string_equal(info.id, "host:2");
  assert_int_equal(info.index, 0);
  assert_accel_ok(accel_device_get(rt, 1, &dev));
  assert_accel_ok(accel_device_info(dev, &info));
  assert_string_equal(info.id, "host:0");
  assert_int_equal(info.index, 1);
  accel_runtime_destroy(rt);
  clear_env();
}

// The options struct chooses devices when no environment overrides it.
static void test_options_visible_devices(void **state) {
  clear_env();
  accel_runtime_options_t opts;
  accel_runtime_options_init(&opts);
  opts.host_device_count = 2;
  opts.visible_devices = "1";
  accel_runtime_t *rt = NULL;
  assert_accel_ok(accel_runtime_create(&opts, &rt));
  accel_device_t *dev = NULL;
  accel_device_info_t info = {.struct_size = sizeof(info)};
  assert_accel_ok(accel_device_get(rt, 0, &dev));
  assert_accel_ok(accel_device_info(dev, &info));
  assert_string_equal(info.id, "host:1");
  accel_runtime_destroy(rt);
}

// Malformed visibility lists are rejected with a message naming the entry.
static void test_visible_devices_rejects_unknown_and_duplicates(void **state) {
  clear_env();
  accel_runtime_t *rt = NULL;
  setenv("ACCEL_VISIBLE_DEVICES", "cuda:7", 1);
  assert_accel_status(accel_runtime_create(NULL, &rt),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "cuda:7"));
  setenv("ACCEL_VISIBLE_DEVICES", "0,host:0", 1);
  assert_accel_status(accel_runtime_create(NULL, &rt),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "twice"));
  setenv("ACCEL_VISIBLE_DEVICES", "5", 1);
  assert_accel_status(accel_runtime_create(NULL, &rt),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_null(rt);
  clear_env();
}

// Bad numbers in the environment are errors, not silently ignored.
static void test_env_numbers_are_validated(void **state) {
  clear_env();
  accel_runtime_t *rt = NULL;
  setenv("ACCEL_SPIN_NS", "fast", 1);
  assert_accel_status(accel_runtime_create(NULL, &rt),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "ACCEL_SPIN_NS"));
  clear_env();
  setenv("ACCEL_HOST_DEVICES", "0", 1);
  assert_accel_status(accel_runtime_create(NULL, &rt),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  setenv("ACCEL_HOST_DEVICES", "-2", 1);
  assert_accel_status(accel_runtime_create(NULL, &rt),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  clear_env();
  setenv("ACCEL_STREAM_COPY_DMA_MIN_BYTES", "1k", 1);
  assert_accel_status(accel_runtime_create(NULL, &rt),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "ACCEL_STREAM_COPY_DMA_MIN_BYTES"));
  unsetenv("ACCEL_STREAM_COPY_DMA_MIN_BYTES");
  static const char *const bad_threads[] = {"0", "66", "two"};
  for (int i = 0; i < 3; ++i) {
    setenv("ACCEL_HOST_THREADS", bad_threads[i], 1);
    assert_accel_status(accel_runtime_create(NULL, &rt),
                        ACCEL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(accel_last_error(), "ACCEL_HOST_THREADS"));
  }
  unsetenv("ACCEL_HOST_THREADS");
  setenv("ACCEL_SPIN_NS", "0", 1);  // 0 = do not spin: valid
  assert_accel_ok(accel_runtime_create(NULL, &rt));
  accel_runtime_destroy(rt);
  clear_env();
}

// Options are checked: struct_size, reserved fields, limits.
static void test_options_are_validated(void **state) {
  clear_env();
  accel_runtime_t *rt = NULL;
  accel_runtime_options_t opts;
  accel_runtime_options_init(&opts);
  opts.struct_size = 4;
  assert_accel_status(accel_runtime_create(&opts, &rt),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_runtime_options_init(&opts);
  opts.flags = 1u << 31;  // an unknown flag
  assert_accel_status(accel_runtime_create(&opts, &rt),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_runtime_options_init(&opts);
  opts.host_device_count = 100000;
  assert_accel_status(accel_runtime_create(&opts, &rt),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_null(rt);
}

// Device queries reject NULLs, out-of-range indices and small structs.
static void test_device_queries_reject_bad_arguments(void **state) {
  clear_env();
  accel_runtime_t *rt = NULL;
  assert_accel_ok(accel_runtime_create(NULL, &rt));
  uint32_t n = 0;
  accel_device_t *dev = NULL;
  assert_accel_status(accel_device_count(NULL, &n),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_device_count(rt, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_device_get(rt, 1, &dev),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_null(dev);
  assert_non_null(strstr(accel_last_error(), "out of range"));
  assert_accel_status(accel_device_get(NULL, 0, &dev),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_device_get(rt, 0, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_ok(accel_device_get(rt, 0, &dev));
  accel_device_info_t info = {.struct_size = 8};
  assert_accel_status(accel_device_info(dev, &info),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_device_info(NULL, &info),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_device_info(dev, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_null(accel_device_runtime(NULL));
  accel_runtime_destroy(NULL);  // ignored
  accel_runtime_destroy(rt);
}

// The environment table lists every variable accel reads.
static void test_env_vars_are_listed(void **state) {
  size_t n = 0;
  const accel_env_var_t *vars = accel_env_vars(&n);
  const char *required[] = {"ACCEL_VISIBLE_DEVICES", "ACCEL_SPIN_NS",
                            "ACCEL_HOST_DEVICES"};
  for (size_t r = 0; r < 3; ++r) {
    bool found = false;
    for (size_t i = 0; i < n; ++i) {
      found |= strcmp(vars[i].name, required[r]) == 0;
      assert_true(strlen(vars[i].description) > 10);
    }
    assert_true(found);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_runtime_default_has_host_device),
      cmocka_unit_test(test_device_clock_pair_matches_the_host_clock),
      cmocka_unit_test(test_visible_devices_choose_and_order),
      cmocka_unit_test(test_options_visible_devices),
      cmocka_unit_test(test_visible_devices_rejects_unknown_and_duplicates),
      cmocka_unit_test(test_env_numbers_are_validated),
      cmocka_unit_test(test_options_are_validated),
      cmocka_unit_test(test_device_queries_reject_bad_arguments),
      cmocka_unit_test(test_env_vars_are_listed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
