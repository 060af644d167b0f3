#!/bin/sh
# Configures (once) and builds one flavour of accel.
#   scripts/build.sh [release|asan|tsan]   -> build/, build-asan/, build-tsan/
set -eu
cd "$(dirname "$0")/.."
flavour="${1:-release}"
werror="-Dwerror=true"
case "$flavour" in
  # release: meson's release build type (-O3, NDEBUG), as users build it;
  # the sanitizer builds keep debugoptimized (-O2 -g, assertions on).
  release) dir=build; opts="-Dbuildtype=release" ;;
  asan) dir=build-asan; opts="-Db_sanitize=address,undefined -Db_lundef=false" ;;
  tsan) dir=build-tsan; opts="-Db_sanitize=thread -Db_lundef=false" ;;
  *) echo "usage: scripts/build.sh [release|asan|tsan]" >&2; exit 2 ;;
esac
if [ ! -f "$dir/build.ninja" ]; then
  # shellcheck disable=SC2086
  meson setup "$dir" $werror $opts >/dev/null
else
  meson setup --reconfigure "$dir" $werror $opts >/dev/null
fi
ninja -C "$dir" >/dev/null
echo "$dir"
