"""nn.MultiheadAttention's options (kdim / vdim, add_bias_kv, add_zero_attn, masks, batch_first, unbatched
inputs, is_causal) and F.multi_head_attention_forward against PyTorch: outputs, weights and gradients from the same
weights (torch's state_dict loaded into webgrad's module), parameter layout, and PyTorch's errors."""

import warnings

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn as nn
import webgrad.nn.functional as F

from tests.helpers import DEVICES

E, H = 8, 2


def _close(a, b, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(a.detach().to("cpu").numpy(), b.detach().numpy(), rtol=rtol, atol=atol)


def _modules(**kw):
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(E, H, **kw)
    wm = nn.MultiheadAttention(E, H, **kw)
    wm.load_state_dict({k: wg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return wm, tm


def _inputs(rng, shapes, device):
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    return ([wg.tensor(a, device=device, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


def _mask_pair(array, device):
    return wg.tensor(array, device=device), torch.tensor(array)


def _compare(wm, tm, wins, tins, device="cpu", **kw):
    """Both modules on the same inputs: outputs, weights, and the gradients of inputs and parameters."""
    wm.to(device)
    wkw = {k: v[0] if isinstance(v, tuple) else v for k, v in kw.items()}
    tkw = {k: v[1] if isinstance(v, tuple) else v for k, v in kw.items()}
    wq, wk, wv = wins
    tq, tk, tv = tins
    out, weights = wm(wq, wk, wv, **wkw)
    ref, ref_weights = tm(tq, tk, tv, **tkw)
    _close(out, ref)
    if ref_weights is None:
        assert weights is None
    else:
        assert tuple(weights.shape) == tuple(ref_weights.shape)
        _close(weights, ref_weights)
    g = np.random.default_rng(1).standard_normal(tuple(ref.shape)).astype(np.float32)
    (out * wg.tensor(g, device=device)).sum().backward()
    (ref * torch.tensor(g)).sum().backward()
    for w, t in zip(wins, tins):
        if t.grad is not None:
            _close(w.grad, t.grad, atol=1e-4)
    wparams = dict(wm.named_parameters())
    for name, tp in tm.named_parameters():
        _close(wparams[name].grad, tp.grad, atol=1e-4)


# ------------------------------------------------------------------ the module against PyTorch

@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("batch_first", [False, True])
def test_kdim_vdim_cross_attention(need_weights, batch_first):
    wm, tm = _modules(kdim=5, vdim=3, batch_first=batch_first)
    L, S, N = 4, 6, 2
    shapes = [(N, L, E), (N, S, 5), (N, S, 3)] if batch_first else [(L, N, E), (S, N, 5), (S, N, 3)]
    wins, tins = _inputs(np.random.default_rng(0), shapes, "cpu")
    _compare(wm, tm, wins, tins, need_weights=need_weights)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_bias_kv_and_zero_attn_with_masks(need_weights, mask_kind):
    wm, tm = _modules(add_bias_kv=True, add_zero_attn=True)
    rng = np.random.default_rng(2)
    L, S, N = 3, 5, 2
    wins, tins = _inputs(rng, [(L, N, E), (S, N, E), (S, N, E)], "cpu")
    padding = np.zeros((N, S), dtype=bool)
    padding[1, 3:] = True
    causal = np.triu(np.ones((L, S), dtype=bool), 1)
    if mask_kind == "float":
        padding, causal = (np.where(m, -np.inf, 0.0).astype(np.float32) for m in (padding, causal))
    _compare(wm, tm, wins, tins, need_weights=need_weights, key_padding_mask=_mask_pair(padding, "cpu"),
             attn_mask=_mask_pair(causal, "cpu"))


def test_bias_kv_only_self_attention_3d_mask_per_head_weights():
    wm, tm = _modules(add_bias_kv=True, batch_first=True)
    rng = np.random.default_rng(3)
    L, N = 4, 2
    wx, tx = _inputs(rng, [(N, L, E)], "cpu")
    mask = rng.standard_normal((N * H, L, L)).astype(np.float32)
    _compare(wm, tm, wx * 3, tx * 3, attn_mask=_mask_pair(mask, "cpu"), average_attn_weights=False)


def test_zero_attn_without_bias_encoder_decoder():
    wm, tm = _modules(add_zero_attn=True, bias=False)
    rng = np.random.default_rng(4)
    L, S, N = 3, 4, 2
    (wq, wkv), (tq, tkv) = _inputs(rng, [(L, N, E), (S, N, E)], "cpu")
    padding = np.zeros((N, S), dtype=bool)
    padding[0, -1] = True
    _compare(wm, tm, [wq, wkv, wkv], [tq, tkv, tkv], key_padding_mask=_mask_pair(padding, "cpu"))


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("with_padding", [False, True])
def test_is_causal_with_the_causal_mask(need_weights, with_padding):
    # without a key padding mask and weights, is_causal replaces the mask (the kernels' causal path)
    wm, tm = _modules(batch_first=True)
    rng = np.random.default_rng(5)
    L, N = 5, 2
    wx, tx = _inputs(rng, [(N, L, E)], "cpu")
    kw = {"attn_mask": _mask_pair(np.triu(np.ones((L, L), dtype=bool), 1), "cpu"), "is_causal": True,
          "need_weights": need_weights}
    if with_padding:
        padding = np.zeros((N, L), dtype=bool)
        padding[1, -2:] = True
        kw["key_padding_mask"] = _mask_pair(padding, "cpu")
    _compare(wm, tm, wx * 3, tx * 3, **kw)


@pytest.mark.parametrize("need_weights", [True, False])
def test_unbatched_with_every_option(need_weights):
    wm, tm = _modules(kdim=6, vdim=4, add_bias_kv=True, add_zero_attn=True, batch_first=True)
    rng = np.random.default_rng(6)
    L, S = 3, 5
    wins, tins = _inputs(rng, [(L, E), (S, 6), (S, 4)], "cpu")
    padding = np.array([0.0, 0.0, -np.inf, 0.0, -1.5], dtype=np.float32)
    mask = rng.standard_normal((H, L, S)).astype(np.float32)
    _compare(wm, tm, wins, tins, need_weights=need_weights, key_padding_mask=_mask_pair(padding, "cpu"),
             attn_mask=_mask_pair(mask, "cpu"), average_attn_weights=False)


def test_dropout_returns_the_weights_it_applied():
    wm, _ = _modules(dropout=0.5)
    x = wg.randn(4, 2, E)
    wm.eval()
    _, kept = wm(x, x, x)
    wm.train()
    wg.manual_seed(0)
    _, dropped = wm(x, x, x, average_attn_weights=False)
    dropped = dropped.detach().numpy()
    assert (dropped == 0).any() and (dropped != 0).any()
    wm.eval()
    _, full = wm(x, x, x, average_attn_weights=False)
    nonzero = dropped != 0
    full, kept = full.detach().numpy(), kept.detach().numpy()
    np.testing.assert_allclose(dropped[nonzero], full[nonzero] / 0.5, rtol=1e-5)
    np.testing.assert_allclose(full.mean(1), kept, rtol=1e-5)


def test_without_weights_goes_through_scaled_dot_product_attention(monkeypatch):
    calls = []
    sdpa = F.scaled_dot_product_attention

    def counted(*args, **kwargs):
        calls.append(args[3] is None)
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counted)
    wm, _ = _modules(kdim=4, vdim=4)
    x, kv = wg.randn(3, 2, E), wg.randn(5, 2, 4)
    wm(x, kv, kv, need_weights=False)
    wm(x, kv, kv, need_weights=True)
    assert calls == [True]


# ------------------------------------------------------------------ parameters

@pytest.mark.parametrize("kw", [{}, {"kdim": 5, "vdim": 3}, {"add_bias_kv": True, "bias": False},
                                {"kdim": 6, "add_bias_kv": True, "add_zero_attn": True}])
def test_parameters_are_laid_out_as_torch(kw):
    wm, tm = _modules(**kw)
    assert list(wm.state_dict()) == list(tm.state_dict())
    for (name, p), (tname, tp) in zip(wm.named_parameters(), tm.named_parameters()):
        assert name == tname and tuple(p.shape) == tuple(tp.shape)
    for attr in ("kdim", "vdim", "_qkv_same_embed_dim", "add_zero_attn", "head_dim"):
        assert getattr(wm, attr) == getattr(tm, attr)
    for attr in ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias",
                 "bias_k", "bias_v"):
        assert (getattr(wm, attr) is None) == (getattr(tm, attr) is None)


def test_init_draws_as_torch():
    m = nn.MultiheadAttention(64, 4, kdim=32, vdim=16, add_bias_kv=True)
    for name, fan_in in (("q_proj_weight", 64), ("k_proj_weight", 32), ("v_proj_weight", 16)):
        w = getattr(m, name).detach().numpy()
        bound = (6 / (64 + fan_in)) ** 0.5  # xavier_uniform_ on [E, fan_in]
        assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert float(m.in_proj_bias.abs().sum()) == 0.0 and float(m.out_proj.bias.abs().sum()) == 0.0
    both = np.concatenate([m.bias_k.detach().numpy().ravel(), m.bias_v.detach().numpy().ravel()])
    assert 0.6 * 64 ** -0.5 < both.std() < 1.4 * 64 ** -0.5  # xavier_normal_ on [1, 1, E]: std sqrt(2 / 2E)


# ------------------------------------------------------------------ F.multi_head_attention_forward

def _functional_args(tm):
    return {name: wg.tensor(t.detach().numpy(), requires_grad=True) for name, t in tm.named_parameters()}


def test_functional_static_kv_and_separate_weights():
    torch.manual_seed(1)
    tm = torch.nn.MultiheadAttention(E, H, kdim=5, vdim=5)
    rng = np.random.default_rng(7)
    L, S, N = 3, 4, 2
    arrays = [rng.standard_normal(s).astype(np.float32) for s in
              [(L, N, E), (S, N, 5), (S, N, 5), (N * H, 6, E // H), (N * H, 6, E // H)]]
    padding = np.zeros((N, 6), dtype=bool)
    padding[1, 0] = True
    wp = _functional_args(tm)
    tp = dict(tm.named_parameters())

    def call(lib, ts, p, mask):
        f = lib.nn.functional.multi_head_attention_forward
        return f(ts[0], ts[1], ts[2], E, H, None, p["in_proj_bias"], None, None, False, 0.0, p["out_proj.weight"],
                 p["out_proj.bias"], key_padding_mask=mask, use_separate_proj_weight=True,
                 q_proj_weight=p["q_proj_weight"], k_proj_weight=p["k_proj_weight"],
                 v_proj_weight=p["v_proj_weight"], static_k=ts[3], static_v=ts[4])

    wts = [wg.tensor(a, requires_grad=True) for a in arrays]
    tts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, weights = call(wg, wts, wp, wg.tensor(padding))
    ref, ref_weights = call(torch, tts, tp, torch.tensor(padding))
    _close(out, ref)
    _close(weights, ref_weights)
    out.sum().backward()
    ref.sum().backward()
    for w, t in zip([wts[0], wts[3], wts[4]], [tts[0], tts[3], tts[4]]):
        _close(w.grad, t.grad, atol=1e-4)
    for name in tp:
        if tp[name].grad is not None:
            _close(wp[name].grad, tp[name].grad, atol=1e-4)


def test_functional_packed_weights_in_training_without_dropout():
    torch.manual_seed(2)
    tm = torch.nn.MultiheadAttention(E, H, add_bias_kv=True)
    wp = _functional_args(tm)
    tp = dict(tm.named_parameters())
    x = np.random.default_rng(8).standard_normal((3, 2, E)).astype(np.float32)

    def call(lib, x, p):
        return lib.nn.functional.multi_head_attention_forward(
            x, x, x, E, H, p["in_proj_weight"], p["in_proj_bias"], p["bias_k"], p["bias_v"], True, 0.0,
            p["out_proj.weight"], p["out_proj.bias"], need_weights=False)

    out, none = call(wg, wg.tensor(x), wp)
    ref, _ = call(torch, torch.tensor(x), tp)
    assert none is None
    _close(out, ref)


# ------------------------------------------------------------------ errors, as PyTorch raises them

ERROR_CASES = {
    "not divisible": lambda lib: lib.nn.MultiheadAttention(6, 4),
    "zero heads": lambda lib: lib.nn.MultiheadAttention(6, 0),
    "4-D query": lambda lib: lib.nn.MultiheadAttention(4, 2)(*[lib.zeros(1, 2, 3, 4)] * 3),
    "2-D key for 3-D query": lambda lib: lib.nn.MultiheadAttention(4, 2)(lib.zeros(3, 1, 4), *[lib.zeros(3, 4)] * 2),
    "wrong embed dim": lambda lib: lib.nn.MultiheadAttention(4, 2)(*[lib.zeros(3, 1, 6)] * 3),
    "int mask": lambda lib: lib.nn.MultiheadAttention(4, 2)(*[lib.zeros(3, 1, 4)] * 3,
                                                             attn_mask=lib.zeros(3, 3, dtype=lib.int64)),
    "2-D mask shape": lambda lib: lib.nn.MultiheadAttention(4, 2)(*[lib.zeros(3, 1, 4)] * 3,
                                                                  attn_mask=lib.zeros(3, 4)),
    "3-D mask shape": lambda lib: lib.nn.MultiheadAttention(4, 2)(*[lib.zeros(3, 2, 4)] * 3,
                                                                  attn_mask=lib.zeros(2, 3, 3)),
    "padding shape": lambda lib: lib.nn.MultiheadAttention(4, 2)(*[lib.zeros(3, 2, 4)] * 3,
                                                                 key_padding_mask=lib.zeros(2, 4, dtype=lib.bool)),
    "key value shapes": lambda lib: lib.nn.MultiheadAttention(4, 2)(lib.zeros(3, 1, 4), lib.zeros(3, 1, 4),
                                                                    lib.zeros(2, 1, 4)),
    "kdim width": lambda lib: lib.nn.MultiheadAttention(4, 2, kdim=3)(*[lib.zeros(3, 1, 4)] * 3),
    "is_causal without mask": lambda lib: lib.nn.MultiheadAttention(4, 2)(*[lib.zeros(3, 1, 4)] * 3,
                                                                          is_causal=True),
    "bias_k without bias_v": lambda lib: lib.nn.functional.multi_head_attention_forward(
        *[lib.zeros(3, 1, 4)] * 3, 4, 2, lib.zeros(12, 4), None, lib.zeros(1, 1, 4), None, False, 0.0,
        lib.zeros(4, 4), None),
    "bias with static_k": lambda lib: lib.nn.functional.multi_head_attention_forward(
        *[lib.zeros(3, 1, 4)] * 3, 4, 2, lib.zeros(12, 4), None, lib.zeros(1, 1, 4), lib.zeros(1, 1, 4), False,
        0.0, lib.zeros(4, 4), None, static_k=lib.zeros(2, 3, 2)),
    "static_k heads": lambda lib: lib.nn.functional.multi_head_attention_forward(
        *[lib.zeros(3, 1, 4)] * 3, 4, 2, lib.zeros(12, 4), None, None, None, False, 0.0, lib.zeros(4, 4), None,
        static_k=lib.zeros(3, 3, 2)),
    "no in_proj_weight": lambda lib: lib.nn.functional.multi_head_attention_forward(
        *[lib.zeros(3, 1, 4)] * 3, 4, 2, None, None, None, None, False, 0.0, lib.zeros(4, 4), None),
}


@pytest.mark.parametrize("name", list(ERROR_CASES))
def test_errors_as_torch(name):
    call = ERROR_CASES[name]
    with pytest.raises(Exception) as ref:
        call(torch)
    with pytest.raises(type(ref.value)) as got:
        call(wg)
    assert type(got.value) is type(ref.value)
    # the messages agree up to how a shape prints (torch.Size([2, 4]) where webgrad prints (2, 4))
    expected = str(ref.value).replace("torch.Size([", "(").replace("])", ")")
    assert str(got.value) == expected


def test_mismatched_mask_types_warn_as_torch():
    m = nn.MultiheadAttention(4, 2)
    x = wg.zeros(3, 1, 4)
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and attn_mask is deprecated"):
        m(x, x, x, key_padding_mask=wg.zeros(1, 3, dtype=wg.bool), attn_mask=wg.zeros(3, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m(x, x, x, key_padding_mask=wg.zeros(1, 3, dtype=wg.bool), attn_mask=wg.zeros(3, 3, dtype=wg.bool))


# ------------------------------------------------------------------ webgpu

@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
@pytest.mark.parametrize("need_weights", [True, False])
def test_options_on_device(device, need_weights):
    wm, tm = _modules(kdim=6, vdim=4, add_bias_kv=True, add_zero_attn=True, batch_first=True)
    rng = np.random.default_rng(9)
    N, L, S = 2, 3, 5
    wins, tins = _inputs(rng, [(N, L, E), (N, S, 6), (N, S, 4)], device)
    padding = np.zeros((N, S), dtype=bool)
    padding[1, 2:] = True
    _compare(wm, tm, wins, tins, device=device, need_weights=need_weights,
             key_padding_mask=_mask_pair(padding, device))
