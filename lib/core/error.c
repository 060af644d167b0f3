#include "core/error.h"
#include "core/driver_queue.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char g_message[ACCEL_ERROR_MESSAGE_MAX];

static const char *const k_status_names[ACCEL_STATUS_COUNT] = {
    [ACCEL_OK] = "ACCEL_OK",
    [ACCEL_ERROR_INVALID_ARGUMENT] = "ACCEL_ERROR_INVALID_ARGUMENT",
    [ACCEL_ERROR_OUT_OF_MEMORY] = "ACCEL_ERROR_OUT_OF_MEMORY",
    [ACCEL_ERROR_NOT_FOUND] = "ACCEL_ERROR_NOT_FOUND",
    [ACCEL_ERROR_UNSUPPORTED] = "ACCEL_ERROR_UNSUPPORTED",
    [ACCEL_ERROR_UNAVAILABLE] = "ACCEL_ERROR_UNAVAILABLE",
    [ACCEL_ERROR_NOT_READY] = "ACCEL_ERROR_NOT_READY",
    [ACCEL_ERROR_TIMEOUT] = "ACCEL_ERROR_TIMEOUT",
    [ACCEL_ERROR_ABORTED] = "ACCEL_ERROR_ABORTED",
    [ACCEL_ERROR_DEVICE_LOST] = "ACCEL_ERROR_DEVICE_LOST",
    [ACCEL_ERROR_FORMAT] = "ACCEL_ERROR_FORMAT",
    [ACCEL_ERROR_VERSION] = "ACCEL_ERROR_VERSION",
    [ACCEL_ERROR_IO] = "ACCEL_ERROR_IO",
    [ACCEL_ERROR_BUSY] = "ACCEL_ERROR_BUSY",
    [ACCEL_ERROR_INTERNAL] = "ACCEL_ERROR_INTERNAL",
};

const char *accel_status_name(accel_status_t status) {
  if ((unsigned)status >= ACCEL_STATUS_COUNT) {
    return "ACCEL_STATUS_UNKNOWN";
  }
  return k_status_names[status];
}

const char *accel_last_error(void) { return g_message; }

uint32_t accel_api_version(void) {
  return ((uint32_t)ACCEL_API_VERSION_MAJOR << 16) | ACCEL_API_VERSION_MINOR;
}

// The one observer of failures (lib/trace's), installed once at load.
static _Atomic(accel_error_observer_fn) g_error_observer;

void accel_error_set_observer(accel_error_observer_fn fn) {
  // Release: pairs with the acquire in accel_error, so that an observer's
  // own state, set up before it is installed, is seen by its calls.
  atomic_store_explicit(&g_error_observer, fn, memory_order_release);
}

accel_status_t accel_error(accel_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_message, sizeof(g_message), fmt, ap);
  va_end(ap);
  // Acquire: pairs with the release in accel_error_set_observer.
  accel_error_observer_fn fn =
      atomic_load_explicit(&g_error_observer, memory_order_acquire);
  if (fn != NULL) {
    fn(status, g_message);
  }
  return status;
}

accel_status_t accel_error_context(accel_status_t status, const char *fmt,
                                   ...) {
  char prefix[ACCEL_ERROR_MESSAGE_MAX];
  char inner[ACCEL_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof(prefix), fmt, ap);
  va_end(ap);
  memcpy(inner, g_message, sizeof(inner));
  if (inner[0] != '\0') {
    snprintf(g_message, sizeof(g_message), "%s: %s", prefix, inner);
  } else {
    snprintf(g_message, sizeof(g_message), "%s: %s", prefix,
             accel_status_name(status));
  }
  return status;
}

void accel_error_clear(void) { g_message[0] = '\0'; }

char *accel_error_buffer(void) { return g_message; }

void accel_error_state_init(accel_error_state_t *state) {
  atomic_init(&state->code, ACCEL_OK);
  atomic_flag_clear(&state->taken);
  state->message[0] = '\0';
}

bool accel_error_state_set(accel_error_state_t *state, accel_status_t status,
                           const char *fmt, ...) {
  if (status == ACCEL_OK || atomic_flag_test_and_set(&state->taken)) {
    return false;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(state->message, sizeof(state->message), fmt, ap);
  va_end(ap);
  // Release: publishes |message| to readers that acquire |code|.
  atomic_store_explicit(&state->code, (int)status, memory_order_release);
  return true;
}

accel_status_t accel_error_state_report(const accel_error_state_t *state) {
  accel_status_t code = accel_error_state_code(state);
  if (code != ACCEL_OK) {
    snprintf(g_message, sizeof(g_message), "%s", state->message);
  }
  return code;
}

#include "core/driver.h"

const char *accel_cmd_kind_name(uint32_t kind) {
  static const char *const k_names[ACCEL_CMD_KIND_COUNT] = {
      [ACCEL_CMD_HOST_CALL] = "host_call", [ACCEL_CMD_FILL] = "fill",
      [ACCEL_CMD_COPY] = "copy",           [ACCEL_CMD_SIGNAL] = "signal",
      [ACCEL_CMD_WAIT] = "wait",           [ACCEL_CMD_LAUNCH] = "launch",
      [ACCEL_CMD_EXECUTE] = "execute",
  };
  return kind < ACCEL_CMD_KIND_COUNT ? k_names[kind] : "unknown";
}
