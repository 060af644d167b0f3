// Internal layout of a topology. A topology is a plain snapshot: the loaders
// (hwloc, JSON) fill it once, the queries only read it, and nothing in it
// points into hwloc, so that a deserialized topology answers like a loaded one.
#ifndef ACCEL_TOPO_TOPOLOGY_IMPL_H_
#define ACCEL_TOPO_TOPOLOGY_IMPL_H_

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#include "accel/topology.h"
#include "core/error.h"

// The JSON format version written and the newest one read.
#define ACCEL_TOPO_JSON_VERSION 1

#define ACCEL_TOPO_MAX_PORTS 8

typedef struct accel_topo_numa {
  int32_t os_index;
  uint64_t memory_bytes;
  uint32_t cpu_count;
  uint32_t *cpus;  // ascending OS CPU numbers; owned
} accel_topo_numa_t;

typedef struct accel_topo_device {
  accel_topology_device_info_t info;
} accel_topo_device_t;

typedef struct accel_topo_nic {
  accel_topology_nic_info_t info;
  accel_topology_port_info_t ports[ACCEL_TOPO_MAX_PORTS];
} accel_topo_nic_t;

struct accel_topology {
  accel_topology_summary_t summary;
  uint32_t numa_count;
  accel_topo_numa_t *numa;  // ascending os_index
  // numa_count^2 relative distances, row-major by position in |numa|.
  uint32_t *numa_distances;
  bool numa_distances_measured;
  uint32_t device_count;
  accel_topo_device_t *devices;
  uint32_t nic_count;
  accel_topo_nic_t *nics;
  // endpoint_count^2 entries each, row-major (endpoints: devices then NICs).
  uint32_t endpoint_count;
  uint8_t *paths;        // accel_topology_path_t
  uint32_t *distances;   // links in the tree
  uint32_t note_count;
  char **notes;
  uint32_t tree_line_count;
  char **tree_lines;
};

// Allocation of the arrays of a topology whose counts are set; everything is
// zeroed. Returns OUT_OF_MEMORY with a message.
accel_status_t accel_topo_alloc_numa(accel_topology_t *t, uint32_t count);
accel_status_t accel_topo_alloc_endpoints(accel_topology_t *t,
                                          uint32_t device_count,
                                          uint32_t nic_count);
// Appends a formatted note / tree line (copied).
accel_status_t accel_topo_add_note(accel_topology_t *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
accel_status_t accel_topo_add_tree_line(accel_topology_t *t, const char *fmt,
                                        ...)
    __attribute__((format(printf, 2, 3)));
// Frees everything |t| owns and |t|.
void accel_topo_free(accel_topology_t *t);

// Sets summary counts that follow from the arrays (numa, devices, nics,
// notes), and default NUMA distances when none are measured.
accel_status_t accel_topo_finish(accel_topology_t *t);

// Finds the NUMA node with OS index |os_index|; NULL if none.
const accel_topo_numa_t *accel_topo_find_numa(const accel_topology_t *t,
                                              int32_t os_index);

// Makes endpoint names unique by appending "-<bus id>" to repeats.
void accel_topo_unique_names(accel_topology_t *t);

// Parses a PCI bus id "dddd:bb:dd.f" or "bb:dd.f" (hex, any case). Returns
// false if malformed.
bool accel_topo_parse_bus_id(const char *text, uint32_t *out_domain,
                             uint32_t *out_bus, uint32_t *out_dev,
                             uint32_t *out_func);

// Writes a CPU list "0-7,16-23" of |count| ascending CPUs into |out|.
void accel_topo_format_cpu_list(const uint32_t *cpus, uint32_t count,
                                char *out, size_t size);

// Writes into |out| the CPUs of NUMA node |numa_node|; NOT_FOUND if absent.
accel_status_t accel_topo_numa_cpuset(const accel_topology_t *t,
                                      int32_t numa_node, cpu_set_t *out);

// Loaders, one per source library (topology_hwloc.c, topology_json.c).
accel_status_t accel_topo_load_hwloc(const accel_topology_options_t *opts,
                                     const char *xml_path,
                                     accel_topology_t *t);
accel_status_t accel_topo_parse_json(const char *json, size_t size,
                                     accel_topology_t *t);

// Live enumeration of RDMA devices and DRM nodes: attach what they find to
// the NICs and devices of |t| by PCI bus id and add notes for what is absent.
// Never fail for an absent library, kernel interface or device.
accel_status_t accel_topo_enumerate_verbs(accel_topology_t *t);
accel_status_t accel_topo_enumerate_drm(accel_topology_t *t);

// Text forms (topology_text.c, topology_json.c). Each appends to a growing
// buffer.
typedef struct accel_topo_buf {
  char *data;
  size_t length;
  size_t capacity;
  bool failed;  // an allocation failed; |data| holds what fit
} accel_topo_buf_t;

void accel_topo_buf_printf(accel_topo_buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void accel_topo_write_matrix(const accel_topology_t *t, accel_topo_buf_t *b);
void accel_topo_write_tree(const accel_topology_t *t, accel_topo_buf_t *b);
void accel_topo_write_json(const accel_topology_t *t, accel_topo_buf_t *b);

#endif  // ACCEL_TOPO_TOPOLOGY_IMPL_H_
