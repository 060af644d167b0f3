#!/usr/bin/env python3
"""accel-tune end to end: a quick search prints one JSON object whose
figures are consistent, every configuration gives the default's bytes, and
what it stores is a cache the library reads back (a second run finds its
entry kept); a kernel without tunables or a shape that does not fit exits 2.

usage: tune_test.py ACCEL_TUNE REFERENCE_AXE
"""
import json
import os
import subprocess
import sys
import tempfile

import checklist

TUNE, AXE = sys.argv[1], sys.argv[2]


def run(*args, cache):
    return subprocess.run([TUNE, *args, "--kernels", AXE, "--cache", cache,
                           "--quick", "--json"],
                          capture_output=True, text=True, timeout=300)


def test_quick_search_reports_consistent_figures():
    # Each result has its interval around its ratio, no differing bytes,
    # and a verdict from the interval.
    with tempfile.TemporaryDirectory() as d:
        cache = os.path.join(d, "sub", "cache")
        p = run("qmatmul_int8", "--shape", "1,512,256", cache=cache)
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert doc["tool"] == "accel-tune" and doc["fingerprint"].startswith(
            "host-"), doc
        (r,) = doc["results"]
        assert r["kernel"] == "qmatmul_int8" and r["configs"] == 40, r
        assert r["differing"] == 0, r
        if r["pairs"]:
            assert r["ci_low"] <= r["ratio"] <= r["ci_high"], r
        assert r["verdict"] in ("met", "missed", "inconclusive", "none"), r
        assert r["stored"] == (r["verdict"] == "met"), r
        if r["stored"]:
            with open(cache) as f:
                text = f.read()
            assert text.startswith("accel-tuning-cache 1\n"), text
            assert " qmatmul_int8 1 " in text, text


def test_all_dry_run_covers_the_decoder_set_and_stores_nothing():
    # --all searches matmul, the int8 GEMV and attention; --dry-run writes
    # no cache.
    with tempfile.TemporaryDirectory() as d:
        cache = os.path.join(d, "cache")
        p = run("--all", "--dry-run", cache=cache)
        assert p.returncode == 0, p.stderr
        kernels = {r["kernel"] for r in json.loads(p.stdout)["results"]}
        assert {"matmul", "qmatmul_int8", "attention_paged_decode",
                "attention_prefill"} <= kernels, kernels
        assert not os.path.exists(cache)


def test_untunable_kernel_or_bad_shape_is_a_usage_error():
    with tempfile.TemporaryDirectory() as d:
        cache = os.path.join(d, "cache")
        for args in (["softmax", "--shape", "4,4"],
                     ["matmul", "--shape", "1,2"],
                     ["attention_prefill", "--shape", "8,4,2,2,16"]):
            p = run(*args, cache=cache)
            assert p.returncode == 2 and "accel-tune" in p.stderr, (args, p)


if __name__ == "__main__":
    sys.exit(checklist.run(globals()))
