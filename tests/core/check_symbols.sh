#!/bin/sh
# Fails when the symbols exported by libaccel.so differ from the checked-in
# list (lib/accel.symbols). After adding a public function on purpose, run
# scripts/update-symbols.sh.
set -eu
lib="$1"
list="$2"
# Every exported symbol carries the version node of lib/accel.map (ACCEL_0):
# "name@@ACCEL_0" in nm's output.
versioned=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBR]$/ {print $3}' | sort)
unversioned=$(printf '%s\n' "$versioned" | grep -v '@@ACCEL_0$' || true)
if [ -n "$unversioned" ]; then
  echo "exported symbols without the ACCEL_0 version: $unversioned"
  exit 1
fi
actual=$(printf '%s\n' "$versioned" | sed 's/@@ACCEL_0$//')
expected=$(grep -v '^#' "$list" | sort)
if [ "$actual" != "$expected" ]; then
  echo "exported symbols differ from $list (< expected, > actual):"
  tmp=$(mktemp -d)
  printf '%s\n' "$expected" > "$tmp/expected"
  printf '%s\n' "$actual" > "$tmp/actual"
  diff "$tmp/expected" "$tmp/actual" || true
  rm -rf "$tmp"
  exit 1
fi
bad=$(printf '%s\n' "$actual" | grep -v '^accel_' || true)
if [ -n "$bad" ]; then
  echo "non-accel symbols exported: $bad"
  exit 1
fi
echo "$(printf '%s\n' "$actual" | wc -l) exported symbols match $list, all versioned ACCEL_0"
