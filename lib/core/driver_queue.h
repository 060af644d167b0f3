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
};

#endif  // ACCEL_CORE_DRIVER_QUEUE_H_
