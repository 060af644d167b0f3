// The driver interface: what a backend (host, cuda) provides. Generic layers
// (lib/mem, lib/dma, lib/stream, lib/abi) call only these functions; backends
// know nothing of the layers above.
//
// A backend is a const table of function pointers. Backend objects (devices,
// physical memory, semaphores, queues) are opaque to the generic layers.
// Validation happens in the public entry points; backends may assume valid
// arguments. Every function that can fail returns accel_status_t and sets the
// thread message. A feature a backend lacks is ACCEL_ERROR_UNSUPPORTED with a
// message, never a silent success; optional function pointers may be NULL, and
// callers then report UNSUPPORTED themselves.
#ifndef ACCEL_CORE_DRIVER_H_
#define ACCEL_CORE_DRIVER_H_

#include <sched.h>
#include <stdbool.h>

#include "accel/device.h"
#include "accel/runtime.h"
#include "accel/semaphore.h"
#include "accel/stream.h"
#include "core/object.h"

typedef struct accel_driver accel_driver_t;
typedef struct accel_drv_backend accel_drv_backend_t;  // an opened backend
typedef struct accel_drv_device accel_drv_device_t;
typedef struct accel_drv_phys accel_drv_phys_t;  // physical memory
typedef struct accel_drv_semaphore accel_drv_semaphore_t;
typedef struct accel_drv_queue accel_drv_queue_t;
typedef struct accel_drv_dma_ring accel_drv_dma_ring_t;  // a copy-engine ring

// Resolved runtime options handed to backends (defaults and environment
// already applied).
typedef struct accel_drv_options {
  uint64_t spin_ns;
  uint32_t host_device_count;
  // Copy engines per device (ACCEL_COPY_ENGINES); 0: the backend's default.
  uint32_t copy_engine_count;
} accel_drv_options_t;

// ---------------------------------------------------------------------------
// Commands: what a queue executes, as the generic layers hand them over (one
// cache line each). A backend stores them as it likes: the host queue keeps
// compact records of the words each kind uses.
// ---------------------------------------------------------------------------

typedef enum accel_cmd_kind {
  ACCEL_CMD_HOST_CALL = 0,
  ACCEL_CMD_FILL = 1,
  ACCEL_CMD_COPY = 2,
  ACCEL_CMD_SIGNAL = 3,
  ACCEL_CMD_WAIT = 4,
  ACCEL_CMD_LAUNCH = 5,
  ACCEL_CMD_KIND_COUNT = 6,
} accel_cmd_kind_t;

// Names a command kind for messages ("host_call", "copy", ...).
const char *accel_cmd_kind_name(uint32_t kind);

// Copy directions (accel_cmd_t.flags for ACCEL_CMD_COPY).
enum {
  ACCEL_COPY_DEVICE_TO_DEVICE = 0,
  ACCEL_COPY_HOST_TO_DEVICE = 1,
  ACCEL_COPY_DEVICE_TO_HOST = 2,
};

// Executes a launch payload on a host-visible device: called by the host
// backend with the payload; returns a status (and message) on failure.
typedef accel_status_t (*accel_launch_exec_fn_t)(void *payload,
                                                 accel_drv_device_t *device);

typedef struct accel_cmd {
  uint8_t kind;   // accel_cmd_kind_t
  uint8_t pad0[3];
  uint32_t flags;  // per kind (copy direction)
  uint64_t seq;    // position in the queue, from 1 (set by submit)
  union {
    struct {
      accel_host_fn_t fn;
      void *user_data;
    } host_call;
    struct {
      uint64_t dst;  // device address
      uint64_t size_bytes;
      uint64_t pattern;
      uint32_t pattern_size;
    } fill;
    struct {
      uint64_t dst;  // device address, or host pointer for DEVICE_TO_HOST
      uint64_t src;  // device address, or host pointer for HOST_TO_DEVICE
      uint64_t size_bytes;
    } copy;
    struct {
      accel_drv_semaphore_t *semaphore;
      uint64_t value;
      // If not NULL, the device time (ns) is stored here before signalling.
      _Atomic uint64_t *timestamp_out;
    } signal;
    struct {
      accel_drv_semaphore_t *semaphore;
      uint64_t value;
    } wait;
    struct {
      accel_launch_exec_fn_t exec;
      void *payload;  // owned by refs[0]'s object
    } launch;
  };
  // References dropped once the command has completed or been aborted.
  accel_object_t *refs[2];
} accel_cmd_t;

_Static_assert(sizeof(accel_cmd_t) == 64, "a command is one cache line");

// Queue creation parameters.
typedef struct accel_drv_queue_params {
  uint32_t priority;  // accel_stream_priority_t
  bool abort_on_destroy;
  // Signalled to each command's seq after it completes; failed with the
  // command's error when one fails (that poisons the queue). Not owned.
  accel_drv_semaphore_t *completion;
  // If not NULL, set (under the queue's submit ordering) to the seq of the
  // last command accepted, so that waits know their target without a CAS.
  _Atomic uint64_t *submitted_seq;
  const char *name;
} accel_drv_queue_params_t;

// ---------------------------------------------------------------------------
// DMA rings: what a copy engine consumes. A ring is a power-of-two array of
// descriptors in memory shared by the host and the engine, in the shape of a
// hardware DMA ring: the host writes descriptors at its tail and rings the
// doorbell with the new tail; the engine executes them in order and writes
// back its head (descriptors retired, executed or aborted). Descriptors carry
// device addresses (virtual, so that physical pages may be remapped under
// queued work); the host keeps the objects they name alive until the ring's
// head has passed them (the engine never touches reference counts, which
// stay in the submitting thread's cache). Ordering between rings
// (and with streams) is by semaphore acquire (WAIT) and release (SIGNAL)
// descriptors, as on hardware copy engines.
// ---------------------------------------------------------------------------

typedef enum accel_dma_hw_op {
  ACCEL_DMA_HW_COPY = 0,    // strided 3D copy (1D: height = depth = 1)
  ACCEL_DMA_HW_FILL = 1,    // 1D fill with a 1/2/4/8-byte pattern
  ACCEL_DMA_HW_WAIT = 2,    // stall the ring until semaphore >= value
  ACCEL_DMA_HW_SIGNAL = 3,  // raise semaphore to value (never lowers it)
} accel_dma_hw_op_t;

// Byte counters by direction (accel_dma_hw_desc_t.direction).
enum {
  ACCEL_DMA_DIR_DEVICE_TO_DEVICE = 0,
  ACCEL_DMA_DIR_HOST_TO_DEVICE = 1,
  ACCEL_DMA_DIR_DEVICE_TO_HOST = 2,
  ACCEL_DMA_DIR_HOST_TO_HOST = 3,
  ACCEL_DMA_DIR_STAGING = 4,  // pageable <-> bounce buffer legs
  ACCEL_DMA_DIR_COUNT = 5,
};

// Descriptor hints (accel_dma_hw_desc_t.flags).
enum {
  // The destination will not be read again soon (the last leg of a staged
  // copy): an engine may write around its caches.
  ACCEL_DMA_HW_FLAG_STREAM_DST = 1u << 0,
};

typedef struct accel_dma_hw_desc {
  uint8_t op;         // accel_dma_hw_op_t
  uint8_t direction;  // ACCEL_DMA_DIR_* (COPY, FILL)
  uint8_t user_op;    // the public accel_dma_op_t it came from (messages)
  uint8_t flags;      // ACCEL_DMA_HW_FLAG_*
  uint32_t index;      // descriptor index in its submit; UINT32_MAX internal
  // Ownership word: the descriptor's ring position + 1, stored last (with
  // release, __atomic_store_n) by the host once the rest is written. The
  // engine may start on a descriptor whose word matches before the doorbell,
  // as hardware engines that poll their rings do; the doorbell wakes an
  // engine that stopped polling.
  uint64_t position;
  uint64_t submit_id;  // submit number in its queue, from 1 (messages)
  union {
    struct {
      uint64_t dst;  // device address of the first byte
      uint64_t src;
      uint64_t width;  // bytes per row
      uint32_t height;  // rows per slice (>= 1)
      uint32_t depth;   // slices (>= 1)
      uint64_t dst_pitch;  // bytes between rows
      uint64_t src_pitch;
      uint64_t dst_slice_pitch;  // bytes between slices
      uint64_t src_slice_pitch;
    } copy;
    struct {
      uint64_t dst;
      uint64_t size_bytes;
      uint64_t pattern;
      uint32_t pattern_size;
    } fill;
    struct {
      accel_drv_semaphore_t *semaphore;
      uint64_t value;
    } sem;  // WAIT, SIGNAL
  };
  // COPY, FILL: if not NULL, raised to |signal_value| once the descriptor
  // completed (a semaphore release folded into the descriptor, as hardware
  // copy engines offer), or failed with the ring's error if it did not.
  accel_drv_semaphore_t *signal_semaphore;
  uint64_t signal_value;
  // COPY, FILL: the descriptor's number among its ring's traced copies and
  // fills, from 1 (lib/trace: the engine reports its start and end with the
  // ring as the queue); 0: not traced (staging legs, host-to-host copies).
  uint64_t trace_seq;
  uint8_t pad1[16];
} accel_dma_hw_desc_t;

_Static_assert(sizeof(accel_dma_hw_desc_t) == 128,
               "a DMA descriptor is two cache lines");

// The memory a ring shares between host and engine.
typedef struct accel_dma_ring_mem {
  accel_dma_hw_desc_t *slots;  // slot_count descriptors
  uint32_t slot_count;         // a power of two
  // Written back by the engine: descriptors retired. Acquire-load it before
  // reusing a slot.
  const _Atomic uint64_t *head;
  // Engine counters: bytes moved by direction (ACCEL_DMA_DIR_*).
  const _Atomic uint64_t *bytes;
  // Set (release) by the engine when the ring fails; its fence then holds
  // the error. A flag on its own cache line, cheap to poll.
  const _Atomic uint32_t *failed;
} accel_dma_ring_mem_t;

typedef struct accel_drv_dma_ring_params {
  uint32_t engine;      // copy engine index, < copy_engine_count
  uint32_t slot_count;  // a power of two, >= 2
  // Failed with the ring's error when a descriptor fails; from then on the
  // ring aborts every descriptor (SIGNALs fail their semaphores with the same
  // message). Not owned; outlives the ring.
  accel_drv_semaphore_t *fence;
  const char *name;  // for messages ("queue0/ring1")
} accel_drv_dma_ring_params_t;

// ---------------------------------------------------------------------------
// The table.
// ---------------------------------------------------------------------------

struct accel_driver {
  // Backend name: "host", "cuda".
  const char *name;

  // Opens the backend. ACCEL_ERROR_UNAVAILABLE (no library, no hardware)
  // means "skip quietly".
  accel_status_t (*open)(const accel_driver_t *driver,
                         const accel_drv_options_t *options,
                         accel_drv_backend_t **out_backend);
  void (*close)(accel_drv_backend_t *backend);
  uint32_t (*device_count)(accel_drv_backend_t *backend);
  accel_status_t (*device_open)(accel_drv_backend_t *backend, uint32_t ordinal,
                                accel_drv_device_t **out_device);
  void (*device_close)(accel_drv_device_t *device);
  // Fills every field but |index| and |struct_size|.
  void (*device_info)(accel_drv_device_t *device, accel_device_info_t *info);

  // Clock: the device's notion of now, and a (host, device) pair taken as
  // close together as the backend can, for trace correlation.
  uint64_t (*device_time_ns)(accel_drv_device_t *device);
  void (*clock_pair)(accel_drv_device_t *device, uint64_t *out_host_ns,
                     uint64_t *out_device_ns);

  // Virtual memory (the cuMemAddressReserve family). Sizes and addresses are
  // multiples of the device page size.
  accel_status_t (*va_reserve)(accel_drv_device_t *device, uint64_t size_bytes,
                               uint64_t alignment, uint64_t *out_address);
  void (*va_release)(accel_drv_device_t *device, uint64_t address,
                     uint64_t size_bytes);
  // Physical memory: created zeroed.
  accel_status_t (*phys_create)(accel_drv_device_t *device,
                                uint64_t size_bytes, uint32_t flags,
                                accel_drv_phys_t **out_phys);
  void (*phys_release)(accel_drv_phys_t *phys);
  accel_status_t (*phys_map)(accel_drv_device_t *device, uint64_t address,
                             accel_drv_phys_t *phys, uint64_t phys_offset,
                             uint64_t size_bytes);
  // Makes the range inaccessible again (still reserved).
  void (*phys_unmap)(accel_drv_device_t *device, uint64_t address,
                     uint64_t size_bytes);
  // Host pointer for a device address, NULL if not host-visible.
  void *(*host_pointer)(accel_drv_device_t *device, uint64_t address);

  // Timeline semaphores.
  accel_status_t (*semaphore_create)(accel_drv_device_t *device,
                                     uint64_t initial_value,
                                     accel_drv_semaphore_t **out_semaphore);
  void (*semaphore_destroy)(accel_drv_semaphore_t *semaphore);
  // Returns the stored failure (with message) or OK, and the value.
  accel_status_t (*semaphore_query)(accel_drv_semaphore_t *semaphore,
                                    uint64_t *out_value);
  accel_status_t (*semaphore_signal)(accel_drv_semaphore_t *semaphore,
                                     uint64_t value);
  void (*semaphore_fail)(accel_drv_semaphore_t *semaphore,
                         accel_status_t status, const char *message);
  accel_status_t (*semaphore_wait)(uint32_t count,
                                   accel_drv_semaphore_t *const *semaphores,
                                   const uint64_t *values,
                                   accel_wait_mode_t mode, uint64_t timeout_ns,
                                   uint32_t *out_index);
  accel_status_t (*semaphore_fd)(accel_drv_semaphore_t *semaphore,
                                 uint64_t value, int *out_fd);

  // Hardware queues. submit copies |count| commands, numbers them (seq) in
  // queue order, and returns at once with the last number in |*out_last_seq|;
  // the queue owns the references of the commands it accepted. On failure the
  // commands not accepted (all of them for a single command) still belong to
  // the caller. A queue that has failed accepts nothing and returns its
  // stored error (the message of |params.completion|'s failure).
  // destroy drains or aborts as params.abort_on_destroy said.
  accel_status_t (*queue_create)(accel_drv_device_t *device,
                                 const accel_drv_queue_params_t *params,
                                 accel_drv_queue_t **out_queue);
  void (*queue_destroy)(accel_drv_queue_t *queue);
  accel_status_t (*queue_submit)(accel_drv_queue_t *queue,
                                 const accel_cmd_t *commands, uint32_t count,
                                 uint64_t *out_last_seq);

  // Optional (NULL: threads are not bound). Hands the device the CPUs its
  // threads should run on (its NUMA node's cores, from lib/topo). Called by
  // the runtime after device_open and before any queue_create; the backend
  // copies |cpus| and applies it to the threads it starts later.
  void (*device_set_affinity)(accel_drv_device_t *device,
                              const cpu_set_t *cpus);
  // Optional (host-visible devices): runs fn(ctx, id) once for every id in
  // the grid [0, group_count[0]) x [0, group_count[1]) x [0, group_count[2])
  // on the device's threads, the calling thread included, and returns when
  // all have run. Ids run concurrently and in any order; after the first
  // failure the remaining ids are skipped and that failure (status and
  // message) is returned. NULL: callers run the grid themselves.
  accel_status_t (*host_dispatch)(accel_drv_device_t *device,
                                  const uint32_t group_count[3],
                                  accel_status_t (*fn)(void *ctx,
                                                       const uint32_t id[3]),
                                  void *ctx);

  // --- Appended for lib/mem (issue 3). Optional: NULL means unsupported. ---

  // Access to a mapped range (cuMemSetAccess): one of ACCEL_DRV_ACCESS_*.
  accel_status_t (*va_set_access)(accel_drv_device_t *device,
                                  uint64_t address, uint64_t size_bytes,
                                  uint32_t access);
  // Pins host memory the caller owns for device access (cuMemHostRegister)
  // and returns the device address the device uses for it. |host_ptr| and
  // |size_bytes| are multiples of the host page size.
  accel_status_t (*host_register)(accel_drv_device_t *device, void *host_ptr,
                                  uint64_t size_bytes, uint64_t *out_address);
  void (*host_unregister)(accel_drv_device_t *device, void *host_ptr,
                          uint64_t size_bytes);
  // Exports physical memory as a file descriptor another process can import
  // (cuMemExportToShareableHandle). The caller owns the returned fd.
  accel_status_t (*phys_export_fd)(accel_drv_phys_t *phys, int *out_fd);
  // Imports physical memory of |size_bytes| from |fd| (not consumed: the
  // backend duplicates it). Fails if the fd is not memory of that size.
  accel_status_t (*phys_import_fd)(accel_drv_device_t *device, int fd,
                                   uint64_t size_bytes,
                                   accel_drv_phys_t **out_phys);

  // --- Appended for lib/dma (issue 4). Optional: NULL means unsupported. ---

  // Copy engines and their DMA rings (optional: NULL means the backend has
  // no copy engines and lib/dma reports UNSUPPORTED).
  uint32_t (*copy_engine_count)(accel_drv_device_t *device);
  // Creates an empty ring on engine params->engine and describes its shared
  // memory in |*out_mem| (valid until destroy).
  accel_status_t (*dma_ring_create)(accel_drv_device_t *device,
                                    const accel_drv_dma_ring_params_t *params,
                                    accel_drv_dma_ring_t **out_ring,
                                    accel_dma_ring_mem_t *out_mem);
  // Destroys a ring whose descriptors have all retired (head == tail).
  void (*dma_ring_destroy)(accel_drv_dma_ring_t *ring);
  // Publishes the descriptors written up to |tail| (absolute count, never
  // lower than before) to the engine and wakes it.
  void (*dma_ring_doorbell)(accel_drv_dma_ring_t *ring, uint64_t tail);
  // Blocks until the engine's head reaches |head| (space to write), at most
  // |timeout_ns|: ACCEL_ERROR_TIMEOUT otherwise.
  accel_status_t (*dma_ring_wait)(accel_drv_dma_ring_t *ring, uint64_t head,
                                  uint64_t timeout_ns);
  // Makes the engine abort every descriptor of |ring| it has not started,
  // a WAIT it is stalled on included (ACCEL_ERROR_ABORTED: SIGNALs fail).
  void (*dma_ring_abort)(accel_drv_dma_ring_t *ring);
  // Test hook: the next COPY or FILL the engine executes on |ring| fails with
  // |status| (an engine error), which poisons the ring.
  void (*dma_ring_inject_fault)(accel_drv_dma_ring_t *ring,
                                accel_status_t status);

  // --- Appended for small copies (optional: NULL means never). ---

  // Executes |desc|, a COPY with its folded signal, at once on the calling
  // thread, as if the ring's engine had: it counts its bytes, reports its
  // start and end to lib/trace when desc->trace_seq is set, and raises
  // desc->signal_semaphore. Only when the ring is idle (every descriptor
  // published retired, so nothing can come before it), healthy, has no fault
  // injected and no abort, and the device reaches the memory from the host;
  // otherwise it returns ACCEL_ERROR_NOT_READY and does nothing (the caller
  // writes the descriptor into the ring instead). The caller serializes it
  // with its writes and doorbells of the ring. A host device's "engine" is a
  // CPU thread: a small copy costs less than the two thread handoffs of the
  // ring, as CUDA runs small pageable copies on the calling thread.
  accel_status_t (*dma_ring_execute_now)(accel_drv_dma_ring_t *ring,
                                         const accel_dma_hw_desc_t *desc);

  // --- Appended for the enqueue path (issue 2). Optional (NULL: the stream
  // layer builds the command and calls queue_submit). ---
  // Submits one host call fn(user_data): the same as queue_submit of an
  // ACCEL_CMD_HOST_CALL command without references or flags, without the
  // caller building the command (the commonest command, on the path whose
  // per-command cost accel-bench launch measures). |out_last_seq| may be
  // NULL (for this op and queue_launch) when the caller has no use for it.
  accel_status_t (*queue_host_call)(accel_drv_queue_t *queue,
                                    accel_host_fn_t fn, void *user_data,
                                    uint64_t *out_last_seq);
  // Submits one launch: the same as queue_submit of an ACCEL_CMD_LAUNCH
  // command of |exec| and |payload| holding |ref0| and |ref1| (refs[0] and
  // refs[1]; either may be NULL), without flags. Unlike queue_submit, the
  // queue owns the references from the call on: it drops them itself when
  // it fails (so that the caller can hand over and return at once).
  accel_status_t (*queue_launch)(accel_drv_queue_t *queue,
                                 accel_launch_exec_fn_t exec, void *payload,
                                 accel_object_t *ref0, accel_object_t *ref1,
                                 uint64_t *out_last_seq);
};

// Access modes for va_set_access.
enum {
  ACCEL_DRV_ACCESS_NONE = 0,
  ACCEL_DRV_ACCESS_READ = 1,
  ACCEL_DRV_ACCESS_READ_WRITE = 3,
};

// The built-in backends, in probe order.
extern const accel_driver_t accel_host_driver;

#endif  // ACCEL_CORE_DRIVER_H_
