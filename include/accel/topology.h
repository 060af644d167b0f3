// Topology: one picture of a host, built from hwloc (packages, NUMA nodes,
// caches, cores, the PCI tree), libibverbs (RDMA NICs and their ports) and
// libdrm (DRM and /dev/accel device nodes). It lists the accelerators and NICs
// found on PCI, places each on its NUMA node, and derives for every pair the
// path class in the words of `nvidia-smi topo -m` (X, PIX, PXB, PHB, NODE,
// SYS), a numeric distance, and each device's nearest NICs.
//
// A topology is a snapshot: once loaded (from the live machine, an hwloc XML
// file, an hwloc synthetic description, or the serialized form of another
// host) it never changes, and every query is a lookup.
//
// Endpoints: the matrix queries number devices and NICs together, devices
// first: endpoint i < device_count is device i, endpoint device_count + j is
// NIC j.
#ifndef ACCEL_TOPOLOGY_H_
#define ACCEL_TOPOLOGY_H_

#include <stdbool.h>

#include "accel/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct accel_topology accel_topology_t;

// How two endpoints are connected, nearest first (the order of the values is
// the order of closeness). Names as `nvidia-smi topo -m` prints them.
typedef enum accel_topology_path {
  // The same endpoint ("X").
  ACCEL_TOPOLOGY_PATH_X = 0,
  // Through at most one PCIe switch: both hang off the same switch, or share a
  // bridge directly ("PIX").
  ACCEL_TOPOLOGY_PATH_PIX = 1,
  // Through several PCIe switches, without the host bridge ("PXB").
  ACCEL_TOPOLOGY_PATH_PXB = 2,
  // Through a PCIe host bridge (the CPU's root complex) ("PHB").
  ACCEL_TOPOLOGY_PATH_PHB = 3,
  // Across host bridges within one NUMA node ("NODE").
  ACCEL_TOPOLOGY_PATH_NODE = 4,
  // Across the interconnect between NUMA nodes or sockets, or where the
  // placement of either endpoint is unknown ("SYS").
  ACCEL_TOPOLOGY_PATH_SYS = 5,
} accel_topology_path_t;

#define ACCEL_TOPOLOGY_PATH_COUNT 6

// Load flags (accel_topology_options_t.flags).
typedef uint32_t accel_topology_load_flags_t;
enum accel_topology_load_flag_bits {
  ACCEL_TOPOLOGY_LOAD_NONE = 0,
  // Do not let ACCEL_TOPOLOGY_XML replace the source the options name.
  ACCEL_TOPOLOGY_LOAD_IGNORE_ENV = 1u << 0,
  // Leave out the PCI tree (and so devices, NICs, verbs and DRM): packages,
  // NUMA nodes, caches and cores only. Much faster on a live machine.
  ACCEL_TOPOLOGY_LOAD_NO_IO = 1u << 1,
  // Do not enumerate RDMA devices with libibverbs (live machine only).
  ACCEL_TOPOLOGY_LOAD_NO_VERBS = 1u << 2,
  // Do not enumerate DRM and /dev/accel nodes (live machine only).
  ACCEL_TOPOLOGY_LOAD_NO_DRM = 1u << 3,
};

// Where a topology comes from. Zero-initialized options (after
// accel_topology_options_init) load the live machine.
typedef struct accel_topology_options {
  // sizeof(accel_topology_options_t) as the caller compiled it.
  uint32_t struct_size;
  // accel_topology_load_flag_bits; 0 for none.
  accel_topology_load_flags_t flags;
  // Path of an hwloc XML file (`lstopo --of xml`) to load instead of the live
  // machine; NULL for none.
  const char *xml_path;
  // An hwloc synthetic description ("pack:2 [numa] core:8 pu:2") to load
  // instead of the live machine; NULL for none. Synthetic topologies have no
  // PCI devices. At most one of |xml_path| and |synthetic| may be set.
  const char *synthetic;
} accel_topology_options_t;

// What a topology holds as a whole.
typedef struct accel_topology_summary {
  // sizeof(accel_topology_summary_t) as the caller compiled it; fields beyond
  // it are not written.
  uint32_t struct_size;
  // Processor packages (sockets); 0 if the source has none.
  uint32_t package_count;
  // NUMA nodes.
  uint32_t numa_node_count;
  // Cores.
  uint32_t core_count;
  // Processing units (hardware threads).
  uint32_t pu_count;
  // Accelerators found (PCI class 0x0302 3D controller, 0x03xx display,
  // 0x12xx processing accelerator).
  uint32_t device_count;
  // NICs found (PCI class 0x02xx network controller).
  uint32_t nic_count;
  // Notes on what could not be found or queried (accel_topology_note).
  uint32_t note_count;
  // Memory of all NUMA nodes in bytes (0 if unknown).
  uint64_t memory_bytes;
  // Host name from the source ("" if unknown).
  char hostname[64];
  // Where the topology came from: "live", "xml:PATH", "synthetic:DESC" or
  // "serialized" (cut to fit).
  char source[192];
} accel_topology_summary_t;

// One accelerator.
typedef struct accel_topology_device_info {
  // sizeof(accel_topology_device_info_t) as the caller compiled it.
  uint32_t struct_size;
  // Index among the topology's devices (and endpoint number).
  uint32_t index;
  // Name: the device's CoProc OS device ("cuda0"), else its GPU OS device
  // that is not a DRM node ("nvml0"), else a DRM node ("card0"), else
  // "accelN" by index. Unique within the topology.
  char name[64];
  // PCI bus id "dddd:bb:dd.f" in lower case.
  char pci_bus_id[32];
  // PCI vendor and device ids.
  uint16_t vendor_id;
  uint16_t device_id;
  // PCI class (0x0302 3D controller...).
  uint32_t class_id;
  // NUMA node (OS index) the device is local to, -1 if it is not local to a
  // single node.
  int32_t numa_node;
  // Reserved, 0.
  uint32_t reserved0;
  // Model name from the PCI database ("" if unknown).
  char model[128];
  // CPUs local to the device, as a list ("0-7,16-23"; "" if unknown; cut
  // after the last whole entry that fits; accel_topology_numa_cpus has them
  // all).
  char cpus[256];
  // DRM primary node ("/dev/dri/card1"), render node ("/dev/dri/renderD128")
  // and accel node ("/dev/accel/accel0"); "" when the device has none or when
  // the topology comes from a file (then only the node name is known, and it
  // is given without /dev: "card1").
  char drm_primary[64];
  char drm_render[64];
  char accel_node[64];
} accel_topology_device_info_t;

// One NIC.
typedef struct accel_topology_nic_info {
  // sizeof(accel_topology_nic_info_t) as the caller compiled it.
  uint32_t struct_size;
  // Index among the topology's NICs (its endpoint is device_count + index).
  uint32_t index;
  // Name: the RDMA (OpenFabrics) device ("mlx5_0"), else the network
  // interface ("eth0"), else "nicN" by index. Unique within the topology.
  char name[64];
  // PCI bus id "dddd:bb:dd.f" in lower case.
  char pci_bus_id[32];
  // PCI vendor and device ids.
  uint16_t vendor_id;
  uint16_t device_id;
  // PCI class (0x0200 Ethernet, 0x0207 InfiniBand...).
  uint32_t class_id;
  // NUMA node (OS index) the NIC is local to, -1 if not local to one node.
  int32_t numa_node;
  // Number of ports known (accel_topology_nic_port); 0 for a NIC without
  // RDMA.
  uint32_t port_count;
  // Model name from the PCI database ("" if unknown).
  char model[128];
  // CPUs local to the NIC ("0-7,16-23"; "" if unknown).
  char cpus[256];
  // Network interface name ("ib0", "eth0"; "" if none).
  char netdev[32];
  // Node GUID of the RDMA device ("b83f:d203:0000:0000"; "" if none).
  char node_guid[32];
  // True if the NIC is an RDMA device (an OpenFabrics/verbs device).
  bool rdma;
} accel_topology_nic_info_t;

// One port of an RDMA NIC.
typedef struct accel_topology_port_info {
  // sizeof(accel_topology_port_info_t) as the caller compiled it.
  uint32_t struct_size;
  // Port number (from 1).
  uint32_t port_num;
  // Port state: "down", "init", "armed", "active", "active_defer" or
  // "unknown".
  char state[16];
  // Link layer: "InfiniBand", "Ethernet" or "" if unknown.
  char link_layer[16];
  // Local identifier (InfiniBand), 0 if none.
  uint32_t lid;
  // Active link width in lanes (1, 2, 4, 8, 12), 0 if unknown.
  uint32_t width;
  // Active speed per lane in Mb/s (25781 for EDR...), 0 if unknown.
  uint32_t lane_speed_mbps;
  // Active MTU in bytes, 0 if unknown.
  uint32_t mtu_bytes;
  // GID 0 ("fe80:0000:0000:0000:b83f:d203:0000:0000"), "" if unknown.
  char gid[48];
} accel_topology_port_info_t;

// Text forms (accel_topology_format).
typedef enum accel_topology_format_kind {
  // The matrix of `nvidia-smi topo -m`: a row per endpoint, its path class to
  // every endpoint, its CPU and NUMA affinity, then a legend.
  ACCEL_TOPOLOGY_FORMAT_MATRIX = 0,
  // The hwloc tree: machine, packages, NUMA nodes, caches, cores (folded),
  // bridges and PCI devices with the names given to them.
  ACCEL_TOPOLOGY_FORMAT_TREE = 1,
  // One JSON object with everything in the topology; also the serialized
  // form that accel_topology_deserialize reads back (docs/topology.md).
  ACCEL_TOPOLOGY_FORMAT_JSON = 2,
} accel_topology_format_kind_t;

// Fills |opts| with defaults: struct_size set, live machine, no flags.
// Thread-safe.
ACCEL_API void accel_topology_options_init(accel_topology_options_t *opts);

// Loads a topology: from |opts|->xml_path, |opts|->synthetic, or the live
// machine; the environment variable ACCEL_TOPOLOGY_XML, when set and not
// empty, replaces that source with its file (unless
// ACCEL_TOPOLOGY_LOAD_IGNORE_ENV). On the live machine, RDMA NICs are
// enumerated with libibverbs and DRM/accel nodes with libdrm; a library, a
// kernel interface or a device that is absent is not an error: it is recorded
// as a note (accel_topology_note) and loading carries on. |opts| may be NULL
// for the live machine.
// On success |*out_topology| is owned by the caller (accel_topology_destroy).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL |out_topology|, struct_size too small,
//   unknown flags, or both |xml_path| and |synthetic| set.
// ACCEL_ERROR_NOT_FOUND: the XML file does not exist.
// ACCEL_ERROR_IO: the XML file exists but cannot be read.
// ACCEL_ERROR_FORMAT: the XML file or synthetic description is malformed.
// ACCEL_ERROR_UNSUPPORTED: accel was built without hwloc (only
//   accel_topology_deserialize is available then).
// ACCEL_ERROR_UNAVAILABLE: hwloc failed to discover the live machine.
// ACCEL_ERROR_OUT_OF_MEMORY: host allocation failed.
// Thread-safe.
ACCEL_API accel_status_t accel_topology_load(
    const accel_topology_options_t *opts, accel_topology_t **out_topology);

// Rebuilds a topology from its JSON form (ACCEL_TOPOLOGY_FORMAT_JSON, written
// here or by another host) of |size| bytes at |json|. The result answers
// every query as the original did; its summary source is "serialized".
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument.
// ACCEL_ERROR_FORMAT: not JSON, not an accel topology, or inconsistent (a
//   path naming an unknown endpoint, a matrix of the wrong size...).
// ACCEL_ERROR_VERSION: the document's format version is newer than this
//   library reads.
// ACCEL_ERROR_UNSUPPORTED: accel was built without a JSON reader (json-c).
// ACCEL_ERROR_OUT_OF_MEMORY: host allocation failed.
// Thread-safe.
ACCEL_API accel_status_t accel_topology_deserialize(
    const char *json, size_t size, accel_topology_t **out_topology);

// Destroys |topology|. NULL is ignored.
// Not thread-safe: no other call on |topology| may run.
ACCEL_API void accel_topology_destroy(accel_topology_t *topology);

// Fills |*out_summary| (the caller sets struct_size first).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or struct_size too small.
// Thread-safe.
ACCEL_API accel_status_t accel_topology_summary(
    const accel_topology_t *topology, accel_topology_summary_t *out_summary);

// Returns in |*out_note| note |index|: what was absent or could not be
// queried, e.g. "libibverbs: no RDMA devices (ibv_get_device_list: Function
// not implemented)". The string belongs to |topology| and lives until
// accel_topology_destroy.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or |index| >= note_count.
// Thread-safe.
ACCEL_API accel_status_t accel_topology_note(const accel_topology_t *topology,
                                             uint32_t index,
                                             const char **out_note);

// Fills |*out_info| (the caller sets struct_size first) for device |index|.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, struct_size too small, or
//   |index| >= device_count.
// Thread-safe.
ACCEL_API accel_status_t accel_topology_device_info(
    const accel_topology_t *topology, uint32_t index,
    accel_topology_device_info_t *out_info);

// Fills |*out_info| (the caller sets struct_size first) for NIC |index|.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, struct_size too small, or
//   |index| >= nic_count.
// Thread-safe.
ACCEL_API accel_status_t accel_topology_nic_info(
    const accel_topology_t *topology, uint32_t index,
    accel_topology_nic_info_t *out_info);

// Fills |*out_info| (the caller sets struct_size first) for port |port_index|
// (0-based; the port number is in the result) of NIC |nic_index|.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument, struct_size too small, or an
//   index out of range.
// Thread-safe.
ACCEL_API accel_status_t accel_topology_nic_port(
    const accel_topology_t *topology, uint32_t nic_index, uint32_t port_index,
    accel_topology_port_info_t *out_info);

// Returns in |*out_path| the path class between endpoints |a| and |b| (devices
// first, then NICs). Symmetric; X exactly when |a| == |b|.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or an endpoint out of range.
// Thread-safe.
ACCEL_API accel_status_t accel_topology_path_between(
    const accel_topology_t *topology, uint32_t a, uint32_t b,
    accel_topology_path_t *out_path);

// Returns in |*out_distance| the number of links between endpoints |a| and |b|
// in the topology tree (PCI device to bridge, bridge to bridge, host bridge to
// package...; 0 for the same endpoint). Symmetric. Rank endpoints by path
// class first and distance second: a distance alone does not say whether a
// NUMA boundary is crossed.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or an endpoint out of range.
// Thread-safe.
ACCEL_API accel_status_t accel_topology_distance(
    const accel_topology_t *topology, uint32_t a, uint32_t b,
    uint32_t *out_distance);

// Writes into |out_nics| up to |capacity| NIC indices ordered nearest first
// to device |device_index| (by path class, then distance, then NIC index;
// every NIC appears), and the number of NICs in |*out_count| (which may
// exceed |capacity|; |out_nics| may be NULL when |capacity| is 0).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or |device_index| out of range.
// Thread-safe.
ACCEL_API accel_status_t accel_topology_nearest_nics(
    const accel_topology_t *topology, uint32_t device_index, uint32_t capacity,
    uint32_t *out_nics, uint32_t *out_count);

// Returns in |*out_numa_node| the NUMA node (OS index) of the device or NIC
// with PCI bus id |pci_bus_id| ("0000:12:00.0", case-insensitive; the domain
// may be left out), -1 if it is not local to one node; this is how the
// runtime places accel devices.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument or a malformed bus id.
// ACCEL_ERROR_NOT_FOUND: no device or NIC has that bus id.
// Thread-safe.
ACCEL_API accel_status_t accel_topology_pci_numa_node(
    const accel_topology_t *topology, const char *pci_bus_id,
    int32_t *out_numa_node);

// Returns the OS index of NUMA node number |index| (0 to numa_node_count-1,
// in OS index order) in |*out_os_index| and its memory in |*out_memory_bytes|
// (either output may be NULL).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL topology or |index| out of range.
// Thread-safe.
ACCEL_API accel_status_t accel_topology_numa_node(
    const accel_topology_t *topology, uint32_t index, int32_t *out_os_index,
    uint64_t *out_memory_bytes);

// Writes into |out_cpus| up to |capacity| OS CPU numbers (ascending) of the
// PUs of NUMA node |numa_node| (OS index), and their number in |*out_count|
// (which may exceed |capacity|; |out_cpus| may be NULL when |capacity| is 0).
// ACCEL_ERROR_INVALID_ARGUMENT: NULL argument.
// ACCEL_ERROR_NOT_FOUND: the topology has no NUMA node |numa_node|.
// Thread-safe.
ACCEL_API accel_status_t accel_topology_numa_cpus(
    const accel_topology_t *topology, int32_t numa_node, uint32_t capacity,
    uint32_t *out_cpus, uint32_t *out_count);

// Returns in |*out_distance| the relative distance between NUMA nodes |a| and
// |b| (OS indices) from hwloc's distances API (ACPI SLIT scale: 10 local);
// where the source has no distance matrix, 10 on the diagonal and 20
// elsewhere (what Linux assumes without a SLIT), and |*out_measured| (may be
// NULL) is false.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL |topology| or |out_distance|.
// ACCEL_ERROR_NOT_FOUND: no NUMA node |a| or |b|.
// Thread-safe.
ACCEL_API accel_status_t accel_topology_numa_distance(
    const accel_topology_t *topology, int32_t a, int32_t b,
    uint32_t *out_distance, bool *out_measured);

// Returns the name of |path| ("PIX"), or "?" for a value out of range. The
// string is static. Thread-safe.
ACCEL_API const char *accel_topology_path_name(accel_topology_path_t path);

// Writes |topology| as text of kind |format| into |buffer| (NUL-terminated)
// and its length without the NUL in |*out_length|. With |buffer| NULL or
// |capacity| too small nothing is written but |*out_length|, and the call
// returns ACCEL_ERROR_OUT_OF_MEMORY only in the latter case: call once with
// NULL to size the buffer.
// ACCEL_ERROR_INVALID_ARGUMENT: NULL |topology| or |out_length|, or an
//   unknown |format|.
// ACCEL_ERROR_OUT_OF_MEMORY: |capacity| < length + 1 (|*out_length| is set),
//   or host allocation failed.
// Thread-safe.
ACCEL_API accel_status_t accel_topology_format(
    const accel_topology_t *topology, accel_topology_format_kind_t format,
    char *buffer, size_t capacity, size_t *out_length);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ACCEL_TOPOLOGY_H_
