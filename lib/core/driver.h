// The driver interface: what a backend (host, cuda) provides. Generic layers
// (lib/sync, lib/mem, lib/dma, lib/stream, lib/abi) call only these
// functions; backends know nothing of the layers above.
//
// A backend is a const table (accel_driver_t) made of one sub-table per
// concept, each declared in its own header so that each layer includes only
// what it calls and a backend author reads one concept at a time:
//
//   driver_device.h    backend open/close, devices, clocks, CPU affinity
//   driver_memory.h    virtual address ranges, physical memory, host memory
//   driver_sync.h      timeline semaphores
//   driver_queue.h     hardware queues and the commands they execute
//   driver_copy.h      copy engines and their DMA descriptor rings
//   driver_dispatch.h  work-group grids on host-visible devices
//   driver_health.h    fault injection, fault reports, queue abort, reset
//
// Backend objects (devices, physical memory, semaphores, queues, rings) are
// opaque to the generic layers. Validation happens in the public entry
// points, once, in the module that owns the concept; backends may assume
// valid arguments. Every function that can fail returns accel_status_t and
// sets the thread message. A feature a backend lacks is
// ACCEL_ERROR_UNSUPPORTED with a message, never a silent success: entries
// marked optional may be NULL (and a whole optional sub-table may be NULL),
// and callers then report UNSUPPORTED themselves. docs/driver-interface.md
// states the contract entry by entry, in the same order.
#ifndef ACCEL_CORE_DRIVER_H_
#define ACCEL_CORE_DRIVER_H_

#include <stdint.h>

#include "accel/base.h"

#include "core/object.h"
typedef struct accel_driver accel_driver_t;
typedef struct accel_drv_backend accel_drv_backend_t;  // an opened backend
typedef struct accel_drv_device accel_drv_device_t;
typedef struct accel_drv_phys accel_drv_phys_t;  // physical memory
typedef struct accel_drv_semaphore accel_drv_semaphore_t;
typedef struct accel_drv_queue accel_drv_queue_t;
typedef struct accel_drv_dma_ring accel_drv_dma_ring_t;  // a copy-engine ring

typedef struct accel_drv_device_ops accel_drv_device_ops_t;
typedef struct accel_drv_memory_ops accel_drv_memory_ops_t;
typedef struct accel_drv_sync_ops accel_drv_sync_ops_t;
typedef struct accel_drv_queue_ops accel_drv_queue_ops_t;
typedef struct accel_drv_copy_ops accel_drv_copy_ops_t;
typedef struct accel_drv_dispatch_ops accel_drv_dispatch_ops_t;
typedef struct accel_drv_health_ops accel_drv_health_ops_t;

// Resolved runtime options handed to backends (defaults and environment
// already applied).
typedef struct accel_drv_options {
  uint64_t spin_ns;
  uint32_t host_device_count;
  // Copy engines per device (ACCEL_COPY_ENGINES); 0: the backend's default.
  uint32_t copy_engine_count;
  // Threads that run the work-groups of one grid on a host device, the
  // queue's worker included (ACCEL_HOST_THREADS); 0: one per CPU of the
  // device.
  uint32_t host_thread_count;
} accel_drv_options_t;

struct accel_driver {
  // Backend name: "host", "cuda".
  const char *name;
  const accel_drv_device_ops_t *device;      // required
  const accel_drv_memory_ops_t *memory;      // required
  const accel_drv_sync_ops_t *sync;          // required
  const accel_drv_queue_ops_t *queue;        // required
  const accel_drv_copy_ops_t *copy;          // optional: no copy engines
  const accel_drv_dispatch_ops_t *dispatch;  // optional: no host grids
  const accel_drv_health_ops_t *health;      // optional: no injection
};

// The built-in backends, in probe order.
extern const accel_driver_t accel_host_driver;
// Built where cuda.h is found (ACCEL_HAVE_CUDA); libcuda is loaded at run
// time (lib/drv/cuda).
extern const accel_driver_t accel_cuda_driver;

#endif  // ACCEL_CORE_DRIVER_H_
