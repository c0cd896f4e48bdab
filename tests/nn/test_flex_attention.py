"""torch.nn.attention.flex_attention against PyTorch: flex_attention's outputs and logsumexp against torch's own
flex_attention (which runs forward-only on CPU), gradients of q, k, v and of tensors a score_mod captures against
the same mods applied by broadcasting in torch with torch's autograd, BlockMask's block layout, views and printing
against torch's, and torch's errors."""

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from torch.nn.attention import flex_attention as T

import webgrad as wg
from webgrad.nn.attention import flex_attention as W

from tests.helpers import DEVICES


@pytest.fixture(autouse=True)
def _quiet():
    # torch warns that flex_attention runs uncompiled, and both warn (once) that return_lse is deprecated
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _close(w, t, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(w.detach().to("cpu").numpy(), t.detach().numpy(), rtol=rtol, atol=atol)


def _pair(rng, shape, device="cpu", grad=True):
    a = rng.standard_normal(shape).astype(np.float32)
    return wg.tensor(a, device=device, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def _qkv(B=2, Hq=2, Hkv=2, L=10, S=10, E=8, Ev=4, device="cpu", seed=0):
    rng = np.random.default_rng(seed)
    pairs = [_pair(rng, s, device) for s in [(B, Hq, L, E), (B, Hkv, S, E), (B, Hkv, S, Ev)]]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _reference(q, k, v, score_mod=None, mask_mod=None, scale=None):
    """Flex attention by broadcasting in torch, differentiable by torch's autograd (its flex_attention has no CPU
    backward)."""
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.size(-1)) if scale is None else scale)
    B, H, L, S = s.shape
    grids = [torch.arange(n, dtype=torch.int32).view([n if i == d else 1 for i in range(4)])
             for d, n in enumerate((B, H, L, S))]
    if score_mod is not None:
        s = score_mod(s, *grids)
    if mask_mod is not None:
        s = torch.where(mask_mod(*grids), s, -math.inf)
    return torch._safe_softmax(s, -1) @ v


def _torch_flex(tins, **kw):
    with torch.no_grad():
        return T.flex_attention(*[t.detach() for t in tins], **kw)


def _check_grads(wins, tins, out, ref, extra=()):
    rng = np.random.default_rng(5)
    g = rng.standard_normal(tuple(ref.shape)).astype(np.float32)
    (out * wg.tensor(g, device=out.device)).sum().backward()
    (ref * torch.tensor(g)).sum().backward()
    for w, t in list(zip(wins, tins)) + list(extra):
        _close(w.grad, t.grad, rtol=1e-4, atol=1e-5)


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def sliding_window(b, h, q_idx, kv_idx):
    return q_idx - kv_idx <= 3


def unchanged_score(score, b, h, q_idx, kv_idx):
    return score


# --------------------------------------------------------------------------------------- values and gradients

def test_causal_block_mask_matches_torch():
    wins, tins = _qkv(L=10, S=10)
    wm = W.create_block_mask(causal, None, None, 10, 10, device="cpu", BLOCK_SIZE=4)
    tm = T.create_block_mask(causal, None, None, 10, 10, device="cpu", BLOCK_SIZE=4)
    out = W.flex_attention(*wins, block_mask=wm)
    _close(out, _torch_flex(tins, block_mask=tm))
    _check_grads(wins, tins, out, _reference(*tins, mask_mod=causal))


def test_sliding_window_and_relative_bias_with_captured_table():
    """and_masks(causal, window) with a learned relative-position bias table indexed by q_idx - kv_idx: the
    table's gradient flows through the score_mod."""
    L = 12
    wins, tins = _qkv(L=L, S=L, seed=1)
    rng = np.random.default_rng(2)
    w_table, t_table = _pair(rng, (2 * L - 1,))

    def rel_bias(table):
        return lambda score, b, h, q_idx, kv_idx: score + table[q_idx - kv_idx + (L - 1)]

    mask = W.and_masks(causal, sliding_window)
    wm = W.create_block_mask(mask, 2, None, L, L, device="cpu", BLOCK_SIZE=4)
    out = W.flex_attention(*wins, score_mod=rel_bias(w_table), block_mask=wm)
    tm = T.create_block_mask(T.and_masks(causal, sliding_window), 2, None, L, L, device="cpu", BLOCK_SIZE=4)
    _close(out, _torch_flex(tins, score_mod=rel_bias(t_table.detach()), block_mask=tm))
    ref = _reference(*tins, score_mod=rel_bias(t_table), mask_mod=T.and_masks(causal, sliding_window))
    _check_grads(wins, tins, out, ref, extra=[(w_table, t_table)])


def test_alibi_gqa_and_scale():
    """ALiBi slopes per query head (captured, learned) under grouped-query attention, with an explicit scale."""
    wins, tins = _qkv(Hq=4, Hkv=2, L=6, S=9, seed=3)
    w_slopes, t_slopes = wg.tensor([0.5, 0.25, 0.125, 0.0625], requires_grad=True), \
        torch.tensor([0.5, 0.25, 0.125, 0.0625], requires_grad=True)

    def alibi(slopes):
        return lambda score, b, h, q_idx, kv_idx: score + slopes[h] * (kv_idx - q_idx)

    out = W.flex_attention(*wins, score_mod=alibi(w_slopes), enable_gqa=True, scale=0.3)
    _close(out, _torch_flex(tins, score_mod=alibi(t_slopes.detach()), enable_gqa=True, scale=0.3))
    _check_grads(wins, tins, out, _reference(*tins, score_mod=alibi(t_slopes), scale=0.3),
                 extra=[(w_slopes, t_slopes)])


def test_document_mask_padding_and_lse():
    """Document masking with Q_LEN != KV_LEN (queries shorter than keys, BLOCK_SIZE not dividing either): the
    first two queries see no key, so their rows give zero output and a logsumexp of -inf, as torch's."""
    L, S = 7, 11
    docs = [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
    w_docs, t_docs = wg.tensor(docs), torch.tensor(docs)

    def document(doc_ids):
        def mask_mod(b, h, q_idx, kv_idx):
            shifted = q_idx + (S - L)  # queries are the last L positions
            return (doc_ids[shifted] == doc_ids[kv_idx]) & (shifted >= kv_idx) & (q_idx >= 2)
        return mask_mod

    wins, tins = _qkv(L=L, S=S, seed=4)
    wm = W.create_block_mask(document(w_docs), None, None, L, S, device="cpu", BLOCK_SIZE=(2, 3))
    tm = T.create_block_mask(document(t_docs), None, None, L, S, device="cpu", BLOCK_SIZE=(2, 3))
    out, lse = W.flex_attention(*wins, block_mask=wm, return_lse=True)
    t_out, t_lse = _torch_flex(tins, block_mask=tm, return_lse=True)
    _close(out, t_out)
    _close(lse, t_lse)
    assert (out[:, :, :2] == 0).all().item() and (lse[:, :, :2] == -math.inf).all().item()
    out2, aux = W.flex_attention(*wins, block_mask=wm, return_aux=W.AuxRequest(lse=True, max_scores=True))
    _close(aux.lse, t_lse)
    ref_scores = (tins[0] @ tins[1].transpose(-2, -1)) / math.sqrt(8)
    grids = [torch.arange(n, dtype=torch.int32).view([n if i == d else 1 for i in range(4)])
             for d, n in enumerate((2, 2, L, S))]
    _close(aux.max_scores, torch.where(document(t_docs)(*grids), ref_scores, -math.inf).amax(-1))
    _check_grads(wins, tins, out, _reference(*tins, mask_mod=document(t_docs)))


def test_from_kv_blocks_honours_the_block_layout():
    """A hand-made layout is read as PyTorch's kernels read it (torch.compile(flex_attention)): absent blocks are
    masked, full blocks skip mask_mod, partial blocks apply it. (torch's uncompiled CPU flex_attention applies
    mask_mod alone, so the reference is the element mask this layout means, built by hand.)"""
    wins, tins = _qkv(B=1, Hq=1, Hkv=1, L=8, S=8, seed=6)
    layout = dict(kv_num_blocks=[[[1, 1]]], kv_indices=[[[[0, 1], [1, 0]]]],
                  full_kv_num_blocks=[[[1, 0]]], full_kv_indices=[[[[1, 0], [0, 1]]]])
    wm = W.BlockMask.from_kv_blocks(**{k: wg.tensor(v, dtype=wg.int32) for k, v in layout.items()}, BLOCK_SIZE=4,
                                    mask_mod=causal)
    tm = T.BlockMask.from_kv_blocks(**{k: torch.tensor(v, dtype=torch.int32) for k, v in layout.items()},
                                    BLOCK_SIZE=4, mask_mod=causal)
    lower = np.tril(np.ones((4, 4), dtype=bool))
    # row tile 0: kv tile 0 partial (causal), kv tile 1 full; row tile 1: kv tile 1 partial, kv tile 0 absent
    expected = torch.tensor(np.block([[lower, np.ones((4, 4), bool)], [np.zeros((4, 4), bool), lower]]))
    out = W.flex_attention(*wins, block_mask=wm)
    _close(out, _reference(*tins, mask_mod=lambda b, h, q_idx, kv_idx: expected[q_idx, kv_idx]))
    for name in ("q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices"):
        assert getattr(wm, name).tolist() == getattr(tm, name).tolist(), name
    assert wm.to_dense().tolist() == tm.to_dense().tolist() and wm.shape == tm.shape == (1, 1, 8, 8)


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_dtypes_without_a_mask(dtype):
    """float64 computes in float64; float16 computes in float32 and returns float16, its lse float32 (torch's)."""
    wins, tins = _qkv(B=1, L=5, S=5, seed=7)
    wins = [w.detach().to(getattr(wg, dtype)) for w in wins]
    tins = [t.detach().to(getattr(torch, dtype)) for t in tins]
    out, lse = W.flex_attention(*wins, return_lse=True)
    t_out, t_lse = _torch_flex(tins, return_lse=True)
    assert out.dtype == getattr(wg, dtype) and str(lse.dtype).split(".")[-1] == str(t_lse.dtype).split(".")[-1]
    tolerance = dict(rtol=1e-10, atol=1e-12) if dtype == "float64" else dict(rtol=1e-3, atol=1e-3)
    _close(out, t_out, **tolerance)
    _close(lse, t_lse, **tolerance)


# ------------------------------------------------------------------------------------- BlockMask and masks

def test_block_mask_layout_views_and_printing_match_torch():
    def per_batch(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx + b * 3) & (h + kv_idx >= 1)

    wm = W.create_block_mask(per_batch, 2, 2, 9, 13, device="cpu", BLOCK_SIZE=(2, 4))
    tm = T.create_block_mask(per_batch, 2, 2, 9, 13, device="cpu", BLOCK_SIZE=(2, 4))
    for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks",
                 "q_indices", "full_q_num_blocks", "full_q_indices"):
        w, t = getattr(wm, name), getattr(tm, name)
        assert w.dtype == wg.int32 and w.tolist() == t.tolist(), name
    assert wm.to_dense().tolist() == tm.to_dense().tolist()
    assert wm.shape == tm.shape and wm.BLOCK_SIZE == tm.BLOCK_SIZE and wm.numel() == tm.numel()
    assert wm.sparsity() == pytest.approx(tm.sparsity())
    assert str(wm) == str(tm) and wm.to_string(grid_size=2) == tm.to_string(grid_size=2)
    assert repr(wm) == repr(tm).replace("torch.Size", "webgrad.Size")
    for index in (0, (1, 0), (slice(0, 2), 1), (1, slice(None), wg.tensor([2, 0]))):
        t_index = tuple(torch.tensor(i.tolist()) if isinstance(i, wg.Tensor) else i
                        for i in (index if isinstance(index, tuple) else (index,)))
        ws, ts = wm[index], tm[t_index]
        assert ws.kv_num_blocks.tolist() == ts.kv_num_blocks.tolist()
        assert ws.q_indices.tolist() == ts.q_indices.tolist() and ws.shape == ts.shape
    wa, ta = wm._adjust(5, 6), tm._adjust(5, 6)
    assert wa.kv_num_blocks.tolist() == ta.kv_num_blocks.tolist() and wa.shape == ta.shape
    assert wa.full_kv_num_blocks.tolist() == ta.full_kv_num_blocks.tolist()
    unsplit = W.create_block_mask(per_batch, 2, 2, 9, 13, device="cpu", BLOCK_SIZE=4, separate_full_blocks=False)
    t_unsplit = T.create_block_mask(per_batch, 2, 2, 9, 13, device="cpu", BLOCK_SIZE=4, separate_full_blocks=False)
    assert unsplit.full_kv_num_blocks is None and unsplit.kv_indices.tolist() == t_unsplit.kv_indices.tolist()


def test_create_mask_and_combinators_match_torch():
    for w_fn, t_fn in ((W.or_masks(causal, sliding_window), T.or_masks(causal, sliding_window)),
                       (W.and_masks(causal, sliding_window), T.and_masks(causal, sliding_window)),
                       (W.noop_mask, T.noop_mask)):
        w, t = W.create_mask(w_fn, 2, 3, 5, 7, device="cpu"), T.create_mask(t_fn, 2, 3, 5, 7, device="cpu")
        assert w.dtype == wg.bool and w.shape == t.shape and w.tolist() == t.tolist()

    def neg_inf_above_diagonal(score, b, h, q_idx, kv_idx):
        return score.masked_fill(kv_idx > q_idx, -math.inf)

    w = W.create_mask(neg_inf_above_diagonal, None, None, 4, 6, device="cpu")
    t = T.create_mask(neg_inf_above_diagonal, None, None, 4, 6, device="cpu")
    assert w.tolist() == t.tolist()


# ------------------------------------------------------------------------------------------------- errors

def _same_error(w_call, t_call):
    with pytest.raises(Exception) as t_err:
        t_call()
    with pytest.raises(type(t_err.value)) as w_err:
        w_call()
    assert str(w_err.value) == str(t_err.value)


def test_errors_as_torch():
    wq, tq = _pair(np.random.default_rng(0), (1, 4, 8, 8), grad=False)
    wk, tk = _pair(np.random.default_rng(1), (1, 3, 8, 8), grad=False)
    _same_error(lambda: W.flex_attention(wq, wk, wk), lambda: T.flex_attention(tq, tk, tk))
    _same_error(lambda: W.flex_attention(wq, wk, wk, enable_gqa=True),
                lambda: T.flex_attention(tq, tk, tk, enable_gqa=True))
    _same_error(lambda: W.flex_attention(wq, wq[..., :4], wq), lambda: T.flex_attention(tq, tq[..., :4], tq))
    _same_error(lambda: W.flex_attention(wq[0], wq[0], wq[0]), lambda: T.flex_attention(tq[0], tq[0], tq[0]))
    _same_error(lambda: W.flex_attention(wq, wq, wq, return_lse=True, return_aux=W.AuxRequest(lse=True)),
                lambda: T.flex_attention(tq, tq, tq, return_lse=True, return_aux=T.AuxRequest(lse=True)))
    for length in (4, 16):
        wm = W.create_block_mask(causal, None, None, length, length, device="cpu")
        tm = T.create_block_mask(causal, None, None, length, length, device="cpu")
        _same_error(lambda: W.flex_attention(wq, wq, wq, block_mask=wm),
                    lambda: T.flex_attention(tq, tq, tq, block_mask=tm))
    wm = W.create_block_mask(causal, 1, 4, 8, 8, device="cpu", BLOCK_SIZE=4)
    tm = T.create_block_mask(causal, 1, 4, 8, 8, device="cpu", BLOCK_SIZE=4)
    _same_error(lambda: W.flex_attention(wq, wq, wq, block_mask=wm[:, 1:3]),
                lambda: T.flex_attention(tq, tq, tq, block_mask=tm[:, 1:3]))
    _same_error(lambda: W.create_block_mask(unchanged_score, None, None, 8, 8, device="cpu"),
                lambda: T.create_block_mask(unchanged_score, None, None, 8, 8, device="cpu"))
    _same_error(lambda: W.and_masks(causal, 3), lambda: T.and_masks(causal, 3))
    _same_error(lambda: W.create_mask(lambda b, h: b, 1, 1, 2, 2, device="cpu"),
                lambda: T.create_mask(lambda b, h: b, 1, 1, 2, 2, device="cpu"))


def test_mods_that_cannot_broadcast_are_named():
    wq = wg.randn(1, 2, 4, 8)

    def branchy(b, h, q_idx, kv_idx):
        if q_idx >= kv_idx:  # Python control flow on the indices: needs torch.where
            return q_idx >= 0
        return q_idx < 0

    def wrong_shape(score, b, h, q_idx, kv_idx):
        return score[..., :2]

    with pytest.raises(RuntimeError, match="mask_mod 'branchy'.*torch.where"):
        W.create_block_mask(branchy, None, None, 4, 4, device="cpu")
    with pytest.raises(RuntimeError, match=r"score_mod 'wrong_shape' returned a tensor of shape \[1, 2, 4, 2\]"):
        W.flex_attention(wq, wq, wq, score_mod=wrong_shape)


def test_importable_as_torch():
    """`from torch.nn.attention.flex_attention import ...` under as_torch, beside torch.nn.attention's older
    names."""
    from helpers import PACKAGE_DIR
    code = ("import webgrad; webgrad.as_torch(); import torch\n"
            "from torch.nn.attention import sdpa_kernel, SDPBackend\n"
            "from torch.nn.attention.flex_attention import flex_attention, create_block_mask, BlockMask\n"
            "m = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, 4, 4, device='cpu')\n"
            "x = torch.randn(1, 1, 4, 2)\n"
            "assert isinstance(m, BlockMask) and flex_attention(x, x, x, block_mask=m).shape == (1, 1, 4, 2)\n"
            "print('ok')\n")
    env = {"PYTHONPATH": str(PACKAGE_DIR), "OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.stdout.strip() == "ok", result.stderr


# ------------------------------------------------------------------------------------------------- webgpu

@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
def test_on_device_matches_cpu(device):
    """Sliding-window causal mask with learned ALiBi slopes under GQA: values and every gradient as on the CPU."""
    results = []
    for dev in ("cpu", device):
        (q, k, v), _ = _qkv(Hq=4, Hkv=2, L=6, S=6, device=dev, seed=8)
        slopes = wg.tensor([0.5, 0.25, 0.125, 0.0625], device=dev, requires_grad=True)
        mask = W.create_block_mask(W.and_masks(causal, sliding_window), None, None, 6, 6, device=dev,
                                   BLOCK_SIZE=4)
        out, lse = W.flex_attention(q, k, v, block_mask=mask, enable_gqa=True, return_lse=True,
                                    score_mod=lambda s, b, h, q_idx, kv_idx: s + slopes[h] * (kv_idx - q_idx))
        (out.square().sum() + lse.sum()).backward()
        results.append([t.detach().to("cpu").numpy() for t in (out, lse, q.grad, k.grad, v.grad, slopes.grad)])
    for cpu, dev in zip(*results):
        np.testing.assert_allclose(dev, cpu, rtol=1e-4, atol=1e-5)
