#!/bin/sh
# The C shim from an installed package: installs the build into a staging
# prefix (DESTDIR), builds tests/shim/shim_consumer.c against the installed
# headers only (no -laccel: it dlopens the library), and runs it on the
# installed libaccel.so.<major>.
# usage: consumer_test.sh BUILD_DIR SOURCE_DIR
set -eu
build="$1"
src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
meson install -C "$build" --destdir "$tmp/stage" --no-rebuild --quiet >/dev/null
header=$(find "$tmp/stage" -name api_table.h -path '*/include/accel/*' | head -1)
[ -n "$header" ] || { echo "FAIL: api_table.h not installed"; exit 1; }
inc=${header%/accel/api_table.h}
lib=$(find "$tmp/stage" -name 'libaccel.so.[0-9]' | head -1)
[ -n "$lib" ] || { echo "FAIL: no libaccel.so.<major> installed"; exit 1; }
${CC:-cc} -std=c17 -Wall -Werror -I"$inc" -o "$tmp/consumer" \
  "$src/tests/shim/shim_consumer.c" -ldl
if nm -u "$tmp/consumer" | grep -q ' accel_'; then
  echo "FAIL: the consumer links accel symbols:"; nm -u "$tmp/consumer" | grep accel_
  exit 1
fi
unset LD_LIBRARY_PATH
"$tmp/consumer" "$lib"
