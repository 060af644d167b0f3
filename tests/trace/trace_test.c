// Tests of the tracing API: counters snapshot, recorder and flight recorder
// entry points (argument checks, states, files), counters against a
// reference computed from random work.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel_config.h"
#include "test_support.h"
#include "trace/tensor_summary.h"
#include "trace/trace_impl.h"

static uint64_t counter(const char *scope, const char *name) {
  size_t n = 0;
  assert_accel_ok(accel_counters_snapshot(NULL, 0, &n));
  accel_counter_t *c = calloc(n, sizeof(*c));
  assert_non_null(c);
  c[0].struct_size = sizeof(*c);
  size_t got = 0;
  assert_accel_ok(accel_counters_snapshot(c, n, &got));
  assert_int_equal(got, n);
  uint64_t value = UINT64_MAX;
  for (size_t i = 0; i < n; ++i) {
    assert_int_equal(c[i].struct_size, sizeof(*c));
    assert_true(c[i].scope_id != 0);
    if (strcmp(c[i].scope_name, scope) == 0 && strcmp(c[i].name, name) == 0) {
      value = c[i].value;
    }
  }
  free(c);
  return value;
}

// Sum of counter |name| over the scopes whose name starts with |prefix|.
static uint64_t counter_sum(const char *prefix, const char *name) {
  size_t n = 0;
  assert_accel_ok(accel_counters_snapshot(NULL, 0, &n));
  accel_counter_t *c = calloc(n, sizeof(*c));
  assert_non_null(c);
  c[0].struct_size = sizeof(*c);
  size_t got = 0;
  assert_accel_ok(accel_counters_snapshot(c, n, &got));
  uint64_t sum = 0;
  for (size_t i = 0; i < got; ++i) {
    if (strncmp(c[i].scope_name, prefix, strlen(prefix)) == 0 &&
        strcmp(c[i].name, name) == 0) {
      sum += c[i].value;
    }
  }
  free(c);
  return sum;
}

static off_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? st.st_size : -1;
}

// Misuse of accel_counters_snapshot fails with a message, output untouched.
// True if a library whose file name contains |name| is mapped here.
static bool library_mapped(const char *name) {
  FILE *f = fopen("/proc/self/maps", "r");
  assert_non_null(f);
  char line[1024];
  bool found = false;
  while (fgets(line, sizeof(line), f) != NULL) {
    found = found || strstr(line, name) != NULL;
  }
  fclose(f);
  return found;
}

// A program that uses accel without asking for LTTng (ACCEL_LTTNG unset)
// has no LTTng-UST library, hence none of its listener threads, even with
// a runtime, streams and work; ACCEL_LTTNG naming a missing provider is an
// error that says what it tried (issue 15).
static void test_lttng_is_not_loaded_unless_asked(void **state) {
  (void)state;
  assert_null(getenv("ACCEL_LTTNG"));
  accel_runtime_t *rt = NULL;
  assert_accel_ok(accel_runtime_create(NULL, &rt));
  accel_device_t *dev = NULL;
  assert_accel_ok(accel_device_get(rt, 0, &dev));
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(dev, NULL, &s));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  accel_stream_destroy(s);
  accel_runtime_destroy(rt);
  assert_false(library_mapped("liblttng-ust.so"));
  assert_false(library_mapped("libaccel-lttng"));
#if ACCEL_HAVE_LTTNG
  setenv("ACCEL_LTTNG", "/nonexistent/libaccel-lttng.so", 1);
  assert_accel_status(accel_runtime_create(NULL, &rt), ACCEL_ERROR_UNAVAILABLE);
  assert_non_null(strstr(accel_last_error(), "cannot load the LTTng provider"));
  unsetenv("ACCEL_LTTNG");
#endif
}

static void test_counters_snapshot_rejects_bad_arguments(void **state) {
  accel_counter_t c[2] = {{.struct_size = 4}};
  size_t n = 77;
  assert_accel_status(accel_counters_snapshot(c, 2, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_counters_snapshot(NULL, 2, &n),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_counters_snapshot(c, 2, &n),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_int_equal(n, 77);
}

// A snapshot into a short array fills what fits and reports the total.
static void test_counters_snapshot_truncates_to_capacity(void **state) {
  size_t total = 0;
  assert_accel_ok(accel_counters_snapshot(NULL, 0, &total));
  assert_true(total >= 10);  // the device's counters at least
  accel_counter_t c[3];
  memset(c, 0xee, sizeof(c));
  c[0].struct_size = sizeof(c[0]);
  size_t n = 0;
  assert_accel_ok(accel_counters_snapshot(c, 2, &n));
  assert_int_equal(n, total);
  assert_int_equal(c[1].struct_size, sizeof(c[1]));
  assert_int_equal(c[2].struct_size, 0xeeeeeeeeu);  // not written
}

static accel_status_t count_call(void *user_data) {
  (*(unsigned *)user_data)++;
  return ACCEL_OK;
}

static int32_t empty_kernel(const accel_kernel_dispatch_t *dispatch,
                            const accel_kernel_workgroup_t *workgroup) {
  return 0;
}

// Copies, fills, host calls (single and in bursts) and launches of random
// sizes are counted per stream and direction exactly as a reference sum; allocations per device. Copies run
// on the copy engines: their bytes are counted on the tracks of the rings of
// the stream's DMA queue ("<stream>/dma/ring<i>"); on the stream, a copy is
// three commands (signal the DMA queue, wait for it, a host call that
// releases what the queue held) and an empty copy none.
static void test_counters_match_random_work(void **state) {
  test_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  accel_stream_desc_t d = {.struct_size = sizeof(d), .name = "counted"};
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, &d, &s));
  uint64_t in_use0 = counter("host:0", "bytes_in_use");
  uint64_t allocs0 = counter("host:0", "allocations");
  accel_buffer_desc_t bd = {.struct_size = sizeof(bd),
                            .size_bytes = test_rng_range(&rng, 1, 1 << 20)};
  accel_buffer_t *buf = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &bd, &buf));
  assert_int_equal(counter("host:0", "bytes_in_use") - in_use0, bd.size_bytes);
  assert_int_equal(counter("host:0", "allocations") - allocs0, 1);
  uint64_t size = bd.size_bytes;
  unsigned char *host = malloc(size);
  assert_non_null(host);
  memset(host, 1, size);
  accel_kernel_desc_t kd = {.struct_size = sizeof(kd),
                            .abi_version = ACCEL_KERNEL_ABI_VERSION,
                            .name = "counted_kernel",
                            .fn = empty_kernel};
  accel_kernel_t *kernel = NULL;
  assert_accel_ok(accel_kernel_register(env->device, &kd, &kernel));
  accel_launch_desc_t ld = {.struct_size = sizeof(ld),
                            .workgroup_count = {1, 1, 1}};
  uint64_t h2d = 0, d2h = 0, d2d = 0, fill = 0;
  unsigned calls = 0, expected_calls = 0, commands = 0, copies = 0;
  unsigned launches = 0;
  for (int i = 0; i < 300; ++i) {
    uint64_t n = test_rng_range(&rng, 0, size / 2);
    unsigned before = copies;
    uint64_t kind = test_rng_range(&rng, 0, 5);
    switch (kind) {
      case 0:
        assert_accel_ok(accel_stream_copy_from_host(s, buf, 0, host, n));
        h2d += n;
        copies += n > 0;
        break;
      case 1:
        assert_accel_ok(accel_stream_copy_to_host(s, host, buf, 0, n));
        d2h += n;
        copies += n > 0;
        break;
      case 2:
        assert_accel_ok(accel_stream_copy(s, buf, 0, buf, size - n, n));
        d2d += n;
        copies += n > 0;
        break;
      case 3:
        assert_accel_ok(accel_stream_fill(s, buf, 0, n, 7, 1));
        fill += n;
        break;
      case 4: {
        // Bursts: the worker counts host calls in bulk per batch of 64.
        uint64_t burst = test_rng_range(&rng, 1, 200);
        for (uint64_t k = 0; k < burst; ++k) {
          assert_accel_ok(accel_stream_host_call(s, count_call, &calls));
        }
        expected_calls += burst;
        commands += burst - 1;  // one more below
        break;
      }
      default:
        assert_accel_ok(accel_launch(s, kernel, &ld));
        launches++;
        break;
    }
    bool copy = kind <= 2;
    commands += copy ? (copies > before ? 3 : 0) : 1;
  }
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_int_equal(calls, expected_calls);
  const char *scope = "host:0/counted";
  const char *rings = "host:0/counted/dma/ring";
  assert_int_equal(counter_sum(rings, "copy_bytes_h2d"), h2d);
  assert_int_equal(counter_sum(rings, "copy_bytes_d2h"), d2h);
  assert_int_equal(counter_sum(rings, "copy_bytes_d2d"), d2d);
  assert_true(counter_sum(rings, "copies") >= copies);  // large ones split
  assert_int_equal(counter(scope, "copy_bytes_h2d"), 0);
  assert_int_equal(counter(scope, "fill_bytes"), fill);
  assert_int_equal(counter(scope, "host_calls"), expected_calls + copies);
  assert_int_equal(counter(scope, "launches"), launches);
  assert_int_equal(counter(scope, "commands_completed"), commands);
  assert_int_equal(counter(scope, "commands_enqueued"), commands);
  assert_int_equal(counter(scope, "queue_occupancy"), 0);
  accel_stream_destroy(s);
  // A destroyed stream's counters leave the snapshot.
  assert_int_equal(counter(scope, "commands_completed"), UINT64_MAX);
  accel_buffer_release(buf);
  accel_kernel_release(kernel);
  assert_int_equal(counter("host:0", "bytes_in_use"), in_use0);
  free(host);
}

// A failing command counts as one failure of its stream, not as completed,
// and leaves no occupancy behind.
static accel_status_t fail_call(void *user_data) {
  return ACCEL_ERROR_DEVICE_LOST;
}

static void test_counters_count_failures(void **state) {
  test_env_t *env = *state;
  accel_stream_desc_t d = {.struct_size = sizeof(d), .name = "doomed"};
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, &d, &s));
  unsigned calls = 0;
  assert_accel_ok(accel_stream_host_call(s, count_call, &calls));
  assert_accel_ok(accel_stream_host_call(s, fail_call, NULL));
  assert_accel_status(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE),
                      ACCEL_ERROR_DEVICE_LOST);
  // Later submissions are refused with the stored error (not counted).
  assert_accel_status(accel_stream_host_call(s, count_call, &calls),
                      ACCEL_ERROR_DEVICE_LOST);
  assert_int_equal(counter("host:0/doomed", "failures"), 1);
  assert_int_equal(counter("host:0/doomed", "commands_completed"), 1);
  assert_int_equal(counter("host:0/doomed", "commands_enqueued"), 2);
  assert_int_equal(counter("host:0/doomed", "queue_occupancy"), 0);
  accel_stream_destroy(s);
}

// The recorder's entry points check their arguments and state.
static void test_trace_start_stop_states(void **state) {
  char path[] = "/tmp/accel-trace-test-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_accel_status(accel_trace_start(NULL), ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_trace_start(""), ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_trace_start("/nonexistent-dir/x.pftrace"),
                      ACCEL_ERROR_IO);
  assert_accel_status(accel_trace_stop(), ACCEL_ERROR_NOT_READY);
  assert_accel_status(accel_trace_flush(), ACCEL_ERROR_NOT_READY);
  assert_accel_ok(accel_trace_start(path));
  assert_accel_status(accel_trace_start(path), ACCEL_ERROR_BUSY);
  test_env_t *env = *state;
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  unsigned calls = 0;
  assert_accel_ok(accel_stream_host_call(s, count_call, &calls));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_accel_ok(accel_trace_flush());
  off_t flushed = file_size(path);
  assert_true(flushed > 0);
  assert_accel_ok(accel_stream_host_call(s, count_call, &calls));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_accel_ok(accel_trace_stop());
  assert_true(file_size(path) > flushed);
  assert_accel_status(accel_trace_stop(), ACCEL_ERROR_NOT_READY);
  // The first byte is the tag of Trace.packet (field 1, length-delimited).
  unsigned char first = 0;
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fread(&first, 1, 1, f), 1);
  fclose(f);
  assert_int_equal(first, 0x0a);
  accel_stream_destroy(s);
  unlink(path);
}

// The flight recorder is written on demand; bad paths fail with a message.
static void test_flight_dump_writes_file(void **state) {
  char path[] = "/tmp/accel-flight-test-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_accel_status(accel_trace_flight_dump(NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_trace_flight_dump("/nonexistent-dir/f"),
                      ACCEL_ERROR_IO);
  test_env_t *env = *state;
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  unsigned calls = 0;
  for (int i = 0; i < 100; ++i) {
    assert_accel_ok(accel_stream_host_call(s, count_call, &calls));
  }
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_accel_ok(accel_trace_flight_dump(path));
  assert_true(file_size(path) > 1000);
  accel_stream_destroy(s);
  unlink(path);
}

// Switching every hook off and back on restores what the environment asked
// for (the flight recorder here), and no event is recorded while off.
static void test_trace_set_enabled_restores_defaults(void **state) {
  accel_trace_set_enabled(false);
  assert_int_equal(atomic_load(&accel_trace_mask_g), 0);
  accel_trace_set_enabled(true);
  uint32_t m = atomic_load(&accel_trace_mask_g);
  assert_true(m & ACCEL_TRACE_M_FLIGHT);
  assert_true(m & ACCEL_TRACE_M_COUNTERS);
  assert_false(m & ACCEL_TRACE_M_RECORD);
}

// Many short-lived worker threads: their buffers are written out and then
// freed (beyond the most recent exited ones) while recording goes on.
static void test_thread_churn_while_recording(void **state) {
  test_env_t *env = *state;
  char path[] = "/tmp/accel-churn-test-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_accel_ok(accel_trace_start(path));
  unsigned calls = 0;
  for (int i = 0; i < 48; ++i) {
    accel_stream_t *s = NULL;
    assert_accel_ok(accel_stream_create(env->device, NULL, &s));
    assert_accel_ok(accel_stream_host_call(s, count_call, &calls));
    assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    accel_stream_destroy(s);
    if (i % 8 == 7) {
      assert_accel_ok(accel_trace_flush());
    }
  }
  assert_int_equal(calls, 48);
  assert_accel_ok(accel_trace_stop());
  assert_true(file_size(path) > 48 * 100);
  assert_accel_ok(accel_trace_flight_dump(path));
  assert_true(file_size(path) > 0);
  unlink(path);
}

// The text both sinks give a tensor summary: every field, %.9g reals, no
// separator inside a value, "-" for a missing name, truncation that still
// reports the full length.
static void test_tensor_summary_format(void **state) {
  (void)state;
  accel_trace_tensor_summary_t s = {.kernel = "softmax", .name = "y",
                                    .binding = 1, .count = 32, .nan = 8,
                                    .inf = 0, .min = 0.0444549881,
                                    .max = 1.0 / 3.0, .mean = 0.125};
  char out[256];
  const char *want = "kernel=softmax binding=1 name=y count=32 "
                     "min=0.0444549881 max=0.333333333 mean=0.125 nan=8 "
                     "inf=0";
  assert_int_equal(accel_trace_tensor_summary_format(&s, out, sizeof(out)),
                   strlen(want));
  assert_string_equal(out, want);
  s = (accel_trace_tensor_summary_t){.kernel = "my kernel", .name = NULL,
                                     .binding = 4294967295u,
                                     .count = UINT64_MAX, .nan = UINT64_MAX,
                                     .inf = 3, .min = -1e300, .max = 5e-324};
  accel_trace_tensor_summary_format(&s, out, sizeof(out));
  assert_string_equal(out,
                      "kernel=my_kernel binding=4294967295 name=- "
                      "count=18446744073709551615 min=-1e+300 "
                      "max=4.94065646e-324 mean=0 nan=18446744073709551615 "
                      "inf=3");
  s.name = "a=b";
  accel_trace_tensor_summary_format(&s, out, sizeof(out));
  assert_non_null(strstr(out, " name=a_b "));
  char small[16];
  size_t full = accel_trace_tensor_summary_format(&s, small, sizeof(small));
  assert_true(full > sizeof(small));
  assert_string_equal(small, "kernel=my_kerne");
}

int main(void) {
  // The flight recorder is off unless asked for; these tests want it.
  setenv("ACCEL_FLIGHT_EVENTS", "256", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lttng_is_not_loaded_unless_asked),
      cmocka_unit_test(test_counters_snapshot_rejects_bad_arguments),
      cmocka_unit_test(test_counters_snapshot_truncates_to_capacity),
      cmocka_unit_test(test_counters_match_random_work),
      cmocka_unit_test(test_counters_count_failures),
      cmocka_unit_test(test_trace_start_stop_states),
      cmocka_unit_test(test_flight_dump_writes_file),
      cmocka_unit_test(test_trace_set_enabled_restores_defaults),
      cmocka_unit_test(test_thread_churn_while_recording),
      cmocka_unit_test(test_tensor_summary_format),
  };
  return cmocka_run_group_tests(tests, test_env_setup, test_env_teardown);
}
