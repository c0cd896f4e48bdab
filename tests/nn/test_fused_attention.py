"""Fused attention (kernels attention / attention_backward, F.scaled_dot_product_attention): PyTorch parity on every
device and both WebGPU variants (tiled, untiled), masks and their broadcasts, strided q/k/v (a GPT's split of one
projection), head sizes that take several output slices or two key passes, dropout that draws what F.dropout of
the weights draws, finite differences, and the dispatches a forward and a backward take."""

import math

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn.functional as F
from helpers import DEVICES, VARIANTS, gradcheck, variant as _variant

RNG = np.random.default_rng(2)




def _run_both(device, software, shapes, kw, mask=None):
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    wkw, tkw = dict(kw), dict(kw)
    if mask is not None:
        wkw["attn_mask"], tkw["attn_mask"] = wg.tensor(mask, device=device), torch.tensor(mask)
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    ref = torch.nn.functional.scaled_dot_product_attention(*ts, **tkw)
    g = RNG.standard_normal(tuple(ref.shape)).astype(np.float32)
    (ref * torch.tensor(g)).sum().backward()
    with _variant(device, software):
        ws = [wg.tensor(a, device=device, requires_grad=True) for a in arrays]
        out = F.scaled_dot_product_attention(*ws, **wkw)
        assert out.grad_fn.name == "ScaledDotProductAttention"
        (out * wg.tensor(g, device=device)).sum().backward()
    np.testing.assert_allclose(out.detach().cpu().numpy(), ref.detach().numpy(), rtol=1e-4, atol=2e-5)
    for w, t in zip(ws, ts):
        np.testing.assert_allclose(w.grad.cpu().numpy(), t.grad.numpy(), rtol=1e-4, atol=3e-5)


CASES = [
    ("causal", [(2, 3, 7, 8), (2, 3, 7, 8), (2, 3, 7, 8)], {"is_causal": True}, None),
    ("causal_long", [(1, 2, 70, 4), (1, 2, 70, 4), (1, 2, 70, 4)], {"is_causal": True}, None),
    ("rectangular_causal", [(1, 2, 6, 8), (1, 2, 9, 8), (1, 2, 9, 4)], {"is_causal": True}, None),
    ("scale", [(2, 2, 5, 12), (2, 2, 6, 12), (2, 2, 6, 8)], {"scale": 0.3}, None),
    ("three_dims", [(3, 5, 8), (3, 5, 8), (3, 5, 8)], {}, None),
    ("two_dims", [(5, 8), (6, 8), (6, 4)], {}, None),
    ("bool_mask", [(2, 2, 5, 8), (2, 2, 6, 8), (2, 2, 6, 8)], {}, "bool"),
    ("float_mask", [(2, 2, 5, 8), (2, 2, 6, 8), (2, 2, 6, 8)], {}, "float"),
    ("padding_mask", [(2, 2, 5, 8), (2, 2, 6, 8), (2, 2, 6, 8)], {}, "padding"),
    ("broadcast_kv", [(2, 3, 5, 8), (1, 3, 6, 8), (2, 1, 6, 8)], {}, None),
    ("wide_values", [(1, 2, 9, 16), (1, 2, 9, 16), (1, 2, 9, 96)], {"is_causal": True}, None),
    ("head_64", [(1, 2, 9, 64), (1, 2, 9, 64), (1, 2, 9, 64)], {"is_causal": True}, None),
]


def _mask(kind):
    if kind == "bool":
        m = RNG.random((5, 6)) < 0.7
        m[:, 0] = True
        return m
    if kind == "float":
        m = RNG.standard_normal((2, 1, 5, 6)).astype(np.float32)
        m[0, 0, 1, 3] = -np.inf
        return m
    if kind == "padding":
        m = np.ones((2, 1, 1, 6), bool)
        m[0, ..., 4:] = False
        return m
    return None


@pytest.mark.parametrize("device,software", VARIANTS)
@pytest.mark.parametrize("name,shapes,kw,mask", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(device, software, name, shapes, kw, mask):
    _run_both(device, software, shapes, kw, _mask(mask))


@pytest.mark.parametrize("device,software", VARIANTS)
def test_a_gpts_strided_heads(device, software):
    """q, k, v split from one [B, T, 3C] projection and viewed as heads: read in place, without copies."""
    B, T, C, nh = 2, 6, 32, 4
    x = RNG.standard_normal((B, T, 3 * C)).astype(np.float32)
    g = RNG.standard_normal((B, nh, T, C // nh)).astype(np.float32)

    def run(lib, t):
        q, k, v = t.split(C, dim=2)
        q, k, v = (u.view(B, T, nh, C // nh).transpose(1, 2) for u in (q, k, v))
        if lib is torch:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    tx = torch.tensor(x, requires_grad=True)
    (run(torch, tx) * torch.tensor(g)).sum().backward()
    with _variant(device, software):
        wx = wg.tensor(x, device=device, requires_grad=True)
        out = run(wg, wx)
        (out * wg.tensor(g, device=device)).sum().backward()
    np.testing.assert_allclose(out.detach().cpu().numpy(), run(torch, torch.tensor(x)).numpy(), rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(wx.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-4, atol=3e-5)


@pytest.mark.parametrize("device,software", VARIANTS)
def test_dropout_draws_what_f_dropout_draws(device, software):
    """The kernels' dropout keeps what F.dropout(softmax(...)) keeps from the same generator state."""
    shapes = [(2, 2, 9, 8), (2, 2, 9, 8), (2, 2, 9, 8)]
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    g = RNG.standard_normal((2, 2, 9, 8)).astype(np.float32)

    def composed():
        q, k, v = (wg.tensor(a, device=device, requires_grad=True) for a in arrays)
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(8))
        s = s.masked_fill(wg.tril(wg.ones(9, 9, device=device)) == 0, float("-inf"))
        out = F.dropout(F.softmax(s, dim=-1), 0.3) @ v
        (out * wg.tensor(g, device=device)).sum().backward()
        return [out.detach().cpu().numpy()] + [t.grad.cpu().numpy() for t in (q, k, v)]

    def fused():
        q, k, v = (wg.tensor(a, device=device, requires_grad=True) for a in arrays)
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, is_causal=True)
        (out * wg.tensor(g, device=device)).sum().backward()
        return [out.detach().cpu().numpy()] + [t.grad.cpu().numpy() for t in (q, k, v)]

    with _variant(device, software):
        wg.manual_seed(5)
        want = composed()
        wg.manual_seed(5)
        got = fused()
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kw", [{"is_causal": True}, {"dropout_p": 0.25}], ids=["causal", "dropout"])
def test_finite_differences(device, kw):
    def f(q, k, v):
        wg.manual_seed(3)  # the same dropout draw at every evaluation
        return F.scaled_dot_product_attention(q, k, v, **kw)
    gradcheck(f, RNG.standard_normal((1, 2, 3, 4)), RNG.standard_normal((1, 2, 3, 4)),
              RNG.standard_normal((1, 2, 3, 4)), device=device)


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
@pytest.mark.parametrize("software", [True, False])
@pytest.mark.parametrize("head,backward", [(8, 2), (64, 3)])
def test_dispatches(software, head, backward):
    """One dispatch forward; backward: attention_dq, then attention_dkv (twice for wide heads: dv, then dk)."""
    from webgrad._backends.webgpu.runtime import default_runtime
    stats = default_runtime().stats
    with _variant("webgpu", software):
        q, k, v = (wg.randn(1, 2, 6, head, device="webgpu", requires_grad=True) for _ in range(3))
        before = stats["dispatches"]
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        assert stats["dispatches"] - before == 1
        g = wg.ones(1, 2, 6, head, device="webgpu")
        before = stats["dispatches"]
        out.grad_fn.backward_fn(g)
        assert stats["dispatches"] - before == backward


@pytest.mark.parametrize("device", DEVICES)
def test_the_encoder_layer_trains_on_the_kernels(device):
    """nn.TransformerEncoderLayer (MultiheadAttention without weights) matches PyTorch through the fused kernels."""
    torch.manual_seed(0)
    tl = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    wl = wg.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).to(device)
    wl.load_state_dict({k: wg.tensor(v.detach().numpy()) for k, v in tl.state_dict().items()})
    x = RNG.standard_normal((2, 5, 16)).astype(np.float32)
    pad = np.zeros((2, 5), bool)
    pad[1, 3:] = True
    tx, wx = torch.tensor(x, requires_grad=True), wg.tensor(x, device=device, requires_grad=True)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5)
    tout = tl(tx, src_mask=mask, src_key_padding_mask=torch.tensor(pad))
    wout = wl(wx, src_mask=wg.tensor(mask.numpy(), device=device), src_key_padding_mask=wg.tensor(pad, device=device))
    np.testing.assert_allclose(wout.detach().cpu().numpy(), tout.detach().numpy(), rtol=1e-4, atol=1e-5)
    tout.sum().backward()
    wout.sum().backward()
    np.testing.assert_allclose(wx.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(wl.self_attn.in_proj_weight.grad.cpu().numpy(), tl.self_attn.in_proj_weight.grad.numpy(),
                               rtol=1e-4, atol=1e-5)
