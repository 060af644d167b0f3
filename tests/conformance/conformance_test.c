// Conformance: behaviour every backend must show, written once against the
// public API and run on every device of the backend named by
// ACCEL_CONFORMANCE_BACKEND. Exits 77 (skip) when that backend has no device.
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "test_support.h"

static accel_runtime_t *g_runtime;
static accel_device_t *g_devices[64];
static uint32_t g_device_count;

// Runs |body| for every device of the backend under test.
#define FOR_EACH_DEVICE(dev)                                           \
  for (uint32_t i__ = 0; i__ < g_device_count; ++i__)                  \
    for (accel_device_t *dev = g_devices[i__]; dev != NULL; dev = NULL)

// Device properties are consistent.
static void test_device_info_is_consistent(void **state) {
  FOR_EACH_DEVICE(dev) {
    accel_device_info_t info = {.struct_size = sizeof(info)};
    assert_accel_ok(accel_device_info(dev, &info));
    assert_true(info.name[0] != '\0');
    assert_true(strchr(info.id, ':') != NULL);
    assert_true(info.page_size > 0 &&
                (info.page_size & (info.page_size - 1)) == 0);
    assert_true(info.compute_queue_count >= 1);
    assert_true(info.target[0] != '\0');
  }
}

// Data written to a buffer comes back unchanged through every copy kind.
static void test_buffer_roundtrip_through_every_copy_kind(void **state) {
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  FOR_EACH_DEVICE(dev) {
    uint64_t size = test_rng_range(&rng, 1, 3 << 20);
    accel_buffer_desc_t desc = {.struct_size = sizeof(desc),
                                .size_bytes = size};
    accel_buffer_t *a = NULL, *b = NULL;
    assert_accel_ok(accel_buffer_alloc(dev, &desc, &a));
    assert_accel_ok(accel_buffer_alloc(dev, &desc, &b));
    assert_int_equal(accel_buffer_size(a), size);
    assert_ptr_equal(accel_buffer_device(a), dev);
    assert_true(accel_buffer_address(a) % 256 == 0);
    uint8_t *in = malloc(size), *out = malloc(size);
    for (uint64_t j = 0; j < size; ++j) {
      in[j] = (uint8_t)test_rng_next(&rng);
    }
    accel_stream_t *s = NULL;
    assert_accel_ok(accel_stream_create(dev, NULL, &s));
    assert_accel_ok(accel_stream_copy_from_host(s, a, 0, in, size));
    assert_accel_ok(accel_stream_copy(s, b, 0, a, 0, size));
    assert_accel_ok(accel_stream_fill(s, a, 0, size, 0, 1));
    assert_accel_ok(accel_stream_copy_to_host(s, out, b, 0, size));
    assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    assert_memory_equal(in, out, size);
    assert_accel_ok(accel_stream_copy_to_host(s, out, a, 0, size));
    assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    for (uint64_t j = 0; j < size; ++j) {
      assert_int_equal(out[j], 0);
    }
    accel_stream_destroy(s);
    accel_buffer_release(a);
    accel_buffer_release(b);
    free(in);
    free(out);
  }
}

static accel_status_t bump(void *user_data) {
  uint32_t *p = user_data;
  (*p)++;
  return ACCEL_OK;
}

// A command buffer of copies (through a binding-table slot), a fill, a host
// call and a semaphore signal replays like the same commands submitted, with
// a new table each execute.
static void test_command_buffer_replays_with_binding_tables(void **state) {
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  FOR_EACH_DEVICE(dev) {
    uint64_t size = test_rng_range(&rng, 1, 3 << 20);
    accel_buffer_desc_t desc = {.struct_size = sizeof(desc),
                                .size_bytes = size};
    accel_buffer_t *src = NULL, *dst[2] = {NULL, NULL};
    assert_accel_ok(accel_buffer_alloc(dev, &desc, &src));
    assert_accel_ok(accel_buffer_alloc(dev, &desc, &dst[0]));
    assert_accel_ok(accel_buffer_alloc(dev, &desc, &dst[1]));
    uint8_t *in = malloc(size), *out = malloc(size);
    for (uint64_t j = 0; j < size; ++j) {
      in[j] = (uint8_t)test_rng_next(&rng);
    }
    accel_semaphore_t *sem = NULL;
    assert_accel_ok(accel_semaphore_create(dev, 0, &sem));
    uint32_t calls = 0;
    accel_command_buffer_t *cb = NULL;
    assert_accel_ok(accel_command_buffer_create(dev, NULL, &cb));
    accel_command_buffer_ref_t rsrc = {.buffer = src}, rdst = {.slot = 0};
    assert_accel_ok(accel_command_buffer_fill(cb, &rdst, size, 0xab, 1));
    assert_accel_ok(accel_command_buffer_copy_from_host(cb, &rsrc, in, size));
    assert_accel_ok(accel_command_buffer_copy(cb, &rdst, &rsrc, size));
    assert_accel_ok(accel_command_buffer_host_call(cb, bump, &calls));
    assert_accel_ok(accel_command_buffer_signal(cb, sem, 1));
    assert_accel_ok(accel_command_buffer_finalize(cb));
    accel_stream_t *s = NULL;
    assert_accel_ok(accel_stream_create(dev, NULL, &s));
    for (int e = 0; e < 2; ++e) {
      accel_command_buffer_binding_t table = {.buffer = dst[e]};
      accel_command_buffer_execute_desc_t ed = {.struct_size = sizeof(ed),
                                                .binding_count = 1,
                                                .bindings = &table};
      assert_accel_ok(accel_stream_execute(s, cb, &ed));
    }
    accel_command_buffer_release(cb);  // the executes hold it
    assert_accel_ok(accel_semaphore_wait(sem, 1, ACCEL_TIMEOUT_INFINITE));
    assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    assert_int_equal(calls, 2);
    for (int e = 0; e < 2; ++e) {
      assert_accel_ok(accel_stream_copy_to_host(s, out, dst[e], 0, size));
      assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
      assert_memory_equal(in, out, size);
    }
    accel_stream_destroy(s);
    accel_semaphore_release(sem);
    accel_buffer_release(src);
    accel_buffer_release(dst[0]);
    accel_buffer_release(dst[1]);
    free(in);
    free(out);
  }
}

static accel_status_t fail_io(void *user_data) {
  (void)user_data;
  return accel_error(ACCEL_ERROR_IO, "the disk went away");
}

// A host call that fails inside a replay fails the stream naming the
// buffer and the command; the replay's later host calls are skipped and its
// later SIGNALs fail with the same error (no waiter hangs).
static void test_command_buffer_host_call_failure_fails_the_replay(
    void **state) {
  FOR_EACH_DEVICE(dev) {
    accel_semaphore_t *before = NULL, *after = NULL;
    assert_accel_ok(accel_semaphore_create(dev, 0, &before));
    assert_accel_ok(accel_semaphore_create(dev, 0, &after));
    uint32_t calls = 0;
    accel_command_buffer_desc_t cd = {.struct_size = sizeof(cd),
                                      .name = "failing"};
    accel_command_buffer_t *cb = NULL;
    assert_accel_ok(accel_command_buffer_create(dev, &cd, &cb));
    assert_accel_ok(accel_command_buffer_host_call(cb, bump, &calls));
    assert_accel_ok(accel_command_buffer_signal(cb, before, 1));
    assert_accel_ok(accel_command_buffer_host_call(cb, fail_io, NULL));
    assert_accel_ok(accel_command_buffer_signal(cb, after, 1));
    assert_accel_ok(accel_command_buffer_host_call(cb, bump, &calls));
    assert_accel_ok(accel_command_buffer_finalize(cb));
    accel_stream_t *s = NULL;
    assert_accel_ok(accel_stream_create(dev, NULL, &s));
    assert_accel_ok(accel_stream_execute(s, cb, NULL));
    assert_accel_status(accel_semaphore_wait(after, 1, ACCEL_TIMEOUT_INFINITE),
                        ACCEL_ERROR_IO);
    assert_non_null(strstr(accel_last_error(),
                           "command buffer \"failing\" command #2 (host_call) "
                           "failed"));
    assert_non_null(strstr(accel_last_error(), "the disk went away"));
    assert_accel_status(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE),
                        ACCEL_ERROR_IO);
    assert_accel_ok(accel_semaphore_wait(before, 1, ACCEL_TIMEOUT_INFINITE));
    assert_int_equal(calls, 1);
    // The failed stream takes no more executes.
    assert_accel_status(accel_stream_execute(s, cb, NULL), ACCEL_ERROR_IO);
    accel_command_buffer_release(cb);
    accel_stream_destroy(s);
    accel_semaphore_release(before);
    accel_semaphore_release(after);
  }
}

// A reentrant buffer runs on two streams at once: the second execute does
// not wait for the first (which waits for a semaphore only the second
// stream signals afterwards), and each fills its own binding. Then event
// records in one buffer order another buffer's copy (an event wait) on a
// third stream, and time the fill.
static void test_command_buffer_reentrant_executes_overlap(void **state) {
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  FOR_EACH_DEVICE(dev) {
    uint64_t size = 4 * test_rng_range(&rng, 1, 4096);
    accel_buffer_desc_t desc = {.struct_size = sizeof(desc),
                                .size_bytes = size};
    accel_buffer_t *buf[2] = {NULL, NULL};
    assert_accel_ok(accel_buffer_alloc(dev, &desc, &buf[0]));
    assert_accel_ok(accel_buffer_alloc(dev, &desc, &buf[1]));
    accel_semaphore_t *gate = NULL;
    assert_accel_ok(accel_semaphore_create(dev, 0, &gate));
    uint32_t pattern = (uint32_t)test_rng_next(&rng);
    accel_command_buffer_desc_t cd = {
        .struct_size = sizeof(cd),
        .flags = ACCEL_COMMAND_BUFFER_FLAG_REENTRANT};
    accel_command_buffer_t *cb = NULL;
    assert_accel_ok(accel_command_buffer_create(dev, &cd, &cb));
    accel_command_buffer_ref_t r = {.slot = 0};
    assert_accel_ok(accel_command_buffer_fill(cb, &r, size, pattern, 4));
    assert_accel_ok(accel_command_buffer_finalize(cb));
    accel_stream_t *s[3];
    for (int k = 0; k < 3; ++k) {
      assert_accel_ok(accel_stream_create(dev, NULL, &s[k]));
    }
    accel_command_buffer_binding_t table[2] = {{.buffer = buf[0]},
                                               {.buffer = buf[1]}};
    accel_command_buffer_execute_desc_t ed = {.struct_size = sizeof(ed),
                                              .binding_count = 1,
                                              .bindings = &table[0]};
    assert_accel_ok(accel_stream_wait(s[0], gate, 1));
    assert_accel_ok(accel_stream_execute(s[0], cb, &ed));
    ed.bindings = &table[1];
    assert_accel_ok(accel_stream_execute(s[1], cb, &ed));
    assert_accel_ok(accel_stream_signal(s[1], gate, 1));
    assert_accel_ok(accel_stream_synchronize(s[1], 10000000000ull));
    assert_accel_ok(accel_stream_synchronize(s[0], 10000000000ull));
    uint32_t *out = malloc(size);
    for (int k = 0; k < 2; ++k) {
      memset(out, 0, size);
      assert_accel_ok(accel_stream_copy_to_host(s[2], out, buf[k], 0, size));
      assert_accel_ok(accel_stream_synchronize(s[2], ACCEL_TIMEOUT_INFINITE));
      for (uint64_t j = 0; j < size / 4; ++j) {
        assert_int_equal(out[j], pattern);
      }
    }

    accel_event_t *start = NULL, *end = NULL;
    assert_accel_ok(accel_event_create(dev, 0, &start));
    assert_accel_ok(accel_event_create(dev, 0, &end));
    accel_command_buffer_t *producer = NULL, *consumer = NULL;
    assert_accel_ok(accel_command_buffer_create(dev, NULL, &producer));
    assert_accel_ok(accel_command_buffer_wait(producer, gate, 2));
    assert_accel_ok(accel_command_buffer_event_record(producer, start));
    assert_accel_ok(accel_command_buffer_fill(producer, &r, size, ~pattern, 4));
    assert_accel_ok(accel_command_buffer_event_record(producer, end));
    assert_accel_ok(accel_command_buffer_finalize(producer));
    assert_accel_ok(accel_command_buffer_create(dev, NULL, &consumer));
    assert_accel_ok(accel_command_buffer_wait_event(consumer, end));
    assert_accel_ok(accel_command_buffer_copy_to_host(consumer, out, &r, size));
    assert_accel_ok(accel_command_buffer_finalize(consumer));
    ed.bindings = &table[0];
    assert_accel_ok(accel_stream_execute(s[0], producer, &ed));
    assert_accel_ok(accel_stream_execute(s[2], consumer, &ed));
    assert_accel_ok(accel_semaphore_signal(gate, 2));
    assert_accel_ok(accel_stream_synchronize(s[2], 10000000000ull));
    for (uint64_t j = 0; j < size / 4; ++j) {
      assert_int_equal(out[j], ~pattern);
    }
    int64_t ns = -1;
    assert_accel_ok(accel_event_elapsed_ns(start, end, &ns));
    assert_true(ns >= 0);
    accel_command_buffer_release(producer);
    accel_command_buffer_release(consumer);
    accel_event_release(start);
    accel_event_release(end);
    accel_command_buffer_release(cb);
    for (int k = 0; k < 3; ++k) {
      accel_stream_destroy(s[k]);
    }
    accel_semaphore_release(gate);
    accel_buffer_release(buf[0]);
    accel_buffer_release(buf[1]);
    free(out);
  }
}

// Two streams ordered by a semaphore: the consumer sees the producer's work.
static void test_semaphore_orders_two_streams(void **state) {
  FOR_EACH_DEVICE(dev) {
    accel_stream_t *p = NULL, *c = NULL;
    accel_semaphore_t *sem = NULL;
    assert_accel_ok(accel_stream_create(dev, NULL, &p));
    assert_accel_ok(accel_stream_create(dev, NULL, &c));
    assert_accel_ok(accel_semaphore_create(dev, 0, &sem));
    accel_buffer_desc_t desc = {.struct_size = sizeof(desc), .size_bytes = 4};
    accel_buffer_t *buf = NULL;
    assert_accel_ok(accel_buffer_alloc(dev, &desc, &buf));
    uint32_t result = 0;
    assert_accel_ok(accel_stream_wait(c, sem, 1));
    assert_accel_ok(accel_stream_copy_to_host(c, &result, buf, 0, 4));
    assert_accel_ok(accel_stream_fill(p, buf, 0, 4, 0xc0ffee11u, 4));
    assert_accel_ok(accel_stream_signal(p, sem, 1));
    assert_accel_ok(accel_stream_synchronize(c, ACCEL_TIMEOUT_INFINITE));
    assert_int_equal(result, 0xc0ffee11u);
    accel_buffer_release(buf);
    accel_semaphore_release(sem);
    accel_stream_destroy(p);
    accel_stream_destroy(c);
  }
}

// Events carry ordered device times.
static void test_events_time_work(void **state) {
  FOR_EACH_DEVICE(dev) {
    accel_stream_t *s = NULL;
    accel_event_t *a = NULL, *b = NULL;
    assert_accel_ok(accel_stream_create(dev, NULL, &s));
    assert_accel_ok(accel_event_create(dev, 0, &a));
    assert_accel_ok(accel_event_create(dev, 0, &b));
    uint32_t n = 0;
    assert_accel_ok(accel_event_record(a, s));
    for (int j = 0; j < 100; ++j) {
      assert_accel_ok(accel_stream_host_call(s, bump, &n));
    }
    assert_accel_ok(accel_event_record(b, s));
    assert_accel_ok(accel_event_synchronize(b, ACCEL_TIMEOUT_INFINITE));
    assert_int_equal(n, 100);
    int64_t ns = -1;
    assert_accel_ok(accel_event_elapsed_ns(a, b, &ns));
    assert_true(ns >= 0);
    accel_event_release(a);
    accel_event_release(b);
    accel_stream_destroy(s);
  }
}

// A failed semaphore fails a stream that waits on it, and the fd fires.
static void test_failure_propagates(void **state) {
  FOR_EACH_DEVICE(dev) {
    accel_device_info_t info = {.struct_size = sizeof(info)};
    assert_accel_ok(accel_device_info(dev, &info));
    accel_stream_t *s = NULL;
    accel_semaphore_t *in = NULL, *out = NULL;
    assert_accel_ok(accel_stream_create(dev, NULL, &s));
    assert_accel_ok(accel_semaphore_create(dev, 0, &in));
    assert_accel_ok(accel_semaphore_create(dev, 0, &out));
    int fd = -1;
    if (info.caps & ACCEL_DEVICE_CAP_SEMAPHORE_FD) {
      assert_accel_ok(accel_semaphore_fd(out, 1, &fd));
    } else {
      assert_accel_status(accel_semaphore_fd(out, 1, &fd),
                          ACCEL_ERROR_UNSUPPORTED);
    }
    assert_accel_ok(accel_stream_wait(s, in, 1));
    assert_accel_ok(accel_stream_signal(s, out, 1));
    assert_accel_ok(accel_semaphore_fail(in, ACCEL_ERROR_DEVICE_LOST, "x"));
    assert_accel_status(accel_semaphore_wait(out, 1, ACCEL_TIMEOUT_INFINITE),
                        ACCEL_ERROR_DEVICE_LOST);
    assert_accel_status(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE),
                        ACCEL_ERROR_DEVICE_LOST);
    if (fd >= 0) {
      struct pollfd p = {.fd = fd, .events = POLLIN};
      assert_int_equal(poll(&p, 1, 5000), 1);
      close(fd);
    }
    accel_semaphore_release(in);
    accel_semaphore_release(out);
    accel_stream_destroy(s);
  }
}

int main(void) {
  const char *backend = getenv("ACCEL_CONFORMANCE_BACKEND");
  if (backend == NULL) {
    backend = "host";
  }
  if (accel_runtime_create(NULL, &g_runtime) != ACCEL_OK) {
    fprintf(stderr, "conformance: runtime: %s\n", accel_last_error());
    return 1;
  }
  uint32_t n = 0;
  accel_device_count(g_runtime, &n);
  for (uint32_t i = 0; i < n && g_device_count < 64; ++i) {
    accel_device_t *dev = NULL;
    accel_device_get(g_runtime, i, &dev);
    accel_device_info_t info = {.struct_size = sizeof(info)};
    accel_device_info(dev, &info);
    if (strcmp(info.backend, backend) == 0) {
      g_devices[g_device_count++] = dev;
    }
  }
  if (g_device_count == 0) {
    printf("conformance: skipped: no %s device here (%u device(s) of other "
           "backends)\n",
           backend, n);
    accel_runtime_destroy(g_runtime);
    return 77;
  }
  printf("conformance: %u %s device(s)\n", g_device_count, backend);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_info_is_consistent),
      cmocka_unit_test(test_buffer_roundtrip_through_every_copy_kind),
      cmocka_unit_test(test_semaphore_orders_two_streams),
      cmocka_unit_test(test_events_time_work),
      cmocka_unit_test(test_failure_propagates),
      cmocka_unit_test(test_command_buffer_replays_with_binding_tables),
      cmocka_unit_test(test_command_buffer_host_call_failure_fails_the_replay),
      cmocka_unit_test(test_command_buffer_reentrant_executes_overlap),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  accel_runtime_destroy(g_runtime);
  return rc;
}
