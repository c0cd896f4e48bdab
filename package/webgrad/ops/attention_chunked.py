"""Scaled dot-product attention by batched products, in chunks of (batch x head) pairs, and the choice between it
and the fused attention kernels (ops/attention.py) for each call of F.scaled_dot_product_attention.

The fused kernels keep one query row per thread and no score matrix: little memory, but no GPU's fast path for
products (WGSL has no tensor cores). Here the scores of `n` (batch, head) pairs at a time are products of the
tuned matmul kernel, and the softmax one row kernel (kernels.softmax_masked: the scale, the causal or boolean
mask, and -inf where masked, in one pass), so attention runs at the products' speed while the [n, L, S] scratch
stays bounded (SCRATCH_BYTES); nothing of size [L, S] outlives the call. Per chunk:

  forward   S = Q Kᵀ;  P = softmax(S * scale, masked);  [Pd = dropout(P)];  O = Pd V
  backward  S = Q Kᵀ and P again (the same kernels on the same inputs: the forward's P bit for bit);
            dV = Pdᵀ dO;  dPd = dO Vᵀ;  [dP = dropout(dPd)];  dS = P * (dP - rowsum(P * dP)) * scale
            (kernels.softmax_masked_backward; rowsum(P * dP) = rowsum(dO * O), so O is not read);
            dQ = dS K;  dK = dSᵀ Q

The backward keeps Q, K, V (contiguous [N, rows, dim] copies where the inputs are strided views, as a GPT's
heads are), the dropout draw's seed and offsets, and nothing of the scores. A float mask is added to the scaled
scores by two elementwise passes before the softmax. Dropout draws what the fused kernels and F.dropout of the
weights draw: weight (i, j) of pair bh is kept where u(offset + (bh * L + i) * S + j) >= p, each chunk's draw
starting at its first pair's counter.

choose() says which path a call takes (the one place the rule lives); sdpa() runs it.
"""

import math
import os

from .. import dtypes, random, replay
from .._autograd import no_grad, record
from .._tensor import arange
from .._view import View
from .._backends import kernels
from .attention import fused_attention, lead_shape
from .core import new, unbroadcast

# The [n, L, S] buffers of one call (three in the backward: the scores, the weights and their gradient; two in the
# forward) stay under SCRATCH_BYTES together and MAX_BUFFER_BYTES each (WebGPU's default
# maxStorageBufferBindingSize: every adapter binds them), n as large as fits. At GPT-2 small's 1,024 tokens (4 MiB
# of scores a pair): 21 pairs a backward chunk and 32 a forward one, 256 MiB, under 2% of that model's training
# peak at batch 8, so within PyTorch's flash SDPA's memory; each product multiplies 21 (or 32) 1024 x 1024 x 64
# matrices, enough tiles to fill a GPU without splitting K (at 128 MiB, 10 pairs: the thin products split K in
# four, and the step takes 2,051 dispatches instead of 1,163). WEBGRAD_SDPA_SCRATCH_MIB sets SCRATCH_BYTES (to
# measure other sizes).
SCRATCH_BYTES = int(os.environ.get("WEBGRAD_SDPA_SCRATCH_MIB") or 256) << 20
MAX_BUFFER_BYTES = 128 << 20
BACKWARD_BUFFERS, FORWARD_BUFFERS = 3, 2
# Fewer keys than this take the fused kernels (one dispatch; each query row's thread walks a short loop).
CHUNKED_MIN_KEYS = 128
# The fused kernels give each query row of each (batch, head) pair a thread: from this many rows they fill a GPU
# and beat the products, which write and read the [L, S] scores. On an H200 (python -m webgrad.bench scale
# --models gpt-6x384 gpt2-small, with WEBGRAD_SDPA=fused and =chunked), training steps of 24,576 rows (gpt-6x384:
# batch 16 x 6 heads x 256) ran 232,995 tokens/s fused against 224,966 chunked at 866 MiB against 966, and of
# 98,304 rows (gpt2-small) 27,813 against 27,888 at 10,796 MiB against 11,374. A decode step (one query row per
# pair: B x H threads, each walking the whole cache) is where the products win.
FUSED_MIN_ROWS = 4096
# "fused" or "chunked" forces every call that can take that path (tests, benchmarks: WEBGRAD_SDPA=fused ...);
# None: choose() decides.
FORCE = os.environ.get("WEBGRAD_SDPA") or None


def eligible(query, key, value, attn_mask):
    """Whether the chunked path takes these operands: floating q, k, v of one dtype that the matmul and softmax
    kernels take (float32; float64 on the CPU), a mask without gradient, no empty dimension, and the scratch of one
    (batch, head) pair within SCRATCH_BYTES and MAX_BUFFER_BYTES."""
    dtype = query.dtype
    if not (dtype is key.dtype is value.dtype):
        return False
    if not (dtype is dtypes.float32 or (dtype is dtypes.float64 and query.device.backend.name == "cpu")):
        return False
    if attn_mask is not None and attn_mask.requires_grad:
        return False
    L, E = query.shape[-2:]
    S, Ev = key.shape[-2], value.shape[-1]
    if not (L and S and E and Ev) or any(0 in t.shape for t in (query, key, value)):
        return False
    per_pair = L * S * dtype.itemsize
    return BACKWARD_BUFFERS * per_pair <= SCRATCH_BYTES and per_pair <= MAX_BUFFER_BYTES


def choose(query, key, value, attn_mask=None):
    """The path a call takes where both can: "fused" (the attention kernels) or "chunked" (products in chunks).

    The rule, in order:
      1. FORCE, where set;
      2. the CPU: fused (its reference is one NumPy pass; the products would only add copies);
      3. fewer than CHUNKED_MIN_KEYS keys: fused (one dispatch, and each query row's thread has a short loop);
      4. FUSED_MIN_ROWS query rows or more over all (batch, head) pairs: fused (a thread per row fills the GPU,
         and no [L, S] scores go through memory; measured above FUSED_MIN_ROWS);
      5. else chunked: few rows over many keys, a decode step above all (one query row over a long cache),
         leaves the fused kernels B x H threads, each walking every key in turn; the products spread the keys
         over the device, on software adapters too (lavapipe: a 256-key step over 8 heads takes 1.4 ms against
         3.4), while training-shaped calls cost software adapters about the same either way.
    Either path hands over to the other where it cannot run the call (sdpa): the chunked path where the scratch of
    one (batch, head) pair would pass SCRATCH_BYTES or for dtypes its kernels lack, the fused kernels for head
    sizes or storage-buffer limits they refuse."""
    if FORCE in ("fused", "chunked"):
        return FORCE
    if query.device.backend.name == "cpu" or key.shape[-2] < CHUNKED_MIN_KEYS:
        return "fused"
    rows = 1
    for n in query.shape:
        rows *= n
    if rows // query.shape[-1] >= FUSED_MIN_ROWS:
        return "fused"
    return "chunked"


def sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale):
    """softmax(q kᵀ * scale + mask) v with dropout by the path choose() picks (falling back to the other), or None
    where neither applies (F.scaled_dot_product_attention composes it then)."""
    chunked_ok = eligible(query, key, value, attn_mask)
    if chunked_ok and choose(query, key, value, attn_mask) == "chunked":
        return chunked_attention(query, key, value, attn_mask, dropout_p, is_causal, scale)
    out = fused_attention(query, key, value, attn_mask, dropout_p, is_causal, scale)
    if out is None and chunked_ok:
        return chunked_attention(query, key, value, attn_mask, dropout_p, is_causal, scale)
    return out


# ------------------------------------------------------------------------------------ the chunked path

# (backend, L, S) -> bool [L, S], True above the diagonal (masked): made once, outside any capture. Keyed by the
# backend, not the device's name: after webgrad.webgpu.reset() "webgpu" is a new device, and a mask of the old
# one would be bound beside the new one's buffers.
_CAUSAL = {}
_CAUSAL_KEEP = 8


def _causal(device, L, S):
    key = (device.backend, L, S)
    mask = _CAUSAL.get(key)
    if mask is None:
        with device.backend.outside_capture(), no_grad():  # (kept after a recorded step is released)
            mask = arange(S, device=device).unsqueeze(0) > arange(L, device=device).unsqueeze(1)
        if len(_CAUSAL) >= _CAUSAL_KEEP:
            _CAUSAL.pop(next(iter(_CAUSAL)))
        _CAUSAL[key] = mask
    return mask


def _pairs(t, lead, n):
    """t broadcast to lead as a contiguous [n, rows, dim] tensor (t itself where it already is), outside autograd."""
    with no_grad():
        t = t.detach()
        if tuple(t.shape[:-2]) != tuple(lead):
            t = t.expand(*lead, *t.shape[-2:])
        return t.contiguous().reshape(n, *t.shape[-2:])


class _Mask:
    """A mask (bool: True where masked; or float: added) broadcast to [*lead, L, S], cut per chunk of pairs."""

    def __init__(self, mask, lead, L, S):
        heads = lead[-1] if lead else 1
        m = mask.expand(*lead, L, S).reshape(-1, heads, L, S)  # (a view where the strides allow)
        self.view, self.heads = m._view, heads
        sb, sh = m._view.strides[:2]
        rows = m.shape[0]
        # one stride walks the pairs where the batch stride is the head stride times the heads (or one dim is 1)
        self.flat = sh if rows == 1 or sb == sh * heads else sb if heads == 1 else None

    def aligned(self, n):
        """Whether chunks of n pairs can be cut (n a multiple or divisor of the heads unless one stride walks)."""
        return self.flat is not None or n % self.heads == 0 or self.heads % n == 0

    def chunk(self, c0, n):
        """(the mask's view of pairs c0 .. c0 + n as [d0, d1, L, S], that 4-D shape)."""
        v = self.view
        sb, sh, sl, ss = v.strides
        _, _, L, S = v.shape
        if self.flat is not None:
            shape, strides, offset = (1, n, L, S), (0, self.flat, sl, ss), v.offset + c0 * self.flat
        elif n >= self.heads:
            shape, strides, offset = (n // self.heads, self.heads, L, S), v.strides, v.offset + (c0 // self.heads) * sb
        else:
            shape = (1, n, L, S)
            strides, offset = (0, sh, sl, ss), v.offset + (c0 // self.heads) * sb + (c0 % self.heads) * sh
        return View(v.storage, shape, strides, offset, v.dtype), shape


def _chunk_size(pairs, per_pair, buffers, mask):
    n = max(1, min(pairs, SCRATCH_BYTES // (buffers * per_pair), MAX_BUFFER_BYTES // per_pair))
    if mask is not None and not mask.aligned(n):
        heads = mask.heads
        n = n - n % heads if n >= heads else max(d for d in range(1, n + 1) if heads % d == 0)
    return n


def _chunks(pairs, n):
    return [(c0, min(n, pairs - c0)) for c0 in range(0, pairs, n)]


def _block(t, c0, n):
    """Pairs c0 .. c0 + n of a contiguous [pairs, rows, cols] tensor, as a [n, rows, cols] view."""
    v = t._view
    _, rows, cols = v.shape
    return View(v.storage, (n, rows, cols), (rows * cols, cols, 1), v.offset + c0 * rows * cols, v.dtype)


def _as4(view, shape4):
    """A contiguous [n, rows, cols] view as the 4-D shape the row kernels walk (the mask's)."""
    return View(view.storage, shape4, View.contiguous_strides(shape4), view.offset, view.dtype)


def _draw(device, per_pair, pairs, starts):
    """The dropout draw of pairs x per_pair counters: (seed, {first pair of a chunk: its first counter}); while a
    step is recorded, dynamic scalars that a replay hook advances as an eager call would (ops/attention.py's
    draw)."""
    gen = random.default_generator
    seed, offset = gen.take(pairs * per_pair)
    offsets = {c0: (offset + c0 * per_pair) & 0xFFFFFFFF for c0 in starts}
    backend = device.backend
    if not (replay.capturing() and backend.supports_capture):
        return seed, offsets
    seed = backend.scalar(seed, "u32")
    offsets = {c0: backend.scalar(o, "u32") for c0, o in offsets.items()}

    def advance():
        s, o = gen.take(pairs * per_pair)
        seed.set(s)
        for c0, scalar in offsets.items():
            scalar.set(o + c0 * per_pair)
    replay.on_replay(advance)
    return seed, offsets


def chunked_attention(query, key, value, attn_mask, dropout_p, is_causal, scale):
    """softmax(q kᵀ * scale + mask) v with dropout, by products in chunks of (batch, head) pairs (module doc).
    The caller checked eligible()."""
    L, E = query.shape[-2:]
    S, Ev = key.shape[-2], value.shape[-1]
    lead = lead_shape(query, key, value, attn_mask)
    pairs = 1
    for d in lead:
        pairs *= d
    device, dtype = query.device, query.dtype
    backend = device.backend
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    dropout_p = float(dropout_p)
    q3, k3, v3 = (_pairs(t, lead, pairs) for t in (query, key, value))

    masked = bias = None  # masked: bool, True where left out; bias: a float mask added to the scaled scores
    with no_grad():
        if is_causal:
            masked = _Mask(_causal(device, L, S), lead, L, S)
        elif attn_mask is not None and attn_mask.dtype is dtypes.bool_:
            masked = _Mask(~attn_mask, lead, L, S)
        elif attn_mask is not None:
            bias = _Mask(attn_mask if attn_mask.dtype is dtype else attn_mask.to(dtype), lead, L, S)
    cut = masked or bias
    per_pair = L * S * dtype.itemsize
    forward_n = _chunk_size(pairs, per_pair, FORWARD_BUFFERS, cut)
    backward_n = _chunk_size(pairs, per_pair, BACKWARD_BUFFERS, cut)
    forward_chunks, backward_chunks = _chunks(pairs, forward_n), _chunks(pairs, backward_n)
    seed, offsets = 0, {}
    if dropout_p > 0:
        seed, offsets = _draw(device, L * S, pairs, {c0 for c0, _ in forward_chunks + backward_chunks})

    def weights(a, b, c0, n):
        """P of pairs c0 .. c0 + n into b (scratch a holds the scores, then is free); its 4-D shape."""
        kernels.matmul(backend, a, _block(q3, c0, n), _block(k3, c0, n), trans_b=True)
        if bias is not None:
            bv, shape4 = bias.chunk(c0, n)
            a4, b4 = _as4(a, shape4), _as4(b, shape4)
            kernels.unary(backend, "affine", b4, a4, scale, 0.0)
            kernels.binary(backend, "add", a4, b4, bv)
            kernels.softmax_masked(backend, b4, a4, None, float("-inf"), 1.0)
            return shape4, None
        mv, shape4 = masked.chunk(c0, n) if masked is not None else (None, (1, n, L, S))
        kernels.softmax_masked(backend, _as4(b, shape4), _as4(a, shape4), mv, float("-inf"), scale)
        return shape4, mv

    out = new((pairs, L, Ev), dtype, device)
    a_t, b_t = new((forward_n, L, S), dtype, device), new((forward_n, L, S), dtype, device)
    for c0, n in forward_chunks:
        a, b = _block(a_t, 0, n), _block(b_t, 0, n)
        weights(a, b, c0, n)
        if dropout_p > 0:
            kernels.dropout(backend, a, b, dropout_p, seed, offsets[c0])
            b = a
        kernels.matmul(backend, _block(out, c0, n), b, _block(v3, c0, n))
    del a_t, b_t
    result = out.reshape(*lead, L, Ev)
    wants = [t.requires_grad for t in (query, key, value)]
    if not any(wants):
        return result
    # (shapes only: the closure must not hold the inputs, whose buffers the copies q3, k3, v3 may replace)
    in_shapes = tuple(tuple(t.shape) for t in (query, key, value))

    def backward(g):
        g3 = g.reshape(pairs, L, Ev).contiguous()
        grads = [new(shape, dtype, device) if want else None
                 for want, shape in zip(wants, ((pairs, L, E), (pairs, S, E), (pairs, S, Ev)))]
        gq, gk, gv = grads
        bufs = [new((backward_n, L, S), dtype, device) for _ in range(BACKWARD_BUFFERS)]
        for c0, n in backward_chunks:
            a, b, c = (_block(t, 0, n) for t in bufs)
            shape4, mv = weights(a, b, c0, n)  # a: free, b: P
            weights_used = b
            if dropout_p > 0:
                kernels.dropout(backend, a, b, dropout_p, seed, offsets[c0])  # a: Pd
                weights_used = a
            g_blk = _block(g3, c0, n)
            if gv is not None:
                kernels.matmul(backend, _block(gv, c0, n), weights_used, g_blk, trans_a=True)
            if gq is None and gk is None:
                continue
            kernels.matmul(backend, c, g_blk, _block(v3, c0, n), trans_b=True)  # c: dPd
            d_p, d_s = c, a
            if dropout_p > 0:
                kernels.dropout(backend, a, c, dropout_p, seed, offsets[c0])  # a: dP
                d_p, d_s = a, c
            kernels.softmax_masked_backward(backend, _as4(d_s, shape4), _as4(d_p, shape4), _as4(b, shape4), mv,
                                            scale)
            if gq is not None:
                kernels.matmul(backend, _block(gq, c0, n), d_s, _block(k3, c0, n))
            if gk is not None:
                kernels.matmul(backend, _block(gk, c0, n), d_s, _block(q3, c0, n), trans_a=True)
        return tuple(None if gt is None else unbroadcast(gt.reshape(*lead, *gt.shape[-2:]), shape)
                     for gt, shape in zip(grads, in_shapes))

    return record(result, "ScaledDotProductAttention", (query, key, value), backward)
