"""Checking helpers used by every op test.

gradcheck: analytic gradients (webgrad's backward) against central finite differences computed in
float64 on the CPU backend. On the CPU the analytic side runs in float64 too; on WebGPU it runs in
float32 and is compared with the float64 numeric gradient at a float32-sized tolerance.

check_parity: the same function on the CPU and on another device, forward values and gradients.
"""

from pathlib import Path

import numpy as np

import webgrad as wg

ROOT = Path(__file__).resolve().parent.parent  # the repository
PACKAGE_DIR = ROOT / "package"  # what PYTHONPATH needs for a subprocess to import this checkout's webgrad


def webgpu_available():
    try:
        import webgrad.webgpu
        return webgrad.webgpu.is_available()
    except ImportError:
        return False


def import_torch_device():
    """(torch, webgrad.torch_device) for a test module of the webgpu torch device, imported at its top: the module
    is skipped without torch 2.9 or later, and where no WebGPU adapter exists the device's mechanics run on
    webgrad's NumPy backend."""
    import os
    import pytest
    torch = pytest.importorskip("torch")
    if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 9):
        pytest.skip("webgrad.torch_device needs torch >= 2.9", allow_module_level=True)
    if not webgpu_available():
        os.environ.setdefault("WEBGRAD_TORCH_DEVICE", "cpu")
    import webgrad.torch_device as td
    return torch, td


# the devices every device-parametrised test runs on
DEVICES = ["cpu"] + (["webgpu"] if webgpu_available() else [])


class variant:
    """Run the WebGPU kernels' software (untiled) or GPU (tiled) variant, whatever the adapter; a no-op on the CPU
    and where software is None."""

    def __init__(self, device, software):
        self.on = device == "webgpu" and software is not None
        self.software = software

    def __enter__(self):
        if self.on:
            from webgrad._backends.webgpu.runtime import default_runtime
            self.rt = default_runtime()
            self.old, self.rt.software = self.rt.software, self.software

    def __exit__(self, *exc):
        if self.on:
            self.rt.software = self.old


# (device, software) pairs: the CPU once, WebGPU with each variant
VARIANTS = [(d, s) for d in DEVICES for s in ((True, False) if d == "webgpu" else (None,))]


def _inputs(arrays, device, dtype, requires_grad):
    return [wg.tensor(a, dtype=dtype if a.dtype.kind == "f" else None, device=device,
                      requires_grad=requires_grad and a.dtype.kind == "f") for a in arrays]


def _scalar(fn, arrays, weights, device, dtype):
    out = fn(*_inputs(arrays, device, dtype, False))
    outs = out if isinstance(out, (tuple, list)) else (out,)
    total = 0.0
    for o, w in zip(outs, weights):
        if o.dtype.is_floating:
            total += float((o.to("cpu").numpy().astype(np.float64) * w).sum())
    return total


def gradcheck(fn, *arrays, device="cpu", eps=1e-6, atol=1e-6, rtol=1e-5, seed=0):
    """Compare webgrad's gradients of sum(fn(*inputs) * W) (W random) with finite differences.

    `arrays` are NumPy arrays; float arrays become differentiable inputs, integer arrays stay constant.
    """
    rng = np.random.default_rng(seed)
    arrays = [np.asarray(a) for a in arrays]
    dtype = wg.float64 if device == "cpu" else wg.float32
    if device != "cpu":
        atol, rtol = max(atol, 2e-4), max(rtol, 2e-3)

    xs = _inputs(arrays, device, dtype, True)
    out = fn(*xs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    weights = [rng.standard_normal(tuple(o.shape)) for o in outs]
    loss = None
    for o, w in zip(outs, weights):
        if o.dtype.is_floating:
            term = (o * wg.tensor(w, dtype=dtype, device=device)).sum()
            loss = term if loss is None else loss + term
    assert loss is not None and loss.requires_grad, "the op produced no differentiable output"
    loss.backward()

    for i, (a, x) in enumerate(zip(arrays, xs)):
        if a.dtype.kind != "f":
            continue
        assert x.grad is not None, f"input {i} got no gradient"
        analytic = x.grad.to("cpu").numpy().astype(np.float64)
        assert analytic.shape == a.shape, f"input {i}: gradient shape {analytic.shape} != input shape {a.shape}"
        numeric = np.zeros(a.shape)
        flat = a.astype(np.float64).reshape(-1)
        for j in range(flat.size):
            orig = flat[j]
            plus, minus = [b.astype(np.float64) if b.dtype.kind == "f" else b for b in arrays], None
            minus = [b.copy() for b in plus]
            plus[i].reshape(-1)[j] = orig + eps
            minus[i].reshape(-1)[j] = orig - eps
            numeric.reshape(-1)[j] = (_scalar(fn, plus, weights, "cpu", wg.float64)
                                      - _scalar(fn, minus, weights, "cpu", wg.float64)) / (2 * eps)
        np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {i} (shape {a.shape}) on {device}")


def check_parity(fn, *arrays, device="webgpu", rtol=1e-5, atol=1e-6, grad=True, seed=0):
    """fn on `device` vs on the CPU (both float32): forward values, and gradients of sum(out * W)."""
    rng = np.random.default_rng(seed)
    results = {}
    for dev in ("cpu", device):
        xs = [wg.tensor(a, device=dev, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
        out = fn(*xs)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        if dev == "cpu":
            weights = [rng.standard_normal(tuple(o.shape)).astype(np.float32) for o in outs]
        values = [o.detach().to("cpu").numpy() for o in outs]
        grads = []
        if grad:
            loss = None
            for o, w in zip(outs, weights):
                if o.requires_grad:
                    term = (o * wg.tensor(w, device=dev)).sum()
                    loss = term if loss is None else loss + term
            if loss is not None:
                loss.backward()
                grads = [x.grad.to("cpu").numpy() if x.grad is not None else None for x in xs]
        results[dev] = (values, grads)
    for a, b in zip(results["cpu"][0], results[device][0]):
        assert a.shape == b.shape and a.dtype == b.dtype, f"{a.shape}/{a.dtype} vs {b.shape}/{b.dtype}"
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, err_msg=f"forward on {device}")
    for i, (a, b) in enumerate(zip(results["cpu"][1], results[device][1])):
        if a is None:
            assert b is None
            continue
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, err_msg=f"gradient of input {i} on {device}")


def stored_view(backend, a, offset=0):
    """float32 array `a` as a View at element `offset` of a `backend` storage, between elements of 7.0 (an
    offset that is no multiple of 4 takes kernels' scalar paths; a kernel reading past the view would see 7s)."""
    from webgrad._view import View
    from webgrad.dtypes import float32

    pad = np.full(offset, 7, np.float32), np.full(5, 7, np.float32)
    flat = np.concatenate([pad[0], np.asarray(a, np.float32).ravel(), pad[1]])
    return View(backend.from_bytes(flat.tobytes(), float32), a.shape, View.contiguous_strides(a.shape), offset, float32)


def read_view(backend, v):
    """A float32 View's elements as an array of its shape."""
    return np.frombuffer(backend.to_bytes(v), np.float32).reshape(v.shape)


CONV_PASSES = ("forward", "backward_input", "backward_weight")


def record_calls(monkeypatch, module, names=CONV_PASSES):
    """A list to which each call of module.<name>, for name in `names`, appends that name (the call goes on
    to the function): which of a convolution family's passes ran."""
    ran = []
    for name in names:
        monkeypatch.setattr(module, name, lambda *a, _f=getattr(module, name), _n=name: ran.append(_n) or _f(*a))
    return ran


def assert_opinfo_entries_pass(wanted, device):
    """Every named OpInfo entry ("name" or "name:variant") exists and passes on `device` (webgrad.testing.opinfo)."""
    from webgrad.testing import opinfo
    by_name = {}
    for op in opinfo.entries([w.split(":")[0] for w in wanted]):
        r = opinfo.run_entry(op, device)
        by_name[r.full_name] = r
    assert not set(wanted) - set(by_name), f"not OpInfo entries: {sorted(set(wanted) - set(by_name))}"
    failing = {n: f"{by_name[n].status}: {by_name[n].reason}" for n in wanted if by_name[n].status != "pass"}
    assert not failing, "\n".join(f"{n}: {why}" for n, why in failing.items())
