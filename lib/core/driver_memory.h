// Driver interface, memory table: virtual address ranges, physical memory
// mapped into them (the primitive under every allocator), and host memory
// the device reaches (see driver.h).
#ifndef ACCEL_CORE_DRIVER_MEMORY_H_
#define ACCEL_CORE_DRIVER_MEMORY_H_

#include "core/driver.h"
// Access modes for va_set_access.
enum {
  ACCEL_DRV_ACCESS_NONE = 0,
  ACCEL_DRV_ACCESS_READ = 1,
  ACCEL_DRV_ACCESS_READ_WRITE = 3,
};

struct accel_drv_memory_ops {
  // Virtual memory (the cuMemAddressReserve family). Sizes and addresses are
  // multiples of the device page size.
  accel_status_t (*va_reserve)(accel_drv_device_t *device, uint64_t size_bytes,
                               uint64_t alignment, uint64_t *out_address);
  void (*va_release)(accel_drv_device_t *device, uint64_t address,
                     uint64_t size_bytes);
  // Optional. Access to a mapped range (cuMemSetAccess): one of
  // ACCEL_DRV_ACCESS_*.
  accel_status_t (*va_set_access)(accel_drv_device_t *device,
                                  uint64_t address, uint64_t size_bytes,
                                  uint32_t access);
  // Physical memory: created zeroed.
  accel_status_t (*phys_create)(accel_drv_device_t *device,
                                uint64_t size_bytes, uint32_t flags,
                                accel_drv_phys_t **out_phys);
  void (*phys_release)(accel_drv_phys_t *phys);
  // Optional (NULL: the generic layer maps the memory and zeroes it through
  // host_pointer). Makes all of |phys| read as zeros without mapping it,
  // for every mapping and importer; may give its pages back to the system
  // (the host backend punches a hole in its memfd, so pages never touched
  // are not faulted in to be cleared).
  accel_status_t (*phys_clear)(accel_drv_phys_t *phys);
  accel_status_t (*phys_map)(accel_drv_device_t *device, uint64_t address,
                             accel_drv_phys_t *phys, uint64_t phys_offset,
                             uint64_t size_bytes);
  // Makes the range inaccessible again (still reserved).
  void (*phys_unmap)(accel_drv_device_t *device, uint64_t address,
                     uint64_t size_bytes);
  // Optional. Exports physical memory as a file descriptor another process
  // can import (cuMemExportToShareableHandle). The caller owns the fd.
  accel_status_t (*phys_export_fd)(accel_drv_phys_t *phys, int *out_fd);
  // Optional. Imports physical memory of |size_bytes| from |fd| (not
  // consumed: the backend duplicates it). Fails if the fd is not memory of
  // that size.
  accel_status_t (*phys_import_fd)(accel_drv_device_t *device, int fd,
                                   uint64_t size_bytes,
                                   accel_drv_phys_t **out_phys);
  // Host pointer for a device address, NULL if not host-visible.
  void *(*host_pointer)(accel_drv_device_t *device, uint64_t address);
  // Optional. Pins host memory the caller owns for device access
  // (cuMemHostRegister) and returns the device address the device uses for
  // it. |host_ptr| and |size_bytes| are multiples of the host page size.
  accel_status_t (*host_register)(accel_drv_device_t *device, void *host_ptr,
                                  uint64_t size_bytes, uint64_t *out_address);
  void (*host_unregister)(accel_drv_device_t *device, void *host_ptr,
                          uint64_t size_bytes);
  // Optional (NULL: the generic layer zeroes through host_pointer, and a
  // device that is not host-visible cannot zero). Sets |size_bytes| of
  // mapped memory at |address| to zero and returns when it is done.
  accel_status_t (*zero)(accel_drv_device_t *device, uint64_t address,
                         uint64_t size_bytes);
};

#endif  // ACCEL_CORE_DRIVER_MEMORY_H_
