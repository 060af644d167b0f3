"""python/README.md's first example runs as written (with the test's
kernels file) and prints what its comment says."""
import os
import re
import subprocess
import sys

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def test_readme_example_runs(kernels_axe, tmp_path):
    with open(README) as f:
        code = re.search(r"```python\n(.*?)```", f.read(), re.S).group(1)
    assert '"kernels.axe"' in code
    script = tmp_path / "example.py"
    script.write_text(code.replace('"kernels.axe"', repr(kernels_axe)))
    r = subprocess.run([sys.executable, str(script)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[1. 2. 3. 4.]"
