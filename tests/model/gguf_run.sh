#!/bin/sh
# Sets up a virtual environment with the `gguf` package and numpy (from the
# package index, once, in VENV), then runs gguf_run_test.py: GGUF import and
# accel-run against a float64 evaluation. Exits 77 (skipped) with the reason
# when the packages cannot be had.
#
#   tests/model/gguf_run.sh VENV ACCEL_PACK ACCEL_RUN REFERENCE_AXE WORK_DIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
venv=$1
shift
if [ ! -x "$venv/bin/python" ] || \
    ! "$venv/bin/python" -c "import gguf, numpy" 2>/dev/null; then
  if ! python3 -m venv "$venv" >/dev/null 2>&1 || \
      ! timeout 600 "$venv/bin/python" -m pip install --quiet gguf numpy \
        >"$venv.log" 2>&1; then
    echo "gguf_run: cannot install gguf and numpy into $venv (offline?):" \
      "see $venv.log" >&2
    exit 77
  fi
fi
exec "$venv/bin/python" "$here/gguf_run_test.py" "$@"
