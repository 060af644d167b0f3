#!/bin/sh
# Proves that lib/shim/api_layout.c fails the build when a table entry
# moves: compiles it against the headers as they are (must pass), then
# against a copy of include/ whose ACCEL_API_ENTRIES has two entries swapped
# and one with an entry inserted before the end (both must fail, naming the
# moved entry).
# usage: check_api_layout.sh SOURCE_DIR
set -eu
src="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc_check() {
  ${CC:-cc} -std=gnu17 -fsyntax-only -I"$1" "$src/lib/shim/api_layout.c" 2> "$tmp/err"
}
cc_check "$src/include" || { echo "FAIL: api_layout.c does not build"; cat "$tmp/err"; exit 1; }
echo "ok: the table as it is passes"
status=0
for mutation in swap insert; do
  rm -rf "$tmp/include"; cp -r "$src/include" "$tmp/include"
  h="$tmp/include/accel/api_table.h"
  case "$mutation" in
    swap) sed -i -e 's/^  X(accel_buffer_alloc) \\$/  X(SWAP_A) \\/' \
                 -e 's/^  X(accel_buffer_free) \\$/  X(accel_buffer_alloc) \\/' \
                 -e 's/^  X(SWAP_A) \\$/  X(accel_buffer_free) \\/' "$h" ;;
    insert) sed -i 's/^  X(accel_stream_create) \\$/  X(accel_stream_query) X(accel_stream_create) \\/' "$h"
            sed -i '0,/^  X(accel_stream_query) \\$/{/^  X(accel_stream_query) \\$/d}' "$h" ;;
  esac
  if cmp -s "$h" "$src/include/accel/api_table.h"; then
    echo "FAIL: the $mutation mutation did not change the header"; status=1; continue
  fi
  if cc_check "$tmp/include"; then
    echo "FAIL: a table with entries moved ($mutation) still builds"; status=1
  elif grep -q "moved from index" "$tmp/err"; then
    echo "ok: $mutation fails the build: $(grep -m1 -o 'entry [a-z_]* moved from index [0-9]*' "$tmp/err")"
  else
    echo "FAIL: $mutation failed without naming the entry:"; cat "$tmp/err"; status=1
  fi
done
exit $status
