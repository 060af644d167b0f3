#!/bin/sh
# Installs llama.cpp through llama-cpp-python (built from source, for the CPU
# only) into a virtual environment, once, and prints the environment's python
# on stdout. Idempotent: a venv whose python imports llama_cpp at the pinned
# version is used as it is. `accel-bench llm` and scripts/llamacpp-parity.sh
# measure llama.cpp through it (docs/gguf.md, "Side by side with llama.cpp").
#
#   scripts/llamacpp.sh [--check]
#
# ACCEL_LLAMACPP_VENV   where the venv goes (default ~/.cache/accel/llamacpp-venv)
# --check               print the python and exit 0 if installed, exit 1 if not
#
# The build takes about 7 minutes on 2 cores. Debian packages it needs
# (a C/C++ compiler, cmake, python3-venv) are installed with apt-get when
# missing and this runs as root.
set -eu
version=0.3.36
venv=${ACCEL_LLAMACPP_VENV:-${HOME}/.cache/accel/llamacpp-venv}
py=$venv/bin/python

installed() {
  [ -x "$py" ] && "$py" -c "
import llama_cpp, sys
sys.exit(0 if llama_cpp.__version__ == '$version' else 1)" 2>/dev/null
}

if installed; then
  echo "$py"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  exit 1
fi

need=""
command -v cc >/dev/null 2>&1 || need="$need build-essential"
command -v c++ >/dev/null 2>&1 || need="$need build-essential"
command -v cmake >/dev/null 2>&1 || need="$need cmake"
python3 -c "import venv, ensurepip" 2>/dev/null || need="$need python3-venv"
if [ -n "$need" ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "llamacpp.sh: needs$need (install them, then rerun)" >&2
    exit 1
  fi
  echo "llamacpp.sh: apt-get install$need" >&2
  apt-get update >/dev/null
  # shellcheck disable=SC2086 # one word per package
  DEBIAN_FRONTEND=noninteractive apt-get install -y $need >/dev/null
fi

mkdir -p "$(dirname "$venv")"
if [ ! -x "$py" ]; then
  python3 -m venv "$venv"
fi
log=$venv/install.log
echo "llamacpp.sh: building llama-cpp-python $version (CPU only) into" \
  "$venv (several minutes; log $log)" >&2
# CPU only: no BLAS, no GPU backends; native code for this machine, as the
# accel kernels pick their vector extensions at load.
if ! CMAKE_ARGS="-DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_BLAS=OFF -DGGML_NATIVE=ON -DLLAMA_CURL=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
    "$py" -m pip install --no-binary llama-cpp-python \
      "llama-cpp-python==$version" numpy gguf >"$log" 2>&1; then
  echo "llamacpp.sh: the install failed; the end of $log:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
if ! installed; then
  echo "llamacpp.sh: installed, but $py cannot import llama_cpp $version" >&2
  exit 1
fi
echo "$py"
