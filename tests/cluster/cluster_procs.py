"""Helpers shared by the cluster tests that run real processes: an etcd
started on loopback (free ports, a temporary data dir), and ranks run as
`accel-cluster join` whose JSON-line events are collected by a thread each.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

SKIP = 77


def die_with_parent():
    """preexec_fn: the child gets SIGKILL when the test dies (a meson
    timeout), so no etcd or rank outlives it."""
    import ctypes
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            req = urllib.request.Request(url, data=b"{}", method="POST")
            with urllib.request.urlopen(req, timeout=0.5) as r:
                r.read()
                return True
        except OSError:
            time.sleep(0.05)
    return False


class Etcd:
    """One etcd member on loopback, stopped (and its data removed) on exit.

    Heartbeat 10 ms, election 100 ms: the lease minimum TTL is then 1 s
    (etcd's default settings make it 2 s)."""

    def __init__(self):
        self.exe = shutil.which("etcd")
        self.proc = None
        self.dir = None

    def start(self):
        if self.exe is None:
            return False
        self.dir = tempfile.mkdtemp(prefix="accel-etcd-")
        client, peer = free_port(), free_port()
        self.endpoint = "http://127.0.0.1:%d" % client
        peer_url = "http://127.0.0.1:%d" % peer
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.proc = subprocess.Popen(
            [self.exe, "--name", "t", "--data-dir", os.path.join(self.dir, "d"),
             "--listen-client-urls", self.endpoint,
             "--advertise-client-urls", self.endpoint,
             "--listen-peer-urls", peer_url,
             "--initial-advertise-peer-urls", peer_url,
             "--initial-cluster", "t=" + peer_url,
             "--heartbeat-interval", "10", "--election-timeout", "100"],
            stdout=self.log, stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent)
        return wait_http(self.endpoint + "/v3/maintenance/status", 15)

    def stop(self):
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.dir is not None:
            self.log.close()
            shutil.rmtree(self.dir, ignore_errors=True)


class Rank:
    """One `accel-cluster join` process and the events it printed."""

    def __init__(self, argv, prefix=()):
        self.events = []
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(list(prefix) + argv, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     preexec_fn=die_with_parent)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.events.append(ev)

    def last(self, kind):
        with self.lock:
            for ev in reversed(self.events):
                if ev["event"] == kind:
                    return ev
        return None

    def describe(self):
        """The last events, and how the process ended if it did."""
        with self.lock:
            tail = self.events[-2:]
        rc = self.proc.poll()
        if rc is None:
            return tail
        return tail + ["exited %d: %s" % (rc, self.proc.stderr.read()[-300:])]

    def member(self):
        ev = self.last("joined")
        return ev and ev["member"]

    def kill(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def close(self):
        self.kill(signal.SIGKILL)
        self.proc.wait()
        self.thread.join(2)
        self.proc.stderr.close()


def wait_until(cond, timeout, step=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(step)
    return cond()


def converged(ranks, epoch_above, members):
    """The common epoch if every rank's last resume is above |epoch_above|,
    the same epoch, with |members| in order and ranks dense; else None."""
    epochs = set()
    for r in ranks:
        ev = r.last("resume")
        if ev is None or ev["epoch"] <= epoch_above or ev["members"] != members:
            return None
        if ev["rank"] != members.index(ev["member"]):
            return None
        epochs.add(ev["epoch"])
    return epochs.pop() if len(epochs) == 1 else None
