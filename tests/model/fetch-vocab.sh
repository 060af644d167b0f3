#!/bin/sh
# Fetches llama.cpp's vocabulary-only GGUF files of real models, with their
# test texts (.gguf.inp) and the reference tokenizers' ids (.gguf.out), from
# the llama-cpp-python source distribution, into CACHE_DIR (kept between
# runs; not part of the tree). Exits 0 when the files are there, 77 with the
# reason on stderr when they cannot be had (no pip, no network).
#
#   tests/model/fetch-vocab.sh CACHE_DIR
set -eu
cache=$1
version=0.3.16
names="llama-spm llama-bpe qwen2"
have() {
  for n in $names; do
    for ext in gguf gguf.inp gguf.out; do
      [ -s "$cache/ggml-vocab-$n.$ext" ] || return 1
    done
  done
}
if have; then
  exit 0
fi
mkdir -p "$cache/sdist"
# Several tests fetch into one cache at once: one fetches, the others wait
# for it and then find the files.
exec 9>"$cache/.fetch.lock"
flock 9
if have; then
  exit 0
fi
python=${PYTHON:-python3}
if ! "$python" -m pip --version >/dev/null 2>&1; then
  echo "fetch-vocab: no pip for $python; cannot fetch the vocabularies" >&2
  exit 77
fi
sdist="$cache/sdist/llama_cpp_python-$version.tar.gz"
if [ ! -s "$sdist" ]; then
  if ! timeout 600 "$python" -m pip download --quiet --no-deps \
      --no-binary :all: "llama-cpp-python==$version" -d "$cache/sdist" \
      >"$cache/sdist/pip.log" 2>&1; then
    echo "fetch-vocab: pip download of llama-cpp-python $version failed" \
      "(offline?): see $cache/sdist/pip.log" >&2
    exit 77
  fi
fi
members=""
for n in $names; do
  for ext in gguf gguf.inp gguf.out; do
    members="$members llama_cpp_python-$version/vendor/llama.cpp/models/ggml-vocab-$n.$ext"
  done
done
# shellcheck disable=SC2086
if ! tar -xzf "$sdist" -C "$cache" --strip-components=4 $members; then
  echo "fetch-vocab: $sdist lacks the vocabularies" >&2
  exit 77
fi
have
