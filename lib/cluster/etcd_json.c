#if ACCEL_HAVE_ETCD

#include "cluster/etcd_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/membership.h"
#include "core/error.h"

static const char k_b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *accel_cluster_b64_encode(const char *in, size_t n) {
  char *out = malloc(4 * ((n + 2) / 3) + 1);
  if (out == NULL) {
    return NULL;
  }
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)(unsigned char)in[i] << 16;
    if (i + 1 < n) v |= (uint32_t)(unsigned char)in[i + 1] << 8;
    if (i + 2 < n) v |= (uint32_t)(unsigned char)in[i + 2];
    out[o++] = k_b64[v >> 18 & 63];
    out[o++] = k_b64[v >> 12 & 63];
    out[o++] = i + 1 < n ? k_b64[v >> 6 & 63] : '=';
    out[o++] = i + 2 < n ? k_b64[v & 63] : '=';
  }
  out[o] = '\0';
  return out;
}

static int b64_value(char c) {
  const char *p = c == '\0' ? NULL : strchr(k_b64, c);
  return p == NULL ? -1 : (int)(p - k_b64);
}

char *accel_cluster_b64_decode(const char *in, size_t *out_length) {
  size_t n = strlen(in);
  if (n % 4 != 0) {
    return NULL;
  }
  char *out = malloc(n / 4 * 3 + 1);
  if (out == NULL) {
    return NULL;
  }
  size_t o = 0;
  for (size_t i = 0; i < n; i += 4) {
    bool last = i + 4 == n;
    // Padding only at the end: "xx==" or "xxx=".
    bool pad2 = last && in[i + 2] == '=' && in[i + 3] == '=';
    bool pad1 = last && !pad2 && in[i + 3] == '=';
    int v[4];
    for (int k = 0; k < 4; ++k) {
      bool padded = (k == 3 && (pad1 || pad2)) || (k == 2 && pad2);
      v[k] = padded ? 0 : b64_value(in[i + k]);
      if (v[k] < 0) {
        free(out);
        return NULL;
      }
    }
    uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 |
                 (uint32_t)v[2] << 6 | (uint32_t)v[3];
    out[o++] = (char)(w >> 16);
    if (!pad2) out[o++] = (char)(w >> 8 & 0xff);
    if (!pad1 && !pad2) out[o++] = (char)(w & 0xff);
  }
  out[o] = '\0';
  *out_length = o;
  return out;
}

json_object *accel_cluster_json_path(json_object *o, const char *a,
                                     const char *b) {
  json_object *x = NULL;
  if (o == NULL || !json_object_is_type(o, json_type_object) ||
      !json_object_object_get_ex(o, a, &x)) {
    return NULL;
  }
  if (b == NULL) {
    return x;
  }
  json_object *y = NULL;
  return json_object_is_type(x, json_type_object) &&
                 json_object_object_get_ex(x, b, &y)
             ? y
             : NULL;
}

int64_t accel_cluster_json_i64(json_object *o, const char *name) {
  json_object *x = accel_cluster_json_path(o, name, NULL);
  return x == NULL ? 0 : json_object_get_int64(x);  // strings parse too
}

json_object *accel_cluster_json_array(json_object *o, const char *a,
                                      const char *b) {
  json_object *x = accel_cluster_json_path(o, a, b);
  return x != NULL && json_object_is_type(x, json_type_array) ? x : NULL;
}

// The base64 string at |kv|.|name| decoded (malloc'ed), or NULL.
static char *kv_text(json_object *kv, const char *name, size_t *out_length) {
  json_object *v = accel_cluster_json_path(kv, name, NULL);
  if (v == NULL || !json_object_is_type(v, json_type_string)) {
    return NULL;
  }
  return accel_cluster_b64_decode(json_object_get_string(v), out_length);
}

static bool parse_id(const char *text, uint64_t *out) {
  if (text == NULL || strlen(text) != 16) {
    return false;
  }
  char *end = NULL;
  uint64_t id = strtoull(text, &end, 16);
  if (*end != '\0' || id == 0) {
    return false;
  }
  *out = id;
  return true;
}

static accel_status_t parse_record(json_object *kv,
                                   accel_cluster_record_t *out) {
  size_t length = 0;
  char *text = kv_text(kv, "value", &length);
  json_object *doc = text == NULL ? NULL : json_tokener_parse(text);
  free(text);
  json_object *members = accel_cluster_json_array(doc, "members", NULL);
  int64_t epoch = accel_cluster_json_i64(doc, "epoch");
  size_t count = members == NULL ? 0 : json_object_array_length(members);
  accel_status_t status = ACCEL_OK;
  if (members == NULL || count == 0 || count > ACCEL_CLUSTER_MAX_RANKS ||
      epoch <= 0) {
    status = accel_error(ACCEL_ERROR_FORMAT,
                         "etcd: the group's epoch record is malformed");
    goto done;
  }
  out->epoch = (uint64_t)epoch;
  out->count = 0;
  for (size_t i = 0; i < count; ++i) {
    json_object *m = json_object_array_get_idx(members, i);
    uint64_t id = 0;
    if (!json_object_is_type(m, json_type_string) ||
        !parse_id(json_object_get_string(m), &id) ||
        accel_cluster_record_find(out, id) >= 0) {
      status = accel_error(ACCEL_ERROR_FORMAT,
                           "etcd: epoch %lld's member %zu is not a distinct "
                           "16-hex-digit id", (long long)epoch, i);
      goto done;
    }
    out->members[out->count++] = id;
  }
  out->version = (uint64_t)accel_cluster_json_i64(kv, "mod_revision");
done:
  json_object_put(doc);
  return status;
}

// Reads one member's registration; false when malformed.
static bool parse_member(json_object *kv, size_t prefix_length,
                         accel_cluster_live_member_t *m) {
  memset(m, 0, sizeof(*m));
  m->age_ns = UINT64_MAX;
  size_t length = 0;
  char *key = kv_text(kv, "key", &length);
  bool ok = key != NULL && length == prefix_length + 2 + 16 &&
            strlen(key) == length &&
            parse_id(key + prefix_length + 2, &m->id);
  free(key);
  if (!ok) {
    return false;
  }
  char *text = kv_text(kv, "value", &length);
  json_object *doc = text == NULL ? NULL : json_tokener_parse(text);
  free(text);
  m->pid = (int32_t)accel_cluster_json_i64(doc, "pid");
  json_object *host = accel_cluster_json_path(doc, "host", NULL);
  if (host != NULL && json_object_is_type(host, json_type_string)) {
    snprintf(m->host, sizeof(m->host), "%s", json_object_get_string(host));
  }
  json_object_put(doc);
  return true;
}

accel_status_t accel_cluster_etcd_parse_snapshot(
    json_object *reply, size_t prefix_length,
    accel_cluster_record_t *out_record, accel_cluster_live_t *out_live) {
  json_object *responses = accel_cluster_json_array(reply, "responses", NULL);
  if (responses == NULL || json_object_array_length(responses) != 2) {
    return accel_error(ACCEL_ERROR_FORMAT, "etcd: a read of the group's "
                       "record did not answer both ranges");
  }
  memset(out_record, 0, sizeof(*out_record));
  json_object *kvs = accel_cluster_json_array(
      json_object_array_get_idx(responses, 0), "response_range", "kvs");
  if (kvs != NULL && json_object_array_length(kvs) > 0) {
    ACCEL_RETURN_IF_ERROR(
        parse_record(json_object_array_get_idx(kvs, 0), out_record));
  }
  out_live->count = 0;
  kvs = accel_cluster_json_array(json_object_array_get_idx(responses, 1),
                                 "response_range", "kvs");
  size_t n = kvs == NULL ? 0 : json_object_array_length(kvs);
  for (size_t i = 0; i < n && out_live->count < ACCEL_CLUSTER_MAX_RANKS; ++i) {
    accel_cluster_live_member_t *m = &out_live->members[out_live->count];
    if (parse_member(json_object_array_get_idx(kvs, i), prefix_length, m) &&
        !accel_cluster_live_has(out_live, m->id)) {
      out_live->count++;
    }
  }
  // etcd answers keys in order, so ids ascend; keep the order promised
  // (store_impl.h) even when a reply does not.
  accel_cluster_live_sort(out_live);
  return ACCEL_OK;
}

#endif  // ACCEL_HAVE_ETCD
