"""The op parity suite (tests/op_cases.py) in the browser: every op, forward and backward, on
device="webgpu" inside Pyodide in Chromium (WebGPU on SwiftShader, the browser binding), compared
with the CPU backend run here in CPython.

Expected values are computed here (float32, NumPy backend); the inputs, the weights W of the loss
sum(out * W) and the op table's source go to the page as JSON and text; all cases run in one page.
"""

import json
import sys
import traceback

import numpy as np
import pytest

import webgrad as wg
import webgrad.nn.functional as F
from tools import bootstrap

sys.path.insert(0, str(bootstrap.ROOT / "tests"))
from op_cases import CASES, make_inputs  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5  # float32 on two devices: summation order and transcendental functions differ

# Runs in the worker. op_cases.py imports NumPy at the top for make_inputs, which the page never
# calls; Pyodide has no NumPy offline, so an empty module stands in for it while the table loads.
PAGE_CODE = """
import json, sys, traceback, types
import webgrad as wg
import webgrad.nn.functional as F
from webgrad import webgpu

_saved = sys.modules.get("numpy")
sys.modules["numpy"] = types.ModuleType("numpy")
try:
    _cases = {}
    exec(compile(OP_CASES_SOURCE, "op_cases.py", "exec"), _cases)
finally:
    if _saved is None:
        del sys.modules["numpy"]
    else:
        sys.modules["numpy"] = _saved
CASE_FNS = {name: fn for name, fn, _ in _cases["CASES"]}


def _tensor(spec):
    dtype = wg.float32 if spec["float"] else wg.int32
    return wg.tensor(spec["data"], dtype=dtype, device="webgpu", requires_grad=spec["float"])


async def run_case(name, inputs, weight):
    try:
        xs = [_tensor(s) for s in inputs]
        out = CASE_FNS[name](wg, F, *xs)
        loss = (out * wg.tensor(weight, device="webgpu")).sum()
        loss.backward()
        grads = [await x.grad.reshape(-1).tolist_async() if x.grad is not None else None
                 for x, s in zip(xs, inputs) if s["float"]]
        values = await out.detach().reshape(-1).tolist_async()
        webgpu.synchronize()  # WebGPU reports errors late: make this case's surface here, not in the next
        return {"shape": list(out.shape), "out": values, "grads": grads}
    except Exception as e:
        failure = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
        try:
            webgpu.synchronize()  # errors still on their way belong to this case too
        except Exception:
            pass
        return failure
"""


def expected(fn, arrays, seed=0):
    """Forward values and input gradients of sum(fn(*x) * W) on the CPU in float32, and W."""
    xs = [wg.tensor(a, device="cpu", requires_grad=a.dtype.kind == "f") for a in arrays]
    out = fn(wg, F, *xs)
    weight = np.random.default_rng(seed).standard_normal(tuple(out.shape)).astype(np.float32)
    (out * wg.tensor(weight)).sum().backward()
    grads = [x.grad.numpy() if x.grad is not None else None for x, a in zip(xs, arrays) if a.dtype.kind == "f"]
    return out.detach().numpy(), grads, weight


@pytest.fixture(scope="module")
def browser_results(module_page):
    """{case name: what the page computed, with what the CPU computed under "want"}; one page for all."""
    page = module_page
    source = (bootstrap.ROOT / "tests" / "op_cases.py").read_text()
    page.evaluate("c => webgradRunPython(c)", f"OP_CASES_SOURCE = {source!r}\n" + PAGE_CODE)
    results = {}
    for name, fn, specs in CASES:
        arrays = make_inputs(specs)
        try:
            want = expected(fn, arrays)
        except Exception:  # the CPU reference itself failed: the case's test reports it
            results[name] = {"cpu_error": traceback.format_exc()}
            continue
        inputs = [{"data": a.tolist(), "float": a.dtype.kind == "f"} for a in arrays]
        call = (f"await run_case({name!r}, json.loads({json.dumps(inputs)!r}), "
                f"json.loads({json.dumps(want[2].tolist())!r}))")
        results[name] = dict(page.evaluate("c => webgradRunPython(c)", call), want=want)
    return results


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_op_on_webgpu_in_the_browser(browser_results, name):
    got = browser_results[name]
    assert "cpu_error" not in got, f"the CPU reference failed:\n{got.get('cpu_error')}"
    assert "error" not in got, f"{got['error']}\n{got.get('trace', '')}"
    out, grads, _ = got["want"]
    assert tuple(got["shape"]) == out.shape
    np.testing.assert_allclose(np.array(got["out"], np.float32).reshape(out.shape), out, rtol=RTOL, atol=ATOL,
                               err_msg=f"{name}: forward on webgpu (browser)")
    assert len(got["grads"]) == len(grads)
    for i, (g, want) in enumerate(zip(got["grads"], grads)):
        assert (g is None) == (want is None), f"{name}: gradient {i} present on one device only"
        if want is not None:
            np.testing.assert_allclose(np.array(g, np.float32).reshape(want.shape), want, rtol=RTOL, atol=ATOL,
                                       err_msg=f"{name}: gradient of input {i} on webgpu (browser)")
