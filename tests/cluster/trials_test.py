#!/usr/bin/env python3
"""Kill trials with real processes on one membership store.

usage: trials_test.py ACCEL_CLUSTER STORE TRIALS

Each trial (seed printed; ACCEL_TEST_SEED replays) starts a group of 4 to 8
ranks (`accel-cluster join`), waits for epoch 1, kills one or two ranks with
SIGKILL at a random moment, and checks that every survivor converges on the
same epoch and member list (the first epoch's minus the killed, in order,
ranks dense) within the bound, that no survivor hung or failed, and that a
replacement started then joins the next epoch as the last rank. On etcd the
test starts etcd on loopback itself (skipped, exit 77, where no etcd binary
is installed). Speed is judged by `accel-bench recovery`, not here: the bound
is generous for a shared 2-core machine.
"""
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_procs as cp  # noqa: E402

EXE, STORE, TRIALS = sys.argv[1], sys.argv[2], int(sys.argv[3])
# Short timings for the suite's time; etcd leases count whole seconds.
# Generous enough that a rank starved of the CPU for a while on a shared
# 2-core machine is not taken for failed.
TIMING = {"shm": (50, 400), "etcd": (250, 2000)}[STORE]
BOUND = 2 * TIMING[1] / 1000 + 1.5  # seconds from the kill to convergence


def rank_argv(name, store_args, max_size):
    return [EXE, "join", "--name", name, "--min", "2", "--max", str(max_size),
            "--interval-ms", str(TIMING[0]), "--timeout-ms", str(TIMING[1])] \
        + store_args


def check_status(name, store_args, epoch, expect):
    # accel-cluster status shows the epoch and its members in rank order,
    # alive, with heartbeat ages within the timeout (etcd: whole seconds).
    p = subprocess.run([EXE, "status", "--name", name, "--json"] + store_args,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, "status: %s" % p.stderr
    doc = json.loads(p.stdout)
    got = [m for m in doc["members"] if m["rank"] >= 0]
    assert doc["epoch"] >= epoch and [m["member"] for m in got] == expect, \
        "status shows %s, expected epoch %d %s" % (doc, epoch, expect)
    for m in got:
        assert m["health"] in ("alive", "late") and \
            m["heartbeat_age_ms"] is not None and \
            m["heartbeat_age_ms"] <= TIMING[1], "status member %s" % m


def trial(index, rng, store_args):
    n = rng.randint(4, 8)
    kills = rng.randint(1, 2)
    name = "trial-%d-%d-%d" % (os.getpid(), index, rng.randint(0, 1 << 30))
    ranks = [cp.Rank(rank_argv(name, store_args, n)) for _ in range(n)]
    try:
        # Every rank in one epoch of n (the first, or a later one if some
        # ranks started after the settle time).
        def all_in():
            ev = ranks[0].last("resume")
            return ev and len(ev["members"]) == n and \
                cp.converged(ranks, 0, ev["members"])
        first = cp.wait_until(all_in, 20)
        assert first, "trial %d: no epoch of all %d ranks formed: %s" % (
            index, n, [r.describe() for r in ranks])
        members = ranks[0].last("resume")["members"]
        time.sleep(rng.uniform(0, 0.3))
        victims = rng.sample(ranks, kills)
        t_kill = time.monotonic()
        for v in victims:
            v.kill()
        survivors = [r for r in ranks if r not in victims]
        dead = {v.member() for v in victims}
        expect = [m for m in members if m not in dead]
        epoch = cp.wait_until(lambda: cp.converged(survivors, first, expect),
                              BOUND)
        took = time.monotonic() - t_kill
        assert epoch, "trial %d: survivors did not converge on %s within %.1f s: %s" % (
            index, expect, BOUND, [r.describe() for r in survivors])
        for r in survivors:
            assert r.proc.poll() is None and r.last("failed") is None, \
                "trial %d: a survivor failed: %s" % (index, r.last("failed"))
        check_status(name, store_args, epoch, expect)
        repl = cp.Rank(rank_argv(name, store_args, n))
        ranks.append(repl)
        joined = cp.wait_until(repl.member, 10)
        assert joined, "trial %d: the replacement did not register" % index
        expect2 = expect + [repl.member()]
        epoch2 = cp.wait_until(
            lambda: cp.converged(survivors + [repl], epoch, expect2), BOUND + 2)
        assert epoch2, "trial %d: the replacement did not join: %s" % (
            index, [r.describe() for r in survivors + [repl]])
        print("trial %d: %d ranks, killed %d, converged on epoch %d in %.2f s, "
              "replacement joined epoch %d" % (index, n, kills, epoch, took,
                                               epoch2))
    finally:
        for r in ranks:
            r.close()
        os.system("%s remove --name %s %s >/dev/null 2>&1" % (
            EXE, name, " ".join(store_args)))


def main():
    seed = int(os.environ.get("ACCEL_TEST_SEED", time.time_ns() % (1 << 32)))
    print("%s trials: seed %d (replay with ACCEL_TEST_SEED=%d)" % (STORE, seed, seed))
    rng = random.Random(seed)
    etcd = None
    store_args = []
    if STORE == "etcd":
        etcd = cp.Etcd()
        if etcd.exe is None:
            print("skip: no etcd binary (install Debian's etcd-server)")
            return cp.SKIP
        if not etcd.start():
            etcd.stop()
            print("etcd did not start")
            return 1
        store_args = ["--store", "etcd", "--endpoints", etcd.endpoint]
    try:
        for i in range(TRIALS):
            trial(i, rng, store_args)
    finally:
        if etcd is not None:
            etcd.stop()
    print("%d of %d trials converged" % (TRIALS, TRIALS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
