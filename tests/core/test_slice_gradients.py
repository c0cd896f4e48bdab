"""The gradients of narrowing views (split, chunk, x[..., a:b]) meet in one buffer (autograd.SliceGrad): values
as PyTorch's, and a split's backward is a cat, with no input-sized zeros per piece and no additions of them."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 5, 12)).astype(np.float32)
W = RNG.standard_normal((2, 5, 4)).astype(np.float32)


def _loss(lib, x, w):
    h = x * 2
    q, k, v = h.split(4, dim=2)
    a, b = h[..., 1:3], h[..., 2:6]  # overlapping pieces
    first, last = h.chunk(2, dim=1)[0], h[:, 3:]  # a gap between them along dim 1
    return ((q * w).sum() + (k * k).sum() + v.exp().sum() + (a * 3).sum() + b.sum() + h.sum() * 0.5
            + (first ** 2).sum() + last.sum())


@pytest.mark.parametrize("device", DEVICES)
def test_pieces_gradients_match_torch(device):
    tx = torch.tensor(X, requires_grad=True)
    _loss(torch, tx, torch.tensor(W)).backward()
    x = wg.tensor(X, requires_grad=True, device=device)
    _loss(wg, x, wg.tensor(W, device=device)).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_captured_and_second_order(device):
    x = wg.tensor(X, requires_grad=True, device=device)
    tx = torch.tensor(X, requires_grad=True)
    got, want = [], []
    for lib, xx, out in ((wg, x, got), (torch, tx, want)):
        h = xx * 2
        q, k, v = h.split(4, dim=2)
        y = (q * k * v).sum()
        (gh,) = lib.autograd.grad(y, h, create_graph=True)  # captured, and differentiable again
        out.append(gh.detach().numpy())
        ((gh ** 2).sum() + y).backward()
        out.append(xx.grad.numpy())
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_split_backward_writes_each_piece_once():
    pytest.importorskip("wgpu")
    from webgrad._backends.webgpu import elementwise as E

    codes = E.ops()
    counts = {"fill": 0, "add": 0, "copy": 0}
    launch = E.launch

    def counting(rt, kernel, op_code, out, inputs, *args, **kwargs):
        if kernel in (E.UNARY, E.VEC4.get(E.UNARY)):
            for name in ("fill", "copy"):
                if op_code == codes.unary["identity" if name == "copy" else name]:
                    counts[name] += 1
        elif kernel in (E.BINARY, E.VEC4.get(E.BINARY)) and op_code == codes.binary["add"]:
            counts["add"] += 1
        return launch(rt, kernel, op_code, out, inputs, *args, **kwargs)

    x = wg.tensor(X, requires_grad=True, device="webgpu")
    h = x * 2
    q, k, v = h.split(4, dim=2)
    y = (q * 1.5 + k * 2.5 + v * 3.5).sum()
    seed = wg.ones((), device="webgpu")
    E.launch = counting
    try:
        y.backward(seed)
    finally:
        E.launch = launch
    # the three pieces written into one gradient of h: three copies, no zeros, no additions of whole gradients
    assert counts["copy"] == 3 and counts["fill"] == 0 and counts["add"] == 0, counts
    np.testing.assert_allclose(x.grad.numpy(), np.repeat([[[1.5] * 4 + [2.5] * 4 + [3.5] * 4]], 2 * 5, 0)
                               .reshape(2, 5, 12) * 2, rtol=1e-6)
