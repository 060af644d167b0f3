// host_dispatch: spreads the work-groups of a grid over a per-device pool of
// threads. The pool is created on the first grid of more than one group;
// its threads spin for the device's spin time after a job, then park on a
// futex. The calling thread (a queue worker) claims groups too, so a pool
// that is busy with another stream's grid costs nothing but parallelism:
// the caller then runs its grid alone.
//
// Job protocol. Job fields are written only while |open| is 0 and no helper
// is |active|. A helper announces itself (active++) before it looks at
// |open|; the caller closes (open = 0) before it looks at |active|. Both
// sides are seq_cst, so either the helper sees the job closed and leaves
// without reading it, or the caller sees the helper and waits for it.
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drv/host/host_internal.h"

#define MAX_HELPERS 64u

struct accel_host_pool {
  accel_drv_device_t *device;
  pthread_t threads[MAX_HELPERS];
  uint32_t thread_count;
  uint64_t spin_ns;
  pthread_mutex_t lock;  // held by the one dispatch that uses the helpers

  _Alignas(64) _Atomic uint32_t generation;  // futex word: bumped per job
  _Atomic uint32_t sleepers;                  // helpers parked or parking
  _Atomic uint32_t stopping;

  _Alignas(64) _Atomic uint32_t open;
  _Atomic uint32_t active;

  _Alignas(64) _Atomic uint64_t next;  // next linear group id to claim
  _Atomic uint32_t failed;
  atomic_flag failure_taken;

  // The job (see the protocol above).
  uint64_t total;
  uint32_t count[3];
  accel_status_t (*fn)(void *ctx, const uint32_t id[3]);
  void *ctx;
  accel_status_t status;  // written by the failure's taker
  char message[ACCEL_ERROR_MESSAGE_MAX];
};

static void record_failure(accel_host_pool_t *p, accel_status_t st) {
  if (!atomic_flag_test_and_set_explicit(&p->failure_taken,
                                         memory_order_acquire)) {
    p->status = st;
    snprintf(p->message, sizeof(p->message), "%s", accel_last_error());
  }
  // Relaxed: only stops further claims early; the caller reads status and
  // message after every helper has left (active == 0, seq_cst).
  atomic_store_explicit(&p->failed, 1, memory_order_relaxed);
}

// Claims and runs groups until none are left or one failed.
static void run_claims(accel_host_pool_t *p) {
  uint64_t xy = (uint64_t)p->count[0] * p->count[1];
  for (;;) {
    // Relaxed: the job fields were published by |open| (or are the caller's
    // own); the counter only hands out distinct ids.
    uint64_t i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
    if (i >= p->total ||
        atomic_load_explicit(&p->failed, memory_order_relaxed)) {
      return;
    }
    uint32_t id[3] = {(uint32_t)(i % p->count[0]),
                      (uint32_t)(i / p->count[0] % p->count[1]),
                      (uint32_t)(i / xy)};
    accel_status_t st = p->fn(p->ctx, id);
    if (st != ACCEL_OK) {
      record_failure(p, st);
      return;
    }
  }
}

static void *helper_main(void *arg) {
  accel_host_pool_t *p = arg;
  uint32_t seen = 0;
  if (p->device->has_affinity) {
    // Same CPUs as the device's queue workers (its NUMA node); best effort.
    pthread_setaffinity_np(pthread_self(), sizeof(p->device->affinity),
                           &p->device->affinity);
  }
  for (;;) {
    uint64_t spin_until = accel_host_now_ns() + p->spin_ns;
    uint32_t iter = 0;
    // Acquire: pairs with the caller's release bump so that a helper that
    // sees the new generation also sees |stopping| set before it.
    while (atomic_load_explicit(&p->generation, memory_order_acquire) == seen &&
           !atomic_load_explicit(&p->stopping, memory_order_acquire)) {
      if ((++iter & 63) == 0 && accel_host_now_ns() >= spin_until) {
        // Seq_cst: the sleepers increment must precede the generation
        // re-check, pairing with the caller's bump then sleepers load.
        atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&p->generation, memory_order_seq_cst) ==
                seen &&
            !atomic_load_explicit(&p->stopping, memory_order_seq_cst)) {
          accel_host_futex_wait(&p->generation, seen, UINT64_MAX);
        }
        atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_relaxed);
        spin_until = accel_host_now_ns() + p->spin_ns;
      } else {
        accel_host_cpu_relax();
      }
    }
    if (atomic_load_explicit(&p->stopping, memory_order_acquire)) {
      return NULL;
    }
    seen = atomic_load_explicit(&p->generation, memory_order_acquire);
    // Seq_cst: see the job protocol at the top of the file.
    atomic_fetch_add_explicit(&p->active, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&p->open, memory_order_seq_cst)) {
      run_claims(p);
    }
    // Release: the caller's seq_cst load of |active| must see our group
    // results (kernel writes) before it returns.
    atomic_fetch_sub_explicit(&p->active, 1, memory_order_release);
  }
}

static void pool_stop(accel_host_pool_t *p, uint32_t started) {
  atomic_store_explicit(&p->stopping, 1, memory_order_seq_cst);
  // Seq_cst: bump after |stopping| so that a parked helper wakes and sees it.
  atomic_fetch_add_explicit(&p->generation, 1, memory_order_seq_cst);
  accel_host_futex_wake_all(&p->generation);
  for (uint32_t i = 0; i < started; ++i) {
    pthread_join(p->threads[i], NULL);
  }
}

void accel_host_pool_destroy(accel_host_pool_t *pool) {
  if (pool == NULL) {
    return;
  }
  pool_stop(pool, pool->thread_count);
  pthread_mutex_destroy(&pool->lock);
  free(pool);
}

static accel_status_t pool_create(accel_drv_device_t *device,
                                  accel_host_pool_t **out) {
  long cpus = device->has_affinity ? CPU_COUNT(&device->affinity)
                                   : sysconf(_SC_NPROCESSORS_ONLN);
  uint32_t helpers = cpus > 1 ? (uint32_t)cpus - 1 : 1;
  if (device->host_thread_count > 1) {
    helpers = device->host_thread_count - 1;  // the worker is the last one
  }
  if (helpers > MAX_HELPERS) {
    helpers = MAX_HELPERS;
  }
  accel_host_pool_t *p = aligned_alloc(64, sizeof(*p));
  if (p == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "host dispatch: cannot allocate a thread pool");
  }
  memset(p, 0, sizeof(*p));
  atomic_flag_clear(&p->failure_taken);
  p->spin_ns = device->spin_ns;
  p->device = device;
  pthread_mutex_init(&p->lock, NULL);
  for (uint32_t i = 0; i < helpers; ++i) {
    int e = pthread_create(&p->threads[i], NULL, helper_main, p);
    if (e != 0) {
      pool_stop(p, i);
      pthread_mutex_destroy(&p->lock);
      free(p);
      return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                         "host dispatch: cannot start pool thread %u of %u: "
                         "%s",
                         i + 1, helpers, strerror(e));
    }
  }
  p->thread_count = helpers;
  *out = p;
  return ACCEL_OK;
}

// Returns the device's pool, creating it on first use.
static accel_status_t get_pool(accel_drv_device_t *device,
                               accel_host_pool_t **out) {
  // Acquire: a pool published by another thread is fully built.
  accel_host_pool_t *p =
      atomic_load_explicit(&device->pool, memory_order_acquire);
  if (p != NULL) {
    *out = p;
    return ACCEL_OK;
  }
  ACCEL_RETURN_IF_ERROR(pool_create(device, &p));
  accel_host_pool_t *expected = NULL;
  // Acq_rel: publishes our pool, or acquires the winner's.
  if (!atomic_compare_exchange_strong_explicit(&device->pool, &expected, p,
                                               memory_order_acq_rel,
                                               memory_order_acquire)) {
    accel_host_pool_destroy(p);
    p = expected;
  }
  *out = p;
  return ACCEL_OK;
}

static accel_status_t run_alone(const uint32_t n[3],
                                accel_status_t (*fn)(void *, const uint32_t[3]),
                                void *ctx) {
  uint32_t id[3];
  for (id[2] = 0; id[2] < n[2]; ++id[2]) {
    for (id[1] = 0; id[1] < n[1]; ++id[1]) {
      for (id[0] = 0; id[0] < n[0]; ++id[0]) {
        ACCEL_RETURN_IF_ERROR(fn(ctx, id));
      }
    }
  }
  return ACCEL_OK;
}

accel_status_t accel_host_dispatch(accel_drv_device_t *device,
                                   const uint32_t group_count[3],
                                   accel_status_t (*fn)(void *ctx,
                                                        const uint32_t id[3]),
                                   void *ctx) {
  uint64_t total = (uint64_t)group_count[0] * group_count[1] * group_count[2];
  if (total <= 1 || device->host_thread_count == 1) {
    return total >= 1 ? run_alone(group_count, fn, ctx) : ACCEL_OK;
  }
  accel_host_pool_t *p;
  if (get_pool(device, &p) != ACCEL_OK || pthread_mutex_trylock(&p->lock) != 0) {
    // No pool (thread creation failed) or another stream's grid holds it:
    // this worker runs the grid itself.
    return run_alone(group_count, fn, ctx);
  }
  p->total = total;
  memcpy(p->count, group_count, sizeof(p->count));
  p->fn = fn;
  p->ctx = ctx;
  atomic_store_explicit(&p->next, 0, memory_order_relaxed);
  atomic_store_explicit(&p->failed, 0, memory_order_relaxed);
  atomic_flag_clear_explicit(&p->failure_taken, memory_order_relaxed);
  // Seq_cst (release at least): publishes the job fields to helpers that
  // read |open|.
  atomic_store_explicit(&p->open, 1, memory_order_seq_cst);
  // Seq_cst: the bump must precede the sleepers check (see helper_main).
  atomic_fetch_add_explicit(&p->generation, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) != 0) {
    accel_host_futex_wake_all(&p->generation);
  }
  run_claims(p);
  // Seq_cst: see the job protocol at the top of the file.
  atomic_store_explicit(&p->open, 0, memory_order_seq_cst);
  uint32_t iter = 0;
  while (atomic_load_explicit(&p->active, memory_order_seq_cst) != 0) {
    if ((++iter & 1023) == 0) {
      sched_yield();  // a helper was preempted mid-group
    } else {
      accel_host_cpu_relax();
    }
  }
  accel_status_t st = ACCEL_OK;
  if (atomic_load_explicit(&p->failed, memory_order_relaxed)) {
    st = accel_error(p->status, "%s", p->message);
  }
  pthread_mutex_unlock(&p->lock);
  return st;
}
