#include "kernel_harness.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KT_MAX_KERNELS 32

typedef struct kt_runtime {
  uint32_t threads;
  accel_runtime_t *runtime;
  accel_device_t *device;
  accel_stream_t *stream;
  uint32_t kernel_count;
  char names[KT_MAX_KERNELS][32];
  accel_kernel_t *kernels[KT_MAX_KERNELS];
} kt_runtime_t;

static kt_runtime_t g_runtimes[3];
static void *g_library;
static char g_message[1024];  // the last kt_run's error message
static const accel_kernel_library_t *g_exports;

static const accel_kernel_library_t *library(void) {
  if (g_exports == NULL) {
    const char *path = getenv("ACCEL_TEST_KERNELS");
    assert_non_null(path);
    g_library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (g_library == NULL) {
      print_error("dlopen %s: %s\n", path, dlerror());
    }
    assert_non_null(g_library);
    const accel_kernel_library_t *(*query)(uint32_t) =
        (const accel_kernel_library_t *(*)(uint32_t))dlsym(
            g_library, ACCEL_KERNEL_LIBRARY_QUERY_SYMBOL);
    assert_non_null(query);
    g_exports = query(ACCEL_KERNEL_ABI_VERSION);
    assert_non_null(g_exports);
    if (g_exports->init != NULL) {
      assert_int_equal(g_exports->init(), 0);
    }
  }
  return g_exports;
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
  const accel_kernel_library_t *lib = library();
  accel_kernel_fn_t fn = NULL;
  for (uint32_t i = 0; i < lib->export_count; ++i) {
    if (strcmp(lib->exports[i].name, c->kernel) == 0) {
      fn = lib->exports[i].fn;
    }
  }
  if (fn == NULL) {
    print_error("kernel %s not exported\n", c->kernel);
  }
  assert_non_null(fn);
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
  accel_kernel_desc_t desc = {.struct_size = sizeof(desc),
                              .abi_version = ACCEL_KERNEL_ABI_VERSION,
                              .name = c->kernel,
                              .fn = fn,
                              .binding_count = c->binding_count,
                              .constants_size = c->constants_size,
                              .bindings = decls};
  assert_true(r->kernel_count < KT_MAX_KERNELS);
  accel_kernel_t *k;
  assert_accel_ok(accel_kernel_register(r->device, &desc, &k));
  snprintf(r->names[r->kernel_count], sizeof(r->names[0]), "%s", c->kernel);
  r->kernels[r->kernel_count++] = k;
  return k;
}

accel_status_t kt_run(const kt_case_t *c, uint32_t threads, void **out) {
  kt_runtime_t *r = runtime_for(threads);
  accel_kernel_t *k = kernel_for(r, c);
  accel_buffer_t *buffers[KT_MAX_BINDINGS];
  accel_launch_binding_t bind[KT_MAX_BINDINGS];
  for (uint32_t b = 0; b < c->binding_count; ++b) {
    uint64_t bytes = c->bytes[b] ? c->bytes[b] : 4;
    if (c->alias[b] != 0) {
      buffers[b] = buffers[c->alias[b] - 1];
      accel_buffer_retain(buffers[b]);
      bind[b] = (accel_launch_binding_t){.buffer = buffers[b], .length = bytes};
      continue;
    }
    accel_buffer_desc_t bd = {.struct_size = sizeof(bd), .size_bytes = bytes};
    assert_accel_ok(accel_buffer_alloc(r->device, &bd, &buffers[b]));
    void *p;
    assert_accel_ok(accel_buffer_host_pointer(buffers[b], &p));
    if (c->data[b] != NULL && c->bytes[b] != 0) {
      memcpy(p, c->data[b], bytes);
    } else {
      memset(p, 0, bytes);
    }
    bind[b] = (accel_launch_binding_t){.buffer = buffers[b], .length = bytes};
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
      void *p;
      assert_accel_ok(accel_buffer_host_pointer(buffers[b], &p));
      out[b] = malloc(bytes);
      memcpy(out[b], p, bytes);
    }
    accel_buffer_release(buffers[b]);
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
  for (int i = 0; i < 3; ++i) {
    kt_runtime_t *r = &g_runtimes[i];
    if (r->runtime == NULL) continue;
    accel_stream_destroy(r->stream);
    for (uint32_t k = 0; k < r->kernel_count; ++k) {
      accel_kernel_release(r->kernels[k]);
    }
    accel_runtime_destroy(r->runtime);
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
