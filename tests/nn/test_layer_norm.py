"""Fused layer norm (kernels layer_norm / layer_norm_backward) against PyTorch: F.layer_norm and nn.LayerNorm on
every device, both WebGPU variants (a workgroup per row / a thread per row), finite differences, strided and
offset views, errors, and the dispatches a forward and a backward take; and F.rms_norm / nn.RMSNorm, the same
kernels without the mean."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES, gradcheck, read_view, stored_view

RNG = np.random.default_rng(1)
SHAPES = [((5, 8), (8,)), ((3, 7), (7,)), ((2, 3, 20), (20,)), ((4, 6, 10), (6, 10)), ((600, 12), (12,)),
          ((3, 1030), (1030,)),
          # many chunks of the GPU backward (more than its stage 2 has slices; a short last one), ragged columns;
          # enough for stage 2's four-chunks-a-step walk and its tail
          ((601, 130), (130,)), ((520, 96), (96,)), ((1100, 64), (64,))]


def _variants(device):
    """The WebGPU kernel variants to run (runtime.KERNEL_VARIANTS' layer_norm_rows), as a list of contexts."""
    if device != "webgpu":
        return [None]
    return [True, False]


class _software:
    def __init__(self, value):
        from webgrad._backends.webgpu.runtime import default_runtime
        self.rt, self.value = default_runtime(), value

    def __enter__(self):
        self.old = self.rt.software
        if self.value is not None:
            self.rt.software = self.value

    def __exit__(self, *exc):
        self.rt.software = self.old


def _torch_case(x, ns, w, b, g):
    tx = torch.tensor(x, requires_grad=True)
    tw, tb = (None if a is None else torch.tensor(a, requires_grad=True) for a in (w, b))
    ty = torch.nn.functional.layer_norm(tx, ns, tw, tb)
    (ty * torch.tensor(g)).sum().backward()
    return [ty.detach().numpy(), tx.grad.numpy()] + [t.grad.numpy() for t in (tw, tb) if t is not None]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: "x".join(map(str, s[0])))
def test_forward_and_gradients_match_torch(device, shapes):
    shape, ns = shapes
    x = (RNG.standard_normal(shape) * 3 + 1).astype(np.float32)
    w, b = (RNG.standard_normal(ns).astype(np.float32) for _ in range(2))
    g = RNG.standard_normal(shape).astype(np.float32)
    want = _torch_case(x, ns, w, b, g)
    for variant in _variants(device):
        with _software(variant if device == "webgpu" else None):
            wx, ww, wb = (wg.tensor(a, device=device, requires_grad=True) for a in (x, w, b))
            wy = wg.nn.functional.layer_norm(wx, ns, ww, wb)
            (wy * wg.tensor(g, device=device)).sum().backward()
            got = [wy.detach().cpu().numpy(), wx.grad.cpu().numpy(), ww.grad.cpu().numpy(), wb.grad.cpu().numpy()]
        for name, a, c in zip(("out", "grad_input", "grad_weight", "grad_bias"), got, want):
            np.testing.assert_allclose(a, c, rtol=2e-5, atol=2e-5, err_msg=f"{name} ({device}, software={variant})")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("affine", ["none", "weight", "bias"])
def test_without_weight_or_bias(device, affine):
    x = RNG.standard_normal((6, 16)).astype(np.float32)
    g = RNG.standard_normal((6, 16)).astype(np.float32)
    w = RNG.standard_normal(16).astype(np.float32) if affine == "weight" else None
    b = RNG.standard_normal(16).astype(np.float32) if affine == "bias" else None
    want = _torch_case(x, (16,), w, b, g)
    for variant in _variants(device):
        with _software(variant):
            wx = wg.tensor(x, device=device, requires_grad=True)
            ww, wb = (None if a is None else wg.tensor(a, device=device, requires_grad=True) for a in (w, b))
            wy = wg.nn.functional.layer_norm(wx, (16,), ww, wb)
            (wy * wg.tensor(g, device=device)).sum().backward()
            got = [wy.detach().cpu().numpy(), wx.grad.cpu().numpy()] + [t.grad.cpu().numpy() for t in (ww, wb)
                                                                         if t is not None]
        for a, c in zip(got, want):
            np.testing.assert_allclose(a, c, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_finite_differences(device):
    gradcheck(lambda x, w, b: wg.nn.functional.layer_norm(x, (5,), w, b), RNG.standard_normal((3, 5)),
              RNG.standard_normal(5), RNG.standard_normal(5), device=device)


@pytest.mark.parametrize("device", DEVICES)
def test_the_module_matches_torch_and_loads_its_state(device):
    tm = torch.nn.LayerNorm(12, eps=1e-6)
    with torch.no_grad():
        tm.weight.normal_()
        tm.bias.normal_()
    wm = wg.nn.LayerNorm(12, eps=1e-6).to(device)
    wm.load_state_dict({k: wg.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    x = RNG.standard_normal((2, 5, 12)).astype(np.float32)
    np.testing.assert_allclose(wm(wg.tensor(x, device=device)).detach().cpu().numpy(),
                               tm(torch.tensor(x)).detach().numpy(), rtol=2e-5, atol=2e-5)
    nb = wg.nn.LayerNorm(12, bias=False).to(device)
    assert nb.bias is None and nb(wg.tensor(x, device=device)).shape == (2, 5, 12)


@pytest.mark.parametrize("device", DEVICES)
def test_a_strided_input(device):
    x = RNG.standard_normal((8, 6)).astype(np.float32)
    wx = wg.tensor(x, device=device, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    wy = wg.nn.functional.layer_norm(wx.t(), (8,))
    ty = torch.nn.functional.layer_norm(tx.t(), (8,))
    wy.sum().backward() if False else (wy * wy).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(wy.detach().cpu().numpy(), ty.detach().numpy(), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(wx.grad.cpu().numpy(), tx.grad.numpy(), rtol=2e-4, atol=2e-4)


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
@pytest.mark.parametrize("software", [True, False])
@pytest.mark.parametrize("offset", [0, 3])
def test_the_kernels_on_offset_views(software, offset):
    """Views at an offset that is no multiple of 4 take the kernels' scalar loads; neighbours stay untouched."""
    from webgrad._backends import kernels
    be = wg.device("webgpu").backend
    rows, cols = 7, 12
    x, g = (RNG.standard_normal((rows, cols)).astype(np.float32) for _ in range(2))
    w, b = (RNG.standard_normal(cols).astype(np.float32) for _ in range(2))
    cpu = wg.device("cpu").backend
    with _software(software):
        views = {}
        for name, backend in (("cpu", cpu), ("webgpu", be)):
            out, save, dx, dw, db = (stored_view(backend, np.zeros(s, np.float32), offset)
                                     for s in ((rows, cols), (rows, 2), (rows, cols), (cols,), (cols,)))
            args = [stored_view(backend, a, offset) for a in (x, w, b)]
            kernels.layer_norm(backend, out, save, args[0], args[1], args[2], 1e-5)
            kernels.layer_norm_backward(backend, dx, dw, db, stored_view(backend, g, offset), args[0], save, args[1])
            views[name] = [read_view(backend, v) for v in (out, save, dx, dw, db)]
            tail = np.frombuffer(backend.to_bytes(wg._view.View(out.storage, (5,), (1,), offset + rows * cols,
                                                                    out.dtype)), np.float32)
            assert (tail == 7).all(), "a kernel wrote past its view"
    for a, c in zip(views["webgpu"], views["cpu"]):
        np.testing.assert_allclose(a, c, rtol=2e-5, atol=2e-5)


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
@pytest.mark.parametrize("software", [True, False])
@pytest.mark.parametrize("module", ["LayerNorm", "RMSNorm"])
def test_dispatches(software, module):
    """One dispatch forward; the backward two (grad_input with the partial sums, then the parameter sums). RMSNorm
    runs on the same kernels (its composition had taken ten ops)."""
    from webgrad._backends.webgpu.runtime import default_runtime
    stats = default_runtime().stats
    with _software(software):
        m = getattr(wg.nn, module)(16).to("webgpu")
        x = wg.randn(4, 16, device="webgpu", requires_grad=True)
        before = stats["dispatches"]
        y = m(x)
        assert stats["dispatches"] - before == 1
        g = wg.ones(4, 16, device="webgpu")
        before = stats["dispatches"]
        y.grad_fn.backward_fn(g)
        assert stats["dispatches"] - before == 2


def test_bad_shapes_are_refused():
    with pytest.raises(RuntimeError, match="normalized_shape"):
        wg.nn.functional.layer_norm(wg.zeros(3, 4), (5,))
    with pytest.raises(RuntimeError, match="weight"):
        wg.nn.functional.layer_norm(wg.zeros(3, 4), (4,), wg.ones(3))


# ------------------------------------------------------------------------------------ RMS normalisation (rms=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: "x".join(map(str, s[0])))
@pytest.mark.parametrize("with_weight", [True, False])
def test_rms_norm_matches_torch(device, shapes, with_weight):
    shape, ns = shapes
    x = (RNG.standard_normal(shape) * 3 + 1).astype(np.float32)
    w = RNG.standard_normal(ns).astype(np.float32) if with_weight else None
    g = RNG.standard_normal(shape).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    tw = None if w is None else torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.rms_norm(tx, ns, tw)
    (ty * torch.tensor(g)).sum().backward()
    want = [ty.detach().numpy(), tx.grad.numpy()] + ([] if tw is None else [tw.grad.numpy()])
    for variant in _variants(device):
        with _software(variant if device == "webgpu" else None):
            wx = wg.tensor(x, device=device, requires_grad=True)
            ww = None if w is None else wg.tensor(w, device=device, requires_grad=True)
            wy = wg.nn.functional.rms_norm(wx, ns, ww)
            (wy * wg.tensor(g, device=device)).sum().backward()
            got = [wy.detach().cpu().numpy(), wx.grad.cpu().numpy()] + ([] if ww is None else [ww.grad.cpu().numpy()])
        for name, a, c in zip(("out", "grad_input", "grad_weight"), got, want):
            np.testing.assert_allclose(a, c, rtol=2e-5, atol=3e-5, err_msg=f"{name} ({device}, software={variant})")


@pytest.mark.parametrize("device", DEVICES)
def test_rms_norm_finite_differences_and_eps(device):
    gradcheck(lambda x, w: wg.nn.functional.rms_norm(x, (5,), w, 1e-3), RNG.standard_normal((3, 5)),
              RNG.standard_normal(5), device=device)
    x = np.zeros((2, 4), np.float32)  # all zeros: eps alone under the root (torch's default: float32's epsilon)
    np.testing.assert_array_equal(wg.nn.functional.rms_norm(wg.tensor(x, device=device), (4,)).cpu().numpy(),
                                  torch.nn.functional.rms_norm(torch.tensor(x), (4,)).numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_rms_norm_module_and_half_input(device):
    tm = torch.nn.RMSNorm(12, eps=1e-6)
    with torch.no_grad():
        tm.weight.normal_()
    wm = wg.nn.RMSNorm(12, eps=1e-6).to(device)
    wm.load_state_dict({k: wg.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    x = RNG.standard_normal((2, 5, 12)).astype(np.float32)
    np.testing.assert_allclose(wm(wg.tensor(x, device=device)).detach().cpu().numpy(),
                               tm(torch.tensor(x)).detach().numpy(), rtol=2e-5, atol=2e-5)
    if device == "webgpu" and not wg.device("webgpu").backend.runtime.has_f16:
        return
    h = wg.nn.functional.rms_norm(wg.tensor(x, device=device).half(), (12,))  # float16: computed in float32
    th = torch.nn.functional.rms_norm(torch.tensor(x).half(), (12,))
    assert h.dtype is wg.float16
    np.testing.assert_allclose(h.float().cpu().numpy(), th.float().numpy(), rtol=1e-3, atol=1e-3)
