"""DLPack both ways with numpy (zero copy checked by writing through one
side and reading the other), capsule rules, deleters counted, the stream
handshake, the buffer protocol, and PyTorch when it is importable."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import accel
from conftest import needs_numpy_dlpack_1
from dlpack_producer import KDLCUDA, READ_ONLY, Producer

DTYPES = [np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
          np.uint8, np.uint16, np.uint32, np.uint64, np.float16, np.bool_,
          np.complex64]


def _random_array(rng, dtype):
    ndim = rng.randrange(0, 4)
    shape = tuple(rng.randrange(1, 6) for _ in range(ndim))
    a = np.array([rng.randrange(0, 100) for _ in range(int(np.prod(shape)))])
    a = a.reshape(shape).astype(dtype)
    # A strided view: reversed or stepped along one axis.
    if ndim and rng.random() < 0.5:
        axis = rng.randrange(ndim)
        sl = [slice(None)] * ndim
        sl[axis] = slice(None, None, rng.choice([-1, 2]))
        a = a[tuple(sl)]
    return a


def test_numpy_round_trips_zero_copy_both_ways(dev, rng):
    for _ in range(60):
        dtype = rng.choice(DTYPES)
        src = _random_array(rng, dtype)
        buf = accel.from_dlpack(src, dev)
        assert buf.shape == src.shape
        assert buf.dtype == np.dtype(dtype).name
        back = np.from_dlpack(buf)
        np.testing.assert_array_equal(back, src)
        # Strides of extent-1 dimensions mean nothing (numpy 2.0 rewrites them).
        assert [st for st, n in zip(back.strides, src.shape) if n > 1] == \
            [st for st, n in zip(src.strides, src.shape) if n > 1]
        if src.size and dtype is not np.bool_:
            # Zero copy: a write through one side shows on the other (numpy
            # before 2.1 makes arrays from DLPack read-only: one way there).
            idx = tuple(rng.randrange(n) for n in src.shape)
            if back.flags.writeable:
                back[idx] = 7
                assert src[idx] == 7
            src[idx] = 3
            assert back[idx] == 3


def test_accel_buffer_to_numpy_shares_memory(dev, stream):
    buf = accel.empty((4, 8), np.float32, device=dev)
    stream.fill(buf, 0, 4)
    a = np.from_dlpack(buf)  # synchronizes the stream that wrote it
    assert a.shape == (4, 8) and not a.any()
    np.frombuffer(buf, np.float32)[10] = 5.0  # the buffer protocol, writable
    assert a[1, 2] == 5.0 and buf.numpy()[1, 2] == 5.0


def test_capsules_versioned_and_legacy(dev):
    buf = accel.asarray(np.arange(6, dtype=np.int32), device=dev)
    v = buf.__dlpack__(max_version=(1, 0))
    legacy = buf.__dlpack__()
    assert "dltensor_versioned" in repr(v) and '"dltensor"' in repr(legacy)
    for cap in (v, legacy):
        b = accel.from_dlpack(cap, dev)
        np.testing.assert_array_equal(b.numpy(), np.arange(6, dtype=np.int32))
        assert b.address == buf.address


def test_capsule_consumed_twice_is_refused(dev):
    buf = dev.alloc(16)
    cap = buf.__dlpack__(max_version=(1, 1))
    accel.from_dlpack(cap, dev)
    assert "used_dltensor_versioned" in repr(cap)
    with pytest.raises(BufferError, match="already consumed"):
        accel.from_dlpack(cap, dev)


def test_deleters_called_exactly_once(dev):
    p = Producer()
    for versioned in (True, False):
        cap, memory = p.capsule([1, 2, 3, 4], versioned=versioned)
        buf = accel.from_dlpack(cap, dev)
        view = buf.view("float32", (2, 2))
        del cap
        assert p.deleted == (0 if versioned else 1) and buf.numpy()[2] == 3
        memory[2] = 30.0  # zero copy
        assert view.numpy()[1, 0] == 30.0
        del buf
        assert p.deleted == (0 if versioned else 1)
        del view
        assert p.deleted == (1 if versioned else 2)
    # A refused import leaves the tensor the producer's: no deleter call,
    # and the same capsule imports once the producer fixes it.
    cap, _ = p.capsule([1.0], version=(2, 0))
    with pytest.raises(accel.VersionError, match="2.0"):
        accel.from_dlpack(cap, dev)
    assert p.deleted == 2
    p.last_tensor().version.major = 1
    buf = accel.from_dlpack(cap, dev)
    del buf
    assert p.deleted == 3


def test_exports_released_with_their_consumers(dev):
    base = dev.runtime._live_exports
    buf = dev.alloc(64)
    arrays = [np.from_dlpack(buf) for _ in range(5)]
    mv = memoryview(buf)
    assert dev.runtime._live_exports == base + 6
    del arrays
    mv.release()
    assert dev.runtime._live_exports == base


def test_numpy_array_outlives_closed_runtime():
    rt = accel.Runtime()
    buf = rt.devices[0].alloc(32)
    a = np.from_dlpack(buf.view("uint8"))
    np.frombuffer(buf, np.uint8)[:] = 5
    rt.close()
    with pytest.raises(accel.ClosedError):
        buf.numpy()
    assert a.sum() == 160  # the memory lives until the array goes
    del a


def test_copy_false_never_copies(dev):
    p = Producer()
    cap, _ = p.capsule([1, 2], device=(KDLCUDA, 0))
    with pytest.raises(accel.UnsupportedError, match="copying was not allowed"):
        accel.from_dlpack(cap, dev, copy=False)
    assert p.deleted == 0
    x = np.arange(8, dtype=np.float32)
    b = accel.from_dlpack(x, dev, copy=True)
    x[0] = 99
    assert b.numpy()[0] == 0
    b2 = accel.asarray(x, device=dev, copy=False)
    x[1] = 42
    assert b2.numpy()[1] == 42


@needs_numpy_dlpack_1
def test_read_only_tensors_stay_read_only(dev, stream):
    p = Producer()
    cap, _ = p.capsule([1, 2, 3, 4], flags=READ_ONLY)
    buf = accel.from_dlpack(cap, dev)
    assert buf.readonly
    with pytest.raises(accel.InvalidArgumentError, match="read-only"):
        stream.fill(buf, 0)
    assert memoryview(buf).readonly
    assert not buf.numpy().flags.writeable
    with pytest.raises(accel.UnsupportedError):
        buf.__dlpack__()  # the legacy form cannot say read-only


@needs_numpy_dlpack_1
def test_dlpack_copy_and_device_arguments(dev):
    buf = accel.asarray(np.arange(4, dtype=np.float32), device=dev)
    c = np.from_dlpack(buf, copy=True)
    c[0] = 10
    assert buf.numpy()[0] == 0
    with pytest.raises(BufferError):
        buf.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="stream"):
        buf.__dlpack__(stream=7)


def _blocked_fill(dev, stream, value):
    """A fill on |stream| held back by a semaphore signalled from a thread."""
    sem = dev.semaphore()
    buf = dev.alloc(1 << 16, zero=True)
    stream.wait(sem, 1)
    stream.fill(buf, value)
    threading.Timer(0.05, sem.signal, (1,)).start()
    return buf


def test_dlpack_host_consumer_waits_for_the_writing_stream(dev, stream):
    buf = _blocked_fill(dev, stream, 7)
    a = np.from_dlpack(buf)  # __dlpack__(stream=None): host consumer
    assert (a == 7).all()


def test_dlpack_consumer_stream_waits_without_blocking(dev, stream):
    buf = _blocked_fill(dev, stream, 9)
    consumer = dev.stream()
    imported = accel.from_dlpack(buf, dev, stream=consumer)
    out = dev.alloc(1 << 16)
    consumer.copy(out, imported)
    consumer.synchronize()
    assert bytes(memoryview(out)) == b"\x09" * (1 << 16)
    consumer.close()


def test_import_onto_a_stream_from_numpy(dev, stream):
    # numpy has no streams: the consumer's stream is not passed to it, and
    # work on the stream after the import sees the array.
    x = np.arange(16, dtype=np.uint8)
    b = accel.from_dlpack(x, dev, stream=stream)
    out = dev.alloc(16)
    stream.copy(out, b)
    stream.synchronize()
    assert bytes(memoryview(out)) == x.tobytes()


def test_deleters_run_once_at_interpreter_exit(tmp_path):
    # Imported tensors and exports still alive at exit, on the default
    # runtime and on one of the user's: every runtime closes at exit, while
    # the interpreter still works, and each producer deleter runs once.
    script = tmp_path / "exit.py"
    script.write_text(
        "import sys, os\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "import numpy as np, accel\n"
        "from dlpack_producer import Producer\n"
        "p = Producer(on_delete=lambda: os.write(1, b'deleted\\n'))\n"
        "cap, mem = p.capsule([1, 2, 3])\n"
        "kept = accel.from_dlpack(cap)\n"
        "view = kept.view('float32', (3,))\n"
        "arr = np.from_dlpack(accel.empty(4))\n"
        "s = accel.default_device().stream()\n"
        "s.fill(kept, 0, 4)\n"
        "rt = accel.Runtime()\n"
        "cap2, mem2 = p.capsule([4, 5])\n"
        "mine = accel.from_dlpack(cap2, rt.devices[0])\n"
        "s2 = rt.devices[0].stream()\n"
        "s2.fill(mine, 1, 1)\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("deleted") == 2, r.stdout
    assert "Exception ignored" not in r.stderr, r.stderr


def test_torch_from_dlpack_both_ways(dev):
    torch = pytest.importorskip(
        "torch", reason="torch is not importable here: PyTorch DLPack tests skipped")
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    buf = accel.from_dlpack(t, dev)
    back = torch.from_dlpack(buf)
    back[0, 0] = 42
    assert t[0, 0] == 42
    a = accel.empty((2, 2), "float32", device=dev)
    ta = torch.from_dlpack(a)
    ta.fill_(3)
    assert (a.numpy() == 3).all()
