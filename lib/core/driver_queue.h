// Driver interface, queue table: hardware queues and the commands they
// execute in order (see driver.h).
#ifndef ACCEL_CORE_DRIVER_QUEUE_H_
#define ACCEL_CORE_DRIVER_QUEUE_H_

#include <stdbool.h>

#include "accel/stream.h"
#include "core/driver.h"
#include "core/object.h"
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
  // Replays commands of a recording (queues of backends with
  // recording_create only).
  ACCEL_CMD_EXECUTE = 6,
  ACCEL_CMD_KIND_COUNT = 7,
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

// A recorded sequence of commands that a backend keeps in its own form for
// replays (recording_create); ACCEL_CMD_EXECUTE replays a range of it.
typedef struct accel_drv_recording accel_drv_recording_t;

typedef struct accel_drv_kernel accel_drv_kernel_t;  // driver_dispatch.h

// accel_cmd_t.flags of a recorded ACCEL_CMD_LAUNCH of a device kernel (a
// kernel of the device's own code objects: CUDA PTX or cubin): its
// launch.exec is NULL and its launch.payload points at an
// accel_drv_recorded_launch_t. Only backends with recording_create and
// dispatch.kernel_launch are handed such commands.
#define ACCEL_CMD_LAUNCH_DEVICE 1u

// Where a recorded device launch's value comes from: UINT32_MAX means the
// recorded value as it is; any other index i means bases[i] of each
// execute plus (addresses, constants) or minus (lengths) the recorded
// value.
#define ACCEL_DRV_BASE_NONE UINT32_MAX

// One binding of a recorded device launch.
typedef struct accel_drv_recorded_binding {
  // ACCEL_DRV_BASE_NONE: |address| is the device address; else the
  // address is bases[address_base] + |address| (a binding-table slot).
  uint32_t address_base;
  // ACCEL_DRV_BASE_NONE: |length| is the bound length; else the length is
  // bases[length_base] - |address| (the slot's range to its end).
  uint32_t length_base;
  uint64_t address;
  uint64_t length;
} accel_drv_recorded_binding_t;

// A device kernel's launch in a recording, with the kernel ABI's
// parameters (docs/kernel-abi.md) of which some come from each execute's
// bases. Owned by the recording's owner for the recording's lifetime.
typedef struct accel_drv_recorded_launch {
  accel_drv_kernel_t *kernel;
  uint32_t grid[3];   // work-groups per dimension (each >= 1)
  uint32_t block[3];  // work-items per work-group (each >= 1)
  uint32_t shared_bytes;
  uint32_t binding_count;
  const accel_drv_recorded_binding_t *bindings;  // binding_count entries
  uint64_t workspace_address;  // with workspace_bytes; 0 bytes: none
  uint64_t workspace_bytes;
  uint32_t constants_size;  // 0: none
  // ACCEL_DRV_BASE_NONE: |constants| holds them; else they are the
  // constants_size bytes at host address bases[constants_base] +
  // constants_offset, read when the execute is submitted.
  uint32_t constants_base;
  uint64_t constants_offset;
  const void *constants;
} accel_drv_recorded_launch_t;

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
    struct {
      accel_drv_recording_t *recording;
      // The execute's base values (accel_drv_patch_t.base indexes them),
      // owned by refs[0]'s object.
      const uint64_t *bases;
      uint32_t first;  // first command of the recording replayed
      uint32_t count;  // commands replayed, from |first|
    } execute;
  };
  // References dropped once the command has completed or been aborted.
  accel_object_t *refs[2];
} accel_cmd_t;

_Static_assert(sizeof(accel_cmd_t) == 64, "a command is one cache line");

// Plain numbers of a command for whoever reports it (the trace hooks take
// numbers, not commands): the bytes a copy or fill moves (0 otherwise), a
// copy's direction (0 otherwise), and for a SIGNAL that stores a timestamp
// (an event record) the id of the object it holds (0 otherwise).
static inline uint64_t accel_cmd_bytes(const accel_cmd_t *cmd) {
  return cmd->kind == ACCEL_CMD_COPY   ? cmd->copy.size_bytes
         : cmd->kind == ACCEL_CMD_FILL ? cmd->fill.size_bytes
                                       : 0;
}

static inline uint32_t accel_cmd_direction(const accel_cmd_t *cmd) {
  return cmd->kind == ACCEL_CMD_COPY ? cmd->flags : 0;
}

static inline uint64_t accel_cmd_event_id(const accel_cmd_t *cmd) {
  return cmd->kind == ACCEL_CMD_SIGNAL && cmd->signal.timestamp_out != NULL
             ? (uint64_t)(uintptr_t)cmd->refs[0]
             : 0;
}

// A field of a recorded command that each execute fills: the 8-byte word
// |word| of command |command|'s accel_cmd_t (2-5: the union's words) becomes
// bases[base] + offset, where |bases| is the EXECUTE command's. Binding
// tables (a buffer's address per slot), per-execute constants and launch
// records, and event records (a semaphore and a value per execute) all
// reach recorded commands this way.
typedef struct accel_drv_patch {
  uint32_t command;
  uint16_t word;
  uint16_t base;
  uint64_t offset;
} accel_drv_patch_t;

// What recording_create keeps. Recorded commands hold no references (the
// recording's owner holds what they name for the recording's lifetime) and
// have seq 0.
typedef struct accel_drv_recording_params {
  const accel_cmd_t *commands;  // LAUNCH, HOST_CALL, FILL, COPY, SIGNAL, WAIT
  uint32_t command_count;
  uint32_t patch_count;
  const accel_drv_patch_t *patches;  // sorted by command, then word
  uint32_t base_count;  // entries of each execute's bases
  // Names the recording in failure messages ("command buffer "NAME" command
  // #I (KIND) failed: WHY"); copied.
  const char *name;
} accel_drv_recording_params_t;

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

// Every submit entry owns the references it is handed, from the call on:
// those of the commands it accepted until they complete or are aborted, and
// those of the commands it refused, which it drops before it returns. The
// caller hands them over and never drops them itself.
struct accel_drv_queue_ops {
  accel_status_t (*create)(accel_drv_device_t *device,
                           const accel_drv_queue_params_t *params,
                           accel_drv_queue_t **out_queue);
  // Drains or aborts as params.abort_on_destroy said.
  void (*destroy)(accel_drv_queue_t *queue);
  // Copies |count| commands, numbers them (seq) in queue order, and returns
  // at once with the last number in |*out_last_seq| (may be NULL when the
  // caller has no use for it). A queue that has failed accepts nothing and
  // returns its stored error (the message of |params.completion|'s failure).
  accel_status_t (*submit)(accel_drv_queue_t *queue,
                           const accel_cmd_t *commands, uint32_t count,
                           uint64_t *out_last_seq);
  // Optional (NULL: the stream layer builds the command and calls submit).
  // Submits one host call fn(user_data): the same as submit of an
  // ACCEL_CMD_HOST_CALL command without references or flags, without the
  // caller building the command (the commonest command, on the path whose
  // per-command cost accel-bench launch measures).
  accel_status_t (*host_call)(accel_drv_queue_t *queue, accel_host_fn_t fn,
                              void *user_data, uint64_t *out_last_seq);
  // Optional, as host_call. Submits one launch: the same as submit of an
  // ACCEL_CMD_LAUNCH command of |exec| and |payload| holding |ref0| and
  // |ref1| (refs[0] and refs[1]; either may be NULL), without flags.
  accel_status_t (*launch)(accel_drv_queue_t *queue,
                           accel_launch_exec_fn_t exec, void *payload,
                           accel_object_t *ref0, accel_object_t *ref1,
                           uint64_t *out_last_seq);
  // Optional (NULL: the generic layer replays recorded commands through
  // submit). Keeps |params|' commands in the backend's own form, so that an
  // ACCEL_CMD_EXECUTE command replays them without the generic layer
  // building or the queue re-encoding each one. A recording is immutable and
  // may be replayed by several queues of its device at once.
  accel_status_t (*recording_create)(accel_drv_device_t *device,
                                     const accel_drv_recording_params_t *params,
                                     accel_drv_recording_t **out_recording);
  // Required with recording_create: frees a recording no queue replays.
  void (*recording_destroy)(accel_drv_recording_t *recording);
};

#endif  // ACCEL_CORE_DRIVER_QUEUE_H_
