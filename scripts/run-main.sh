#!/bin/sh
# The main job on the embedded default (the host device): installs what is
# missing, builds, lists the devices, and runs the example program.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
dir=$(scripts/build.sh release)
echo "== accel-info"
"$dir/tools/accel-info/accel-info"
echo
echo "== accel-topo"
"$dir/tools/accel-topo/accel-topo"
echo
echo "== example-streams"
"$dir/examples/example-streams"
