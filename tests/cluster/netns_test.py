#!/usr/bin/env python3
"""Across hosts: network namespaces joined by veth links to a bridge play four
hosts; three of them run a three-member etcd cluster, and one rank runs on
each host (`accel-cluster join --store etcd` with all three endpoints).

usage: netns_test.py ACCEL_CLUSTER

Checks, in order:
 1. the four ranks form epoch 1;
 2. cutting the fourth host's link (not killing its rank) is detected as a
    failure: the three others converge on epoch 2 without it, and the cut
    rank itself learns that it is out (the store was unreachable past the
    timeout) instead of hanging;
 3. losing one etcd member (SIGKILL) changes nothing: no rank stops, the
    epoch stays, for three heartbeat timeouts.
Skipped (exit 77) with the reason where namespaces cannot be made (not
root, no `ip`, no etcd binary).
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_procs as cp  # noqa: E402

EXE = sys.argv[1]
TAG = "acc%d" % (os.getpid() % 100000)
NET = "10.231.%d" % (os.getpid() % 250 + 1)
HOSTS = 4
INTERVAL_MS, TIMEOUT_MS = 250, 2000


def sh(*args, check=True):
    return subprocess.run(args, capture_output=True, text=True, check=check)


def ns(i):
    return "%s-h%d" % (TAG, i)


def make_hosts():
    bridge = TAG + "-br"
    sh("ip", "netns", "add", bridge)
    sh("ip", "-n", bridge, "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", bridge, "link", "set", "br0", "up")
    for i in range(1, HOSTS + 1):
        h, a, b = ns(i), "%sa%d" % (TAG, i), "%sb%d" % (TAG, i)
        sh("ip", "netns", "add", h)
        sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        sh("ip", "link", "set", a, "netns", h)
        sh("ip", "link", "set", b, "netns", bridge)
        sh("ip", "-n", h, "addr", "add", "%s.%d/24" % (NET, i), "dev", a)
        sh("ip", "-n", h, "link", "set", a, "up")
        sh("ip", "-n", h, "link", "set", "lo", "up")
        sh("ip", "-n", bridge, "link", "set", b, "master", "br0")
        sh("ip", "-n", bridge, "link", "set", b, "up")
    return bridge


def remove_hosts():
    for i in range(1, HOSTS + 1):
        sh("ip", "netns", "del", ns(i), check=False)
    sh("ip", "netns", "del", TAG + "-br", check=False)


def start_etcd(tmp):
    cluster = ",".join("e%d=http://%s.%d:2380" % (i, NET, i) for i in (1, 2, 3))
    procs = []
    for i in (1, 2, 3):
        ip = "%s.%d" % (NET, i)
        log = open(os.path.join(tmp, "etcd%d.log" % i), "w")
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", ns(i), shutil.which("etcd"),
             "--name", "e%d" % i, "--data-dir", os.path.join(tmp, "e%d" % i),
             "--listen-client-urls", "http://%s:2379" % ip,
             "--advertise-client-urls", "http://%s:2379" % ip,
             "--listen-peer-urls", "http://%s:2380" % ip,
             "--initial-advertise-peer-urls", "http://%s:2380" % ip,
             "--initial-cluster", cluster, "--initial-cluster-state", "new",
             "--heartbeat-interval", "20", "--election-timeout", "200"],
            stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=cp.die_with_parent))
    return procs


def main():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        print("skip: network namespaces need root and iproute2's ip")
        return cp.SKIP
    if shutil.which("etcd") is None:
        print("skip: no etcd binary (install Debian's etcd-server)")
        return cp.SKIP
    try:
        make_hosts()
    except subprocess.CalledProcessError as e:
        remove_hosts()
        print("skip: cannot make network namespaces: %s" % e.stderr.strip())
        return cp.SKIP
    tmp = tempfile.mkdtemp(prefix="accel-netns-")
    etcd, ranks = [], []
    endpoints = ",".join("http://%s.%d:2379" % (NET, i) for i in (1, 2, 3))
    store = ["--store", "etcd", "--endpoints", endpoints]
    name = "netns-%d" % os.getpid()
    try:
        etcd = start_etcd(tmp)
        up = cp.wait_until(lambda: sh("ip", "netns", "exec", ns(4), EXE, "status",
                                      "--name", name, *store,
                                      check=False).returncode == 0, 30, 0.2)
        assert up, "the three-member etcd cluster did not answer from host 4"
        for i in range(1, HOSTS + 1):
            ranks.append(cp.Rank(
                [EXE, "join", "--name", name, "--min", "2", "--max", "4",
                 "--interval-ms", str(INTERVAL_MS), "--timeout-ms",
                 str(TIMEOUT_MS)] + store, prefix=["ip", "netns", "exec", ns(i)]))
        assert cp.wait_until(lambda: all(r.last("resume") for r in ranks), 30), \
            "epoch 1 did not form: %s" % [r.last("resume") for r in ranks]
        members = ranks[0].last("resume")["members"]
        assert cp.converged(ranks, 0, members) == 1, "ranks disagree on epoch 1"
        print("epoch 1: %d ranks on %d hosts" % (len(members), HOSTS))

        # 2. Cut host 4's link at the bridge: its rank keeps running.
        t_cut = time.monotonic()
        sh("ip", "-n", TAG + "-br", "link", "set", "%sb4" % TAG, "down")
        survivors, cut = ranks[:3], ranks[3]
        expect = [m for m in members if m != cut.member()]
        bound = 2 * TIMEOUT_MS / 1000 + 3
        epoch = cp.wait_until(lambda: cp.converged(survivors, 1, expect), bound)
        assert epoch, "survivors did not leave the cut rank out within %.0f s: %s" % (
            bound, [r.last("resume") for r in survivors])
        print("link cut detected: epoch %d without host 4 after %.2f s" % (
            epoch, time.monotonic() - t_cut))
        failed = cp.wait_until(lambda: cut.last("failed"), bound)
        assert failed and "unreachable" in failed["message"], \
            "the cut rank did not learn it is out: %s" % cut.events[-3:]
        print("the cut rank left: %s" % failed["message"])

        # 3. Lose one etcd member: nothing changes.
        stops_before = [len([e for e in r.events if e["event"] == "stop"])
                        for r in survivors]
        etcd[0].send_signal(signal.SIGKILL)
        etcd[0].wait()
        time.sleep(3 * TIMEOUT_MS / 1000)
        for r, before in zip(survivors, stops_before):
            stops = len([e for e in r.events if e["event"] == "stop"])
            assert r.proc.poll() is None and stops == before, \
                "losing one etcd member disturbed a rank: %s" % r.events[-3:]
        assert cp.converged(survivors, 1, expect) == epoch, "the epoch moved"
        print("one etcd member lost: epoch %d unchanged for %.0f s" % (
            epoch, 3 * TIMEOUT_MS / 1000))
    finally:
        for r in ranks:
            r.close()
        for p in etcd:
            if p.poll() is None:
                p.terminate()
                p.wait()
        remove_hosts()
        shutil.rmtree(tmp, ignore_errors=True)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
