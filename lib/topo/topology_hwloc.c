// Loads a topology with hwloc (live machine, XML file or synthetic string)
// and turns hwloc's tree into the snapshot: NUMA nodes and their distances,
// the accelerators and NICs found on PCI, the path class and distance of every
// pair, and the tree as text. hwloc's -1/errno results are converted here.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel_config.h"
#include "topo/topology_impl.h"

#if ACCEL_HAVE_HWLOC

#include <hwloc.h>

// Size in human units for the tree ("256 GiB").
static void format_bytes(uint64_t bytes, char *out, size_t size) {
  static const char *const k_units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  uint32_t u = 0;
  double v = (double)bytes;
  while (v >= 1024.0 && u + 1 < sizeof(k_units) / sizeof(k_units[0])) {
    v /= 1024.0;
    ++u;
  }
  if (v == (double)(uint64_t)v) {
    snprintf(out, size, "%llu %s", (unsigned long long)v, k_units[u]);
  } else {
    snprintf(out, size, "%.1f %s", v, k_units[u]);
  }
}

// The OS CPU numbers of |set| as a list "0-7,16-23".
static void format_cpuset(hwloc_const_bitmap_t set, char *out, size_t size) {
  uint32_t cpus[1024];
  uint32_t n = 0;
  int cpu;
  hwloc_bitmap_foreach_begin(cpu, set) {
    if (n < sizeof(cpus) / sizeof(cpus[0])) {
      cpus[n++] = (uint32_t)cpu;
    }
  }
  hwloc_bitmap_foreach_end();
  accel_topo_format_cpu_list(cpus, n, out, size);
}

static void format_bus_id(hwloc_obj_t obj, char *out, size_t size) {
  snprintf(out, size, "%04x:%02x:%02x.%x", obj->attr->pcidev.domain,
           obj->attr->pcidev.bus, obj->attr->pcidev.dev,
           obj->attr->pcidev.func);
}

static bool is_accelerator_class(unsigned class_id) {
  unsigned base = class_id >> 8;
  return base == 0x03 || base == 0x12;  // display (0x0302 3D), processing acc.
}

static bool is_nic_class(unsigned class_id) { return (class_id >> 8) == 0x02; }

static bool is_drm_name(const char *name) {
  return strncmp(name, "card", 4) == 0 || strncmp(name, "renderD", 7) == 0 ||
         strncmp(name, "controlD", 8) == 0;
}

// NUMA node of an I/O object: the one node in its locality, -1 if several.
static int32_t io_numa_node(hwloc_topology_t topo, hwloc_obj_t obj) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, obj);
  if (anc == NULL || anc->nodeset == NULL ||
      hwloc_bitmap_weight(anc->nodeset) != 1) {
    return -1;
  }
  return hwloc_bitmap_first(anc->nodeset);
}

static void io_cpus(hwloc_topology_t topo, hwloc_obj_t obj, char *out,
                    size_t size) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, obj);
  out[0] = '\0';
  if (anc != NULL && anc->cpuset != NULL) {
    format_cpuset(anc->cpuset, out, size);
  }
}

static int compare_pci(const void *a, const void *b) {
  hwloc_obj_t x = *(const hwloc_obj_t *)a;
  hwloc_obj_t y = *(const hwloc_obj_t *)b;
  const struct hwloc_pcidev_attr_s *p = &x->attr->pcidev;
  const struct hwloc_pcidev_attr_s *q = &y->attr->pcidev;
  uint64_t kp = ((uint64_t)p->domain << 16) | ((uint64_t)p->bus << 8) |
                ((uint64_t)p->dev << 3) | p->func;
  uint64_t kq = ((uint64_t)q->domain << 16) | ((uint64_t)q->bus << 8) |
                ((uint64_t)q->dev << 3) | q->func;
  return kp < kq ? -1 : kp > kq;
}

// The OS devices below an accelerator's PCI object that can name it, the
// first of each kind.
typedef struct {
  const char *coproc;  // a coprocessor OS device (CUDA, OpenCL)
  const char *gpu;     // a GPU OS device that is no DRM node (NVML, RSMI)
  const char *card;    // a DRM primary node, "card<n>"
  const char *render;  // a DRM render node, "renderD<n>"
} device_osdevs_t;

static void note_gpu_osdev(const char *name, device_osdevs_t *d) {
  if (strncmp(name, "card", 4) == 0 && d->card == NULL) {
    d->card = name;
  } else if (strncmp(name, "renderD", 7) == 0 && d->render == NULL) {
    d->render = name;
  } else if (!is_drm_name(name) && d->gpu == NULL) {
    d->gpu = name;
  }
}

static void find_device_osdevs(hwloc_obj_t obj, device_osdevs_t *out) {
  *out = (device_osdevs_t){0};
  for (hwloc_obj_t c = obj->io_first_child; c != NULL; c = c->next_sibling) {
    if (c->type != HWLOC_OBJ_OS_DEVICE || c->name == NULL) {
      continue;
    }
    if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC && out->coproc == NULL) {
      out->coproc = c->name;
    } else if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU) {
      note_gpu_osdev(c->name, out);
    }
  }
}

// Names the device after its first OS device in the order coprocessor, GPU,
// DRM primary, DRM render, else "accel<index>"; the DRM nodes are paths
// under /dev/dri only on the live machine.
static void name_device(const device_osdevs_t *d, bool live,
                        accel_topology_device_info_t *info) {
  const char *name = d->coproc ? d->coproc
                     : d->gpu  ? d->gpu
                     : d->card ? d->card
                               : d->render;
  if (name != NULL) {
    snprintf(info->name, sizeof(info->name), "%s", name);
  } else {
    snprintf(info->name, sizeof(info->name), "accel%u", info->index);
  }
  const char *prefix = live ? "/dev/dri/" : "";
  if (d->card != NULL) {
    snprintf(info->drm_primary, sizeof(info->drm_primary), "%s%s", prefix,
             d->card);
  }
  if (d->render != NULL) {
    snprintf(info->drm_render, sizeof(info->drm_render), "%s%s", prefix,
             d->render);
  }
}

static void fill_device(hwloc_topology_t topo, hwloc_obj_t obj, bool live,
                        accel_topology_device_info_t *info) {
  format_bus_id(obj, info->pci_bus_id, sizeof(info->pci_bus_id));
  info->vendor_id = obj->attr->pcidev.vendor_id;
  info->device_id = obj->attr->pcidev.device_id;
  info->class_id = obj->attr->pcidev.class_id;
  info->numa_node = io_numa_node(topo, obj);
  const char *model = hwloc_obj_get_info_by_name(obj, "PCIDevice");
  snprintf(info->model, sizeof(info->model), "%s", model ? model : "");
  io_cpus(topo, obj, info->cpus, sizeof(info->cpus));
  device_osdevs_t osdevs;
  find_device_osdevs(obj, &osdevs);
  name_device(&osdevs, live, info);
}

static const char *port_state_name(long state) {
  switch (state) {
    case 1:
      return "down";
    case 2:
      return "init";
    case 3:
      return "armed";
    case 4:
      return "active";
    case 5:
      return "active_defer";
    default:
      return "unknown";
  }
}

// Ports of an OpenFabrics OS device from hwloc's infos (Port<n>State,
// Port<n>LID, Port<n>GID0, and Port<n>LinkLayer where a file has it).
static void fill_ports_from_infos(hwloc_obj_t osdev, accel_topo_nic_t *nic) {
  for (uint32_t port = 1; port <= 32 && nic->info.port_count <
                                            ACCEL_TOPO_MAX_PORTS;
       ++port) {
    char key[32];
    snprintf(key, sizeof(key), "Port%uState", port);
    const char *state = hwloc_obj_get_info_by_name(osdev, key);
    snprintf(key, sizeof(key), "Port%uLinkLayer", port);
    const char *layer = hwloc_obj_get_info_by_name(osdev, key);
    if (state == NULL && layer == NULL) {
      continue;
    }
    accel_topology_port_info_t *p = &nic->ports[nic->info.port_count++];
    p->struct_size = sizeof(*p);
    p->port_num = port;
    snprintf(p->state, sizeof(p->state), "%s",
             state ? port_state_name(strtol(state, NULL, 0)) : "unknown");
    snprintf(p->link_layer, sizeof(p->link_layer), "%s", layer ? layer : "");
    snprintf(key, sizeof(key), "Port%uLID", port);
    const char *lid = hwloc_obj_get_info_by_name(osdev, key);
    p->lid = lid ? (uint32_t)strtoul(lid, NULL, 0) : 0;
    snprintf(key, sizeof(key), "Port%uGID0", port);
    const char *gid = hwloc_obj_get_info_by_name(osdev, key);
    snprintf(p->gid, sizeof(p->gid), "%s", gid ? gid : "");
  }
}

static void fill_nic(hwloc_topology_t topo, hwloc_obj_t obj,
                     accel_topo_nic_t *nic) {
  accel_topology_nic_info_t *info = &nic->info;
  format_bus_id(obj, info->pci_bus_id, sizeof(info->pci_bus_id));
  info->vendor_id = obj->attr->pcidev.vendor_id;
  info->device_id = obj->attr->pcidev.device_id;
  info->class_id = obj->attr->pcidev.class_id;
  info->numa_node = io_numa_node(topo, obj);
  const char *model = hwloc_obj_get_info_by_name(obj, "PCIDevice");
  snprintf(info->model, sizeof(info->model), "%s", model ? model : "");
  io_cpus(topo, obj, info->cpus, sizeof(info->cpus));
  hwloc_obj_t ofed = NULL, net = NULL;
  for (hwloc_obj_t c = obj->io_first_child; c != NULL; c = c->next_sibling) {
    if (c->type != HWLOC_OBJ_OS_DEVICE || c->name == NULL) {
      continue;
    }
    if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && ofed == NULL) {
      ofed = c;
    } else if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && net == NULL) {
      net = c;
    }
  }
  if (net != NULL) {
    snprintf(info->netdev, sizeof(info->netdev), "%s", net->name);
  }
  if (ofed != NULL) {
    info->rdma = true;
    snprintf(info->name, sizeof(info->name), "%s", ofed->name);
    const char *guid = hwloc_obj_get_info_by_name(ofed, "NodeGUID");
    snprintf(info->node_guid, sizeof(info->node_guid), "%s",
             guid ? guid : "");
    fill_ports_from_infos(ofed, nic);
  } else if (net != NULL) {
    snprintf(info->name, sizeof(info->name), "%s", net->name);
  } else {
    snprintf(info->name, sizeof(info->name), "nic%u", info->index);
  }
}

// The path class and tree distance between two PCI objects, in the manner of
// `nvidia-smi topo -m`: below their lowest common ancestor C, count the PCI
// bridges on each side. C a PCI-to-PCI bridge: one switch (each side at most
// one bridge below C: a downstream port) is PIX, more is PXB. C a host bridge
// is PHB. C a CPU-side object: NODE when both are local to one and the same
// NUMA node, else SYS.
// The lowest common ancestor of |a| and |b| (NULL if none) and how many
// steps up each side climbs to reach it.
static hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b,
                                   uint32_t *out_up_a, uint32_t *out_up_b) {
  uint32_t up_a = 0;
  hwloc_obj_t common = NULL;
  uint32_t up_b = 0;
  for (hwloc_obj_t x = a; x != NULL && common == NULL; x = x->parent, ++up_a) {
    up_b = 0;
    for (hwloc_obj_t y = b; y != NULL; y = y->parent, ++up_b) {
      if (x == y) {
        common = x;
        break;
      }
    }
    if (common != NULL) {
      break;
    }
  }
  *out_up_a = up_a;
  *out_up_b = up_b;
  return common;
}

// The path class below a common ancestor that is a bridge.
static uint8_t bridge_path(hwloc_obj_t common, hwloc_obj_t a, hwloc_obj_t b) {
  if (common->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
    return ACCEL_TOPOLOGY_PATH_PHB;
  }
  uint32_t bridges_a = 0, bridges_b = 0;
  for (hwloc_obj_t x = a->parent; x != common; x = x->parent) {
    bridges_a += x->type == HWLOC_OBJ_BRIDGE;
  }
  for (hwloc_obj_t y = b->parent; y != common; y = y->parent) {
    bridges_b += y->type == HWLOC_OBJ_BRIDGE;
  }
  return bridges_a <= 1 && bridges_b <= 1 ? ACCEL_TOPOLOGY_PATH_PIX
                                          : ACCEL_TOPOLOGY_PATH_PXB;
}

// The path class and tree distance between two PCI objects, in the manner of
// `nvidia-smi topo -m`: below their lowest common ancestor C, count the PCI
// bridges on each side. C a PCI-to-PCI bridge: one switch (each side at most
// one bridge below C: a downstream port) is PIX, more is PXB. C a host bridge
// is PHB. C a CPU-side object: NODE when both are local to one and the same
// NUMA node, else SYS.
static void classify(hwloc_topology_t topo, hwloc_obj_t a, hwloc_obj_t b,
                     uint8_t *out_path, uint32_t *out_distance) {
  if (a == b) {
    *out_path = ACCEL_TOPOLOGY_PATH_X;
    *out_distance = 0;
    return;
  }
  uint32_t up_a, up_b;
  hwloc_obj_t common = common_ancestor(a, b, &up_a, &up_b);
  *out_distance = up_a + up_b;
  if (common == NULL) {
    *out_path = ACCEL_TOPOLOGY_PATH_SYS;
    return;
  }
  if (common->type == HWLOC_OBJ_BRIDGE) {
    *out_path = bridge_path(common, a, b);
    return;
  }
  if (common->type == HWLOC_OBJ_PCI_DEVICE) {
    *out_path = ACCEL_TOPOLOGY_PATH_PIX;
    return;
  }
  int32_t na = io_numa_node(topo, a), nb = io_numa_node(topo, b);
  *out_path = na >= 0 && na == nb ? ACCEL_TOPOLOGY_PATH_NODE
                                  : ACCEL_TOPOLOGY_PATH_SYS;
}

// Fills |dst| with NUMA node |node|: its OS index, memory and CPUs.
static accel_status_t load_numa_node(hwloc_obj_t node, accel_topo_numa_t *dst) {
  memset(dst, 0, sizeof(*dst));
  dst->os_index = (int32_t)node->os_index;
  dst->memory_bytes = node->attr->numanode.local_memory;
  int weight = node->cpuset ? hwloc_bitmap_weight(node->cpuset) : 0;
  dst->cpus = calloc(weight > 0 ? (size_t)weight : 1, sizeof(uint32_t));
  if (dst->cpus == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "topology: cannot allocate the cpus of NUMA node %u",
                       node->os_index);
  }
  if (weight > 0) {
    int cpu;
    hwloc_bitmap_foreach_begin(cpu, node->cpuset) {
      dst->cpus[dst->cpu_count++] = (uint32_t)cpu;
    }
    hwloc_bitmap_foreach_end();
  }
  return ACCEL_OK;
}

// hwloc's NUMA latency matrix: the OS-provided one by name, else any
// latency matrix over NUMA nodes. Returns NULL when there is none.
static struct hwloc_distances_s *get_numa_latencies(hwloc_topology_t topo) {
  unsigned nr = 1;
  struct hwloc_distances_s *dist = NULL;
  if (hwloc_distances_get_by_name(topo, "NUMALatency", &nr, &dist, 0) != 0 ||
      nr == 0) {
    nr = 1;
    if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nr, &dist,
                                    HWLOC_DISTANCES_KIND_MEANS_LATENCY,
                                    0) != 0) {
      nr = 0;
    }
  }
  return nr > 0 ? dist : NULL;
}

// Copies |dist| into |t|'s NUMA distances when it covers every node, mapping
// hwloc's object order onto |t|'s OS index order.
static accel_status_t apply_numa_latencies(const struct hwloc_distances_s *dist,
                                           accel_topology_t *t) {
  uint32_t covered = 0;
  int32_t *pos_of = calloc(dist->nbobjs ? dist->nbobjs : 1, sizeof(*pos_of));
  if (pos_of == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "topology: cannot map NUMA distances");
  }
  for (unsigned i = 0; i < dist->nbobjs; ++i) {
    pos_of[i] = -1;
    for (uint32_t p = 0; p < t->numa_count; ++p) {
      if (t->numa[p].os_index == (int32_t)dist->objs[i]->os_index) {
        pos_of[i] = (int32_t)p;
        covered++;
      }
    }
  }
  if (covered == t->numa_count && dist->nbobjs == t->numa_count) {
    for (unsigned i = 0; i < dist->nbobjs; ++i) {
      for (unsigned j = 0; j < dist->nbobjs; ++j) {
        t->numa_distances[(size_t)pos_of[i] * t->numa_count +
                          (size_t)pos_of[j]] =
            (uint32_t)dist->values[i * dist->nbobjs + j];
      }
    }
    t->numa_distances_measured = true;
  }
  free(pos_of);
  return ACCEL_OK;
}

static accel_status_t load_numa(hwloc_topology_t topo, accel_topology_t *t) {
  int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  ACCEL_RETURN_IF_ERROR(accel_topo_alloc_numa(t, n > 0 ? (uint32_t)n : 0));
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
    // Insert in OS index order.
    uint32_t pos = (uint32_t)i;
    while (pos > 0 && t->numa[pos - 1].os_index > (int32_t)node->os_index) {
      t->numa[pos] = t->numa[pos - 1];
      --pos;
    }
    ACCEL_RETURN_IF_ERROR(load_numa_node(node, &t->numa[pos]));
  }
  // NUMA distances: the OS-provided latency matrix when hwloc has one that
  // covers every node.
  struct hwloc_distances_s *dist = get_numa_latencies(topo);
  if (dist == NULL) {
    return ACCEL_OK;
  }
  accel_status_t st = apply_numa_latencies(dist, t);
  hwloc_distances_release(topo, dist);
  return st;
}

// Finds the object of endpoint |e| (kept by the caller) for the matrix.
static accel_status_t load_endpoints(hwloc_topology_t topo, bool live,
                                     accel_topology_t *t,
                                     hwloc_obj_t **out_objs) {
  uint32_t devices = 0, nics = 0, total = 0;
  for (hwloc_obj_t o = hwloc_get_next_pcidev(topo, NULL); o != NULL;
       o = hwloc_get_next_pcidev(topo, o)) {
    devices += is_accelerator_class(o->attr->pcidev.class_id);
    nics += is_nic_class(o->attr->pcidev.class_id);
  }
  total = devices + nics;
  hwloc_obj_t *objs = calloc(total ? total : 1, sizeof(*objs));
  if (objs == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "topology: cannot allocate %u endpoints", total);
  }
  uint32_t d = 0, n = devices;
  for (hwloc_obj_t o = hwloc_get_next_pcidev(topo, NULL); o != NULL;
       o = hwloc_get_next_pcidev(topo, o)) {
    if (is_accelerator_class(o->attr->pcidev.class_id)) {
      objs[d++] = o;
    } else if (is_nic_class(o->attr->pcidev.class_id)) {
      objs[n++] = o;
    }
  }
  qsort(objs, devices, sizeof(*objs), compare_pci);
  qsort(objs + devices, nics, sizeof(*objs), compare_pci);
  accel_status_t st = accel_topo_alloc_endpoints(t, devices, nics);
  if (st != ACCEL_OK) {
    free(objs);
    return st;
  }
  for (uint32_t i = 0; i < devices; ++i) {
    fill_device(topo, objs[i], live, &t->devices[i].info);
  }
  for (uint32_t i = 0; i < nics; ++i) {
    fill_nic(topo, objs[devices + i], &t->nics[i]);
  }
  for (uint32_t a = 0; a < total; ++a) {
    for (uint32_t b = 0; b < total; ++b) {
      classify(topo, objs[a], objs[b], &t->paths[(size_t)a * total + b],
               &t->distances[(size_t)a * total + b]);
    }
  }
  accel_topo_unique_names(t);
  *out_objs = objs;
  return ACCEL_OK;
}

// ---------------------------------------------------------------------------
// The tree as text.
// ---------------------------------------------------------------------------

typedef struct tree_ctx {
  hwloc_topology_t topo;
  accel_topology_t *t;
  hwloc_obj_t *objs;  // endpoint objects
  accel_status_t status;
} tree_ctx_t;

static bool is_shown_normal(hwloc_obj_t o) {
  switch (o->type) {
    case HWLOC_OBJ_MACHINE:
    case HWLOC_OBJ_PACKAGE:
    case HWLOC_OBJ_DIE:
    case HWLOC_OBJ_GROUP:
      return true;
    case HWLOC_OBJ_L3CACHE:
    case HWLOC_OBJ_L4CACHE:
    case HWLOC_OBJ_L5CACHE:
      return true;
    default:
      return false;
  }
}

// True if some normal descendant of |o| is shown (so that its normal
// children are walked rather than folded into a core count).
static bool has_shown_descendant(hwloc_obj_t o) {
  for (hwloc_obj_t c = o->first_child; c != NULL; c = c->next_sibling) {
    if (is_shown_normal(c) || has_shown_descendant(c) || c->memory_arity > 0) {
      return true;
    }
  }
  return false;
}

static void tree_line(tree_ctx_t *ctx, int depth, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void tree_line(tree_ctx_t *ctx, int depth, const char *fmt, ...) {
  if (ctx->status != ACCEL_OK) {
    return;
  }
  char text[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  ctx->status =
      accel_topo_add_tree_line(ctx->t, "%*s%s", depth * 2, "", text);
}

static void tree_io(tree_ctx_t *ctx, hwloc_obj_t o, int depth) {
  char text[256];
  if (o->type == HWLOC_OBJ_BRIDGE) {
    if (o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
      tree_line(ctx, depth, "HostBridge %04x:[%02x-%02x]",
                o->attr->bridge.downstream.pci.domain,
                o->attr->bridge.downstream.pci.secondary_bus,
                o->attr->bridge.downstream.pci.subordinate_bus);
    } else {
      format_bus_id(o, text, sizeof(text));
      tree_line(ctx, depth, "PCIBridge %s", text);
    }
  } else if (o->type == HWLOC_OBJ_PCI_DEVICE) {
    format_bus_id(o, text, sizeof(text));
    const char *role = "";
    const char *name = "";
    for (uint32_t e = 0; e < ctx->t->endpoint_count; ++e) {
      if (ctx->objs[e] == o) {
        role = e < ctx->t->device_count ? " = device " : " = nic ";
        name = e < ctx->t->device_count
                   ? ctx->t->devices[e].info.name
                   : ctx->t->nics[e - ctx->t->device_count].info.name;
      }
    }
    const char *model = hwloc_obj_get_info_by_name(o, "PCIDevice");
    tree_line(ctx, depth, "PCI %s [%04x:%04x] class %04x%s%s%s%s%s", text,
              o->attr->pcidev.vendor_id, o->attr->pcidev.device_id,
              o->attr->pcidev.class_id, model ? " (" : "", model ? model : "",
              model ? ")" : "", role, name);
  } else if (o->type == HWLOC_OBJ_OS_DEVICE) {
    static const char *const k_kinds[] = {"Block", "GPU",  "Net",
                                          "OpenFabrics", "DMA", "CoProc"};
    unsigned k = (unsigned)o->attr->osdev.type;
    tree_line(ctx, depth, "%s \"%s\"",
              k < sizeof(k_kinds) / sizeof(k_kinds[0]) ? k_kinds[k] : "OSDev",
              o->name ? o->name : "");
    return;
  } else {
    return;
  }
  for (hwloc_obj_t c = o->io_first_child; c != NULL; c = c->next_sibling) {
    tree_io(ctx, c, depth + 1);
  }
}

static void tree_normal(tree_ctx_t *ctx, hwloc_obj_t o, int depth) {
  char cpus[256], size[32];
  int child_depth = depth;
  if (is_shown_normal(o)) {
    format_cpuset(o->cpuset, cpus, sizeof(cpus));
    switch (o->type) {
      case HWLOC_OBJ_MACHINE: {
        const char *host = hwloc_obj_get_info_by_name(o, "HostName");
        format_bytes(o->total_memory, size, sizeof(size));
        tree_line(ctx, depth, "Machine%s%s (%s, cpus %s)", host ? " " : "",
                  host ? host : "", size, cpus);
        break;
      }
      case HWLOC_OBJ_PACKAGE:
        tree_line(ctx, depth, "Package P#%u (cpus %s)", o->os_index, cpus);
        break;
      case HWLOC_OBJ_DIE:
        tree_line(ctx, depth, "Die P#%u (cpus %s)", o->os_index, cpus);
        break;
      case HWLOC_OBJ_GROUP:
        tree_line(ctx, depth, "Group (cpus %s)", cpus);
        break;
      default:
        format_bytes(o->attr->cache.size, size, sizeof(size));
        tree_line(ctx, depth, "L%u (%s, cpus %s)", o->attr->cache.depth, size,
                  cpus);
        break;
    }
    child_depth = depth + 1;
  }
  for (hwloc_obj_t m = o->memory_first_child; m != NULL; m = m->next_sibling) {
    if (m->type == HWLOC_OBJ_NUMANODE) {
      format_cpuset(m->cpuset, cpus, sizeof(cpus));
      format_bytes(m->attr->numanode.local_memory, size, sizeof(size));
      tree_line(ctx, child_depth, "NUMANode P#%u (%s, cpus %s)", m->os_index,
                size, cpus);
    }
  }
  if (o->first_child != NULL) {
    if (has_shown_descendant(o)) {
      for (hwloc_obj_t c = o->first_child; c != NULL; c = c->next_sibling) {
        tree_normal(ctx, c, child_depth);
      }
    } else {
      // Private caches, cores and PUs fold into one line.
      format_cpuset(o->cpuset, cpus, sizeof(cpus));
      int cores = hwloc_get_nbobjs_inside_cpuset_by_type(ctx->topo, o->cpuset,
                                                         HWLOC_OBJ_CORE);
      int pus = hwloc_get_nbobjs_inside_cpuset_by_type(ctx->topo, o->cpuset,
                                                       HWLOC_OBJ_PU);
      tree_line(ctx, child_depth, "%d cores, %d PUs (cpus %s)", cores, pus,
                cpus);
    }
  }
  for (hwloc_obj_t c = o->io_first_child; c != NULL; c = c->next_sibling) {
    tree_io(ctx, c, child_depth);
  }
}

// ---------------------------------------------------------------------------
// Loading.
// ---------------------------------------------------------------------------

static accel_status_t check_xml_file(const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    int e = errno;
    return accel_error(e == ENOENT || e == ENOTDIR ? ACCEL_ERROR_NOT_FOUND
                                                   : ACCEL_ERROR_IO,
                       "topology xml \"%s\": %s", path, strerror(e));
  }
  if (S_ISDIR(sb.st_mode)) {
    return accel_error(ACCEL_ERROR_IO, "topology xml \"%s\": is a directory",
                       path);
  }
  if (access(path, R_OK) != 0) {
    int e = errno;
    return accel_error(ACCEL_ERROR_IO, "topology xml \"%s\": %s", path,
                       strerror(e));
  }
  return ACCEL_OK;
}

static void fill_summary(hwloc_topology_t topo, const char *source,
                         accel_topology_t *t) {
  hwloc_obj_t root = hwloc_get_root_obj(topo);
  const char *host = hwloc_obj_get_info_by_name(root, "HostName");
  snprintf(t->summary.hostname, sizeof(t->summary.hostname), "%s",
           host ? host : "");
  snprintf(t->summary.source, sizeof(t->summary.source), "%s", source);
  int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  t->summary.package_count = n > 0 ? (uint32_t)n : 0;
  n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  t->summary.core_count = n > 0 ? (uint32_t)n : 0;
  n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  t->summary.pu_count = n > 0 ? (uint32_t)n : 0;
  t->summary.memory_bytes = root->total_memory;
}

// The summary's source: "xml:<path>", "synthetic:<description>" or "live".
static void describe_source(const accel_topology_options_t *opts,
                            const char *xml_path, char *out, size_t size) {
  if (xml_path != NULL) {
    snprintf(out, size, "xml:%s", xml_path);
  } else if (opts->synthetic != NULL) {
    snprintf(out, size, "synthetic:%s", opts->synthetic);
  } else {
    snprintf(out, size, "live");
  }
}

// Sets what hwloc discovers (I/O devices unless NO_IO, never the heavy
// plugins) and where from (an XML file, a synthetic description, or this
// machine).
static accel_status_t configure_hwloc(hwloc_topology_t topo,
                                      const accel_topology_options_t *opts,
                                      const char *xml_path) {
  if ((opts->flags & ACCEL_TOPOLOGY_LOAD_NO_IO) == 0) {
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  }
  // hwloc's OpenCL and GL plugins initialize vendor runtimes (an OpenCL ICD
  // may start the GPU driver; GL opens X displays), and its libpciaccess
  // plugin leaks what it allocates: too heavy and too intrusive for a
  // runtime's discovery. hwloc's Linux backend still finds the PCI tree in
  // sysfs, and GPUs are named by their DRM, NVML or CUDA OS devices.
  static const char *const k_skipped_components[] = {"opencl", "gl", "pci"};
  for (size_t i = 0; i < sizeof(k_skipped_components) /
                             sizeof(k_skipped_components[0]);
       ++i) {
    hwloc_topology_set_components(topo,
                                  HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                                  k_skipped_components[i]);
  }
  if (xml_path != NULL) {
    if (hwloc_topology_set_xml(topo, xml_path) != 0) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "topology xml \"%s\": hwloc cannot read it as XML: %s",
                         xml_path, strerror(errno));
    }
  } else if (opts->synthetic != NULL) {
    if (hwloc_topology_set_synthetic(topo, opts->synthetic) != 0) {
      return accel_error(ACCEL_ERROR_FORMAT,
                         "topology synthetic description \"%s\" is malformed "
                         "(expected e.g. \"pack:2 [numa] core:8 pu:2\")",
                         opts->synthetic);
    }
  }
  return ACCEL_OK;
}

// Runs hwloc's discovery; a failure is the file's fault for an XML file and
// the machine's otherwise.
static accel_status_t load_hwloc(hwloc_topology_t topo, const char *xml_path) {
  if (hwloc_topology_load(topo) == 0) {
    return ACCEL_OK;
  }
  int e = errno;
  if (xml_path != NULL) {
    return accel_error(ACCEL_ERROR_FORMAT,
                       "topology xml \"%s\": not a valid hwloc topology "
                       "(hwloc load failed: %s)",
                       xml_path, strerror(e));
  }
  return accel_error(ACCEL_ERROR_UNAVAILABLE,
                     "topology: hwloc cannot discover this machine: %s",
                     strerror(e));
}

// The note that says what this source cannot tell, if any.
static accel_status_t add_source_note(const accel_topology_options_t *opts,
                                      const char *xml_path,
                                      accel_topology_t *t) {
  if ((opts->flags & ACCEL_TOPOLOGY_LOAD_NO_IO) != 0) {
    return accel_topo_add_note(t, "pci: not discovered (load flag NO_IO)");
  }
  if (opts->synthetic != NULL && xml_path == NULL) {
    return accel_topo_add_note(t, "pci: a synthetic topology has no I/O "
                                  "devices");
  }
  if (xml_path != NULL) {
    return accel_topo_add_note(
        t, "libibverbs, libdrm: not queried (the topology comes from a file; "
           "its OpenFabrics and GPU OS devices name the NICs and devices)");
  }
  return ACCEL_OK;
}

accel_status_t accel_topo_load_hwloc(const accel_topology_options_t *opts,
                                     const char *xml_path,
                                     accel_topology_t *t) {
  char source[192];
  if (xml_path != NULL) {
    ACCEL_RETURN_IF_ERROR(check_xml_file(xml_path));
  }
  describe_source(opts, xml_path, source, sizeof(source));
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "topology: hwloc_topology_init failed: %s",
                       strerror(errno));
  }
  hwloc_obj_t *objs = NULL;
  accel_status_t st = configure_hwloc(topo, opts, xml_path);
  if (st != ACCEL_OK) {
    goto err_destroy_hwloc;
  }
  st = load_hwloc(topo, xml_path);
  if (st != ACCEL_OK) {
    goto err_destroy_hwloc;
  }
  fill_summary(topo, source, t);
  st = load_numa(topo, t);
  if (st != ACCEL_OK) {
    goto err_destroy_hwloc;
  }
  st = load_endpoints(topo, xml_path == NULL && opts->synthetic == NULL, t,
                      &objs);
  if (st != ACCEL_OK) {
    goto err_destroy_hwloc;
  }
  tree_ctx_t ctx = {.topo = topo, .t = t, .objs = objs, .status = ACCEL_OK};
  tree_normal(&ctx, hwloc_get_root_obj(topo), 0);
  st = ctx.status;
  if (st != ACCEL_OK) {
    goto err_free_objs;
  }
  st = add_source_note(opts, xml_path, t);
  if (st != ACCEL_OK) {
    goto err_free_objs;
  }
  free(objs);
  hwloc_topology_destroy(topo);
  return ACCEL_OK;

err_free_objs:
  free(objs);
err_destroy_hwloc:
  hwloc_topology_destroy(topo);
  return st;
}

#else  // !ACCEL_HAVE_HWLOC

accel_status_t accel_topo_load_hwloc(const accel_topology_options_t *opts,
                                     const char *xml_path,
                                     accel_topology_t *t) {
  return accel_error(ACCEL_ERROR_UNSUPPORTED,
                     "topology: accel was built without hwloc; only "
                     "accel_topology_deserialize is available");
}

#endif  // ACCEL_HAVE_HWLOC
