"""Sorting: topk, sort, argsort and msort, on the topk kernel (kernels.topk), along any dim.

Every backend orders alike: by value, NaN above every number, equal values in the order they had (lower index
first), so sort is always stable (torch's stable=True; stable=False allows any order of ties, and this one is
allowed). The values' gradient goes back to the entries they came from (a scatter by the indices, as torch's).
"""

from ..return_types import structseq
from .. import dtypes
from .._autograd import record
from .._tensor import Tensor, _norm_dim
from .core import cast, new
from .._backends import kernels

topk_result = structseq("topk", ["values", "indices"])  # torch.return_types.topk
sort_result = structseq("sort", ["values", "indices"])  # torch.return_types.sort

_KEYED = (dtypes.float32, dtypes.float16, dtypes.bfloat16, dtypes.float64, dtypes.int32, dtypes.int64)


def _check(input, op):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")


def _order(input, k, dim, largest, op):
    """(values, indices): the first k entries along `dim` of `input` in kernels.topk's order."""
    d = _norm_dim(dim, input.ndim)
    x = input if input.ndim else input.reshape(1)
    # bool and uint8 sort as the integers they hold
    work = x if x.dtype in _KEYED else cast(x, dtypes.int32)
    last = work.ndim - 1
    moved = (work if d == last else work.transpose(d, last)).contiguous()
    lead = tuple(moved.shape[:-1])
    cols = moved.shape[-1]
    rows = moved.numel() // cols if cols else 0
    values = new(lead + (k,), work.dtype, work.device)
    indices = new(lead + (k,), dtypes.int64, work.device)
    if rows and k:
        kernels.topk(work.device.backend, values._view.reshaped((rows, k)), indices._view.reshaped((rows, k)),
                     moved._view.reshaped((rows, cols)), k, largest)

    def back(t):  # [..., k] with dim last -> input's layout
        t = t if d == last else t.transpose(d, last)
        return t if input.ndim else t.reshape(())
    out_values, out_indices = back(values), back(indices)
    if work.dtype is not x.dtype:
        out_values = cast(out_values, x.dtype)
    elif input.dtype.is_floating:
        def backward(g):
            gm = (g.reshape(1) if g.ndim == 0 else g)
            gm = (gm if d == last else gm.transpose(d, last)).contiguous()
            gx = new(tuple(moved.shape), g.dtype, g.device)
            kernels.gather_backward(g.device.backend, gx._view.reshaped((rows, cols, 1)),
                                    gm._view.reshaped((rows, k, 1)), indices._view.reshaped((rows, k, 1)))
            gx = gx if d == last else gx.transpose(d, last)
            return gx if input.ndim else gx.reshape(())
        record(out_values, op.capitalize(), (input,), lambda g: (backward(g),))
    return out_values, out_indices


def topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):
    """The k largest (largest=False: smallest) entries along `dim` and their indices, largest first, as torch.topk
    (sorted=False may order them any way: they come sorted)."""
    _check(input, "topk")
    if out is not None:
        raise TypeError("topk(): out= is not supported by webgrad; assign the result instead")
    if isinstance(k, bool) or not hasattr(k, "__index__"):
        raise TypeError(f"topk(): argument 'k' (position 2) must be int, not {type(k).__name__}")
    k = k.__index__()
    size = input.shape[_norm_dim(dim, input.ndim)] if input.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    return topk_result(*_order(input, k, dim, largest, "topk"))


def sort(input, dim=-1, descending=False, stable=False, *, out=None):
    """The entries along `dim` in ascending (descending) order and where they came from, as torch.sort. The
    sort is stable whatever `stable` says."""
    _check(input, "sort")
    if out is not None:
        raise TypeError("sort(): out= is not supported by webgrad; assign the result instead")
    size = input.shape[_norm_dim(dim, input.ndim)] if input.ndim else 1
    return sort_result(*_order(input, size, dim, bool(descending), "sort"))


def argsort(input, dim=-1, descending=False, stable=False):
    """The indices that sort `input` along `dim`, as torch.argsort."""
    return sort(input, dim=dim, descending=descending, stable=stable).indices


def msort(input):
    """input sorted along its first dim, as torch.msort."""
    return sort(input, dim=0).values
