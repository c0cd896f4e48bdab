"""Scatters and index writes, as torch: scatter (src or value, and its legacy reduce=), scatter_add, scatter_reduce
(sum, prod, mean, amax, amin; include_self), index_add, index_copy, index_fill, index_reduce, index_put, put, take,
masked_scatter, and the slice writers select_scatter, slice_scatter, diagonal_scatter and as_strided_scatter.

Every scatter is one scatter_reduce kernel (kernels.scatter_reduce: each target reduces the values its indices name;
WebGPU builds per-target lists with integer atomics, as no float atomics exist), with a [outer, K, inner] index
(scatter) or a [K] one (the index_* ops). Gradients are PyTorch's formulas (tied extremes share theirs evenly, a
product's zeros are handled exactly) written with gather / index_select and these scatters. The in-place methods
(x.scatter_(...), x.index_add_(...)) are the out-of-place ops through ops/inplace.py.
"""

import numbers

from .. import _bounds, dtypes
from .._autograd import no_grad, record
from .._view import View
from .._tensor import Tensor, _norm_dim, arange, full, zeros
from .core import cast, check_same_device, new
from .elementwise import where
from .shape import _check_index, _three_d, gather, index_select
from .._backends import kernels

_REDUCES = ("sum", "prod", "mean", "amax", "amin")
_KERNEL_DTYPES = (dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16, dtypes.int32, dtypes.int64)


def _check_tensor(t, op, name):
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(t).__name__}")


def _kernel_dtype(x):
    """x as the kernel takes it: bool and uint8 go through int32 (and come back)."""
    return x if x.dtype in _KERNEL_DTYPES else cast(x, dtypes.int32)


def _run(x, d, index, src, reduce, include_self, rows):
    """scatter_reduce's kernel on a contiguous copy of x along dim d (no autograd): rows means index is [K]
    (index_* ops), else index has src's shape (scatters)."""
    work = _kernel_dtype(x).contiguous()
    values = cast(src, work.dtype).contiguous()
    outer, size, inner = _three_d(tuple(work.shape), d)
    k = index.shape[0] if rows else index.shape[d]
    out = new(tuple(work.shape), work.dtype, work.device)
    idx = index.reshape(-1) if rows else index
    kernels.scatter_reduce(work.device.backend, out._view.reshaped((outer, size, inner)),
                           work._view.reshaped((outer, size, inner)), values._view.reshaped((outer, k, inner)),
                           idx._view if rows else idx._view.reshaped((outer, k, inner)), reduce, include_self)
    return out if out.dtype is x.dtype else cast(out, x.dtype)


def _region(x, index, d):
    """The index (for dims other than d) of the part of x a smaller index covers, or None where it covers all."""
    if all(index.shape[i] == x.shape[i] for i in range(x.ndim) if i != d):
        return None
    return tuple(slice(0, index.shape[i]) if i != d else slice(None) for i in range(x.ndim))


def _scatter_values(x, d, index, src, reduce, include_self):
    """x with src (of index's shape) scattered along d, without recording."""
    if index.numel() == 0:
        return x.clone()
    region = _region(x, index, d)
    if region is None:
        return _run(x, d, index, src, reduce, include_self, rows=False)
    out = x.clone()
    out[region] = _run(x[region], d, index, src, reduce, include_self, rows=False)
    return out


def _check_scatter(op, input, dim, index, src=None):
    _check_tensor(input, op, "input")
    index = _check_index(index, op)
    check_same_device(op, input, index)
    if input.ndim == 0 or index.ndim == 0:
        if max(input.ndim, index.ndim, src.ndim if isinstance(src, Tensor) else 0) > 1:
            raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions as self tensor")
    elif index.ndim != input.ndim:
        raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions as self tensor")
    d = _norm_dim(dim, max(input.ndim, 1))
    if isinstance(src, Tensor):
        check_same_device(op, input, src)
        if src.dtype is not input.dtype:
            raise RuntimeError(f"{op}(): Expected self.dtype to be equal to src.dtype")
        if index.ndim and (src.ndim != index.ndim or any(index.shape[i] > src.shape[i] for i in range(index.ndim))):
            raise RuntimeError(f"{op}(): Expected index {list(index.shape)} to be smaller than self "
                               f"{list(input.shape)} apart from dimension {d} and to be smaller size than src "
                               f"{list(src.shape)}")
    if index.ndim and any(index.shape[i] > input.shape[i] for i in range(index.ndim) if i != d):
        raise RuntimeError(f"{op}(): Expected index {list(index.shape)} to be smaller than self {list(input.shape)} "
                           f"apart from dimension {d}")
    return index, d


def _src_part(src, index):
    """The part of src that index covers (src may be larger)."""
    if tuple(src.shape) == tuple(index.shape):
        return src
    return src[tuple(slice(0, n) for n in index.shape)]


def _pad_to(g, shape):
    """A gradient of src's covered part, zero-padded to src's shape."""
    if tuple(g.shape) == tuple(shape):
        return g
    out = zeros(shape, dtype=g.dtype, device=g.device)
    out[tuple(slice(0, n) for n in g.shape)] = g
    return out


def _scalar_dims(input, index, src):
    """0-d operands as 1-element vectors (torch reads them so), and a function putting the result back."""
    if input.ndim and index.ndim:
        return input, index, src, lambda t: t
    src = src.reshape(-1) if isinstance(src, Tensor) and src.ndim == 0 else src
    return input.reshape(-1), index.reshape(-1), src, (lambda t: t.reshape(tuple(input.shape)))


def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """input with src's values (or the number `value`) written along dim at index, as torch.scatter; the legacy
    reduce='add' / 'multiply' adds or multiplies them in instead."""
    if src is None and value is None:
        raise TypeError("scatter(): expected a 'src' tensor or a 'value'")
    if src is not None and not isinstance(src, Tensor):
        src, value = None, src  # scatter(input, dim, index, 2.5): the value overload
    index, d = _check_scatter("scatter", input, dim, index, src)
    if reduce is not None:
        if reduce not in ("add", "multiply"):
            raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
        if src is None:
            src = full(tuple(index.shape), value, dtype=input.dtype, device=input.device)
        kind = "sum" if reduce == "add" else "prod"
        return scatter_reduce(input, dim, index, _src_part(src, index) if index.ndim else src, kind)
    x, idx, s, back = _scalar_dims(input, index, src)
    if src is None:
        if isinstance(value, Tensor):
            value = value.item()
        with no_grad():
            written = _scatter_values(zeros(tuple(x.shape), dtype=dtypes.int32, device=x.device), d, idx,
                                      full(tuple(idx.shape), 1, dtype=dtypes.int32, device=x.device), "assign",
                                      True) != 0
        return back(where(written, full((), value, dtype=input.dtype, device=input.device), x))
    part = _src_part(s, idx)
    out = _scatter_values(x, d, idx, part, "assign", True)

    def backward(g):
        g = g.reshape(tuple(x.shape))
        g_in = g_src = None
        if input.requires_grad:
            g_in = _scatter_values(g, d, idx, zeros(tuple(idx.shape), dtype=g.dtype, device=g.device), "assign", True)
        if src.requires_grad:
            g_src = _pad_to(gather(g, d, idx), tuple(s.shape)).reshape(tuple(src.shape))
        return back(g_in) if g_in is not None else None, g_src
    return back(record(out, "Scatter", (input, src), backward)) if input.dtype.is_floating else back(out)


def scatter_add(input, dim, index, src):
    """input with src's values added along dim at index (repeated indices add up), as torch.scatter_add."""
    return scatter_reduce(input, dim, index, src, "sum")


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """input with src's values reduced into it along dim at index: reduce 'sum', 'prod', 'mean', 'amax' or 'amin',
    over input's value too where include_self, as torch.scatter_reduce."""
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    _check_tensor(src, "scatter_reduce", "src")
    index, d = _check_scatter("scatter_reduce", input, dim, index, src)
    x, idx, s, back = _scalar_dims(input, index, src)
    part = _src_part(s, idx)
    out = _scatter_values(x, d, idx, part, reduce, include_self)
    if not input.dtype.is_floating:
        return back(out)
    ops = _Scatters(d, idx, rows=False)

    def backward(g):
        g_in, g_src = _reduce_backward(ops, g.reshape(tuple(x.shape)), x, part, out, reduce, include_self)
        g_in = back(g_in) if input.requires_grad else None
        g_src = _pad_to(g_src, tuple(s.shape)).reshape(tuple(src.shape)) if src.requires_grad else None
        return g_in, g_src
    return back(record(out, "ScatterReduce", (input, src), backward))


class _Scatters:
    """The read and write of one index along one dim: gather / scatter (index like src) or index_select /
    index_add (a [K] index of rows), as the backward formulas use them."""

    def __init__(self, d, index, rows):
        self.d, self.index, self.rows = d, index, rows

    def read(self, t):
        return index_select(t, self.d, self.index) if self.rows else gather(t, self.d, self.index)

    def reduce(self, x, src, reduce, include_self=True):
        if self.index.numel() == 0:
            return x.clone()
        if self.rows:
            return _run(x, self.d, self.index, src, reduce, include_self, rows=True)
        return _scatter_values(x, self.d, self.index, src, reduce, include_self)


def _reduce_backward(ops, g, x, src, out, reduce, include_self):
    """PyTorch's scatter_reduce / index_reduce backward: (gradient of x, gradient of src)."""
    with no_grad():
        if reduce == "sum":
            g_in, g_src = g, ops.read(g)
        elif reduce == "mean":
            counts = (x.new_ones(tuple(x.shape)) if include_self else x.new_zeros(tuple(x.shape)))
            counts = ops.reduce(counts, src.new_ones(tuple(src.shape)), "sum")
            counts = where(counts == 0, 1.0, counts)
            g_in = g / counts
            g_src = ops.read(g) / ops.read(counts)
        elif reduce == "prod":
            masked_x = where(x == 0, 1.0, x)
            g_in = g * ops.reduce(masked_x, src, "prod", include_self) / masked_x
            src_zero = src == 0
            zeros_at = ops.read(ops.reduce(x.new_zeros(tuple(x.shape)), cast(src_zero, x.dtype), "sum"))
            single_zero = src_zero & (zeros_at == 1)
            masked_result = ops.reduce(x, where(single_zero, 1.0, src), "prod", include_self)
            g_src = where(single_zero, ops.read(g * masked_result), ops.read(g * out) / where(src_zero, 1.0, src))
        else:  # amax, amin: ties share the gradient evenly
            value = ops.read(out)
            x_hit = cast(x == out, g.dtype)
            src_hit = cast(src == value, g.dtype)
            share = g / ops.reduce(x_hit, src_hit, "sum")
            g_in = x_hit * share
            g_src = src_hit * ops.read(share)
        if not include_self:
            hit = ops.reduce(x.new_zeros(tuple(x.shape)), src.new_ones(tuple(src.shape)), "sum")
            g_in = where(hit != 0, 0.0, g_in)
    return g_in, g_src


# ===================================================================== the index_* ops (a [K] index of rows)
def _check_rows(op, input, dim, index, source=None):
    _check_tensor(input, op, "input")
    index = _check_index(index, op)
    check_same_device(op, input, index)
    if index.ndim > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector")
    d = _norm_dim(dim, max(input.ndim, 1))
    index = index.reshape(-1)
    if isinstance(source, Tensor):
        check_same_device(op, input, source)
        if source.dtype is not input.dtype:
            raise RuntimeError(f"{op}(): self ({input.dtype.name}) and source ({source.dtype.name}) must have the "
                               "same scalar type")
        expected = list(input.shape) if input.ndim else [1]
        expected[d] = index.shape[0]
        got = list(source.shape) if source.ndim else [1]
        if got != expected:
            raise RuntimeError(f"{op}(): source of shape {list(source.shape)} must have input's shape with "
                               f"dimension {d} of size {index.shape[0]} (the index's), {expected}")
    return index, d


def _row_values(input, d, index, source, reduce, include_self=True):
    x = input.reshape(1) if input.ndim == 0 else input
    s = source.reshape(tuple(x.shape[:d]) + (index.shape[0],) + tuple(x.shape[d + 1:]))
    with _bounds.reporting(f"index {{value}} is out of bounds for dimension {d} with size {{size}}"):
        out = _run(x, d, index, s, reduce, include_self, rows=True) if index.shape[0] else x.clone()
    return x, s, out.reshape(tuple(input.shape))


def index_add(input, dim, index, source, *, alpha=1):
    """input with alpha * source's slices added along dim at index (repeated indices add up), as torch.index_add."""
    index, d = _check_rows("index_add", input, dim, index, source)
    scaled = source * alpha if alpha != 1 else source
    _, _, out = _row_values(input, d, index, scaled, "sum")
    if not input.dtype.is_floating:
        return out

    def backward(g):
        g_src = None
        if source.requires_grad:
            gd = g.reshape(1) if g.ndim == 0 else g
            g_src = index_select(gd, d, index).reshape(tuple(source.shape))
            g_src = g_src * alpha if alpha != 1 else g_src
        return g, g_src
    return record(out, "IndexAdd", (input, source), backward)


def index_copy(input, dim, index, source):
    """input with source's slices written along dim at index (the last of repeated indices wins), as
    torch.index_copy."""
    index, d = _check_rows("index_copy", input, dim, index, source)
    _, _, out = _row_values(input, d, index, source, "assign")
    if not input.dtype.is_floating:
        return out

    def backward(g):
        gd = g.reshape(1) if g.ndim == 0 else g
        g_in = index_fill(g, dim, index, 0.0) if input.requires_grad else None
        g_src = index_select(gd, d, index).reshape(tuple(source.shape)) if source.requires_grad else None
        return g_in, g_src
    return record(out, "IndexCopy", (input, source), backward)


def index_fill(input, dim, index, value):
    """input with its slices along dim at index set to value (a number or a 0-d tensor, which gets their
    gradient), as torch.index_fill."""
    index, d = _check_rows("index_fill", input, dim, index)
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
    elif not isinstance(value, numbers.Number):
        raise TypeError(f"index_fill(): argument 'value' must be Number or Tensor, not {type(value).__name__}")
    x = input.reshape(1) if input.ndim == 0 else input
    n = x.shape[d]
    index = where(index < 0, index + n, index)  # (index_fill counts negative indices from the end)
    with no_grad():
        rows = zeros((1, n, 1), dtype=dtypes.int32, device=x.device)
        with _bounds.reporting(f"index {{value}} is out of bounds for dimension {d} with size {{size}}"):
            rows = _run(rows, 1, index, full((1, index.shape[0], 1), 1, dtype=dtypes.int32, device=x.device),
                        "assign", True, rows=True) if index.shape[0] else rows
    mask = (rows != 0).reshape((n,) + (1,) * (x.ndim - d - 1))
    fill = cast(value.to(x.device), x.dtype) if isinstance(value, Tensor) else value
    if not isinstance(fill, Tensor) and not x.dtype.is_floating and x.dtype is not dtypes.bool_:
        fill = int(fill)
    return where(mask, fill, x).reshape(tuple(input.shape))


def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """input with source's slices reduced into it along dim at index: reduce 'prod', 'mean', 'amax' or 'amin',
    over input's value too where include_self, as torch.index_reduce."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    index, d = _check_rows("index_reduce", input, dim, index, source)
    x, s, out = _row_values(input, d, index, source, reduce, include_self)
    if not input.dtype.is_floating:
        return out
    ops = _Scatters(d, index, rows=True)

    def backward(g):
        g_in, g_src = _reduce_backward(ops, g.reshape(tuple(x.shape)), x, s, out.reshape(tuple(x.shape)), reduce,
                                       include_self)
        return (g_in.reshape(tuple(input.shape)) if input.requires_grad else None,
                g_src.reshape(tuple(source.shape)) if source.requires_grad else None)
    return record(out, "IndexReduce", (input, source), backward)


# ===================================================================== flat positions: put, take, index_put
def _flat_positions(input, index, op):
    index = _check_index(index, op)
    check_same_device(op, input, index)
    n = input.numel()
    return where(index < 0, index + n, index).reshape(-1)


def take(input, index):
    """The elements of input, read as a flat vector, at index (negative indices count from the end); the result
    has index's shape, as torch.take."""
    _check_tensor(input, "take", "input")
    flat = _flat_positions(input, index, "take")
    with _bounds.reporting(f"take(): index {{value}} out of range for tensor of size {list(input.shape)}."):
        return index_select(input.reshape(-1), 0, flat).reshape(tuple(index.shape))


def put(input, index, source, accumulate=False):
    """input with source's elements written (added, with accumulate) at the flat positions index, as torch.put."""
    _check_tensor(input, "put", "input")
    _check_tensor(source, "put", "source")
    flat = _flat_positions(input, index, "put")
    if source.numel() != flat.shape[0]:
        raise RuntimeError(f"put_(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {source.numel()}, index.numel() = {flat.shape[0]}")
    with _bounds.reporting(f"put_(): index {{value}} out of range for tensor of size {list(input.shape)}."):
        op = index_add if accumulate else index_copy
        return op(input.reshape(-1), 0, flat, source.reshape(-1)).reshape(tuple(input.shape))


def index_put(input, indices, values, accumulate=False):
    """input with input[indices] = values (added, with accumulate: repeated positions add up), out of place, as
    torch.index_put; indices is a tuple of integer or bool tensors (None for a full slice)."""
    _check_tensor(input, "index_put", "input")
    _check_tensor(values, "index_put", "values")
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put(): argument 'indices' must be tuple of Tensors, not {type(indices).__name__}")
    items = tuple(slice(None) if i is None else i for i in indices)
    positions = arange(input.numel(), device=input.device).reshape(tuple(input.shape))[items]
    target = values.to(input.dtype) if values.dtype is not input.dtype else values
    target = target.expand(*positions.shape) if tuple(target.shape) != tuple(positions.shape) else target
    op = index_add if accumulate else index_copy
    return op(input.reshape(-1), 0, positions.reshape(-1), target.reshape(-1)).reshape(tuple(input.shape))


# ===================================================================== masked_scatter
def masked_scatter(input, mask, source):
    """input with its elements where mask is True replaced, in order, by source's first elements, as
    torch.masked_scatter (input and mask broadcast)."""
    _check_tensor(input, "masked_scatter", "input")
    _check_tensor(mask, "masked_scatter", "mask")
    _check_tensor(source, "masked_scatter", "source")
    if mask.dtype is not dtypes.bool_:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype {mask.dtype.name}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got {input.dtype.name} "
                           f"and {source.dtype.name}")
    check_same_device("masked_scatter", input, mask, source)
    from .core import broadcast_shapes
    shape = broadcast_shapes(tuple(input.shape), tuple(mask.shape), op="masked_scatter")
    m = mask.expand(*shape).reshape(-1)
    x = input.expand(*shape)
    if m.numel() == 0:
        return x.clone()
    order = (m.long().cumsum(0) - 1).clamp(min=0)  # the source element each True position takes
    with _bounds.reporting("masked_scatter: expected source to have at least as many elements as the ones selected "
                           "by the mask (element {value} of {size} needed)"):
        taken = index_select(source.reshape(-1), 0, order) if source.numel() else x.reshape(-1)
    return where(m, taken, x.reshape(-1)).reshape(shape)


# ===================================================================== writes into views
def _embed(input, src, view, op):
    """input with view(input) replaced by src (broadcast), out of place: the gradient of input is zero in that view,
    src's the gradient there."""
    _check_tensor(input, op, "input")
    _check_tensor(src, op, "src")
    check_same_device(op, input, src)
    out = input.detach().clone()
    target = view(out)
    if tuple(src.shape) != tuple(target.shape):
        raise RuntimeError(f"{op}(): expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(target.shape)}")
    with no_grad():
        target.copy_(src.detach())

    def backward(g):
        g_in = g_src = None
        if input.requires_grad:
            g_in = g.detach().clone()
            with no_grad():
                view(g_in).zero_()
        if src.requires_grad:
            g_src = view(g.clone()).clone()  # (a fresh storage: as_strided's offset counts from its start)
        return g_in, g_src
    return record(out, op.title().replace("_", ""), (input, src), backward) if input.dtype.is_floating else out


def select_scatter(input, src, dim, index):
    """input with input.select(dim, index) replaced by src, out of place, as torch.select_scatter."""
    return _embed(input, src, lambda t: t.select(dim, index), "select_scatter")


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """input with its slice start:end:step along dim replaced by src, out of place, as torch.slice_scatter."""
    def view(t):
        d = _norm_dim(dim, t.ndim)
        return t[(slice(None),) * d + (slice(start, end, step),)]
    return _embed(input, src, view, "slice_scatter")


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """input with its diagonal (offset, dim1, dim2) replaced by src, out of place, as torch.diagonal_scatter."""
    return _embed(input, src, lambda t: t.diagonal(offset, dim1, dim2), "diagonal_scatter")


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """input with input.as_strided(size, stride, storage_offset) replaced by src, out of place, as
    torch.as_strided_scatter (size and stride count in the elements of a contiguous copy of input)."""
    size, stride, start = tuple(size), tuple(stride), storage_offset or 0
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} vs {len(stride)}")
    reach = start + sum((n - 1) * s for n, s in zip(size, stride) if n > 0)
    if any(n == 0 for n in size):
        reach = start - 1
    if start < 0 or any(s < 0 for s in stride) or reach >= max(input.numel(), 1) and input.numel() or \
            (input.numel() == 0 and reach >= 0):
        raise RuntimeError(f"as_strided_scatter: size {list(size)}, stride {list(stride)} and storage offset {start} "
                           f"reach outside the {input.numel()} elements of the input")

    def view(t):  # t is a fresh contiguous tensor (a clone): a true view of its storage, as torch's
        v = t._view
        return Tensor._make(View(v.storage, size, stride, v.offset + start, v.dtype), t.device)
    return _embed(input, src, view, "as_strided_scatter")
