"""python -m accel.bench [--json] [--quick]: the Python module's costs, each
against a baseline measured in the same run (DESIGN.md's report format).

Figures (medians of repeated runs after a warm-up, the value and its
baseline measured alternately; each run's sample is the fastest of five
blocks of calls, so that a preempted block on a shared machine does not
decide it):
  - from_dlpack_buffer: np.from_dlpack(accel buffer), against
    np.from_dlpack(numpy array) of the same shape. Target: ratio <= 2.
  - python_launch_sync: a launch of the empty kernel plus synchronize from
    Python, against the same two calls in a C loop in this process. Target:
    under 2 us added (on the value minus the baseline: `added_us`).
The launch figure needs the reference host kernels (ACCEL_HOST_KERNELS) and
accel-pack (ACCEL_PACK) to build an .axe, or ACCEL_BENCH_AXE naming one with
a kernel "empty"; without them it is left out with a note on stderr.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# numpy's OpenBLAS threads spin after each call and take a core from the
# measurement on a small machine; nothing here uses BLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import accel  # noqa: E402


def _paired_medians(value_fn, base_fn, runs):
    """Medians of |runs| samples of each, taken alternately (after one
    warm-up of each) so that both see the same machine."""
    value_fn()
    base_fn()
    values, bases = [], []
    for _ in range(runs):
        values.append(value_fn())
        bases.append(base_fn())
    return statistics.median(values), statistics.median(bases)


BLOCKS = 5


def _per_call_us(fn, iters):
    """A sample: us per call, the fastest of BLOCKS blocks of iters/BLOCKS
    calls (a block that a busy machine preempted does not decide it)."""
    n = max(1, iters // BLOCKS)

    def run():
        best = None
        for _ in range(BLOCKS):
            t0 = time.perf_counter_ns()
            for _ in range(n):
                fn()
            t = (time.perf_counter_ns() - t0) / n / 1e3
            best = t if best is None else min(best, t)
        return best
    return run


def _result(name, value, unit, baseline_name, baseline, target, runs, met):
    return {"name": name, "value": value, "unit": unit,
            "baseline_name": baseline_name, "baseline": baseline,
            "ratio": value / baseline if baseline else None,
            "ratio_method": "medians", "target": target, "met": met,
            "runs": runs}


def bench_dlpack(dev, runs, iters):
    import numpy as np
    arr = np.zeros((64, 64), np.float32)
    buf = accel.empty((64, 64), "float32", device=dev)
    value, base = _paired_medians(
        _per_call_us(lambda: np.from_dlpack(buf), iters),
        _per_call_us(lambda: np.from_dlpack(arr), iters), runs)
    return _result("from_dlpack_buffer", value, "us", "from_dlpack_ndarray",
                   base, "<= 2", runs, value / base <= 2)


def _empty_kernel_axe(tmp):
    path = os.environ.get("ACCEL_BENCH_AXE")
    if path:
        return path
    pack, so = os.environ.get("ACCEL_PACK"), os.environ.get("ACCEL_HOST_KERNELS")
    if not pack or not so:
        return None
    manifest = os.path.join(tmp, "empty.manifest")
    with open(manifest, "w") as f:
        f.write(f"code host-x86_64 elf {so}\nkernel empty\n")
    out = os.path.join(tmp, "empty.axe")
    subprocess.run([pack, manifest, "-o", out, "--quiet"], check=True)
    return out


def bench_launch(dev, runs, iters):
    with tempfile.TemporaryDirectory() as tmp:
        path = _empty_kernel_axe(tmp)
        if path is None:
            print("accel.bench: python_launch_sync left out: set ACCEL_PACK and "
                  "ACCEL_HOST_KERNELS (or ACCEL_BENCH_AXE)", file=sys.stderr)
            return None
        k = dev.load(path).kernel("empty")
    s = dev.stream()

    def py_once():
        k(s, 1)
        s.synchronize()

    def c_run():
        n = max(1, iters // BLOCKS)
        return min(k._bench_c_loop(s, n) for _ in range(BLOCKS)) / n / 1e3

    value, base = _paired_medians(_per_call_us(py_once, iters), c_run, runs)
    s.close()
    added = value - base
    r = _result("python_launch_sync", value, "us", "c_launch_sync", base,
                "added < 2 us", runs, added < 2.0)
    r["added_us"] = added
    return r


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m accel.bench")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    runs, iters = (3, 200) if args.quick else (15, 2000)
    with accel.Runtime() as rt:
        dev = rt.devices[0]
        results = [bench_dlpack(dev, runs, iters), bench_launch(dev, runs, iters)]
        results = [r for r in results if r is not None]
        report = {"bench": "python", "device": dev.id, "results": results}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"python -m accel.bench on {report['device']}")
    print("%-22s %10s %-4s %-22s %10s %7s %-14s %s" % (
        "figure", "value", "unit", "baseline", "baseline", "ratio", "target", "met"))
    for r in results:
        print("%-22s %10.3f %-4s %-22s %10.3f %7.3f %-14s %s (median of %d runs)%s" % (
            r["name"], r["value"], r["unit"], r["baseline_name"], r["baseline"],
            r["ratio"], r["target"], "yes" if r["met"] else "NO", r["runs"],
            "; added %.3f us" % r["added_us"] if "added_us" in r else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
