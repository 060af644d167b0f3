// Cluster groups: N ranks (processes, on one host or many) whose membership
// advances in epochs. Each rank heartbeats into a membership store; a rank
// that misses its deadline (the heartbeat timeout), or that reports a failure
// of its own (accel_cluster_report_failure: a device lost), is left out of the
// next epoch. Then every surviving rank runs stop-restructure-resume:
//
//   stop         the group calls the application's stop callback, which aborts
//                the rank's in-flight work (destroys its streams created with
//                ACCEL_STREAM_FLAG_ABORT_ON_DESTROY, so their commands fail
//                with ACCEL_ERROR_ABORTED) and returns when it has drained.
//   restructure  the survivors agree on epoch N+1 and its member list in one
//                atomic step of the store (compare-and-swap of the epoch
//                record; on etcd one transaction that also checks every
//                member's registration); ranks are renumbered densely in the
//                order of the previous epoch, ranks that joined since come
//                last; each rank publishes its topology (the JSON form of
//                include/accel/topology.h) under the epoch.
//   resume       once every member of the epoch has published, the group calls
//                the resume callback with the new rank, size and epoch; the
//                application reloads its checkpoint and goes on.
//
// Ranks that start later (replacements) join at the next epoch boundary, as
// long as the epoch stays within the group's maximum size; a group below its
// minimum size waits (stopped) for replacements. A rank left out of an epoch
// while it still runs (its heartbeats were late, or it lost the store for
// longer than the timeout) is evicted: its group fails with
// ACCEL_ERROR_ABORTED and it may join again as a new rank by creating a new
// group handle.
//
// Stores (docs/cluster.md has the layouts):
//   shared memory  one host; the embedded default. A file in /dev/shm holds a
//                  heartbeat word per member and the epoch record, advanced
//                  by compare-and-swap. No daemon.
//   etcd           many hosts; etcd's v3 API through its JSON gateway: a lease
//                  per member as its heartbeat, a watch on the group's keys to
//                  learn of failures at once, transactions to advance the
//                  epoch. accel runs no consensus protocol of its own.
#ifndef ACCEL_CLUSTER_H_
#define ACCEL_CLUSTER_H_

#include "accel/base.h"
#include "accel/device.h"
#include "accel/topology.h"

#ifdef __cplusplus
extern "C" {
#endif

// The most ranks a group holds (members of an epoch plus waiting joiners).
#define ACCEL_CLUSTER_MAX_RANKS 64
// The longest group name, in bytes without the terminating NUL.
#define ACCEL_CLUSTER_NAME_MAX 64
// Rank value of a process that is not a member of the epoch.
#define ACCEL_CLUSTER_NO_RANK UINT32_MAX

typedef struct accel_cluster_group accel_cluster_group_t;
typedef struct accel_cluster_status accel_cluster_status_t;

// Membership stores (accel_cluster_options_t.store).
typedef enum accel_cluster_store_kind {
  // Shared memory on one host (/dev/shm/accel-cluster-NAME); the default.
  ACCEL_CLUSTER_STORE_SHM = 0,
  // An etcd cluster (v3 API through its JSON gateway), for ranks on many
  // hosts.
  ACCEL_CLUSTER_STORE_ETCD = 1,
} accel_cluster_store_kind_t;

// Group flags (accel_cluster_options_t.flags).
typedef uint32_t accel_cluster_flags_t;
enum accel_cluster_flag_bits {
  ACCEL_CLUSTER_FLAG_NONE = 0,
  // No progress thread: the application drives heartbeats, failure
  // detection and restructuring by calling accel_cluster_progress often
  // (at least twice per heartbeat interval). Callbacks then run inside
  // accel_cluster_progress. With an injected clock this makes the timing
  // logic testable without sleeping.
  ACCEL_CLUSTER_FLAG_MANUAL_PROGRESS = 1u << 0,
};

// Where a group stands (accel_cluster_epoch_info_t.state).
typedef enum accel_cluster_state {
  // Registered, waiting to be admitted into an epoch (the first one forms, or
  // a replacement waits for the next boundary).
  ACCEL_CLUSTER_STATE_JOINING = 0,
  // A member of an agreed epoch, waiting for every member's topology.
  ACCEL_CLUSTER_STATE_RESTRUCTURING = 1,
  // A member of the epoch; the resume callback has run.
  ACCEL_CLUSTER_STATE_RUNNING = 2,
  // A member of the epoch saw it fail (a member lost) and stopped; waiting for
  // the next epoch (also while the survivors are fewer than the minimum).
  ACCEL_CLUSTER_STATE_STOPPED = 3,
  // Out of the group for good: evicted, failed or left (the group's calls
  // return ACCEL_ERROR_ABORTED with the reason).
  ACCEL_CLUSTER_STATE_FAILED = 4,
} accel_cluster_state_t;

// A rank's view of its epoch.
typedef struct accel_cluster_epoch_info {
  // sizeof(accel_cluster_epoch_info_t) as the caller compiled it.
  uint32_t struct_size;
  // accel_cluster_state_t.
  uint32_t state;
  // This process's rank in |epoch| (0..size-1); ACCEL_CLUSTER_NO_RANK while
  // joining.
  uint32_t rank;
  // Number of ranks in |epoch|; 0 while joining.
  uint32_t size;
  // The epoch (1 for the first); 0 while joining.
  uint64_t epoch;
  // This process's member id in the store (unique over the group's life).
  uint64_t member_id;
} accel_cluster_epoch_info_t;

// Returns the current time in ns on a monotonic clock, for the timing logic.
typedef uint64_t (*accel_cluster_clock_fn)(void *user);
// Stop: called once when the epoch the rank runs in (|epoch|) has lost a
// member or was superseded. Must abort and drain the rank's in-flight work
// (e.g. destroy its streams made with ACCEL_STREAM_FLAG_ABORT_ON_DESTROY)
// before it returns. Runs on the group's progress thread (or inside
// accel_cluster_progress); must not destroy |group|. Heartbeats go on from
// their own thread meanwhile (not with ACCEL_CLUSTER_FLAG_MANUAL_PROGRESS,
// where the callback must return within the heartbeat timeout).
typedef void (*accel_cluster_stop_fn)(accel_cluster_group_t *group,
                                      uint64_t epoch, void *user);
// Resume: called when the rank is a member of a new epoch whose members have
// all published their topologies; |info| has the new rank, size and epoch.
// Same thread rules as the stop callback.
typedef void (*accel_cluster_resume_fn)(accel_cluster_group_t *group,
                                        const accel_cluster_epoch_info_t *info,
                                        void *user);

// How to make or reach a group. Environment variables override fields:
// ACCEL_CLUSTER_STORE ("shm" or "etcd"), ACCEL_CLUSTER_ETCD_ENDPOINTS,
// ACCEL_CLUSTER_HEARTBEAT_INTERVAL_MS, ACCEL_CLUSTER_HEARTBEAT_TIMEOUT_MS.
typedef struct accel_cluster_options {
  // sizeof(accel_cluster_options_t) as the caller compiled it.
  uint32_t struct_size;
  // accel_cluster_store_kind_t; 0 is shared memory.
  uint32_t store;
  // The group's name: 1 to ACCEL_CLUSTER_NAME_MAX characters of
  // [A-Za-z0-9_.-] (copied). Required.
  const char *name;
  // etcd: comma-separated client URLs ("http://10.0.0.1:2379,..."), tried in
  // turn when one fails; NULL: http://127.0.0.1:2379. Ignored by shm.
  const char *etcd_endpoints;
  // Fewest ranks an epoch may have; 0 means 1.
  uint32_t min_size;
  // Most ranks an epoch may have (joiners beyond it wait); 0 means
  // |min_size|; at most ACCEL_CLUSTER_MAX_RANKS.
  uint32_t max_size;
  // Period of heartbeats; 0: 40 ms on shm, 250 ms on etcd.
  uint64_t heartbeat_interval_ns;
  // A member whose last heartbeat is older than this is failed; 0: 160 ms on
  // shm, 1 s on etcd (etcd leases count whole seconds: rounded up, and etcd
  // may raise it to its minimum TTL). At least twice the interval.
  uint64_t heartbeat_timeout_ns;
  // The first epoch forms when |max_size| ranks have joined, or when at least
  // |min_size| have and none joined for this long; 0 means the heartbeat
  // timeout.
  uint64_t settle_ns;
  // accel_cluster_flag_bits.
  accel_cluster_flags_t flags;
  // Reserved, must be 0.
  uint32_t reserved0;
  // This rank's topology in JSON form (copied); NULL: the live machine's
  // (accel_topology_load, then ACCEL_TOPOLOGY_FORMAT_JSON).
  const char *topology_json;
  // Callbacks (either may be NULL) and the pointer they receive.
  accel_cluster_stop_fn on_stop;
  accel_cluster_resume_fn on_resume;
  void *callback_user;
  // Injected clock (NULL: CLOCK_MONOTONIC) and the pointer it receives. All
  // ranks of a shared-memory group must use the same clock.
  accel_cluster_clock_fn clock;
  void *clock_user;
  // The device this rank computes on (borrowed; outlives the group), or
  // NULL. When its health becomes ACCEL_DEVICE_STATE_LOST (health.h), the
  // group reports the failure for the rank, as accel_cluster_report_failure
  // would, so that it is out of the next epoch.
  accel_device_t *device;
} accel_cluster_options_t;

// Health of a member as a status reader sees it.
typedef enum accel_cluster_health {
  // Last heartbeat at most twice the interval old (etcd: the lease is
  // alive).
  ACCEL_CLUSTER_HEALTH_ALIVE = 0,
  // Heartbeat late: older than twice the interval, not yet the timeout.
  ACCEL_CLUSTER_HEALTH_LATE = 1,
  // Listed in the epoch but its heartbeat is past the timeout (or its lease
  // is gone): the next epoch leaves it out.
  ACCEL_CLUSTER_HEALTH_FAILED = 2,
} accel_cluster_health_t;

// One member in a status snapshot.
typedef struct accel_cluster_member_info {
  // sizeof(accel_cluster_member_info_t) as the caller compiled it.
  uint32_t struct_size;
  // Rank in the snapshot's epoch; ACCEL_CLUSTER_NO_RANK for a joiner that is
  // not in the epoch yet.
  uint32_t rank;
  // Member id in the store.
  uint64_t member_id;
  // Age of the last heartbeat in ns (etcd: whole seconds, from the lease's
  // remaining time); UINT64_MAX when unknown (a failed member).
  uint64_t heartbeat_age_ns;
  // accel_cluster_health_t.
  uint32_t health;
  // Process id on its host; 0 when unknown.
  int32_t pid;
  // Host name the member registered with ("" when unknown).
  char host[64];
} accel_cluster_member_info_t;

// Fills |opts| with defaults: struct_size set, shared memory, no name, sizes
// 1, default timings, no callbacks, the monotonic clock. Thread-safe.
ACCEL_API void accel_cluster_options_init(accel_cluster_options_t *opts);

// Joins the group |opts| describes (creating its store record on first use)
// as a new member, and starts its progress thread unless
// ACCEL_CLUSTER_FLAG_MANUAL_PROGRESS. The rank is admitted into the first
// epoch, or at the next epoch boundary; accel_cluster_wait_epoch waits for it.
// On success |*out_group| is owned by the caller (accel_cluster_group_destroy).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, struct_size too small, a bad
//   name, sizes out of order or above ACCEL_CLUSTER_MAX_RANKS, a timeout below
//   twice the interval, unknown flags, or a bad environment override.
// ACCEL_ERROR_BUSY: the group already holds ACCEL_CLUSTER_MAX_RANKS live
//   members.
// ACCEL_ERROR_UNAVAILABLE: no etcd endpoint answered (joining retries for
//   about two seconds), or accel was built without libcurl and json-c
//   (etcd).
// ACCEL_ERROR_FORMAT: the shared-memory file exists but is not an accel group
//   of this version, or etcd answered with something that is not its API.
// ACCEL_ERROR_IO: the shared-memory file could not be made or mapped.
// ACCEL_ERROR_OUT_OF_MEMORY: host allocation or thread creation failed.
// Thread-safe.
ACCEL_API accel_status_t accel_cluster_group_create(
    const accel_cluster_options_t *opts, accel_cluster_group_t **out_group);

// Leaves the group (the survivors see this rank fail at once, not after the
// timeout), stops the progress thread and frees |group|. NULL is ignored.
// Must not be called from a callback of |group|.
// Not thread-safe: no other call on |group| may run.
ACCEL_API void accel_cluster_group_destroy(accel_cluster_group_t *group);

// Runs one step of a group created with ACCEL_CLUSTER_FLAG_MANUAL_PROGRESS:
// heartbeat when due, read the store, detect failed members, agree on the
// next epoch when one is needed, publish and wait for topologies, run the
// callbacks. Never blocks on time (a store's round trip aside).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL |group|, or a group with its own
//   progress thread.
// ACCEL_ERROR_ABORTED: the rank is out of the group (evicted, left, or
//   failed); the message says why.
// ACCEL_ERROR_UNAVAILABLE: the store did not answer this time (the rank is
//   evicted once that lasts past the heartbeat timeout).
// Thread-compatible: calls on the same |group| must be serialized.
ACCEL_API accel_status_t accel_cluster_progress(accel_cluster_group_t *group);

// Waits until the rank runs in an epoch greater than |after_epoch| (resumed)
// and fills |*out_info| (the caller sets struct_size first). With
// ACCEL_CLUSTER_FLAG_MANUAL_PROGRESS it does not wait: it answers from the
// last accel_cluster_progress.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or struct_size too small.
// ACCEL_ERROR_TIMEOUT: |timeout_ns| passed first (ACCEL_ERROR_NOT_READY with
//   a zero timeout).
// ACCEL_ERROR_ABORTED: the rank is out of the group; the message says why.
// Thread-safe.
ACCEL_API accel_status_t accel_cluster_wait_epoch(
    accel_cluster_group_t *group, uint64_t after_epoch, uint64_t timeout_ns,
    accel_cluster_epoch_info_t *out_info);

// Fills |*out_info| with where the rank stands now (any state, FAILED
// included). ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or struct_size too
// small. Thread-safe.
ACCEL_API accel_status_t accel_cluster_current(
    accel_cluster_group_t *group, accel_cluster_epoch_info_t *out_info);

// Copies the member ids of the rank's current epoch, in rank order, into
// |out_ids| (room for |capacity|) and their number into |*out_count| (0
// while joining). Every member of an epoch sees the same list.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument.
// ACCEL_ERROR_OUT_OF_MEMORY: |capacity| is below the epoch's size
//   (|*out_count| is set, |out_ids| untouched).
// Thread-safe.
ACCEL_API accel_status_t accel_cluster_epoch_members(
    accel_cluster_group_t *group, uint64_t *out_ids, uint32_t capacity,
    uint32_t *out_count);

// Reports that this rank cannot go on (its device is lost, a fatal error):
// it leaves the group at once, so the survivors form the next epoch without
// it, and its group fails with ACCEL_ERROR_ABORTED and |reason| from now on.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument.
// ACCEL_ERROR_ABORTED: the rank was already out of the group.
// Thread-safe.
ACCEL_API accel_status_t accel_cluster_report_failure(
    accel_cluster_group_t *group, const char *reason);

// Returns in |*out_topology| the topology that rank |rank| of the current
// epoch published (owned by the caller: accel_topology_destroy).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or |rank| >= the epoch's size.
// ACCEL_ERROR_NOT_READY: the rank is not running in an epoch.
// ACCEL_ERROR_NOT_FOUND: that rank has not published (it failed).
// ACCEL_ERROR_ABORTED: the rank is out of the group.
// Other codes: those of accel_topology_deserialize.
// Thread-safe.
ACCEL_API accel_status_t accel_cluster_topology(
    accel_cluster_group_t *group, uint32_t rank,
    accel_topology_t **out_topology);

// Reads the state of the group |opts| describes without joining it: the
// epoch, its members and the joiners, with health and heartbeat ages (for
// accel-cluster status). |*out_status| is owned by the caller
// (accel_cluster_status_destroy).
// ACCEL_ERROR_INVALID_ARGUMENT: as accel_cluster_group_create.
// ACCEL_ERROR_NOT_FOUND: no such group (shared memory: no file).
// ACCEL_ERROR_UNAVAILABLE, ACCEL_ERROR_FORMAT, ACCEL_ERROR_IO: as
//   accel_cluster_group_create.
// Thread-safe.
ACCEL_API accel_status_t accel_cluster_status_load(
    const accel_cluster_options_t *opts, accel_cluster_status_t **out_status);

// Returns the snapshot's epoch (0: none formed yet) and in
// |*out_member_count| its members plus joiners. Both outputs may be NULL.
// Thread-safe.
ACCEL_API uint64_t accel_cluster_status_epoch(
    const accel_cluster_status_t *status, uint32_t *out_member_count);

// Fills |*out_info| (the caller sets struct_size first) for member |index|:
// the epoch's members in rank order, then the joiners.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, struct_size too small, or
//   |index| >= the member count.
// Thread-safe.
ACCEL_API accel_status_t accel_cluster_status_member(
    const accel_cluster_status_t *status, uint32_t index,
    accel_cluster_member_info_t *out_info);

// Frees |status|. NULL is ignored. Not thread-safe: no other call on
// |status| may run.
ACCEL_API void accel_cluster_status_destroy(accel_cluster_status_t *status);

// Removes the group's record from its store (the shared-memory file, or
// every etcd key under the group's prefix). Members still running then fail
// as if evicted. For operators and tests, after a job ends.
// ACCEL_ERROR_INVALID_ARGUMENT: as accel_cluster_group_create.
// ACCEL_ERROR_NOT_FOUND: no such group (shared memory).
// ACCEL_ERROR_UNAVAILABLE: no etcd endpoint answered.
// Thread-safe.
ACCEL_API accel_status_t accel_cluster_remove(
    const accel_cluster_options_t *opts);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_CLUSTER_H_
