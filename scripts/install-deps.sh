#!/bin/sh
# Installs what accel needs to build and test on Debian 12 (run as root).
# Safe to run again: packages already present are skipped quickly.
set -eu
# libsqlite3-dev, libjs-dygraphs: accel-bench's history database and report
# page; chromium: the test that renders that page (skipped without it).
# util-linux: taskset, which tests/support/one_cpu.sh uses (Essential in
# Debian, listed so that a trimmed image still gets it). python3-venv and
# python3-dev: scripts/test-python.sh's virtual environment and the
# headers the Python module builds against; python3-pip: the download of
# llama.cpp's vocabulary files for the tokenizer tests
# (tests/model/fetch-vocab.sh). etcd-server, etcd-client, iproute2: the
# cluster tests' etcd and network namespaces; libicu-dev: the tokenizers'
# Unicode categories; libmicrohttpd-dev: accel-serve.
PKGS="build-essential gcc g++ python3 procps util-linux meson ninja-build pkg-config
  clang libclang-rt-14-dev libcmocka-dev libhwloc-dev hwloc libnuma-dev libibverbs-dev libdrm-dev libjson-c-dev
  libxxhash-dev libmicrohttpd-dev liblttng-ust-dev lttng-tools babeltrace2 libbabeltrace2-dev python3-bt2
  libopenblas-dev libjemalloc-dev libmimalloc-dev protobuf-compiler libicu-dev
  libcurl4-openssl-dev etcd-server etcd-client iproute2
  python3-protobuf python3-numpy cmake scdoc python3-venv python3-dev python3-pip
  libsqlite3-dev libjs-dygraphs chromium"
missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
if [ -n "$missing" ]; then
  echo "install-deps: installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
