// Driver interface, device table: opening a backend, its devices, their
// clocks and the CPUs their threads run on (see driver.h).
#ifndef ACCEL_CORE_DRIVER_DEVICE_H_
#define ACCEL_CORE_DRIVER_DEVICE_H_

#include <sched.h>

#include "accel/device.h"
#include "core/driver.h"
struct accel_drv_device_ops {
  // Opens the backend. ACCEL_ERROR_UNAVAILABLE (no library, no hardware)
  // means "skip quietly".
  accel_status_t (*backend_open)(const accel_driver_t *driver,
                                 const accel_drv_options_t *options,
                                 accel_drv_backend_t **out_backend);
  void (*backend_close)(accel_drv_backend_t *backend);
  uint32_t (*count)(accel_drv_backend_t *backend);
  accel_status_t (*open)(accel_drv_backend_t *backend, uint32_t ordinal,
                         accel_drv_device_t **out_device);
  void (*close)(accel_drv_device_t *device);
  // Fills every field but |index| and |struct_size|.
  void (*info)(accel_drv_device_t *device, accel_device_info_t *info);
  // A (host, device) pair of clock readings taken as close together as the
  // backend can, for trace correlation.
  void (*clock_pair)(accel_drv_device_t *device, uint64_t *out_host_ns,
                     uint64_t *out_device_ns);
  // Optional (NULL: threads are not bound). Hands the device the CPUs its
  // threads should run on (its NUMA node's cores, from lib/topo). Called by
  // the runtime after open and before any queue is created; the backend
  // copies |cpus| and applies it to the threads it starts later.
  void (*set_affinity)(accel_drv_device_t *device, const cpu_set_t *cpus);
};

#endif  // ACCEL_CORE_DRIVER_DEVICE_H_
