// ACCEL_HOST_THREADS sets how many threads run one grid's work-groups on the
// host device: a kernel that records the thread of each work-group sees at
// most that many distinct threads (exactly one with 1), and bad values are
// refused by accel_runtime_create.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "test_support.h"

#define GROUPS 64

// Writes the calling thread's id to out[group] after about 200 us of work,
// so that a pool with idle threads spreads the grid.
static int32_t record_thread(const accel_kernel_dispatch_t *d,
                             const accel_kernel_workgroup_t *wg) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) <
           200000);
  ((int32_t *)d->bindings[0].data)[wg->id[0]] = (int32_t)syscall(SYS_gettid);
  return 0;
}

static uint32_t distinct_threads(uint32_t threads) {
  char text[16];
  snprintf(text, sizeof(text), "%u", threads);
  setenv("ACCEL_HOST_THREADS", text, 1);
  accel_runtime_t *rt;
  assert_accel_ok(accel_runtime_create(NULL, &rt));
  unsetenv("ACCEL_HOST_THREADS");
  accel_device_t *dev;
  accel_stream_t *s;
  assert_accel_ok(accel_device_get(rt, 0, &dev));
  assert_accel_ok(accel_stream_create(dev, NULL, &s));
  accel_kernel_binding_decl_t decl = {.access = ACCEL_KERNEL_ACCESS_WRITE,
                                      .alignment = 4,
                                      .min_size_bytes = 4 * GROUPS};
  accel_kernel_desc_t kd = {.struct_size = sizeof(kd),
                            .abi_version = ACCEL_KERNEL_ABI_VERSION,
                            .name = "record_thread", .fn = record_thread,
                            .binding_count = 1, .bindings = &decl};
  accel_kernel_t *k;
  assert_accel_ok(accel_kernel_register(dev, &kd, &k));
  accel_buffer_desc_t bd = {.struct_size = sizeof(bd), .size_bytes = 4 * GROUPS};
  accel_buffer_t *buf;
  assert_accel_ok(accel_buffer_alloc(dev, &bd, &buf));
  accel_launch_binding_t b = {.buffer = buf};
  accel_launch_desc_t ld = {.struct_size = sizeof(ld),
                            .workgroup_count = {GROUPS, 1, 1},
                            .binding_count = 1, .bindings = &b};
  int32_t ids[GROUPS];
  uint32_t most = 0;
  for (int round = 0; round < 3; ++round) {
    assert_accel_ok(accel_launch(s, k, &ld));
    assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    void *p;
    assert_accel_ok(accel_buffer_host_pointer(buf, &p));
    memcpy(ids, p, sizeof(ids));
    uint32_t distinct = 0;
    for (int i = 0; i < GROUPS; ++i) {
      int seen = 0;
      for (int j = 0; j < i; ++j) seen |= ids[j] == ids[i];
      distinct += !seen;
    }
    if (distinct > most) most = distinct;
  }
  accel_buffer_release(buf);
  accel_kernel_release(k);
  accel_stream_destroy(s);
  accel_runtime_destroy(rt);
  return most;
}

// One thread runs the whole grid on the stream's worker; N threads never
// exceed N.
static void test_host_threads_bounds_the_threads_of_a_grid(void **state) {
  (void)state;
  assert_int_equal(distinct_threads(1), 1);
  uint32_t three = distinct_threads(3);
  assert_true(three >= 1 && three <= 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_threads_bounds_the_threads_of_a_grid),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
