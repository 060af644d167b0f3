#!/bin/sh
# Builds a libFuzzer target over lib/model (the GGUF reader, the tokenizers
# and the import, with the .axe writer and validator it uses; not the
# mapped model, which needs a device: the fuzz target drives its import
# pass through a sink) with clang,
# ASan and UBSan; shared by scripts/fuzz-gguf.sh and
# scripts/fuzz-tokenizer.sh.
#
#   fuzz/build-model-fuzzer.sh ROOT BUILD_DIR TARGET   (fuzz/TARGET.c -> BUILD_DIR/TARGET)
set -eu
root=$1
build=$2
target=$3
mkdir -p "$build"
cat > "$build/accel_config.h" <<'CONF'
#define ACCEL_HAVE_LTTNG 0
#define ACCEL_VERSION_STRING "fuzz"
CONF
# shellcheck disable=SC2046
clang -std=gnu17 -O1 -g -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined \
  -I"$build" -I"$root/include" -I"$root/lib" \
  "$root/fuzz/$target.c" $(ls "$root"/lib/model/*.c | grep -v gguf_mapped.c) \
  "$root/lib/core/error.c" \
  "$root/lib/abi/axe_writer.c" "$root/lib/abi/axe_reader.c" \
  $(pkg-config --libs icu-uc libxxhash) -o "$build/$target"
