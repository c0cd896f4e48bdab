"""The fused attention kernels' output layouts, as PyTorch's flash and efficient attention allocate them: out in the
query's memory layout and each gradient in its input's (dense, the same order of dims by stride), contiguous for
contiguous or broadcast inputs. A GPT's heads (views [B, nh, T, hs] of its [B, T, 3C] projection) then give an out
whose y.transpose(1, 2).contiguous() is free and gradients whose view back to [B, T, C] copies nothing: counted
here on a GPT training step on WebGPU. Values match PyTorch for strided and contiguous inputs, causal and masked,
float32 and float16 under autocast."""

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn.functional as F
from webgrad.models import GPTConfig
from webgrad.models.gpt import define

from helpers import DEVICES, VARIANTS, variant

RNG = np.random.default_rng(7)


def _heads(lib, x, B, T, nh, C):
    """q, k, v as a GPT makes them: split of a [B, T, 3C] projection, each viewed [B, T, nh, hs], transposed."""
    return [u.view(B, T, nh, C // nh).transpose(1, 2) for u in x.split(C, dim=2)]


def _permuted(lib, a, perm, requires_grad=True):
    """A leaf stored in the permuted order `perm` of a's dims, and the view of it with a's shape."""
    inverse = [perm.index(d) for d in range(a.ndim)]
    stored = np.ascontiguousarray(a.transpose(perm))
    if lib is torch:
        leaf = torch.tensor(stored, requires_grad=requires_grad)
    else:
        leaf = wg.tensor(stored, device=lib, requires_grad=requires_grad)
    return leaf, leaf.permute(*inverse)


def _order(t):
    """The dims of t from outermost to innermost by stride (size-1 dims left out)."""
    return [d for d in sorted(range(t.ndim), key=lambda d: -t.stride(d)) if t.shape[d] > 1]


# ------------------------------------------------------------------------------------------ the layout rule

def test_contiguous_inputs_give_contiguous_out_and_gradients(device):
    q, k, v = (wg.randn(2, 3, 5, 8, device=device, requires_grad=True) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.is_contiguous()
    grads = out.grad_fn.backward_fn(wg.randn(2, 3, 5, 8, device=device))
    assert all(g.is_contiguous() for g in grads)


def test_a_gpts_heads_give_out_and_gradients_in_their_layout(device):
    B, T, nh, C = 2, 6, 4, 32
    x = wg.randn(B, T, 3 * C, device=device, requires_grad=True)
    q, k, v = _heads(wg, x, B, T, nh, C)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.shape == (B, nh, T, C // nh) and not out.is_contiguous()
    assert out.transpose(1, 2).is_contiguous()  # stored [B, T, nh, hs]: the script's .contiguous() is free
    g = wg.randn(B, T, nh, C // nh, device=device).transpose(1, 2)
    for grad in out.grad_fn.backward_fn(g):
        assert grad.transpose(1, 2).is_contiguous()
        assert grad.transpose(1, 2).view(B, T, C)._view.storage is grad._view.storage  # the view copies nothing


def test_each_gradient_takes_its_own_inputs_layout(device):
    shape = (2, 3, 5, 8)
    perms = [(0, 2, 1, 3), (1, 0, 2, 3), (2, 0, 1, 3)]
    views = [_permuted(device, RNG.standard_normal(shape).astype(np.float32), p)[1] for p in perms]
    out = F.scaled_dot_product_attention(*views)
    assert _order(out) == _order(views[0])
    grads = out.grad_fn.backward_fn(wg.randn(*shape, device=device))
    for grad, view in zip(grads, views):
        assert _order(grad) == _order(view) and grad.stride(-1) == 1
        assert grad.permute(*sorted(range(4), key=lambda d: -grad.stride(d))).is_contiguous()  # dense


def test_broadcast_inputs_give_contiguous_gradients(device):
    q = wg.randn(2, 6, 3, 8, device=device).transpose(1, 2).requires_grad_()
    k = wg.randn(2, 1, 6, 8, device=device).expand(2, 3, 6, 8).requires_grad_()
    v = wg.randn(1, 3, 6, 8, device=device).expand(2, 3, 6, 8).requires_grad_()
    out = F.scaled_dot_product_attention(q, k, v)
    assert out.transpose(1, 2).is_contiguous()
    gq, gk, gv = out.grad_fn.backward_fn(wg.randn(2, 3, 6, 8, device=device))
    assert gq.transpose(1, 2).is_contiguous() and gk.is_contiguous() and gv.is_contiguous()


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
def test_the_kernels_refuse_overlapping_outputs():
    from webgrad._backends import kernels
    q = wg.randn(1, 2, 4, 8, device="webgpu")
    out = wg.empty(1, 1, 4, 8, device="webgpu").expand(1, 2, 4, 8)
    with pytest.raises(ValueError, match="overlap"):
        kernels.attention(q.device.backend, out._view, None, q._view, q._view, q._view, None, 1.0)


# ------------------------------------------------------------------------------------------ values

def _mask(kind, L, S):
    if kind == "bool":
        m = RNG.random((L, S)) < 0.7
        m[:, 0] = True
        return m
    if kind == "float":
        m = RNG.standard_normal((1, 1, L, S)).astype(np.float32)
        m[0, 0, 1, 2] = -np.inf
        return m
    return None


LAYOUTS = {"contiguous": (0, 1, 2, 3), "gpt": (0, 2, 1, 3), "heads_outer": (1, 2, 0, 3)}


@pytest.mark.parametrize("device,software", VARIANTS)
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("kind", ["causal", "bool", "float"])
def test_out_and_gradients_match_torch(device, software, layout, kind):
    B, H, L, E = 2, 3, 7, 8
    arrays = [RNG.standard_normal((B, H, L, E)).astype(np.float32) for _ in range(3)]
    g = RNG.standard_normal((B, H, L, E)).astype(np.float32)
    mask = _mask(kind, L, L)
    perm = LAYOUTS[layout]

    def run(lib):
        leaves, views = zip(*(_permuted(lib, a, perm) for a in arrays))
        kw = {"is_causal": True} if kind == "causal" else \
            {"attn_mask": torch.tensor(mask) if lib is torch else wg.tensor(mask, device=lib)}
        sdpa = torch.nn.functional.scaled_dot_product_attention if lib is torch else F.scaled_dot_product_attention
        out = sdpa(*views, dropout_p=0.0, **kw)
        gt = torch.tensor(g) if lib is torch else wg.tensor(g, device=lib)
        (out * gt).sum().backward()
        return [out.detach().cpu().numpy()] + [leaf.grad.cpu().numpy().transpose([perm.index(d) for d in range(4)])
                                               for leaf in leaves]

    want = run(torch)
    with variant(device, software):
        got = run(device)
    for name, a, b in zip(("out", "grad_q", "grad_k", "grad_v"), got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=3e-5, err_msg=name)


@pytest.mark.parametrize("device,software", VARIANTS)
def test_a_gpts_heads_match_torch(device, software):
    B, T, nh, C = 2, 9, 2, 32
    x = RNG.standard_normal((B, T, 3 * C)).astype(np.float32)
    g = RNG.standard_normal((B, T, C)).astype(np.float32)

    def run(lib, t, gt):
        q, k, v = _heads(lib, t, B, T, nh, C)
        sdpa = torch.nn.functional.scaled_dot_product_attention if lib is torch else F.scaled_dot_product_attention
        y = sdpa(q, k, v, is_causal=True).transpose(1, 2).contiguous().view(B, T, C)
        (y * gt).sum().backward()
        return y

    tx = torch.tensor(x, requires_grad=True)
    ty = run(torch, tx, torch.tensor(g))
    with variant(device, software):
        wx = wg.tensor(x, device=device, requires_grad=True)
        wy = run(wg, wx, wg.tensor(g, device=device))
    np.testing.assert_allclose(wy.detach().cpu().numpy(), ty.detach().numpy(), rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(wx.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-4, atol=3e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_float16_under_autocast_keeps_the_layout_and_pytorchs_values(device):
    """A GPT's heads in float16 (autocast's projection): out stored [B, T, nh, hs], values within float16's
    rounding of PyTorch's float32 attention on the same float16 inputs."""
    if device == "webgpu" and not wg.device("webgpu").backend.runtime.has_f16:
        pytest.skip("the WebGPU adapter has no shader-f16")
    B, T, nh, C = 2, 8, 2, 32
    x = RNG.standard_normal((B, T, 3 * C)).astype(np.float16)
    g = RNG.standard_normal((B, T, C)).astype(np.float16)
    tx = torch.tensor(x.astype(np.float32), requires_grad=True)
    ty = torch.nn.functional.scaled_dot_product_attention(*_heads(torch, tx, B, T, nh, C), is_causal=True)
    (ty.transpose(1, 2).reshape(B, T, C) * torch.tensor(g.astype(np.float32))).sum().backward()
    wx = wg.tensor(x, device=device, requires_grad=True)
    with wg.autocast(device, dtype=wg.float16):
        wy = F.scaled_dot_product_attention(*_heads(wg, wx, B, T, nh, C), is_causal=True)
        assert wy.dtype is wg.float16 and wy.transpose(1, 2).is_contiguous()
        y = wy.transpose(1, 2).contiguous().view(B, T, C)
    (y * wg.tensor(g, device=device)).sum().backward()
    np.testing.assert_allclose(wy.detach().float().cpu().numpy(), ty.detach().numpy(), rtol=1e-2, atol=2e-3)
    np.testing.assert_allclose(wx.grad.float().cpu().numpy(), tx.grad.numpy(), rtol=1e-2, atol=1e-2)


# ------------------------------------------------------------------------------------------ a GPT step's copies

@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
def test_a_gpt_step_copies_only_for_splits_backward(monkeypatch):
    """Strided copies (the identity unary kernel with a non-contiguous side) in a training step of nanoGPT's
    attention: none in the forward (y.transpose(1, 2).contiguous() of an out stored [B, T, nh, hs]); in the
    backward, per layer, only split's three (each gradient into its third of the qkv gradient), not the three
    reshapes of dq, dk, dv back to [B, T, C] that contiguous gradients needed."""
    from webgrad._backends.webgpu import elementwise
    launch, copies = elementwise.launch, []

    def counting(rt, kernel, op_code, out, inputs, *args, **kwargs):
        if kernel is elementwise.UNARY and op_code == elementwise.IDENTITY and (
                not out.is_contiguous() or any(x is not None and not x.is_contiguous() for x in inputs)):
            copies.append((out.shape, out.strides))
        return launch(rt, kernel, op_code, out, inputs, *args, **kwargs)

    monkeypatch.setattr(elementwise, "launch", counting)
    B, T, C, layers = 2, 16, 32, 2
    wg.manual_seed(0)
    model = define(wg.nn).GPT(GPTConfig(block_size=T, vocab_size=23, n_layer=layers, n_head=2, n_embd=C,
                                        dropout=0.0)).to("webgpu")
    idx = wg.randint(0, 23, (B, T), device="webgpu")
    _, loss = model(idx, idx)
    assert copies == []
    loss.backward()
    assert copies == [((B, T, C), (T * 3 * C, 3 * C, 1))] * (3 * layers)  # into the [B, T, 3C] gradient
