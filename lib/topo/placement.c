// Places the runtime's devices with the topology: each device's NUMA node
// (from its PCI bus id, or the node the backend chose for a device with no
// bus id, like the host device) gives the CPUs its backend's threads should
// run on, handed over through the driver's optional device_set_affinity.
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "core/runtime_impl.h"
#include "topo/placement.h"
#include "topo/topology_impl.h"

void accel_topo_place_devices(accel_runtime_t *rt) {
  const char *env = getenv("ACCEL_AFFINITY");
  if (env != NULL && strcmp(env, "0") == 0) {
    return;
  }
  bool any_op = false, any_pci = false;
  for (uint32_t i = 0; i < rt->all_device_count; ++i) {
    any_op = any_op || rt->all_devices[i]->driver->device_set_affinity != NULL;
    any_pci = any_pci || rt->all_devices[i]->info.pci_bus_id[0] != '\0';
  }
  if (!any_op && !any_pci) {
    return;
  }
  accel_topology_options_t opts;
  accel_topology_options_init(&opts);
  // Binding threads only makes sense on the machine we run on, so the
  // ACCEL_TOPOLOGY_XML override (meant for studying other machines) is
  // ignored here; verbs and DRM add nothing to placement.
  opts.flags = ACCEL_TOPOLOGY_LOAD_IGNORE_ENV | ACCEL_TOPOLOGY_LOAD_NO_VERBS |
               ACCEL_TOPOLOGY_LOAD_NO_DRM |
               (any_pci ? 0 : ACCEL_TOPOLOGY_LOAD_NO_IO);
  accel_topology_t *topo = NULL;
  if (accel_topology_load(&opts, &topo) != ACCEL_OK) {
    return;  // placement is an optimization: no topology, no binding
  }
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    CPU_ZERO(&allowed);
  }
  for (uint32_t i = 0; i < rt->all_device_count; ++i) {
    accel_device_t *dev = rt->all_devices[i];
    int32_t node = dev->info.numa_node;
    if (dev->info.pci_bus_id[0] != '\0') {
      int32_t found = -1;
      if (accel_topology_pci_numa_node(topo, dev->info.pci_bus_id, &found) ==
              ACCEL_OK &&
          found >= 0) {
        node = found;
        dev->info.numa_node = found;
      }
    }
    cpu_set_t cpus;
    if (node < 0 || dev->driver->device_set_affinity == NULL ||
        accel_topo_numa_cpuset(topo, node, &cpus) != ACCEL_OK) {
      continue;
    }
    // Only CPUs this process may run on: a cgroup or taskset can exclude
    // some of the node's CPUs, and an empty set cannot be applied.
    CPU_AND(&cpus, &cpus, &allowed);
    if (CPU_COUNT(&cpus) > 0) {
      dev->driver->device_set_affinity(dev->drv, &cpus);
    }
  }
  accel_topology_destroy(topo);
}
