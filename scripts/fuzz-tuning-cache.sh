#!/bin/sh
# Builds the tuning cache reader's libFuzzer target (fuzz/fuzz_tuning_cache.c)
# with clang (ASan + UBSan) and runs it for a bounded time, seeded from
# tests/data/tuning. Crashes are written to the build folder (crash-*): fix
# them and add the input to the corpus.
#
#   scripts/fuzz-tuning-cache.sh [--seconds N] [--build-dir DIR] [-- LIBFUZZER_ARGS]
#
# The meson test 'abi/fuzz_tuning_cache' (suite abi-fuzz) runs it for 20 s.
set -eu
root=${ACCEL_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
fuzz_name=fuzz-tuning-cache
. "$(dirname "$0")/fuzz-args.sh"
cp "$root"/tests/data/tuning/* "$build/corpus/" 2>/dev/null || true
clang -std=gnu17 -O1 -g -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -I"$root/include" -I"$root/lib" \
  "$root/fuzz/fuzz_tuning_cache.c" "$root/lib/abi/tuning_cache.c" \
  "$root/lib/core/error.c" -o "$build/fuzz_tuning_cache"
cd "$build"
exec ./fuzz_tuning_cache -max_total_time="$seconds" -max_len=8192 \
  -rss_limit_mb=1024 -print_final_stats=1 "$@" corpus
