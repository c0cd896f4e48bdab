"""Shape and indexing ops. Views (reshape of contiguous data, permute, expand, slicing, squeeze) only
rewrite shape/strides/offset and run no kernel; their backward undoes the movement.
"""

from .. import _bounds, dtypes
from ..autograd import record
from .._view import View
from .._tensor import Tensor, _norm_dim
from .elementwise import cast, check_same_device, contiguous, new, where


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
    if v.is_contiguous():
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
    if tuple(shape) == tuple(input.shape):
        return input
    strides = _view_strides(input._view, shape)
    if strides is None:
        input = contiguous(input)
        strides = View.contiguous_strides(shape)
    old = input.shape
    return _view_of(input, shape, strides, input._view.offset, "Reshape", lambda g: g.reshape(old))


def flatten(input, start_dim=0, end_dim=-1):
    if input.ndim == 0:
        return input.reshape(1)
    s, e = _norm_dim(start_dim, input.ndim), _norm_dim(end_dim, input.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
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
    return permute(input, *perm)


swapaxes = swapdims = transpose


def movedim(input, source, destination):
    src, dst = _norm_dim(source, input.ndim), _norm_dim(destination, input.ndim)
    order = [i for i in range(input.ndim) if i != src]
    order.insert(dst, src)
    return permute(input, *order)


moveaxis = movedim


def t(input):
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but got {input.ndim}")
    return transpose(input, 0, 1) if input.ndim == 2 else input


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
    from .elementwise import unbroadcast
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
        dims = [d for d in dims if v.shape[d] == 1]
    if not dims:
        return input
    keep = [i for i in range(len(v.shape)) if i not in dims]
    old = input.shape
    return _view_of(input, tuple(v.shape[i] for i in keep), tuple(v.strides[i] for i in keep), v.offset,
                    "Squeeze", lambda g: g.reshape(old))


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
    if Ellipsis not in index:
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
        if isinstance(i, bool) or isinstance(i, (Tensor, list)):
            return None
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


def getitem(input, index):
    basic = _basic_view(input, index)
    if basic is None:
        return _advanced_getitem(input, index)
    shape, strides, offset = basic

    def backward(g):
        out = _zeros_like(input, g.dtype)
        out.device.backend.copy(View(out._view.storage, shape, strides, offset - input._view.offset, g.dtype), g._view)
        return out
    out = Tensor._make(View(input._view.storage, shape, strides, offset, input.dtype), input.device)
    return record(out, "Select", (input,), lambda g: (backward(g),))


def _zeros_like(x, dtype):
    from .._tensor import zeros
    return zeros(tuple(x.shape), dtype=dtype, device=x.device)


def _advanced_getitem(input, index):
    """One integer tensor/list index on one dim (x[idx], x[:, idx]) -> index_select."""
    items = _normalize_index(input, index)
    tensor_dims = [d for d, i in enumerate(items) if isinstance(i, (Tensor, list))]
    if len(tensor_dims) != 1 or any(i is None or isinstance(i, int) for i in items) or \
            any(isinstance(i, slice) and i != slice(None) for i in items):
        raise IndexError("advanced indexing supports one integer tensor or list index on one dimension "
                         "(x[idx] or x[:, idx]); use index_select or gather for more")
    d = tensor_dims[0]
    idx = items[d]
    n = input.shape[d]
    message = f"index {{value}} is out of bounds for dimension {d} with size {{size}}"
    host_shape = None
    if isinstance(idx, Tensor) and idx.device != input.device and idx.device.type == "cpu" \
            and not idx.dtype.is_floating and idx.dtype is not dtypes.bool_:
        # a CPU index for a device tensor (as PyTorch allows): checked on the host, then uploaded
        host_shape = tuple(idx.shape)
        idx = idx.reshape(-1).tolist()
    if isinstance(idx, list):  # on the host: checked, and negatives wrapped, before the upload
        from .._tensor import tensor
        if any(isinstance(i, bool) or not isinstance(i, int) for i in _flatten(idx)):
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors; a list index "
                             "must hold ints")
        idx = _wrap_list(idx, n, message)
        idx = tensor(idx, dtype=dtypes.int32, device=input.device)
    elif idx.dtype is dtypes.bool_:
        raise IndexError("boolean mask indexing needs the mask's values on the host; use where() or "
                         "multiply by the mask instead")
    elif idx.dtype.is_floating:
        raise IndexError("tensors used as indices must be integer tensors")
    else:
        # Negative indices count from the end, as in PyTorch; ones below -n stay as they are, so the
        # error names the index the user wrote (index_select reports indices outside [0, n)).
        idx = idx.int()
        idx = where((idx < 0) & (idx >= -n), idx + n, idx)
    shape = idx.shape if host_shape is None else host_shape
    with _bounds.reporting(message):
        out = index_select(input, d, idx.reshape(-1))
    return out.reshape(tuple(input.shape[:d]) + tuple(shape) + tuple(input.shape[d + 1:]))


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
    from .inplace import check_inplace
    check_inplace(input, "__setitem__")
    basic = _basic_view(input, index)
    if basic is None:
        raise IndexError("assignment supports basic indexing (ints, slices, None, ...) only")
    shape, strides, offset = basic
    target = View(input._view.storage, shape, strides, offset, input.dtype)
    be = input.device.backend
    if isinstance(value, Tensor):
        from .elementwise import broadcast_shapes, expanded_view
        if value.device != input.device:
            raise RuntimeError(f"setitem: value is on {value.device} but the tensor is on {input.device}")
        broadcast_shapes(shape, value.shape, op="setitem")
        if len(value.shape) > len(shape):
            value = value.reshape(value.shape[len(value.shape) - len(shape):]) if value.numel() else value
        # snapshot first: the value may alias the target (x[1:] = x[:-1])
        src = cast(value, input.dtype).clone().detach() if value.dtype is input.dtype else cast(value, input.dtype)
        be.copy(target, expanded_view(src, shape))
    else:
        be.fill(target, value)


# ===================================================================== joining and splitting
def cat(tensors, dim=0):
    tensors = [t for t in tensors]
    if not tensors:
        raise RuntimeError("cat(): expected a non-empty list of tensors")
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
        ref.device.backend.copy(target, t._view)
        pos += n

    def backward(g):
        grads, start = [], 0
        for n in sizes:
            grads.append(narrow(g, d, start, n))
            start += n
        return tuple(grads)
    inputs = tuple(cast(t, dtype) if t.dtype is not dtype and t.requires_grad else t for t in parts)
    return record(out, "Cat", inputs, backward)


concat = concatenate = cat


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack(): expected a non-empty list of tensors")
    for t in tensors:
        if tuple(t.shape) != tuple(tensors[0].shape):
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} "
                               f"and {list(t.shape)}")
    d = _norm_dim(dim, tensors[0].ndim + 1)
    return cat([unsqueeze(t, d) for t in tensors], d)


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
    for s in sizes:
        out.append(narrow(input, d, start, s))
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
    return tuple(select(input, d, i) for i in range(input.shape[d]))


def select(input, dim, index):
    d = _norm_dim(dim, input.ndim)
    return input[(slice(None),) * d + (index,)]


# ===================================================================== index_select / gather
def _three_d(shape, d):
    return _numel(shape[:d]), shape[d], _numel(shape[d + 1:])


def _check_index(index, op):
    if not isinstance(index, Tensor) or index.dtype not in (dtypes.int32, dtypes.uint8):
        raise TypeError(f"{op}(): index must be an integer tensor, got "
                        f"{index.dtype.name if isinstance(index, Tensor) else type(index).__name__}")
    return cast(index, dtypes.int32).contiguous()


def index_select(input, dim, index):
    """out = input[..., index, ...] along `dim`. Indices outside [0, size) raise IndexError (negative
    ones too, as in PyTorch): at once on the CPU, at the next read-back on WebGPU (see _bounds.py)."""
    index = _check_index(index, "index_select")
    if index.ndim > 1:
        raise IndexError(f"index_select(): index must be 0-D or 1-D, got shape {list(index.shape)}")
    check_same_device("index_select", input, index)
    index = index.reshape(-1)
    d = _norm_dim(dim, input.ndim)
    x = input.contiguous()
    outer, size, inner = _three_d(x.shape, d)
    k = index.shape[0]
    shape = tuple(x.shape[:d]) + (k,) + tuple(x.shape[d + 1:])
    out = new(shape, x.dtype, x.device)
    with _bounds.reporting(f"index_select(): index {{value}} is out of range for dimension {d} with size {{size}}"):
        x.device.backend.index_select(out._view.reshaped((outer, k, inner)), x._view.reshaped((outer, size, inner)),
                                      index._view)

    def backward(g):
        gx = new(tuple(x.shape), g.dtype, g.device)
        g.device.backend.index_select_backward(gx._view.reshaped((outer, size, inner)),
                                               g.contiguous()._view.reshaped((outer, k, inner)), index._view)
        return gx
    return record(out, "IndexSelect", (x,), lambda g: (backward(g),))


def gather(input, dim, index):
    """out[..., k, ...] = input[..., index[..., k, ...], ...] along `dim`; indices outside [0, size) raise
    IndexError, as in index_select."""
    index = _check_index(index, "gather")
    check_same_device("gather", input, index)
    d = _norm_dim(dim, input.ndim)
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
        x.device.backend.gather(out._view.reshaped((outer, k, inner)), x._view.reshaped((outer, size, inner)),
                                index._view.reshaped((outer, k, inner)))

    def backward(g):
        gx = new(tuple(x.shape), g.dtype, g.device)
        g.device.backend.gather_backward(gx._view.reshaped((outer, size, inner)),
                                         g.contiguous()._view.reshaped((outer, k, inner)),
                                         index._view.reshaped((outer, k, inner)))
        return gx
    return record(out, "Gather", (x,), lambda g: (backward(g),))


def take_along_dim(input, indices, dim):
    return gather(input, dim, indices)


def flip(input, dims):
    """Reverse the order of elements along `dims` (a copy, as in PyTorch)."""
    from .._tensor import arange
    out = input
    for d in ((dims,) if isinstance(dims, int) else dims):
        d = _norm_dim(d, input.ndim)
        out = index_select(out, d, arange(input.shape[d] - 1, -1, -1, dtype=dtypes.int32, device=input.device))
    return out


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
    return expanded.reshape(tuple(r * n for r, n in zip(sizes, x.shape)))
