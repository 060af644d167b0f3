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
if [ -x "$dir/examples/example-decoder" ]; then
  echo
  echo "== example-decoder: a 4-layer int8 transformer on reference.axe: prefill 256 tokens, decode 64"
  echo "   (paged KV cache; time per kernel and host overhead from the recorder's traces)"
  "$dir/examples/example-decoder" "$dir/kernels/axe/reference.axe" \
    --model "$dir/decoder.axe" --trace-dir "$dir" --prompt 256 --steps 64
  echo
  echo "== accel-inspect $dir/kernels/axe/reference.axe (every reference kernel)"
  "$dir/tools/accel-inspect/accel-inspect" "$dir/kernels/axe/reference.axe" |
    sed -n '/^kernels/,/^weights/p' | grep -v '^    binding'
fi
