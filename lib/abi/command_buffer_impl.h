// Internal layout of command buffers (lib/abi): recording
// (command_buffer.c), the checks at record and execute time
// (command_buffer_validate.c) and replays (command_buffer_execute.c).
//
// A buffer records accel_cmd_t commands without references (the buffer
// holds what they name) plus patches: the words each execute fills from its
// bases (docs/driver-interface.md, recordings). An execute's bases are, in
// order: the binding table's slot addresses (one per slot), the address of
// the execute's constants block, the address of its launch entries, then
// three per event record or wait (semaphore, value, timestamp slot).
#ifndef ACCEL_ABI_COMMAND_BUFFER_IMPL_H_
#define ACCEL_ABI_COMMAND_BUFFER_IMPL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "abi/executable_impl.h"
#include "abi/launch_owner.h"
#include "accel/command_buffer.h"
#include "core/driver_queue.h"
#include "core/object.h"
#include "mem/buffer_impl.h"

// Highest binding-table slot + 1 and most event records per buffer: every
// base of an execute is named by a 16-bit index (accel_drv_patch_t.base).
#define ACCEL_CB_MAX_SLOTS 16384u
#define ACCEL_CB_MAX_EVENTS 16000u

// What a recorded command is, as the API names it (the queue's kinds, plus
// event records, SIGNALs whose semaphore and value each execute takes from
// the event, and event waits, WAITs for the event's last record as of each
// execute).
typedef enum cb_kind {
  CB_HOST_CALL = ACCEL_CMD_HOST_CALL,
  CB_FILL = ACCEL_CMD_FILL,
  CB_COPY = ACCEL_CMD_COPY,
  CB_SIGNAL = ACCEL_CMD_SIGNAL,
  CB_WAIT = ACCEL_CMD_WAIT,
  CB_LAUNCH = ACCEL_CMD_LAUNCH,
  CB_EVENT_RECORD = ACCEL_CMD_KIND_COUNT,
  CB_EVENT_WAIT,
  CB_KIND_COUNT,
} cb_kind_t;

// Names a cb_kind_t for messages.
const char *accel_cb_kind_name(uint32_t kind);

// A recording call's arguments, as checked (accel_cb_check) and appended.
typedef struct cb_args {
  uint32_t kind;  // cb_kind_t
  accel_host_fn_t fn;
  void *user_data;
  const accel_command_buffer_ref_t *dst;  // fills, copies (NULL: host)
  const accel_command_buffer_ref_t *src;  // copies (NULL: host)
  void *host_dst;
  const void *host_src;
  uint64_t size_bytes;
  uint64_t pattern;
  uint32_t pattern_size;
  accel_semaphore_t *semaphore;
  uint64_t value;
  accel_event_t *event;
  accel_kernel_t *kernel;
  const accel_command_buffer_launch_desc_t *launch;
} cb_args_t;

// What the uses recorded require of one binding-table slot.
typedef struct cb_slot_align {
  uint32_t alignment;  // bytes (> 1)
  uint32_t command;    // the first command that needs it
  uint64_t offset;     // (slot address + offset) % alignment == 0
} cb_slot_align_t;

typedef struct cb_slot_req {
  bool used;
  bool written;
  uint32_t write_command;  // first command that writes the slot
  uint32_t first_command;  // first command that uses it
  uint64_t min_length;     // bytes the slot's range must have
  uint32_t min_length_command;
  uint32_t align_count;
  uint32_t align_cap;
  cb_slot_align_t *aligns;  // distinct (alignment, offset % alignment)
} cb_slot_req_t;

// One binding of a recorded launch.
typedef struct cb_binding {
  uint32_t slot;  // UINT32_MAX: a buffer given at record time
  uint32_t access;  // accel_kernel_access flags as declared
  uint64_t address;  // direct: the bound address; slot: offset in the slot
  uint64_t length;   // direct: bytes bound; slot: 0 means to the slot's end
} cb_binding_t;

// A recorded launch (owned by its buffer).
typedef struct cb_launch {
  const accel_kernel_t *kernel;  // its owner held by the buffer
  const accel_driver_t *driver;
  const accel_command_buffer_t *cb;
  uint32_t index;  // command index
  uint32_t binding_count;
  uint32_t constants_size;
  bool constants_from_execute;
  uint32_t constants_offset;  // in the execute's block
  bool prebuilt;  // |dispatch| is complete: no slot, recorded constants
  uint32_t workgroup_count[3];
  // A kernel of the device's own code objects (CUDA): recorded as
  // ACCEL_CMD_LAUNCH_DEVICE with |drv| as its payload; |drv|'s bindings are
  // |drv_bindings| and its bases are set at finalize.
  bool device;
  accel_drv_recorded_launch_t drv;
  accel_drv_recorded_binding_t *drv_bindings;
  accel_kernel_dispatch_t dispatch;  // when |prebuilt|
  uint8_t *constants;                // recorded copy (or NULL)
  accel_kernel_binding_t *table;     // when |prebuilt|
  cb_binding_t bindings[];
} cb_launch_t;

// A copy that runs on the copy engines (at least stream_copy_dma_min_bytes
// on a device with engines): the execute submits it between the segments
// the backend replays.
typedef struct cb_dma_copy {
  uint32_t index;  // command index
  accel_command_buffer_ref_t dst, src;  // buffer NULL and slot UINT32_MAX: host
  void *host_dst;
  const void *host_src;
  uint64_t size_bytes;
} cb_dma_copy_t;

// Where a patch's base comes from; resolved to an index at finalize, when
// the slot count is known.
enum {
  CB_BASE_SLOT = 0,
  CB_BASE_CONSTANTS = 1,
  CB_BASE_ENTRIES = 2,
  CB_BASE_EVENT = 3,  // index: event * 3 + (0 semaphore, 1 value, 2 time)
};

typedef struct cb_patch {
  accel_drv_patch_t patch;  // base filled at finalize
  uint32_t base_class;      // CB_BASE_*
  uint32_t base_index;
} cb_patch_t;

// A host call replayed through ordinary submits: the queue calls a
// trampoline with this, which names the buffer and the command on failure.
typedef struct cb_host_entry {
  accel_host_fn_t fn;
  void *user_data;
  const accel_command_buffer_t *cb;
  uint32_t index;
} cb_host_entry_t;

// A launch entry of an execute: the payload of a recorded LAUNCH.
typedef struct cb_entry {
  const cb_launch_t *launch;
  const struct cb_exec *exec;
} cb_entry_t;

// One execute's state, held by its commands until they completed (one
// allocation; the buffer caches one for the next execute).
typedef struct cb_exec {
  accel_object_t object;  // first: the EXECUTE commands hold it
  accel_command_buffer_t *cb;  // a reference
  bool fallback;  // replayed through ordinary submits
  uint64_t *bases;
  // Bytes of each slot's range: the bases' last slots.n entries, which
  // recorded device launches read (accel_drv_recorded_binding_t).
  uint64_t *lengths;
  accel_buffer_t **buffers;   // each slot's buffer, retained
  accel_semaphore_t **event_semaphores;  // retained
  cb_entry_t *entries;        // one per launch
  uint8_t *constants;
} cb_exec_t;

// A growable array (recording never pre-sizes).
#define CB_VEC(type) \
  struct {           \
    type *v;         \
    uint32_t n, cap; \
  }

// A reference the buffer holds, and how to drop it.
typedef struct cb_held {
  enum { CB_HELD_BUFFER, CB_HELD_SEMAPHORE, CB_HELD_EVENT, CB_HELD_KERNEL } kind;
  void *object;
} cb_held_t;

struct accel_command_buffer {
  // Lifetime: the users' references and one unit per execute in flight,
  // taken without writing the count's line (launch_owner.h), so that the
  // submitter and the queue worker, which drops the unit, do not trade it.
  accel_launch_owner_t owner;  // first
  // Read-mostly from here on (fixed at finalize).
  _Alignas(64) accel_device_t *device;
  accel_command_buffer_flags_t flags;
  char name[64];
  bool finalized;

  CB_VEC(accel_cmd_t) commands;
  CB_VEC(uint8_t) kinds;  // cb_kind_t per command
  CB_VEC(cb_patch_t) patches;
  CB_VEC(cb_launch_t *) launches;
  CB_VEC(cb_dma_copy_t) dma_copies;
  CB_VEC(cb_held_t) held;
  CB_VEC(cb_slot_req_t) slots;  // n is the binding count
  // Event records and waits: the event (borrowed: held in |held|) and the
  // command index of each.
  CB_VEC(accel_event_t *) events;
  CB_VEC(uint32_t) event_commands;
  uint32_t constants_size;
  // A recorded device launch takes bindings or constants from the execute:
  // executes need a cb_exec_t even without patches.
  bool exec_needed;

  // Set at finalize.
  uint32_t base_count;
  accel_drv_patch_t *drv_patches;
  uint32_t drv_patches_count;  // 0: executes need no cb_exec_t
  uint32_t *patch_starts;  // first patch of each command, and the end
  accel_drv_recording_t *recording;  // NULL: replays through submit
  // Without a recording: one per host call, which the commands call
  // through the trampoline instead of the function itself.
  cb_host_entry_t *host_entries;
  size_t exec_bytes;  // size of one cb_exec_t allocation

  // One cached execute record (see cb_exec_t): taken by submitters, given
  // back by the queue worker.
  _Alignas(64) cb_exec_t *_Atomic exec_cache;

  // Executes of a buffer without FLAG_REENTRANT, guarded by |busy_lock|
  // (a spinlock held across an execute's submit, whose release is a plain
  // store: a locked instruction after the submit would wait for the new
  // record's stores to reach the line the queue worker polls): the stream
  // of the last one (compared only, never dereferenced: it may be gone),
  // its completion semaphore (retained) and name, and the seq its last
  // command had.
  _Alignas(64) _Atomic uint32_t busy_lock;
  accel_stream_t *busy_stream;
  accel_semaphore_t *busy_semaphore;
  uint64_t busy_seq;
  char busy_name[64];
  // Executes submitted, counted before their submit (and uncounted if it
  // fails) for the same reason.
  _Atomic uint64_t execute_count;
};

// Grows the array |*v| of |*cap| elements of |elem| bytes to hold at least
// |need| (contents kept); false when out of memory (nothing changed).
bool accel_cb_vec_grow(void **v, uint32_t *cap, uint32_t need, size_t elem);

// Record-time checks of command #|index| (|a|), one checker per kind;
// messages start "command #I (KIND): ". The buffer is not changed.
accel_status_t accel_cb_check(const accel_command_buffer_t *cb, uint32_t index,
                              const cb_args_t *a);

// Execute-time check of the binding table and constants of |desc| against
// every use recorded in |cb|; stores each slot's range length in
// |out_lengths| (cb->slots.n entries).
accel_status_t accel_cb_check_execute(const accel_command_buffer_t *cb,
                                      const accel_stream_t *stream,
                                      const accel_command_buffer_execute_desc_t *desc,
                                      uint64_t *out_lengths);

// Whether |k| is a kernel of |dev|'s own code objects (a CUDA kernel on a
// CUDA device), recorded as ACCEL_CMD_LAUNCH_DEVICE.
static inline bool accel_cb_launch_is_device(const accel_device_t *dev,
                                             const accel_kernel_t *k) {
  return k->drv_kernel != NULL && k->device == dev &&
         (dev->info.caps & ACCEL_DEVICE_CAP_HOST_KERNELS) == 0;
}

// Record-time check that |k| can be launched from a command buffer of |cb|'s
// device (messages start with |pre|).
accel_status_t accel_cb_check_launch_target(const accel_command_buffer_t *cb,
                                            const char *pre,
                                            const accel_kernel_t *k);

// The launch exec function of recorded launches (payload: a cb_entry_t).
accel_status_t accel_cb_launch_exec(void *payload, accel_drv_device_t *device);

#endif  // ACCEL_ABI_COMMAND_BUFFER_IMPL_H_
