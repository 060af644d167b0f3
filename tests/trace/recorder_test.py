#!/usr/bin/python3
"""End-to-end tests of the built-in recorder and the flight recorder: runs
trace-workload and decodes what it wrote with perfetto_check (Python protobuf
over perfetto_subset.proto, independent of accel's encoder)."""
import glob
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perfetto_check as pc  # noqa: E402

WORKLOAD = sys.argv[1]
TOOL = sys.argv[2] if len(sys.argv) > 2 else None  # accel-trace
N = 8
# Stream copies run on the copy engines (slices on the tracks of the rings
# of each stream's DMA queue, "<stream>/dma/ring<i>"); on its stream, each of
# the 3 * N + 1 copies is a signal (to the DMA queue), a wait (for it) and a
# host call (that releases what the queue held).
COPIES = 3 * N + 1
EXPECTED_SLICES = {
    "copy h2d": N, "copy d2h": N + 1, "copy d2d": N, "fill": N,
    "host_call": N + COPIES, "launch": N, "wait": N + COPIES,
    "signal": N + 1 + COPIES, "semaphore wait": 1, "axpy": N,
}


def run(args, env=None):
    full = dict(os.environ)
    for k in ("ACCEL_TRACE", "ACCEL_FLIGHT_EVENTS", "ACCEL_FLIGHT_DIR"):
        full.pop(k, None)
    full.update(env or {})
    r = subprocess.run([WORKLOAD] + args, env=full, capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        raise pc.Failure(f"workload {args} failed: {r.stderr}")
    return r.stdout


def read_counters(path):
    out = {}
    with open(path) as f:
        for line in f:
            scope, name, value = line.rstrip("\n").split("\t")
            out[f"{scope} {name}"] = int(value)
    return out


def ring_sum(counters, stream, name):
    """Sum of counter |name| over the rings of |stream|'s DMA queue."""
    prefix = f"{stream}/dma/ring"
    return sum(v for k, v in counters.items()
               if k.startswith(prefix) and k.split(" ", 1)[1] == name)


def check_recording(trace_path, counters_path):
    trace, tracks = pc.load(trace_path)
    slices, counters, flows, instants = pc.check(trace, tracks)
    for name, count in EXPECTED_SLICES.items():
        got = len(slices.get(name, []))
        pc.expect(got == count, f"{name}: {got} slices, expected {count}")
    # Every command enqueued inside the recording has a flow to its slice.
    commands = sum(len(slices.get(k, [])) for k in EXPECTED_SLICES
                   if k not in ("semaphore wait", "axpy"))
    pc.expect(len(flows) == commands,
              f"{len(flows)} flows for {commands} commands")
    api = read_counters(counters_path)
    for key, value in api.items():
        pc.expect(key in counters, f"counter track {key} missing")
        pc.expect(counters[key] == value,
                  f"{key}: trace {counters[key]} != snapshot {value}")
    # The snapshot itself against the workload's known counts.
    dev = "host:0"
    comp, copy = f"{dev}/compute", f"{dev}/copy"
    on_rings = {
        (copy, "copy_bytes_h2d"): N * 65536, (copy, "copies"): N,
        (comp, "copy_bytes_d2h"): N * 65536 + 4096,
        (comp, "copy_bytes_d2d"): N * 4096, (comp, "copies"): 2 * N + 1,
    }
    for (stream, name), value in on_rings.items():
        got = ring_sum(api, stream, name)
        pc.expect(got == value, f"rings of {stream}: {name} = {got}, "
                  f"expected {value}")
    # Per iteration, copy: 1 copy (3 commands) and an event record; compute:
    # wait_event, host call, fill, launch and 2 copies (6 commands); then a
    # signal and a copy.
    known = {
        f"{copy} copies": 0, f"{copy} copy_bytes_h2d": 0,
        f"{copy} signals": 2 * N, f"{copy} commands_completed": 4 * N,
        f"{comp} copies": 0,
        f"{comp} fill_bytes": N * 4096, f"{comp} host_calls": 3 * N + 1,
        f"{comp} launches": N, f"{comp} waits": 3 * N + 1,
        f"{comp} commands_completed": 10 * N + 4,
        f"{comp} commands_enqueued": 10 * N + 4,
        f"{comp} queue_occupancy": 0, f"{comp} failures": 0,
        f"{dev} bytes_in_use": 2 << 20, f"{dev} allocations": 2,
        f"{dev} bytes_peak": 2 << 20, f"{dev} host_waits": 1,
        f"{dev} host_signals": 0,
    }
    for key, value in known.items():
        pc.expect(api.get(key) == value,
                  f"snapshot {key} = {api.get(key)}, expected {value}")
    # The kernel's messages are instants on the timeline (one per launch).
    pc.expect(instants.get("kernel print") == N,
              f"kernel print instants: {instants.get('kernel print')}")
    names = {t.name for t in tracks.values()}
    for want in (dev, comp, copy):
        pc.expect(want in names, f"no track named {want}")
    threads = [t for t in tracks.values() if t.HasField("thread")]
    pc.expect(len(threads) >= 3, f"{len(threads)} thread tracks")
    return len(trace.packet)


def test_api_recording(tmp):
    trace, ctr = os.path.join(tmp, "api.pftrace"), os.path.join(tmp, "c1")
    run([ctr, "--record", trace])
    n = check_recording(trace, ctr)
    if TOOL is not None:
        # accel-trace summary reads the recorder's file as well.
        r = subprocess.run([TOOL, "summary", trace], capture_output=True,
                           text=True, timeout=60)
        pc.expect(r.returncode == 0, f"summary: {r.stderr}")
        rows = {}
        for line in r.stdout.splitlines()[1:]:
            cols = line.split()
            rows[" ".join(cols[1:-5])] = (cols[0], int(cols[-5]),
                                          int(cols[-1]))
        for name, want in {"axpy": ("kernel", N, 0),
                           "host_call": ("host", N + COPIES, 0),
                           "copy h2d": ("copy", N, N * 65536),
                           "copy d2d": ("copy", N, N * 4096),
                           "wait": ("command", N + COPIES, 0)}.items():
            pc.expect(rows.get(name) == want,
                      f"summary {name}: {rows.get(name)} != {want}")
        # Every launch ran its kernel: the axpy row holds them, and no
        # launch row repeats its totals.
        pc.expect("launch" not in rows, f"summary repeats launches: {r.stdout}")
    return n


def test_execute_is_one_slice_with_its_commands_nested(tmp):
    # An execute is one command of its stream: an "execute" slice on the
    # stream's track with the buffer's commands nested in it, and the
    # replays counted.
    trace_path, ctr = os.path.join(tmp, "x.pftrace"), os.path.join(tmp, "cx")
    run([ctr, "--record", trace_path, "--execute", "3"])
    trace, tracks = pc.load(trace_path)
    pc.check(trace, tracks)
    replay = [u for u, t in tracks.items() if t.name.endswith("/replay")]
    pc.expect(len(replay) == 1, f"no replay track: {replay}")
    stack, executes, nested = [], 0, []
    for p in trace.packet:
        if not p.HasField("track_event"):
            continue
        te = p.track_event
        if te.track_uuid != replay[0]:
            continue
        if te.type == pc.BEGIN:
            if te.name == "execute":
                pc.expect(not stack, f"execute nested in {stack}")
                executes += 1
            elif te.name in ("host_call", "fill", "launch"):
                pc.expect(stack == ["execute"],
                          f"{te.name} not directly under an execute: {stack}")
                nested.append(te.name)
            stack.append(te.name)
        elif te.type == pc.END:
            stack.pop()
    pc.expect(executes == 3, f"{executes} execute slices")
    pc.expect(nested == ["host_call", "fill", "launch"] * 3,
              f"nested slices {nested}")
    if TOOL is not None:
        # accel-trace summary counts the execute as a command and its
        # nested commands in their own rows.
        r = subprocess.run([TOOL, "summary", trace_path], capture_output=True,
                           text=True, timeout=60)
        pc.expect(r.returncode == 0, f"summary: {r.stderr}")
        rows = {" ".join(line.split()[1:-5]): line.split()[0]
                for line in r.stdout.splitlines()[1:]}
        pc.expect(rows.get("execute") == "command",
                  f"summary execute row: {rows.get('execute')}")
    api = read_counters(ctr)
    dev = next(k.split("/")[0] for k in api if "/replay " in k)
    for name, want in {"replays": 3, "replayed_commands": 9,
                       "commands_completed": 3, "launches": 3, "fills": 3,
                       "host_calls": 3}.items():
        got = api.get(f"{dev}/replay {name}")
        pc.expect(got == want, f"replay {name} = {got}, expected {want}")
    return len(trace.packet)


def test_env_recording(tmp):
    trace, ctr = os.path.join(tmp, "env.pftrace"), os.path.join(tmp, "c2")
    run([ctr], env={"ACCEL_TRACE": trace})
    trace_obj, tracks = pc.load(trace)
    slices, counters, flows, _ = pc.check(trace_obj, tracks)
    for name, count in EXPECTED_SLICES.items():
        pc.expect(len(slices.get(name, [])) == count, f"env: {name}")
    # Written at runtime destruction, after the streams were destroyed: the
    # counters kept their last values until then.
    pc.expect(counters.get("host:0/compute host_calls") == 3 * N + 1,
              "env: host_calls counter")
    return len(trace_obj.packet)


def test_two_recordings_joined_do_not_clash(tmp):
    # Two recorder files concatenated (one trace of two processes, as the
    # Perfetto UI opens them) share no track uuid and no flow id, and each
    # names its process by its command line.
    files = []
    for i in range(2):
        trace = os.path.join(tmp, f"join{i}.pftrace")
        run([os.path.join(tmp, f"j{i}"), "--record", trace])
        files.append(trace)
    joined = os.path.join(tmp, "joined.pftrace")
    with open(joined, "wb") as out:
        for f in files:
            with open(f, "rb") as src:
                out.write(src.read())
    trace, tracks = pc.load(joined)
    slices, _, _, _ = pc.check(trace, tracks)
    # Each file's tracks, none merged away (the files may differ in thread
    # tracks: which pool threads ran work-groups varies from run to run).
    each = sum(len(pc.load(f)[1]) for f in files)
    pc.expect(len(tracks) == each,
              f"joined: {len(tracks)} tracks, the files have {each}")
    procs = [t.process for t in tracks.values() if t.HasField("process")]
    pc.expect(len(procs) == 2, f"joined: {len(procs)} processes")
    name = os.path.basename(WORKLOAD)
    for p in procs:
        pc.expect(p.process_name.startswith(name + " " + os.path.join(tmp, "j")),
                  f"process name {p.process_name!r} is not the command line")
    return len(trace.packet)


def test_flight_on_failure(tmp):
    flight = os.path.join(tmp, "flight")
    os.mkdir(flight)
    ctr = os.path.join(tmp, "c3")
    run([ctr, "--fail"], env={"ACCEL_FLIGHT_DIR": flight,
                              "ACCEL_FLIGHT_EVENTS": "64"})
    files = glob.glob(os.path.join(flight, "accel-flight-*.pftrace"))
    pc.expect(len(files) == 1, f"flight files: {files}")
    trace, tracks = pc.load(files[0])
    slices, _, _, instants = pc.check(trace, tracks)
    pc.expect(instants.get("stream failed") == 1,
              f"flight: no 'stream failed' instant: {dict(instants)}")
    # The worker's ring keeps at most 64 events: older ones are gone, the
    # failing command (its start precedes the failure) is there.
    pc.expect(len(slices.get("host_call", [])) >= 1,
              "flight: the failing host call is missing")
    pc.expect(instants.get("error internal", 0) >= 1,
              f"flight: no error instant: {dict(instants)}")
    pc.expect(sum(len(v) for v in slices.values()) <= 64 * 8,
              "flight: more events than the rings hold")
    return len(trace.packet)


def test_flight_dump_on_demand(tmp):
    path = os.path.join(tmp, "demand.pftrace")
    out = run([os.path.join(tmp, "c4"), "--flight-dump", path])
    pc.expect("ACCEL_ERROR_UNAVAILABLE" in out and not os.path.exists(path),
              f"flight recorder off by default: {out}")
    out = run([os.path.join(tmp, "c5"), "--flight-dump", path],
              env={"ACCEL_FLIGHT_EVENTS": "100"})  # rounded up to 128
    pc.expect("ACCEL_OK" in out, f"flight dump: {out}")
    trace, tracks = pc.load(path)
    slices, _, _, _ = pc.check(trace, tracks)
    # The compute worker ran 5 commands per iteration: 2 events each, so its
    # ring of 128 holds the last 64 commands at most.
    n = sum(len(v) for v in slices.values())
    pc.expect(0 < n <= 3 * 64 + 1, f"flight dump: {n} slices")
    return len(trace.packet)


def test_bad_environment_fails_runtime_creation(tmp):
    for env, what in (({"ACCEL_TRACE": "/nonexistent-dir/x.pftrace"},
                       "ACCEL_TRACE: trace start: cannot create"),
                      ({"ACCEL_FLIGHT_EVENTS": "lots"},
                       "ACCEL_FLIGHT_EVENTS=\"lots\" must be 0 to")):
        full = dict(os.environ)
        full.update(env)
        r = subprocess.run([WORKLOAD, os.path.join(tmp, "c7")], env=full,
                           capture_output=True, text=True, timeout=60)
        pc.expect(r.returncode == 1 and what in r.stderr,
                  f"{env}: exit {r.returncode}: {r.stderr}")
    return 0


def test_flight_on_fatal_signal(tmp):
    flight = os.path.join(tmp, "crash")
    os.mkdir(flight)
    env = dict(os.environ, ACCEL_FLIGHT_DIR=flight)
    env.pop("ACCEL_TRACE", None)
    r = subprocess.run([WORKLOAD, os.path.join(tmp, "c6"), "--abort"],
                       env=env, capture_output=True, timeout=60)
    pc.expect(r.returncode == -6, f"abort: exit {r.returncode}")
    files = glob.glob(os.path.join(flight, "accel-flight-*-signal6.pftrace"))
    pc.expect(len(files) == 1, f"no flight file after SIGABRT: "
              f"{os.listdir(flight)}")
    trace, tracks = pc.load(files[0])
    slices, _, _, _ = pc.check(trace, tracks)
    pc.expect(len(slices.get("copy d2h", [])) == N + 1,
              f"crash flight: {len(slices.get('copy d2h', []))} d2h copies")
    return len(trace.packet)


def main():
    with tempfile.TemporaryDirectory(prefix="accel-trace-") as tmp:
        for test in (test_api_recording, test_env_recording,
                     test_execute_is_one_slice_with_its_commands_nested,
                     test_two_recordings_joined_do_not_clash,
                     test_flight_on_failure, test_flight_dump_on_demand,
                     test_flight_on_fatal_signal,
                     test_bad_environment_fails_runtime_creation):
            try:
                n = test(tmp)
            except pc.Failure as e:
                print(f"{test.__name__}: FAIL: {e}")
                return 1
            print(f"{test.__name__}: ok ({n} packets)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
