// Launch owners: the lifetime of what launches use (an executable, a
// run-time kernel) covers its users' references and every launch in flight,
// without an atomic on a shared cache line per launch. A per-launch
// retain on the submitting thread and release on the queue worker would move
// one cache line between them on every launch (measured: about 20% of an
// empty launch's round trip); here the submitter counts launches on a line of
// its own and the worker releases on another.
//
// |object.ref_count| = 1 (while users hold references) + budget not yet
// handed to launches + launches in flight. The submitter pre-funds launches
// in blocks of LAUNCH_BUDGET (one atomic add per block) and hands each launch
// one unit without touching |object|; the queue releases each launch's unit
// with accel_object_release. When the last user reference goes, the unused
// budget and the users' unit are returned at once, and whichever release
// brings the count to zero destroys the object.
#ifndef ACCEL_ABI_LAUNCH_OWNER_H_
#define ACCEL_ABI_LAUNCH_OWNER_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/object.h"

#define ACCEL_LAUNCH_BUDGET (1u << 20)

typedef struct accel_launch_owner {
  accel_object_t object;  // first: commands release it
  _Atomic uint32_t user_refs;
  // Launches handed a unit of budget; written by submitters only.
  _Alignas(64) _Atomic uint64_t started;
} accel_launch_owner_t;

static inline void accel_launch_owner_init(accel_launch_owner_t *o,
                                           accel_object_destroy_fn_t destroy) {
  accel_object_init(&o->object, destroy);
  atomic_init(&o->user_refs, 1);
  atomic_init(&o->started, 0);
}

static inline void accel_launch_owner_retain(accel_launch_owner_t *o) {
  // Relaxed: made from an existing reference (see accel_object_retain).
  atomic_fetch_add_explicit(&o->user_refs, 1, memory_order_relaxed);
}

// Returns the reference a launch command holds (refs[1]); the queue releases
// it with accel_object_release. The caller holds a user reference.
static inline accel_object_t *accel_launch_owner_take(accel_launch_owner_t *o) {
  // Relaxed: |started| only numbers launches; the budget add below happens
  // before the command is submitted, which orders it before the release.
  uint64_t n = atomic_fetch_add_explicit(&o->started, 1, memory_order_relaxed);
  if (n % ACCEL_LAUNCH_BUDGET == 0) {
    // Relaxed: a new unit made from the user reference we hold.
    atomic_fetch_add_explicit(&o->object.ref_count, ACCEL_LAUNCH_BUDGET,
                              memory_order_relaxed);
  }
  return &o->object;
}

static inline void accel_launch_owner_release(accel_launch_owner_t *o) {
  // Acq_rel: the last user must see every other user's writes and its own
  // launches' numbering (a user never releases its last reference while it
  // is still launching).
  if (atomic_fetch_sub_explicit(&o->user_refs, 1, memory_order_acq_rel) != 1) {
    return;
  }
  uint64_t n = atomic_load_explicit(&o->started, memory_order_acquire);
  uint64_t funded = (n + ACCEL_LAUNCH_BUDGET - 1) / ACCEL_LAUNCH_BUDGET *
                    ACCEL_LAUNCH_BUDGET;
  uint32_t give_back = (uint32_t)(funded - n) + 1;
  // Acq_rel: as accel_object_release; the count reaches zero here when no
  // launch is in flight, otherwise in the queue's last release.
  if (atomic_fetch_sub_explicit(&o->object.ref_count, give_back,
                                memory_order_acq_rel) == give_back) {
    o->object.destroy(&o->object);
  }
}

#endif  // ACCEL_ABI_LAUNCH_OWNER_H_
