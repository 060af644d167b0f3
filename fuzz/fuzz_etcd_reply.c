// libFuzzer target for what the etcd membership store reads from the
// network: the snapshot transaction's reply (the epoch record and the
// members' registrations, base64 inside JSON). Every input must be read or
// rejected with ACCEL_ERROR_FORMAT and a message; a crash, a sanitizer
// report, another status, or a result that breaks the store interface's
// promises (counts within bounds, ids distinct and ascending) is a bug.
// Built by scripts/fuzz-etcd-reply.sh.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/etcd_json.h"
#include "cluster/membership.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  json_tokener *tok = json_tokener_new();
  json_object *reply = json_tokener_parse_ex(tok, (const char *)data, (int)size);
  json_tokener_free(tok);
  static accel_cluster_record_t record;
  static accel_cluster_live_t live;
  accel_status_t status = accel_cluster_etcd_parse_snapshot(
      reply, strlen("/accel/cluster/g/"), &record, &live);
  if (status != ACCEL_OK && status != ACCEL_ERROR_FORMAT) {
    abort();
  }
  if (status == ACCEL_OK) {
    if (record.count > ACCEL_CLUSTER_MAX_RANKS ||
        live.count > ACCEL_CLUSTER_MAX_RANKS) {
      abort();
    }
    for (uint32_t i = 0; i < record.count; ++i) {
      if (record.members[i] == 0 ||
          accel_cluster_record_find(&record, record.members[i]) != (int)i) {
        abort();
      }
    }
    for (uint32_t i = 1; i < live.count; ++i) {
      if (live.members[i - 1].id >= live.members[i].id) {
        abort();
      }
    }
  }
  json_object_put(reply);
  // The base64 decoder on the raw bytes as a string.
  char *text = malloc(size + 1);
  if (text != NULL) {
    memcpy(text, data, size);
    text[size] = '\0';
    size_t n = 0;
    char *decoded = accel_cluster_b64_decode(text, &n);
    if (decoded != NULL && n > size) {
      abort();
    }
    free(decoded);
    free(text);
  }
  return 0;
}
