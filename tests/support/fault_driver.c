#include "fault_driver.h"

#include <stdatomic.h>
#include <string.h>

#include "core/error.h"
#include "core/runtime_impl.h"
#include "dma/dma_impl.h"
#include "drv/host/host_internal.h"
#include "runtime/runtime_impl.h"

// Test-only global state: one armed fault per op.
static struct {
  _Atomic uint32_t calls;
  uint32_t nth;
  accel_status_t status;
} g_faults[FAULT_OP_COUNT];

static const char *const k_op_names[FAULT_OP_COUNT] = {
    "open",       "device_open",      "va_reserve",   "phys_create",
    "phys_map",   "semaphore_create", "queue_create", "queue_submit",
    "dma_ring_create",
    "recording_create",
};

const char *fault_op_name(fault_op_t op) {
  return op < FAULT_OP_COUNT ? k_op_names[op] : "?";
}

void fault_driver_arm(fault_op_t op, uint32_t nth, accel_status_t status) {
  atomic_store(&g_faults[op].calls, 0);
  g_faults[op].nth = nth;
  g_faults[op].status = status;
}

void fault_driver_reset(void) {
  for (int i = 0; i < FAULT_OP_COUNT; ++i) {
    fault_driver_arm((fault_op_t)i, 0, ACCEL_OK);
  }
}

uint32_t fault_driver_calls(fault_op_t op) {
  return atomic_load(&g_faults[op].calls);
}

// Counts a call; returns the injected failure when this is the armed one.
static accel_status_t hit(fault_op_t op) {
  uint32_t n = atomic_fetch_add(&g_faults[op].calls, 1) + 1;
  if (g_faults[op].nth != 0 && n == g_faults[op].nth) {
    return accel_error(g_faults[op].status, "injected %s failure (call %u)",
                       k_op_names[op], n);
  }
  return ACCEL_OK;
}

static accel_status_t f_open(const accel_driver_t *driver,
                             const accel_drv_options_t *options,
                             accel_drv_backend_t **out) {
  ACCEL_RETURN_IF_ERROR(hit(FAULT_OP_OPEN));
  return accel_host_driver.device->backend_open(&accel_host_driver, options, out);
}
static accel_status_t f_device_open(accel_drv_backend_t *b, uint32_t ordinal,
                                    accel_drv_device_t **out) {
  ACCEL_RETURN_IF_ERROR(hit(FAULT_OP_DEVICE_OPEN));
  return accel_host_driver.device->open(b, ordinal, out);
}
static accel_status_t f_va_reserve(accel_drv_device_t *d, uint64_t size,
                                   uint64_t alignment, uint64_t *out) {
  ACCEL_RETURN_IF_ERROR(hit(FAULT_OP_VA_RESERVE));
  return accel_host_driver.memory->va_reserve(d, size, alignment, out);
}
static accel_status_t f_phys_create(accel_drv_device_t *d, uint64_t size,
                                    uint32_t flags, accel_drv_phys_t **out) {
  ACCEL_RETURN_IF_ERROR(hit(FAULT_OP_PHYS_CREATE));
  return accel_host_driver.memory->phys_create(d, size, flags, out);
}
static accel_status_t f_phys_map(accel_drv_device_t *d, uint64_t address,
                                 accel_drv_phys_t *phys, uint64_t offset,
                                 uint64_t size) {
  ACCEL_RETURN_IF_ERROR(hit(FAULT_OP_PHYS_MAP));
  return accel_host_driver.memory->phys_map(d, address, phys, offset, size);
}
static accel_status_t f_semaphore_create(accel_drv_device_t *d, uint64_t v,
                                         accel_drv_semaphore_t **out) {
  ACCEL_RETURN_IF_ERROR(hit(FAULT_OP_SEMAPHORE_CREATE));
  return accel_host_driver.sync->create(d, v, out);
}
static accel_status_t f_queue_create(accel_drv_device_t *d,
                                     const accel_drv_queue_params_t *params,
                                     accel_drv_queue_t **out) {
  ACCEL_RETURN_IF_ERROR(hit(FAULT_OP_QUEUE_CREATE));
  return accel_host_driver.queue->create(d, params, out);
}
static accel_status_t f_queue_submit(accel_drv_queue_t *q,
                                     const accel_cmd_t *cmds, uint32_t count,
                                     uint64_t *out_last_seq) {
  accel_status_t st = hit(FAULT_OP_QUEUE_SUBMIT);
  if (st != ACCEL_OK) {
    // Every submit entry owns the references it is handed (driver_queue.h).
    for (uint32_t i = 0; i < count; ++i) {
      accel_object_release(cmds[i].refs[0]);
      accel_object_release(cmds[i].refs[1]);
    }
    return st;
  }
  return accel_host_driver.queue->submit(q, cmds, count, out_last_seq);
}

static bool g_offer_direct = true;
static bool g_offer_recordings = true;

void fault_driver_offer_recordings(bool offer) {
  g_offer_recordings = offer;
}

void fault_driver_offer_direct_submit_ops(bool offer) {
  g_offer_direct = offer;
}

// Host calls and launches count as submits: the Nth submit fails whichever
// path it took.
static accel_status_t f_queue_host_call(accel_drv_queue_t *q,
                                        accel_host_fn_t fn, void *user_data,
                                        uint64_t *out_last_seq) {
  ACCEL_RETURN_IF_ERROR(hit(FAULT_OP_QUEUE_SUBMIT));
  return accel_host_driver.queue->host_call(q, fn, user_data, out_last_seq);
}
static accel_status_t f_queue_launch(accel_drv_queue_t *q,
                                     accel_launch_exec_fn_t exec,
                                     void *payload, accel_object_t *ref0,
                                     accel_object_t *ref1,
                                     uint64_t *out_last_seq) {
  accel_status_t st = hit(FAULT_OP_QUEUE_SUBMIT);
  if (st != ACCEL_OK) {
    // The op owns the references, also when it fails (driver_queue.h).
    accel_object_release(ref0);
    accel_object_release(ref1);
    return st;
  }
  return accel_host_driver.queue->launch(q, exec, payload, ref0, ref1,
                                        out_last_seq);
}

static accel_status_t f_recording_create(
    accel_drv_device_t *d, const accel_drv_recording_params_t *params,
    accel_drv_recording_t **out) {
  ACCEL_RETURN_IF_ERROR(hit(FAULT_OP_RECORDING_CREATE));
  return accel_host_driver.queue->recording_create(d, params, out);
}

static accel_status_t f_dma_ring_create(
    accel_drv_device_t *d, const accel_drv_dma_ring_params_t *params,
    accel_drv_dma_ring_t **out, accel_dma_ring_mem_t *out_mem) {
  ACCEL_RETURN_IF_ERROR(hit(FAULT_OP_DMA_RING_CREATE));
  return accel_host_driver.copy->ring_create(d, params, out, out_mem);
}

// The wrapper's tables: copies of the host backend's with the intercepted
// entries replaced. Every entry the wrapper does not intercept forwards to
// the host backend, including entries added after this file was written.
static accel_driver_t g_fault_driver;
static accel_drv_device_ops_t g_fault_device_ops;
static accel_drv_memory_ops_t g_fault_memory_ops;
static accel_drv_sync_ops_t g_fault_sync_ops;
static accel_drv_queue_ops_t g_fault_queue_ops;
static accel_drv_copy_ops_t g_fault_copy_ops;

accel_status_t fault_runtime_create(const accel_runtime_options_t *opts,
                                    accel_runtime_t **out_runtime) {
  g_fault_device_ops = *accel_host_driver.device;
  g_fault_device_ops.backend_open = f_open;
  g_fault_device_ops.open = f_device_open;
  g_fault_memory_ops = *accel_host_driver.memory;
  g_fault_memory_ops.va_reserve = f_va_reserve;
  g_fault_memory_ops.phys_create = f_phys_create;
  g_fault_memory_ops.phys_map = f_phys_map;
  g_fault_sync_ops = *accel_host_driver.sync;
  g_fault_sync_ops.create = f_semaphore_create;
  g_fault_queue_ops = *accel_host_driver.queue;
  g_fault_queue_ops.create = f_queue_create;
  g_fault_queue_ops.submit = f_queue_submit;
  g_fault_queue_ops.host_call = g_offer_direct ? f_queue_host_call : NULL;
  g_fault_queue_ops.launch = g_offer_direct ? f_queue_launch : NULL;
  g_fault_queue_ops.recording_create = f_recording_create;
  if (!g_offer_recordings) {
    g_fault_queue_ops.recording_create = NULL;
    g_fault_queue_ops.recording_destroy = NULL;
  }
  g_fault_copy_ops = *accel_host_driver.copy;
  g_fault_copy_ops.ring_create = f_dma_ring_create;
  g_fault_driver = accel_host_driver;
  g_fault_driver.name = "fault";
  g_fault_driver.device = &g_fault_device_ops;
  g_fault_driver.memory = &g_fault_memory_ops;
  g_fault_driver.sync = &g_fault_sync_ops;
  g_fault_driver.queue = &g_fault_queue_ops;
  g_fault_driver.copy = &g_fault_copy_ops;
  const accel_driver_t *drivers[] = {&g_fault_driver};
  return accel_runtime_create_with_drivers(opts, drivers, 1, out_runtime);
}

accel_status_t fault_dma_queue_inject(accel_dma_queue_t *queue,
                                      uint32_t ring_index,
                                      accel_status_t status) {
  if (ring_index >= queue->ring_count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "dma queue \"%s\": ring %u of %u", queue->name,
                       ring_index, queue->ring_count);
  }
  if (queue->device->driver->copy->ring_create != accel_host_dma_ring_create &&
      queue->device->driver->copy->ring_create != f_dma_ring_create) {
    return accel_error(ACCEL_ERROR_UNSUPPORTED,
                       "dma queue: fault injection needs host rings");
  }
  pthread_mutex_lock(&queue->submit_lock);
  // The fault is for an engine to hit: copies of this queue stay on the
  // engines from now on (see accel_dma_submit's inline path).
  queue->inline_max_bytes = 0;
  accel_host_dma_ring_inject_fault(queue->rings[ring_index].drv, status);
  accel_dma_queue_unlock(queue);
  return ACCEL_OK;
}
