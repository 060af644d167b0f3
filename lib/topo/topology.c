// Public entry points of the topology: argument checks, the loaders' common
// frame, and the queries (lookups in the snapshot).
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel_config.h"
#include "topo/topology_impl.h"

static const char *const k_path_names[ACCEL_TOPOLOGY_PATH_COUNT] = {
    [ACCEL_TOPOLOGY_PATH_X] = "X",       [ACCEL_TOPOLOGY_PATH_PIX] = "PIX",
    [ACCEL_TOPOLOGY_PATH_PXB] = "PXB",   [ACCEL_TOPOLOGY_PATH_PHB] = "PHB",
    [ACCEL_TOPOLOGY_PATH_NODE] = "NODE", [ACCEL_TOPOLOGY_PATH_SYS] = "SYS",
};

const char *accel_topology_path_name(accel_topology_path_t path) {
  if ((unsigned)path >= ACCEL_TOPOLOGY_PATH_COUNT) {
    return "?";
  }
  return k_path_names[path];
}

// ---------------------------------------------------------------------------
// Building blocks shared by the loaders.
// ---------------------------------------------------------------------------

accel_status_t accel_topo_alloc_numa(accel_topology_t *t, uint32_t count) {
  t->numa = calloc(count ? count : 1, sizeof(*t->numa));
  t->numa_distances =
      calloc(count ? (size_t)count * count : 1, sizeof(*t->numa_distances));
  if (t->numa == NULL || t->numa_distances == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "topology: cannot allocate %u NUMA nodes", count);
  }
  t->numa_count = count;
  return ACCEL_OK;
}

accel_status_t accel_topo_alloc_endpoints(accel_topology_t *t,
                                          uint32_t device_count,
                                          uint32_t nic_count) {
  size_t n = (size_t)device_count + nic_count;
  t->devices = calloc(device_count ? device_count : 1, sizeof(*t->devices));
  t->nics = calloc(nic_count ? nic_count : 1, sizeof(*t->nics));
  t->paths = calloc(n ? n * n : 1, sizeof(*t->paths));
  t->distances = calloc(n ? n * n : 1, sizeof(*t->distances));
  if (t->devices == NULL || t->nics == NULL || t->paths == NULL ||
      t->distances == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "topology: cannot allocate %u devices and %u NICs",
                       device_count, nic_count);
  }
  t->device_count = device_count;
  t->nic_count = nic_count;
  t->endpoint_count = (uint32_t)n;
  for (uint32_t i = 0; i < device_count; ++i) {
    t->devices[i].info.struct_size = sizeof(t->devices[i].info);
    t->devices[i].info.index = i;
    t->devices[i].info.numa_node = -1;
  }
  for (uint32_t i = 0; i < nic_count; ++i) {
    t->nics[i].info.struct_size = sizeof(t->nics[i].info);
    t->nics[i].info.index = i;
    t->nics[i].info.numa_node = -1;
  }
  return ACCEL_OK;
}

static accel_status_t append_line(char ***lines, uint32_t *count,
                                  const char *what, const char *fmt,
                                  va_list ap) {
  char text[1024];
  vsnprintf(text, sizeof(text), fmt, ap);
  char **grown = realloc(*lines, (*count + 1) * sizeof(*grown));
  if (grown == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "topology: cannot add a %s",
                       what);
  }
  *lines = grown;
  grown[*count] = strdup(text);
  if (grown[*count] == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY, "topology: cannot add a %s",
                       what);
  }
  (*count)++;
  return ACCEL_OK;
}

accel_status_t accel_topo_add_note(accel_topology_t *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  accel_status_t st = append_line(&t->notes, &t->note_count, "note", fmt, ap);
  va_end(ap);
  return st;
}

accel_status_t accel_topo_add_tree_line(accel_topology_t *t, const char *fmt,
                                        ...) {
  va_list ap;
  va_start(ap, fmt);
  accel_status_t st =
      append_line(&t->tree_lines, &t->tree_line_count, "tree line", fmt, ap);
  va_end(ap);
  return st;
}

void accel_topo_free(accel_topology_t *t) {
  if (t == NULL) {
    return;
  }
  for (uint32_t i = 0; i < t->numa_count; ++i) {
    free(t->numa[i].cpus);
  }
  free(t->numa);
  free(t->numa_distances);
  free(t->devices);
  free(t->nics);
  free(t->paths);
  free(t->distances);
  for (uint32_t i = 0; i < t->note_count; ++i) {
    free(t->notes[i]);
  }
  free(t->notes);
  for (uint32_t i = 0; i < t->tree_line_count; ++i) {
    free(t->tree_lines[i]);
  }
  free(t->tree_lines);
  free(t);
}

accel_status_t accel_topo_finish(accel_topology_t *t) {
  t->summary.struct_size = sizeof(t->summary);
  t->summary.numa_node_count = t->numa_count;
  t->summary.device_count = t->device_count;
  t->summary.nic_count = t->nic_count;
  t->summary.note_count = t->note_count;
  if (!t->numa_distances_measured) {
    for (uint32_t i = 0; i < t->numa_count; ++i) {
      for (uint32_t j = 0; j < t->numa_count; ++j) {
        t->numa_distances[i * t->numa_count + j] = i == j ? 10 : 20;
      }
    }
  }
  return ACCEL_OK;
}

const accel_topo_numa_t *accel_topo_find_numa(const accel_topology_t *t,
                                              int32_t os_index) {
  for (uint32_t i = 0; i < t->numa_count; ++i) {
    if (t->numa[i].os_index == os_index) {
      return &t->numa[i];
    }
  }
  return NULL;
}

static char *endpoint_name(accel_topology_t *t, uint32_t e) {
  return e < t->device_count ? t->devices[e].info.name
                             : t->nics[e - t->device_count].info.name;
}

static const char *endpoint_bus_id(const accel_topology_t *t, uint32_t e) {
  return e < t->device_count ? t->devices[e].info.pci_bus_id
                             : t->nics[e - t->device_count].info.pci_bus_id;
}

void accel_topo_unique_names(accel_topology_t *t) {
  for (uint32_t i = 1; i < t->endpoint_count; ++i) {
    for (uint32_t j = 0; j < i; ++j) {
      if (strcmp(endpoint_name(t, i), endpoint_name(t, j)) == 0) {
        char renamed[64];
        snprintf(renamed, sizeof(renamed), "%.30s-%s", endpoint_name(t, i),
                 endpoint_bus_id(t, i));
        snprintf(endpoint_name(t, i), 64, "%s", renamed);
        break;
      }
    }
  }
}

bool accel_topo_parse_bus_id(const char *text, uint32_t *out_domain,
                             uint32_t *out_bus, uint32_t *out_dev,
                             uint32_t *out_func) {
  unsigned domain = 0, bus = 0, dev = 0, func = 0;
  int consumed = 0;
  if (sscanf(text, "%x:%x:%x.%x%n", &domain, &bus, &dev, &func, &consumed) ==
          4 &&
      text[consumed] == '\0') {
  } else if (sscanf(text, "%x:%x.%x%n", &bus, &dev, &func, &consumed) == 3 &&
             text[consumed] == '\0') {
    domain = 0;
  } else {
    return false;
  }
  if (bus > 0xff || dev > 0x1f || func > 7) {
    return false;
  }
  *out_domain = domain;
  *out_bus = bus;
  *out_dev = dev;
  *out_func = func;
  return true;
}

void accel_topo_format_cpu_list(const uint32_t *cpus, uint32_t count,
                                char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (uint32_t i = 0; i < count;) {
    uint32_t j = i;
    while (j + 1 < count && cpus[j + 1] == cpus[j] + 1) {
      ++j;
    }
    int n = j == i ? snprintf(out + used, size - used, "%s%u",
                              used ? "," : "", cpus[i])
                   : snprintf(out + used, size - used, "%s%u-%u",
                              used ? "," : "", cpus[i], cpus[j]);
    if (n < 0 || (size_t)n >= size - used) {
      // Cut at the last whole entry so that a reader never sees half a
      // number.
      out[used] = '\0';
      return;
    }
    used += (size_t)n;
    i = j + 1;
  }
}

accel_status_t accel_topo_numa_cpuset(const accel_topology_t *t,
                                      int32_t numa_node, cpu_set_t *out) {
  const accel_topo_numa_t *node = accel_topo_find_numa(t, numa_node);
  if (node == NULL) {
    return accel_error(ACCEL_ERROR_NOT_FOUND,
                       "topology: no NUMA node %d (there are %u)", numa_node,
                       t->numa_count);
  }
  CPU_ZERO(out);
  for (uint32_t i = 0; i < node->cpu_count; ++i) {
    if (node->cpus[i] < CPU_SETSIZE) {
      CPU_SET(node->cpus[i], out);
    }
  }
  return ACCEL_OK;
}

// ---------------------------------------------------------------------------
// Public entry points.
// ---------------------------------------------------------------------------

void accel_topology_options_init(accel_topology_options_t *opts) {
  if (opts != NULL) {
    memset(opts, 0, sizeof(*opts));
    opts->struct_size = sizeof(*opts);
  }
}

#define ACCEL_TOPOLOGY_LOAD_ALL_FLAGS                                     \
  (ACCEL_TOPOLOGY_LOAD_IGNORE_ENV | ACCEL_TOPOLOGY_LOAD_NO_IO |           \
   ACCEL_TOPOLOGY_LOAD_NO_VERBS | ACCEL_TOPOLOGY_LOAD_NO_DRM)

// The end of both constructors: derives the summary and hands |t| out when
// |st| (how filling it went) and that succeed, else frees it.
static accel_status_t finish_or_free(accel_topology_t *t, accel_status_t st,
                                     accel_topology_t **out_topology) {
  if (st == ACCEL_OK) {
    st = accel_topo_finish(t);
  }
  if (st != ACCEL_OK) {
    accel_topo_free(t);
    return st;
  }
  *out_topology = t;
  return ACCEL_OK;
}

// Copies the caller's options into |out| (defaults for fields an older
// caller's struct lacks) and checks them.
static accel_status_t read_load_options(const accel_topology_options_t *opts,
                                        accel_topology_options_t *out) {
  accel_topology_options_init(out);
  if (opts != NULL) {
    if (opts->struct_size < offsetof(accel_topology_options_t, synthetic) +
                                sizeof(opts->synthetic)) {
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "topology options: struct_size %u is too small (use "
                         "accel_topology_options_init)",
                         opts->struct_size);
    }
    size_t n = opts->struct_size < sizeof(*out) ? opts->struct_size
                                                : sizeof(*out);
    memcpy(out, opts, n);
    out->struct_size = sizeof(*out);
  }
  if ((out->flags &
       ~(accel_topology_load_flags_t)ACCEL_TOPOLOGY_LOAD_ALL_FLAGS) != 0) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "topology options: unknown flags 0x%x",
                       out->flags & ~(accel_topology_load_flags_t)
                                        ACCEL_TOPOLOGY_LOAD_ALL_FLAGS);
  }
  if (out->xml_path != NULL && out->synthetic != NULL) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "topology options: both xml_path (\"%s\") and "
                       "synthetic (\"%s\") are set; choose one",
                       out->xml_path, out->synthetic);
  }
  return ACCEL_OK;
}

// The XML file to load: ACCEL_TOPOLOGY_XML unless IGNORE_ENV (it then also
// replaces a synthetic description), else the options' own.
static const char *resolve_xml_path(accel_topology_options_t *o) {
  const char *xml_path = o->xml_path;
  if (!(o->flags & ACCEL_TOPOLOGY_LOAD_IGNORE_ENV)) {
    const char *env = getenv("ACCEL_TOPOLOGY_XML");
    if (env != NULL && env[0] != '\0') {
      xml_path = env;
      o->synthetic = NULL;
    }
  }
  return xml_path;
}

// Adds what hwloc does not know about the live machine's I/O devices: the
// verbs ports of the NICs and the DRM nodes of the devices.
static accel_status_t enumerate_live_io(const accel_topology_options_t *o,
                                        accel_topology_t *t) {
  accel_status_t st = ACCEL_OK;
  if (o->flags & ACCEL_TOPOLOGY_LOAD_NO_IO) {
    return ACCEL_OK;
  }
  if (!(o->flags & ACCEL_TOPOLOGY_LOAD_NO_VERBS)) {
    st = accel_topo_enumerate_verbs(t);
  }
  if (st == ACCEL_OK && !(o->flags & ACCEL_TOPOLOGY_LOAD_NO_DRM)) {
    st = accel_topo_enumerate_drm(t);
  }
  return st;
}

accel_status_t accel_topology_load(const accel_topology_options_t *opts,
                                   accel_topology_t **out_topology) {
  ACCEL_CHECK_ARG(out_topology != NULL, "out_topology (NULL)");
  accel_topology_options_t o;
  ACCEL_RETURN_IF_ERROR(read_load_options(opts, &o));
  const char *xml_path = resolve_xml_path(&o);
  accel_topology_t *t = calloc(1, sizeof(*t));
  if (t == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "topology: cannot allocate %zu bytes", sizeof(*t));
  }
  accel_status_t st = accel_topo_load_hwloc(&o, xml_path, t);
  bool live = xml_path == NULL && o.synthetic == NULL;
  if (st == ACCEL_OK && live) {
    st = enumerate_live_io(&o, t);
  }
  return finish_or_free(t, st, out_topology);
}

accel_status_t accel_topology_deserialize(const char *json, size_t size,
                                          accel_topology_t **out_topology) {
  ACCEL_CHECK_ARG(json != NULL, "json (NULL)");
  ACCEL_CHECK_ARG(out_topology != NULL, "out_topology (NULL)");
  accel_topology_t *t = calloc(1, sizeof(*t));
  if (t == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "topology: cannot allocate %zu bytes", sizeof(*t));
  }
  accel_status_t st = accel_topo_parse_json(json, size, t);
  if (st == ACCEL_OK) {
    snprintf(t->summary.source, sizeof(t->summary.source), "serialized");
  }
  return finish_or_free(t, st, out_topology);
}

void accel_topology_destroy(accel_topology_t *topology) {
  accel_topo_free(topology);
}

// Copies |src| (a full-size struct) into the caller's |dst| of |dst_size|
// bytes, keeping the caller's struct_size.
static void copy_sized(void *dst, const void *src, size_t src_size) {
  uint32_t dst_size = *(const uint32_t *)dst;
  size_t n = dst_size < src_size ? dst_size : src_size;
  memcpy((char *)dst + sizeof(uint32_t), (const char *)src + sizeof(uint32_t),
         n - sizeof(uint32_t));
}

accel_status_t accel_topology_summary(const accel_topology_t *topology,
                                      accel_topology_summary_t *out_summary) {
  ACCEL_CHECK_ARG(topology != NULL, "topology (NULL)");
  ACCEL_CHECK_ARG(out_summary != NULL, "out_summary (NULL)");
  if (out_summary->struct_size < offsetof(accel_topology_summary_t, source)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "topology summary: struct_size %u is too small",
                       out_summary->struct_size);
  }
  copy_sized(out_summary, &topology->summary, sizeof(topology->summary));
  return ACCEL_OK;
}

accel_status_t accel_topology_note(const accel_topology_t *topology,
                                   uint32_t index, const char **out_note) {
  ACCEL_CHECK_ARG(topology != NULL, "topology (NULL)");
  ACCEL_CHECK_ARG(out_note != NULL, "out_note (NULL)");
  if (index >= topology->note_count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "topology: note %u out of range (there are %u)", index,
                       topology->note_count);
  }
  *out_note = topology->notes[index];
  return ACCEL_OK;
}

accel_status_t accel_topology_device_info(
    const accel_topology_t *topology, uint32_t index,
    accel_topology_device_info_t *out_info) {
  ACCEL_CHECK_ARG(topology != NULL, "topology (NULL)");
  ACCEL_CHECK_ARG(out_info != NULL, "out_info (NULL)");
  if (out_info->struct_size <
      offsetof(accel_topology_device_info_t, accel_node)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "topology device info: struct_size %u is too small",
                       out_info->struct_size);
  }
  if (index >= topology->device_count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "topology: device %u out of range (there are %u)",
                       index, topology->device_count);
  }
  copy_sized(out_info, &topology->devices[index].info,
             sizeof(topology->devices[index].info));
  return ACCEL_OK;
}

accel_status_t accel_topology_nic_info(const accel_topology_t *topology,
                                       uint32_t index,
                                       accel_topology_nic_info_t *out_info) {
  ACCEL_CHECK_ARG(topology != NULL, "topology (NULL)");
  ACCEL_CHECK_ARG(out_info != NULL, "out_info (NULL)");
  if (out_info->struct_size < offsetof(accel_topology_nic_info_t, rdma)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "topology nic info: struct_size %u is too small",
                       out_info->struct_size);
  }
  if (index >= topology->nic_count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "topology: nic %u out of range (there are %u)", index,
                       topology->nic_count);
  }
  copy_sized(out_info, &topology->nics[index].info,
             sizeof(topology->nics[index].info));
  return ACCEL_OK;
}

accel_status_t accel_topology_nic_port(const accel_topology_t *topology,
                                       uint32_t nic_index, uint32_t port_index,
                                       accel_topology_port_info_t *out_info) {
  ACCEL_CHECK_ARG(topology != NULL, "topology (NULL)");
  ACCEL_CHECK_ARG(out_info != NULL, "out_info (NULL)");
  if (out_info->struct_size < offsetof(accel_topology_port_info_t, gid)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "topology port info: struct_size %u is too small",
                       out_info->struct_size);
  }
  if (nic_index >= topology->nic_count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "topology: nic %u out of range (there are %u)",
                       nic_index, topology->nic_count);
  }
  const accel_topo_nic_t *nic = &topology->nics[nic_index];
  if (port_index >= nic->info.port_count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "topology: port %u of nic %s out of range (it has %u)",
                       port_index, nic->info.name, nic->info.port_count);
  }
  copy_sized(out_info, &nic->ports[port_index], sizeof(nic->ports[0]));
  return ACCEL_OK;
}

static accel_status_t check_endpoints(const accel_topology_t *t, uint32_t a,
                                      uint32_t b) {
  if (a >= t->endpoint_count || b >= t->endpoint_count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "topology: endpoint %u out of range (there are %u: %u "
                       "devices, then %u nics)",
                       a >= t->endpoint_count ? a : b, t->endpoint_count,
                       t->device_count, t->nic_count);
  }
  return ACCEL_OK;
}

accel_status_t accel_topology_path_between(const accel_topology_t *topology,
                                           uint32_t a, uint32_t b,
                                           accel_topology_path_t *out_path) {
  ACCEL_CHECK_ARG(topology != NULL, "topology (NULL)");
  ACCEL_CHECK_ARG(out_path != NULL, "out_path (NULL)");
  ACCEL_RETURN_IF_ERROR(check_endpoints(topology, a, b));
  *out_path = (accel_topology_path_t)
      topology->paths[(size_t)a * topology->endpoint_count + b];
  return ACCEL_OK;
}

accel_status_t accel_topology_distance(const accel_topology_t *topology,
                                       uint32_t a, uint32_t b,
                                       uint32_t *out_distance) {
  ACCEL_CHECK_ARG(topology != NULL, "topology (NULL)");
  ACCEL_CHECK_ARG(out_distance != NULL, "out_distance (NULL)");
  ACCEL_RETURN_IF_ERROR(check_endpoints(topology, a, b));
  *out_distance = topology->distances[(size_t)a * topology->endpoint_count + b];
  return ACCEL_OK;
}

accel_status_t accel_topology_nearest_nics(const accel_topology_t *topology,
                                           uint32_t device_index,
                                           uint32_t capacity,
                                           uint32_t *out_nics,
                                           uint32_t *out_count) {
  ACCEL_CHECK_ARG(topology != NULL, "topology (NULL)");
  ACCEL_CHECK_ARG(out_count != NULL, "out_count (NULL)");
  ACCEL_CHECK_ARG(out_nics != NULL || capacity == 0, "out_nics (NULL)");
  if (device_index >= topology->device_count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "topology: device %u out of range (there are %u)",
                       device_index, topology->device_count);
  }
  const accel_topology_t *t = topology;
  size_t row = (size_t)device_index * t->endpoint_count + t->device_count;
  // Selection by insertion: n is small (NICs per host) and the output must be
  // stable (ties broken by NIC index).
  uint32_t written = 0;
  for (uint32_t k = 0; k < t->nic_count && written < capacity; ++k) {
    int64_t best = -1;
    for (uint32_t j = 0; j < t->nic_count; ++j) {
      bool taken = false;
      for (uint32_t w = 0; w < written; ++w) {
        taken = taken || out_nics[w] == j;
      }
      if (taken) {
        continue;
      }
      if (best < 0 || t->paths[row + j] < t->paths[row + (uint32_t)best] ||
          (t->paths[row + j] == t->paths[row + (uint32_t)best] &&
           t->distances[row + j] < t->distances[row + (uint32_t)best])) {
        best = j;
      }
    }
    out_nics[written++] = (uint32_t)best;
  }
  *out_count = t->nic_count;
  return ACCEL_OK;
}

accel_status_t accel_topology_pci_numa_node(const accel_topology_t *topology,
                                            const char *pci_bus_id,
                                            int32_t *out_numa_node) {
  ACCEL_CHECK_ARG(topology != NULL, "topology (NULL)");
  ACCEL_CHECK_ARG(pci_bus_id != NULL, "pci_bus_id (NULL)");
  ACCEL_CHECK_ARG(out_numa_node != NULL, "out_numa_node (NULL)");
  uint32_t d, b, s, f;
  if (!accel_topo_parse_bus_id(pci_bus_id, &d, &b, &s, &f)) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "pci bus id \"%s\" is not of the form dddd:bb:dd.f",
                       pci_bus_id);
  }
  for (uint32_t e = 0; e < topology->endpoint_count; ++e) {
    uint32_t d2, b2, s2, f2;
    if (accel_topo_parse_bus_id(endpoint_bus_id(topology, e), &d2, &b2, &s2,
                                &f2) &&
        d == d2 && b == b2 && s == s2 && f == f2) {
      *out_numa_node = e < topology->device_count
                           ? topology->devices[e].info.numa_node
                           : topology->nics[e - topology->device_count]
                                 .info.numa_node;
      return ACCEL_OK;
    }
  }
  return accel_error(ACCEL_ERROR_NOT_FOUND,
                     "topology: no device or nic at pci bus id %s (%u devices, "
                     "%u nics)",
                     pci_bus_id, topology->device_count, topology->nic_count);
}

accel_status_t accel_topology_numa_node(const accel_topology_t *topology,
                                        uint32_t index, int32_t *out_os_index,
                                        uint64_t *out_memory_bytes) {
  ACCEL_CHECK_ARG(topology != NULL, "topology (NULL)");
  if (index >= topology->numa_count) {
    return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                       "topology: numa node number %u out of range (there are "
                       "%u)",
                       index, topology->numa_count);
  }
  if (out_os_index != NULL) {
    *out_os_index = topology->numa[index].os_index;
  }
  if (out_memory_bytes != NULL) {
    *out_memory_bytes = topology->numa[index].memory_bytes;
  }
  return ACCEL_OK;
}

accel_status_t accel_topology_numa_cpus(const accel_topology_t *topology,
                                        int32_t numa_node, uint32_t capacity,
                                        uint32_t *out_cpus,
                                        uint32_t *out_count) {
  ACCEL_CHECK_ARG(topology != NULL, "topology (NULL)");
  ACCEL_CHECK_ARG(out_count != NULL, "out_count (NULL)");
  ACCEL_CHECK_ARG(out_cpus != NULL || capacity == 0, "out_cpus (NULL)");
  const accel_topo_numa_t *node = accel_topo_find_numa(topology, numa_node);
  if (node == NULL) {
    return accel_error(ACCEL_ERROR_NOT_FOUND,
                       "topology: no NUMA node %d (there are %u)", numa_node,
                       topology->numa_count);
  }
  uint32_t n = node->cpu_count < capacity ? node->cpu_count : capacity;
  if (n > 0) {
    memcpy(out_cpus, node->cpus, n * sizeof(*out_cpus));
  }
  *out_count = node->cpu_count;
  return ACCEL_OK;
}

accel_status_t accel_topology_numa_distance(const accel_topology_t *topology,
                                            int32_t a, int32_t b,
                                            uint32_t *out_distance,
                                            bool *out_measured) {
  ACCEL_CHECK_ARG(topology != NULL, "topology (NULL)");
  ACCEL_CHECK_ARG(out_distance != NULL, "out_distance (NULL)");
  int64_t ia = -1, ib = -1;
  for (uint32_t i = 0; i < topology->numa_count; ++i) {
    if (topology->numa[i].os_index == a) {
      ia = i;
    }
    if (topology->numa[i].os_index == b) {
      ib = i;
    }
  }
  if (ia < 0 || ib < 0) {
    return accel_error(ACCEL_ERROR_NOT_FOUND,
                       "topology: no NUMA node %d (there are %u)",
                       ia < 0 ? a : b, topology->numa_count);
  }
  *out_distance =
      topology->numa_distances[(size_t)ia * topology->numa_count + (size_t)ib];
  if (out_measured != NULL) {
    *out_measured = topology->numa_distances_measured;
  }
  return ACCEL_OK;
}

void accel_topo_buf_printf(accel_topo_buf_t *b, const char *fmt, ...) {
  if (b->failed) {
    return;
  }
  for (;;) {
    size_t room = b->capacity - b->length;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->data ? b->data + b->length : NULL,
                      b->data ? room : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->failed = true;
      return;
    }
    if (b->data != NULL && (size_t)n < room) {
      b->length += (size_t)n;
      return;
    }
    size_t want = b->capacity ? b->capacity * 2 : 4096;
    while (want < b->length + (size_t)n + 1) {
      want *= 2;
    }
    char *grown = realloc(b->data, want);
    if (grown == NULL) {
      b->failed = true;
      return;
    }
    b->data = grown;
    b->capacity = want;
  }
}

accel_status_t accel_topology_format(const accel_topology_t *topology,
                                     accel_topology_format_kind_t format,
                                     char *buffer, size_t capacity,
                                     size_t *out_length) {
  ACCEL_CHECK_ARG(topology != NULL, "topology (NULL)");
  ACCEL_CHECK_ARG(out_length != NULL, "out_length (NULL)");
  accel_topo_buf_t b = {0};
  switch (format) {
    case ACCEL_TOPOLOGY_FORMAT_MATRIX:
      accel_topo_write_matrix(topology, &b);
      break;
    case ACCEL_TOPOLOGY_FORMAT_TREE:
      accel_topo_write_tree(topology, &b);
      break;
    case ACCEL_TOPOLOGY_FORMAT_JSON:
      accel_topo_write_json(topology, &b);
      break;
    default:
      return accel_error(ACCEL_ERROR_INVALID_ARGUMENT,
                         "topology format: unknown format %d", (int)format);
  }
  if (b.failed) {
    free(b.data);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "topology format: cannot allocate the text");
  }
  accel_status_t st = ACCEL_OK;
  if (buffer != NULL) {
    if (capacity < b.length + 1) {
      st = accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "topology format: buffer of %zu bytes is too small for "
                       "%zu bytes and the terminating NUL",
                       capacity, b.length);
    } else {
      memcpy(buffer, b.data != NULL ? b.data : "", b.length);
      buffer[b.length] = '\0';
    }
  }
  *out_length = b.length;
  free(b.data);
  return st;
}
