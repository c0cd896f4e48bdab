"""index_select's backward (an embedding's gradient) without float atomics (shaders/embedding.wgsl): each index
joins its row's list with one integer atomic exchange, then a thread per element of the gradient sums its row's
list. Three dispatches (the lists' heads filled with -1, link, sum_rows) and out written once; before, a
compare-and-swap loop per element of grad onto a zero-filled out serialised the rows a batch names often."""

import struct

from ...dtypes import float32, int32, int64
from .dispatch import Kernel, Shader, grid
from .elementwise import fill, materialize
from .views import INDEX, check_view, contiguous_view

SHADER = Shader("embedding.wgsl", {})
LINK = Kernel(SHADER, "link", ((0, "write"), (1, "read"), (2, "write"), (5, "uniform")))
_SUM = ((0, "read"), (2, "read"), (3, "read"), (4, "write"), (5, "uniform"))
SUM_ROWS = Kernel(SHADER, "sum_rows", _SUM, ("INT_MATH",))
SUM_ROWS4 = Kernel(SHADER, "sum_rows4", _SUM, ("INT_MATH",))
_PARAMS = struct.Struct("<7I")
WORKGROUP = 256


def index_select_backward(rt, out, grad, index):
    """out [outer, size, inner] = the sums of grad [outer, K, inner] over the indices naming each row."""
    check_view(out, "out", contiguous=True, ndim=3)
    if out.dtype not in (float32, int32, int64):
        raise TypeError(f"index_select's backward writes float32, int32 or int64, not {out.dtype}")
    check_view(grad, "grad", dtype=out.dtype, contiguous=True, ndim=3)
    check_view(index, "index", dtype=INDEX, contiguous=True, ndim=1)
    k = index.shape[0]
    outer, size, inner = out.shape
    if grad.shape != (outer, k, inner):
        raise ValueError(f"grad {grad.shape} and index {index.shape} do not match out {out.shape}")
    if out.numel == 0:
        return
    grad, index = (materialize(rt, v) if v.storage is out.storage else v for v in (grad, index))
    heads = contiguous_view(rt.storage(size, int32), (size,), int32)
    nexts = rt.storage(max(k, 1), int32)
    fill(rt, heads, -1)
    limit = rt.limits["max_compute_workgroups_per_dimension"]
    if k:
        params = _PARAMS.pack(k, size, inner, 0, 0, index.offset, 0)
        rt.dispatch(LINK, (), (heads.storage, index.storage, nexts), params,
                    (min(-(-k // WORKGROUP), limit), 1, 1))
    vec4 = inner % 4 == 0 and grad.offset % 4 == 0 and out.offset % 4 == 0
    units = inner // 4 if vec4 else inner
    n = outer * size * units
    params = _PARAMS.pack(k, size, units, n, grad.offset // 4 if vec4 else grad.offset, 0,
                          out.offset // 4 if vec4 else out.offset)
    kernel = SUM_ROWS4 if vec4 else SUM_ROWS
    rt.dispatch(kernel, kernel.constants({"INT_MATH": out.dtype is not float32}),
                (heads.storage, nexts, grad.storage, out.storage), params, grid(-(-n // WORKGROUP), limit))
