"""The fused attention kernels' key split (KSPLIT threads a row, their running states merged through workgroup
memory): PyTorch parity of every kernel (forward, attention_dq, attention_dkv) for each split, on the tiled (GPU)
variant, causal and not, bool and float masks, lengths off the tiles, head sizes 4..128 and values of another head
size; dropout keeps what the unsplit kernels keep; lse and rows that attend nothing; the workgroup memory every
variant declares under a browser's default 16 KiB; the WEBGRAD_ATTENTION_KSPLIT switch's parsing."""

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn.functional as F
from helpers import DEVICES, variant

pytestmark = pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")

RNG = np.random.default_rng(11)

# (threads a row, rows a workgroup): one a row (the unsplit kernels), splits of 2, 3, 4 and 8 (8 x 32 rows), and 4
# threads for each of 16 rows (a 64-thread workgroup)
SPLITS = [(1, None), (2, None), (3, None), (4, None), (8, None), (4, 16)]
SPLIT_IDS = ["k1", "k2", "k3", "k4", "k8", "k4x16"]


@pytest.fixture
def split(request, monkeypatch):
    from webgrad._backends.webgpu import attention
    from webgrad.ops import attention_chunked
    from webgrad._backends.webgpu.runtime import default_runtime
    monkeypatch.setattr(attention, "_FORCED", request.param)
    monkeypatch.setattr(attention_chunked, "FORCE", "fused")
    # a browser's default workgroup memory: the tiles of wide heads shrink, and their merges take several chunks
    monkeypatch.setitem(default_runtime().limits, "max_compute_workgroup_storage_size", 16384)
    with variant("webgpu", False):  # the tiled kernels, whatever the adapter
        yield request.param


def _sdpa(lib, q, k, v, **kw):
    f = torch.nn.functional.scaled_dot_product_attention if lib is torch else F.scaled_dot_product_attention
    return f(q, k, v, **kw)


def _compare(shapes, kw, mask=None, rtol=1e-4, atol=3e-5):
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    tkw, wkw = dict(kw), dict(kw)
    if mask is not None:
        tkw["attn_mask"], wkw["attn_mask"] = torch.tensor(mask), wg.tensor(mask, device="webgpu")
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    if mask is not None and mask.dtype != bool:
        tkw["attn_mask"] = tkw["attn_mask"].double()
    ref = _sdpa(torch, *ts, **tkw)
    g = RNG.standard_normal(tuple(ref.shape)).astype(np.float32)
    (ref * torch.tensor(g, dtype=torch.float64)).sum().backward()
    ws = [wg.tensor(a, device="webgpu", requires_grad=True) for a in arrays]
    out = _sdpa(wg, *ws, **wkw)
    assert out.grad_fn.name == "ScaledDotProductAttention"
    (out * wg.tensor(g, device="webgpu")).sum().backward()
    np.testing.assert_allclose(out.detach().cpu().numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)
    for name, w, t in zip("qkv", ws, ts):
        np.testing.assert_allclose(w.grad.cpu().numpy(), t.grad.numpy(), rtol=rtol, atol=atol, err_msg=name)


def _shapes(B, H, L, S, E, Ev):
    return [(B, H, L, E), (B, H, S, E), (B, H, S, Ev)]


CASES = [
    # name, shapes, kwargs, mask
    ("causal_off_tiles", _shapes(1, 2, 70, 70, 8, 8), {"is_causal": True}, None),
    ("full_rectangular", _shapes(2, 1, 37, 45, 48, 48), {}, None),
    ("causal_fewer_queries", _shapes(1, 2, 9, 70, 16, 16), {"is_causal": True}, None),
    ("causal_more_queries", _shapes(1, 1, 75, 40, 12, 12), {"is_causal": True}, None),
    ("head_4", _shapes(1, 2, 66, 66, 4, 4), {"is_causal": True}, None),
    ("head_128", _shapes(1, 1, 40, 40, 128, 128), {"is_causal": True}, None),
    ("narrow_keys_wide_values", _shapes(1, 1, 33, 35, 4, 128), {}, None),
    ("wide_keys_narrow_values", _shapes(1, 1, 33, 35, 128, 4), {"is_causal": True}, None),
    ("values_96", _shapes(1, 2, 20, 36, 16, 96), {}, None),
    ("bool_mask", _shapes(2, 2, 35, 50, 8, 8), {}, "bool"),
    ("float_mask", _shapes(2, 2, 35, 50, 8, 12), {}, "float"),
]


def _mask(kind):
    if kind == "bool":
        m = RNG.random((35, 50)) < 0.6
        m[:, 7] = True  # every row attends a key
        return m
    if kind == "float":
        m = RNG.standard_normal((2, 1, 35, 50)).astype(np.float32)
        m[0, 0, 3, ::2] = -np.inf
        return m
    return None


@pytest.mark.parametrize("split", SPLITS, ids=SPLIT_IDS, indirect=True)
@pytest.mark.parametrize("name,shapes,kw,mask", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(split, name, shapes, kw, mask):
    _compare(shapes, kw, _mask(mask))


def _dropout_run(shapes, kw, seed):
    arrays = [np.random.default_rng(3).standard_normal(s).astype(np.float32) for s in shapes]
    g = np.random.default_rng(4).standard_normal(shapes[0][:3] + shapes[2][3:]).astype(np.float32)
    ws = [wg.tensor(a, device="webgpu", requires_grad=True) for a in arrays]
    wg.manual_seed(seed)
    out = F.scaled_dot_product_attention(*ws, dropout_p=0.3, **kw)
    (out * wg.tensor(g, device="webgpu")).sum().backward()
    return [out.detach().cpu().numpy()] + [w.grad.cpu().numpy() for w in ws]


@pytest.mark.parametrize("split", SPLITS[1:], ids=SPLIT_IDS[1:], indirect=True)
@pytest.mark.parametrize("kw", [{"is_causal": True}, {}], ids=["causal", "full"])
def test_dropout_keeps_what_the_unsplit_kernels_keep(split, kw, monkeypatch):
    """The same weights dropped as with one thread a row (the same counter per (row, key)): the results agree to
    rounding (a weight kept in one and dropped in the other would move them by whole weights)."""
    from webgrad._backends.webgpu import attention
    shapes = _shapes(2, 2, 70, 70, 16, 16)
    got = _dropout_run(shapes, kw, seed=9)
    monkeypatch.setattr(attention, "_FORCED", (1, None))
    want = _dropout_run(shapes, kw, seed=9)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5)
    assert not np.allclose(got[0], _dropout_run(shapes, kw, seed=10)[0], atol=1e-3)  # the draw matters


@pytest.mark.parametrize("split", SPLITS, ids=SPLIT_IDS, indirect=True)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_lse_and_rows_that_attend_nothing(split, causal):
    """The forward's lse is each row's logsumexp of its scaled, masked scores; a row that attends no key (in every
    part of the split) is NaN with lse -inf."""
    from webgrad._backends import kernels
    B, H, L, S, E = 1, 2, 45, 70, 8
    q, k, v = (RNG.standard_normal(s).astype(np.float32) for s in _shapes(B, H, L, S, E, E))
    mask = RNG.random((B, H, L, S)) < 0.5
    mask[:, :, :, 0] = True
    mask[0, 1, 6] = False  # row 6 of head 1 attends nothing
    scale = 0.37
    wq, wk, wv, wm = (wg.tensor(a, device="webgpu") for a in (q, k, v, mask))
    out = wg.empty(B, H, L, E, device="webgpu")
    lse = wg.empty(B, H, L, device="webgpu")
    kernels.attention(wq.device.backend, out._view, lse._view, wq._view, wk._view, wv._view, wm._view, scale, causal)
    scores = torch.tensor(q, dtype=torch.float64) @ torch.tensor(k, dtype=torch.float64).transpose(-2, -1) * scale
    attend = torch.tensor(mask)
    if causal:
        attend = attend & torch.ones(L, S, dtype=torch.bool).tril()
    scores = scores.masked_fill(~attend, float("-inf"))
    want_lse = torch.logsumexp(scores, -1).numpy()
    want_out = (torch.softmax(scores, -1) @ torch.tensor(v, dtype=torch.float64)).numpy()
    got_lse, got_out = lse.cpu().numpy(), out.cpu().numpy()
    assert got_lse[0, 1, 6] == -np.inf and np.isnan(got_out[0, 1, 6]).all()
    np.testing.assert_allclose(got_lse, want_lse, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_out, want_out, rtol=1e-4, atol=2e-5)  # NaN where want is NaN


@pytest.mark.parametrize("ksplit,rows", [(1, 64), (2, 64), (3, 64), (4, 64), (8, 32), (4, 16), (2, 8)])
def test_workgroup_memory_within_a_browsers_default(ksplit, rows):
    """Every variant's workgroup memory (forward and attention_dq: the key and value tile; attention_dkv: the
    query and gradient tile, and its rows' lse and D) fits 16 KiB where the device allows 16 KiB, for every pair
    of head sizes the kernels take; and each row's merge chunk fits the tile."""
    from webgrad._backends.webgpu import attention
    for e4 in range(1, 33):
        for v4 in range(1, 33):
            forward, _, _ = attention.kernels_for(16384, e4, v4, attention.MASK_NONE, False, ksplit, rows)
            c, _ = forward.shader.constants()
            assert c["KSPLIT"] == ksplit and c["BR"] == rows
            assert c["KVT"] * 16 <= 16384 and c["QGT"] * 16 + 2 * 4 * c["QT"] <= 16384, (e4, v4, c)
            assert c["KVT"] >= c["BC"] * (c["E4"] + c["VS4"]) and c["QGT"] >= c["QT"] * (e4 + v4)
            if ksplit > 1:
                assert c["KVT"] >= rows * ksplit and c["QGT"] >= rows * ksplit  # the parts' (max, sum)
                assert c["KVT"] // rows >= 1 and c["QGT"] // rows >= 1  # a merge chunk of at least a vec4


def test_the_switch_parses():
    from webgrad._backends.webgpu.attention import _parse_split
    assert _parse_split("") is None and _parse_split(None) is None
    assert _parse_split("4") == (4, None) and _parse_split("2x32") == (2, 32)
    for bad in ("four", "0", "2x", "2x0", "-1"):
        with pytest.raises(ValueError, match="WEBGRAD_ATTENTION_KSPLIT"):
            _parse_split(bad)


def test_the_rule_splits_short_gpu_dispatches(monkeypatch):
    # the measured rule: two threads a row for a GPT's 128 pairs of 256 rows and gpt2-small's 96 pairs of 1,024 on
    # a GPU; larger dispatches, short walks and software adapters keep one
    from types import SimpleNamespace
    from webgrad._backends.webgpu import attention
    monkeypatch.setattr(attention, "_FORCED", None)
    gpu = SimpleNamespace(limits={}, variant={"attention_untiled": False})
    software = SimpleNamespace(limits={}, variant={"attention_untiled": True})
    for kernel in ("forward", "dq", "dkv"):
        assert attention.split(gpu, kernel, 128, 256, 256) == (2, attention.BR)
        assert attention.split(gpu, kernel, 96, 1024, 1024) == (2, attention.BR)
        assert attention.split(gpu, kernel, 256, 1024, 1024)[0] == 1
        assert attention.split(gpu, kernel, 128, 256, 16)[0] == 1
        assert attention.split(software, kernel, 128, 256, 256)[0] == 1
