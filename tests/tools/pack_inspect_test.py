#!/usr/bin/env python3
"""accel-pack's manifest directives and warnings, and accel-inspect's report
of a corrupted file.

usage: pack_inspect_test.py ACCEL_PACK ACCEL_INSPECT
"""
import json
import os
import re
import subprocess
import sys
import tempfile

PACK, INSPECT = sys.argv[1], sys.argv[2]
FAILED = []


def check(cond, what, proc=None):
    if not cond:
        if proc is not None:
            what += "\n  rc=%d\n  stdout=%r\n  stderr=%r" % (
                proc.returncode, proc.stdout[-1500:], proc.stderr[-1500:])
        raise AssertionError(what)


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=20)


def pack(d, manifest_text, name="m"):
    manifest = os.path.join(d, name + ".manifest")
    with open(manifest, "w") as f:
        f.write(manifest_text)
    out = os.path.join(d, name + ".axe")
    return run(PACK, manifest, "-o", out, "--quiet"), out


def write(d, name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


FULL = """# every directive and option
uuid 00112233-4455-6677-8899-aabbccddeeff
requires caps=host_kernels,host_visible min_runtime=0.1 workspace=65536 workspace_align=256
metadata model tiny test model
code cuda-sm_90 ptx k.ptx
kernel vector_add workgroup=256,2,1 constants=4 binding=r:a:4:4 binding=w:out:8 binding=rw:acc
kernel nothing symbol=empty
weight w file=w.bin dtype=f32 shape=4,1024 strides=1024,1 map
weight q file=q.bin dtype=i8 shape=64,64 layout=blocked:16,16 offset=0 quant=groupwise axis=1 group=16 scale=s zero=z
weight s file=s.bin dtype=f32 shape=256
weight z file=z.bin dtype=i8 shape=256
"""


def make_inputs(d):
    write(d, "k.ptx", b".version 8.0\n.target sm_90\n")
    write(d, "w.bin", bytes(range(256)) * 64)
    write(d, "q.bin", bytes(4096))
    write(d, "s.bin", bytes(1024))
    write(d, "z.bin", bytes(256))


def test_every_directive_and_option_round_trips_through_inspect(d):
    # Each directive and option of the manifest reaches the file.
    make_inputs(d)
    p, out = pack(d, FULL)
    check(p.returncode == 0 and p.stderr == "", "accel-pack of a full manifest", p)
    q = run(INSPECT, "--json", out)
    check(q.returncode == 0, "accel-inspect of it", q)
    j = json.loads(q.stdout)
    check(j["uuid"] == "00112233-4455-6677-8899-aabbccddeeff", "uuid")
    check(j["requirements"]["min_runtime"] == "0.1", "min_runtime")
    check(j["requirements"]["workspace_bytes"] == 65536, "workspace")
    check(j["requirements"]["caps"] != 0, "caps")
    check(j["metadata"] == {"model": "tiny test model"}, "metadata: %r" % j["metadata"])
    k = {x["name"]: x for x in j["kernels"]}
    check(k["vector_add"]["workgroup_size"] == [256, 2, 1], "workgroup")
    check(k["vector_add"]["constants_size"] == 4, "constants")
    check([(b["access"], b["name"], b["min_size"], b["alignment"])
           for b in k["vector_add"]["bindings"]] ==
          [("r", "a", 4, 4), ("w", "out", 8, 1), ("rw", "acc", 0, 1)],
          "bindings: %r" % k["vector_add"]["bindings"])
    check(k["nothing"]["symbol"] == "empty", "symbol")
    w = {x["name"]: x for x in j["weights"]}
    check(w["w"]["shape"] == [4, 1024] and w["w"]["dtype"] == "f32", "weight w")
    check(w["q"]["layout"] == "blocked" and w["q"]["quant"] == "groupwise", "weight q")


BAD = [
    ("kernel k binding=x:y", ":1: kernel k: binding access \"x\" is not r, w or rw"),
    ("kernel k binding=r", ":1: kernel k: binding needs ACCESS:NAME"),
    ("kernel k colour=red", ":1: kernel k: unknown option \"colour\""),
    ("kernel k workgroup=a", ":1: kernel k: bad workgroup \"a\""),
    ("kernel k flag", ":1: kernel k: option \"flag\" is not key=value"),
    ("weight w dtype=f99 file=w.bin", ":1: weight w: unknown dtype \"f99\""),
    ("weight w file=w.bin quant=odd", ":1: weight w: unknown quant scheme \"odd\""),
    ("weight w file=w.bin layout=rows", ":1: weight w: layout must be blocked:ROWS,COLS"),
    ("weight w dtype=f32", ":1: weight w: file= is required"),
    ("weight w file=w.bin", ":1: weight w: raw files need dtype= and shape="),
    ("weight w file=w.bin dtype=f32 shape=4 offset=99999999",
     ":1: weight w: offset 99999999 is beyond w.bin"),
    ("requires caps=teleport", ":1: requires: unknown capability \"teleport\""),
    ("requires min_runtime=1", ":1: requires: min_runtime must be MAJOR.MINOR"),
    ("requires speed=9", ":1: requires: unknown option \"speed\""),
    ("uuid xyz", ":1: bad uuid \"xyz\""),
    ("code t asm k.ptx", ":1: code format \"asm\" is not elf, ptx or cubin"),
    ("metadata onlykey", ":1: unknown or malformed directive \"metadata\""),
    ("frobnicate", ":1: unknown or malformed directive \"frobnicate\""),
]


def test_manifest_errors_name_the_line_and_what_was_wrong(d):
    # Each malformed directive exits 1 with the line and the reason.
    make_inputs(d)
    for line, want in BAD:
        p, _ = pack(d, line + "\n", "bad")
        check(p.returncode == 1 and want in p.stderr,
              "manifest %r: want %r" % (line, want), p)


def test_kernels_without_code_object_warn(d):
    # Kernels with no code object are written with a warning naming them.
    make_inputs(d)
    p, out = pack(d, "kernel a\nkernel b\n")
    check(p.returncode == 0 and os.path.exists(out), "pack without code", p)
    check("warning" in p.stderr and "2 kernels but no code object" in p.stderr,
          "warning for kernels without code", p)
    p, _ = pack(d, "code cuda-sm_90 ptx k.ptx\nkernel a\n", "ok")
    check(p.returncode == 0 and "warning" not in p.stderr, "no warning with code", p)


def test_inspect_names_the_corrupt_section_and_both_hashes(d):
    # One changed byte: the section is named with expected and actual hashes.
    make_inputs(d)
    p, out = pack(d, FULL)
    check(p.returncode == 0, "pack", p)
    j = json.loads(run(INSPECT, "--json", out).stdout)
    sec = max(j["sections"], key=lambda s: s["size"])  # weight w's 16 KiB
    with open(out, "r+b") as f:
        f.seek(sec["offset"] + sec["size"] // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 1]))
    q = run(INSPECT, out)
    check(q.returncode == 1, "inspect of a corrupt file exits 1", q)
    m = re.search(r"section %d \(%s[^)]*\): content hash differs: expected "
                  r"([0-9a-f]{32}) .*actual ([0-9a-f]{32})" % (sec["index"], sec["kind"]),
                  q.stderr)
    check(m is not None and m.group(1) != m.group(2),
          "the error names section %d (%s) and both hashes" % (sec["index"], sec["kind"]), q)
    check("are corrupt" not in q.stderr, "no claim that the whole section is corrupt", q)
    r = run(INSPECT, "--json", out)
    jj = json.loads(r.stdout)
    check(jj["valid"] is False and len(jj["hash_mismatches"]) == 1, "json mismatches", r)
    mm = jj["hash_mismatches"][0]
    check(mm["section"] == sec["index"] and mm["expected_hash"] == m.group(1)
          and mm["actual_hash"] == m.group(2), "json names both hashes", r)


def test_inspect_refuses_a_fifo_without_blocking(d):
    fifo = os.path.join(d, "pipe.axe")
    os.mkfifo(fifo)
    r = run(INSPECT, fifo)  # times out (60 s) if it waits for a writer
    check(r.returncode == 1 and "not a regular file" in r.stderr,
          "a FIFO is refused at once", r)
    r = run(INSPECT, d)
    check(r.returncode == 1 and "not a regular file" in r.stderr,
          "a directory is refused", r)


def main():
    for name, t in sorted(globals().items()):
        if not name.startswith("test_"):
            continue
        with tempfile.TemporaryDirectory() as d:
            try:
                t(d)
                print("ok   " + name)
            except AssertionError as e:
                FAILED.append(name)
                print("FAIL %s: %s" % (name, e))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
