// Launch checks and execution shared by accel_launch (launch.c) and
// recorded launches (command_buffer*.c): one check of a launch against its
// kernel, one way to run a dispatch.
#ifndef ACCEL_ABI_LAUNCH_IMPL_H_
#define ACCEL_ABI_LAUNCH_IMPL_H_

#include <stdbool.h>

#include "abi/executable_impl.h"
#include "core/driver.h"
#include "mem/buffer_impl.h"

// ACCEL_ERROR_UNSUPPORTED when |k| cannot run on |device| (loaded for
// another device, or the device runs no host kernels).
accel_status_t accel_launch_check_target(const accel_device_t *device,
                                         const accel_kernel_t *k);

// Checks a launch's grid |n| and argument counts against |k|'s declaration
// (|bindings_given| / |constants_given|: the pointers are not NULL).
// Messages start with |prefix| ("" or "command #3 (launch): ").
accel_status_t accel_launch_check_shape(const accel_kernel_t *k,
                                        const uint32_t n[3],
                                        uint32_t binding_count,
                                        uint32_t constants_size,
                                        bool bindings_given,
                                        bool constants_given,
                                        const char *prefix);

// Checks binding |i| of |k| bound to |buffer| at |offset| for |length|
// bytes (0: to the end) on |device|: present, on the device, in range,
// writable where the kernel writes, at least the declared size, aligned as
// declared. Stores the bound length in |*out_length|.
accel_status_t accel_launch_check_binding(const accel_device_t *device,
                                          const accel_kernel_t *k, uint32_t i,
                                          const accel_buffer_t *buffer,
                                          uint64_t offset, uint64_t length,
                                          const char *prefix,
                                          uint64_t *out_length);

// Fills |out| for a launch of |k| on grid |n| with the given bindings and
// constants (both borrowed for as long as |out| is used).
void accel_launch_dispatch_init(const accel_kernel_t *k, const uint32_t n[3],
                                uint32_t binding_count,
                                const accel_kernel_binding_t *bindings,
                                uint32_t constants_size, const void *constants,
                                accel_kernel_dispatch_t *out);

// Runs every work-group of |dispatch| of |k| on |device| (on the calling
// queue worker for one group, else through |driver|'s host_grid); returns
// the first failure with a message naming the kernel and the work-group.
accel_status_t accel_launch_run(const accel_kernel_t *k,
                                const accel_driver_t *driver,
                                const accel_kernel_dispatch_t *dispatch,
                                accel_drv_device_t *device);

#endif  // ACCEL_ABI_LAUNCH_IMPL_H_
