#include "cluster/membership.h"

#include <string.h>

int accel_cluster_record_find(const accel_cluster_record_t *record,
                              uint64_t id) {
  for (uint32_t i = 0; i < record->count; ++i) {
    if (record->members[i] == id) {
      return (int)i;
    }
  }
  return -1;
}

bool accel_cluster_live_has(const accel_cluster_live_t *live, uint64_t id) {
  for (uint32_t i = 0; i < live->count; ++i) {
    if (live->members[i].id == id) {
      return true;
    }
  }
  return false;
}

void accel_cluster_plan_next(const accel_cluster_record_t *record,
                             const accel_cluster_live_t *live,
                             uint32_t max_size, accel_cluster_plan_t *out) {
  memset(out, 0, sizeof(*out));
  out->next.epoch = record->epoch + 1;
  out->next.version = record->version;
  for (uint32_t i = 0; i < record->count; ++i) {
    if (accel_cluster_live_has(live, record->members[i])) {
      out->next.members[out->next.count++] = record->members[i];
      ++out->survivors;
    } else {
      ++out->failed;
    }
  }
  // |live| is in ascending id order, so joiners come in id order.
  for (uint32_t i = 0; i < live->count; ++i) {
    if (accel_cluster_record_find(record, live->members[i].id) >= 0) {
      continue;
    }
    ++out->joiners;
    if (out->next.count < max_size) {
      out->next.members[out->next.count++] = live->members[i].id;
      ++out->admitted;
    }
  }
}

void accel_cluster_live_sort(accel_cluster_live_t *live) {
  for (uint32_t i = 1; i < live->count; ++i) {
    accel_cluster_live_member_t m = live->members[i];
    uint32_t j = i;
    for (; j > 0 && live->members[j - 1].id > m.id; --j) {
      live->members[j] = live->members[j - 1];
    }
    live->members[j] = m;
  }
}
