// The etcd membership store: etcd's v3 API through its JSON gateway
// (POST /v3/...), with libcurl and json-c. Under the prefix
// /accel/cluster/NAME/ (docs/cluster.md):
//   m/<id, 16 hex digits>   a member's registration {"pid","host"}, attached
//                           to its lease; the lease ID is the member id and
//                           its keep-alives are the heartbeats, so a member
//                           that stops renewing vanishes when etcd expires
//                           the lease
//   epoch                   the agreed record {"epoch", "members": [ids]},
//                           replaced by a transaction that compares its
//                           mod_revision and that every new member is still
//                           registered
//   t/<epoch>/<rank>        a member's topology JSON under an epoch
// A watch on the prefix (one streaming request on a thread of its own)
// wakes the progress thread on every change. Each request tries the
// endpoints in turn, starting with the last one that answered.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster/store_impl.h"
#include "core/error.h"

#if ACCEL_HAVE_ETCD

#include <json-c/json.h>

#include "cluster/curl_lib.h"
#include "cluster/etcd_json.h"

#define ETCD_MAX_ENDPOINTS 16
#define ETCD_MAX_RESPONSE (64u << 20)

typedef struct etcd_buf {
  char *data;
  size_t size;
  size_t capacity;
} etcd_buf_t;

typedef struct etcd_store {
  accel_cluster_store_t base;
  char endpoints[ETCD_MAX_ENDPOINTS][256];
  int endpoint_count;
  _Atomic int current;  // index of the endpoint that answered last
  char prefix[128];
  long request_timeout_ms;

  const cluster_curl_t *c;  // libcurl (curl_lib.h)
  pthread_mutex_t mutex;    // guards curl (one request at a time)
  CURL *curl;

  int64_t lease;  // 0 before join and after leave
  char published[64];  // key suffix of this member's last topology

  // The watch.
  pthread_mutex_t watch_mutex;
  pthread_cond_t watch_cond;
  uint64_t changes;  // guarded by watch_mutex
  uint64_t seen;     // guarded by watch_mutex
  CURLM *multi;
  _Atomic bool quit;
  bool watching;
  pthread_t watch_thread;
} etcd_store_t;

static const accel_cluster_store_ops_t k_etcd_ops;

static accel_status_t etcd_post(etcd_store_t *s, const char *path,
                                json_object *body, json_object **out);

// ---- requests --------------------------------------------------------------

static size_t buf_write(char *ptr, size_t size, size_t nmemb, void *user) {
  etcd_buf_t *b = user;
  size_t n = size * nmemb;
  if (b->size + n + 1 > ETCD_MAX_RESPONSE) {
    return 0;
  }
  if (b->size + n + 1 > b->capacity) {
    size_t capacity = b->capacity == 0 ? 4096 : b->capacity;
    while (capacity < b->size + n + 1) capacity *= 2;
    char *data = realloc(b->data, capacity);
    if (data == NULL) {
      return 0;
    }
    b->data = data;
    b->capacity = capacity;
  }
  memcpy(b->data + b->size, ptr, n);
  b->size += n;
  b->data[b->size] = '\0';
  return n;
}

// POSTs |body| (consumed) to |path| on the first endpoint that answers;
// returns the parsed reply in |*out| (json_object_put by the caller).
static accel_status_t etcd_call(etcd_store_t *s, const char *path,
                                json_object *body, json_object **out) {
  accel_status_t status = etcd_post(s, path, body, out);
  json_object_put(body);
  return status;
}

// POSTs |body| (consumed) to |path| and drops the reply.
static accel_status_t etcd_send(etcd_store_t *s, const char *path,
                                json_object *body) {
  json_object *reply = NULL;
  accel_status_t status = etcd_call(s, path, body, &reply);
  json_object_put(reply);
  return status;
}

static accel_status_t etcd_post(etcd_store_t *s, const char *path,
                                json_object *body, json_object **out) {
  const char *text = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN);
  accel_status_t status = ACCEL_OK;
  char last[256] = "";
  pthread_mutex_lock(&s->mutex);
  int start = atomic_load_explicit(&s->current, memory_order_relaxed);
  for (int k = 0; k < s->endpoint_count; ++k) {
    int e = (start + k) % s->endpoint_count;
    char url[320];
    snprintf(url, sizeof(url), "%s%s", s->endpoints[e], path);
    etcd_buf_t b = {0};
    s->c->easy_reset(s->curl);
    s->c->easy_setopt(s->curl, CURLOPT_URL, url);
    s->c->easy_setopt(s->curl, CURLOPT_POSTFIELDS, text);
    s->c->easy_setopt(s->curl, CURLOPT_WRITEFUNCTION, buf_write);
    s->c->easy_setopt(s->curl, CURLOPT_WRITEDATA, &b);
    s->c->easy_setopt(s->curl, CURLOPT_TIMEOUT_MS, s->request_timeout_ms);
    s->c->easy_setopt(s->curl, CURLOPT_CONNECTTIMEOUT_MS, s->request_timeout_ms);
    s->c->easy_setopt(s->curl, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = s->c->easy_perform(s->curl);
    long http = 0;
    s->c->easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &http);
    if (rc != CURLE_OK || http >= 500 || b.data == NULL) {
      snprintf(last, sizeof(last), "%s: %s", url,
               rc != CURLE_OK ? s->c->easy_strerror(rc) : "server error");
      free(b.data);
      continue;
    }
    atomic_store_explicit(&s->current, e, memory_order_relaxed);
    json_object *reply = json_tokener_parse(b.data);
    free(b.data);
    pthread_mutex_unlock(&s->mutex);
    if (reply == NULL || !json_object_is_type(reply, json_type_object)) {
      json_object_put(reply);
      return accel_error(ACCEL_ERROR_FORMAT,
                         "etcd %s: the reply is not a JSON object", url);
    }
    json_object *err = NULL;
    if (json_object_object_get_ex(reply, "error", &err)) {
      status = accel_error(ACCEL_ERROR_UNAVAILABLE, "etcd %s: %s", url,
                           json_object_get_string(err));
      json_object_put(reply);
      return status;
    }
    *out = reply;
    return ACCEL_OK;
  }
  pthread_mutex_unlock(&s->mutex);
  return accel_error(ACCEL_ERROR_UNAVAILABLE,
                     "no etcd endpoint answered (%d tried; last %s)",
                     s->endpoint_count, last);
}

static void add_b64(json_object *o, const char *name, const char *text,
                    size_t n) {
  char *e = accel_cluster_b64_encode(text, n);
  json_object_object_add(o, name, json_object_new_string(e == NULL ? "" : e));
  free(e);
}

static void add_key(json_object *o, const etcd_store_t *s, const char *suffix) {
  char key[256];
  snprintf(key, sizeof(key), "%s%s", s->prefix, suffix);
  add_b64(o, "key", key, strlen(key));
}

// A range over every key that starts with prefix+|suffix|.
static json_object *range_prefix(const etcd_store_t *s, const char *suffix) {
  char key[256];
  int n = snprintf(key, sizeof(key), "%s%s", s->prefix, suffix);
  json_object *r = json_object_new_object();
  add_b64(r, "key", key, (size_t)n);
  key[n - 1]++;  // the prefix's successor ends the range
  add_b64(r, "range_end", key, (size_t)n);
  return r;
}

static json_object *op(const char *kind, json_object *request) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, kind, request);
  return o;
}

static void lease_body(json_object *o, int64_t lease) {
  char id[32];
  snprintf(id, sizeof(id), "%lld", (long long)lease);
  json_object_object_add(o, "ID", json_object_new_string(id));
}

// ---- the watch -------------------------------------------------------------

static void note_change(etcd_store_t *s) {
  pthread_mutex_lock(&s->watch_mutex);
  ++s->changes;
  pthread_cond_broadcast(&s->watch_cond);
  pthread_mutex_unlock(&s->watch_mutex);
}

static size_t watch_write(char *ptr, size_t size, size_t nmemb, void *user) {
  (void)ptr;
  note_change(user);  // any message: an event (or the watch's start)
  return size * nmemb;
}

static void *watch_main(void *arg) {
  etcd_store_t *s = arg;
  json_object *create = json_object_new_object();
  json_object_object_add(create, "create_request", range_prefix(s, ""));
  const char *body = json_object_to_json_string_ext(create, JSON_C_TO_STRING_PLAIN);
  CURL *curl = s->c->easy_init();
  while (curl != NULL && !atomic_load_explicit(&s->quit, memory_order_relaxed)) {
    int e = atomic_load_explicit(&s->current, memory_order_relaxed);
    char url[320];
    snprintf(url, sizeof(url), "%s/v3/watch", s->endpoints[e]);
    s->c->easy_reset(curl);
    s->c->easy_setopt(curl, CURLOPT_URL, url);
    s->c->easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    s->c->easy_setopt(curl, CURLOPT_WRITEFUNCTION, watch_write);
    s->c->easy_setopt(curl, CURLOPT_WRITEDATA, s);
    s->c->easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, s->request_timeout_ms);
    s->c->easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    s->c->multi_add_handle(s->multi, curl);
    int running = 1;
    while (running && !atomic_load_explicit(&s->quit, memory_order_relaxed)) {
      s->c->multi_perform(s->multi, &running);
      if (running) {
        s->c->multi_poll(s->multi, NULL, 0, 1000, NULL);
      }
    }
    s->c->multi_remove_handle(s->multi, curl);
    if (!atomic_load_explicit(&s->quit, memory_order_relaxed)) {
      // The stream ended (the endpoint went away): try the next one after a
      // short pause, and wake the progress thread to read the store.
      atomic_store_explicit(&s->current, (e + 1) % s->endpoint_count,
                            memory_order_relaxed);
      note_change(s);
      struct timespec pause = {0, 50 * 1000 * 1000};
      nanosleep(&pause, NULL);
    }
  }
  s->c->easy_cleanup(curl);
  json_object_put(create);
  return NULL;
}

// ---- the store -------------------------------------------------------------

static accel_status_t parse_endpoints(etcd_store_t *s, const char *list) {
  const char *p = list;
  while (*p != '\0') {
    const char *comma = strchr(p, ',');
    size_t n = comma == NULL ? strlen(p) : (size_t)(comma - p);
    if (n == 0 || n >= sizeof(s->endpoints[0]) ||
        s->endpoint_count == ETCD_MAX_ENDPOINTS) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "etcd endpoints \"%s\": expected 1 to %d comma-"
                         "separated URLs of at most %zu bytes", list,
                         ETCD_MAX_ENDPOINTS, sizeof(s->endpoints[0]) - 1);
    }
    memcpy(s->endpoints[s->endpoint_count], p, n);
    s->endpoints[s->endpoint_count][n] = '\0';
    // "host:port" alone means http://host:port.
    if (strstr(s->endpoints[s->endpoint_count], "://") == NULL) {
      char url[256];
      snprintf(url, sizeof(url), "http://%s", s->endpoints[s->endpoint_count]);
      memcpy(s->endpoints[s->endpoint_count], url, sizeof(url));
    }
    ++s->endpoint_count;
    p = comma == NULL ? p + n : comma + 1;
  }
  if (s->endpoint_count == 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT, "etcd endpoints: empty");
  }
  return ACCEL_OK;
}

static accel_status_t etcd_make(const accel_cluster_store_config_t *config,
                                etcd_store_t **out) {
  const cluster_curl_t *curl = NULL;
  ACCEL_RETURN_IF_ERROR(cluster_curl_get(&curl));
  etcd_store_t *s = calloc(1, sizeof(*s));
  if (s == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "etcd store: no memory");
  }
  s->base.ops = &k_etcd_ops;
  s->c = curl;
  s->base.config = *config;
  s->base.config.etcd_endpoints = NULL;
  snprintf(s->prefix, sizeof(s->prefix), "/accel/cluster/%s/", config->name);
  // A request that takes longer than two intervals is as good as lost: the
  // next step retries (on the next endpoint). At least 500 ms: a loaded etcd
  // answers a lease grant in a few hundred.
  s->request_timeout_ms = (long)(2 * config->interval_ns / 1000000ull);
  if (s->request_timeout_ms < 500) {
    s->request_timeout_ms = 500;
  }
  accel_status_t status = parse_endpoints(s, config->etcd_endpoints);
  if (status != ACCEL_OK) {
    free(s);
    return status;
  }
  s->curl = s->c->easy_init();
  s->multi = s->c->multi_init();
  if (s->curl == NULL || s->multi == NULL) {
    s->c->easy_cleanup(s->curl);
    s->c->multi_cleanup(s->multi);
    free(s);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "etcd store: no curl handle");
  }
  pthread_mutex_init(&s->mutex, NULL);
  pthread_mutex_init(&s->watch_mutex, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&s->watch_cond, &attr);
  pthread_condattr_destroy(&attr);
  *out = s;
  return ACCEL_OK;
}

static void etcd_destroy(accel_cluster_store_t *base) {
  etcd_store_t *s = (etcd_store_t *)base;
  atomic_store_explicit(&s->quit, true, memory_order_relaxed);
  if (s->watching) {
    s->c->multi_wakeup(s->multi);
    pthread_join(s->watch_thread, NULL);
  }
  s->c->multi_cleanup(s->multi);
  s->c->easy_cleanup(s->curl);
  pthread_cond_destroy(&s->watch_cond);
  pthread_mutex_destroy(&s->watch_mutex);
  pthread_mutex_destroy(&s->mutex);
  free(s);
}

accel_status_t accel_cluster_etcd_open(
    const accel_cluster_store_config_t *config,
    accel_cluster_store_t **out_store) {
  etcd_store_t *s = NULL;
  ACCEL_RETURN_IF_ERROR(etcd_make(config, &s));
  // One read proves an endpoint answers with etcd's API.
  json_object *body = json_object_new_object();
  add_key(body, s, "epoch");
  json_object *reply = NULL;
  accel_status_t status = etcd_call(s, "/v3/kv/range", body, &reply);
  if (status == ACCEL_OK && accel_cluster_json_path(reply, "header", NULL) == NULL) {
    status = accel_error(ACCEL_ERROR_FORMAT,
                         "etcd: the range reply has no header (not etcd's v3 "
                         "JSON gateway?)");
  }
  json_object_put(reply);
  if (status != ACCEL_OK) {
    etcd_destroy(&s->base);
    return accel_error_context(status, "cluster group \"%s\"", config->name);
  }
  *out_store = &s->base;
  return ACCEL_OK;
}

accel_status_t accel_cluster_etcd_remove(
    const accel_cluster_store_config_t *config) {
  etcd_store_t *s = NULL;
  ACCEL_RETURN_IF_ERROR(etcd_make(config, &s));
  json_object *body = range_prefix(s, "");
  accel_status_t status = etcd_send(s, "/v3/kv/deleterange", body);
  etcd_destroy(&s->base);
  return status;
}

static accel_status_t etcd_join(accel_cluster_store_t *base, uint64_t now_ns,
                                uint64_t *out_id) {
  etcd_store_t *s = (etcd_store_t *)base;
  (void)now_ns;
  int64_t ttl = (int64_t)((base->config.timeout_ns + 999999999ull) /
                          1000000000ull);
  json_object *body = json_object_new_object();
  json_object_object_add(body, "TTL", json_object_new_int64(ttl));
  json_object *reply = NULL;
  accel_status_t status = etcd_call(s, "/v3/lease/grant", body, &reply);
  if (status != ACCEL_OK) {
    return status;
  }
  int64_t lease = accel_cluster_json_i64(reply, "ID");
  int64_t granted = accel_cluster_json_i64(reply, "TTL");
  json_object_put(reply);
  if (lease <= 0 || granted <= 0) {
    return accel_error(ACCEL_ERROR_FORMAT, "etcd: lease grant without an ID");
  }
  if ((uint64_t)granted * 1000000000ull > base->config.timeout_ns) {
    base->config.timeout_ns = (uint64_t)granted * 1000000000ull;
  }
  char suffix[64], value[160], host[64];
  snprintf(suffix, sizeof(suffix), "m/%016llx", (unsigned long long)lease);
  accel_cluster_hostname(host);
  int n = snprintf(value, sizeof(value), "{\"pid\":%d,\"host\":\"%s\"}",
                   (int)getpid(), host);
  body = json_object_new_object();
  add_key(body, s, suffix);
  add_b64(body, "value", value, (size_t)n);
  json_object_object_add(body, "lease", json_object_new_int64(lease));
  status = etcd_call(s, "/v3/kv/put", body, &reply);
  json_object_put(reply);
  if (status != ACCEL_OK) {
    return status;
  }
  s->lease = lease;
  if (!s->watching) {
    if (pthread_create(&s->watch_thread, NULL, watch_main, s) != 0) {
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "etcd store: cannot start the watch thread");
    }
    s->watching = true;
  }
  *out_id = (uint64_t)lease;
  return ACCEL_OK;
}

static accel_status_t etcd_leave(accel_cluster_store_t *base) {
  etcd_store_t *s = (etcd_store_t *)base;
  if (s->lease == 0) {
    return ACCEL_OK;
  }
  json_object *body = json_object_new_object();
  lease_body(body, s->lease);
  accel_status_t status = etcd_send(s, "/v3/lease/revoke", body);
  s->lease = 0;
  return status;
}

static accel_status_t etcd_heartbeat(accel_cluster_store_t *base,
                                     uint64_t now_ns) {
  etcd_store_t *s = (etcd_store_t *)base;
  (void)now_ns;
  json_object *body = json_object_new_object();
  lease_body(body, s->lease);
  json_object *reply = NULL;
  accel_status_t status = etcd_call(s, "/v3/lease/keepalive", body, &reply);
  if (status != ACCEL_OK) {
    return status;
  }
  int64_t ttl = accel_cluster_json_i64(accel_cluster_json_path(reply, "result", NULL), "TTL");
  json_object_put(reply);
  if (ttl <= 0) {
    return accel_error(ACCEL_ERROR_ABORTED,
                       "cluster group \"%s\": this member's etcd lease %llx "
                       "expired (its keep-alives came later than the TTL)",
                       base->config.name, (unsigned long long)s->lease);
  }
  return ACCEL_OK;
}

static accel_status_t etcd_snapshot(accel_cluster_store_t *base,
                                    uint64_t now_ns,
                                    accel_cluster_record_t *out_record,
                                    accel_cluster_live_t *out_live) {
  etcd_store_t *s = (etcd_store_t *)base;
  (void)now_ns;
  pthread_mutex_lock(&s->watch_mutex);
  s->seen = s->changes;  // a change after this point wakes the next wait
  pthread_mutex_unlock(&s->watch_mutex);
  json_object *epoch_range = json_object_new_object();
  add_key(epoch_range, s, "epoch");
  json_object *success = json_object_new_array();
  json_object_array_add(success, op("request_range", epoch_range));
  json_object_array_add(success, op("request_range", range_prefix(s, "m/")));
  json_object *body = json_object_new_object();
  json_object_object_add(body, "success", success);
  json_object *reply = NULL;
  accel_status_t status = etcd_call(s, "/v3/kv/txn", body, &reply);
  if (status != ACCEL_OK) {
    return status;
  }
  status = accel_cluster_etcd_parse_snapshot(reply, strlen(s->prefix),
                                             out_record, out_live);
  json_object_put(reply);
  return status;
}

static accel_status_t etcd_propose(accel_cluster_store_t *base,
                                   const accel_cluster_record_t *expected,
                                   const accel_cluster_record_t *next,
                                   bool *out_won) {
  etcd_store_t *s = (etcd_store_t *)base;
  json_object *record = json_object_new_object();
  json_object *ids = json_object_new_array();
  json_object *compare = json_object_new_array();
  json_object *c = json_object_new_object();
  char text[32];
  json_object_object_add(c, "target", json_object_new_string("MOD"));
  add_key(c, s, "epoch");
  json_object_object_add(c, "result", json_object_new_string("EQUAL"));
  snprintf(text, sizeof(text), "%llu", (unsigned long long)expected->version);
  json_object_object_add(c, "mod_revision", json_object_new_string(text));
  json_object_array_add(compare, c);
  for (uint32_t i = 0; i < next->count; ++i) {
    char suffix[32];
    snprintf(text, sizeof(text), "%016llx", (unsigned long long)next->members[i]);
    json_object_array_add(ids, json_object_new_string(text));
    snprintf(suffix, sizeof(suffix), "m/%s", text);
    c = json_object_new_object();
    json_object_object_add(c, "target", json_object_new_string("CREATE"));
    add_key(c, s, suffix);
    json_object_object_add(c, "result", json_object_new_string("GREATER"));
    json_object_object_add(c, "create_revision", json_object_new_string("0"));
    json_object_array_add(compare, c);
  }
  json_object_object_add(record, "epoch", json_object_new_int64((int64_t)next->epoch));
  json_object_object_add(record, "members", ids);
  const char *value = json_object_to_json_string_ext(record, JSON_C_TO_STRING_PLAIN);
  json_object *put = json_object_new_object();
  add_key(put, s, "epoch");
  add_b64(put, "value", value, strlen(value));
  json_object *success = json_object_new_array();
  json_object_array_add(success, op("request_put", put));
  json_object *body = json_object_new_object();
  json_object_object_add(body, "compare", compare);
  json_object_object_add(body, "success", success);
  json_object_put(record);
  json_object *reply = NULL;
  accel_status_t status = etcd_call(s, "/v3/kv/txn", body, &reply);
  if (status != ACCEL_OK) {
    return status;
  }
  json_object *won = accel_cluster_json_path(reply, "succeeded", NULL);
  *out_won = won != NULL && json_object_get_boolean(won);
  json_object_put(reply);
  return ACCEL_OK;
}

static void topo_suffix(char *out, size_t size, uint64_t epoch, uint32_t rank) {
  snprintf(out, size, "t/%020llu/%04u", (unsigned long long)epoch, rank);
}

static accel_status_t etcd_publish(accel_cluster_store_t *base, uint64_t epoch,
                                   uint32_t rank, const char *json,
                                   size_t length) {
  etcd_store_t *s = (etcd_store_t *)base;
  char suffix[64];
  topo_suffix(suffix, sizeof(suffix), epoch, rank);
  json_object *body = json_object_new_object();
  add_key(body, s, suffix);
  add_b64(body, "value", json, length);
  json_object_object_add(body, "lease", json_object_new_int64(s->lease));
  accel_status_t status = etcd_send(s, "/v3/kv/put", body);
  if (status == ACCEL_OK && s->published[0] != '\0' &&
      strcmp(s->published, suffix) != 0) {
    // The previous epoch's topology is of no use any more: drop it so that
    // a long-lived member does not pile up one key per epoch (best effort;
    // the key goes with the lease anyway).
    json_object *old = json_object_new_object();
    add_key(old, s, s->published);
    etcd_send(s, "/v3/kv/deleterange", old);
  }
  if (status == ACCEL_OK) {
    snprintf(s->published, sizeof(s->published), "%s", suffix);
  }
  return status;
}

static accel_status_t etcd_fetch(accel_cluster_store_t *base, uint64_t epoch,
                                 uint32_t rank, uint64_t member_id,
                                 char **out_json, size_t *out_length) {
  etcd_store_t *s = (etcd_store_t *)base;
  *out_json = NULL;
  char suffix[64];
  topo_suffix(suffix, sizeof(suffix), epoch, rank);
  json_object *body = json_object_new_object();
  add_key(body, s, suffix);
  json_object *reply = NULL;
  accel_status_t status = etcd_call(s, "/v3/kv/range", body, &reply);
  if (status != ACCEL_OK) {
    return status;
  }
  json_object *kvs = accel_cluster_json_array(reply, "kvs", NULL);
  json_object *kv = kvs == NULL || json_object_array_length(kvs) == 0
                        ? NULL
                        : json_object_array_get_idx(kvs, 0);
  // Published under the member's own lease.
  if (kv != NULL && (uint64_t)accel_cluster_json_i64(kv, "lease") == member_id) {
    json_object *v = accel_cluster_json_path(kv, "value", NULL);
    *out_json = v == NULL ? NULL
                          : accel_cluster_b64_decode(json_object_get_string(v), out_length);
  }
  json_object_put(reply);
  return ACCEL_OK;
}

static void etcd_wait(accel_cluster_store_t *base, uint64_t timeout_ns) {
  etcd_store_t *s = (etcd_store_t *)base;
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  uint64_t ns = (uint64_t)deadline.tv_nsec + timeout_ns;
  deadline.tv_sec += (time_t)(ns / 1000000000ull);
  deadline.tv_nsec = (long)(ns % 1000000000ull);
  pthread_mutex_lock(&s->watch_mutex);
  while (s->changes == s->seen) {
    if (pthread_cond_timedwait(&s->watch_cond, &s->watch_mutex, &deadline) != 0) {
      break;
    }
  }
  s->seen = s->changes;
  pthread_mutex_unlock(&s->watch_mutex);
}

static void etcd_wake(accel_cluster_store_t *base) {
  note_change((etcd_store_t *)base);
}

static accel_status_t etcd_heartbeat_age(accel_cluster_store_t *base,
                                         uint64_t id, uint64_t now_ns,
                                         uint64_t *out_age_ns) {
  etcd_store_t *s = (etcd_store_t *)base;
  (void)now_ns;
  *out_age_ns = UINT64_MAX;
  json_object *body = json_object_new_object();
  lease_body(body, (int64_t)id);
  json_object *reply = NULL;
  accel_status_t status = etcd_call(s, "/v3/lease/timetolive", body, &reply);
  if (status != ACCEL_OK) {
    return status;
  }
  int64_t ttl = accel_cluster_json_i64(reply, "TTL");
  int64_t granted = accel_cluster_json_i64(reply, "grantedTTL");
  // A TTL of 0 is left out of the reply (read as 0); -1: expired.
  if (granted > 0 && ttl >= 0 && granted >= ttl) {
    *out_age_ns = (uint64_t)(granted - ttl) * 1000000000ull;
  }
  json_object_put(reply);
  return ACCEL_OK;
}

static const accel_cluster_store_ops_t k_etcd_ops = {
    .destroy = etcd_destroy,
    .join = etcd_join,
    .leave = etcd_leave,
    .heartbeat = etcd_heartbeat,
    .snapshot = etcd_snapshot,
    .propose = etcd_propose,
    .publish = etcd_publish,
    .fetch = etcd_fetch,
    .wait = etcd_wait,
    .wake = etcd_wake,
    .heartbeat_age = etcd_heartbeat_age,
};

#else  // !ACCEL_HAVE_ETCD

accel_status_t accel_cluster_etcd_open(
    const accel_cluster_store_config_t *config,
    accel_cluster_store_t **out_store) {
  (void)out_store;
  return accel_error(ACCEL_ERROR_UNAVAILABLE,
                     "cluster group \"%s\": accel was built without libcurl "
                     "and json-c, which the etcd store needs", config->name);
}

accel_status_t accel_cluster_etcd_remove(
    const accel_cluster_store_config_t *config) {
  return accel_cluster_etcd_open(config, NULL);
}

#endif  // ACCEL_HAVE_ETCD
