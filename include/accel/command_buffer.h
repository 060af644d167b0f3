// Command buffers: a sequence of stream commands recorded once and replayed
// on streams many times (IREE's command buffers, CUDA graphs). Recording
// checks each command as the stream call would, once; finalizing hands the
// sequence to the backend, which keeps it in its own form (the host device
// pre-builds its queue records); each execute then costs about one command.
//
// A recorded command may name a slot of the buffer's binding table instead
// of a buffer (accel_command_buffer_ref_t.buffer NULL): each execute supplies
// the table, checked once per execute against every use recorded (access,
// alignment, minimum length), before anything runs. A launch may likewise
// take its constants from the execute's constants block, so that one
// recorded decoder step serves every token. Nothing is sized in advance: the
// buffer grows while it records, and its binding table has as many slots as
// the highest slot recorded plus one.
//
// A command buffer is ref-counted and belongs to one device. Replays of a
// buffer follow the stream rules: its commands run in order on the stream,
// after what was submitted before the execute and before what follows. A
// command that fails in a replay fails the stream with a message naming the
// buffer and the command's index ("command buffer "NAME" command #I (KIND)
// failed: WHY"). docs/execution-model.md ("Command buffers") is the full
// contract.
#ifndef ACCEL_COMMAND_BUFFER_H_
#define ACCEL_COMMAND_BUFFER_H_

#include "accel/base.h"
#include "accel/device.h"
#include "accel/event.h"
#include "accel/executable.h"
#include "accel/memory.h"
#include "accel/semaphore.h"
#include "accel/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_command_buffer accel_command_buffer_t;

// Command buffer flags (accel_command_buffer_desc_t.flags).
typedef uint32_t accel_command_buffer_flags_t;
enum accel_command_buffer_flag_bits {
  ACCEL_COMMAND_BUFFER_FLAG_NONE = 0,
  // The buffer may be executed on several streams at once (each execute
  // has its own binding table and constants). Without it, an execute while
  // an earlier one is pending on another stream is refused
  // (ACCEL_ERROR_BUSY); executes on one stream are always allowed (they run
  // one after the other).
  ACCEL_COMMAND_BUFFER_FLAG_REENTRANT = 1u << 0,
};

typedef struct accel_command_buffer_desc {
  // sizeof(accel_command_buffer_desc_t) as the caller compiled it.
  uint32_t struct_size;
  // accel_command_buffer_flag_bits.
  accel_command_buffer_flags_t flags;
  // Name for messages and traces (copied; NULL means "cb<N>").
  const char *name;
} accel_command_buffer_desc_t;

// A buffer range a recorded command uses: |buffer| itself, or, when
// |buffer| is NULL, slot |slot| of the binding table each execute supplies
// (then |offset| is counted from the slot's offset).
typedef struct accel_command_buffer_ref {
  // The buffer (retained by the command buffer until it is destroyed), or
  // NULL to name |slot|.
  accel_buffer_t *buffer;
  // Binding-table slot, when |buffer| is NULL; ignored otherwise.
  uint32_t slot;
  // Reserved, must be 0.
  uint32_t reserved0;
  // Bytes from the start of the buffer (or of the slot's range).
  uint64_t offset;
  // Launch bindings only: bytes bound; 0 means to the end of the buffer (or
  // of the slot's range, as each execute binds it). Ignored by fills and
  // copies, which give their size.
  uint64_t length;
} accel_command_buffer_ref_t;

// Launch flags (accel_command_buffer_launch_desc_t.flags).
enum accel_command_buffer_launch_flag_bits {
  ACCEL_COMMAND_BUFFER_LAUNCH_FLAG_NONE = 0,
  // The launch's constants are the kernel's constants_size bytes at
  // |constants_offset| of each execute's constants block, not |constants|.
  ACCEL_COMMAND_BUFFER_LAUNCH_CONSTANTS_FROM_EXECUTE = 1u << 0,
};

// A recorded launch.
typedef struct accel_command_buffer_launch_desc {
  // sizeof(accel_command_buffer_launch_desc_t) as the caller compiled it.
  uint32_t struct_size;
  // Work-groups in x, y, z (each >= 1).
  uint32_t workgroup_count[3];
  // Entries in |bindings|: must equal the kernel's declared count.
  uint32_t binding_count;
  // Bytes in |constants|: must equal the kernel's declared size (also with
  // ACCEL_COMMAND_BUFFER_LAUNCH_CONSTANTS_FROM_EXECUTE, where |constants| is
  // then unused and may be NULL).
  uint32_t constants_size;
  // The bindings, in declaration order (copied).
  const accel_command_buffer_ref_t *bindings;
  // The constants (copied at record time).
  const void *constants;
  // accel_command_buffer_launch_flag_bits.
  uint32_t flags;
  // With ACCEL_COMMAND_BUFFER_LAUNCH_CONSTANTS_FROM_EXECUTE: where the
  // launch's constants start in the execute's constants block (a multiple
  // of 4); 0 otherwise.
  uint32_t constants_offset;
} accel_command_buffer_launch_desc_t;

// One entry of a binding table: the range slot N names in one execute.
typedef struct accel_command_buffer_binding {
  // The buffer (retained by the execute until its commands completed).
  accel_buffer_t *buffer;
  // Start of the slot's range in |buffer|.
  uint64_t offset;
  // Bytes of the range; 0 means to the end of |buffer|.
  uint64_t length;
} accel_command_buffer_binding_t;

// What one execute supplies.
typedef struct accel_command_buffer_execute_desc {
  // sizeof(accel_command_buffer_execute_desc_t) as the caller compiled it.
  uint32_t struct_size;
  // Entries in |bindings|: at least the buffer's binding count (the highest
  // slot recorded plus one); more are ignored.
  uint32_t binding_count;
  // The binding table (read during the call only).
  const accel_command_buffer_binding_t *bindings;
  // The constants block (copied during the call); at least the buffer's
  // constants size bytes.
  const void *constants;
  // Bytes in |constants|.
  uint32_t constants_size;
  // Reserved, must be 0.
  uint32_t reserved0;
} accel_command_buffer_execute_desc_t;

// What a command buffer holds (accel_command_buffer_info).
typedef struct accel_command_buffer_info {
  // sizeof(accel_command_buffer_info_t) as the caller compiled it (set by
  // the caller; the call fills what fits).
  uint32_t struct_size;
  // accel_command_buffer_flag_bits it was created with.
  uint32_t flags;
  // Commands recorded so far.
  uint32_t command_count;
  // Binding-table slots an execute must supply (highest slot used + 1).
  uint32_t binding_count;
  // Bytes of constants block an execute must supply (0: none).
  uint32_t constants_size;
  // 1 once finalized, else 0.
  uint32_t finalized;
  // Executes submitted so far.
  uint64_t execute_count;
} accel_command_buffer_info_t;

// Creates an empty command buffer on |device| in the recording state.
// |desc| may be NULL for defaults. The caller owns the returned reference.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL device or out, struct_size too small,
//   unknown flags.
// ACCEL_ERROR_OUT_OF_MEMORY: host allocation failed.
// Thread-safe.
ACCEL_API accel_status_t accel_command_buffer_create(
    accel_device_t *device, const accel_command_buffer_desc_t *desc,
    accel_command_buffer_t **out_command_buffer);

// Adds a reference to |command_buffer|. NULL is ignored. Thread-safe.
ACCEL_API void accel_command_buffer_retain(
    accel_command_buffer_t *command_buffer);

// Drops a reference. The last one frees the buffer and what it holds; an
// execute in flight holds its own reference, so releasing right after
// accel_stream_execute is safe. NULL is ignored. Thread-safe.
ACCEL_API void accel_command_buffer_release(
    accel_command_buffer_t *command_buffer);

// Fills |out_info| (its struct_size set by the caller) with what
// |command_buffer| holds.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or struct_size too small.
// Thread-compatible: not concurrently with recording on |command_buffer|.
ACCEL_API accel_status_t accel_command_buffer_info(
    const accel_command_buffer_t *command_buffer,
    accel_command_buffer_info_t *out_info);

// Each recording call below appends one command, checked as the stream call
// of the same name checks it (buffers of the buffer's device, ranges inside
// their buffers, writes allowed, a launch against the kernel's signature);
// a use of a binding-table slot is checked at each execute instead. A
// refused command is not recorded, and the message names its index
// ("command #I (fill): ..."). Recording calls return
// ACCEL_ERROR_INVALID_ARGUMENT for a finalized buffer and
// ACCEL_ERROR_OUT_OF_MEMORY when the buffer cannot grow.
// Thread-compatible: recording calls on the same |command_buffer| must be
// serialized.

// Records a call of |fn|(|user_data|) on the stream's host thread.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL command_buffer or fn, finalized.
// Thread-compatible (see above).
ACCEL_API accel_status_t accel_command_buffer_host_call(
    accel_command_buffer_t *command_buffer, accel_host_fn_t fn,
    void *user_data);

// Records a fill of |size_bytes| at |dst| with the |pattern_size|-byte
// little-endian |pattern| (as accel_stream_fill).
// ACCEL_ERROR_INVALID_ARGUMENT: as accel_stream_fill, a NULL |dst|, nonzero
//   reserved0, finalized.
// Thread-compatible (see above).
ACCEL_API accel_status_t accel_command_buffer_fill(
    accel_command_buffer_t *command_buffer,
    const accel_command_buffer_ref_t *dst, uint64_t size_bytes,
    uint64_t pattern, uint32_t pattern_size);

// Records a copy of |size_bytes| from |src| to |dst| (memmove semantics
// when both name the same buffer). A copy of at least the runtime's
// stream_copy_dma_min_bytes runs on the device's copy engines, as
// accel_stream_copy's do; smaller ones run on the stream itself. A size of 0
// records nothing.
// ACCEL_ERROR_INVALID_ARGUMENT: as accel_stream_copy, a NULL ref, finalized.
// Thread-compatible (see above).
ACCEL_API accel_status_t accel_command_buffer_copy(
    accel_command_buffer_t *command_buffer,
    const accel_command_buffer_ref_t *dst,
    const accel_command_buffer_ref_t *src, uint64_t size_bytes);

// Records a copy from host memory |src| to |dst|. |src| is read at each
// replay: it must stay valid, and holds what that replay copies, until the
// buffer's last execute completed.
// Errors as accel_command_buffer_copy. Thread-compatible (see above).
ACCEL_API accel_status_t accel_command_buffer_copy_from_host(
    accel_command_buffer_t *command_buffer,
    const accel_command_buffer_ref_t *dst, const void *src,
    uint64_t size_bytes);

// Records a copy from |src| to host memory |dst|, written at each replay
// (valid until the buffer's last execute completed).
// Errors as accel_command_buffer_copy. Thread-compatible (see above).
ACCEL_API accel_status_t accel_command_buffer_copy_to_host(
    accel_command_buffer_t *command_buffer, void *dst,
    const accel_command_buffer_ref_t *src, uint64_t size_bytes);

// Records a signal of |semaphore| to |value| (never lowering it), at each
// replay. For a value that grows per execute, use the execute's own waits
// and signals (the stream calls around accel_stream_execute).
// |semaphore| is retained by the buffer.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, semaphore of another device,
//   finalized.
// Thread-compatible (see above).
ACCEL_API accel_status_t accel_command_buffer_signal(
    accel_command_buffer_t *command_buffer, accel_semaphore_t *semaphore,
    uint64_t value);

// Records a wait until |semaphore| reaches |value|, at each replay.
// Errors as accel_command_buffer_signal. Thread-compatible (see above).
ACCEL_API accel_status_t accel_command_buffer_wait(
    accel_command_buffer_t *command_buffer, accel_semaphore_t *semaphore,
    uint64_t value);

// Records a record of |event|: each replay records it anew, as
// accel_event_record would at that point of the stream (a later record
// replaces it for waits issued after the execute).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, event of another device,
//   finalized.
// Thread-compatible (see above).
ACCEL_API accel_status_t accel_command_buffer_event_record(
    accel_command_buffer_t *command_buffer, accel_event_t *event);

// Records a wait for |event|: each replay waits, at that point of the
// stream, for the event's last record as of the execute (as
// accel_stream_wait_event issued then would; no wait if it was never
// recorded). |event| is retained by the buffer.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, event of another device,
//   finalized.
// Thread-compatible (see above).
ACCEL_API accel_status_t accel_command_buffer_wait_event(
    accel_command_buffer_t *command_buffer, accel_event_t *event);

// Records a launch of |kernel| (retained by the buffer), checked against
// the kernel's signature as accel_launch is. Bindings that name slots are
// checked at each execute against the slot's range (access, alignment,
// minimum length). A kernel of the device's own code objects (CUDA PTX or
// cubin) is recorded where the backend keeps recordings (the CUDA device:
// a graph kernel node).
// ACCEL_ERROR_INVALID_ARGUMENT: as accel_launch; a constants_offset not a
//   multiple of 4; unknown launch flags; finalized.
// ACCEL_ERROR_UNSUPPORTED: as accel_launch (another device's kernel, a
//   device that runs neither host kernels nor this kernel), or a device
//   kernel on a backend that keeps no recordings.
// Thread-compatible (see above).
ACCEL_API accel_status_t accel_command_buffer_launch(
    accel_command_buffer_t *command_buffer, accel_kernel_t *kernel,
    const accel_command_buffer_launch_desc_t *desc);

// Ends recording: hands the commands to the backend, which keeps them in
// its own form when it can (the host device pre-builds its queue records),
// and makes the buffer executable. Recording calls fail from then on.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL, or already finalized.
// ACCEL_ERROR_OUT_OF_MEMORY: the backend's form cannot be allocated (the
//   buffer stays recording).
// Thread-compatible: not concurrently with recording on |command_buffer|.
ACCEL_API accel_status_t accel_command_buffer_finalize(
    accel_command_buffer_t *command_buffer);

// Enqueues a replay of |command_buffer| on |stream|: its commands run in
// order after the work submitted before, and what is submitted after runs
// after them. The binding table and constants of |desc| (NULL when the
// buffer uses neither) are checked against every use recorded, before
// anything is enqueued; the table's buffers are retained until the replay
// completed. The buffer itself is retained by the execute.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL stream or buffer, a buffer not
//   finalized, of another device, a desc with struct_size too small or
//   reserved0 set, too few bindings or constant bytes, a slot with no
//   buffer, a buffer of another device, a range outside its buffer, shorter
//   than a recorded use needs, misaligned for one, or read-only where a
//   command writes (the message names the slot and the command).
// ACCEL_ERROR_BUSY: a buffer without ACCEL_COMMAND_BUFFER_FLAG_REENTRANT
//   still executing on another stream.
// ACCEL_ERROR_OUT_OF_MEMORY: the execute's record cannot be allocated.
// Otherwise the stream's stored error if it has failed.
// Thread-safe.
ACCEL_API accel_status_t accel_stream_execute(
    accel_stream_t *stream, accel_command_buffer_t *command_buffer,
    const accel_command_buffer_execute_desc_t *desc);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_COMMAND_BUFFER_H_
