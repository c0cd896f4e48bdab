"""Prefix sums (shaders/scan.wgsl): the registry's cumsum on WebGPU."""

import struct

from ...dtypes import float32, int32
from .. import kernels
from .dispatch import Kernel, Shader, grid
from .views import check_view

_BINDINGS = ((0, "write"), (1, "read"), (2, "uniform"))
_SHADERS = {dtype: Shader("scan.wgsl", lambda t=t: ({}, {"ELEMENT": f"alias T = {t};"}))
            for dtype, t in ((float32, "f32"), (int32, "i32"))}
COLUMNS = {dtype: Kernel(shader, "scan_columns", _BINDINGS) for dtype, shader in _SHADERS.items()}
ROWS = {dtype: Kernel(shader, "scan_rows", _BINDINGS) for dtype, shader in _SHADERS.items()}
_PARAMS = struct.Struct("<6I")


@kernels.cumsum.implement("webgpu")
def cumsum(rt, out, x):
    check_view(out, "out", contiguous=True, ndim=3)
    check_view(x, "x", contiguous=True, ndim=3)
    if x.shape != out.shape or x.dtype is not out.dtype:
        raise ValueError(f"cumsum: out {out.dtype}{list(out.shape)} must match x {x.dtype}{list(x.shape)}")
    if out.dtype not in COLUMNS:
        raise TypeError(f"cumsum on WebGPU takes float32 or int32, not {out.dtype}")
    outer, size, inner = out.shape
    if out.numel == 0:
        return
    params = _PARAMS.pack(outer, size, inner, x.offset, out.offset, outer * inner)
    # A row a workgroup where rows are contiguous, on a GPU; software adapters run barriers slowly (a
    # coroutine switch per 4 lanes), so there every shape takes the thread-per-column loop.
    if inner == 1 and not rt.software:
        rt.dispatch(ROWS[out.dtype], (), (out.storage, x.storage), params, grid(outer))
    else:
        rt.dispatch(COLUMNS[out.dtype], (), (out.storage, x.storage), params, grid(-(-outer * inner // 64)))
