"""torch._unsafe_masked_index and torch._unsafe_masked_index_put_accumulate: indexing whose out-of-range indices are
masked instead of raising, as the decompositions of padded gathers (torch.compile's upsampling, reflection padding)
emit them.

Each index is clamped into [-size, size - 1] first (a negative one counting from the end, as PyTorch's kernels
do), so every read or write lands inside the tensor; the mask then says which
results count: a read outside the mask gives `fill`, a write outside it adds zero. Both are compositions of indexing,
masked_fill and index_put, so autograd and both devices come with them.
"""

from . import dtypes
from ._tensor import Tensor


def _check(x, mask, indices, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'self' must be Tensor, not {type(x).__name__}")
    if not isinstance(mask, Tensor) or mask.dtype != dtypes.bool_:
        raise RuntimeError("tensors used as masks must be bool tensors")
    for index in indices:
        if index is not None and (not isinstance(index, Tensor) or index.dtype not in (dtypes.int64, dtypes.int32)):
            raise IndexError("tensors used as indices must be long or int tensors")
    if len(indices) > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim} (got {len(indices)})")


def _clamped(x, indices):
    """The indices clamped into [-size, size - 1] of their dims (a negative one then counts from the end)."""
    return tuple(slice(None) if index is None else index.clamp(-x.shape[d], x.shape[d] - 1)
                 for d, index in enumerate(indices))


def _unsafe_masked_index(x, mask, indices, fill):
    """x[indices] with each index clamped into range, and `fill` where mask is False."""
    indices = list(indices)
    _check(x, mask, indices, "_unsafe_masked_index")
    if x.numel() == 0:  # nothing to read: the result's shape (indexing a probe with one row per indexed dim), all fill
        probe = x.new_zeros(tuple(1 if d < len(indices) and indices[d] is not None else s
                                  for d, s in enumerate(x.shape)))
        return x.new_full(tuple(probe[_clamped(probe, indices)].shape), fill)
    return x[_clamped(x, indices)].masked_fill(~mask, fill)


def _unsafe_masked_index_put_accumulate(x, mask, indices, values):
    """x with values added at the indices (clamped into range) where mask is True."""
    indices = list(indices)
    _check(x, mask, indices, "_unsafe_masked_index_put_accumulate")
    if x.numel() == 0:
        return x.clone()
    return x.index_put(_clamped(x, indices), values.masked_fill(~mask, 0), accumulate=True)


FUNCTIONS = {"_unsafe_masked_index": _unsafe_masked_index,
             "_unsafe_masked_index_put_accumulate": _unsafe_masked_index_put_accumulate}
