"""torch.autograd.grad and higher-order gradients (create_graph=True) against torch: gradients that leave .grad
alone, gradients of gradients (a WGAN-GP gradient penalty, a Hessian-vector product, Tensor.backward with
create_graph), and a clear error for an op whose backward cannot be differentiated yet."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES


def _data(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _np(t):
    return t.detach().to("cpu").numpy()


def test_grad_leaves_dot_grad_alone_and_follows_torchs_arguments(device):
    def run(L, dev):
        x = L.tensor(_data(0, 3, 4), device=dev, requires_grad=True)
        w = L.tensor(_data(1, 4), device=dev, requires_grad=True)
        unused = L.tensor(_data(2, 2), device=dev, requires_grad=True)
        y = (x * w).tanh()
        gx, gw, gu = L.autograd.grad(y, (x, w, unused), grad_outputs=L.ones_like(y) * 2, retain_graph=True,
                                     allow_unused=True)
        (gs,) = L.autograd.grad(y.sum(), [w], retain_graph=True)
        (gm,) = L.autograd.grad(y.sum(), unused, materialize_grads=True)
        assert x.grad is None and w.grad is None and gu is None
        return [_np(gx), _np(gw), _np(gs), _np(gm)]
    for ours, ref in zip(run(wg, device), run(torch, "cpu")):
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)


def test_grad_refuses_what_torch_refuses(device):
    x = wg.tensor(_data(0, 3), device=device, requires_grad=True)
    c = wg.tensor(_data(1, 3), device=device)
    y = x * 2
    with pytest.raises(RuntimeError, match="does not require grad"):
        wg.autograd.grad(y.sum(), c)
    with pytest.raises(RuntimeError, match="not have been used in the graph"):
        wg.autograd.grad(y.sum(), [x, wg.ones(1, requires_grad=True, device=device)], retain_graph=True)
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        wg.autograd.grad(y, x)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        wg.autograd.grad(y, x, grad_outputs=wg.ones(4, device=device))
    wg.autograd.grad(y.sum(), x)
    with pytest.raises(RuntimeError, match="second time"):
        wg.autograd.grad(y.sum(), x)  # retain_graph defaults to create_graph (False)


ACTIVATIONS = {
    "leaky_relu": lambda L, h: L.nn.functional.leaky_relu(h, 0.2), "relu": lambda L, h: L.relu(h),
    "tanh": lambda L, h: L.tanh(h), "sigmoid": lambda L, h: L.sigmoid(h), "sin": lambda L, h: L.sin(h),
    "pow3": lambda L, h: h ** 3, "gelu": lambda L, h: L.nn.functional.gelu(h),
    "softplus": lambda L, h: L.nn.functional.softplus(h), "silu": lambda L, h: L.nn.functional.silu(h),
    "elu": lambda L, h: L.nn.functional.elu(h), "exp": lambda L, h: (h * 0.3).exp(),
}


@pytest.mark.parametrize("act", list(ACTIVATIONS))
def test_gradient_penalty_matches_torch(device, act):
    """WGAN-GP's penalty: the critic's input gradient with create_graph, its norm's distance to 1, then a
    backward to the critic's weights through that gradient (second derivatives of every op on the way)."""
    def run(L, dev):
        w1 = L.tensor(_data(0, 6, 3), device=dev, requires_grad=True)
        b1 = L.tensor(_data(1, 6), device=dev, requires_grad=True)
        w2 = L.tensor(_data(2, 1, 6), device=dev, requires_grad=True)
        x = L.tensor(_data(3, 5, 3), device=dev, requires_grad=True)
        d = L.nn.functional.linear(ACTIVATIONS[act](L, L.nn.functional.linear(x, w1, b1)), w2)
        (gx,) = L.autograd.grad(d, x, grad_outputs=L.ones_like(d), create_graph=True, retain_graph=True)
        penalty = ((gx.norm(2, dim=1) - 1) ** 2).mean() * 10 + d.mean()
        penalty.backward()
        return [penalty.item(), _np(w1.grad), _np(b1.grad), _np(w2.grad), _np(x.grad)]
    ours, ref = run(wg, device), run(torch, "cpu")
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)


def test_backward_with_create_graph_and_inputs(device):
    def run(L, dev):
        x = L.tensor([0.5, -1.0, 2.0], device=dev, requires_grad=True)
        w = L.tensor([1.5, 0.25, -0.5], device=dev, requires_grad=True)
        (x ** 3 * w).sum().backward(create_graph=True)
        first = _np(x.grad).copy()  # (torch may add the next gradient into this memory)
        x.grad.sum().backward(inputs=[x])  # d/dx sum(3 x^2 w) = 6 x w, added to x.grad
        hv = L.autograd.grad((L.tanh(x * w) ** 2).sum(), x, create_graph=True)[0]  # a Hessian-vector product
        (hvp,) = L.autograd.grad(hv, x, grad_outputs=L.ones_like(hv))
        return [first, _np(x.grad), _np(w.grad), _np(hvp)]
    for a, b in zip(run(wg, device), run(torch, "cpu")):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_an_op_without_a_second_derivative_says_so(device):
    x = wg.randn(4, 5, device=device, requires_grad=True)
    with pytest.raises(NotImplementedError, match="ScaledDotProductAttention"):
        q = x.reshape(1, 1, 4, 5)
        wg.autograd.grad(wg.nn.functional.scaled_dot_product_attention(q, q, q).sum(), x, create_graph=True)
    y = wg.nn.functional.mish(x)
    with pytest.raises(NotImplementedError, match="create_graph"):
        (g,) = wg.autograd.grad(y.sum(), x, create_graph=True)
        g.sum().backward()


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 1, 1, 1), (2, 1, 1, 1), (1, 0, 2, 2)])
def test_gradient_penalty_through_convolutions_matches_torch(device, stride, padding, dilation, groups):
    """A DCGAN-shaped critic (convolutions, a transposed one, LeakyReLU) under WGAN-GP's penalty: the
    convolutions' gradients are differentiated again (input and weight gradients of each other)."""
    def run(L, dev):
        F = L.nn.functional
        w1 = L.tensor(_data(0, 4, 2 // groups, 3, 3), device=dev, requires_grad=True)
        wt = L.tensor(_data(1, 4, 2, 2, 2), device=dev, requires_grad=True)
        w2 = L.tensor(_data(2, 1, 2, 3, 3), device=dev, requires_grad=True)
        x = L.tensor(_data(3, 2, 2, 7, 7), device=dev, requires_grad=True)
        h = F.leaky_relu(F.conv2d(x, w1, None, stride, padding, dilation, groups), 0.2)
        h = F.leaky_relu(F.conv_transpose2d(h, wt, None, 1, 0), 0.2)
        d = F.conv2d(h, w2).mean((1, 2, 3))
        (gx,) = L.autograd.grad(d.sum(), x, create_graph=True)
        penalty = ((gx.reshape(2, -1).norm(2, dim=1) - 1) ** 2).mean() + d.mean()
        penalty.backward()
        return [penalty.item(), _np(w1.grad), _np(wt.grad), _np(w2.grad), _np(x.grad)]
    for a, b in zip(run(wg, device), run(torch, "cpu")):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)


FUSED = {  # fused kernels, differentiated again through their definitions in differentiable ops
    "layer_norm": lambda L, h, w, b: L.nn.functional.layer_norm(h, (6,), w, b),
    "batch_norm (training)": lambda L, h, w, b: L.nn.functional.batch_norm(h, None, None, w, b, training=True),
    "batch_norm (eval)": lambda L, h, w, b: L.nn.functional.batch_norm(
        h, L.arange(6.0, device=h.device) * 0.1, L.arange(1.0, 7.0, device=h.device), w, b, training=False),
    "group_norm": lambda L, h, w, b: L.nn.functional.group_norm(h.unsqueeze(-1), 3, w, b).squeeze(-1),
    "softmax": lambda L, h, w, b: L.softmax(h * w, -1) + b,
    "log_softmax": lambda L, h, w, b: L.log_softmax(h * w, 1) + b,
    "cross_entropy": lambda L, h, w, b: L.nn.functional.cross_entropy(
        h * w + b, L.tensor([0, 5, -100, 2, 2], device=h.device), label_smoothing=0.1).reshape(1, 1).expand(5, 6),
    "cross_entropy (none)": lambda L, h, w, b: L.nn.functional.cross_entropy(
        h * w + b, L.tensor([0, 5, 1, 2, 2], device=h.device), reduction="none").reshape(5, 1) * b,
}


@pytest.mark.parametrize("op", list(FUSED))
def test_gradient_penalty_through_fused_ops_matches_torch(device, op):
    def run(L, dev):
        w1 = L.tensor(_data(0, 6, 3), device=dev, requires_grad=True)
        w = L.tensor(_data(1, 6) * 0.5 + 1, device=dev, requires_grad=True)
        b = L.tensor(_data(2, 6), device=dev, requires_grad=True)
        w2 = L.tensor(_data(3, 1, 6), device=dev, requires_grad=True)
        x = L.tensor(_data(4, 5, 3), device=dev, requires_grad=True)
        h = L.nn.functional.leaky_relu(FUSED[op](L, L.nn.functional.linear(x, w1), w, b), 0.2)
        d = L.nn.functional.linear(h, w2)
        (gx,) = L.autograd.grad(d.sum(), x, create_graph=True)
        penalty = ((gx.norm(2, dim=1) - 1) ** 2).mean() + d.mean()
        penalty.backward()
        return [penalty.item(), _np(w1.grad), _np(w.grad), _np(b.grad), _np(w2.grad), _np(x.grad)]
    for a, b in zip(run(wg, device), run(torch, "cpu")):
        np.testing.assert_allclose(a, b, rtol=5e-4, atol=5e-5)


def test_gradient_penalty_through_pooling_and_indexing_matches_torch(device):
    """Pooling and index_select's backward passes are linear in the gradient: differentiated again, they give
    the op itself (the adjoint of the adjoint)."""
    def run(L, dev):
        F = L.nn.functional
        w1 = L.tensor(_data(0, 4, 2, 3, 3), device=dev, requires_grad=True)
        w2 = L.tensor(_data(1, 3, 4, 2, 2), device=dev, requires_grad=True)
        lin = L.tensor(_data(2, 1, 3), device=dev, requires_grad=True)
        x = L.tensor(_data(3, 2, 2, 10, 10), device=dev, requires_grad=True)
        h = F.max_pool2d(F.leaky_relu(F.conv2d(x, w1, padding=1), 0.2), 2)
        h = F.avg_pool2d(F.conv2d(h.index_select(1, L.tensor([3, 0, 1, 1], device=dev)), w2) ** 2, 2, 1)
        d = F.linear(F.adaptive_avg_pool2d(h, 1).flatten(1), lin)
        (gx,) = L.autograd.grad(d.sum(), x, create_graph=True)
        penalty = ((gx.reshape(2, -1).norm(2, dim=1) - 1) ** 2).mean()
        penalty.backward()
        return [penalty.item(), _np(w1.grad), _np(w2.grad), _np(lin.grad), _np(x.grad)]
    for a, b in zip(run(wg, device), run(torch, "cpu")):
        np.testing.assert_allclose(a, b, rtol=5e-4, atol=5e-5)


def test_dropout_is_differentiated_again_with_its_mask(device):
    x = wg.randn(64, device=device, requires_grad=True)
    y = wg.nn.functional.dropout(x, 0.5) * x  # d/dx = mask * 2x / (1 - p) where kept; d2/dx2 = 2 * mask / 0.5
    (g,) = wg.autograd.grad(y.sum(), x, create_graph=True)
    (h,) = wg.autograd.grad(g.sum(), x)
    kept = (y.detach() != 0).float()
    np.testing.assert_allclose(_np(h), _np(kept * 4.0), atol=1e-5)


def test_grad_with_respect_to_a_non_leaf_walks_no_further(device):
    """Gradients with respect to a generator's output (a non-leaf): the walk stops there, so nothing before it
    runs (under create_graph, nothing there need be differentiable again), and the root itself may be asked for."""
    def run(L, dev):
        w = L.tensor(_data(0, 4, 3), device=dev, requires_grad=True)
        f = L.nn.functional.linear(L.tensor(_data(1, 2, 3), device=dev), w).tanh()
        y = (f * f * f).sum()
        gf, gy = L.autograd.grad(y, (f, y), create_graph=True)
        (gf * gf).sum().backward()
        return [_np(gf), _np(gy), _np(w.grad)]
    for a, b in zip(run(wg, device), run(torch, "cpu")):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    x = wg.randn(3, device=device, requires_grad=True)
    h = wg.nn.functional.max_pool2d(x.reshape(1, 1, 1, 3), (1, 3)).reshape(1).sinh()  # no second derivative
    (g,) = wg.autograd.grad((h * 2).sum(), h, create_graph=True)  # but it is never reached
    assert g.item() == 2.0
