"""attention.wgsl's float16 variants (half q, k, v, out, grad and gradients read straight from memory into the f32
registers and tiles, f32 math, each stored element rounded once; lse and D float32): forward and backward against
the float32 variant on the same half values, its results rounded to float16 once. The math is the same code, so
the two agree bit for bit, on both kernel variants (tiled, untiled), with and without the key split, for causal,
float and bool masks, dropout, head sizes that take several output slices or two attention_dkv passes, and a
GPT's strided heads. Then F.scaled_dot_product_attention on half tensors (and under autocast) takes them: one
dispatch forward and the same backward dispatches as float32 (no casts), half out and gradients, PyTorch's values
within float16's rounding."""

import numpy as np
import pytest

import webgrad as wg
import webgrad.nn.functional as F
from helpers import DEVICES, variant

torch = pytest.importorskip("torch")


def _has_f16():
    return "webgpu" in DEVICES and wg.device("webgpu").backend.runtime.has_f16


pytestmark = pytest.mark.skipif(not _has_f16(), reason="needs a WebGPU adapter with shader-f16")

RNG = np.random.default_rng(7)


@pytest.fixture(params=[1, 2], ids=["one_thread_a_row", "key_split"])
def split(request, monkeypatch):
    from webgrad._backends.webgpu import attention
    monkeypatch.setattr(attention, "_FORCED", (request.param, None) if request.param > 1 else None)
    return request.param


def _heads(a, B, H, T, d):
    """A GPT's heads: a [B, H, T, d] view of a [B, T, H * d] array (strides T * H * d, d, H * d, 1)."""
    return np.ascontiguousarray(a.reshape(B, H, T, d).transpose(0, 2, 1, 3)).reshape(B, T, H * d)


def _tensor(a, strided):
    """A webgpu tensor of a [B, H, rows, d] array: contiguous, or (strided) a view [B, H, rows, d] of a
    [B, rows, H * d] tensor, as a GPT's split heads are."""
    if not strided:
        return wg.tensor(a, device="webgpu")
    B, H, T, d = a.shape
    return wg.tensor(_heads(a, B, H, T, d), device="webgpu").view(B, T, H, d).transpose(1, 2)


def _empty(shape, dtype, strided):
    if not strided:
        return wg.empty(*shape, dtype=dtype, device="webgpu")
    B, H, T, d = shape
    return wg.empty(B, T, H, d, dtype=dtype, device="webgpu").transpose(1, 2)


def _np(t):
    return t.float().cpu().numpy()


def _both(shapes, causal=False, mask=None, dropout_p=0.0, strided=False):
    """Forward and backward of the kernels on half operands and on float32 copies of the same values (the
    backward's out and grad: the half ones, upcast): the half results and the float32 ones rounded to half."""
    from webgrad._backends import kernels
    backend = wg.device("webgpu").backend
    (B, H, L, _), (_, _, S, _), (_, _, _, Ev) = shapes
    arrays = [RNG.standard_normal(s).astype(np.float16) for s in (*shapes, (B, H, L, Ev))]
    seed, offset = (1234, 99) if dropout_p else (0, 0)
    mask_view = None
    if mask is not None:
        mask_t = wg.tensor(mask, device="webgpu").expand(B, H, L, S)
        mask_view = mask_t._view
    scale = 0.3
    results = {}
    for dtype in (wg.float16, wg.float32):
        q, k, v, g = (_tensor(a.astype(dtype.name), strided) for a in arrays)
        out = _empty((B, H, L, Ev), dtype, strided)
        lse = wg.empty(B, H, L, device="webgpu")
        kernels.attention(backend, out._view, lse._view, q._view, k._view, v._view, mask_view, scale, causal,
                          dropout_p, seed, offset)
        if dtype is wg.float32:  # the backward reads the half path's out, as the half backward does
            out = _tensor(results[wg.float16][0].astype(np.float32), strided)
        grads = [_empty(t.shape, dtype, strided) for t in (q, k, v)]
        kernels.attention_backward(backend, *(t._view for t in grads), g._view, q._view, k._view, v._view,
                                   out._view, lse._view, mask_view, scale, causal, dropout_p, seed, offset)
        results[dtype] = [_np(out).astype(np.float16), _np(lse)] + [_np(t).astype(np.float16) for t in grads]
    return results[wg.float16], results[wg.float32]


CASES = [
    ("causal", [(2, 3, 70, 8), (2, 3, 70, 8), (2, 3, 70, 8)], {"causal": True}),
    ("rectangular", [(1, 2, 9, 12), (1, 2, 13, 12), (1, 2, 13, 8)], {}),
    ("gpt_head_48", [(2, 2, 33, 48), (2, 2, 33, 48), (2, 2, 33, 48)], {"causal": True}),
    ("wide_values", [(1, 2, 9, 16), (1, 2, 9, 16), (1, 2, 9, 96)], {"causal": True}),  # several output slices
    ("head_64", [(1, 2, 9, 64), (1, 2, 9, 64), (1, 2, 9, 64)], {}),  # attention_dkv in two passes
    ("dropout", [(1, 2, 17, 8), (1, 2, 17, 8), (1, 2, 17, 8)], {"causal": True, "dropout_p": 0.25}),
]


@pytest.mark.parametrize("software", [True, False], ids=["untiled", "tiled"])
@pytest.mark.parametrize("name,shapes,kw", CASES, ids=[c[0] for c in CASES])
def test_half_kernels_round_the_float32_results_once(software, split, name, shapes, kw):
    with variant("webgpu", software):
        half, f32 = _both(shapes, **kw)
    for what, a, b in zip(("out", "lse", "grad_q", "grad_k", "grad_v"), half, f32):
        np.testing.assert_array_equal(a, b, err_msg=what)
    assert np.isfinite(half[0].astype(np.float32)).all()


@pytest.mark.parametrize("software", [True, False], ids=["untiled", "tiled"])
@pytest.mark.parametrize("kind", ["float", "bool"])
def test_half_kernels_with_a_mask(software, kind):
    L, S = 6, 9
    m = RNG.random((L, S)) < 0.7
    m[:, 0] = True
    mask = m if kind == "bool" else np.where(m, RNG.standard_normal((L, S)), -np.inf).astype(np.float32)
    with variant("webgpu", software):
        half, f32 = _both([(2, 2, L, 8), (2, 2, S, 8), (2, 2, S, 8)], mask=mask)
    for what, a, b in zip(("out", "lse", "grad_q", "grad_k", "grad_v"), half, f32):
        np.testing.assert_array_equal(a, b, err_msg=what)


@pytest.mark.parametrize("software", [True, False], ids=["untiled", "tiled"])
def test_half_kernels_on_a_gpts_strided_heads(software, split):
    with variant("webgpu", software):
        half, f32 = _both([(2, 3, 20, 16)] * 3, causal=True, strided=True)
    for what, a, b in zip(("out", "lse", "grad_q", "grad_k", "grad_v"), half, f32):
        np.testing.assert_array_equal(a, b, err_msg=what)


def test_half_kernels_round_overflow_to_inf():
    """An output past float16's range stores inf (f16_round.wgsl's to_f16), as a half tensor of it holds: one key
    of value 65504, its weight 1 scaled by 1 / (1 - p) = 2 where dropout keeps it."""
    from webgrad._backends import kernels
    backend = wg.device("webgpu").backend
    q = wg.zeros(1, 1, 64, 4, dtype=wg.float16, device="webgpu")
    kv = wg.full((1, 1, 1, 4), 65504.0, dtype=wg.float16, device="webgpu")
    out = wg.empty(1, 1, 64, 4, dtype=wg.float16, device="webgpu")
    kernels.attention(backend, out._view, None, q._view, kv._view, kv._view, None, 1.0)
    assert (_np(out) == 65504.0).all()
    kernels.attention(backend, out._view, None, q._view, kv._view, kv._view, None, 1.0, False, 0.5, 3, 0)
    values = _np(out)
    assert np.isin(values, [0.0, np.inf]).all() and np.isinf(values).any() and (values == 0).any()


def _count(fn):
    from webgrad._backends.webgpu.runtime import default_runtime
    stats = default_runtime().stats
    before = stats["dispatches"]
    result = fn()
    return result, stats["dispatches"] - before


@pytest.mark.parametrize("software", [True, False], ids=["untiled", "tiled"])
def test_sdpa_on_half_tensors_takes_the_half_kernels(software):
    """One dispatch forward, attention_dq and attention_dkv backward, as in float32: no casts around them; out and
    the gradients float16."""
    with variant("webgpu", software):
        q, k, v = (wg.randn(2, 2, 10, 16, device="webgpu").half().requires_grad_() for _ in range(3))
        out, n = _count(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        assert n == 1 and out.dtype is wg.float16 and out.grad_fn.name == "ScaledDotProductAttention"
        g = wg.randn(2, 2, 10, 16, device="webgpu").half()
        grads, n = _count(lambda: out.grad_fn.backward_fn(g))
        assert n == 2 and all(t.dtype is wg.float16 for t in grads)


@pytest.mark.parametrize("software", [True, False], ids=["untiled", "tiled"])
def test_autocast_attention_matches_torch(software):
    """Under autocast, float32 q, k, v are cast to half (PyTorch's lower_precision_fp list) and the half kernels
    give out and gradients within float16's rounding of PyTorch's float32 attention on the half values."""
    B, H, L, E = 2, 3, 24, 16
    arrays = [RNG.standard_normal((B, H, L, E)).astype(np.float16).astype(np.float32) for _ in range(3)]
    g = RNG.standard_normal((B, H, L, E)).astype(np.float16).astype(np.float32)
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    ref = torch.nn.functional.scaled_dot_product_attention(*ts, is_causal=True)
    (ref * torch.tensor(g)).sum().backward()
    with variant("webgpu", software):
        ws = [wg.tensor(a, device="webgpu", requires_grad=True) for a in arrays]
        with wg.autocast("webgpu", dtype=wg.float16):
            out = F.scaled_dot_product_attention(*ws, is_causal=True)
        assert out.dtype is wg.float16
        (out.float() * wg.tensor(g, device="webgpu")).sum().backward()
    np.testing.assert_allclose(_np(out.detach()), ref.detach().numpy(), rtol=1e-2, atol=2e-3)
    for w, t in zip(ws, ts):
        assert w.grad.dtype is wg.float32  # back through the cast to the float32 leaves
        np.testing.assert_allclose(w.grad.cpu().numpy(), t.grad.numpy(), rtol=1e-2, atol=1e-2)


def test_autocast_casts_sdpa_to_half_on_the_cpu_as_pytorch():
    q = RNG.standard_normal((1, 2, 5, 8)).astype(np.float32)
    with torch.autocast("cpu", dtype=torch.float16):
        ref = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(q),) * 3)
    with wg.autocast("cpu", dtype=wg.float16):
        out = F.scaled_dot_product_attention(*(wg.tensor(q),) * 3)
    assert out.dtype is wg.float16 and ref.dtype is torch.float16
    np.testing.assert_allclose(out.float().numpy(), ref.float().numpy(), rtol=1e-2, atol=2e-3)
