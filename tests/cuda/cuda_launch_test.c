// Code objects and launches on the CUDA backend, through the driver
// interface's dispatch table (lib/abi does not load CUDA code objects yet),
// on the driver API test double: PTX loads with its entries, a broken PTX
// fails with the JIT log in the message, and a launch passes the kernel
// ABI's CUDA parameters (docs/kernel-abi.md) in order. The double runs a
// host function registered for the PTX entry in place of the kernel; this
// checks our use of the driver API, not NVIDIA's driver or a GPU.
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "core/driver_dispatch.h"
#include "core/runtime_impl.h"
#include "stream/stream_impl.h"

// y[i] = a * x[i] + y[i] over float arrays, with the ABI's parameters:
// two bindings (x, y), their two lengths, no workspace, constants {a}.
static const char k_ptx[] =
    ".version 8.0\n"
    ".target sm_90\n"
    ".address_size 64\n"
    ".visible .entry axpy(\n"
    "  .param .u64 x, .param .u64 y,\n"
    "  .param .u64 x_len, .param .u64 y_len,\n"
    "  .param .align 16 .b8 constants[16]\n"
    ") { ret; }\n";

typedef struct axpy_constants {
  float a;
  uint8_t pad[12];
} axpy_constants_t;

static uint64_t g_seen_lengths[2];

static void axpy_host(void **params, const unsigned grid[3],
                      const unsigned block[3]) {
  float *x = (float *)(uintptr_t)*(uint64_t *)params[0];
  float *y = (float *)(uintptr_t)*(uint64_t *)params[1];
  uint64_t nx = *(uint64_t *)params[2], ny = *(uint64_t *)params[3];
  const axpy_constants_t *c = params[4];
  g_seen_lengths[0] = nx;
  g_seen_lengths[1] = ny;
  uint64_t threads = (uint64_t)grid[0] * block[0];
  for (uint64_t i = 0; i < threads && (i + 1) * 4 <= ny; ++i) {
    y[i] = c->a * x[i] + y[i];
  }
}

typedef void (*register_fn)(const char *, void (*)(void **, const unsigned *,
                                                   const unsigned *),
                            const size_t *, uint32_t);

static const accel_drv_dispatch_ops_t *dispatch_of(accel_device_t *dev) {
  const accel_drv_dispatch_ops_t *d = dev->driver->dispatch;
  assert_non_null(d);
  assert_non_null(d->module_load);
  return d;
}

// A launch of a loaded PTX kernel computes what the reference computes, with
// the bindings' lengths and the constants where the ABI puts them.
static void test_cuda_ptx_kernel_launch_matches_reference(void **state) {
  test_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  const char *path = getenv("ACCEL_CUDA_LIBRARY");
  void *lib = path != NULL ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  register_fn reg =
      lib != NULL ? (register_fn)dlsym(lib, "cuda_double_register_kernel")
                  : NULL;
  if (reg == NULL) {
    // NVIDIA's driver: this PTX's body is empty; the real kernels come with
    // kernels/cuda.
    if (lib != NULL) {
      dlclose(lib);
    }
    skip();
  }
  const size_t sizes[] = {8, 8, 8, 8, sizeof(axpy_constants_t)};
  reg("axpy", axpy_host, sizes, 5);

  const accel_drv_dispatch_ops_t *d = dispatch_of(env->device);
  accel_drv_module_t *module = NULL;
  assert_accel_ok(d->module_load(env->device->drv, k_ptx, strlen(k_ptx),
                                 &module));
  accel_drv_kernel_t *kernel = NULL;
  assert_accel_ok(d->kernel_get(module, "axpy", &kernel));

  enum { N = 4096 };
  float x[N], y[N], ref[N];
  for (int i = 0; i < N; ++i) {
    x[i] = (float)(test_rng_next(&rng) % 1000) / 8.0f;
    y[i] = (float)(test_rng_next(&rng) % 1000) / 16.0f;
  }
  axpy_constants_t c = {.a = 1.5f};
  for (int i = 0; i < N; ++i) {
    ref[i] = c.a * x[i] + y[i];
  }
  accel_buffer_desc_t bd = {.struct_size = sizeof(bd), .size_bytes = N * 4};
  accel_buffer_t *bx = NULL, *by = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &bd, &bx));
  assert_accel_ok(accel_buffer_alloc(env->device, &bd, &by));
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  assert_accel_ok(accel_stream_copy_from_host(s, bx, 0, x, sizeof(x)));
  assert_accel_ok(accel_stream_copy_from_host(s, by, 0, y, sizeof(y)));
  uint64_t addrs[2] = {accel_buffer_address(bx), accel_buffer_address(by)};
  uint64_t lens[2] = {N * 4, N * 4};
  accel_drv_launch_t l = {.grid = {N / 128, 1, 1}, .block = {128, 1, 1},
                          .binding_count = 2, .binding_addresses = addrs,
                          .binding_lengths = lens, .constants = &c,
                          .constants_size = sizeof(c)};
  accel_buffer_retain(bx);
  accel_buffer_retain(by);
  uint64_t seq = 0;
  assert_accel_ok(d->kernel_launch(s->queue, kernel, &l,
                                   (accel_object_t *)bx, (accel_object_t *)by,
                                   &seq));
  assert_true(seq > 0);
  float out[N];
  assert_accel_ok(accel_stream_copy_to_host(s, out, by, 0, sizeof(out)));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_memory_equal(out, ref, sizeof(ref));
  assert_int_equal(g_seen_lengths[0], N * 4);
  assert_int_equal(g_seen_lengths[1], N * 4);

  // Not in the code object: NOT_FOUND naming it.
  accel_drv_kernel_t *missing = NULL;
  assert_accel_status(d->kernel_get(module, "gemm", &missing),
                      ACCEL_ERROR_NOT_FOUND);
  assert_non_null(strstr(accel_last_error(), "gemm"));
  accel_stream_destroy(s);
  free(kernel);
  d->module_unload(module);
  accel_buffer_release(bx);
  accel_buffer_release(by);
  dlclose(lib);
}

// PTX the JIT refuses fails with ACCEL_ERROR_FORMAT and the JIT's log.
static void test_cuda_bad_ptx_fails_with_the_jit_log(void **state) {
  test_env_t *env = *state;
  const accel_drv_dispatch_ops_t *d = dispatch_of(env->device);
  static const char bad[] = ".entry broken( ) { ret; }";
  accel_drv_module_t *module = NULL;
  assert_accel_status(d->module_load(env->device->drv, bad, sizeof(bad) - 1,
                                     &module),
                      ACCEL_ERROR_FORMAT);
  assert_null(module);
  assert_non_null(strstr(accel_last_error(), "JIT log"));
  assert_non_null(strstr(accel_last_error(), ".version"));
  assert_non_null(strstr(accel_last_error(), "CUDA_ERROR_INVALID_PTX"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cuda_ptx_kernel_launch_matches_reference),
      cmocka_unit_test(test_cuda_bad_ptx_fails_with_the_jit_log),
  };
  return cmocka_run_group_tests(tests, test_env_setup, test_env_teardown);
}
