// Topology: loading hwloc XML fixtures, synthetic strings and the live
// machine; path classes, distances, nearest NICs and NUMA placement checked
// against what each fixture's layout implies (tests/data/topo/
// make_fixtures.py); the JSON form and its reading back; errors.
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accel_config.h"
#include "test_support.h"
#include "core/driver.h"
#include "core/runtime_impl.h"
#include "core/driver_device.h"
#include "runtime/runtime_impl.h"
#include "topo/topology_impl.h"

#ifndef ACCEL_HAVE_JSON_C
#define ACCEL_HAVE_JSON_C 0
#endif
#if ACCEL_HAVE_JSON_C
#include <json-c/json.h>
#endif

#define FIXTURE(name) ACCEL_TOPO_DATA_DIR "/" name

static accel_topology_t *load_xml(const char *path) {
  accel_topology_options_t opts;
  accel_topology_options_init(&opts);
  opts.xml_path = path;
  opts.flags = ACCEL_TOPOLOGY_LOAD_IGNORE_ENV;
  accel_topology_t *t = NULL;
  assert_accel_ok(accel_topology_load(&opts, &t));
  assert_non_null(t);
  return t;
}

static void summary_of(const accel_topology_t *t, accel_topology_summary_t *s) {
  memset(s, 0, sizeof(*s));
  s->struct_size = sizeof(*s);
  assert_accel_ok(accel_topology_summary(t, s));
}

static accel_topology_device_info_t device_of(const accel_topology_t *t,
                                              uint32_t i) {
  accel_topology_device_info_t d;
  memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  assert_accel_ok(accel_topology_device_info(t, i, &d));
  return d;
}

static accel_topology_nic_info_t nic_of(const accel_topology_t *t,
                                        uint32_t i) {
  accel_topology_nic_info_t n;
  memset(&n, 0, sizeof(n));
  n.struct_size = sizeof(n);
  assert_accel_ok(accel_topology_nic_info(t, i, &n));
  return n;
}

static accel_topology_path_t path_of(const accel_topology_t *t, uint32_t a,
                                     uint32_t b) {
  accel_topology_path_t p;
  assert_accel_ok(accel_topology_path_between(t, a, b, &p));
  return p;
}

static uint32_t distance_of(const accel_topology_t *t, uint32_t a,
                            uint32_t b) {
  uint32_t d;
  assert_accel_ok(accel_topology_distance(t, a, b, &d));
  return d;
}

// Text of |format| as a malloc'ed string.
static char *format_of(const accel_topology_t *t,
                       accel_topology_format_kind_t format) {
  size_t length = 0;
  assert_accel_ok(accel_topology_format(t, format, NULL, 0, &length));
  char *text = malloc(length + 1);
  assert_non_null(text);
  size_t again = 0;
  assert_accel_ok(accel_topology_format(t, format, text, length + 1, &again));
  assert_int_equal(again, length);
  assert_int_equal(strlen(text), length);
  return text;
}

static bool has_note(const accel_topology_t *t, const char *prefix) {
  accel_topology_summary_t s;
  summary_of(t, &s);
  for (uint32_t i = 0; i < s.note_count; ++i) {
    const char *note = NULL;
    assert_accel_ok(accel_topology_note(t, i, &note));
    if (strncmp(note, prefix, strlen(prefix)) == 0) {
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------
// The 2-socket, 8-GPU, 4-switch server. Reference layout: GPU g sits on
// switch g/2, NIC k on switch k; switches 0-1 belong to socket 0 (NUMA 0,
// cpus 0-7,16-23), switches 2-3 to socket 1 (NUMA 1, cpus 8-15,24-31).
// ---------------------------------------------------------------------------

enum { DGX_GPUS = 8, DGX_NICS = 4 };

static uint32_t dgx_switch(uint32_t endpoint) {
  return endpoint < DGX_GPUS ? endpoint / 2 : endpoint - DGX_GPUS;
}

static accel_topology_path_t dgx_expected_path(uint32_t a, uint32_t b) {
  if (a == b) {
    return ACCEL_TOPOLOGY_PATH_X;
  }
  if (dgx_switch(a) == dgx_switch(b)) {
    return ACCEL_TOPOLOGY_PATH_PIX;
  }
  if (dgx_switch(a) / 2 == dgx_switch(b) / 2) {
    return ACCEL_TOPOLOGY_PATH_NODE;
  }
  return ACCEL_TOPOLOGY_PATH_SYS;
}

// Links in the fixture's tree: endpoint -> downstream port -> upstream port
// (2 links) reach the switch; -> host bridge -> package (2 more) reach the
// socket; -> machine (1 more) crosses sockets.
static uint32_t dgx_expected_distance(uint32_t a, uint32_t b) {
  switch (dgx_expected_path(a, b)) {
    case ACCEL_TOPOLOGY_PATH_X:
      return 0;
    case ACCEL_TOPOLOGY_PATH_PIX:
      return 4;
    case ACCEL_TOPOLOGY_PATH_NODE:
      return 8;
    default:
      return 10;
  }
}

// The summary and every device and NIC match the fixture.
static void test_dgx_devices_and_nics_match_fixture(void **state) {
  accel_topology_t *t = load_xml(FIXTURE("dgx_2s8g.xml"));
  accel_topology_summary_t s;
  summary_of(t, &s);
  assert_int_equal(s.package_count, 2);
  assert_int_equal(s.numa_node_count, 2);
  assert_int_equal(s.core_count, 16);
  assert_int_equal(s.pu_count, 32);
  assert_int_equal(s.device_count, DGX_GPUS);
  assert_int_equal(s.nic_count, DGX_NICS);
  assert_int_equal(s.memory_bytes, 512ull << 30);
  assert_string_equal(s.hostname, "dgx-fixture");
  assert_string_equal(s.source, "xml:" FIXTURE("dgx_2s8g.xml"));
  assert_true(has_note(t, "libibverbs, libdrm: not queried"));
  static const unsigned k_base[4] = {0x10, 0x30, 0x90, 0xb0};
  for (uint32_t g = 0; g < DGX_GPUS; ++g) {
    accel_topology_device_info_t d = device_of(t, g);
    char name[16], bus[32];
    snprintf(name, sizeof(name), "cuda%u", g);  // CoProc wins over DRM names
    snprintf(bus, sizeof(bus), "0000:%02x:00.0", k_base[g / 2] + 2 + g % 2);
    assert_int_equal(d.index, g);
    assert_string_equal(d.name, name);
    assert_string_equal(d.pci_bus_id, bus);
    assert_int_equal(d.vendor_id, 0x10de);
    assert_int_equal(d.device_id, 0x2330);
    assert_int_equal(d.class_id, 0x0302);
    assert_int_equal(d.numa_node, (int32_t)(g / 4));
    assert_string_equal(d.cpus, g < 4 ? "0-7,16-23" : "8-15,24-31");
    assert_string_equal(d.model, "GH100 [H100 SXM5 80GB]");
    snprintf(name, sizeof(name), "card%u", g + 1);
    assert_string_equal(d.drm_primary, name);
    snprintf(name, sizeof(name), "renderD%u", 128 + g);
    assert_string_equal(d.drm_render, name);
    assert_string_equal(d.accel_node, "");
  }
  for (uint32_t k = 0; k < DGX_NICS; ++k) {
    accel_topology_nic_info_t n = nic_of(t, k);
    char name[16], bus[32];
    snprintf(name, sizeof(name), "mlx5_%u", k);
    snprintf(bus, sizeof(bus), "0000:%02x:00.0", k_base[k] + 4);
    assert_string_equal(n.name, name);
    assert_string_equal(n.pci_bus_id, bus);
    assert_int_equal(n.class_id, 0x0207);
    assert_int_equal(n.numa_node, (int32_t)(k / 2));
    assert_true(n.rdma);
    snprintf(name, sizeof(name), "ib%u", k);
    assert_string_equal(n.netdev, name);
    assert_int_equal(n.port_count, 1);
    accel_topology_port_info_t p;
    memset(&p, 0, sizeof(p));
    p.struct_size = sizeof(p);
    assert_accel_ok(accel_topology_nic_port(t, k, 0, &p));
    assert_int_equal(p.port_num, 1);
    assert_string_equal(p.state, "active");
    assert_string_equal(p.link_layer, "InfiniBand");
    assert_int_equal(p.lid, k + 1);
    assert_accel_status(accel_topology_nic_port(t, k, 1, &p),
                        ACCEL_ERROR_INVALID_ARGUMENT);
  }
  accel_topology_destroy(t);
}

// Every pair's path class and distance follow from the switch layout.
static void test_dgx_matrix_follows_switch_layout(void **state) {
  accel_topology_t *t = load_xml(FIXTURE("dgx_2s8g.xml"));
  for (uint32_t a = 0; a < DGX_GPUS + DGX_NICS; ++a) {
    for (uint32_t b = 0; b < DGX_GPUS + DGX_NICS; ++b) {
      if (path_of(t, a, b) != dgx_expected_path(a, b)) {
        print_error("endpoints %u, %u: %s, expected %s\n", a, b,
                    accel_topology_path_name(path_of(t, a, b)),
                    accel_topology_path_name(dgx_expected_path(a, b)));
      }
      assert_int_equal(path_of(t, a, b), dgx_expected_path(a, b));
      assert_int_equal(distance_of(t, a, b), dgx_expected_distance(a, b));
    }
  }
  accel_topology_path_t p;
  assert_accel_status(accel_topology_path_between(t, 12, 0, &p),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_topology_path_between(t, 0, 12, &p),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_topology_destroy(t);
}

// Each GPU's nearest NIC is the one on its switch, then the other NIC of its
// socket, then the far socket's NICs in index order.
static void test_dgx_nearest_nics_start_on_the_same_switch(void **state) {
  accel_topology_t *t = load_xml(FIXTURE("dgx_2s8g.xml"));
  for (uint32_t g = 0; g < DGX_GPUS; ++g) {
    uint32_t order[DGX_NICS] = {0}, count = 0;
    assert_accel_ok(accel_topology_nearest_nics(t, g, DGX_NICS, order, &count));
    assert_int_equal(count, DGX_NICS);
    uint32_t own = g / 2, sibling = own ^ 1u;
    uint32_t far0 = own < 2 ? 2 : 0;
    assert_int_equal(order[0], own);
    assert_int_equal(order[1], sibling);
    assert_int_equal(order[2], far0);
    assert_int_equal(order[3], far0 + 1);
    // A short buffer gets the nearest ones; the count says how many exist.
    uint32_t first = 99;
    assert_accel_ok(accel_topology_nearest_nics(t, g, 1, &first, &count));
    assert_int_equal(first, own);
    assert_int_equal(count, DGX_NICS);
    assert_accel_ok(accel_topology_nearest_nics(t, g, 0, NULL, &count));
    assert_int_equal(count, DGX_NICS);
  }
  uint32_t count = 0;
  assert_accel_status(accel_topology_nearest_nics(t, DGX_GPUS, 0, NULL, &count),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_topology_destroy(t);
}

// NUMA nodes, their CPUs and hwloc's distance matrix; placement by bus id.
static void test_dgx_numa_placement(void **state) {
  accel_topology_t *t = load_xml(FIXTURE("dgx_2s8g.xml"));
  for (int32_t node = 0; node < 2; ++node) {
    int32_t os = -1;
    uint64_t mem = 0;
    assert_accel_ok(accel_topology_numa_node(t, (uint32_t)node, &os, &mem));
    assert_int_equal(os, node);
    assert_int_equal(mem, 256ull << 30);
    uint32_t cpus[64], count = 0;
    assert_accel_ok(accel_topology_numa_cpus(t, node, 64, cpus, &count));
    assert_int_equal(count, 16);
    for (uint32_t i = 0; i < count; ++i) {
      // Reference: node n holds cores n*8..n*8+7 and their SMT siblings +16.
      uint32_t expected = i < 8 ? (uint32_t)node * 8 + i
                                : 16 + (uint32_t)node * 8 + (i - 8);
      assert_int_equal(cpus[i], expected);
    }
    cpu_set_t set;
    assert_accel_ok(accel_topo_numa_cpuset(t, node, &set));
    assert_int_equal(CPU_COUNT(&set), 16);
    assert_true(CPU_ISSET(16 + (unsigned)node * 8, &set));
  }
  uint32_t d = 0;
  bool measured = false;
  assert_accel_ok(accel_topology_numa_distance(t, 0, 1, &d, &measured));
  assert_int_equal(d, 21);
  assert_true(measured);
  assert_accel_ok(accel_topology_numa_distance(t, 1, 1, &d, NULL));
  assert_int_equal(d, 10);
  assert_accel_status(accel_topology_numa_distance(t, 0, 2, &d, NULL),
                      ACCEL_ERROR_NOT_FOUND);
  uint32_t count = 0;
  assert_accel_status(accel_topology_numa_cpus(t, 5, 0, NULL, &count),
                      ACCEL_ERROR_NOT_FOUND);
  int32_t node = -7;
  assert_accel_ok(accel_topology_pci_numa_node(t, "0000:b3:00.0", &node));
  assert_int_equal(node, 1);
  assert_accel_ok(accel_topology_pci_numa_node(t, "B3:00.0", &node));
  assert_int_equal(node, 1);
  assert_accel_ok(accel_topology_pci_numa_node(t, "0000:14:00.0", &node));
  assert_int_equal(node, 0);
  node = -7;
  assert_accel_status(accel_topology_pci_numa_node(t, "0000:77:00.0", &node),
                      ACCEL_ERROR_NOT_FOUND);
  assert_accel_status(accel_topology_pci_numa_node(t, "not-a-bus", &node),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_topology_pci_numa_node(t, "0000:00:20.0", &node),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_int_equal(node, -7);  // outputs untouched on failure
  accel_topology_destroy(t);
}

// The matrix text has one row per endpoint with the expected classes and
// affinities.
static void test_dgx_matrix_text(void **state) {
  accel_topology_t *t = load_xml(FIXTURE("dgx_2s8g.xml"));
  char *text = format_of(t, ACCEL_TOPOLOGY_FORMAT_MATRIX);
  assert_non_null(strstr(text, "cuda0   X       PIX     NODE    NODE    SYS"
                               "     SYS     SYS     SYS     PIX     NODE    "
                               "SYS     SYS     0-7,16-23           0\n"));
  assert_non_null(strstr(text, "mlx5_3  SYS     SYS     SYS     SYS     NODE"
                               "    NODE    PIX     PIX     SYS     SYS     "
                               "NODE    X       8-15,24-31          1\n"));
  assert_non_null(strstr(text, "  node 1: 262144 MiB, cpus 8-15,24-31, "
                               "distances 21 10\n"));
  free(text);
  text = format_of(t, ACCEL_TOPOLOGY_FORMAT_TREE);
  assert_non_null(strstr(text, "Machine dgx-fixture (512 GiB, cpus 0-31)\n"));
  assert_non_null(strstr(text, "    NUMANode P#1 (256 GiB, cpus 8-15,24-31)"));
  assert_non_null(strstr(text, "      8 cores, 16 PUs (cpus 0-7,16-23)\n"));
  assert_non_null(strstr(text, "= device cuda7\n"));
  assert_non_null(strstr(text, "= nic mlx5_2\n"));
  free(text);
  accel_topology_destroy(t);
}

// ---------------------------------------------------------------------------
// The 1-socket workstation: PXB, PHB and NODE, naming without CoProc,
// a processing accelerator, an NVMe drive that is not an accelerator.
// ---------------------------------------------------------------------------

static void test_one_socket_classes_and_names(void **state) {
  accel_topology_t *t = load_xml(FIXTURE("one_socket_1gpu.xml"));
  accel_topology_summary_t s;
  summary_of(t, &s);
  assert_int_equal(s.package_count, 1);
  assert_int_equal(s.device_count, 2);  // the GPU and the NPU; not the NVMe
  assert_int_equal(s.nic_count, 2);
  accel_topology_device_info_t gpu = device_of(t, 0), npu = device_of(t, 1);
  assert_string_equal(gpu.name, "nvml0");  // a GPU osdev that is not DRM
  assert_string_equal(gpu.pci_bus_id, "0000:05:00.0");
  assert_int_equal(gpu.class_id, 0x0300);
  assert_string_equal(gpu.drm_primary, "card0");
  assert_string_equal(gpu.drm_render, "renderD128");
  assert_string_equal(npu.name, "accel1");  // no OS device: named by index
  assert_int_equal(npu.class_id, 0x1200);
  assert_string_equal(npu.model, "Fixture NPU");
  assert_int_equal(gpu.numa_node, 0);
  assert_int_equal(npu.numa_node, 0);
  accel_topology_nic_info_t n0 = nic_of(t, 0), n1 = nic_of(t, 1);
  assert_string_equal(n0.name, "mlx5_0");
  assert_string_equal(n0.netdev, "enp6s0f0np0");
  assert_string_equal(n1.name, "mlx5_1");
  assert_string_equal(n1.netdev, "");
  // Endpoints: 0 GPU, 1 NPU, 2 mlx5_0, 3 mlx5_1.
  assert_int_equal(path_of(t, 0, 2), ACCEL_TOPOLOGY_PATH_PXB);
  assert_int_equal(path_of(t, 0, 3), ACCEL_TOPOLOGY_PATH_PHB);
  assert_int_equal(path_of(t, 0, 1), ACCEL_TOPOLOGY_PATH_NODE);
  assert_int_equal(path_of(t, 2, 3), ACCEL_TOPOLOGY_PATH_PHB);
  assert_int_equal(path_of(t, 1, 3), ACCEL_TOPOLOGY_PATH_NODE);
  // GPU -> 04:00.0 -> 03:00.0 -> 02:00.0 -> 01:00.0 (common) <- 02:01.0 <-
  // NIC: 4 + 2 links.
  assert_int_equal(distance_of(t, 0, 2), 6);
  uint32_t order[2], count = 0;
  assert_accel_ok(accel_topology_nearest_nics(t, 0, 2, order, &count));
  assert_int_equal(order[0], 0);  // PXB beats PHB
  assert_int_equal(order[1], 1);
  assert_accel_ok(accel_topology_nearest_nics(t, 1, 2, order, &count));
  // Both NODE: the shorter path wins. NPU -> host bridge 1 -> package (2
  // links); mlx5_1 -> 00:02.0 -> host bridge 0 -> package (3); mlx5_0 sits 5
  // links below the package.
  assert_int_equal(distance_of(t, 1, 3), 5);
  assert_int_equal(distance_of(t, 1, 2), 7);
  assert_int_equal(order[0], 1);
  assert_int_equal(order[1], 0);
  uint32_t d = 0;
  bool measured = true;
  assert_accel_ok(accel_topology_numa_distance(t, 0, 0, &d, &measured));
  assert_int_equal(d, 10);
  assert_false(measured);  // the fixture has no distance matrix
  accel_topology_destroy(t);
}

// ---------------------------------------------------------------------------
// No PCI devices; 4 NUMA nodes in 2 packages.
// ---------------------------------------------------------------------------

static void test_no_pci_has_numa_but_no_endpoints(void **state) {
  accel_topology_t *t = load_xml(FIXTURE("no_pci.xml"));
  accel_topology_summary_t s;
  summary_of(t, &s);
  assert_int_equal(s.device_count, 0);
  assert_int_equal(s.nic_count, 0);
  assert_int_equal(s.numa_node_count, 4);
  assert_int_equal(s.pu_count, 16);
  for (int32_t a = 0; a < 4; ++a) {
    uint32_t cpus[8], count = 0;
    assert_accel_ok(accel_topology_numa_cpus(t, a, 8, cpus, &count));
    assert_int_equal(count, 4);
    assert_int_equal(cpus[0], (uint32_t)a * 4);
    assert_int_equal(cpus[3], (uint32_t)a * 4 + 3);
    for (int32_t b = 0; b < 4; ++b) {
      uint32_t d = 0;
      assert_accel_ok(accel_topology_numa_distance(t, a, b, &d, NULL));
      assert_int_equal(d, a == b ? 10 : (a / 2 == b / 2 ? 12 : 32));
    }
  }
  uint32_t count = 0;
  assert_accel_status(accel_topology_nearest_nics(t, 0, 0, NULL, &count),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_topology_path_t p;
  assert_accel_status(accel_topology_path_between(t, 0, 0, &p),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  char *text = format_of(t, ACCEL_TOPOLOGY_FORMAT_MATRIX);
  assert_non_null(strstr(text, "No accelerators or NICs found.\n"));
  assert_non_null(strstr(text, "  node 2: 32768 MiB, cpus 8-11, distances 32 "
                               "32 10 12\n"));
  free(text);
  accel_topology_destroy(t);
}

// ---------------------------------------------------------------------------
// This machine, exported with lstopo: a virtio NIC, no accelerator.
// ---------------------------------------------------------------------------

static void test_this_machine_fixture(void **state) {
  accel_topology_t *t = load_xml(FIXTURE("this_machine.xml"));
  accel_topology_summary_t s;
  summary_of(t, &s);
  assert_int_equal(s.device_count, 0);
  assert_int_equal(s.nic_count, 1);
  assert_int_equal(s.numa_node_count, 1);
  assert_string_equal(s.hostname, "vm");
  accel_topology_nic_info_t n = nic_of(t, 0);
  assert_string_equal(n.name, "eth0");  // no RDMA device: the netdev names it
  assert_false(n.rdma);
  assert_int_equal(n.port_count, 0);
  assert_int_equal(n.numa_node, 0);  // I/O at machine level, one node
  assert_string_equal(n.cpus, "0-1");
  assert_int_equal(path_of(t, 0, 0), ACCEL_TOPOLOGY_PATH_X);
  accel_topology_destroy(t);
}

// ---------------------------------------------------------------------------
// Synthetic descriptions, the environment override, and the live machine.
// ---------------------------------------------------------------------------

static void test_synthetic_and_env_override(void **state) {
  accel_topology_options_t opts;
  accel_topology_options_init(&opts);
  opts.synthetic = "pack:2 [numa] core:3 pu:2";
  opts.flags = ACCEL_TOPOLOGY_LOAD_IGNORE_ENV;
  accel_topology_t *t = NULL;
  assert_accel_ok(accel_topology_load(&opts, &t));
  accel_topology_summary_t s;
  summary_of(t, &s);
  assert_int_equal(s.package_count, 2);
  assert_int_equal(s.numa_node_count, 2);
  assert_int_equal(s.core_count, 6);
  assert_int_equal(s.pu_count, 12);
  assert_int_equal(s.device_count, 0);
  assert_string_equal(s.source, "synthetic:pack:2 [numa] core:3 pu:2");
  assert_true(has_note(t, "pci: a synthetic topology has no I/O devices"));
  uint32_t cpus[8], count = 0;
  assert_accel_ok(accel_topology_numa_cpus(t, 1, 8, cpus, &count));
  assert_int_equal(count, 6);
  assert_int_equal(cpus[0], 6);
  accel_topology_destroy(t);

  // ACCEL_TOPOLOGY_XML replaces the source unless IGNORE_ENV is given.
  assert_int_equal(setenv("ACCEL_TOPOLOGY_XML", FIXTURE("dgx_2s8g.xml"), 1), 0);
  opts.flags = 0;
  assert_accel_ok(accel_topology_load(&opts, &t));
  summary_of(t, &s);
  assert_int_equal(s.device_count, DGX_GPUS);
  accel_topology_destroy(t);
  opts.flags = ACCEL_TOPOLOGY_LOAD_IGNORE_ENV;
  assert_accel_ok(accel_topology_load(&opts, &t));
  summary_of(t, &s);
  assert_int_equal(s.device_count, 0);
  accel_topology_destroy(t);
  assert_int_equal(setenv("ACCEL_TOPOLOGY_XML", FIXTURE("missing.xml"), 1), 0);
  opts.flags = 0;
  assert_accel_status(accel_topology_load(&opts, &t), ACCEL_ERROR_NOT_FOUND);
  assert_int_equal(unsetenv("ACCEL_TOPOLOGY_XML"), 0);
}

// Random synthetic machines: counts, each NUMA node's CPUs (synthetic
// numbering is sequential) and the assumed distances follow from the
// description; the JSON form reads back to the same answers.
static void test_random_synthetic_machines(void **state) {
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int iter = 0; iter < 20; ++iter) {
    uint32_t packs = (uint32_t)test_rng_range(&rng, 1, 4);
    uint32_t cores = (uint32_t)test_rng_range(&rng, 1, 8);
    uint32_t pus = (uint32_t)test_rng_range(&rng, 1, 4);
    char desc[96];
    snprintf(desc, sizeof(desc), "pack:%u [numa] core:%u pu:%u", packs, cores,
             pus);
    accel_topology_options_t opts;
    accel_topology_options_init(&opts);
    opts.synthetic = desc;
    opts.flags = ACCEL_TOPOLOGY_LOAD_IGNORE_ENV;
    accel_topology_t *t = NULL;
    assert_accel_ok(accel_topology_load(&opts, &t));
    accel_topology_summary_t s;
    summary_of(t, &s);
    assert_int_equal(s.package_count, packs);
    assert_int_equal(s.numa_node_count, packs);
    assert_int_equal(s.core_count, packs * cores);
    assert_int_equal(s.pu_count, packs * cores * pus);
    uint32_t per_node = cores * pus;
    for (uint32_t n = 0; n < packs; ++n) {
      uint32_t cpus[32], count = 0;
      assert_accel_ok(
          accel_topology_numa_cpus(t, (int32_t)n, 32, cpus, &count));
      assert_int_equal(count, per_node);
      for (uint32_t i = 0; i < count; ++i) {
        assert_int_equal(cpus[i], n * per_node + i);
      }
      uint32_t d = 0;
      bool measured = true;
      assert_accel_ok(accel_topology_numa_distance(
          t, (int32_t)n, (int32_t)((n + 1) % packs), &d, &measured));
      assert_int_equal(d, packs == 1 ? 10 : 20);
      assert_false(measured);
    }
#if ACCEL_HAVE_JSON_C
    char *json = format_of(t, ACCEL_TOPOLOGY_FORMAT_JSON);
    accel_topology_t *back = NULL;
    assert_accel_ok(accel_topology_deserialize(json, strlen(json), &back));
    accel_topology_summary_t sb;
    summary_of(back, &sb);
    assert_int_equal(sb.pu_count, s.pu_count);
    assert_int_equal(sb.numa_node_count, s.numa_node_count);
    char *m1 = format_of(t, ACCEL_TOPOLOGY_FORMAT_MATRIX);
    char *m2 = format_of(back, ACCEL_TOPOLOGY_FORMAT_MATRIX);
    assert_string_equal(m1, m2);
    free(m1);
    free(m2);
    free(json);
    accel_topology_destroy(back);
#endif
    accel_topology_destroy(t);
  }
}

// The live machine loads; libibverbs, libdrm and /dev/accel each either find
// devices or say in a note that there are none (here: ENOSYS, no /dev/dri,
// no /dev/accel), and loading carries on.
static void test_live_load_degrades_cleanly(void **state) {
  accel_topology_options_t opts;
  accel_topology_options_init(&opts);
  opts.flags = ACCEL_TOPOLOGY_LOAD_IGNORE_ENV;
  accel_topology_t *t = NULL;
  assert_accel_ok(accel_topology_load(&opts, &t));
  accel_topology_summary_t s;
  summary_of(t, &s);
  assert_string_equal(s.source, "live");
  assert_true(s.pu_count >= 1);
  assert_true(s.numa_node_count >= 1);
  assert_int_equal((long)s.pu_count, sysconf(_SC_NPROCESSORS_CONF));
  bool any_rdma = false;
  for (uint32_t i = 0; i < s.nic_count; ++i) {
    any_rdma = any_rdma || nic_of(t, i).rdma;
  }
  if (!any_rdma) {
    assert_true(has_note(t, "libibverbs: "));
  }
  if (access("/dev/dri", F_OK) != 0) {
    assert_true(has_note(t, "libdrm: no DRM devices"));
  }
  if (access("/sys/class/accel", F_OK) != 0) {
    assert_true(has_note(t, "/dev/accel: no accel devices"));
  }
  accel_topology_destroy(t);

  // The enumerators alone, on an empty topology: success and a note.
  accel_topology_t *empty = calloc(1, sizeof(*empty));
  assert_non_null(empty);
  assert_accel_ok(accel_topo_enumerate_verbs(empty));
  assert_accel_ok(accel_topo_enumerate_drm(empty));
  assert_true(empty->note_count >= 2);
  accel_topo_free(empty);

  // NO_IO: CPUs and memory only.
  opts.flags |= ACCEL_TOPOLOGY_LOAD_NO_IO;
  assert_accel_ok(accel_topology_load(&opts, &t));
  summary_of(t, &s);
  assert_int_equal(s.device_count + s.nic_count, 0);
  assert_true(has_note(t, "pci: not discovered"));
  accel_topology_destroy(t);
}

// ---------------------------------------------------------------------------
// Errors.
// ---------------------------------------------------------------------------

static char *write_temp(const char *content) {
  char *path = strdup("/tmp/accel-topo-test-XXXXXX");
  assert_non_null(path);
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  size_t n = strlen(content);
  assert_int_equal(write(fd, content, n), (ssize_t)n);
  close(fd);
  return path;
}

static void expect_xml_error(const char *content, accel_status_t code) {
  char *path = write_temp(content);
  accel_topology_options_t opts;
  accel_topology_options_init(&opts);
  opts.xml_path = path;
  opts.flags = ACCEL_TOPOLOGY_LOAD_IGNORE_ENV;
  accel_topology_t *t = (accel_topology_t *)0x1;
  assert_accel_status(accel_topology_load(&opts, &t), code);
  assert_ptr_equal(t, (accel_topology_t *)0x1);
  assert_non_null(strstr(accel_last_error(), path));  // names the file
  unlink(path);
  free(path);
}

// Missing files, directories and malformed XML fail with clear messages.
static void test_load_errors_name_the_problem(void **state) {
  accel_topology_options_t opts;
  accel_topology_options_init(&opts);
  opts.flags = ACCEL_TOPOLOGY_LOAD_IGNORE_ENV;
  accel_topology_t *t = NULL;
  opts.xml_path = "/nonexistent/topology.xml";
  assert_accel_status(accel_topology_load(&opts, &t), ACCEL_ERROR_NOT_FOUND);
  assert_non_null(strstr(accel_last_error(), "/nonexistent/topology.xml"));
  assert_non_null(strstr(accel_last_error(), "No such file"));
  opts.xml_path = "/tmp";
  assert_accel_status(accel_topology_load(&opts, &t), ACCEL_ERROR_IO);
  assert_non_null(strstr(accel_last_error(), "is a directory"));
  expect_xml_error("this is not xml at all", ACCEL_ERROR_FORMAT);
  expect_xml_error("", ACCEL_ERROR_FORMAT);
  expect_xml_error("<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n"
                   "  <object type=\"Machine\"",
                   ACCEL_ERROR_FORMAT);
  expect_xml_error("<?xml version=\"1.0\"?>\n<notatopology/>\n",
                   ACCEL_ERROR_FORMAT);
  opts.xml_path = NULL;
  opts.synthetic = "pack:two core:x";
  assert_accel_status(accel_topology_load(&opts, &t), ACCEL_ERROR_FORMAT);
  assert_non_null(strstr(accel_last_error(), "pack:two core:x"));
  opts.xml_path = FIXTURE("dgx_2s8g.xml");
  assert_accel_status(accel_topology_load(&opts, &t),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "choose one"));
  opts.synthetic = NULL;
  opts.flags = 1u << 20;
  assert_accel_status(accel_topology_load(&opts, &t),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "unknown flags"));
  opts.flags = 0;
  opts.struct_size = 4;
  assert_accel_status(accel_topology_load(&opts, &t),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_topology_load(NULL, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
}

// Every query rejects NULL arguments and too-small structs.
static void test_queries_validate_arguments(void **state) {
  accel_topology_t *t = load_xml(FIXTURE("dgx_2s8g.xml"));
  accel_topology_summary_t s = {.struct_size = 4};
  assert_accel_status(accel_topology_summary(t, &s),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_topology_summary(NULL, &s),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_topology_device_info_t d = {.struct_size = 8};
  assert_accel_status(accel_topology_device_info(t, 0, &d),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  d.struct_size = sizeof(d);
  assert_accel_status(accel_topology_device_info(t, 8, &d),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_topology_device_info(t, 0, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_topology_nic_info_t n = {.struct_size = sizeof(n)};
  assert_accel_status(accel_topology_nic_info(t, 4, &n),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  // An older caller's smaller struct gets the fields it knows, no more.
  struct {
    accel_topology_device_info_t info;
    char guard[8];
  } small;
  memset(&small, 0x5a, sizeof(small));
  small.info.struct_size = offsetof(accel_topology_device_info_t, accel_node);
  assert_accel_ok(accel_topology_device_info(t, 3, &small.info));
  assert_string_equal(small.info.name, "cuda3");
  assert_int_equal((unsigned char)small.info.accel_node[0], 0x5a);
  const char *note = NULL;
  assert_accel_status(accel_topology_note(t, 99, &note),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  uint32_t dist;
  assert_accel_status(accel_topology_distance(t, 0, 0, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_topology_distance(NULL, 0, 0, &dist),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_topology_numa_node(t, 2, NULL, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  uint32_t count;
  assert_accel_status(accel_topology_numa_cpus(t, 0, 4, NULL, &count),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_topology_deserialize(NULL, 0, &t),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  // Format: size query, exact fit, one byte short.
  size_t length = 0;
  assert_accel_status(accel_topology_format(t, (accel_topology_format_kind_t)9,
                                            NULL, 0, &length),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_ok(accel_topology_format(t, ACCEL_TOPOLOGY_FORMAT_JSON, NULL, 0,
                                        &length));
  char *buf = malloc(length + 1);
  assert_non_null(buf);
  size_t got = 0;
  assert_accel_status(accel_topology_format(t, ACCEL_TOPOLOGY_FORMAT_JSON, buf,
                                            length, &got),
                      ACCEL_ERROR_OUT_OF_MEMORY);
  assert_int_equal(got, length);
  assert_accel_ok(accel_topology_format(t, ACCEL_TOPOLOGY_FORMAT_JSON, buf,
                                        length + 1, &got));
  assert_int_equal(buf[length], '\0');
  free(buf);
  assert_string_equal(accel_topology_path_name(ACCEL_TOPOLOGY_PATH_NODE),
                      "NODE");
  assert_string_equal(accel_topology_path_name((accel_topology_path_t)17), "?");
  accel_topology_destroy(t);
  accel_topology_destroy(NULL);
}

// ---------------------------------------------------------------------------
// The JSON form.
// ---------------------------------------------------------------------------

#if ACCEL_HAVE_JSON_C

static const char *k_fixtures[] = {"dgx_2s8g.xml", "one_socket_1gpu.xml",
                                   "no_pci.xml", "this_machine.xml"};

// The JSON is valid and holds what the issue asks for, by name.
static void test_json_holds_devices_nics_and_paths(void **state) {
  accel_topology_t *t = load_xml(FIXTURE("dgx_2s8g.xml"));
  char *text = format_of(t, ACCEL_TOPOLOGY_FORMAT_JSON);
  json_object *root = json_tokener_parse(text);
  assert_non_null(root);
  json_object *devices, *nics, *paths, *v;
  assert_true(json_object_object_get_ex(root, "devices", &devices));
  assert_true(json_object_object_get_ex(root, "nics", &nics));
  assert_true(json_object_object_get_ex(root, "paths", &paths));
  assert_int_equal(json_object_array_length(devices), DGX_GPUS);
  assert_int_equal(json_object_array_length(nics), DGX_NICS);
  for (uint32_t g = 0; g < DGX_GPUS; ++g) {
    json_object *dev = json_object_array_get_idx(devices, g), *nearest;
    assert_true(json_object_object_get_ex(dev, "numa_node", &v));
    assert_int_equal(json_object_get_int(v), (int)(g / 4));
    assert_true(json_object_object_get_ex(dev, "nearest_nics", &nearest));
    char expected[16];
    snprintf(expected, sizeof(expected), "mlx5_%u", g / 2);
    assert_string_equal(
        json_object_get_string(json_object_array_get_idx(nearest, 0)),
        expected);
    assert_true(json_object_object_get_ex(dev, "pci_bus_id", &v));
    assert_int_equal(strlen(json_object_get_string(v)), 12);
  }
  for (uint32_t a = 0; a < DGX_GPUS + DGX_NICS; ++a) {
    json_object *row;
    assert_true(json_object_object_get_ex(
        paths,
        a < DGX_GPUS ? device_of(t, a).name : nic_of(t, a - DGX_GPUS).name,
        &row));
    for (uint32_t b = 0; b < DGX_GPUS + DGX_NICS; ++b) {
      assert_true(json_object_object_get_ex(
          row,
          b < DGX_GPUS ? device_of(t, b).name : nic_of(t, b - DGX_GPUS).name,
          &v));
      assert_string_equal(json_object_get_string(v),
                          accel_topology_path_name(dgx_expected_path(a, b)));
    }
  }
  json_object_put(root);
  free(text);
  accel_topology_destroy(t);
}

// Reading the JSON back answers every query as the original did, and writing
// it again gives the same text (but the source).
static void test_json_round_trip_preserves_every_query(void **state) {
  for (size_t f = 0; f < sizeof(k_fixtures) / sizeof(k_fixtures[0]); ++f) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", ACCEL_TOPO_DATA_DIR, k_fixtures[f]);
    accel_topology_t *t = load_xml(path);
    char *json = format_of(t, ACCEL_TOPOLOGY_FORMAT_JSON);
    accel_topology_t *back = NULL;
    assert_accel_ok(accel_topology_deserialize(json, strlen(json), &back));
    accel_topology_summary_t s, sb;
    summary_of(t, &s);
    summary_of(back, &sb);
    assert_string_equal(sb.source, "serialized");
    memcpy(sb.source, s.source, sizeof(s.source));
    assert_memory_equal(&s, &sb, sizeof(s));
    for (uint32_t i = 0; i < s.device_count; ++i) {
      accel_topology_device_info_t a = device_of(t, i), b = device_of(back, i);
      assert_memory_equal(&a, &b, sizeof(a));
    }
    for (uint32_t i = 0; i < s.nic_count; ++i) {
      accel_topology_nic_info_t a = nic_of(t, i), b = nic_of(back, i);
      assert_memory_equal(&a, &b, sizeof(a));
    }
    uint32_t n = s.device_count + s.nic_count;
    for (uint32_t a = 0; a < n; ++a) {
      for (uint32_t b = 0; b < n; ++b) {
        assert_int_equal(path_of(t, a, b), path_of(back, a, b));
        assert_int_equal(distance_of(t, a, b), distance_of(back, a, b));
      }
    }
    for (uint32_t i = 0; i < s.numa_node_count; ++i) {
      int32_t os = 0;
      assert_accel_ok(accel_topology_numa_node(t, i, &os, NULL));
      uint32_t c1[256], c2[256], n1 = 0, n2 = 0;
      assert_accel_ok(accel_topology_numa_cpus(t, os, 256, c1, &n1));
      assert_accel_ok(accel_topology_numa_cpus(back, os, 256, c2, &n2));
      assert_int_equal(n1, n2);
      assert_memory_equal(c1, c2, n1 * sizeof(c1[0]));
    }
    char *m1 = format_of(t, ACCEL_TOPOLOGY_FORMAT_MATRIX);
    char *m2 = format_of(back, ACCEL_TOPOLOGY_FORMAT_MATRIX);
    assert_string_equal(m1, m2);
    char *t1 = format_of(t, ACCEL_TOPOLOGY_FORMAT_TREE);
    char *t2 = format_of(back, ACCEL_TOPOLOGY_FORMAT_TREE);
    assert_string_equal(t1, t2);
    char *json2 = format_of(back, ACCEL_TOPOLOGY_FORMAT_JSON);
    const char *src1 = strstr(json, "\"machine\"");
    const char *src2 = strstr(json2, "\"machine\"");
    assert_non_null(src1);
    assert_non_null(src2);
    assert_string_equal(src1, src2);
    free(json2);
    free(t1);
    free(t2);
    free(m1);
    free(m2);
    free(json);
    accel_topology_destroy(back);
    accel_topology_destroy(t);
  }
}

static void expect_json_error(const char *json, accel_status_t code,
                              const char *fragment) {
  accel_topology_t *t = (accel_topology_t *)0x1;
  assert_accel_status(accel_topology_deserialize(json, strlen(json), &t), code);
  assert_ptr_equal(t, (accel_topology_t *)0x1);
  if (strstr(accel_last_error(), fragment) == NULL) {
    print_error("message \"%s\" lacks \"%s\"\n", accel_last_error(), fragment);
  }
  assert_non_null(strstr(accel_last_error(), fragment));
}

// Replaces the first |from| in |text| with |to| (a new string).
static char *replace(const char *text, const char *from, const char *to) {
  const char *at = strstr(text, from);
  assert_non_null(at);
  size_t n = strlen(text) - strlen(from) + strlen(to);
  char *out = malloc(n + 1);
  assert_non_null(out);
  size_t head = (size_t)(at - text);
  memcpy(out, text, head);
  strcpy(out + head, to);
  strcat(out, at + strlen(from));
  return out;
}

// Malformed, inconsistent and newer documents are rejected with messages
// that name the place; random truncations never crash and never succeed.
static void test_deserialize_rejects_bad_documents(void **state) {
  accel_topology_t *t = load_xml(FIXTURE("one_socket_1gpu.xml"));
  char *json = format_of(t, ACCEL_TOPOLOGY_FORMAT_JSON);
  accel_topology_destroy(t);
  expect_json_error("not json", ACCEL_ERROR_FORMAT, "not JSON");
  expect_json_error("[1, 2]", ACCEL_ERROR_FORMAT, "expected an object");
  expect_json_error("{\"format\": \"other\"}", ACCEL_ERROR_FORMAT,
                    "is not \"accel-topology\"");
  char *bad = replace(json, "\"version\": 1", "\"version\": 99");
  expect_json_error(bad, ACCEL_ERROR_VERSION, "version 99");
  free(bad);
  bad = replace(json, "\"mlx5_1\": {\"nvml0\"", "\"mlx5_9\": {\"nvml0\"");
  expect_json_error(bad, ACCEL_ERROR_FORMAT, "mlx5_9");
  free(bad);
  bad = replace(json, "\"nvml0\": {\"nvml0\": \"X\", \"accel1\": \"NODE\"",
                "\"nvml0\": {\"nvml0\": \"X\", \"accel1\": \"X\"");
  expect_json_error(bad, ACCEL_ERROR_FORMAT, "X is for an endpoint");
  free(bad);
  bad = replace(json, "\"numa_node\": 0", "\"numa_node\": \"zero\"");
  expect_json_error(bad, ACCEL_ERROR_FORMAT, "$.devices[0].numa_node");
  free(bad);
  bad = replace(json, "\"cpus\": \"0-3\"}", "\"cpus\": \"3-0\"}");
  expect_json_error(bad, ACCEL_ERROR_FORMAT, "cpu list");
  free(bad);
  bad = replace(json, "\"name\": \"accel1\"", "\"name\": \"nvml0\"");
  expect_json_error(bad, ACCEL_ERROR_FORMAT, "used twice");
  free(bad);
  size_t len = strlen(json);
  bad = malloc(len + 8);
  assert_non_null(bad);
  memcpy(bad, json, len);
  memcpy(bad + len, "{}", 3);
  expect_json_error(bad, ACCEL_ERROR_FORMAT, "trailing bytes");
  free(bad);

  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int i = 0; i < 200; ++i) {
    size_t cut = (size_t)test_rng_range(&rng, 0, len - 2);
    accel_topology_t *out = NULL;
    accel_status_t st = accel_topology_deserialize(json, cut, &out);
    if (st == ACCEL_OK) {
      print_error("truncation at %zu of %zu was accepted\n", cut, len);
    }
    assert_int_equal(st, ACCEL_ERROR_FORMAT);
    assert_null(out);
  }
  free(json);
}

#endif  // ACCEL_HAVE_JSON_C

// ---------------------------------------------------------------------------
// The runtime's use: host worker threads run on their NUMA node's cores.
// ---------------------------------------------------------------------------

static accel_status_t record_affinity(void *user_data) {
  cpu_set_t *out = user_data;
  CPU_ZERO(out);
  return pthread_getaffinity_np(pthread_self(), sizeof(*out), out) == 0
             ? ACCEL_OK
             : ACCEL_ERROR_INTERNAL;
}

// The CPUs a host stream's worker runs on, for a runtime created while this
// thread's affinity was |at_create| and the stream created while it was
// |at_stream| (a new thread inherits its creator's affinity, so a worker
// that was not bound shows |at_stream|).
static void worker_affinity(const cpu_set_t *at_create,
                            const cpu_set_t *at_stream, cpu_set_t *out) {
  cpu_set_t saved;
  assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof(saved),
                                          &saved),
                   0);
  assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(*at_create),
                                          at_create),
                   0);
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = NULL;
  assert_accel_ok(accel_runtime_create(NULL, &rt));
  assert_accel_ok(accel_device_get(rt, 0, &dev));
  assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(*at_stream),
                                          at_stream),
                   0);
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(dev, NULL, &s));
  assert_accel_ok(accel_stream_host_call(s, record_affinity, out));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  accel_stream_destroy(s);
  accel_runtime_destroy(rt);
  assert_int_equal(
      pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved), 0);
}

static void test_host_workers_are_bound_to_their_numa_node(void **state) {
  assert_non_null(accel_host_driver.device->set_affinity);
  cpu_set_t allowed;
  assert_int_equal(
      pthread_getaffinity_np(pthread_self(), sizeof(allowed), &allowed), 0);
  // The reference: NUMA node 0's CPUs from the live topology, within what
  // this process may use.
  accel_topology_options_t opts;
  accel_topology_options_init(&opts);
  opts.flags = ACCEL_TOPOLOGY_LOAD_IGNORE_ENV | ACCEL_TOPOLOGY_LOAD_NO_IO;
  accel_topology_t *topo = NULL;
  assert_accel_ok(accel_topology_load(&opts, &topo));
  int32_t node0 = -1;
  assert_accel_ok(accel_topology_numa_node(topo, 0, &node0, NULL));
  cpu_set_t expected;
  assert_accel_ok(accel_topo_numa_cpuset(topo, node0, &expected));
  accel_topology_destroy(topo);
  CPU_AND(&expected, &expected, &allowed);
  if (CPU_COUNT(&allowed) < 2 || CPU_COUNT(&expected) < 1) {
    skip();  // one CPU: bound and unbound look the same
  }
  // Runtime created on one CPU of the node: the worker is bound to it even
  // though the stream is created from a thread allowed everywhere.
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c) {
    first = CPU_ISSET(c, &expected) ? c : -1;
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  cpu_set_t seen;
  worker_affinity(&one, &allowed, &seen);
  assert_true(CPU_EQUAL(&seen, &one));
  // Unrestricted: the whole node.
  worker_affinity(&allowed, &allowed, &seen);
  assert_true(CPU_EQUAL(&seen, &expected));
  // ACCEL_AFFINITY=0: not bound, the worker inherits the creator's set.
  assert_int_equal(setenv("ACCEL_AFFINITY", "0", 1), 0);
  worker_affinity(&one, &allowed, &seen);
  assert_true(CPU_EQUAL(&seen, &allowed));
  assert_int_equal(unsetenv("ACCEL_AFFINITY"), 0);
}

// A backend whose device sits at a PCI bus id of this machine: the host
// driver with its device table's info and set_affinity replaced.
static char g_pci_bus_id[32];
static cpu_set_t g_pci_cpus;
static int g_pci_affinity_calls;

static void pci_device_info(accel_drv_device_t *device,
                            accel_device_info_t *info) {
  accel_host_driver.device->info(device, info);
  snprintf(info->pci_bus_id, sizeof(info->pci_bus_id), "%s", g_pci_bus_id);
  info->numa_node = -1;  // the backend does not know; the topology does
}

static void pci_device_set_affinity(accel_drv_device_t *device,
                                    const cpu_set_t *cpus) {
  g_pci_cpus = *cpus;
  g_pci_affinity_calls++;
}

// A device with a PCI bus id is placed on the NUMA node the live topology
// gives that bus id, and handed that node's CPUs.
static void test_runtime_places_pci_devices_by_bus_id(void **state) {
  accel_topology_options_t opts;
  accel_topology_options_init(&opts);
  opts.flags = ACCEL_TOPOLOGY_LOAD_IGNORE_ENV | ACCEL_TOPOLOGY_LOAD_NO_VERBS |
               ACCEL_TOPOLOGY_LOAD_NO_DRM;
  accel_topology_t *topo = NULL;
  assert_accel_ok(accel_topology_load(&opts, &topo));
  accel_topology_summary_t s;
  summary_of(topo, &s);
  // Any PCI endpoint of this machine with a known node will do.
  int32_t node = -1;
  for (uint32_t i = 0; i < s.device_count + s.nic_count && node < 0; ++i) {
    const char *bus = i < s.device_count
                          ? device_of(topo, i).pci_bus_id
                          : nic_of(topo, i - s.device_count).pci_bus_id;
    snprintf(g_pci_bus_id, sizeof(g_pci_bus_id), "%s", bus);
    assert_accel_ok(accel_topology_pci_numa_node(topo, bus, &node));
  }
  if (node < 0) {
    accel_topology_destroy(topo);
    skip();  // no placeable PCI device or NIC here
  }
  cpu_set_t expected, allowed;
  assert_accel_ok(accel_topo_numa_cpuset(topo, node, &expected));
  accel_topology_destroy(topo);
  assert_int_equal(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  CPU_AND(&expected, &expected, &allowed);

  accel_drv_device_ops_t device_ops = *accel_host_driver.device;
  device_ops.info = pci_device_info;
  device_ops.set_affinity = pci_device_set_affinity;
  accel_driver_t driver = accel_host_driver;
  driver.name = "pcitest";
  driver.device = &device_ops;
  const accel_driver_t *drivers[] = {&driver};
  g_pci_affinity_calls = 0;
  accel_runtime_t *rt = NULL;
  assert_accel_ok(accel_runtime_create_with_drivers(NULL, drivers, 1, &rt));
  accel_device_t *dev = NULL;
  assert_accel_ok(accel_device_get(rt, 0, &dev));
  accel_device_info_t info = {.struct_size = sizeof(info)};
  assert_accel_ok(accel_device_info(dev, &info));
  assert_string_equal(info.pci_bus_id, g_pci_bus_id);
  assert_int_equal(info.numa_node, node);
  assert_int_equal(g_pci_affinity_calls, 1);
  assert_true(CPU_EQUAL(&g_pci_cpus, &expected));
  accel_runtime_destroy(rt);
}

int main(void) {
  unsetenv("ACCEL_TOPOLOGY_XML");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dgx_devices_and_nics_match_fixture),
      cmocka_unit_test(test_dgx_matrix_follows_switch_layout),
      cmocka_unit_test(test_dgx_nearest_nics_start_on_the_same_switch),
      cmocka_unit_test(test_dgx_numa_placement),
      cmocka_unit_test(test_dgx_matrix_text),
      cmocka_unit_test(test_one_socket_classes_and_names),
      cmocka_unit_test(test_no_pci_has_numa_but_no_endpoints),
      cmocka_unit_test(test_this_machine_fixture),
      cmocka_unit_test(test_synthetic_and_env_override),
      cmocka_unit_test(test_random_synthetic_machines),
      cmocka_unit_test(test_live_load_degrades_cleanly),
      cmocka_unit_test(test_load_errors_name_the_problem),
      cmocka_unit_test(test_queries_validate_arguments),
#if ACCEL_HAVE_JSON_C
      cmocka_unit_test(test_json_holds_devices_nics_and_paths),
      cmocka_unit_test(test_json_round_trip_preserves_every_query),
      cmocka_unit_test(test_deserialize_rejects_bad_documents),
#endif
      cmocka_unit_test(test_host_workers_are_bound_to_their_numa_node),
      cmocka_unit_test(test_runtime_places_pci_devices_by_bus_id),
  };
  if (!ACCEL_HAVE_HWLOC) {
    // Every test loads a topology with hwloc.
    fprintf(stderr, "topology tests: accel was built without hwloc; "
                    "skipped\n");
    return 77;
  }
  return cmocka_run_group_tests(tests, NULL, NULL);
}
