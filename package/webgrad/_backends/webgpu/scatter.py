"""Scatters with a reduction and stream compaction (shaders/scatter.wgsl): the registry's scatter_reduce and
compact on WebGPU.

WebGPU has no float atomics, so scatter_reduce makes per-target lists with integer atomics (as the embedding
backward does: embedding.py) and reduces each target's list in one thread: three dispatches (the lists' heads
filled with -1, link, scatter_reduce), every element of out written once, any reduction the same way."""

import struct

from ... import _bounds
from ...dtypes import bool_, float32, int32, int64
from .. import kernels
from .dispatch import Kernel, Shader, grid
from .elementwise import fill, materialize
from .views import INDEX, check_view, contiguous_view

SHADER = Shader("scatter.wgsl", {})
LINK = Kernel(SHADER, "link", ((0, "write"), (1, "read"), (2, "write"), (6, "uniform"), (7, "write")), ("ROWS",))
REDUCE = Kernel(SHADER, "scatter_reduce", ((0, "read"), (2, "read"), (3, "read"), (4, "read"), (5, "write"),
                                           (6, "uniform"), (7, "write")),
                ("OP", "INCLUDE_SELF", "KIND", "ROWS"))
COMPACT = Kernel(SHADER, "compact", ((1, "read"), (4, "read"), (5, "write"), (6, "uniform")))
_PARAMS = struct.Struct("<12I")
WORKGROUP = 256
_KINDS = {float32: 0, int32: 1, int64: 2}
RANGE_MESSAGE = ("scatter: an int64 sum or product is outside the int32 range [-2147483648, 2147483647], the "
                 "values WebGPU holds in an int64 tensor (WGSL has no 64-bit integers); compute it on the CPU device")


def _groups(rt, n):
    return grid(-(-n // WORKGROUP), rt.limits["max_compute_workgroups_per_dimension"])


@kernels.scatter_reduce.implement("webgpu")
def scatter_reduce(rt, out, x, src, index, reduce, include_self=True):
    check_view(x, "x", dtype=tuple(_KINDS), contiguous=True, ndim=3)
    check_view(out, "out", dtype=x.dtype, contiguous=True, ndim=3)
    check_view(src, "src", dtype=x.dtype, contiguous=True, ndim=3)
    check_view(index, "index", dtype=INDEX, contiguous=True)
    if reduce not in kernels.SCATTER_OPS:
        raise ValueError(f"scatter_reduce: reduce must be one of {kernels.SCATTER_OPS}, got {reduce!r}")
    outer, size, inner = x.shape
    k = src.shape[1]
    rows = len(index.shape) == 1
    if out.shape != x.shape or src.shape != (outer, k, inner) or (index.shape != (k,) if rows else
                                                                   index.shape != src.shape):
        raise ValueError(f"scatter_reduce: out {out.shape}, x {x.shape}, src {src.shape} and index {index.shape} "
                         "do not match")
    if out.numel == 0:
        return
    x, src, index = (materialize(rt, v) if v.storage is out.storage else v for v in (x, src, index))
    nodes = k if rows else src.numel
    heads = contiguous_view(rt.storage(max(size if rows else out.numel, 1), int32), (size if rows else out.numel,),
                            int32)
    nexts = rt.storage(max(nodes, 1), int32)
    fill(rt, heads, -1)
    index_code = rt.error_code(_bounds.template(
        "scatter(): index {value} is out of bounds for a dimension of size {size}"))
    range_code = rt.error_code(RANGE_MESSAGE, RuntimeError)
    params = _PARAMS.pack(outer, size, inner, k, x.offset, src.offset, index.offset, out.offset, nodes, out.numel,
                          index_code, range_code)
    limit = rt.limits["max_compute_workgroups_per_dimension"]
    if nodes:
        rt.dispatch(LINK, LINK.constants({"ROWS": rows}), (heads.storage, index.storage, nexts, rt.errors), params,
                    grid(-(-nodes // WORKGROUP), limit))
    constants = REDUCE.constants({"OP": kernels.SCATTER_OPS.index(reduce), "INCLUDE_SELF": include_self,
                                  "KIND": _KINDS[x.dtype], "ROWS": rows})
    rt.dispatch(REDUCE, constants, (heads.storage, nexts, src.storage, x.storage, out.storage, rt.errors), params,
                grid(-(-out.numel // WORKGROUP), limit))


@kernels.compact.implement("webgpu")
def compact(rt, out, x, positions):
    check_view(x, "x", dtype=(float32, int32, int64, bool_), contiguous=True, ndim=1)  # (one word each)
    check_view(positions, "positions", dtype=INDEX, contiguous=True, ndim=1)
    check_view(out, "out", dtype=x.dtype, contiguous=True, ndim=1)
    n = x.shape[0]
    if positions.shape != (n,):
        raise ValueError(f"compact: positions {positions.shape} must match x {x.shape}")
    if n == 0 or out.numel == 0:
        return
    params = _PARAMS.pack(0, 0, 0, 0, x.offset, 0, positions.offset, out.offset, 0, n, 0, 0)
    rt.dispatch(COMPACT, (), (positions.storage, x.storage, out.storage), params, _groups(rt, n))
