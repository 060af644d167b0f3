// Device health: the state of a device (healthy, degraded, lost), the RAS
// faults it raised by class, a watchdog over the progress of its streams and
// DMA queues, fault injection for operators and tests, and reset.
//
// A device is HEALTHY until something goes wrong. An uncorrected fault or a
// watchdog expiry makes it DEGRADED: the work that failed is reported on its
// stream or DMA queue, and the device takes new work. A fatal fault, or a
// second watchdog expiry while degraded with no progress on any queue of the
// device since the first, makes it LOST: every stream and DMA queue on it
// fails with ACCEL_ERROR_DEVICE_LOST through the ordinary failure path
// (their waits return at once with that code and a message saying why), and
// new streams and DMA queues are refused until accel_device_reset with
// ACCEL_RESET_DEVICE. docs/health.md is the full specification.
#ifndef ACCEL_HEALTH_H_
#define ACCEL_HEALTH_H_

#include <assert.h>
#include <stddef.h>

#include "accel/base.h"
#include "accel/device.h"

#ifdef __cplusplus
extern "C" {
#endif

// The state of a device (accel_device_health_t.state).
typedef enum accel_device_state {
  // No fault beyond corrected ones since creation or the last reset.
  ACCEL_DEVICE_STATE_HEALTHY = 0,
  // An uncorrected fault or a watchdog expiry: some work failed, the device
  // takes new work. ACCEL_RESET_CONTEXT or ACCEL_RESET_DEVICE clears it.
  ACCEL_DEVICE_STATE_DEGRADED = 1,
  // A fatal fault or a device that stopped retiring work: every stream and
  // DMA queue failed with ACCEL_ERROR_DEVICE_LOST; only ACCEL_RESET_DEVICE
  // makes the device usable again.
  ACCEL_DEVICE_STATE_LOST = 2,
} accel_device_state_t;

// Classes of reliability (RAS) faults.
typedef enum accel_ras_class {
  // Corrected by the device (an ECC single-bit error): counted and reported
  // to the health callback; the work goes on.
  ACCEL_RAS_CORRECTED = 0,
  // Not corrected, contained to one command: that command fails with
  // ACCEL_ERROR_IO and its stream or DMA queue fails (sticky); the device
  // stays usable (DEGRADED).
  ACCEL_RAS_UNCORRECTED = 1,
  // The device is lost (LOST): every stream and DMA queue on it fails with
  // ACCEL_ERROR_DEVICE_LOST.
  ACCEL_RAS_FATAL = 2,
  ACCEL_RAS_CLASS_COUNT = 3,
} accel_ras_class_t;

// What accel_device_health reports. Strings are NUL-terminated.
typedef struct accel_device_health {
  // sizeof(accel_device_health_t) as the caller compiled it; fields beyond it
  // are not written.
  uint32_t struct_size;
  // accel_device_state_t.
  uint32_t state;
  // Faults raised since the runtime was created, per accel_ras_class_t
  // (resets do not clear them).
  uint64_t ras_counts[ACCEL_RAS_CLASS_COUNT];
  // Streams and DMA queues failed by the watchdog.
  uint64_t watchdog_expiries;
  // Resets done (accel_device_reset), every scope.
  uint64_t resets;
  // State changes since the runtime was created (the event count that
  // accel_device_health_fd signals).
  uint64_t state_changes;
  // CLOCK_MONOTONIC time (ns) at which a command or descriptor of the device
  // was last seen retiring (observed by the watchdog and by this call); 0 if
  // none was seen yet.
  uint64_t last_progress_ns;
  // accel_status_t of the last fault or expiry (ACCEL_OK if none), and its
  // message ("" if none).
  uint32_t last_status;
  uint32_t reserved0;
  char last_message[256];
} accel_device_health_t;

static_assert(offsetof(accel_device_health_t, last_message) == 72,
              "accel_device_health_t layout is part of the ABI");

// Fills |*out_health| (the caller sets out_health->struct_size first) with the
// state of |device|.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, or struct_size below 16.
// Thread-safe.
ACCEL_API accel_status_t accel_device_health(accel_device_t *device,
                                             accel_device_health_t *out_health);

// Returns in |*out_fd| an eventfd that becomes readable when the state of
// |device| changes (read 8 bytes to learn how many changes happened and to
// make it unreadable again; then call accel_device_health). The descriptor
// belongs to the device: do not close it; it lives until
// accel_runtime_destroy. Poll it with poll/epoll beside other descriptors.
// ACCEL_ERROR_INVALID_ARGUMENT: a NULL argument.
// ACCEL_ERROR_UNAVAILABLE: the kernel refused an eventfd (errno in message).
// Thread-safe.
ACCEL_API accel_status_t accel_device_health_fd(accel_device_t *device,
                                                int *out_fd);

// Called on a state change with the new state and the status and message of
// what caused it, or on a corrected fault (state unchanged, |status| OK,
// |message| naming the fault). Runs on the thread that detected the change
// (a queue worker, a copy engine, the watchdog, or a caller of
// accel_device_reset or accel_device_inject_fault), with no lock of the
// device held: it may call accel_device_health but must not block for long.
typedef void (*accel_device_health_fn_t)(accel_device_t *device,
                                         accel_device_state_t state,
                                         accel_status_t status,
                                         const char *message, void *user_data);

// Sets the health callback of |device| (one per device; |fn| NULL removes
// it). A call running when the callback is replaced may still finish with
// the old one.
// ACCEL_ERROR_INVALID_ARGUMENT: |device| NULL.
// Thread-safe.
ACCEL_API accel_status_t accel_device_health_callback_set(
    accel_device_t *device, accel_device_health_fn_t fn, void *user_data);

// What accel_device_inject_fault raises.
typedef enum accel_fault_kind {
  ACCEL_FAULT_CORRECTED = ACCEL_RAS_CORRECTED,
  ACCEL_FAULT_UNCORRECTED = ACCEL_RAS_UNCORRECTED,
  ACCEL_FAULT_FATAL = ACCEL_RAS_FATAL,
  // The targeted command or DMA descriptor never completes, until its stream
  // or DMA queue is failed (the watchdog, a fatal fault, a reset) or
  // destroyed with the abort flag. Raises no RAS fault by itself.
  ACCEL_FAULT_HANG = 3,
} accel_fault_kind_t;

typedef struct accel_fault_desc {
  // sizeof(accel_fault_desc_t) as the caller compiled it.
  uint32_t struct_size;
  // accel_fault_kind_t.
  uint32_t kind;
  // The fault hits the |command_index|-th eligible command counted from
  // this call (1: the next one); 0 means the first eligible one. Commands
  // are the commands that stream queues run and the copy and fill
  // descriptors that copy engines run.
  uint64_t command_index;
  // Only commands that start at least this many ns after this call are
  // eligible; 0: no delay.
  uint64_t delay_ns;
  // Only commands of the stream or DMA queue of this name are eligible
  // (copied); NULL or "": every queue of the device.
  const char *queue_name;
} accel_fault_desc_t;

// Injects a fault into |device| (operators' drills and tests). With
// command_index 0, delay_ns 0 and no queue name, a CORRECTED, UNCORRECTED or
// FATAL fault is raised at once on the calling thread (UNCORRECTED then
// fails no command: it counts and degrades the device). Otherwise it is
// armed and hits the first eligible command as |desc| says; up to 16 faults
// may be armed per device at once. ACCEL_FAULT_INJECT does the same from the
// environment at accel_runtime_create (docs/health.md gives its syntax).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, struct_size too small, an
// unknown kind, or a HANG with nothing to hit (no index, delay or queue).
// ACCEL_ERROR_UNSUPPORTED: the backend cannot inject faults (cuda).
// ACCEL_ERROR_OUT_OF_MEMORY: 16 faults are armed already.
// Thread-safe.
ACCEL_API accel_status_t accel_device_inject_fault(
    accel_device_t *device, const accel_fault_desc_t *desc);

// What accel_device_reset resets (each scope includes the ones before it).
typedef enum accel_reset_scope {
  // Every stream and DMA queue of the device: pending work is aborted (it
  // fails with ACCEL_ERROR_ABORTED, waits return at once) and the streams
  // and queues stay failed: destroy them and create new ones. Buffers,
  // semaphores, events and executables stay valid and keep their contents.
  // The device state is unchanged. Refused on a LOST device.
  ACCEL_RESET_QUEUE = 0,
  // QUEUE, then the device's armed faults are cleared and a DEGRADED device
  // is HEALTHY again. Memory as for QUEUE. Refused on a LOST device.
  ACCEL_RESET_CONTEXT = 1,
  // CONTEXT, then the backend resets the device and a LOST device is
  // HEALTHY again. Buffers stay allocated at the same addresses (release
  // them as usual) but their contents are undefined after it (the host
  // device keeps them); semaphores and executables stay valid.
  ACCEL_RESET_DEVICE = 2,
} accel_reset_scope_t;

// Resets |device| at |scope|. Returns once pending work was aborted (its
// streams' and queues' waits return) and the device takes new work; a
// command that is running on a host thread (a kernel) finishes on its own,
// since a thread cannot be stopped from outside.
// ACCEL_ERROR_INVALID_ARGUMENT: |device| NULL or an unknown scope.
// ACCEL_ERROR_DEVICE_LOST: QUEUE or CONTEXT scope on a LOST device.
// Thread-safe; submissions racing with it may fail with ACCEL_ERROR_ABORTED.
ACCEL_API accel_status_t accel_device_reset(accel_device_t *device,
                                            accel_reset_scope_t scope);

// Names a state ("healthy", "degraded", "lost"); "unknown" otherwise.
// Thread-safe.
ACCEL_API const char *accel_device_state_name(accel_device_state_t state);

#ifdef __cplusplus
}
#endif

#endif  // ACCEL_HEALTH_H_
