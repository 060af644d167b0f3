// Driver interface, dispatch table: running a kernel's work-group grid
// (see driver.h). Host-visible devices run host code objects' grids on
// their threads; the CUDA backend will add module load and cuLaunchKernel
// here.
#ifndef ACCEL_CORE_DRIVER_DISPATCH_H_
#define ACCEL_CORE_DRIVER_DISPATCH_H_

#include "core/driver.h"
struct accel_drv_dispatch_ops {
  // Runs fn(ctx, id) once for every id in the grid [0, group_count[0]) x
  // [0, group_count[1]) x [0, group_count[2]) on the device's threads, the
  // calling thread included, and returns when all have run. Ids run
  // concurrently and in any order; after the first failure the remaining
  // ids are skipped and that failure (status and message) is returned.
  accel_status_t (*host_grid)(accel_drv_device_t *device,
                              const uint32_t group_count[3],
                              accel_status_t (*fn)(void *ctx,
                                                   const uint32_t id[3]),
                              void *ctx);
};

#endif  // ACCEL_CORE_DRIVER_DISPATCH_H_
