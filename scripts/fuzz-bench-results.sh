#!/bin/sh
# Builds accel-bench's results-file parser (tools/accel-bench/results.c, and
# compare over what it parses) as a libFuzzer target with clang (ASan +
# UBSan) and runs it for a bounded time, seeded with results files written
# here. Crashes are written to the build folder (crash-*).
#
#   scripts/fuzz-bench-results.sh [--seconds N] [--build-dir DIR] [-- LIBFUZZER_ARGS]
set -eu
root=${ACCEL_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
fuzz_name=fuzz-bench-results
. "$(dirname "$0")/fuzz-args.sh"
if ! pkg-config --exists json-c sqlite3; then
  echo "fuzz-bench-results: json-c or sqlite3 not found; skipping" >&2
  exit 77
fi
run='"run": {"commit": "0123456789abcdef0123456789abcdef01234567", "time": "2026-11-25T10:00:00Z", "build_type": "release", "host": "h"}'
fig='{"name": "f", "value": 1.5, "unit": "us", "baseline_name": "b", "baseline": 1.0, "ratio": 1.5, "ci_low": 1.4, "ci_high": 1.6, "pairs": 3, "method": "paired", "target": "<= 2", "verdict": "met", "samples": [1.4, 1.5, 1.6]}'
echo "{\"format\": \"accel-bench-results/1\", $run, \"benches\": [{\"bench\": \"x\", \"results\": [$fig]}]}" > "$build/corpus/file.json"
echo "{\"bench\": \"x\", \"device\": \"host:0\", $run, \"results\": [$fig, {\"name\": \"g\", \"value\": 3, \"unit\": \"GB/s\", \"baseline_name\": null, \"samples\": []}]}" > "$build/corpus/one.json"
# shellcheck disable=SC2046
clang -std=gnu17 -O1 -g -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined \
  -I"$root/bench" -I"$root/tools/accel-bench" $(pkg-config --cflags json-c sqlite3) \
  "$root/fuzz/fuzz_bench_results.c" "$root/tools/accel-bench/results.c" \
  "$root/tools/accel-bench/compare.c" "$root/tools/accel-bench/history.c" \
  "$root/bench/bench_stats.c" $(pkg-config --libs json-c sqlite3) -lm \
  -o "$build/fuzz_bench_results"
cd "$build"
exec ./fuzz_bench_results -max_total_time="$seconds" -max_len=65536 \
  -rss_limit_mb=1024 -print_final_stats=1 "$@" corpus
