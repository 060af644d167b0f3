// Internal layout of a buffer, shared with lib/stream and lib/dma (which
// resolve addresses and hold references through |object|).
#ifndef ACCEL_MEM_BUFFER_IMPL_H_
#define ACCEL_MEM_BUFFER_IMPL_H_

#include "accel/memory.h"
#include "core/driver.h"
#include "core/object.h"

struct accel_buffer {
  accel_object_t object;  // first: commands release buffers through it
  accel_device_t *device;
  uint64_t address;     // device address of byte 0
  uint64_t size_bytes;  // as requested
  uint32_t kind;        // accel_memory_kind_t
  // Backing: one reserved range with one physical allocation mapped into it.
  uint64_t mapped_bytes;
  accel_drv_phys_t *phys;
  char tag[32];
};

// Checks that [offset, offset + size) lies in |buffer|, with a message naming
// |what| ("copy destination").
accel_status_t accel_buffer_check_range(const accel_buffer_t *buffer,
                                        uint64_t offset, uint64_t size_bytes,
                                        const char *what);

#endif  // ACCEL_MEM_BUFFER_IMPL_H_
