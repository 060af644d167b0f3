#!/bin/sh
# accel against llama.cpp on the same files (docs/gguf.md, "Side by side
# with llama.cpp"): logits of small random llamas (F32, F16, Q8_0, Q4_0,
# Q4_K_M-like) against float64, tokenizer ids on the three real
# vocabularies, and accel-bench llm (with llama.cpp in the same run) on the
# two 200M files. Installs llama.cpp first if missing (scripts/llamacpp.sh).
# Too slow for CI: run it before resolving, and keep its output.
#
#   scripts/llamacpp-parity.sh [BUILD_DIR]   (default build/)
#
# ACCEL_PARITY_FLAGS=--no-speed skips the speed part, --tokenizers-only
# runs only the tokenizers, --quick runs accel-bench llm --quick;
# ACCEL_VOCAB_DIR: where ggml-vocab-*.gguf are; ACCEL_PARITY_SEED: the first
# of the 16 random models' seeds for the logits (default 300).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
py=$("$root/scripts/llamacpp.sh")
work=${TMPDIR:-/tmp}/accel-llamacpp-parity
exec "$py" "$root/scripts/llamacpp_parity.py" "$build" "$work"
