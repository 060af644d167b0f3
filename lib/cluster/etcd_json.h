// The etcd store's wire format: base64 (the JSON gateway's encoding of keys
// and values) and the checks of etcd's replies before use. Apart from the
// store so that fuzz/fuzz_etcd_reply.c reaches it without a network.
#ifndef ACCEL_CLUSTER_ETCD_JSON_H_
#define ACCEL_CLUSTER_ETCD_JSON_H_

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "cluster/store_impl.h"

// Encodes |n| bytes of |in|; malloc'ed, NULL when out of memory.
char *accel_cluster_b64_encode(const char *in, size_t n);

// Decodes |in| into a malloc'ed NUL-terminated buffer of |*out_length|
// bytes; NULL when |in| is not canonical base64 (or out of memory).
char *accel_cluster_b64_decode(const char *in, size_t *out_length);

// |o|.|a| (or |o|.|a|.|b| when |b| is not NULL); NULL when absent or |o|
// is not an object.
json_object *accel_cluster_json_path(json_object *o, const char *a,
                                     const char *b);

// |o|.|name| as an integer (the gateway writes 64-bit numbers as strings);
// 0 when absent.
int64_t accel_cluster_json_i64(json_object *o, const char *name);

// The array at |o|.|a|.|b|, or NULL when absent or not an array.
json_object *accel_cluster_json_array(json_object *o, const char *a,
                                      const char *b);

// Checks and reads the reply of the snapshot transaction (a range of the
// epoch key, then a range of the members' prefix, whose keys are
// |prefix_length| bytes of prefix then "m/" and 16 hex digits).
// ACCEL_ERROR_FORMAT: anything else, or a record that is malformed (bad
// JSON, a count above ACCEL_CLUSTER_MAX_RANKS, a zero or repeated id).
// Members whose key or value is malformed are left out.
accel_status_t accel_cluster_etcd_parse_snapshot(
    json_object *reply, size_t prefix_length,
    accel_cluster_record_t *out_record, accel_cluster_live_t *out_live);

#endif  // ACCEL_CLUSTER_ETCD_JSON_H_
