// Driver interface, dispatch table: running a kernel's work-group grid
// (see driver.h). Host-visible devices run host code objects' grids on
// their threads; devices with code objects of their own (CUDA: PTX and
// cubin) load them and launch their kernels on a queue.
#ifndef ACCEL_CORE_DRIVER_DISPATCH_H_
#define ACCEL_CORE_DRIVER_DISPATCH_H_

#include "core/driver.h"
#include "core/object.h"

typedef struct accel_drv_module accel_drv_module_t;  // a loaded code object
typedef struct accel_drv_kernel accel_drv_kernel_t;  // a kernel in a module

// One launch of a device kernel, with the parameters of the kernel ABI
// (docs/kernel-abi.md, "The same information for CUDA kernels"): the
// backend lays them out in that order.
typedef struct accel_drv_launch {
  uint32_t grid[3];   // work-groups per dimension (each >= 1)
  uint32_t block[3];  // work-items per work-group (each >= 1)
  uint32_t shared_bytes;  // dynamic shared memory per work-group
  uint32_t binding_count;
  const uint64_t *binding_addresses;  // binding_count device addresses
  const uint64_t *binding_lengths;    // binding_count lengths in bytes
  uint64_t workspace_address;  // with workspace_bytes; 0 bytes: none
  uint64_t workspace_bytes;
  const void *constants;  // constants_size bytes (copied at launch); 0: none
  uint32_t constants_size;
} accel_drv_launch_t;

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
  // Optional, the next three together (NULL: the device loads no code
  // objects of its own). Loads a code object image of |size_bytes| (PTX
  // text or a cubin for CUDA), compiling it for the device where needed;
  // ACCEL_ERROR_FORMAT with the compiler's log in the message when it does
  // not load.
  accel_status_t (*module_load)(accel_drv_device_t *device, const void *image,
                                uint64_t size_bytes,
                                accel_drv_module_t **out_module);
  // Unloads a module none of whose kernels has a launch in flight.
  void (*module_unload)(accel_drv_module_t *module);
  // Finds kernel |name| in |module| (ACCEL_ERROR_NOT_FOUND); the kernel
  // lives as long as the module.
  accel_status_t (*kernel_get)(accel_drv_module_t *module, const char *name,
                               accel_drv_kernel_t **out_kernel);
  // Optional, with the three above. Submits one launch of |kernel| to
  // |queue|, in queue order, with the queue table's ownership rule for
  // |ref0| and |ref1| (held until the launch completed; either may be NULL)
  // and its failure rules (a failed queue returns its stored error).
  accel_status_t (*kernel_launch)(accel_drv_queue_t *queue,
                                  accel_drv_kernel_t *kernel,
                                  const accel_drv_launch_t *launch,
                                  accel_object_t *ref0, accel_object_t *ref1,
                                  uint64_t *out_last_seq);
};

#endif  // ACCEL_CORE_DRIVER_DISPATCH_H_
