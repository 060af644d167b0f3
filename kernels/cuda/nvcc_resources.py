#!/usr/bin/env python3
"""Runs nvcc with --resource-usage on the CUDA reference kernels, writes each
kernel's registers, shared memory, stack and spills to a report, and fails
when any kernel spills (kernels/README.md, "CUDA kernels").

  nvcc_resources.py NVCC REPORT -- NVCC_ARGUMENTS...

ptxas prints, per entry function, "Function properties for NAME", then
"N bytes stack frame, S bytes spill stores, L bytes spill loads", then "Used R
registers, ... M bytes smem". Where cuobjdump is installed the same figures
can be read back from the cubin with cuobjdump --dump-resource-usage; ptxas's
own report is used here because it names spills and needs nothing more than
nvcc.
"""
import re
import subprocess
import sys


def main():
    if len(sys.argv) < 4 or sys.argv[3] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    nvcc, report = sys.argv[1], sys.argv[2]
    run = subprocess.run([nvcc, "--resource-usage"] + sys.argv[4:],
                         capture_output=True, text=True)
    text = run.stdout + run.stderr
    if run.returncode != 0:
        sys.stderr.write(text)
        return run.returncode
    kernels = {}
    name = None
    for line in text.splitlines():
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            name = m.group(1)
            kernels.setdefault(name, {})
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                      r"(\d+) bytes spill loads", line)
        if m and name is not None:
            kernels[name].update(stack=int(m.group(1)),
                                 spill_stores=int(m.group(2)),
                                 spill_loads=int(m.group(3)))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and name is not None:
            smem = re.search(r"(\d+) bytes smem", line)
            kernels[name].update(registers=int(m.group(1)),
                                 smem=int(smem.group(1)) if smem else 0)
    if not kernels:
        sys.stderr.write("nvcc_resources.py: no kernel in nvcc's report\n" +
                         text)
        return 1
    spilling = []
    with open(report, "w") as out:
        out.write("kernel registers smem_bytes stack_bytes spill_stores "
                  "spill_loads\n")
        for name in sorted(kernels):
            k = kernels[name]
            out.write("%s %d %d %d %d %d\n" % (
                name, k.get("registers", 0), k.get("smem", 0),
                k.get("stack", 0), k.get("spill_stores", 0),
                k.get("spill_loads", 0)))
            if k.get("spill_stores", 0) or k.get("spill_loads", 0):
                spilling.append("%s (%d bytes stored, %d loaded)" % (
                    name, k["spill_stores"], k["spill_loads"]))
    if spilling:
        sys.stderr.write("CUDA reference kernels spill registers: %s\n" %
                         ", ".join(spilling))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
