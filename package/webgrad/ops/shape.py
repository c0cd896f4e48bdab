"""Shape and indexing ops. Views (reshape of contiguous data, permute, expand, slicing, squeeze) only
rewrite shape/strides/offset and run no kernel; their backward undoes the movement.
"""

from .. import _bounds, dtypes
from .._autograd import SliceGrad, is_grad_enabled, no_grad, note_write, record, record_adjoint, renamed
from .._view import View
from .._tensor import Tensor, _norm_dim, arange, empty, ones, tensor, zeros
from .core import broadcast_shapes, cast, check_same_device, expanded_view, new, unbroadcast
from .elementwise import contiguous, where
from .inplace import apply_in_place, check_inplace, records
from .._backends import kernels


def _view_of(x, shape, strides, offset, name, backward):
    out = Tensor._make(View(x._view.storage, shape, strides, offset, x.dtype), x.device)
    return record(out, name, (x,), lambda g: (backward(g),))


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _infer_shape(x, shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred (-1)")
    if -1 in shape:
        known = _numel(s for s in shape if s != -1)
        if known == 0 or x.numel() % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {x.numel()}")
        shape = tuple(x.numel() // known if s == -1 else s for s in shape)
    if _numel(shape) != x.numel():
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {x.numel()} (input shape {list(x.shape)})")
    return shape


def _view_strides(v, shape):
    """Strides that let `v`'s elements be seen with `shape` without a copy, or None (as torch.view)."""
    if v.is_contiguous() or 0 in shape:  # (an empty view's strides are free: torch gives contiguous ones)
        return View.contiguous_strides(shape)
    # group old dims into chunks that are contiguous among themselves, and match new dims to chunks
    old = [(n, s) for n, s in zip(v.shape, v.strides) if n != 1]
    new_strides = []
    oi = 0
    for n in shape:
        if n == 1:
            new_strides.append(0)
            continue
        if oi >= len(old):
            return None
        size, stride = old[oi]
        if n == size:
            new_strides.append(stride)
            oi += 1
            continue
        if n < size and size % n == 0:  # split an old dim
            old[oi] = (size // n, stride)
            new_strides.append(stride * (size // n))
            continue
        # merge consecutive old dims that are contiguous with each other
        acc, last_stride = size, stride
        j = oi + 1
        while acc < n and j < len(old) and old[j - 1][1] == old[j][0] * old[j][1]:
            acc *= old[j][0]
            last_stride = old[j][1]
            j += 1
        if acc != n:
            return None
        new_strides.append(last_stride)
        oi = j
    return tuple(new_strides)


def view(input, *shape):
    shape = _infer_shape(input, shape)
    strides = _view_strides(input._view, shape)
    if strides is None:
        raise RuntimeError(f"view size {list(shape)} is not compatible with input tensor's size and stride "
                           f"{list(input.shape)}/{list(input.stride())}; use .reshape(...) instead")
    old = input.shape
    return _view_of(input, shape, strides, input._view.offset, "View", lambda g: g.reshape(old))


def reshape(input, *shape):
    shape = _infer_shape(input, shape)
    strides = _view_strides(input._view, shape)
    # PyTorch's: always a new tensor (a view of the same shape too), whose node is named View for a contiguous
    # input, ReshapeAlias for a view of a strided one, and UnsafeView for a copy (where the strides allow no view)
    name = "View" if input._view.is_contiguous() else "ReshapeAlias"
    if strides is None:
        input = contiguous(input)
        strides = View.contiguous_strides(shape)
        name = "UnsafeView"
    old = input.shape
    return _view_of(input, shape, strides, input._view.offset, name, lambda g: g.reshape(old))


def flatten(input, start_dim=0, end_dim=-1):
    if input.ndim == 0:
        return input.reshape(1)
    s, e = _norm_dim(start_dim, input.ndim), _norm_dim(end_dim, input.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return input  # nothing to merge: PyTorch returns the input itself (a 1-d tensor's flatten too)
    shape = tuple(input.shape)
    return reshape(input, shape[:s] + (_numel(shape[s:e + 1]),) + shape[e + 1:])


def unflatten(input, dim, sizes):
    d = _norm_dim(dim, input.ndim)
    shape = tuple(input.shape)
    return reshape(input, shape[:d] + tuple(sizes) + shape[d + 1:])


def permute(input, *dims):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    dims = tuple(_norm_dim(d, input.ndim) for d in dims)
    if sorted(dims) != list(range(input.ndim)):
        raise RuntimeError(f"permute(): dims {dims} is not a permutation of the {input.ndim} dims of shape {list(input.shape)}")
    v = input._view
    inverse = [dims.index(i) for i in range(len(dims))]
    return _view_of(input, tuple(v.shape[d] for d in dims), tuple(v.strides[d] for d in dims), v.offset,
                    "Permute", lambda g: g.permute(*inverse))


def transpose(input, dim0, dim1):
    if input.ndim < 2 and dim0 in (0, -1) and dim1 in (0, -1):
        return input
    perm = list(range(input.ndim))
    a, b = _norm_dim(dim0, input.ndim), _norm_dim(dim1, input.ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return renamed(permute(input, *perm), "Transpose", input)


swapaxes = swapdims = transpose


def movedim(input, source, destination):
    """Move dims `source` (an int or a sequence) to positions `destination`, the others keeping their order."""
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) should contain the "
                           f"same number of dims as destination ({dst} dims)")
    src = [_norm_dim(d, input.ndim) for d in src]
    dst = [_norm_dim(d, input.ndim) for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in `source` ({source}) or `destination` ({destination})")
    order = [None] * input.ndim
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(input.ndim) if i not in src)
    return permute(input, *[o if o is not None else next(rest) for o in order])


moveaxis = movedim


def t(input):
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but got {input.ndim}")
    return renamed(transpose(input, 0, 1), "T", input) if input.ndim == 2 else input


def expand(input, *sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    v = input._view
    if len(sizes) < len(v.shape):
        raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to the "
                           f"number of dimensions in the tensor ({len(v.shape)})")
    pad = len(sizes) - len(v.shape)
    shape, strides = [], []
    for i, want in enumerate(sizes):
        if i < pad:
            if want < 0:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing dimension")
            shape.append(want)
            strides.append(0)
            continue
        have, stride = v.shape[i - pad], v.strides[i - pad]
        if want == -1 or want == have:
            shape.append(have)
            strides.append(stride)
        elif have == 1:
            shape.append(want)
            strides.append(0)
        else:
            raise RuntimeError(f"expand: the expanded size of the tensor ({want}) must match the existing size "
                               f"({have}) at non-singleton dimension {i}. Target sizes: {list(sizes)}. "
                               f"Tensor sizes: {list(v.shape)}")
    shape = tuple(shape)
    if shape == v.shape:
        return input
    old = input.shape
    return _view_of(input, shape, tuple(strides), v.offset, "Expand", lambda g: unbroadcast(g, old))


def expand_as(input, other):
    return expand(input, *other.shape)


def broadcast_to(input, shape):
    return expand(input, *shape)


def squeeze(input, dim=None):
    v = input._view
    if dim is None:
        dims = [i for i, n in enumerate(v.shape) if n == 1]
    else:
        dims = [_norm_dim(d, input.ndim) for d in ((dim,) if isinstance(dim, int) else dim)]
        dims = [d for d in dims if input.ndim and v.shape[d] == 1]  # (dim 0 of a 0-d tensor: nothing to squeeze)
    if not dims:
        return input
    keep = [i for i in range(len(v.shape)) if i not in dims]
    old = input.shape
    name = "Squeeze" if dim is None else "Squeeze.1" if isinstance(dim, int) else "Squeeze.2"  # (torch's overloads)
    return _view_of(input, tuple(v.shape[i] for i in keep), tuple(v.strides[i] for i in keep), v.offset,
                    name, lambda g: g.reshape(old))


def unsqueeze(input, dim):
    d = _norm_dim(dim, input.ndim + 1)
    v = input._view
    stride = v.strides[d] * v.shape[d] if d < len(v.shape) else 1
    old = input.shape
    return _view_of(input, v.shape[:d] + (1,) + v.shape[d:], v.strides[:d] + (stride,) + v.strides[d:], v.offset,
                    "Unsqueeze", lambda g: g.reshape(old))


def narrow(input, dim, start, length):
    d = _norm_dim(dim, input.ndim)
    n = input.shape[d]
    if start < 0:
        start += n
    if not (0 <= start and start + length <= n and length >= 0):
        raise IndexError(f"narrow(): start ({start}) + length ({length}) exceeds dimension size ({n}) of dim {dim}")
    return input[(slice(None),) * d + (slice(start, start + length),)]


# ===================================================================== indexing
def _normalize_index(x, index):
    if not isinstance(index, tuple):
        index = (index,)
    n_specified = sum(1 for i in index if i is not None and i is not Ellipsis and not (isinstance(i, bool)))
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_specified > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    out = []
    for i in index:
        if i is Ellipsis:
            out.extend([slice(None)] * (x.ndim - n_specified))
        else:
            out.append(i)
    if not any(i is Ellipsis for i in index):  # identity: `in` would compare arrays/tensors with ==
        out.extend([slice(None)] * (x.ndim - n_specified))
    return out


def _basic_view(x, index):
    """Shape, strides and offset for basic indexing (ints, slices, None, Ellipsis), or None if `index`
    holds a tensor or list (advanced indexing)."""
    items = _normalize_index(x, index)
    v = x._view
    shape, strides, offset, d = [], [], v.offset, 0
    for i in items:
        if i is None:
            shape.append(1)
            strides.append(0)
            continue
        if isinstance(i, Tensor) and i.ndim == 0 and not i.dtype.is_floating and i.dtype is not dtypes.bool_:
            i = int(i.item())
        if isinstance(i, (bool, Tensor, list, tuple, range)) or type(i).__name__ == "ndarray":
            return None
        if not isinstance(i, (int, slice)) and hasattr(i, "__index__"):
            i = i.__index__()  # NumPy integers (np.int64 from np.random.choice ...) index like ints
        n, s = v.shape[d], v.strides[d]
        if isinstance(i, int):
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for dimension {d} with size {n}")
            offset += (i % n) * s
        elif isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step <= 0:
                raise ValueError("step must be greater than zero")
            length = max(0, -(-(stop - start) // step))
            shape.append(length)
            strides.append(s * step)
            offset += start * s if length else 0
        else:
            raise IndexError(f"unsupported index of type {type(i).__name__}: use ints, slices, None, ..., "
                             "or an integer tensor/list")
        d += 1
    return tuple(shape), tuple(strides), offset


def _scalar_indices(index):
    """`index` with its 0-d integer tensors read as ints (read once, where the forward reads them)."""
    def plain(i):
        if isinstance(i, Tensor) and i.ndim == 0 and not i.dtype.is_floating and i.dtype is not dtypes.bool_:
            return int(i.item())
        return i
    return tuple(plain(i) for i in index) if isinstance(index, tuple) else plain(index)


def getitem(input, index):
    index = _scalar_indices(index)
    basic = _basic_view(input, index)
    if basic is None:
        return _advanced_getitem(input, index)
    shape, strides, offset = basic
    narrowed = _narrowed(input._view, shape, strides, offset)

    def backward(g):
        if narrowed is not None and not (g.requires_grad and is_grad_enabled()):
            return SliceGrad(tuple(input.shape), g.dtype, input.device, narrowed[0], [(narrowed[1], g)])
        # The same selection on a fresh contiguous tensor: its strides, not the input view's (a transposed or
        # sliced input has strides of its own storage, which the zeros tensor does not share).
        out = _zeros_like(input, g.dtype)
        kernels.copy(out.device.backend, View(out._view.storage, *_basic_view(out, index), g.dtype), g._view)
        if g.requires_grad and is_grad_enabled():  # create_graph: this scatter's derivative is the selection
            record(out, "SelectBackward", (g,), lambda h: (getitem(h, index),))
        return out
    out = Tensor._make(View(input._view.storage, shape, strides, offset, input.dtype), input.device)
    return record(out, _basic_index_name(input.shape, index), (input,), lambda g: (backward(g),))


def _basic_index_name(shape, index):
    """The name PyTorch gives the node of a basic indexing: that of the last view it applies, left to right (an int
    selects, a slice short of the whole dim slices, None unsqueezes; a whole slice or ... applies none), Alias
    where none applies (x[:])."""
    items = index if isinstance(index, tuple) else (index,)
    rest = len(shape) - sum(1 for i in items if i is not None and i is not Ellipsis)
    name, d = "Alias", 0
    for i in items:
        if i is Ellipsis:
            d += rest
        elif i is None:
            name = "Unsqueeze"
        elif isinstance(i, slice):
            if i.indices(shape[d]) != (0, shape[d], 1):
                name = "Slice"
            d += 1
        else:
            name, d = "Select", d + 1
    return name


def _zeros_like(x, dtype):
    return zeros(tuple(x.shape), dtype=dtype, device=x.device)


def _narrowed(view, shape, strides, offset):
    """(dim, start) where the view (shape, strides, offset) of `view` is a narrow of it along one dim (a unit-step
    slice, every other dim whole), else None."""
    if len(shape) != len(view.shape) or tuple(strides) != tuple(view.strides):
        return None
    dims = [d for d in range(len(shape)) if shape[d] != view.shape[d]]
    if len(dims) > 1:
        return None
    d = dims[0] if dims else 0
    if not shape or view.strides[d] <= 0 or (offset - view.offset) % view.strides[d]:
        return None
    return d, (offset - view.offset) // view.strides[d]


def _slice_grad_dense(shape, dtype, device, dim, pieces):
    """The tensor of a SliceGrad: its pieces written into one buffer (into uninitialised memory where they tile
    the dim exactly, a split's; into zeros where they leave gaps); where pieces overlap, each is written into
    zeros of its own and the results added (as getitem's backward did for each)."""
    spans = sorted((start, start + g.shape[dim]) for start, g in pieces)
    disjoint = all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    tiled = disjoint and spans[0][0] == 0 and spans[-1][1] == shape[dim] and \
        all(a_end == b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    groups = [pieces] if disjoint else [[p] for p in pieces]
    total = None
    for group in groups:
        out = empty(shape, dtype=dtype, device=device) if tiled else zeros(shape, dtype=dtype, device=device)
        step = View.contiguous_strides(shape)
        for start, g in group:
            region = View(out._view.storage, tuple(g.shape), step, out._view.offset + start * step[dim], dtype)
            kernels.copy(device.backend, region, g._view)
        total = out if total is None else total + out
    return total


SliceGrad.make = staticmethod(_slice_grad_dense)


class _HostIndex(Tensor):
    """An integer index tensor whose values the host also holds (it came from a list, a range, a NumPy
    array or a CPU tensor): they are checked on the host, at once, on every device."""

    __slots__ = ("host_values",)


def _index_tensor(i, device):
    """An advanced index item as a tensor on `device`: lists, ranges, tuples and NumPy arrays become
    integer (or bool) tensors; tensors move to the indexed tensor's device."""
    if isinstance(i, range):
        i = list(i)
    if isinstance(i, Tensor) and i.dtype.is_floating or not isinstance(i, Tensor) and _float_data(i):
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    on_host = not isinstance(i, Tensor) or (i.device.type == "cpu" and i.device != device)
    try:
        t = tensor(i, device=device) if not isinstance(i, Tensor) else (i if i.device == device else i.to(device))
    except RuntimeError:  # int64 values the device cannot hold (beyond int32 on WebGPU): beyond any dim's size
        values = i.reshape(-1).tolist() if isinstance(i, Tensor) else list(_flatten([i.tolist() if hasattr(i, "tolist")
                                                                                    else i]))
        bad = next(v for v in values if not -(2**31) <= v < 2**31)
        raise IndexError(f"index {bad} is out of bounds: no dimension is that large") from None
    if t.dtype is dtypes.bool_ or not on_host:
        return t
    t = cast(t, dtypes.int32)
    host = _HostIndex._make(t._view, t.device)
    host.host_values = i.reshape(-1).tolist() if isinstance(i, Tensor) else \
        list(_flatten([i.tolist() if hasattr(i, "tolist") else i]))
    return host


def _float_data(i):
    """Whether a list, tuple or NumPy array index holds floats (read on the host: no tensor is made, so no
    device is touched; in Pyodide the default CPU device has no NumPy)."""
    kind = getattr(getattr(i, "dtype", None), "kind", None)
    if kind is not None:
        return kind == "f"
    return any(isinstance(v, float) for v in _flatten([i]))


def _mask_indices(mask, shape, dim):
    """The integer index tensors a boolean mask over dims dim.. of `shape` stands for (x[mask] keeps the
    positions where the mask is True). Their number depends on the mask's values, so the mask is read on
    the host: on WebGPU this waits for the GPU (a sync, as PyTorch's x[mask] syncs on CUDA)."""
    k = mask.ndim
    if tuple(mask.shape) != tuple(shape[dim:dim + k]):
        raise IndexError(f"The shape of the mask {list(mask.shape)} at index {dim} does not match the shape of the "
                         f"indexed tensor {list(shape)}")
    flat = mask.reshape(-1).tolist() if k else [bool(mask.item())]
    positions = [j for j, v in enumerate(flat) if v]
    columns = []
    for n in reversed(mask.shape):  # row-major unravel, last dim first
        columns.append([p % n for p in positions])
        positions = [p // n for p in positions]
    return [tensor(c, dtype=dtypes.int32, device=mask.device) for c in reversed(columns)]


def _advanced_plan(input, index):
    """NumPy/PyTorch advanced indexing reduced to one index_select.

    Returns (y, adv_dims, flat, bshape, front): y is a basic view of input (ints and slices applied, every
    advanced dim kept), adv_dims the dims of y that the index tensors select in, flat the int32 linear
    index into those dims (broadcast shape bshape), and front whether the result's index dims go first
    (advanced indices separated by a slice) rather than where the first of them stood."""
    items = list(index) if isinstance(index, tuple) else [index]
    # index tensors first: a boolean mask covers as many dims as it has, which the padding must know
    for j, i in enumerate(items):
        if isinstance(i, bool):
            raise IndexError("indexing with a Python bool is not supported; use a boolean tensor")
        if isinstance(i, (Tensor, list, tuple, range)) or type(i).__name__ == "ndarray":
            items[j] = _index_tensor(i, input.device)
    covers = [0 if i is None or i is Ellipsis else (i.ndim if isinstance(i, Tensor) and i.dtype is dtypes.bool_
                                                    else 1) for i in items]
    ellipses = [j for j, i in enumerate(items) if i is Ellipsis]  # by identity: tensors compare elementwise
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if sum(covers) > input.ndim:
        raise IndexError(f"too many indices for tensor of dimension {input.ndim}")
    fill = [slice(None)] * (input.ndim - sum(covers))
    if ellipses:
        at = ellipses[0]
        items = items[:at] + fill + items[at + 1:]
    else:
        items = items + fill
    converted, d = [], 0
    for i in items:
        if isinstance(i, Tensor) and i.dtype is dtypes.bool_:
            if i.ndim == 0:
                raise IndexError("indexing with a 0-d boolean tensor is not supported")
            converted.extend(_mask_indices(i, input.shape, d))
            d += i.ndim
            continue
        converted.append(i)
        d += i is not None
    # a basic view with each advanced item replaced by a full slice. Ints are applied here, as basic
    # indices: PyTorch (unlike NumPy) removes their dims before placing the index dims (x[0, :, idx])
    basic, adv_dims, tensors, y_dim = [], [], [], 0
    for i in converted:
        if isinstance(i, Tensor):
            adv_dims.append(y_dim)
            tensors.append(i)
            basic.append(slice(None))
        else:
            basic.append(i)
        if not isinstance(i, int):
            y_dim += 1
    y = getitem(input, tuple(basic)) if any(b is None or b != slice(None) for b in basic) else input
    bshape = broadcast_shapes(*(tuple(t.shape) for t in tensors), op="index")
    flat = None
    for t, dim in zip(tensors, adv_dims):
        n = y.shape[dim]
        message = f"index {{value}} is out of bounds for dimension {dim} with size {n}"
        checked = isinstance(t, _HostIndex)
        if checked:  # values the host holds: checked now, on every device
            bad = next((v for v in t.host_values if not -n <= v < n), None)
            if bad is not None:
                raise IndexError(message.format(value=bad))
        t = cast(t, dtypes.int32)
        t = where((t < 0) & (t >= -n), t + n, t)  # negative indices count from the end
        if not checked:
            # Flattened with the other indices, an out-of-range one would land on another element: pass
            # it through index_select of 0..n-1, which reports it (the CPU at once, WebGPU at the next
            # read-back) and returns the same values.
            with _bounds.reporting(message.replace(f"size {n}", "size {size}")):
                t = index_select(arange(n, dtype=dtypes.int32, device=t.device), 0, t.reshape(-1)).reshape(t.shape)
        flat = t if flat is None else flat * n + t
    flat = flat.expand(*bshape) if tuple(flat.shape) != bshape else flat
    front = adv_dims != list(range(adv_dims[0], adv_dims[0] + len(adv_dims)))
    return y, adv_dims, flat, bshape, front


def _advanced_getitem(input, index):
    """Advanced indexing (x[idx], x[range(n), target], x[i, j], x[:, idx], x[mask]) as PyTorch: the indexed
    dims are moved to the front, merged, and read with one index_select; its gradient scatters back."""
    y, adv_dims, flat, bshape, front = _advanced_plan(input, index)
    rest = [d for d in range(y.ndim) if d not in adv_dims]
    moved = y.permute(*adv_dims, *rest) if adv_dims != list(range(len(adv_dims))) else y
    rest_shape = tuple(y.shape[d] for d in rest)
    merged = moved.reshape((_numel(y.shape[d] for d in adv_dims),) + rest_shape)
    out = index_select(merged, 0, flat.reshape(-1)).reshape(bshape + rest_shape)
    if front or adv_dims[0] == 0:
        return renamed(out, "Index", input)  # (PyTorch's node: IndexBackward0)
    # the index dims stand where the first advanced index stood
    at, k = adv_dims[0], len(bshape)
    order = list(range(k, k + at)) + list(range(k)) + list(range(k + at, out.ndim))
    return renamed(out.permute(*order), "Index", input)


def _advanced_setitem(input, index, value):
    """x[idx] = value for advanced indices. A boolean mask alone (x[mask] = v, the common case) is a
    where(): no sync. Integer indices read their values on the host (a sync on WebGPU) so that repeated
    positions keep the last value written, as PyTorch's CPU does; the positions are then
    written with where(written, scattered values, x)."""
    items = index if isinstance(index, tuple) else (index,)
    value = _index_put_value(input, value)
    if len(items) == 1 and isinstance(items[0], Tensor) and items[0].dtype is dtypes.bool_ and \
            tuple(items[0].shape) == tuple(input.shape):
        v = value if isinstance(value, Tensor) else tensor(value, dtype=input.dtype, device=input.device)
        if v.ndim and v.numel() != 1:
            raise IndexError("x[mask] = value: value must be a scalar or a 1-element tensor for a full-shape mask "
                             "(a tensor of the selected elements' count is not supported)")
        mask = items[0] if items[0].device == input.device else items[0].to(input.device)  # a host mask, as torch
        return input.copy_(where(mask, cast(v.reshape(()), input.dtype), input))
    y, adv_dims, flat, bshape, front = _advanced_plan(input, index)
    rest = [d for d in range(y.ndim) if d not in adv_dims]
    rest_shape = tuple(y.shape[d] for d in rest)
    target_shape = bshape + rest_shape
    if not (front or adv_dims[0] == 0):  # the value comes in the result's dim order: put index dims first
        at, k = adv_dims[0], len(bshape)
        if isinstance(value, Tensor) and value.ndim:
            value = value.expand(*broadcast_shapes(tuple(value.shape), _result_shape(bshape, rest_shape, at)))
            order = list(range(at, at + k)) + list(range(at)) + list(range(at + k, value.ndim))
            value = value.permute(*order)
    v = value if isinstance(value, Tensor) else tensor(value, dtype=input.dtype, device=input.device)
    v = cast(v, input.dtype).expand(*target_shape).reshape((-1,) + rest_shape)
    # last write wins for repeated positions: keep each position's last occurrence
    positions = flat.reshape(-1).tolist()
    last = {p: j for j, p in enumerate(positions)}
    keep = sorted(last.values())
    size = _numel(y.shape[d] for d in adv_dims)
    if any(not 0 <= p < size for p in last):
        bad = next(p for p in last if not 0 <= p < size)
        raise IndexError(f"index {bad} is out of bounds for the indexed dims of size {size}")
    uniq = tensor([positions[j] for j in keep], dtype=dtypes.int32, device=input.device)
    v = index_select(v, 0, tensor(keep, dtype=dtypes.int32, device=input.device)) if len(keep) != len(positions) else v
    moved = y.permute(*adv_dims, *rest) if adv_dims != list(range(len(adv_dims))) else y
    merged = moved.reshape((size,) + rest_shape)  # a view when y's advanced dims are contiguous, else a copy
    writes_through = merged._view.storage is input._view.storage
    target = merged if writes_through else merged.clone()
    # unique positions: scattering onto zeros adds each value to 0 once, which is exact
    written = index_select_backward_add(ones((len(keep), 1), device=input.device), uniq, size) > 0
    values = index_select_backward_add(v, uniq, size)
    target.copy_(where(written.reshape((size,) + (1,) * len(rest_shape)), cast(values, input.dtype), target))
    if not writes_through:
        inverse = [0] * y.ndim
        for j, d in enumerate(adv_dims + rest):
            inverse[d] = j
        y.copy_(target.reshape(tuple(y.shape[d] for d in adv_dims) + rest_shape).permute(*inverse))


def _index_put_value(input, value):
    """The value of x[advanced index] = value on x's device. As PyTorch's index_put_, only a 0-dim value may come
    from another device (a scalar moved across); a value with dimensions must be on x's device."""
    if not isinstance(value, Tensor) or value.device == input.device:
        return value
    if value.ndim == 0:
        return value.to(input.device)
    raise RuntimeError(f"index_put_: expected all tensors to be on the same device, but found the value on "
                       f"{value.device} and the indexed tensor on {input.device}")


def _result_shape(bshape, rest_shape, at):
    return tuple(rest_shape[:at]) + tuple(bshape) + tuple(rest_shape[at:])


def index_select_backward_add(src, index, size):
    """zeros([size, ...]) with src's rows added at `index` (the scatter of index_select's gradient)."""
    x = new((size,) + tuple(src.shape[1:]), src.dtype, src.device)
    inner = _numel(src.shape[1:])
    kernels.index_select_backward(src.device.backend, x._view.reshaped((1, size, inner)),
                                             src.contiguous()._view.reshaped((1, src.shape[0], inner)), index._view)
    return x


def _flatten(items):
    for i in items:
        if isinstance(i, (list, tuple)):
            yield from _flatten(i)
        else:
            yield i


def _wrap_list(items, n, message):
    """A nested list of ints with negatives counted from the end; IndexError for any outside [-n, n)."""
    out = []
    for i in items:
        if isinstance(i, (list, tuple)):
            out.append(_wrap_list(i, n, message))
        elif -n <= i < n:
            out.append(i + n if i < 0 else i)
        else:
            raise IndexError(_bounds.template(message).format(value=i, size=n))
    return out


def setitem(input, index, value):
    check_inplace(input, "__setitem__")
    index = _scalar_indices(index)
    if records(input, (value,)):  # x[i] = v in the graph: x becomes index_put(x, i, v) (PyTorch's CopySlices)
        return apply_in_place(input, lambda src: _index_put(src, index, value), "__setitem__")
    _setitem(input, index, value)
    note_write(input._view.storage)


def _index_put(src, index, value):
    """src with src[index] = value, out of place and recorded: the gradient of src is zero where written, and
    the value's is the gradient there, summed over what the value was broadcast to."""
    y = src.detach().clone()
    with no_grad():
        _setitem(y, index, value.detach() if isinstance(value, Tensor) else value)
    value_shape = tuple(value.shape) if isinstance(value, Tensor) else None
    value_device = value.device if isinstance(value, Tensor) else None

    def backward(g):
        g_src = g.clone()
        with no_grad():
            _setitem(g_src, index, 0.0)
        g_value = None
        if value_shape is not None:
            g_value = getitem(g, index)
            if g_value.ndim < len(value_shape):
                g_value = g_value.reshape((1,) * (len(value_shape) - g_value.ndim) + tuple(g_value.shape))
            g_value = unbroadcast(g_value, value_shape)
            if g_value.device != value_device:  # a value copied in from another device gets its gradient there
                g_value = g_value.to(value_device)
        return g_src, g_value
    return record(y, "IndexPut", (src, value if isinstance(value, Tensor) else None), backward)


def _setitem(input, index, value):
    """input[index] = value on input's storage (no autograd)."""
    basic = _basic_view(input, index)
    if basic is None:
        return _advanced_setitem(input, index, value)
    shape, strides, offset = basic
    target = View(input._view.storage, shape, strides, offset, input.dtype)
    be = input.device.backend
    if isinstance(value, Tensor):
        if value.device != input.device:  # x[i] = v with basic indices is a copy_: v may be on any device, as torch
            value = value.to(input.device)
        broadcast_shapes(shape, value.shape, op="setitem")
        if len(value.shape) > len(shape):
            value = value.reshape(value.shape[len(value.shape) - len(shape):]) if value.numel() else value
        # snapshot first: the value may alias the target (x[1:] = x[:-1])
        src = cast(value, input.dtype).clone().detach() if value.dtype is input.dtype else cast(value, input.dtype)
        kernels.copy(be, target, expanded_view(src, shape))
    else:
        value = dtypes.check_fill_value(value, input.dtype)
        kernels.fill(be, target, value)


# ===================================================================== joining and splitting
def cat(tensors, dim=0):
    tensors = [t for t in tensors]
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    ref = next((t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)), tensors[0])
    d = _norm_dim(dim, ref.ndim)
    parts = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0 and ref.ndim != 1)]
    dtype = ref.dtype
    for t in parts:
        dtype = dtypes.promote(dtype, t.dtype)
        if t.device != ref.device:
            raise RuntimeError(f"cat(): expected all tensors on the same device, got {ref.device} and {t.device}")
        if t.ndim != ref.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, ref.shape)) if i != d):
            raise RuntimeError(f"cat(): sizes of tensors must match except in dimension {d}: got shapes "
                               f"{list(ref.shape)} and {list(t.shape)}")
    shape = list(ref.shape)
    shape[d] = sum(t.shape[d] for t in parts)
    out = new(tuple(shape), dtype, ref.device)
    pos = 0
    sizes = []
    for t in parts:
        n = t.shape[d]
        sizes.append(n)
        o = out._view
        target = View(o.storage, t.shape, o.strides, o.offset + pos * o.strides[d], dtype)
        kernels.copy(ref.device.backend, target, t._view)
        pos += n

    # legacy empty 1-D tensors take no part but are inputs all the same: their gradient is empty
    legacy = [t for t in tensors if not any(t is p for p in parts)]

    def backward(g):
        grads, start = [], 0
        for n in sizes:
            grads.append(narrow(g, d, start, n))
            start += n
        return tuple(grads) + tuple(zeros(0, dtype=t.dtype, device=t.device) for t in legacy)
    inputs = tuple(cast(t, dtype) if t.dtype is not dtype and t.requires_grad else t for t in parts + legacy)
    return record(out, "Cat", inputs, backward)


concat = concatenate = cat


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    for t in tensors:
        if tuple(t.shape) != tuple(tensors[0].shape):
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} "
                               f"and {list(t.shape)}")
    d = _norm_dim(dim, tensors[0].ndim + 1)
    return renamed(cat([unsqueeze(t, d) for t in tensors], d), "Stack")


def split(input, split_size_or_sections, dim=0):
    d = _norm_dim(dim, input.ndim)
    n = input.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise RuntimeError("split(): split_size must be positive")
        sizes = [min(step, n - i) for i in range(0, n, step)] or [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input dim {d}), got {sizes}")
    out, start = [], 0
    name = "Split" if isinstance(split_size_or_sections, int) else "SplitWithSizes"
    for s in sizes:
        out.append(renamed(narrow(input, d, start, s), name, input))
        start += s
    return tuple(out)


def chunk(input, chunks, dim=0):
    if chunks <= 0:
        raise RuntimeError("chunk(): chunks must be positive")
    n = input.shape[_norm_dim(dim, input.ndim)]
    step = -(-n // chunks) if n else 1
    return split(input, step, dim)


def unbind(input, dim=0):
    d = _norm_dim(dim, input.ndim)
    return tuple(renamed(select(input, d, i), "Unbind", input) for i in range(input.shape[d]))


def select(input, dim, index):
    d = _norm_dim(dim, input.ndim)
    return input[(slice(None),) * d + (index,)]


# ===================================================================== index_select / gather
def _three_d(shape, d):
    return _numel(shape[:d]), shape[d], _numel(shape[d + 1:])


def _check_index(index, op):
    """An index tensor as the kernels take it: int64 (PyTorch's) or int32, contiguous (uint8 is widened)."""
    if not isinstance(index, Tensor) or index.dtype not in (dtypes.int64, dtypes.int32, dtypes.uint8):
        raise TypeError(f"{op}(): index must be an integer tensor, got "
                        f"{index.dtype.name if isinstance(index, Tensor) else type(index).__name__}")
    if index.dtype is dtypes.uint8:
        index = cast(index, dtypes.int32)
    return index.contiguous()


def index_select(input, dim, index):
    """out = input[..., index, ...] along `dim`. Indices outside [0, size) raise IndexError (negative
    ones too, as in PyTorch): at once on the CPU, at the next read-back on WebGPU (see _bounds.py)."""
    index = _check_index(index, "index_select")
    if index.ndim > 1:
        raise IndexError(f"index_select(): index must be 0-D or 1-D, got shape {list(index.shape)}")
    check_same_device("index_select", input, index)
    index = index.reshape(-1)
    if input.ndim == 0:  # a 0-d input is a 1-element vector along dim 0 (or -1); the result stays 0-d
        _norm_dim(dim, 0)
        if index.shape[0] != 1:
            raise IndexError(f"index_select(): index of a 0-d tensor must have one element, got {index.shape[0]}")
        return index_select(input.reshape(1), 0, index).reshape(())
    d = _norm_dim(dim, input.ndim)
    x = input.contiguous()
    outer, size, inner = _three_d(x.shape, d)
    k = index.shape[0]
    shape = tuple(x.shape[:d]) + (k,) + tuple(x.shape[d + 1:])
    out = new(shape, x.dtype, x.device)
    with _bounds.reporting(f"index_select(): index {{value}} is out of range for dimension {d} with size {{size}}"):
        kernels.index_select(x.device.backend, out._view.reshaped((outer, k, inner)), x._view.reshaped((outer, size, inner)),
                                      index._view)

    def backward(g):
        gx = new(tuple(x.shape), g.dtype, g.device)
        kernels.index_select_backward(g.device.backend, gx._view.reshaped((outer, size, inner)),
                                               g.contiguous()._view.reshaped((outer, k, inner)), index._view)
        return record_adjoint(gx, g, lambda h: index_select(h, d, index), "IndexSelectBackward")
    return record(out, "IndexSelect", (x,), lambda g: (backward(g),))


def gather(input, dim, index):
    """out[..., k, ...] = input[..., index[..., k, ...], ...] along `dim`; indices outside [0, size) raise
    IndexError, as in index_select."""
    index = _check_index(index, "gather")
    check_same_device("gather", input, index)
    d = _norm_dim(dim, input.ndim)
    if index.numel() == 0:  # nothing to read (no shape check either, as torch): an empty result of index's shape
        return input.reshape(-1)[:0].reshape(tuple(index.shape))
    if input.ndim == 0 or index.ndim == 0:  # 0-d input or index: read as 1-element vectors, as torch
        if input.ndim > 1 or index.ndim > 1:
            raise RuntimeError(f"gather(): index {list(index.shape)} must have the same number of dimensions as "
                               f"input {list(input.shape)}")
        return gather(input.reshape(-1), 0, index.reshape(-1)).reshape(tuple(index.shape))
    if index.ndim != input.ndim or any(index.shape[i] > input.shape[i] for i in range(input.ndim) if i != d):
        raise RuntimeError(f"gather(): index {list(index.shape)} must have the same number of dimensions as input "
                           f"{list(input.shape)} and no larger size outside dim {d}")
    x = input
    if any(index.shape[i] != x.shape[i] for i in range(x.ndim) if i != d):  # index may be smaller: narrow x
        x = x[tuple(slice(0, index.shape[i]) if i != d else slice(None) for i in range(x.ndim))]
    x = x.contiguous()
    outer, size, inner = _three_d(x.shape, d)
    k = index.shape[d]
    out = new(tuple(index.shape), x.dtype, x.device)
    with _bounds.reporting(f"gather(): index {{value}} is out of bounds for dimension {d} with size {{size}}"):
        kernels.gather(x.device.backend, out._view.reshaped((outer, k, inner)), x._view.reshaped((outer, size, inner)),
                                index._view.reshaped((outer, k, inner)))

    def backward(g):
        gx = new(tuple(x.shape), g.dtype, g.device)
        kernels.gather_backward(g.device.backend, gx._view.reshaped((outer, size, inner)),
                                         g.contiguous()._view.reshaped((outer, k, inner)),
                                         index._view.reshaped((outer, k, inner)))
        return record_adjoint(gx, g, lambda h: gather(h, d, index), "GatherBackward")
    return record(out, "Gather", (x,), lambda g: (backward(g),))


def take_along_dim(input, indices, dim=None):
    """gather along `dim` with input and indices broadcast against each other outside `dim`; without a dim,
    over the flattened input (torch.take_along_dim)."""
    if dim is None:
        return take_along_dim(input.reshape(-1), indices.reshape(-1), 0)
    if input.ndim != indices.ndim:
        raise RuntimeError(f"take_along_dim(): input and indices should have the same number of dimensions, but "
                           f"got {input.ndim} dimensions for input, and {indices.ndim} dimensions for indices")
    d = _norm_dim(dim, input.ndim)
    shape = list(broadcast_shapes(*(tuple(1 if i == d else n for i, n in enumerate(t.shape)) for t in (input, indices)),
                                  op="take_along_dim"))
    shape_x, shape_i = list(shape), list(shape)
    shape_x[d], shape_i[d] = input.shape[d], indices.shape[d]
    x = input.expand(*shape_x) if tuple(shape_x) != tuple(input.shape) else input
    idx = indices.expand(*shape_i) if tuple(shape_i) != tuple(indices.shape) else indices
    idx = _check_index(idx, "take_along_dim")
    n = x.shape[d]
    idx = where(idx < 0, idx + n, idx)  # negative indices count from the end, as torch's take_along_dim
    return gather(x, d, idx)


def flip(input, dims):
    """Reverse the order of elements along `dims` (a copy, as in PyTorch)."""
    out = input
    for d in ((dims,) if isinstance(dims, int) else dims):
        d = _norm_dim(d, input.ndim)
        out = index_select(out, d, arange(input.shape[d] - 1, -1, -1, dtype=dtypes.int32, device=input.device))
    return renamed(out, "Flip", input)


def _triangle(input, diagonal, keep_lower):
    if input.ndim < 2:
        raise RuntimeError(f"{'tril' if keep_lower else 'triu'}: input tensor must have at least 2 dimensions")
    rows, cols = input.shape[-2:]
    offset = arange(cols, device=input.device).unsqueeze(0) - arange(rows, device=input.device).unsqueeze(1)  # j - i
    keep = (offset <= diagonal) if keep_lower else (offset >= diagonal)
    return where(keep, input, zeros((), dtype=input.dtype, device=input.device))


def tril(input, diagonal=0):
    """The lower triangle of the last two dims (j - i <= diagonal), the rest zero, as torch.tril."""
    return renamed(_triangle(input, diagonal, True), "Tril", input)


def triu(input, diagonal=0):
    """The upper triangle of the last two dims (j - i >= diagonal), the rest zero, as torch.triu."""
    return renamed(_triangle(input, diagonal, False), "Triu", input)


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of dims (dim1, dim2) as a view, moved to the last dim, as torch.diagonal."""
    d1, d2 = _norm_dim(dim1, input.ndim), _norm_dim(dim2, input.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    v = input._view
    n1, n2 = v.shape[d1], v.shape[d2]
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    start = v.offset + (offset * v.strides[d2] if offset >= 0 else -offset * v.strides[d1]) if length else v.offset
    keep = [d for d in range(input.ndim) if d not in (d1, d2)]
    shape = [v.shape[d] for d in keep] + [length]
    strides = [v.strides[d] for d in keep] + [v.strides[d1] + v.strides[d2]]
    out = Tensor._make(View(v.storage, shape, strides, start, v.dtype), input.device)

    def backward(g):
        full = zeros(tuple(input.shape), dtype=g.dtype, device=g.device)
        setitem(full.diagonal(offset, d1, d2), Ellipsis, g)
        return full
    return record(out, "Diagonal", (input,), lambda g: (backward(g),))


_diagonal_view = diagonal  # diag's argument is named `diagonal`, as torch's


def diag(input, diagonal=0):
    """1-D input: a square matrix with it on the `diagonal`-th diagonal; 2-D input: that diagonal (a copy)."""
    if input.ndim == 2:
        return _diagonal_view(input, diagonal).clone()
    if input.ndim != 1:
        raise RuntimeError(f"diag(): expected a 1-D or 2-D tensor, got {input.ndim}-D")
    n = input.shape[0] + abs(diagonal)
    i = arange(n, device=input.device).unsqueeze(1)
    j = arange(n, device=input.device).unsqueeze(0)
    on = (j - i) == diagonal
    # the element at (i, j) of the diagonal is input[min(i, j)]: gather it from an input padded to n
    idx = (i if diagonal >= 0 else j).expand(n, n).clamp(max=input.shape[0] - 1)
    values = index_select(input, 0, idx.reshape(-1)).reshape(n, n)
    return where(on, values, zeros((), dtype=input.dtype, device=input.device))


def repeat(input, *sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    if len(sizes) < input.ndim:
        raise RuntimeError("repeat(): number of repeat dims can not be smaller than number of dimensions of tensor")
    x = input.reshape((1,) * (len(sizes) - input.ndim) + tuple(input.shape))
    # [a, b] repeated (r, s) = expand [r, a, s, b] then reshape [r*a, s*b]
    inter = []
    for r, n in zip(sizes, x.shape):
        inter += [r, n]
    expanded = x.reshape(tuple(v for n in x.shape for v in (1, n))).expand(*inter)
    return renamed(expanded.reshape(tuple(r * n for r, n in zip(sizes, x.shape))), "Repeat", input)
