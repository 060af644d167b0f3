#!/bin/sh
# Installed tools find the installed libaccel under any prefix: each tool
# linked against the shared library carries the install libdir as its
# RUNPATH (without it accel-info, -pack and -topo exited 127 from a prefix
# outside the dynamic linker's search path).
# usage: install_test.sh BUILD_DIR PREFIX LIBDIR
set -eu
build=$1; prefix=$2; libdir=$3
case "$libdir" in /*) ;; *) libdir="$prefix/$libdir" ;; esac
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >/dev/null
fail=0
for tool in accel-info accel-topo accel-pack accel-inspect accel-trace; do
  bin="$dest$prefix/bin/$tool"
  if [ ! -x "$bin" ]; then
    echo "FAIL $tool: not installed at $prefix/bin"; fail=1; continue
  fi
  if readelf -d "$bin" | grep -q 'NEEDED.*libaccel\.so'; then
    if readelf -d "$bin" | grep -E 'R(UN)?PATH' | grep -qF "[$libdir]"; then
      echo "ok   $tool finds libaccel in $libdir"
    else
      echo "FAIL $tool: links libaccel.so but has no RUNPATH $libdir"; fail=1
    fi
  else
    echo "ok   $tool does not link the shared libaccel"
  fi
done
exit "$fail"
