"""scaled_dot_product_attention, MultiheadAttention and the Transformer encoder against PyTorch (copied
weights): outputs and gradients on every device."""

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn as nn
import webgrad.nn.functional as F

from tests.helpers import DEVICES

RTOL, ATOL = 1e-4, 1e-5


def _close(a, b, rtol=RTOL, atol=ATOL):
    np.testing.assert_allclose(a.detach().to("cpu").numpy() if isinstance(a, wg.Tensor) else a,
                               b.detach().numpy(), rtol=rtol, atol=atol)


def _pair(arr, device, grad=True):
    return (wg.tensor(arr, device=device, requires_grad=grad), torch.tensor(arr, requires_grad=grad))


def _copy_params(wmod, tmod):
    wmod.load_state_dict({k: wg.tensor(v.detach().numpy()) for k, v in tmod.state_dict().items()})


# ------------------------------------------------------------------ scaled_dot_product_attention
SDPA_CASES = [
    ("plain", {}),
    ("scale", {"scale": 0.3}),
    ("causal", {"is_causal": True}),
    ("bool_mask", {"attn_mask": "bool"}),
    ("float_mask", {"attn_mask": "float"}),
    ("gqa", {"enable_gqa": True}),
    ("gqa_causal", {"enable_gqa": True, "is_causal": True}),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,kw", SDPA_CASES, ids=[c[0] for c in SDPA_CASES])
def test_sdpa_matches_torch(device, name, kw):
    rng = np.random.default_rng(0)
    L = S = 5  # square, so is_causal is well defined as in PyTorch
    kv_heads = 1 if kw.get("enable_gqa") else 3  # grouped-query attention: one key/value head for three queries
    arrs = [rng.standard_normal((2, 3, L, 4)).astype(np.float32),
            rng.standard_normal((2, kv_heads, S, 4)).astype(np.float32),
            rng.standard_normal((2, kv_heads, S, 6)).astype(np.float32)]
    pairs = [_pair(a, device) for a in arrs]
    wkw, tkw = dict(kw), dict(kw)
    if kw.get("attn_mask") == "bool":
        m = rng.random((L, S)) > 0.4
        m[:, 0] = True  # every query attends at least one key (a fully masked row is NaN)
        wkw["attn_mask"], tkw["attn_mask"] = wg.tensor(m, device=device), torch.tensor(m)
    elif kw.get("attn_mask") == "float":
        m = rng.standard_normal((1, 3, L, S)).astype(np.float32)
        wkw["attn_mask"], tkw["attn_mask"] = wg.tensor(m, device=device), torch.tensor(m)
    out = F.scaled_dot_product_attention(*(p[0] for p in pairs), **wkw)
    ref = torch.nn.functional.scaled_dot_product_attention(*(p[1] for p in pairs), **tkw)
    _close(out, ref)
    g = rng.standard_normal(ref.shape).astype(np.float32)
    (out * wg.tensor(g, device=device)).sum().backward()
    (ref * torch.tensor(g)).sum().backward()
    for (w, t) in pairs:
        _close(w.grad, t.grad)


def test_sdpa_errors():
    q = wg.randn(2, 3, 4)
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when is_causal=True"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=wg.ones(3, 3), is_causal=True)
    with pytest.raises(RuntimeError, match="same embedding dimension"):
        F.scaled_dot_product_attention(q, wg.randn(2, 3, 5), q)
    with pytest.raises(RuntimeError, match="must divide the number of heads in query"):
        kv = wg.randn(1, 4, 3, 4)
        F.scaled_dot_product_attention(wg.randn(1, 6, 3, 4), kv, kv, enable_gqa=True)
    with pytest.raises(IndexError, match="Dimension out of range"):
        F.scaled_dot_product_attention(q[0], q[0], q[0], enable_gqa=True)


def test_sdpa_dropout_changes_output_and_p0_does_not():
    wg.manual_seed(0)
    q = wg.randn(1, 6, 4)
    plain = F.scaled_dot_product_attention(q, q, q).numpy()
    np.testing.assert_allclose(F.scaled_dot_product_attention(q, q, q, dropout_p=0.0).numpy(), plain)
    assert not np.allclose(F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy(), plain)


# ------------------------------------------------------------------ MultiheadAttention
MHA_CASES = [
    ("seq_first", dict(batch_first=False), {}),
    ("batch_first", dict(batch_first=True), {}),
    ("padding_mask", dict(batch_first=True), {"key_padding_mask": True}),
    ("per_head_weights", dict(batch_first=False), {"average_attn_weights": False}),
    ("no_weights_causal", dict(batch_first=True, bias=False), {"need_weights": False, "causal": True}),
    ("cross_float_mask", dict(batch_first=False), {"cross": True, "float_mask": True}),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,ctor,kw", MHA_CASES, ids=[c[0] for c in MHA_CASES])
def test_multihead_attention_matches_torch(device, name, ctor, kw):
    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    E, H, N, L = 8, 2, 2, 4
    S = 3 if kw.get("cross") else L
    tm = torch.nn.MultiheadAttention(E, H, **ctor)
    wm = nn.MultiheadAttention(E, H, **ctor).to(device)
    _copy_params(wm, tm)
    qshape = (N, L, E) if ctor["batch_first"] else (L, N, E)
    kshape = (N, S, E) if ctor["batch_first"] else (S, N, E)
    xq = _pair(rng.standard_normal(qshape).astype(np.float32), device)
    xk = _pair(rng.standard_normal(kshape).astype(np.float32), device) if kw.get("cross") else xq
    wkw, tkw = {}, {}
    if kw.get("key_padding_mask"):
        m = np.zeros((N, S), bool)
        m[0, -1] = m[1, 1] = True
        wkw["key_padding_mask"], tkw["key_padding_mask"] = wg.tensor(m, device=device), torch.tensor(m)
    if kw.get("causal"):
        m = np.triu(np.ones((L, S), bool), 1)  # True = not allowed, as PyTorch's MultiheadAttention
        wkw["attn_mask"], tkw["attn_mask"] = wg.tensor(m, device=device), torch.tensor(m)
        wkw["is_causal"] = tkw["is_causal"] = True
    if kw.get("float_mask"):
        m = rng.standard_normal((L, S)).astype(np.float32)
        wkw["attn_mask"], tkw["attn_mask"] = wg.tensor(m, device=device), torch.tensor(m)
    for k in ("need_weights", "average_attn_weights"):
        if k in kw:
            wkw[k] = tkw[k] = kw[k]
    out, weights = wm(xq[0], xk[0], xk[0], **wkw)
    ref, ref_w = tm(xq[1], xk[1], xk[1], **tkw)
    _close(out, ref)
    if ref_w is None:
        assert weights is None
    else:
        assert tuple(weights.shape) == tuple(ref_w.shape)
        _close(weights, ref_w)
    g = rng.standard_normal(ref.shape).astype(np.float32)
    (out * wg.tensor(g, device=device)).sum().backward()
    (ref * torch.tensor(g)).sum().backward()
    _close(xq[0].grad, xq[1].grad)
    wparams = dict(wm.named_parameters())
    for pname, tp in tm.named_parameters():
        _close(wparams[pname].grad, tp.grad, atol=1e-4)


def test_multihead_attention_init_and_refusals():
    m = nn.MultiheadAttention(8, 2)
    assert sorted(m.state_dict().keys()) == sorted(torch.nn.MultiheadAttention(8, 2).state_dict().keys())
    assert tuple(m.in_proj_weight.shape) == (24, 8) and tuple(m.in_proj_bias.shape) == (24,)
    assert float(m.in_proj_bias.abs().sum()) == 0.0 and float(m.out_proj.bias.abs().sum()) == 0.0
    bound = (6 / (24 + 8)) ** 0.5  # xavier_uniform_ on [3E, E]
    w = m.in_proj_weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > bound / 2
    assert nn.MultiheadAttention(8, 2, bias=False).in_proj_bias is None
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(7, 2)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        x = wg.randn(3, 1, 8)
        m(x, x, x, is_causal=True)


def test_multihead_attention_unbatched():
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(8, 2)
    wm = nn.MultiheadAttention(8, 2)
    _copy_params(wm, tm)
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    out, w = wm(wg.tensor(x), wg.tensor(x), wg.tensor(x))
    ref, ref_w = tm(torch.tensor(x), torch.tensor(x), torch.tensor(x))
    _close(out, ref)
    _close(w, ref_w)


# ------------------------------------------------------------------ Transformer encoder
LAYER_CASES = [("relu", False, False), ("gelu", True, True), ("relu", True, False), ("gelu", False, True)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("activation,norm_first,batch_first", LAYER_CASES,
                         ids=[f"{a}-nf{int(n)}-bf{int(b)}" for a, n, b in LAYER_CASES])
def test_encoder_layer_matches_torch(device, activation, norm_first, batch_first):
    torch.manual_seed(0)
    kw = dict(dim_feedforward=16, activation=activation, norm_first=norm_first, batch_first=batch_first)
    tl = torch.nn.TransformerEncoderLayer(8, 2, **kw).eval()
    wl = nn.TransformerEncoderLayer(8, 2, **kw).to(device).eval()
    assert sorted(wl.state_dict().keys()) == sorted(tl.state_dict().keys())
    _copy_params(wl, tl)  # loading a torch state_dict
    rng = np.random.default_rng(2)
    x = _pair(rng.standard_normal((2, 5, 8) if batch_first else (5, 2, 8)).astype(np.float32), device)
    m = np.zeros((2, 5), bool)
    m[1, -2:] = True
    out = wl(x[0], src_key_padding_mask=wg.tensor(m, device=device))
    ref = tl(x[1], src_key_padding_mask=torch.tensor(m))
    _close(out, ref, atol=1e-4)
    g = rng.standard_normal(ref.shape).astype(np.float32)
    (out * wg.tensor(g, device=device)).sum().backward()
    (ref * torch.tensor(g)).sum().backward()
    _close(x[0].grad, x[1].grad, atol=1e-4)
    wparams = dict(wl.named_parameters())
    for pname, tp in tl.named_parameters():
        _close(wparams[pname].grad, tp.grad, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_encoder_stack_loads_torch_state_dict(device):
    torch.manual_seed(0)
    tenc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16), 2,
                                       norm=torch.nn.LayerNorm(8), enable_nested_tensor=False).eval()
    wenc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16), 2, norm=nn.LayerNorm(8))
    wenc = wenc.to(device).eval()
    assert sorted(wenc.state_dict().keys()) == sorted(tenc.state_dict().keys())
    # the layers are deep copies: distinct parameters
    assert wenc.layers[0].linear1.weight is not wenc.layers[1].linear1.weight
    _copy_params(wenc, tenc)
    x = np.random.default_rng(3).standard_normal((6, 2, 8)).astype(np.float32)
    mask = np.triu(np.full((6, 6), -np.inf, np.float32), 1)
    out = wenc(wg.tensor(x, device=device), mask=wg.tensor(mask, device=device))
    with torch.no_grad():
        ref = tenc(torch.tensor(x), mask=torch.tensor(mask))
    _close(out, ref, atol=1e-4)


def test_encoder_layer_activation_errors_and_callable():
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=4, activation=F.silu).eval()
    assert layer.activation is F.silu
    assert tuple(layer(wg.randn(3, 1, 8)).shape) == (3, 1, 8)


@pytest.mark.parametrize("device", DEVICES)
def test_encoder_layer_trains_with_dropout(device):
    """In training mode dropout is on (outputs differ from eval) and an SGD step lowers a simple loss."""
    wg.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.2, batch_first=True).to(device)
    x = wg.randn(2, 5, 8, device=device)
    target = wg.randn(2, 5, 8, device=device)
    layer.eval()
    assert not np.allclose(layer(x).detach().to("cpu").numpy(), layer.train()(x).detach().to("cpu").numpy())
    layer.eval()  # the step itself without dropout, so the loss comparison is deterministic
    opt = wg.optim.SGD(layer.parameters(), lr=0.05)
    before = float(F.mse_loss(layer(x), target))
    for _ in range(3):
        opt.zero_grad()
        F.mse_loss(layer(x), target).backward()
        opt.step()
    assert all(p.grad is not None for p in layer.parameters())
    assert float(F.mse_loss(layer(x), target)) < before
