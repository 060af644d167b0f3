// The CUDA reference kernels' PTX (kernels/cuda, built by nvcc) through the
// CUDA backend: loaded with the backend's module_load (cuLibraryLoadData),
// launched with its kernel_launch (cuLaunchKernel, the parameter layout of
// docs/kernel-abi.md), on device memory; the results are compared bit for
// bit with the host kernels (kernels/host) on the same inputs.
//
// On the driver API test double (ACCEL_CUDA_LIBRARY), each kernel's launch
// runs its emulator build (tests/cuda_kernels, registered with
// cuda_double_register_kernel): this checks the PTX's entry points and
// parameter lists against the kernels' signatures, and the backend's
// parameter packing, not NVIDIA's driver. On a GPU (scripts/gpu-check.sh)
// the same test runs the real PTX, JIT-compiled by the driver.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/accel.h"
#include "attention_params.h"
#include "core/driver_dispatch.h"
#include "core/runtime_impl.h"
#include "kernel_params.h"
#include "kernel_runner.h"
#include "simt_emulator.h"
#include "stream/stream_impl.h"
#include "test_support.h"

typedef void (*register_fn)(const char *, void (*)(void **, const unsigned *,
                                                   const unsigned *),
                            const size_t *, uint32_t);

typedef struct fixture {
  test_env_t *env;
  const accel_drv_dispatch_ops_t *ops;
  accel_drv_module_t *module;
  kernel_lib_t *host;
  void *double_lib;
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof(*f));
  if (f == NULL || test_env_setup((void **)&f->env) != 0) {
    free(f);
    return -1;
  }
  if (strncmp(f->env->device->info.id, "cuda:", 5) != 0) {
    fprintf(stderr, "device 0 is %s, not a CUDA device\n",
            f->env->device->info.id);
    return -1;
  }
  // The double: every reference kernel runs on the emulator.
  const char *path = getenv("ACCEL_CUDA_LIBRARY");
  f->double_lib = path != NULL ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  register_fn reg = f->double_lib != NULL
                        ? (register_fn)dlsym(f->double_lib,
                                             "cuda_double_register_kernel")
                        : NULL;
  if (reg != NULL) {
    size_t n;
    const accel_simt_kernel_t *all = accel_simt_kernels(&n);
    for (size_t i = 0; i < n; ++i) {
      reg(all[i].name, all[i].launch, all[i].param_sizes, all[i].param_count);
    }
  }
  f->ops = f->env->device->driver->dispatch;
  uint64_t size = 0;
  const char *ptx = getenv("ACCEL_TEST_CUDA_PTX");
  void *image = ptx != NULL ? test_read_file(ptx, &size) : NULL;
  if (image == NULL || f->ops == NULL || f->ops->module_load == NULL ||
      f->ops->module_load(f->env->device->drv, image, size, &f->module) !=
          ACCEL_OK) {
    fprintf(stderr, "cannot load %s: %s\n", ptx ? ptx : "(ACCEL_TEST_CUDA_PTX unset)",
            accel_last_error());
    free(image);
    return -1;
  }
  free(image);
  f->host = kernel_lib_open(getenv("ACCEL_TEST_KERNELS"));
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  f->ops->module_unload(f->module);
  kernel_lib_close(f->host);
  test_env_teardown((void **)&f->env);
  if (f->double_lib != NULL) dlclose(f->double_lib);
  free(f);
  return 0;
}

// Runs kernel |name| with |count| bindings (|data| in, |bytes| each) and
// |constants| on the CUDA device and on the host kernels with |groups|
// blocks / work-groups, and requires the same bytes in every binding.
static void run_both(fixture_t *f, const char *name, uint32_t count,
                     void *const data[], const uint64_t bytes[],
                     const void *constants, uint32_t constants_size,
                     uint32_t groups) {
  accel_device_t *dev = f->env->device;
  accel_drv_kernel_t *kernel = NULL;
  assert_accel_ok(f->ops->kernel_get(f->module, name, &kernel));
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(dev, NULL, &s));
  accel_buffer_t *buf[8];
  uint64_t addrs[8];
  for (uint32_t i = 0; i < count; ++i) {
    accel_buffer_desc_t bd = {.struct_size = sizeof(bd),
                              .size_bytes = bytes[i]};
    assert_accel_ok(accel_buffer_alloc(dev, &bd, &buf[i]));
    assert_accel_ok(accel_stream_copy_from_host(s, buf[i], 0, data[i], bytes[i]));
    addrs[i] = accel_buffer_address(buf[i]);
  }
  accel_drv_launch_t l = {.grid = {groups, 1, 1}, .block = {128, 1, 1},
                          .binding_count = count, .binding_addresses = addrs,
                          .binding_lengths = bytes, .constants = constants,
                          .constants_size = constants_size};
  uint64_t seq = 0;
  assert_accel_ok(f->ops->kernel_launch(s->queue, kernel, &l, NULL, NULL, &seq));
  void *got[8];
  for (uint32_t i = 0; i < count; ++i) {
    got[i] = malloc(bytes[i]);
    assert_non_null(got[i]);
    assert_accel_ok(accel_stream_copy_to_host(s, got[i], buf[i], 0, bytes[i]));
  }
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  // The host kernel on the same inputs.
  kernel_launch_t hl = {.fn = kernel_lib_find(f->host, name),
                        .grid = {groups, 1, 1},
                        .binding_count = count,
                        .constants = constants,
                        .constants_size = constants_size,
                        .threads = 2,
                        .order_seed = 3};
  for (uint32_t i = 0; i < count; ++i) {
    hl.bindings[i] = (accel_kernel_binding_t){
        .data = data[i],
        .size_bytes = bytes[i],
        .access = ACCEL_KERNEL_ACCESS_READ | ACCEL_KERNEL_ACCESS_WRITE};
  }
  char message[512];
  assert_int_equal(kernel_run(&hl, message, sizeof(message)), 0);
  for (uint32_t i = 0; i < count; ++i) {
    if (memcmp(got[i], data[i], bytes[i]) != 0) {
      fail_msg("%s: binding %u differs from the host kernel's", name, i);
    }
    free(got[i]);
    accel_buffer_release(buf[i]);
  }
  accel_stream_destroy(s);
  free(kernel);
}

static float *random_floats(test_rng_t *rng, uint64_t n) {
  float *p = malloc(n * sizeof(float));
  assert_non_null(p);
  for (uint64_t i = 0; i < n; ++i) {
    p[i] = (float)((double)(test_rng_next(rng) >> 40) / 16777216.0 * 4.0 - 2.0);
  }
  return p;
}

// softmax and rmsnorm: the fixed 16-lane sums, bit for bit.
static void test_cuda_row_kernels_match_host_bits(void **state) {
  fixture_t *f = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  const uint32_t rows = 9, cols = 300;
  float *x = random_floats(&rng, rows * cols);
  float *y = calloc(rows * cols, sizeof(float));
  float *gamma = random_floats(&rng, cols);
  accel_kp_softmax_constants_t sc = {.rows = rows, .cols = cols, .scale = 0.7f};
  uint64_t mat = 4ull * rows * cols;
  run_both(f, "softmax", 2, (void *[]){x, y}, (uint64_t[]){mat, mat}, &sc,
           sizeof(sc), 4);
  accel_kp_norm_constants_t nc = {.rows = rows, .cols = cols, .eps = 1e-6f};
  run_both(f, "rmsnorm", 3, (void *[]){x, gamma, y},
           (uint64_t[]){mat, 4ull * cols, mat}, &nc, sizeof(nc), 3);
  free(x);
  free(y);
  free(gamma);
}

// Q8_0 GEMV (decode shape) and paged decode attention, bit for bit.
static void test_cuda_decode_kernels_match_host_bits(void **state) {
  fixture_t *f = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  const uint32_t n = 200, k = 256;
  float *x = random_floats(&rng, k);
  float *y = calloc(n, sizeof(float));
  uint8_t *w = malloc((size_t)n * (k / 32) * 34);
  assert_non_null(w);
  for (size_t i = 0; i < (size_t)n * (k / 32); ++i) {
    uint16_t d = (uint16_t)(0x2000 + test_rng_range(&rng, 0, 0x1000));
    memcpy(w + i * 34, &d, 2);
    for (int j = 0; j < 32; ++j) w[i * 34 + 2 + j] = (uint8_t)test_rng_next(&rng);
  }
  accel_kp_qmatmul_constants_t qc = {.m = 1, .n = n, .k = k};
  run_both(f, "qmatmul_q8_0", 3, (void *[]){x, w, y},
           (uint64_t[]){4ull * k, (uint64_t)n * (k / 32) * 34, 4ull * n}, &qc,
           sizeof(qc), 2);
  // Paged decode: 2 sequences, GQA 4:2, head_dim 64, blocks of 16.
  const uint32_t S = 2, H = 4, KVH = 2, hd = 64, bs = 16, nb = 12, mbps = 6;
  float *q = random_floats(&rng, S * H * hd);
  float *kc = random_floats(&rng, nb * bs * KVH * hd);
  float *vc = random_floats(&rng, nb * bs * KVH * hd);
  float *out = calloc(S * H * hd, sizeof(float));
  uint32_t table[2 * 6] = {3, 7, 1, 0, 9, 11, 2, 4, 6, 8, 10, 5};
  uint32_t lens[2] = {85, 40};
  accel_kp_attn_paged_constants_t pc = {.num_seqs = S, .n_heads = H,
                                        .n_kv_heads = KVH, .head_dim = hd,
                                        .block_size = bs, .num_blocks = nb,
                                        .max_blocks_per_seq = mbps,
                                        .scale = 0.125f};
  uint64_t cache = 4ull * nb * bs * KVH * hd;
  run_both(f, "attention_paged_decode", 6, (void *[]){q, kc, vc, table, lens, out},
           (uint64_t[]){4ull * S * H * hd, cache, cache, sizeof(table),
                        sizeof(lens), 4ull * S * H * hd},
           &pc, sizeof(pc), 3);
  free(x);
  free(y);
  free(w);
  free(q);
  free(kc);
  free(vc);
  free(out);
}

// reference.axe loaded on the CUDA device; skips the test where it is not
// built or has no code object for the device.
static accel_executable_t *load_reference_axe(fixture_t *f) {
  const char *path = getenv("ACCEL_TEST_REFERENCE_AXE");
  if (path == NULL) {
    skip();
  }
  accel_executable_t *exe = NULL;
  accel_status_t st =
      accel_executable_load_file(f->env->runtime, f->env->device, path, 0, &exe);
  if (st == ACCEL_ERROR_UNSUPPORTED &&
      strstr(accel_last_error(), "no code object for target") != NULL) {
    fprintf(stderr, "skipped: %s\n", accel_last_error());
    skip();
  }
  assert_accel_ok(st);
  return exe;
}

// reference.axe on the CUDA device: the loader hands the cuda-sm_XX code
// object to the backend, and accel_launch runs rmsnorm and attention decode
// through it with the kernel record's block; the bits are the host's.
static void test_cuda_reference_axe_loads_and_launches(void **state) {
  fixture_t *f = *state;
  accel_executable_t *exe = load_reference_axe(f);
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  const uint32_t rows = 7, cols = 130;
  float *x = random_floats(&rng, rows * cols);
  float *gamma = random_floats(&rng, cols);
  float *y = calloc(rows * cols, sizeof(float));
  accel_kp_norm_constants_t nc = {.rows = rows, .cols = cols, .eps = 1e-5f};
  void *data[3] = {x, gamma, y};
  const uint64_t bytes[3] = {4ull * rows * cols, 4ull * cols, 4ull * rows * cols};
  accel_kernel_t *kernel = NULL;
  assert_accel_ok(accel_executable_kernel(exe, "rmsnorm", &kernel));
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(f->env->device, NULL, &s));
  accel_buffer_t *buf[3];
  accel_launch_binding_t bind[3];
  for (int i = 0; i < 3; ++i) {
    accel_buffer_desc_t bd = {.struct_size = sizeof(bd), .size_bytes = bytes[i]};
    assert_accel_ok(accel_buffer_alloc(f->env->device, &bd, &buf[i]));
    assert_accel_ok(accel_stream_copy_from_host(s, buf[i], 0, data[i], bytes[i]));
    bind[i] = (accel_launch_binding_t){.buffer = buf[i]};
  }
  accel_launch_desc_t desc = {.struct_size = sizeof(desc),
                              .workgroup_count = {3, 1, 1},
                              .binding_count = 3,
                              .bindings = bind,
                              .constants_size = sizeof(nc),
                              .constants = &nc};
  assert_accel_ok(accel_launch(s, kernel, &desc));
  // A launch the record refuses: the runtime's checks run first.
  desc.binding_count = 2;
  assert_accel_status(accel_launch(s, kernel, &desc),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  float *got = malloc(bytes[2]);
  assert_non_null(got);
  assert_accel_ok(accel_stream_copy_to_host(s, got, buf[2], 0, bytes[2]));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  kernel_launch_t hl = {.fn = kernel_lib_find(f->host, "rmsnorm"),
                        .grid = {2, 1, 1},
                        .binding_count = 3,
                        .constants = &nc,
                        .constants_size = sizeof(nc),
                        .threads = 1};
  for (int i = 0; i < 3; ++i) {
    hl.bindings[i] = (accel_kernel_binding_t){
        .data = data[i], .size_bytes = bytes[i],
        .access = ACCEL_KERNEL_ACCESS_READ | ACCEL_KERNEL_ACCESS_WRITE};
  }
  char message[256];
  assert_int_equal(kernel_run(&hl, message, sizeof(message)), 0);
  assert_memory_equal(got, y, bytes[2]);
  accel_stream_destroy(s);
  for (int i = 0; i < 3; ++i) accel_buffer_release(buf[i]);
  accel_executable_release(exe);
  free(got);
  free(x);
  free(gamma);
  free(y);
}

static accel_status_t count_call(void *user_data) {
  ++*(uint32_t *)user_data;
  return ACCEL_OK;
}

// A command buffer of reference.axe's CUDA rmsnorm on the CUDA device (a
// CUDA graph: kernel, memset, memcpy, host and mem-op nodes), executed with
// two binding tables and per-execute constants, then the first table again:
// each output is the host kernel's, bit for bit; an 8-byte fill pattern
// lands in the slot of each execute.
static void test_cuda_command_buffer_of_reference_kernels_matches_host(
    void **state) {
  fixture_t *f = *state;
  accel_executable_t *exe = load_reference_axe(f);
  accel_device_t *dev = f->env->device;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  enum { ROWS = 7, COLS = 130, EXECUTES = 3 };
  const uint64_t xbytes = 4ull * ROWS * COLS, fbytes = 8 * 64;
  float *gamma = random_floats(&rng, COLS);
  float *x[2] = {random_floats(&rng, ROWS * COLS),
                 random_floats(&rng, ROWS * COLS)};
  accel_kp_norm_constants_t nc[2] = {
      {.rows = ROWS, .cols = COLS, .eps = 1e-5f},
      {.rows = ROWS, .cols = COLS, .eps = 0.25f}};
  accel_kernel_t *kernel = NULL;
  assert_accel_ok(accel_executable_kernel(exe, "rmsnorm", &kernel));
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(dev, NULL, &s));
  accel_buffer_t *bx[2], *by[2], *bf[2], *bg = NULL;
  accel_buffer_desc_t bd = {.struct_size = sizeof(bd), .size_bytes = xbytes};
  for (int t = 0; t < 2; ++t) {
    assert_accel_ok(accel_buffer_alloc(dev, &bd, &bx[t]));
    assert_accel_ok(accel_buffer_alloc(dev, &bd, &by[t]));
    assert_accel_ok(accel_stream_copy_from_host(s, bx[t], 0, x[t], xbytes));
  }
  bd.size_bytes = fbytes;
  for (int t = 0; t < 2; ++t) {
    assert_accel_ok(accel_buffer_alloc(dev, &bd, &bf[t]));
  }
  bd.size_bytes = 4 * COLS;
  assert_accel_ok(accel_buffer_alloc(dev, &bd, &bg));
  assert_accel_ok(accel_stream_copy_from_host(s, bg, 0, gamma, 4 * COLS));

  // Slots: 0 x, 1 y (to the slot's end), 2 the filled buffer.
  uint32_t calls = 0;
  accel_command_buffer_t *cb = NULL;
  accel_command_buffer_desc_t cd = {.struct_size = sizeof(cd),
                                    .name = "rmsnorm-graph"};
  assert_accel_ok(accel_command_buffer_create(dev, &cd, &cb));
  accel_command_buffer_ref_t rx = {.slot = 0}, ry = {.slot = 1},
                             rf = {.slot = 2}, rg = {.buffer = bg};
  const uint64_t pattern = 0x0123456789abcdefull;
  assert_accel_ok(accel_command_buffer_fill(cb, &rf, fbytes, pattern, 8));
  assert_accel_ok(accel_command_buffer_fill(cb, &ry, xbytes, 0, 4));
  accel_command_buffer_ref_t bind[3] = {rx, rg, ry};
  accel_command_buffer_launch_desc_t ld = {
      .struct_size = sizeof(ld),
      .workgroup_count = {3, 1, 1},
      .binding_count = 3,
      .bindings = bind,
      .constants_size = sizeof(accel_kp_norm_constants_t),
      .flags = ACCEL_COMMAND_BUFFER_LAUNCH_CONSTANTS_FROM_EXECUTE};
  assert_accel_ok(accel_command_buffer_launch(cb, kernel, &ld));
  assert_accel_ok(accel_command_buffer_host_call(cb, count_call, &calls));
  assert_accel_ok(accel_command_buffer_finalize(cb));

  const int table_of[EXECUTES] = {0, 1, 0};
  float *got = malloc(xbytes), *want = calloc(ROWS * COLS, sizeof(float));
  uint64_t filled[64];
  assert_non_null(got);
  for (int e = 0; e < EXECUTES; ++e) {
    int t = table_of[e];
    accel_command_buffer_binding_t table[3] = {
        {.buffer = bx[t]}, {.buffer = by[t]}, {.buffer = bf[t]}};
    accel_command_buffer_execute_desc_t ed = {.struct_size = sizeof(ed),
                                              .binding_count = 3,
                                              .bindings = table,
                                              .constants = &nc[t],
                                              .constants_size = sizeof(nc[t])};
    assert_accel_ok(accel_stream_execute(s, cb, &ed));
    assert_accel_ok(accel_stream_copy_to_host(s, got, by[t], 0, xbytes));
    assert_accel_ok(accel_stream_copy_to_host(s, filled, bf[t], 0, fbytes));
    assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    assert_int_equal(calls, e + 1);
    for (int i = 0; i < 64; ++i) {
      assert_true(filled[i] == pattern);
    }
    void *data[3] = {x[t], gamma, want};
    const uint64_t bytes[3] = {xbytes, 4 * COLS, xbytes};
    kernel_launch_t hl = {.fn = kernel_lib_find(f->host, "rmsnorm"),
                          .grid = {2, 1, 1},
                          .binding_count = 3,
                          .constants = &nc[t],
                          .constants_size = sizeof(nc[t]),
                          .threads = 1};
    for (int i = 0; i < 3; ++i) {
      hl.bindings[i] = (accel_kernel_binding_t){
          .data = data[i], .size_bytes = bytes[i],
          .access = ACCEL_KERNEL_ACCESS_READ | ACCEL_KERNEL_ACCESS_WRITE};
    }
    char message[256];
    assert_int_equal(kernel_run(&hl, message, sizeof(message)), 0);
    assert_memory_equal(got, want, xbytes);
  }
  accel_command_buffer_release(cb);
  accel_stream_destroy(s);
  for (int t = 0; t < 2; ++t) {
    accel_buffer_release(bx[t]);
    accel_buffer_release(by[t]);
    accel_buffer_release(bf[t]);
    free(x[t]);
  }
  accel_buffer_release(bg);
  accel_executable_release(exe);
  free(gamma);
  free(got);
  free(want);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cuda_row_kernels_match_host_bits),
      cmocka_unit_test(test_cuda_decode_kernels_match_host_bits),
      cmocka_unit_test(test_cuda_reference_axe_loads_and_launches),
      cmocka_unit_test(
          test_cuda_command_buffer_of_reference_kernels_matches_host),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
