#!/bin/sh
# Regenerates lib/accel.symbols from a built libaccel.so (default build/).
set -eu
cd "$(dirname "$0")/.."
lib="${1:-build/libaccel.so}"
{
  echo "# Symbols exported by libaccel.so; checked by tests/core/check_symbols.sh."
  nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBR]$/ {print $3}' | sed 's/@@.*$//' | sort
} > lib/accel.symbols
echo "wrote lib/accel.symbols ($(grep -vc '^#' lib/accel.symbols) symbols)"
