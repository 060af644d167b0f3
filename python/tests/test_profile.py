"""accel.profile and the trace summary: counters during a profile, and the
Perfetto reader refusing malformed files with ValueError only."""
import pytest

import accel


def _record(dev, stream, path):
    buf = dev.alloc(1 << 20)
    with accel.profile(path) as p:
        stream.fill(buf, 1)
        stream.copy(buf, buf, 4096, dst_offset=8192)
        stream.synchronize()
    return p


def test_profile_records_fills_and_copies(dev, stream, tmp_path):
    p = _record(dev, stream, tmp_path / "t.pftrace")
    rows = accel.summarize(p.path)
    cats = {r["category"] for r in rows}
    assert {"copy", "command"} <= cats
    fill = [r for r in rows if r["name"] == "fill"]
    assert fill and fill[0]["count"] == 1 and fill[0]["bytes"] == 1 << 20


def test_profile_refuses_a_second_recording(dev, stream, tmp_path):
    with accel.profile(tmp_path / "a.pftrace"):
        with pytest.raises(accel.BusyError):
            with accel.profile(tmp_path / "b.pftrace"):
                pass


def test_summary_only_after_the_block(tmp_path):
    with accel.profile(tmp_path / "c.pftrace") as p:
        with pytest.raises(RuntimeError):
            p.summary()


def test_summarize_refuses_truncated_and_corrupt_files(dev, stream, tmp_path, rng):
    # Every prefix and every single-byte corruption of a real trace either
    # summarizes or raises ValueError: no other exception, no hang.
    good = _record(dev, stream, tmp_path / "g.pftrace").path
    data = open(good, "rb").read()
    bad = tmp_path / "bad.pftrace"
    cuts = sorted({rng.randrange(len(data)) for _ in range(60)} | {0, 1})
    variants = [data[:n] for n in cuts]
    for _ in range(60):
        i = rng.randrange(len(data))
        variants.append(data[:i] + bytes([rng.randrange(256)]) + data[i + 1:])
    refused = 0
    for v in variants:
        bad.write_bytes(v)
        try:
            accel.summarize(str(bad))
        except ValueError:
            refused += 1
    assert refused >= 2  # at least the empty and one-byte files
