#!/bin/sh
# Builds the trace reader's libFuzzer target (fuzz/fuzz_trace_summary.c) with
# clang (ASan + UBSan) and runs it for a bounded time, seeded from
# tests/data/trace. Crashes are written to the build folder (crash-*): fix
# them and add the input to the corpus.
#
#   scripts/fuzz-trace-summary.sh [--seconds N] [--build-dir DIR] [-- LIBFUZZER_ARGS]
#
# The meson test 'trace/fuzz_trace_summary' (suite trace-fuzz) runs it for
# 20 s.
set -eu
root=${ACCEL_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
fuzz_name=fuzz-trace-summary
. "$(dirname "$0")/fuzz-args.sh"
cp "$root"/tests/data/trace/*.pftrace "$build/corpus/" 2>/dev/null || true
clang -std=gnu17 -O1 -g -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -I"$root/tools/common" \
  "$root/fuzz/fuzz_trace_summary.c" "$root/tools/common/trace_summary.c" \
  -o "$build/fuzz_trace_summary"
cd "$build"
exec ./fuzz_trace_summary -max_total_time="$seconds" -max_len=65536 \
  -rss_limit_mb=1024 -print_final_stats=1 "$@" corpus
