#!/bin/sh
# scripts/build.sh and scripts/run-main.sh on a project whose build fails:
# both must show the compiler's error and exit non-zero, and run-main.sh must
# say which step runs before it runs it.
# usage: build_script_test.sh SOURCE_ROOT
set -eu
root=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/scripts"
cp "$root/scripts/build.sh" "$root/scripts/run-main.sh" "$work/scripts/"
printf '#!/bin/sh\necho "install-deps: nothing to install"\n' > "$work/scripts/install-deps.sh"
chmod +x "$work/scripts/"*.sh
cat > "$work/meson.build" <<'MESON'
project('planted', 'c')
executable('planted', 'planted.c')
MESON
printf 'int main(void) { return planted_undeclared_name; }\n' > "$work/planted.c"
fail=0
check() {  # check WHAT CONDITION...
  what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}

# A compile error: build.sh exits 1 and shows the compiler's message.
rc=0
"$work/scripts/build.sh" release > "$work/out" 2> "$work/err" || rc=$?
check "build.sh exits non-zero when the build fails (rc=$rc)" test "$rc" -ne 0
check "build.sh shows the compiler's error on stderr" grep -q "planted_undeclared_name" "$work/err"
check "build.sh prints no build folder on stdout when it fails" test ! -s "$work/out"

# run-main.sh: says what runs, shows the build's output and exits non-zero.
rc=0
"$work/scripts/run-main.sh" > "$work/out" 2>&1 || rc=$?
check "run-main.sh exits non-zero when the build fails (rc=$rc)" test "$rc" -ne 0
check "run-main.sh names the dependency step" grep -q "^== checking build dependencies" "$work/out"
check "run-main.sh names the build step" grep -q "^== building" "$work/out"
check "run-main.sh shows the build's error" grep -q "planted_undeclared_name" "$work/out"
check "run-main.sh shows the build's progress" grep -q "planted.c" "$work/out"
check "run-main.sh stops before the tools" test -z "$(grep '^== accel-info' "$work/out")"

# Fixed: build.sh prints only the build folder on stdout.
printf 'int main(void) { return 0; }\n' > "$work/planted.c"
out=$("$work/scripts/build.sh" release 2> "$work/err")
check "build.sh prints the build folder once the build passes" test "$out" = build
if [ "$fail" -ne 0 ]; then
  echo "--- run-main.sh output:"; cat "$work/out"
fi
exit "$fail"
