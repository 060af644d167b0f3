"""Command buffers from Python: record once, replay with a binding table and
constants per execute, with the C API's checks at record and execute time."""
import numpy as np
import pytest

import accel


@pytest.fixture
def exe(dev, kernels_axe):
    return dev.load(kernels_axe)


def _vector_add_buffer(dev, exe, name="vadd"):
    """vector_add over slots 0, 1, 2 with n from the execute's constants."""
    cb = accel.CommandBuffer(dev, name)
    k = exe.kernel("vector_add")
    # The grid is recorded: it covers the largest n the test executes.
    cb.launch(k, 16, 0, 1, 2, constants_offset=0)
    cb.finalize()
    return cb


def test_replays_match_numpy_for_every_binding_table(dev, stream, exe, rng):
    cb = _vector_add_buffer(dev, exe)
    assert (cb.command_count, cb.binding_count, cb.constants_size) == (1, 3, 4)
    assert cb.finalized and not cb.reentrant
    for i in range(12):
        n = rng.randrange(1, 16 * 256)
        a = np.array([rng.uniform(-1e3, 1e3) for _ in range(n)], np.float32)
        b = np.array([rng.uniform(-1e3, 1e3) for _ in range(n)], np.float32)
        out = accel.empty(n, "float32", device=dev)
        stream.execute(cb, [accel.asarray(a, device=dev),
                            accel.asarray(b, device=dev), out],
                       constants=np.uint32(n))
        np.testing.assert_array_equal(np.from_dlpack(out), a + b)
        assert cb.execute_count == i + 1


def test_slot_offsets_and_fixed_buffers(dev, stream, exe):
    # Fixed buffers and slot ranges mixed: out = a[64:] + b with a from a
    # slot bound at an offset, b fixed at record time.
    n = 300
    a = np.arange(n + 64, dtype=np.float32)
    b = np.full(n, 0.5, np.float32)
    bd = accel.asarray(b, device=dev)
    cb = accel.CommandBuffer(dev)
    cb.launch(exe.kernel("vector_add"), 2, (0, 64 * 4), bd, 1,
              constants=np.uint32(n))
    cb.finalize()
    out = accel.empty(n, "float32", device=dev)
    stream.execute(cb, [accel.asarray(a, device=dev), out])
    np.testing.assert_array_equal(np.from_dlpack(out), a[64:] + b)
    # The same buffer again, the slot now bound at a byte offset itself.
    out2 = accel.empty(n + 8, "float32", device=dev)
    stream.execute(cb, [accel.asarray(a, device=dev), (out2, 8 * 4)])
    np.testing.assert_array_equal(np.from_dlpack(out2)[8:], a[64:] + b)


def test_fill_copy_and_semaphores_replay_in_order(dev, stream):
    src = dev.alloc(4096)
    dst = dev.alloc(4096, zero=True)
    sem = dev.semaphore()
    cb = accel.CommandBuffer(dev, "fc")
    cb.fill(0, 4096, 0xA5A5A5A5, 4)
    cb.copy((1, 1024), (0, 0), 2048)
    cb.signal(sem, 7)
    cb.finalize()
    assert cb.command_count == 3 and cb.binding_count == 2
    stream.execute(cb, [src, dst])
    stream.synchronize()
    assert sem.value == 7
    got = dst.numpy()
    assert (got[:1024] == 0).all() and (got[3072:] == 0).all()
    assert (got[1024:3072] == 0xA5).all()


def test_recorded_wait_orders_against_another_stream(dev, stream):
    other = dev.stream("other")
    sem = dev.semaphore()
    buf = dev.alloc(256, zero=True)
    cb = accel.CommandBuffer(dev)
    cb.wait(sem, 1)
    cb.fill(buf, 256, 3)
    cb.finalize()
    stream.execute(cb)
    assert not stream.query()  # parked on the wait
    other.signal(sem, 1)
    stream.synchronize(timeout=30)
    assert (buf.numpy() == 3).all()
    other.close()


def test_misuse_is_refused_with_a_message(dev, stream, exe):
    k = exe.kernel("vector_add")
    cb = accel.CommandBuffer(dev, "bad")
    with pytest.raises(accel.InvalidArgumentError, match="binding"):
        cb.launch(k, 1, 0, 1, constants=np.uint32(4))  # two of three
    with pytest.raises(accel.InvalidArgumentError):
        cb.launch(k, 1, 0, 1, 2, constants=b"\0\0")  # constants too short
    with pytest.raises(TypeError):
        cb.launch(k, 1, 0, 1, 2, constants=np.uint32(4), constants_offset=0)
    with pytest.raises(TypeError):
        cb.launch(k, 1, 0, 1, 2, constant=np.uint32(4))
    with pytest.raises(TypeError):
        cb.launch("vector_add", 1, 0, 1, 2)
    with pytest.raises(TypeError):
        cb.launch(k, 1, 0, 1, (2,))  # a tuple needs an offset
    assert cb.command_count == 0  # refused commands are not recorded
    with pytest.raises(accel.InvalidArgumentError, match="finalize"):
        stream.execute(cb)  # not finalized
    cb.launch(k, 1, 0, 1, 2, constants_offset=0)
    cb.finalize()
    with pytest.raises(accel.InvalidArgumentError):
        cb.finalize()
    with pytest.raises(accel.InvalidArgumentError):
        cb.fill(0, 4, 0)  # finalized
    a = accel.empty(256, "float32", device=dev)
    with pytest.raises(accel.InvalidArgumentError):
        stream.execute(cb, [a, a], constants=np.uint32(256))  # slot 2 missing
    with pytest.raises(accel.InvalidArgumentError):
        stream.execute(cb, [a, a, a])  # no constants
    with pytest.raises(TypeError):
        stream.execute(cb, [a, a, 2], constants=np.uint32(256))
    short = accel.empty(4, "float32", device=dev)
    with pytest.raises(accel.InvalidArgumentError):
        # The slot bound past its buffer's end.
        stream.execute(cb, [a, a, (short, 64)], constants=np.uint32(256))
    ro_np = np.zeros(256, np.float32)
    ro_np.flags.writeable = False
    ro = accel.from_dlpack(ro_np, dev)
    with pytest.raises(accel.InvalidArgumentError, match="read-only"):
        stream.execute(cb, [a, a, ro], constants=np.uint32(256))
    assert cb.execute_count == 0
    with pytest.raises(TypeError):
        stream.execute("cb")


def test_a_failing_replayed_command_names_the_buffer(dev, stream, exe):
    cb = accel.CommandBuffer(dev, "failing")
    cb.launch(exe.kernel("empty"), 1)
    cb.launch(exe.kernel("fail_at"), 4, constants=np.uint32(2))
    cb.finalize()
    stream.execute(cb)
    with pytest.raises(accel.AbortedError, match='command buffer "failing"'):
        stream.synchronize()


def test_closed_runtime_raises_closed_error():
    rt = accel.Runtime()
    dev = rt.device(0)
    cb = accel.CommandBuffer(dev)
    cb.fill(0, 16, 1)
    rt.close()
    with pytest.raises(accel.ClosedError):
        cb.finalize()
    with pytest.raises(accel.ClosedError):
        _ = cb.command_count
