// libcurl, opened when the etcd store first needs it (dlopen of
// libcurl.so.4) rather than linked: a process that never uses an etcd store
// (most of them) does not load libcurl and the TLS, SSH and LDAP libraries
// it brings, which are several MiB of resident memory and start-up
// relocations. The table holds the entry points store_etcd.c calls.
#ifndef ACCEL_CLUSTER_CURL_LIB_H_
#define ACCEL_CLUSTER_CURL_LIB_H_

#include <curl/curl.h>

#include "accel/base.h"

typedef struct cluster_curl {
  CURLcode (*global_init)(long flags);
  CURL *(*easy_init)(void);
  void (*easy_cleanup)(CURL *curl);
  void (*easy_reset)(CURL *curl);
  CURLcode (*easy_setopt)(CURL *curl, CURLoption option, ...);
  CURLcode (*easy_perform)(CURL *curl);
  CURLcode (*easy_getinfo)(CURL *curl, CURLINFO info, ...);
  const char *(*easy_strerror)(CURLcode code);
  CURLM *(*multi_init)(void);
  CURLMcode (*multi_cleanup)(CURLM *multi);
  CURLMcode (*multi_add_handle)(CURLM *multi, CURL *curl);
  CURLMcode (*multi_remove_handle)(CURLM *multi, CURL *curl);
  CURLMcode (*multi_perform)(CURLM *multi, int *running);
  CURLMcode (*multi_poll)(CURLM *multi, struct curl_waitfd extra_fds[],
                          unsigned int extra_nfds, int timeout_ms,
                          int *ret);
  CURLMcode (*multi_wakeup)(CURLM *multi);
} cluster_curl_t;

// Returns in |*out| libcurl's entry points, opening the library and running
// curl_global_init the first time (once per process; the library stays
// open). ACCEL_ERROR_UNAVAILABLE, naming the library or the missing symbol,
// when it cannot be opened; the same answer on every later call.
// Thread-safe.
accel_status_t cluster_curl_get(const cluster_curl_t **out);

#endif  // ACCEL_CLUSTER_CURL_LIB_H_
