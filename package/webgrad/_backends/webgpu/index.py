"""index_select, gather and their backward scatter-adds (shaders/index.wgsl)."""

import struct

from ... import _bounds
from ...dtypes import float32, int32, int64, uint8
from .. import kernels
from . import embedding
from .elementwise import IDENTITY, UNARY_TO_U8, fill, launch, materialize
from .dispatch import Kernel, Shader, dtype_code
from .views import INDEX, check_view, contiguous_view

SHADER = Shader("index.wgsl", {})
_COPY = ((0, "write"), (1, "read"), (2, "read"), (3, "uniform"), (5, "write"))  # 5: the error word
_ADD = ((1, "read"), (2, "read"), (3, "uniform"), (4, "write"))  # out bound as atomics
INDEX_SELECT = Kernel(SHADER, "index_select", _COPY, ("X_DTYPE",))
GATHER = Kernel(SHADER, "gather", _COPY, ("X_DTYPE",))
GATHER_ADD = Kernel(SHADER, "gather_add", _ADD, ("INT_MATH",))

_PARAMS = struct.Struct("<8I")  # n, size, inner, k, x_offset, index_offset, out_offset, error_code
WORKGROUP = 256


def _groups(rt, n):
    return (min(-(-n // WORKGROUP), rt.limits["max_compute_workgroups_per_dimension"]), 1, 1)


def _check(out, x, index, gather):
    check_view(x, "x", contiguous=True, ndim=3)
    check_view(index, "index", dtype=INDEX, contiguous=True, ndim=3 if gather else 1)
    check_view(out, "out", dtype=x.dtype, contiguous=True, ndim=3)
    outer, _, inner = x.shape
    k = index.shape[1] if gather else index.shape[0]
    if out.shape != (outer, k, inner):
        raise ValueError(f"out has shape {out.shape}, expected {(outer, k, inner)}")
    if gather and index.shape != out.shape:
        raise ValueError(f"gather: index has shape {index.shape} but out has shape {out.shape}")


def _select(rt, kernel, out, x, index, gather):
    _check(out, x, index, gather)
    if out.numel == 0:
        return
    # a bad index reads nothing and is reported through the error word (index.wgsl)
    code = rt.error_code(_bounds.template(_bounds.GATHER if gather else _bounds.INDEX_SELECT))
    x, index = (materialize(rt, v) if v.storage is out.storage else v for v in (x, index))
    outer, size, inner = x.shape
    k = out.shape[1]
    if x.dtype is uint8:
        if inner % 4 == 0 and x.offset % 4 == 0 and out.offset % 4 == 0 and not gather:
            # Whole words per row (MNIST's 784-byte images): copy them as int32 words, no unpacking.
            _copy(rt, kernel, out.storage, x.storage, index, out.numel // 4, size, inner // 4, k,
                  x.offset // 4, out.offset // 4, int32, code)
            return
        tmp = contiguous_view(rt.storage(out.numel, int32), out.shape, int32)
        _copy(rt, kernel, tmp.storage, x.storage, index, out.numel, size, inner, k, x.offset, 0, uint8, code)
        launch(rt, UNARY_TO_U8, IDENTITY, out, [tmp], int_math=True)
        return
    _copy(rt, kernel, out.storage, x.storage, index, out.numel, size, inner, k, x.offset, out.offset, x.dtype, code)


def _copy(rt, kernel, out, x, index, n, size, inner, k, x_offset, out_offset, x_dtype, code):
    params = _PARAMS.pack(n, size, inner, k, x_offset, index.offset, out_offset, code)
    rt.dispatch(kernel, kernel.constants({"X_DTYPE": dtype_code(x_dtype)}), (out, x, index.storage, rt.errors),
                params, _groups(rt, n))


def _scatter_add(rt, kernel, out, grad, index, gather):
    check_view(out, "out", contiguous=True, ndim=3)
    if out.dtype not in (float32, int32, int64):
        raise TypeError(f"scatter-add backward writes float32, int32 or int64, not {out.dtype}")
    check_view(grad, "grad", dtype=out.dtype, contiguous=True, ndim=3)
    check_view(index, "index", dtype=INDEX, contiguous=True, ndim=3 if gather else 1)
    k = index.shape[1] if gather else index.shape[0]
    if grad.shape != (out.shape[0], k, out.shape[2]) or (gather and index.shape != grad.shape):
        raise ValueError(f"grad {grad.shape} and index {index.shape} do not match out {out.shape}")
    grad, index = (materialize(rt, v) if v.storage is out.storage else v for v in (grad, index))
    fill(rt, out, 0)
    n = grad.numel
    if n == 0:
        return
    outer, size, inner = out.shape
    params = _PARAMS.pack(n, size, inner, grad.shape[1], grad.offset, index.offset, out.offset, 0)
    # (int64 sums wrap here as int32 does: the engine scatters onto zeros at distinct positions only)
    constants = kernel.constants({"INT_MATH": out.dtype is not float32})
    rt.dispatch(kernel, constants, (grad.storage, index.storage, out.storage), params, _groups(rt, n))


@kernels.index_select.implement("webgpu")
def index_select(rt, out, x, index):
    _select(rt, INDEX_SELECT, out, x, index, gather=False)


@kernels.gather.implement("webgpu")
def gather(rt, out, x, index):
    _select(rt, GATHER, out, x, index, gather=True)


@kernels.index_select_backward.implement("webgpu")
def index_select_backward(rt, out, grad, index):
    embedding.index_select_backward(rt, out, grad, index)  # (lists per row, no float atomics: embedding.py)


@kernels.gather_backward.implement("webgpu")
def gather_backward(rt, out, grad, index):
    _scatter_add(rt, GATHER_ADD, out, grad, index, gather=True)
