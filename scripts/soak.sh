#!/bin/sh
# Soak runs: the mixed multi-threaded stress test for a long time, in the
# ASan+UBSan and TSan builds (the suite runs it for 1.5 s).
#   scripts/soak.sh [SECONDS]   (default 600 per build)
set -eu
cd "$(dirname "$0")/.."
seconds="${1:-600}"
for flavour in asan tsan; do
  dir=$(scripts/build.sh "$flavour")
  echo "== $flavour: $seconds s"
  ACCEL_STRESS_SECONDS="$seconds" ACCEL_STREAM_COPY_DMA_MIN_BYTES=65536 \
    "$dir/tests/stream/stress_test"
done
