// Cluster groups: the per-rank state machine of stop-restructure-resume over
// a membership store (store_impl.h). One step (group_step) heartbeats when
// due, reads the store, adopts a newer agreed epoch, publishes this rank's
// topology and waits for the others', detects failed members and proposes
// the next epoch. A progress thread runs steps, sleeping on the store's
// change notification between them, unless the application drives them
// (ACCEL_CLUSTER_FLAG_MANUAL_PROGRESS). With a progress thread, heartbeats
// come from a thread of their own, so that a stop callback that takes a while
// to drain does not make the rank look failed.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "accel/cluster.h"
#include "accel/health.h"
#include "cluster/group_impl.h"
#include "cluster/membership.h"
#include "core/error.h"
#include "core/lock.h"

struct accel_cluster_group {
  accel_cluster_store_t *store;
  accel_cluster_resolved_t cfg;
  char *topology_json;
  size_t topology_length;
  uint64_t self_id;

  // Touched only by the progress caller (the thread, or the application's
  // serialized accel_cluster_progress calls).
  _Atomic uint64_t last_beat_ns;  // last successful heartbeat
  uint64_t live_signature;
  uint64_t live_changed_ns;
  accel_cluster_record_t record;  // the epoch this rank is a member of
  uint64_t stopped_epoch;         // the epoch the stop callback ran for
  bool published;

  pthread_mutex_t mutex;
  pthread_cond_t cond;  // broadcast on every change of |info|
  accel_cluster_epoch_info_t info;           // guarded by mutex
  uint64_t members[ACCEL_CLUSTER_MAX_RANKS];  // guarded by mutex
  accel_error_state_t failure;  // sticky; set once the rank is out

  _Atomic bool leave_requested;
  _Atomic bool quit;
  bool has_thread;
  pthread_t thread;

  // Heartbeats and leaving are serialized by beat_mutex (both change the
  // store's registration of this member).
  pthread_mutex_t beat_mutex;
  pthread_cond_t beat_cond;  // wakes the heartbeat thread to quit
  bool left;                 // guarded by beat_mutex
  _Atomic int beat_status;   // of the last heartbeat
  char beat_message[ACCEL_ERROR_MESSAGE_MAX];  // guarded by beat_mutex
  bool has_beat_thread;
  pthread_t beat_thread;
};

// Joining retries a store that does not answer, 100 ms apart (3 s or so).
#define JOIN_ATTEMPTS 20

static uint64_t monotonic_ns(void *user) {
  (void)user;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t group_now(const accel_cluster_group_t *g) {
  return g->cfg.clock(g->cfg.clock_user);
}

// Leaves the store once (the others see this member gone at once).
static void leave_store(accel_cluster_group_t *g) {
  pthread_mutex_lock(&g->beat_mutex);
  if (!g->left) {
    g->left = true;
    g->store->ops->leave(g->store);
  }
  pthread_mutex_unlock(&g->beat_mutex);
}

// Heartbeats when an interval has passed since the last one that got
// through; records the outcome for the progress step.
static void heartbeat(accel_cluster_group_t *g, uint64_t now) {
  pthread_mutex_lock(&g->beat_mutex);
  uint64_t last = atomic_load_explicit(&g->last_beat_ns, memory_order_relaxed);
  if (!g->left && now > last && now - last >= g->cfg.interval_ns) {
    accel_status_t status = g->store->ops->heartbeat(g->store, now);
    if (status == ACCEL_OK) {
      atomic_store_explicit(&g->last_beat_ns, now, memory_order_relaxed);
    } else {
      snprintf(g->beat_message, sizeof(g->beat_message), "%s",
               accel_last_error());
    }
    atomic_store_explicit(&g->beat_status, status, memory_order_relaxed);
  }
  pthread_mutex_unlock(&g->beat_mutex);
}

static void *beat_main(void *arg) {
  accel_cluster_group_t *g = arg;
  pthread_mutex_lock(&g->beat_mutex);
  while (!atomic_load_explicit(&g->quit, memory_order_relaxed)) {
    pthread_mutex_unlock(&g->beat_mutex);
    heartbeat(g, group_now(g));
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    uint64_t ns = (uint64_t)deadline.tv_nsec + g->cfg.interval_ns / 4;
    deadline.tv_sec += (time_t)(ns / 1000000000ull);
    deadline.tv_nsec = (long)(ns % 1000000000ull);
    pthread_mutex_lock(&g->beat_mutex);
    if (!atomic_load_explicit(&g->quit, memory_order_relaxed)) {
      pthread_cond_timedwait(&g->beat_cond, &g->beat_mutex, &deadline);
    }
  }
  pthread_mutex_unlock(&g->beat_mutex);
  return NULL;
}

static void set_info_locked(accel_cluster_group_t *g, uint32_t state) {
  ACCEL_ASSERT_HELD(&g->mutex);
  g->info.state = state;
  pthread_cond_broadcast(&g->cond);
}

static void set_state(accel_cluster_group_t *g, uint32_t state) {
  pthread_mutex_lock(&g->mutex);
  set_info_locked(g, state);
  pthread_mutex_unlock(&g->mutex);
}

// Takes the rank out of the group for good with |status| and the thread's
// current message, leaving the store so the others see it at once.
static accel_status_t group_fail(accel_cluster_group_t *g,
                                 accel_status_t status) {
  accel_error_state_set(&g->failure, status, "%s", accel_last_error());
  leave_store(g);
  set_state(g, ACCEL_CLUSTER_STATE_FAILED);
  return accel_error_state_report(&g->failure);
}

static void call_stop(accel_cluster_group_t *g, uint64_t epoch) {
  if (g->stopped_epoch == epoch) {
    return;
  }
  g->stopped_epoch = epoch;
  set_state(g, ACCEL_CLUSTER_STATE_STOPPED);
  if (g->cfg.on_stop != NULL) {
    g->cfg.on_stop(g, epoch, g->cfg.callback_user);
  }
}

// A store call failed with |status|: UNAVAILABLE is forgiven until the
// heartbeat timeout has passed since the last heartbeat that got through.
static accel_status_t store_trouble(accel_cluster_group_t *g,
                                    accel_status_t status, uint64_t now) {
  uint64_t last = atomic_load_explicit(&g->last_beat_ns, memory_order_relaxed);
  // The heartbeat thread may have renewed after this step read the clock.
  uint64_t since = now > last ? now - last : 0;
  if (status == ACCEL_ERROR_UNAVAILABLE && since < g->cfg.timeout_ns) {
    return status;
  }
  if (status == ACCEL_ERROR_UNAVAILABLE) {
    accel_error_context(ACCEL_ERROR_ABORTED,
                        "group \"%s\": evicted: the store was unreachable for "
                        "%llu ms (timeout %llu ms)", g->cfg.name,
                        (unsigned long long)(since / 1000000),
                        (unsigned long long)(g->cfg.timeout_ns / 1000000));
    return group_fail(g, ACCEL_ERROR_ABORTED);
  }
  return group_fail(g, ACCEL_ERROR_ABORTED);
}

static uint64_t live_signature(const accel_cluster_live_t *live) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the ids
  for (uint32_t i = 0; i < live->count; ++i) {
    h = (h ^ live->members[i].id) * 1099511628211ull;
  }
  return h ^ live->count;
}

// Adopts |rec|, newer than this rank's epoch.
static accel_status_t adopt(accel_cluster_group_t *g,
                            const accel_cluster_record_t *rec) {
  int rank = accel_cluster_record_find(rec, g->self_id);
  if (rank < 0) {
    if (g->record.epoch == 0) {
      return ACCEL_OK;  // a joiner not admitted yet: wait for the next one
    }
    accel_error(ACCEL_ERROR_ABORTED,
                "group \"%s\": evicted: epoch %llu leaves this rank out (its "
                "heartbeats reached the others too late)", g->cfg.name,
                (unsigned long long)rec->epoch);
    return group_fail(g, ACCEL_ERROR_ABORTED);
  }
  if (g->record.epoch > 0) {
    call_stop(g, g->record.epoch);
  }
  g->record = *rec;
  g->published = false;
  pthread_mutex_lock(&g->mutex);
  g->info.rank = (uint32_t)rank;
  g->info.size = rec->count;
  g->info.epoch = rec->epoch;
  memcpy(g->members, rec->members, rec->count * sizeof(rec->members[0]));
  set_info_locked(g, ACCEL_CLUSTER_STATE_RESTRUCTURING);
  pthread_mutex_unlock(&g->mutex);
  return ACCEL_OK;
}

// Publishes this rank's topology once per epoch and resumes when every
// member's is there.
static accel_status_t restructure(accel_cluster_group_t *g) {
  if (!g->published) {
    ACCEL_RETURN_IF_ERROR(g->store->ops->publish(
        g->store, g->record.epoch, g->info.rank, g->topology_json,
        g->topology_length));
    g->published = true;
  }
  for (uint32_t r = 0; r < g->record.count; ++r) {
    char *json = NULL;
    size_t length = 0;
    ACCEL_RETURN_IF_ERROR(g->store->ops->fetch(
        g->store, g->record.epoch, r, g->record.members[r], &json, &length));
    if (json == NULL) {
      return ACCEL_OK;
    }
    free(json);
  }
  accel_cluster_epoch_info_t info;
  pthread_mutex_lock(&g->mutex);
  set_info_locked(g, ACCEL_CLUSTER_STATE_RUNNING);
  info = g->info;
  pthread_mutex_unlock(&g->mutex);
  if (g->cfg.on_resume != NULL) {
    g->cfg.on_resume(g, &info, g->cfg.callback_user);
  }
  return ACCEL_OK;
}

// Proposes the next epoch when one is due; *out_again when the store moved.
static accel_status_t maybe_propose(accel_cluster_group_t *g,
                                    const accel_cluster_record_t *rec,
                                    const accel_cluster_live_t *live,
                                    uint64_t now, bool *out_again) {
  accel_cluster_plan_t plan;
  accel_cluster_plan_next(rec, live, g->cfg.max_size, &plan);
  bool member = rec->epoch > 0 && g->record.epoch == rec->epoch;
  bool due;
  if (rec->epoch == 0) {
    due = live->count >= g->cfg.max_size ||
          (live->count >= g->cfg.min_size &&
           now - g->live_changed_ns >= g->cfg.settle_ns);
  } else {
    if (member && plan.failed > 0) {
      call_stop(g, rec->epoch);  // a member is lost: stop now
    }
    // Survivors propose; joiners only when no survivor is left to. A rank
    // that stopped this epoch needs the next one even if the member it saw
    // fail came back (late, not dead) before an epoch could form without it.
    bool may = member || plan.survivors == 0;
    bool stopped = member && g->stopped_epoch == rec->epoch;
    due = may && (plan.failed > 0 || stopped ||
                  (plan.admitted > 0 && rec->count < g->cfg.max_size));
  }
  if (!due || plan.next.count < g->cfg.min_size) {
    return ACCEL_OK;
  }
  bool won = false;
  ACCEL_RETURN_IF_ERROR(g->store->ops->propose(g->store, rec, &plan.next,
                                               &won));
  *out_again = true;
  return ACCEL_OK;
}

// Whether the rank's device is lost (include/accel/health.h); if so, the
// rank reports its failure (it leaves at the next step, out of the next
// epoch).
static bool device_lost(accel_cluster_group_t *g) {
  accel_device_health_t h = {.struct_size = sizeof(h)};
  if (accel_device_health(g->cfg.device, &h) != ACCEL_OK ||
      h.state != ACCEL_DEVICE_STATE_LOST) {
    return false;
  }
  char reason[320];
  snprintf(reason, sizeof(reason), "its device is lost: %s", h.last_message);
  return accel_cluster_report_failure(g, reason) == ACCEL_OK;
}

accel_status_t accel_cluster_group_step(accel_cluster_group_t *g,
                                        bool *out_again) {
  *out_again = false;
  accel_status_t status = accel_error_state_report(&g->failure);
  if (status != ACCEL_OK) {
    if (atomic_exchange_explicit(&g->leave_requested, false,
                                 memory_order_relaxed)) {
      leave_store(g);
      set_state(g, ACCEL_CLUSTER_STATE_FAILED);
    }
    return status;
  }
  if (g->cfg.device != NULL && device_lost(g)) {
    return accel_cluster_group_step(g, out_again);  // leaves at once
  }
  uint64_t now = group_now(g);
  if (!g->has_beat_thread) {
    heartbeat(g, now);
  }
  status = (accel_status_t)atomic_load_explicit(&g->beat_status,
                                                memory_order_relaxed);
  if (status != ACCEL_OK) {
    pthread_mutex_lock(&g->beat_mutex);
    accel_error(status, "%s", g->beat_message);
    pthread_mutex_unlock(&g->beat_mutex);
    status = store_trouble(g, status, now);
    if (status != ACCEL_ERROR_UNAVAILABLE) {
      return status;
    }
  }
  accel_cluster_record_t rec;
  accel_cluster_live_t live;
  status = g->store->ops->snapshot(g->store, now, &rec, &live);
  if (status != ACCEL_OK) {
    return store_trouble(g, status, now);
  }
  uint64_t sig = live_signature(&live);
  if (sig != g->live_signature) {
    g->live_signature = sig;
    g->live_changed_ns = now;
  }
  if (rec.epoch > g->record.epoch) {
    ACCEL_RETURN_IF_ERROR(adopt(g, &rec));
  }
  if (g->info.state == ACCEL_CLUSTER_STATE_RESTRUCTURING &&
      rec.epoch == g->record.epoch) {
    status = restructure(g);
    if (status != ACCEL_OK) {
      return store_trouble(g, status, now);
    }
  }
  status = maybe_propose(g, &rec, &live, now, out_again);
  return status == ACCEL_OK ? ACCEL_OK : store_trouble(g, status, now);
}

static void *progress_main(void *arg) {
  accel_cluster_group_t *g = arg;
  // Half the interval between steps: a failure is seen within the timeout
  // plus half an interval; the store's notification wakes the thread sooner
  // on any change.
  uint64_t period = g->cfg.interval_ns / 2;
  while (!atomic_load_explicit(&g->quit, memory_order_relaxed)) {
    bool again = false;
    accel_status_t status = accel_cluster_group_step(g, &again);
    if (status == ACCEL_OK || status == ACCEL_ERROR_UNAVAILABLE) {
      if (!again) {
        g->store->ops->wait(g->store, period);
      }
      continue;
    }
    if (accel_error_state_code(&g->failure) != ACCEL_OK) {
      break;  // out of the group: nothing more to do
    }
    g->store->ops->wait(g->store, period);
  }
  return NULL;
}

accel_status_t accel_cluster_group_open(const accel_cluster_resolved_t *cfg,
                                        accel_cluster_group_t **out_group) {
  accel_cluster_group_t *g = calloc(1, sizeof(*g));
  if (g == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "cluster group: no memory");
  }
  accel_status_t status = ACCEL_OK;
  g->cfg = *cfg;
  if (g->cfg.clock == NULL) {
    g->cfg.clock = monotonic_ns;
  }
  accel_error_state_init(&g->failure);
  g->info.struct_size = sizeof(g->info);
  g->info.state = ACCEL_CLUSTER_STATE_JOINING;
  g->info.rank = ACCEL_CLUSTER_NO_RANK;
  status = accel_cluster_topology_text(cfg->topology_json, &g->topology_json,
                                       &g->topology_length);
  if (status != ACCEL_OK) {
    goto err_free;
  }
  status = accel_cluster_store_open(&g->cfg, true, &g->store);
  if (status != ACCEL_OK) {
    goto err_free_topology;
  }
  // A busy store (etcd under load) may miss a request's deadline: retry
  // for a while before giving up on joining.
  uint64_t now = group_now(g);
  for (int attempt = 0;; ++attempt) {
    status = g->store->ops->join(g->store, now, &g->self_id);
    if (status != ACCEL_ERROR_UNAVAILABLE || attempt == JOIN_ATTEMPTS - 1) {
      break;
    }
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
    now = group_now(g);
  }
  if (status != ACCEL_OK) {
    goto err_close_store;
  }
  // The store's settings win (shm: the creator's; etcd: the TTL granted), so
  // all members agree.
  g->cfg.interval_ns = g->store->config.interval_ns;
  g->cfg.timeout_ns = g->store->config.timeout_ns;
  g->info.member_id = g->self_id;
  atomic_init(&g->last_beat_ns, now);
  g->live_changed_ns = now;
  pthread_mutex_init(&g->mutex, NULL);
  pthread_mutex_init(&g->beat_mutex, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&g->cond, &attr);
  pthread_cond_init(&g->beat_cond, &attr);
  pthread_condattr_destroy(&attr);
  if (!(cfg->flags & ACCEL_CLUSTER_FLAG_MANUAL_PROGRESS)) {
    // The flags are set before the threads start: the progress thread reads
    // has_beat_thread.
    g->has_thread = true;
    g->has_beat_thread = true;
    if (pthread_create(&g->beat_thread, NULL, beat_main, g) != 0) {
      status = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                           "group \"%s\": cannot start the heartbeat thread",
                           cfg->name);
      goto err_leave;
    }
    if (pthread_create(&g->thread, NULL, progress_main, g) != 0) {
      status = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                           "group \"%s\": cannot start the progress thread",
                           cfg->name);
      goto err_stop_beats;
    }
  }
  *out_group = g;
  return ACCEL_OK;

err_stop_beats:
  atomic_store_explicit(&g->quit, true, memory_order_relaxed);
  pthread_mutex_lock(&g->beat_mutex);
  pthread_cond_signal(&g->beat_cond);
  pthread_mutex_unlock(&g->beat_mutex);
  pthread_join(g->beat_thread, NULL);
err_leave:
  leave_store(g);
  pthread_cond_destroy(&g->beat_cond);
  pthread_cond_destroy(&g->cond);
  pthread_mutex_destroy(&g->beat_mutex);
  pthread_mutex_destroy(&g->mutex);
err_close_store:
  g->store->ops->destroy(g->store);
err_free_topology:
  free(g->topology_json);
err_free:
  free(g);
  return status;
}

void accel_cluster_group_destroy(accel_cluster_group_t *g) {
  if (g == NULL) {
    return;
  }
  atomic_store_explicit(&g->quit, true, memory_order_relaxed);
  if (g->has_thread) {
    g->store->ops->wake(g->store);
    pthread_join(g->thread, NULL);
  }
  if (g->has_beat_thread) {
    pthread_mutex_lock(&g->beat_mutex);
    pthread_cond_signal(&g->beat_cond);
    pthread_mutex_unlock(&g->beat_mutex);
    pthread_join(g->beat_thread, NULL);
  }
  leave_store(g);
  g->store->ops->destroy(g->store);
  pthread_cond_destroy(&g->beat_cond);
  pthread_cond_destroy(&g->cond);
  pthread_mutex_destroy(&g->beat_mutex);
  pthread_mutex_destroy(&g->mutex);
  free(g->topology_json);
  free(g);
}

accel_status_t accel_cluster_progress(accel_cluster_group_t *g) {
  ACCEL_CHECK_ARG(g != NULL, "group (NULL)");
  if (g->has_thread) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_cluster_progress: group \"%s\" runs its own "
                       "progress thread (no ACCEL_CLUSTER_FLAG_MANUAL_PROGRESS)",
                       g->cfg.name);
  }
  bool again = true;
  accel_status_t status = ACCEL_OK;
  // A few steps at most: adopt what this step proposed at once.
  for (int i = 0; i < 4 && again && status == ACCEL_OK; ++i) {
    status = accel_cluster_group_step(g, &again);
  }
  return status;
}

static accel_status_t check_info(const accel_cluster_epoch_info_t *info,
                                 const char *fn) {
  if (info == NULL || info->struct_size < sizeof(*info)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "%s: out_info is NULL or its struct_size is below %zu",
                       fn, sizeof(*info));
  }
  return ACCEL_OK;
}

accel_status_t accel_cluster_wait_epoch(accel_cluster_group_t *g,
                                        uint64_t after_epoch,
                                        uint64_t timeout_ns,
                                        accel_cluster_epoch_info_t *out_info) {
  ACCEL_CHECK_ARG(g != NULL, "group (NULL)");
  ACCEL_RETURN_IF_ERROR(check_info(out_info, __func__));
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  bool forever = timeout_ns == ACCEL_TIMEOUT_INFINITE || !g->has_thread;
  if (!forever) {
    uint64_t ns = (uint64_t)deadline.tv_nsec + timeout_ns % 1000000000ull;
    deadline.tv_sec += (time_t)(timeout_ns / 1000000000ull + ns / 1000000000ull);
    deadline.tv_nsec = (long)(ns % 1000000000ull);
  }
  accel_status_t status = ACCEL_OK;
  pthread_mutex_lock(&g->mutex);
  for (;;) {
    if (g->info.state == ACCEL_CLUSTER_STATE_FAILED) {
      status = ACCEL_ERROR_ABORTED;
      break;
    }
    if (g->info.state == ACCEL_CLUSTER_STATE_RUNNING &&
        g->info.epoch > after_epoch) {
      *out_info = g->info;
      break;
    }
    if (timeout_ns == 0 || !g->has_thread) {
      status = ACCEL_ERROR_NOT_READY;
      break;
    }
    if (forever) {
      pthread_cond_wait(&g->cond, &g->mutex);
    } else if (pthread_cond_timedwait(&g->cond, &g->mutex, &deadline) != 0) {
      status = ACCEL_ERROR_TIMEOUT;
      break;
    }
  }
  uint64_t epoch = g->info.epoch;
  uint32_t state = g->info.state;
  pthread_mutex_unlock(&g->mutex);
  if (status == ACCEL_ERROR_ABORTED) {
    return accel_error_state_report(&g->failure);
  }
  if (status != ACCEL_OK) {
    return accel_error(status,
                       "group \"%s\": not running in an epoch after %llu yet "
                       "(epoch %llu, state %u)", g->cfg.name,
                       (unsigned long long)after_epoch,
                       (unsigned long long)epoch, state);
  }
  return ACCEL_OK;
}

accel_status_t accel_cluster_current(accel_cluster_group_t *g,
                                     accel_cluster_epoch_info_t *out_info) {
  ACCEL_CHECK_ARG(g != NULL, "group (NULL)");
  ACCEL_RETURN_IF_ERROR(check_info(out_info, __func__));
  pthread_mutex_lock(&g->mutex);
  *out_info = g->info;
  pthread_mutex_unlock(&g->mutex);
  return ACCEL_OK;
}

accel_status_t accel_cluster_epoch_members(accel_cluster_group_t *g,
                                           uint64_t *out_ids,
                                           uint32_t capacity,
                                           uint32_t *out_count) {
  ACCEL_CHECK_ARG(g != NULL, "group (NULL)");
  ACCEL_CHECK_ARG(out_ids != NULL, "out_ids (NULL)");
  ACCEL_CHECK_ARG(out_count != NULL, "out_count (NULL)");
  accel_status_t status = ACCEL_OK;
  pthread_mutex_lock(&g->mutex);
  uint32_t size = g->info.size;
  if (size > capacity) {
    status = ACCEL_ERROR_OUT_OF_MEMORY;
  } else {
    memcpy(out_ids, g->members, size * sizeof(out_ids[0]));
  }
  pthread_mutex_unlock(&g->mutex);
  *out_count = size;
  if (status != ACCEL_OK) {
    return accel_error(status,
                       "accel_cluster_epoch_members: capacity %u is below the "
                       "epoch's %u members", capacity, size);
  }
  return ACCEL_OK;
}

accel_status_t accel_cluster_report_failure(accel_cluster_group_t *g,
                                            const char *reason) {
  ACCEL_CHECK_ARG(g != NULL, "group (NULL)");
  ACCEL_CHECK_ARG(reason != NULL, "reason (NULL)");
  if (!accel_error_state_set(&g->failure, ACCEL_ERROR_ABORTED,
                             "group \"%s\": this rank left: %s", g->cfg.name,
                             reason)) {
    return accel_error_state_report(&g->failure);
  }
  // The progress caller leaves the store and marks the group failed; wake
  // it so that it does so now.
  atomic_store_explicit(&g->leave_requested, true, memory_order_relaxed);
  g->store->ops->wake(g->store);
  return ACCEL_OK;
}

accel_status_t accel_cluster_topology(accel_cluster_group_t *g, uint32_t rank,
                                      accel_topology_t **out_topology) {
  ACCEL_CHECK_ARG(g != NULL, "group (NULL)");
  ACCEL_CHECK_ARG(out_topology != NULL, "out_topology (NULL)");
  ACCEL_RETURN_IF_ERROR(accel_error_state_report(&g->failure));
  pthread_mutex_lock(&g->mutex);
  accel_cluster_epoch_info_t info = g->info;
  uint64_t member = rank < info.size ? g->members[rank] : 0;
  pthread_mutex_unlock(&g->mutex);
  if (info.state != ACCEL_CLUSTER_STATE_RUNNING) {
    return accel_error(ACCEL_ERROR_NOT_READY,
                       "group \"%s\": not running in an epoch (state %u)",
                       g->cfg.name, info.state);
  }
  if (rank >= info.size) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "accel_cluster_topology: rank %u out of range: epoch "
                       "%llu has %u ranks", rank,
                       (unsigned long long)info.epoch, info.size);
  }
  char *json = NULL;
  size_t length = 0;
  ACCEL_RETURN_IF_ERROR(g->store->ops->fetch(g->store, info.epoch, rank,
                                             member, &json, &length));
  if (json == NULL) {
    return accel_error(ACCEL_ERROR_NOT_FOUND,
                       "group \"%s\": rank %u has no topology under epoch "
                       "%llu (it failed or the epoch was superseded)",
                       g->cfg.name, rank, (unsigned long long)info.epoch);
  }
  accel_status_t status = accel_topology_deserialize(json, length,
                                                     out_topology);
  free(json);
  return status;
}
