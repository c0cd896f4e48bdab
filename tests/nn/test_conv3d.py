"""F.conv3d and F.conv_transpose3d (ops/conv3d.py, composed from the 2-D convolutions): values and gradients against
torch with strides, padding (and 'same'), dilation, groups, output_padding, bias and unbatched inputs; bad
arguments raise torch's exception types."""

import numpy as np
import pytest
import torch

import webgrad as wg


def _run(L, dev, fn, arrays, **kw):
    ts = [L.tensor(a, device=dev, requires_grad=True) if a is not None else None for a in arrays]
    y = fn(L)(*ts, **kw)
    (y * y).sum().backward()
    return [y.detach().to("cpu").numpy()] + [t.grad.to("cpu").numpy() for t in ts if t is not None]


def _check(device, name, arrays, **kw):
    def fn(L):
        return getattr(L.nn.functional, name)
    for ours, ref in zip(_run(wg, device, fn, arrays, **kw), _run(torch, "cpu", fn, arrays, **kw)):
        assert ours.shape == ref.shape
        np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-4 * max(np.abs(ref).max(), 1.0))


@pytest.mark.parametrize("stride,padding,dilation,groups,bias", [
    (1, 0, 1, 1, True), (2, 1, 1, 2, False), ((1, 2, 1), (1, 0, 2), (2, 1, 1), 1, True), (1, "same", 2, 1, True),
    (1, "valid", 1, 4, False)])
def test_conv3d_matches_torch(device, stride, padding, dilation, groups, bias):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 4, 6, 7, 5)).astype(np.float32)
    w = rng.standard_normal((8, 4 // groups, 3, 2, 3)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32) if bias else None
    _check(device, "conv3d", [x, w, b], stride=stride, padding=padding, dilation=dilation, groups=groups)


@pytest.mark.parametrize("stride,padding,output_padding,dilation,groups", [
    (1, 0, 0, 1, 1), (2, 1, 1, 1, 2), ((3, 1, 2), (2, 0, 1), (1, 0, 1), (2, 1, 1), 1), (2, 0, (1, 1, 0), 2, 1)])
def test_conv_transpose3d_matches_torch(device, stride, padding, output_padding, dilation, groups):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 4, 3, 4, 5)).astype(np.float32)
    w = rng.standard_normal((4, 6 // groups, 3, 2, 3)).astype(np.float32)
    b = rng.standard_normal(6 // groups * groups).astype(np.float32)
    _check(device, "conv_transpose3d", [x, w, b], stride=stride, padding=padding, output_padding=output_padding,
           dilation=dilation, groups=groups)


def test_unbatched_inputs(device):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 5, 4, 6)).astype(np.float32)
    _check(device, "conv3d", [x, rng.standard_normal((2, 3, 2, 2, 2)).astype(np.float32)], padding=1)
    _check(device, "conv_transpose3d", [x, rng.standard_normal((3, 2, 2, 2, 2)).astype(np.float32)], stride=2)


def test_bad_arguments_raise_like_torch(device):
    x = wg.randn(1, 4, 5, 5, 5, device=device)
    for L, inp in ((wg, x), (torch, torch.randn(1, 4, 5, 5, 5))):
        weight = L.randn(2, 3, 3, 3, 3, device=device if L is wg else "cpu")
        with pytest.raises(RuntimeError):  # 4 channels against a weight for 3
            L.nn.functional.conv3d(inp, weight)
        with pytest.raises(RuntimeError):  # a 4-D weight
            L.nn.functional.conv3d(inp, weight[:, :, 0])
        with pytest.raises(RuntimeError):  # a kernel deeper than the padded input
            L.nn.functional.conv3d(inp, L.randn(2, 4, 7, 1, 1, device=device if L is wg else "cpu"))


def test_top_level_functions_are_torchs():
    # torch.conv1d, conv3d, conv_transpose1d, conv_transpose3d: the functional ones under torch's top-level names
    for name in ("conv1d", "conv3d", "conv_transpose1d", "conv_transpose3d"):
        assert getattr(wg, name) is getattr(wg.nn.functional, name)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 9)).astype(np.float32)
    for name, w, kw in (("conv1d", (4, 3, 3), dict(padding=1)), ("conv_transpose1d", (3, 2, 3), dict(stride=2))):
        weight = rng.standard_normal(w).astype(np.float32)
        got = getattr(wg, name)(wg.tensor(x), wg.tensor(weight), **kw).numpy()
        np.testing.assert_allclose(got, getattr(torch, name)(torch.tensor(x), torch.tensor(weight), **kw).numpy(),
                                   rtol=1e-5, atol=1e-5)
