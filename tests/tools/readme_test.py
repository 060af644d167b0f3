#!/usr/bin/env python3
"""README.md against what the build does.

usage: readme_test.py SOURCE_ROOT ACCEL_INFO
"""
import os
import re
import subprocess
import sys

import checklist

ROOT, INFO = sys.argv[1], sys.argv[2]
with open(os.path.join(ROOT, "README.md")) as f:
    README = f.read()
ENV = subprocess.run([INFO, "--env"], capture_output=True, text=True,
                     timeout=60, check=True).stdout


def test_readme_lists_every_environment_variable():
    # Each variable accel-info --env lists has a row in README's table.
    names = re.findall(r"^(ACCEL_[A-Z0-9_]+)", ENV, re.M)
    assert names, "accel-info --env listed nothing"
    missing = [n for n in names if "`%s`" % n not in README]
    assert not missing, "README does not list %s" % missing


def test_readme_links_stay_inside_the_repository():
    # No link outside the tree (../shared), and every docs/ file named exists.
    assert "../" not in README, "README points outside the repository"
    for path in set(re.findall(r"\bdocs/[\w./-]*\w", README)):
        assert os.path.exists(os.path.join(ROOT, path)), "README names %s" % path


def test_readme_shows_the_install_step_and_what_is_missing():
    # The install step (prefix, pkg-config, running from the prefix) and the
    # list of what is not built yet are there.
    for want in ("meson install", "--prefix=", "PKG_CONFIG_PATH",
                 "pkg-config --cflags --libs accel", "/bin/accel-info",
                 "share/man", "man accel-info",
                 "## What is not built yet", "CUDA backend", "command buffers",
                 "C shim", "Python", "recovery", "serving"):
        assert want in README, "README lacks %r" % want


def test_no_cuda_device_ids_shown_without_a_cuda_backend():
    # Until lib/drv/cuda exists, no example names a cuda device id.
    if os.path.isdir(os.path.join(ROOT, "lib", "drv", "cuda")):
        return
    assert "cuda:" not in ENV, "accel-info --env shows a cuda device id"
    with open(os.path.join(ROOT, "include", "accel", "runtime.h")) as f:
        assert "cuda:" not in f.read(), "runtime.h shows a cuda device id"
    assert "cuda:" not in README, "README shows a cuda device id"


if __name__ == "__main__":
    checklist.main(globals())
