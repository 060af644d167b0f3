// DRM device nodes from libdrm (drmGetDevices2) and accel device nodes from
// /sys/class/accel, attached to the devices hwloc found at the same PCI bus
// id. No /dev/dri, no /dev/accel or no device is "none found", recorded as a
// note.
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accel_config.h"
#include "topo/topology_impl.h"

#if ACCEL_HAVE_DRM
#include <xf86drm.h>
#endif

static accel_topology_device_info_t *find_device(accel_topology_t *t,
                                                 uint32_t d, uint32_t b,
                                                 uint32_t s, uint32_t f) {
  for (uint32_t i = 0; i < t->device_count; ++i) {
    uint32_t d2, b2, s2, f2;
    if (accel_topo_parse_bus_id(t->devices[i].info.pci_bus_id, &d2, &b2, &s2,
                                &f2) &&
        d == d2 && b == b2 && s == s2 && f == f2) {
      return &t->devices[i].info;
    }
  }
  return NULL;
}

#if ACCEL_HAVE_DRM

static accel_status_t enumerate_dri(accel_topology_t *t) {
  int n = drmGetDevices2(0, NULL, 0);
  if (n < 0) {
    // Say what the errno means here rather than strerror's generic text.
    const char *why = -n == ENOENT ? "this machine has no /dev/dri (no GPU "
                                     "display or render driver is loaded)"
                      : -n == EACCES || -n == EPERM
                          ? "/dev/dri is not accessible to this user"
                          : "the DRM device list could not be read";
    return accel_topo_add_note(
        t, "libdrm: no DRM devices: %s (drmGetDevices2 failed with errno %d)",
        why, -n);
  }
  if (n == 0) {
    return accel_topo_add_note(t, "libdrm: no DRM devices");
  }
  drmDevicePtr *devs = calloc((size_t)n, sizeof(*devs));
  if (devs == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "topology: cannot list %d DRM devices", n);
  }
  int got = drmGetDevices2(0, devs, n);
  accel_status_t st = ACCEL_OK;
  for (int i = 0; i < got && st == ACCEL_OK; ++i) {
    drmDevicePtr dev = devs[i];
    const char *primary = (dev->available_nodes & (1 << DRM_NODE_PRIMARY))
                              ? dev->nodes[DRM_NODE_PRIMARY]
                              : NULL;
    const char *render = (dev->available_nodes & (1 << DRM_NODE_RENDER))
                             ? dev->nodes[DRM_NODE_RENDER]
                             : NULL;
    const char *label = primary ? primary : render ? render : "?";
    if (dev->bustype != DRM_BUS_PCI) {
      st = accel_topo_add_note(t,
                               "libdrm: %s is not on PCI (bus type %d); not "
                               "placed",
                               label, dev->bustype);
      continue;
    }
    drmPciBusInfoPtr pci = dev->businfo.pci;
    accel_topology_device_info_t *info =
        find_device(t, pci->domain, pci->bus, pci->dev, pci->func);
    if (info == NULL) {
      st = accel_topo_add_note(t,
                               "libdrm: %s at %04x:%02x:%02x.%x is not a "
                               "device hwloc found; not placed",
                               label, pci->domain, pci->bus, pci->dev,
                               pci->func);
      continue;
    }
    if (primary != NULL) {
      snprintf(info->drm_primary, sizeof(info->drm_primary), "%s", primary);
    }
    if (render != NULL) {
      snprintf(info->drm_render, sizeof(info->drm_render), "%s", render);
    }
  }
  if (got > 0) {
    drmFreeDevices(devs, got);
  }
  free(devs);
  return st;
}

#else

static accel_status_t enumerate_dri(accel_topology_t *t) {
  return accel_topo_add_note(t, "libdrm: not built in; DRM nodes are known "
                                "only from hwloc");
}

#endif  // ACCEL_HAVE_DRM

// /dev/accel/accelN: the kernel's compute-accelerator nodes (no libdrm
// support in the libdrm we build against), found through sysfs.
static accel_status_t enumerate_accel(accel_topology_t *t) {
  DIR *dir = opendir("/sys/class/accel");
  if (dir == NULL) {
    int e = errno;
    return accel_topo_add_note(
        t, "/dev/accel: no accel devices: %s (opening /sys/class/accel failed "
           "with errno %d)",
        e == ENOENT ? "this kernel exposes no compute accelerators (no "
                      "/sys/class/accel: no accel driver is loaded)"
                    : "the kernel's accelerator list could not be read",
        e);
  }
  accel_status_t st = ACCEL_OK;
  uint32_t found = 0;
  struct dirent *ent;
  while ((ent = readdir(dir)) != NULL && st == ACCEL_OK) {
    if (strncmp(ent->d_name, "accel", 5) != 0) {
      continue;
    }
    found++;
    char link[PATH_MAX], target[PATH_MAX];
    snprintf(link, sizeof(link), "/sys/class/accel/%s/device", ent->d_name);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    uint32_t d, b, s, f;
    accel_topology_device_info_t *info = NULL;
    if (n > 0) {
      target[n] = '\0';
      const char *base = strrchr(target, '/');
      base = base ? base + 1 : target;
      if (accel_topo_parse_bus_id(base, &d, &b, &s, &f)) {
        info = find_device(t, d, b, s, f);
      }
    }
    if (info == NULL) {
      st = accel_topo_add_note(t,
                               "/dev/accel: %s is not a PCI device hwloc "
                               "found; not placed",
                               ent->d_name);
      continue;
    }
    snprintf(info->accel_node, sizeof(info->accel_node), "/dev/accel/%s",
             ent->d_name);
  }
  closedir(dir);
  if (st == ACCEL_OK && found == 0) {
    st = accel_topo_add_note(t, "/dev/accel: no accel devices");
  }
  return st;
}

accel_status_t accel_topo_enumerate_drm(accel_topology_t *t) {
  ACCEL_RETURN_IF_ERROR(enumerate_dri(t));
  return enumerate_accel(t);
}
