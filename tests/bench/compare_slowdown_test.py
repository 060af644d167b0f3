#!/usr/bin/env python3
"""accel-bench compare on real runs: a planted slowdown is flagged, two runs
of the same build are not.

Runs `accel-bench run launch` on roundtrip_empty_command (an empty host
command's round trip against a bare spinning handoff) three times: twice as
built, once with ACCEL_SPIN_NS=1, which makes the host worker park at once
instead of spinning, so that every round trip pays a futex wake-up (about 10x
on an idle machine). compare must exit 0 for the two normal runs and 1, naming
the figure as a REGRESSION, for the parked one. Both compares run with
--threshold 0.3: two runs of one build have been 13.6% apart on this shared
2-core machine (launch round trips 1.13 vs 1.28 us, p 0.00036, one suite run
in about eight), which the default 10% calls a regression; the planted
slowdown is an order of magnitude, far past 30%.

A spinning round trip measures nothing on a machine whose cores are all busy
(both spinning threads wait for a time slice): when the load average exceeds
the core count before the runs, or the two normal runs' intervals are wider
than 2x, the machine is too loaded for the figure to mean anything and the
test is skipped (exit 77) saying so; the compare logic itself is covered on
synthetic samples by bench/history.

usage: compare_slowdown_test.py ACCEL_BENCH
"""
import json
import os
import subprocess
import sys
import tempfile

FIGURE = "roundtrip_empty_command"
THRESHOLD = "0.3"


def run(exe, out, spin_ns=None):
    env = dict(os.environ)
    env.pop("ACCEL_SPIN_NS", None)
    if spin_ns is not None:
        env["ACCEL_SPIN_NS"] = spin_ns
    subprocess.run([exe, "run", "launch", "--quick", "--filter", FIGURE,
                    "--min-pairs", "15", "--out", out], env=env, check=True,
                   timeout=300, stdout=subprocess.DEVNULL)
    with open(out) as f:
        doc = json.load(f)
    fig = next(r for b in doc["benches"] for r in b["results"]
               if r["name"] == FIGURE)
    return fig


def main():
    exe = sys.argv[1]
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > cores:
        print(f"skipped: load average {load:.1f} on {cores} cores: too "
              "loaded for a spinning round trip to mean anything")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        a = run(exe, f"{tmp}/a.json")
        b = run(exe, f"{tmp}/b.json")
        parked = run(exe, f"{tmp}/parked.json", spin_ns="1")
        for name, fig in (("first", a), ("second", b)):
            print(f"{name}: ratio {fig['ratio']:.3g} "
                  f"[{fig['ci_low']:.3g}, {fig['ci_high']:.3g}]")
        print(f"parked: ratio {parked['ratio']:.3g} "
              f"[{parked['ci_low']:.3g}, {parked['ci_high']:.3g}]")
        if any(f["ci_high"] > 2 * f["ci_low"] for f in (a, b)):
            print("skipped: the machine is too loaded for a spinning round "
                  "trip to mean anything (intervals above)")
            sys.exit(77)
        same = subprocess.run([exe, "compare", "--threshold", THRESHOLD,
                               f"{tmp}/a.json",
                               f"{tmp}/b.json"], stdout=subprocess.PIPE,
                              text=True, timeout=60)
        print(same.stdout)
        assert same.returncode == 0, "two runs of one build flagged"
        slow = subprocess.run([exe, "compare", "--threshold", THRESHOLD,
                               f"{tmp}/a.json",
                               f"{tmp}/parked.json"], stdout=subprocess.PIPE,
                              text=True, timeout=60)
        print(slow.stdout)
        assert slow.returncode == 1, "the parked workers were not flagged"
        assert any(FIGURE in l and "REGRESSION" in l
                   for l in slow.stdout.splitlines())


if __name__ == "__main__":
    main()
