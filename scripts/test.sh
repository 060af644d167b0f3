#!/bin/sh
# The whole test suite: installs what is missing, then builds and runs every
# test in three builds: normal (warnings as errors), ASan+UBSan, and TSan.
# Exits non-zero if any test in any build fails.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
# TSan cannot map its shadow memory with high-entropy ASLR on newer kernels.
if [ "$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 28)" -gt 28 ]; then
  sysctl -qw vm.mmap_rnd_bits=28 2>/dev/null || true
fi
rm -f build/test-summary.txt build-asan/test-summary.txt build-tsan/test-summary.txt
status=0
for flavour in release asan tsan; do
  echo "== build: $flavour"
  dir=$(scripts/build.sh "$flavour")
  mult=1
  [ "$flavour" = release ] || mult=4
  if meson test -C "$dir" --print-errorlogs --timeout-multiplier "$mult" \
      --num-processes 2 > "$dir/test-summary.txt" 2>&1; then
    :
  else
    status=1
  fi
  grep -E "^ *[0-9]+/[0-9]+ |^(Ok|Fail|Skipped|Timeout|Expected Fail|Unexpected Pass):" "$dir/test-summary.txt" || true
  if [ $status -ne 0 ]; then
    echo "== failures in $flavour build (full log: $dir/meson-logs/testlog.txt)"
    grep -B2 -A30 -E "^=+ [0-9]+/[0-9]+ =+" "$dir/test-summary.txt" | head -200 || true
    break
  fi
done
# The Python module (python/): pytest in a virtual environment the script
# keeps in build/py-venv, against the normal build of the module and an
# ASan/UBSan one (scripts/test-python.sh).
rm -f build/py-test-summary.txt build/py-asan-test-summary.txt
if [ $status -eq 0 ]; then
  for mode in "" --asan; do
    echo "== python${mode:+ ($mode)}"
    # shellcheck disable=SC2086
    if ! scripts/test-python.sh $mode > build/py-test-log.txt 2>&1; then
      status=1
      echo "== python tests failed${mode:+ ($mode)}:"
      tail -60 build/py-test-log.txt
      break
    fi
    tail -1 "build/py${mode:+-asan}-test-summary.txt"
  done
fi
# One closing line in the plain form CI reads.
passed=0; failed=0; skipped=0
for f in build/test-summary.txt build-asan/test-summary.txt build-tsan/test-summary.txt; do
  [ -f "$f" ] || continue
  p=$(awk '/^Ok:/ {print $2}' "$f"); x=$(awk '/^Fail:/ {print $2}' "$f")
  t=$(awk '/^Timeout:/ {print $2}' "$f"); s=$(awk '/^Skipped:/ {print $2}' "$f")
  passed=$((passed + ${p:-0})); failed=$((failed + ${x:-0} + ${t:-0})); skipped=$((skipped + ${s:-0}))
done
for f in build/py-test-summary.txt build/py-asan-test-summary.txt; do
  [ -f "$f" ] || continue
  line=$(tail -1 "$f")
  p=$(echo "$line" | grep -o '[0-9]* passed' | cut -d' ' -f1)
  x=$(echo "$line" | grep -o '[0-9]* failed' | cut -d' ' -f1)
  e=$(echo "$line" | grep -o '[0-9]* error' | cut -d' ' -f1)
  s=$(echo "$line" | grep -o '[0-9]* skipped' | cut -d' ' -f1)
  # A run that died before pytest's closing line (a sanitizer abort) counts
  # as one failure.
  case "$line" in *passed*|*failed*|*error*) ;; *) x=$((${x:-0} + 1)) ;; esac
  passed=$((passed + ${p:-0})); failed=$((failed + ${x:-0} + ${e:-0})); skipped=$((skipped + ${s:-0}))
done
echo "tests: $passed passed, $failed failed, $skipped skipped"
exit $status
