#!/bin/sh
# Builds the tokenizers' libFuzzer target with clang (ASan + UBSan) and runs
# it for a bounded time against each real vocabulary in VOCAB_DIR
# (ggml-vocab-*.gguf, as tests/model/fetch-vocab.sh fetches them), seeded
# with the vocabularies' own test texts. Crashes are written to the build
# folder (crash-*): fix them and add the input to a test.
#
#   scripts/fuzz-tokenizer.sh --vocab-dir DIR [--seconds N] [--build-dir DIR]
#
# The meson test 'model/fuzz_tokenizer' (suite model-fuzz) runs it for 10 s
# per vocabulary; without the vocabularies it exits 77 (skipped).
set -eu
root=${ACCEL_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
seconds=10
build=${TMPDIR:-/tmp}/accel-fuzz-tokenizer
vocab=""
fetch=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --vocab-dir) vocab=$2; shift 2 ;;
    --fetch) fetch=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "fuzz-tokenizer: unknown argument $1" >&2; exit 2 ;;
  esac
done
if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz-tokenizer: clang not found; skipping" >&2
  exit 77
fi
if [ -n "$fetch" ] && [ -n "$vocab" ]; then
  "$fetch" "$vocab" || exit 77
fi
if [ -z "$vocab" ] || ! ls "$vocab"/ggml-vocab-*.gguf >/dev/null 2>&1; then
  echo "fuzz-tokenizer: no vocabularies in '${vocab}'; skipping" >&2
  exit 77
fi
vocab=$(cd "$vocab" && pwd)
mkdir -p "$build"
"$root/fuzz/build-model-fuzzer.sh" "$root" "$build" fuzz_tokenizer
for file in "$vocab"/ggml-vocab-*.gguf; do
  name=$(basename "$file" .gguf)
  corpus="$build/corpus-$name"
  mkdir -p "$corpus"
  # Seeds: each test text, prefixed by the flags byte.
  python3 - "$file.inp" "$corpus" <<'PY'
import os, sys
try:
    texts = open(sys.argv[1], 'rb').read().split(b'\n__ggml_vocab_test__\n')
except OSError:
    texts = [b'Hello world']
for i, t in enumerate(texts):
    with open(os.path.join(sys.argv[2], 'seed-%d' % i), 'wb') as f:
        f.write(bytes([i % 8]) + t)
PY
  echo "fuzz-tokenizer: $name for ${seconds}s" >&2
  (cd "$build" && ACCEL_FUZZ_VOCAB="$file" ./fuzz_tokenizer \
    -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=2048 \
    -print_final_stats=1 "$@" "$corpus")
done
