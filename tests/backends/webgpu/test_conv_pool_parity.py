"""Convolution and pooling on WebGPU against the CPU reference at odd, larger sizes than the gradient
checks use: several workgroups, partial last workgroups, rectangular kernels, strides and dilations."""

import numpy as np
import pytest

import webgrad.nn.functional as F
from helpers import DEVICES
from helpers import check_parity

pytestmark = pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")

RNG = np.random.default_rng(0)


def data(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("x,w,kwargs", [
    ((3, 5, 17, 13), (7, 5, 3, 3), {"stride": 1, "padding": 1}),
    ((2, 3, 19, 11), (4, 3, 5, 3), {"stride": (2, 1), "padding": (2, 0), "dilation": (1, 2)}),
    ((1, 6, 9, 15), (6, 2, 3, 3), {"padding": "same", "groups": 3}),
    ((5, 1, 28, 28), (8, 1, 5, 5), {"stride": 2}),
    ((4, 16, 5, 5), (32, 16, 3, 3), {"stride": 2}),  # small output: the weight gradient takes the one-GEMM layout
], ids=["3x3", "rect-strided-dilated", "grouped-same", "mnist-like", "deep-small-output"])
@pytest.mark.parametrize("profile", ["gpu", "gpu-per-image", "cpu"])
def test_conv2d_parity(x, w, kwargs, profile, monkeypatch):
    # "gpu": these narrow convolutions on conv_direct.wgsl where it takes them; "gpu-per-image": without it,
    # matmul.wgsl reads the image through its gather (implicit im2col); "cpu" (software adapters): im2col
    # into a matrix padded to a multiple of 4 rows, matmul_cpu.wgsl, col2im for the input gradient
    from webgrad._backends.webgpu import conv_direct
    from webgrad._backends.webgpu.runtime import default_runtime

    monkeypatch.setattr(default_runtime(), "software", profile == "cpu")
    monkeypatch.setitem(conv_direct.FORCED, "off", profile == "gpu-per-image")
    monkeypatch.setattr(conv_direct, "MIN_POSITIONS", 0)  # these small images too
    check_parity(lambda a, b, c: F.conv2d(a, b, c, **kwargs), data(*x), data(*w), data(w[0]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fn", [
    lambda a: F.max_pool2d(a, 3, stride=2, padding=1),
    lambda a: F.max_pool2d(a, (2, 3), stride=(2, 1), dilation=(2, 1)),
    lambda a: F.avg_pool2d(a, 3, stride=2, padding=1),
    lambda a: F.avg_pool2d(a, (3, 2), padding=1, count_include_pad=False),
    lambda a: F.adaptive_avg_pool2d(a, (3, 5)),
    lambda a: F.adaptive_avg_pool2d(a, 1),
], ids=["max", "max-dilated", "avg", "avg-exclude-pad", "adaptive-uneven", "global"])
def test_pool_parity(fn):
    check_parity(fn, data(3, 7, 17, 13), rtol=1e-5, atol=1e-5)


def test_max_pool_indices_parity():
    x = data(2, 5, 15, 11)
    import webgrad as wg
    _, cpu = F.max_pool2d(wg.tensor(x), 3, stride=2, padding=1, return_indices=True)
    _, gpu = F.max_pool2d(wg.tensor(x, device="webgpu"), 3, stride=2, padding=1, return_indices=True)
    np.testing.assert_array_equal(gpu.cpu().numpy(), cpu.numpy())


def test_weight_gradient_reuses_the_forward_unfold(monkeypatch):
    # Software adapters unfold the image explicitly; the forward hands its unfolded image to the weight
    # gradient (conv2d's workspace) instead of unfolding again.
    import webgrad as wg
    from webgrad._backends.webgpu import conv
    from webgrad._backends.webgpu.runtime import default_runtime

    monkeypatch.setattr(default_runtime(), "software", True)
    calls = []
    unfold = conv._unfolded
    monkeypatch.setattr(conv, "_unfolded", lambda *a: calls.append(a[1].shape) or unfold(*a))
    x = wg.tensor(data(2, 3, 9, 9), device="webgpu")
    w = wg.tensor(data(4, 3, 3, 3), device="webgpu", requires_grad=True)
    F.conv2d(x, w, padding=1).sum().backward()
    assert len(calls) == 1
    xc = wg.tensor(x.numpy(), device="cpu")
    wc = wg.tensor(w.detach().numpy(), device="cpu", requires_grad=True)
    F.conv2d(xc, wc, padding=1).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), wc.grad.numpy(), rtol=1e-4, atol=1e-4)
    with wg.no_grad():
        F.conv2d(x, w, padding=1)  # nothing kept: no backward will come
    assert len(calls) == 2


@pytest.mark.parametrize("shape,kernel_used", [
    ((3, 5, 16, 12), "max_pool2d_2x2"),     # even planes: a thread per window (GPU adapters)
    ((2, 3, 28, 28), "max_pool2d_2x2"),     # the MNIST CNN's first pool
    ((3, 5, 15, 12), "max_pool2d"),         # odd height: the last row is in no window, general kernels
])
def test_max_pool_2x2_on_gpu_adapters(shape, kernel_used, monkeypatch):
    import webgrad as wg
    from webgrad._backends.webgpu.runtime import default_runtime

    rt = default_runtime()
    monkeypatch.setattr(rt, "software", False)
    entries = []
    dispatch = rt.dispatch
    monkeypatch.setattr(rt, "dispatch", lambda kernel, *a, **k: entries.append(kernel.entry) or dispatch(kernel, *a, **k))
    x = data(*shape)
    x[0, 0, :2, :2] = 1.0        # a tie: the first maximum wins (PyTorch)
    x[0, 1, 2:4, 2:4] = [[0.0, np.nan], [5.0, np.nan]]  # NaN wins over numbers, the first NaN
    x[1, 0, 4:6, 0:2] = [[-3.0, -2.0], [-1.0, -4.0]]  # the maximum at the bottom left
    # a view at an offset (the pool reads x from its offset) and a window with its maximum bottom right
    base = np.concatenate([data(7), x.ravel()]).astype(np.float32)
    check_parity(lambda a: F.max_pool2d(a[7:].reshape(shape), 2), base, rtol=0, atol=0)
    assert kernel_used in entries and (kernel_used + "_backward" in entries) == (kernel_used == "max_pool2d_2x2")
    _, cpu = F.max_pool2d(wg.tensor(x), 2, return_indices=True)
    _, gpu = F.max_pool2d(wg.tensor(x, device="webgpu"), 2, return_indices=True)
    np.testing.assert_array_equal(gpu.cpu().numpy(), cpu.numpy())
