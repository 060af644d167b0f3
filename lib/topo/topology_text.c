// The human forms of a topology: the matrix of `nvidia-smi topo -m` (with
// the endpoints' bus ids, the NUMA nodes and the notes below it) and the tree.
#include <stdio.h>
#include <string.h>

#include "topo/topology_impl.h"

static const char *name_of(const accel_topology_t *t, uint32_t e) {
  return e < t->device_count ? t->devices[e].info.name
                             : t->nics[e - t->device_count].info.name;
}

static const accel_topology_device_info_t *device_of(const accel_topology_t *t,
                                                    uint32_t e) {
  return e < t->device_count ? &t->devices[e].info : NULL;
}

static const accel_topology_nic_info_t *nic_of(const accel_topology_t *t,
                                               uint32_t e) {
  return e < t->device_count ? NULL : &t->nics[e - t->device_count].info;
}

// The width of a matrix column: the longest endpoint name plus two, at least
// six.
static int column_width(const accel_topology_t *t) {
  int w = 6;
  for (uint32_t e = 0; e < t->endpoint_count; ++e) {
    int len = (int)strlen(name_of(t, e)) + 2;
    w = len > w ? len : w;
  }
  return w;
}

// Endpoint |a|'s row: its path to every endpoint, its CPUs and NUMA node.
static void put_matrix_row(const accel_topology_t *t, accel_topo_buf_t *b,
                           int w, uint32_t a) {
  uint32_t n = t->endpoint_count;
  accel_topo_buf_printf(b, "%-*s", w, name_of(t, a));
  for (uint32_t c = 0; c < n; ++c) {
    accel_topo_buf_printf(
        b, "%-*s", w,
        accel_topology_path_name(
            (accel_topology_path_t)t->paths[(size_t)a * n + c]));
  }
  const accel_topology_device_info_t *dev = device_of(t, a);
  const accel_topology_nic_info_t *nic = nic_of(t, a);
  const char *cpus = dev ? dev->cpus : nic->cpus;
  int32_t node = dev ? dev->numa_node : nic->numa_node;
  char node_text[16];
  if (node >= 0) {
    snprintf(node_text, sizeof(node_text), "%d", node);
  } else {
    snprintf(node_text, sizeof(node_text), "N/A");
  }
  accel_topo_buf_printf(b, "%-20s%s\n", cpus[0] ? cpus : "N/A", node_text);
}

static void put_legend(accel_topo_buf_t *b) {
  accel_topo_buf_printf(
      b,
      "\nLegend:\n\n"
      "  X    = Self\n"
      "  SYS  = Connection traversing PCIe as well as the SMP interconnect "
      "between NUMA nodes\n"
      "  NODE = Connection traversing PCIe as well as the interconnect "
      "between PCIe Host Bridges within a NUMA node\n"
      "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge "
      "(typically the CPU)\n"
      "  PXB  = Connection traversing multiple PCIe bridges (without "
      "traversing the PCIe Host Bridge)\n"
      "  PIX  = Connection traversing at most a single PCIe bridge\n");
}

static void put_endpoints(const accel_topology_t *t, accel_topo_buf_t *b,
                          int w) {
  accel_topo_buf_printf(b, "\nEndpoints:\n\n");
  for (uint32_t e = 0; e < t->endpoint_count; ++e) {
    const accel_topology_device_info_t *dev = device_of(t, e);
    const accel_topology_nic_info_t *nic = nic_of(t, e);
    accel_topo_buf_printf(b, "  %-*s%s  %-6s %s\n", w, name_of(t, e),
                          dev ? dev->pci_bus_id : nic->pci_bus_id,
                          dev ? "device" : "nic",
                          dev ? dev->model : nic->model);
  }
}

// The matrix of paths between endpoints, its legend and the endpoints'
// bus ids and models.
static void put_endpoint_matrix(const accel_topology_t *t,
                                accel_topo_buf_t *b) {
  uint32_t n = t->endpoint_count;
  int w = column_width(t);
  if (n == 0) {
    accel_topo_buf_printf(b, "No accelerators or NICs found.\n");
    return;
  }
  accel_topo_buf_printf(b, "%-*s", w, "");
  for (uint32_t e = 0; e < n; ++e) {
    accel_topo_buf_printf(b, "%-*s", w, name_of(t, e));
  }
  accel_topo_buf_printf(b, "%-20s%s\n", "CPU Affinity", "NUMA Affinity");
  for (uint32_t a = 0; a < n; ++a) {
    put_matrix_row(t, b, w, a);
  }
  put_legend(b);
  put_endpoints(t, b, w);
}

static void put_numa_nodes(const accel_topology_t *t, accel_topo_buf_t *b) {
  accel_topo_buf_printf(b, "\nNUMA nodes:\n\n");
  for (uint32_t i = 0; i < t->numa_count; ++i) {
    char cpus[256];
    accel_topo_format_cpu_list(t->numa[i].cpus, t->numa[i].cpu_count, cpus,
                               sizeof(cpus));
    accel_topo_buf_printf(b, "  node %d: %llu MiB, cpus %s, distances",
                          t->numa[i].os_index,
                          (unsigned long long)(t->numa[i].memory_bytes >> 20),
                          cpus[0] ? cpus : "none");
    for (uint32_t j = 0; j < t->numa_count; ++j) {
      accel_topo_buf_printf(b, " %u",
                            t->numa_distances[(size_t)i * t->numa_count + j]);
    }
    accel_topo_buf_printf(b, "%s\n",
                          t->numa_distances_measured ? "" : " (assumed)");
  }
}

void accel_topo_write_matrix(const accel_topology_t *t, accel_topo_buf_t *b) {
  put_endpoint_matrix(t, b);
  put_numa_nodes(t, b);
  if (t->note_count > 0) {
    accel_topo_buf_printf(b, "\nNotes:\n\n");
    for (uint32_t i = 0; i < t->note_count; ++i) {
      accel_topo_buf_printf(b, "  %s\n", t->notes[i]);
    }
  }
}

void accel_topo_write_tree(const accel_topology_t *t, accel_topo_buf_t *b) {
  for (uint32_t i = 0; i < t->tree_line_count; ++i) {
    accel_topo_buf_printf(b, "%s\n", t->tree_lines[i]);
  }
}
