// Device health: RAS faults of each class injected at random points of a
// random workload (fixed seeds), the watchdog against a command that never
// returns and a DMA descriptor that never completes (on an injected clock,
// so that nothing sleeps), reset scopes, the event source, and
// ACCEL_FAULT_INJECT / ACCEL_WATCHDOG_MS parsing and misuse.
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/health_impl.h"
#include "test_support.h"

// A fixed-seed xorshift (the seeds are part of each test).
static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static uint64_t rng_range(uint64_t *s, uint64_t lo, uint64_t hi) {
  return lo + rng_next(s) % (hi - lo + 1);
}

static accel_runtime_t *runtime_new(void) {
  accel_runtime_t *rt = NULL;
  assert_accel_ok(accel_runtime_create(NULL, &rt));
  return rt;
}

static accel_device_t *device0(accel_runtime_t *rt) {
  accel_device_t *dev = NULL;
  assert_accel_ok(accel_device_get(rt, 0, &dev));
  return dev;
}

static accel_device_health_t health_of(accel_device_t *dev) {
  accel_device_health_t h = {.struct_size = sizeof(h)};
  assert_accel_ok(accel_device_health(dev, &h));
  return h;
}

static accel_stream_t *stream_named(accel_device_t *dev, const char *name,
                                    uint64_t watchdog_ns) {
  accel_stream_desc_t d = {.struct_size = sizeof(d),
                           .name = name,
                           .watchdog_ns = watchdog_ns};
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(dev, &d, &s));
  return s;
}

static accel_status_t count_fn(void *user_data) {
  atomic_fetch_add((_Atomic uint64_t *)user_data, 1);
  return ACCEL_OK;
}

// A test kernel that never returns until told: spins on |release|.
typedef struct spinner {
  _Atomic int started;
  _Atomic int release;
} spinner_t;

static accel_status_t spin_fn(void *user_data) {
  spinner_t *sp = user_data;
  atomic_store(&sp->started, 1);
  while (!atomic_load(&sp->release)) {
    usleep(100);
  }
  return ACCEL_OK;
}

static void inject(accel_device_t *dev, uint32_t kind, uint64_t index,
                   const char *queue) {
  accel_fault_desc_t f = {.struct_size = sizeof(f),
                          .kind = kind,
                          .command_index = index,
                          .queue_name = queue};
  assert_accel_ok(accel_device_inject_fault(dev, &f));
}

// An injected clock the tests advance by hand.
static uint64_t fake_now(void *ctx) { return *(uint64_t *)ctx; }

// A new runtime's first device, its watchdog on |*clock| (no thread).
static accel_device_t *device_on_clock(accel_runtime_t **out_rt,
                                       uint64_t *clock) {
  *out_rt = runtime_new();
  accel_device_t *dev = device0(*out_rt);
  accel_health_set_clock(dev, fake_now, clock);
  return dev;
}

// A new device is healthy with no faults, and the query checks its
// arguments.
static void test_health_new_device_is_healthy(void **state) {
  (void)state;
  accel_runtime_t *rt = runtime_new();
  accel_device_t *dev = device0(rt);
  accel_device_health_t h = health_of(dev);
  assert_int_equal(h.state, ACCEL_DEVICE_STATE_HEALTHY);
  assert_int_equal(h.struct_size, sizeof(h));
  for (int c = 0; c < ACCEL_RAS_CLASS_COUNT; ++c) {
    assert_int_equal(h.ras_counts[c], 0);
  }
  assert_int_equal(h.last_status, ACCEL_OK);
  assert_string_equal(h.last_message, "");
  assert_accel_status(accel_device_health(NULL, &h),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_device_health(dev, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_device_health_t small = {.struct_size = 8};
  assert_accel_status(accel_device_health(dev, &small),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  // An older, shorter struct gets only its fields.
  accel_device_health_t older;
  memset(&older, 0xab, sizeof(older));
  older.struct_size = 16;
  assert_accel_ok(accel_device_health(dev, &older));
  assert_int_equal(older.struct_size, 16);
  assert_int_equal(older.state, ACCEL_DEVICE_STATE_HEALTHY);
  assert_int_equal(((uint8_t *)&older)[16], 0xab);
  assert_string_equal(accel_device_state_name(ACCEL_DEVICE_STATE_LOST),
                      "lost");
  assert_string_equal(accel_device_state_name((accel_device_state_t)9),
                      "unknown");
  accel_runtime_destroy(rt);
}

// Misuse of injection and reset is refused with a message.
static void test_inject_and_reset_reject_bad_arguments(void **state) {
  (void)state;
  accel_runtime_t *rt = runtime_new();
  accel_device_t *dev = device0(rt);
  accel_fault_desc_t f = {.struct_size = sizeof(f), .kind = 7};
  assert_accel_status(accel_device_inject_fault(dev, &f),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  f.kind = ACCEL_FAULT_HANG;  // nothing to hit
  assert_accel_status(accel_device_inject_fault(dev, &f),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  f.struct_size = 4;
  assert_accel_status(accel_device_inject_fault(dev, &f),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_device_inject_fault(NULL, &f),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_device_inject_fault(dev, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_device_reset(dev, (accel_reset_scope_t)3),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_device_reset(NULL, ACCEL_RESET_QUEUE),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  // The table of armed faults is bounded.
  for (int i = 0; i < 16; ++i) {
    inject(dev, ACCEL_FAULT_CORRECTED, 1000000, NULL);
  }
  f = (accel_fault_desc_t){.struct_size = sizeof(f),
                           .kind = ACCEL_FAULT_CORRECTED,
                           .command_index = 5};
  assert_accel_status(accel_device_inject_fault(dev, &f),
                      ACCEL_ERROR_OUT_OF_MEMORY);
  // A context reset disarms them.
  assert_accel_ok(accel_device_reset(dev, ACCEL_RESET_CONTEXT));
  assert_accel_ok(accel_device_inject_fault(dev, &f));
  assert_accel_status(accel_device_health_callback_set(NULL, NULL, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  int fd = -1;
  assert_accel_status(accel_device_health_fd(dev, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_ok(accel_device_health_fd(dev, &fd));
  assert_true(fd >= 0);
  accel_runtime_destroy(rt);
}

typedef struct callback_log {
  _Atomic int calls;
  _Atomic int last_state;
  _Atomic int last_status;
} callback_log_t;

static void log_callback(accel_device_t *device, accel_device_state_t st,
                         accel_status_t status, const char *message,
                         void *user_data) {
  callback_log_t *log = user_data;
  accel_device_health_t h = {.struct_size = sizeof(h)};
  // The callback may query the device (no lock of it is held).
  assert_int_equal(accel_device_health(device, &h), ACCEL_OK);
  assert_non_null(message);
  atomic_store(&log->last_state, (int)st);
  atomic_store(&log->last_status, (int)status);
  atomic_fetch_add(&log->calls, 1);
}

// A corrected fault at a random command is counted and reported; every
// command of the workload still runs and the device stays healthy.
static void test_corrected_fault_is_counted_and_work_goes_on(void **state) {
  (void)state;
  uint64_t seed = 0x5eed0001;
  for (int trial = 0; trial < 4; ++trial) {
    accel_runtime_t *rt = runtime_new();
    accel_device_t *dev = device0(rt);
    callback_log_t log = {0};
    assert_accel_ok(accel_device_health_callback_set(dev, log_callback, &log));
    uint32_t streams = (uint32_t)rng_range(&seed, 1, 4);
    uint64_t per_stream = rng_range(&seed, 20, 200);
    inject(dev, ACCEL_FAULT_CORRECTED, rng_range(&seed, 1, per_stream), NULL);
    _Atomic uint64_t ran = 0;
    accel_stream_t *s[4];
    for (uint32_t i = 0; i < streams; ++i) {
      s[i] = stream_named(dev, NULL, 0);
    }
    for (uint64_t c = 0; c < per_stream; ++c) {
      for (uint32_t i = 0; i < streams; ++i) {
        assert_accel_ok(accel_stream_host_call(s[i], count_fn, &ran));
      }
    }
    for (uint32_t i = 0; i < streams; ++i) {
      assert_accel_ok(accel_stream_synchronize(s[i], ACCEL_TIMEOUT_INFINITE));
      accel_stream_destroy(s[i]);
    }
    assert_int_equal(atomic_load(&ran), per_stream * streams);
    accel_device_health_t h = health_of(dev);
    assert_int_equal(h.state, ACCEL_DEVICE_STATE_HEALTHY);
    assert_int_equal(h.ras_counts[ACCEL_RAS_CORRECTED], 1);
    assert_int_equal(h.ras_counts[ACCEL_RAS_UNCORRECTED], 0);
    assert_non_null(strstr(h.last_message, "corrected fault"));
    assert_int_equal(atomic_load(&log.calls), 1);
    assert_int_equal(atomic_load(&log.last_status), ACCEL_OK);
    accel_runtime_destroy(rt);
  }
}

// An uncorrected fault aimed at one stream of a random workload fails that
// stream (ACCEL_ERROR_IO, a message naming the command) and no other; the
// device is degraded but takes new work.
static void test_uncorrected_fault_fails_only_its_stream(void **state) {
  (void)state;
  uint64_t seed = 0x5eed0002;
  for (int trial = 0; trial < 4; ++trial) {
    accel_runtime_t *rt = runtime_new();
    accel_device_t *dev = device0(rt);
    uint32_t streams = (uint32_t)rng_range(&seed, 2, 4);
    uint32_t victim = (uint32_t)rng_range(&seed, 0, streams - 1);
    uint64_t per_stream = rng_range(&seed, 10, 100);
    uint64_t index = rng_range(&seed, 1, per_stream);
    char victim_name[16];
    snprintf(victim_name, sizeof(victim_name), "s%u", victim);
    inject(dev, ACCEL_FAULT_UNCORRECTED, index, victim_name);
    _Atomic uint64_t ran[4] = {0};
    accel_stream_t *s[4];
    for (uint32_t i = 0; i < streams; ++i) {
      char name[16];
      snprintf(name, sizeof(name), "s%u", i);
      s[i] = stream_named(dev, name, 0);
    }
    for (uint64_t c = 0; c < per_stream; ++c) {
      for (uint32_t i = 0; i < streams; ++i) {
        accel_status_t st = accel_stream_host_call(s[i], count_fn, &ran[i]);
        assert_true(st == ACCEL_OK || (i == victim && st == ACCEL_ERROR_IO));
      }
    }
    for (uint32_t i = 0; i < streams; ++i) {
      accel_status_t st =
          accel_stream_synchronize(s[i], ACCEL_TIMEOUT_INFINITE);
      if (i == victim) {
        assert_int_equal(st, ACCEL_ERROR_IO);
        char want[64];
        snprintf(want, sizeof(want), "command #%llu (host_call) failed",
                 (unsigned long long)index);
        assert_non_null(strstr(accel_last_error(), want));
        assert_non_null(strstr(accel_last_error(), "uncorrected"));
        assert_int_equal(atomic_load(&ran[i]), index - 1);
      } else {
        assert_int_equal(st, ACCEL_OK);
        assert_int_equal(atomic_load(&ran[i]), per_stream);
      }
      accel_stream_destroy(s[i]);
    }
    accel_device_health_t h = health_of(dev);
    assert_int_equal(h.state, ACCEL_DEVICE_STATE_DEGRADED);
    assert_int_equal(h.ras_counts[ACCEL_RAS_UNCORRECTED], 1);
    assert_int_equal(h.last_status, ACCEL_ERROR_IO);
    // Still usable.
    accel_stream_t *fresh = stream_named(dev, NULL, 0);
    _Atomic uint64_t more = 0;
    assert_accel_ok(accel_stream_host_call(fresh, count_fn, &more));
    assert_accel_ok(accel_stream_synchronize(fresh, ACCEL_TIMEOUT_INFINITE));
    accel_stream_destroy(fresh);
    assert_accel_ok(accel_device_reset(dev, ACCEL_RESET_CONTEXT));
    assert_int_equal(health_of(dev).state, ACCEL_DEVICE_STATE_HEALTHY);
    accel_runtime_destroy(rt);
  }
}

static accel_buffer_t *buffer_new(accel_device_t *dev, uint64_t size) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = size};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(dev, &d, &b));
  return b;
}

static accel_dma_queue_t *dma_named(accel_device_t *dev, const char *name,
                                    uint64_t watchdog_ns) {
  accel_dma_queue_desc_t d = {.struct_size = sizeof(d),
                              .name = name,
                              .flags = ACCEL_DMA_QUEUE_FLAG_NO_INLINE,
                              .watchdog_ns = watchdog_ns};
  accel_dma_queue_t *q = NULL;
  assert_accel_ok(accel_dma_queue_create(dev, &d, &q));
  return q;
}

// A fatal fault at a random command of a random workload of streams and a
// DMA queue loses the device: every stream and the DMA queue fail with
// ACCEL_ERROR_DEVICE_LOST, nothing hangs, the eventfd and the callback
// report it, new work is refused; a device reset makes it usable again and
// the buffers keep their contents (no leak under ASan).
static void test_fatal_fault_loses_device_until_device_reset(void **state) {
  (void)state;
  uint64_t seed = 0x5eed0003;
  for (int trial = 0; trial < 4; ++trial) {
    accel_runtime_t *rt = runtime_new();
    accel_device_t *dev = device0(rt);
    callback_log_t log = {0};
    assert_accel_ok(accel_device_health_callback_set(dev, log_callback, &log));
    int fd = -1;
    assert_accel_ok(accel_device_health_fd(dev, &fd));
    uint32_t streams = (uint32_t)rng_range(&seed, 1, 4);
    uint64_t per_stream = rng_range(&seed, 10, 200);
    accel_buffer_t *a = buffer_new(dev, 4096);
    accel_buffer_t *b = buffer_new(dev, 4096);
    uint8_t *pa = (uint8_t *)(uintptr_t)accel_buffer_address(a);
    memset(pa, 0x5a, 4096);
    accel_dma_queue_t *q = dma_named(dev, "dq", 0);
    // Gate the workload so that the fault is certain to hit before any
    // stream finishes: each stream first waits for the gate.
    accel_semaphore_t *gate = NULL;
    assert_accel_ok(accel_semaphore_create(dev, 0, &gate));
    inject(dev, ACCEL_FAULT_FATAL, rng_range(&seed, 1, per_stream), NULL);
    _Atomic uint64_t ran = 0;
    accel_stream_t *s[4];
    for (uint32_t i = 0; i < streams; ++i) {
      s[i] = stream_named(dev, NULL, 0);
      assert_accel_ok(accel_stream_wait(s[i], gate, 1));
      for (uint64_t c = 0; c < per_stream; ++c) {
        (void)accel_stream_host_call(s[i], count_fn, &ran);
      }
    }
    assert_accel_ok(accel_semaphore_signal(gate, 1));
    for (uint32_t i = 0; i < streams; ++i) {
      accel_status_t sync_st =
          accel_stream_synchronize(s[i], ACCEL_TIMEOUT_INFINITE);
      if (sync_st != ACCEL_ERROR_DEVICE_LOST) {
        fail_msg("trial %d stream %u of %u: %s: %s", trial, i, streams,
                 accel_status_name(sync_st), accel_last_error());
      }
      assert_int_equal(accel_stream_query(s[i]), ACCEL_ERROR_DEVICE_LOST);
      assert_non_null(strstr(accel_last_error(), "lost"));
      assert_int_equal(accel_stream_host_call(s[i], count_fn, &ran),
                       ACCEL_ERROR_DEVICE_LOST);
    }
    assert_true(atomic_load(&ran) < per_stream * streams);
    // The DMA queue failed too, through its ordinary failure path.
    assert_int_equal(accel_dma_queue_synchronize(q, ACCEL_TIMEOUT_INFINITE),
                     ACCEL_ERROR_DEVICE_LOST);
    assert_int_equal(accel_dma_copy(q, b, 0, a, 0, 4096),
                     ACCEL_ERROR_DEVICE_LOST);
    accel_device_health_t h = health_of(dev);
    assert_int_equal(h.state, ACCEL_DEVICE_STATE_LOST);
    assert_int_equal(h.ras_counts[ACCEL_RAS_FATAL], 1);
    // The event is announced after the failures, on the thread that saw
    // the fault: wait for it (no timeout: a missing event hangs the test,
    // which meson's timeout reports).
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, -1), 1);
    uint64_t changes = 0;
    assert_int_equal(read(fd, &changes, sizeof(changes)), sizeof(changes));
    assert_int_equal(changes, 1);
    while (atomic_load(&log.calls) == 0) {
      usleep(100);
    }
    assert_int_equal(atomic_load(&log.last_state), ACCEL_DEVICE_STATE_LOST);
    assert_int_equal(atomic_load(&log.last_status), ACCEL_ERROR_DEVICE_LOST);
    // New work is refused; only a device reset recovers.
    accel_stream_t *refused = NULL;
    assert_accel_status(accel_stream_create(dev, NULL, &refused),
                        ACCEL_ERROR_DEVICE_LOST);
    assert_accel_status(accel_device_reset(dev, ACCEL_RESET_QUEUE),
                        ACCEL_ERROR_DEVICE_LOST);
    assert_accel_status(accel_device_reset(dev, ACCEL_RESET_CONTEXT),
                        ACCEL_ERROR_DEVICE_LOST);
    for (uint32_t i = 0; i < streams; ++i) {
      accel_stream_destroy(s[i]);
    }
    accel_dma_queue_destroy(q);
    assert_accel_ok(accel_device_reset(dev, ACCEL_RESET_DEVICE));
    h = health_of(dev);
    assert_int_equal(h.state, ACCEL_DEVICE_STATE_HEALTHY);
    assert_int_equal(h.resets, 1);
    assert_int_equal(h.ras_counts[ACCEL_RAS_FATAL], 1);
    // Usable again; the host device kept the buffers' contents.
    q = dma_named(dev, "dq2", 0);
    assert_accel_ok(accel_dma_copy(q, b, 0, a, 0, 4096));
    assert_accel_ok(accel_dma_queue_synchronize(q, ACCEL_TIMEOUT_INFINITE));
    const uint8_t *pb = (const uint8_t *)(uintptr_t)accel_buffer_address(b);
    for (int i = 0; i < 4096; ++i) {
      assert_int_equal(pb[i], 0x5a);
    }
    accel_dma_queue_destroy(q);
    accel_stream_t *fresh = stream_named(dev, NULL, 0);
    assert_accel_ok(accel_stream_host_call(fresh, count_fn, &ran));
    assert_accel_ok(accel_stream_synchronize(fresh, ACCEL_TIMEOUT_INFINITE));
    accel_stream_destroy(fresh);
    accel_semaphore_release(gate);
    assert_accel_ok(accel_buffer_free(a));
    assert_accel_ok(accel_buffer_free(b));
    accel_runtime_destroy(rt);
  }
}

// Uncorrected and fatal faults on a DMA queue's copies fail the queue with
// ACCEL_ERROR_IO and ACCEL_ERROR_DEVICE_LOST; a stream of the same device
// survives the first and fails with the second.
static void test_dma_faults_fail_the_queue_with_their_class(void **state) {
  (void)state;
  uint64_t seed = 0x5eed0004;
  accel_runtime_t *rt = runtime_new();
  accel_device_t *dev = device0(rt);
  accel_buffer_t *a = buffer_new(dev, 65536);
  accel_buffer_t *b = buffer_new(dev, 65536);
  accel_stream_t *s = stream_named(dev, "bystander", 0);
  for (int cls = ACCEL_FAULT_UNCORRECTED; cls <= ACCEL_FAULT_FATAL; ++cls) {
    accel_dma_queue_t *q = dma_named(dev, "copies", 0);
    uint64_t copies = rng_range(&seed, 4, 40);
    uint64_t index = rng_range(&seed, 1, copies);
    inject(dev, (uint32_t)cls, index, "copies");
    for (uint64_t c = 0; c < copies; ++c) {
      uint64_t size = rng_range(&seed, 1, 64) * 256;
      (void)accel_dma_copy(q, b, 0, a, 0, size);
    }
    accel_status_t want =
        cls == ACCEL_FAULT_FATAL ? ACCEL_ERROR_DEVICE_LOST : ACCEL_ERROR_IO;
    assert_int_equal(accel_dma_queue_synchronize(q, ACCEL_TIMEOUT_INFINITE),
                     want);
    assert_non_null(strstr(accel_last_error(), "dma ring \"copies/ring"));
    _Atomic uint64_t ran = 0;
    (void)accel_stream_host_call(s, count_fn, &ran);
    assert_int_equal(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE),
                     cls == ACCEL_FAULT_FATAL ? ACCEL_ERROR_DEVICE_LOST
                                              : ACCEL_OK);
    accel_dma_queue_destroy(q);
  }
  accel_stream_destroy(s);
  assert_accel_ok(accel_device_reset(dev, ACCEL_RESET_DEVICE));
  assert_accel_ok(accel_buffer_free(a));
  assert_accel_ok(accel_buffer_free(b));
  accel_runtime_destroy(rt);
}

// Advances the injected clock one check period at a time until the
// watchdog fails something; returns the clock's advance since |start|.
static uint64_t tick_until_expiry(accel_device_t *dev, uint64_t *clock,
                                  uint64_t start, uint64_t limit_ns) {
  uint64_t period = accel_health_check_period_ns(dev);
  assert_true(period > 0);
  while (*clock - start <= limit_ns) {
    *clock += period;
    if (accel_health_watchdog_check(dev) != 0) {
      return *clock - start;
    }
  }
  fail_msg("the watchdog failed nothing within %llu ns",
           (unsigned long long)limit_ns);
  return 0;
}

// A kernel that never returns is caught within the stream's deadline plus
// one check period (on the injected clock): the stream fails with
// ACCEL_ERROR_TIMEOUT naming the command and how long it ran, its waits
// return at once, and the device is degraded.
static void test_watchdog_catches_a_kernel_that_never_returns(void **state) {
  (void)state;
  uint64_t clock = 1000000000ull;
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = device_on_clock(&rt, &clock);
  const uint64_t deadline = 100000000ull;  // 100 ms
  accel_stream_t *s = stream_named(dev, "spinner", deadline);
  uint64_t period = accel_health_check_period_ns(dev);
  assert_int_equal(period, deadline / 4);
  _Atomic uint64_t ran = 0;
  assert_accel_ok(accel_stream_host_call(s, count_fn, &ran));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_int_equal(accel_health_watchdog_check(dev), 0);  // sees progress
  spinner_t sp = {0};
  uint64_t start = clock;
  assert_accel_ok(accel_stream_host_call(s, spin_fn, &sp));
  while (!atomic_load(&sp.started)) {
    usleep(100);
  }
  uint64_t caught = tick_until_expiry(dev, &clock, start, 10 * deadline);
  assert_true(caught >= deadline);
  assert_true(caught <= deadline + period);
  assert_int_equal(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE),
                   ACCEL_ERROR_TIMEOUT);
  assert_non_null(strstr(accel_last_error(), "stream \"spinner\": command #2"));
  assert_non_null(strstr(accel_last_error(), "has run for"));
  // New work is refused at once, while the kernel still runs.
  assert_int_equal(accel_stream_host_call(s, count_fn, &ran),
                   ACCEL_ERROR_TIMEOUT);
  assert_non_null(strstr(accel_last_error(), "has run for"));
  accel_device_health_t h = health_of(dev);
  assert_int_equal(h.state, ACCEL_DEVICE_STATE_DEGRADED);
  assert_int_equal(h.watchdog_expiries, 1);
  assert_int_equal(h.last_status, ACCEL_ERROR_TIMEOUT);
  atomic_store(&sp.release, 1);
  accel_stream_destroy(s);
  accel_runtime_destroy(rt);
}

// A DMA descriptor that never completes (an injected hang) is caught within
// the queue's deadline plus one check period; synchronize returns at once.
static void test_watchdog_catches_a_dma_descriptor_that_never_completes(
    void **state) {
  (void)state;
  uint64_t clock = 1000000000ull;
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = device_on_clock(&rt, &clock);
  const uint64_t deadline = 40000000ull;  // 40 ms
  accel_dma_queue_t *q = dma_named(dev, "stuck", deadline);
  accel_buffer_t *a = buffer_new(dev, 4096);
  accel_buffer_t *b = buffer_new(dev, 4096);
  inject(dev, ACCEL_FAULT_HANG, 2, "stuck");
  assert_accel_ok(accel_dma_copy(q, b, 0, a, 0, 4096));
  assert_accel_ok(accel_dma_copy(q, b, 0, a, 0, 4096));  // hangs
  assert_accel_ok(accel_dma_copy(q, b, 0, a, 0, 4096));
  // Wait (really) until the first copy retired and the second is hung.
  accel_device_health_t h;
  do {
    usleep(200);
    h = health_of(dev);
  } while (h.last_progress_ns == 0);
  uint64_t start = clock;
  uint64_t period = accel_health_check_period_ns(dev);
  uint64_t caught = tick_until_expiry(dev, &clock, start, 10 * deadline);
  assert_true(caught >= deadline);
  assert_true(caught <= deadline + period);
  assert_int_equal(accel_dma_queue_synchronize(q, ACCEL_TIMEOUT_INFINITE),
                   ACCEL_ERROR_TIMEOUT);
  assert_non_null(strstr(accel_last_error(), "dma queue \"stuck\""));
  assert_non_null(strstr(accel_last_error(), "has run for"));
  accel_dma_queue_destroy(q);
  assert_accel_ok(accel_buffer_free(a));
  assert_accel_ok(accel_buffer_free(b));
  accel_runtime_destroy(rt);
}

// Two streams stuck at once: the first expiry degrades the device, the
// second (no progress in between) loses it, failing every other member
// with ACCEL_ERROR_DEVICE_LOST.
static void test_watchdog_loses_a_device_whose_queues_stop_retiring(
    void **state) {
  (void)state;
  uint64_t clock = 1000000000ull;
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = device_on_clock(&rt, &clock);
  accel_stream_t *s1 = stream_named(dev, "a", 50000000ull);
  accel_stream_t *s2 = stream_named(dev, "b", 50000000ull);
  accel_stream_t *idle = stream_named(dev, "idle", 0);
  inject(dev, ACCEL_FAULT_HANG, 1, "a");
  inject(dev, ACCEL_FAULT_HANG, 1, "b");
  _Atomic uint64_t ran = 0;
  assert_accel_ok(accel_stream_host_call(s1, count_fn, &ran));
  assert_accel_ok(accel_stream_host_call(s2, count_fn, &ran));
  uint64_t start = clock;
  (void)tick_until_expiry(dev, &clock, start, 1000000000ull);
  accel_device_health_t h = health_of(dev);
  assert_int_equal(h.state, ACCEL_DEVICE_STATE_LOST);
  assert_int_equal(h.watchdog_expiries, 2);
  assert_int_equal(accel_stream_synchronize(idle, ACCEL_TIMEOUT_INFINITE),
                   ACCEL_ERROR_DEVICE_LOST);
  assert_non_null(strstr(accel_last_error(), "stopped retiring"));
  assert_int_equal(accel_stream_synchronize(s1, ACCEL_TIMEOUT_INFINITE),
                   ACCEL_ERROR_TIMEOUT);
  assert_int_equal(atomic_load(&ran), 0);
  accel_stream_destroy(s1);
  accel_stream_destroy(s2);
  accel_stream_destroy(idle);
  assert_accel_ok(accel_device_reset(dev, ACCEL_RESET_DEVICE));
  assert_int_equal(health_of(dev).state, ACCEL_DEVICE_STATE_HEALTHY);
  accel_runtime_destroy(rt);
}

// The watchdog's own thread (real clock) fails a stuck stream; synchronize
// with no timeout returns (no timing is asserted).
static void test_watchdog_thread_fails_a_stuck_stream(void **state) {
  (void)state;
  accel_runtime_t *rt = runtime_new();
  accel_device_t *dev = device0(rt);
  accel_stream_t *s = stream_named(dev, "real", 20000000ull);
  spinner_t sp = {0};
  assert_accel_ok(accel_stream_host_call(s, spin_fn, &sp));
  assert_int_equal(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE),
                   ACCEL_ERROR_TIMEOUT);
  atomic_store(&sp.release, 1);
  accel_stream_destroy(s);
  accel_runtime_destroy(rt);
}

// A queue-scope reset aborts pending work (ACCEL_ERROR_ABORTED, waits
// return at once) and leaves the device's state alone; a stream created
// afterwards works; buffers and semaphores stay valid.
static void test_reset_queue_scope_aborts_pending_work(void **state) {
  (void)state;
  accel_runtime_t *rt = runtime_new();
  accel_device_t *dev = device0(rt);
  accel_semaphore_t *never = NULL;
  assert_accel_ok(accel_semaphore_create(dev, 0, &never));
  accel_stream_t *s = stream_named(dev, NULL, 0);
  _Atomic uint64_t ran = 0;
  assert_accel_ok(accel_stream_wait(s, never, 1));
  for (int i = 0; i < 10; ++i) {
    assert_accel_ok(accel_stream_host_call(s, count_fn, &ran));
  }
  accel_stream_t *idle = stream_named(dev, NULL, 0);
  assert_accel_ok(accel_device_inject_fault(
      dev, &(accel_fault_desc_t){.struct_size = sizeof(accel_fault_desc_t),
                                 .kind = ACCEL_FAULT_UNCORRECTED}));
  assert_accel_ok(accel_device_reset(dev, ACCEL_RESET_QUEUE));
  assert_int_equal(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE),
                   ACCEL_ERROR_ABORTED);
  assert_non_null(strstr(accel_last_error(), "queue reset"));
  // An idle stream has no work to abort; it is failed all the same.
  assert_int_equal(accel_stream_synchronize(idle, ACCEL_TIMEOUT_INFINITE),
                   ACCEL_OK);
  assert_int_equal(accel_stream_query(idle), ACCEL_ERROR_ABORTED);
  assert_int_equal(accel_stream_host_call(idle, count_fn, &ran),
                   ACCEL_ERROR_ABORTED);
  assert_int_equal(atomic_load(&ran), 0);
  accel_device_health_t h = health_of(dev);
  assert_int_equal(h.state, ACCEL_DEVICE_STATE_DEGRADED);  // unchanged
  assert_int_equal(h.resets, 1);
  accel_stream_destroy(s);
  accel_stream_destroy(idle);
  // The semaphore is still usable.
  assert_accel_ok(accel_semaphore_signal(never, 1));
  accel_stream_t *fresh = stream_named(dev, NULL, 0);
  assert_accel_ok(accel_stream_wait(fresh, never, 1));
  assert_accel_ok(accel_stream_host_call(fresh, count_fn, &ran));
  assert_accel_ok(accel_stream_synchronize(fresh, ACCEL_TIMEOUT_INFINITE));
  assert_int_equal(atomic_load(&ran), 1);
  accel_stream_destroy(fresh);
  accel_semaphore_release(never);
  accel_runtime_destroy(rt);
}

// A fault with a delay hits only commands that start after it: one armed
// 1000 s ahead hits nothing, one armed 1 us ahead hits the first command
// after that (the test waits for it to pass).
static void test_delayed_fault_hits_only_later_commands(void **state) {
  (void)state;
  accel_runtime_t *rt = runtime_new();
  accel_device_t *dev = device0(rt);
  accel_fault_desc_t later = {.struct_size = sizeof(later),
                              .kind = ACCEL_FAULT_FATAL,
                              .delay_ns = 1000000000000ull};
  assert_accel_ok(accel_device_inject_fault(dev, &later));
  accel_stream_t *s = stream_named(dev, NULL, 0);
  _Atomic uint64_t ran = 0;
  for (int i = 0; i < 20; ++i) {
    assert_accel_ok(accel_stream_host_call(s, count_fn, &ran));
  }
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_int_equal(atomic_load(&ran), 20);
  assert_accel_ok(accel_device_reset(dev, ACCEL_RESET_CONTEXT));  // disarms
  accel_stream_destroy(s);
  s = stream_named(dev, NULL, 0);
  accel_fault_desc_t soon = {.struct_size = sizeof(soon),
                             .kind = ACCEL_FAULT_UNCORRECTED,
                             .delay_ns = 1000};
  assert_accel_ok(accel_device_inject_fault(dev, &soon));
  usleep(1000);
  assert_accel_ok(accel_stream_host_call(s, count_fn, &ran));
  assert_int_equal(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE),
                   ACCEL_ERROR_IO);
  assert_int_equal(atomic_load(&ran), 20);
  accel_stream_destroy(s);
  accel_runtime_destroy(rt);
}

// Faults armed together each count every eligible command from their
// injection: corrected faults at commands 2, 3 and 5 of a stream hit
// exactly those (one per command), counted in order.
static void test_armed_faults_count_commands_independently(void **state) {
  (void)state;
  accel_runtime_t *rt = runtime_new();
  accel_device_t *dev = device0(rt);
  inject(dev, ACCEL_FAULT_CORRECTED, 5, NULL);
  inject(dev, ACCEL_FAULT_CORRECTED, 2, NULL);
  inject(dev, ACCEL_FAULT_UNCORRECTED, 7, NULL);
  inject(dev, ACCEL_FAULT_CORRECTED, 3, NULL);
  accel_stream_t *s = stream_named(dev, NULL, 0);
  _Atomic uint64_t ran = 0;
  for (int i = 0; i < 6; ++i) {
    assert_accel_ok(accel_stream_host_call(s, count_fn, &ran));
    assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    uint64_t want = i + 1 >= 5 ? 3 : i + 1 >= 3 ? 2 : i + 1 >= 2 ? 1 : 0;
    assert_int_equal(health_of(dev).ras_counts[ACCEL_RAS_CORRECTED], want);
  }
  assert_accel_ok(accel_stream_host_call(s, count_fn, &ran));
  assert_int_equal(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE),
                   ACCEL_ERROR_IO);
  assert_non_null(strstr(accel_last_error(), "command #7"));
  assert_int_equal(atomic_load(&ran), 6);
  accel_stream_destroy(s);
  accel_runtime_destroy(rt);
}

// ACCEL_FAULT_INJECT arms faults at runtime creation.
static void test_fault_inject_env_arms_faults(void **state) {
  (void)state;
  setenv("ACCEL_FAULT_INJECT",
         "corrected,command=2;uncorrected,queue=victim,command=3", 1);
  accel_runtime_t *rt = runtime_new();
  unsetenv("ACCEL_FAULT_INJECT");
  accel_device_t *dev = device0(rt);
  accel_stream_t *other = stream_named(dev, "other", 0);
  accel_stream_t *victim = stream_named(dev, "victim", 0);
  _Atomic uint64_t ran = 0;
  for (int i = 0; i < 5; ++i) {
    assert_accel_ok(accel_stream_host_call(other, count_fn, &ran));
  }
  assert_accel_ok(accel_stream_synchronize(other, ACCEL_TIMEOUT_INFINITE));
  for (int i = 0; i < 5; ++i) {
    (void)accel_stream_host_call(victim, count_fn, &ran);
  }
  assert_int_equal(accel_stream_synchronize(victim, ACCEL_TIMEOUT_INFINITE),
                   ACCEL_ERROR_IO);
  assert_non_null(strstr(accel_last_error(), "command #3"));
  accel_device_health_t h = health_of(dev);
  assert_int_equal(h.ras_counts[ACCEL_RAS_CORRECTED], 1);
  assert_int_equal(h.ras_counts[ACCEL_RAS_UNCORRECTED], 1);
  accel_stream_destroy(other);
  accel_stream_destroy(victim);
  accel_runtime_destroy(rt);
}

// Bad ACCEL_FAULT_INJECT and ACCEL_WATCHDOG_MS values fail runtime creation
// with a message naming the bad part; none injects anything.
static void test_fault_inject_env_rejects_bad_syntax(void **state) {
  (void)state;
  static const struct {
    const char *value;
    const char *says;
  } k_bad[] = {
      {"boom", "unknown fault kind \"boom\""},
      {"fatal,command=0", "command=\"0\""},
      {"fatal,command=-1", "command=\"-1\""},
      {"fatal,command=12x", "command=\"12x\""},
      {"fatal,when=3", "unknown key \"when\""},
      {"fatal,command", "\"command\" is not KEY=VALUE"},
      {"fatal,device=host:9", "no device \"host:9\""},
      {"fatal,device=7", "no device \"7\""},
      {"hang", "a hang needs"},
      {"corrected,after_ms=ten", "after_ms=\"ten\""},
      {";", "no fault"},
      {"corrected,queue=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
       "aaaaaaaaaaaaaaaaaa",
       "longer than"},
  };
  for (size_t i = 0; i < sizeof(k_bad) / sizeof(k_bad[0]); ++i) {
    setenv("ACCEL_FAULT_INJECT", k_bad[i].value, 1);
    accel_runtime_t *rt = NULL;
    accel_status_t st = accel_runtime_create(NULL, &rt);
    if (st != ACCEL_ERROR_INVALID_ARGUMENT ||
        strstr(accel_last_error(), k_bad[i].says) == NULL) {
      fail_msg("ACCEL_FAULT_INJECT=\"%s\": %s \"%s\", expected a message "
               "with \"%s\"",
               k_bad[i].value, accel_status_name(st), accel_last_error(),
               k_bad[i].says);
    }
    assert_null(rt);
  }
  unsetenv("ACCEL_FAULT_INJECT");
  setenv("ACCEL_WATCHDOG_MS", "soon", 1);
  accel_runtime_t *rt = NULL;
  assert_accel_status(accel_runtime_create(NULL, &rt),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "ACCEL_WATCHDOG_MS"));
  // A valid deadline watches every stream by default.
  setenv("ACCEL_WATCHDOG_MS", "200", 1);
  assert_accel_ok(accel_runtime_create(NULL, &rt));
  unsetenv("ACCEL_WATCHDOG_MS");
  accel_device_t *dev = device0(rt);
  accel_stream_t *s = stream_named(dev, NULL, 0);
  assert_int_equal(accel_health_check_period_ns(dev), 50000000ull);
  accel_stream_destroy(s);
  assert_int_equal(accel_health_check_period_ns(dev), 0);
  accel_runtime_destroy(rt);
}

// A backend without the driver's health table (cuda) refuses injection
// with ACCEL_ERROR_UNSUPPORTED and a message; its devices still report a
// health state. Runs where a cuda device is visible (the driver API double).
static void test_cuda_device_refuses_fault_injection(void **state) {
  (void)state;
  accel_runtime_t *rt = runtime_new();
  uint32_t count = 0;
  assert_accel_ok(accel_device_count(rt, &count));
  uint32_t seen = 0;
  for (uint32_t i = 0; i < count; ++i) {
    accel_device_t *dev = NULL;
    assert_accel_ok(accel_device_get(rt, i, &dev));
    accel_device_info_t info = {.struct_size = sizeof(info)};
    assert_accel_ok(accel_device_info(dev, &info));
    if (strcmp(info.backend, "cuda") != 0) {
      continue;
    }
    seen++;
    accel_fault_desc_t f = {.struct_size = sizeof(f),
                            .kind = ACCEL_FAULT_UNCORRECTED,
                            .command_index = 1};
    assert_accel_status(accel_device_inject_fault(dev, &f),
                        ACCEL_ERROR_UNSUPPORTED);
    assert_non_null(strstr(accel_last_error(), "cannot inject"));
    assert_int_equal(health_of(dev).state, ACCEL_DEVICE_STATE_HEALTHY);
    // A reset still aborts the device's streams.
    accel_stream_t *s = stream_named(dev, NULL, 0);
    assert_accel_ok(accel_device_reset(dev, ACCEL_RESET_QUEUE));
    assert_int_equal(accel_stream_query(s), ACCEL_ERROR_ABORTED);
    accel_stream_destroy(s);
  }
  accel_runtime_destroy(rt);
  if (seen == 0) {
    skip();
  }
}

int main(void) {
  // On the driver API double only the cuda test applies (its devices are
  // the visible ones).
  if (getenv("HEALTH_CUDA_ONLY") != NULL) {
    const struct CMUnitTest cuda_tests[] = {
        cmocka_unit_test(test_cuda_device_refuses_fault_injection),
    };
    return cmocka_run_group_tests(cuda_tests, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_health_new_device_is_healthy),
      cmocka_unit_test(test_inject_and_reset_reject_bad_arguments),
      cmocka_unit_test(test_corrected_fault_is_counted_and_work_goes_on),
      cmocka_unit_test(test_uncorrected_fault_fails_only_its_stream),
      cmocka_unit_test(test_fatal_fault_loses_device_until_device_reset),
      cmocka_unit_test(test_dma_faults_fail_the_queue_with_their_class),
      cmocka_unit_test(test_watchdog_catches_a_kernel_that_never_returns),
      cmocka_unit_test(
          test_watchdog_catches_a_dma_descriptor_that_never_completes),
      cmocka_unit_test(test_watchdog_loses_a_device_whose_queues_stop_retiring),
      cmocka_unit_test(test_watchdog_thread_fails_a_stuck_stream),
      cmocka_unit_test(test_reset_queue_scope_aborts_pending_work),
      cmocka_unit_test(test_delayed_fault_hits_only_later_commands),
      cmocka_unit_test(test_armed_faults_count_commands_independently),
      cmocka_unit_test(test_fault_inject_env_arms_faults),
      cmocka_unit_test(test_fault_inject_env_rejects_bad_syntax),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
