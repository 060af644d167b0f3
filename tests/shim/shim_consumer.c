// A framework backend as the C shim meets it: dlopens the installed
// libaccel.so.<major> given on the command line, resolves accel_get_api and
// nothing else, and runs buffers, copies, streams, semaphores, events and a
// launch through the table. Checks the version rules on the way (a newer
// minor or another major gets NULL and a message).
// usage: shim_consumer PATH/libaccel.so.N
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/api_table.h"

static const accel_api_t *api;
static int failures;

#define CHECK(cond, ...)                             \
  do {                                               \
    if (!(cond)) {                                   \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                  \
      fprintf(stderr, "\n");                         \
      ++failures;                                    \
    }                                                \
  } while (0)

#define CHECK_OK(expr)                                                    \
  do {                                                                    \
    accel_status_t st_ = (expr);                                          \
    if (st_ != ACCEL_OK) {                                                \
      fprintf(stderr, "FAIL %s:%d: %s: %s: %s\n", __FILE__, __LINE__,     \
              #expr, api->accel_status_name(st_), api->accel_last_error()); \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

// out[i] = a[i] * 2 + k, one work-group per 64 elements.
static int32_t scale_add(const accel_kernel_dispatch_t *d,
                         const accel_kernel_workgroup_t *wg) {
  const float *a = d->bindings[0].data;
  float *out = d->bindings[1].data;
  float k;
  memcpy(&k, d->constants, sizeof(k));
  uint64_t n = d->bindings[1].size_bytes / sizeof(float);
  for (uint64_t i = wg->id[0] * 64ull; i < n && i < wg->id[0] * 64ull + 64; ++i) {
    out[i] = a[i] * 2.0f + k;
  }
  return 0;
}

static void check_versions(accel_get_api_fn get) {
  CHECK(api->struct_size >= sizeof(accel_api_t), "struct_size %u < %zu",
        api->struct_size, sizeof(accel_api_t));
  CHECK(api->api_version ==
            ((ACCEL_API_VERSION_MAJOR << 16) | ACCEL_API_VERSION_MINOR),
        "api_version 0x%x", api->api_version);
  CHECK(api->accel_api_version() == api->api_version, "accel_api_version");
  CHECK(get(ACCEL_API_VERSION_MAJOR, 0) == api, "an older minor gets the table");
  CHECK(get(ACCEL_API_VERSION_MAJOR, ACCEL_API_VERSION_MINOR + 1) == NULL,
        "a newer minor is refused");
  CHECK(strstr(api->accel_last_error(), "was asked for") != NULL,
        "message for a newer minor: \"%s\"", api->accel_last_error());
  CHECK(get(ACCEL_API_VERSION_MAJOR + 1, 0) == NULL, "another major is refused");
  CHECK(ACCEL_API_TABLE_HAS(api, accel_buffer_from_dlpack_legacy),
        "the last 0.2 entry is present");
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: shim_consumer PATH/libaccel.so.N\n");
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "FAIL: dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  accel_get_api_fn get = (accel_get_api_fn)dlsym(lib, "accel_get_api");
  if (get == NULL) {
    fprintf(stderr, "FAIL: no accel_get_api in %s\n", argv[1]);
    return 1;
  }
  api = get(ACCEL_API_VERSION_MAJOR, ACCEL_API_VERSION_MINOR);
  if (api == NULL) {
    fprintf(stderr, "FAIL: accel_get_api(%d, %d) returned NULL\n",
            ACCEL_API_VERSION_MAJOR, ACCEL_API_VERSION_MINOR);
    return 1;
  }
  check_versions(get);

  accel_runtime_t *rt = NULL;
  CHECK_OK(api->accel_runtime_create(NULL, &rt));
  accel_device_t *dev = NULL;
  CHECK_OK(api->accel_device_get(rt, 0, &dev));

  enum { N = 1000 };
  accel_buffer_desc_t bd = {.struct_size = sizeof(bd), .size_bytes = N * 4};
  accel_buffer_t *a = NULL, *out = NULL;
  CHECK_OK(api->accel_buffer_alloc(dev, &bd, &a));
  CHECK_OK(api->accel_buffer_alloc(dev, &bd, &out));
  CHECK(api->accel_buffer_size(a) == N * 4, "buffer size");

  accel_stream_t *s1 = NULL, *s2 = NULL;
  CHECK_OK(api->accel_stream_create(dev, NULL, &s1));
  CHECK_OK(api->accel_stream_create(dev, NULL, &s2));
  accel_semaphore_t *sem = NULL;
  CHECK_OK(api->accel_semaphore_create(dev, 0, &sem));

  float host_a[N], host_out[N];
  for (int i = 0; i < N; ++i) {
    host_a[i] = (float)i * 0.5f;
  }
  // s1 uploads and signals; s2 waits, launches, downloads.
  CHECK_OK(api->accel_stream_copy_from_host(s1, a, 0, host_a, sizeof(host_a)));
  CHECK_OK(api->accel_stream_signal(s1, sem, 1));
  CHECK_OK(api->accel_stream_wait(s2, sem, 1));

  accel_kernel_binding_decl_t decls[2] = {
      {.name = "a", .access = ACCEL_KERNEL_ACCESS_READ, .alignment = 4},
      {.name = "out", .access = ACCEL_KERNEL_ACCESS_WRITE, .alignment = 4},
  };
  accel_kernel_desc_t kd = {
      .struct_size = sizeof(kd),
      .abi_version = ACCEL_KERNEL_ABI_VERSION,
      .name = "scale_add",
      .fn = scale_add,
      .binding_count = 2,
      .constants_size = 4,
      .bindings = decls,
  };
  accel_kernel_t *kernel = NULL;
  CHECK_OK(api->accel_kernel_register(dev, &kd, &kernel));
  accel_launch_binding_t binds[2] = {{.buffer = a}, {.buffer = out}};
  float k = 3.0f;
  accel_launch_desc_t ld = {
      .struct_size = sizeof(ld),
      .workgroup_count = {(N + 63) / 64, 1, 1},
      .binding_count = 2,
      .constants_size = 4,
      .bindings = binds,
      .constants = &k,
  };
  accel_event_t *ev = NULL;
  CHECK_OK(api->accel_event_create(dev, 0, &ev));
  CHECK_OK(api->accel_launch(s2, kernel, &ld));
  CHECK_OK(api->accel_event_record(ev, s2));
  CHECK_OK(api->accel_stream_copy_to_host(s2, host_out, out, 0, sizeof(host_out)));
  CHECK_OK(api->accel_stream_synchronize(s2, ACCEL_TIMEOUT_INFINITE));
  CHECK_OK(api->accel_event_query(ev));
  uint64_t v = 0;
  CHECK_OK(api->accel_semaphore_query(sem, &v));
  CHECK(v == 1, "semaphore value %" PRIu64, v);
  for (int i = 0; i < N; ++i) {
    if (host_out[i] != host_a[i] * 2.0f + k) {
      CHECK(0, "out[%d] = %g, expected %g", i, host_out[i], host_a[i] * 2.0f + k);
      break;
    }
  }
  // A misuse through the table reports like a direct call.
  CHECK(api->accel_buffer_alloc(dev, NULL, &a) == ACCEL_ERROR_INVALID_ARGUMENT,
        "NULL desc refused");
  CHECK(api->accel_last_error()[0] != '\0', "message set");

  api->accel_event_release(ev);
  api->accel_kernel_release(kernel);
  api->accel_semaphore_release(sem);
  api->accel_stream_destroy(s2);
  api->accel_stream_destroy(s1);
  CHECK_OK(api->accel_buffer_free(out));
  CHECK_OK(api->accel_buffer_free(a));
  api->accel_runtime_destroy(rt);
  if (failures == 0) {
    printf("shim consumer: %u-byte table, API %u.%u, launch through the table ok\n",
           api->struct_size, api->api_version >> 16, api->api_version & 0xffff);
  }
  return failures == 0 ? 0 : 1;
}
