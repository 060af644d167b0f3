// A backend that wraps the host backend and fails the Nth call of a chosen
// kind, so that every error path of the runtime's constructors and commands
// is reached by a test (and, under ASan, shown to leak nothing).
#ifndef ACCEL_TESTS_FAULT_DRIVER_H_
#define ACCEL_TESTS_FAULT_DRIVER_H_

#include "accel/accel.h"
#include "core/driver.h"
#include "core/driver_queue.h"
#include "dma/dma_impl.h"

typedef enum fault_op {
  FAULT_OP_OPEN = 0,
  FAULT_OP_DEVICE_OPEN,
  FAULT_OP_VA_RESERVE,
  FAULT_OP_PHYS_CREATE,
  FAULT_OP_PHYS_MAP,
  FAULT_OP_SEMAPHORE_CREATE,
  FAULT_OP_QUEUE_CREATE,
  FAULT_OP_QUEUE_SUBMIT,
  FAULT_OP_DMA_RING_CREATE,
  FAULT_OP_RECORDING_CREATE,
  FAULT_OP_COUNT,
} fault_op_t;

// Names an op for messages.
const char *fault_op_name(fault_op_t op);

// Arms |op| to fail its |nth| call from now (1 = the next call) with
// |status|; 0 disarms. Counters restart at arming. Not thread-safe.
void fault_driver_arm(fault_op_t op, uint32_t nth, accel_status_t status);

// Disarms every op and clears the counters.
void fault_driver_reset(void);

// Calls of |op| since it was last armed or reset.
uint32_t fault_driver_calls(fault_op_t op);

// Whether runtimes created from now on get the optional queue_host_call and
// queue_launch ops (default: yes). Without them, host calls and launches
// take the stream layer's generic path: a command built and handed to
// queue_submit.
void fault_driver_offer_direct_submit_ops(bool offer);

// Whether runtimes created from now on get the optional recording_create
// and recording_destroy ops (default: yes). Without them, command buffers
// replay through ordinary submits (the generic fallback).
void fault_driver_offer_recordings(bool offer);

// Creates a runtime whose only backend is the fault wrapper ("fault:0").
accel_status_t fault_runtime_create(const accel_runtime_options_t *opts,
                                    accel_runtime_t **out_runtime);

// Makes the next copy or fill that ring |ring_index| of |queue| executes fail
// with |status| (an engine error, which poisons the ring), through the host
// backend's own test hook: fault injection is a test-support matter, not an
// entry of the driver interface. |queue| must run on host copy engines.
// From then on the queue's copies stay on the engines.
accel_status_t fault_dma_queue_inject(accel_dma_queue_t *queue,
                                      uint32_t ring_index,
                                      accel_status_t status);

#endif  // ACCEL_TESTS_FAULT_DRIVER_H_
