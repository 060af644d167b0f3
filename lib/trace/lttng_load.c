// Loading the LTTng-UST tracepoint provider (libaccel-lttng.so) on demand,
// LTTng's own pattern for libraries: libaccel holds the tracepoints with
// dynamic linkage (tp_define.c) and links no LTTng library, so a program
// that links libaccel gets none of LTTng-UST's listener threads until it
// asks for tracing; the provider library holds the probes and pulls in
// liblttng-ust when it is loaded.
//
// ACCEL_LTTNG selects it: unset or "0" loads nothing (LD_PRELOAD of the
// provider still works, as for any LTTng provider); "1" loads
// libaccel-lttng.so.0 from the library path, else from beside the object
// that holds libaccel's code, else from ../<libdir> of it (an installed
// tool); any other value is the provider's path.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel_config.h"
#include "core/error.h"
#include "trace/trace_impl.h"

#define PROVIDER_NAME "libaccel-lttng.so.0"

static pthread_mutex_t g_lttng_lock = PTHREAD_MUTEX_INITIALIZER;
static void *g_lttng_handle;  // guarded by g_lttng_lock; never unloaded

// The folder of the object (libaccel.so, or a program linked statically)
// that holds this function, with a trailing '/'; "" if unknown.
static void own_dir(char *out, size_t n) {
  Dl_info info;
  out[0] = '\0';
  if (dladdr((void *)own_dir, &info) == 0 || info.dli_fname == NULL) {
    return;
  }
  const char *slash = strrchr(info.dli_fname, '/');
  if (slash != NULL && (size_t)(slash - info.dli_fname) + 2 <= n) {
    memcpy(out, info.dli_fname, (size_t)(slash - info.dli_fname) + 1);
    out[slash - info.dli_fname + 1] = '\0';
  }
}

static void *open_provider(const char *path) {
  return dlopen(path, RTLD_NOW | RTLD_GLOBAL);
}

// ACCEL_LTTNG=1: the library path, then beside libaccel, then ../<libdir>.
static void *find_provider(char *tried, size_t n) {
  void *h = open_provider(PROVIDER_NAME);
  if (h != NULL) {
    return h;
  }
  char dir[1024];
  char path[1200];
  own_dir(dir, sizeof(dir));
  snprintf(path, sizeof(path), "%s%s", dir, PROVIDER_NAME);
  h = open_provider(path);
  if (h == NULL) {
    snprintf(path, sizeof(path), "%s../%s/%s", dir, ACCEL_LIBDIR,
             PROVIDER_NAME);
    h = open_provider(path);
  }
  if (h == NULL) {
    snprintf(tried, n, "%s, %s%s, %s", PROVIDER_NAME, dir, PROVIDER_NAME,
             path);
  }
  return h;
}

accel_status_t accel_trace_lttng_load_from_env(void) {
  const char *want = getenv("ACCEL_LTTNG");
  if (want == NULL || want[0] == '\0' || strcmp(want, "0") == 0) {
    return ACCEL_OK;
  }
  accel_status_t st = ACCEL_OK;
  pthread_mutex_lock(&g_lttng_lock);
  if (g_lttng_handle == NULL) {
#if ACCEL_HAVE_LTTNG
    char tried[2600] = "";
    g_lttng_handle = strcmp(want, "1") == 0
                         ? find_provider(tried, sizeof(tried))
                         : open_provider(want);
    if (g_lttng_handle == NULL) {
      st = accel_error(ACCEL_ERROR_UNAVAILABLE,
                       "ACCEL_LTTNG=\"%s\": cannot load the LTTng provider "
                       "(%s): %s",
                       want, tried[0] != '\0' ? tried : want, dlerror());
    }
#else
    st = accel_error(ACCEL_ERROR_UNSUPPORTED,
                     "ACCEL_LTTNG=\"%s\": accel was built without LTTng-UST",
                     want);
#endif
  }
  pthread_mutex_unlock(&g_lttng_lock);
  return st;
}
