#!/bin/sh
# Benchmarks the merge base of HEAD with a reference branch and the working
# tree, each built in release, and compares them with `accel-bench compare`
# (docs/benchmarks.md): exits 1 when a figure regressed beyond noise, 0 when
# none did, 2 on an error.
#
#   scripts/bench-regress.sh [--base REF] [--bench NAME]... [--quick]
#                            [--budget SECONDS] [--save DB]
#
# --base REF     the branch to diverge from (default: main)
# --bench NAME   a benchmark to run (repeatable; default: all of them)
# --quick        the minimum pairs only (a smoke run, not a verdict)
# --budget S     passed to accel-bench (time per group beyond the minimum)
# --save DB      also save both runs into the history database DB
#
# The merge base is checked out as a detached worktree in build-regress/
# (ACCEL_BENCH_REGRESS_DIR) and built there once per commit; results go to
# build-regress/base.json and new.json. A merge base older than `accel-bench
# run` is measured subcommand by subcommand and its figures, which carry no
# samples, are compared on their numbers alone (see compare in the docs).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ref=main
benches=""
opts=""
save=""
while [ $# -gt 0 ]; do
  case "$1" in
    --base) ref=$2; shift 2 ;;
    --bench) benches="$benches $2"; shift 2 ;;
    --quick) opts="$opts --quick"; shift ;;
    --budget) opts="$opts --budget $2"; shift 2 ;;
    --save) save=$2; shift 2 ;;
    *) echo "bench-regress: unknown argument $1 (see the header)" >&2; exit 2 ;;
  esac
done
[ -n "$benches" ] || benches="launch alloc dma load trace topo"
base=$(git merge-base HEAD "$ref") || {
  echo "bench-regress: no merge base of HEAD and $ref" >&2; exit 2; }
work=${ACCEL_BENCH_REGRESS_DIR:-$root/build-regress}
mkdir -p "$work"
src="$work/base-src"
if [ -e "$src/.git" ]; then
  git -C "$src" checkout -q --detach "$base"
else
  git worktree add -q --detach "$src" "$base"
fi
echo "bench-regress: building the merge base $base" >&2
"$src/scripts/build.sh" release >/dev/null
echo "bench-regress: building the working tree" >&2
scripts/build.sh release >/dev/null
new_exe="$root/build/tools/accel-bench/accel-bench"
base_exe="$src/build/tools/accel-bench/accel-bench"

# Runs the benchmarks with accel-bench $1 into the results file $2.
measure() {
  exe=$1 out=$2
  # shellcheck disable=SC2086
  if "$exe" run 2>&1 | grep -q "usage: accel-bench run"; then
    "$exe" run $benches $opts --out "$out"
    return
  fi
  # An accel-bench without `run`: one --json report per subcommand, gathered
  # into one results file under the merge base's commit.
  for b in $benches; do
    # shellcheck disable=SC2086
    "$exe" "$b" --json $(echo "$opts" | sed 's/--budget [^ ]*//') \
      > "$work/old-$b.json"
  done
  python3 - "$out" "$base" "$work" $benches <<'PY'
import datetime, json, sys
out, commit, work, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
run = {"commit": commit, "time": now, "build_type": "release", "host": ""}
benches = [json.load(open(f"{work}/old-{n}.json")) for n in names]
json.dump({"format": "accel-bench-results/1", "run": run, "benches": benches},
          open(out, "w"))
PY
}

echo "bench-regress: measuring the merge base" >&2
measure "$base_exe" "$work/base.json"
echo "bench-regress: measuring the working tree" >&2
measure "$new_exe" "$work/new.json"
if [ -n "$save" ]; then
  "$new_exe" save --db "$save" "$work/base.json" "$work/new.json"
fi
status=0
"$new_exe" compare "$work/base.json" "$work/new.json" || status=$?
exit $status
