"""Runtime objects: devices, streams, events, semaphores, errors, the GIL,
lifetimes (any drop order, use after close)."""
import gc
import threading
import time

import numpy as np
import pytest

import accel


def test_runtime_exposes_host_devices():
    # host_devices=2 gives two independent devices with distinct ids.
    with accel.Runtime(host_devices=2) as rt:
        devs = rt.devices
        assert [d.id for d in devs] == ["host:0", "host:1"]
        assert devs[0] == rt.device(0) and devs[0] != devs[1]
        assert devs[0].info["backend"] == "host"
        assert devs[0].__dlpack_device__() == (1, 0)
    assert rt.closed


def test_errors_carry_status_and_message(dev):
    # A failure raises the status's class, which is also the builtin one.
    with pytest.raises(accel.InvalidArgumentError) as e:
        dev.alloc(0)
    assert isinstance(e.value, ValueError) and isinstance(e.value, accel.Error)
    assert e.value.status == 1 and e.value.status_name == "ACCEL_ERROR_INVALID_ARGUMENT"
    assert e.value.message and e.value.message in str(e.value)
    with pytest.raises(accel.InvalidArgumentError, match="out of range"):
        dev.runtime.device(99)


def test_semaphore_wait_times_out_and_signals(dev):
    sem = dev.semaphore(3)
    assert sem.value == 3
    with pytest.raises(accel.TimeoutError) as e:
        sem.wait(4, timeout=0.01)
    assert isinstance(e.value, TimeoutError)
    sem.signal(4)
    sem.wait(4, timeout=0)
    with pytest.raises(ValueError):
        sem.wait(5, timeout=-1)


def test_wait_releases_the_gil(dev):
    # A thread blocked in Semaphore.wait lets the main thread run and
    # signal; a wait that held the GIL would time out instead.
    sem = dev.semaphore()
    done = []

    def waiter():
        sem.wait(1, timeout=20)
        done.append(True)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.05)
    sem.signal(1)
    t.join(30)
    assert done == [True]


def test_stream_copy_and_fill_match_numpy(dev, stream, rng):
    n = rng.randrange(1, 5000)
    src = np.array([rng.random() for _ in range(n)], dtype=np.float32)
    a = accel.asarray(src, device=dev, copy=True)
    b = accel.empty(n, "float32", device=dev)
    stream.copy(b, a)
    off = rng.randrange(0, n)
    stream.fill(b, 0x3F800000, 4, offset=4 * off, nbytes=4 * (n - off))
    stream.synchronize()
    want = src.copy()
    want[off:] = 1.0
    np.testing.assert_array_equal(b.numpy(), want)
    assert stream.query()


def test_stream_orders_after_semaphore_and_event(dev):
    s1, s2 = dev.stream(), dev.stream()
    sem = dev.semaphore()
    buf = dev.alloc(64, zero=True)
    s1.wait(sem, 1)
    s1.fill(buf, 9)
    ev = dev.event()
    ev.record(s1)
    s2.wait(ev)
    s2.signal(sem, 2)
    assert not ev.query()
    sem.signal(1)
    s2.synchronize(timeout=10)
    assert sem.value == 2 and ev.query()
    assert bytes(memoryview(buf)) == b"\x09" * 64
    start, end = dev.event(), dev.event()
    start.record(s1)
    end.record(s1)
    end.synchronize()
    assert start.elapsed_ns(end) >= 0
    s1.close()
    s2.close()


def test_synchronize_takes_one_timeout(dev, stream):
    # Positional or keyword, seconds or None; anything else is a TypeError.
    stream.synchronize(5)
    stream.synchronize(timeout=None)
    ev = dev.event()
    ev.record(stream)
    ev.synchronize(timeout=1.5)
    for bad in (lambda: stream.synchronize(1, 2), lambda: stream.synchronize(bogus=1),
                lambda: ev.synchronize(1, timeout=2)):
        with pytest.raises(TypeError):
            bad()
    with pytest.raises(TypeError):
        stream.synchronize("soon")


def test_stream_errors_raise_on_misuse(dev, stream):
    a, b = dev.alloc(16), dev.alloc(8)
    with pytest.raises(accel.InvalidArgumentError):
        stream.copy(b, a, 16)
    with pytest.raises(TypeError):
        stream.copy(b, "not a buffer")
    with pytest.raises(accel.InvalidArgumentError):
        stream.fill(a, 0x1FF, 1)


def _objects(rt):
    dev = rt.devices[0]
    s = dev.stream()
    buf = dev.alloc(256)
    view = buf.view("float32", (8, 8))
    s.fill(buf, 1)
    return [dev, s, buf, view, dev.event(), dev.semaphore(1),
            accel.asarray(np.ones(4, np.float32), device=dev)]


def test_objects_drop_in_any_order(rng):
    # Every permutation drawn drops the runtime's objects (and the runtime
    # itself) in another order without error.
    for _ in range(20):
        rt = accel.Runtime()
        objs = _objects(rt) + [rt]
        del rt
        rng.shuffle(objs)
        while objs:
            objs.pop()
            gc.collect()


def test_every_object_raises_after_runtime_close(kernels_axe):
    rt = accel.Runtime()
    dev, s, buf, view, ev, sem, imported = _objects(rt)
    exe = dev.load(kernels_axe)
    k = exe.kernel("empty")
    rt.close()
    rt.close()  # idempotent
    calls = [
        lambda: dev.alloc(8), lambda: dev.stream(), lambda: dev.info,
        lambda: s.synchronize(), lambda: s.fill(buf, 0), lambda: buf.nbytes,
        lambda: view.__dlpack__(), lambda: memoryview(buf), lambda: ev.query(),
        lambda: sem.value, lambda: imported.numpy(), lambda: exe.kernels,
        lambda: k(s, 1), lambda: rt.devices, lambda: exe.kernel("empty"),
    ]
    for call in calls:
        with pytest.raises(accel.ClosedError):
            call()
    assert "closed" in repr(buf)


def test_freed_buffer_and_closed_stream_raise(dev):
    buf = dev.alloc(16)
    buf.free()
    buf.free()
    with pytest.raises(accel.ClosedError, match="free"):
        buf.nbytes
    s = dev.stream()
    s.close()
    with pytest.raises(accel.ClosedError, match="close"):
        s.synchronize()


def test_counters_are_a_dict_per_scope(dev, stream):
    buf = dev.alloc(4096)
    stream.fill(buf, 3)
    stream.synchronize()
    c = accel.counters()
    assert dev.id in c
    assert any(k.startswith(dev.id + "/") for k in c)
    assert all(isinstance(v, int) for scope in c.values() for v in scope.values())
    assert c[dev.id]["bytes_in_use"] >= 4096


def test_threads_share_a_device(dev, rng):
    # Four Python threads, each with its own stream, fill and copy buffers
    # of one device at once (the GIL is released in the waits); every
    # result is checked against what that thread wrote.
    errors = []
    seeds = [rng.randrange(1 << 30) for _ in range(4)]

    def worker(seed):
        import random
        r = random.Random(seed)
        try:
            s = dev.stream()
            for _ in range(50):
                n = r.randrange(1, 1 << 14)
                v = r.randrange(256)
                a, b = dev.alloc(n), dev.alloc(n)
                s.fill(a, v)
                s.copy(b, a)
                s.synchronize(timeout=60)
                if bytes(memoryview(b)) != bytes([v]) * n:
                    errors.append(f"seed {seed}: copy of {n} bytes of {v} differs")
            s.close()
        except Exception as e:  # reported below, with the seed
            errors.append(f"seed {seed}: {e!r}")

    threads = [threading.Thread(target=worker, args=(sd,)) for sd in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
