# Sourced by the fuzz scripts (scripts/fuzz-*.sh) after they set fuzz_name:
# reads [--seconds N] [--build-dir DIR] [-- LIBFUZZER_ARGS] from the
# script's arguments into $seconds and $build (leaving the libFuzzer
# arguments in "$@", after -error_exitcode=1 -timeout_exitcode=1), exits 77
# (meson's skip) when clang is missing, and creates $build/corpus.
seconds=20
build=${TMPDIR:-/tmp}/accel-$fuzz_name
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "$fuzz_name: unknown argument $1" >&2; exit 2 ;;
  esac
done
if ! command -v clang >/dev/null 2>&1; then
  echo "$fuzz_name: clang not found; skipping" >&2
  exit 77
fi
mkdir -p "$build/corpus"
# A crash, leak or hang must fail the test: libFuzzer's own exit code for
# them is 77, which meson reads as a skip.
set -- -error_exitcode=1 -timeout_exitcode=1 "$@"
