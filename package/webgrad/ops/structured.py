"""Tensors of index arithmetic: torch.bincount, tril_indices, triu_indices and vander, composed of other ops."""

from .. import dtypes
from .._autograd import no_grad
from .._tensor import Tensor, ones, tensor, zeros
from . import scans, scatter, shape


def bincount(input, weights=None, minlength=0):
    """The number of occurrences of each value in the 1-D non-negative integer tensor input (or the sum of
    weights at each value), of length max(input.max() + 1, minlength), as torch.bincount. Counts are int64; sums
    float32 for float32 (and float16) weights, else float64, as PyTorch's. The largest value is read on the host
    (PyTorch synchronizes too). The result has no gradient (PyTorch gives bincount no derivative either)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"bincount(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if input.dtype.is_floating or input.dtype is dtypes.bool_:
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{_TORCH_NAMES.get(input.dtype.name)}'")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if input.ndim != 1 or (input.numel() > 0 and int(input.min().item()) < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != input.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    length = max(int(input.max().item()) + 1 if input.numel() else 0, minlength)
    index = input.to(dtypes.int64)
    with no_grad():
        if weights is None:
            counts = zeros(length, dtype=dtypes.int64, device=input.device)
            return scatter.index_add(counts, 0, index, ones(index.shape[0], dtype=dtypes.int64, device=input.device))
        dtype = dtypes.float32 if weights.dtype in (dtypes.float32, dtypes.float16) else dtypes.float64
        sums = zeros(length, dtype=dtype, device=input.device)
        return scatter.index_add(sums, 0, index, weights.to(dtype))


_TORCH_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "bool": "Bool"}


def _triangle(name, row, col, offset, dtype, device, layout, lower):
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    dtype = dtypes.to_dtype(dtype, dtypes.int64)
    if dtype not in (dtypes.int64, dtypes.int32):
        raise NotImplementedError(f"\"{name}\" not implemented for '{_TORCH_NAMES.get(dtype.name, dtype.name)}'")
    if layout is not None and str(layout) not in ("torch.strided", "webgrad.strided", "strided"):
        raise RuntimeError(f"{name}: only the strided layout is supported, got {layout}")
    rows, cols = [], []
    for i in range(row):
        lo, hi = (0, min(col, i + offset + 1)) if lower else (max(0, i + offset), col)
        if hi > lo:
            rows.extend([i] * (hi - lo))
            cols.extend(range(lo, hi))
    if not rows:
        return zeros(2, 0, dtype=dtype, device=device)
    return tensor([rows, cols], dtype=dtype, device=device)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The [2, N] (row, column) coordinates of the lower triangle of a row x col matrix, row by row, as
    torch.tril_indices (offset > 0 takes diagonals above the main one, < 0 leaves some out)."""
    return _triangle("tril_indices", row, col, offset, dtype, device, layout, True)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The [2, N] coordinates of the upper triangle of a row x col matrix, as torch.triu_indices."""
    return _triangle("triu_indices", row, col, offset, dtype, device, layout, False)


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of 1-D x: columns x^(N-1), ..., x^1, x^0 (reversed with increasing=True), N
    defaulting to len(x), as torch.vander. Integers and bools give int64. Built as PyTorch's, from a running
    product (cumprod), so gradients agree."""
    if not isinstance(x, Tensor):
        raise TypeError(f"vander(): argument 'x' (position 1) must be Tensor, not {type(x).__name__}")
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    if not x.dtype.is_floating:
        x = x.to(dtypes.int64)
    columns = [ones(x.shape[0], 1, dtype=x.dtype, device=x.device)] if n > 0 else []
    if n > 1 and x.dtype.is_floating:
        columns.append(scans.cumprod(shape.expand(shape.unsqueeze(x, 1), x.shape[0], n - 1), 1))
    elif n > 1:  # integer powers one product at a time (WebGPU has no 64-bit running product)
        column = shape.unsqueeze(x, 1)
        for _ in range(n - 1):
            columns.append(column)
            column = column * shape.unsqueeze(x, 1)
    if not columns:
        return zeros(x.shape[0], 0, dtype=x.dtype, device=x.device)
    out = shape.cat(columns, 1)
    return out if increasing else shape.flip(out, (1,))


FUNCTIONS = {fn.__name__: fn for fn in (bincount, tril_indices, triu_indices, vander)}
