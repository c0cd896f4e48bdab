"""Selections whose size depends on the values, and searches, as torch: nonzero, nonzero_static, argwhere,
masked_select, unique, unique_consecutive, searchsorted and bucketize.

The data-dependent ones mark what they keep with a 0/1 mask, take its prefix sums (kernels.cumsum), read the
count back to size the result (a sync on WebGPU, as PyTorch's CUDA syncs for nonzero) and write the kept
elements in order with one compaction kernel (kernels.compact). unique sorts first (kernels.topk). searchsorted is
a binary search per value (kernels.searchsorted).
"""

import numbers
from collections import namedtuple

from .. import dtypes
from .._tensor import Tensor, _norm_dim, arange, full, tensor, zeros
from .core import broadcast_shapes, cast, check_same_device, new
from .shape import cat, index_select, stack
from . import reduce
from .._backends import kernels


def _differs(a, b):
    """a != b with NaN differing from everything, itself included, written ~(a == b): some WebGPU compilers
    evaluate != on a NaN as an ordered comparison (False)."""
    return ~(a == b)


def _check(input, op, name="input"):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(input).__name__}")


def _positions(keep):
    """The inclusive prefix sums of a flat bool mask, and their total (read back: the result's size)."""
    positions = reduce.cumsum(keep, 0)
    count = int(positions[-1].item()) if keep.shape[0] else 0
    return positions, count


def _compact(values, positions, count):
    """values[i] for the i where positions steps up, in order: a [count] tensor."""
    out = new((count,), values.dtype, values.device)
    if count:
        kernels.compact(values.device.backend, out._view, values.contiguous()._view, positions._view)
    return out


def _flat_true(keep):
    """The flat positions (int64) where the flat bool mask is True."""
    positions, count = _positions(keep)
    return _compact(arange(keep.shape[0], dtype=dtypes.int64, device=keep.device), positions, count)


def _unravel(flat, shape):
    """[count, ndim] coordinates of flat row-major positions in `shape`."""
    if not shape or flat.shape[0] == 0:
        return zeros((flat.shape[0], len(shape)), dtype=dtypes.int64, device=flat.device)
    columns, rest = [], flat
    for n in reversed(shape):
        columns.append(rest % n)
        rest = rest // n
    return stack(list(reversed(columns)), 1)


def nonzero(input, *, out=None, as_tuple=False):
    """The coordinates of the non-zero elements, in row-major order: an int64 [count, ndim] tensor, or (as_tuple)
    one [count] tensor per dim, as torch.nonzero."""
    _check(input, "nonzero")
    if out is not None:
        raise TypeError("nonzero(): out= is not supported by webgrad; assign the result instead")
    flat = _flat_true(_differs(input, 0).reshape(-1))
    if as_tuple:
        if input.ndim == 0:
            return (flat,)
        coords = _unravel(flat, tuple(input.shape))
        return tuple(coords[:, d] for d in range(input.ndim))
    return _unravel(flat, tuple(input.shape))


def argwhere(input):
    """torch.argwhere: nonzero(input)."""
    return nonzero(input)


def nonzero_static(input, *, size, fill_value=-1):
    """nonzero's [count, ndim] coordinates cut or padded (with fill_value) to `size` rows, as torch.nonzero_static."""
    _check(input, "nonzero_static")
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, but got {size}")
    coords = nonzero(input)
    if coords.shape[0] >= size:
        return coords[:size]
    pad = full((size - coords.shape[0], coords.shape[1]), fill_value, dtype=dtypes.int64, device=input.device)
    return cat([coords, pad], 0)


def masked_select(input, mask):
    """The elements of input where mask (broadcast with input) is True, as a 1-D tensor in row-major order, as
    torch.masked_select; its gradient goes back to those elements."""
    _check(input, "masked_select")
    _check(mask, "masked_select", "mask")
    if mask.dtype is not dtypes.bool_:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got {mask.dtype.name}")
    check_same_device("masked_select", input, mask)
    shape = broadcast_shapes(tuple(input.shape), tuple(mask.shape), op="masked_select")
    x = input.expand(*shape) if tuple(input.shape) != shape else input
    m = mask.expand(*shape) if tuple(mask.shape) != shape else mask
    return index_select(x.reshape(-1), 0, _flat_true(m.reshape(-1)))


# ===================================================================== unique
unique_result = namedtuple("unique", ["values", "inverse", "counts"])


def _unique_runs(rows, start_mask, perm, return_inverse, return_counts, shape_of_inverse):
    """(values, inverse, counts) from rows in their final order, start_mask[i] marking the first row of each run,
    perm the original position of each row (None: the rows are in input order)."""
    n = rows.shape[0]
    positions, count = _positions(start_mask)
    values = index_select(rows, 0, _compact(arange(n, dtype=dtypes.int64, device=rows.device), positions, count)) \
        if count else rows[:0]
    inverse = counts = None
    if return_inverse:
        run_of = positions - 1
        if perm is not None:
            from .scatter import scatter
            run_of = scatter(zeros(n, dtype=dtypes.int64, device=rows.device), 0, perm, run_of)
        inverse = run_of.reshape(shape_of_inverse)
    if return_counts:
        starts = _compact(arange(n, dtype=dtypes.int64, device=rows.device), positions, count)
        ends = cat([starts[1:], tensor([n], dtype=dtypes.int64, device=rows.device)]) if count else starts
        counts = ends - starts
    return values, inverse, counts


def _rows_along(input, dim):
    """input with dim moved first and the rest flattened: [n, m], and a function giving rows back their shape."""
    d = _norm_dim(dim, max(input.ndim, 1))
    if input.ndim == 0:
        return input.reshape(1, 1), (lambda t: t.reshape(-1))
    moved = input.movedim(d, 0)
    rest = tuple(moved.shape[1:])
    rows = moved.reshape(moved.shape[0], -1)
    return rows, (lambda t: t.reshape((t.shape[0],) + rest).movedim(0, d))


def _lexsort(rows):
    """The stable order of rows sorting them lexicographically (first column most significant)."""
    n, m = rows.shape
    perm = arange(n, dtype=dtypes.int64, device=rows.device)
    for c in reversed(range(m)):
        column = index_select(rows[:, c], 0, perm)
        perm = index_select(perm, 0, column.sort(stable=True).indices)
    return perm


def _finish(values, inverse, counts, return_inverse, return_counts):
    if return_inverse and return_counts:
        return values, inverse, counts
    if return_inverse:
        return values, inverse
    if return_counts:
        return values, counts
    return values


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements of input (dim None) or its distinct slices along dim, in ascending order, with the
    inverse (where each element went) and counts where asked, as torch.unique (torch sorts with sorted=False
    too). NaNs are distinct, as torch's CPU."""
    _check(input, "unique")
    if dim is None:
        flat = input.reshape(-1)
        n = flat.shape[0]
        ordered = flat.sort(stable=True)
        starts = _run_starts(ordered.values.reshape(n, 1))
        values, inverse, counts = _unique_runs(ordered.values, starts, ordered.indices, return_inverse,
                                               return_counts, tuple(input.shape))
        return _finish(values, inverse, counts, return_inverse, return_counts)
    rows, back = _rows_along(input, dim)
    perm = _lexsort(rows)
    ordered = index_select(rows, 0, perm)
    starts = _run_starts(ordered)
    values, inverse, counts = _unique_runs(ordered, starts, perm, return_inverse, return_counts, (rows.shape[0],))
    return _finish(back(values), inverse, counts, return_inverse, return_counts)


def _run_starts(rows):
    """Whether each of the [n, m] rows starts a run (differs from the row before; NaN differs from itself)."""
    n = rows.shape[0]
    if n == 0:
        return zeros(0, dtype=dtypes.bool_, device=rows.device)
    first = full((1,), True, dtype=dtypes.bool_, device=rows.device)
    if n == 1:
        return first
    if rows.shape[1] == 0:
        return cat([first, zeros(n - 1, dtype=dtypes.bool_, device=rows.device)])
    differs = reduce.sum(_differs(rows[1:], rows[:-1]), 1) > 0
    return cat([first, differs])


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """The elements (dim None) or slices along dim that differ from the one before them, with the inverse and
    counts of each run where asked, as torch.unique_consecutive."""
    _check(input, "unique_consecutive")
    if dim is None:
        flat = input.reshape(-1)
        starts = _run_starts(flat.reshape(-1, 1))
        values, inverse, counts = _unique_runs(flat, starts, None, return_inverse, return_counts,
                                               tuple(input.shape))
        return _finish(values, inverse, counts, return_inverse, return_counts)
    rows, back = _rows_along(input, dim)
    starts = _run_starts(rows)
    values, inverse, counts = _unique_runs(rows, starts, None, return_inverse, return_counts, (rows.shape[0],))
    return _finish(back(values), inverse, counts, return_inverse, return_counts)


# ===================================================================== searches
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None, out=None):
    """For each value of input, its insertion position in the ascending innermost rows of sorted_sequence (the
    first position where it would go, or the last with right / side='right'), as torch.searchsorted; sorter
    gives the order that sorts an unsorted sequence."""
    _check(sorted_sequence, "searchsorted", "sorted_sequence")
    if out is not None:
        raise TypeError("searchsorted(): out= is not supported by webgrad; assign the result instead")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("side and right can't be set to opposites, got side of left while right was True")
        right = side == "right"
    scalar = not isinstance(input, Tensor)
    if scalar:
        if not isinstance(input, numbers.Number):
            raise TypeError(f"searchsorted(): argument 'input' must be Tensor or Number, not {type(input).__name__}")
        input = tensor(input, device=sorted_sequence.device)
    check_same_device("searchsorted", sorted_sequence, input)
    seq = sorted_sequence
    if sorter is not None:
        if tuple(sorter.shape) != tuple(seq.shape):
            raise RuntimeError(f"searchsorted(): boundary and sorter must have the same size, but got boundary tensor "
                               f"{list(seq.shape)} and got sorter tensor {list(sorter.shape)}")
        seq = seq.gather(-1, sorter.long()) if seq.ndim else seq
    if seq.ndim > 1 and (input.ndim != seq.ndim or tuple(input.shape[:-1]) != tuple(seq.shape[:-1])):
        raise RuntimeError(f"searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                           f"boundaries tensor and input value tensor must match, but we got boundaries tensor "
                           f"{list(seq.shape)} and input value tensor {list(input.shape)}")
    if seq.ndim == 0:
        raise RuntimeError("searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                           "boundaries tensor and input value tensor must match, but we got boundaries tensor [] and "
                           f"input value tensor {list(input.shape)}")
    dtype = dtypes.promote(seq.dtype, input.dtype)
    if dtype in (dtypes.bool_, dtypes.uint8):
        dtype = dtypes.int32
    if dtype is dtypes.float16:
        dtype = dtypes.float32
    seq, values = cast(seq, dtype), cast(input, dtype)
    m = seq.shape[-1]
    rows = seq.reshape(-1, m) if seq.ndim > 1 else seq.reshape(1, m)
    vals = values.reshape(rows.shape[0], -1)
    out_dtype = dtypes.int32 if out_int32 else dtypes.int64
    result = new(tuple(vals.shape), out_dtype, values.device)
    if result.numel():
        if m == 0:
            result = zeros(tuple(vals.shape), dtype=out_dtype, device=values.device)
        else:
            kernels.searchsorted(values.device.backend, result._view, rows.contiguous()._view,
                                 vals.contiguous()._view, bool(right))
    return result.reshape(()) if scalar else result.reshape(tuple(input.shape))


def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
    """The bucket of each value of input among the ascending 1-D boundaries (boundaries[i-1] < v <= boundaries[i],
    or boundaries[i-1] <= v < boundaries[i] with right), as torch.bucketize."""
    _check(boundaries, "bucketize", "boundaries")
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right, out=out)
