#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int test_env_setup(void **state) {
  test_env_t *env = calloc(1, sizeof(*env));
  if (env == NULL) {
    return -1;
  }
  if (accel_runtime_create(NULL, &env->runtime) != ACCEL_OK ||
      accel_device_get(env->runtime, 0, &env->device) != ACCEL_OK) {
    fprintf(stderr, "test_env_setup: %s\n", accel_last_error());
    free(env);
    return -1;
  }
  *state = env;
  return 0;
}

int test_env_teardown(void **state) {
  test_env_t *env = *state;
  accel_runtime_destroy(env->runtime);
  free(env);
  return 0;
}

void test_rng_init(test_rng_t *rng, const char *test_name) {
  const char *text = getenv("ACCEL_TEST_SEED");
  uint64_t seed = text != NULL ? strtoull(text, NULL, 0)
                               : (uint64_t)time(NULL) ^ test_now_ns();
  if (seed == 0) {
    seed = 0x9e3779b97f4a7c15ull;
  }
  fprintf(stderr, "%s: seed %llu (replay with ACCEL_TEST_SEED=%llu)\n",
          test_name, (unsigned long long)seed, (unsigned long long)seed);
  rng->state = seed;
}

uint64_t test_rng_next(test_rng_t *rng) {
  uint64_t x = rng->state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  rng->state = x;
  return x * 0x2545f4914f6cdd1dull;
}

uint64_t test_rng_range(test_rng_t *rng, uint64_t lo, uint64_t hi) {
  if (hi <= lo) {
    return lo;
  }
  return lo + test_rng_next(rng) % (hi - lo + 1);
}

uint64_t test_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void *test_read_file(const char *path, uint64_t *out_size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fail_msg("cannot open %s", path);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *d = malloc(n > 0 ? (size_t)n : 1);
  assert_non_null(d);
  assert_int_equal(fread(d, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *out_size = (uint64_t)n;
  return d;
}
