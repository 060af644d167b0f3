#include "kernel_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernel_params.h"

#define KT_MAX_KERNELS 32

typedef struct kt_runtime {
  uint32_t threads;
  accel_runtime_t *runtime;
  accel_device_t *device;
  accel_stream_t *stream;
  uint32_t kernel_count;
  char names[KT_MAX_KERNELS][32];
  accel_kernel_t *kernels[KT_MAX_KERNELS];  // each keeps its executable
  void *images[KT_MAX_KERNELS];             // the .axe images they load from
} kt_runtime_t;

static kt_runtime_t g_runtimes[3];
static void *g_code;  // the code object's bytes
static uint64_t g_code_size;
static char g_message[1024];  // the last kt_run's error message
static uint64_t g_guarded, g_unguarded;  // bindings with and without guard

static void read_code_object(void) {
  if (g_code != NULL) {
    return;
  }
  const char *path = getenv("ACCEL_TEST_KERNELS");
  assert_non_null(path);
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    print_error("cannot open %s\n", path);
  }
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  g_code_size = (uint64_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  g_code = malloc(g_code_size);
  assert_int_equal(fread(g_code, 1, g_code_size, f), g_code_size);
  fclose(f);
}

static kt_runtime_t *runtime_for(uint32_t threads) {
  uint32_t slot = threads == 1 ? 0 : (threads == 2 ? 1 : 2);
  kt_runtime_t *r = &g_runtimes[slot];
  if (r->runtime == NULL) {
    char text[16];
    snprintf(text, sizeof(text), "%u", threads);
    setenv("ACCEL_HOST_THREADS", text, 1);
    assert_accel_ok(accel_runtime_create(NULL, &r->runtime));
    unsetenv("ACCEL_HOST_THREADS");
    assert_accel_ok(accel_device_get(r->runtime, 0, &r->device));
    r->threads = threads;
  }
  if (r->stream == NULL) {
    assert_accel_ok(accel_stream_create(r->device, NULL, &r->stream));
  }
  return r;
}

static accel_kernel_t *kernel_for(kt_runtime_t *r, const kt_case_t *c) {
  for (uint32_t i = 0; i < r->kernel_count; ++i) {
    if (strcmp(r->names[i], c->kernel) == 0) {
      return r->kernels[i];
    }
  }
  // Each kernel comes from an .axe image holding its declaration and the
  // code object, loaded as a deployed program would (the loader checks the
  // export against the object's dynamic symbols first).
  read_code_object();
  accel_kernel_binding_decl_t decls[KT_MAX_BINDINGS];
  for (uint32_t b = 0; b < c->binding_count; ++b) {
    char a = c->access[b];
    decls[b] = (accel_kernel_binding_decl_t){
        .access = a == 'r' ? ACCEL_KERNEL_ACCESS_READ
                           : (a == 'w' ? ACCEL_KERNEL_ACCESS_WRITE
                                       : ACCEL_KERNEL_ACCESS_READ |
                                             ACCEL_KERNEL_ACCESS_WRITE),
        .alignment = 4};
  }
  accel_exe_kernel_desc_t kd = {.struct_size = sizeof(kd),
                                .name = c->kernel,
                                .binding_count = c->binding_count,
                                .constants_size = c->constants_size,
                                .bindings = decls};
  accel_exe_builder_t *builder;
  assert_accel_ok(accel_exe_builder_create(&builder));
  assert_accel_ok(accel_exe_builder_add_kernel(builder, &kd));
#if defined(__x86_64__)
  const char *target = "host-x86_64";
#else
  const char *target = "host-aarch64";
#endif
  assert_accel_ok(accel_exe_builder_add_code(builder, target,
                                             ACCEL_CODE_FORMAT_ELF_SO, g_code,
                                             g_code_size));
  void *image;
  uint64_t image_size;
  assert_accel_ok(accel_exe_builder_write_memory(builder, &image, &image_size));
  accel_exe_builder_destroy(builder);
  accel_executable_t *exe;
  assert_accel_ok(accel_executable_load_memory(r->runtime, r->device, image,
                                               image_size, 0, &exe));
  accel_kernel_t *k;
  assert_accel_ok(accel_executable_kernel(exe, c->kernel, &k));
  accel_kernel_retain(k);  // keeps the executable
  accel_executable_release(exe);
  assert_true(r->kernel_count < KT_MAX_KERNELS);
  snprintf(r->names[r->kernel_count], sizeof(r->names[0]), "%s", c->kernel);
  r->images[r->kernel_count] = image;
  r->kernels[r->kernel_count++] = k;
  return k;
}

// Host memory of |bytes| rounded up to pages, followed by an inaccessible
// page, registered as a buffer: a binding placed at its end faults on any
// read past the bound length.
typedef struct kt_guarded {
  uint8_t *map;
  uint64_t map_bytes, usable;
} kt_guarded_t;

static accel_buffer_t *guarded_buffer(kt_runtime_t *r, uint64_t bytes,
                                      kt_guarded_t *g, uint64_t *offset) {
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  g->usable = (bytes + page - 1) / page * page;
  g->map_bytes = g->usable + page;
  g->map = mmap(NULL, g->map_bytes, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(g->map != MAP_FAILED);
  assert_int_equal(mprotect(g->map + g->usable, page, PROT_NONE), 0);
  accel_buffer_t *buf;
  if (accel_host_register(r->device, g->map, g->usable, &buf) != ACCEL_OK) {
    // Pinning is mlock, bounded by RLIMIT_MEMLOCK: fall back to a plain
    // buffer (the sanitizer builds still check its bounds).
    munmap(g->map, g->map_bytes);
    g->map = NULL;
    ++g_unguarded;
    return NULL;
  }
  *offset = (g->usable - bytes) & ~(uint64_t)3;  // the declared alignment
  ++g_guarded;
  return buf;
}

accel_status_t kt_run(const kt_case_t *c, uint32_t threads, void **out) {
  kt_runtime_t *r = runtime_for(threads);
  accel_kernel_t *k = kernel_for(r, c);
  accel_buffer_t *buffers[KT_MAX_BINDINGS];
  accel_launch_binding_t bind[KT_MAX_BINDINGS];
  kt_guarded_t guards[KT_MAX_BINDINGS] = {0};
  for (uint32_t b = 0; b < c->binding_count; ++b) {
    uint64_t bytes = c->bytes[b] ? c->bytes[b] : 4;
    if (c->alias[b] != 0) {
      buffers[b] = buffers[c->alias[b] - 1];
      accel_buffer_retain(buffers[b]);
      bind[b] = bind[c->alias[b] - 1];
      bind[b].length = bytes;
      continue;
    }
    uint64_t offset = 0;
    buffers[b] = guarded_buffer(r, bytes, &guards[b], &offset);
    if (buffers[b] == NULL) {
      accel_buffer_desc_t bd = {.struct_size = sizeof(bd), .size_bytes = bytes};
      assert_accel_ok(accel_buffer_alloc(r->device, &bd, &buffers[b]));
    }
    uint8_t *p;
    assert_accel_ok(accel_buffer_host_pointer(buffers[b], (void **)&p));
    if (c->data[b] != NULL && c->bytes[b] != 0) {
      memcpy(p + offset, c->data[b], bytes);
    } else {
      memset(p + offset, 0, bytes);
    }
    bind[b] = (accel_launch_binding_t){.buffer = buffers[b], .offset = offset,
                                       .length = bytes};
  }
  accel_launch_desc_t d = {.struct_size = sizeof(d),
                           .workgroup_count = {c->groups ? c->groups : 1, 1, 1},
                           .binding_count = c->binding_count,
                           .bindings = bind,
                           .constants_size = c->constants_size,
                           .constants = c->constants};
  accel_status_t st = accel_launch(r->stream, k, &d);
  if (st == ACCEL_OK) {
    st = accel_stream_synchronize(r->stream, ACCEL_TIMEOUT_INFINITE);
  }
  snprintf(g_message, sizeof(g_message), "%s", accel_last_error());
  for (uint32_t b = 0; b < c->binding_count; ++b) {
    if (st == ACCEL_OK && out != NULL) {
      uint64_t bytes = c->bytes[b] ? c->bytes[b] : 4;
      uint8_t *p;
      assert_accel_ok(accel_buffer_host_pointer(buffers[b], (void **)&p));
      out[b] = malloc(bytes);
      memcpy(out[b], p + bind[b].offset, bytes);
    }
    accel_buffer_release(buffers[b]);
  }
  // The launch has completed (or failed) and released its references.
  for (uint32_t b = 0; b < c->binding_count; ++b) {
    if (guards[b].map != NULL) munmap(guards[b].map, guards[b].map_bytes);
  }
  if (st != ACCEL_OK) {
    accel_stream_destroy(r->stream);
    r->stream = NULL;
  }
  return st;
}

void kt_free_outputs(const kt_case_t *c, void **out) {
  for (uint32_t b = 0; b < c->binding_count; ++b) {
    free(out[b]);
    out[b] = NULL;
  }
}

void kt_check_reproducible(const kt_case_t *c, uint64_t units, void **out) {
  static const uint32_t threads[] = {1, 2, 7};
  uint64_t grids[] = {1, 2, 3, 7, units ? units : 1, units + 3};
  kt_case_t run = *c;
  int first = 1;
  for (size_t t = 0; t < 3; ++t) {
    for (size_t g = 0; g < sizeof(grids) / sizeof(grids[0]); ++g) {
      run.groups = (uint32_t)grids[g];
      void *got[KT_MAX_BINDINGS] = {0};
      assert_accel_ok(kt_run(&run, threads[t], first ? out : got));
      if (first) {
        first = 0;
        continue;
      }
      for (uint32_t b = 0; b < c->binding_count; ++b) {
        if (c->access[b] == 'r') continue;
        uint64_t bytes = c->bytes[b] ? c->bytes[b] : 4;
        if (memcmp(got[b], out[b], bytes) != 0) {
          print_error("%s: binding %u differs with %u threads and %u "
                      "work-groups\n", c->kernel, b, threads[t], run.groups);
          fail();
        }
      }
      kt_free_outputs(c, got);
    }
  }
}

void kt_expect_failure(const kt_case_t *c, const char *needle) {
  accel_status_t st = kt_run(c, 2, NULL);
  if (st != ACCEL_ERROR_ABORTED || strstr(g_message, needle) == NULL) {
    print_error("%s: got %s \"%s\", want ABORTED with \"%s\"\n", c->kernel,
                accel_status_name(st), g_message, needle);
    fail();
  }
}

int kt_teardown(void **state) {
  (void)state;
  fprintf(stderr, "kernel harness: %llu bindings ended at a guard page, %llu "
          "in plain buffers (RLIMIT_MEMLOCK)\n",
          (unsigned long long)g_guarded, (unsigned long long)g_unguarded);
  for (int i = 0; i < 3; ++i) {
    kt_runtime_t *r = &g_runtimes[i];
    if (r->runtime == NULL) continue;
    accel_stream_destroy(r->stream);
    for (uint32_t k = 0; k < r->kernel_count; ++k) {
      accel_kernel_release(r->kernels[k]);
    }
    accel_runtime_destroy(r->runtime);
    for (uint32_t k = 0; k < r->kernel_count; ++k) {
      free(r->images[k]);  // after the executables are gone
    }
    memset(r, 0, sizeof(*r));
  }
  return 0;
}

double kt_uniform(test_rng_t *rng, double lo, double hi) {
  return lo + (hi - lo) * ((double)(test_rng_next(rng) >> 11) / 9007199254740992.0);
}

double kt_bf16_value(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t kt_bf16_from(double v) {
  float f = (float)v;
  uint32_t bits;
  memcpy(&bits, &f, 4);
  return (uint16_t)(bits >> 16);
}

double kt_f16_value(uint16_t h) {
  _Float16 f;
  memcpy(&f, &h, 2);
  return (double)f;
}

uint16_t kt_f16_from(double v) {
  _Float16 f = (_Float16)v;
  uint16_t h;
  memcpy(&h, &f, 2);
  return h;
}

void kt_assert_close(const char *what, const float *got, const double *want,
                     const double *scale, uint64_t n, double tol_rel,
                     double tol_abs) {
  for (uint64_t i = 0; i < n; ++i) {
    double allowed = tol_abs + tol_rel * (scale ? scale[i] : fabs(want[i]));
    double err = fabs((double)got[i] - want[i]);
    if (!(err <= allowed) && !(isnan(want[i]) && isnan(got[i])) &&
        !(isinf(want[i]) && got[i] == want[i])) {
      print_error("%s: element %llu = %.9g, want %.9g (error %.3g, allowed "
                  "%.3g)\n", what, (unsigned long long)i, (double)got[i],
                  want[i], err, allowed);
      fail();
    }
  }
}

double kt_activation(uint32_t op, double v) {
  switch (op) {
    case ACCEL_KP_ACT_GELU_TANH:
      return 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case ACCEL_KP_ACT_GELU_ERF:
      return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    case ACCEL_KP_ACT_SILU:
      return v / (1.0 + exp(-v));
    default:
      return v;
  }
}
