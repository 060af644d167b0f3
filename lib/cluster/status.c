// Status snapshots: a group's epoch, members and joiners with their health,
// read from the store without joining (accel-cluster status).
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accel/cluster.h"
#include "cluster/group_impl.h"
#include "cluster/membership.h"
#include "core/error.h"

struct accel_cluster_status {
  uint64_t epoch;
  uint32_t count;
  accel_cluster_member_info_t members[2 * ACCEL_CLUSTER_MAX_RANKS];
};

static uint64_t status_now(const accel_cluster_resolved_t *cfg) {
  if (cfg->clock != NULL) {
    return cfg->clock(cfg->clock_user);
  }
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t health_of(uint64_t age, const accel_cluster_store_t *store) {
  if (age == UINT64_MAX || age >= store->config.timeout_ns) {
    return ACCEL_CLUSTER_HEALTH_FAILED;
  }
  return age > 2 * store->config.interval_ns ? ACCEL_CLUSTER_HEALTH_LATE
                                             : ACCEL_CLUSTER_HEALTH_ALIVE;
}

static void add_member(accel_cluster_status_t *st, accel_cluster_store_t *store,
                       const accel_cluster_live_t *live, uint64_t id,
                       uint32_t rank, uint64_t now) {
  accel_cluster_member_info_t *m = &st->members[st->count++];
  memset(m, 0, sizeof(*m));
  m->struct_size = sizeof(*m);
  m->rank = rank;
  m->member_id = id;
  m->heartbeat_age_ns = UINT64_MAX;
  m->health = ACCEL_CLUSTER_HEALTH_FAILED;
  for (uint32_t i = 0; i < live->count; ++i) {
    if (live->members[i].id != id) {
      continue;
    }
    m->pid = live->members[i].pid;
    memcpy(m->host, live->members[i].host, sizeof(m->host));
    uint64_t age = live->members[i].age_ns;
    if (age != UINT64_MAX) {
      m->heartbeat_age_ns = age;
      m->health = health_of(age, store);
    } else {
      // etcd: the lease is alive, so the member is; its age comes from the
      // lease's remaining time, in whole seconds.
      store->ops->heartbeat_age(store, id, now, &m->heartbeat_age_ns);
      m->health = ACCEL_CLUSTER_HEALTH_ALIVE;
    }
  }
}

accel_status_t accel_cluster_status_load(const accel_cluster_options_t *opts,
                                         accel_cluster_status_t **out_status) {
  ACCEL_CHECK_ARG(out_status != NULL, "out_status (NULL)");
  accel_cluster_resolved_t cfg;
  ACCEL_RETURN_IF_ERROR(accel_cluster_resolve(opts, __func__, &cfg));
  accel_cluster_status_t *st = calloc(1, sizeof(*st));
  if (st == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "cluster status: no memory");
  }
  accel_cluster_store_t *store = NULL;
  accel_status_t status = accel_cluster_store_open(&cfg, false, &store);
  if (status != ACCEL_OK) {
    free(st);
    return status;
  }
  accel_cluster_record_t *rec = malloc(sizeof(*rec));
  accel_cluster_live_t *live = malloc(sizeof(*live));
  if (rec == NULL || live == NULL) {
    status = accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "cluster status: no memory");
    goto done;
  }
  uint64_t now = status_now(&cfg);
  status = store->ops->snapshot(store, now, rec, live);
  if (status != ACCEL_OK) {
    goto done;
  }
  st->epoch = rec->epoch;
  for (uint32_t r = 0; r < rec->count; ++r) {
    add_member(st, store, live, rec->members[r], r, now);
  }
  for (uint32_t i = 0; i < live->count; ++i) {
    if (accel_cluster_record_find(rec, live->members[i].id) < 0) {
      add_member(st, store, live, live->members[i].id, ACCEL_CLUSTER_NO_RANK,
                 now);
    }
  }
done:
  free(rec);
  free(live);
  store->ops->destroy(store);
  if (status != ACCEL_OK) {
    free(st);
    return status;
  }
  *out_status = st;
  return ACCEL_OK;
}

uint64_t accel_cluster_status_epoch(const accel_cluster_status_t *status,
                                    uint32_t *out_member_count) {
  if (status == NULL) {
    if (out_member_count != NULL) {
      *out_member_count = 0;
    }
    return 0;
  }
  if (out_member_count != NULL) {
    *out_member_count = status->count;
  }
  return status->epoch;
}

accel_status_t accel_cluster_status_member(
    const accel_cluster_status_t *status, uint32_t index,
    accel_cluster_member_info_t *out_info) {
  ACCEL_CHECK_ARG(status != NULL, "status (NULL)");
  if (out_info == NULL || out_info->struct_size < sizeof(*out_info)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_cluster_status_member: out_info is NULL or its "
                       "struct_size is below %zu", sizeof(*out_info));
  }
  if (index >= status->count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_cluster_status_member: index %u out of range: "
                       "%u members", index, status->count);
  }
  *out_info = status->members[index];
  return ACCEL_OK;
}

void accel_cluster_status_destroy(accel_cluster_status_t *status) {
  free(status);
}
