#!/bin/sh
# The installed package as a consumer meets it: installs the build into a
# staging prefix (DESTDIR), then, from that prefix only,
#   - runs every installed tool (no LD_LIBRARY_PATH: they find libaccel.so
#     through their relative RPATH),
#   - builds and runs a C and a C++ program through pkg-config (shared), and
#     the C one again against libaccel.a with accel.pc's Requires.private,
#   - builds and runs the C program through CMake's find_package(accel)
#     (imported target accel::accel). scripts/install-deps.sh installs
#     g++ and cmake, so a missing one is a failure, not a skip.
#   - with man pages built, finds each tool's page (section 1) and the
#     overviews (section 7) under the prefix's mandir, as man does.
# usage: install_test.sh BUILD_DIR [man|no-man]
set -eu
build="$1"
man_pages="${2:-no-man}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
meson install -C "$build" --destdir "$tmp/stage" --no-rebuild --quiet >/dev/null
prefix=$(find "$tmp/stage" -name accel.h -path '*/include/accel/*' | head -1)
prefix=${prefix%/include/accel/accel.h}
pcdir=$(dirname "$(find "$prefix" -name accel.pc | head -1)")
libdir=$(dirname "$pcdir")
status=0
fail() { echo "FAIL: $*"; status=1; }
pass() { echo "ok: $*"; }

unset LD_LIBRARY_PATH
for tool in accel-info accel-topo accel-pack accel-inspect accel-trace accel-bench; do
  [ -x "$prefix/bin/$tool" ] || { fail "$tool not installed"; continue; }
  out=$("$prefix/bin/$tool" --help 2>&1 >/dev/null || true)
  case "$out" in
    *"error while loading shared libraries"*) fail "$tool cannot load its libraries: $out" ;;
    *) pass "$tool runs from $prefix/bin" ;;
  esac
done
[ -f "$libdir/libaccel.a" ] && pass "libaccel.a installed" || fail "libaccel.a not installed"
for f in "$libdir/libaccel-lttng.so.0" "$libdir/accel/kernels/libaccel_host_kernels.so" \
         "$prefix/share/doc/accel/architecture.md" "$prefix/share/doc/accel/examples/streams.c" \
         "$prefix/share/bash-completion/completions/accel-topo"; do
  case "$f" in
    *lttng*) pkg-config --exists lttng-ust 2>/dev/null || continue ;;
  esac
  [ -e "$f" ] && pass "installed ${f#$prefix/}" || fail "missing ${f#$prefix/}"
done
# reference.axe is installed with the library and the installed
# accel-inspect validates it and lists its kernels.
if "$prefix/bin/accel-inspect" "$libdir/accel/reference.axe" 2>&1 |
    grep -q "attention_paged_decode (symbol"; then
  pass "accel-inspect lists the installed reference.axe"
else
  fail "accel-inspect cannot list $libdir/accel/reference.axe"
fi
# The man pages: installed under share/man, and found there by man itself
# (MANPATH ending in ':' adds the system's path after the prefix's).
if [ "$man_pages" = man ]; then
  mandir=$(dirname "$(find "$prefix" -name accel.7 -path '*/man7/*' | head -1)")
  mandir=${mandir%/man7}
  for page in accel-info.1 accel-topo.1 accel-pack.1 accel-inspect.1 \
              accel-trace.1 accel-bench.1 accel.7 accel-kernel-abi.7; do
    section=${page##*.}
    name=${page%.*}
    [ -f "$mandir/man$section/$page" ] || { fail "man page $page not installed"; continue; }
    found=$(MANPATH="$mandir:" man -w "$section" "$name" 2>/dev/null || true)
    [ "$found" = "$mandir/man$section/$page" ] &&
      pass "man $section $name finds ${found#$prefix/}" ||
      fail "man $section $name with MANPATH=$mandir: found '$found'"
  done
fi

# The completion loads and offers accel-bench's subcommands.
{
  got=$(PATH="$prefix/bin:$PATH" bash -c '
    . "$1"; COMP_WORDS=(accel-bench la); COMP_CWORD=1; _accel_tool
    printf "%s\n" "${COMPREPLY[@]}"' _ "$prefix/share/bash-completion/completions/accel-bench")
  [ "$got" = "launch" ] && pass "bash completion offers accel-bench launch" ||
    fail "bash completion gave '$got'"
}

cat > "$tmp/consumer.c" <<'EOF'
#include <accel/accel.h>
#include <stdio.h>
int main(void) {
  accel_runtime_t *rt = NULL;
  if (accel_runtime_create(NULL, &rt) != ACCEL_OK) {
    fprintf(stderr, "%s\n", accel_last_error());
    return 1;
  }
  uint32_t n = 0;
  accel_device_count(rt, &n);
  accel_runtime_destroy(rt);
  printf("devices %u api 0x%x\n", n, accel_api_version());
  return n > 0 ? 0 : 1;
}
EOF
cp "$tmp/consumer.c" "$tmp/consumer.cc"
export PKG_CONFIG_PATH="$pcdir"
cflags=$(pkg-config --define-variable=prefix="$prefix" --cflags accel)
libs=$(pkg-config --define-variable=prefix="$prefix" --libs accel)
if cc -std=c17 -Wall -Werror $cflags "$tmp/consumer.c" -o "$tmp/c" $libs \
     -Wl,-rpath,"$libdir" && "$tmp/c" >/dev/null; then
  pass "C consumer through pkg-config"
else
  fail "C consumer through pkg-config"
fi
if ! command -v c++ >/dev/null 2>&1; then
  fail "c++ not installed (scripts/install-deps.sh installs g++)"
else
  if c++ -std=c++17 -Wall -Werror $cflags "$tmp/consumer.cc" -o "$tmp/cxx" $libs \
       -Wl,-rpath,"$libdir" && "$tmp/cxx" >/dev/null; then
    pass "C++ consumer through pkg-config"
  else
    fail "C++ consumer through pkg-config"
  fi
fi
# libaccel.a with its private requirements linked as shared libraries (their
# own static archives are not what a distribution installs).
private=$(pkg-config --print-requires-private accel | awk '{print $1}' | tr '\n' ' ')
# shellcheck disable=SC2086
dep_libs="$(pkg-config --libs $private) -pthread -lm -ldl"
if cc -std=c17 $cflags "$tmp/consumer.c" -o "$tmp/cstatic" "$libdir/libaccel.a" \
     $dep_libs && "$tmp/cstatic" >/dev/null && ! ldd "$tmp/cstatic" | grep -q libaccel; then
  pass "C consumer against libaccel.a (Requires.private: $private)"
else
  fail "C consumer against libaccel.a (Requires.private: $private)"
fi
if command -v cmake >/dev/null 2>&1; then
  mkdir -p "$tmp/cm"
  cp "$tmp/consumer.c" "$tmp/cm/consumer.c"
  cat > "$tmp/cm/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(accel 0.1 REQUIRED)
add_executable(consumer consumer.c)
target_link_libraries(consumer PRIVATE accel::accel)
EOF
  if cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$prefix" \
       -DCMAKE_BUILD_RPATH="$libdir" >"$tmp/cmake.log" 2>&1 &&
     cmake --build "$tmp/cm/build" >>"$tmp/cmake.log" 2>&1 &&
     "$tmp/cm/build/consumer" >/dev/null; then
    pass "C consumer through CMake find_package(accel)"
  else
    cat "$tmp/cmake.log"
    fail "C consumer through CMake find_package(accel)"
  fi
else
  fail "cmake not installed (scripts/install-deps.sh installs it)"
fi
[ $status -eq 0 ] && echo "installed package works from $prefix"
exit $status
