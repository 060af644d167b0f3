// The CUDA backend's own behaviour, through the public API, on the driver
// API test double (tests/cuda/double, loaded through ACCEL_CUDA_LIBRARY;
// ACCEL_VISIBLE_DEVICES=cuda:0 makes it device 0). Device memory is not
// host-visible, so every check reads data back through copies and compares
// it with a reference computed here. These tests check accel's use of the
// driver API, not NVIDIA's driver (scripts/gpu-check.sh runs them on a GPU).
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test_support.h"

// True when the CUDA library is the test double (it exports its test hooks);
// scripts/gpu-check.sh runs these tests on NVIDIA's driver too, where the
// checks of the double's own properties and fault injection do not apply.
static void *double_hook(const char *name) {
  const char *path = getenv("ACCEL_CUDA_LIBRARY");
  void *lib = path != NULL ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  void *fn = lib != NULL ? dlsym(lib, name) : NULL;
  if (lib != NULL) {
    dlclose(lib);  // NOLOAD took a reference; the backend holds its own
  }
  return fn;
}

static accel_stream_t *make_stream(test_env_t *env) {
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  return s;
}

static accel_buffer_t *make_buffer(test_env_t *env, uint64_t size,
                                   accel_mempool_t *pool) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = size,
                           .pool = pool};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  return b;
}

static void fill_random(test_rng_t *rng, uint8_t *p, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    p[i] = (uint8_t)test_rng_next(rng);
  }
}

// The device reports what the driver says: an sm target, the allocation
// granularity as its page size, the PCI bus id, no host visibility.
static void test_cuda_device_info_comes_from_the_driver(void **state) {
  test_env_t *env = *state;
  accel_device_info_t info = {.struct_size = sizeof(info)};
  assert_accel_ok(accel_device_info(env->device, &info));
  assert_string_equal(info.backend, "cuda");
  assert_string_equal(info.id, "cuda:0");
  assert_true(strncmp(info.target, "cuda-sm_", 8) == 0);
  assert_true(info.page_size >= 4096 &&
              (info.page_size & (info.page_size - 1)) == 0);
  assert_true(strlen(info.pci_bus_id) == 12);
  if (double_hook("cuda_double_inject_fault") != NULL) {
    // What the double reports for its first device.
    assert_string_equal(info.target, "cuda-sm_90");
    assert_int_equal(info.page_size, 2u << 20);
    assert_string_equal(info.pci_bus_id, "0000:10:00.0");
  }
  assert_true((info.caps & ACCEL_DEVICE_CAP_HOST_VISIBLE) == 0);
  assert_true((info.caps & ACCEL_DEVICE_CAP_VIRTUAL_MEMORY) != 0);
  accel_buffer_t *b = make_buffer(env, 64, NULL);
  void *p = NULL;
  assert_accel_status(accel_buffer_host_pointer(b, &p),
                      ACCEL_ERROR_UNSUPPORTED);
  accel_buffer_release(b);
}

// Buffers from the slab, the paged pool and a stream-ordered pool hold
// random data through host -> device -> device -> host copies, and live
// buffers never overlap.
static void test_cuda_allocators_keep_random_data(void **state) {
  test_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  enum { N = 48 };
  accel_mempool_t *paged = NULL;
  accel_mempool_desc_t pd = {.struct_size = sizeof(pd),
                             .type = ACCEL_MEMPOOL_TYPE_PAGED};
  assert_accel_ok(accel_mempool_create(env->device, &pd, &paged));
  accel_stream_t *s = make_stream(env);
  accel_buffer_t *bufs[N];
  uint8_t *data[N];
  uint64_t sizes[N];
  for (int i = 0; i < N; ++i) {
    // Small (slab), medium (device's paged pool), pool-chosen.
    sizes[i] = i % 3 == 0   ? test_rng_range(&rng, 1, 4096)
               : i % 3 == 1 ? test_rng_range(&rng, 65537, 3 << 20)
                            : test_rng_range(&rng, 1, 1 << 20);
    bufs[i] = make_buffer(env, sizes[i], i % 3 == 2 ? paged : NULL);
    data[i] = malloc(sizes[i]);
    fill_random(&rng, data[i], sizes[i]);
    assert_accel_ok(
        accel_stream_copy_from_host(s, bufs[i], 0, data[i], sizes[i]));
  }
  for (int i = 0; i < N; ++i) {
    for (int j = 0; j < i; ++j) {
      uint64_t a = accel_buffer_address(bufs[i]),
               b = accel_buffer_address(bufs[j]);
      assert_true(a + sizes[i] <= b || b + sizes[j] <= a);
    }
  }
  // Device-to-device into a twin, then back to the host.
  for (int i = 0; i < N; ++i) {
    accel_buffer_t *twin = make_buffer(env, sizes[i], NULL);
    assert_accel_ok(accel_stream_copy(s, twin, 0, bufs[i], 0, sizes[i]));
    uint8_t *out = malloc(sizes[i]);
    assert_accel_ok(accel_stream_copy_to_host(s, out, twin, 0, sizes[i]));
    assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    assert_memory_equal(out, data[i], sizes[i]);
    free(out);
    accel_buffer_release(twin);
  }
  for (int i = 0; i < N; ++i) {
    accel_buffer_release(bufs[i]);
    free(data[i]);
  }
  accel_stream_destroy(s);
  assert_accel_ok(accel_mempool_destroy(paged));
}

static void assert_reads_zero(accel_stream_t *s, accel_buffer_t *b,
                              uint64_t size) {
  uint8_t *out = malloc(size);
  memset(out, 0xee, size);
  assert_accel_ok(accel_stream_copy_to_host(s, out, b, 0, size));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  for (uint64_t i = 0; i < size; ++i) {
    assert_int_equal(out[i], 0);
  }
  free(out);
}

// Fresh device memory reads as zeroes (cuMemCreate does not promise it; the
// double fills it with garbage), and so does reused memory allocated with
// ACCEL_BUFFER_FLAG_ZERO (zeroed by the device, as it is not host-visible).
static void test_cuda_fresh_and_zero_flag_memory_reads_zero(void **state) {
  test_env_t *env = *state;
  enum { SIZE = 4 << 20 };
  accel_mempool_t *pool = NULL;
  accel_mempool_desc_t pd = {.struct_size = sizeof(pd),
                             .type = ACCEL_MEMPOOL_TYPE_PAGED};
  assert_accel_ok(accel_mempool_create(env->device, &pd, &pool));
  accel_stream_t *s = make_stream(env);
  accel_buffer_t *b = make_buffer(env, SIZE, pool);
  assert_reads_zero(s, b, SIZE);
  assert_accel_ok(accel_stream_fill(s, b, 0, SIZE, 0x5a, 1));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  accel_buffer_release(b);
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = SIZE,
                           .flags = ACCEL_BUFFER_FLAG_ZERO, .pool = pool};
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  assert_reads_zero(s, b, SIZE);
  accel_buffer_release(b);
  accel_stream_destroy(s);
  assert_accel_ok(accel_mempool_destroy(pool));
}

// Reads |b| back after the work on |s|, compares it with |ref|, and frees
// all three and the stream.
static void finish_against_reference(accel_stream_t *s, accel_buffer_t *b,
                                     uint8_t *ref, uint64_t size) {
  uint8_t *out = malloc(size);
  assert_accel_ok(accel_stream_copy_to_host(s, out, b, 0, size));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_memory_equal(out, ref, size);
  free(ref);
  free(out);
  accel_buffer_release(b);
  accel_stream_destroy(s);
}

// Fills of every pattern size at random offsets leave what the reference
// leaves.
static void test_cuda_fills_match_reference(void **state) {
  test_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  enum { SIZE = 1 << 16 };
  accel_stream_t *s = make_stream(env);
  accel_buffer_t *b = make_buffer(env, SIZE, NULL);
  uint8_t *ref = calloc(1, SIZE);
  assert_accel_ok(accel_stream_fill(s, b, 0, SIZE, 0, 1));
  for (int round = 0; round < 200; ++round) {
    static const uint32_t k_sizes[] = {1, 2, 4, 8};
    uint32_t ps = k_sizes[test_rng_next(&rng) % 4];
    uint64_t off = test_rng_range(&rng, 0, SIZE / ps - 1) * ps;
    uint64_t len = test_rng_range(&rng, 1, (SIZE - off) / ps) * ps;
    uint64_t pattern = test_rng_next(&rng);
    if (round % 5 == 0) {
      pattern = 0x0101010101010101ull * (pattern & 0xff);  // reducible
    }
    if (ps < 8) {
      pattern &= (1ull << (8 * ps)) - 1;
    }
    assert_accel_ok(accel_stream_fill(s, b, off, len, pattern, ps));
    for (uint64_t i = 0; i < len; i += ps) {
      memcpy(ref + off + i, &pattern, ps);  // little-endian pattern
    }
  }
  finish_against_reference(s, b, ref, SIZE);
}

// Overlapping copies within one buffer move data as memmove does, in both
// directions and for shifts smaller and larger than the copy.
static void test_cuda_overlapping_copy_is_memmove(void **state) {
  test_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  enum { SIZE = 1 << 16 };
  accel_stream_t *s = make_stream(env);
  accel_buffer_t *b = make_buffer(env, SIZE, NULL);
  uint8_t *ref = malloc(SIZE);
  fill_random(&rng, ref, SIZE);
  assert_accel_ok(accel_stream_copy_from_host(s, b, 0, ref, SIZE));
  // The source stays unchanged until the copy completed (stream.h).
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  for (int round = 0; round < 40; ++round) {
    uint64_t len = test_rng_range(&rng, 1, SIZE / 2);
    uint64_t src = test_rng_range(&rng, 0, SIZE - len);
    uint64_t dst = test_rng_range(&rng, 0, SIZE - len);
    assert_accel_ok(accel_stream_copy(s, b, dst, b, src, len));
    memmove(ref + dst, ref + src, len);
  }
  finish_against_reference(s, b, ref, SIZE);
}

// DMA queues on the copy-engine streams: 1D, 2D and 3D copies between device
// buffers and pinned host memory, and fills, match the reference.
static void test_cuda_dma_copies_match_reference(void **state) {
  test_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  enum { SIZE = 1 << 20 };
  accel_dma_queue_t *q = NULL;
  accel_device_info_t info = {.struct_size = sizeof(info)};
  assert_accel_ok(accel_device_info(env->device, &info));
  if (info.copy_queue_count == 0) {
    // No copy engines (no stream memory operations to write back heads).
    assert_accel_status(accel_dma_queue_create(env->device, NULL, &q),
                        ACCEL_ERROR_UNSUPPORTED);
    return;
  }
  assert_accel_ok(accel_dma_queue_create(env->device, NULL, &q));
  accel_buffer_desc_t hd = {.struct_size = sizeof(hd),
                            .kind = ACCEL_MEMORY_KIND_HOST_PINNED,
                            .size_bytes = SIZE};
  accel_buffer_t *host = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &hd, &host));
  uint8_t *hp = NULL;
  assert_accel_ok(accel_buffer_host_pointer(host, (void **)&hp));
  accel_buffer_t *a = make_buffer(env, SIZE, NULL);
  accel_buffer_t *b = make_buffer(env, SIZE, NULL);
  uint8_t *ref = malloc(SIZE), *in = malloc(SIZE);
  fill_random(&rng, in, SIZE);
  memcpy(hp, in, SIZE);
  memset(ref, 0, SIZE);
  // 1D host -> a, then a 2D and a 3D block of a into b, a fill of b.
  assert_accel_ok(accel_dma_copy(q, a, 0, host, 0, SIZE));
  uint64_t w = test_rng_range(&rng, 1, 512), h = test_rng_range(&rng, 1, 64);
  uint64_t sp = w + test_rng_range(&rng, 0, 256), dp = w +
                test_rng_range(&rng, 0, 256);
  assert_accel_ok(accel_dma_copy_2d(q, b, 0, dp, a, 0, sp, w, h));
  for (uint64_t y = 0; y < h; ++y) {
    memcpy(ref + y * dp, in + y * sp, w);
  }
  uint64_t d3 = 3, base = 1 << 18;
  accel_dma_desc_t d = {
      .struct_size = sizeof(d), .op = ACCEL_DMA_OP_COPY_3D,
      .dst = {.buffer = b, .offset = base}, .src = {.buffer = a, .offset = 0},
      .width_bytes = w, .height = h, .depth = d3, .dst_pitch = dp,
      .src_pitch = sp, .dst_slice_pitch = dp * h + 8,  // not whole rows
      .src_slice_pitch = sp * h};
  assert_accel_ok(accel_dma_submit(q, &d, 1, 0, NULL, NULL, 0, NULL, NULL));
  for (uint64_t z = 0; z < d3; ++z) {
    for (uint64_t y = 0; y < h; ++y) {
      memcpy(ref + base + z * (dp * h + 8) + y * dp,
             in + z * sp * h + y * sp, w);
    }
  }
  accel_dma_desc_t f = {.struct_size = sizeof(f), .op = ACCEL_DMA_OP_FILL,
                        .dst = {.buffer = b, .offset = SIZE - 4096},
                        .width_bytes = 4096, .pattern = 0xa1b2c3d4e5f60718ull,
                        .pattern_size = 8};
  assert_accel_ok(accel_dma_submit(q, &f, 1, 0, NULL, NULL, 0, NULL, NULL));
  for (uint64_t i = 0; i < 4096; i += 8) {
    memcpy(ref + SIZE - 4096 + i, &f.pattern, 8);
  }
  assert_accel_ok(accel_dma_copy(q, host, 0, b, 0, SIZE));
  assert_accel_ok(accel_dma_queue_synchronize(q, ACCEL_TIMEOUT_INFINITE));
  assert_memory_equal(hp, ref, SIZE);
  accel_dma_queue_counters_t c = {.struct_size = sizeof(c)};
  assert_accel_ok(accel_dma_queue_counters(q, &c));
  assert_true(c.bytes_host_to_device >= SIZE);
  accel_dma_queue_destroy(q);
  accel_buffer_release(a);
  accel_buffer_release(b);
  accel_buffer_release(host);
  free(ref);
  free(in);
}

// Host memory registered with the device is copied to and from directly.
static void test_cuda_registered_host_memory_round_trips(void **state) {
  test_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  size_t size = 3 * (size_t)sysconf(_SC_PAGESIZE);
  uint8_t *mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(mem != MAP_FAILED);
  fill_random(&rng, mem, size);
  uint8_t *copy = malloc(size);
  memcpy(copy, mem, size);
  accel_buffer_t *reg = NULL;
  assert_accel_ok(accel_host_register(env->device, mem, size, &reg));
  accel_buffer_t *dev = make_buffer(env, size, NULL);
  accel_stream_t *s = make_stream(env);
  assert_accel_ok(accel_stream_copy(s, dev, 0, reg, 0, size));
  assert_accel_ok(accel_stream_fill(s, reg, 0, size, 0, 1));
  assert_accel_ok(accel_stream_copy(s, reg, 0, dev, 0, size));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_memory_equal(mem, copy, size);
  accel_stream_destroy(s);
  accel_buffer_release(dev);
  accel_buffer_release(reg);
  munmap(mem, size);
  free(copy);
}

// Memory exported as a POSIX fd imports on the device and shows the same
// bytes.
static void test_cuda_exported_memory_imports_with_its_data(void **state) {
  test_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  enum { SIZE = 2 << 20 };
  accel_device_info_t info = {.struct_size = sizeof(info)};
  assert_accel_ok(accel_device_info(env->device, &info));
  if ((info.caps & ACCEL_DEVICE_CAP_IPC) == 0) {
    skip();  // a GPU that cannot export POSIX file descriptors
  }
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = SIZE,
                           .flags = ACCEL_BUFFER_FLAG_EXPORTABLE};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  uint8_t *in = malloc(SIZE), *out = malloc(SIZE);
  fill_random(&rng, in, SIZE);
  accel_stream_t *s = make_stream(env);
  assert_accel_ok(accel_stream_copy_from_host(s, b, 0, in, SIZE));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  int fd = -1;
  assert_accel_ok(accel_buffer_export(b, &fd));
  accel_buffer_t *imp = NULL;
  assert_accel_ok(accel_buffer_import(env->device, fd, SIZE, 0, &imp));
  assert_accel_ok(accel_stream_copy_to_host(s, out, imp, 0, SIZE));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_memory_equal(in, out, SIZE);
  close(fd);
  accel_buffer_release(imp);
  accel_buffer_release(b);
  accel_stream_destroy(s);
  free(in);
  free(out);
}

// A host function may not call CUDA (the double refuses it): a host call
// that does so through accel fails its stream with the driver's error
// instead of corrupting it.
static accel_status_t alloc_inside_host_fn(void *user_data) {
  test_env_t *env = user_data;
  accel_buffer_t *b = NULL;
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 8 << 20};
  accel_status_t st = accel_buffer_alloc(env->device, &d, &b);
  if (st == ACCEL_OK) {
    accel_buffer_release(b);
  }
  return st;
}

static void test_cuda_host_function_cannot_call_the_driver(void **state) {
  test_env_t *env = *state;
  if (double_hook("cuda_double_inject_fault") == NULL) {
    // NVIDIA's driver documents the call as forbidden, not its outcome (it
    // may deadlock): only the double checks the rule.
    skip();
  }
  accel_stream_t *s = make_stream(env);
  assert_accel_ok(accel_stream_host_call(s, alloc_inside_host_fn, env));
  accel_status_t st = accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE);
  assert_int_not_equal(st, ACCEL_OK);
  assert_non_null(strstr(accel_last_error(), "CUDA_ERROR_NOT_PERMITTED"));
  accel_stream_destroy(s);
}

typedef void (*fail_call_fn)(const char *, CUresult);
typedef int (*fail_armed_fn)(void);

// The device works: a buffer takes and gives back random bytes.
static void assert_device_works(test_env_t *env) {
  uint8_t in[256], out[256];
  for (int i = 0; i < 256; ++i) {
    in[i] = (uint8_t)(i * 7 + 1);
  }
  accel_stream_t *s = make_stream(env);
  accel_buffer_t *b = make_buffer(env, sizeof(in), NULL);
  assert_accel_ok(accel_stream_copy_from_host(s, b, 0, in, sizeof(in)));
  assert_accel_ok(accel_stream_copy_to_host(s, out, b, 0, sizeof(out)));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_memory_equal(in, out, sizeof(in));
  accel_buffer_release(b);
  accel_stream_destroy(s);
}

static accel_status_t count_call(void *user_data) {
  (*(uint32_t *)user_data)++;
  return ACCEL_OK;
}

// Runs the accel call of case |i| while the driver call it makes fails.
static accel_status_t call_failing_case(test_env_t *env, int i,
                                        accel_stream_t **out_stream) {
  switch (i) {
    case 0:
    case 1:
    case 2: {
      // More than the device's page cache: fresh physical memory, mapped.
      accel_buffer_desc_t d = {.struct_size = sizeof(d),
                               .size_bytes = 96u << 20};
      accel_buffer_t *b = NULL;
      return accel_buffer_alloc(env->device, &d, &b);
    }
    case 3: {
      accel_stream_t *s = NULL;
      return accel_stream_create(env->device, NULL, &s);
    }
    case 4:
    case 5: {
      accel_semaphore_t *sem = NULL;
      return accel_semaphore_create(env->device, 0, &sem);
    }
    case 6: {
      // The stream outlives the call (the caller checks the message first).
      static uint32_t n;
      *out_stream = make_stream(env);
      return accel_stream_host_call(*out_stream, count_call, &n);
    }
    default: {
      size_t size = (size_t)sysconf(_SC_PAGESIZE);
      void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      accel_buffer_t *reg = NULL;
      accel_status_t st = accel_host_register(env->device, mem, size, &reg);
      munmap(mem, size);
      return st;
    }
  }
}

// Each driver call that acquires a resource, failing once (the double's
// cuda_double_fail_call): the accel call that made it fails with the
// driver's error name in its message, leaks nothing (the ASan build checks)
// and leaves the device working.
static void test_cuda_driver_failures_are_reported_cleanly(void **state) {
  test_env_t *env = *state;
  fail_call_fn fail_next = (fail_call_fn)double_hook("cuda_double_fail_call");
  fail_armed_fn armed = (fail_armed_fn)double_hook("cuda_double_fail_armed");
  if (fail_next == NULL || armed == NULL) {
    skip();  // NVIDIA's driver: nothing to inject
  }
  static const char *const k_calls[] = {
      "cuMemCreate",       "cuMemMap",
      "cuMemSetAccess",    "cuStreamCreateWithPriority",
      "cuMemHostAlloc",    "cuMemHostGetDevicePointer",
      "cuLaunchHostFunc",  "cuMemHostRegister",
  };
  for (int i = 0; i < (int)(sizeof(k_calls) / sizeof(k_calls[0])); ++i) {
    print_message("failing %s once\n", k_calls[i]);
    fail_next(k_calls[i], CUDA_ERROR_OUT_OF_MEMORY);
    accel_stream_t *stream = NULL;
    accel_status_t st = call_failing_case(env, i, &stream);
    assert_int_equal(armed(), 0);  // the call was made and failed
    assert_int_equal(st, ACCEL_ERROR_OUT_OF_MEMORY);
    assert_non_null(strstr(accel_last_error(), "CUDA_ERROR_OUT_OF_MEMORY"));
    if (stream != NULL) {
      // A refused enqueue fails the stream: later work reports it.
      assert_accel_status(accel_stream_synchronize(stream, 0),
                          ACCEL_ERROR_OUT_OF_MEMORY);
      accel_stream_destroy(stream);
    }
    assert_device_works(env);
  }
}

// Each graph call a command buffer's execute makes, failing once: the
// execute fails with the driver's error name and the buffer's name, leaks
// nothing (the ASan build checks), and a new stream runs the same buffer
// (the range's graph is built again, or launched again).
static void test_cuda_command_buffer_graph_failures_are_reported(void **state) {
  test_env_t *env = *state;
  fail_call_fn fail_next = (fail_call_fn)double_hook("cuda_double_fail_call");
  fail_armed_fn armed = (fail_armed_fn)double_hook("cuda_double_fail_armed");
  if (fail_next == NULL || armed == NULL) {
    skip();  // NVIDIA's driver: nothing to inject
  }
  static const char *const k_calls[] = {
      "cuGraphCreate", "cuGraphAddNode", "cuGraphInstantiateWithFlags",
      "cuGraphLaunch"};
  accel_buffer_t *b = make_buffer(env, 4096, NULL);
  uint32_t calls = 0;
  for (int i = 0; i < (int)(sizeof(k_calls) / sizeof(k_calls[0])); ++i) {
    print_message("failing %s once\n", k_calls[i]);
    accel_command_buffer_desc_t cd = {.struct_size = sizeof(cd),
                                      .name = "graph-faults"};
    accel_command_buffer_t *cb = NULL;
    assert_accel_ok(accel_command_buffer_create(env->device, &cd, &cb));
    accel_command_buffer_ref_t r = {.slot = 0};
    assert_accel_ok(accel_command_buffer_fill(cb, &r, 4096, 0x5a, 1));
    assert_accel_ok(accel_command_buffer_host_call(cb, count_call, &calls));
    assert_accel_ok(accel_command_buffer_finalize(cb));
    accel_command_buffer_binding_t table = {.buffer = b};
    accel_command_buffer_execute_desc_t ed = {.struct_size = sizeof(ed),
                                              .binding_count = 1,
                                              .bindings = &table};
    accel_stream_t *s = make_stream(env);
    if (strcmp(k_calls[i], "cuGraphLaunch") == 0) {
      // Built and instantiated by a first execute.
      assert_accel_ok(accel_stream_execute(s, cb, &ed));
      assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    }
    fail_next(k_calls[i], CUDA_ERROR_OUT_OF_MEMORY);
    accel_status_t st = accel_stream_execute(s, cb, &ed);
    assert_int_equal(armed(), 0);
    assert_int_equal(st, ACCEL_ERROR_OUT_OF_MEMORY);
    assert_non_null(strstr(accel_last_error(), "CUDA_ERROR_OUT_OF_MEMORY"));
    assert_non_null(strstr(accel_last_error(), "graph-faults"));
    assert_accel_status(accel_stream_synchronize(s, 0),
                        ACCEL_ERROR_OUT_OF_MEMORY);
    accel_stream_destroy(s);
    uint32_t before = calls;
    s = make_stream(env);
    assert_accel_ok(accel_stream_execute(s, cb, &ed));
    assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    assert_int_equal(calls, before + 1);
    accel_stream_destroy(s);
    accel_command_buffer_release(cb);
    assert_device_works(env);
  }
  accel_buffer_release(b);
}

// A sticky error (an illegal address, injected into the double's next
// copy) loses the device: the stream, every semaphore of the device and
// later work report ACCEL_ERROR_DEVICE_LOST with the driver's error name.
// Runs last: the device stays lost for the rest of the process.
typedef void (*inject_fn)(CUresult);

static void test_cuda_sticky_error_loses_the_device(void **state) {
  test_env_t *env = *state;
  inject_fn inject = (inject_fn)double_hook("cuda_double_inject_fault");
  if (inject == NULL) {
    skip();  // NVIDIA's driver: no fault to inject
  }
  accel_stream_t *s = make_stream(env);
  accel_semaphore_t *other = NULL;
  assert_accel_ok(accel_semaphore_create(env->device, 0, &other));
  accel_buffer_t *b = make_buffer(env, 4096, NULL);
  uint8_t in[4096] = {1};
  inject(CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_accel_ok(accel_stream_copy_from_host(s, b, 0, in, sizeof(in)));
  assert_accel_status(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE),
                      ACCEL_ERROR_DEVICE_LOST);
  assert_non_null(strstr(accel_last_error(), "CUDA_ERROR_ILLEGAL_ADDRESS"));
  assert_non_null(strstr(accel_last_error(), "cuda:0 lost"));
  assert_accel_status(
      accel_semaphore_wait(other, 1, ACCEL_TIMEOUT_INFINITE),
      ACCEL_ERROR_DEVICE_LOST);
  assert_accel_status(accel_stream_fill(s, b, 0, 4096, 0, 1),
                      ACCEL_ERROR_DEVICE_LOST);
  accel_stream_t *s2 = NULL;
  assert_accel_status(accel_stream_create(env->device, NULL, &s2),
                      ACCEL_ERROR_DEVICE_LOST);
  accel_buffer_release(b);
  accel_semaphore_release(other);
  accel_stream_destroy(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cuda_device_info_comes_from_the_driver),
      cmocka_unit_test(test_cuda_allocators_keep_random_data),
      cmocka_unit_test(test_cuda_fresh_and_zero_flag_memory_reads_zero),
      cmocka_unit_test(test_cuda_fills_match_reference),
      cmocka_unit_test(test_cuda_overlapping_copy_is_memmove),
      cmocka_unit_test(test_cuda_dma_copies_match_reference),
      cmocka_unit_test(test_cuda_registered_host_memory_round_trips),
      cmocka_unit_test(test_cuda_exported_memory_imports_with_its_data),
      cmocka_unit_test(test_cuda_host_function_cannot_call_the_driver),
      cmocka_unit_test(test_cuda_driver_failures_are_reported_cleanly),
      cmocka_unit_test(test_cuda_command_buffer_graph_failures_are_reported),
      cmocka_unit_test(test_cuda_sticky_error_loses_the_device),
  };
  return cmocka_run_group_tests(tests, test_env_setup, test_env_teardown);
}
