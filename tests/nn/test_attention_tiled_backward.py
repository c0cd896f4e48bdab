"""The register-tiled attention backward (shaders/attention_tiled_backward.wgsl, taken on GPU adapters):
grad_q, grad_k and grad_v against PyTorch's float64 SDPA, causal and not, bool and float masks, lengths off the
tiles (L != S), head sizes 32, 48, 64, wide keys with narrow values and the reverse (several accumulator vec4s a
thread, attention_dkv in two passes); dropout keeps what attention.wgsl's kernels keep; float16 operands give the
float32 results rounded once; a browser's default 16 KiB of workgroup memory takes smaller tiles, or
attention.wgsl where none fits; the tile rule and the WEBGRAD_ATTENTION_TILES switch."""

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn.functional as F
from helpers import DEVICES, variant

pytestmark = pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")

RNG = np.random.default_rng(5)


@pytest.fixture
def tiled(monkeypatch):
    """The GPU variant whatever the adapter, with the register-tiled backward on; yields the list of its
    answers (True: it dispatched; False: no tiles fit and attention.wgsl's kernels ran)."""
    from webgrad._backends.webgpu import attention_tiled_backward as T
    from webgrad.ops import attention_chunked
    monkeypatch.setattr(attention_chunked, "FORCE", "fused")
    monkeypatch.setattr(T, "TILES", True)
    taken = []
    backward = T.backward

    def spy(*args):
        taken.append(backward(*args))
        return taken[-1]

    monkeypatch.setattr(T, "backward", spy)
    with variant("webgpu", False):
        yield taken


def _limit(monkeypatch, size):
    from webgrad._backends.webgpu.runtime import default_runtime
    monkeypatch.setitem(default_runtime().limits, "max_compute_workgroup_storage_size", size)


def _grads(shapes, kw, mask=None, rtol=1e-4, atol=3e-5):
    """grad_q, grad_k, grad_v of webgrad's SDPA against torch's in float64."""
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    tkw, wkw = dict(kw), dict(kw)
    if mask is not None:
        tkw["attn_mask"], wkw["attn_mask"] = torch.tensor(mask), wg.tensor(mask, device="webgpu")
        if mask.dtype != bool:
            tkw["attn_mask"] = tkw["attn_mask"].double()
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    ref = torch.nn.functional.scaled_dot_product_attention(*ts, **tkw)
    g = RNG.standard_normal(tuple(ref.shape)).astype(np.float32)
    (ref * torch.tensor(g, dtype=torch.float64)).sum().backward()
    ws = [wg.tensor(a, device="webgpu", requires_grad=True) for a in arrays]
    out = F.scaled_dot_product_attention(*ws, **wkw)
    assert out.grad_fn.name == "ScaledDotProductAttention"
    (out * wg.tensor(g, device="webgpu")).sum().backward()
    for name, w, t in zip("qkv", ws, ts):
        np.testing.assert_allclose(w.grad.cpu().numpy(), t.grad.numpy(), rtol=rtol, atol=atol, err_msg=name)


def _shapes(B, H, L, S, E, Ev):
    return [(B, H, L, E), (B, H, S, E), (B, H, S, Ev)]


def _mask(kind, L, S):
    if kind == "bool":
        m = RNG.random((L, S)) < 0.6
        m[:, 5] = True  # every row attends a key
        return m
    m = RNG.standard_normal((2, 1, L, S)).astype(np.float32)
    m[0, 0, 3, ::2] = -np.inf
    return m


CASES = [
    # name, shapes, kwargs, mask
    ("causal_head_32", _shapes(1, 2, 70, 70, 32, 32), {"is_causal": True}, None),
    ("full_rectangular_48", _shapes(2, 1, 37, 75, 48, 48), {}, None),
    ("causal_fewer_queries_64", _shapes(1, 2, 9, 70, 64, 64), {"is_causal": True}, None),
    ("causal_more_queries_48", _shapes(1, 1, 75, 40, 48, 48), {"is_causal": True}, None),
    ("wide_keys_narrow_values", _shapes(1, 1, 33, 35, 128, 4), {"is_causal": True}, None),
    ("narrow_keys_wide_values", _shapes(1, 1, 33, 35, 4, 128), {}, None),
    ("values_96", _shapes(1, 2, 20, 36, 16, 96), {"scale": 0.3}, None),
    ("bool_mask", _shapes(2, 2, 35, 50, 32, 32), {}, "bool"),
    ("float_mask", _shapes(2, 2, 35, 50, 8, 12), {}, "float"),
]


@pytest.mark.parametrize("name,shapes,kw,mask", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(tiled, name, shapes, kw, mask):
    L, S = shapes[0][2], shapes[1][2]
    _grads(shapes, kw, None if mask is None else _mask(mask, L, S))
    assert tiled == [True]


def test_attention_dkv_in_two_passes_where_the_accumulators_are_many():
    from webgrad._backends.webgpu import attention_tiled_backward as T
    for room, e4, v4, fused in ((32768, 32, 1, False),  # wide_keys_narrow_values above: grad_v, then grad_k
                                (32768, 12, 12, True), (49152, 12, 12, True),  # a GPT's head of 48: one dispatch
                                (32768, 16, 16, False), (49152, 16, 16, True)):  # GPT-2's 64
        _, (_, _, got) = T.kernels_for({"max_compute_workgroup_storage_size": room}, e4, v4, 0, False, wg.float32)
        assert got == fused, (room, e4, v4)


def _dropout_run(shapes, kw, seed):
    arrays = [np.random.default_rng(3).standard_normal(s).astype(np.float32) for s in shapes]
    g = np.random.default_rng(4).standard_normal(shapes[0][:3] + shapes[2][3:]).astype(np.float32)
    ws = [wg.tensor(a, device="webgpu", requires_grad=True) for a in arrays]
    wg.manual_seed(seed)
    out = F.scaled_dot_product_attention(*ws, dropout_p=0.3, **kw)
    (out * wg.tensor(g, device="webgpu")).sum().backward()
    return [w.grad.cpu().numpy() for w in ws]


@pytest.mark.parametrize("kw", [{"is_causal": True}, {}], ids=["causal", "full"])
def test_dropout_keeps_what_the_untiled_kernels_keep(tiled, kw, monkeypatch):
    """The same weights dropped as by attention.wgsl's kernels (the same counter per (row, key)): the gradients
    agree to rounding (a weight kept in one and dropped in the other would move them by whole weights)."""
    from webgrad._backends.webgpu import attention_tiled_backward as T
    shapes = _shapes(2, 2, 70, 45, 16, 16)
    got = _dropout_run(shapes, kw, seed=9)
    assert tiled == [True]
    monkeypatch.setattr(T, "TILES", False)
    want = _dropout_run(shapes, kw, seed=9)
    assert tiled == [True]  # (not asked again)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5)
    assert not np.allclose(got[0], _dropout_run(shapes, kw, seed=10)[0], atol=1e-3)  # the draw matters


def _has_f16():
    return "webgpu" in DEVICES and wg.device("webgpu").backend.runtime.has_f16


@pytest.mark.skipif(not _has_f16(), reason="needs a WebGPU adapter with shader-f16")
@pytest.mark.parametrize("dropout_p", [0.0, 0.25], ids=["plain", "dropout"])
def test_float16_operands_round_the_float32_results_once(tiled, dropout_p):
    """Half q, k, v, out and grad are read into the same f32 tiles as float32 copies of their values: the half
    gradients are the float32 ones rounded once, bit for bit."""
    from webgrad._backends import kernels
    backend = wg.device("webgpu").backend
    B, H, L, S, E = 2, 2, 37, 45, 48
    arrays = [RNG.standard_normal(s).astype(np.float16) for s in _shapes(B, H, L, S, E, E) + [(B, H, L, E)]]
    lse_values = None
    results = {}
    for dtype in (wg.float16, wg.float32):
        q, k, v, g = (wg.tensor(a.astype(dtype.name), device="webgpu") for a in arrays)
        out = wg.empty(B, H, L, E, dtype=dtype, device="webgpu")
        lse = wg.empty(B, H, L, device="webgpu")
        kernels.attention(backend, out._view, lse._view, q._view, k._view, v._view, None, 0.3, True, dropout_p, 77, 5)
        if lse_values is None:
            lse_values, out_half = lse.cpu().numpy(), out.float().cpu().numpy()
        out = wg.tensor(out_half.astype(dtype.name), device="webgpu")  # both read the half path's out and lse
        lse = wg.tensor(lse_values, device="webgpu")
        grads = [wg.empty(*t.shape, dtype=dtype, device="webgpu") for t in (q, k, v)]
        kernels.attention_backward(backend, *(t._view for t in grads), g._view, q._view, k._view, v._view,
                                   out._view, lse._view, None, 0.3, True, dropout_p, 77, 5)
        results[dtype] = [t.float().cpu().numpy().astype(np.float16) for t in grads]
    assert tiled == [True, True]
    for what, a, b in zip(("grad_q", "grad_k", "grad_v"), results[wg.float16], results[wg.float32]):
        np.testing.assert_array_equal(a, b, err_msg=what)
        assert np.isfinite(a.astype(np.float32)).all()


def test_a_browsers_16_kib(tiled, monkeypatch):
    """Under 16 KiB, head size 32 takes smaller tiles (still right) and head size 64 attention.wgsl's kernels."""
    _limit(monkeypatch, 16384)
    _grads(_shapes(1, 2, 40, 50, 32, 32), {"is_causal": True})
    _grads(_shapes(1, 1, 20, 30, 64, 64), {})
    assert tiled == [True, False]


def test_the_tiles_fit_the_workgroup_memory():
    """The rule picks the first tiles of each list whose workgroup memory fits, for every head size pair up to 128;
    the shader's declarations take what the rule counts."""
    from webgrad._backends.webgpu import attention_tiled_backward as T
    for room in (16384, 32768, 49152):
        for e4 in range(1, 33):
            for v4 in range(1, 33):
                picked = T.tiles({"max_compute_workgroup_storage_size": room}, e4, v4)
                if picked is None:
                    assert (T.dq_bytes(e4, v4, 16, 16) > room or T.dkv_bytes(e4, v4, 16, 16) > room)
                    continue
                (bq, bk), (bk2, bq2) = picked
                assert T.dq_bytes(e4, v4, bq, bk) <= room and T.dkv_bytes(e4, v4, bk2, bq2) <= room
                assert all(T.dq_bytes(e4, v4, *t) > room for t in T.DQ_TILES[:T.DQ_TILES.index((bq, bk))])
    assert T.tiles({"max_compute_workgroup_storage_size": 49152}, 12, 12) == ((64, 32), (32, 32))  # gpt-6x384
    assert T.tiles({"max_compute_workgroup_storage_size": 49152}, 32, 32) == ((16, 16), (16, 16))  # head 128
    c, _ = T._kernel("dq", 12, 12, 64, 32, 0, False, "f32").shader.constants()
    used = 16 * (c["BQ"] * (c["RQ"] + c["RG"]) + c["BK"] * (c["RK"] + c["RV"]) + c["ST_N"])  # not pt, lt, dt
    assert used == T.dq_bytes(12, 12, 64, 32)
    c, _ = T._kernel("dkv", 12, 12, 32, 32, 0, False, "f32").shader.constants()
    used = 16 * (c["BQ"] * (c["RQ"] + c["RG"]) + c["BK"] * (c["RK"] + c["RV"]) + c["ST_N"] + c["PT_N"]) + 8 * 32
    assert used == T.dkv_bytes(12, 12, 32, 32)


def test_the_switch_turns_the_tiles_off(tiled, monkeypatch):
    from webgrad._backends.webgpu import attention_tiled_backward as T
    monkeypatch.setattr(T, "TILES", False)
    _grads(_shapes(1, 1, 20, 20, 32, 32), {"is_causal": True})
    assert tiled == []


def test_attention_dq_fits_what_its_entry_point_uses(tiled, monkeypatch):
    """dq_bytes counts attention_dq's own workgroup arrays, not attention_dkv's (lt, dt, pt) in the same module, as
    WebGPU counts a pipeline's: tiles that fit only that way compile and give the right gradients."""
    from webgrad._backends.webgpu import attention_tiled_backward as T
    from webgrad._backends.webgpu.runtime import default_runtime
    room = default_runtime().limits["max_compute_workgroup_storage_size"]
    found = [(e4, bq, bk) for e4 in range(1, 33) for bq, bk in ((64, 16), (64, 32), (32, 32), (32, 16))
             if T.dq_bytes(e4, e4, bq, bk) <= room < T.dq_bytes(e4, e4, bq, bk) + 16 + 8 * bq]
    if not found:
        pytest.skip(f"no tiles on the edge of {room} bytes")
    e4, bq, bk = found[0]
    monkeypatch.setattr(T, "DQ_TILES", ((bq, bk),))
    _grads(_shapes(1, 2, 70, 50, 4 * e4, 4 * e4), {"is_causal": True})
    assert tiled == [True]
