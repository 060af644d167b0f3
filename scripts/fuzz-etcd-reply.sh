#!/bin/sh
# Builds the etcd store's reply parser's libFuzzer target with clang (ASan +
# UBSan) and runs it for a bounded time, seeded from tests/data/cluster.
# Crashes are written to the build folder (crash-*): fix them and add the
# input to the corpus.
#
#   scripts/fuzz-etcd-reply.sh [--seconds N] [--build-dir DIR] [-- LIBFUZZER_ARGS]
#
# The meson test 'cluster/fuzz_etcd_reply' (suite cluster-fuzz) runs it for
# 20 s; run it longer by hand.
set -eu
root=${ACCEL_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
seconds=20
build=${TMPDIR:-/tmp}/accel-fuzz-etcd-reply
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "fuzz-etcd-reply: unknown argument $1" >&2; exit 2 ;;
  esac
done
if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz-etcd-reply: clang not found; skipping" >&2
  exit 77
fi
if ! pkg-config --exists json-c; then
  echo "fuzz-etcd-reply: json-c not found; skipping" >&2
  exit 77
fi
mkdir -p "$build/corpus"
cp "$root"/tests/data/cluster/*.json "$build/corpus/" 2>/dev/null || true
clang -std=gnu17 -O1 -g -D_GNU_SOURCE -DACCEL_HAVE_ETCD=1 \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$root/include" -I"$root/lib" $(pkg-config --cflags json-c) \
  "$root/fuzz/fuzz_etcd_reply.c" "$root/lib/cluster/etcd_json.c" \
  "$root/lib/cluster/membership.c" "$root/lib/core/error.c" \
  $(pkg-config --libs json-c) -o "$build/fuzz_etcd_reply"
cd "$build"
exec ./fuzz_etcd_reply -max_total_time="$seconds" -max_len=16384 \
  -rss_limit_mb=1024 -print_final_stats=1 "$@" corpus
