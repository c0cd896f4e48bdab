"""F.scaled_dot_product_attention by batched products in chunks of (batch, head) pairs (ops/attention_chunked.py):
PyTorch parity of the output and every gradient on every device (causal, boolean and float masks broadcast every
way, T_q != T_k, scale, 2-D and 3-D inputs, a GPT's strided heads), in one chunk and in several (a small scratch
budget, chunks cut to the mask's heads), dropout that draws what F.dropout of the weights and the fused kernels
draw, a recorded step that replays with fresh draws, the rule that picks the path, and the dispatches."""

import math

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn.functional as F
from webgrad.ops import attention_chunked as ac
from helpers import DEVICES, gradcheck

RNG = np.random.default_rng(7)


def _forced(monkeypatch, force, function):
    """Every SDPA call takes the paths `force` names; the list of the calls `function` took (to check it ran)."""
    calls = []
    real = getattr(ac, function)

    def spy(*args):
        calls.append(args[0].shape)
        return real(*args)
    monkeypatch.setattr(ac, "FORCE", force)
    monkeypatch.setattr(ac, function, spy)
    return calls


@pytest.fixture
def chunked(monkeypatch):
    """Every SDPA call takes the chunked path; returns the list of calls it took."""
    return _forced(monkeypatch, "chunked", "chunked_attention")


def _budget(monkeypatch, L, S, pairs, itemsize=4):
    """A scratch budget of `pairs` (batch, head) pairs per backward chunk."""
    monkeypatch.setattr(ac, "SCRATCH_BYTES", ac.BACKWARD_BUFFERS * L * S * itemsize * pairs)


def _mask(kind, B, H, L, S):
    if kind == "bool":  # one [L, S] mask for every pair
        m = RNG.random((L, S)) < 0.7
        m[:, 0] = True
        return m
    if kind == "bool_per_batch":  # [B, 1, L, S]: broadcast over heads only (chunks cut at the heads)
        m = RNG.random((B, 1, L, S)) < 0.6
        m[..., 0] = True
        return m
    if kind == "bool_full":
        m = RNG.random((B, H, L, S)) < 0.6
        m[..., 1] = True
        return m
    if kind == "float":
        m = RNG.standard_normal((B, 1, L, S)).astype(np.float32)
        m[0, 0, 1, 3] = -np.inf
        return m
    if kind == "float_heads":  # [H, L, S]: broadcast over the batch
        return RNG.standard_normal((H, L, S)).astype(np.float32)
    if kind == "padding":
        m = np.ones((B, 1, 1, S), bool)
        m[0, ..., S - 2:] = False
        return m
    return None


CASES = [
    ("causal", (3, 4, 7, 7, 8, 8), {"is_causal": True}, None),
    ("causal_rectangular", (2, 3, 6, 9, 8, 4), {"is_causal": True}, None),
    ("causal_more_queries", (2, 3, 9, 6, 8, 8), {"is_causal": True}, None),
    ("plain_scale", (2, 2, 5, 6, 12, 8), {"scale": 0.3}, None),
    ("head_sizes_not_of_4", (2, 3, 5, 6, 6, 3), {}, None),
    ("bool_mask", (3, 4, 5, 6, 8, 8), {}, "bool"),
    ("bool_per_batch", (3, 4, 5, 6, 8, 8), {}, "bool_per_batch"),
    ("bool_full", (3, 4, 5, 6, 8, 8), {}, "bool_full"),
    ("float_mask", (3, 4, 5, 6, 8, 8), {}, "float"),
    ("float_heads", (3, 4, 5, 6, 8, 8), {}, "float_heads"),
    ("padding_mask", (3, 4, 5, 6, 8, 8), {}, "padding"),
]


def _run(device, dims, kw, kind, lead_of=None):
    B, H, L, S, E, Ev = dims
    shapes = lead_of or [(B, H, L, E), (B, H, S, E), (B, H, S, Ev)]
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    mask = _mask(kind, B, H, L, S)
    wkw, tkw = dict(kw), dict(kw)
    if mask is not None:
        wkw["attn_mask"], tkw["attn_mask"] = wg.tensor(mask, device=device), torch.tensor(mask)
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    ref = torch.nn.functional.scaled_dot_product_attention(*ts, **tkw)
    g = RNG.standard_normal(tuple(ref.shape)).astype(np.float32)
    (ref * torch.tensor(g)).sum().backward()
    ws = [wg.tensor(a, device=device, requires_grad=True) for a in arrays]
    out = F.scaled_dot_product_attention(*ws, **wkw)
    (out * wg.tensor(g, device=device)).sum().backward()
    np.testing.assert_allclose(out.detach().cpu().numpy(), ref.detach().numpy(), rtol=1e-4, atol=2e-5)
    for w, t in zip(ws, ts):
        np.testing.assert_allclose(w.grad.cpu().numpy(), t.grad.numpy(), rtol=1e-4, atol=3e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pairs", [None, 2, 5], ids=["one_chunk", "chunks_of_2", "chunks_of_5"])
@pytest.mark.parametrize("name,dims,kw,mask", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(device, pairs, name, dims, kw, mask, chunked, monkeypatch):
    if pairs is not None:
        _budget(monkeypatch, dims[2], dims[3], pairs)
    _run(device, dims, kw, mask)
    assert len(chunked) == 1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shapes", [[(3, 5, 8), (3, 6, 8), (3, 6, 4)], [(5, 8), (6, 8), (6, 4)],
                                    [(2, 3, 5, 8), (1, 3, 6, 8), (2, 1, 6, 8)]],
                         ids=["three_dims", "two_dims", "broadcast_kv"])
def test_other_ranks_and_broadcasts(device, shapes, chunked, monkeypatch):
    _budget(monkeypatch, 5, 6, 2)
    _run(device, (2, 3, 5, 6, 8, 4), {}, None, lead_of=shapes)
    assert len(chunked) == 1


@pytest.mark.parametrize("device", DEVICES)
def test_a_gpts_strided_heads(device, chunked, monkeypatch):
    """q, k, v split from one [B, T, 3C] projection and viewed as heads (copied into pairs), in chunks."""
    B, T, C, nh = 2, 6, 32, 4
    _budget(monkeypatch, T, T, 3)
    x = RNG.standard_normal((B, T, 3 * C)).astype(np.float32)
    g = RNG.standard_normal((B, nh, T, C // nh)).astype(np.float32)

    def run(lib, t):
        q, k, v = t.split(C, dim=2)
        q, k, v = (u.view(B, T, nh, C // nh).transpose(1, 2) for u in (q, k, v))
        return lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    tx = torch.tensor(x, requires_grad=True)
    ref = run(torch, tx)
    (ref * torch.tensor(g)).sum().backward()
    wx = wg.tensor(x, device=device, requires_grad=True)
    out = run(wg, wx)
    (out * wg.tensor(g, device=device)).sum().backward()
    np.testing.assert_allclose(out.detach().cpu().numpy(), ref.detach().numpy(), rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(wx.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-4, atol=3e-5)
    assert len(chunked) == 1


@pytest.fixture
def mixed(monkeypatch):
    """Every SDPA call takes the fused forward and the chunked backward; returns the calls that did."""
    return _forced(monkeypatch, "mixed", "fused_forward_chunked_backward")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,dims,kw,mask", CASES[:2] + CASES[4:7] + CASES[8:],
                         ids=[c[0] for c in CASES[:2] + CASES[4:7] + CASES[8:]])
def test_fused_forward_chunked_backward_matches_torch(device, name, dims, kw, mask, mixed, monkeypatch):
    """The fused kernels' forward with the products' backward (large heads, short sequences: choose()), in chunks
    of 2 pairs, and a GPT's strided heads."""
    _budget(monkeypatch, dims[2], dims[3], 2)
    _run(device, dims, kw, mask)
    assert len(mixed) == 1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pairs", [None, 2])
def test_dropout_draws_what_f_dropout_and_the_fused_kernels_draw(device, pairs, monkeypatch):
    """The weights' dropout keeps what F.dropout(softmax(...)) keeps from the same generator state, chunk by chunk,
    and what the fused kernels keep, and a fused forward with the chunked backward: outputs and gradients agree."""
    B, H, L, E = 2, 3, 9, 8
    if pairs is not None:
        _budget(monkeypatch, L, L, pairs)
    arrays = [RNG.standard_normal((B, H, L, E)).astype(np.float32) for _ in range(3)]
    g = RNG.standard_normal((B, H, L, E)).astype(np.float32)

    def run(attention):
        wg.manual_seed(5)
        q, k, v = (wg.tensor(a, device=device, requires_grad=True) for a in arrays)
        out = attention(q, k, v)
        (out * wg.tensor(g, device=device)).sum().backward()
        return [out.detach().cpu().numpy()] + [t.grad.cpu().numpy() for t in (q, k, v)]

    def composed(q, k, v):
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(E))
        s = s.masked_fill(wg.tril(wg.ones(L, L, device=device)) == 0, float("-inf"))
        return F.dropout(F.softmax(s, dim=-1), 0.3) @ v

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, is_causal=True)

    want = run(composed)
    monkeypatch.setattr(ac, "FORCE", "fused")
    fused = run(sdpa)
    monkeypatch.setattr(ac, "FORCE", "mixed")
    fused_then_chunked = run(sdpa)
    monkeypatch.setattr(ac, "FORCE", "chunked")
    got = run(sdpa)
    for a, b, c, d in zip(got, want, fused, fused_then_chunked):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5)
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=2e-5)
        np.testing.assert_allclose(a, d, rtol=1e-4, atol=2e-5)
    assert (got[0] == 0).any()  # (something was dropped)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kw", [{"is_causal": True}, {"dropout_p": 0.25}], ids=["causal", "dropout"])
def test_finite_differences(device, kw, chunked, monkeypatch):
    _budget(monkeypatch, 3, 3, 1, itemsize=8)  # (float64 on the CPU)

    def f(q, k, v):
        wg.manual_seed(3)  # the same dropout draw at every evaluation
        return F.scaled_dot_product_attention(q, k, v, **kw)
    gradcheck(f, RNG.standard_normal((1, 2, 3, 4)), RNG.standard_normal((1, 2, 3, 4)),
              RNG.standard_normal((1, 2, 3, 4)), device=device)
    assert chunked


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
@pytest.mark.parametrize("paths", ["chunked", "mixed"])
def test_a_recorded_step_replays_with_fresh_dropout_draws(paths, monkeypatch):
    """A replayed step with the chunked path (or the fused forward and the chunked backward) and dropout computes
    what eager steps compute, on the CPU too: each replay advances the chunks' draws as an eager call does."""
    monkeypatch.setattr(ac, "FORCE", paths)
    B, H, T, E = 2, 3, 8, 4
    _budget(monkeypatch, T, T, 2)
    x0 = RNG.standard_normal((B, T, H * E)).astype(np.float32)
    w0 = (RNG.standard_normal((H * E, 3 * H * E)) * 0.3).astype(np.float32)

    def train(device, replay):
        wg.manual_seed(11)
        w = wg.tensor(w0, device=device, requires_grad=True)
        opt = wg.optim.SGD([w], lr=0.1)

        def step(x):
            q, k, v = (x @ w).split(H * E, dim=2)
            q, k, v = (u.view(B, T, H, E).transpose(1, 2) for u in (q, k, v))
            loss = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, is_causal=True).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        run = wg.replayable(step) if replay else step
        x = wg.tensor(x0, device=device)
        return [float(run(x).item()) for _ in range(6)]

    eager = train("cpu", False)
    replayed = train("webgpu", True)
    np.testing.assert_allclose(replayed, eager, rtol=1e-5, atol=1e-6)
    assert len(set(eager)) == len(eager)  # (the draws differ step to step)


def test_the_rule(monkeypatch):
    """choose(), (forward, backward): the CPU takes the fused kernels; WebGPU the chunked products from
    CHUNKED_MIN_KEYS keys on while the query rows of all (batch, head) pairs are fewer than FUSED_MIN_ROWS (a decode
    step's single query), or for heads from CHUNKED_FORWARD_MIN_HEAD; the fused forward with the chunked backward
    for heads from CHUNKED_BACKWARD_HEAD over few keys; the fused kernels otherwise; FORCE overrides. eligible(): what the chunked path can take."""
    monkeypatch.setattr(ac, "FORCE", None)
    long = [wg.randn(1, 2, 128, 8) for _ in range(3)]
    assert ac.choose(*long) == ("fused", "fused")
    for force, paths in (("chunked", ("chunked", "chunked")), ("mixed", ("fused", "chunked"))):
        monkeypatch.setattr(ac, "FORCE", force)
        assert ac.choose(*long) == paths
    assert ac.eligible(*long, None)
    assert not ac.eligible(long[0].double(), long[1], long[2], None)
    assert not ac.eligible(*long, wg.zeros(128, 128, requires_grad=True))
    monkeypatch.setattr(ac, "SCRATCH_BYTES", ac.BACKWARD_BUFFERS * 128 * 128 * 4 - 1)
    assert not ac.eligible(*long, None)
    if "webgpu" not in DEVICES:
        return
    monkeypatch.setattr(ac, "FORCE", None)
    gpu_long = [t.to("webgpu") for t in long]
    short_keys = [gpu_long[0]] + [wg.randn(1, 2, 127, 8, device="webgpu") for _ in range(2)]
    decode = [wg.randn(1, 2, 1, 8, device="webgpu")] + gpu_long[1:]
    assert ac.choose(*gpu_long) == ac.choose(*decode) == ("chunked", "chunked")
    assert ac.choose(*short_keys) == ("fused", "fused")
    rows = ac.FUSED_MIN_ROWS // 128

    def heads(head, keys=128, value_head=None):  # a training step's queries: FUSED_MIN_ROWS rows
        q = wg.empty(1, rows, 128, head, device="webgpu")
        return q, wg.empty(1, rows, keys, head, device="webgpu"), wg.empty(1, rows, keys, value_head or head,
                                                                             device="webgpu")
    assert ac.choose(*heads(8)) == ac.choose(*heads(32)) == ("fused", "fused")
    assert ac.choose(*[t[:, :-1] for t in heads(8)]) == ("chunked", "chunked")
    assert ac.choose(*heads(ac.CHUNKED_FORWARD_MIN_HEAD)) == ("chunked", "chunked")
    assert ac.choose(*heads(16, value_head=ac.CHUNKED_FORWARD_MIN_HEAD)) == ("chunked", "chunked")
    assert ac.choose(*heads(ac.CHUNKED_BACKWARD_HEAD, keys=ac.CHUNKED_BACKWARD_MAX_KEYS)) == ("fused", "chunked")
    assert ac.choose(*heads(ac.CHUNKED_BACKWARD_HEAD, keys=ac.CHUNKED_BACKWARD_MAX_KEYS + 1)) == ("fused", "fused")


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
def test_webgpu_takes_the_products_and_falls_back(monkeypatch):
    """On WebGPU a long sequence runs the products; where the chunked path cannot take the call (float64 is
    refused by WebGPU altogether, so: a scratch budget below one pair) the fused kernels run it."""
    monkeypatch.setattr(ac, "FORCE", None)
    calls = []
    real = ac.chunked_attention
    monkeypatch.setattr(ac, "chunked_attention", lambda *a: calls.append(1) or real(*a))
    q, k, v = (wg.randn(1, 2, 128, 8, device="webgpu") for _ in range(3))
    want = F.scaled_dot_product_attention(q.cpu(), k.cpu(), v.cpu(), is_causal=True).numpy()
    got = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert calls == [1]
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-4, atol=2e-5)
    monkeypatch.setattr(ac, "SCRATCH_BYTES", 1 << 10)
    got = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert calls == [1]
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-4, atol=2e-5)


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
@pytest.mark.parametrize("chunks", [1, 2])
def test_dispatches(chunks, monkeypatch):
    """Per chunk: forward S = Q Kᵀ, the masked softmax, O = P V; backward S and P again, dV, dP, the softmax's
    backward, dQ and dK. Contiguous inputs are not copied; the causal mask is made once."""
    from webgrad._backends.webgpu.runtime import default_runtime
    rt = default_runtime()
    monkeypatch.setattr(rt, "software", False)
    monkeypatch.setattr(ac, "FORCE", "chunked")
    B, H, T, E = 1, 4, 8, 16
    monkeypatch.setattr(ac, "SCRATCH_BYTES", ac.BACKWARD_BUFFERS * T * T * 4 * (H // chunks))
    q, k, v = (wg.randn(B, H, T, E, device="webgpu", requires_grad=True) for _ in range(3))
    F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (the causal mask)
    stats = rt.stats
    before = stats["dispatches"]
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    forward = stats["dispatches"] - before
    g = wg.ones(B, H, T, E, device="webgpu")
    before = stats["dispatches"]
    out.grad_fn.backward_fn(g)
    backward = stats["dispatches"] - before
    # forward chunks: two of the backward's where the budget of three buffers is cut in two
    forward_chunks = -(-H // min(H, (H // chunks) * 3 // 2))
    assert (forward, backward) == (3 * forward_chunks, 7 * chunks)


@pytest.fixture
def gpu_kernels(monkeypatch):
    """The runtime's GPU kernel variants (matmul.wgsl's workgroup tiles) on whatever adapter runs the tests."""
    from webgrad._backends.webgpu.runtime import default_runtime
    rt = default_runtime()
    monkeypatch.setattr(rt, "software", False)
    monkeypatch.setattr(rt, "variant", dict(rt.variant, matmul_profile="gpu"))
    return rt


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
@pytest.mark.parametrize("part", ["out", "a_lower", "a_upper"])
@pytest.mark.parametrize("M,N,K", [(200, 200, 64), (130, 70, 260), (1024, 64, 1024)])
def test_matmul_causal_skips_only_what_the_triangle_zeroes(part, M, N, K, gpu_kernels):
    """kernels.matmul_causal on matmul.wgsl's tiles (CAUSAL): "out" computes every wanted (lower) element,
    "a_lower"/"a_upper" with a triangular op(a) give the whole product; the plans carry the constant."""
    from webgrad._backends import kernels
    from webgrad._backends.webgpu import matmul_plan
    trans_a = part == "a_upper"
    a = RNG.standard_normal((2, M, K)).astype(np.float32)
    if part == "a_lower":
        a = np.tril(a)
    elif part == "a_upper":
        a = np.triu(a)
    b = RNG.standard_normal((2, K, N)).astype(np.float32)
    want = a @ b
    a_stored = np.ascontiguousarray(a.transpose(0, 2, 1)) if trans_a else a
    out = wg.empty(2, M, N, device="webgpu")
    ta, tb = (wg.tensor(x, device="webgpu") for x in (a_stored, b))
    kernels.matmul_causal(out.device.backend, out._view, ta._view, tb._view, trans_a=trans_a, part=part)
    got = out.cpu().numpy()
    if part == "out":
        keep = np.tril(np.ones((M, N), bool))
        got, want = got[:, keep], want[:, keep]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    code = matmul_plan.CAUSAL_PARTS[part]
    assert any(isinstance(k, matmul_plan.MatmulPlan) and k.constants.get("CAUSAL") == code for k in gpu_kernels.memo)


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
@pytest.mark.parametrize("paths", ["chunked", "mixed"])
def test_causal_products_on_gpu_tiles_match_torch(paths, gpu_kernels, monkeypatch):
    """Causal attention by the products on matmul.wgsl's tiles, which skip the weights' zero triangle: output and
    gradients as torch's, over several tiles a side and a rectangular T_q != T_k."""
    monkeypatch.setattr(ac, "FORCE", paths)
    _run("webgpu", (1, 3, 200, 200, 64, 64), {"is_causal": True}, None)
    _run("webgpu", (2, 2, 130, 260, 24, 16), {"is_causal": True}, None)
