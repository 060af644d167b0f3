// RDMA NICs from libibverbs: node GUID and ports (state, link layer, width,
// speed, MTU, GID 0) of each verbs device, attached to the NIC hwloc found at
// the same PCI bus id. No library, no kernel support (ENOSYS) or no device is
// "none found", recorded as a note.
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accel_config.h"
#include "topo/topology_impl.h"

#if ACCEL_HAVE_IBVERBS

#include <endian.h>
#include <infiniband/verbs.h>

// The PCI bus id behind a verbs device, from its sysfs "device" link.
static bool verbs_bus_id(struct ibv_device *dev, char *out, size_t size) {
  char link[PATH_MAX + 16], target[PATH_MAX];
  snprintf(link, sizeof(link), "%s/device", dev->ibdev_path);
  ssize_t n = readlink(link, target, sizeof(target) - 1);
  if (n <= 0) {
    return false;
  }
  target[n] = '\0';
  const char *base = strrchr(target, '/');
  base = base ? base + 1 : target;
  uint32_t d, b, s, f;
  if (!accel_topo_parse_bus_id(base, &d, &b, &s, &f)) {
    return false;
  }
  snprintf(out, size, "%04x:%02x:%02x.%x", d, b, s, f);
  return true;
}

static uint32_t width_lanes(uint8_t w) {
  switch (w) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 0;
  }
}

static uint32_t lane_speed_mbps(uint8_t s) {
  switch (s) {
    case 1: return 2500;     // SDR
    case 2: return 5000;     // DDR
    case 4: return 10000;    // QDR
    case 8: return 10313;    // FDR10
    case 16: return 14063;   // FDR
    case 32: return 25781;   // EDR
    case 64: return 53125;   // HDR
    case 128: return 106250; // NDR
    default: return 0;
  }
}

static const char *state_name(enum ibv_port_state s) {
  switch (s) {
    case IBV_PORT_DOWN: return "down";
    case IBV_PORT_INIT: return "init";
    case IBV_PORT_ARMED: return "armed";
    case IBV_PORT_ACTIVE: return "active";
    case IBV_PORT_ACTIVE_DEFER: return "active_defer";
    default: return "unknown";
  }
}

static accel_status_t query_nic(struct ibv_device *dev, accel_topo_nic_t *nic,
                                accel_topology_t *t) {
  const char *name = ibv_get_device_name(dev);
  nic->info.rdma = true;
  snprintf(nic->info.name, sizeof(nic->info.name), "%s", name);
  struct ibv_context *ctx = ibv_open_device(dev);
  if (ctx == NULL) {
    return accel_topo_add_note(t, "libibverbs: cannot open %s: %s", name,
                               strerror(errno));
  }
  struct ibv_device_attr attr;
  int rc = ibv_query_device(ctx, &attr);
  if (rc != 0) {
    ibv_close_device(ctx);
    return accel_topo_add_note(t, "libibverbs: cannot query %s: %s", name,
                               strerror(rc));
  }
  uint64_t guid = be64toh(attr.node_guid);
  snprintf(nic->info.node_guid, sizeof(nic->info.node_guid),
           "%04x:%04x:%04x:%04x", (unsigned)(guid >> 48) & 0xffff,
           (unsigned)(guid >> 32) & 0xffff, (unsigned)(guid >> 16) & 0xffff,
           (unsigned)guid & 0xffff);
  nic->info.port_count = 0;
  for (uint8_t port = 1; port <= attr.phys_port_cnt &&
                         nic->info.port_count < ACCEL_TOPO_MAX_PORTS;
       ++port) {
    struct ibv_port_attr pa;
    if (ibv_query_port(ctx, port, &pa) != 0) {
      continue;
    }
    accel_topology_port_info_t *p = &nic->ports[nic->info.port_count++];
    memset(p, 0, sizeof(*p));
    p->struct_size = sizeof(*p);
    p->port_num = port;
    snprintf(p->state, sizeof(p->state), "%s", state_name(pa.state));
    snprintf(p->link_layer, sizeof(p->link_layer), "%s",
             pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet"
                                                      : "InfiniBand");
    p->lid = pa.lid;
    p->width = width_lanes(pa.active_width);
    p->lane_speed_mbps = lane_speed_mbps(pa.active_speed);
    p->mtu_bytes = pa.active_mtu >= IBV_MTU_256 && pa.active_mtu <= IBV_MTU_4096
                       ? 128u << pa.active_mtu
                       : 0;
    union ibv_gid gid;
    if (ibv_query_gid(ctx, port, 0, &gid) == 0) {
      const uint8_t *g = gid.raw;
      snprintf(p->gid, sizeof(p->gid),
               "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:"
               "%02x%02x:%02x%02x",
               g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9],
               g[10], g[11], g[12], g[13], g[14], g[15]);
    }
  }
  ibv_close_device(ctx);
  return ACCEL_OK;
}

accel_status_t accel_topo_enumerate_verbs(accel_topology_t *t) {
  int count = 0;
  errno = 0;
  struct ibv_device **list = ibv_get_device_list(&count);
  if (list == NULL) {
    int e = errno;
    // Say what the errno means here rather than strerror's generic text.
    const char *why = e == ENOSYS   ? "this kernel has no RDMA support"
                      : e == ENOENT ? "no RDMA driver is loaded"
                      : e == EPERM || e == EACCES
                          ? "RDMA devices are not accessible to this user"
                          : "the RDMA device list could not be read";
    return accel_topo_add_note(t,
                               "libibverbs: no RDMA devices: %s "
                               "(ibv_get_device_list failed with errno %d)",
                               why, e);
  }
  accel_status_t st = ACCEL_OK;
  if (count == 0) {
    st = accel_topo_add_note(t, "libibverbs: no RDMA devices");
  }
  for (int i = 0; i < count && st == ACCEL_OK; ++i) {
    char bus_id[32];
    const char *name = ibv_get_device_name(list[i]);
    accel_topo_nic_t *nic = NULL;
    if (verbs_bus_id(list[i], bus_id, sizeof(bus_id))) {
      for (uint32_t j = 0; j < t->nic_count; ++j) {
        if (strcmp(t->nics[j].info.pci_bus_id, bus_id) == 0) {
          nic = &t->nics[j];
        }
      }
    }
    if (nic == NULL) {
      st = accel_topo_add_note(t,
                               "libibverbs: %s is not a PCI NIC that hwloc "
                               "found; not placed",
                               name);
      continue;
    }
    st = query_nic(list[i], nic, t);
  }
  ibv_free_device_list(list);
  if (st == ACCEL_OK) {
    accel_topo_unique_names(t);
  }
  return st;
}

#else  // !ACCEL_HAVE_IBVERBS

accel_status_t accel_topo_enumerate_verbs(accel_topology_t *t) {
  return accel_topo_add_note(t, "libibverbs: not built in; RDMA NICs are "
                                "known only from hwloc");
}

#endif  // ACCEL_HAVE_IBVERBS
