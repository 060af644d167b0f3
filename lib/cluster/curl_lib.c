// libcurl opened on first use (curl_lib.h).
#if ACCEL_HAVE_ETCD
#include "cluster/curl_lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "core/error.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cluster_curl_t g_curl;
static char g_failure[256];  // why it is not loaded
static bool g_loaded;        // both written by load_once only

#define CURL_SONAME "libcurl.so.4"

static void load_once(void) {
  void *lib = dlopen(CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char *why = dlerror();
    snprintf(g_failure, sizeof(g_failure), "cannot open %s (%s)",
             CURL_SONAME, why != NULL ? why : "no reason given");
    return;
  }
  struct {
    const char *name;
    void **slot;
  } syms[] = {
      {"curl_global_init", (void **)&g_curl.global_init},
      {"curl_easy_init", (void **)&g_curl.easy_init},
      {"curl_easy_cleanup", (void **)&g_curl.easy_cleanup},
      {"curl_easy_reset", (void **)&g_curl.easy_reset},
      {"curl_easy_setopt", (void **)&g_curl.easy_setopt},
      {"curl_easy_perform", (void **)&g_curl.easy_perform},
      {"curl_easy_getinfo", (void **)&g_curl.easy_getinfo},
      {"curl_easy_strerror", (void **)&g_curl.easy_strerror},
      {"curl_multi_init", (void **)&g_curl.multi_init},
      {"curl_multi_cleanup", (void **)&g_curl.multi_cleanup},
      {"curl_multi_add_handle", (void **)&g_curl.multi_add_handle},
      {"curl_multi_remove_handle", (void **)&g_curl.multi_remove_handle},
      {"curl_multi_perform", (void **)&g_curl.multi_perform},
      {"curl_multi_poll", (void **)&g_curl.multi_poll},
      {"curl_multi_wakeup", (void **)&g_curl.multi_wakeup},
  };
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); ++i) {
    *syms[i].slot = dlsym(lib, syms[i].name);
    if (*syms[i].slot == NULL) {
      snprintf(g_failure, sizeof(g_failure), "%s has no %s (libcurl 7.68 or "
               "later is needed)", CURL_SONAME, syms[i].name);
      return;  // the library stays open: dlclose could run its destructors
    }
  }
  if (g_curl.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    snprintf(g_failure, sizeof(g_failure), "curl_global_init failed");
    return;
  }
  g_loaded = true;
}

accel_status_t cluster_curl_get(const cluster_curl_t **out) {
  pthread_once(&g_once, load_once);  // publishes what load_once wrote
  if (!g_loaded) {
    return accel_error(ACCEL_ERROR_UNAVAILABLE, "etcd store: %s", g_failure);
  }
  *out = &g_curl;
  return ACCEL_OK;
}

#else
typedef int cluster_curl_unused_t;  // ISO C: no empty translation unit
#endif  // ACCEL_HAVE_ETCD
