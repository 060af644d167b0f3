// Internal interface of lib/cluster: options resolved once (defaults,
// environment, validation) and the group's step, which tests drive directly.
#ifndef ACCEL_CLUSTER_GROUP_IMPL_H_
#define ACCEL_CLUSTER_GROUP_IMPL_H_

#include <stdbool.h>

#include "accel/cluster.h"
#include "cluster/store_impl.h"

// Defaults (docs/cluster.md: shm detection within 250 ms, etcd within 2 s).
#define ACCEL_CLUSTER_SHM_INTERVAL_NS 40000000ull
#define ACCEL_CLUSTER_SHM_TIMEOUT_NS 160000000ull
#define ACCEL_CLUSTER_ETCD_INTERVAL_NS 250000000ull
#define ACCEL_CLUSTER_ETCD_TIMEOUT_NS 1000000000ull
#define ACCEL_CLUSTER_ETCD_DEFAULT_ENDPOINT "http://127.0.0.1:2379"

typedef struct accel_cluster_resolved {
  uint32_t store;
  char name[ACCEL_CLUSTER_NAME_MAX + 1];
  char endpoints[1024];
  uint32_t min_size;
  uint32_t max_size;
  uint64_t interval_ns;
  uint64_t timeout_ns;
  uint64_t settle_ns;
  uint32_t flags;
  const char *topology_json;  // borrowed until the group is made
  accel_cluster_stop_fn on_stop;
  accel_cluster_resume_fn on_resume;
  void *callback_user;
  accel_cluster_clock_fn clock;
  void *clock_user;
  accel_device_t *device;  // whose loss fails this rank (may be NULL)
} accel_cluster_resolved_t;

// Validates |opts|, applies defaults and the environment (ACCEL_CLUSTER_*).
accel_status_t accel_cluster_resolve(const accel_cluster_options_t *opts,
                                     const char *fn,
                                     accel_cluster_resolved_t *out);

// Opens the store |cfg| names; |create| makes a shared-memory store.
accel_status_t accel_cluster_store_open(const accel_cluster_resolved_t *cfg,
                                        bool create,
                                        accel_cluster_store_t **out_store);

// Copies |json| (or formats the live machine's topology when NULL) into a
// malloc'ed string.
accel_status_t accel_cluster_topology_text(const char *json, char **out_text,
                                           size_t *out_length);

// Makes a group from resolved options (accel_cluster_group_create).
accel_status_t accel_cluster_group_open(const accel_cluster_resolved_t *cfg,
                                        accel_cluster_group_t **out_group);

// One step of the group's state machine; *out_again when the store moved
// because of this step (run another at once).
accel_status_t accel_cluster_group_step(accel_cluster_group_t *group,
                                        bool *out_again);

#endif  // ACCEL_CLUSTER_GROUP_IMPL_H_
