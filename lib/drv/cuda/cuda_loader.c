// Loads the CUDA driver at run time: dlopen of libcuda.so.1 (or
// ACCEL_CUDA_LIBRARY, how the tests point at the test double), one dlsym for
// cuGetProcAddress, and every other entry through it from the X-macro list of
// cuda_symbols.h. Every way of having nothing to use (no library, the
// toolkit's stub, an old driver, no device) is ACCEL_ERROR_UNAVAILABLE with
// the reason, never a crash.
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "drv/cuda/cuda_internal.h"

#define ACCEL_CUDA_DEFAULT_LIBRARY "libcuda.so.1"

typedef CUresult (*get_proc_address_fn)(const char *symbol, void **pfn,
                                        int cuda_version, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *status);

static accel_status_t unavailable(accel_cuda_api_t *api, const char *fmt,
                                  const char *detail) {
  accel_status_t st = accel_error(ACCEL_ERROR_UNAVAILABLE, fmt, detail);
  accel_cuda_api_unload(api);
  return st;
}

static accel_status_t resolve(accel_cuda_api_t *api, const char *path,
                              get_proc_address_fn get_proc) {
#define ACCEL_CUDA_RESOLVE(name)                                            \
  {                                                                         \
    void *fn = NULL;                                                        \
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;     \
    CUresult r = get_proc(#name, &fn, ACCEL_CUDA_API_VERSION,               \
                          CU_GET_PROC_ADDRESS_DEFAULT, &found);             \
    if (r == CUDA_ERROR_STUB_LIBRARY) {                                     \
      return unavailable(api,                                               \
                         "no CUDA devices: %s is the CUDA toolkit's stub "  \
                         "library, not a driver",                           \
                         path);                                             \
    }                                                                       \
    if (r != CUDA_SUCCESS || found != CU_GET_PROC_ADDRESS_SUCCESS ||        \
        fn == NULL) {                                                       \
      return unavailable(api,                                               \
                         "no CUDA devices: the driver has no entry point "  \
                         "%s for API 12.0",                                 \
                         #name);                                            \
    }                                                                       \
    api->name = (__typeof__(api->name))fn;                                  \
  }
  ACCEL_CUDA_SYMBOLS(ACCEL_CUDA_RESOLVE)
#undef ACCEL_CUDA_RESOLVE
  return ACCEL_OK;
}

accel_status_t accel_cuda_api_load(accel_cuda_api_t *api) {
  memset(api, 0, sizeof(*api));
  const char *path = getenv("ACCEL_CUDA_LIBRARY");
  if (path == NULL || path[0] == '\0') {
    path = ACCEL_CUDA_DEFAULT_LIBRARY;
  }
  // NODELETE: the driver's threads (stream workers, callbacks) may outlive
  // the backend, and a driver is never unloaded under them.
  api->library = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (api->library == NULL) {
    const char *why = dlerror();
    return accel_error(ACCEL_ERROR_UNAVAILABLE,
                       "no CUDA devices: no NVIDIA driver (%s)",
                       why != NULL ? why : path);
  }
  get_proc_address_fn get_proc =
      (get_proc_address_fn)dlsym(api->library, "cuGetProcAddress_v2");
  if (get_proc == NULL) {
    return unavailable(api,
                       "no CUDA devices: %s has no cuGetProcAddress_v2 (a "
                       "driver older than CUDA 12.0)",
                       path);
  }
  ACCEL_RETURN_IF_ERROR(resolve(api, path, get_proc));
  CUresult r = api->cuInit(0);
  if (r == CUDA_ERROR_STUB_LIBRARY) {
    return unavailable(api,
                       "no CUDA devices: %s is the CUDA toolkit's stub "
                       "library, not a driver",
                       path);
  }
  if (r == CUDA_ERROR_NO_DEVICE) {
    return unavailable(api,
                       "no CUDA devices: the driver found none%s",
                       getenv("CUDA_VISIBLE_DEVICES") != NULL
                           ? " (CUDA_VISIBLE_DEVICES is set)"
                           : "");
  }
  if (r != CUDA_SUCCESS) {
    // Whatever cuInit says (no driver loaded in the kernel, a mismatch),
    // the backend has nothing to use: unavailable, with the driver's words.
    (void)accel_cuda_error(api, r, "no CUDA devices: cuInit failed");
    accel_cuda_api_unload(api);
    return ACCEL_ERROR_UNAVAILABLE;
  }
  r = api->cuDriverGetVersion(&api->driver_version);
  if (r != CUDA_SUCCESS || api->driver_version < ACCEL_CUDA_API_VERSION) {
    accel_error(ACCEL_ERROR_UNAVAILABLE,
                "no CUDA devices: driver API version %d.%d is older than "
                "%d.%d",
                api->driver_version / 1000, api->driver_version % 1000 / 10,
                ACCEL_CUDA_API_VERSION / 1000,
                ACCEL_CUDA_API_VERSION % 1000 / 10);
    accel_cuda_api_unload(api);
    return ACCEL_ERROR_UNAVAILABLE;
  }
  int count = 0;
  r = api->cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count <= 0) {
    accel_error(ACCEL_ERROR_UNAVAILABLE,
                "no CUDA devices: the driver (API %d.%d) lists none%s",
                api->driver_version / 1000, api->driver_version % 1000 / 10,
                getenv("CUDA_VISIBLE_DEVICES") != NULL
                    ? " (CUDA_VISIBLE_DEVICES is set)"
                    : "");
    accel_cuda_api_unload(api);
    return ACCEL_ERROR_UNAVAILABLE;
  }
  return ACCEL_OK;
}

void accel_cuda_api_unload(accel_cuda_api_t *api) {
  if (api->library != NULL) {
    dlclose(api->library);
  }
  memset(api, 0, sizeof(*api));
}
