// Lock discipline: functions named `_locked` need a lock held by their
// caller, and say so at their top with ACCEL_ASSERT_HELD (a pthread mutex)
// or ACCEL_ASSERT_SPIN_HELD (a spinlock word or atomic_flag lock).
//
// Debug and sanitizer builds check it (NDEBUG builds compile it to
// nothing): a mutex must be locked (pthread_mutex_trylock fails; glibc's
// default mutexes do not record their owner, so a lock held by another
// thread passes, and the common mistake, a call with no lock held at all,
// is caught every time), a spinlock's word must be set. A failed check
// prints the function and the lock and aborts: it is an internal
// invariant, like assert, never a user error.
#ifndef ACCEL_CORE_LOCK_H_
#define ACCEL_CORE_LOCK_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#ifdef NDEBUG
#define ACCEL_ASSERT_HELD(mutex) ((void)0)
#define ACCEL_ASSERT_SPIN_HELD(held) ((void)0)
#else
#define ACCEL_ASSERT_HELD(mutex) \
  accel_lock_check_mutex((mutex), #mutex, __func__)
// |held|: an expression that is true while the spinlock is held.
#define ACCEL_ASSERT_SPIN_HELD(held) \
  accel_lock_check((held), #held, __func__)
#endif

// Prints "accel: FUNC called without LOCK held" and aborts.
__attribute__((noreturn, cold)) void accel_lock_not_held(const char *lock,
                                                        const char *func);

static inline void accel_lock_check(bool held, const char *lock,
                                    const char *func) {
  if (__builtin_expect(!held, 0)) {
    accel_lock_not_held(lock, func);
  }
}

static inline void accel_lock_check_mutex(pthread_mutex_t *mutex,
                                          const char *lock, const char *func) {
  if (__builtin_expect(pthread_mutex_trylock(mutex) == 0, 0)) {
    pthread_mutex_unlock(mutex);
    accel_lock_not_held(lock, func);
  }
}

#endif  // ACCEL_CORE_LOCK_H_
