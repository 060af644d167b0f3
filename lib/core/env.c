#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "accel/runtime.h"
#include "core/runtime_impl.h"

// Every environment variable accel reads, in one place (accel-info --env).
static const accel_env_var_t k_env_vars[] = {
    {"ACCEL_VISIBLE_DEVICES",
     "comma-separated device indices or ids (host:0,host:1) to expose, in "
     "order; default: all"},
    {"ACCEL_SPIN_NS",
     "ns that workers and host waits spin before parking; default 100000"},
    {"ACCEL_HOST_DEVICES", "number of host devices to expose; default 1"},
    {"ACCEL_COPY_ENGINES",
     "copy engines (DMA worker threads) per host device, 1 to 64; default: "
     "the cores of the device's NUMA node, at most 4"},
    {"ACCEL_HOST_THREADS",
     "threads that run one grid's work-groups on a host device, the stream's "
     "worker included, 1 to 65; default: one per CPU of the device"},
    {"ACCEL_STREAM_COPY_DMA_MIN_BYTES",
     "stream copies of at least this many bytes run on copy engines, smaller "
     "ones on the stream's queue; 0: every copy; default 1048576"},
    {"ACCEL_DMA_INLINE_MAX_BYTES",
     "DMA copies of at most this many bytes to an idle queue run on the "
     "submitting thread; 0: never; default 16384"},
    {"ACCEL_TRACE",
     "path of a Perfetto trace written by the built-in recorder; default: "
     "off"},
    {"ACCEL_TRACE_TENSORS",
     "1 records a summary (min, max, mean, NaN and Inf count) of every "
     "binding a kernel writes in the ACCEL_TRACE trace; default 0"},
    {"ACCEL_CHECK_NUMERICS",
     "1 scans what each kernel writes for NaN and Inf and fails the stream "
     "of the first launch that produced one; default 0"},
    {"ACCEL_TUNING",
     "off makes launches ignore the tuning cache (accel-tune); default on"},
    {"ACCEL_TUNING_CACHE",
     "path of the tuning cache accel-tune writes and launches read; default "
     "$XDG_CACHE_HOME/accel/tuning-cache (~/.cache/accel/tuning-cache)"},
    {"ACCEL_FLIGHT_EVENTS",
     "turns the flight recorder on, keeping this many events per thread "
     "(rounded up to a power of two); 0 or unset: off"},
    {"ACCEL_FLIGHT_DIR",
     "turns the flight recorder on (1024 events per thread unless "
     "ACCEL_FLIGHT_EVENTS says) and writes it there when a stream fails or on "
     "a fatal signal"},
    {"ACCEL_MEM_PAGE_CACHE_BYTES",
     "bytes of free 2 MiB device pages each device keeps (zeroed) for reuse "
     "between pools before returning them; default 67108864"},
    {"ACCEL_TOPOLOGY_XML",
     "hwloc XML file used instead of the live machine's topology"},
    {"ACCEL_MEMBARRIER",
     "0 makes the host device use full fences on both sides of its wait and "
     "submit handshakes, with no lock-free queue owners, as where membarrier "
     "is missing; read once per process"},
    {"ACCEL_LTTNG",
     "1 loads the LTTng-UST provider libaccel-lttng.so.0 (or give its path) "
     "so that an lttng session records the accel:* tracepoints; unset: no "
     "LTTng library or thread in the process"},
    {"ACCEL_CUDA_LIBRARY",
     "path of the CUDA driver library the cuda backend loads (the tests' "
     "double: tests/cuda/double); default: libcuda.so.1 from the loader's "
     "search path"},
    {"ACCEL_AFFINITY",
     "0 leaves device worker threads unbound; default: bound to the cores of "
     "their device's NUMA node"},
    {"ACCEL_WATCHDOG_MS",
     "progress deadline in ms of every stream and DMA queue whose create "
     "desc sets none: work that does not retire within it fails with "
     "ACCEL_ERROR_TIMEOUT; 0 or unset: off"},
    {"ACCEL_FAULT_INJECT",
     "faults injected at runtime creation, KIND[,KEY=VALUE...] separated by "
     "';' (kinds corrected, uncorrected, fatal, hang; keys device, command, "
     "after_ms, queue; docs/health.md); unset: none"},
    {"ACCEL_SERVE_COMMAND_BUFFERS",
     "0 makes serving engines submit every step launch by launch instead of "
     "replaying one recorded command buffer per step shape; default 1"},
    {"ACCEL_CLUSTER_STORE",
     "membership store of cluster groups: shm (one host) or etcd; default: "
     "what the application chose (shm)"},
    {"ACCEL_CLUSTER_ETCD_ENDPOINTS",
     "comma-separated etcd client URLs for cluster groups; default "
     "http://127.0.0.1:2379"},
    {"ACCEL_CLUSTER_HEARTBEAT_INTERVAL_MS",
     "cluster heartbeat period in ms; default 40 (shm), 250 (etcd)"},
    {"ACCEL_CLUSTER_HEARTBEAT_TIMEOUT_MS",
     "ms without a heartbeat after which a rank is failed; default 160 "
     "(shm), 1000 (etcd)"},
};

const accel_env_var_t *accel_env_vars(size_t *out_count) {
  if (out_count != NULL) {
    *out_count = sizeof(k_env_vars) / sizeof(k_env_vars[0]);
  }
  return k_env_vars;
}

bool accel_env_u64(const char *name, uint64_t *out_value, bool *out_invalid) {
  const char *text = getenv(name);
  *out_invalid = false;
  if (text == NULL || text[0] == '\0') {
    return false;
  }
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-') {
    *out_invalid = true;
    return true;
  }
  *out_value = v;
  return true;
}
