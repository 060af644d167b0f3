#!/bin/sh
# Configures (once) and builds one flavour of accel, and prints the build
# folder on stdout.
#   scripts/build.sh [release|asan|tsan] [--progress]   -> build/, build-asan/, build-tsan/
# meson's and ninja's output is kept out of the way; when the build fails it
# is shown on stderr (the build exits 1). --progress shows it on stderr as the
# build goes.
set -eu
cd "$(dirname "$0")/.."
flavour="${1:-release}"
progress="${2:-}"
werror="-Dwerror=true"
case "$flavour" in
  # release: meson's release build type (-O3, NDEBUG), as users build it;
  # the sanitizer builds keep debugoptimized (-O2 -g, assertions on).
  release) dir=build; opts="-Dbuildtype=release" ;;
  asan) dir=build-asan; opts="-Db_sanitize=address,undefined -Db_lundef=false" ;;
  tsan) dir=build-tsan; opts="-Db_sanitize=thread -Db_lundef=false" ;;
  *) echo "usage: scripts/build.sh [release|asan|tsan] [--progress]" >&2; exit 2 ;;
esac
case "$progress" in
  ""|--progress) ;;
  *) echo "scripts/build.sh: unknown option \"$progress\"" >&2; exit 2 ;;
esac
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Runs "$@" with its output in $log (and on stderr with --progress); on
# failure shows the output and exits 1.
step() {
  status=0
  if [ -n "$progress" ]; then
    { "$@" 2>&1 || echo "$?" > "$log.rc"; } | tee "$log" >&2
    [ ! -f "$log.rc" ] || { status=$(cat "$log.rc"); rm -f "$log.rc"; }
  else
    "$@" > "$log" 2>&1 || status=$?
  fi
  if [ "$status" -ne 0 ]; then
    if [ -z "$progress" ]; then
      cat "$log" >&2
    fi
    echo "scripts/build.sh: the $flavour build failed in \"$*\" (exit $status)" >&2
    exit 1
  fi
}
if [ ! -f "$dir/build.ninja" ]; then
  # shellcheck disable=SC2086
  step meson setup "$dir" $werror $opts
else
  # shellcheck disable=SC2086
  step meson setup --reconfigure "$dir" $werror $opts
fi
step ninja -C "$dir"
echo "$dir"
