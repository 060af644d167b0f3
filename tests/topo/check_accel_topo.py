#!/usr/bin/env python3
"""Runs accel-topo on the 2-socket 8-GPU fixture and checks its matrix, tree
and JSON against the fixture's layout (tests/data/topo/make_fixtures.py):
GPU g on switch g//2, NIC k on switch k, switches 0-1 on socket 0 (NUMA 0)
and 2-3 on socket 1 (NUMA 1). Exit 77 (skip) when accel lacks hwloc."""
import json
import os
import subprocess
import sys
import tempfile

tool, fixture = sys.argv[1], sys.argv[2]
GPUS = ["cuda%d" % g for g in range(8)]
NICS = ["mlx5_%d" % k for k in range(4)]
NAMES = GPUS + NICS


def switch(name):
    i = NAMES.index(name)
    return i // 2 if i < 8 else i - 8


def expected(a, b):
    if a == b:
        return "X"
    if switch(a) == switch(b):
        return "PIX"
    if switch(a) // 2 == switch(b) // 2:
        return "NODE"
    return "SYS"


def run(*args):
    p = subprocess.run([tool, *args], capture_output=True, text=True)
    if p.returncode != 0:
        if "without hwloc" in p.stderr:
            print("accel built without hwloc: skipped")
            sys.exit(77)
        sys.exit("accel-topo %s failed (%d): %s" % (" ".join(args),
                                                   p.returncode, p.stderr))
    return p.stdout


def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)


# The matrix: a header of every endpoint, then one row each.
lines = run("--xml", fixture).splitlines()
header = lines[0].split()
check(header[:12] == NAMES, "header %r" % header)
check(" ".join(header[12:]) == "CPU Affinity NUMA Affinity", "header tail")
for r, name in enumerate(NAMES):
    cells = lines[1 + r].split()
    check(cells[0] == name, "row %d is %s" % (r, cells[0]))
    want = [expected(name, other) for other in NAMES]
    check(cells[1:13] == want, "row %s: %r != %r" % (name, cells[1:13], want))
    numa = switch(name) // 2
    check(cells[13] == ("0-7,16-23" if numa == 0 else "8-15,24-31"),
          "row %s cpus %s" % (name, cells[13]))
    check(cells[14] == str(numa), "row %s numa %s" % (name, cells[14]))
check(lines[13] == "", "a blank line after the matrix")
check("Legend:" in lines, "legend")

# The JSON: valid, with devices, nics, nearest NICs and named paths.
doc = json.loads(run("--xml", fixture, "--json"))
check(doc["format"] == "accel-topology" and doc["version"] == 1, "format")
check([d["name"] for d in doc["devices"]] == GPUS, "device names")
check([n["name"] for n in doc["nics"]] == NICS, "nic names")
for d in doc["devices"]:
    own = switch(d["name"])
    check(d["nearest_nics"][0] == NICS[own], "%s nearest" % d["name"])
    check(d["numa_node"] == own // 2, "%s numa" % d["name"])
    check(len(d["pci_bus_id"]) == 12, "%s bus id" % d["name"])
for n in doc["nics"]:
    check(n["numa_node"] == switch(n["name"]) // 2, "%s numa" % n["name"])
for a in NAMES:
    for b in NAMES:
        check(doc["paths"][a][b] == expected(a, b), "path %s %s" % (a, b))
check(doc["numa_distances"]["matrix"] == [[10, 21], [21, 10]], "numa dist")

# The tree names the devices.
tree = run("--xml", fixture, "--tree")
for name in GPUS:
    check("= device %s\n" % name in tree, "tree lacks " + name)

# The serialized form reads back to the same matrix.
with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    f.write(json.dumps(doc))
    path = f.name
try:
    p = subprocess.run([tool, "--from-json", path], capture_output=True,
                       text=True)
    if p.returncode == 0:
        check(p.stdout.splitlines()[:13] == lines[:13], "from-json matrix")
    else:
        check("without json-c" in p.stderr, "from-json: " + p.stderr)
finally:
    os.unlink(path)

# Errors: a missing file and a malformed one.
p = subprocess.run([tool, "--xml", fixture + ".missing"], capture_output=True,
                   text=True)
check(p.returncode == 1 and "ACCEL_ERROR_NOT_FOUND" in p.stderr,
      "missing file: %r" % p.stderr)
print("accel-topo matrix, JSON and tree match the fixture")
