// The CUDA backend's probe, run once per setup by tests/cuda/meson.build:
// no driver, the toolkit's stub library, a driver without devices (each:
// no CUDA devices, the reason kept for accel-info, the host device still
// there), and the device order CUDA_VISIBLE_DEVICES and
// ACCEL_VISIBLE_DEVICES give. These check our use of the driver API (the
// double in tests/cuda/double), not NVIDIA's driver.
//
//   ACCEL_CUDA_TEST_REASON=text   no CUDA device, and the reason holds text
//   ACCEL_CUDA_TEST_BUS_IDS=a,b   the CUDA devices, in order, have these
//                                 PCI bus ids
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

// Counts the runtime's CUDA devices and writes their bus ids, comma
// separated, into |ids|.
static uint32_t cuda_devices(accel_runtime_t *rt, char *ids, size_t size) {
  uint32_t n = 0, found = 0;
  assert_accel_ok(accel_device_count(rt, &n));
  ids[0] = '\0';
  for (uint32_t i = 0; i < n; ++i) {
    accel_device_t *dev = NULL;
    assert_accel_ok(accel_device_get(rt, i, &dev));
    accel_device_info_t info = {.struct_size = sizeof(info)};
    assert_accel_ok(accel_device_info(dev, &info));
    if (strcmp(info.backend, "cuda") == 0) {
      size_t len = strlen(ids);
      snprintf(ids + len, size - len, "%s%s", found ? "," : "",
               info.pci_bus_id);
      found++;
    }
  }
  return found;
}

// Without a usable driver the runtime still opens, lists no CUDA device,
// keeps the host device, and says why.
static void test_cuda_probe_without_devices_says_why(void **state) {
  const char *want = getenv("ACCEL_CUDA_TEST_REASON");
  if (want == NULL) {
    skip();
  }
  accel_runtime_t *rt = NULL;
  assert_accel_ok(accel_runtime_create(NULL, &rt));
  char ids[256];
  assert_int_equal(cuda_devices(rt, ids, sizeof(ids)), 0);
  uint32_t n = 0;
  assert_accel_ok(accel_device_count(rt, &n));
  assert_true(n >= 1);  // the host device
  const char *reason = NULL;
  assert_accel_ok(accel_runtime_backend_status(rt, "cuda", &reason));
  printf("cuda backend: %s\n", reason);
  assert_non_null(strstr(reason, "no CUDA devices"));
  assert_non_null(strstr(reason, want));
  assert_accel_ok(accel_runtime_backend_status(rt, "host", &reason));
  assert_string_equal(reason, "");
  assert_accel_status(accel_runtime_backend_status(rt, "tpu", &reason),
                      ACCEL_ERROR_NOT_FOUND);
  assert_accel_status(accel_runtime_backend_status(rt, NULL, &reason),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_runtime_destroy(rt);
}

// The CUDA devices come in the driver's order (CUDA_VISIBLE_DEVICES
// applied) and ACCEL_VISIBLE_DEVICES picks among them by id.
static void test_cuda_devices_follow_the_visible_order(void **state) {
  const char *want = getenv("ACCEL_CUDA_TEST_BUS_IDS");
  if (want == NULL) {
    skip();
  }
  accel_runtime_t *rt = NULL;
  assert_accel_ok(accel_runtime_create(NULL, &rt));
  char ids[256];
  (void)cuda_devices(rt, ids, sizeof(ids));
  assert_string_equal(ids, want);
  accel_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cuda_probe_without_devices_says_why),
      cmocka_unit_test(test_cuda_devices_follow_the_visible_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
