#!/usr/bin/python3
"""End-to-end LTTng test: starts a real lttng-sessiond (as root in a private
mount namespace whose /var/run/lttng is a temporary directory, with a private
LTTNG_HOME; as another user in the private LTTNG_HOME alone), records
trace-workload with `accel:*` enabled, reads the trace back with babeltrace2
(python bt2) and checks events, fields and order, then converts it with
accel-trace and checks the Perfetto output and `accel-trace summary` against
the workload's known counts. Exits 77 (skip) only where LTTng is not
installed."""
import collections
import math
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

WORKLOAD, TOOL = sys.argv[1], sys.argv[2]
# trace-tensors and reference.axe: the tensor summary checks (optional).
TENSORS, AXE = (sys.argv[4], sys.argv[5]) if len(sys.argv) > 5 else (None,
                                                                     None)
# Copy engines per device (ACCEL_COPY_ENGINES in meson.build).
ENGINES = int(os.environ.get("ACCEL_COPY_ENGINES", "2"))
N = 8
HERE = os.path.dirname(os.path.abspath(__file__))


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def expect(cond, why):
    if not cond:
        fail(why)


def in_private_namespace():
    """Re-runs this script with a private /var/run/lttng (root only)."""
    rundir = tempfile.mkdtemp(prefix="accel-lttng-run-")
    os.makedirs("/var/run/lttng", exist_ok=True)
    env = dict(os.environ, ACCEL_LTTNG_NAMESPACE="1")
    script = 'mount --bind "$0" /var/run/lttng && exec "$@"'
    try:
        r = subprocess.run(["unshare", "--mount", "--propagation", "private",
                            "sh", "-c", script, rundir, sys.executable,
                            os.path.abspath(__file__)] + sys.argv[1:],
                           env=env, timeout=100)
    finally:
        shutil.rmtree(rundir, ignore_errors=True)
    return r.returncode


def lttng(args, env):
    r = subprocess.run(["lttng"] + args, env=env, capture_output=True,
                       text=True, timeout=30)
    expect(r.returncode == 0, f"lttng {' '.join(args)}: {r.stdout}{r.stderr}")


def start_sessiond(home, env):
    r = subprocess.run(["lttng-sessiond", "--daemonize", "--no-kernel"],
                       env=env, capture_output=True, text=True, timeout=30)
    expect(r.returncode == 0, f"lttng-sessiond: {r.stderr}")
    rundir = "/var/run/lttng" if os.geteuid() == 0 else \
        os.path.join(home, ".lttng")
    with open(os.path.join(rundir, "lttng-sessiond.pid")) as f:
        return int(f.read().strip())


def stop_sessiond(pid):
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def read_events(path):
    try:
        import bt2
    except ImportError:
        fail("python3-bt2 (babeltrace2's Python bindings) is missing: run "
             "scripts/install-deps.sh")
    events = []
    for msg in bt2.TraceCollectionMessageIterator(path):
        if type(msg) is not bt2._EventMessageConst:
            continue
        ev = msg.event
        fields = {}
        for k, v in ev.payload_field.items():
            if isinstance(v, bt2._EnumerationFieldConst):
                fields[k] = (int(v), list(v.labels))
            elif isinstance(v, bt2._StringFieldConst):
                fields[k] = str(v)
            elif isinstance(v, bt2._RealFieldConst):
                fields[k] = float(v)
            else:
                fields[k] = int(v)
        ctx = ev.common_context_field
        fields["vtid"] = int(ctx["vtid"]) if ctx is not None else None
        events.append((msg.default_clock_snapshot.value, ev.name, fields))
    return events


def label(field):
    return field[1][0] if field[1] else None


def check_lttng_events(events):
    names = collections.Counter(e[1] for e in events)
    # 8 per iteration; the final signal and copy back; the failing call.
    # Each of the 3 * N + 1 copies runs on a copy engine (a command on a ring
    # of its stream's DMA queue) and adds a signal, a wait and a host call on
    # its stream instead of the copy: 3 commands more each. The 2 streams
    # that copy have a DMA queue of ENGINES rings each, traced as queues.
    copies = 3 * N + 1
    cmds = 8 * N + 3 + 3 * copies
    want = {
        "accel:runtime_create": 1, "accel:runtime_destroy": 1,
        "accel:device_open": 1, "accel:device_close": 1,
        "accel:stream_create": 3 + 2 * ENGINES,
        "accel:stream_destroy": 3 + 2 * ENGINES,
        "accel:buffer_alloc": 2, "accel:buffer_free": 2,
        "accel:cmd_enqueue": cmds, "accel:cmd_start": cmds,
        "accel:cmd_end": cmds, "accel:copy_submit": 3 * N + 1,
        "accel:copy_start": 3 * N + 1, "accel:copy_end": 3 * N + 1,
        "accel:event_record": N, "accel:event_complete": N,
        "accel:semaphore_wait": 1, "accel:semaphore_wake": 1,
        "accel:stream_fail": 1, "accel:launch_begin": N,
        "accel:launch_end": N,
    }
    for name, count in want.items():
        expect(names[name] == count, f"{name}: {names[name]} != {count}")
    expect(names["accel:error"] >= 1, "no accel:error event")
    streams = {e[2]["stream"]: e[2]["name"] for e in events
               if e[1] == "accel:stream_create"}
    by_name = {v: k for k, v in streams.items()}
    rings = {f"host:0/{s}/dma/ring{i}" for s in ("copy", "compute")
             for i in range(ENGINES)}
    expect(set(by_name) == {"host:0/compute", "host:0/copy",
                            "host:0/failing"} | rings, f"streams {streams}")
    # A ring's track stands for its stream in the copy checks.
    owner = {k: by_name[v.split("/dma/")[0]] for k, v in streams.items()}
    # Order: per stream, seqs 1..n; enqueue <= start <= end; starts in order.
    phases = collections.defaultdict(dict)
    main_tid = None
    for ts, name, f in events:
        if name in ("accel:cmd_enqueue", "accel:cmd_start", "accel:cmd_end"):
            phase = name.split("_")[1]
            key = (f["stream"], f["seq"])
            expect(phase not in phases[key], f"{name} twice for {key}")
            phases[key][phase] = (ts, f)
            if phase == "enqueue":
                main_tid = main_tid or f["vtid"]
                expect(f["vtid"] == main_tid, "enqueues from several threads")
            else:
                expect(f["vtid"] != main_tid, f"{name} on the main thread")
    for stream in streams:
        seqs = sorted(s for (st, s) in phases if st == stream)
        expect(seqs == list(range(1, len(seqs) + 1)),
               f"stream {stream}: seqs {seqs}")
        last_start = 0
        for seq in seqs:
            p = phases[(stream, seq)]
            expect(set(p) == {"enqueue", "start", "end"}, f"{stream}#{seq}")
            # The enqueue event is emitted once the submit returned; its
            # enqueue_ns field is the time before the submit.
            e, s, d = p["enqueue"][1]["enqueue_ns"], p["start"][0], p["end"][0]
            expect(e <= p["enqueue"][0], f"{stream}#{seq}: enqueue_ns")
            expect(e <= s <= d, f"{stream}#{seq}: {e} {s} {d}")
            expect(s >= last_start, f"{stream}#{seq} started out of order")
            last_start = s
            kind = label(p["enqueue"][1]["kind"])
            expect(kind == label(p["end"][1]["kind"]), "kind changed")
            status = label(p["end"][1]["status"])
            if streams[stream] == "host:0/failing":
                expect(status == "internal", f"failing status {status}")
            else:
                expect(status == "ok", f"{stream}#{seq} status {status}")
    copy, compute = by_name["host:0/copy"], by_name["host:0/compute"]
    copies = collections.Counter()
    for ts, name, f in events:
        if name == "accel:copy_end":
            copies[(owner[f["engine"]], label(f["direction"]),
                    f["bytes"])] += 1
    expect(copies == {(copy, "h2d", 65536): N, (compute, "d2h", 65536): N,
                      (compute, "d2h", 4096): 1, (compute, "d2d", 4096): N},
           f"copies {copies}")
    # Event records complete, with a device time mapped into host time.
    records = {f["value"]: f for _, n, f in events if n == "accel:event_record"}
    expect(sorted(records) == list(range(1, N + 1)), "event record values")
    for ts, name, f in events:
        if name == "accel:event_complete":
            expect(f["stream"] == copy and f["host_ns"] <= ts,
                   f"event_complete {f}")
    launches = [f for _, n, f in events if n == "accel:launch_begin"]
    expect(all(f["kernel"] == "axpy" and f["grid_x"] == 4 and
               f["stream"] == compute for f in launches),
           f"launch_begin fields {launches[:1]}")
    launch_cmds = [f["seq"] for _, n, f in events if n == "accel:cmd_start"
                   and f["stream"] == compute and label(f["kind"]) == "launch"]
    expect(len(launch_cmds) == N and
           [f["seq"] for f in launches] == launch_cmds,
           f"launch_begin seqs {[f['seq'] for f in launches]} {launch_cmds}")
    ends = [f for _, n, f in events if n == "accel:launch_end"]
    expect([f["seq"] for f in ends] == launch_cmds and
           all(label(f["status"]) == "ok" for f in ends), "launch_end")
    fails = [f for _, n, f in events if n == "accel:stream_fail"]
    expect(label(fails[0]["status"]) == "internal" and
           "command #1 (host_call) failed" in fails[0]["message"],
           f"stream_fail {fails[0]}")
    samples = {(f["scope_name"], f["name"]): f["value"] for _, n, f in events
               if n == "accel:counter_sample"}
    h2d = sum(v for (scope, name), v in samples.items()
              if scope.startswith("host:0/copy/dma/ring") and
              name == "copy_bytes_h2d")
    expect(h2d == N * 65536, "counter_sample copy_bytes_h2d")
    expect(samples.get(("host:0/compute", "host_calls")) == 3 * N + 1,
           "counter_sample host_calls")
    return len(events)


def convert(trace_dir, out, what):
    """accel-trace convert TRACE_DIR -o OUT; returns perfetto_check."""
    r = subprocess.run([TOOL, "convert", trace_dir, "-o", out],
                       capture_output=True, text=True, timeout=60)
    expect(r.returncode == 0, f"accel-trace convert ({what}): {r.stderr}")
    sys.path.insert(0, HERE)
    import perfetto_check as pc
    return pc


def start_session(name, trace_dir, env, events="accel:*"):
    """Creates and starts LTTng session |name| recording |events| with the
    thread, process and program name contexts into |trace_dir|."""
    lttng(["create", name, f"--output={trace_dir}"], env)
    lttng(["enable-event", "-u", events], env)
    lttng(["add-context", "-u", "-t", "vtid", "-t", "vpid", "-t", "procname"],
          env)
    lttng(["start"], env)


def check_accel_trace(trace_dir, tmp):
    out = os.path.join(tmp, "converted.pftrace")
    pc = convert(trace_dir, out, "one process")
    try:
        trace, tracks = pc.load(out)
        slices, counters, flows, instants = pc.check(trace, tracks)
    except pc.Failure as e:
        fail(f"converted trace: {e}")
    copies = 3 * N + 1  # each adds a signal, a wait and a host call
    for name, count in {"copy h2d": N, "copy d2h": N + 1, "copy d2d": N,
                        "host_call": N + 1 + copies, "fill": N,
                        "wait": N + copies, "launch": N,
                        "signal": N + 1 + copies, "semaphore wait": 1,
                        "axpy": N}.items():
        expect(len(slices.get(name, [])) == count,
               f"converted: {name}: {len(slices.get(name, []))} != {count}")
    expect(instants.get("kernel print") == N,
           f"converted: kernel print instants: {instants.get('kernel print')}")
    expect(len(flows) == 8 * N + 3 + 3 * copies,
           f"converted: {len(flows)} flows")
    h2d = sum(v for k, v in counters.items()
              if k.startswith("host:0/copy/dma/ring") and
              k.endswith(" copy_bytes_h2d"))
    expect(h2d == N * 65536, "converted: counter track")
    r = subprocess.run([TOOL, "summary", trace_dir], capture_output=True,
                       text=True, timeout=60)
    expect(r.returncode == 0, f"accel-trace summary: {r.stderr}")
    rows = {}
    for line in r.stdout.splitlines()[1:]:
        cols = line.split()
        name = " ".join(cols[1:-5])
        rows[name] = (cols[0], int(cols[-5]), float(cols[-4]),
                      float(cols[-3]), float(cols[-2]), int(cols[-1]))
    want = {"copy h2d": ("copy", N, N * 65536),
            "copy d2h": ("copy", N + 1, N * 65536 + 4096),
            "copy d2d": ("copy", N, N * 4096),
            "host_call": ("host", N + 1 + copies, 0),
            "axpy": ("kernel", N, 0),
            "fill": ("command", N, N * 4096)}
    for name, (cat, count, nbytes) in want.items():
        expect(name in rows, f"summary: no row {name}: {r.stdout}")
        c, n, total, p50, p99, b = rows[name]
        expect((c, n, b) == (cat, count, nbytes),
               f"summary {name}: {rows[name]} != {(cat, count, nbytes)}")
        expect(0 <= p50 <= p99 and total >= p99, f"summary {name} times")
    # Every launch ran its kernel: the axpy row holds them, and no launch
    # row repeats its totals.
    expect("launch" not in rows, f"summary repeats launches: {r.stdout}")
    return r.stdout


def record_tensors(tmp, env):
    """Records trace-tensors with ACCEL_TRACE_TENSORS=1 in an LTTng session
    of accel:*, in one of accel:tensor_summary alone (and stream_create)
    and with the built-in recorder; returns the two LTTng trace
    directories, the recorder's trace and the program's values {(kernel,
    "x"|"y"): [float]}."""
    env = dict(env, ACCEL_TRACE_TENSORS="1")
    env.pop("ACCEL_TRACE", None)
    dirs = []
    for name, events in (("all", "accel:*"), ("alone", "accel:tensor_summary,"
                                                       "accel:stream_create")):
        dirs.append(os.path.join(tmp, f"tensors-{name}"))
        start_session(f"accel-tensors-{name}", dirs[-1], env, events)
        r = subprocess.run([TENSORS, AXE], env=env, capture_output=True,
                           text=True, timeout=60)
        expect(r.returncode == 0, f"trace-tensors: {r.stderr}")
        lttng(["stop"], env)
        lttng(["destroy"], env)
    recorded = os.path.join(tmp, "tensors.pftrace")
    r2 = subprocess.run([TENSORS, AXE, "--record", recorded], env=env,
                        capture_output=True, text=True, timeout=60)
    expect(r2.returncode == 0, f"trace-tensors --record: {r2.stderr}")
    expect(r.stdout == r2.stdout, "trace-tensors: outputs differ between runs")
    values = collections.defaultdict(list)
    for line in r.stdout.splitlines():
        kernel, what, index, value = line.split("\t")
        expect(int(index) == len(values[(kernel, what)]), f"line {line}")
        # %.9g names one f32; the nearest double is not it: round to f32.
        values[(kernel, what)].append(
            struct.unpack("f", struct.pack("f", float(value)))[0])
    return dirs[0], dirs[1], recorded, values


def summarize(ys):
    """The summary of |ys| (f32 values as doubles) the way numerics.c
    computes it: min, max and a sequential double sum over the finite
    values (sum() of Python 3.12 compensates, so a loop)."""
    nan = sum(1 for v in ys if math.isnan(v))
    inf = sum(1 for v in ys if math.isinf(v))
    finite = [v for v in ys if math.isfinite(v)]
    total = 0.0
    for v in finite:
        total += v
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
    mean = total / len(finite) if finite else 0.0
    return {"count": len(ys), "nan": nan, "inf": inf, "min": lo, "max": hi,
            "mean": mean}


def reference(kernel, x, rows=4, cols=8):
    """softmax and rmsnorm (eps 0, gamma 1 but gamma[3] = +inf) of |x| in
    double, independent of the kernels; NaN where the kernel gives NaN."""
    y = []
    for r in range(rows):
        row = x[r * cols:(r + 1) * cols]
        if kernel == "softmax":
            m = max(row)
            if math.isinf(m) and m < 0:
                y += [math.nan] * cols
                continue
            e = [math.exp(v - m) for v in row]
            y += [v / sum(e) for v in e]
        else:
            rms = math.sqrt(sum(v * v for v in row) / cols)
            for c, v in enumerate(row):
                g = math.inf if c == 3 else 1.0
                y.append(math.nan if v == 0 and math.isinf(g) else
                         v / rms * g)
    return y


def recorder_summaries(path, pc):
    trace, tracks = pc.load(path)
    pc.check(trace, tracks)
    return [{a.name: a.string_value for a in p.track_event.debug_annotations}
            for p in trace.packet if p.HasField("track_event") and
            p.track_event.name == "tensor summary"]


def check_tensors(trace_dir, alone_dir, recorded, values, tmp):
    """accel:tensor_summary events carry the known counts and the summary
    of what the kernels wrote, and the same launch ids when they are the
    only command events enabled; accel-trace convert turns them into the
    same "tensor summary" instants as the built-in recorder writes."""
    # The designed outputs: counts of NaN and Inf, and a reference in double.
    designed = {("softmax", 1, "y"): (8, 0), ("rmsnorm", 2, "y"): (1, 3)}
    for (kernel, _, _), (nan, inf) in designed.items():
        ys, ref = values[(kernel, "y")], reference(kernel, values[(kernel,
                                                                   "x")])
        expect(len(ys) == 32, f"{kernel}: {len(ys)} outputs")
        for got, want in zip(ys, ref):
            expect((math.isnan(got) and math.isnan(want)) or got == want or
                   abs(got - want) <= 1e-5 * max(1.0, abs(want)),
                   f"{kernel}: output {got} != reference {want}")
        s = summarize(ys)
        expect((s["nan"], s["inf"]) == (nan, inf),
               f"{kernel}: {s['nan']} NaN, {s['inf']} Inf in its output")
    events = read_events(trace_dir)
    streams = {f["stream"]: f["name"] for _, n, f in events
               if n == "accel:stream_create"}
    launches = {f["kernel"]: (f["stream"], f["seq"]) for _, n, f in events
                if n == "accel:launch_begin"}
    got = [f for _, n, f in events if n == "accel:tensor_summary"]
    expect(len(got) == 2, f"accel:tensor_summary events: {got}")
    for f in got:
        key = (f["kernel"], f["binding"], f["name"])
        expect(key in designed, f"tensor_summary of {key}")
        want = summarize(values[(f["kernel"], "y")])
        for k, v in want.items():
            expect(f[k] == v, f"tensor_summary {key}: {k} {f[k]} != {v}")
        expect(streams.get(f["stream"]) == "host:0/tensors" and
               launches[f["kernel"]] == (f["stream"], f["seq"]),
               f"tensor_summary {key}: stream {f['stream']} seq {f['seq']}, "
               f"launch {launches.get(f['kernel'])}")
    alone = [f for _, n, f in read_events(alone_dir)
             if n == "accel:tensor_summary"]
    strip = [{k: v for k, v in f.items() if k != "vtid"} for f in got]
    expect([{k: v for k, v in f.items() if k != "vtid"} for f in alone] ==
           strip, f"accel:tensor_summary alone: {alone} != {strip}")
    out = os.path.join(tmp, "tensors-converted.pftrace")
    pc = convert(trace_dir, out, "tensors")
    try:
        converted = recorder_summaries(out, pc)
        builtin = recorder_summaries(recorded, pc)
    except pc.Failure as e:
        fail(f"tensor summary traces: {e}")
    expect(len(converted) == 2 and converted == builtin,
           f"converted instants {converted} != recorder's {builtin}")
    for a in converted:
        want = summarize(values[(a["kernel"], "y")])
        text = {k: ("%.9g" % v if isinstance(v, float) else str(v))
                for k, v in want.items()}
        text.update(kernel=a["kernel"], binding=a["binding"], name="y")
        expect(a == text, f"tensor summary args {a} != {text}")
    return (f"tensor summaries: {len(got)} events, the converted instants "
            f"equal the recorder's")


# A program name longer than LTTng's procname (15 characters).
LONG_NAME = "trace-workload-second-process"


def record_two_processes(tmp, env):
    """Records two workloads running at once, one under LONG_NAME; returns
    the trace directory and {pid: program name}."""
    trace_dir = os.path.join(tmp, "multi")
    long_path = os.path.join(tmp, LONG_NAME)
    os.symlink(os.path.abspath(WORKLOAD), long_path)
    start_session("accel-multi", trace_dir, env)
    procs = {}
    for i, prog in enumerate((WORKLOAD, long_path)):
        p = subprocess.Popen([prog, os.path.join(tmp, f"multi-c{i}"),
                              "--iterations", "2"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs[p.pid] = (p, os.path.basename(prog))
    for p, _ in procs.values():
        _, err = p.communicate(timeout=60)
        expect(p.returncode == 0, f"workload: {err}")
    lttng(["stop"], env)
    lttng(["destroy"], env)
    return trace_dir, {pid: name for pid, (_, name) in procs.items()}


def check_two_processes(trace_dir, pids, tmp):
    """accel-trace convert of two processes: one Perfetto process each (pid
    and full program name), threads and streams under their own process."""
    out = os.path.join(tmp, "multi.pftrace")
    pc = convert(trace_dir, out, "two processes")
    try:
        trace, tracks = pc.load(out)
        pc.check(trace, tracks)
    except pc.Failure as e:
        fail(f"converted trace of two processes: {e}")
    procs = {td.process.pid: td for td in tracks.values()
             if td.HasField("process")}
    expect(sorted(procs) == sorted(pids),
           f"two processes: pids {sorted(procs)} != {sorted(pids)}")
    for pid, name in pids.items():
        got = procs[pid].process.process_name
        expect(got.split(" ")[0] == name,
               f"process {pid}: name {got!r}, expected {name!r} (whole)")

    def process_of(td):
        seen = set()
        while not td.HasField("process"):
            expect(td.uuid not in seen and td.parent_uuid in tracks,
                   f"track {td.name!r} reaches no process")
            seen.add(td.uuid)
            td = tracks[td.parent_uuid]
        return td.process.pid

    threads = [td for td in tracks.values() if td.HasField("thread")]
    for td in threads:
        expect(td.thread.pid in pids, f"thread {td.thread.tid}: pid "
               f"{td.thread.pid} is neither process")
    expect({td.thread.pid for td in threads} == set(pids),
           "each process has threads")
    streams = collections.defaultdict(set)
    for td in tracks.values():
        if td.name and not td.HasField("counter") and \
                not td.HasField("process") and not td.HasField("thread"):
            streams[td.name].add(process_of(td))
    both = [n for n, owners in streams.items() if owners == set(pids)]
    expect(len(both) >= 2, f"tracks of both processes kept apart: {dict(streams)}")
    return (f"two processes: {len(procs)} Perfetto processes, "
            f"{len(threads)} threads, {len(both)} tracks in each")


def main():
    if shutil.which("lttng") is None or shutil.which("lttng-sessiond") is None:
        print("SKIP: LTTng (lttng-tools) is not installed")
        return 77
    if len(sys.argv) > 3 and sys.argv[3] == "without-lttng-ust":
        print("SKIP: accel was built without LTTng-UST (liblttng-ust-dev "
              "not installed): no tracepoints to record")
        return 77
    if os.geteuid() == 0 and os.environ.get("ACCEL_LTTNG_NAMESPACE") != "1":
        probe = subprocess.run(["unshare", "--mount", "true"],
                               capture_output=True)
        if probe.returncode == 0:
            return in_private_namespace()
        # No mount namespaces here: the root session daemon's run directory
        # is the machine's; use it only if no daemon runs there.
        if subprocess.run(["lttng", "list"], capture_output=True).returncode \
                == 0:
            fail("cannot isolate lttng-sessiond (no mount namespace) and one "
                 "is already running")
    tmp = tempfile.mkdtemp(prefix="accel-lttng-")
    home = os.path.join(tmp, "home")
    os.mkdir(home)
    env = dict(os.environ, LTTNG_HOME=home, LTTNG_UST_REGISTER_TIMEOUT="10000")
    trace_dir = os.path.join(tmp, "trace")
    pid = start_sessiond(home, env)
    try:
        start_session("accel-e2e", trace_dir, env)
        r = subprocess.run([WORKLOAD, os.path.join(tmp, "counters"), "--fail",
                            "--iterations", str(N)], env=env,
                           capture_output=True, text=True, timeout=60)
        expect(r.returncode == 0, f"workload: {r.stderr}")
        lttng(["stop"], env)
        lttng(["destroy"], env)
        multi_dir, multi_pids = record_two_processes(tmp, env)
        if TENSORS is not None:
            tensors = record_tensors(tmp, env)
    finally:
        stop_sessiond(pid)
    n = check_lttng_events(read_events(trace_dir))
    print(f"lttng: {n} events checked")
    print(check_accel_trace(trace_dir, tmp))
    print(check_two_processes(multi_dir, multi_pids, tmp))
    if TENSORS is not None:
        print(check_tensors(*tensors, tmp))
    else:
        print("tensor summaries: not checked (no reference kernels built)")
    shutil.rmtree(tmp, ignore_errors=True)
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
