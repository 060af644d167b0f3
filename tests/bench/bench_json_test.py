#!/usr/bin/env python3
"""Runs every accel-bench subcommand with --quick --json and checks the output.

Each subcommand must exit 0 and print one JSON object in the shape of
docs/benchmarks.md: bench, device, run (where it ran) and results whose
entries carry name, value, unit, baseline_name, baseline, ratio, ci_low,
ci_high, pairs, method, target, verdict, met, runs and samples, with the figure
names that docs and dashboards rely on. Figures are not judged (the machines
are shared and noisy); only their shape and the arithmetic that ties them
together (the ratio is the median of the samples, the verdict follows the
interval and the target) are.

usage: bench_json_test.py ACCEL_BENCH [SUBCOMMAND...]
"""
import json
import re
import subprocess
import sys

SIZES = ["4KiB", "64KiB", "1MiB", "16MiB", "64MiB"]

# Per subcommand: figure names every run must have, then patterns that every
# other figure must match (figures that depend on the machine: optional
# allocators, hwloc, an LTTng session daemon).
EXPECTED = {
    "launch": (["roundtrip_empty_command", "bare_futex_handoff",
                "roundtrip_parked_worker", "enqueue_ns_per_command",
                "completed_ns_per_command", "bare_spsc_64B_ns_per_command",
                "idle_cpu_fraction", "empty_kernel_roundtrip",
                "replay_ns_per_command", "replay_vs_submitted_ns_per_command",
                "decoder_step_replay_host_us",
                "roundtrip_one_command_buffer"], []),
    "alloc": (["slab_pair_1t", "glibc_malloc_pair_1t", "slab_pair_2t",
               "glibc_malloc_pair_2t", "paged_kv_blocks_reserved_per_use",
               "paged_kv_grow_reserved_per_use", "async_roundtrip",
               "slab_pair_write_1t", "glibc_malloc_pair_write_1t",
               "slab_pair_write_2t", "glibc_malloc_pair_write_2t"],
              [r"(jemalloc|mimalloc)_pair_(write_)?[12]t"]),
    "topo": (["runtime_create_placed"],
             [r"topology_load_live", r"topology_deserialize"]),
    "load": (["load_to_first_launch_skip_hashes", "load_to_first_launch_hashed",
              "weight_bytes"], []),
    "trace": (["roundtrip_tracing_off", "roundtrip_no_session",
               "roundtrip_flight_recorder", "roundtrip_recorder",
               "roundtrip_recorder_vs_no_session", "event_record_ns",
               "event_record_and_flight_ns"],
              [r"roundtrip_lttng_session(_and_defaults)?"]),
    "dma": ([f"copy_1_engine_{s}" for s in SIZES] +
            [f"copy_1_engine_{s}_vs_calling_thread" for s in SIZES] +
            ["latency_4KiB_copy", "latency_4KiB_copy_engine",
             "stream_copy_4KiB", "h2d_pageable_staged_64MiB",
             "d2h_pageable_staged_64MiB"],
            [r"copy_\d+_engines_(%s)" % "|".join(SIZES)]),
    # etcd figures only where an etcd binary is installed.
    "recovery": (["shm_detect", "shm_detect_max", "shm_detect_abs",
                  "shm_resume", "shm_resume_max", "shm_trials_converged"],
                 [r"etcd_(detect|detect_max|detect_abs|resume|resume_max|"
                  r"trials_converged)"]),
    "kernels": (["matmul_f32_1024", "matmul_f32_1x4096x4096",
                 "mlp_block_64x512x2048", "qgemv_int8_4096",
                 "qgemv_int4_g128_4096", "softmax_4096", "layernorm_4096",
                 "rmsnorm_4096", "paged_decode_attention", "decoder_prefill",
                 "decoder_decode", "decoder_decode_host_overhead",
                 "numerics_check_qmatmul_int8_1x2816x1024",
                 "numerics_check_softmax_64x4096"], []),
    "serve": (["serve_throughput_continuous",
               "serve_continuous_vs_unpadded", "serve_kv_waste",
               "serve_ttft_p50", "serve_ttft_p99", "serve_tpot_p50",
               "serve_tpot_p99", "serve_shared_prefix",
               "serve_prefix_hit_rate", "serve_step_host_us",
               "serve_steps_replayed", "serve_throughput_replayed"], []),
    "shim": (["shim_semaphore_query", "shim_buffer_size"], []),
    # Skipped (no results, the reason instead) where there is no CUDA device.
    "cuda": (["launch_sync_empty_kernel", "command_buffer_1000_launches",
              "copy_pinned_h2d_1MiB",
              "copy_pinned_d2h_1MiB", "copy_pinned_h2d_64MiB",
              "copy_pinned_d2h_64MiB"], []),
}
# Run only when named (their own meson test: they take minutes).
SEPARATE = {"serve"}

KEYS = ["name", "value", "unit", "baseline_name", "baseline", "ratio",
        "ci_low", "ci_high", "pairs", "method", "target", "verdict", "met",
        "runs", "samples"]
RUN_KEYS = ["commit", "build_type", "cpu_model", "cores", "governor",
            "load_before", "load_after", "env", "host", "time"]


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def close(a, b):
    return abs(a - b) <= 1e-4 * abs(b) + 1e-9


def met(target, x):
    m = re.fullmatch(r"(<=|>=|<|>) (\S+)", target)
    assert m, f"target {target!r} is not '<op> <number>'"
    op, bound = m.group(1), float(m.group(2))
    return {"<=": x <= bound, ">=": x >= bound, "<": x < bound,
            ">": x > bound}[op]


def verdict(target, lo, hi):
    if target is None:
        return None
    a, b = met(target, lo), met(target, hi)
    return "met" if a and b else "missed" if not a and not b else "inconclusive"


def check_result(bench, r):
    where = f"{bench}/{r.get('name')}"
    for k in KEYS:
        assert k in r, f"{where}: no {k!r}"
    assert isinstance(r["value"], (int, float)), f"{where}: value"
    assert isinstance(r["runs"], int) and r["runs"] >= 1, f"{where}: runs"
    assert r["pairs"] == r["runs"], f"{where}: pairs"
    if r["baseline_name"] is None:
        assert r["baseline"] is None and r["ratio"] is None, where
        assert r["method"] in ("sampled", "exact"), where
        judged = r["value"]
    else:
        assert r["method"] in ("paired", "exact"), where
        judged = r["ratio"]
    if r["method"] == "exact":
        assert r["ci_low"] == r["ci_high"] == judged, f"{where}: exact"
        assert r["samples"] == [], where
    else:
        # The judged number is the median of the samples kept (per-pair
        # ratios, or values), and the interval is ordered.
        xs = r["samples"]
        assert len(xs) == r["pairs"], f"{where}: {len(xs)} samples"
        assert close(median(xs), judged), \
            f"{where}: {judged} is not the median of its samples"
        assert r["ci_low"] <= r["ci_high"], f"{where}: interval"
        assert min(xs) <= r["ci_low"] and r["ci_high"] <= max(xs), where
    want = verdict(r["target"], r["ci_low"], r["ci_high"])
    assert r["verdict"] == want, f"{where}: verdict {r['verdict']} not {want}"
    assert r["met"] == (None if want is None else want == "met"), where


def check_run(bench, run):
    for k in RUN_KEYS:
        assert k in run, f"{bench}: run has no {k!r}"
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?|unknown", run["commit"]), \
        run["commit"]
    assert isinstance(run["cores"], int) and run["cores"] >= 1
    assert isinstance(run["env"], dict)
    assert all(k.startswith(("ACCEL_", "OMP_", "OPENBLAS_", "GOMP_", "MALLOC_",
                             "GLIBC_TUNABLES", "LD_", "CUDA_", "LTTNG_"))
               for k in run["env"]), run["env"]


def check_bench(exe, bench):
    out = subprocess.run([exe, bench, "--quick", "--json"], check=True,
                         stdout=subprocess.PIPE, timeout=600).stdout
    doc = json.loads(out)
    assert doc["bench"] == bench, doc["bench"]
    if "skipped" in doc:
        # Only a benchmark that needs hardware may skip, and says why.
        assert bench == "cuda", f"{bench}: skipped"
        assert doc["skipped"] and doc["results"] == [], doc
        print(f"{bench}: skipped: {doc['skipped']}")
        return
    assert re.fullmatch(r"\w+:\d+", doc["device"]), doc["device"]
    names = [r["name"] for r in doc["results"]]
    assert len(names) == len(set(names)), f"{bench}: repeated names {names}"
    required, optional = EXPECTED[bench]
    missing = [n for n in required if n not in names]
    assert not missing, f"{bench}: missing figures {missing}"
    extra = [n for n in names if n not in required and
             not any(re.fullmatch(p, n) for p in optional)]
    assert not extra, f"{bench}: unexpected figures {extra}"
    check_run(bench, doc["run"])
    for r in doc["results"]:
        check_result(bench, r)
    print(f"{bench}: {len(names)} figures ok")


def main():
    exe = sys.argv[1]
    for bench in sys.argv[2:] or [b for b in EXPECTED if b not in SEPARATE]:
        check_bench(exe, bench)


if __name__ == "__main__":
    main()
