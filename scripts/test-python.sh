#!/bin/sh
# The Python module's tests: builds python/ (meson-python, incrementally)
# into a virtual environment and runs python/tests with pytest.
#   scripts/test-python.sh [--asan] [PYTEST_ARGS...]
# The venv is build/py-venv (or $ACCEL_PY_VENV), created once; numpy 2,
# pytest and the build tools are installed into it once (again only when the
# list below changes). The module builds in the venv's meson-build folder
# (meson-build-asan with --asan: AddressSanitizer + UBSan, installed into
# the venv's asan-site and run through LD_PRELOAD of their runtimes). The
# C build (build/, made here if missing) provides accel-pack and the
# reference kernels that the launch tests pack. pytest's output is
# kept in build/py-test-summary.txt (build/py-asan-test-summary.txt).
set -eu
cd "$(dirname "$0")/.."
asan=0
if [ "${1:-}" = "--asan" ]; then
  asan=1
  shift
fi
venv="${ACCEL_PY_VENV:-build/py-venv}"
want="pip>=23.1 numpy>=2 pytest meson-python>=0.16 meson>=1.3 ninja"
[ -f build/tools/accel-pack/accel-pack ] || scripts/build.sh release >/dev/null
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if [ "$(cat "$venv/.accel-requirements" 2>/dev/null)" != "$want" ]; then
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet --upgrade $want
  echo "$want" > "$venv/.accel-requirements"
fi
venv_abs=$(cd "$venv" && pwd)
export PATH="$venv_abs/bin:$PATH"
export ACCEL_PACK="$PWD/build/tools/accel-pack/accel-pack"
export ACCEL_HOST_KERNELS="$PWD/build/kernels/host/libaccel_host_kernels.so"
if [ "$asan" = 0 ]; then
  # Warnings are errors here (not for users' pip install): an implicit
  # declaration is how a function missing from the venv's Python's limited
  # API shows.
  pip install --quiet --no-build-isolation --no-deps \
    -Cbuild-dir="$venv_abs/meson-build" -Csetup-args=-Dwerror=true .
  summary=build/py-test-summary.txt
  set +e
  python -m pytest -q -p no:cacheprovider python/tests "$@" > "$summary" 2>&1
  rc=$?
else
  site="$venv_abs/asan-site"
  pip install --quiet --no-build-isolation --no-deps --upgrade --target "$site" \
    -Cbuild-dir="$venv_abs/meson-build-asan" \
    -Csetup-args=-Db_sanitize=address,undefined -Csetup-args=-Db_lundef=false .
  summary=build/py-asan-test-summary.txt
  # Python itself is not instrumented: its allocations look like leaks to
  # LeakSanitizer, so leak checking is off; every other ASan/UBSan check is on.
  set +e
  LD_PRELOAD="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)" \
    ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    PYTHONPATH="$site" python -m pytest -q -p no:cacheprovider python/tests "$@" \
    > "$summary" 2>&1
  rc=$?
fi
set -e
cat "$summary"
exit $rc
