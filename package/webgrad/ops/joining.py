"""Joining and splitting, as torch: hstack, vstack, dstack, column_stack, the split family (tensor_split,
hsplit, vsplit, dsplit, split_with_sizes, unsafe_split, unsafe_chunk), atleast_1d/2d/3d, broadcast_tensors
and meshgrid.

Each is composed of cat, narrow, reshape and expand, so its gradient comes from those ops; the pieces a split
returns are views of the input, as PyTorch's.
"""

from .._tensor import Tensor, _norm_dim
from .core import broadcast_shapes
from .shape import cat, chunk, narrow, split


def _tensors(name, tensors):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"{name}(): expected a non-empty list of Tensors")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}(): expected a sequence of Tensors, got an element of type {type(t).__name__}")
    return tensors


# ===================================================================== at least n dims
def _atleast(name, shape_of, tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(_atleast(name, shape_of, (t,)) for t in tensors[0])
    if len(tensors) != 1:
        return tuple(_atleast(name, shape_of, (t,)) for t in tensors)
    t = tensors[0]
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}(): expected a Tensor, got {type(t).__name__}")
    shape = shape_of(tuple(t.shape))
    return t if shape == tuple(t.shape) else t.reshape(shape)


def atleast_1d(*tensors):
    """A 0-d tensor as [1]; others as they are (a tuple for several tensors or a sequence)."""
    return _atleast("atleast_1d", lambda s: s or (1,), tensors)


def atleast_2d(*tensors):
    """0-d as [1, 1], [n] as [1, n]; others as they are."""
    return _atleast("atleast_2d", lambda s: ((1,) * (2 - len(s)) + s) if len(s) < 2 else s, tensors)


def atleast_3d(*tensors):
    """0-d as [1, 1, 1], [n] as [1, n, 1], [m, n] as [m, n, 1]; others as they are."""
    def shape(s):
        return {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}.get(len(s), s)
    return _atleast("atleast_3d", shape, tensors)


# ===================================================================== stacking
def hstack(tensors):
    """cat along dim 1 (dim 0 for 1-D tensors), 0-d tensors read as [1]."""
    tensors = [atleast_1d(t) for t in _tensors("hstack", tensors)]
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    """cat along dim 0 of the tensors made at least 2-D ([n] as [1, n])."""
    return cat([atleast_2d(t) for t in _tensors("vstack", tensors)], 0)


row_stack = vstack


def dstack(tensors):
    """cat along dim 2 of the tensors made at least 3-D."""
    return cat([atleast_3d(t) for t in _tensors("dstack", tensors)], 2)


def column_stack(tensors):
    """0-d and 1-D tensors as columns [n, 1], then cat along dim 1."""
    return cat([t.reshape(t.numel(), 1) if t.ndim <= 1 else t for t in _tensors("column_stack", tensors)], 1)


# ===================================================================== splitting
def tensor_split(input, indices_or_sections, dim=0):
    """Views of `input` along dim: n sections of near-equal sizes (the first n % size ones one longer), or
    cut before each of the indices (a list, a tuple or a 1-D integer tensor; a 0-d tensor counts sections)."""
    d = _norm_dim(dim, input.ndim)
    size = input.shape[d]
    spec = indices_or_sections
    if isinstance(spec, Tensor):
        if spec.dtype.is_floating or spec.ndim > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have an integer dtype and be "
                               f"0-D or 1-D, got {spec.dtype.name} of shape {list(spec.shape)}")
        spec = spec.item() if spec.ndim == 0 else spec.tolist()
    if isinstance(spec, int):
        if spec <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {spec}")
        base, extra = divmod(size, spec)
        bounds, start = [], 0
        for i in range(spec):
            length = base + (i < extra)
            bounds.append((start, length))
            start += length
    else:
        cuts = [0] + [int(i) for i in spec] + [None]
        bounds = []
        for lo, hi in zip(cuts, cuts[1:]):  # each piece is input[lo:hi] along dim, as a Python slice
            start, stop, _ = slice(lo, hi).indices(size)
            bounds.append((start, max(stop - start, 0)))
    return tuple(narrow(input, d, s, n) for s, n in bounds)


def _split_at(name, input, spec, dim, min_dims):
    if input.ndim < min_dims:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dims} dimension"
                           f"{'s' if min_dims > 1 else ''}, but got a tensor with {input.ndim} dimensions!")
    if isinstance(spec, int) and not isinstance(spec, bool):
        size = input.shape[dim]
        if spec == 0 or size % spec:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the "
                               f"dimension {size} is not divisible by the split_size {spec}!")
    return tensor_split(input, spec, dim)


def hsplit(input, indices_or_sections):
    """tensor_split along dim 1 (dim 0 of a 1-D tensor); a number of sections must divide the size."""
    return _split_at("hsplit", input, indices_or_sections, 0 if input.ndim == 1 else 1, 1)


def vsplit(input, indices_or_sections):
    """tensor_split along dim 0 of a tensor of at least 2 dims."""
    return _split_at("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    """tensor_split along dim 2 of a tensor of at least 3 dims."""
    return _split_at("dsplit", input, indices_or_sections, 2, 3)


def split_with_sizes(input, split_sizes, dim=0):
    """Views of the given sizes along dim (they must add up to its size)."""
    return split(input, [int(s) for s in split_sizes], dim)


def unsafe_split(input, split_size, dim=0):
    """split (webgrad's pieces are views that autograd tracks safely either way)."""
    return split(input, split_size, dim)


def unsafe_chunk(input, chunks, dim=0):
    """chunk (see unsafe_split)."""
    return chunk(input, chunks, dim)


# ===================================================================== broadcasting
def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape (views)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = broadcast_shapes(*(tuple(t.shape) for t in tensors), op="broadcast_tensors")
    return tuple(t if tuple(t.shape) == shape else t.expand(*shape) for t in tensors)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids of 0-d or 1-D tensors: output i varies along dim i ('ij', the default) or with the
    first two dims swapped ('xy', Cartesian), as torch.meshgrid."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    tensors = _tensors("meshgrid", tensors)
    indexing = "ij" if indexing is None else indexing
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t.ndim}D")
        if t.device != tensors[0].device or t.dtype is not tensors[0].dtype:
            raise RuntimeError("torch.meshgrid: expected all tensors to have the same dtype and device")
    sizes = [t.numel() for t in tensors]
    order = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) >= 2:
        order[0], order[1] = 1, 0
    shape = tuple(sizes[i] for i in order)
    out = []
    for i, t in enumerate(tensors):
        at = order.index(i)
        out.append(t.reshape(tuple(sizes[i] if j == at else 1 for j in range(len(tensors)))).expand(*shape))
    return tuple(out)
