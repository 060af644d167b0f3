#!/usr/bin/env python3
"""Writes the hwloc XML fixtures of tests/topo (run from this folder).

The fixtures are written by hand (through this script) so that every fact the
tests check follows from the layout described here, not from what hwloc
happens to discover on some machine:

  dgx_2s8g.xml      2 sockets (NUMA nodes 0 and 1, distance 21), 8 cores x 2
                    threads each; 4 PCIe switches (2 per socket, each behind
                    its own host bridge), each switch holding 2 GPUs (class
                    0x0302, CoProc cudaN, DRM cardN/renderDN) and 1 NIC
                    (class 0x0207, OpenFabrics mlx5_N, Net ibN).
  one_socket_1gpu.xml  1 socket, 1 NUMA node, 4 cores; a GPU (class 0x0300,
                    GPU osdev only) behind two nested switches, a NIC on the
                    outer switch (PXB to the GPU), a second NIC on another root
                    port of the same host bridge (PHB to the GPU), an NVMe
                    drive (not an accelerator) and a processing accelerator
                    (class 0x1200, no OS device) on a second host bridge
                    (NODE to the GPU).
  no_pci.xml        2 packages with 2 NUMA nodes each (4 nodes, distances
                    10/12/32), no I/O objects at all.
"""

import sys


class Writer:
    def __init__(self):
        self.lines = []
        self.gp = 0
        self.depth = 0

    def gpi(self):
        self.gp += 1
        return self.gp

    def open(self, attrs, infos=()):
        pad = "  " * (self.depth + 1)
        self.lines.append(pad + "<object " + attrs + ' gp_index="%d">' %
                          self.gpi())
        for k, v in infos:
            self.lines.append(pad + '  <info name="%s" value="%s"/>' % (k, v))
        self.depth += 1

    def close(self):
        self.depth -= 1
        self.lines.append("  " * (self.depth + 1) + "</object>")

    def leaf(self, attrs, infos=()):
        self.open(attrs, infos)
        self.close()


def mask(bits):
    v = 0
    for b in bits:
        v |= 1 << b
    # hwloc XML bitmaps: 32-bit words, most significant first, comma separated.
    words = []
    while True:
        words.append(v & 0xFFFFFFFF)
        v >>= 32
        if v == 0:
            break
    return ",".join("0x%08x" % w for w in reversed(words))


def sets(cpus, nodes):
    return ('cpuset="%s" complete_cpuset="%s" nodeset="%s" complete_nodeset="%s"'
            % (mask(cpus), mask(cpus), mask(nodes), mask(nodes)))


def distances(lines, name, nodes, matrix):
    idx = "".join("%d " % n for n in nodes)
    vals = "".join("%d " % v for row in matrix for v in row)
    lines.append('  <distances2 type="NUMANode" nbobjs="%d" kind="5" '
                 'name="%s" indexing="os">' % (len(nodes), name))
    lines.append('    <indexes length="%d">%s</indexes>' % (len(idx), idx))
    lines.append('    <u64values length="%d">%s</u64values>' %
                 (len(vals), vals))
    lines.append("  </distances2>")


def header(w, all_cpus, all_nodes, host):
    w.lines += ['<?xml version="1.0" encoding="UTF-8"?>',
                '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
                '<topology version="2.0">']
    w.open('type="Machine" os_index="0" %s allowed_cpuset="%s" '
           'allowed_nodeset="%s"' % (sets(all_cpus, all_nodes),
                                     mask(all_cpus), mask(all_nodes)),
           [("Backend", "Linux"), ("HostName", host),
            ("Architecture", "x86_64")])


def cores(w, first_core, pus_of_core, node):
    for i, pus in enumerate(pus_of_core):
        w.open('type="Core" os_index="%d" %s' % (first_core + i,
                                                  sets(pus, [node])))
        for pu in pus:
            w.leaf('type="PU" os_index="%d" %s' % (pu, sets([pu], [node])))
        w.close()


def numa(w, os_index, cpus, mem):
    w.open('type="NUMANode" os_index="%d" %s local_memory="%d"' %
           (os_index, sets(cpus, [os_index]), mem))
    w.lines.append("  " * (w.depth + 1) +
                   '<page_type size="4096" count="%d"/>' % (mem // 4096))
    w.close()


def host_bridge(w, lo, hi):
    w.open('type="Bridge" bridge_type="0-1" depth="0" '
           'bridge_pci="0000:[%02x-%02x]"' % (lo, hi))


def pci_bridge(w, busid, lo, hi, depth):
    w.open('type="Bridge" bridge_type="1-1" depth="%d" '
           'bridge_pci="0000:[%02x-%02x]" pci_busid="%s" '
           'pci_type="0604 [10b5:9797] [0000:0000] ab" '
           'pci_link_speed="15.753846"' % (depth, lo, hi, busid))


def pci_dev(w, busid, cls, vendor, device, infos=()):
    w.open('type="PCIDev" pci_busid="%s" pci_type="%04x [%04x:%04x] '
           '[%04x:%04x] a1" pci_link_speed="31.507692"' %
           (busid, cls, vendor, device, vendor, device), infos)


def osdev(w, name, kind, infos=()):
    w.leaf('type="OSDev" name="%s" osdev_type="%d"' % (name, kind), infos)


OSDEV_BLOCK, OSDEV_GPU, OSDEV_NET, OSDEV_OFED, OSDEV_DMA, OSDEV_COPROC = range(6)


def footer(w):
    w.close()


def finish(w, path):
    w.lines.append("</topology>")
    with open(path, "w") as f:
        f.write("\n".join(w.lines) + "\n")


def dgx(path):
    # PU numbering like Linux on a 2-socket machine with SMT: socket s core c
    # has PUs s*8+c and 16+s*8+c.
    def pus(s):
        return [[s * 8 + c, 16 + s * 8 + c] for c in range(8)]

    def flat(s):
        return sorted(p for c in pus(s) for p in c)

    w = Writer()
    header(w, range(32), [0, 1], "dgx-fixture")
    gpu = 0
    for s in range(2):
        w.open('type="Package" os_index="%d" %s' % (s, sets(flat(s), [s])),
               [("CPUVendor", "GenuineIntel"), ("CPUModel", "Fixture Xeon")])
        numa(w, s, flat(s), 256 << 30)
        w.open('type="L3Cache" os_index="%d" %s cache_size="%d" depth="3" '
               'cache_linesize="64" cache_associativity="11" cache_type="0"' %
               (s, sets(flat(s), [s]), 36 << 20))
        cores(w, s * 8, pus(s), s)
        w.close()
        for k in range(2):
            sw = s * 2 + k
            base = 0x10 + 0x20 * sw + (0x40 if s else 0)
            host_bridge(w, base, base + 0x1F)
            pci_bridge(w, "0000:%02x:00.0" % base, base + 1, base + 4, 1)
            for port in range(3):
                bus = base + 2 + port
                pci_bridge(w, "0000:%02x:%02x.0" % (base + 1, port), bus, bus,
                           2)
                busid = "0000:%02x:00.0" % bus
                if port < 2:
                    pci_dev(w, busid, 0x0302, 0x10DE, 0x2330,
                            [("PCIVendor", "NVIDIA Corporation"),
                             ("PCIDevice", "GH100 [H100 SXM5 80GB]")])
                    osdev(w, "card%d" % (gpu + 1), OSDEV_GPU)
                    osdev(w, "renderD%d" % (128 + gpu), OSDEV_GPU)
                    osdev(w, "cuda%d" % gpu, OSDEV_COPROC,
                          [("CoProcType", "CUDA"), ("Backend", "CUDA")])
                    gpu += 1
                else:
                    pci_dev(w, busid, 0x0207, 0x15B3, 0x1021,
                            [("PCIVendor", "Mellanox Technologies"),
                             ("PCIDevice", "MT2910 Family [ConnectX-7]")])
                    osdev(w, "ib%d" % sw, OSDEV_NET,
                          [("Address", "00:00:10:29:fe:80:00:00:00:00:00:00:"
                            "b8:3f:d2:03:00:0%d:%02x:%02x" % (sw, sw, sw))])
                    osdev(w, "mlx5_%d" % sw, OSDEV_OFED,
                          [("NodeGUID", "b83f:d203:00%02x:0000" % sw),
                           ("Port1State", "4"), ("Port1LID", "0x%x" % (sw + 1)),
                           ("Port1LinkLayer", "InfiniBand")])
                    w.close()
                    w.close()  # downstream port
                    continue
                w.close()  # PCIDev
                w.close()  # downstream port
            w.close()  # upstream port
            w.close()  # host bridge
        w.close()  # package
    footer(w)
    distances(w.lines, "NUMALatency", [0, 1], [[10, 21], [21, 10]])
    finish(w, path)


def one_socket(path):
    pus = [[c] for c in range(4)]
    w = Writer()
    header(w, range(4), [0], "workstation-fixture")
    w.open('type="Package" os_index="0" %s' % sets(range(4), [0]),
           [("CPUModel", "Fixture Ryzen")])
    numa(w, 0, range(4), 64 << 30)
    cores(w, 0, pus, 0)
    # Host bridge 0: root port 00:01.0 -> switch (01:00.0) with downstream
    # ports 02:00.0 (inner switch -> GPU) and 02:01.0 (NIC mlx5_0); root port
    # 00:02.0 -> NIC mlx5_1 (PHB to the GPU); root port 00:03.0 -> NVMe.
    host_bridge(w, 0x00, 0x3F)
    pci_bridge(w, "0000:00:01.0", 0x01, 0x08, 1)
    pci_bridge(w, "0000:01:00.0", 0x02, 0x08, 2)
    pci_bridge(w, "0000:02:00.0", 0x03, 0x05, 3)
    pci_bridge(w, "0000:03:00.0", 0x04, 0x05, 4)
    pci_bridge(w, "0000:04:00.0", 0x05, 0x05, 5)
    pci_dev(w, "0000:05:00.0", 0x0300, 0x10DE, 0x2684,
            [("PCIVendor", "NVIDIA Corporation"),
             ("PCIDevice", "AD102 [GeForce RTX 4090]")])
    osdev(w, "card0", OSDEV_GPU)
    osdev(w, "nvml0", OSDEV_GPU, [("Backend", "NVML")])
    osdev(w, "renderD128", OSDEV_GPU)
    for _ in range(4):
        w.close()  # GPU, 04:00.0, 03:00.0, 02:00.0
    pci_bridge(w, "0000:02:01.0", 0x06, 0x06, 3)
    pci_dev(w, "0000:06:00.0", 0x0200, 0x15B3, 0x101D,
            [("PCIDevice", "MT2892 Family [ConnectX-6 Dx]")])
    osdev(w, "enp6s0f0np0", OSDEV_NET)
    osdev(w, "mlx5_0", OSDEV_OFED, [("Port1LinkLayer", "Ethernet")])
    w.close()
    w.close()
    w.close()  # 01:00.0
    w.close()  # 00:01.0
    pci_bridge(w, "0000:00:02.0", 0x10, 0x10, 1)
    pci_dev(w, "0000:10:00.0", 0x0200, 0x15B3, 0x1017,
            [("PCIDevice", "MT27800 Family [ConnectX-5]")])
    osdev(w, "mlx5_1", OSDEV_OFED, [("Port1LinkLayer", "Ethernet")])
    w.close()
    w.close()
    pci_bridge(w, "0000:00:03.0", 0x20, 0x20, 1)
    pci_dev(w, "0000:20:00.0", 0x0108, 0x144D, 0xA80A)
    osdev(w, "nvme0n1", OSDEV_BLOCK)
    w.close()
    w.close()
    w.close()  # host bridge 0
    host_bridge(w, 0x40, 0x4F)
    pci_dev(w, "0000:40:00.0", 0x1200, 0x1E52, 0x0001,
            [("PCIDevice", "Fixture NPU")])
    w.close()
    w.close()
    w.close()  # package
    footer(w)
    finish(w, path)


def no_pci(path):
    w = Writer()
    header(w, range(16), [0, 1, 2, 3], "nopci-fixture")
    for s in range(2):
        w.open('type="Package" os_index="%d" %s' %
               (s, sets(range(8 * s, 8 * s + 8), [2 * s, 2 * s + 1])))
        for half in range(2):
            node = 2 * s + half
            cpus = list(range(4 * node, 4 * node + 4))
            w.open('type="Group" os_index="%d" %s' % (node, sets(cpus, [node])),
                   [("SubNUMACluster", "1")])
            numa(w, node, cpus, 32 << 30)
            cores(w, 4 * node, [[c] for c in cpus], node)
            w.close()
        w.close()
    footer(w)
    m = [[10 if i == j else (12 if i // 2 == j // 2 else 32)
          for j in range(4)] for i in range(4)]
    distances(w.lines, "NUMALatency", [0, 1, 2, 3], m)
    finish(w, path)


if __name__ == "__main__":
    dgx("dgx_2s8g.xml")
    one_socket("one_socket_1gpu.xml")
    no_pci("no_pci.xml")
    sys.exit(0)
