#!/usr/bin/env python3
"""The benchmark history: results files, the SQLite database, compare.

Runs accel-bench's save and compare commands on results files written here
from seeded random samples (the seed is printed; ACCEL_TEST_SEED replays it):

- compare flags a planted slowdown of a lower-is-better ratio and a drop of a
  higher-is-better bandwidth as regressions (exit 1), calls a speed-up an
  improvement (exit 0), and does not flag a second draw from the same
  distribution (exit 0); figures only on one side are "new" / "gone";
- two commits saved in a database compare as two files do;
- the database stores every figure as given (checked against the file with
  Python's own sqlite3), survives eight concurrent writers (every run
  complete, integrity_check ok), and writers killed with SIGKILL at random
  moments leave only complete runs and a database that takes the next save;
- malformed results files are refused with exit 2 and a message;
- accel-bench run goes on past a benchmark that says it is skipped.

usage: history_test.py ACCEL_BENCH
"""
import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

EXE = None


def bench(*args, check_rc=None, env=None):
    p = subprocess.run([EXE, *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=300,
                       env=env)
    if check_rc is not None and p.returncode != check_rc:
        raise AssertionError(f"accel-bench {' '.join(args)}: exit "
                             f"{p.returncode}, wanted {check_rc}\n"
                             f"{p.stdout}\n{p.stderr}")
    return p


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def figure(name, samples, unit="us", target="<= 1.5", baseline="base"):
    m = median(samples)
    return {"name": name, "value": m * 10, "unit": unit,
            "baseline_name": baseline, "baseline": 10.0 if baseline else None,
            "ratio": m if baseline else None,
            "ci_low": min(samples), "ci_high": max(samples),
            "pairs": len(samples), "method": "paired" if baseline else "sampled",
            "target": target, "verdict": "met", "met": True,
            "runs": len(samples), "samples": samples}


def results(commit, figures, when="2026-11-25T10:00:00Z"):
    run = {"commit": commit, "build_type": "release", "cpu_model": "test",
           "cores": 2, "governor": None, "load_before": [0, 0, 0],
           "load_after": [0, 0, 0], "host": "test", "time": when, "env": {}}
    return {"format": "accel-bench-results/1", "run": run,
            "benches": [{"bench": "synthetic", "device": "host:0",
                         "run": run, "results": figures}]}


def write(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def lognormal(rng, n, mu, sigma=0.08):
    return [mu * math.exp(rng.gauss(0, sigma)) for _ in range(n)]


def synthetic_runs(rng, tmp):
    """Base, same, slow and fast runs of three figures, 41 pairs each."""
    def run(commit, latency, bandwidth, extra=None):
        figs = [figure("latency_ratio", lognormal(rng, 41, latency)),
                figure("copy_bandwidth", lognormal(rng, 41, bandwidth),
                       unit="GB/s", target=">= 0.95"),
                figure("steady", lognormal(rng, 41, 2.0), target=None)]
        if extra:
            figs.append(figure(extra, lognormal(rng, 41, 1.0)))
        return results(commit, figs)
    base = write(f"{tmp}/base.json", run("a" * 40, 1.2, 1.0, "only_base"))
    same = write(f"{tmp}/same.json", run("b" * 40, 1.2, 1.0, "only_base"))
    slow = write(f"{tmp}/slow.json", run("c" * 40, 1.2 * 1.5, 1.0))
    fast = write(f"{tmp}/fast.json", run("d" * 40, 1.2 / 1.5, 1.0,
                                         "only_base"))
    drop = write(f"{tmp}/drop.json", run("e" * 40, 1.2, 0.7, "only_base"))
    return base, same, slow, fast, drop


def test_compare_flags_planted_slowdown_only(tmp, rng):
    base, same, slow, fast, drop = synthetic_runs(rng, tmp)
    out = bench("compare", base, same, check_rc=0).stdout
    assert "0 regressions, 0 improvements, 4 within noise" in out, out
    out = bench("compare", base, slow, check_rc=1).stdout
    assert any("synthetic/latency_ratio" in l and "REGRESSION" in l
               for l in out.splitlines()), out
    assert any("only_base" in l and "gone" in l for l in out.splitlines())
    assert "1 regressions" in out, out
    out = bench("compare", base, fast, check_rc=0).stdout
    assert any("latency_ratio" in l and "improvement" in l
               for l in out.splitlines()), out
    # A bandwidth (higher is better) that drops is a regression.
    out = bench("compare", base, drop, check_rc=1).stdout
    assert any("copy_bandwidth" in l and "REGRESSION" in l
               for l in out.splitlines()), out
    out = bench("compare", slow, base, check_rc=0).stdout
    assert any("only_base" in l and "new" in l for l in out.splitlines())
    print("compare: planted slowdown and bandwidth drop flagged, same "
          "distribution not")


def test_compare_without_samples_uses_the_interval(tmp, rng):
    """A file without samples (older accel-bench) against one with them: the
    sampled side's interval is the noise."""
    new = results("a" * 40, [figure("r", lognormal(rng, 41, 1.2))])
    lo, hi = (new["benches"][0]["results"][0][k] for k in ("ci_low", "ci_high"))
    def old(ratio):
        f = figure("r", [ratio])
        f["samples"], f["ci_low"], f["ci_high"] = [], None, None
        return results("b" * 40, [f])
    n = write(f"{tmp}/sampled.json", new)
    inside = write(f"{tmp}/inside.json", old(0.5 * (lo + hi)))
    below = write(f"{tmp}/below.json", old(lo / 1.3))
    bench("compare", inside, n, check_rc=0)
    out = bench("compare", below, n, check_rc=1).stdout
    assert any("interval" in l and "REGRESSION" in l
               for l in out.splitlines()), out
    print("compare: a side without samples judged by the other's interval")


def test_compare_commits_in_database(tmp, rng):
    base, same, slow, _, _ = synthetic_runs(rng, tmp)
    db = f"{tmp}/commits.db"
    bench("save", "--db", db, base, same, slow, check_rc=0)
    bench("compare", "--db", db, "aaaa", "bbbbbbb", check_rc=0)
    out = bench("compare", "--db", db, "aaaa", "cccc", check_rc=1).stdout
    assert "REGRESSION" in out, out
    err = bench("compare", "--db", db, "aaaa", "ffff", check_rc=2).stderr
    assert "no run of commit \"ffff\"" in err, err
    err = bench("compare", "--db", db, "aa", "bbbb", check_rc=2).stderr
    assert "at least 4 characters" in err, err
    print("compare: commits in the database")


def db_figures(db):
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        runs = con.execute("SELECT id, commit_id FROM runs").fetchall()
        counts = dict(con.execute(
            "SELECT run_id, COUNT(*) FROM figures GROUP BY run_id"))
        rows = con.execute(
            "SELECT r.commit_id, f.name, f.ratio, f.ci_low, f.ci_high, "
            "f.pairs, f.target, f.samples FROM figures f JOIN runs r "
            "ON r.id = f.run_id").fetchall()
        return runs, counts, rows
    finally:
        con.close()


def big_results(rng, commit, figures, samples):
    return results(commit, [figure(f"f{i}", lognormal(rng, samples, 1.0))
                            for i in range(figures)])


def test_database_stores_figures_as_given(tmp, rng):
    db = f"{tmp}/exact.db"
    doc = big_results(rng, "1" * 40, 20, 17)
    doc["benches"][0]["results"][3]["target"] = None
    path = write(f"{tmp}/exact.json", doc)
    bench("save", "--db", db, path, check_rc=0)
    runs, counts, rows = db_figures(db)
    assert len(runs) == 1 and counts[runs[0][0]] == 20
    by_name = {r[1]: r for r in rows}
    for f in doc["benches"][0]["results"]:
        _, _, ratio, lo, hi, pairs, target, samples = by_name[f["name"]]
        assert math.isclose(ratio, f["ratio"], rel_tol=1e-12), f["name"]
        assert math.isclose(lo, f["ci_low"]) and math.isclose(hi, f["ci_high"])
        assert pairs == f["pairs"] and target == f["target"]
        assert json.loads(samples) == f["samples"], f["name"]
    print("database: figures stored as given")


def test_database_survives_concurrent_writers(tmp, rng):
    db = f"{tmp}/concurrent.db"
    paths = [write(f"{tmp}/w{i}.json",
                   big_results(rng, f"{i:040x}", 60, 101)) for i in range(8)]
    procs = [subprocess.Popen([EXE, "save", "--db", db, p],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
             for p in paths]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    runs, counts, _ = db_figures(db)
    assert len(runs) == 8, runs
    assert sorted(c for _, c in runs) == sorted(f"{i:040x}" for i in range(8))
    assert all(counts[r] == 60 for r, _ in runs), counts
    print("database: 8 concurrent writers, every run complete")


def test_database_survives_killed_writers(tmp, rng):
    db = f"{tmp}/killed.db"
    first = write(f"{tmp}/first.json", big_results(rng, "f" * 40, 10, 11))
    bench("save", "--db", db, first, check_rc=0)
    big = write(f"{tmp}/big.json", big_results(rng, "b" * 40, 3000, 150))
    t0 = time.monotonic()
    bench("save", "--db", f"{tmp}/timing.db", big, check_rc=0)
    full = time.monotonic() - t0
    killed = 0
    for trial in range(6):
        p = subprocess.Popen([EXE, "save", "--db", db, big],
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 1.0) * full)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            killed += 1
        p.wait()
        runs, counts, _ = db_figures(db)
        for run_id, commit in runs:
            want = 10 if commit == "f" * 40 else 3000
            assert counts.get(run_id, 0) == want, \
                f"trial {trial}: run {run_id} has {counts.get(run_id)} figures"
    # The database still takes a save after the kills.
    bench("save", "--db", db, first, check_rc=0)
    runs, counts, _ = db_figures(db)
    assert sum(1 for _, c in runs if c == "f" * 40) == 2
    print(f"database: {killed} of 6 writers killed mid-save "
          f"(a full save takes {full:.2f} s), only complete runs remain")


BAD_FILES = {
    "not JSON": "{\"benches\": [",
    "trailing garbage": "{\"bench\": \"x\", \"run\": {}, \"results\": []} x",
    "no run": json.dumps({"bench": "x", "results": []}),
    "ratio as text": None,
    "duplicate figure": None,
    "infinite sample": None,
    "too many samples": None,
}


def test_malformed_files_are_refused(tmp, rng):
    good = results("a" * 40, [figure("x", [1.0, 1.1, 1.2])])
    docs = dict(BAD_FILES)
    d = json.loads(json.dumps(good))
    d["benches"][0]["results"][0]["ratio"] = "1.2"
    docs["ratio as text"] = json.dumps(d)
    d = json.loads(json.dumps(good))
    d["benches"][0]["results"].append(d["benches"][0]["results"][0])
    docs["duplicate figure"] = json.dumps(d)
    docs["infinite sample"] = json.dumps(good).replace("1.1", "1e999")
    d = json.loads(json.dumps(good))
    d["benches"][0]["results"][0]["samples"] = [1.0] * 1025
    docs["too many samples"] = json.dumps(d)
    ok = write(f"{tmp}/ok.json", good)
    for what, text in docs.items():
        path = f"{tmp}/bad.json"
        with open(path, "w") as f:
            f.write(text)
        p = bench("compare", ok, path, check_rc=2)
        assert "accel-bench" in p.stderr and path in p.stderr, (what, p.stderr)
        bench("save", "--db", f"{tmp}/bad.db", path, check_rc=1)
    bench("compare", ok, f"{tmp}/missing.json", check_rc=2)
    print(f"malformed: {len(docs)} kinds refused")


def test_run_goes_on_past_a_skipped_bench(tmp, rng):
    # cuda says "skipped" where no CUDA device is (every CI machine): the
    # run keeps the other benchmarks' reports and names what it skipped.
    out = f"{tmp}/run.json"
    p = bench("run", "cuda", "topo", "--quick", "--out", out, check_rc=0)
    with open(out) as f:
        doc = json.load(f)
    names = [b["bench"] for b in doc["benches"]]
    if "skipped" in p.stderr:
        assert 'benchmark "cuda" skipped' in p.stderr, p.stderr
        assert names == ["topo"], names
    else:
        assert names == ["cuda", "topo"], names
    print(f"run: {names}")


def main():
    global EXE
    EXE = sys.argv[1]
    seed = int(os.environ.get("ACCEL_TEST_SEED", time.time_ns() % 10**12))
    print(f"seed {seed} (replay with ACCEL_TEST_SEED={seed})")
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        for test in (test_compare_flags_planted_slowdown_only,
                     test_compare_without_samples_uses_the_interval,
                     test_compare_commits_in_database,
                     test_database_stores_figures_as_given,
                     test_database_survives_concurrent_writers,
                     test_database_survives_killed_writers,
                     test_malformed_files_are_refused,
                     test_run_goes_on_past_a_skipped_bench):
            test(tmp, rng)


if __name__ == "__main__":
    main()
