"""conv_gemm.wgsl's float16 variants (float16 input, weight and grad_output read into float32 registers,
float32 products and sums, one rounding into a float16 output: autocast's numerics, as cuDNN's half
convolutions) against torch: forward (with bias), input gradient and weight gradient, for ResNet-18's
shapes at a small batch, strided 1x1 (phases without taps), odd shapes (scalar loads and stores) and
split-K (float32 partials, rounded once by the reduction). The runtime is told it runs on a GPU, so
lavapipe (which has shader-f16) takes these kernels; every product is checked to have run on them.

Tolerance: the reference is torch on the CPU in float32 over the float16-rounded operands (exact in
float32), its result rounded to float16 once. Ours differs by the rounding of a float32 sum taken in
another order: one half ulp of the result (2**-10 relative, for a tie broken the other way) plus float32
summation noise, 2**-12 * sqrt(K) of the largest |value| (test_amp's _close_half)."""

import math

import numpy as np
import pytest

import webgrad as wg
import webgrad.nn.functional as F
from helpers import DEVICES

torch = pytest.importorskip("torch")


def _has_f16():
    return "webgpu" in DEVICES and wg.device("webgpu").backend.runtime.has_f16


pytestmark = pytest.mark.skipif(not _has_f16(), reason="needs a WebGPU adapter with shader-f16")


@pytest.fixture
def gpu_kernels(monkeypatch):
    from webgrad._backends.webgpu import conv_gemm, winograd
    from webgrad._backends.webgpu.runtime import default_runtime

    monkeypatch.setattr(default_runtime(), "software", False)
    monkeypatch.setattr(conv_gemm, "FORCED", {"config": None, "splits": None})
    monkeypatch.setitem(winograd.FORCED, "off", True)  # its float16 kernels: test_winograd's
    monkeypatch.setattr(conv_gemm, "MIN_CHANNELS", 1)
    plans = []
    run = conv_gemm.run
    monkeypatch.setattr(conv_gemm, "run", lambda rt, p, *a: plans.append(p) or run(rt, p, *a))
    conv_gemm.plans_run = plans
    return conv_gemm


def _close_half(ours, ref, k):
    ours, ref = ours.astype(np.float64), ref.astype(np.float64)
    tol = 2.0**-10 * np.abs(ref) + 2.0**-12 * math.sqrt(k) * np.abs(ref).max() + 1e-7
    bad = np.abs(ours - ref) > tol
    assert not bad.any(), f"{bad.sum()} of {bad.size} elements differ; worst {np.abs(ours - ref).max()}"


def check_half_conv(conv_gemm, x_shape, w_shape, bias=False, seed=0, **kwargs):
    rng = np.random.default_rng(seed)
    x, w = (rng.standard_normal(s).astype(np.float16) for s in (x_shape, w_shape))
    b = rng.standard_normal(w_shape[0]).astype(np.float16) if bias else None
    y_shape = torch.nn.functional.conv2d(torch.zeros(x_shape), torch.zeros(w_shape), **kwargs).shape
    g = rng.standard_normal(tuple(y_shape)).astype(np.float16)
    # torch: float32 over the half operands, each result rounded to half once
    tx, tw = (torch.tensor(v.astype(np.float32), requires_grad=True) for v in (x, w))
    tb = torch.tensor(b.astype(np.float32)) if bias else None
    ty = torch.nn.functional.conv2d(tx, tw, tb, **kwargs)
    ty.backward(torch.tensor(g.astype(np.float32)))
    want = [t.detach().half().numpy() for t in (ty, tx.grad, tw.grad)]

    del conv_gemm.plans_run[:]
    ox, ow = (wg.tensor(v, device="webgpu", requires_grad=True) for v in (x, w))
    ob = wg.tensor(b, device="webgpu") if bias else None
    oy = F.conv2d(ox, ow, ob, **kwargs)
    oy.backward(wg.tensor(g, device="webgpu"))
    got = [t.detach().to("cpu").numpy() for t in (oy, ox.grad, ow.grad)]
    assert all(t.dtype is wg.float16 for t in (oy, ox.grad, ow.grad))
    assert conv_gemm.plans_run and all("f16" in p.types for p in conv_gemm.plans_run), "not the f16 kernels"
    groups = kwargs.get("groups", 1)
    ks = (x_shape[1] // groups * w_shape[2] * w_shape[3], w_shape[0] * w_shape[2] * w_shape[3],
          x_shape[0] * y_shape[2] * y_shape[3])
    for name, a, e, k in zip(("out", "x.grad", "weight.grad"), got, want, ks):
        assert a.dtype == np.float16, name
        try:
            _close_half(a, e, k)
        except AssertionError as err:
            raise AssertionError(f"{name}: {err}") from None
    return conv_gemm.plans_run


# (C_in, C_out, map, kernel, stride, padding): ResNet-18's (CIFAR) kinds of convolution, small channels
SHAPES = [(3, 16, 8, 3, 1, 1), (16, 16, 8, 3, 1, 1), (16, 32, 8, 3, 2, 1), (16, 32, 8, 1, 2, 0),
          (32, 64, 4, 3, 1, 1)]


@pytest.mark.parametrize("c,o,hw,k,s,p", SHAPES, ids=[f"{c}-{o}-{hw}x{hw}-k{k}s{s}" for c, o, hw, k, s, p in SHAPES])
def test_resnet_kinds_of_convolution(gpu_kernels, c, o, hw, k, s, p):
    check_half_conv(gpu_kernels, (2, c, hw, hw), (o, c, k, k), stride=s, padding=p)


def test_odd_shapes_bias_and_split_k(gpu_kernels):
    # odd channels and maps: scalar A loads and scalar stores; bias in the epilogue
    check_half_conv(gpu_kernels, (3, 5, 7, 7), (7, 5, 3, 3), bias=True, padding=1)
    # a forced K split: float32 partial tiles (OT = f32), summed and rounded once by conv_reduce
    gpu_kernels.FORCED.update(config="32x32", splits=3)
    plans = check_half_conv(gpu_kernels, (2, 8, 6, 6), (12, 8, 3, 3), bias=True, seed=1, padding=1)
    split = [p for p in plans if p.reduce is not None]
    assert split and all(p.types == ("f16", "f16", "f32") and p.reduce.types == ("f32", "f16", "f16")
                         for p in split)


def test_overflow_rounds_to_inf(gpu_kernels):
    # a float32 sum beyond float16's range stores inf (what GradScaler looks for), not 65504
    x = wg.full((1, 4, 4, 4), 200.0, device="webgpu", dtype=wg.float16)
    w = wg.full((4, 4, 3, 3), 20.0, device="webgpu", dtype=wg.float16)
    y = F.conv2d(x, w, padding=1).to("cpu").numpy()
    assert np.isinf(y[0, 0, 1, 1]) and y[0, 0, 1, 1] > 0 and y[0, 0, 0, 0] == np.float16(200 * 20 * 16)
