// Timeline semaphores: a 64-bit counter that only grows. A wait for value v
// completes when the counter is >= v. A semaphore can be failed; a failed
// semaphore keeps its value and every wait on it, current or later, returns the
// stored error. Semaphores are ref-counted and belong to one device.
#ifndef ACCEL_SEMAPHORE_H_
#define ACCEL_SEMAPHORE_H_

#include "accel/base.h"
#include "accel/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_semaphore accel_semaphore_t;

// Creates a semaphore on |device| with counter |initial_value|.
// |*out_semaphore| holds one reference owned by the caller.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument.
// ACCEL_ERROR_OUT_OF_MEMORY: host allocation failed.
// Thread-safe.
ACCEL_API accel_status_t accel_semaphore_create(
    accel_device_t *device, uint64_t initial_value,
    accel_semaphore_t **out_semaphore);

// Adds a reference. Thread-safe.
ACCEL_API void accel_semaphore_retain(accel_semaphore_t *semaphore);

// Drops a reference; the semaphore is destroyed when the last one (including
// those held by pending stream commands) is gone. Pending host waiters must
// have returned first. NULL is ignored. Thread-safe.
ACCEL_API void accel_semaphore_release(accel_semaphore_t *semaphore);

// Returns the current counter in |*out_value|.
// Returns the stored error (and still writes the value reached) if the
// semaphore has failed. ACCEL_ERROR_INVALID_ARGUMENT: NULL argument.
// Thread-safe.
ACCEL_API accel_status_t accel_semaphore_query(accel_semaphore_t *semaphore,
                                               uint64_t *out_value);

// Signals from the host: sets the counter to |value| and wakes waiters whose
// value is reached.
// ACCEL_ERROR_INVALID_ARGUMENT: |value| is not above the current counter.
// The stored error if the semaphore has failed. Thread-safe.
ACCEL_API accel_status_t accel_semaphore_signal(accel_semaphore_t *semaphore,
                                                uint64_t value);

// Fails the semaphore with |status| (not ACCEL_OK) and |message| (copied; may
// be NULL). Every waiter wakes and returns |status|; the first failure wins.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL semaphore or |status| is ACCEL_OK.
// Thread-safe.
ACCEL_API accel_status_t accel_semaphore_fail(accel_semaphore_t *semaphore,
                                              accel_status_t status,
                                              const char *message);

// Blocks until the counter is >= |value|, the semaphore fails, or |timeout_ns|
// passes (ACCEL_TIMEOUT_INFINITE never times out; 0 only checks). Spins
// briefly, then parks the thread.
// ACCEL_ERROR_TIMEOUT: the value was not reached in time.
// The stored error if the semaphore failed. Thread-safe.
ACCEL_API accel_status_t accel_semaphore_wait(accel_semaphore_t *semaphore,
                                              uint64_t value,
                                              uint64_t timeout_ns);

// How accel_semaphore_wait_many combines its conditions.
typedef enum accel_wait_mode {
  // Every semaphore must reach its value.
  ACCEL_WAIT_ALL = 0,
  // One semaphore reaching its value is enough.
  ACCEL_WAIT_ANY = 1,
} accel_wait_mode_t;

// Waits on |count| semaphores (all of one device) for |values|, combined by
// |mode|. For ACCEL_WAIT_ANY, |*out_index| (may be NULL) receives the index of
// a semaphore whose value was reached. A failed semaphore ends the wait with
// its error (for ANY, only if no other condition holds) and |*out_index| names
// it.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL arrays, |count| 0 or over 64, semaphores
//   of different devices. ACCEL_ERROR_TIMEOUT as accel_semaphore_wait.
// Thread-safe.
ACCEL_API accel_status_t accel_semaphore_wait_many(
    uint32_t count, accel_semaphore_t *const *semaphores,
    const uint64_t *values, accel_wait_mode_t mode, uint64_t timeout_ns,
    uint32_t *out_index);

// Returns in |*out_fd| a new file descriptor that becomes readable (POLLIN)
// once the counter is >= |value| or the semaphore fails, for event loops
// (epoll, poll). The caller owns and closes it; reading it is not required.
// After it is readable, accel_semaphore_query tells success from failure.
// ACCEL_ERROR_UNSUPPORTED: the device lacks ACCEL_DEVICE_CAP_SEMAPHORE_FD.
// ACCEL_ERROR_IO: the descriptor could not be created (errno in the message).
// Thread-safe.
ACCEL_API accel_status_t accel_semaphore_fd(accel_semaphore_t *semaphore,
                                            uint64_t value, int *out_fd);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_SEMAPHORE_H_
