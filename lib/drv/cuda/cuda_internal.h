// Internals of the CUDA backend: the driver API table loaded at run time,
// devices on primary contexts, semaphores on device-visible host words, and
// queues on CUstreams. docs/cuda-backend.md describes the mapping.
#ifndef ACCEL_DRV_CUDA_INTERNAL_H_
#define ACCEL_DRV_CUDA_INTERNAL_H_

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/driver.h"
#include "core/driver_copy.h"
#include "core/driver_device.h"
#include "core/driver_dispatch.h"
#include "core/driver_memory.h"
#include "core/driver_queue.h"
#include "core/driver_sync.h"
#include "core/error.h"
#include "drv/cuda/cuda_symbols.h"

// ---------------------------------------------------------------------------
// The driver API (cuda_loader.c).
// ---------------------------------------------------------------------------

typedef struct accel_cuda_api {
#define ACCEL_CUDA_API_FIELD(name) __typeof__(&name) name;
  ACCEL_CUDA_SYMBOLS(ACCEL_CUDA_API_FIELD)
#undef ACCEL_CUDA_API_FIELD
  void *library;  // the dlopen handle
  int driver_version;
} accel_cuda_api_t;

// Loads libcuda (ACCEL_CUDA_LIBRARY, else "libcuda.so.1"), resolves every
// entry of ACCEL_CUDA_SYMBOLS and initializes the driver. Returns
// ACCEL_ERROR_UNAVAILABLE with the reason (no library, the toolkit's stub
// library, a driver older than ACCEL_CUDA_API_VERSION, no device, ...) when
// there is nothing to use; |api| is then closed again.
accel_status_t accel_cuda_api_load(accel_cuda_api_t *api);
void accel_cuda_api_unload(accel_cuda_api_t *api);

// ---------------------------------------------------------------------------
// CUresult conversion (cuda_error.c): the one place CUresult meets
// accel_status_t.
// ---------------------------------------------------------------------------

// The accel code for |result|.
accel_status_t accel_cuda_status(CUresult result);

// True for the errors after which the context is unusable (illegal address,
// launch failure, ECC, ...): the device is lost.
bool accel_cuda_result_is_sticky(CUresult result);

// Sets this thread's message to "|fmt|: NAME (description)" with the
// driver's own name and description of |result|, and returns its code.
accel_status_t accel_cuda_error(const accel_cuda_api_t *api, CUresult result,
                                const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// ---------------------------------------------------------------------------
// Backend and devices (cuda_driver.c).
// ---------------------------------------------------------------------------

typedef struct accel_cuda_list {
  struct accel_cuda_list *prev, *next;
} accel_cuda_list_t;

struct accel_drv_backend {
  accel_drv_options_t options;
  accel_cuda_api_t api;
  uint32_t device_count;
};

struct accel_drv_device {
  accel_drv_backend_t *backend;
  const accel_cuda_api_t *cu;
  uint32_t ordinal;
  CUdevice dev;
  CUcontext ctx;  // the primary context, retained
  uint64_t granularity;  // cuMemGetAllocationGranularity (minimum)
  uint64_t spin_ns;
  int32_t numa_node;
  int sm_major, sm_minor, sm_count;
  int copy_engines;  // CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT
  int priority_least, priority_greatest;  // cuCtxGetStreamPriorityRange
  bool stream_mem_ops;  // 64-bit cuStreamWaitValue64 / WriteValue64
  bool posix_fd;        // cuMemCreate with a POSIX fd handle type
  // An internal stream for zeroing fresh physical memory and for polling
  // the context's health (cuStreamQuery returns a sticky error).
  CUstream internal;
  pthread_mutex_t internal_lock;  // guards |internal|'s use
  // Set once when a sticky error is seen: the device is lost.
  accel_error_state_t lost;
  // Every live semaphore and queue of the device, failed when it is lost.
  pthread_mutex_t objects_lock;
  accel_cuda_list_t semaphores;  // guarded by objects_lock
  accel_cuda_list_t queues;      // guarded by objects_lock
  uint64_t last_health_ns;  // relaxed hint: last health poll
  // Drops the references of completed commands soon after they complete
  // (cuda_queue.c): host functions may not, since a release may call CUDA.
  pthread_t reaper;
  bool reaper_started;
  pthread_mutex_t reaper_lock;
  pthread_cond_t reaper_cond;   // a submit left references to drop
  bool reaper_stop;             // reaper_lock
  uint32_t reaper_work;         // reaper_lock: submits since the last pass
  // Held by the reaper across a pass (taking references and dropping
  // them): a queue's destroy takes it once after unlinking the queue, so
  // that no reference of the queue is still being dropped when it returns.
  pthread_mutex_t reap_lock;
};

struct accel_drv_phys {
  accel_drv_device_t *device;
  CUmemGenericAllocationHandle handle;
  uint64_t size_bytes;
};

// Makes the device's primary context current on this thread. Returns the
// device's stored loss (message set) when it is lost.
accel_status_t accel_cuda_enter(accel_drv_device_t *device);

// Converts |result| like accel_cuda_error and, when it is sticky, marks the
// device lost (failing its semaphores and queues) first.
accel_status_t accel_cuda_check(accel_drv_device_t *device, CUresult result,
                                const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Polls the context for a sticky error at most once per millisecond (waits
// call it while they spin); returns the device's loss, if any.
accel_status_t accel_cuda_device_poll(accel_drv_device_t *device);

// Marks the device lost with |message| (first loss wins) and fails every
// semaphore and queue of the device with ACCEL_ERROR_DEVICE_LOST.
void accel_cuda_device_lose(accel_drv_device_t *device, const char *message);

static inline void accel_cuda_list_init(accel_cuda_list_t *head) {
  head->prev = head->next = head;
}
static inline void accel_cuda_list_add(accel_cuda_list_t *head,
                                       accel_cuda_list_t *node) {
  node->next = head->next;
  node->prev = head;
  head->next->prev = node;
  head->next = node;
}
static inline void accel_cuda_list_del(accel_cuda_list_t *node) {
  node->prev->next = node->next;
  node->next->prev = node->prev;
  node->prev = node->next = node;
}

uint64_t accel_cuda_now_ns(void);

// ---------------------------------------------------------------------------
// Semaphores (cuda_semaphore.c): a 64-bit word in pinned, device-mapped host
// memory that streams write (cuStreamWriteValue64) and wait on
// (cuStreamWaitValue64), and that host waits poll.
// ---------------------------------------------------------------------------

struct accel_drv_semaphore {
  accel_drv_device_t *device;
  _Atomic uint64_t *word;    // host view of the value
  CUdeviceptr word_device;   // the same word for the device
  accel_error_state_t error;
  // The value when the semaphore failed (what query reports from then on:
  // later device writes belong to work the failure skipped). |failing| is
  // taken by the one thread that records the failure.
  atomic_flag failing;
  _Atomic uint64_t value_at_failure;
  accel_cuda_list_t link;  // in device->semaphores (objects_lock)
};

accel_status_t accel_cuda_semaphore_create(accel_drv_device_t *device,
                                           uint64_t initial_value,
                                           accel_drv_semaphore_t **out);
void accel_cuda_semaphore_destroy(accel_drv_semaphore_t *semaphore);
accel_status_t accel_cuda_semaphore_query(accel_drv_semaphore_t *semaphore,
                                          uint64_t *out_value);
accel_status_t accel_cuda_semaphore_signal(accel_drv_semaphore_t *semaphore,
                                           uint64_t value);
void accel_cuda_semaphore_fail(accel_drv_semaphore_t *semaphore,
                               accel_status_t status, const char *message);
accel_status_t accel_cuda_semaphore_wait(
    uint32_t count, accel_drv_semaphore_t *const *semaphores,
    const uint64_t *values, accel_wait_mode_t mode, uint64_t timeout_ns,
    uint32_t *out_index);
// The same, polling the devices' health while it waits only when
// |poll_health| (never inside a host function, which must not call CUDA).
accel_status_t accel_cuda_semaphore_wait_ex(
    uint32_t count, accel_drv_semaphore_t *const *semaphores,
    const uint64_t *values, accel_wait_mode_t mode, uint64_t timeout_ns,
    uint32_t *out_index, bool poll_health);

// ---------------------------------------------------------------------------
// Queues (cuda_queue.c): one CUstream each.
// ---------------------------------------------------------------------------

// A command whose references or signal outlive its submit.
typedef struct cuda_pending {
  uint64_t seq;
  accel_object_t *refs[2];
  accel_drv_semaphore_t *signal;  // SIGNAL: failed if the queue fails first
  // WAIT on an abortable queue: the stream waits for the queue's gate word
  // to reach |gate|, which the reaper stores once |wait| reaches |value|.
  accel_drv_semaphore_t *wait;
  uint64_t value;
  uint64_t gate;
} cuda_pending_t;

struct accel_drv_queue {
  accel_cuda_list_t link;  // first: in device->queues (objects_lock)
  accel_drv_device_t *device;
  CUstream stream;
  accel_drv_semaphore_t *completion;
  _Atomic uint64_t *submitted_seq;
  bool abort_on_destroy;
  char name[64];
  // Serializes submits: the stream's order is the order of the calls.
  pthread_mutex_t submit_lock;
  uint64_t last_seq;  // submit_lock
  // Guards the pending ring; never held across a CUDA call, so that host
  // functions may take it while a submitter is inside the driver.
  pthread_mutex_t pending_lock;
  cuda_pending_t *pending;  // ring of pending_cap entries (pending_lock)
  uint32_t pending_head, pending_count, pending_cap;
  // The queue's failure (first wins), stored before |failed| is set.
  accel_error_state_t error;
  // Set once (after |error|) when the queue fails; host functions skip
  // after it.
  _Atomic int failed;
  // Abortable queues (abort_on_destroy): a device wait cannot be taken back,
  // so their WAITs wait on this private word instead, which the reaper
  // raises to each wait's number once its semaphore is reached, and destroy
  // raises past every wait (ACCEL_CUDA_GATE_OPEN) to interrupt them.
  _Atomic uint64_t *gate_word;
  CUdeviceptr gate_word_device;
  uint64_t gate_count;  // submit_lock: WAITs issued
  // Records of host functions not run yet (pending_lock): the list head.
  accel_cuda_list_t host_recs;
};

// What an aborting destroy stores in the gate word: past every wait.
#define ACCEL_CUDA_GATE_OPEN (1ull << 62)

// Fails the queue at command |seq| of kind |kind| with "stream "NAME"
// command #SEQ (KIND) failed: |why|" (the first failure wins): its completion
// semaphore and every pending SIGNAL after |seq| fail with it.
void accel_cuda_queue_fail(accel_drv_queue_t *q, uint64_t seq, uint32_t kind,
                           accel_status_t status, const char *why);
// Whether the queue has failed (host functions skip from then on).
bool accel_cuda_queue_failed(accel_drv_queue_t *q);
// Appends |p| to the queue's pending list (the reaper drops its references
// once the stream passed |p.seq|); ACCEL_ERROR_OUT_OF_MEMORY when it cannot
// grow.
accel_status_t accel_cuda_queue_pending_push(accel_drv_queue_t *q,
                                             cuda_pending_t p);

accel_status_t accel_cuda_queue_create(accel_drv_device_t *device,
                                       const accel_drv_queue_params_t *params,
                                       accel_drv_queue_t **out_queue);
void accel_cuda_queue_destroy(accel_drv_queue_t *queue);
accel_status_t accel_cuda_queue_submit(accel_drv_queue_t *queue,
                                       const accel_cmd_t *commands,
                                       uint32_t count, uint64_t *out_last_seq);
// Starts and stops the device's reaper thread (cuda_queue.c).
accel_status_t accel_cuda_reaper_start(accel_drv_device_t *device);
void accel_cuda_reaper_stop(accel_drv_device_t *device);
// Fails |queue| with the device's loss (called under objects_lock).
void accel_cuda_queue_lose_locked(accel_drv_queue_t *queue,
                                  const char *message);

// ---------------------------------------------------------------------------
// Copy engines (cuda_dma.c): DMA rings executed on dedicated streams.
// ---------------------------------------------------------------------------

uint32_t accel_cuda_copy_engine_count(accel_drv_device_t *device);
accel_status_t accel_cuda_dma_ring_create(
    accel_drv_device_t *device, const accel_drv_dma_ring_params_t *params,
    accel_drv_dma_ring_t **out_ring, accel_dma_ring_mem_t *out_mem);
void accel_cuda_dma_ring_destroy(accel_drv_dma_ring_t *ring);
void accel_cuda_dma_ring_doorbell(accel_drv_dma_ring_t *ring, uint64_t tail);
accel_status_t accel_cuda_dma_ring_wait(accel_drv_dma_ring_t *ring,
                                        uint64_t head, uint64_t timeout_ns);
void accel_cuda_dma_ring_abort(accel_drv_dma_ring_t *ring);

// ---------------------------------------------------------------------------
// Code objects and launches (cuda_module.c).
// ---------------------------------------------------------------------------

struct accel_drv_module {
  accel_drv_device_t *device;
  CUlibrary library;
};

struct accel_drv_kernel {
  accel_drv_module_t *module;
  CUfunction function;  // in the device's primary context
  char name[128];
};

accel_status_t accel_cuda_module_load(accel_drv_device_t *device,
                                      const void *image, uint64_t size_bytes,
                                      accel_drv_module_t **out_module);
void accel_cuda_module_unload(accel_drv_module_t *module);
accel_status_t accel_cuda_kernel_get(accel_drv_module_t *module,
                                     const char *name,
                                     accel_drv_kernel_t **out_kernel);
accel_status_t accel_cuda_kernel_launch(accel_drv_queue_t *queue,
                                        accel_drv_kernel_t *kernel,
                                        const accel_drv_launch_t *launch,
                                        accel_object_t *ref0,
                                        accel_object_t *ref1,
                                        uint64_t *out_last_seq);
// Enqueues |launch| of |kernel| on |stream| with the kernel ABI's parameter
// layout (called by the queue under its submit order).
CUresult accel_cuda_enqueue_launch(accel_drv_kernel_t *kernel,
                                   const accel_drv_launch_t *launch,
                                   CUstream stream);
// The launch command's marker: a LAUNCH command whose exec is this carries
// a device launch (payload: an accel_cuda_launch_cmd_t), not a host one.
accel_status_t accel_cuda_launch_marker(void *payload,
                                        accel_drv_device_t *device);
typedef struct accel_cuda_launch_cmd {
  accel_drv_kernel_t *kernel;
  const accel_drv_launch_t *launch;
} accel_cuda_launch_cmd_t;

// ---------------------------------------------------------------------------
// Command buffers on CUDA graphs (cuda_graph.c).
// ---------------------------------------------------------------------------

// The driver interface's recording_create / recording_destroy: keeps the
// commands; each range replayed gets its CUgraph on first use.
accel_status_t accel_cuda_recording_create(
    accel_drv_device_t *device, const accel_drv_recording_params_t *params,
    accel_drv_recording_t **out_recording);
void accel_cuda_recording_destroy(accel_drv_recording_t *recording);
// Enqueues the EXECUTE |cmd| (seq |seq|) on |queue|'s stream, under the
// queue's submit order: updates the nodes whose values this execute changes
// and launches the range's CUgraphExec. A refusal sets the message.
accel_status_t accel_cuda_graph_execute(accel_drv_queue_t *queue,
                                        const accel_cmd_t *cmd, uint64_t seq);

// Narrows a fill pattern of |size| bytes to the smallest element that
// repeats it (0xabab as 2 bytes: 0xab as 1); returns the element size and
// leaves the element's value in |*pattern|.
uint32_t accel_cuda_fill_narrow(uint64_t *pattern, uint32_t size);

// Enqueues a fill of |size_bytes| at |dst| with a 1/2/4/8-byte pattern on
// |stream| (shared by queues and DMA rings).
CUresult accel_cuda_enqueue_fill(accel_drv_device_t *device, CUstream stream,
                                 uint64_t dst, uint64_t size_bytes,
                                 uint64_t pattern, uint32_t pattern_size);

#endif  // ACCEL_DRV_CUDA_INTERNAL_H_
