"""searchsorted and histc on WebGPU (shaders/search.wgsl): a binary search per value, and a histogram counted with
integer atomics."""

import struct

from ...dtypes import float32, int32, int64
from .. import kernels
from .dispatch import Kernel, Shader, grid
from .elementwise import copy, fill
from .views import INDEX, check_view, contiguous_view

SHADER = Shader("search.wgsl", {})
SEARCH = Kernel(SHADER, "searchsorted", ((0, "read"), (1, "read"), (2, "write"), (3, "uniform")), ("FLOAT", "RIGHT"))
COUNT = Kernel(SHADER, "histc_count", ((1, "read"), (3, "uniform"), (4, "write")))
FINISH = Kernel(SHADER, "histc_finish", ((3, "uniform"), (4, "read"), (5, "write")))
_PARAMS = struct.Struct("<7I2f")
WORKGROUP = 256


def _groups(rt, n):
    return grid(-(-n // WORKGROUP), rt.limits["max_compute_workgroups_per_dimension"])


@kernels.searchsorted.implement("webgpu")
def searchsorted(rt, out, sorted, values, right=False):
    check_view(sorted, "sorted", dtype=(float32, int32, int64), contiguous=True, ndim=2)
    check_view(values, "values", dtype=sorted.dtype, contiguous=True, ndim=2)
    check_view(out, "out", dtype=INDEX, contiguous=True, ndim=2)
    rows, m = sorted.shape
    if values.shape[0] != rows or out.shape != values.shape:
        raise ValueError(f"searchsorted: sorted {sorted.shape}, values {values.shape} and out {out.shape} do not match")
    n = values.shape[1]
    if rows * n == 0:
        return
    params = _PARAMS.pack(rows, m, n, sorted.offset, values.offset, out.offset, 0, 0.0, 0.0)
    constants = SEARCH.constants({"FLOAT": sorted.dtype is float32, "RIGHT": bool(right)})
    rt.dispatch(SEARCH, constants, (sorted.storage, values.storage, out.storage), params, _groups(rt, rows * n))


@kernels.histc.implement("webgpu")
def histc(rt, out, x, low, high):
    check_view(x, "x", dtype=float32)
    check_view(out, "out", dtype=float32, contiguous=True, ndim=1)
    bins = out.shape[0]
    if bins == 0:
        return
    if not x.is_contiguous():
        dense = contiguous_view(rt.storage(max(x.numel, 1), float32), x.shape, float32)
        copy(rt, dense, x)
        x = dense
    counts = contiguous_view(rt.storage(bins, int32), (bins,), int32)
    fill(rt, counts, 0)
    params = _PARAMS.pack(0, 0, x.numel, 0, x.offset, out.offset, bins, float(low), float(high))
    if x.numel:
        rt.dispatch(COUNT, (), (x.storage, counts.storage), params, _groups(rt, x.numel))
    rt.dispatch(FINISH, (), (counts.storage, out.storage), params, (-(-bins // WORKGROUP), 1, 1))
