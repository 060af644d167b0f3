#!/bin/sh
# Builds accel-serve's request-parser libFuzzer target
# (fuzz/fuzz_completion_request.c) with clang (ASan + UBSan, json-c) and runs
# it for a bounded time, seeded from tests/data/serve. Crashes are written to
# the build folder (crash-*): fix them and add the input to the corpus.
#
#   scripts/fuzz-completion-request.sh [--seconds N] [--build-dir DIR] [-- LIBFUZZER_ARGS]
#
# The meson test 'serve/fuzz_completion_request' (suite serve-fuzz) runs it
# for 20 s.
set -eu
root=${ACCEL_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
fuzz_name=fuzz-completion-request
. "$(dirname "$0")/fuzz-args.sh"
cp "$root"/tests/data/serve/*.json "$build/corpus/" 2>/dev/null || true
# shellcheck disable=SC2046
clang -std=gnu17 -O1 -g -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -I"$root/tools/accel-serve" \
  $(pkg-config --cflags json-c) \
  "$root/fuzz/fuzz_completion_request.c" \
  "$root/tools/accel-serve/completion_request.c" \
  $(pkg-config --libs json-c) -lm -o "$build/fuzz_completion_request"
cd "$build"
exec ./fuzz_completion_request -max_total_time="$seconds" -max_len=4096 \
  -rss_limit_mb=1024 -print_final_stats=1 "$@" corpus
