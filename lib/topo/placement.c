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

void accel_topo_place_devices(accel_runtime_t *rt) {
  const char *env = getenv("ACCEL_AFFINITY");
  if (env != NULL && strcmp(env, "0") == 0) {
    return;
  }
  bool any_op = false, any_pci = false;
  for (uint32_t i = 0; i < rt->all_device_count; ++i) {
    any_op = any_op || rt->all_devices[i]->driver->device->set_affinity != NULL;
    any_pci = any_pci || rt->all_devices[i]->info.pci_bus_id[0] != '\0';
  }
  if (!any_op && !any_pci) {
    return;
  }
  accel_topology_t *topo = NULL;
  if (any_pci) {
    accel_topology_options_t opts;
    accel_topology_options_init(&opts);
    // Binding threads only makes sense on the machine we run on, so the
    // ACCEL_TOPOLOGY_XML override (meant for studying other machines) is
    // ignored here; verbs and DRM add nothing to placement.
    opts.flags = ACCEL_TOPOLOGY_LOAD_IGNORE_ENV |
                 ACCEL_TOPOLOGY_LOAD_NO_VERBS | ACCEL_TOPOLOGY_LOAD_NO_DRM;
    if (accel_topology_load(&opts, &topo) != ACCEL_OK) {
      topo = NULL;  // placement is an optimization: PCI devices stay unplaced
    }
  }
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    CPU_ZERO(&allowed);
  }
  for (uint32_t i = 0; i < rt->all_device_count; ++i) {
    accel_device_t *dev = rt->all_devices[i];
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
    cpu_set_t cpus;
    if (node < 0 || dev->driver->device->set_affinity == NULL) {
      continue;
    }
    bool known = topo != NULL ? accel_topo_numa_cpuset(topo, node, &cpus) ==
                                    ACCEL_OK
                              : live_node_cpus(node, &cpus);
    if (!known && topo == NULL) {
      // No libnuma: ask hwloc for the CPUs and memory only.
      accel_topology_options_t opts;
      accel_topology_options_init(&opts);
      opts.flags = ACCEL_TOPOLOGY_LOAD_IGNORE_ENV | ACCEL_TOPOLOGY_LOAD_NO_IO;
      if (accel_topology_load(&opts, &topo) == ACCEL_OK) {
        known = accel_topo_numa_cpuset(topo, node, &cpus) == ACCEL_OK;
      } else {
        topo = NULL;
      }
    }
    if (!known) {
      continue;
    }
    // Only CPUs this process may run on: a cgroup or taskset can exclude
    // some of the node's CPUs, and an empty set cannot be applied.
    CPU_AND(&cpus, &cpus, &allowed);
    if (CPU_COUNT(&cpus) > 0) {
      dev->driver->device->set_affinity(dev->drv, &cpus);
    }
  }
  accel_topology_destroy(topo);
}
