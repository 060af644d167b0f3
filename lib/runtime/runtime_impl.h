// lib/runtime: the composition root. accel_runtime_create opens the
// backends, places their devices (lib/topo) and attaches tracing (lib/trace);
// it is the only module that knows them all.
#ifndef ACCEL_RUNTIME_RUNTIME_IMPL_H_
#define ACCEL_RUNTIME_RUNTIME_IMPL_H_

#include "core/runtime_impl.h"

// Creates a runtime over an explicit list of backends (tests use this to
// insert the fault-injection wrapper). Same contract as accel_runtime_create.
accel_status_t accel_runtime_create_with_drivers(
    const accel_runtime_options_t *opts, const accel_driver_t *const *drivers,
    uint32_t driver_count, accel_runtime_t **out_runtime);

#endif  // ACCEL_RUNTIME_RUNTIME_IMPL_H_
