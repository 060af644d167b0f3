"""Launch from Python against numpy, with the C API's checks; profiling."""
import numpy as np
import pytest

import accel
from conftest import needs_numpy_dlpack_1


@pytest.fixture
def exe(dev, kernels_axe):
    return dev.load(kernels_axe)


def test_executable_lists_its_kernels(exe):
    assert set(exe.kernels) >= {"empty", "vector_add", "reduce_sum", "fail_at"}
    k = exe.kernel("vector_add")
    assert (k.name, k.binding_count, k.constants_size) == ("vector_add", 3, 4)
    with pytest.raises(accel.NotFoundError):
        exe.kernel("nope")


def test_vector_add_matches_numpy(dev, stream, exe, rng):
    k = exe.kernel("vector_add")
    for _ in range(10):
        n = rng.randrange(1, 3000)
        a = np.array([rng.uniform(-1e3, 1e3) for _ in range(n)], np.float32)
        b = np.array([rng.uniform(-1e3, 1e3) for _ in range(n)], np.float32)
        out = accel.empty(n, "float32", device=dev)
        k(stream, (n + 255) // 256, accel.asarray(a, device=dev),
          accel.asarray(b, device=dev), out, constants=np.uint32(n))
        np.testing.assert_array_equal(np.from_dlpack(out), a + b)


def test_reduce_sum_matches_numpy(dev, stream, exe, rng):
    k = exe.kernel("reduce_sum")
    n, per = rng.randrange(1, 10000), 512
    groups = (n + per - 1) // per
    x = np.array([rng.random() for _ in range(n)], np.float32)
    out = accel.empty(1, "float64", device=dev)
    scratch = dev.alloc(64 + 8 * groups, zero=True)
    k(stream, groups, accel.asarray(x, device=dev), out, scratch,
      constants=np.array([n, per], np.uint32))
    assert out.numpy()[0] == pytest.approx(float(x.astype(np.float64).sum()), rel=1e-9)


@needs_numpy_dlpack_1
def test_launch_checks_like_the_c_api(dev, stream, exe):
    k = exe.kernel("vector_add")
    a = accel.empty(256, "float32", device=dev)
    with pytest.raises(accel.InvalidArgumentError):
        k(stream, 1, a, a, constants=np.uint32(256))  # two bindings of three
    with pytest.raises(accel.InvalidArgumentError):
        k(stream, 1, a, a, a, constants=b"\0\0")  # constants too short
    with pytest.raises(accel.InvalidArgumentError):
        k(stream, 0, a, a, a, constants=np.uint32(256))  # zero work-groups
    with pytest.raises(ValueError):
        k(stream, (1, 1, 1, 1), a, a, a, constants=np.uint32(256))
    with pytest.raises(TypeError):
        k(stream, 1, a, a, "x", constants=np.uint32(256))
    with pytest.raises(TypeError):
        k(stream, 1, a, a, a, constant=np.uint32(256))
    ro_np = np.zeros(256, np.float32)
    ro_np.flags.writeable = False
    ro = accel.from_dlpack(ro_np, dev)  # numpy flags it READ_ONLY
    assert ro.readonly
    with pytest.raises(accel.InvalidArgumentError, match="read-only"):
        k(stream, 1, a, a, ro, constants=np.uint32(256))


def test_failing_kernel_poisons_the_stream(dev, stream, exe):
    k = exe.kernel("fail_at")
    k(stream, 4, constants=np.uint32(2))
    with pytest.raises(accel.AbortedError, match="fail_at"):
        stream.synchronize()


def test_profile_summarizes_kernels_and_copies(dev, stream, exe, tmp_path, capsys):
    k = exe.kernel("vector_add")
    a = accel.empty(1024, "float32", device=dev)
    b = accel.empty(1024, "float32", device=dev)
    path = tmp_path / "out.pftrace"
    with accel.profile(path) as p:
        for _ in range(3):
            k(stream, 4, a, a, b, constants=np.uint32(1024))
        stream.copy(a, b)
        stream.synchronize()
    rows = p.summary()
    printed = capsys.readouterr().out
    assert "category" in printed and "vector_add" in printed
    by_name = {r["name"]: r for r in rows}
    assert by_name["vector_add"]["category"] == "kernel"
    assert by_name["vector_add"]["count"] == 3
    copies = [r for r in rows if r["category"] == "copy"]
    assert copies and sum(r["bytes"] for r in copies) >= 4096


def test_weights_are_read_only_typed_views(dev, stream, tmp_path):
    # A weight packed from .npy comes back typed, equal, read-only, and
    # kernels may read but not write it.
    import os
    import subprocess
    pack, so = os.environ.get("ACCEL_PACK"), os.environ.get("ACCEL_HOST_KERNELS")
    if not pack or not so:
        pytest.skip("ACCEL_PACK and ACCEL_HOST_KERNELS are not set")
    w = np.arange(256, dtype=np.float32).reshape(16, 16) / 7
    np.save(tmp_path / "w.npy", w)
    (tmp_path / "m").write_text(
        f"code host-x86_64 elf {so}\n"
        "kernel vector_add workgroup=256,1,1 constants=4 binding=r:a:4:4 "
        "binding=r:b:4:4 binding=w:out:4:4\n"
        "weight w file=w.npy\n")
    subprocess.run([pack, str(tmp_path / "m"), "-o", str(tmp_path / "w.axe"),
                    "--quiet"], check=True)
    exe = dev.load(tmp_path / "w.axe")
    wb = exe.weight("w")
    assert wb.readonly and wb.shape == (16, 16) and wb.dtype == "float32"
    np.testing.assert_array_equal(np.frombuffer(wb, np.float32).reshape(16, 16), w)
    with pytest.raises(accel.NotFoundError):
        exe.weight("nope")
    k = exe.kernel("vector_add")
    out = accel.empty(256, "float32", device=dev)
    k(stream, 1, wb, wb, out, constants=np.uint32(256))
    np.testing.assert_array_equal(out.numpy(), (w + w).ravel())
    with pytest.raises(accel.InvalidArgumentError, match="read-only"):
        k(stream, 1, out, out, wb, constants=np.uint32(256))


@needs_numpy_dlpack_1
def test_weights_export_read_only_to_numpy(dev, kernels_axe, tmp_path):
    import os
    import subprocess
    pack, so = os.environ["ACCEL_PACK"], os.environ["ACCEL_HOST_KERNELS"]
    np.save(tmp_path / "v.npy", np.ones(8, np.int32))
    (tmp_path / "m").write_text(f"code host-x86_64 elf {so}\nweight v file=v.npy\n")
    subprocess.run([pack, str(tmp_path / "m"), "-o", str(tmp_path / "v.axe"),
                    "--quiet"], check=True)
    a = dev.load(tmp_path / "v.axe").weight("v").numpy()
    assert a.dtype == np.int32 and (a == 1).all() and not a.flags.writeable
