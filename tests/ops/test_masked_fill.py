"""masked_fill / masked_fill_ against PyTorch on every device: values, broadcasts, dtypes, gradients (finite
differences too), a 0-d tensor value and its gradient, errors, and one dispatch on WebGPU."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES, gradcheck

RNG = np.random.default_rng(0)


def _both(a, device):
    return wg.tensor(a, device=device), torch.tensor(a)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((5,), (2, 5))])
def test_values_and_gradient_match_torch(device, shapes):
    xs, ms = shapes
    x = RNG.standard_normal(xs).astype(np.float32)
    m = RNG.random(ms) < 0.5
    wx = wg.tensor(x, device=device, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    wy = wx.masked_fill(wg.tensor(m, device=device), -3.5)
    ty = tx.masked_fill(torch.tensor(m), -3.5)
    np.testing.assert_array_equal(wy.detach().cpu().numpy(), ty.detach().numpy())
    w = RNG.standard_normal(tuple(ty.shape)).astype(np.float32)
    (wy * wg.tensor(w, device=device)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(wx.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_the_causal_mask_of_a_gpt(device):
    T = 5
    bias = wg.tril(wg.ones(T, T, device=device)).view(1, 1, T, T)
    att = wg.tensor(RNG.standard_normal((2, 3, T, T)).astype(np.float32), device=device)
    out = att.masked_fill(bias[:, :, :T, :T] == 0, float("-inf"))
    ref = torch.tensor(att.cpu().numpy()).masked_fill(torch.tril(torch.ones(T, T)).view(1, 1, T, T) == 0,
                                                     float("-inf"))
    np.testing.assert_array_equal(out.cpu().numpy(), ref.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_dtypes_as_torch(device):
    m = np.array([True, False, True, False])
    for a, value in ((np.arange(4, dtype=np.int32), 2.7), (np.arange(4, dtype=np.int32), -1.5),
                     (np.array([True, False, False, True]), True), (np.arange(4, dtype=np.uint8), 7),
                     (np.arange(4, dtype=np.float32), float("nan"))):
        w, t = _both(a, device)
        got = w.masked_fill(wg.tensor(m, device=device), value)
        want = t.masked_fill(torch.tensor(m), value)
        assert got.dtype.name == str(want.dtype).split(".")[1]
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_and_function_forms(device):
    m = np.array([[True, False, True]])
    w = wg.zeros(2, 3, device=device)
    assert w.masked_fill_(wg.tensor(m, device=device), 5) is w
    t = torch.zeros(2, 3).masked_fill_(torch.tensor(m), 5)
    np.testing.assert_array_equal(w.cpu().numpy(), t.numpy())
    strided = wg.zeros(3, 2, device=device).t()  # in place through a strided view
    strided.masked_fill_(wg.tensor(m, device=device), 1.0)
    np.testing.assert_array_equal(strided.cpu().numpy(), torch.zeros(3, 2).t().masked_fill_(torch.tensor(m), 1.0))
    np.testing.assert_array_equal(wg.masked_fill(wg.zeros(3, device=device), wg.ones(2, 3, dtype=wg.bool,
                                                                                     device=device), 1.).cpu().numpy(),
                                  np.ones((2, 3), np.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_a_tensor_value_gets_its_gradient(device):
    m = np.array([True, False, True])
    wv = wg.tensor(2.0, device=device, requires_grad=True)
    wx = wg.ones(3, device=device, requires_grad=True)
    wx.masked_fill(wg.tensor(m, device=device), wv).mul(wg.tensor([1.0, 2.0, 3.0], device=device)).sum().backward()
    tv = torch.tensor(2.0, requires_grad=True)
    tx = torch.ones(3, requires_grad=True)
    tx.masked_fill(torch.tensor(m), tv).mul(torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert wv.grad.item() == tv.grad.item() == 4.0
    np.testing.assert_array_equal(wx.grad.cpu().numpy(), tx.grad.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_finite_differences(device):
    m = np.array([[True, False, False], [False, True, False]])
    gradcheck(lambda x: x.masked_fill(wg.tensor(m, device=x.device), 0.25) * x, RNG.standard_normal((2, 3)),
              device=device)


@pytest.mark.parametrize("device", DEVICES)
def test_bad_input_is_refused_as_torch_does(device):
    x = wg.zeros(3, device=device)
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        x.masked_fill(wg.ones(3, device=device), 1.0)
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        x.masked_fill(wg.ones(3, dtype=wg.bool, device=device), wg.ones(2, device=device))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x.masked_fill_(wg.ones(2, 3, dtype=wg.bool, device=device), 1.0)
    with pytest.raises(RuntimeError):
        x.masked_fill(wg.ones(4, dtype=wg.bool, device=device), 1.0)


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
def test_one_dispatch_forward_and_backward_on_webgpu():
    from webgrad._backends.webgpu.runtime import default_runtime
    stats = default_runtime().stats
    x = wg.ones(2, 4, 4, device="webgpu", requires_grad=True)
    mask = wg.tril(wg.ones(4, 4, device="webgpu")) == 0
    before = stats["dispatches"]
    y = x.masked_fill(mask, float("-inf"))
    assert stats["dispatches"] - before == 1
    g = wg.ones(2, 4, 4, device="webgpu")
    before = stats["dispatches"]
    gx, _ = y.grad_fn.backward_fn(g)
    assert stats["dispatches"] - before == 1
    np.testing.assert_array_equal(gx.cpu().numpy(), np.broadcast_to(np.tril(np.ones((4, 4))), (2, 4, 4)))
