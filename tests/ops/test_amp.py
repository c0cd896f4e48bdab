"""Mixed precision: float16 tensors and kernels, webgrad.autocast and webgrad.amp.GradScaler, against PyTorch.

Tolerances (float16 has an 11-bit significand: one unit in the last place is 2**-10 relative):
- casts are exact: the same bits as torch's float32 -> float16 conversion (round to nearest even, inf
  beyond 65504, NaN kept);
- matmul / linear / conv2d in float16 accumulate in float32 and round once, as torch's CPU half kernels and
  cuBLAS: they match torch's float16 result within one half ulp of the result plus the float32 summation
  order's effect, |ours - torch| <= 2**-10 |torch| + 2**-12 * sqrt(K) * max|term|; most elements are equal;
- ops that WebGPU runs through float32 (elementwise, reductions, softmax) match the CPU backend's float16
  result (computed in float64, rounded once) within one half ulp.
"""

import io
import math
import warnings

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn as nn
import webgrad.nn.functional as F
from helpers import DEVICES, webgpu_available
from webgrad._backends import kernels  # noqa: E402

needs_webgpu = pytest.mark.skipif(not webgpu_available(), reason="needs a WebGPU adapter")


def _has_f16():
    return webgpu_available() and wg.device("webgpu").backend.runtime.has_f16


# the devices float16 runs on here: the CPU, and WebGPU where the adapter has shader-f16 (lavapipe has it)
F16_DEVICES = ["cpu"] + (["webgpu"] if _has_f16() else [])


@pytest.fixture(params=F16_DEVICES)
def f16_device(request):
    return request.param


def _np(t):
    return t.detach().to("cpu").numpy()


def _close_half(ours, ref, k=1, scale=None):
    """ours vs ref (float16 arrays): within one half ulp plus float32 summation-order noise over k terms."""
    ours, ref = ours.astype(np.float64), ref.astype(np.float64)
    scale = np.abs(ref).max() if scale is None else scale
    tol = 2.0**-10 * np.abs(ref) + 2.0**-12 * math.sqrt(k) * scale + 1e-7
    bad = np.abs(ours - ref) > tol
    assert not bad.any(), f"{bad.sum()} of {bad.size} elements differ; worst {np.abs(ours - ref).max()}"


# ===================================================================== the dtype


def test_names_reprs_and_conversions(f16_device):
    assert wg.half is wg.float16 and repr(wg.float16) == "webgrad.float16"
    assert wg.dtypes.to_dtype(torch.float16) is wg.float16 and wg.dtypes.to_dtype(torch.half) is wg.float16
    assert wg.dtypes.to_dtype(np.dtype(np.float16)) is wg.float16 and wg.dtypes.to_dtype("half") is wg.float16
    x = wg.tensor([[1.0, -2.5], [3.0, 0.1]], device=f16_device)
    h = x.half()
    assert h.dtype is wg.float16 and h.element_size() == 2 and h.is_floating_point()
    assert x.to(wg.float16).dtype is wg.float16 and x.to(torch.float16).dtype is wg.float16
    assert x.to(dtype=wg.half).float().dtype is wg.float32
    ref = torch.tensor([[1.0, -2.5], [3.0, 0.1]]).half()
    assert repr(h).replace(", device='webgpu'", "").replace("webgrad.", "torch.") == repr(ref)
    assert h.tolist() == ref.tolist() and h[1, 1].item() == ref[1, 1].item() == 0.0999755859375
    assert h.numpy().dtype == np.float16
    assert wg.tensor(np.array([1.5, 2.0], np.float16), device=f16_device).dtype is wg.float16
    assert (h + x).dtype is wg.float32 and (h * 2).dtype is wg.float16 and (h + 1).dtype is wg.float16
    assert (h + wg.tensor([1, 2], device=f16_device)).dtype is wg.float16  # int32 promotes to the float


def test_cast_is_bit_exact_with_torch(f16_device):
    specials = [0.0, -0.0, 1.0, 65504.0, 65519.9, 65520.0, -70000.0, 1e9, float("inf"), float("-inf"), float("nan"),
                2.0**-14, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 0.1, 1 / 3, -2.0**-10, 12345.678]
    rng = np.random.default_rng(0)
    values = np.concatenate([np.array(specials, np.float32), rng.standard_normal(1000).astype(np.float32) * 100])
    ours = wg.tensor(values, device=f16_device).half()
    ref = torch.from_numpy(values).half()
    assert np.array_equal(_np(ours).view(np.uint16)[:-1000][[i for i, v in enumerate(specials) if v == v]],
                          ref.numpy().view(np.uint16)[:-1000][[i for i, v in enumerate(specials) if v == v]])
    assert np.isnan(_np(ours)[10])
    assert np.array_equal(_np(ours)[-1000:], ref.numpy()[-1000:])
    back = ours.float()
    assert back.dtype is wg.float32 and np.array_equal(_np(back)[-1000:], ref.float().numpy()[-1000:])


def test_strided_views_casts_and_copies(f16_device):
    a = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5) / 7
    x = wg.tensor(a, device=f16_device).half()
    ref = torch.from_numpy(a).half()
    assert np.array_equal(_np(x.permute(2, 0, 1).contiguous()), ref.permute(2, 0, 1).contiguous().numpy())
    assert np.array_equal(_np(x[:, 1:, ::2]), ref[:, 1:, ::2].numpy())
    assert np.array_equal(_np(x[1, 2]), ref[1, 2].numpy())  # an odd offset: half a word
    assert np.array_equal(_np(x.transpose(0, 2).float()), ref.transpose(0, 2).float().numpy())
    y = wg.zeros(5, 3, dtype=wg.float16, device=f16_device)
    y.copy_(x[0].t())
    assert np.array_equal(_np(y), ref[0].t().numpy())
    assert wg.ones(3, dtype=wg.float16, device=f16_device).tolist() == [1.0, 1.0, 1.0]
    assert x.int().tolist() == ref.int().tolist()
    assert wg.tensor([True, False], device=f16_device).half().tolist() == [1.0, 0.0]


@pytest.mark.parametrize("n", [1, 4, 7, 1032])
@pytest.mark.parametrize("start", [0, 4, 5])
def test_contiguous_casts_at_offsets(f16_device, n, start):
    """The vec4 casts (both contiguous, offsets and size multiples of 4) and the strided ones (any other):
    bit for bit with torch, nothing written outside the window."""
    rng = np.random.default_rng(n + start)
    a = (rng.standard_normal(start + n + 3) * 300).astype(np.float32)
    a[start] = 1e6  # rounds to inf in float16
    f = wg.tensor(a, device=f16_device)
    h = f.half()
    ref = torch.from_numpy(a).half()
    assert np.array_equal(_np(h).view(np.uint16), ref.numpy().view(np.uint16))
    out = wg.full((start + n + 3,), 7.0, dtype=wg.float16, device=f16_device)
    out[start:start + n].copy_(f[start:start + n])       # f32 -> f16 into a window of a half storage
    want = np.full(start + n + 3, 7.0, np.float16)
    want[start:start + n] = ref.numpy()[start:start + n]
    assert np.array_equal(_np(out).view(np.uint16), want.view(np.uint16))
    back = wg.full((start + n + 3,), 7.0, device=f16_device)
    back[start:start + n].copy_(h[start:start + n])      # f16 -> f32
    want32 = np.full(start + n + 3, 7.0, np.float32)
    want32[start:start + n] = ref.float().numpy()[start:start + n]
    assert np.array_equal(_np(back), want32)
    out.fill_(7.0)
    out[start:start + n].copy_(h[start:start + n])       # f16 -> f16
    assert np.array_equal(_np(out).view(np.uint16), want.view(np.uint16))


# ===================================================================== kernels


@pytest.fixture(params=["float32 kernel", "matmul_h"])
def half_matmul(request, monkeypatch):
    """Both WebGPU paths of a half product (f16.NATIVE_MATMUL); the CPU has one."""
    from webgrad._backends.webgpu import f16
    monkeypatch.setattr(f16, "NATIVE_MATMUL", request.param == "matmul_h")
    return request.param


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 33, 65), (64, 64, 64), (65, 130, 3), (128, 300, 70)])
def test_matmul_matches_torch_half(f16_device, half_matmul, m, k, n):
    rng = np.random.default_rng(m * k * n)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    ta, tb = torch.from_numpy(a).half(), torch.from_numpy(b).half()
    ha, hb = wg.tensor(a, device=f16_device).half(), wg.tensor(b, device=f16_device).half()
    for ours, ref in (((ha @ hb), ta @ tb), (ha.t().contiguous().t() @ hb, ta @ tb),
                      (ha @ hb.t().contiguous().t(), ta @ tb), (hb.t() @ ha.t(), tb.t() @ ta.t())):
        assert ours.dtype is wg.float16
        _close_half(_np(ours), ref.numpy(), k)


def test_batched_matmul_and_linear_match_torch(f16_device, half_matmul):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 17, 40)).astype(np.float32), rng.standard_normal((40, 9)).astype(np.float32)
    c = rng.standard_normal((3, 40, 9)).astype(np.float32)
    w, bias = rng.standard_normal((9, 40)).astype(np.float32), rng.standard_normal(9).astype(np.float32)
    T = lambda v: torch.from_numpy(v).half()  # noqa: E731
    W = lambda v: wg.tensor(v, device=f16_device).half()  # noqa: E731
    _close_half(_np(W(a) @ W(b)), (T(a) @ T(b)).numpy(), 40)
    _close_half(_np(wg.bmm(W(a), W(c))), torch.bmm(T(a), T(c)).numpy(), 40)
    _close_half(_np(F.linear(W(a), W(w), W(bias))), torch.nn.functional.linear(T(a), T(w), T(bias)).numpy(), 40)


def test_matmul_backward_in_half(f16_device, half_matmul):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((20, 30)).astype(np.float32), rng.standard_normal((30, 10)).astype(np.float32)
    x = wg.tensor(a, device=f16_device).half().requires_grad_()
    y = wg.tensor(b, device=f16_device).half().requires_grad_()
    tx, ty = torch.from_numpy(a).half().requires_grad_(), torch.from_numpy(b).half().requires_grad_()
    (x @ y).sum().backward()
    (tx @ ty).sum().backward()
    assert x.grad.dtype is wg.float16 and y.grad.dtype is wg.float16
    _close_half(_np(x.grad), tx.grad.numpy(), 10)
    _close_half(_np(y.grad), ty.grad.numpy(), 20)


def test_conv2d_in_half_accumulates_in_float32(f16_device):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    xh, wh, bh = (torch.from_numpy(v).half() for v in (x, w, b))
    # the reference: float16 operands, float32 products and sums, one rounding (what cuDNN's half conv does)
    ref = torch.nn.functional.conv2d(xh.float(), wh.float(), bh.float(), stride=2, padding=1).half()
    ours = F.conv2d(*(wg.tensor(v, device=f16_device).half() for v in (x, w, b)), stride=2, padding=1)
    assert ours.dtype is wg.float16
    _close_half(_np(ours), ref.numpy(), 27)


def test_ops_through_float32_round_once(f16_device):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((6, 50)).astype(np.float32)
    h = wg.tensor(a, device=f16_device).half()
    c = wg.tensor(a).half()  # the CPU reference: float64 inside, rounded once into float16
    for name, fn in (("relu", F.relu), ("exp", wg.exp), ("mul", lambda t: t * t), ("sum", lambda t: t.sum(1)),
                     ("mean", lambda t: t.mean()), ("softmax", lambda t: t.softmax(-1)), ("max", lambda t: t.amax(0))):
        ours, ref = fn(h), fn(c)
        assert ours.dtype is wg.float16, name
        _close_half(_np(ours), _np(ref), 1, scale=0.0)


# ===================================================================== autocast


def _autocast_dtypes(lib, F_, ctx, T):
    """The dtype each op gives inside `ctx` on float32 inputs (lib: torch or webgrad)."""
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((4, 3, 8, 8)).astype(np.float32), rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    lw = rng.standard_normal((6, 320)).astype(np.float32)
    out = {}
    with ctx:
        c = F_.conv2d(T(x), T(w, True), padding=1)
        flat = F_.relu(c).reshape(4, -1)
        lin = F_.linear(flat, T(lw, True))
        out.update(conv2d=c, relu=F_.relu(c), linear=lin, matmul=flat @ T(lw).t(), bmm=lib.bmm(c.reshape(4, 5, 64),
                   c.reshape(4, 64, 5)), softmax=F_.softmax(lin, -1), log_softmax=F_.log_softmax(lin, -1),
                   cross_entropy=F_.cross_entropy(lin, T(np.array([1, 2, 0, 5]))),
                   mse_loss=F_.mse_loss(lin, T(np.zeros((4, 6), np.float32))), sum=lin.sum(),
                   add_float32=lin + T(np.ones(6, np.float32)), layer_norm=F_.layer_norm(lin, (6,)),
                   group_norm=F_.group_norm(c, 5), logsumexp=lib.logsumexp(lin, 1), prod=lin.prod())
    return {k: str(v.dtype).rsplit(".", 1)[-1] for k, v in out.items()}


def test_autocast_cpu_op_dtypes_match_torch_autocast():
    def wt(a, grad=False):
        return wg.tensor(a.astype(np.int32) if a.dtype.kind == "i" else a, requires_grad=grad)

    def tt(a, grad=False):
        return torch.tensor(a, requires_grad=grad)
    ours = _autocast_dtypes(wg, F, wg.autocast("cpu", dtype=wg.float16), wt)
    ref = _autocast_dtypes(torch, torch.nn.functional, torch.autocast("cpu", dtype=torch.float16), tt)
    assert ours == ref


@pytest.mark.skipif(not _has_f16(), reason="needs a WebGPU adapter with shader-f16")
def test_autocast_webgpu_follows_cudas_lists():
    def wt(a, grad=False):
        return wg.tensor(a.astype(np.int32) if a.dtype.kind == "i" else a, requires_grad=grad, device="webgpu")
    ours = _autocast_dtypes(wg, F, wg.autocast(device_type="webgpu", dtype=wg.float16), wt)
    # torch.autocast("cuda") on these ops (torch/csrc/autocast_mode.cpp: lower_precision_fp and fp32 lists)
    half = {"conv2d", "relu", "linear", "matmul", "bmm"}
    assert ours == {k: "float16" if k in half else "float32" for k in ours}


def test_autocast_gradients_reach_float32_parameters(f16_device):
    wg.manual_seed(0)
    lin = nn.Linear(16, 8).to(f16_device)
    x = wg.randn(5, 16, device=f16_device)
    with wg.autocast(device_type=f16_device, dtype=wg.float16):
        y = lin(x)
        loss = y.float().pow(2).sum()
    assert y.dtype is wg.float16 and lin.weight.dtype is wg.float32
    loss.backward()
    assert lin.weight.grad.dtype is wg.float32 and lin.bias.grad.dtype is wg.float32
    # torch, the same computation by hand in float16 with float32 accumulation
    tw = torch.from_numpy(_np(lin.weight)).requires_grad_()
    tb = torch.from_numpy(_np(lin.bias)).requires_grad_()
    ty = torch.nn.functional.linear(torch.from_numpy(_np(x)).half(), tw.half(), tb.half())
    ty.float().pow(2).sum().backward()
    np.testing.assert_allclose(_np(lin.weight.grad), tw.grad.numpy(), rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(_np(lin.bias.grad), tb.grad.numpy(), rtol=2e-2, atol=2e-2)


def test_autocast_context_decorator_nesting_and_cache():
    w = wg.randn(4, 4, requires_grad=True)
    x = wg.randn(2, 4)

    @wg.autocast("cpu", dtype=wg.float16)
    def f():
        return x @ w, x @ w, x @ w

    # the first cast of w is held weakly and dies with its op; cast again, w is held for the rest of the region
    a, b, c = f()
    assert a.dtype is wg.float16 and b.grad_fn.inputs[1].grad_fn is c.grad_fn.inputs[1].grad_fn
    assert not wg.amp.is_autocast_enabled("cpu")
    with wg.amp.autocast("cpu", dtype=wg.float16):
        assert wg.amp.is_autocast_enabled("cpu") and wg.amp.get_autocast_dtype("cpu") is wg.float16
        with wg.autocast("cpu", enabled=False):
            assert (x @ w).dtype is wg.float32
        assert (x @ w).dtype is wg.float16
    with wg.autocast("cpu", dtype=wg.float16):  # two forward/backward passes in one region: the second casts w again
        (x @ w).sum().backward()
        (x @ w).sum().backward()
    assert w.grad.dtype is wg.float32
    np.testing.assert_allclose(_np(w.grad), 2 * np.outer(_np(x).astype(np.float16).sum(0), np.ones(4)), rtol=1e-3)
    with pytest.warns(UserWarning, match="Disabling autocast"):
        ctx = wg.autocast("cpu", dtype=torch.float64)  # (bfloat16 and float16 are the CPU's)
    with ctx:
        assert (x @ w).dtype is wg.float32


# ===================================================================== GradScaler


def _scaler_run(lib, Scaler, device, grads, **kwargs):
    kwargs["device"] = device
    """Steps of SGD (momentum) through a GradScaler, each with a given gradient (inf/NaN in some):
    loss = sum(p * g) so that p.grad is exactly g * scale. Returns per-step (scale, params, tracker)."""
    p = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
    if lib is wg:
        p = wg.tensor([1.0, -2.0, 3.0], device=device, requires_grad=True)
    opt = lib.optim.SGD([p], lr=0.1, momentum=0.9)
    scaler = Scaler(**kwargs)
    out = []
    for g in grads:
        opt.zero_grad()
        loss = (p * lib.tensor(g, device=device) if lib is wg else p * lib.tensor(g)).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        out.append((scaler.get_scale(), p.detach().to("cpu").tolist() if lib is wg else p.detach().tolist(),
                    scaler._get_growth_tracker()))
    return out, scaler


@pytest.mark.parametrize("device", DEVICES)
def test_grad_scaler_matches_torch(device):
    inf, nan = float("inf"), float("nan")
    grads = [[1.0, 2.0, 3.0], [0.5, inf, 1.0], [1.0, 1.0, 1.0], [nan, 0.0, 0.0], [2.0, -1.0, 0.5],
             [1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [-inf, 1.0, 1.0], [3.0, 3.0, 3.0], [1.0, 2.0, 3.0]]
    kwargs = dict(init_scale=2.0**10, growth_interval=3, growth_factor=2.0, backoff_factor=0.5)
    ours, scaler = _scaler_run(wg, wg.amp.GradScaler, device, grads, **kwargs)
    ref, tscaler = _scaler_run(torch, torch.amp.GradScaler, "cpu", grads, **kwargs)
    for step, ((s, p, t), (rs, rp, rt)) in enumerate(zip(ours, ref)):
        assert s == rs and t == rt, step
        np.testing.assert_allclose(p, rp, rtol=1e-6, err_msg=f"step {step}")
    assert scaler.state_dict() == tscaler.state_dict()


def test_grad_scaler_defaults_state_dict_and_errors():
    s, t = wg.amp.GradScaler("cpu"), torch.amp.GradScaler("cpu")
    assert (s.get_scale(), s.get_growth_factor(), s.get_backoff_factor(), s.get_growth_interval()) == \
           (t.get_scale(), t.get_growth_factor(), t.get_backoff_factor(), t.get_growth_interval()) == \
           (65536.0, 2.0, 0.5, 2000)
    t.scale(torch.ones(()))
    s.scale(wg.ones(()))
    assert s.state_dict() == t.state_dict()
    s2 = wg.amp.GradScaler("cpu")
    s2.load_state_dict({"scale": 8.0, "growth_factor": 4.0, "backoff_factor": 0.25, "growth_interval": 7,
                        "_growth_tracker": 3})
    assert s2.get_scale() == 8.0 and s2.state_dict()["_growth_tracker"] == 3
    assert wg.amp.GradScaler(enabled=False).state_dict() == {} and wg.amp.GradScaler(enabled=False).get_scale() == 1.0
    with pytest.raises(RuntimeError, match="source state dict is empty"):
        s2.load_state_dict({})
    p = wg.ones(2, requires_grad=True)
    opt = wg.optim.SGD([p], lr=0.1)
    s.scale((p * 2).sum()).backward()
    s.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called on this optimizer"):
        s.unscale_(opt)
    s.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        s.step(opt)
    assert p.grad.tolist() == [2.0, 2.0]  # unscaled in place
    s.update()
    assert wg.as_torch is not None and wg.amp.GradScaler is wg.amp.grad_scaler.GradScaler


# ===================================================================== training and replay


def _blobs(n, seed, device):
    """4 classes of 8x8 images: each class lights one quadrant, on noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, n)
    x = rng.standard_normal((n, 1, 8, 8)).astype(np.float32) * 0.8
    for i, c in enumerate(y):
        x[i, 0, (c // 2) * 4:(c // 2) * 4 + 4, (c % 2) * 4:(c % 2) * 4 + 4] += 1.0
    return wg.tensor(x, device=device), wg.tensor(y.astype(np.int32), device=device)


def _cnn():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 16, 4))


def _amp_step(model, opt, scaler, device, amp=True):
    """step(x, y) -> loss: PyTorch's autocast + GradScaler training step."""
    def step(x, y):
        with wg.autocast(device_type=device, dtype=wg.float16, enabled=amp):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    return step


def _train_cnn(device, amp, steps=40, replay=False):
    wg.manual_seed(0)
    model = _cnn().to(device)
    opt = wg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = wg.amp.GradScaler(device, enabled=amp)
    step = _amp_step(model, opt, scaler, device, amp)
    run = wg.replayable(step) if replay else step
    x, y = _blobs(512, 0, device)
    for i in range(steps):
        lo = (i * 64) % 512
        run(x[lo:lo + 64].contiguous(), y[lo:lo + 64].contiguous())
    tx, ty = _blobs(256, 1, device)
    model.eval()
    with wg.no_grad(), wg.autocast(device_type=device, dtype=wg.float16, enabled=amp):
        acc = (model(tx).argmax(1) == ty).float().mean().item()
    return acc, model, scaler, run


@pytest.mark.skipif(not _has_f16(), reason="needs a WebGPU adapter with shader-f16")
def test_cnn_trains_under_autocast_as_well_as_float32():
    acc32, *_ = _train_cnn("webgpu", amp=False)
    acc16, model, scaler, _ = _train_cnn("webgpu", amp=True)
    assert acc32 > 0.9 and abs(acc16 - acc32) < 0.04, (acc16, acc32)
    assert all(p.dtype is wg.float32 for p in model.parameters()) and scaler.get_scale() == 65536.0


def _autocast_training(make_optimizer, replay, **scaler_kwargs):
    """(model, optimizer, scaler, step): a small MLP's autocast + GradScaler training step on WebGPU, replayable
    or eager."""
    wg.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3)).to("webgpu")
    opt = make_optimizer(model.parameters())
    scaler = wg.amp.GradScaler("webgpu", **scaler_kwargs)
    step = _amp_step(model, opt, scaler, "webgpu")
    return model, opt, scaler, wg.replayable(step) if replay else step


@pytest.mark.skipif(not _has_f16(), reason="needs a WebGPU adapter with shader-f16")
@pytest.mark.parametrize("name", ["sgd", "rmsprop", "adam", "adamw", "adagrad"])
def test_autocast_step_with_grad_scaler_replays_as_eager(name):
    """A recorded autocast + GradScaler step replays with no read-back, skipping (on the device) a step
    whose gradients overflow, and ends where eager training ends. SGD, RMSprop and Adam skip through their
    kernels' flag (SKIP_IF: no copies, no restores), Adam's kernel counting the skipped step so that its bias
    corrections and state_dict()'s "step" leave it out, as an eager step that GradScaler skips does;
    Adagrad, composed of tensor ops, is undone from copies."""
    optimizers = {"sgd": lambda ps: wg.optim.SGD(ps, lr=0.1, momentum=0.9),
                  "rmsprop": lambda ps: wg.optim.RMSprop(ps, lr=0.01, momentum=0.5),
                  "adam": lambda ps: wg.optim.Adam(ps, lr=0.01, amsgrad=True),
                  "adamw": lambda ps: wg.optim.AdamW(ps, lr=0.01, weight_decay=0.1),
                  "adagrad": lambda ps: wg.optim.Adagrad(ps, lr=0.1)}

    def train(replay):
        model, opt, scaler, run = _autocast_training(optimizers[name], replay, init_scale=2.0**12, growth_interval=2)
        gen = np.random.default_rng(0)
        stats = wg.device("webgpu").backend.runtime.stats
        for i in range(8):
            if i == 2:
                reads = stats["reads"]
            x = gen.standard_normal((10, 12)).astype(np.float32)
            if i == 5:
                x[3, 4] = 1e6  # float16 overflows: inf in the forward, NaN gradients: the step is skipped
            run(wg.tensor(x, device="webgpu"), wg.tensor(gen.integers(0, 3, 10).astype(np.int32), device="webgpu"))
        reads = stats["reads"] - reads  # read-backs of steps 2..7: one per eager step, none replayed
        return [_np(p) for p in model.parameters()], scaler.get_scale(), run, reads, opt

    eager, eager_scale, _, eager_reads, eager_opt = train(False)
    replayed, replay_scale, run, replay_reads, opt = train(True)
    assert eager_reads == 6 and replay_reads == 0
    assert run.replays == 6 and eager_scale == replay_scale == 2.0**14  # grew x2 three times, backed off once
    dispatches = wg.device("webgpu").backend.runtime.describe(run.graph.records)
    entries = [d.kernel.entry for d in dispatches if d.kernel]
    assert entries.count("where_select") == 3  # update()'s scale and tracker
    if name == "adagrad":  # the recorded step undoes itself with amp.wgsl's restore_if, one per tensor
        assert not opt.skips_on_device() and entries.count("restore_if") >= 4
    else:
        updates = [d for d in dispatches if d.kernel and d.kernel.entry.startswith(name.removesuffix("w"))]
        assert opt.skips_on_device() and "restore_if" not in entries
        assert len(updates) == 4 and all(dict(d.constants)["SKIP_IF"] for d in updates)
        copies = sum(r[0] == 1 for r in run.graph.records)
        assert copies < 4  # none to restore from (the copies taken before the step would be one per tensor: 8)
    for a, b in zip(eager, replayed):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    if name != "sgd":  # (SGD keeps no step count)
        steps = [[s["step"] for s in o.state_dict()["state"].values()] for o in (eager_opt, opt)]
        assert steps[0] == steps[1] == [7.0] * 4  # eight steps, the overflowing one skipped


@pytest.mark.skipif(not _has_f16(), reason="needs a WebGPU adapter with shader-f16")
@pytest.mark.parametrize("name,warns", [("Adamax", True), ("NAdam", True), ("Adagrad", False)])
def test_replayed_grad_scaler_warns_where_the_step_count_is_host_math(name, warns):
    """A composed optimizer whose step() computes from its step count on the host (Adamax's bias correction,
    NAdam's momentum schedule; Adagrad's only with lr_decay) cannot leave a step skipped on the device out of
    that math: GradScaler says so once, when the step is recorded."""
    _, _, _, run = _autocast_training(lambda ps: getattr(wg.optim, name)(ps), True)
    x, y = wg.randn(10, 12, device="webgpu"), wg.randint(0, 3, (10,), device="webgpu")
    run(x, y)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(3):
            run(x, y)
    messages = [str(w.message) for w in seen if "step count" in str(w.message)]
    assert run.replays == 2 and len(messages) == int(warns)
    assert not warns or f"still counts in {name}'s step count" in messages[0]


@needs_webgpu
@pytest.mark.parametrize("bad", [None, 0, 5, 6, 12])  # which gradient holds an inf / NaN (None: none)
def test_unscale_check_six_gradients_a_dispatch(bad):
    """amp.wgsl's unscale_check6 through backend.amp_unscale_check: thirteen gradients of many sizes (an
    empty one; two views of one storage, which must go to two dispatches), each multiplied by inv_scale
    exactly as NumPy's float32 product, nothing written outside the views, and the flag 1.0 exactly where a
    gradient held inf or NaN."""
    from webgrad._backends.webgpu import amp
    from webgrad._view import View
    backend = wg.device("webgpu").backend
    rt = backend.runtime
    rng = np.random.default_rng(7)
    sizes = [1, 255, 256, 257, 0, 1000, 3, 70001, 17, 4, 300, 2, 9]
    storages, views, datas = [], [], []
    for k, n in enumerate(sizes):
        data = rng.standard_normal(n + 9).astype(np.float32)
        if k == bad:
            data[3 + n // 2] = np.inf if k % 2 else np.nan
        if k == 6:  # a view into gradient 5's storage, after its view
            storage, offset = storages[5], 3 + sizes[5] + 1
            datas[5][offset:offset + n] = data[3:3 + n]
        else:
            storage, offset = backend.from_bytes(data.tobytes(), wg.float32), 3
            storages.append(storage)
            datas.append(data)
        views.append(View(storage, (n,), (1,), offset, wg.float32))
    datas.insert(6, None)
    for k, d in enumerate(datas):
        if d is not None and k != 5:
            backend.write(storages[k if k < 6 else k - 1], d.tobytes())
    backend.write(storages[5], datas[5].tobytes())
    inv = View(backend.from_bytes(np.array([9.0, 0.125], np.float32).tobytes(), wg.float32), (), (), 1, wg.float32)
    flag = View(backend.from_bytes(np.zeros(3, np.float32).tobytes(), wg.float32), (), (), 2, wg.float32)
    before = rt.stats["dispatches"]
    kernels.amp_unscale_check(backend, views, inv, flag)
    assert rt.stats["dispatches"] - before == 3  # 12 non-empty gradients, 6 a dispatch; 6 and 5 apart
    got_flag = np.frombuffer(backend.to_bytes(View(flag.storage, (3,), (1,), 0, wg.float32)), np.float32)
    assert got_flag.tolist() == [0.0, 0.0, 0.0 if bad is None else 1.0]
    for k, data in enumerate(datas):
        if data is None:
            continue
        storage = storages[k if k < 6 else k - 1]
        got = np.frombuffer(backend.to_bytes(View(storage, (len(data),), (1,), 0, wg.float32)), np.float32)
        want = data.copy()
        spans = [(3, sizes[k])] + ([(3 + sizes[5] + 1, sizes[6])] if k == 5 else [])
        for start, n in spans:
            want[start:start + n] = data[start:start + n] * np.float32(0.125)
        np.testing.assert_array_equal(got, want, err_msg=f"storage of gradient {k}")


@pytest.mark.skipif(not _has_f16(), reason="needs a WebGPU adapter with shader-f16")
def test_replayed_adam_after_skipped_first_steps_matches_eager():
    """A scale so large that the first steps overflow: GradScaler skips the eager warm-up step, so Adam has
    no state when the step is recorded; the recording makes it outside the graph (a replay must not zero the
    moments again), the skipped replays are counted on the device, and training ends where eager training
    ends, with the same step counts."""
    def train(replay):
        model, opt, scaler, run = _autocast_training(lambda ps: wg.optim.Adam(ps, lr=0.01), replay, init_scale=2.0**24)
        gen = np.random.default_rng(1)
        scales = []
        for _ in range(12):
            x = gen.standard_normal((10, 12)).astype(np.float32)
            run(wg.tensor(x, device="webgpu"), wg.tensor(gen.integers(0, 3, 10).astype(np.int32), device="webgpu"))
            scales.append(scaler.get_scale())
        steps = [s["step"] for s in opt.state_dict()["state"].values()]
        return [_np(p) for p in model.parameters()], scales, steps, run

    eager, eager_scales, eager_steps, _ = train(False)
    replayed, scales, steps, run = train(True)
    assert run.replays == 10 and scales == eager_scales and eager_scales[0] < 2.0**24
    assert 0 < eager_steps[0] < 12 and steps == eager_steps  # the skipped steps left out of both counts
    for a, b in zip(eager, replayed):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


# ===================================================================== without shader-f16 and files


@needs_webgpu
def test_clear_error_on_a_device_without_shader_f16(monkeypatch):
    """A real device opened without the feature (as SwiftShader's), not a mock of the kernel path."""
    from webgrad._backends.webgpu.backend import WebGPUBackend
    from webgrad._backends.webgpu.native import NativeBinding
    from webgrad._backends.webgpu.runtime import Runtime
    from webgrad import devices

    rt = Runtime(NativeBinding(without_features=("shader-f16",)))
    assert not rt.has_f16 and "shader-f16" not in rt.features
    backend = WebGPUBackend(rt)
    with pytest.raises(TypeError, match="needs the adapter feature 'shader-f16'"):
        backend.empty(4, wg.float16)
    monkeypatch.setitem(devices._backends, "webgpu", backend)
    x = wg.ones(3, device="webgpu")
    assert (x * 2).tolist() == [2.0, 2.0, 2.0]  # float32 unaffected
    with pytest.raises(TypeError, match="shader-f16"):
        x.half()
    with pytest.raises(TypeError, match="shader-f16"):
        with wg.autocast(device_type="webgpu"):
            pass
    with wg.autocast(device_type="webgpu", enabled=False):
        assert (x @ x).dtype is wg.float32


def test_safetensors_round_trip_float16(f16_device, tmp_path):
    import safetensors.torch
    h = wg.tensor([0.1, -65504.0, float("inf"), 3.0], device=f16_device).half()
    path = str(tmp_path / "h.safetensors")
    wg.save({"h": h, "f": wg.ones(2, device=f16_device)}, path)
    loaded = safetensors.torch.load_file(path)
    assert loaded["h"].dtype is torch.float16 and loaded["h"].tolist() == h.tolist()
    back = wg.load(path, device=f16_device)
    assert back["h"].dtype is wg.float16 and back["h"].tolist() == h.tolist()
    buf = io.BytesIO()
    wg.save({"h": h}, buf)
    assert wg.load(io.BytesIO(buf.getvalue()))["h"].tolist() == h.tolist()


def test_torch_names_under_as_torch():
    """A PyTorch AMP script's names, in a fresh interpreter (as_torch refuses where torch is imported)."""
    import os
    import subprocess
    import sys
    code = ("import webgrad; webgrad.as_torch(); import torch, torch.amp\n"
            "assert torch.float16 is torch.half is webgrad.float16 and torch.amp.GradScaler is webgrad.amp.GradScaler\n"
            "assert torch.autocast is torch.amp.autocast is webgrad.autocast\n"
            "print(torch.amp.GradScaler('cuda').get_scale())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "65536.0"


def test_batch_norm_modules_under_autocast_and_in_float16(f16_device):
    # The BatchNorm modules reach the fused kernels through F._batch_norm. Under CPU autocast it computes
    # in float32 and returns float32 (batch_norm is on webgrad's CPU fp32 list); under WebGPU autocast it
    # takes the convolution's half output and returns half, as torch.autocast("cuda") does (cuDNN's
    # batch norm: half activations, float32 statistics and parameters), and the ReLU stays in half. A
    # float16 input outside autocast is returned as float16, as PyTorch returns half for half.
    wg.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()).to(f16_device)
    x = wg.randn(4, 3, 8, 8, device=f16_device)
    with wg.autocast(device_type=f16_device, dtype=wg.float16):
        y = m(x)
    assert y.dtype is (wg.float16 if f16_device == "webgpu" else wg.float32)
    assert m[1].running_mean.dtype is wg.float32
    y.sum().backward()
    assert m[0].weight.grad.dtype is wg.float32 and m[0].weight.grad.abs().sum().item() > 0

    bn = nn.BatchNorm2d(8).to(f16_device)
    xh = wg.randn(4, 8, 5, 5, device=f16_device).half().requires_grad_()
    out = bn(xh)
    out.float().sum().backward()
    want = torch.nn.BatchNorm2d(8)(torch.tensor(xh.detach().float().tolist()).half().float())
    assert out.dtype is wg.float16 and xh.grad.dtype is wg.float16
    np.testing.assert_allclose(np.array(out.float().tolist()), want.detach().numpy(), atol=2e-3)


def test_a_cast_does_not_keep_its_input_alive(f16_device):
    """A cast's backward needs only the source dtype: autocast's float32 originals (a LayerNorm's output cast
    for the next Linear) must be freed once cast, not held until the backward pass beside their copies."""
    import gc
    import weakref

    w = wg.randn(8, 8, device=f16_device, requires_grad=True)
    with wg.autocast(device_type=f16_device, dtype=wg.float16):
        h = F.layer_norm(w * 2, (8,))  # float32 (fp32 list), made inside the region
        assert h.dtype is wg.float32
        source = weakref.ref(h._view.storage)
        y = F.linear(h, wg.ones(4, 8, device=f16_device))  # casts h to float16
    del h
    gc.collect()
    assert source() is None, "the cast kept its float32 input alive"
    y.float().sum().backward()
    assert w.grad.dtype is wg.float32 and w.grad.shape == (8, 8)


def test_autocast_casts_a_weight_used_at_every_step_at_most_twice(monkeypatch):
    """An RNN-style loop uses one weight at every step: its first cast is held weakly and dies, the second is
    held for the rest of the region, so five uses make two casts, and the gradient is the same."""
    from webgrad.ops import autocast_policy

    real_cast, made = autocast_policy.cast, []
    monkeypatch.setattr(autocast_policy, "cast", lambda t, dtype: made.append(t) or real_cast(t, dtype))
    w = wg.randn(4, 4, requires_grad=True)
    x = wg.randn(2, 4)
    grads = []
    for cache_enabled in (True, False):
        h, made[:] = x, []
        with wg.autocast("cpu", dtype=wg.float16, cache_enabled=cache_enabled):
            for _ in range(5):
                h = (h @ w).tanh()
        assert sum(t is w for t in made) == (2 if cache_enabled else 5)  # in the forward
        h.float().sum().backward()
        grads.append(_np(w.grad))
        w.grad = None
    # (a cast shared by several uses sums their gradients in float16 before the float32 parameter, as PyTorch's)
    np.testing.assert_allclose(*grads, rtol=4e-3, atol=1e-4)


def _autocast_layers_step(device, hold_casts, monkeypatch):
    """Linear, conv2d and matmul layers under autocast, backward after the region: the parameters' gradients,
    weak references to the float16 casts of parameters the region made (held to the backward when hold_casts),
    whether they were all gone before the region ended, and the float16 tensors the graph saved."""
    import gc
    import weakref
    from webgrad import _autograd
    from webgrad.ops import autocast_policy

    held, refs = [], []

    def recording_cast(t, dtype):
        out = real_cast(t, dtype)
        if t.requires_grad:  # a parameter's cast (the input's is not cached)
            refs.append(weakref.ref(out))
            if hold_casts:
                held.append(out)
        return out

    real_cast = autocast_policy.cast
    wg.manual_seed(0)
    conv, lin = nn.Conv2d(3, 8, 3, padding=1).to(device), nn.Linear(8 * 6 * 6, 5).to(device)
    w = wg.randn(5, 4, device=device, requires_grad=True)
    x = wg.randn(2, 3, 6, 6, device=device)
    with monkeypatch.context() as patch:
        patch.setattr(autocast_policy, "cast", recording_cast)
        with wg.autocast(device_type=device, dtype=wg.float16):
            y = lin(F.relu(conv(x)).flatten(1)) @ w
            gc.collect()
            gone_in_region = all(r() is None for r in refs)
    assert y.dtype is wg.float16 and len(refs) == 5  # conv's weight and bias, lin's, w
    gc.collect()
    saved, seen, nodes = [], set(), [y.grad_fn]
    while nodes:
        node = nodes.pop()
        if node is not None and id(node) not in seen:
            seen.add(id(node))
            _autograd._saved_tensors(node.backward_fn, saved, set())
            nodes.extend(e.grad_fn for e in node.inputs if isinstance(e, _autograd.Edge))
    y.float().pow(2).sum().backward()
    del held
    return [_np(p.grad) for p in (conv.weight, conv.bias, lin.weight, lin.bias, w)], refs, gone_in_region, saved


def test_autocast_backward_casts_parameters_again(f16_device, monkeypatch):
    """A layer's backward keeps the float32 parameter, not autocast's float16 cast of it: a cast used once dies
    with its op, inside the region (PyTorch's ops save them until their backward, beside the parameters, and its
    cache holds them to the region's end), and the backward casts the parameter again, so the gradients are the
    same bits as with the casts kept."""
    kept, _, _, _ = _autocast_layers_step(f16_device, True, monkeypatch)
    grads, refs, gone_in_region, saved = _autocast_layers_step(f16_device, False, monkeypatch)
    assert gone_in_region, "a float16 cast of a parameter used by one op outlived its op"
    assert all(r() is None for r in refs)
    weight_shapes = {(8, 3, 3, 3), (5, 8 * 6 * 6), (5, 4)}
    assert not [s for s in saved if s.dtype is wg.float16 and tuple(s.shape) in weight_shapes]
    for a, b in zip(grads, kept):
        assert a.dtype == np.float32
        np.testing.assert_array_equal(a, b)


def test_parameter_written_between_autocast_forward_and_backward_raises(f16_device):
    """The backward casts the parameter again, so a parameter written in place after the forward cannot give the
    values the forward used: that raises, naming the in-place write, instead of a gradient of other weights."""
    lin = nn.Linear(4, 3).to(f16_device)
    x = wg.randn(2, 4, device=f16_device, requires_grad=True)
    with wg.autocast(device_type=f16_device, dtype=wg.float16):
        y = lin(x)
    with wg.no_grad():
        lin.weight.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.float().sum().backward()


@pytest.mark.parametrize("rows,cols", [(8, 10), (64, 2050), (3, 50257)])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_autocast_cross_entropy_keeps_half_logits(f16_device, rows, cols, reduction):
    """Under autocast, cross_entropy of float16 logits gives what torch's gives on their float32 cast, bit for
    bit up to summation order, and its backward keeps the float16 logits, not a float32 copy twice the size."""
    from webgrad import _autograd
    rng = np.random.default_rng(rows + cols)
    x = rng.standard_normal((rows, cols)).astype(np.float16) * 4
    t = rng.integers(0, cols, rows)
    t[0] = -100  # an ignored row
    logits = wg.tensor(x, device=f16_device, requires_grad=True)
    with wg.autocast(device_type=f16_device, dtype=wg.float16):
        loss = F.cross_entropy(logits, wg.tensor(t, device=f16_device), reduction=reduction, label_smoothing=0.1)
    assert loss.dtype is wg.float32
    saved = []
    _autograd._saved_tensors(loss.grad_fn.backward_fn if loss.grad_fn.name_() == "CrossEntropyBackward0" else
                             loss.grad_fn.inputs[0].grad_fn.backward_fn, saved, set())
    assert saved and all(s.dtype is not wg.float32 or s.numel() <= rows for s in saved), \
        [(s.dtype, s.shape) for s in saved]
    (loss.sum() * 3).backward()
    tx = torch.from_numpy(x).requires_grad_()
    tl = torch.nn.functional.cross_entropy(tx.float(), torch.from_numpy(t), reduction=reduction, label_smoothing=0.1)
    (tl.sum() * 3).backward()
    np.testing.assert_allclose(_np(loss), tl.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert logits.grad.dtype is wg.float16
    np.testing.assert_allclose(_np(logits.grad).astype(np.float32), tx.grad.float().numpy(), rtol=2e-3, atol=1e-6)
