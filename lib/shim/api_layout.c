// The shim's layout check: every entry of accel_api_t at the offset it was
// given when its version shipped. A change that moves an entry (inserting,
// removing or reordering instead of appending) fails the build here.
//
// Adding a minor: append its functions to ACCEL_API_ENTRIES, then add a
// block below with the new entries' indices and the version's entry count.
// Never edit an existing block. tests/shim/check_api_layout.sh proves the
// check fires by building this file against a table with two entries
// swapped.
#include <stddef.h>

#include "accel/api_table.h"

// Bytes before the first entry: struct_size and api_version.
#define ACCEL_API_HEADER_BYTES 8
#define ACCEL_API_ENTRY_BYTES sizeof(void (*)(void))

#define PIN(fn, index)                                                    \
  _Static_assert(offsetof(accel_api_t, fn) ==                             \
                     ACCEL_API_HEADER_BYTES + (index) * ACCEL_API_ENTRY_BYTES, \
                 "accel_api_t entry " #fn " moved from index " #index     \
                 " (entries may only be appended)");

// Version 0.2: the first table.
#define ACCEL_API_PINS_0_2 \
  PIN(accel_status_name, 0) \
  PIN(accel_last_error, 1) \
  PIN(accel_api_version, 2) \
  PIN(accel_runtime_options_init, 3) \
  PIN(accel_runtime_create, 4) \
  PIN(accel_runtime_destroy, 5) \
  PIN(accel_env_vars, 6) \
  PIN(accel_device_count, 7) \
  PIN(accel_device_get, 8) \
  PIN(accel_device_info, 9) \
  PIN(accel_device_clock_pair, 10) \
  PIN(accel_device_runtime, 11) \
  PIN(accel_buffer_alloc, 12) \
  PIN(accel_buffer_free, 13) \
  PIN(accel_mem_free, 14) \
  PIN(accel_buffer_retain, 15) \
  PIN(accel_buffer_release, 16) \
  PIN(accel_buffer_address, 17) \
  PIN(accel_buffer_size, 18) \
  PIN(accel_buffer_device, 19) \
  PIN(accel_buffer_host_pointer, 20) \
  PIN(accel_buffer_grow, 21) \
  PIN(accel_buffer_alloc_async, 22) \
  PIN(accel_buffer_free_async, 23) \
  PIN(accel_host_register, 24) \
  PIN(accel_buffer_export, 25) \
  PIN(accel_buffer_import, 26) \
  PIN(accel_buffer_kind, 27) \
  PIN(accel_mempool_create, 28) \
  PIN(accel_mempool_destroy, 29) \
  PIN(accel_mempool_trim, 30) \
  PIN(accel_mempool_stats, 31) \
  PIN(accel_device_mem_stats, 32) \
  PIN(accel_mem_report, 33) \
  PIN(accel_semaphore_create, 34) \
  PIN(accel_semaphore_retain, 35) \
  PIN(accel_semaphore_release, 36) \
  PIN(accel_semaphore_query, 37) \
  PIN(accel_semaphore_signal, 38) \
  PIN(accel_semaphore_fail, 39) \
  PIN(accel_semaphore_wait, 40) \
  PIN(accel_semaphore_wait_many, 41) \
  PIN(accel_semaphore_fd, 42) \
  PIN(accel_stream_create, 43) \
  PIN(accel_stream_destroy, 44) \
  PIN(accel_stream_device, 45) \
  PIN(accel_host_fn_fail, 46) \
  PIN(accel_stream_host_call, 47) \
  PIN(accel_stream_fill, 48) \
  PIN(accel_stream_copy, 49) \
  PIN(accel_stream_copy_from_host, 50) \
  PIN(accel_stream_copy_to_host, 51) \
  PIN(accel_stream_signal, 52) \
  PIN(accel_stream_wait, 53) \
  PIN(accel_stream_synchronize, 54) \
  PIN(accel_stream_query, 55) \
  PIN(accel_event_create, 56) \
  PIN(accel_event_retain, 57) \
  PIN(accel_event_release, 58) \
  PIN(accel_event_record, 59) \
  PIN(accel_event_query, 60) \
  PIN(accel_event_synchronize, 61) \
  PIN(accel_stream_wait_event, 62) \
  PIN(accel_event_elapsed_ns, 63) \
  PIN(accel_dma_queue_create, 64) \
  PIN(accel_dma_queue_destroy, 65) \
  PIN(accel_dma_submit, 66) \
  PIN(accel_dma_copy, 67) \
  PIN(accel_dma_copy_2d, 68) \
  PIN(accel_dma_queue_synchronize, 69) \
  PIN(accel_dma_queue_query, 70) \
  PIN(accel_dma_queue_counters, 71) \
  PIN(accel_dtype_bits, 72) \
  PIN(accel_dtype_name, 73) \
  PIN(accel_executable_load_file, 74) \
  PIN(accel_executable_load_memory, 75) \
  PIN(accel_executable_verify, 76) \
  PIN(accel_executable_retain, 77) \
  PIN(accel_executable_release, 78) \
  PIN(accel_executable_info, 79) \
  PIN(accel_executable_kernel, 80) \
  PIN(accel_executable_kernel_at, 81) \
  PIN(accel_executable_weight, 82) \
  PIN(accel_executable_weight_buffer, 83) \
  PIN(accel_executable_metadata, 84) \
  PIN(accel_kernel_register, 85) \
  PIN(accel_kernel_retain, 86) \
  PIN(accel_kernel_release, 87) \
  PIN(accel_kernel_info, 88) \
  PIN(accel_launch, 89) \
  PIN(accel_exe_builder_create, 90) \
  PIN(accel_exe_builder_destroy, 91) \
  PIN(accel_exe_builder_set_uuid, 92) \
  PIN(accel_exe_builder_set_requirements, 93) \
  PIN(accel_exe_builder_add_kernel, 94) \
  PIN(accel_exe_builder_add_code, 95) \
  PIN(accel_exe_builder_add_weight, 96) \
  PIN(accel_exe_builder_add_metadata, 97) \
  PIN(accel_exe_builder_add_raw_section, 98) \
  PIN(accel_exe_builder_write_file, 99) \
  PIN(accel_exe_builder_write_memory, 100) \
  PIN(accel_topology_options_init, 101) \
  PIN(accel_topology_load, 102) \
  PIN(accel_topology_deserialize, 103) \
  PIN(accel_topology_destroy, 104) \
  PIN(accel_topology_summary, 105) \
  PIN(accel_topology_note, 106) \
  PIN(accel_topology_device_info, 107) \
  PIN(accel_topology_nic_info, 108) \
  PIN(accel_topology_nic_port, 109) \
  PIN(accel_topology_path_between, 110) \
  PIN(accel_topology_distance, 111) \
  PIN(accel_topology_nearest_nics, 112) \
  PIN(accel_topology_pci_numa_node, 113) \
  PIN(accel_topology_numa_node, 114) \
  PIN(accel_topology_numa_cpus, 115) \
  PIN(accel_topology_numa_distance, 116) \
  PIN(accel_topology_path_name, 117) \
  PIN(accel_topology_format, 118) \
  PIN(accel_trace_start, 119) \
  PIN(accel_trace_flush, 120) \
  PIN(accel_trace_stop, 121) \
  PIN(accel_trace_flight_dump, 122) \
  PIN(accel_counters_snapshot, 123) \
  PIN(accel_dlpack_dtype, 124) \
  PIN(accel_dlpack_device, 125) \
  PIN(accel_buffer_to_dlpack, 126) \
  PIN(accel_buffer_to_dlpack_legacy, 127) \
  PIN(accel_buffer_from_dlpack, 128) \
  PIN(accel_buffer_from_dlpack_legacy, 129) \
  PIN(accel_gguf_open_file, 130) \
  PIN(accel_gguf_open_memory, 131) \
  PIN(accel_gguf_close, 132) \
  PIN(accel_gguf_version, 133) \
  PIN(accel_gguf_alignment, 134) \
  PIN(accel_gguf_kv_count, 135) \
  PIN(accel_gguf_tensor_count, 136) \
  PIN(accel_gguf_kv, 137) \
  PIN(accel_gguf_find_kv, 138) \
  PIN(accel_gguf_find_u64, 139) \
  PIN(accel_gguf_find_f64, 140) \
  PIN(accel_gguf_find_string, 141) \
  PIN(accel_gguf_array_string, 142) \
  PIN(accel_gguf_tensor, 143) \
  PIN(accel_gguf_find_tensor, 144) \
  PIN(accel_gguf_type_name, 145) \
  PIN(accel_gguf_type_block, 146) \
  PIN(accel_kv_cache_create, 147) \
  PIN(accel_kv_cache_destroy, 148) \
  PIN(accel_kv_cache_add, 149) \
  PIN(accel_kv_cache_can_add, 150) \
  PIN(accel_kv_cache_append, 151) \
  PIN(accel_kv_cache_fork, 152) \
  PIN(accel_kv_cache_set_computed, 153) \
  PIN(accel_kv_cache_free, 154) \
  PIN(accel_kv_cache_block_table, 155) \
  PIN(accel_kv_cache_swap_out, 156) \
  PIN(accel_kv_cache_swap_in, 157) \
  PIN(accel_kv_cache_stats, 158) \
  PIN(accel_sched_create, 159) \
  PIN(accel_sched_destroy, 160) \
  PIN(accel_sched_add, 161) \
  PIN(accel_sched_cancel, 162) \
  PIN(accel_sched_step, 163) \
  PIN(accel_sched_complete, 164) \
  PIN(accel_sched_tokens, 165) \
  PIN(accel_sched_stats, 166) \
  PIN(accel_sample, 167) \
  PIN(accel_runtime_backend_status, 168) \
  PIN(accel_command_buffer_create, 169) \
  PIN(accel_command_buffer_retain, 170) \
  PIN(accel_command_buffer_release, 171) \
  PIN(accel_command_buffer_info, 172) \
  PIN(accel_command_buffer_host_call, 173) \
  PIN(accel_command_buffer_fill, 174) \
  PIN(accel_command_buffer_copy, 175) \
  PIN(accel_command_buffer_copy_from_host, 176) \
  PIN(accel_command_buffer_copy_to_host, 177) \
  PIN(accel_command_buffer_signal, 178) \
  PIN(accel_command_buffer_wait, 179) \
  PIN(accel_command_buffer_event_record, 180) \
  PIN(accel_command_buffer_wait_event, 181) \
  PIN(accel_command_buffer_launch, 182) \
  PIN(accel_command_buffer_finalize, 183) \
  PIN(accel_stream_execute, 184) \
  PIN(accel_tokenizer_create_from_gguf, 185) \
  PIN(accel_tokenizer_destroy, 186) \
  PIN(accel_tokenizer_kind, 187) \
  PIN(accel_tokenizer_vocab_size, 188) \
  PIN(accel_tokenizer_bos, 189) \
  PIN(accel_tokenizer_eos, 190) \
  PIN(accel_tokenizer_encode, 191) \
  PIN(accel_tokenizer_token_piece, 192) \
  PIN(accel_token_decoder_create, 193) \
  PIN(accel_token_decoder_destroy, 194) \
  PIN(accel_token_decoder_push, 195) \
  PIN(accel_token_decoder_flush, 196) \
  PIN(accel_cluster_options_init, 197) \
  PIN(accel_cluster_group_create, 198) \
  PIN(accel_cluster_group_destroy, 199) \
  PIN(accel_cluster_progress, 200) \
  PIN(accel_cluster_wait_epoch, 201) \
  PIN(accel_cluster_current, 202) \
  PIN(accel_cluster_epoch_members, 203) \
  PIN(accel_cluster_report_failure, 204) \
  PIN(accel_cluster_topology, 205) \
  PIN(accel_cluster_status_load, 206) \
  PIN(accel_cluster_status_epoch, 207) \
  PIN(accel_cluster_status_member, 208) \
  PIN(accel_cluster_status_destroy, 209) \
  PIN(accel_cluster_remove, 210) \
  PIN(accel_serve_engine_create, 211) \
  PIN(accel_serve_engine_destroy, 212) \
  PIN(accel_serve_model_info, 213) \
  PIN(accel_serve_submit, 214) \
  PIN(accel_serve_release, 215) \
  PIN(accel_serve_next, 216) \
  PIN(accel_serve_step, 217) \
  PIN(accel_serve_wait_work, 218) \
  PIN(accel_serve_stats, 219) \
  PIN(accel_device_health, 220) \
  PIN(accel_device_health_fd, 221) \
  PIN(accel_device_health_callback_set, 222) \
  PIN(accel_device_inject_fault, 223) \
  PIN(accel_device_reset, 224) \
  PIN(accel_device_state_name, 225) \
  PIN(accel_gguf_import_file, 226) \
  PIN(accel_gguf_import_memory, 227) \
  PIN(accel_gguf_file_is_gguf, 228) \
  /* end of 0.2 */
#define ACCEL_API_ENTRY_COUNT_0_2 229

ACCEL_API_PINS_0_2

// The table holds at least every pinned version's entries, and nothing else
// sits between them.
_Static_assert(offsetof(accel_api_t, struct_size) == 0, "struct_size first");
_Static_assert(offsetof(accel_api_t, api_version) == 4, "api_version second");
_Static_assert(sizeof(accel_api_t) >=
                   ACCEL_API_HEADER_BYTES +
                       ACCEL_API_ENTRY_COUNT_0_2 * ACCEL_API_ENTRY_BYTES,
               "accel_api_t lost entries of version 0.2");
#define ACCEL_API_COUNT_(fn) +1
_Static_assert(sizeof(accel_api_t) ==
                   ACCEL_API_HEADER_BYTES +
                       (0 ACCEL_API_ENTRIES(ACCEL_API_COUNT_)) *
                           ACCEL_API_ENTRY_BYTES,
               "accel_api_t has bytes that are not entries");

// This file checks at compile time only; the symbol keeps it a translation
// unit with content for -Wpedantic's "empty translation unit".
int shim_layout_entry_count(void);
int shim_layout_entry_count(void) { return ACCEL_API_ENTRY_COUNT_0_2; }
