#!/bin/sh
# The main job on the embedded default (the host device): installs what is
# missing, builds, lists the devices, and runs the example program. Each
# step says what it does first; a failing build shows its output and stops
# the script with exit 1.
set -eu
cd "$(dirname "$0")/.."
echo "== checking build dependencies (scripts/install-deps.sh)"
scripts/install-deps.sh
echo "== building the release flavour into build/ (meson and ninja; a first build takes a minute)"
dir=$(scripts/build.sh release --progress) || exit 1
echo
echo "== accel-info"
"$dir/tools/accel-info/accel-info"
echo
echo "== accel-topo"
"$dir/tools/accel-topo/accel-topo"
echo
echo "== example-streams"
"$dir/examples/example-streams"
if [ -x "$dir/examples/example-mlp-layer" ]; then
  echo
  echo "== example-mlp-layer: pack, load and run a transformer MLP block (traced)"
  axe="$dir/mlp_layer.axe"
  trace="$dir/mlp_layer.pftrace"
  ACCEL_TRACE="$trace" "$dir/examples/example-mlp-layer" \
    "$dir/kernels/host/libaccel_kernels.so" "$axe"
  echo
  echo "== accel-inspect $axe"
  "$dir/tools/accel-inspect/accel-inspect" "$axe"
  echo
  echo "== accel-trace summary $trace (open the file in the Perfetto UI)"
  "$dir/tools/accel-trace/accel-trace" summary "$trace"
fi
