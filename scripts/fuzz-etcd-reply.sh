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
fuzz_name=fuzz-etcd-reply
. "$(dirname "$0")/fuzz-args.sh"
if ! pkg-config --exists json-c; then
  echo "fuzz-etcd-reply: json-c not found; skipping" >&2
  exit 77
fi
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
