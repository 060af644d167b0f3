// Cluster groups on the shared-memory store, driven in one process with an
// injected clock and ACCEL_CLUSTER_FLAG_MANUAL_PROGRESS: the timing logic
// (detection within the timeout, settle time, eviction) runs without
// sleeping. Real processes and etcd are in trials_test.py.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_support.h"

#define MS 1000000ull
#define INTERVAL (40 * MS)
#define TIMEOUT (160 * MS)
#define TICK (10 * MS)
#define MAXG 8

static uint64_t g_now = 1000 * MS;
static uint64_t fake_clock(void *user) {
  (void)user;
  return g_now;
}

// A minimal topology in JSON form, so no test loads the live machine.
static char g_topology[4096];

typedef struct counts {
  int stops;
  int resumes;
  uint64_t last_stop_epoch;
} counts_t;

static void on_stop(accel_cluster_group_t *g, uint64_t epoch, void *user) {
  (void)g;
  counts_t *c = user;
  c->stops++;
  c->last_stop_epoch = epoch;
}

static void on_resume(accel_cluster_group_t *g,
                      const accel_cluster_epoch_info_t *info, void *user) {
  (void)g;
  (void)info;
  ((counts_t *)user)->resumes++;
}

typedef struct fixture {
  char name[64];
  accel_cluster_group_t *g[MAXG];
  counts_t counts[MAXG];
  bool alive[MAXG];  // false: "killed" (no more progress calls)
  int n;
} fixture_t;

static int setup(void **state) {
  static int serial;
  fixture_t *f = calloc(1, sizeof(*f));
  snprintf(f->name, sizeof(f->name), "test-%d-%d", (int)getpid(), serial++);
  if (g_topology[0] == '\0') {
    accel_topology_options_t o;
    accel_topology_options_init(&o);
    o.synthetic = "pack:1 core:2 pu:1";
    accel_topology_t *t = NULL;
    size_t n = 0;
    if (accel_topology_load(&o, &t) == ACCEL_OK) {
      accel_topology_format(t, ACCEL_TOPOLOGY_FORMAT_JSON, g_topology,
                            sizeof(g_topology), &n);
      accel_topology_destroy(t);
    }
  }
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  for (int i = 0; i < f->n; ++i) {
    accel_cluster_group_destroy(f->g[i]);
  }
  accel_cluster_options_t o;
  accel_cluster_options_init(&o);
  o.name = f->name;
  accel_cluster_remove(&o);
  free(f);
  return 0;
}

static void options(fixture_t *f, accel_cluster_options_t *o, uint32_t min,
                    uint32_t max, counts_t *c) {
  accel_cluster_options_init(o);
  o->name = f->name;
  o->min_size = min;
  o->max_size = max;
  o->heartbeat_interval_ns = INTERVAL;
  o->heartbeat_timeout_ns = TIMEOUT;
  o->flags = ACCEL_CLUSTER_FLAG_MANUAL_PROGRESS;
  o->clock = fake_clock;
  o->topology_json = g_topology[0] != '\0' ? g_topology : NULL;
  if (c != NULL) {
    o->on_stop = on_stop;
    o->on_resume = on_resume;
    o->callback_user = c;
  }
}

static void join(fixture_t *f, uint32_t min, uint32_t max) {
  accel_cluster_options_t o;
  options(f, &o, min, max, &f->counts[f->n]);
  assert_accel_ok(accel_cluster_group_create(&o, &f->g[f->n]));
  f->alive[f->n] = true;
  f->n++;
}

// Advances the clock by |dt| and runs two rounds of steps on live groups
// (the second adopts what the first proposed).
static void tick(fixture_t *f, uint64_t dt) {
  g_now += dt;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < f->n; ++i) {
      if (f->alive[i]) {
        accel_cluster_progress(f->g[i]);
      }
    }
  }
}

static accel_cluster_epoch_info_t info_of(fixture_t *f, int i) {
  accel_cluster_epoch_info_t info = {.struct_size = sizeof(info)};
  assert_accel_ok(accel_cluster_current(f->g[i], &info));
  return info;
}

static uint32_t members_of(fixture_t *f, int i, uint64_t *ids) {
  uint32_t n = 0;
  assert_accel_ok(accel_cluster_epoch_members(f->g[i], ids,
                                              ACCEL_CLUSTER_MAX_RANKS, &n));
  return n;
}

// Every live group runs |epoch| with |size| ranks, dense and distinct, and
// the same member list.
static void assert_converged(fixture_t *f, uint64_t epoch, uint32_t size) {
  uint64_t first[ACCEL_CLUSTER_MAX_RANKS];
  bool have = false;
  bool rank_seen[ACCEL_CLUSTER_MAX_RANKS] = {false};
  for (int i = 0; i < f->n; ++i) {
    if (!f->alive[i]) {
      continue;
    }
    accel_cluster_epoch_info_t info = info_of(f, i);
    assert_int_equal(info.state, ACCEL_CLUSTER_STATE_RUNNING);
    assert_int_equal(info.epoch, epoch);
    assert_int_equal(info.size, size);
    assert_true(info.rank < size);
    assert_false(rank_seen[info.rank]);
    rank_seen[info.rank] = true;
    uint64_t ids[ACCEL_CLUSTER_MAX_RANKS];
    assert_int_equal(members_of(f, i, ids), size);
    assert_int_equal(ids[info.rank], info.member_id);
    if (!have) {
      memcpy(first, ids, sizeof(ids));
      have = true;
    } else {
      assert_memory_equal(first, ids, size * sizeof(ids[0]));
    }
  }
}

static void form(fixture_t *f, int n, uint32_t min, uint32_t max) {
  for (int i = 0; i < n; ++i) {
    join(f, min, max);
  }
  tick(f, TICK);
  tick(f, TICK);
}

// The first epoch forms as soon as max_size ranks have joined, with ranks
// 0..n-1 in join order and one resume each.
static void test_group_first_epoch_forms_at_max_size(void **state) {
  fixture_t *f = *state;
  form(f, 4, 2, 4);
  assert_converged(f, 1, 4);
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(info_of(f, i).rank, i);
    assert_int_equal(f->counts[i].resumes, 1);
    assert_int_equal(f->counts[i].stops, 0);
  }
}

// Below max_size the first epoch waits for the settle time, then forms.
static void test_group_first_epoch_below_max_waits_settle_time(void **state) {
  fixture_t *f = *state;
  uint64_t start = g_now;
  form(f, 2, 2, 4);
  assert_int_equal(info_of(f, 0).state, ACCEL_CLUSTER_STATE_JOINING);
  while (g_now < start + TIMEOUT - TICK) {  // settle defaults to the timeout
    assert_int_equal(info_of(f, 0).state, ACCEL_CLUSTER_STATE_JOINING);
    tick(f, TICK);
  }
  tick(f, TICK);
  tick(f, TICK);
  assert_converged(f, 1, 2);
}

// A rank that stops heartbeating is detected no earlier than timeout -
// interval and no later than timeout + a tick after it stopped; the
// survivors stop once, agree on epoch 2 and are renumbered densely in order.
static void test_group_detects_silent_rank_within_timeout(void **state) {
  fixture_t *f = *state;
  form(f, 4, 2, 4);
  uint64_t ids1[ACCEL_CLUSTER_MAX_RANKS];
  members_of(f, 0, ids1);
  f->alive[1] = false;
  uint64_t killed = g_now;
  uint64_t detected = 0;
  for (int t = 0; t < 100 && detected == 0; ++t) {
    tick(f, TICK);
    if (info_of(f, 0).epoch == 2) {
      detected = g_now;
    }
  }
  assert_true(detected != 0);
  assert_true(detected - killed >= TIMEOUT - INTERVAL);
  assert_true(detected - killed <= TIMEOUT + INTERVAL);
  tick(f, TICK);
  assert_converged(f, 2, 3);
  uint64_t ids2[ACCEL_CLUSTER_MAX_RANKS];
  members_of(f, 0, ids2);
  assert_int_equal(ids2[0], ids1[0]);
  assert_int_equal(ids2[1], ids1[2]);
  assert_int_equal(ids2[2], ids1[3]);
  for (int i = 0; i < 4; ++i) {
    if (i != 1) {
      assert_int_equal(f->counts[i].stops, 1);
      assert_int_equal(f->counts[i].last_stop_epoch, 1);
      assert_int_equal(f->counts[i].resumes, 2);
    }
  }
}

// accel_cluster_report_failure leaves at once: the survivors form the next
// epoch without waiting for the timeout, and the reporter's calls fail with
// ACCEL_ERROR_ABORTED naming the reason.
static void test_group_report_failure_leaves_at_once(void **state) {
  fixture_t *f = *state;
  form(f, 3, 1, 3);
  assert_accel_ok(accel_cluster_report_failure(f->g[2], "device lost"));
  assert_accel_status(accel_cluster_progress(f->g[2]), ACCEL_ERROR_ABORTED);
  assert_non_null(strstr(accel_last_error(), "device lost"));
  f->alive[2] = false;
  tick(f, 1 * MS);
  assert_converged(f, 2, 2);
  accel_cluster_epoch_info_t info = {.struct_size = sizeof(info)};
  assert_accel_status(accel_cluster_wait_epoch(f->g[2], 0, 0, &info),
                      ACCEL_ERROR_ABORTED);
  assert_int_equal(info_of(f, 2).state, ACCEL_CLUSTER_STATE_FAILED);
  assert_accel_status(accel_cluster_report_failure(f->g[2], "again"),
                      ACCEL_ERROR_ABORTED);
}

// A rank whose device is lost (a fatal fault, include/accel/health.h) leaves
// at its next step, as if it had reported the failure itself: the survivors
// form the next epoch without it.
static void test_group_rank_whose_device_is_lost_leaves(void **state) {
  fixture_t *f = *state;
  accel_runtime_t *rt = NULL;
  assert_accel_ok(accel_runtime_create(NULL, &rt));
  accel_device_t *dev = NULL;
  assert_accel_ok(accel_device_get(rt, 0, &dev));
  join(f, 1, 3);
  join(f, 1, 3);
  accel_cluster_options_t o;
  options(f, &o, 1, 3, &f->counts[f->n]);
  o.device = dev;
  assert_accel_ok(accel_cluster_group_create(&o, &f->g[f->n]));
  f->alive[f->n] = true;
  f->n++;
  tick(f, TICK);
  tick(f, TICK);
  assert_converged(f, 1, 3);
  accel_fault_desc_t fault = {.struct_size = sizeof(fault),
                              .kind = ACCEL_FAULT_FATAL};
  assert_accel_ok(accel_device_inject_fault(dev, &fault));
  assert_accel_status(accel_cluster_progress(f->g[2]), ACCEL_ERROR_ABORTED);
  assert_non_null(strstr(accel_last_error(), "its device is lost"));
  f->alive[2] = false;
  tick(f, 1 * MS);
  assert_converged(f, 2, 2);
  assert_int_equal(info_of(f, 2).state, ACCEL_CLUSTER_STATE_FAILED);
  // The group borrows the device: it goes before the runtime.
  accel_cluster_group_destroy(f->g[2]);
  f->g[2] = NULL;
  accel_runtime_destroy(rt);
}

// A replacement joins at the next epoch boundary and takes the last rank;
// beyond max_size a joiner waits.
static void test_group_replacement_joins_next_epoch(void **state) {
  fixture_t *f = *state;
  form(f, 3, 2, 3);
  f->alive[0] = false;
  for (int t = 0; t < 30; ++t) {
    tick(f, TICK);
  }
  assert_converged(f, 2, 2);
  join(f, 2, 3);
  tick(f, TICK);
  tick(f, TICK);
  assert_converged(f, 3, 3);
  assert_int_equal(info_of(f, 3).rank, 2);
  join(f, 2, 3);  // the group is full: this one waits
  tick(f, TICK);
  tick(f, TICK);
  assert_int_equal(info_of(f, 4).state, ACCEL_CLUSTER_STATE_JOINING);
  assert_int_equal(info_of(f, 1).epoch, 3);
}

// Survivors fewer than min_size stay stopped (no epoch) until a replacement
// brings them back to min_size.
static void test_group_below_min_size_stays_stopped(void **state) {
  fixture_t *f = *state;
  form(f, 3, 3, 3);
  f->alive[2] = false;
  for (int t = 0; t < 30; ++t) {
    tick(f, TICK);
  }
  assert_int_equal(info_of(f, 0).state, ACCEL_CLUSTER_STATE_STOPPED);
  assert_int_equal(info_of(f, 0).epoch, 1);
  assert_int_equal(f->counts[0].stops, 1);
  join(f, 3, 3);
  tick(f, TICK);
  tick(f, TICK);
  assert_converged(f, 2, 3);
}

// A rank late past the timeout stops the others; when it comes back before
// they could form an epoch without it (min_size forbids), the next epoch
// holds all of them again instead of leaving the group stopped.
static void test_group_late_rank_back_before_restructure_rejoins(void **state) {
  fixture_t *f = *state;
  form(f, 3, 3, 3);
  f->alive[2] = false;
  for (int t = 0; t < 20; ++t) {
    tick(f, TICK);
  }
  assert_int_equal(info_of(f, 0).state, ACCEL_CLUSTER_STATE_STOPPED);
  f->alive[2] = true;
  tick(f, TICK);
  tick(f, TICK);
  tick(f, TICK);
  assert_converged(f, 2, 3);
  assert_int_equal(f->counts[2].stops, 1);
  assert_int_equal(f->counts[2].resumes, 2);
}

// A rank whose heartbeats stop for longer than the timeout while it still
// runs is evicted: when it steps again it learns that it is out.
static void test_group_late_rank_is_evicted(void **state) {
  fixture_t *f = *state;
  form(f, 3, 1, 3);
  f->alive[1] = false;
  for (int t = 0; t < 30; ++t) {
    tick(f, TICK);
  }
  assert_accel_status(accel_cluster_progress(f->g[1]), ACCEL_ERROR_ABORTED);
  assert_non_null(strstr(accel_last_error(), "evicted"));
  assert_converged(f, 2, 2);
}

// Each rank's published topology reads back through accel_cluster_topology.
static void test_group_topology_of_every_rank_reads_back(void **state) {
  fixture_t *f = *state;
  form(f, 3, 1, 3);
  for (uint32_t r = 0; r < 3; ++r) {
    accel_topology_t *t = NULL;
    assert_accel_ok(accel_cluster_topology(f->g[0], r, &t));
    accel_topology_destroy(t);
  }
  accel_topology_t *t = NULL;
  assert_accel_status(accel_cluster_topology(f->g[0], 3, &t),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_null(t);
}

// accel-cluster status's source: members with rank, health and heartbeat
// ages from the injected clock; a silent member turns late then failed.
static void test_status_reports_health_and_ages(void **state) {
  fixture_t *f = *state;
  form(f, 2, 1, 2);
  f->alive[1] = false;
  tick(f, 3 * INTERVAL);
  accel_cluster_options_t o;
  options(f, &o, 1, 2, NULL);
  accel_cluster_status_t *st = NULL;
  assert_accel_ok(accel_cluster_status_load(&o, &st));
  uint32_t count = 0;
  assert_int_equal(accel_cluster_status_epoch(st, &count), 1);
  assert_int_equal(count, 2);
  accel_cluster_member_info_t m = {.struct_size = sizeof(m)};
  assert_accel_ok(accel_cluster_status_member(st, 0, &m));
  assert_int_equal(m.health, ACCEL_CLUSTER_HEALTH_ALIVE);
  assert_int_equal(m.pid, getpid());
  assert_accel_ok(accel_cluster_status_member(st, 1, &m));
  assert_int_equal(m.rank, 1);
  assert_int_equal(m.health, ACCEL_CLUSTER_HEALTH_LATE);
  assert_true(m.heartbeat_age_ns >= 3 * INTERVAL);
  assert_accel_status(accel_cluster_status_member(st, 2, &m),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_cluster_status_destroy(st);
}

// Random trials (seed printed): 4 to 8 ranks, one or two silenced at the same
// random moment; the survivors converge on epoch 2 with the reference list
// (the first epoch's members minus the silenced, in order) within the
// timeout plus an interval.
static void test_group_random_kills_converge_on_reference(void **state) {
  fixture_t *f = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  int n = (int)test_rng_range(&rng, 4, 8);
  form(f, n, 1, (uint32_t)n);
  for (uint64_t t = test_rng_range(&rng, 0, 20); t > 0; --t) {
    tick(f, test_rng_range(&rng, 1, TICK));
  }
  uint64_t before[ACCEL_CLUSTER_MAX_RANKS], expect[ACCEL_CLUSTER_MAX_RANKS];
  members_of(f, 0, before);
  int kills = (int)test_rng_range(&rng, 1, 2);
  for (int k = 0; k < kills; ++k) {
    int victim;
    do {
      victim = (int)test_rng_range(&rng, 0, (uint64_t)n - 1);
    } while (!f->alive[victim]);
    f->alive[victim] = false;
  }
  uint32_t expected = 0;
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < n; ++i) {
      if (f->alive[i] && info_of(f, i).member_id == before[r]) {
        expect[expected++] = before[r];
      }
    }
  }
  uint64_t killed = g_now;
  while (g_now - killed <= TIMEOUT + INTERVAL) {
    tick(f, test_rng_range(&rng, 1, TICK));
  }
  assert_converged(f, 2, expected);
  int survivor = 0;
  while (!f->alive[survivor]) {
    ++survivor;
  }
  uint64_t ids[ACCEL_CLUSTER_MAX_RANKS];
  members_of(f, survivor, ids);
  assert_memory_equal(ids, expect, expected * sizeof(ids[0]));
}

// A store file whose epoch word names no slot is reported as damaged
// (ACCEL_ERROR_FORMAT) rather than read out of bounds; the group's rank is
// out with a message.
static void test_damaged_store_is_refused(void **state) {
  fixture_t *f = *state;
  form(f, 2, 1, 2);
  char path[128];
  snprintf(path, sizeof(path), "/dev/shm/accel-cluster-%s", f->name);
  FILE *file = fopen(path, "r+b");
  assert_non_null(file);
  uint64_t word = 5ull << 8 | 200;  // epoch 5 in slot 199 of 64
  assert_int_equal(fseek(file, 40, SEEK_SET), 0);  // header.current
  assert_int_equal(fwrite(&word, sizeof(word), 1, file), 1);
  fclose(file);
  accel_cluster_options_t o;
  options(f, &o, 1, 2, NULL);
  accel_cluster_status_t *st = NULL;
  assert_accel_status(accel_cluster_status_load(&o, &st), ACCEL_ERROR_FORMAT);
  assert_non_null(strstr(accel_last_error(), "damaged"));
  assert_null(st);
  assert_accel_status(accel_cluster_progress(f->g[0]), ACCEL_ERROR_ABORTED);
}

// Misuse: bad names, sizes, timings, flags, environment; NULL outputs;
// progress on a group with its own thread.
static void test_group_create_rejects_bad_options(void **state) {
  fixture_t *f = *state;
  accel_cluster_options_t o;
  accel_cluster_group_t *g = NULL;
  options(f, &o, 1, 1, NULL);
  assert_accel_status(accel_cluster_group_create(&o, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_cluster_group_create(NULL, &g),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  const char *bad_names[] = {"", "a/b", ".hidden", "x y",
                             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                             "aaaaaaaaaaaaaaaaaaaa"};
  for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); ++i) {
    o.name = bad_names[i];
    assert_accel_status(accel_cluster_group_create(&o, &g),
                        ACCEL_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(accel_last_error(), "group name"));
  }
  options(f, &o, 3, 2, NULL);
  assert_accel_status(accel_cluster_group_create(&o, &g),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  options(f, &o, 1, ACCEL_CLUSTER_MAX_RANKS + 1, NULL);
  assert_accel_status(accel_cluster_group_create(&o, &g),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  options(f, &o, 1, 1, NULL);
  o.heartbeat_timeout_ns = INTERVAL;
  assert_accel_status(accel_cluster_group_create(&o, &g),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "twice the interval"));
  options(f, &o, 1, 1, NULL);
  o.flags = 0x80;
  assert_accel_status(accel_cluster_group_create(&o, &g),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  options(f, &o, 1, 1, NULL);
  o.struct_size = 8;
  assert_accel_status(accel_cluster_group_create(&o, &g),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  options(f, &o, 1, 1, NULL);
  setenv("ACCEL_CLUSTER_STORE", "zookeeper", 1);
  assert_accel_status(accel_cluster_group_create(&o, &g),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  unsetenv("ACCEL_CLUSTER_STORE");
  setenv("ACCEL_CLUSTER_HEARTBEAT_TIMEOUT_MS", "-5", 1);
  assert_accel_status(accel_cluster_group_create(&o, &g),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  unsetenv("ACCEL_CLUSTER_HEARTBEAT_TIMEOUT_MS");
  assert_null(g);
  // A group with its own thread refuses manual progress.
  o.flags = 0;
  o.clock = NULL;
  assert_accel_ok(accel_cluster_group_create(&o, &g));
  assert_accel_status(accel_cluster_progress(g), ACCEL_ERROR_INVALID_ARGUMENT);
  accel_cluster_epoch_info_t info = {.struct_size = 4};
  assert_accel_status(accel_cluster_wait_epoch(g, 0, 0, &info),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  info.struct_size = sizeof(info);
  assert_accel_ok(accel_cluster_wait_epoch(g, 0, 5000 * MS, &info));
  assert_int_equal(info.epoch, 1);
  assert_int_equal(info.size, 1);
  assert_accel_status(accel_cluster_wait_epoch(g, 1, 1 * MS, &info),
                      ACCEL_ERROR_TIMEOUT);
  accel_cluster_group_destroy(g);
  assert_accel_status(accel_cluster_progress(NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_cluster_report_failure(NULL, "x"),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  // A file under the group's name that is not a group store.
  accel_cluster_options_t other;
  options(f, &other, 1, 1, NULL);
  other.name = "test-not-a-store";
  FILE *bad = fopen("/dev/shm/accel-cluster-test-not-a-store", "w");
  if (bad != NULL) {
    fputs("hello", bad);
    fclose(bad);
    assert_accel_status(accel_cluster_group_create(&other, &g),
                        ACCEL_ERROR_FORMAT);
    accel_cluster_remove(&other);
  }
  assert_accel_status(accel_cluster_remove(&other), ACCEL_ERROR_NOT_FOUND);
  accel_cluster_status_t *st = NULL;
  assert_accel_status(accel_cluster_status_load(&other, &st),
                      ACCEL_ERROR_NOT_FOUND);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_group_first_epoch_forms_at_max_size),
      T(test_group_first_epoch_below_max_waits_settle_time),
      T(test_group_detects_silent_rank_within_timeout),
      T(test_group_report_failure_leaves_at_once),
      T(test_group_rank_whose_device_is_lost_leaves),
      T(test_group_replacement_joins_next_epoch),
      T(test_group_below_min_size_stays_stopped),
      T(test_group_late_rank_back_before_restructure_rejoins),
      T(test_group_late_rank_is_evicted),
      T(test_group_topology_of_every_rank_reads_back),
      T(test_status_reports_health_and_ages),
      T(test_group_random_kills_converge_on_reference),
      T(test_damaged_store_is_refused),
      T(test_group_create_rejects_bad_options),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
