"""Fused attention ops: scaled dot-product attention on the attention kernels (kernels.attention and its backward).

The score matrix is never materialised: the forward keeps each row's log-sum-exp, the backward recomputes the
weights from it. Dropout draws its mask inside the kernels from the counter-based stream (draw): the same
numbers F.dropout(softmax(...)) would draw from the same generator state, on every backend.
"""

import math

from .. import dtypes, random, replay
from .._autograd import record, record_adjoint
from .._tensor import Tensor
from .._view import View
from .core import broadcast_shapes, expanded_view, new, unbroadcast
from .._backends import kernels


def draw(n, device, generator=None):
    """(seed, offset) of n counters of the generator's stream, for a kernel that draws inside: while a step is
    recorded, dynamic scalars that a replay hook advances as an eager call would (as random.fill_random)."""
    gen = generator or random.default_generator
    seed, offset = gen.take(n)
    backend = device.backend
    if replay.capturing() and backend.supports_capture:
        seed, offset = backend.scalar(seed, "u32"), backend.scalar(offset, "u32")
        replay.on_replay(lambda: _advance(gen, n, seed, offset))
    return seed, offset


def _advance(gen, n, seed_scalar, offset_scalar):
    seed, offset = gen.take(n)
    seed_scalar.set(seed)
    offset_scalar.set(offset)


def _four(t, lead):
    """t as a 4-D [B, H, rows, dim] tensor (a view where possible) for batch dims `lead` (broadcast later)."""
    if t.ndim == 4:
        return t
    if t.ndim < 4:
        return t.reshape(*([1] * (4 - t.ndim)), *t.shape)
    return t.reshape(-1, t.shape[-3], *t.shape[-2:])


def _aligned(t):
    """t itself where the kernels read it as it is (last dim contiguous, offset and strides multiples of 4; stride 0
    kept), else a packed copy."""
    v = t._view
    if (v.strides[-1] == 1 or v.shape[-1] == 1) and v.offset % 4 == 0 and all(s % 4 == 0 for s in v.strides[:-1]):
        return t
    return t.clone() if t.is_contiguous() else t.contiguous()


def like(t, shape):
    """A new tensor of `shape` (t's rank) stored densely in t's order of dims by stride, its last dim innermost:
    PyTorch's fused attention allocates its output in the query's layout and each gradient in its input's, so a
    GPT's heads (views [B, nh, T, hs] of a [B, T, 3C] projection) give an out stored [B, T, nh, hs], whose
    y.transpose(1, 2).contiguous() is free and whose gradients' view back to [B, T, C] needs no copy. Contiguous
    where t is, or where t repeats elements (a stride 0: a broadcast input)."""
    v = t._view
    lead = range(len(shape) - 1)
    if v.is_contiguous() or any(v.strides[d] == 0 and v.shape[d] > 1 for d in lead):
        return new(shape, t.dtype, t.device)
    order = sorted(lead, key=lambda d: -v.strides[d]) + [len(shape) - 1]  # outermost first (stable on ties)
    if order == list(range(len(shape))):
        return new(shape, t.dtype, t.device)
    buf = new(tuple(shape[d] for d in order), t.dtype, t.device)
    dense, strides = buf._view.strides, [0] * len(shape)
    for at, d in enumerate(order):
        strides[d] = dense[at]
    return Tensor._make(View(buf._view.storage, tuple(shape), tuple(strides), buf._view.offset, t.dtype), t.device)


def lead_shape(query, key, value, attn_mask):
    """The broadcast batch dims of an attention call (all but the last two), its mask's included; raises where the
    operands, or the mask against the [L, S] scores, do not broadcast."""
    lead = broadcast_shapes(tuple(query.shape[:-2]), tuple(key.shape[:-2]), tuple(value.shape[:-2]),
                            op="scaled_dot_product_attention")
    if attn_mask is not None:
        lead = broadcast_shapes(lead, tuple(attn_mask.shape[:-2]), op="scaled_dot_product_attention")
        broadcast_shapes((query.shape[-2], key.shape[-2]), tuple(attn_mask.shape[-2:]),
                         op="scaled_dot_product_attention")
    return lead


def fused_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, dropout_draw=None, backward=True):
    """softmax(q k^T * scale + mask) v with dropout, by the attention kernels; None where they do not apply (the
    caller composes it then): a float mask that requires grad, head sizes a backend refuses.

    dropout_draw: the (seed, offset) of the dropout's counters where the caller drew them (a backward by another
    path must draw the same mask); backward=False: the output alone, recorded by nothing (the caller records it
    with its own backward), and no log-sum-exp kept."""
    if attn_mask is not None and attn_mask.requires_grad:
        return None
    if not (query.dtype is key.dtype is value.dtype) or not query.dtype.is_floating:
        return None
    L, E = query.shape[-2:]
    S, Ev = key.shape[-2], value.shape[-1]
    lead = lead_shape(query, key, value, attn_mask)
    if len(lead) > 2:
        flat = 1
        for n in lead[:-1]:
            flat *= n
        lead4 = (flat, lead[-1])
    else:
        lead4 = (1,) * (2 - len(lead)) + tuple(lead)
    B, H = lead4
    device = query.device
    qs, ks, vs = (_aligned(_four(t.expand(*lead, *t.shape[-2:]), lead)) for t in (query, key, value))
    mask = None
    if attn_mask is not None:
        # a float mask in the scores' precision: float32 kernels, float64 on the CPU (a float64 mask rounded to
        # float32 moved float64 results by ~1e-8, which finite differences in float64 read as a wrong gradient)
        m = attn_mask if attn_mask.dtype is dtypes.bool_ else \
            attn_mask.to(dtypes.float64 if query.dtype is dtypes.float64 else dtypes.float32)
        m = m.expand(*lead, L, S)
        mask = expanded_view(_four(m, lead), (B, H, L, S))
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    dropout_p = float(dropout_p)
    if dropout_p > 0:
        seed, offset = dropout_draw or draw(B * H * L * S, device)
    else:
        seed, offset = 0, 0
    backend = device.backend
    out = like(qs, (B, H, L, Ev))
    wants_grad = backward and any(t.requires_grad for t in (query, key, value))
    lse = new((B, H, L), dtypes.float64 if query.dtype is dtypes.float64 else dtypes.float32, device) \
        if wants_grad else None
    try:
        kernels.attention(backend, out._view, None if lse is None else lse._view, qs._view, ks._view, vs._view, mask,
                          scale, bool(is_causal), dropout_p, seed, offset)
    except NotImplementedError:
        return None
    shape = tuple(lead) + (L, Ev)

    def backward(g):
        g4 = _aligned((g if g.dtype is out.dtype else g.to(out.dtype)).reshape(B, H, L, Ev))
        grads = [like(s, (B, H) + tuple(t.shape[-2:])) if t.requires_grad else None
                 for s, t in zip((qs, ks, vs), (query, key, value))]
        kernels.attention_backward(backend, *(None if t is None else t._view for t in grads), g4._view, qs._view,
                                   ks._view, vs._view, out._view, lse._view, mask, scale, bool(is_causal), dropout_p,
                                   seed, offset)
        return tuple(None if gt is None else unbroadcast(gt.reshape(*lead, *gt.shape[-2:]), tuple(t.shape))
                     for gt, t in zip(grads, (query, key, value)))

    result = out.reshape(shape)
    if not wants_grad:
        return result
    return record(result, "ScaledDotProductAttention", (query, key, value), backward)


def fused_dropout(input, p):
    """Dropout with 0 < p < 1 in one kernel, its mask drawn inside (the draw of `rand(shape) >= p`) and never
    stored: the backward is the same kernel on the gradient."""
    x = input.contiguous()
    seed, offset = draw(x.numel(), x.device)
    out = new(tuple(x.shape), x.dtype, x.device)
    backend = x.device.backend
    kernels.dropout(backend, out._view, x._view, float(p), seed, offset)

    def backward(g):
        g = g.contiguous()
        gx = new(tuple(g.shape), g.dtype, g.device)
        kernels.dropout(backend, gx._view, g._view, float(p), seed, offset)
        return (record_adjoint(gx, g, lambda h: backward(h)[0], "DropoutBackward"),)  # (the same mask: self-adjoint)
    return record(out, "Dropout", (x,), backward)
