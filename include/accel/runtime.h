// The runtime: the root object that owns the backends and their devices.
// Create one per process (several are allowed and independent).
#ifndef ACCEL_RUNTIME_H_
#define ACCEL_RUNTIME_H_

#include "accel/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_runtime accel_runtime_t;

// Options for accel_runtime_create. Zero in any field means "the default";
// environment variables (listed by accel_env_vars) override the fields.
// Checks and behaviours a runtime turns on (accel_runtime_options_t.flags).
enum accel_runtime_flag_bits {
  ACCEL_RUNTIME_FLAG_NONE = 0,
  // After each kernel, scan the bindings it writes (those its code object
  // types as f32, f16 or bf16) for NaN and infinity; the first launch that
  // produced one fails its stream with ACCEL_ERROR_ABORTED and a message
  // naming the kernel, the binding, the element index and whether the
  // inputs were finite (docs/numerics.md). Also ACCEL_CHECK_NUMERICS=1.
  ACCEL_RUNTIME_FLAG_CHECK_NUMERICS = 1u << 0,
  // Record a summary (min, max, mean, NaN and Inf count) of each binding a
  // kernel writes in the Perfetto trace (ACCEL_TRACE), as arguments of a
  // "tensor summary" event. Also ACCEL_TRACE_TENSORS=1.
  ACCEL_RUNTIME_FLAG_TENSOR_SUMMARIES = 1u << 1,
  // Ignore the tuning cache: launches run with the caller's configuration
  // (docs/tuning.md). Also ACCEL_TUNING=off.
  ACCEL_RUNTIME_FLAG_TUNING_OFF = 1u << 2,
};
typedef uint32_t accel_runtime_flags_t;

typedef struct accel_runtime_options {
  // sizeof(accel_runtime_options_t) as the caller compiled it.
  uint32_t struct_size;
  // accel_runtime_flag_bits (0: none); unknown bits are refused. The
  // environment (ACCEL_CHECK_NUMERICS, ACCEL_TRACE_TENSORS, ACCEL_TUNING)
  // overrides each bit when set.
  accel_runtime_flags_t flags;
  // Comma-separated devices to expose, in order: indices into the full device
  // list ("1,0") or ids ("host:1,host:0"). NULL or "" exposes every device.
  // Overridden by ACCEL_VISIBLE_DEVICES.
  const char *visible_devices;
  // How long worker threads and host waits spin before parking, in ns.
  // 0 means the default (100000, 100 us); overridden by ACCEL_SPIN_NS.
  // Spinning trades CPU for latency: parked threads wake in tens of us.
  uint64_t spin_ns;
  // Number of host devices to expose (each an independent CPU-backed device).
  // 0 means 1; overridden by ACCEL_HOST_DEVICES.
  uint32_t host_device_count;
  // Reserved, must be 0.
  uint32_t reserved0;
  // Stream copies of at least this many bytes run on the device's copy
  // engines through a DMA queue; smaller ones run on the stream's own queue,
  // where they avoid two thread handoffs (a few microseconds on the host
  // device). 0 means the default (1048576); 1 sends every copy to the
  // engines. Overridden by ACCEL_STREAM_COPY_DMA_MIN_BYTES (0 there: every
  // copy).
  uint64_t stream_copy_dma_min_bytes;
} accel_runtime_options_t;

// Fills |opts| with defaults (struct_size set, everything else 0).
// Thread-safe.
ACCEL_API void accel_runtime_options_init(accel_runtime_options_t *opts);

// Creates a runtime: probes every backend built in, opens their devices and
// applies the visible-device filter. A backend that is absent (no driver
// library, no hardware) is skipped silently; the host device is always present.
// |opts| may be NULL for defaults. On success |*out_runtime| is an owned
// runtime that the caller destroys with accel_runtime_destroy.
// ACCEL_ERROR_INVALID_ARGUMENT: |opts| malformed (struct_size too small,
//   reserved fields or unknown flags set, an unknown entry in the
//   visible-device list).
// ACCEL_ERROR_OUT_OF_MEMORY: host allocation failed.
// Thread-safe.
ACCEL_API accel_status_t accel_runtime_create(
    const accel_runtime_options_t *opts, accel_runtime_t **out_runtime);

// Destroys |runtime| and its devices. Every object created from it (streams,
// buffers, events, semaphores) must be destroyed or released first; work still
// pending on a stream is the caller's bug (streams are drained by
// accel_stream_destroy). NULL is ignored.
// Not thread-safe: no other call on |runtime| or its objects may run.
ACCEL_API void accel_runtime_destroy(accel_runtime_t *runtime);

// Says why the backend named |backend| ("host", "cuda") has no devices in
// |runtime|: |*out_reason| is the reason its probe gave when it was skipped
// ("no CUDA devices: no NVIDIA driver (...)"), or "" when it opened. The
// string is owned by |runtime| and lives as long as it.
// ACCEL_ERROR_INVALID_ARGUMENT: a NULL argument.
// ACCEL_ERROR_NOT_FOUND: no backend of that name is built into this library.
// Thread-safe.
ACCEL_API accel_status_t accel_runtime_backend_status(
    const accel_runtime_t *runtime, const char *backend,
    const char **out_reason);

// One configuration variable read from the environment.
typedef struct accel_env_var {
  const char *name;         // "ACCEL_SPIN_NS"
  const char *description;  // what it sets, and its default
} accel_env_var_t;

// Returns the table of every ACCEL_* environment variable accel reads, and its
// length in |*out_count|. The table is static. Thread-safe.
ACCEL_API const accel_env_var_t *accel_env_vars(size_t *out_count);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_RUNTIME_H_
