"""accel.profile: record a Perfetto trace around a block of code and
summarize it per kernel, host call, copy and command, as `accel-trace
summary` prints it."""
import os

from . import _accel


def _varint(data, pos):
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _fields(data):
    """(field number, wire type, value or bytes) of one protobuf message."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = _varint(data, pos)
            value, pos = data[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"wire type {wire}")
        if pos > len(data):
            raise ValueError("truncated field")
        yield field, wire, value


def _annotation_bytes(da):
    name, value = None, 0
    for f, w, v in _fields(da):
        if f == 10 and w == 2:
            name = bytes(v)
        elif f == 3 and w == 0:
            value = v
    return value if name == b"bytes" else 0


def _category(name):
    if name == "host_call":
        return "host"
    if name.startswith("copy "):
        return "copy"
    if name in ("fill", "signal", "wait", "semaphore wait", "launch"):
        return "command"
    return "kernel"


def summarize(path):
    """Per-name totals of the slices in the Perfetto trace at `path`: a list
    of dicts (category, name, count, total_us, p50_us, p99_us, bytes),
    kernels first, then host calls, copies and other commands."""
    with open(path, "rb") as f:
        data = f.read()
    open_slices = []  # [track, name, ts, bytes, has_child]
    stats = {}
    packets = 0
    for f, w, packet in _fields(data):
        if f != 1 or w != 2:
            continue
        packets += 1
        ts, te = 0, None
        for pf, pw, pv in _fields(packet):
            if pf == 8 and pw == 0:
                ts = pv
            elif pf == 11 and pw == 2:
                te = pv
        if te is None:
            continue
        etype = track = nbytes = 0
        name = ""
        for tf, tw, tv in _fields(te):
            if tf == 9 and tw == 0:
                etype = tv
            elif tf == 11 and tw == 0:
                track = tv
            elif tf == 23 and tw == 2:
                name = bytes(tv).decode("utf-8", "replace")
            elif tf == 4 and tw == 2 and nbytes == 0:
                nbytes = _annotation_bytes(tv)
        if etype == 1:
            for s in reversed(open_slices):
                if s[0] == track:
                    s[4] = True
                    break
            open_slices.append([track, name, ts, nbytes, False])
        elif etype == 2:
            for i in range(len(open_slices) - 1, -1, -1):
                if open_slices[i][0] == track:
                    s = open_slices.pop(i)
                    # A launch holds its kernel's slice: only launches with
                    # no kernel slice (failed before it ran) count here.
                    if s[1] == "launch" and s[4]:
                        break
                    e = stats.setdefault(s[1], {"durations": [], "bytes": 0})
                    e["durations"].append(max(0, ts - s[2]))
                    e["bytes"] += s[3]
                    break
    if packets == 0:
        raise ValueError(f"{path!r} is not a Perfetto trace")
    rows = []
    for cat in ("kernel", "host", "copy", "command"):
        for name in sorted(n for n in stats if _category(n) == cat):
            d = sorted(stats[name]["durations"])

            def pct(p):
                rank = (len(d) * p + 99) // 100
                return d[max(rank, 1) - 1] / 1e3
            rows.append({"category": cat, "name": name, "count": len(d),
                         "total_us": sum(d) / 1e3, "p50_us": pct(50),
                         "p99_us": pct(99), "bytes": stats[name]["bytes"]})
    return rows


def format_summary(rows):
    """The rows of summarize() as accel-trace summary's table."""
    lines = ["%-8s %-24s %8s %12s %10s %10s %14s" % (
        "category", "name", "count", "total_us", "p50_us", "p99_us", "bytes")]
    for r in rows:
        lines.append("%-8s %-24s %8d %12.3f %10.3f %10.3f %14d" % (
            r["category"], r["name"], r["count"], r["total_us"], r["p50_us"],
            r["p99_us"], r["bytes"]))
    return "\n".join(lines)


class Profile:
    """The recording of one `with accel.profile(path):` block."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._active = False

    def __enter__(self):
        _accel._trace_start(self.path)
        self._active = True
        return self

    def __exit__(self, *exc):
        self._active = False
        _accel._trace_stop()
        return False

    def summary(self, file=None):
        """Prints the per-kernel, per-host-call, per-copy and per-command
        totals of the trace (after the block) and returns them as rows."""
        if self._active:
            raise RuntimeError("summary() is available after the with block")
        rows = summarize(self.path)
        print(format_summary(rows), file=file)
        return rows


def profile(path):
    """with accel.profile("out.pftrace") as p: ... records a Perfetto trace of
    every accel operation in the block (one recording per process); then
    p.summary() prints the totals."""
    return Profile(path)
