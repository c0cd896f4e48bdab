"""Scans other than sums (the registry's scan): cumprod, logcumsumexp, cummax and cummin on WebGPU, with the
prefix-sum shader (shaders/scan.wgsl) and another element spliced in: its type, identity and combine."""

import struct

from ...dtypes import float32, int32, int64
from .. import kernels
from .dispatch import Kernel, Shader, grid
from .elementwise import copy
from .scan import SOFTWARE_COLUMN_MAX, scan_transposed
from .views import INDEX, check_view, contiguous_view

_PROD = """alias T = f32;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
fn load(k: u32) -> T { return x[k]; }
fn store(k: u32, v: T) { out[k] = v; }
fn identity() -> T { return T(1); }
fn add(a: T, b: T) -> T { return a * b; }
"""
# Log-add-exp sums carried as (m, o): m an element of the column (exact), o the log of the sum of exp(x - m) over
# the elements so far (small: m is taken from the larger part at each step). Differences of elements are taken before anything is
# rounded at their magnitude, and m + o is rounded once when stored, as a sum in float64 would be (torch's CPU
# accumulates in double; carried in one float32 at 1e4 the sums drifted by 5 ulp over 40 steps, which a
# gradient that cancels turns into percents).
_LOGADDEXP = """alias T = vec2<f32>;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
fn load(k: u32) -> T { return vec2<f32>(x[k], 0.0); }
fn store(k: u32, v: T) { out[k] = v.x + v.y; }
fn identity() -> T { return vec2<f32>(bitcast<f32>(0xff800000u), 0.0); }
// log(1 + exp(-d)) for d >= 0 to float32's precision: the builtin exp and log are relaxed on software adapters (a
// few 1e-6 off). exp(-d) = 2^-n exp(r), |r| <= ln 2 / 2, by its Taylor series; log(1 + e) = 2 atanh(e / (2 + e)) by
// its odd series (e / (2 + e) <= 1/3).
fn log1p_exp_neg(d: f32) -> f32 {
    if (d > 104.0) { return 0.0; }
    let n = floor(d * 1.4426950408889634 + 0.5);
    let r = (n * 0.693145751953125 - d) + n * 1.4286068203094173e-06;  // n ln 2 - d, ln 2 in two parts
    let q = 1.0 + r * (1.0 + r * (0.5 + r * (0.16666666666666666 + r * (0.041666666666666664 + r * (
        0.008333333333333333 + r * (0.001388888888888889 + r * 0.0001984126984126984))))));
    let e = ldexp(q, -i32(n));
    let s = e / (2.0 + e);
    let s2 = s * s;
    return 2.0 * s * (1.0 + s2 * (1.0 / 3.0 + s2 * (0.2 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0 + s2 * (1.0 / 11.0
        + s2 * (1.0 / 13.0 + s2 * (1.0 / 15.0 + s2 * (1.0 / 17.0 + s2 / 19.0)))))))));
}
fn add(a: T, b: T) -> T {
    if (is_nan(a.x) || is_nan(b.x)) { return vec2<f32>(bitcast<f32>(0x7fc00000u), 0.0); }
    if (bitcast<u32>(a.x) == 0xff800000u) { return b; }
    if (bitcast<u32>(b.x) == 0xff800000u) { return a; }
    if (bitcast<u32>(a.x) == 0x7f800000u || bitcast<u32>(b.x) == 0x7f800000u) {
        return vec2<f32>(bitcast<f32>(0x7f800000u), 0.0);
    }
    var big = a;
    var t = (b.x - a.x) + (b.y - a.y);  // log of b's sum over a's
    if (t > 0.0) {
        big = b;
        t = -t;
    }
    return vec2<f32>(big.x, big.y + log1p_exp_neg(-t));
}
"""
# (value, position along size): the running extreme, the later one on ties, NaN above every number. The
# identity's position NONE marks it, so that it is neutral on both sides.
_EXTREME = """struct Pair {{ v: {t}, k: u32 }}
alias T = Pair;
const NONE: u32 = 0xffffffffu;
@group(0) @binding(0) var<storage, read_write> out: array<{t}>;
@group(0) @binding(1) var<storage, read> x: array<{t}>;
@group(0) @binding(3) var<storage, read_write> where_: array<i32>;
fn load(k: u32) -> T {{ return Pair(x[k], ((k - p.x_offset) / p.inner) % p.size); }}
fn store(k: u32, v: T) {{
    out[k] = v.v;
    where_[k - p.out_offset] = i32(v.k);
}}
fn identity() -> T {{ return Pair({t}(0), NONE); }}
fn beats(a: {t}, b: {t}) -> bool {{ {beats} }}
fn add(a: T, b: T) -> T {{
    if (b.k == NONE) {{ return a; }}
    if (a.k == NONE) {{ return b; }}
    if (beats(a.v, b.v)) {{ return b; }}
    return a;
}}
"""
_BEATS = {("max", True): "return is_nan(b) || (!is_nan(a) && b >= a);",
          ("min", True): "return is_nan(b) || (!is_nan(a) && b <= a);",
          ("max", False): "return b >= a;", ("min", False): "return b <= a;"}
# (the spliced text's own helper: includes are expanded before splices)
_HEADER = "fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }\n"
_BINDINGS = ((0, "write"), (1, "read"), (2, "uniform"))


def _element(op, dtype):
    t = "f32" if dtype is float32 else "i32"
    if op in ("max", "min"):
        return _HEADER + _EXTREME.format(t=t, beats=_BEATS[op, dtype is float32]), _BINDINGS + ((3, "write"),)
    return _HEADER + (_PROD if op == "prod" else _LOGADDEXP), _BINDINGS


_KERNELS = {}


def _kernels(op, dtype):
    """(scan_columns, scan_rows) kernels of `op` on `dtype` (int64 scans as int32: its words)."""
    key = (op, int32 if dtype is int64 else dtype)
    hit = _KERNELS.get(key)
    if hit is None:
        text, bindings = _element(*key)
        shader = Shader("scan.wgsl", lambda text=text: ({}, {"ELEMENT": text}))
        hit = _KERNELS[key] = (Kernel(shader, "scan_columns", bindings), Kernel(shader, "scan_rows", bindings))
    return hit


_PARAMS = struct.Struct("<6I")


@kernels.scan.implement("webgpu")
def scan(rt, op, out, x, indices=None):
    if op not in kernels.SCAN_OPS:
        raise ValueError(f"scan: op must be one of {kernels.SCAN_OPS}, got {op!r}")
    extreme = op in ("max", "min")
    allowed = (float32, int32, int64) if extreme else (float32,)
    check_view(x, "x", dtype=allowed, contiguous=True, ndim=3)
    check_view(out, "out", dtype=x.dtype, contiguous=True, ndim=3)
    if out.shape != x.shape:
        raise ValueError(f"scan: out {list(out.shape)} must match x {list(x.shape)}")
    if extreme:
        if indices is None:
            raise ValueError(f"scan: {op} writes indices")
        check_view(indices, "indices", dtype=INDEX, contiguous=True, ndim=3)
    outer, size, inner = out.shape
    if out.numel == 0:
        return
    if inner > 1 and rt.software and size > SOFTWARE_COLUMN_MAX:
        # too long for a thread's loop there (see scan.py): scan the rows of a transposed copy
        scan_transposed(rt, x, [out, indices] if extreme else [out],
                        lambda rows_outs, rows_in: scan(rt, op, rows_outs[0], rows_in, *rows_outs[1:]))
        return
    columns, rows = _kernels(op, x.dtype)
    storages = (out.storage, x.storage)
    where = None
    if extreme:
        # the shader writes the positions from element 0 of their buffer: into indices where it starts there
        where = indices if indices.offset == 0 else contiguous_view(rt.storage(out.numel, indices.dtype),
                                                                    out.shape, indices.dtype)
        storages += (where.storage,)
    params = _PARAMS.pack(outer, size, inner, x.offset, out.offset, outer * inner)
    if inner == 1 and (not rt.software or size > SOFTWARE_COLUMN_MAX):
        rt.dispatch(rows, (), storages, params, grid(outer))
    else:
        rt.dispatch(columns, (), storages, params, grid(-(-outer * inner // 64)))
    if extreme and where is not indices:
        copy(rt, indices, where)
