// The C shim: one versioned table of function pointers that covers the whole
// public API, for framework backends (a PyTorch PrivateUse1 backend, a PJRT
// plugin, an ONNX Runtime execution provider) that dlopen libaccel.so and
// bind to nothing but accel_get_api. The shape is PJRT's (pjrt_c_api.h): the
// table begins with its size and version, its entries are only ever
// appended, and every argument struct already begins with struct_size.
//
//   void *lib = dlopen("libaccel.so.0", RTLD_NOW | RTLD_LOCAL);
//   accel_get_api_fn get = (accel_get_api_fn)dlsym(lib, "accel_get_api");
//   const accel_api_t *api = get(ACCEL_API_VERSION_MAJOR,
//                                ACCEL_API_VERSION_MINOR);
//   if (api == NULL) { /* library too old: see below */ }
//   api->accel_runtime_create(NULL, &rt);
//
// Rules (docs/versioning.md, "The C shim"):
//  - The table of API version MAJOR.MINOR holds the entries of every minor up
//    to MINOR, in the order of ACCEL_API_ENTRIES, which only grows at its
//    end. An entry never moves: lib/shim/api_layout.c pins each entry's
//    offset for each version and fails the build if one moves.
//  - A consumer compiled against MAJOR.m works with any library MAJOR.n,
//    n >= m: it reads only the entries its header knows.
//  - A new major may reorder or drop entries; accel_get_api refuses a major
//    it does not implement.
//  - Each entry has exactly the type of the function of the same name
//    (__typeof__), so the table cannot drift from the headers.
#ifndef ACCEL_API_TABLE_H_
#define ACCEL_API_TABLE_H_

#include "accel/base.h"
#include "accel/cluster.h"
#include "accel/tokenizer.h"
#include "accel/command_buffer.h"
#include "accel/device.h"
#include "accel/dlpack.h"
#include "accel/dma.h"
#include "accel/event.h"
#include "accel/executable.h"
#include "accel/gguf.h"
#include "accel/gguf_import.h"
#include "accel/health.h"
#include "accel/kv_cache.h"
#include "accel/memory.h"
#include "accel/runtime.h"
#include "accel/sampling.h"
#include "accel/scheduler.h"
#include "accel/semaphore.h"
#include "accel/serve.h"
#include "accel/stream.h"
#include "accel/topology.h"
#include "accel/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

// Every entry of the table, in table order. Appending is the only change a
// minor version may make; each group names the header that documents the
// functions. Version 0.2 (the first table) holds all of them.
#define ACCEL_API_ENTRIES(X) \
  /* base.h */ \
  X(accel_status_name) \
  X(accel_last_error) \
  X(accel_api_version) \
  /* runtime.h */ \
  X(accel_runtime_options_init) \
  X(accel_runtime_create) \
  X(accel_runtime_destroy) \
  X(accel_env_vars) \
  /* device.h */ \
  X(accel_device_count) \
  X(accel_device_get) \
  X(accel_device_info) \
  X(accel_device_clock_pair) \
  X(accel_device_runtime) \
  /* memory.h */ \
  X(accel_buffer_alloc) \
  X(accel_buffer_free) \
  X(accel_mem_free) \
  X(accel_buffer_retain) \
  X(accel_buffer_release) \
  X(accel_buffer_address) \
  X(accel_buffer_size) \
  X(accel_buffer_device) \
  X(accel_buffer_host_pointer) \
  X(accel_buffer_grow) \
  X(accel_buffer_alloc_async) \
  X(accel_buffer_free_async) \
  X(accel_host_register) \
  X(accel_buffer_export) \
  X(accel_buffer_import) \
  X(accel_buffer_kind) \
  X(accel_mempool_create) \
  X(accel_mempool_destroy) \
  X(accel_mempool_trim) \
  X(accel_mempool_stats) \
  X(accel_device_mem_stats) \
  X(accel_mem_report) \
  /* semaphore.h */ \
  X(accel_semaphore_create) \
  X(accel_semaphore_retain) \
  X(accel_semaphore_release) \
  X(accel_semaphore_query) \
  X(accel_semaphore_signal) \
  X(accel_semaphore_fail) \
  X(accel_semaphore_wait) \
  X(accel_semaphore_wait_many) \
  X(accel_semaphore_fd) \
  /* stream.h */ \
  X(accel_stream_create) \
  X(accel_stream_destroy) \
  X(accel_stream_device) \
  X(accel_host_fn_fail) \
  X(accel_stream_host_call) \
  X(accel_stream_fill) \
  X(accel_stream_copy) \
  X(accel_stream_copy_from_host) \
  X(accel_stream_copy_to_host) \
  X(accel_stream_signal) \
  X(accel_stream_wait) \
  X(accel_stream_synchronize) \
  X(accel_stream_query) \
  /* event.h */ \
  X(accel_event_create) \
  X(accel_event_retain) \
  X(accel_event_release) \
  X(accel_event_record) \
  X(accel_event_query) \
  X(accel_event_synchronize) \
  X(accel_stream_wait_event) \
  X(accel_event_elapsed_ns) \
  /* dma.h */ \
  X(accel_dma_queue_create) \
  X(accel_dma_queue_destroy) \
  X(accel_dma_submit) \
  X(accel_dma_copy) \
  X(accel_dma_copy_2d) \
  X(accel_dma_queue_synchronize) \
  X(accel_dma_queue_query) \
  X(accel_dma_queue_counters) \
  /* executable.h */ \
  X(accel_dtype_bits) \
  X(accel_dtype_name) \
  X(accel_executable_load_file) \
  X(accel_executable_load_memory) \
  X(accel_executable_verify) \
  X(accel_executable_retain) \
  X(accel_executable_release) \
  X(accel_executable_info) \
  X(accel_executable_kernel) \
  X(accel_executable_kernel_at) \
  X(accel_executable_weight) \
  X(accel_executable_weight_buffer) \
  X(accel_executable_metadata) \
  X(accel_kernel_register) \
  X(accel_kernel_retain) \
  X(accel_kernel_release) \
  X(accel_kernel_info) \
  X(accel_launch) \
  X(accel_exe_builder_create) \
  X(accel_exe_builder_destroy) \
  X(accel_exe_builder_set_uuid) \
  X(accel_exe_builder_set_requirements) \
  X(accel_exe_builder_add_kernel) \
  X(accel_exe_builder_add_code) \
  X(accel_exe_builder_add_weight) \
  X(accel_exe_builder_add_metadata) \
  X(accel_exe_builder_add_raw_section) \
  X(accel_exe_builder_write_file) \
  X(accel_exe_builder_write_memory) \
  /* topology.h */ \
  X(accel_topology_options_init) \
  X(accel_topology_load) \
  X(accel_topology_deserialize) \
  X(accel_topology_destroy) \
  X(accel_topology_summary) \
  X(accel_topology_note) \
  X(accel_topology_device_info) \
  X(accel_topology_nic_info) \
  X(accel_topology_nic_port) \
  X(accel_topology_path_between) \
  X(accel_topology_distance) \
  X(accel_topology_nearest_nics) \
  X(accel_topology_pci_numa_node) \
  X(accel_topology_numa_node) \
  X(accel_topology_numa_cpus) \
  X(accel_topology_numa_distance) \
  X(accel_topology_path_name) \
  X(accel_topology_format) \
  /* trace.h */ \
  X(accel_trace_start) \
  X(accel_trace_flush) \
  X(accel_trace_stop) \
  X(accel_trace_flight_dump) \
  X(accel_counters_snapshot) \
  /* dlpack.h */ \
  X(accel_dlpack_dtype) \
  X(accel_dlpack_device) \
  X(accel_buffer_to_dlpack) \
  X(accel_buffer_to_dlpack_legacy) \
  X(accel_buffer_from_dlpack) \
  X(accel_buffer_from_dlpack_legacy) \
  /* gguf.h */ \
  X(accel_gguf_open_file) \
  X(accel_gguf_open_memory) \
  X(accel_gguf_close) \
  X(accel_gguf_version) \
  X(accel_gguf_alignment) \
  X(accel_gguf_kv_count) \
  X(accel_gguf_tensor_count) \
  X(accel_gguf_kv) \
  X(accel_gguf_find_kv) \
  X(accel_gguf_find_u64) \
  X(accel_gguf_find_f64) \
  X(accel_gguf_find_string) \
  X(accel_gguf_array_string) \
  X(accel_gguf_tensor) \
  X(accel_gguf_find_tensor) \
  X(accel_gguf_type_name) \
  X(accel_gguf_type_block) \
  /* kv_cache.h */ \
  X(accel_kv_cache_create) \
  X(accel_kv_cache_destroy) \
  X(accel_kv_cache_add) \
  X(accel_kv_cache_can_add) \
  X(accel_kv_cache_append) \
  X(accel_kv_cache_fork) \
  X(accel_kv_cache_set_computed) \
  X(accel_kv_cache_free) \
  X(accel_kv_cache_block_table) \
  X(accel_kv_cache_swap_out) \
  X(accel_kv_cache_swap_in) \
  X(accel_kv_cache_stats) \
  /* scheduler.h */ \
  X(accel_sched_create) \
  X(accel_sched_destroy) \
  X(accel_sched_add) \
  X(accel_sched_cancel) \
  X(accel_sched_step) \
  X(accel_sched_complete) \
  X(accel_sched_tokens) \
  X(accel_sched_stats) \
  /* sampling.h */ \
  X(accel_sample) \
  /* runtime.h */ \
  X(accel_runtime_backend_status) \
  /* command_buffer.h */ \
  X(accel_command_buffer_create) \
  X(accel_command_buffer_retain) \
  X(accel_command_buffer_release) \
  X(accel_command_buffer_info) \
  X(accel_command_buffer_host_call) \
  X(accel_command_buffer_fill) \
  X(accel_command_buffer_copy) \
  X(accel_command_buffer_copy_from_host) \
  X(accel_command_buffer_copy_to_host) \
  X(accel_command_buffer_signal) \
  X(accel_command_buffer_wait) \
  X(accel_command_buffer_event_record) \
  X(accel_command_buffer_wait_event) \
  X(accel_command_buffer_launch) \
  X(accel_command_buffer_finalize) \
  X(accel_stream_execute) \
  /* tokenizer.h */ \
  X(accel_tokenizer_create_from_gguf) \
  X(accel_tokenizer_destroy) \
  X(accel_tokenizer_kind) \
  X(accel_tokenizer_vocab_size) \
  X(accel_tokenizer_bos) \
  X(accel_tokenizer_eos) \
  X(accel_tokenizer_encode) \
  X(accel_tokenizer_token_piece) \
  X(accel_token_decoder_create) \
  X(accel_token_decoder_destroy) \
  X(accel_token_decoder_push) \
  X(accel_token_decoder_flush) \
  /* cluster.h */ \
  X(accel_cluster_options_init) \
  X(accel_cluster_group_create) \
  X(accel_cluster_group_destroy) \
  X(accel_cluster_progress) \
  X(accel_cluster_wait_epoch) \
  X(accel_cluster_current) \
  X(accel_cluster_epoch_members) \
  X(accel_cluster_report_failure) \
  X(accel_cluster_topology) \
  X(accel_cluster_status_load) \
  X(accel_cluster_status_epoch) \
  X(accel_cluster_status_member) \
  X(accel_cluster_status_destroy) \
  X(accel_cluster_remove) \
  /* serve.h */ \
  X(accel_serve_engine_create) \
  X(accel_serve_engine_destroy) \
  X(accel_serve_model_info) \
  X(accel_serve_submit) \
  X(accel_serve_release) \
  X(accel_serve_next) \
  X(accel_serve_step) \
  X(accel_serve_wait_work) \
  X(accel_serve_stats) \
  X(accel_device_health) \
  X(accel_device_health_fd) \
  X(accel_device_health_callback_set) \
  X(accel_device_inject_fault) \
  X(accel_device_reset) \
  X(accel_device_state_name) \
  /* gguf_import.h */ \
  X(accel_gguf_import_file) \
  X(accel_gguf_import_memory) \
  X(accel_gguf_file_is_gguf) \
  /* end of 0.2 */

#define ACCEL_API_TABLE_FIELD_(fn) __typeof__(&fn) fn;

// The table. Read |struct_size| before any entry a newer header added
// (ACCEL_API_TABLE_HAS).
typedef struct accel_api {
  // Bytes of the table the library provides: at least the size of every
  // version up to its own.
  uint32_t struct_size;
  // ACCEL_API_VERSION_MAJOR << 16 | ACCEL_API_VERSION_MINOR of the library.
  uint32_t api_version;
  // One pointer per function, named and typed as the function
  // (ACCEL_API_ENTRIES order). Never NULL.
  ACCEL_API_ENTRIES(ACCEL_API_TABLE_FIELD_)
} accel_api_t;

// True if |api| (a table from accel_get_api) provides entry |field|.
#define ACCEL_API_TABLE_HAS(api, field)                            \
  (offsetof(accel_api_t, field) + sizeof(((accel_api_t *)0)->field) <= \
   (api)->struct_size)

// The type of accel_get_api, for dlsym.
typedef const accel_api_t *(*accel_get_api_fn)(uint32_t major, uint32_t minor);

// Returns the library's function table for a consumer compiled against API
// version |major|.|minor|: the same static table for every minor the library
// has (the consumer reads the entries its header knows).
// Returns NULL if |major| is not the library's major, or |minor| is newer
// than the library's; the calling thread's message then says which versions
// were asked for and which the library has (read it through
// accel_get_api(ACCEL_API_VERSION_MAJOR, 0)->accel_last_error(), or
// accel_last_error when linked).
// The table is static and valid while the library is loaded; do not free it.
// Thread-safe.
ACCEL_API const accel_api_t *accel_get_api(uint32_t major, uint32_t minor);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_API_TABLE_H_
