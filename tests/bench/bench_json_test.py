#!/usr/bin/env python3
"""Runs every accel-bench subcommand with --quick --json and checks the output.

Each subcommand must exit 0 and print one JSON object in the shape of
DESIGN.md ("Tests and benchmarks"): bench, device, and results whose entries
carry name, value, unit, baseline_name, baseline, ratio, target, met and the
run count, with the figure names that docs and dashboards rely on. Figures are
not judged (the machines are shared and noisy); only their shape and the
arithmetic that ties them together (ratio, met) are.

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
                 "decoder_decode", "decoder_decode_host_overhead"], []),
    "serve": (["serve_throughput_continuous", "serve_kv_waste",
               "serve_ttft_p50", "serve_ttft_p99", "serve_tpot_p50",
               "serve_tpot_p99", "serve_shared_prefix",
               "serve_prefix_hit_rate"], []),
    "shim": (["shim_semaphore_query", "shim_buffer_size"], []),
    # Skipped (no results, the reason instead) where there is no CUDA device.
    "cuda": (["launch_sync_empty_kernel", "copy_pinned_h2d_1MiB",
              "copy_pinned_d2h_1MiB", "copy_pinned_h2d_64MiB",
              "copy_pinned_d2h_64MiB"], []),
}
# Run only when named (their own meson test: they take minutes).
SEPARATE = {"serve"}

KEYS = ["name", "value", "unit", "baseline_name", "baseline", "ratio",
        "target", "met", "runs"]


def met(target, x):
    m = re.fullmatch(r"(<=|>=|<|>) (\S+)", target)
    assert m, f"target {target!r} is not '<op> <number>'"
    op, bound = m.group(1), float(m.group(2))
    return {"<=": x <= bound, ">=": x >= bound, "<": x < bound,
            ">": x > bound}[op]


def check_result(bench, r):
    where = f"{bench}/{r.get('name')}"
    for k in KEYS:
        assert k in r, f"{where}: no {k!r}"
    assert isinstance(r["value"], (int, float)), f"{where}: value"
    assert isinstance(r["runs"], int) and r["runs"] >= 1, f"{where}: runs"
    if r["baseline_name"] is None:
        assert r["baseline"] is None and r["ratio"] is None, where
        judged = r["value"]
    else:
        assert r["ratio_method"] in ("paired", "medians"), where
        if r["ratio_method"] == "medians" and r["baseline"]:
            want = r["value"] / r["baseline"]
            assert abs(r["ratio"] - want) <= 1e-3 * abs(want) + 1e-9, \
                f"{where}: ratio {r['ratio']} is not value / baseline {want}"
        judged = r["ratio"]
    if r["target"] is None:
        assert r["met"] is None, f"{where}: met without a target"
    else:
        assert r["met"] == met(r["target"], judged), f"{where}: met"


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
    for r in doc["results"]:
        check_result(bench, r)
    print(f"{bench}: {len(names)} figures ok")


def main():
    exe = sys.argv[1]
    for bench in sys.argv[2:] or [b for b in EXPECTED if b not in SEPARATE]:
        check_bench(exe, bench)


if __name__ == "__main__":
    main()
