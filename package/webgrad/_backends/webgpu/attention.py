"""Fused scaled dot-product attention, forward and backward (shaders/attention.wgsl).

The shader is specialised per head size: the vec4 registers a thread keeps (its query row, its output, ...) and
the helpers that use them are spliced in for E4 / V4 vec4s (naga leaves loops over private arrays in local
memory), and so are the mask's and dropout's bindings where a call has them (a layout without them stays within
the 8 storage buffers a browser's default limits allow). Forward: one dispatch (the output and each row's
log-sum-exp). Backward: attention_dq (grad_q, and D = rowsum(grad * out)), then attention_dkv (grad_k and grad_v,
in one dispatch for head sizes up to DKV_FUSED_MAX vec4s, else one for each: fewer registers a thread).
Software adapters take the untiled variant (runtime.KERNEL_VARIANTS["attention_untiled"]): no barriers.

Key split: split() picks, per kernel and shapes, KSPLIT threads a row (each walks every KSPLIT-th key, or query
in attention_dkv, with its own running state; the parts merge through workgroup memory at the end) and the rows
a workgroup takes. One thread a row gives a GPT at 256 tokens (128 batch x heads pairs) 32K threads a dispatch,
a few warps per SM of a large GPU: the kernels wait on latency. The merge reuses the tiles' workgroup memory in
chunks of what fits a row, so a split variant declares what the unsplit one does, or BR * KSPLIT vec4s (the
parts' max and sum) where that is more. The rule is KSPLIT (and SPLIT_BELOW, SPLIT_MIN_WALK) below;
WEBGRAD_ATTENTION_KSPLIT=<n>[x<rows>] forces a split (benchmarks and tests).

Every operand, the outputs included, goes through its (offset, batch, head, row) strides in vec4s (_operand):
ops/attention.py stores out and the gradients in their inputs' layouts.

float16: the shader's operands are all float32 or all float16 (its ELEMENT_TYPES, typed.py). The half variant
(an `enable f16;` module: adapters with shader-f16, the only ones where float16 storages exist) reads halves into
the same f32 registers and tiles and rounds each stored element once, so autocast's attention makes no float32
copy of q, k, v, out or the gradients (the CAST policy's scratch, twice the half tensors' bytes, and 12 cast
dispatches a layer a step: gpt-6x384's eager autocast step took 875 dispatches with them, 803 without; its replayed
step at batch 16, GPU kernel variants on lavapipe, peaks at 581.8 MiB instead of 594.6). lse and D stay float32.
The records' policy is HALF: attention_half and attention_backward_half take calls whose operands are all float16
and leave mixed ones to the casts.
"""

import functools
import os
import struct

from ...dtypes import bool_, float16, float32
from .. import kernels
from . import typed
from .dispatch import Kernel, Shader
from .views import check_view, u32_fields

BR = 64  # rows (query rows, or key rows in attention_dkv) per workgroup with one thread a row
THREADS_MAX = 256  # threads per workgroup (WebGPU's default maxComputeInvocationsPerWorkgroup)
V_SLICE_MAX = 16  # vec4s of output a forward thread holds: wider values take several slices (grid z)
DKV_FUSED_MAX = 24  # E4 + V4 at most for grad_k and grad_v in one attention_dkv (2 * 24 vec4s of registers)
MAX_HEAD = 128  # head sizes up to this take the kernels (F.scaled_dot_product_attention composes beyond)

_PARAMS = struct.Struct("<39I3f2I")
NO_SLOT = 0xFFFFFFFF
MASK_NONE, MASK_FLOAT, MASK_BOOL = 0, 1, 2

_R, _W, _U = "read", "write", "uniform"


def _regs(prefix, n):
    return "\n".join(f"var<private> {prefix}{c}: vec4<f32>;" for c in range(n))


def _sum(terms):
    return " + ".join(terms) if terms else "0.0"


def _merge(name, regs, tile, width):
    """fn name(r, part): the KSPLIT parts' registers `regs` of row r summed into part 0's, through the workgroup
    array `tile` in chunks of `width` vec4s a row (each part in turn: write, barrier, part 0 adds, barrier)."""
    body = []
    for c0 in range(0, len(regs), width):
        chunk = list(enumerate(regs[c0:c0 + width]))
        body += ["for (var s = 1u; s < KSPLIT; s++) {",
                 "    if (part == s) { " + " ".join(f"{tile}[r * {width}u + {c}u] = {g};" for c, g in chunk) + " }",
                 "    workgroupBarrier();",
                 "    if (part == 0u) { " + " ".join(f"{g} += {tile}[r * {width}u + {c}u];" for c, g in chunk) + " }",
                 "    workgroupBarrier();",
                 "}"]
    return f"fn {name}(r: u32, part: u32) {{\n" + "".join(f"    {b}\n" for b in body) + "}"


def _helpers(e4, v4, vs4, kv_width, qg_width):
    """The register declarations and the unrolled helpers attention.wgsl's entry points call; the merges take
    kv_width (forward, attention_dq) or qg_width (attention_dkv) vec4s a row at a time. (No register may take a
    type's name: grad_v's were f0, f1, ..., and f16 then hid the type from the float16 variant.)"""
    E, V, VS = range(e4), range(v4), range(vs4)
    lines = [_regs("q", e4), _regs("a", vs4), _regs("d", v4), _regs("g", e4), _regs("k", e4), _regs("w", v4),
             _regs("e", e4), _regs("gv", v4)]

    def fn(signature, body):
        lines.append(f"fn {signature} {{\n" + "".join(f"    {b}\n" for b in body) + "}")

    fn("load_q(at: u32)", [f"q{c} = vec4<f32>(qb[at + {c}u]) * p.scale;" for c in E])
    fn("q_dot_k(r: u32) -> f32", [f"return {_sum([f'dot(q{c}, key(r + {c}u))' for c in E])};"])
    fn("acc_zero()", [f"a{c} = vec4<f32>();" for c in VS])
    fn("acc_rescale(f: f32)", [f"a{c} *= f;" for c in VS])
    fn("acc_add(w: f32, r: u32)", [f"a{c} += w * val_s(r + {c}u);" for c in VS])
    fn("store_acc(at: u32, f: f32)", [f"ob[at + {c}u] = to_T4(a{c} * f);" for c in VS])
    fn("load_do(at: u32)", [f"d{c} = vec4<f32>(gb[at + {c}u]);" for c in V])
    fn("do_dot_o(at: u32) -> f32", [f"return {_sum([f'dot(d{c}, vec4<f32>(oin[at + {c}u]))' for c in V])};"])
    fn("do_dot_v(r: u32) -> f32", [f"return {_sum([f'dot(d{c}, val(r + {c}u))' for c in V])};"])
    fn("dq_zero()", [f"g{c} = vec4<f32>();" for c in E])
    fn("dq_add(w: f32, r: u32)", [f"g{c} += w * key(r + {c}u);" for c in E])
    fn("store_dq(at: u32, f: f32)", [f"ob[at + {c}u] = to_T4(g{c} * f);" for c in E])
    fn("load_k(at: u32)", [f"k{c} = vec4<f32>(kb[at + {c}u]);" for c in E])
    fn("load_v(at: u32)", [f"w{c} = vec4<f32>(vb[at + {c}u]);" for c in V])
    fn("k_dot_q(r: u32) -> f32", [f"return {_sum([f'dot(k{c}, qrow(r + {c}u))' for c in E])};"])
    fn("v_dot_g(r: u32) -> f32", [f"return {_sum([f'dot(w{c}, grow(r + {c}u))' for c in V])};"])
    fn("dk_zero()", [f"e{c} = vec4<f32>();" for c in E])
    fn("dv_zero()", [f"gv{c} = vec4<f32>();" for c in V])
    fn("dk_add(w: f32, r: u32)", [f"e{c} += w * qrow(r + {c}u);" for c in E])
    fn("dv_add(w: f32, r: u32)", [f"gv{c} += w * grow(r + {c}u);" for c in V])
    fn("store_dk(at: u32)", [f"ob[at + {c}u] = to_T4(e{c});" for c in E])
    fn("store_dv(at: u32)", [f"ob2[at + {c}u] = to_T4(gv{c});" for c in V])
    for name, prefix, n, tile, width in (("acc_merge", "a", vs4, "kvt", kv_width),
                                         ("dq_merge", "g", e4, "kvt", kv_width),
                                         ("dk_merge", "e", e4, "qgt", qg_width),
                                         ("dv_merge", "gv", v4, "qgt", qg_width)):
        lines.append(_merge(name, [f"{prefix}{c}" for c in range(n)], tile, min(n, width)))
    return "\n".join(lines)


_ARGS = "b: u32, h: u32, i: u32, j: u32"
_MASK = {
    MASK_NONE: ("", f"fn attends({_ARGS}) -> bool {{ return true; }}\nfn mask_add({_ARGS}) -> f32 {{ return 0.0; }}"),
    MASK_FLOAT: ("@group(0) @binding(10) var<storage, read> maskb: array<u32>;",
                 f"fn mask_word({_ARGS}) -> u32 {{\n"
                 "    return maskb[p.m_off + b * p.m_sb + h * p.m_sh + i * p.m_si + j * p.m_sj];\n}\n"
                 f"fn attends({_ARGS}) -> bool {{ return mask_word(b, h, i, j) != 0xff800000u; }}  // not -inf\n"
                 f"fn mask_add({_ARGS}) -> f32 {{ return bitcast<f32>(mask_word(b, h, i, j)); }}"),
    MASK_BOOL: ("@group(0) @binding(10) var<storage, read> maskb: array<u32>;",
                f"fn attends({_ARGS}) -> bool {{\n"
                "    return maskb[p.m_off + b * p.m_sb + h * p.m_sh + i * p.m_si + j * p.m_sj] != 0u;\n}\n"
                f"fn mask_add({_ARGS}) -> f32 {{ return 0.0; }}"),
}
_DROPOUT = {
    False: "fn dropping() -> bool { return false; }\nfn drop_key() -> u32 { return 0u; }\n"
           "fn drop_offset() -> u32 { return 0u; }\nfn kept(c: u32, key: u32) -> bool { return true; }",
    True: "@group(0) @binding(11) var<storage, read> scalars: array<u32>;\n"
          "fn dropping() -> bool { return true; }\n"
          "fn drop_key() -> u32 {\n"
          "    return lowbias32(select(p.seed, scalars[p.seed_slot], p.seed_slot != 0xffffffffu));\n}\n"
          "fn drop_offset() -> u32 { return select(p.offset, scalars[p.offset_slot], p.offset_slot != 0xffffffffu); }\n"
          "// kept where u >= p, u = bits >> 8 times 2^-24 (random.wgsl's uniform), compared in float32\n"
          "fn kept(c: u32, key: u32) -> bool { return f32(bits(c, key) >> 8u) * 5.9604644775390625e-8 >= p.p_drop; }",
}


_WGSL = {float32: "f32", float16: "f16"}


@functools.lru_cache(maxsize=None)
def _kernels(e4, v4, vs4, bc, qt, mask, dropout, ksplit=1, br=BR, element="f32"):
    """(forward, dq, dkv) Kernels of the shader specialised for these sizes, mask kind, dropout and key split
    (ksplit threads for each of br rows), on operands of WGSL type `element` ("f32" or "f16")."""
    floor = br * ksplit if ksplit > 1 else 0  # the parts' (max, sum) pairs
    kvt, qgt = max(bc * (e4 + v4), floor), max(qt * (e4 + v4), floor)
    constants = {"E4": e4, "V4": v4, "VS4": vs4, "BC": bc, "QT": qt, "BR": br, "KSPLIT": ksplit, "KVT": kvt,
                 "QGT": qgt}
    splices = {"HELPERS": _helpers(e4, v4, vs4, kvt // br, qgt // br), "MASK_BINDING": "\n".join(_MASK[mask]),
               "DROPOUT_BINDING": _DROPOUT[dropout], "ELEMENT_TYPES": typed.element_types((("T", element),))}
    shader = (typed.F16Shader if element == "f16" else Shader)("attention.wgsl", lambda: (constants, splices))
    extra = ((10, _R),) * (mask != MASK_NONE) + ((11, _R),) * dropout
    forward = Kernel(shader, "attention_forward", ((0, _R), (1, _R), (2, _R), (3, _W), (7, _W)) + extra + ((12, _U),),
                     ("CAUSAL", "TILED", "LSE"))
    dq = Kernel(shader, "attention_dq", ((0, _R), (1, _R), (2, _R), (3, _W), (5, _R), (6, _R), (7, _W), (8, _R))
                + extra + ((12, _U),), ("CAUSAL", "TILED"))
    dkv = Kernel(shader, "attention_dkv", ((0, _R), (1, _R), (2, _R), (3, _W), (4, _W), (5, _R), (8, _R), (9, _R))
                 + extra + ((12, _U),), ("CAUSAL", "TILED", "WANT_DK", "WANT_DV"))
    return forward, dq, dkv


def _storage_buffers(kernel):
    return sum(1 for _, kind in kernel.bindings if kind != _U)


def _v_slices(v4):
    """(vec4s per slice, slices) of the forward's output: the fewest slices of at most V_SLICE_MAX that divide V4."""
    s = -(-v4 // V_SLICE_MAX)
    while v4 % s:
        s += 1
    return v4 // s, s


def _tile(limit, per_row, extra_per_row=0, top=32):
    """The largest power-of-two tile (rows, 4..top) whose workgroup memory fits `limit` bytes."""
    rows = top
    while rows > 4 and rows * (16 * per_row + extra_per_row) > limit:
        rows //= 2
    return rows


def _parse_split(spec):
    """(ksplit, rows or None) from "<n>" or "<n>x<rows>" (WEBGRAD_ATTENTION_KSPLIT)."""
    if not spec:
        return None
    n, x, rows = spec.partition("x")
    try:
        ks, br = int(n), int(rows) if x else None
    except ValueError:
        raise ValueError(f"WEBGRAD_ATTENTION_KSPLIT={spec!r}: expected <n> or <n>x<rows>") from None
    if ks < 1 or (br is not None and br < 1):
        raise ValueError(f"WEBGRAD_ATTENTION_KSPLIT={spec!r}: expected positive numbers")
    return ks, br


# The key split rule (split()): KSPLIT[kernel] threads a row where a dispatch would have fewer than SPLIT_BELOW
# threads at one a row (batch x heads x rows) and each thread walks at least SPLIT_MIN_WALK rows of the other
# side; else one. H200, `python -m webgrad.bench replay --models gpt-6x384 --each` (128 pairs of 256 rows, head
# size 48: 32,768 threads at one a row), us per step for the forward / attention_dq / attention_dkv:
# WEBGRAD_ATTENTION_KSPLIT=1 746 / 931 / 1,709, =2 634 / 853 / 1,258, =4 780 / 1,008 / 1,353, =8 1,027 / 1,344 /
# 1,684. gpt2-small (96 pairs of 1,024 rows, head size 64: 98,304 threads at one a row) gains too: `python -m
# webgrad.bench scale --models gpt2-small --no-generation --no-torch`, alternating in one call, 29,114 and 29,135
# tokens/s at WEBGRAD_ATTENTION_KSPLIT=1, 32,000 and 32,007 at =2. Dispatches of 2^18 threads and more (longer
# sequences, bigger batches) were not measured and keep one thread a row.
KSPLIT = {"forward": 2, "dq": 2, "dkv": 2}
SPLIT_BELOW = 1 << 18
SPLIT_MIN_WALK = 64

# WEBGRAD_ATTENTION_KSPLIT=<n> forces n threads a row in every attention kernel, on every adapter, <n>x<rows> also
# the rows a workgroup takes (benchmarks and tests; tests set _FORCED).
_FORCED = _parse_split(os.environ.get("WEBGRAD_ATTENTION_KSPLIT"))


def split(rt, kernel, pairs, rows, walked):
    """(KSPLIT, rows a workgroup) of `kernel` ("forward", "dq" or "dkv") for `pairs` batch x heads and `rows`
    rows (L, or S in attention_dkv), each walking `walked` rows of the other side (S, or L)."""
    threads = min(THREADS_MAX, rt.limits.get("max_compute_invocations_per_workgroup", THREADS_MAX))
    if _FORCED is not None:
        ks, br = _FORCED
        ks = max(1, min(ks, threads))
        return ks, max(1, min(br or BR, threads // ks))
    ks = 1
    # software adapters: a barrier is a coroutine switch per four lanes, and the merge takes 2 (KSPLIT - 1)
    if not rt.variant["attention_untiled"] and pairs * rows < SPLIT_BELOW and walked >= SPLIT_MIN_WALK:
        ks = KSPLIT[kernel]
    return ks, min(BR, threads // ks)


def _operand(view, name, shape4, dtype=float32):
    """A [B, H, rows, dim] operand, read or written: of `dtype` (the call's: q's), last dim contiguous, offset and
    strides multiples of 4. Its (offset, batch, head, row strides) in vec4s."""
    check_view(view, name, dtype=dtype, ndim=4)
    if view.shape != shape4:
        raise ValueError(f"attention: {name} has shape {view.shape}, expected {shape4}")
    if view.strides[3] != 1 and view.shape[3] > 1:
        raise ValueError(f"attention: the last dim of {name} must be contiguous, got strides {view.strides}")
    if view.offset % 4 or any(s % 4 for s in view.strides[:3]) or view.shape[3] % 4:
        raise NotImplementedError(f"attention: {name}'s head size, offset and strides must be multiples of 4 "
                         f"(shape {view.shape}, strides {view.strides}, offset {view.offset})")
    return (view.offset // 4,) + tuple(s // 4 for s in view.strides[:3])


def fits(rt, e, ev, mask_kind, dropout):
    """Whether the kernels take head sizes e, ev (with this mask and dropout) on runtime rt's device."""
    if e % 4 or ev % 4 or not 0 < e <= MAX_HEAD or not 0 < ev <= MAX_HEAD:
        return False
    need = 8 + (mask_kind != MASK_NONE) + bool(dropout)
    return need <= rt.limits["max_storage_buffers_per_shader_stage"]


def _mask(mask, shape4):
    """(kind, offset, strides) of the mask view (None: no mask)."""
    if mask is None:
        return MASK_NONE, 0, (0, 0, 0, 0)
    check_view(mask, "mask", ndim=4)
    if mask.shape != shape4:
        raise ValueError(f"attention: mask has shape {mask.shape}, expected {shape4}")
    if mask.dtype is bool_:
        return MASK_BOOL, mask.offset, mask.strides
    if mask.dtype is float32:
        return MASK_FLOAT, mask.offset, mask.strides
    raise TypeError(f"attention: the mask must be float32 or bool, not {mask.dtype}")


def _setup(rt, q, k, v, mask, dropout_p, seed, offset):
    check_view(q, "q", ndim=4)
    if q.dtype not in _WGSL:
        raise TypeError(f"attention: q must be float32 or float16, not {q.dtype}")
    B, H, L, E = q.shape
    S, Ev = k.shape[2], v.shape[3]
    qs = _operand(q, "q", (B, H, L, E), q.dtype)
    ks = _operand(k, "k", (B, H, S, E), q.dtype)
    vs = _operand(v, "v", (B, H, S, Ev), q.dtype)
    kind, m_off, m_strides = _mask(mask, (B, H, L, S))
    if any(s < 0 for s in m_strides):
        raise ValueError("attention: the mask must not have negative strides")
    if not fits(rt, E, Ev, kind, dropout_p > 0):
        raise NotImplementedError(f"attention kernels: head sizes {E}, {Ev} (or this device's storage buffer limit)")
    if B * H > rt.limits["max_compute_workgroups_per_dimension"]:
        raise NotImplementedError(f"attention kernels: {B * H} batch x heads is more than one dispatch dimension")
    e4, v4 = E // 4, Ev // 4
    seed_slot, seed_value = u32_fields(seed, "seed")
    offset_slot, offset_value = u32_fields(offset, "offset")
    dropping = dropout_p > 0
    return dict(B=B, H=H, L=L, S=S, e4=e4, v4=v4, slices=_v_slices(v4)[1], qs=qs, ks=ks, vs=vs, m_off=m_off,
                dtype=q.dtype,
                m_strides=m_strides, seed=(seed_slot, seed_value) if dropping else (NO_SLOT, 0),
                offset=(offset_slot, offset_value) if dropping else (NO_SLOT, 0), mask_kind=kind, dropping=dropping)


def kernels_for(limit, e4, v4, mask_kind, dropping, ksplit=1, br=BR, dtype=float32):
    """(forward, dq, dkv) Kernels for head sizes of e4, v4 vec4s with `limit` bytes of workgroup memory, on
    operands of `dtype` (float32 or float16)."""
    return _kernels(e4, v4, _v_slices(v4)[0], _tile(limit, e4 + v4), _tile(limit, e4 + v4, 8), mask_kind, dropping,
                    ksplit, br, _WGSL[dtype])


def _launch(rt, g, name, rows, walked):
    """((forward, dq, dkv), rows a workgroup) for kernel `name` of this call (split's choice)."""
    ksplit, br = split(rt, name, g["B"] * g["H"], rows, walked)
    return kernels_for(rt.limits["max_compute_workgroup_storage_size"], g["e4"], g["v4"], g["mask_kind"],
                       g["dropping"], ksplit, br, g["dtype"]), br


_NONE4 = (0, 0, 0, 0)


def _pack(g, scale, dropout_p, gs=_NONE4, o=_NONE4, o2=_NONE4, lse_off=0, d_off=0):
    p = float(dropout_p)
    return _PARAMS.pack(g["L"], g["S"], g["H"], 0, *g["qs"], *g["ks"], *g["vs"], *gs, *o, *o2, lse_off, d_off,
                        g["m_off"], *g["m_strides"], g["seed"][1], g["offset"][1], g["seed"][0], g["offset"][0],
                        float(scale), p, 1.0 / (1.0 - p) if p < 1.0 else 0.0, 0, 0)


def _slots(g):
    return tuple(s for s in (g["seed"][0], g["offset"][0]) if s != NO_SLOT)


def _extra(rt, mask, dropping):
    return ((mask.storage,) if mask is not None else ()) + ((rt.scalars,) if dropping else ())


def _output(view, name, shape4, dtype=float32):
    """An output operand (_operand's rules), whose elements must not overlap: threads write them all at once."""
    at = _operand(view, name, shape4, dtype)
    extent = 1
    for s, n in sorted((s, n) for s, n in zip(view.strides, view.shape) if n > 1):
        if s < extent:
            raise ValueError(f"attention: {name}'s elements overlap (shape {view.shape}, strides {view.strides})")
        extent = s * n
    return at


def _lse(view, shape3):
    check_view(view, "lse", dtype=float32, contiguous=True, ndim=3)
    if view.shape != shape3:
        raise ValueError(f"attention: lse has shape {view.shape}, expected {shape3}")
    return view.offset


def _distinct(outs, *views):
    for o in outs:
        for v in views:
            if o is not None and v is not None and o.storage is v.storage:
                raise ValueError("attention: an output shares a buffer with an input")


@kernels.attention.implement("webgpu")
def attention(rt, out, lse, q, k, v, mask, scale, causal=False, dropout_p=0.0, seed=0, offset=0):
    g = _setup(rt, q, k, v, mask, dropout_p, seed, offset)
    B, H, L = g["B"], g["H"], g["L"]
    o = _output(out, "out", (B, H, L, v.shape[3]), g["dtype"])
    lse_off = _lse(lse, (B, H, L)) if lse is not None else 0
    _distinct((out, lse), q, k, v, mask)
    if out.numel == 0:
        return
    if g["S"] == 0:
        raise NotImplementedError("attention kernels: no keys")
    params = _pack(g, scale, dropout_p, o=o, lse_off=lse_off)
    (forward, _, _), br = _launch(rt, g, "forward", L, g["S"])
    constants = forward.constants({"CAUSAL": causal, "TILED": not rt.variant["attention_untiled"],
                                   "LSE": lse is not None})
    storages = (q.storage, k.storage, v.storage, out.storage, lse.storage if lse is not None else rt.spare(0))
    rt.dispatch(forward, constants, storages + _extra(rt, mask, dropout_p > 0), params,
                (-(-L // br), B * H, g["slices"]), _slots(g))


@kernels.attention_backward.implement("webgpu")
def attention_backward(rt, grad_q, grad_k, grad_v, grad, q, k, v, out, lse, mask, scale, causal=False,
                       dropout_p=0.0, seed=0, offset=0):
    g = _setup(rt, q, k, v, mask, dropout_p, seed, offset)
    B, H, L, S, E, Ev = g["B"], g["H"], g["L"], g["S"], q.shape[3], v.shape[3]
    gs = _operand(grad, "grad", (B, H, L, Ev), g["dtype"])
    o_in = _operand(out, "out", (B, H, L, Ev), g["dtype"])
    lse_off = _lse(lse, (B, H, L))
    offs = [_NONE4 if t is None else _output(t, name, shape, g["dtype"]) for t, name, shape in
            ((grad_q, "grad_q", (B, H, L, E)), (grad_k, "grad_k", (B, H, S, E)), (grad_v, "grad_v", (B, H, S, Ev)))]
    _distinct((grad_q, grad_k, grad_v), q, k, v, mask, grad, out, lse)
    if B * H * L * S == 0 or (grad_q is None and grad_k is None and grad_v is None):
        return
    tiled = not rt.variant["attention_untiled"]
    slots = _slots(g)
    extra = _extra(rt, mask, dropout_p > 0)
    d = rt.storage(B * H * L, lse.dtype)  # D = rowsum(grad * out), written by attention_dq
    params = _pack(g, scale, dropout_p, gs, o=offs[0], o2=o_in, lse_off=lse_off, d_off=0)
    (_, dq, _), br = _launch(rt, g, "dq", L, S)
    rt.dispatch(dq, dq.constants({"CAUSAL": causal, "TILED": tiled}),
                (q.storage, k.storage, v.storage, grad_q.storage if grad_q is not None else rt.spare(0), grad.storage,
                 out.storage, d, lse.storage) + extra, params, (-(-L // br), B * H, 1), slots)
    if grad_k is None and grad_v is None:
        return
    passes = [(grad_k is not None, grad_v is not None)]
    if g["e4"] + g["v4"] > DKV_FUSED_MAX and passes[0] == (True, True):
        passes = [(False, True), (True, False)]  # fewer registers a thread: dv (k, dv), then dk (k, v, dk)
    params = _pack(g, scale, dropout_p, gs, o=offs[1], o2=offs[2], lse_off=lse_off, d_off=0)
    (_, _, dkv), br = _launch(rt, g, "dkv", S, L)
    for want_dk, want_dv in passes:
        rt.dispatch(dkv, dkv.constants({"CAUSAL": causal, "TILED": tiled, "WANT_DK": want_dk, "WANT_DV": want_dv}),
                    (q.storage, k.storage, v.storage, grad_k.storage if want_dk else rt.spare(0),
                     grad_v.storage if want_dv else rt.spare(1), grad.storage, lse.storage, d) + extra, params,
                    (-(-S // br), B * H, 1), slots)


def _all_half(views):
    return all(v is None or v.dtype is float16 for v in views)


@kernels.attention.implement("webgpu", half=True)
def attention_half(rt, out, lse, q, k, v, mask, scale, causal=False, dropout_p=0.0, seed=0, offset=0):
    """The float16 variant: q, k, v and out all float16 (lse float32); NotImplemented for mixed dtypes (the
    policy's casts take those)."""
    if not _all_half((out, q, k, v)):
        return NotImplemented
    return attention(rt, out, lse, q, k, v, mask, scale, causal, dropout_p, seed, offset)


@kernels.attention_backward.implement("webgpu", half=True)
def attention_backward_half(rt, grad_q, grad_k, grad_v, grad, q, k, v, out, lse, mask, scale, causal=False,
                            dropout_p=0.0, seed=0, offset=0):
    """The float16 variant: every operand but lse (and the mask) float16; NotImplemented otherwise."""
    if not _all_half((grad_q, grad_k, grad_v, grad, q, k, v, out)):
        return NotImplemented
    return attention_backward(rt, grad_q, grad_k, grad_v, grad, q, k, v, out, lse, mask, scale, causal, dropout_p,
                              seed, offset)
