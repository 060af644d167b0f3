// Shared test fixtures: runtime setup, random numbers with a printed seed,
// and assertion helpers for accel status codes.
#ifndef ACCEL_TESTS_SUPPORT_H_
#define ACCEL_TESTS_SUPPORT_H_

// cmocka needs these before its header.
#include <setjmp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "accel/accel.h"

// Asserts that |expr| returns ACCEL_OK, printing the message otherwise.
#define assert_accel_ok(expr)                                             \
  do {                                                                    \
    accel_status_t st__ = (expr);                                         \
    if (st__ != ACCEL_OK) {                                               \
      print_error("%s returned %s: %s\n", #expr, accel_status_name(st__), \
                  accel_last_error());                                    \
    }                                                                     \
    assert_int_equal(st__, ACCEL_OK);                                     \
  } while (0)

// Asserts that |expr| returns |code| and leaves a non-empty message.
#define assert_accel_status(expr, code)                                  \
  do {                                                                   \
    accel_status_t st__ = (expr);                                        \
    if (st__ != (code)) {                                                \
      print_error("%s returned %s (%s), expected %s\n", #expr,           \
                  accel_status_name(st__), accel_last_error(),           \
                  accel_status_name(code));                              \
    }                                                                    \
    assert_int_equal(st__, (code));                                      \
    assert_true(accel_last_error()[0] != '\0');                          \
  } while (0)

// A runtime with the host device, for fixtures.
typedef struct test_env {
  accel_runtime_t *runtime;
  accel_device_t *device;
} test_env_t;

// cmocka group setup/teardown creating a test_env_t in *state.
int test_env_setup(void **state);
int test_env_teardown(void **state);

// A seeded xorshift generator. The seed comes from ACCEL_TEST_SEED or the
// clock and is printed, so that a failure can be replayed.
typedef struct test_rng {
  uint64_t state;
} test_rng_t;

void test_rng_init(test_rng_t *rng, const char *test_name);
uint64_t test_rng_next(test_rng_t *rng);
// Uniform in [lo, hi].
uint64_t test_rng_range(test_rng_t *rng, uint64_t lo, uint64_t hi);

// Reads the whole file at |path| into a malloc'd buffer (fails the test when
// it cannot) and stores its size in |*out_size|.
void *test_read_file(const char *path, uint64_t *out_size);

// Monotonic time in ns.
uint64_t test_now_ns(void);

#endif  // ACCEL_TESTS_SUPPORT_H_
