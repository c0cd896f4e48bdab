"""torch.nn.functional's 3-D pooling and its modules (MaxPool3d, AvgPool3d, AdaptiveAvgPool3d,
AdaptiveMaxPool3d) against PyTorch: values, indices, gradients (and a max pooling's second derivative through
create_graph), unbatched inputs, padding, dilation, ceil_mode, count_include_pad, divisor_override, adaptive
sizes with None, on every device."""

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn.functional as F
from helpers import DEVICES

RNG = np.random.default_rng(5)


def _pair(shape, device):
    x = RNG.standard_normal(shape).astype(np.float32)
    return wg.tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)


def _compare(device, shape, ours, theirs, indices=False):
    w, t = _pair(shape, device)
    got, want = ours(w), theirs(t)
    if indices:
        (got, gi), (want, ti) = got, want
        np.testing.assert_array_equal(gi.cpu().numpy(), ti.numpy())
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    g = RNG.standard_normal(tuple(want.shape)).astype(np.float32)
    got.backward(wg.tensor(g, device=device))
    want.backward(torch.tensor(g))
    np.testing.assert_allclose(w.grad.cpu().numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)


MAX_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=(2, 3, 2), stride=(1, 2, 1), padding=(1, 1, 0)),
    dict(kernel_size=3, stride=2, padding=1, dilation=(1, 2, 1), ceil_mode=True),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kw", MAX_CASES, ids=["plain", "padded", "dilated-ceil"])
def test_max_pool3d(device, kw):
    _compare(device, (2, 3, 5, 7, 6), lambda x: F.max_pool3d(x, return_indices=True, **kw),
             lambda x: torch.nn.functional.max_pool3d(x, return_indices=True, **kw), indices=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
                                dict(kernel_size=(3, 2, 2), stride=1, padding=(1, 0, 1), divisor_override=5)],
                         ids=["plain", "ceil", "no-pad-count", "divisor"])
def test_avg_pool3d(device, kw):
    _compare(device, (2, 3, 5, 7, 6), lambda x: F.avg_pool3d(x, **kw), lambda x: torch.nn.functional.avg_pool3d(x, **kw))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("size", [1, (2, 3, None), (3, 4, 5)])
def test_adaptive_pool3d(device, size):
    _compare(device, (2, 2, 5, 7, 6), lambda x: F.adaptive_avg_pool3d(x, size),
             lambda x: torch.nn.functional.adaptive_avg_pool3d(x, size))
    _compare(device, (2, 2, 5, 7, 6), lambda x: F.adaptive_max_pool3d(x, size, return_indices=True),
             lambda x: torch.nn.functional.adaptive_max_pool3d(x, size, return_indices=True), indices=True)


@pytest.mark.parametrize("device", DEVICES)
def test_modules_and_unbatched(device):
    for ours, theirs in ((wg.nn.MaxPool3d(2, stride=1), torch.nn.MaxPool3d(2, stride=1)),
                         (wg.nn.AvgPool3d(2, padding=1), torch.nn.AvgPool3d(2, padding=1)),
                         (wg.nn.AdaptiveAvgPool3d((1, 2, 2)), torch.nn.AdaptiveAvgPool3d((1, 2, 2))),
                         (wg.nn.AdaptiveMaxPool3d(2), torch.nn.AdaptiveMaxPool3d(2))):
        assert repr(ours) == repr(theirs)
        _compare(device, (3, 4, 5, 6), ours, theirs)  # unbatched [C, D, H, W]
    out, idx = wg.nn.MaxPool3d(2, return_indices=True)(wg.zeros(1, 1, 2, 2, 2, device=device))
    assert tuple(out.shape) == tuple(idx.shape) == (1, 1, 1, 1, 1) and idx.dtype is wg.int64


@pytest.mark.parametrize("device", DEVICES)
def test_max_pool3d_second_derivative(device):
    """create_graph: the gradient's own gradient (a max pooling's gradient is linear in the output gradient)."""
    w, t = _pair((1, 2, 4, 4, 4), device)
    gw = wg.tensor(np.ones((1, 2, 2, 2, 2), np.float32), device=device, requires_grad=True)
    gt = torch.ones(1, 2, 2, 2, 2, requires_grad=True)
    (dw,) = wg.autograd.grad(F.max_pool3d(w, 2), w, gw, create_graph=True)
    (dt,) = torch.autograd.grad(torch.nn.functional.max_pool3d(t, 2), t, gt, create_graph=True)
    c = RNG.standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    (dw * wg.tensor(c, device=device)).sum().backward()
    (dt * torch.tensor(c)).sum().backward()
    np.testing.assert_allclose(gw.grad.cpu().numpy(), gt.grad.numpy(), rtol=1e-6)


def test_bad_inputs():
    with pytest.raises(RuntimeError, match="Expected 4D or 5D"):
        F.max_pool3d(wg.zeros(2, 3, 4), 2)
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.avg_pool3d(wg.zeros(1, 1, 4, 4, 4), 2, padding=2)
    with pytest.raises(RuntimeError, match="floating point"):
        F.max_pool3d(wg.zeros(1, 1, 4, 4, 4, dtype=wg.int64), 2)
    with pytest.raises(TypeError, match="must be Tensor"):
        F.adaptive_avg_pool3d([[1.0]], 1)
