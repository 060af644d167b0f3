// Device placement: the runtime's use of the topology.
#ifndef ACCEL_TOPO_PLACEMENT_H_
#define ACCEL_TOPO_PLACEMENT_H_

#include "accel/runtime.h"

// Loads this machine's topology (CPUs and NUMA nodes; the PCI tree only when
// some device has a PCI bus id), sets each PCI device's numa_node from it, and
// hands every device whose backend implements device_set_affinity the CPUs of
// its NUMA node (limited to the CPUs this process may use). Best effort: when
// no topology can be loaded nothing changes. ACCEL_AFFINITY=0 turns it off.
// Called by accel_runtime_create after the devices are opened, before any
// queue exists.
void accel_topo_place_devices(accel_runtime_t *rt);

#endif  // ACCEL_TOPO_PLACEMENT_H_
