#!/usr/bin/python3
"""Decodes a Perfetto trace written by accel with an independent decoder
(Python protobuf and perfetto_subset.proto, compiled here by protoc) and
checks its invariants.

Library use: load(path) -> (trace, tracks); check(trace, tracks) -> summary.
Command line: perfetto_check.py TRACE [--counters FILE] [--expect NAME=COUNT]...
  --counters: a file of "scope<TAB>counter<TAB>value" lines (the API
  snapshot); the last sample of each counter track must equal it.
  --expect "copy h2d=8": the number of slices with that name.
"""
import collections
import importlib
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BEGIN, END, INSTANT, COUNTER = 1, 2, 3, 4


def _schema():
    out = tempfile.mkdtemp(prefix="accel-proto-")
    subprocess.run(["protoc", "-I", HERE, "--python_out", out,
                    os.path.join(HERE, "perfetto_subset.proto")], check=True)
    sys.path.insert(0, out)
    return importlib.import_module("perfetto_subset_pb2")


PB = _schema()


class Failure(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Failure(what)


def load(path):
    trace = PB.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    tracks = {}
    for p in trace.packet:
        if p.HasField("track_descriptor"):
            td = p.track_descriptor
            expect(td.uuid not in tracks, f"track {td.uuid} described twice")
            tracks[td.uuid] = td
    return trace, tracks


def check(trace, tracks):
    """Checks every invariant; returns slices {name: [durations]}, counters
    {track name: last value}, flows, and instants {name: count}."""
    expect(any(p.HasField("clock_snapshot") for p in trace.packet),
           "no clock snapshot")
    stacks = collections.defaultdict(list)
    last_ts = {}
    slices = collections.defaultdict(list)
    instants = collections.Counter()
    counters = {}
    flows_out, flows_in = set(), set()
    cleared = set()
    for p in trace.packet:
        if p.sequence_flags & 1:
            cleared.add(p.trusted_packet_sequence_id)
        if not p.HasField("track_event"):
            continue
        expect(p.trusted_packet_sequence_id in cleared,
               f"track event on sequence {p.trusted_packet_sequence_id} "
               "before its incremental state was cleared")
        te = p.track_event
        expect(p.HasField("timestamp"), "track event without a timestamp")
        expect(p.timestamp_clock_id in (0, 3), "unexpected clock")
        expect(te.track_uuid in tracks,
               f"event on undescribed track {te.track_uuid}")
        uuid, ts = te.track_uuid, p.timestamp
        expect(ts >= last_ts.get(uuid, 0),
               f"timestamps go back on track {tracks[uuid].name or uuid}: "
               f"{ts} < {last_ts.get(uuid)}")
        last_ts[uuid] = ts
        for f in te.flow_ids:
            expect(f not in flows_out, f"flow {f:#x} started twice")
            flows_out.add(f)
        for f in te.terminating_flow_ids:
            expect(f in flows_out, f"flow {f:#x} ends before it starts")
            expect(f not in flows_in, f"flow {f:#x} ended twice")
            flows_in.add(f)
        if te.type == BEGIN:
            stacks[uuid].append((te.name, ts))
        elif te.type == END:
            expect(stacks[uuid], f"slice end without begin on {uuid}")
            name, t0 = stacks[uuid].pop()
            slices[name].append(ts - t0)
        elif te.type == INSTANT:
            instants[te.name] += 1
        elif te.type == COUNTER:
            td = tracks[uuid]
            expect(td.HasField("counter"), f"counter on non-counter {td.name}")
            counters[td.name] = te.counter_value
    for uuid, stack in stacks.items():
        expect(not stack, f"{len(stack)} slice(s) left open on "
               f"{tracks[uuid].name or uuid}: {stack}")
    expect(flows_out == flows_in,
           f"{len(flows_out - flows_in)} flow(s) never terminated")
    return slices, counters, flows_out, instants


def main(argv):
    path = argv[1]
    trace, tracks = load(path)
    slices, counters, flows, instants = check(trace, tracks)
    i = 2
    while i < len(argv):
        if argv[i] == "--counters":
            with open(argv[i + 1]) as f:
                n = 0
                for line in f:
                    scope, name, value = line.rstrip("\n").split("\t")
                    key = f"{scope} {name}"
                    expect(key in counters, f"counter {key} not in the trace")
                    expect(counters[key] == int(value),
                           f"counter {key}: trace {counters[key]} != API "
                           f"{value}")
                    n += 1
                expect(n > 0, "empty counters file")
            i += 2
        elif argv[i] == "--expect":
            name, count = argv[i + 1].rsplit("=", 1)
            got = len(slices.get(name, [])) or instants.get(name, 0)
            expect(got == int(count), f"{name}: {got} != {count}")
            i += 2
        else:
            raise SystemExit(f"unknown argument {argv[i]}")
    print(f"{path}: {len(trace.packet)} packets, {len(tracks)} tracks, "
          f"{sum(len(v) for v in slices.values())} slices, {len(flows)} "
          f"flows, {len(counters)} counter tracks: OK")


if __name__ == "__main__":
    try:
        main(sys.argv)
    except Failure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
