// Internal error helpers: the thread-local message behind accel_last_error()
// and sticky error states for objects that stay failed (streams, semaphores,
// devices).
#ifndef ACCEL_CORE_ERROR_H_
#define ACCEL_CORE_ERROR_H_

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "accel/base.h"

#define ACCEL_ERROR_MESSAGE_MAX 512

// Sets this thread's message from |fmt| and returns |status| so that callers
// can write `return accel_error(ACCEL_ERROR_..., "...")`.
accel_status_t accel_error(accel_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Prefixes the current thread message with "|fmt|: " (adds the caller's
// context to a callee's failure) and returns |status|.
accel_status_t accel_error_context(accel_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Clears this thread's message (used before running user callbacks so that a
// message they leave can be attributed to them).
void accel_error_clear(void);

// This thread's message storage (ACCEL_ERROR_MESSAGE_MAX bytes): a worker
// caches it to clear the message without a TLS lookup per command.
char *accel_error_buffer(void);

// Called with every failure reported through accel_error() (status and this
// thread's message), on the failing thread. lib/trace installs one (the
// layer above core that records errors); core itself calls nothing above it.
typedef void (*accel_error_observer_fn)(accel_status_t status,
                                        const char *message);

// Installs |fn| as the error observer (NULL removes it). The observer must
// not call accel_error(). Thread-safe.
void accel_error_set_observer(accel_error_observer_fn fn);

// Rejects a NULL argument with a message naming it.
#define ACCEL_CHECK_ARG(cond, name)                                           \
  do {                                                                        \
    if (!(cond)) {                                                            \
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT, "%s: invalid %s",      \
                         __func__, name);                                     \
    }                                                                         \
  } while (0)

// A sticky failure. The first failure recorded wins; later ones are ignored.
// Readers that see a non-zero |code| (acquire) may read |message|.
typedef struct accel_error_state {
  _Atomic int code;   // accel_status_t; 0 while healthy
  atomic_flag taken;  // set by the thread that writes |message|
  char message[ACCEL_ERROR_MESSAGE_MAX];
} accel_error_state_t;

void accel_error_state_init(accel_error_state_t *state);

// Records |status| with a formatted message if no failure was recorded yet.
// Returns true if this call recorded it.
bool accel_error_state_set(accel_error_state_t *state, accel_status_t status,
                           const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Returns the stored code (ACCEL_OK if healthy); when failed, also sets this
// thread's message from the stored one.
accel_status_t accel_error_state_report(const accel_error_state_t *state);

static inline accel_status_t accel_error_state_code(
    const accel_error_state_t *state) {
  // Acquire: pairs with the release in accel_error_state_set so that a reader
  // seeing the code also sees the message.
  return (accel_status_t)atomic_load_explicit(&state->code,
                                              memory_order_acquire);
}

#endif  // ACCEL_CORE_ERROR_H_
