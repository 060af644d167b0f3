#!/usr/bin/env python3
"""Tensor summaries in the built-in recorder's trace (ACCEL_TRACE_TENSORS):
a small decoder run (example-decoder on reference.axe, whose phases the built-in recorder
records) records one "tensor
summary" instant per typed binding each kernel writes, with the kernel,
binding, count, min, max, mean, NaN and Inf counts as arguments, decoded
here with the Python protobuf decoder of perfetto_check; without the
variable there are none. The numbers are checked against each other
(min <= mean <= max, finite outputs) and against the kernels that ran.

usage: tensor_summary_test.py EXAMPLE_DECODER REFERENCE_AXE
"""
import collections
import os
import subprocess
import sys
import tempfile

import perfetto_check as pc

DECODER, AXE = sys.argv[1], sys.argv[2]
SMALL = ["--prompt", "3", "--steps", "2", "--layers", "1", "--dim", "64",
         "--heads", "2", "--kv-heads", "1", "--head-dim", "32", "--ffn", "64",
         "--vocab", "128"]


def record(tmp, tensors):
    # The decoder records its prefill and decode phases with the built-in
    # recorder (accel_trace_start) into --trace-dir.
    out = os.path.join(tmp, "traces%d" % tensors)
    os.makedirs(out)
    env = dict(os.environ)
    env.pop("ACCEL_TRACE", None)
    env["ACCEL_TRACE_TENSORS"] = "1" if tensors else "0"
    r = subprocess.run([DECODER, AXE, "--model", os.path.join(tmp, "m.axe"),
                        "--trace-dir", out, *SMALL], env=env,
                       capture_output=True, text=True, timeout=120)
    pc.expect(r.returncode == 0, f"example-decoder failed: {r.stderr}")
    paths = [os.path.join(out, f) for f in sorted(os.listdir(out))
             if f.endswith(".pftrace")]
    pc.expect(paths, f"example-decoder wrote no trace in {out}")
    return paths


def summaries(paths):
    out = []
    for path in paths:
        trace, tracks = pc.load(path)
        pc.check(trace, tracks)
        for p in trace.packet:
            if p.HasField("track_event") and \
                    p.track_event.name == "tensor summary":
                out.append({a.name: a.string_value
                            for a in p.track_event.debug_annotations})
    return out


def main():
    with tempfile.TemporaryDirectory() as tmp:
        got = summaries(record(tmp, True))
        pc.expect(got, "no tensor summary in the trace")
        by_kernel = collections.Counter(s["kernel"] for s in got)
        for k in ("rmsnorm", "qmatmul_int8", "attention_prefill", "swiglu"):
            pc.expect(by_kernel[k] > 0, f"no summary of {k}: {by_kernel}")
        for s in got:
            for key in ("binding", "name", "count", "min", "max", "mean",
                        "nan", "inf"):
                pc.expect(key in s, f"summary without {key}: {s}")
            lo, hi, mean = float(s["min"]), float(s["max"]), float(s["mean"])
            pc.expect(lo <= mean <= hi, f"min <= mean <= max broken: {s}")
            pc.expect(int(s["count"]) > 0, f"empty tensor: {s}")
            pc.expect(s["nan"] == "0" and s["inf"] == "0",
                      f"a decoder output is not finite: {s}")
        # rmsnorm writes its y (binding 2) only.
        norms = [s for s in got if s["kernel"] == "rmsnorm"]
        pc.expect(all(s["binding"] == "2" and s["name"] == "y"
                      for s in norms), f"rmsnorm summaries: {norms[:2]}")
        pc.expect(not summaries(record(tmp, False)),
                  "tensor summaries without ACCEL_TRACE_TENSORS")
    print(f"ok: {len(got)} tensor summaries")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except pc.Failure as e:
        print(f"FAIL: {e}")
        sys.exit(1)
