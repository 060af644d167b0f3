// Fault injection through the driver interface: every fallible backend call
// made by the runtime, streams, events, semaphores and buffers is failed in
// turn, and each failure must surface as the injected code with a message
// and leave nothing behind (ASan's leak checker runs this test too).
#include <stdatomic.h>
#include <string.h>

#include "fault_driver.h"
#include "test_support.h"

static accel_status_t noop_fn(void *user_data) {
  (*(int *)user_data)++;
  return ACCEL_OK;
}

// Work-groups of one launch run on several threads at once.
static _Atomic int g_kernel_runs;

static int32_t count_kernel(const accel_kernel_dispatch_t *dispatch,
                            const accel_kernel_workgroup_t *workgroup) {
  atomic_fetch_add(&g_kernel_runs, 1);
  return 0;
}

// A workload touching every constructor and command kind. Returns the first
// failure; always cleans up what it created.
static accel_status_t workload(void) {
  accel_runtime_options_t opts;
  accel_runtime_options_init(&opts);
  opts.host_device_count = 2;
  accel_runtime_t *rt = NULL;
  accel_stream_t *s = NULL;
  accel_buffer_t *buf = NULL;
  accel_event_t *ev = NULL;
  accel_semaphore_t *sem = NULL;
  accel_device_t *dev = NULL;
  accel_kernel_t *kernel = NULL;
  int calls = 0;
  atomic_store(&g_kernel_runs, 0);
  uint8_t host[64] = {0};
  accel_status_t st = fault_runtime_create(&opts, &rt);
  if (st != ACCEL_OK) {
    return st;
  }
  accel_device_get(rt, 1, &dev);
  accel_buffer_desc_t desc = {.struct_size = sizeof(desc), .size_bytes = 64};
  if ((st = accel_stream_create(dev, NULL, &s)) != ACCEL_OK) goto done;
  if ((st = accel_buffer_alloc(dev, &desc, &buf)) != ACCEL_OK) goto done;
  if ((st = accel_event_create(dev, 0, &ev)) != ACCEL_OK) goto done;
  if ((st = accel_semaphore_create(dev, 0, &sem)) != ACCEL_OK) goto done;
  if ((st = accel_stream_fill(s, buf, 0, 64, 0xab, 1)) != ACCEL_OK) goto done;
  if ((st = accel_stream_copy_to_host(s, host, buf, 0, 64)) != ACCEL_OK)
    goto done;
  if ((st = accel_stream_host_call(s, noop_fn, &calls)) != ACCEL_OK) goto done;
  // Launches: one work-group without arguments, and one with constants
  // (which allocates a launch record).
  accel_kernel_desc_t kd = {.struct_size = sizeof(kd),
                            .abi_version = ACCEL_KERNEL_ABI_VERSION,
                            .name = "count",
                            .fn = count_kernel,
                            .constants_size = 4};
  if ((st = accel_kernel_register(dev, &kd, &kernel)) != ACCEL_OK) goto done;
  uint32_t constant = 7;
  accel_launch_desc_t ld = {.struct_size = sizeof(ld),
                            .workgroup_count = {1, 1, 1},
                            .constants_size = 4,
                            .constants = &constant};
  if ((st = accel_launch(s, kernel, &ld)) != ACCEL_OK) goto done;
  ld.workgroup_count[0] = 3;
  if ((st = accel_launch(s, kernel, &ld)) != ACCEL_OK) goto done;
  if ((st = accel_stream_signal(s, sem, 1)) != ACCEL_OK) goto done;
  if ((st = accel_stream_wait(s, sem, 1)) != ACCEL_OK) goto done;
  if ((st = accel_event_record(ev, s)) != ACCEL_OK) goto done;
  if ((st = accel_stream_wait_event(s, ev)) != ACCEL_OK) goto done;
  if ((st = accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE)) != ACCEL_OK)
    goto done;
  if (host[0] != 0xab || host[63] != 0xab || calls != 1 ||
      atomic_load(&g_kernel_runs) != 4) {
    st = ACCEL_ERROR_INTERNAL;
  }
done:
  accel_stream_destroy(s);
  accel_kernel_release(kernel);
  accel_semaphore_release(sem);
  accel_event_release(ev);
  accel_buffer_release(buf);
  accel_runtime_destroy(rt);
  return st;
}

// The workload succeeds with no fault armed, whether host calls and
// launches take the driver's direct ops or the generic submit.
static void test_workload_passes_without_faults(void **state) {
  for (int offer = 1; offer >= 0; --offer) {
    fault_driver_offer_direct_submit_ops(offer);
    fault_driver_reset();
    assert_accel_ok(workload());
    assert_true(fault_driver_calls(FAULT_OP_QUEUE_SUBMIT) >= 7);
  }
  fault_driver_offer_direct_submit_ops(true);
}

// Failing each call of each kind in turn fails the workload with that code.
static void every_backend_failure_surfaces(void) {
  uint32_t reached = 0;
  for (int op = 0; op < FAULT_OP_COUNT; ++op) {
    for (uint32_t nth = 1;; ++nth) {
      fault_driver_reset();
      fault_driver_arm((fault_op_t)op, nth, ACCEL_ERROR_OUT_OF_MEMORY);
      accel_status_t st = workload();
      if (fault_driver_calls((fault_op_t)op) < nth) {
        assert_accel_ok(st);  // the workload no longer reaches the fault
        break;
      }
      if (st != ACCEL_ERROR_OUT_OF_MEMORY) {
        print_error("op %s call %u: got %s (%s)\n",
                    fault_op_name((fault_op_t)op), nth, accel_status_name(st),
                    accel_last_error());
      }
      assert_int_equal(st, ACCEL_ERROR_OUT_OF_MEMORY);
      assert_non_null(strstr(accel_last_error(), "injected"));
      reached++;
    }
  }
  fault_driver_reset();
  // open, 2 device opens, 4 memory steps (lib/mem reserves the slab's and
  // the paged pool's ranges on first use, then creates and maps the slab's
  // first chunk), 6 semaphores (stream completion, event, user, the stream's
  // DMA link and the fences of its queue's 2 rings: ACCEL_COPY_ENGINES=2 in
  // meson.build), 1 queue, 2 DMA ring creates and 11 submits (the copy to
  // host is 3: the signal for the DMA queue, the wait for it and the call
  // that releases what the queue held; the two launches are 2).
  assert_int_equal(reached, 27);
}

static void test_every_backend_failure_surfaces(void **state) {
  every_backend_failure_surfaces();
}

// The same with host calls and launches on the generic path (a backend
// without the optional queue_host_call and queue_launch ops).
static void test_every_backend_failure_surfaces_without_direct_ops(
    void **state) {
  fault_driver_offer_direct_submit_ops(false);
  every_backend_failure_surfaces();
  fault_driver_offer_direct_submit_ops(true);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_workload_passes_without_faults),
      cmocka_unit_test(test_every_backend_failure_surfaces),
      cmocka_unit_test(test_every_backend_failure_surfaces_without_direct_ops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
