// The human forms of a topology: the matrix of `nvidia-smi topo -m` (with
// the endpoints' bus ids, the NUMA nodes and the notes below it) and the tree.
#include <stdio.h>
#include <string.h>

#include "topo/topology_impl.h"

static const char *name_of(const accel_topology_t *t, uint32_t e) {
  return e < t->device_count ? t->devices[e].info.name
                             : t->nics[e - t->device_count].info.name;
}

void accel_topo_write_matrix(const accel_topology_t *t, accel_topo_buf_t *b) {
  uint32_t n = t->endpoint_count;
  int w = 6;
  for (uint32_t e = 0; e < n; ++e) {
    int len = (int)strlen(name_of(t, e)) + 2;
    w = len > w ? len : w;
  }
  if (n == 0) {
    accel_topo_buf_printf(b, "No accelerators or NICs found.\n");
  } else {
    accel_topo_buf_printf(b, "%-*s", w, "");
    for (uint32_t e = 0; e < n; ++e) {
      accel_topo_buf_printf(b, "%-*s", w, name_of(t, e));
    }
    accel_topo_buf_printf(b, "%-20s%s\n", "CPU Affinity", "NUMA Affinity");
    for (uint32_t a = 0; a < n; ++a) {
      accel_topo_buf_printf(b, "%-*s", w, name_of(t, a));
      for (uint32_t c = 0; c < n; ++c) {
        accel_topo_buf_printf(
            b, "%-*s", w,
            accel_topology_path_name(
                (accel_topology_path_t)t->paths[(size_t)a * n + c]));
      }
      const char *cpus = a < t->device_count
                             ? t->devices[a].info.cpus
                             : t->nics[a - t->device_count].info.cpus;
      int32_t node = a < t->device_count
                         ? t->devices[a].info.numa_node
                         : t->nics[a - t->device_count].info.numa_node;
      char node_text[16];
      if (node >= 0) {
        snprintf(node_text, sizeof(node_text), "%d", node);
      } else {
        snprintf(node_text, sizeof(node_text), "N/A");
      }
      accel_topo_buf_printf(b, "%-20s%s\n", cpus[0] ? cpus : "N/A",
                            node_text);
    }
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
        "  PIX  = Connection traversing at most a single PCIe bridge\n"
        "\nEndpoints:\n\n");
    for (uint32_t e = 0; e < n; ++e) {
      const char *bus = e < t->device_count
                            ? t->devices[e].info.pci_bus_id
                            : t->nics[e - t->device_count].info.pci_bus_id;
      const char *model = e < t->device_count
                              ? t->devices[e].info.model
                              : t->nics[e - t->device_count].info.model;
      accel_topo_buf_printf(b, "  %-*s%s  %-6s %s\n", w, name_of(t, e), bus,
                            e < t->device_count ? "device" : "nic", model);
    }
  }
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
