"""Prefix sums (shaders/scan.wgsl): the registry's cumsum on WebGPU."""

import struct

from ..._view import View
from ...dtypes import float32, int32, int64
from .. import kernels
from .check import check_int64
from .dispatch import Kernel, Shader, grid
from .elementwise import copy
from .views import check_view, contiguous_view

_PLAIN = """alias T = {t};
@group(0) @binding(0) var<storage, read_write> out: array<{t}>;
@group(0) @binding(1) var<storage, read> x: array<{t}>;
fn load(k: u32) -> T {{ return x[k]; }}
fn store(k: u32, v: T) {{ out[k] = v; }}
fn add(a: T, b: T) -> T {{ return a + b; }}
fn identity() -> T {{ return T(0); }}
"""
# int64: exact 64-bit sums of the int32 words, the high words to `hi` for the range check (see scan.wgsl)
_WIDE = """alias T = vec2<u32>;
@group(0) @binding(0) var<storage, read_write> out: array<i32>;
@group(0) @binding(1) var<storage, read> x: array<i32>;
@group(0) @binding(3) var<storage, read_write> hi: array<u32>;
fn load(k: u32) -> T { return vec2<u32>(bitcast<u32>(x[k]), select(0u, 0xffffffffu, x[k] < 0)); }
fn store(k: u32, v: T) {
    out[k] = bitcast<i32>(v.x);
    hi[k - p.out_offset] = v.y;
}
fn add(a: T, b: T) -> T {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
fn identity() -> T { return T(0); }
"""
_BINDINGS = ((0, "write"), (1, "read"), (2, "uniform"))
_ELEMENTS = {float32: (_PLAIN.format(t="f32"), _BINDINGS), int32: (_PLAIN.format(t="i32"), _BINDINGS),
             int64: (_WIDE, _BINDINGS + ((3, "write"),))}
_SHADERS = {dtype: Shader("scan.wgsl", lambda text=text: ({}, {"ELEMENT": text}))
            for dtype, (text, _) in _ELEMENTS.items()}
COLUMNS = {dtype: Kernel(_SHADERS[dtype], "scan_columns", b) for dtype, (_, b) in _ELEMENTS.items()}
ROWS = {dtype: Kernel(_SHADERS[dtype], "scan_rows", b) for dtype, (_, b) in _ELEMENTS.items()}
_PARAMS = struct.Struct("<6I")
# The longest row a thread walks on a software adapter: llvmpipe ends an invocation's loops after ~65535
# iterations (seen on lavapipe: prefix sums of 200,003 elements went wrong from element 65,505 on).
SOFTWARE_COLUMN_MAX = 32768
RANGE_MESSAGE = ("cumsum: the int64 prefix sum at element {value} (of {size}) is outside the int32 range "
                 "[-2147483648, 2147483647], the values WebGPU holds in an int64 tensor (WGSL has no 64-bit "
                 "integers); compute it on the CPU device")


def scan_transposed(rt, x, outs, scan_rows):
    """A scan along the middle dim of [outer, size, inner] contiguous views, run over rows instead: x copied
    transposed to [outer * inner, size, 1], scan_rows(row outputs, rows) run on it, and each of `outs` (the scan's
    outputs, of x's shape) written back from its row output. For columns too long for a thread's loop on a
    software adapter (SOFTWARE_COLUMN_MAX)."""
    outer, size, inner = x.shape
    n = x.numel

    def columns(v):  # v's elements in [outer, inner, size] order
        return View(v.storage, (outer, inner, size), (size * inner, 1, inner), v.offset, v.dtype)

    rows_in = contiguous_view(rt.storage(n, x.dtype), (outer, inner, size), x.dtype)
    copy(rt, rows_in, columns(x))
    rows_outs = [contiguous_view(rt.storage(n, o.dtype), (outer * inner, size, 1), o.dtype) for o in outs]
    scan_rows(rows_outs, rows_in.reshaped((outer * inner, size, 1)))
    for o, rows in zip(outs, rows_outs):
        copy(rt, columns(o), rows.reshaped((outer, inner, size)))


@kernels.cumsum.implement("webgpu")
def cumsum(rt, out, x):
    check_view(out, "out", contiguous=True, ndim=3)
    check_view(x, "x", contiguous=True, ndim=3)
    if x.shape != out.shape or x.dtype is not out.dtype:
        raise ValueError(f"cumsum: out {out.dtype}{list(out.shape)} must match x {x.dtype}{list(x.shape)}")
    if out.dtype not in COLUMNS:
        raise TypeError(f"cumsum on WebGPU takes float32, int32 or int64, not {out.dtype}")
    outer, size, inner = out.shape
    if out.numel == 0:
        return
    if inner > 1 and rt.software and size > SOFTWARE_COLUMN_MAX:
        # Too long for a thread's loop there: scan the rows of a transposed copy, and transpose back.
        scan_transposed(rt, x, [out], lambda rows_outs, rows_in: cumsum(rt, rows_outs[0], rows_in))
        return
    params = _PARAMS.pack(outer, size, inner, x.offset, out.offset, outer * inner)
    storages = (out.storage, x.storage)
    hi = None
    if out.dtype is int64:
        hi = rt.storage(out.numel, int32)
        storages += (hi,)
    # A row a workgroup where rows are contiguous, on a GPU; software adapters run barriers slowly (a
    # coroutine switch per 4 lanes), so there every shape takes the thread-per-column loop.
    if inner == 1 and (not rt.software or size > SOFTWARE_COLUMN_MAX):
        rt.dispatch(ROWS[out.dtype], (), storages, params, grid(outer))
    else:
        rt.dispatch(COLUMNS[out.dtype], (), storages, params, grid(-(-outer * inner // 64)))
    if hi is not None:
        check_int64(rt, out, hi, RANGE_MESSAGE)
