"""python -m accel.bench runs end to end and prints DESIGN.md's report
shape (figures are not judged here: machines are shared and noisy)."""
import json
import subprocess
import sys


def test_bench_quick_json_has_both_figures(kernels_axe):
    r = subprocess.run([sys.executable, "-m", "accel.bench", "--quick", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["bench"] == "python" and report["device"] == "host:0"
    names = {x["name"]: x for x in report["results"]}
    assert set(names) == {"from_dlpack_buffer", "python_launch_sync"}
    for x in names.values():
        assert x["value"] > 0 and x["baseline"] > 0 and x["runs"] >= 1
        assert abs(x["ratio"] - x["value"] / x["baseline"]) < 1e-9
    assert "added_us" in names["python_launch_sync"]
