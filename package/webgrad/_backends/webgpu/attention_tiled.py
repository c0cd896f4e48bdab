"""The register-tiled attention forward (shaders/attention_tiled.wgsl), which attention.py's launcher takes on GPU
adapters where a tile configuration fits: a workgroup of TX x TY threads takes 4 TY queries and walks the keys 4 TX
at a time, each thread a 4 x 4 block of scores and 4 queries x V4 / TX vec4s of output in registers.

tiles() picks (TX, TY) for head sizes of e4 / v4 vec4s and the device's workgroup memory: the first of PREFERRED
with TX dividing v4 that fits. WEBGRAD_ATTENTION_TILES=0 turns the kernel off (attention.wgsl's forward runs
everywhere), =<TX>x<TY> forces a configuration where it fits (benchmarks and tests)."""

import functools
import os

from .dispatch import Kernel
from . import typed

# (TX, TY) in order of preference: 64-query tiles first (each key tile staged once for 64 queries).
PREFERRED = ((4, 16), (6, 16), (8, 16), (2, 16), (4, 8), (6, 8), (8, 8), (2, 8))


def _parse(spec):
    if spec in (None, "", "1"):
        return True
    if spec == "0":
        return False
    tx, x, ty = spec.partition("x")
    try:
        forced = int(tx), int(ty)
    except ValueError:
        raise ValueError(f"WEBGRAD_ATTENTION_TILES={spec!r}: expected 0, 1 or <TX>x<TY>") from None
    if not x or min(forced) < 1:
        raise ValueError(f"WEBGRAD_ATTENTION_TILES={spec!r}: expected 0, 1 or <TX>x<TY>")
    return forced


# True (PREFERRED), False (off) or a forced (TX, TY); tests set it.
MODE = _parse(os.environ.get("WEBGRAD_ATTENTION_TILES"))


def _pitch(e4):
    """vec4s a staged q or k row takes: an odd number, so that the rows 8 threads of a warp read at once fall on
    distinct banks (32 banks of 4 bytes: 8 vec4 slots)."""
    return e4 | 1


def workgroup_bytes(e4, v4, tx, ty):
    """Workgroup memory of configuration (tx, ty): qs, ks, vs, ps and red, in vec4s of 16 bytes."""
    return 16 * (4 * ty * _pitch(e4) + 4 * tx * _pitch(e4) + 4 * tx * v4 + 4 * tx * ty + tx * ty)


def tiles(rt, e4, v4):
    """(TX, TY) for head sizes of e4 and v4 vec4s on runtime rt, or None (attention.wgsl's forward then runs)."""
    if MODE is False or rt.variant["attention_untiled"]:
        return None
    limit = rt.limits["max_compute_workgroup_storage_size"]
    threads = rt.limits.get("max_compute_invocations_per_workgroup", 256)
    for tx, ty in (MODE,) if MODE is not True else PREFERRED:
        if v4 % tx == 0 and tx * ty <= threads and workgroup_bytes(e4, v4, tx, ty) <= limit:
            return tx, ty
    return None


def _helpers(e4, v4, tx, ty, has_mask):
    """The output registers o{a}_{c} (query a of the thread's 4, vec4 c of its VC), the helpers using them, and
    HAS_MASK."""
    vc, nt = v4 // tx, tx * ty
    regs = [(a, c) for a in range(4) for c in range(vc)]
    lane = "xyzw"
    lines = [f"const HAS_MASK: bool = {str(has_mask).lower()};"] + [f"var<private> o{a}_{c}: vec4<f32>;" for a, c in regs]

    def fn(signature, body):
        lines.append(f"fn {signature} {{\n" + "".join(f"    {b}\n" for b in body) + "}")

    fn("acc_zero()", [f"o{a}_{c} = vec4<f32>();" for a, c in regs])
    fn("acc_rescale(f: vec4<f32>)", [f"o{a}_{c} *= f.{lane[a]};" for a, c in regs])
    # key r's weights w of the 4 queries times its values (vs[r + c TX], the thread's vec4s)
    fn("acc_add(w: vec4<f32>, r: u32)", [f"let v{c} = vs[r + {c}u * TX];" for c in range(vc)]
       + [f"o{a}_{c} += w.{lane[a]} * v{c};" for a, c in regs])
    # rows i0, i0 + TY, i0 + 2 TY, i0 + 3 TY (those below L) times inv, at vec4 `at` of row 0 (the thread's first vec4)
    fn("store_rows(at: u32, i0: u32, inv: vec4<f32>)",
       [f"if (i0 + {a}u * TY < p.L) {{ "
        + " ".join(f"ob[at + (i0 + {a}u * TY) * p.o_sl + {c}u * TX] = to_T4(o{a}_{c} * inv.{lane[a]});"
                   for c in range(vc)) + " }" for a in range(4)])
    # the next tile's keys and values, fetched into registers before the current tile's products and staged
    # after them (their loads' latency hides behind the arithmetic): thread t takes elements t, t + NT, ...
    nk, nv = -(-4 * tx * e4 // nt), -(-4 * tx * v4 // nt)
    lines += [f"var<private> fk{n}: vec4<f32>;" for n in range(nk)] + [f"var<private> fv{n}: vec4<f32>;"
                                                                       for n in range(nv)]
    fetch, stage = [], []
    for n in range(nk):
        fetch.append(f"{{ let e = t + {n * nt}u; let r = e / E4; fk{n} = vec4<f32>(); "
                     f"if (e < BK * E4 && j0 + r < kend) {{ fk{n} = vec4<f32>(kb[kbase + (j0 + r) * p.k_sl + e % E4]); }} }}")
        stage.append(f"{{ let e = t + {n * nt}u; if (e < BK * E4) {{ ks[e / E4 * P + e % E4] = fk{n}; }} }}")
    for n in range(nv):
        fetch.append(f"{{ let e = t + {n * nt}u; fv{n} = vec4<f32>(); "
                     f"if (e < BK * V4 && j0 + e / V4 < kend) {{ fv{n} = vec4<f32>(vb[vbase + (j0 + e / V4) * p.v_sl + e % V4]); }} }}")
        stage.append(f"{{ let e = t + {n * nt}u; if (e < BK * V4) {{ vs[e] = fv{n}; }} }}")
    fn("fetch(t: u32, j0: u32, kend: u32, kbase: u32, vbase: u32)", fetch)
    fn("stage(t: u32)", stage)
    return "\n".join(lines)


@functools.lru_cache(maxsize=None)
def kernel(e4, v4, tx, ty, mask_splices, element):
    """The forward Kernel for head sizes e4 / v4 vec4s, tiles (tx, ty), the mask's and dropout's splices
    (MASK_BINDING, DROPOUT_BINDING text) and operands of WGSL type `element`; its bindings' kinds follow
    attention.py's forward."""
    mask_binding, dropout_binding, extra = mask_splices
    constants = (("E4", e4), ("V4", v4), ("TX", tx), ("TY", ty), ("P", _pitch(e4)))
    has_mask = any(slot == 10 for slot, _ in extra)
    splices = (("HELPERS", _helpers(e4, v4, tx, ty, has_mask)), ("MASK_BINDING", mask_binding), ("DROPOUT_BINDING", dropout_binding))
    shader = typed.typed_shader("attention_tiled.wgsl", (("T", element),), splices, constants)
    return Kernel(shader, "attention_forward_tiled",
                  ((0, "read"), (1, "read"), (2, "read"), (3, "write"), (7, "write")) + extra + ((12, "uniform"),),
                  ("CAUSAL", "LSE"))
