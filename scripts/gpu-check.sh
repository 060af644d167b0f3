#!/bin/sh
# Checks accel on a machine with an NVIDIA GPU, in one command: builds the
# release flavour, then on the first CUDA device runs the conformance suite,
# the CUDA tests, the CUDA reference kernels (kernels/cuda) against the host
# kernels, the module tests that run on any device, and the
# benchmarks, and prints a summary to paste into the issue's note.
#
#   scripts/gpu-check.sh            on NVIDIA's driver (libcuda.so.1)
#   scripts/gpu-check.sh --double   on the driver API test double instead
#                                   (tests/cuda/double): proves this script
#                                   and the backend's use of the API where no
#                                   GPU exists, never the GPU itself
#
# Exit status: 0 when every step passed (skips allowed), 1 when one failed,
# 2 on a usage error, 3 when there is no CUDA device (the reason is printed).
set -eu
cd "$(dirname "$0")/.."

double=0
for arg in "$@"; do
  case "$arg" in
    --double) double=1 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown argument \"$arg\" (see --help)" >&2; exit 2 ;;
  esac
done

log_dir=$(mktemp -d "${TMPDIR:-/tmp}/accel-gpu-check.XXXXXX")
summary="$log_dir/summary"
: > "$summary"
failed=0

# Records one step's outcome: NAME STATUS DETAIL.
record() {
  printf '%-34s %-5s %s\n' "$1" "$2" "$3" >> "$summary"
  [ "$2" != FAIL ] || failed=1
}

# Runs a step with its output in $log_dir/NAME.log: PASS on exit 0, SKIP on
# 77 (meson's skip code) and, for benchmarks (UNSUPPORTED_IS_SKIP=1), on a
# figure the device does not support yet; FAIL otherwise (the log's tail is
# shown).
run_step() {
  name=$1
  shift
  log="$log_dir/$(echo "$name" | tr '/ ' '__').log"
  status=0
  "$@" > "$log" 2>&1 || status=$?
  if [ "$status" -ne 0 ] && [ "${UNSUPPORTED_IS_SKIP:-0}" = 1 ] &&
     grep -q 'ACCEL_ERROR_UNSUPPORTED' "$log"; then
    record "$name" SKIP "$(grep -m 1 'ACCEL_ERROR_UNSUPPORTED' "$log")"
    return
  fi
  case "$status" in
    0) record "$name" PASS "" ;;
    77) record "$name" SKIP "$(tail -n 1 "$log")" ;;
    *)
      record "$name" FAIL "exit $status, log $log"
      echo "--- $name failed (exit $status); last lines of $log:" >&2
      tail -n 15 "$log" >&2
      ;;
  esac
}

echo "gpu-check: building (scripts/build.sh release)"
build=$(scripts/build.sh release)

if [ "$double" = 1 ]; then
  ACCEL_CUDA_LIBRARY="$PWD/$build/tests/cuda/libcuda.so.1"
  export ACCEL_CUDA_LIBRARY
  [ -f "$ACCEL_CUDA_LIBRARY" ] || {
    echo "gpu-check: no test double at $ACCEL_CUDA_LIBRARY (cuda.h missing?)" >&2
    exit 3
  }
  where="the driver API test double (not a GPU)"
else
  unset ACCEL_CUDA_LIBRARY || true
  where="NVIDIA's driver"
fi

# The device: accel-info must list cuda:0, else say why and stop.
info=$("$build/tools/accel-info/accel-info") || {
  echo "gpu-check: accel-info failed" >&2
  exit 1
}
if ! printf '%s\n' "$info" | grep -q '^device [0-9]*: cuda:0$'; then
  echo "gpu-check: no CUDA device through $where:" >&2
  printf '%s\n' "$info" | grep '^backend cuda' >&2 || true
  exit 3
fi
device=$(printf '%s\n' "$info" | sed -n '/: cuda:0$/,/^$/p')

# Every step below sees cuda:0 as device 0 (tests and benchmarks use
# device 0), and the host device as device 1 (a device of another backend,
# for the tests that need a second device).
ACCEL_VISIBLE_DEVICES=cuda:0,host:0
export ACCEL_VISIBLE_DEVICES

run_step conformance/cuda env ACCEL_CONFORMANCE_BACKEND=cuda \
  ACCEL_VISIBLE_DEVICES= "$build/tests/conformance/conformance_test"
run_step cuda/backend "$build/tests/cuda/cuda_backend_test"
run_step cuda/launch "$build/tests/cuda/cuda_launch_test"
# The CUDA reference kernels (kernels/cuda): their PTX through the backend
# and reference.axe through accel_launch, bit for bit against the host
# kernels (on the double, each launch runs the kernel's emulator build); and
# the emulator's own suite (no GPU involved).
if [ -f "$build/tests/cuda_kernels/cuda_reference_test" ]; then
  run_step cuda-kernels/reference env ACCEL_VISIBLE_DEVICES=cuda:0 \
    ACCEL_TEST_CUDA_PTX="$build/kernels/cuda/reference_compute_80.ptx" \
    ACCEL_TEST_KERNELS="$build/kernels/host/libaccel_kernels.so" \
    ACCEL_TEST_REFERENCE_AXE="$build/kernels/axe/reference.axe" \
    "$build/tests/cuda_kernels/cuda_reference_test"
  run_step cuda-kernels/emulator env \
    ACCEL_TEST_KERNELS="$build/kernels/host/libaccel_kernels.so" \
    "$build/tests/cuda_kernels/cuda_kernels_test"
else
  record cuda-kernels SKIP "not built (no nvcc, or no OpenBLAS)"
fi
run_step sync/semaphore "$build/tests/sync/semaphore_test"
run_step stream/stream "$build/tests/stream/stream_test"
run_step stream/event "$build/tests/stream/event_test"
run_step stream/stress env ACCEL_STREAM_COPY_DMA_MIN_BYTES=65536 \
  "$build/tests/stream/stress_test"
if [ "$double" = 1 ]; then
  bench_args="--json --quick"
else
  bench_args="--json"
fi
# accel-bench cuda measures the CUDA device against bare driver calls; the
# other benchmarks run their figures on device 0, and those that need what
# the CUDA device lacks (host kernels, host-visible memory) report
# UNSUPPORTED, a skip here.
for b in cuda launch dma; do
  # shellcheck disable=SC2086
  UNSUPPORTED_IS_SKIP=1 run_step "bench/$b" \
    "$build/tools/accel-bench/accel-bench" "$b" $bench_args
done

echo
echo "accel gpu-check on $where, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ "$double" = 0 ] && command -v nvidia-smi > /dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
fi
printf '%s\n' "$device"
echo
cat "$summary"
for b in cuda launch dma; do
  log="$log_dir/bench_$b.log"
  if [ -f "$log" ] && grep -q '"results"' "$log"; then
    echo
    echo "accel-bench $b:"
    cat "$log"
  fi
done
echo
echo "logs: $log_dir"
if [ "$failed" = 1 ]; then
  echo "gpu-check: FAILED"
  exit 1
fi
echo "gpu-check: passed"
