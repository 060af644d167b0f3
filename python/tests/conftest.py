import os
import random
import subprocess

import numpy as np
import pytest

import accel

# numpy 2.1 consumes and produces versioned DLPack (the read-only flag,
# from_dlpack(copy=)); numpy 2.0 (the last for Python 3.9) only the legacy
# form.
needs_numpy_dlpack_1 = pytest.mark.skipif(
    tuple(int(x) for x in np.__version__.split(".")[:2]) < (2, 1),
    reason="numpy %s has no versioned DLPack (read-only flag, copy=): needs "
           "numpy 2.1" % np.__version__)


@pytest.fixture
def rt():
    r = accel.Runtime()
    yield r
    r.close()


@pytest.fixture
def dev(rt):
    return rt.devices[0]


@pytest.fixture
def stream(dev):
    s = dev.stream()
    yield s
    s.close()


@pytest.fixture
def rng(request):
    seed = int(os.environ.get("ACCEL_TEST_SEED", random.randrange(1 << 30)))
    print(f"{request.node.name}: seed {seed} (replay with ACCEL_TEST_SEED={seed})")
    return random.Random(seed)


REFERENCE_MANIFEST = """code host-x86_64 elf {so}
kernel empty
kernel vector_add workgroup=256,1,1 constants=4 binding=r:a:4:4 binding=r:b:4:4 binding=w:out:4:4
kernel reduce_sum constants=8 binding=r:in:4:4 binding=w:out:8:8 binding=rw:scratch:64:8
kernel fail_at constants=4
"""


@pytest.fixture(scope="session")
def kernels_axe(tmp_path_factory):
    """The reference host kernels packed into an .axe with accel-pack (both
    from the C build: ACCEL_PACK, ACCEL_HOST_KERNELS)."""
    pack = os.environ.get("ACCEL_PACK")
    so = os.environ.get("ACCEL_HOST_KERNELS")
    if not pack or not so or not os.path.exists(pack) or not os.path.exists(so):
        pytest.skip("ACCEL_PACK and ACCEL_HOST_KERNELS are not set to built "
                    "files (scripts/test-python.sh sets them from build/)")
    d = tmp_path_factory.mktemp("axe")
    manifest = d / "k.manifest"
    manifest.write_text(REFERENCE_MANIFEST.format(so=so))
    out = d / "k.axe"
    subprocess.run([pack, str(manifest), "-o", str(out), "--quiet"], check=True)
    return str(out)
