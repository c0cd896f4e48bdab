"""The float16 kernels autocast's ResNet blocks run besides convolutions (test_conv_gemm_f16.py), against
torch: BatchNorm's fused kernels on float16 activations with float32 statistics and parameters (both
kernel variants: a GPU's workgroup reductions and a software adapter's rows), and elementwise.wgsl's
float16 entry points (unary, its derivative, binary) with the routing that sends them there.

Tolerances. Elementwise: f32 math on the half inputs, rounded once, is what torch's CPU float32 gives
rounded to half, so relu, add, mul and their gradients match bit for bit; transcendental ops may differ
by one half ulp (2**-10 relative) where the GPU's f32 result sits on the other side of a rounding tie.
BatchNorm: the reference is torch's float32 BatchNorm over the half-rounded input, its output and input
gradient rounded to half once; ours sums the statistics in another order (f32 noise ~1e-6 relative),
so each element may be one half ulp off, plus 1e-3 absolute for values near zero whose magnitude
comes from a difference; weight and bias gradients and running statistics are float32: 1e-4 relative."""

import numpy as np
import pytest

import webgrad as wg
from helpers import DEVICES
from webgrad import nn

torch = pytest.importorskip("torch")


def _has_f16():
    return "webgpu" in DEVICES and wg.device("webgpu").backend.runtime.has_f16


pytestmark = pytest.mark.skipif(not _has_f16(), reason="needs a WebGPU adapter with shader-f16")


def _np(t):
    return t.detach().to("cpu").numpy()


def _half_ulp_close(ours, ref, atol=0.0):
    ours, ref = ours.astype(np.float64), ref.astype(np.float64)
    tol = 2.0**-10 * np.abs(ref) + atol
    bad = ~((np.abs(ours - ref) <= tol) | (np.isinf(ref) & (ours == ref)))
    assert not bad.any(), f"{bad.sum()} of {bad.size} differ; worst {np.abs(ours - ref)[bad].max()}"


@pytest.fixture
def kernels_run(monkeypatch):
    """The entry points the WebGPU runtime dispatches, by name."""
    from webgrad._backends.webgpu.runtime import default_runtime

    rt = default_runtime()
    names = []
    launch = rt.launch
    monkeypatch.setattr(rt, "launch", lambda kernel, *a, **k: names.append(kernel.entry) or launch(kernel, *a, **k))
    return names


@pytest.mark.parametrize("software", [False, True], ids=["gpu-variant", "rows-variant"])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_batch_norm_half_activations(monkeypatch, software, training):
    from webgrad._backends.webgpu.runtime import default_runtime

    monkeypatch.setattr(default_runtime(), "software", software)
    rng = np.random.default_rng(int(software) * 2 + int(training))
    x = (rng.standard_normal((4, 16, 6, 6)) * 3 + 2).astype(np.float16)
    g = rng.standard_normal(x.shape).astype(np.float16)
    w, b = rng.standard_normal(16).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    ours, ref = nn.BatchNorm2d(16).to("webgpu"), torch.nn.BatchNorm2d(16)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(w))
        ref.bias.copy_(torch.tensor(b))
        ref.running_mean.fill_(0.5)
        ref.running_var.fill_(2.0)
    ours.load_state_dict({k: wg.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    ours.train(training)
    ref.train(training)
    ox = wg.tensor(x, device="webgpu", requires_grad=True)
    oy = ours(ox)
    oy.backward(wg.tensor(g, device="webgpu"))
    rx = torch.tensor(x.astype(np.float32), requires_grad=True)
    ry = ref(rx)
    ry.backward(torch.tensor(g.astype(np.float32)))
    assert oy.dtype is wg.float16 and ox.grad.dtype is wg.float16
    assert ours.weight.grad.dtype is wg.float32 and ours.running_mean.dtype is wg.float32
    _half_ulp_close(_np(oy), ry.detach().half().numpy(), 1e-3)
    _half_ulp_close(_np(ox.grad), rx.grad.half().numpy(), 1e-3)
    for a, e in ((ours.weight.grad, ref.weight.grad), (ours.bias.grad, ref.bias.grad),
                 (ours.running_mean, ref.running_mean), (ours.running_var, ref.running_var)):
        np.testing.assert_allclose(_np(a), e.detach().numpy(), rtol=1e-4, atol=1e-4)


def test_batch_norm_under_autocast_keeps_half(kernels_run):
    # conv -> BN -> ReLU under WebGPU autocast: half from the convolution to the ReLU, no float32 copies
    m = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()).to("webgpu")
    x = wg.randn(2, 8, 8, 8, device="webgpu")
    with wg.autocast(device_type="webgpu", dtype=wg.float16):
        y = m(x)
    assert y.dtype is wg.float16
    del kernels_run[:]
    y.float().sum().backward()
    casts_up = [k for k in kernels_run if k in ("f_from_h", "f_from_h4")]  # the sum's upcast, the weight grads
    assert "unary_backward_h8" in kernels_run and casts_up
    assert m[1].weight.grad.dtype is wg.float32 and m[1].weight.grad.abs().sum().item() > 0


UNARY = ["relu", "neg", "abs", "sigmoid", "tanh", "exp"]


@pytest.mark.parametrize("op", UNARY)
def test_unary_half_and_derivative(kernels_run, op):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((4, 8, 5, 4)) * 2).astype(np.float16)
    g = rng.standard_normal(x.shape).astype(np.float16)
    ox = wg.tensor(x, device="webgpu", requires_grad=True)
    oy = getattr(wg, op)(ox)
    oy.backward(wg.tensor(g, device="webgpu"))
    rx = torch.tensor(x.astype(np.float32), requires_grad=True)
    ry = getattr(torch, op)(rx)
    ry.backward(torch.tensor(g.astype(np.float32)))
    assert oy.dtype is wg.float16 and ox.grad.dtype is wg.float16
    exact = op in ("relu", "neg", "abs")
    want_y, want_g = ry.detach().half().numpy(), rx.grad.half().numpy()
    if exact:
        np.testing.assert_array_equal(_np(oy), want_y)
        np.testing.assert_array_equal(_np(ox.grad), want_g)
    else:
        _half_ulp_close(_np(oy), want_y)
        # the derivative from the half output y (PyTorch uses it too): within two half ulps
        _half_ulp_close(_np(ox.grad), want_g, 2.0**-9 * np.abs(want_g).max())
    assert "unary_h8" in kernels_run


def test_binary_half_in_place_overflow_and_routing(kernels_run):
    rng = np.random.default_rng(8)
    a, b = (rng.standard_normal((3, 8, 8)).astype(np.float16) for _ in range(2))
    oa, ob = wg.tensor(a, device="webgpu"), wg.tensor(b, device="webgpu")
    ta, tb = torch.tensor(a.astype(np.float32)), torch.tensor(b.astype(np.float32))
    for ours, ref in ((oa + ob, ta + tb), (oa * ob, ta * tb), (oa - ob, ta - tb), (oa / ob, ta / tb)):
        np.testing.assert_array_equal(_np(ours), ref.half().numpy())
    assert kernels_run.count("binary_h8") == 4
    # past float16's range: inf, as a float32 -> float16 conversion gives (what GradScaler looks for)
    big = wg.full((16,), 60000.0, device="webgpu", dtype=wg.float16)
    assert np.isinf(_np(big + big)).all() and (_np(-big - big) == -np.inf).all()
    assert (_np(big * 0.5) == np.float16(30000)).all()
    # in place: the operand read through the output binding
    c = oa.clone()
    c.mul_(ob)
    np.testing.assert_array_equal(_np(c), (ta * tb).half().numpy())
    # odd sizes and broadcasts take the float32 route, with the same results
    del kernels_run[:]
    odd = wg.tensor(a[:, :7, :5].copy(), device="webgpu")  # 105 elements
    np.testing.assert_array_equal(_np(odd + odd), (ta[:, :7, :5] * 2).half().numpy())
    np.testing.assert_array_equal(_np(oa + ob[0]), (ta + tb[0]).half().numpy())
    assert "binary_h8" not in kernels_run and "f_from_h" in kernels_run  # (105 elements: the strided cast)


@pytest.mark.parametrize("software", [False, True], ids=["gpu-variant", "rows-variant"])
def test_cross_entropy_reads_half_logits(monkeypatch, kernels_run, software):
    # autocast's loss over a vocabulary-wide row: cross_entropy.wgsl's float16 forms read the half logits and
    # write the half gradient; no float32 copy of them is made
    rt = wg.device("webgpu").backend.runtime
    monkeypatch.setattr(rt, "software", software)
    monkeypatch.setattr(rt, "memo", {})  # launches made before would bypass kernels_run
    x = (wg.randn(6, 30011, device="webgpu") * 3).half().requires_grad_()
    target = wg.randint(0, 30011, (6,), device="webgpu")
    with wg.autocast(device_type="webgpu"):
        loss = nn.functional.cross_entropy(x, target)
    loss.backward()
    entries = [k for k in kernels_run if "cross_entropy" in k]
    assert "cross_entropy_backward_lse" in entries and any(k.startswith("cross_entropy_online") for k in entries)
    assert not [k for k in kernels_run if k in ("f_from_h", "f_from_h4")], kernels_run
    ref = torch.nn.functional.cross_entropy(torch.from_numpy(_np(x)).float().requires_grad_(),
                                            torch.from_numpy(_np(target)))
    assert abs(loss.item() - ref.item()) < 1e-5 * abs(ref.item())
    assert x.grad.dtype is wg.float16
