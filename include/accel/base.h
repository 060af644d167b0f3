// accel base definitions: the export macro, API version, and the status codes
// that every fallible call returns.
//
// Versioning: ACCEL_API_VERSION_MAJOR changes when an existing function's
// signature or a struct's existing fields change meaning; MINOR grows when
// functions, enum values or trailing struct fields are added. Structs that cross
// the ABI begin with `uint32_t struct_size` so that an older caller's smaller
// struct is still accepted (missing trailing fields read as zero).
#ifndef ACCEL_BASE_H_
#define ACCEL_BASE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(ACCEL_BUILDING_LIBRARY)
#define ACCEL_API __attribute__((visibility("default")))
#else
#define ACCEL_API
#endif

#define ACCEL_API_VERSION_MAJOR 0
#define ACCEL_API_VERSION_MINOR 2

// Status codes. ACCEL_OK is 0; every other value is a failure, and the calling
// thread's message (accel_last_error()) says what was wrong.
typedef enum accel_status {
  ACCEL_OK = 0,
  // An argument is NULL, out of range, or inconsistent with another argument or
  // with the object's state as the caller could have known it.
  ACCEL_ERROR_INVALID_ARGUMENT = 1,
  // Host or device memory (or a count limit) is exhausted; retry after freeing.
  ACCEL_ERROR_OUT_OF_MEMORY = 2,
  // A named thing (device, kernel, section, file) does not exist.
  ACCEL_ERROR_NOT_FOUND = 3,
  // The backend or build lacks the feature; the same call never succeeds here.
  ACCEL_ERROR_UNSUPPORTED = 4,
  // A backend, library or service is not present or not reachable right now.
  ACCEL_ERROR_UNAVAILABLE = 5,
  // The operation has not completed yet (non-blocking queries, full rings).
  ACCEL_ERROR_NOT_READY = 6,
  // A wait reached its timeout before its condition held.
  ACCEL_ERROR_TIMEOUT = 7,
  // Work was cancelled (a stream destroyed with the abort flag, work behind a
  // failure); the device itself is healthy.
  ACCEL_ERROR_ABORTED = 8,
  // The device failed and needs a reset; its objects cannot be used again.
  ACCEL_ERROR_DEVICE_LOST = 9,
  // A file or memory image is malformed (bad offsets, sizes, hashes).
  ACCEL_ERROR_FORMAT = 10,
  // A file, kernel or peer needs a version this runtime does not provide.
  ACCEL_ERROR_VERSION = 11,
  // An operating-system I/O call failed (open, read, mmap of a file).
  ACCEL_ERROR_IO = 12,
  // The object is in use (pending work, live references) and cannot change now.
  ACCEL_ERROR_BUSY = 13,
  // A bug in accel: an internal invariant did not hold. Please report it.
  ACCEL_ERROR_INTERNAL = 14,
} accel_status_t;

#define ACCEL_STATUS_COUNT 15

// Returns the constant name of |status| ("ACCEL_ERROR_TIMEOUT"), or
// "ACCEL_STATUS_UNKNOWN" for a value that is not a status code. The string is
// static. Thread-safe.
ACCEL_API const char *accel_status_name(accel_status_t status);

// Returns the calling thread's message for its most recent failed accel call,
// or "" if none failed yet. Successful calls do not clear it. The string is
// owned by the thread and valid until its next accel call. Thread-safe (each
// thread has its own message).
ACCEL_API const char *accel_last_error(void);

// Returns ACCEL_API_VERSION_MAJOR << 16 | ACCEL_API_VERSION_MINOR of the
// library actually loaded, so that a caller can compare it with the headers it
// was compiled against. Thread-safe.
ACCEL_API uint32_t accel_api_version(void);

// Propagates a failure: evaluates |expr| once and returns its status from the
// enclosing function if it is not ACCEL_OK.
#define ACCEL_RETURN_IF_ERROR(expr)          \
  do {                                       \
    accel_status_t accel_status__ = (expr);  \
    if (accel_status__ != ACCEL_OK) {        \
      return accel_status__;                 \
    }                                        \
  } while (0)

// Nanosecond timeout values for waits.
#define ACCEL_TIMEOUT_INFINITE UINT64_MAX
#define ACCEL_TIMEOUT_NONE 0ull

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_BASE_H_
