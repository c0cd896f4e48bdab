"""Register-tiled attention backward (shaders/attention_tiled_backward.wgsl): kernels.attention_backward's
contract (attention.py's attention_backward routes here on GPU adapters) with score tiles computed as 4 x 4
register blocks of a SIMT GEMM, in place of attention.wgsl's one thread a row.

Tile sizes come from the device's workgroup memory (rt.limits): the first of DQ_TILES / DKV_TILES whose staged
rows and score tiles fit, else the call keeps attention.wgsl's kernels. attention_dq stages BQ query rows and
output gradient rows, BK key and value rows and dS^T; attention_dkv BK key and value rows, BQ query and gradient
rows, P^T and dS^T, and the queries' lse and D. Rows are padded to an odd number of vec4s (bank conflicts: see
the shader). The preference is the most threads (128 for 64 x 32: more work per staged tile, fewer barriers a
score), then square tiles over long thin ones. What that gives (dq tiles, dkv tiles) for head sizes 32 / 48 / 64 /
128: with 48 KiB (wgpu-native on NVIDIA) 64x32, 64x32 / 64x32, 32x32 / 32x32, 32x32 / 16x16, 16x16; with 32 KiB
(lavapipe, Dawn) 32x32, 32x32 / 32x32, 32x16 / 32x16, 32x16 / none; with a browser's default 16 KiB 32x16, 16x16 /
16x16, 16x16 / none / none. The lists are the constants to tune on a GPU.

attention_dkv computes grad_k and grad_v in one dispatch where a thread's accumulators (4 keys x NSE + NSV vec4s)
are at most ACC_MAX vec4s, else one dispatch each (grad_v's skips dP and the v tile).

WEBGRAD_ATTENTION_TILES=0 turns the register-tiled attention kernels off (the forward's module reads the same
switch).
"""

import functools
import os

from .attention import _DROPOUT, _MASK, MASK_NONE, _extra, _pack, _slots, _WGSL
from . import typed
from .dispatch import Kernel, Shader

TILES = os.environ.get("WEBGRAD_ATTENTION_TILES", "1") != "0"

DQ_TILES = ((64, 32), (32, 32), (32, 16), (16, 16))   # (BQ queries a workgroup, BK keys a tile), in preference
DKV_TILES = ((64, 32), (32, 32), (32, 16), (16, 16))  # (BK keys a workgroup, BQ queries a tile)
ACC_MAX = 24  # vec4s of grad_k + grad_v accumulators a thread may hold in one attention_dkv dispatch (as
# attention.py's DKV_FUSED_MAX)

_R, _W, _U = "read", "write", "uniform"


def _odd(n):
    return n | 1


def _cdiv(a, b):
    return -(-a // b)


def dq_bytes(e4, v4, bq, bk):
    """Workgroup memory of attention_dq with these tiles (what the entry point uses, as WebGPU counts it)."""
    return 16 * (bq * (_odd(e4) + _odd(v4)) + bk * (_odd(e4) + _odd(v4)) + bk * _odd(bq // 4))


def dkv_bytes(e4, v4, bk, bq):
    return 16 * (bk * (_odd(e4) + _odd(v4)) + bq * (_odd(e4) + _odd(v4)) + 2 * bq * _odd(bk // 4)) + 8 * bq


def tiles(limits, e4, v4):
    """((BQ, BK) of attention_dq, (BK, BQ) of attention_dkv), or None where either does not fit `limits`."""
    room = limits["max_compute_workgroup_storage_size"]
    threads = limits.get("max_compute_invocations_per_workgroup", 256)
    dq = next((t for t in DQ_TILES if dq_bytes(e4, v4, *t) <= room and t[0] * t[1] // 16 <= threads), None)
    dkv = next((t for t in DKV_TILES if dkv_bytes(e4, v4, *t) <= room and t[0] * t[1] // 16 <= threads), None)
    return (dq, dkv) if dq and dkv else None


def _block(regs_of, reads, n_c):
    """Lines of fn `name`: the 4 x 4 block regs_of[a] (vec4 over b) += dot(x_a, y_b) over n_c vec4 columns,
    x_a and y_b read from the tiles `reads` = ((tile, base param, row stride, rows apart), (...))."""
    (xt, xa, xr, xs), (yt, yb, yr, ys) = reads
    body = [f"{r} = vec4<f32>();" for r in regs_of]
    body.append(f"for (var c = 0u; c < {n_c}; c++) {{")
    body += [f"    let x{a} = {xt}[{xa} + {a}u * {xs} * {xr} + c];" for a in range(4)]
    body += [f"    let y{b} = {yt}[{yb} + {b}u * {ys} * {yr} + c];" for b in range(4)]
    body += [f"    {regs_of[a]} += vec4<f32>(" + ", ".join(f"dot(x{a}, y{b})" for b in range(4)) + ");"
             for a in range(4)]
    body.append("}")
    return body


def _helpers(kernel, e4, v4, tq, tk):
    """Register declarations and the unrolled helpers of attention_dq (kernel "dq") or attention_dkv, with
    empty ones of the other entry point (one module holds both)."""
    X = "xyzw"
    lines = []

    def regs(names):
        lines.extend(f"var<private> {n}: vec4<f32>;" for n in names)

    def scalars(names, kind):
        lines.extend(f"var<private> {n}: {kind};" for n in names)

    def fn(signature, body):
        lines.append(f"fn {signature} {{\n" + "".join(f"    {b}\n" for b in body) + "}")

    A = range(4)
    regs([f"s{a}" for a in A] + [f"dp{a}" for a in A] + [f"pv{a}" for a in A])
    scalars([f"qi{a}" for a in A] + [f"cnt{a}" for a in A], "u32")
    scalars([f"lq{a}" for a in A] + [f"dd{a}" for a in A], "f32")
    fn("tile_scores(qa: u32, kb0: u32)", _block([f"s{a}" for a in A],
                                                 (("qt", "qa", "RQ", "TQ"), ("kt", "kb0", "RK", "TK")), "E4"))
    fn("tile_dp(ga: u32, vb0: u32)", _block([f"dp{a}" for a in A],
                                             (("gt", "ga", "RG", "TQ"), ("vt", "vb0", "RV", "TK")), "V4"))
    # the block's queries: index (attention_dq clamps to the last query), lse, D and first dropout counter;
    # attention_dq computes D (each of a query's TK threads; thread kg = 0 stores it for attention_dkv)
    body = []
    for a in A:
        r = f"qg + {a}u * TQ"
        if kernel == "dq":
            body += [f"qi{a} = min(i0 + {r}, p.L - 1u);", f"lq{a} = lse_r[p.lse_off + bh * p.L + qi{a}];",
                     f"dd{a} = d_of(b, h, i0 + {r}, {r});",
                     f"if (kg == 0u && i0 + {r} < p.L) {{ stat_w[p.d_off + bh * p.L + i0 + {r}] = dd{a}; }}"]
        else:
            body += [f"qi{a} = i0 + {r};", f"lq{a} = lt[{r}];", f"dd{a} = dt[{r}];"]
        body.append(f"cnt{a} = first_counter(bh, qi{a});")
    fn("query_rows(b: u32, h: u32, bh: u32, i0: u32, qg: u32, kg: u32)", body)
    body = []
    for a in A:
        for bb in range(4):
            c = X[bb]
            body += [f"let r{a}{bb} = grads(b, h, qi{a}, j0 + {bb}u * TK, qi{a} < p.L && j0 + {bb}u * TK < jend, "
                     f"s{a}.{c}, dp{a}.{c}, lq{a}, dd{a}, cnt{a}, dkey);",
                     f"pv{a}.{c} = r{a}{bb}.x;", f"s{a}.{c} = r{a}{bb}.y;"]
    fn("tile_grads(b: u32, h: u32, j0: u32, jend: u32, dkey: u32)", body)
    other = ("dk_zero()", "dv_zero()", "store_p_ds(qg: u32, kg: u32)", "dkv_accumulate(n: u32, qg: u32, kg: u32)",
             "store_dkv(b: u32, h: u32, j0: u32, qg: u32)")
    if kernel != "dq":
        other = ("dq_zero()", "store_ds_t(qg: u32, kg: u32)", "dq_accumulate(n: u32, qg: u32, kg: u32)",
                 "store_dq(b: u32, h: u32, i0: u32, kg: u32)")
    for signature in other:
        fn(signature, [])
    if kernel == "dq":
        S = range(_cdiv(e4, tk))
        regs([f"g{a}{s}" for a in A for s in S])
        fn("dq_zero()", [f"g{a}{s} = vec4<f32>();" for a in A for s in S])
        # dS^T: row of key kg + b TK, the vec4 of query block qg
        fn("store_ds_t(qg: u32, kg: u32)",
           [f"st[(kg + {bb}u * TK) * RS + qg] = vec4<f32>(s0.{X[bb]}, s1.{X[bb]}, s2.{X[bb]}, s3.{X[bb]});"
            for bb in range(4)])
        body = [f"let c{s} = min(kg + {s}u * TK, E4 - 1u);" for s in S]
        body += ["for (var r = 0u; r < n; r++) {", "    let w = st[r * RS + qg];"]
        body += [f"    let y{s} = kt[r * RK + c{s}];" for s in S]
        body += [f"    g{a}{s} += w.{X[a]} * y{s};" for a in A for s in S]
        body.append("}")
        fn("dq_accumulate(n: u32, qg: u32, kg: u32)", body)
        body = ["let base = p.o_off + b * p.o_sb + h * p.o_sh;"]
        for a in A:
            body.append(f"if (i0 + {a}u * TQ < p.L) {{")
            for s in S:
                body.append(f"    if (kg + {s}u * TK < E4) {{ ob[base + (i0 + {a}u * TQ) * p.o_sl + kg + {s}u * TK] "
                            f"= to_T4(g{a}{s} * p.scale); }}")
            body.append("}")
        fn("store_dq(b: u32, h: u32, i0: u32, kg: u32)", body)
    else:
        SE, SV = range(_cdiv(e4, tq)), range(_cdiv(v4, tq))
        regs([f"dk{bb}{s}" for bb in A for s in SE] + [f"dv{bb}{s}" for bb in A for s in SV])
        fn("dk_zero()", [f"dk{bb}{s} = vec4<f32>();" for bb in A for s in SE])
        fn("dv_zero()", [f"dv{bb}{s} = vec4<f32>();" for bb in A for s in SV])
        # P^T and dS^T: row of query qg + a TQ, the vec4 of key block kg
        fn("store_p_ds(qg: u32, kg: u32)",
           [f"pt[(qg + {a}u * TQ) * RP + kg] = pv{a};" for a in A]
           + [f"if (WANT_DK) {{ st[(qg + {a}u * TQ) * RP + kg] = s{a}; }}" for a in A])
        body = [f"let ce{s} = min(qg + {s}u * TQ, E4 - 1u);" for s in SE]
        body += [f"let cv{s} = min(qg + {s}u * TQ, V4 - 1u);" for s in SV]
        body += ["for (var r = 0u; r < n; r++) {", "    if (WANT_DV) {", "        let w = pt[r * RP + kg];"]
        body += [f"        let y{s} = gt[r * RG + cv{s}];" for s in SV]
        body += [f"        dv{bb}{s} += w.{X[bb]} * y{s};" for bb in A for s in SV]
        body += ["    }", "    if (WANT_DK) {", "        let x = st[r * RP + kg];"]
        body += [f"        let z{s} = qt[r * RQ + ce{s}];" for s in SE]
        body += [f"        dk{bb}{s} += x.{X[bb]} * z{s};" for bb in A for s in SE]
        body += ["    }", "}"]
        fn("dkv_accumulate(n: u32, qg: u32, kg: u32)", body)
        body = ["let kbase = p.o_off + b * p.o_sb + h * p.o_sh;", "let vbase = p.o2_off + b * p.o2_sb + h * p.o2_sh;"]
        for bb in A:
            body.append(f"if (j0 + {bb}u * TK < p.S) {{")
            body.append(f"    let j = j0 + {bb}u * TK;")
            for s in SE:
                body.append(f"    if (WANT_DK && qg + {s}u * TQ < E4) {{ ob[kbase + j * p.o_sl + qg + {s}u * TQ] = "
                            f"to_T4(dk{bb}{s}); }}")
            for s in SV:
                body.append(f"    if (WANT_DV && qg + {s}u * TQ < V4) {{ ob2[vbase + j * p.o2_sl + qg + {s}u * TQ] = "
                            f"to_T4(dv{bb}{s}); }}")
            body.append("}")
        fn("store_dkv(b: u32, h: u32, j0: u32, qg: u32)", body)
    return "\n".join(lines)


@functools.lru_cache(maxsize=None)
def _kernel(kind, e4, v4, bq, bk, mask, dropout, element):
    """attention_dq (kind "dq") or attention_dkv for these head sizes (vec4s), tiles, mask kind and dropout, on
    operands of WGSL type `element`."""
    tq, tk = bq // 4, bk // 4
    st_n, pt_n = (bk * _odd(tq), 1) if kind == "dq" else (bq * _odd(tk), bq * _odd(tk))
    constants = {"E4": e4, "V4": v4, "BQ": bq, "BK": bk, "TQ": tq, "TK": tk, "RQ": _odd(e4), "RG": _odd(v4),
                 "RK": _odd(e4), "RV": _odd(v4), "RS": _odd(tq), "RP": _odd(tk), "ST_N": st_n, "PT_N": pt_n}
    splices = {"HELPERS": _helpers(kind, e4, v4, tq, tk), "MASK_BINDING": "\n".join(_MASK[mask]),
               "DROPOUT_BINDING": _DROPOUT[dropout], "ELEMENT_TYPES": typed.element_types((("T", element),))}
    shader = (typed.F16Shader if element == "f16" else Shader)("attention_tiled_backward.wgsl",
                                                               lambda: (constants, splices))
    extra = ((10, _R),) * (mask != MASK_NONE) + ((11, _R),) * dropout
    if kind == "dq":
        return Kernel(shader, "attention_dq", ((0, _R), (1, _R), (2, _R), (3, _W), (5, _R), (6, _R), (7, _W),
                                               (8, _R)) + extra + ((12, _U),), ("CAUSAL",))
    return Kernel(shader, "attention_dkv", ((0, _R), (1, _R), (2, _R), (3, _W), (4, _W), (5, _R), (8, _R), (9, _R))
                  + extra + ((12, _U),), ("CAUSAL", "WANT_DK", "WANT_DV"))


def kernels_for(limits, e4, v4, mask_kind, dropping, dtype):
    """((attention_dq, BQ), (attention_dkv, BK, fused)) for this device's limits, or None where no tiles fit."""
    picked = tiles(limits, e4, v4)
    if picked is None:
        return None
    (bq, bk), (bk2, bq2) = picked
    element = _WGSL[dtype]
    dq = _kernel("dq", e4, v4, bq, bk, mask_kind, dropping, element)
    dkv = _kernel("dkv", e4, v4, bq2, bk2, mask_kind, dropping, element)
    fused = 4 * (_cdiv(e4, bq2 // 4) + _cdiv(v4, bq2 // 4)) <= ACC_MAX
    return (dq, bq), (dkv, bk2, fused)


def backward(rt, g, grad_q, grad_k, grad_v, grad, q, k, v, out, lse, mask, scale, causal, dropout_p, gs, o_in,
             lse_off, offs):
    """attention_backward's dispatches on the register-tiled kernels (`g`, gs, o_in, lse_off and offs: what
    attention_backward checked and packed); False, and nothing dispatched, where no tiles fit."""
    picked = kernels_for(rt.limits, g["e4"], g["v4"], g["mask_kind"], g["dropping"], g["dtype"])
    if picked is None:
        return False
    (dq, bq), (dkv, bk, fused) = picked
    B, H, L, S = g["B"], g["H"], g["L"], g["S"]
    slots = _slots(g)
    extra = _extra(rt, mask, g["dropping"])
    d = rt.storage(B * H * L, lse.dtype)  # D = rowsum(grad * out), written by attention_dq
    params = _pack(g, scale, dropout_p, gs, o=offs[0], o2=o_in, lse_off=lse_off, d_off=0)
    rt.dispatch(dq, dq.constants({"CAUSAL": causal}),
                (q.storage, k.storage, v.storage, grad_q.storage if grad_q is not None else rt.spare(0), grad.storage,
                 out.storage, d, lse.storage) + extra, params, (-(-L // bq), B * H, 1), slots)
    if grad_k is None and grad_v is None:
        return True
    passes = [(grad_k is not None, grad_v is not None)]
    if not fused and passes[0] == (True, True):
        passes = [(False, True), (True, False)]
    params = _pack(g, scale, dropout_p, gs, o=offs[1], o2=offs[2], lse_off=lse_off, d_off=0)
    for want_dk, want_dv in passes:
        rt.dispatch(dkv, dkv.constants({"CAUSAL": causal, "WANT_DK": want_dk, "WANT_DV": want_dv}),
                    (q.storage, k.storage, v.storage, grad_k.storage if want_dk else rt.spare(0),
                     grad_v.storage if want_dv else rt.spare(1), grad.storage, lse.storage, d) + extra, params,
                    (-(-S // bk), B * H, 1), slots)
    return True
