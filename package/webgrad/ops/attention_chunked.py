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
# The fused kernels keep a row's head (the query's and the output's, or the key's and value's gradients) in a
# thread's registers: past 64 elements a head they spill, and a forward wider than V_SLICE_MAX vec4s walks the keys
# once per slice, where the products do not care about the head size; a causal call's products skip the weights'
# zero triangle (kernels.matmul_causal). On an H200 (`python -m webgrad.bench attention`, with WEBGRAD_SDPA=fused,
# =mixed and =chunked in one call; causal, us per call, fused against chunked): forward, head 128 1,858 against 312
# (4 x 12 heads x 512 tokens), head 96 146 against 119 (16 x 4 x 256), head 80 240 against 198 (16 x 8 x 256), so
# from CHUNKED_FORWARD_MIN_HEAD the whole call takes the products; head 64 127 against 142 (256 tokens) and 1,122
# against 1,768 (1,024), head 48 96 against 165. Backward: head 64 451 against 250 (16 x 6 x 256) and 941 against
# 528 (8 x 8 x 512), head 48 336 against 277 (16 x 8 x 256), so from CHUNKED_BACKWARD_HEAD over at most
# CHUNKED_BACKWARD_MAX_KEYS keys the backward takes the products behind a fused forward; but head 64 over 1,024 and
# 2,048 keys 3,849 against 3,644 and 5,269 against 6,081, and head 32 over 128 keys 218 against 356: fused.
CHUNKED_FORWARD_MIN_HEAD = 80
CHUNKED_BACKWARD_HEAD, CHUNKED_BACKWARD_MAX_KEYS = 48, 512
# "fused", "chunked" (both directions) or "mixed" (the fused forward, the chunked backward) forces every call that
# can take that path (tests, benchmarks: WEBGRAD_SDPA=fused ...); None: choose() decides.
FORCE = os.environ.get("WEBGRAD_SDPA") or None
_FORCED = {"fused": ("fused", "fused"), "chunked": ("chunked", "chunked"), "mixed": ("fused", "chunked")}


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
    """The paths a call takes where both can, (forward, backward), each "fused" (the attention kernels) or
    "chunked" (products in chunks); a chunked forward has a chunked backward (the fused one needs the forward's
    log-sum-exp).

    The rule, in order:
      1. FORCE, where set;
      2. the CPU: fused (its reference is one NumPy pass; the products would only add copies);
      3. fewer than CHUNKED_MIN_KEYS keys: fused (one dispatch, and each query row's thread has a short loop);
      4. fewer than FUSED_MIN_ROWS query rows over all (batch, head) pairs: chunked. A decode step above all (one
         query row over a long cache) leaves the fused kernels B x H threads, each walking every key in turn; the
         products spread the keys over the device, on software adapters too (lavapipe: a 256-key step over 8
         heads takes 1.4 ms against 3.4);
      5. a head (query or value) of CHUNKED_FORWARD_MIN_HEAD or more: chunked (measured above);
      6. a head of CHUNKED_BACKWARD_HEAD or more with at most CHUNKED_BACKWARD_MAX_KEYS keys: the fused forward
         and the chunked backward (measured above);
      7. else fused: a thread per row fills the GPU, and no [L, S] scores go through memory.
    Either path hands over to the other where it cannot run the call (sdpa): the chunked path where the scratch of
    one (batch, head) pair would pass SCRATCH_BYTES or for dtypes its kernels lack, the fused kernels for head
    sizes or storage-buffer limits they refuse."""
    if FORCE in _FORCED:
        return _FORCED[FORCE]
    S = key.shape[-2]
    if query.device.backend.name == "cpu" or S < CHUNKED_MIN_KEYS:
        return "fused", "fused"
    rows = 1
    for n in query.shape:
        rows *= n
    if rows // query.shape[-1] < FUSED_MIN_ROWS:
        return "chunked", "chunked"
    head = max(query.shape[-1], value.shape[-1])
    if head >= CHUNKED_FORWARD_MIN_HEAD:
        return "chunked", "chunked"
    if head >= CHUNKED_BACKWARD_HEAD and S <= CHUNKED_BACKWARD_MAX_KEYS:
        return "fused", "chunked"
    return "fused", "fused"


def sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale):
    """softmax(q kᵀ * scale + mask) v with dropout by the paths choose() picks (falling back to the other), or None
    where neither applies (F.scaled_dot_product_attention composes it then)."""
    chunked_ok = eligible(query, key, value, attn_mask)
    forward, backward = choose(query, key, value, attn_mask) if chunked_ok else ("fused", "fused")
    if forward == "chunked":
        return chunked_attention(query, key, value, attn_mask, dropout_p, is_causal, scale)
    if backward == "chunked" and any(t.requires_grad for t in (query, key, value)):
        out = fused_forward_chunked_backward(query, key, value, attn_mask, dropout_p, is_causal, scale)
        return chunked_attention(query, key, value, attn_mask, dropout_p, is_causal, scale) if out is None else out
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


class _Plan:
    """One call's chunked attention: its (batch, head) pairs, mask, chunks and dropout draw; forward() and
    backward() run the products of the module doc on contiguous [pairs, rows, dim] operands."""

    def __init__(self, query, key, value, attn_mask, dropout_p, is_causal, scale):
        self.L, self.E = query.shape[-2:]
        self.S, self.Ev = key.shape[-2], value.shape[-1]
        L, S = self.L, self.S
        self.lead = lead_shape(query, key, value, attn_mask)
        self.pairs = 1
        for d in self.lead:
            self.pairs *= d
        self.device, self.dtype = query.device, query.dtype
        self.backend = self.device.backend
        self.scale = 1.0 / math.sqrt(self.E) if scale is None else float(scale)
        self.dropout_p = float(dropout_p)
        self.masked = self.bias = None  # masked: bool, True where left out; bias: a float mask added to the scores
        with no_grad():
            if is_causal:
                self.masked = _Mask(_causal(self.device, L, S), self.lead, L, S)
            elif attn_mask is not None and attn_mask.dtype is dtypes.bool_:
                self.masked = _Mask(~attn_mask, self.lead, L, S)
            elif attn_mask is not None:
                mask = attn_mask if attn_mask.dtype is self.dtype else attn_mask.to(self.dtype)
                self.bias = _Mask(mask, self.lead, L, S)
        # causal: the weights are lower-triangular, and the products skip what that makes zero (kernels.matmul_causal)
        self.causal = bool(is_causal)
        cut = self.masked or self.bias
        per_pair = L * S * self.dtype.itemsize
        self.forward_n = _chunk_size(self.pairs, per_pair, FORWARD_BUFFERS, cut)
        self.backward_n = _chunk_size(self.pairs, per_pair, BACKWARD_BUFFERS, cut)
        self.forward_chunks = _chunks(self.pairs, self.forward_n)
        self.backward_chunks = _chunks(self.pairs, self.backward_n)
        self.seed, self.offsets = 0, {}
        if self.dropout_p > 0:
            starts = {c0 for c0, _ in self.forward_chunks + self.backward_chunks} | {0}
            self.seed, self.offsets = _draw(self.device, L * S, self.pairs, starts)

    def operands(self, query, key, value):
        return tuple(_pairs(t, self.lead, self.pairs) for t in (query, key, value))

    def _product(self, part, out, a, b, trans_a=False, trans_b=False):
        """out = op(a) @ op(b); with a causal mask, kernels.matmul_causal told which triangle matters (`part`)."""
        if self.causal:
            kernels.matmul_causal(self.backend, out, a, b, trans_a=trans_a, trans_b=trans_b, part=part)
        else:
            kernels.matmul(self.backend, out, a, b, trans_a=trans_a, trans_b=trans_b)

    def _weights(self, q3, k3, a, b, c0, n):
        """P of pairs c0 .. c0 + n into b (scratch a holds the scores, then is free); its 4-D shape and mask."""
        backend, bias, masked = self.backend, self.bias, self.masked
        self._product("out", a, _block(q3, c0, n), _block(k3, c0, n), trans_b=True)
        if bias is not None:
            bv, shape4 = bias.chunk(c0, n)
            a4, b4 = _as4(a, shape4), _as4(b, shape4)
            kernels.unary(backend, "affine", b4, a4, self.scale, 0.0)
            kernels.binary(backend, "add", a4, b4, bv)
            kernels.softmax_masked(backend, b4, a4, None, float("-inf"), 1.0)
            return shape4, None
        mv, shape4 = masked.chunk(c0, n) if masked is not None else (None, (1, n, self.L, self.S))
        kernels.softmax_masked(backend, _as4(b, shape4), _as4(a, shape4), mv, float("-inf"), self.scale)
        return shape4, mv

    def forward(self, q3, k3, v3):
        """The output, [pairs, L, Ev]."""
        backend, dtype, device, L, S = self.backend, self.dtype, self.device, self.L, self.S
        out = new((self.pairs, L, self.Ev), dtype, device)
        a_t, b_t = new((self.forward_n, L, S), dtype, device), new((self.forward_n, L, S), dtype, device)
        for c0, n in self.forward_chunks:
            a, b = _block(a_t, 0, n), _block(b_t, 0, n)
            self._weights(q3, k3, a, b, c0, n)
            if self.dropout_p > 0:
                kernels.dropout(backend, a, b, self.dropout_p, self.seed, self.offsets[c0])
                b = a
            self._product("a_lower", _block(out, c0, n), b, _block(v3, c0, n))
        return out

    def backward(self, g, q3, k3, v3, wants):
        """(grad_q, grad_k, grad_v) as [pairs, rows, dim] tensors, None where not wanted, for the output's gradient
        g; the weights are recomputed from q3 and k3 chunk by chunk."""
        backend, dtype, device, L, S, E, Ev = (self.backend, self.dtype, self.device, self.L, self.S, self.E,
                                               self.Ev)
        p = self.dropout_p
        g3 = g.reshape(self.pairs, L, Ev).contiguous()
        gq, gk, gv = (new(shape, dtype, device) if want else None
                      for want, shape in zip(wants, ((self.pairs, L, E), (self.pairs, S, E), (self.pairs, S, Ev))))
        bufs = [new((self.backward_n, L, S), dtype, device) for _ in range(BACKWARD_BUFFERS)]
        for c0, n in self.backward_chunks:
            a, b, c = (_block(t, 0, n) for t in bufs)
            shape4, mv = self._weights(q3, k3, a, b, c0, n)  # a: free, b: P
            weights_used = b
            if p > 0:
                kernels.dropout(backend, a, b, p, self.seed, self.offsets[c0])  # a: Pd
                weights_used = a
            g_blk = _block(g3, c0, n)
            if gv is not None:
                self._product("a_upper", _block(gv, c0, n), weights_used, g_blk, trans_a=True)
            if gq is None and gk is None:
                continue
            self._product("out", c, g_blk, _block(v3, c0, n), trans_b=True)  # c: dPd
            d_p, d_s = c, a
            if p > 0:
                kernels.dropout(backend, a, c, p, self.seed, self.offsets[c0])  # a: dP
                d_p, d_s = a, c
            kernels.softmax_masked_backward(backend, _as4(d_s, shape4), _as4(d_p, shape4), _as4(b, shape4), mv,
                                            self.scale)
            if gq is not None:
                self._product("a_lower", _block(gq, c0, n), d_s, _block(k3, c0, n))
            if gk is not None:
                self._product("a_upper", _block(gk, c0, n), d_s, _block(q3, c0, n), trans_a=True)
        return gq, gk, gv

    def grads(self, gq, gk, gv, in_shapes):
        """The [pairs, rows, dim] gradients reshaped to the batch dims and summed over the inputs' broadcasts."""
        return tuple(None if gt is None else unbroadcast(gt.reshape(*self.lead, *gt.shape[-2:]), shape)
                     for gt, shape in zip((gq, gk, gv), in_shapes))


def chunked_attention(query, key, value, attn_mask, dropout_p, is_causal, scale):
    """softmax(q kᵀ * scale + mask) v with dropout, by products in chunks of (batch, head) pairs (module doc).
    The caller checked eligible()."""
    plan = _Plan(query, key, value, attn_mask, dropout_p, is_causal, scale)
    q3, k3, v3 = plan.operands(query, key, value)
    result = plan.forward(q3, k3, v3).reshape(*plan.lead, plan.L, plan.Ev)
    wants = [t.requires_grad for t in (query, key, value)]
    if not any(wants):
        return result
    # (shapes only: the closure must not hold the inputs, whose buffers the copies q3, k3, v3 may replace)
    in_shapes = tuple(tuple(t.shape) for t in (query, key, value))

    def backward(g):
        return plan.grads(*plan.backward(g, q3, k3, v3, wants), in_shapes)

    return record(result, "ScaledDotProductAttention", (query, key, value), backward)


def fused_forward_chunked_backward(query, key, value, attn_mask, dropout_p, is_causal, scale):
    """The fused kernels' forward (no [L, S] scores, no contiguous copies of strided heads) with the chunked
    backward (the products recompute the weights): where choose() finds each path faster in its direction. Both
    draw dropout's mask from the plan's counters. None where the fused kernels refuse the call."""
    plan = _Plan(query, key, value, attn_mask, dropout_p, is_causal, scale)
    draw = (plan.seed, plan.offsets[0]) if plan.dropout_p > 0 else None
    out = fused_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, dropout_draw=draw,
                          backward=False)
    if out is None:
        return None
    wants = [t.requires_grad for t in (query, key, value)]
    # the inputs themselves (their contiguous copies are made in the backward, and freed after it)
    saved = tuple(t.detach() for t in (query, key, value))
    in_shapes = tuple(tuple(t.shape) for t in (query, key, value))

    def backward(g):
        q3, k3, v3 = plan.operands(*saved)
        return plan.grads(*plan.backward(g, q3, k3, v3, wants), in_shapes)

    return record(out, "ScaledDotProductAttention", (query, key, value), backward)
