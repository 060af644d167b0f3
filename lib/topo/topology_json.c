// The JSON form of a topology: written here for accel-topo --json and for
// exchange between hosts, and read back with json-c
// (accel_topology_deserialize). The layout is documented in docs/topology.md.
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel_config.h"
#include "topo/topology_impl.h"

#ifndef ACCEL_HAVE_JSON_C
#define ACCEL_HAVE_JSON_C 0
#endif

#if ACCEL_HAVE_JSON_C
#include <json-c/json.h>
#endif

// ---------------------------------------------------------------------------
// Writing.
// ---------------------------------------------------------------------------

static void put_string(accel_topo_buf_t *b, const char *s) {
  accel_topo_buf_printf(b, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; ++p) {
    switch (*p) {
      case '"':
        accel_topo_buf_printf(b, "\\\"");
        break;
      case '\\':
        accel_topo_buf_printf(b, "\\\\");
        break;
      case '\n':
        accel_topo_buf_printf(b, "\\n");
        break;
      case '\t':
        accel_topo_buf_printf(b, "\\t");
        break;
      default:
        if (*p < 0x20) {
          accel_topo_buf_printf(b, "\\u%04x", *p);
        } else {
          accel_topo_buf_printf(b, "%c", *p);
        }
    }
  }
  accel_topo_buf_printf(b, "\"");
}

static void put_key_string(accel_topo_buf_t *b, const char *key,
                           const char *value, const char *after) {
  accel_topo_buf_printf(b, "\"%s\": ", key);
  put_string(b, value);
  accel_topo_buf_printf(b, "%s", after);
}

static const char *endpoint_name(const accel_topology_t *t, uint32_t e) {
  return e < t->device_count ? t->devices[e].info.name
                             : t->nics[e - t->device_count].info.name;
}

// One matrix over the endpoints, as an object of objects keyed by name.
static void put_endpoint_matrix(const accel_topology_t *t, accel_topo_buf_t *b,
                                bool paths) {
  uint32_t n = t->endpoint_count;
  accel_topo_buf_printf(b, "{");
  for (uint32_t a = 0; a < n; ++a) {
    accel_topo_buf_printf(b, "%s\n    ", a ? "," : "");
    put_string(b, endpoint_name(t, a));
    accel_topo_buf_printf(b, ": {");
    for (uint32_t c = 0; c < n; ++c) {
      accel_topo_buf_printf(b, "%s", c ? ", " : "");
      put_string(b, endpoint_name(t, c));
      if (paths) {
        accel_topo_buf_printf(
            b, ": \"%s\"",
            accel_topology_path_name(
                (accel_topology_path_t)t->paths[(size_t)a * n + c]));
      } else {
        accel_topo_buf_printf(b, ": %u", t->distances[(size_t)a * n + c]);
      }
    }
    accel_topo_buf_printf(b, "}");
  }
  accel_topo_buf_printf(b, "%s}", n ? "\n  " : "");
}

// The opening object fields: format, version, host, source and machine.
static void put_header(const accel_topology_t *t, accel_topo_buf_t *b) {
  const accel_topology_summary_t *s = &t->summary;
  accel_topo_buf_printf(b, "{\n  \"format\": \"accel-topology\",\n"
                           "  \"version\": %d,\n  ",
                        ACCEL_TOPO_JSON_VERSION);
  put_key_string(b, "host", s->hostname, ",\n  ");
  put_key_string(b, "source", s->source, ",\n");
  accel_topo_buf_printf(b,
                        "  \"machine\": {\"packages\": %u, \"numa_nodes\": %u, "
                        "\"cores\": %u, \"pus\": %u, \"memory_bytes\": %llu},\n",
                        s->package_count, t->numa_count, s->core_count,
                        s->pu_count, (unsigned long long)s->memory_bytes);
}

// A sorted CPU list as ranges ("0-7,16-23").
static void put_cpu_ranges(accel_topo_buf_t *b, const uint32_t *cpus,
                           uint32_t n) {
  // Written range by range: a node's list has no length limit here.
  for (uint32_t j = 0; j < n;) {
    uint32_t k = j;
    while (k + 1 < n && cpus[k + 1] == cpus[k] + 1) {
      ++k;
    }
    accel_topo_buf_printf(b, "%s%u", j ? "," : "", cpus[j]);
    if (k > j) {
      accel_topo_buf_printf(b, "-%u", cpus[k]);
    }
    j = k + 1;
  }
}

static void put_numa_nodes(const accel_topology_t *t, accel_topo_buf_t *b) {
  accel_topo_buf_printf(b, "  \"numa_nodes\": [");
  for (uint32_t i = 0; i < t->numa_count; ++i) {
    accel_topo_buf_printf(b,
                          "%s\n    {\"os_index\": %d, \"memory_bytes\": %llu, "
                          "\"cpus\": \"",
                          i ? "," : "", t->numa[i].os_index,
                          (unsigned long long)t->numa[i].memory_bytes);
    put_cpu_ranges(b, t->numa[i].cpus, t->numa[i].cpu_count);
    accel_topo_buf_printf(b, "\"}");
  }
  accel_topo_buf_printf(b, "%s],\n", t->numa_count ? "\n  " : "");
}

static void put_numa_distances(const accel_topology_t *t, accel_topo_buf_t *b) {
  accel_topo_buf_printf(b, "  \"numa_distances\": {\"measured\": %s, "
                           "\"matrix\": [",
                        t->numa_distances_measured ? "true" : "false");
  for (uint32_t i = 0; i < t->numa_count; ++i) {
    accel_topo_buf_printf(b, "%s[", i ? ", " : "");
    for (uint32_t j = 0; j < t->numa_count; ++j) {
      accel_topo_buf_printf(b, "%s%u", j ? ", " : "",
                            t->numa_distances[(size_t)i * t->numa_count + j]);
    }
    accel_topo_buf_printf(b, "]");
  }
  accel_topo_buf_printf(b, "]},\n");
}

// The PCI identity fields devices and NICs share, from "name" to "cpus".
static void put_pci_identity(accel_topo_buf_t *b, const char *name,
                             const char *pci_bus_id, uint32_t vendor_id,
                             uint32_t device_id, uint32_t class_id,
                             const char *model, int32_t numa_node,
                             const char *cpus) {
  put_key_string(b, "name", name, ", ");
  put_key_string(b, "pci_bus_id", pci_bus_id, ", ");
  accel_topo_buf_printf(b,
                        "\"vendor_id\": \"0x%04x\", \"device_id\": "
                        "\"0x%04x\", \"class_id\": \"0x%04x\", ",
                        vendor_id, device_id, class_id);
  put_key_string(b, "model", model, ", ");
  accel_topo_buf_printf(b, "\"numa_node\": %d, ", numa_node);
  put_key_string(b, "cpus", cpus, ", ");
}

static void put_device(const accel_topology_t *t, accel_topo_buf_t *b,
                       uint32_t i) {
  const accel_topology_device_info_t *d = &t->devices[i].info;
  accel_topo_buf_printf(b, "%s\n    {", i ? "," : "");
  put_pci_identity(b, d->name, d->pci_bus_id, d->vendor_id, d->device_id,
                   d->class_id, d->model, d->numa_node, d->cpus);
  put_key_string(b, "drm_primary", d->drm_primary, ", ");
  put_key_string(b, "drm_render", d->drm_render, ", ");
  put_key_string(b, "accel_node", d->accel_node, ", ");
  accel_topo_buf_printf(b, "\"nearest_nics\": [");
  uint32_t order[64], count = 0;
  accel_topology_nearest_nics(t, i, 64, order, &count);
  for (uint32_t k = 0; k < count && k < 64; ++k) {
    accel_topo_buf_printf(b, "%s", k ? ", " : "");
    put_string(b, t->nics[order[k]].info.name);
  }
  accel_topo_buf_printf(b, "]}");
}

static void put_port(accel_topo_buf_t *b,
                     const accel_topology_port_info_t *port, uint32_t p) {
  accel_topo_buf_printf(b, "%s{\"port\": %u, ", p ? ", " : "", port->port_num);
  put_key_string(b, "state", port->state, ", ");
  put_key_string(b, "link_layer", port->link_layer, ", ");
  accel_topo_buf_printf(b,
                        "\"lid\": %u, \"width\": %u, \"lane_speed_mbps\": "
                        "%u, \"mtu_bytes\": %u, ",
                        port->lid, port->width, port->lane_speed_mbps,
                        port->mtu_bytes);
  put_key_string(b, "gid", port->gid, "}");
}

static void put_nic(const accel_topology_t *t, accel_topo_buf_t *b,
                    uint32_t i) {
  const accel_topo_nic_t *nic = &t->nics[i];
  const accel_topology_nic_info_t *d = &nic->info;
  accel_topo_buf_printf(b, "%s\n    {", i ? "," : "");
  put_pci_identity(b, d->name, d->pci_bus_id, d->vendor_id, d->device_id,
                   d->class_id, d->model, d->numa_node, d->cpus);
  put_key_string(b, "netdev", d->netdev, ", ");
  accel_topo_buf_printf(b, "\"rdma\": %s, ", d->rdma ? "true" : "false");
  put_key_string(b, "node_guid", d->node_guid, ", ");
  accel_topo_buf_printf(b, "\"ports\": [");
  for (uint32_t p = 0; p < d->port_count; ++p) {
    put_port(b, &nic->ports[p], p);
  }
  accel_topo_buf_printf(b, "]}");
}

// The items of a list of strings, one per line; the caller writes the
// brackets.
static void put_string_lines(accel_topo_buf_t *b, char *const *lines,
                             uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    accel_topo_buf_printf(b, "%s\n    ", i ? "," : "");
    put_string(b, lines[i]);
  }
  accel_topo_buf_printf(b, "%s", count ? "\n  " : "");
}

void accel_topo_write_json(const accel_topology_t *t, accel_topo_buf_t *b) {
  put_header(t, b);
  put_numa_nodes(t, b);
  put_numa_distances(t, b);
  accel_topo_buf_printf(b, "  \"devices\": [");
  for (uint32_t i = 0; i < t->device_count; ++i) {
    put_device(t, b, i);
  }
  accel_topo_buf_printf(b, "%s],\n  \"nics\": [",
                        t->device_count ? "\n  " : "");
  for (uint32_t i = 0; i < t->nic_count; ++i) {
    put_nic(t, b, i);
  }
  accel_topo_buf_printf(b, "%s],\n  \"paths\": ", t->nic_count ? "\n  " : "");
  put_endpoint_matrix(t, b, true);
  accel_topo_buf_printf(b, ",\n  \"distances\": ");
  put_endpoint_matrix(t, b, false);
  accel_topo_buf_printf(b, ",\n  \"notes\": [");
  put_string_lines(b, t->notes, t->note_count);
  accel_topo_buf_printf(b, "],\n  \"tree\": [");
  put_string_lines(b, t->tree_lines, t->tree_line_count);
  accel_topo_buf_printf(b, "]\n}\n");
}

// ---------------------------------------------------------------------------
// Reading.
// ---------------------------------------------------------------------------

#if ACCEL_HAVE_JSON_C

#define FORMAT_ERROR(...) accel_error(ACCEL_ERROR_FORMAT, "topology json: " __VA_ARGS__)

static accel_status_t member(json_object *obj, const char *where,
                             const char *key, json_type type,
                             json_object **out) {
  json_object *v = NULL;
  if (!json_object_object_get_ex(obj, key, &v) || v == NULL) {
    return FORMAT_ERROR("%s.%s: missing", where, key);
  }
  if (!json_object_is_type(v, type)) {
    return FORMAT_ERROR("%s.%s: expected %s, found %s", where, key,
                        json_type_to_name(type),
                        json_type_to_name(json_object_get_type(v)));
  }
  *out = v;
  return ACCEL_OK;
}

static accel_status_t get_string(json_object *obj, const char *where,
                                 const char *key, char *out, size_t size) {
  json_object *v = NULL;
  ACCEL_RETURN_IF_ERROR(member(obj, where, key, json_type_string, &v));
  const char *s = json_object_get_string(v);
  if (strlen(s) >= size) {
    return FORMAT_ERROR("%s.%s: longer than %zu characters", where, key,
                        size - 1);
  }
  snprintf(out, size, "%s", s);
  return ACCEL_OK;
}

static accel_status_t get_int(json_object *obj, const char *where,
                              const char *key, int64_t lo, int64_t hi,
                              int64_t *out) {
  json_object *v = NULL;
  ACCEL_RETURN_IF_ERROR(member(obj, where, key, json_type_int, &v));
  errno = 0;
  int64_t x = json_object_get_int64(v);
  if (errno != 0 || x < lo || x > hi) {
    return FORMAT_ERROR("%s.%s: %lld is outside [%lld, %lld]", where, key,
                        (long long)x, (long long)lo, (long long)hi);
  }
  *out = x;
  return ACCEL_OK;
}

static accel_status_t get_u32(json_object *obj, const char *where,
                              const char *key, uint32_t *out) {
  int64_t v = 0;
  ACCEL_RETURN_IF_ERROR(get_int(obj, where, key, 0, UINT32_MAX, &v));
  *out = (uint32_t)v;
  return ACCEL_OK;
}

static accel_status_t get_hex(json_object *obj, const char *where,
                              const char *key, uint32_t max, uint32_t *out) {
  char text[16];
  ACCEL_RETURN_IF_ERROR(get_string(obj, where, key, text, sizeof(text)));
  char *end = NULL;
  errno = 0;
  unsigned long v = strtoul(text, &end, 16);
  if (errno != 0 || end == text || *end != '\0' || v > max) {
    return FORMAT_ERROR("%s.%s: \"%s\" is not a hex number up to 0x%x", where,
                        key, text, max);
  }
  *out = (uint32_t)v;
  return ACCEL_OK;
}

static accel_status_t get_bool(json_object *obj, const char *where,
                               const char *key, bool *out) {
  json_object *v = NULL;
  ACCEL_RETURN_IF_ERROR(member(obj, where, key, json_type_boolean, &v));
  *out = json_object_get_boolean(v) != 0;
  return ACCEL_OK;
}

// Parses a CPU list "0-7,16-23" (or "") into a new array.
static accel_status_t parse_cpu_list(const char *text, const char *where,
                                     uint32_t **out_cpus,
                                     uint32_t *out_count) {
  uint32_t count = 0, capacity = 16;
  uint32_t *cpus = malloc(capacity * sizeof(*cpus));
  if (cpus == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "topology json: cannot allocate a cpu list");
  }
  const char *p = text;
  while (*p != '\0') {
    char *end = NULL;
    unsigned long lo = strtoul(p, &end, 10), hi = lo;
    if (end == p) {
      goto err_malformed;
    }
    p = end;
    if (*p == '-') {
      ++p;
      hi = strtoul(p, &end, 10);
      if (end == p || hi < lo) {
        goto err_malformed;
      }
      p = end;
    }
    if (hi > 1u << 20 || (count > 0 && lo <= cpus[count - 1])) {
      goto err_malformed;
    }
    for (unsigned long c = lo; c <= hi; ++c) {
      if (count == capacity) {
        capacity *= 2;
        uint32_t *grown = realloc(cpus, capacity * sizeof(*cpus));
        if (grown == NULL) {
          free(cpus);
          return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                             "topology json: cannot allocate a cpu list");
        }
        cpus = grown;
      }
      cpus[count++] = (uint32_t)c;
    }
    if (*p == ',') {
      ++p;
    } else if (*p != '\0') {
      goto err_malformed;
    }
  }
  *out_cpus = cpus;
  *out_count = count;
  return ACCEL_OK;

err_malformed:
  free(cpus);
  return FORMAT_ERROR("%s: \"%s\" is not an ascending cpu list like 0-7,16-23",
                      where, text);
}

static accel_status_t parse_numa(json_object *root, accel_topology_t *t) {
  json_object *nodes, *dist, *matrix;
  ACCEL_RETURN_IF_ERROR(
      member(root, "$", "numa_nodes", json_type_array, &nodes));
  size_t n = json_object_array_length(nodes);
  if (n > 4096) {
    return FORMAT_ERROR("$.numa_nodes: %zu nodes exceed 4096", n);
  }
  ACCEL_RETURN_IF_ERROR(accel_topo_alloc_numa(t, (uint32_t)n));
  for (size_t i = 0; i < n; ++i) {
    char where[48], cpus[1 << 14];
    snprintf(where, sizeof(where), "$.numa_nodes[%zu]", i);
    json_object *node = json_object_array_get_idx(nodes, i);
    if (!json_object_is_type(node, json_type_object)) {
      return FORMAT_ERROR("%s: expected an object", where);
    }
    int64_t os_index = 0, memory = 0;
    ACCEL_RETURN_IF_ERROR(
        get_int(node, where, "os_index", 0, INT32_MAX, &os_index));
    ACCEL_RETURN_IF_ERROR(
        get_int(node, where, "memory_bytes", 0, INT64_MAX, &memory));
    ACCEL_RETURN_IF_ERROR(get_string(node, where, "cpus", cpus, sizeof(cpus)));
    if (i > 0 && os_index <= t->numa[i - 1].os_index) {
      return FORMAT_ERROR("%s.os_index: %lld is not above the previous node's",
                          where, (long long)os_index);
    }
    t->numa[i].os_index = (int32_t)os_index;
    t->numa[i].memory_bytes = (uint64_t)memory;
    ACCEL_RETURN_IF_ERROR(parse_cpu_list(cpus, where, &t->numa[i].cpus,
                                         &t->numa[i].cpu_count));
  }
  ACCEL_RETURN_IF_ERROR(
      member(root, "$", "numa_distances", json_type_object, &dist));
  ACCEL_RETURN_IF_ERROR(get_bool(dist, "$.numa_distances", "measured",
                                 &t->numa_distances_measured));
  ACCEL_RETURN_IF_ERROR(
      member(dist, "$.numa_distances", "matrix", json_type_array, &matrix));
  if (json_object_array_length(matrix) != n) {
    return FORMAT_ERROR("$.numa_distances.matrix: %zu rows for %zu nodes",
                        json_object_array_length(matrix), n);
  }
  for (size_t i = 0; i < n; ++i) {
    json_object *row = json_object_array_get_idx(matrix, i);
    if (!json_object_is_type(row, json_type_array) ||
        json_object_array_length(row) != n) {
      return FORMAT_ERROR("$.numa_distances.matrix[%zu]: expected %zu "
                          "numbers",
                          i, n);
    }
    for (size_t j = 0; j < n; ++j) {
      json_object *v = json_object_array_get_idx(row, j);
      int64_t x = json_object_is_type(v, json_type_int)
                      ? json_object_get_int64(v)
                      : -1;
      if (x < 0 || x > UINT32_MAX) {
        return FORMAT_ERROR("$.numa_distances.matrix[%zu][%zu]: expected a "
                            "distance from 0 to %u",
                            i, j, UINT32_MAX);
      }
      t->numa_distances[i * n + j] = (uint32_t)x;
    }
  }
  return ACCEL_OK;
}

// The PCI identity that devices and NICs both carry, as pointers into either
// info struct (PCI_IDENTITY below).
typedef struct pci_identity {
  char *name;
  size_t name_size;
  char *pci_bus_id;
  size_t pci_bus_id_size;
  uint16_t *vendor_id;
  uint16_t *device_id;
  uint32_t *class_id;
  char *model;
  size_t model_size;
  int32_t *numa_node;
  char *cpus;
  size_t cpus_size;
} pci_identity_t;

#define PCI_IDENTITY(d)                                                    \
  ((pci_identity_t){(d)->name, sizeof((d)->name), (d)->pci_bus_id,         \
                    sizeof((d)->pci_bus_id), &(d)->vendor_id,              \
                    &(d)->device_id, &(d)->class_id, (d)->model,           \
                    sizeof((d)->model), &(d)->numa_node, (d)->cpus,        \
                    sizeof((d)->cpus)})

// Reads the PCI identity of the object |o| (at |where|): a non-empty name,
// then the bus id, ids, model, NUMA node and CPU list.
static accel_status_t parse_pci_identity(json_object *o, const char *where,
                                         pci_identity_t id) {
  uint32_t v = 0;
  int64_t node = 0;
  if (!json_object_is_type(o, json_type_object)) {
    return FORMAT_ERROR("%s: expected an object", where);
  }
  ACCEL_RETURN_IF_ERROR(get_string(o, where, "name", id.name, id.name_size));
  if (id.name[0] == '\0') {
    return FORMAT_ERROR("%s.name: empty", where);
  }
  ACCEL_RETURN_IF_ERROR(get_string(o, where, "pci_bus_id", id.pci_bus_id,
                                   id.pci_bus_id_size));
  ACCEL_RETURN_IF_ERROR(get_hex(o, where, "vendor_id", 0xffff, &v));
  *id.vendor_id = (uint16_t)v;
  ACCEL_RETURN_IF_ERROR(get_hex(o, where, "device_id", 0xffff, &v));
  *id.device_id = (uint16_t)v;
  ACCEL_RETURN_IF_ERROR(get_hex(o, where, "class_id", 0xffffff, id.class_id));
  ACCEL_RETURN_IF_ERROR(get_string(o, where, "model", id.model, id.model_size));
  ACCEL_RETURN_IF_ERROR(get_int(o, where, "numa_node", -1, INT32_MAX, &node));
  *id.numa_node = (int32_t)node;
  return get_string(o, where, "cpus", id.cpus, id.cpus_size);
}

static accel_status_t parse_device(json_object *o, const char *where,
                                   accel_topology_device_info_t *d) {
  ACCEL_RETURN_IF_ERROR(parse_pci_identity(o, where, PCI_IDENTITY(d)));
  ACCEL_RETURN_IF_ERROR(get_string(o, where, "drm_primary", d->drm_primary,
                                   sizeof(d->drm_primary)));
  ACCEL_RETURN_IF_ERROR(get_string(o, where, "drm_render", d->drm_render,
                                   sizeof(d->drm_render)));
  return get_string(o, where, "accel_node", d->accel_node,
                    sizeof(d->accel_node));
}

static accel_status_t parse_nic(json_object *o, const char *where,
                                accel_topo_nic_t *nic) {
  accel_topology_nic_info_t *d = &nic->info;
  json_object *ports;
  ACCEL_RETURN_IF_ERROR(parse_pci_identity(o, where, PCI_IDENTITY(d)));
  ACCEL_RETURN_IF_ERROR(
      get_string(o, where, "netdev", d->netdev, sizeof(d->netdev)));
  ACCEL_RETURN_IF_ERROR(get_bool(o, where, "rdma", &d->rdma));
  ACCEL_RETURN_IF_ERROR(
      get_string(o, where, "node_guid", d->node_guid, sizeof(d->node_guid)));
  ACCEL_RETURN_IF_ERROR(member(o, where, "ports", json_type_array, &ports));
  size_t n = json_object_array_length(ports);
  if (n > ACCEL_TOPO_MAX_PORTS) {
    return FORMAT_ERROR("%s.ports: %zu ports exceed %d", where, n,
                        ACCEL_TOPO_MAX_PORTS);
  }
  for (size_t i = 0; i < n; ++i) {
    char pw[96];
    snprintf(pw, sizeof(pw), "%s.ports[%zu]", where, i);
    json_object *po = json_object_array_get_idx(ports, i);
    accel_topology_port_info_t *p = &nic->ports[i];
    if (!json_object_is_type(po, json_type_object)) {
      return FORMAT_ERROR("%s: expected an object", pw);
    }
    p->struct_size = sizeof(*p);
    ACCEL_RETURN_IF_ERROR(get_u32(po, pw, "port", &p->port_num));
    ACCEL_RETURN_IF_ERROR(get_string(po, pw, "state", p->state,
                                     sizeof(p->state)));
    ACCEL_RETURN_IF_ERROR(get_string(po, pw, "link_layer", p->link_layer,
                                     sizeof(p->link_layer)));
    ACCEL_RETURN_IF_ERROR(get_u32(po, pw, "lid", &p->lid));
    ACCEL_RETURN_IF_ERROR(get_u32(po, pw, "width", &p->width));
    ACCEL_RETURN_IF_ERROR(
        get_u32(po, pw, "lane_speed_mbps", &p->lane_speed_mbps));
    ACCEL_RETURN_IF_ERROR(get_u32(po, pw, "mtu_bytes", &p->mtu_bytes));
    ACCEL_RETURN_IF_ERROR(get_string(po, pw, "gid", p->gid, sizeof(p->gid)));
  }
  d->port_count = (uint32_t)n;
  return ACCEL_OK;
}

static int64_t find_endpoint(const accel_topology_t *t, const char *name) {
  for (uint32_t e = 0; e < t->endpoint_count; ++e) {
    if (strcmp(endpoint_name(t, e), name) == 0) {
      return e;
    }
  }
  return -1;
}

// Reads "paths" or "distances": an object per endpoint, holding a value per
// endpoint; every pair must be present exactly once.
static accel_status_t parse_matrix(json_object *root, const char *key,
                                   accel_topology_t *t, bool paths) {
  json_object *m;
  ACCEL_RETURN_IF_ERROR(member(root, "$", key, json_type_object, &m));
  uint32_t n = t->endpoint_count;
  if ((uint32_t)json_object_object_length(m) != n) {
    return FORMAT_ERROR("$.%s: %d rows for %u endpoints", key,
                        json_object_object_length(m), n);
  }
  json_object_object_foreach(m, row_name, row) {
    int64_t a = find_endpoint(t, row_name);
    if (a < 0) {
      return FORMAT_ERROR("$.%s.%s: no device or nic has that name", key,
                          row_name);
    }
    if (!json_object_is_type(row, json_type_object) ||
        (uint32_t)json_object_object_length(row) != n) {
      return FORMAT_ERROR("$.%s.%s: expected an object with %u entries", key,
                          row_name, n);
    }
    json_object_object_foreach(row, col_name, value) {
      int64_t c = find_endpoint(t, col_name);
      if (c < 0) {
        return FORMAT_ERROR("$.%s.%s.%s: no device or nic has that name", key,
                            row_name, col_name);
      }
      size_t at = (size_t)a * n + (size_t)c;
      if (paths) {
        const char *text = json_object_is_type(value, json_type_string)
                               ? json_object_get_string(value)
                               : "";
        int found = -1;
        for (int p = 0; p < ACCEL_TOPOLOGY_PATH_COUNT; ++p) {
          if (strcmp(text, accel_topology_path_name(
                               (accel_topology_path_t)p)) == 0) {
            found = p;
          }
        }
        if (found < 0) {
          return FORMAT_ERROR("$.%s.%s.%s: expected one of X, PIX, PXB, PHB, "
                              "NODE, SYS",
                              key, row_name, col_name);
        }
        if ((found == ACCEL_TOPOLOGY_PATH_X) != (a == c)) {
          return FORMAT_ERROR("$.%s.%s.%s: X is for an endpoint with itself "
                              "only",
                              key, row_name, col_name);
        }
        t->paths[at] = (uint8_t)found;
      } else {
        int64_t x = json_object_is_type(value, json_type_int)
                        ? json_object_get_int64(value)
                        : -1;
        if (x < 0 || x > UINT32_MAX) {
          return FORMAT_ERROR("$.%s.%s.%s: expected a distance from 0 to %u",
                              key, row_name, col_name, UINT32_MAX);
        }
        t->distances[at] = (uint32_t)x;
      }
    }
  }
  return ACCEL_OK;
}

static accel_status_t parse_lines(json_object *root, const char *key,
                                  accel_topology_t *t, bool notes) {
  json_object *arr;
  ACCEL_RETURN_IF_ERROR(member(root, "$", key, json_type_array, &arr));
  size_t n = json_object_array_length(arr);
  for (size_t i = 0; i < n; ++i) {
    json_object *v = json_object_array_get_idx(arr, i);
    if (!json_object_is_type(v, json_type_string)) {
      return FORMAT_ERROR("$.%s[%zu]: expected a string", key, i);
    }
    const char *s = json_object_get_string(v);
    ACCEL_RETURN_IF_ERROR(notes ? accel_topo_add_note(t, "%s", s)
                                : accel_topo_add_tree_line(t, "%s", s));
  }
  return ACCEL_OK;
}

static accel_status_t parse_root(json_object *root, accel_topology_t *t) {
  char format[32];
  int64_t version = 0;
  json_object *machine, *devices, *nics;
  if (!json_object_is_type(root, json_type_object)) {
    return FORMAT_ERROR("$: expected an object");
  }
  ACCEL_RETURN_IF_ERROR(get_string(root, "$", "format", format,
                                   sizeof(format)));
  if (strcmp(format, "accel-topology") != 0) {
    return FORMAT_ERROR("$.format: \"%s\" is not \"accel-topology\"", format);
  }
  ACCEL_RETURN_IF_ERROR(get_int(root, "$", "version", 1, INT32_MAX, &version));
  if (version > ACCEL_TOPO_JSON_VERSION) {
    return accel_error(ACCEL_ERROR_VERSION,
                       "topology json: version %lld is newer than the %d this "
                       "library reads",
                       (long long)version, ACCEL_TOPO_JSON_VERSION);
  }
  accel_topology_summary_t *s = &t->summary;
  ACCEL_RETURN_IF_ERROR(
      get_string(root, "$", "host", s->hostname, sizeof(s->hostname)));
  ACCEL_RETURN_IF_ERROR(member(root, "$", "machine", json_type_object,
                               &machine));
  ACCEL_RETURN_IF_ERROR(
      get_u32(machine, "$.machine", "packages", &s->package_count));
  ACCEL_RETURN_IF_ERROR(get_u32(machine, "$.machine", "cores", &s->core_count));
  ACCEL_RETURN_IF_ERROR(get_u32(machine, "$.machine", "pus", &s->pu_count));
  int64_t memory = 0;
  ACCEL_RETURN_IF_ERROR(
      get_int(machine, "$.machine", "memory_bytes", 0, INT64_MAX, &memory));
  s->memory_bytes = (uint64_t)memory;
  ACCEL_RETURN_IF_ERROR(parse_numa(root, t));
  ACCEL_RETURN_IF_ERROR(member(root, "$", "devices", json_type_array,
                               &devices));
  ACCEL_RETURN_IF_ERROR(member(root, "$", "nics", json_type_array, &nics));
  size_t nd = json_object_array_length(devices);
  size_t nn = json_object_array_length(nics);
  if (nd + nn > 4096) {
    return FORMAT_ERROR("$: %zu devices and nics exceed 4096", nd + nn);
  }
  ACCEL_RETURN_IF_ERROR(
      accel_topo_alloc_endpoints(t, (uint32_t)nd, (uint32_t)nn));
  for (size_t i = 0; i < nd; ++i) {
    char where[48];
    snprintf(where, sizeof(where), "$.devices[%zu]", i);
    ACCEL_RETURN_IF_ERROR(parse_device(json_object_array_get_idx(devices, i),
                                       where, &t->devices[i].info));
  }
  for (size_t i = 0; i < nn; ++i) {
    char where[48];
    snprintf(where, sizeof(where), "$.nics[%zu]", i);
    ACCEL_RETURN_IF_ERROR(
        parse_nic(json_object_array_get_idx(nics, i), where, &t->nics[i]));
  }
  for (uint32_t e = 1; e < t->endpoint_count; ++e) {
    int64_t first = find_endpoint(t, endpoint_name(t, e));
    if (first != e) {
      return FORMAT_ERROR("$: the name \"%s\" is used twice",
                          endpoint_name(t, e));
    }
  }
  ACCEL_RETURN_IF_ERROR(parse_matrix(root, "paths", t, true));
  ACCEL_RETURN_IF_ERROR(parse_matrix(root, "distances", t, false));
  ACCEL_RETURN_IF_ERROR(parse_lines(root, "notes", t, true));
  return parse_lines(root, "tree", t, false);
}

accel_status_t accel_topo_parse_json(const char *json, size_t size,
                                     accel_topology_t *t) {
  if (size > INT_MAX) {
    return FORMAT_ERROR("%zu bytes exceed the %d a document may have", size,
                        INT_MAX);
  }
  json_tokener *tok = json_tokener_new();
  if (tok == NULL) {
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "topology json: cannot create a parser");
  }
  accel_status_t st = ACCEL_OK;
  json_object *root = json_tokener_parse_ex(tok, json, (int)size);
  enum json_tokener_error err = json_tokener_get_error(tok);
  if (root == NULL || err != json_tokener_success) {
    st = FORMAT_ERROR("not JSON: %s at offset %zu",
                      err == json_tokener_continue
                          ? "the document ends early"
                          : json_tokener_error_desc(err),
                      json_tokener_get_parse_end(tok));
    goto err_free_tokener;
  }
  size_t end = json_tokener_get_parse_end(tok);
  while (end < size && (json[end] == ' ' || json[end] == '\n' ||
                        json[end] == '\r' || json[end] == '\t' ||
                        json[end] == '\0')) {
    ++end;
  }
  if (end < size) {
    st = FORMAT_ERROR("trailing bytes after the document at offset %zu", end);
    goto err_put_root;
  }
  st = parse_root(root, t);

err_put_root:
  json_object_put(root);
err_free_tokener:
  json_tokener_free(tok);
  return st;
}

#else  // !ACCEL_HAVE_JSON_C

accel_status_t accel_topo_parse_json(const char *json, size_t size,
                                     accel_topology_t *t) {
  return accel_error(ACCEL_ERROR_UNSUPPORTED,
                     "topology json: accel was built without json-c, so "
                     "serialized topologies cannot be read here");
}

#endif  // ACCEL_HAVE_JSON_C
