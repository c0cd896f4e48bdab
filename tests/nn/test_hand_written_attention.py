"""Hand-written attention made cheap: F.dropout as one kernel (the draw of rand(shape) >= p, never stored),
F.softmax of a masked_fill's result as one kernel (kernels.softmax_masked and its backward), and a recorded step's
seal folding the scale before it and the dropout after it in, and dropping the masked_fill nothing reads. PyTorch
parity, finite differences, the same numbers replayed as eager, and the dispatches."""

import math

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn.functional as F
from helpers import DEVICES, VARIANTS, gradcheck, variant as _variant

RNG = np.random.default_rng(4)
WEBGPU = "webgpu" in DEVICES




def _dispatches():
    from webgrad._backends.webgpu.runtime import default_runtime
    return default_runtime().stats["dispatches"]


# ----------------------------------------------------------------------------------------------- dropout

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(10,), (3, 5, 7), (4, 16)])
def test_dropout_draws_what_rand_draws(device, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    x.flat[0] = np.nan  # a dropped NaN is 0, as where(keep, x * s, 0)
    wx = wg.tensor(x, device=device, requires_grad=True)
    wg.manual_seed(7)
    out = F.dropout(wx, 0.3)
    wg.manual_seed(7)
    keep = (wg.rand(*shape, device=device) >= 0.3).cpu().numpy()
    want = np.where(keep, x * np.float32(1 / 0.7), 0).astype(np.float32)
    np.testing.assert_array_equal(out.detach().cpu().numpy(), want)
    g = RNG.standard_normal(shape).astype(np.float32)
    out.backward(wg.tensor(g, device=device))
    np.testing.assert_array_equal(wx.grad.cpu().numpy(), np.where(keep, g * np.float32(1 / 0.7), 0))


@pytest.mark.parametrize("device", DEVICES)
def test_dropout_module_and_edge_probabilities(device):
    x = wg.ones(50, device=device)
    m = wg.nn.Dropout(0.5)
    assert (m(x).cpu().numpy() != 1).any() and (m.eval()(x).cpu().numpy() == 1).all()
    assert (F.dropout(x, 0.0).cpu().numpy() == 1).all() and (F.dropout(x, 1.0).cpu().numpy() == 0).all()
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, 1.5)


@pytest.mark.skipif(not WEBGPU, reason="no WebGPU adapter")
def test_dropout_is_one_dispatch_each_way():
    x = wg.randn(8, 12, device="webgpu", requires_grad=True)
    before = _dispatches()
    y = F.dropout(x, 0.2)
    assert _dispatches() - before == 1
    g = wg.ones(8, 12, device="webgpu")
    before = _dispatches()
    y.grad_fn.backward_fn(g)
    assert _dispatches() - before == 1


# ----------------------------------------------------------------------------------------------- masked softmax

MASKS = [("causal", (2, 3, 6, 6), lambda: np.tril(np.ones((6, 6))).reshape(1, 1, 6, 6) == 0),
         ("padding", (2, 3, 5, 7), lambda: RNG.random((2, 1, 1, 7)) < 0.3),
         ("two_dims", (5, 9), lambda: RNG.random((5, 9)) < 0.3),
         ("five_dims", (2, 2, 2, 3, 4), lambda: RNG.random((2, 1, 3, 4)) < 0.3)]


@pytest.mark.parametrize("device,software", VARIANTS)
@pytest.mark.parametrize("name,shape,mask", MASKS, ids=[m[0] for m in MASKS])
@pytest.mark.parametrize("value", [float("-inf"), -1e4, 0.5])
def test_softmax_of_masked_fill_matches_torch(device, software, name, shape, mask, value):
    x = RNG.standard_normal(shape).astype(np.float32)
    m = mask()
    m[..., 0] = False  # no row fully masked (that row is NaN: see test_a_fully_masked_row_is_nan)
    g = RNG.standard_normal(shape).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.softmax((tx * 0.7).masked_fill(torch.tensor(m), value), dim=-1)
    (ty * torch.tensor(g)).sum().backward()
    with _variant(device, software):
        wx = wg.tensor(x, device=device, requires_grad=True)
        wy = F.softmax((wx * 0.7).masked_fill(wg.tensor(m, device=device), value), dim=-1)
        assert wy.grad_fn.name == "Softmax" and wy.grad_fn.inputs  # straight to the masked_fill's input
        (wy * wg.tensor(g, device=device)).sum().backward()
    np.testing.assert_allclose(wy.detach().cpu().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(wx.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_a_fully_masked_row_is_nan(device):
    m = np.zeros((2, 4), bool)
    m[1] = True
    out = F.softmax(wg.zeros(2, 4, device=device).masked_fill(wg.tensor(m, device=device), float("-inf")), dim=-1)
    ref = torch.softmax(torch.zeros(2, 4).masked_fill(torch.tensor(m), float("-inf")), dim=-1)
    np.testing.assert_array_equal(out.cpu().numpy(), ref.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_finite_differences(device):
    m = np.array([[False, True, False, False], [False, False, False, True], [False, False, True, True]])
    gradcheck(lambda x: F.softmax(x.masked_fill(wg.tensor(m, device=x.device), float("-inf")), dim=-1),
              RNG.standard_normal((3, 4)), device=device)


@pytest.mark.parametrize("device", DEVICES)
def test_other_dims_and_uses_keep_the_plain_ops(device):
    x = wg.tensor(RNG.standard_normal((3, 4)).astype(np.float32), device=device, requires_grad=True)
    masked = x.masked_fill(wg.tensor(RNG.random((3, 4)) < 0.3, device=device), -2.0)
    assert F.softmax(masked, dim=0).grad_fn.name == "Softmax"
    np.testing.assert_allclose(F.softmax(masked, dim=0).detach().cpu().numpy(),
                               torch.softmax(torch.tensor(masked.detach().cpu().numpy()), 0).numpy(), rtol=1e-5)
    (F.softmax(masked, dim=-1).sum() + masked.sum()).backward()  # the masked result used twice: both gradients
    want = torch.tensor(x.detach().cpu().numpy(), requires_grad=True)
    tm = want.masked_fill(torch.tensor((masked == -2.0).cpu().numpy()), -2.0)
    (torch.softmax(tm, -1).sum() + tm.sum()).backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), want.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not WEBGPU, reason="no WebGPU adapter")
@pytest.mark.parametrize("software", [True, False])
def test_masked_softmax_is_one_dispatch_each_way(software):
    with _variant("webgpu", software):
        x = wg.randn(2, 2, 5, 5, device="webgpu", requires_grad=True)
        masked = x.masked_fill(wg.tril(wg.ones(5, 5, device="webgpu")) == 0, float("-inf"))
        before = _dispatches()
        y = F.softmax(masked, dim=-1)
        assert _dispatches() - before == 1
        g = wg.ones(2, 2, 5, 5, device="webgpu")
        before = _dispatches()
        y.grad_fn.backward_fn(g)
        assert _dispatches() - before == 1


# ----------------------------------------------------------------------------------------------- a recorded step

def _attention_step(device, p):
    """A GPT attention block's core as a training step on a weight: returns (step, weight)."""
    T, hs = 8, 8
    w = wg.tensor(RNG.standard_normal((hs, 3 * hs)).astype(np.float32) * 0.3, device=device, requires_grad=True)
    bias = wg.tril(wg.ones(T, T, device=device)).view(1, 1, T, T)

    def step(x):
        q, k, v = (x @ w).split(hs, dim=-1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.dropout(F.softmax(att, dim=-1), p)
        loss = ((att @ v) ** 2).mean()
        w.grad = None
        loss.backward()
        with wg.no_grad():
            w.sub_(0.1 * w.grad)
        return loss
    return step, w


@pytest.mark.skipif(not WEBGPU, reason="no WebGPU adapter")
@pytest.mark.parametrize("p", [0.0, 0.25])
@pytest.mark.parametrize("software", [True, False])
def test_a_replayed_step_fuses_and_computes_what_eager_computes(p, software):
    x = wg.tensor(RNG.standard_normal((2, 2, 8, 8)).astype(np.float32), device="webgpu")
    with _variant("webgpu", software):
        losses = {}
        for mode in ("eager", "replay"):
            wg.manual_seed(11)
            step, w = _attention_step("webgpu", p)
            w.data = wg.tensor(np.full((8, 24), 0.05, np.float32) + np.arange(24, dtype=np.float32) * 0.01,
                               device="webgpu")
            run = wg.replayable(step) if mode == "replay" else step
            losses[mode] = [run(x).item() for _ in range(5)]
            if mode == "replay":
                graph = run.graph
        np.testing.assert_allclose(losses["replay"], losses["eager"], rtol=1e-6)
        assert graph.dead >= 1  # the masked_fill nothing reads
        # forward: scale + softmax (+ dropout) in one; backward: (dropout +) softmax (+ the scale, where the pool
        # did not give its result the buffer of the gradient it reads)
        assert graph.fused >= (2 if p else 1)
