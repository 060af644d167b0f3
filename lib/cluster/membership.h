// The membership rule, apart from any store: from the agreed record and the
// live members, which members failed, which wait to join, and the record of
// the next epoch (survivors keep their relative order and so are renumbered
// densely; joiners follow in id order, up to the maximum size).
#ifndef ACCEL_CLUSTER_MEMBERSHIP_H_
#define ACCEL_CLUSTER_MEMBERSHIP_H_

#include <stdbool.h>

#include "cluster/store_impl.h"

typedef struct accel_cluster_plan {
  accel_cluster_record_t next;  // version copied from the current record
  uint32_t failed;     // members of the record not live
  uint32_t survivors;  // members of the record still live
  uint32_t joiners;    // live members not in the record
  uint32_t admitted;   // joiners that fit within max_size
} accel_cluster_plan_t;

// Plans the next epoch after |record| given |live|, within |max_size|.
void accel_cluster_plan_next(const accel_cluster_record_t *record,
                             const accel_cluster_live_t *live,
                             uint32_t max_size, accel_cluster_plan_t *out);

// Index of |id| in |record| (its rank), or -1.
int accel_cluster_record_find(const accel_cluster_record_t *record,
                              uint64_t id);

// Whether |id| is among |live|.
bool accel_cluster_live_has(const accel_cluster_live_t *live, uint64_t id);

// Sorts |live| by ascending id.
void accel_cluster_live_sort(accel_cluster_live_t *live);

#endif  // ACCEL_CLUSTER_MEMBERSHIP_H_
