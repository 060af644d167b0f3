#!/bin/sh
# Builds the .axe loader's libFuzzer target with clang (ASan + UBSan) and runs
# it for a bounded time, seeded from tests/data/abi. Crashes are written to
# the build folder (crash-*): fix them and add the input to the corpus.
#
#   scripts/fuzz-loader.sh [--seconds N] [--build-dir DIR] [-- LIBFUZZER_ARGS]
#
# The meson test 'abi/fuzz_loader' (suite abi-fuzz) runs it for 20 s; run it
# longer by hand, e.g. scripts/fuzz-loader.sh --seconds 3600.
set -eu
root=${ACCEL_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
fuzz_name=fuzz-loader
. "$(dirname "$0")/fuzz-args.sh"
cp "$root"/tests/data/abi/*.axe "$build/corpus/" 2>/dev/null || true
# The loader alone, with every optional dependency (tracing included) off.
cat > "$build/accel_config.h" <<'CONF'
#define ACCEL_HAVE_NUMA 0
#define ACCEL_HAVE_HWLOC 0
#define ACCEL_HAVE_IBVERBS 0
#define ACCEL_HAVE_DRM 0
#define ACCEL_HAVE_LTTNG 0
#define ACCEL_HAVE_CUDA_HEADERS 0
#define ACCEL_VERSION_STRING "fuzz"
CONF
clang -std=gnu17 -O1 -g -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined \
  -I"$build" -I"$root/include" -I"$root/lib" \
  "$root/fuzz/fuzz_loader.c" "$root/lib/abi/axe_reader.c" \
  "$root/lib/core/error.c" -lxxhash -o "$build/fuzz_loader"
cd "$build"
exec ./fuzz_loader -max_total_time="$seconds" -max_len=65536 \
  -rss_limit_mb=1024 -print_final_stats=1 "$@" corpus
