// Device health inside accel (lib/core/health.c): the members whose failure
// a device's health drives (streams, DMA queues), the watchdog over their
// progress, and the hooks the runtime calls at device open and close.
#ifndef ACCEL_CORE_HEALTH_IMPL_H_
#define ACCEL_CORE_HEALTH_IMPL_H_

#include <stdbool.h>
#include <stdint.h>

#include "accel/health.h"
#include "core/runtime_impl.h"

typedef struct accel_health_member accel_health_member_t;

// What a member does for the device's health.
typedef struct accel_health_member_ops {
  // Fails the member with |status| and |message| through its ordinary
  // failure path (waits return at once; later work is refused). Called with
  // the device's health lock held: must not call back into the health API.
  void (*fail)(accel_health_member_t *member, accel_status_t status,
               const char *message);
  // The member's progress: commands (or descriptors) retired and submitted,
  // in the same unit; |*out_failed| when it has failed already.
  void (*progress)(accel_health_member_t *member, uint64_t *out_retired,
                   uint64_t *out_submitted, bool *out_failed);
} accel_health_member_ops_t;

// Embedded in a stream or DMA queue; registered while the object lives.
struct accel_health_member {
  const accel_health_member_ops_t *ops;
  const char *kind;  // "stream", "dma queue" (messages)
  const char *unit;  // what it retires: "command", "descriptor"
  const char *name;  // the object's name (lives as long as it)
  uint64_t watchdog_ns;  // progress deadline; 0: not watched
  // Guarded by the device's health lock.
  accel_health_member_t *next;
  accel_health_member_t *prev;
  uint64_t seen_retired;  // retired count at the last observation
  uint64_t since_ns;      // when it was last seen idle or progressing
  bool expired;           // failed by the watchdog
};

// Sets up and tears down |device|'s health (runtime open and close); init
// hands the backend its fault sink. fini stops the watchdog thread; every
// member must have unregistered.
accel_status_t accel_health_init(accel_device_t *device);
void accel_health_fini(accel_device_t *device);

// Registers |member| (ops, kind, name and watchdog_ns set; watchdog_ns 0
// takes the runtime's default, ACCEL_WATCHDOG_MS). Refused with
// ACCEL_ERROR_DEVICE_LOST (and a message) while the device is lost.
// Starts the device's watchdog thread with the first watched member.
accel_status_t accel_health_register(accel_device_t *device,
                                     accel_health_member_t *member);
void accel_health_unregister(accel_device_t *device,
                             accel_health_member_t *member);

// The stored error of a lost device (sets the thread's message), else OK.
accel_status_t accel_health_check_lost(accel_device_t *device);

// Tests: replaces the watchdog's clock with |now| (ns) and stops its thread,
// so that the test drives the checks with accel_health_watchdog_check.
void accel_health_set_clock(accel_device_t *device,
                            uint64_t (*now)(void *ctx), void *ctx);
// Runs one watchdog pass at the clock's time (what the thread does every
// check period). Returns the number of members it failed.
uint32_t accel_health_watchdog_check(accel_device_t *device);
// The check period the watchdog thread uses now (0: no watched member).
uint64_t accel_health_check_period_ns(accel_device_t *device);

// Parses an ACCEL_FAULT_INJECT value (docs/health.md) and injects each of
// its faults into the matching devices of |runtime|. NULL or "": nothing.
// ACCEL_ERROR_INVALID_ARGUMENT with a message naming the bad part.
accel_status_t accel_fault_spec_apply(accel_runtime_t *runtime,
                                      const char *spec);

#endif  // ACCEL_CORE_HEALTH_IMPL_H_
