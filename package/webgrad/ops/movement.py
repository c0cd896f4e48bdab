"""Rearranging ops, as torch: ravel, roll, rot90, fliplr, flipud, tile, repeat_interleave, diag_embed, diagflat,
Tensor.unfold, as_strided, Tensor.sum_to_size, constant_pad_nd, and the *_copy variants of the view ops.

Each is composed of views, narrow/cat, index_select and where, so its gradient comes from those ops (a
gather's gradient adds the repeats: repeat_interleave, unfold's overlapping windows and as_strided's
overlapping strides are summed back as PyTorch's are). Index lists are computed on the host.
"""

from .. import dtypes
from .._autograd import renamed
from .._tensor import Tensor, _norm_dim, arange, tensor, zeros
from .core import unbroadcast
from .elementwise import where
from .shape import cat, diagonal, expand, flip, index_select, narrow, permute, squeeze, split, t, transpose, \
    unbind, unsqueeze, view
from .conv import pad


def _index(values, like):
    return tensor(values, dtype=dtypes.int64, device=like.device) if values else \
        zeros(0, dtype=dtypes.int64, device=like.device)


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def ravel(input):
    """The elements as a 1-D tensor (a view where the layout allows, as reshape)."""
    return input.reshape(-1)


def roll(input, shifts, dims=None):
    """Elements shifted along dims, those leaving one end entering at the other; without dims, over the
    flattened tensor (its shape kept)."""
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"roll(): shifts {list(shifts)} need as many dims, got none")
        return roll(input.reshape(-1), shifts, 0).reshape(tuple(input.shape))
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    out = input
    for shift, dim in zip(shifts, dims):
        d = _norm_dim(dim, input.ndim)
        n = input.shape[d]
        s = shift % n if n else 0
        if s:
            out = cat([narrow(out, d, n - s, s), narrow(out, d, 0, n - s)], d)
    return renamed(out if out is not input else input.clone(), "Roll", input)


def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees k times in the plane of dims, from the first dim towards the second."""
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = _norm_dim(dims[0], input.ndim), _norm_dim(dims[1], input.ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k %= 4
    if k == 1:
        return transpose(flip(input, (d1,)), d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return transpose(flip(input, (d0,)), d0, d1)
    return input.clone()


def fliplr(input):
    """Reverse dim 1 (left-right) of a tensor of at least 2 dims."""
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


def flipud(input):
    """Reverse dim 0 (up-down) of a tensor of at least 1 dim."""
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))


def tile(input, *dims):
    """repeat, with fewer reps than dims meaning 1 for the leading dims."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    dims = (1,) * (input.ndim - len(dims)) + tuple(dims)
    return input.repeat(*dims)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (or slice along dim) repeated `repeats` times in place: an int or a 1-D tensor of one
    count per element. repeat_interleave(counts) alone gives the indices 0.. each repeated its count."""
    if repeats is None:  # torch.repeat_interleave(repeats): the index of each repeat
        counts = input
        if counts.ndim > 1 or counts.dtype.is_floating:
            raise RuntimeError("repeat_interleave(): repeats must be a 0-d or 1-d integer tensor")
        values = [i for i, c in enumerate(counts.reshape(-1).tolist()) for _ in range(c)]
        return _index(values, counts).to(counts.dtype)
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else _norm_dim(dim, input.ndim)
    n = x.shape[d] if x.ndim else 1
    if isinstance(repeats, Tensor):
        if repeats.ndim > 1 or repeats.dtype.is_floating:
            raise RuntimeError("repeat_interleave(): repeats must be a 0-d or 1-d integer tensor")
        counts = repeats.reshape(-1).tolist()
        if len(counts) == 1:
            counts = counts * n
    else:
        counts = [int(repeats)] * n
    if len(counts) != n:
        raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                           f"{len(counts)} and input.size({d}) = {n}")
    if any(c < 0 for c in counts):
        raise RuntimeError("repeat_interleave(): repeats can not be negative")
    if output_size is not None and sum(counts) != output_size:
        raise RuntimeError(f"repeat_interleave(): output_size {output_size} does not match the {sum(counts)} "
                           "repeats")
    if x.ndim == 0:
        x = x.reshape(1)
    return index_select(x, d, _index([i for i, c in enumerate(counts) for _ in range(c)], x))


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Tensors whose (dim1, dim2) diagonal `offset` holds input's last dim, zeros elsewhere."""
    nd = input.ndim + 1
    d1, d2 = _norm_dim(dim1, nd), _norm_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    m = input.shape[-1] if input.ndim else 1
    x = input.reshape(1) if input.ndim == 0 else input
    n = m + abs(offset)
    rows = arange(n, device=input.device).unsqueeze(1)
    cols = arange(n, device=input.device).unsqueeze(0)
    on = (cols - rows) == offset
    # entry (i, j) of the diagonal is x[..., i] above it (offset >= 0) and x[..., j] below it
    source = (rows if offset >= 0 else cols).expand(n, n).clamp(max=max(m - 1, 0))
    if m:
        values = index_select(x, -1, source.reshape(-1)).reshape(tuple(x.shape[:-1]) + (n, n))
        out = where(on, values, zeros((), dtype=input.dtype, device=input.device))
    else:  # an empty diagonal: zeros, still connected to the (empty) input
        out = (x.sum(-1, keepdim=True).unsqueeze(-1) * 0).expand(*x.shape[:-1], n, n)
    # the new dims are the last two; move them to dim1 and dim2 (dim1 rows, dim2 columns)
    return out.movedim((nd - 2, nd - 1), (d1, d2))


def diagflat(input, offset=0):
    """The flattened input on diagonal `offset` of a square matrix."""
    return diag_embed(input.reshape(-1), offset)


def unfold(input, dimension, size, step):
    """Every window of `size` elements along `dimension`, `step` apart, as a new last dim (Tensor.unfold)."""
    if input.ndim == 0:
        _norm_dim(dimension, 0)
        if size != 1 and size != 0:
            raise RuntimeError(f"maximum size for tensor at dimension 0 is 1 but size is {size}")
        return input.reshape(size)
    d = _norm_dim(dimension, input.ndim)
    n = input.shape[d]
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    windows = (n - size) // step + 1
    picked = index_select(input, d, _index([w * step + k for w in range(windows) for k in range(size)], input))
    shape = tuple(input.shape[:d]) + (windows, size) + tuple(input.shape[d + 1:])
    return picked.reshape(shape).movedim(d + 1, -1)


def as_strided(input, size, stride, storage_offset=None):
    """The elements of input's storage at storage_offset + sum(i_k * stride_k), in the shape `size`, read from
    the input (a copy; PyTorch's is a view). Every element read must belong to the input: its gradient sums
    back onto them."""
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} != {len(stride)}")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: {list(stride)}")
    v = input._view
    offset = v.offset if storage_offset is None else int(storage_offset)
    # storage position -> the input's flat (row-major) index, for the positions the input covers
    where_is = {}
    for flat, position in enumerate(_positions(v.shape, v.strides, v.offset)):
        where_is.setdefault(position, flat)
    picks = []
    for position in _positions(size, stride, offset):
        if position not in where_is:
            raise RuntimeError(f"as_strided: size {list(size)}, stride {list(stride)} and storage offset {offset} "
                               f"reach storage element {position}, outside the input of shape {list(input.shape)}")
        picks.append(where_is[position])
    return index_select(input.reshape(-1), 0, _index(picks, input)).reshape(size)


def _positions(shape, strides, offset):
    out = [offset]
    for n, s in zip(shape, strides):
        out = [p + i * s for p in out for i in range(n)]
    return out if _numel(shape) else []


def sum_to_size(input, *size):
    """input summed to `size`, a shape input broadcasts from (Tensor.sum_to_size)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size = tuple(int(s) for s in size)
    lead = input.ndim - len(size)
    if lead < 0 or any(s != 1 and s != n for s, n in zip(size, input.shape[lead:])):
        raise RuntimeError(f"size {{{', '.join(str(s) for s in size)}}} is not expandable to size "
                           f"{{{', '.join(str(s) for s in input.shape)}}}.")
    return unbroadcast(input, size)


def constant_pad_nd(input, pad_, value=0):
    """F.pad in constant mode (negative pads crop)."""
    return pad(input, pad_, mode="constant", value=value)


# ===================================================================== the *_copy variants: the view, copied
def _copy_of(view_op, name):
    def fn(input, *args, **kwargs):
        out = view_op(input, *args, **kwargs)
        if isinstance(out, (tuple, list)):
            return type(out)(o.clone() for o in out)
        return out.clone()
    fn.__name__ = name
    fn.__doc__ = f"{view_op.__name__}, as a new tensor (torch.{name})."
    return fn


def _alias(input):
    return input


_alias.__name__ = "alias"

COPIES = {
    "alias_copy": _copy_of(_alias, "alias_copy"),
    "as_strided_copy": _copy_of(as_strided, "as_strided_copy"),
    "diagonal_copy": _copy_of(diagonal, "diagonal_copy"),
    "expand_copy": _copy_of(expand, "expand_copy"),
    "narrow_copy": _copy_of(narrow, "narrow_copy"),
    "permute_copy": _copy_of(permute, "permute_copy"),
    "squeeze_copy": _copy_of(squeeze, "squeeze_copy"),
    "t_copy": _copy_of(t, "t_copy"),
    "transpose_copy": _copy_of(transpose, "transpose_copy"),
    "unbind_copy": _copy_of(unbind, "unbind_copy"),
    "unfold_copy": _copy_of(unfold, "unfold_copy"),
    "unsqueeze_copy": _copy_of(unsqueeze, "unsqueeze_copy"),
    "view_copy": _copy_of(view, "view_copy"),
    "split_with_sizes_copy": _copy_of(lambda input, split_sizes, dim=0: split(input, list(split_sizes), dim),
                                      "split_with_sizes_copy"),
}
