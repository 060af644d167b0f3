// The membership store interface: what the group logic (group.c) needs from
// shared memory (store_shm.c) and from etcd (store_etcd.c). A store keeps the
// members' registrations with their heartbeats, the epoch record (advanced
// only by compare-and-swap), and each epoch's published topologies.
#ifndef ACCEL_CLUSTER_STORE_IMPL_H_
#define ACCEL_CLUSTER_STORE_IMPL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/cluster.h"

// An epoch record: the agreed member list in rank order.
typedef struct accel_cluster_record {
  uint64_t epoch;  // 0: no epoch formed yet
  uint32_t count;
  uint64_t members[ACCEL_CLUSTER_MAX_RANKS];  // member ids, index = rank
  // The store's compare-and-swap token for this record (shm: the current
  // word; etcd: the key's mod_revision; 0 when absent).
  uint64_t version;
} accel_cluster_record_t;

// A live member as the store sees it.
typedef struct accel_cluster_live_member {
  uint64_t id;
  uint64_t age_ns;  // since its last heartbeat; UINT64_MAX: unknown
  int32_t pid;
  char host[64];
} accel_cluster_live_member_t;

typedef struct accel_cluster_live {
  uint32_t count;  // in ascending id order
  accel_cluster_live_member_t members[ACCEL_CLUSTER_MAX_RANKS];
} accel_cluster_live_t;

// Resolved options a store needs.
typedef struct accel_cluster_store_config {
  char name[ACCEL_CLUSTER_NAME_MAX + 1];
  const char *etcd_endpoints;  // borrowed for the call that opens
  uint64_t interval_ns;
  uint64_t timeout_ns;
  uint32_t min_size;
  uint32_t max_size;
} accel_cluster_store_config_t;

typedef struct accel_cluster_store accel_cluster_store_t;

typedef struct accel_cluster_store_ops {
  // Frees the store (does not leave: call leave first).
  void (*destroy)(accel_cluster_store_t *store);
  // Registers this process as a new live member; returns its id.
  // ACCEL_ERROR_BUSY when the group is full.
  accel_status_t (*join)(accel_cluster_store_t *store, uint64_t now_ns,
                         uint64_t *out_id);
  // Deregisters this process (the others see it gone at once).
  accel_status_t (*leave)(accel_cluster_store_t *store);
  // Renews this member's registration. ACCEL_ERROR_ABORTED: it is gone
  // (taken over or expired); ACCEL_ERROR_UNAVAILABLE: the store is not
  // reachable now.
  accel_status_t (*heartbeat)(accel_cluster_store_t *store, uint64_t now_ns);
  // Reads the epoch record and the live members (those whose heartbeat is
  // within the timeout at |now_ns|, or whose lease is alive).
  accel_status_t (*snapshot)(accel_cluster_store_t *store, uint64_t now_ns,
                             accel_cluster_record_t *out_record,
                             accel_cluster_live_t *out_live);
  // Replaces the record whose version is |expected|->version with |next|
  // (every member of |next| must still be registered on etcd). *out_won says
  // whether this call did it.
  accel_status_t (*propose)(accel_cluster_store_t *store,
                            const accel_cluster_record_t *expected,
                            const accel_cluster_record_t *next,
                            bool *out_won);
  // Publishes this member's topology for |epoch| as |rank|.
  accel_status_t (*publish)(accel_cluster_store_t *store, uint64_t epoch,
                            uint32_t rank, const char *json, size_t length);
  // Reads the topology published for |epoch| by |rank| (member |member_id|)
  // into a malloc'ed string (*out_json, NUL-terminated, freed by the
  // caller); NULL *out_json: not published.
  accel_status_t (*fetch)(accel_cluster_store_t *store, uint64_t epoch,
                          uint32_t rank, uint64_t member_id, char **out_json,
                          size_t *out_length);
  // Blocks (real time) until the store changed after the last call that
  // returned, or |timeout_ns| passed.
  void (*wait)(accel_cluster_store_t *store, uint64_t timeout_ns);
  // Wakes this process's waiter in |wait| now (another thread asks).
  void (*wake)(accel_cluster_store_t *store);
  // Age of member |id|'s last heartbeat (UINT64_MAX when unknown).
  accel_status_t (*heartbeat_age)(accel_cluster_store_t *store, uint64_t id,
                                  uint64_t now_ns, uint64_t *out_age_ns);
} accel_cluster_store_ops_t;

struct accel_cluster_store {
  const accel_cluster_store_ops_t *ops;
  accel_cluster_store_config_t config;
};

// Opens the shared-memory store of |config|->name; |create| makes it when
// absent (else ACCEL_ERROR_NOT_FOUND).
accel_status_t accel_cluster_shm_open(const accel_cluster_store_config_t *config,
                                      bool create,
                                      accel_cluster_store_t **out_store);
accel_status_t accel_cluster_shm_remove(const char *name);

// Opens the etcd store (checks that an endpoint answers).
accel_status_t accel_cluster_etcd_open(
    const accel_cluster_store_config_t *config,
    accel_cluster_store_t **out_store);
accel_status_t accel_cluster_etcd_remove(
    const accel_cluster_store_config_t *config);

// The host name this process registers with (gethostname, truncated).
void accel_cluster_hostname(char out[64]);

#endif  // ACCEL_CLUSTER_STORE_IMPL_H_
