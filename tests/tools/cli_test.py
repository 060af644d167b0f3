#!/usr/bin/env python3
"""Command-line behaviour every accel tool shares (tools/common/tool_cli.h).

usage: cli_test.py VERSION NAME=PATH...

Each check is a function named as a sentence; a failing check prints what it
expected and what the tool did, and the script exits 1.
"""
import os
import re
import subprocess
import sys
import tempfile

VERSION = sys.argv[1]
TOOLS = dict(arg.split("=", 1) for arg in sys.argv[2:])

# Pairs of options that exclude each other, per tool.
EXCLUSIVE = {
    "accel-info": [["--json", "--env"]],
    "accel-topo": [["--tree", "--json"], ["--xml", "a.xml", "--synthetic", "pu:2"]],
    "accel-pack": [["m.txt", "-o", "o.axe", "--progress", "--quiet"]],
    "accel-inspect": [],
    "accel-run": [],
    "accel-trace": [["summary", "t.pftrace", "-o", "x"]],
    "accel-serve": [],
    "accel-cluster": [],
    "accel-tune": [["matmul", "--shape", "1,2,3", "--all"]],
}


def run(name, *args, env=None):
    return subprocess.run([TOOLS[name], *args], capture_output=True, text=True,
                          timeout=60, env=env)


def check(cond, what, proc=None):
    if not cond:
        detail = ""
        if proc is not None:
            detail = "\n  rc=%d\n  stdout=%r\n  stderr=%r" % (
                proc.returncode, proc.stdout[-800:], proc.stderr[-800:])
        raise AssertionError(what + detail)


def test_help_prints_usage_and_one_line_per_option_and_exits_zero(name):
    # --help goes to stdout with exit 0, and every option line has a description.
    p = run(name, "--help")
    check(p.returncode == 0 and p.stdout.startswith("usage: " + name),
          "%s --help: usage on stdout, exit 0" % name, p)
    check(p.stderr == "", "%s --help: nothing on stderr" % name, p)
    lines = p.stdout.split("options:\n", 1)
    check(len(lines) == 2, "%s --help: an options section" % name, p)
    opts = [l for l in lines[1].splitlines() if l.strip()]
    check(any("--help" in l for l in opts) and any("--version" in l for l in opts),
          "%s --help: lists --help and --version" % name, p)
    for line in opts:
        check(re.match(r"^  -\S.*\S\s{2,}\S", line) is not None,
              "%s --help: option line without a description: %r" % (name, line), p)


def test_version_prints_the_project_version(name):
    # --version prints "NAME VERSION" on stdout and exits 0.
    p = run(name, "--version")
    check(p.returncode == 0 and p.stdout.strip() == "%s %s" % (name, VERSION),
          "%s --version" % name, p)


def test_unknown_option_is_named_on_stderr_with_exit_two(name):
    # An unknown option exits 2 and the error names the option.
    p = run(name, "--no-such-option")
    check(p.returncode == 2, "%s --no-such-option: exit 2" % name, p)
    check("--no-such-option" in p.stderr and p.stdout == "",
          "%s: the error names the option, on stderr" % name, p)


def test_options_that_exclude_each_other_are_refused(name):
    # Two options of one exclusive group exit 2 naming both.
    for args in EXCLUSIVE[name]:
        p = run(name, *args)
        check(p.returncode == 2, "%s %s: exit 2" % (name, " ".join(args)), p)
        named = [a for a in args if a.startswith("-")]
        check(all(a in p.stderr for a in named),
              "%s %s: the error names %s" % (name, " ".join(args), named), p)


def test_missing_option_argument_is_refused(name):
    # An option that needs an argument and has none exits 2 naming it.
    spec = {"accel-topo": "--xml", "accel-pack": "-o", "accel-trace": "-o",
            "accel-serve": "--port",
            "accel-cluster": "--name", "accel-tune": "--shape"}
    if name not in spec:
        return
    p = run(name, "x", spec[name])
    check(p.returncode == 2 and spec[name] in p.stderr,
          "%s %s with no argument: exit 2" % (name, spec[name]), p)


def test_trace_unknown_command_is_named(name):
    # accel-trace with an unknown subcommand exits 2 naming it.
    if name != "accel-trace":
        return
    p = run(name, "frobnicate", "x")
    check(p.returncode == 2 and "frobnicate" in p.stderr, "unknown command", p)


def test_cluster_unknown_command_and_missing_name_are_refused(name):
    # accel-cluster names an unknown command, wants --name, and says when a
    # shared-memory group does not exist.
    if name != "accel-cluster":
        return
    p = run(name, "frobnicate", "--name", "g")
    check(p.returncode == 2 and "frobnicate" in p.stderr, "unknown command", p)
    p = run(name, "status")
    check(p.returncode == 2 and "--name" in p.stderr, "status without --name", p)
    p = run(name, "status", "--name", "no-such-group-%d" % os.getpid())
    check(p.returncode == 1 and "ACCEL_ERROR_NOT_FOUND" in p.stderr,
          "status of a missing group", p)
    p = run(name, "join", "--name", "bad/name")
    check(p.returncode == 1 and "ACCEL_ERROR_INVALID_ARGUMENT" in p.stderr,
          "join with a bad name", p)


def test_topo_without_accelerator_says_so_and_explains_notes(name):
    # A topology with no accelerator says "no accelerator found", and notes
    # are words, not strerror text.
    if name != "accel-topo":
        return
    p = run(name, "--synthetic", "pack:1 core:2 pu:1")
    check(p.returncode == 0 and p.stdout.startswith("no accelerator found"),
          "accel-topo on a machine without accelerator", p)
    p = run(name)
    check(p.returncode == 0, "accel-topo live", p)
    for raw in ("Function not implemented", "No such file or directory"):
        check(raw not in p.stdout, "accel-topo notes hold raw errno text", p)


def test_topo_xml_out_writes_hwloc_xml_that_reads_back(name):
    # --xml-out writes hwloc XML, and loading it gives the same machine.
    if name != "accel-topo":
        return
    with tempfile.TemporaryDirectory() as d:
        xml = os.path.join(d, "t.xml")
        p = run(name, "--synthetic", "pack:2 [numa] core:2 pu:2", "--json",
                "--xml-out", xml)
        check(p.returncode == 0 and os.path.exists(xml), "--xml-out", p)
        with open(xml) as f:
            head = f.read(200)
        check("<topology" in head, "--xml-out wrote no hwloc XML: %r" % head)
        q = run(name, "--xml", xml, "--json")
        check(q.returncode == 0, "accel-topo --xml of what --xml-out wrote", q)
        machine = lambda out: re.search(r'"machine": \{[^}]*\}', out).group(0)
        check(machine(p.stdout) == machine(q.stdout),
              "the machine read back differs: %s vs %s" %
              (machine(p.stdout), machine(q.stdout)))


def main():
    tests = [v for k, v in sorted(globals().items()) if k.startswith("test_")]
    failed = 0
    for name in sorted(TOOLS):
        for t in tests:
            try:
                t(name)
                print("ok   %s %s" % (t.__name__, name))
            except AssertionError as e:
                failed += 1
                print("FAIL %s %s: %s" % (t.__name__, name, e))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
