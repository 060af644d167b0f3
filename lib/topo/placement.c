// Places the runtime's devices with the topology: each device's NUMA node
// (from its PCI bus id, or the node the backend chose for a device with no
// bus id, like the host device) gives the CPUs its backend's threads should
// run on, handed over through the driver's optional device_set_affinity.
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "accel_config.h"
#include "core/runtime_impl.h"
#include "core/driver_device.h"
#include "topo/placement.h"
#include "topo/topology_impl.h"

#if ACCEL_HAVE_NUMA
#include <numa.h>
#endif

// The CPUs of NUMA node |node| on this machine from libnuma (sysfs), without
// building a whole topology: a runtime whose devices have no PCI bus id (the
// host device) is placed in tens of microseconds instead of the milliseconds
// an hwloc discovery takes. Returns false when libnuma cannot tell.
static bool live_node_cpus(int32_t node, cpu_set_t *out) {
#if ACCEL_HAVE_NUMA
  if (numa_available() < 0) {
    return false;
  }
  struct bitmask *mask = numa_allocate_cpumask();
  if (mask == NULL) {
    return false;
  }
  bool ok = numa_node_to_cpus(node, mask) == 0;
  CPU_ZERO(out);
  for (unsigned c = 0; ok && c < mask->size && c < CPU_SETSIZE; ++c) {
    if (numa_bitmask_isbitset(mask, c)) {
      CPU_SET(c, out);
    }
  }
  numa_free_cpumask(mask);
  return ok;
#else
  (void)node;
  (void)out;
  return false;
#endif
}

// Whether placement has anything to do: some backend takes an affinity, or
// some device has a PCI bus id whose NUMA node the topology can tell.
static void scan_devices(const accel_runtime_t *rt, bool *out_any_op,
                         bool *out_any_pci) {
  bool any_op = false, any_pci = false;
  for (uint32_t i = 0; i < rt->all_device_count; ++i) {
    any_op = any_op || rt->all_devices[i]->driver->device->set_affinity != NULL;
    any_pci = any_pci || rt->all_devices[i]->info.pci_bus_id[0] != '\0';
  }
  *out_any_op = any_op;
  *out_any_pci = any_pci;
}

// This machine's topology with its PCI tree, or NULL when it cannot be loaded.
static accel_topology_t *load_pci_topology(void) {
  accel_topology_options_t opts;
  accel_topology_options_init(&opts);
  // Binding threads only makes sense on the machine we run on, so the
  // ACCEL_TOPOLOGY_XML override (meant for studying other machines) is
  // ignored here; verbs and DRM add nothing to placement.
  opts.flags = ACCEL_TOPOLOGY_LOAD_IGNORE_ENV | ACCEL_TOPOLOGY_LOAD_NO_VERBS |
               ACCEL_TOPOLOGY_LOAD_NO_DRM;
  accel_topology_t *topo = NULL;
  if (accel_topology_load(&opts, &topo) != ACCEL_OK) {
    return NULL;  // placement is an optimization: PCI devices stay unplaced
  }
  return topo;
}

// The NUMA node of |dev|: the topology's node for its PCI bus id (stored in
// its info), else the node its backend chose.
static int32_t device_node(accel_device_t *dev, const accel_topology_t *topo) {
  int32_t node = dev->info.numa_node;
  if (topo != NULL && dev->info.pci_bus_id[0] != '\0') {
    int32_t found = -1;
    if (accel_topology_pci_numa_node(topo, dev->info.pci_bus_id, &found) ==
            ACCEL_OK &&
        found >= 0) {
      node = found;
      dev->info.numa_node = found;
    }
  }
  return node;
}

// The CPUs of NUMA node |node|, from |*topo| when there is one, else from
// libnuma, else from a CPU-only topology loaded into |*topo| (kept for the
// next devices). Returns false when nothing can tell.
static bool node_cpus(accel_topology_t **topo, int32_t node, cpu_set_t *out) {
  bool known = *topo != NULL
                   ? accel_topo_numa_cpuset(*topo, node, out) == ACCEL_OK
                   : live_node_cpus(node, out);
  if (!known && *topo == NULL) {
    // No libnuma: ask hwloc for the CPUs and memory only.
    accel_topology_options_t opts;
    accel_topology_options_init(&opts);
    opts.flags = ACCEL_TOPOLOGY_LOAD_IGNORE_ENV | ACCEL_TOPOLOGY_LOAD_NO_IO;
    if (accel_topology_load(&opts, topo) == ACCEL_OK) {
      known = accel_topo_numa_cpuset(*topo, node, out) == ACCEL_OK;
    } else {
      *topo = NULL;
    }
  }
  return known;
}

// Sets |dev|'s NUMA node from the topology and hands its backend that node's
// CPUs within |allowed|.
static void place_device(accel_device_t *dev, accel_topology_t **topo,
                         const cpu_set_t *allowed) {
  int32_t node = device_node(dev, *topo);
  cpu_set_t cpus;
  if (node < 0 || dev->driver->device->set_affinity == NULL) {
    return;
  }
  if (!node_cpus(topo, node, &cpus)) {
    return;
  }
  // Only CPUs this process may run on: a cgroup or taskset can exclude
  // some of the node's CPUs, and an empty set cannot be applied.
  CPU_AND(&cpus, &cpus, allowed);
  if (CPU_COUNT(&cpus) > 0) {
    dev->driver->device->set_affinity(dev->drv, &cpus);
  }
}

void accel_topo_place_devices(accel_runtime_t *rt) {
  const char *env = getenv("ACCEL_AFFINITY");
  if (env != NULL && strcmp(env, "0") == 0) {
    return;
  }
  bool any_op, any_pci;
  scan_devices(rt, &any_op, &any_pci);
  if (!any_op && !any_pci) {
    return;
  }
  accel_topology_t *topo = any_pci ? load_pci_topology() : NULL;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    CPU_ZERO(&allowed);
  }
  for (uint32_t i = 0; i < rt->all_device_count; ++i) {
    place_device(rt->all_devices[i], &topo, &allowed);
  }
  accel_topology_destroy(topo);
}
