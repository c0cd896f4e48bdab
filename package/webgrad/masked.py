"""torch.masked's operations on strided tensors with a boolean mask (webgrad.masked; torch.masked under
as_torch()): reductions (sum, prod, amax, amin, argmax, argmin, mean, median, norm, var, std, logsumexp), scans
(cumsum, cumprod), normalizations (softmax, log_softmax, softmin, normalize) and logaddexp.

As torch's, each replaces the masked-out elements by the operation's identity (0 for sums, 1 for products, -inf
for maxima and softmax, NaN for median, ...) and runs the plain operation; mean, var and std count the masked-in
elements. Masks broadcast to the input's shape. Gradients come from the ops used: masked-out elements get none.
"""

import math

from . import dtypes, linalg
from ._tensor import Tensor, _norm_dim, full
from .ops import reduce, scans, statistics
from .ops.elementwise import maximum, where

__all__ = ["sum", "prod", "cumsum", "cumprod", "amax", "amin", "argmax", "argmin", "mean", "median", "logsumexp",
           "logaddexp", "norm", "var", "std", "softmax", "log_softmax", "softmin", "normalize"]

_SMALL_INTS = (dtypes.uint8, dtypes.bool_, dtypes.int32)


def _dims(dim, ndim):
    """dim as a sorted tuple of dims; None or () is every dim (torch.masked's reading)."""
    if dim is None or dim == ():
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    for d in dims:
        d = _norm_dim(d, max(ndim, 1))
        if d in out:
            raise RuntimeError(f"dim={d} appears multiple times in the list of dims")
        out.append(d)
    return tuple(sorted(out))


def _mask(input, mask):
    """The mask as a bool tensor of input's shape (broadcast)."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a Tensor, not {type(mask).__name__}")
    if tuple(mask.shape) != tuple(input.shape):
        if mask.ndim > input.ndim:
            raise IndexError("_input_mask expected broadcastable mask (got mask dimensionality higher than of the "
                             "input)")
        mask = mask.expand(*input.shape)
    return mask if mask.dtype is dtypes.bool_ else mask != 0


def _identity(op, input, ord=2.0):
    floating = input.dtype.is_floating
    if op in ("sum", "cumsum", "norm"):
        return math.inf if op == "norm" and ord == -math.inf else 0
    if op in ("prod", "cumprod"):
        return 1
    if op in ("amax", "argmax", "logaddexp", "logsumexp"):
        return -math.inf if floating else _int_limit(input.dtype, low=True)
    if op in ("amin", "argmin"):
        return math.inf if floating else _int_limit(input.dtype, low=False)
    if op == "median":
        return math.nan
    raise NotImplementedError(f"identity of {op} on {input.dtype.name} input")


def _int_limit(dtype, low):
    bits = {"uint8": 8, "int32": 32, "int64": 64}.get(dtype.name)
    if bits is None:
        raise NotImplementedError(f"no identity for {dtype.name}")
    if dtype is dtypes.uint8:
        return 0 if low else 255
    return -(2 ** (bits - 1)) if low else 2 ** (bits - 1) - 1


def _combine(op, input, mask, ord=2.0):
    """input with its masked-out elements replaced by op's identity (input itself without a mask)."""
    if mask is None:
        return input
    return where(_mask(input, mask), input, full((), _identity(op, input, ord), dtype=input.dtype,
                                                 device=input.device))


def _sum_dtype(input, dtype):
    if dtype is not None:
        return dtypes.to_dtype(dtype)
    return dtypes.int64 if input.dtype in _SMALL_INTS else input.dtype


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The sum over dim of the masked-in elements."""
    dtype = _sum_dtype(input, dtype)
    return reduce.sum(_combine("sum", input, mask), _dims(dim, input.ndim), bool(keepdim), dtype=dtype)


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The product over dim of the masked-in elements."""
    result = _combine("prod", input, mask).to(_sum_dtype(input, dtype))
    for d in reversed(_dims(dim, input.ndim)):
        result = reduce.prod(result, d, keepdim=bool(keepdim))
    return result


def cumsum(input, dim, *, dtype=None, mask=None):
    """Running sums along dim, masked-out elements counting as 0."""
    dtype = dtypes.to_dtype(dtype) if dtype is not None else input.dtype
    return reduce.cumsum(_combine("sum", input, mask), _dims(dim, input.ndim)[0], dtype=dtype).to(dtype)


def cumprod(input, dim, *, dtype=None, mask=None):
    """Running products along dim, masked-out elements counting as 1."""
    dtype = dtypes.to_dtype(dtype) if dtype is not None else input.dtype
    return scans.cumprod(_combine("prod", input, mask), _dims(dim, input.ndim)[0], dtype=dtype).to(dtype)


def _extreme(op):
    def fn(input, dim=None, *, keepdim=False, dtype=None, mask=None):
        dtype = dtypes.to_dtype(dtype) if dtype is not None else input.dtype
        x = _combine(op, input, mask)
        return getattr(reduce, op)(x, _dims(dim, x.ndim), bool(keepdim)).to(dtype)
    fn.__name__ = op
    fn.__doc__ = f"The {op[1:]}imum over dim of the masked-in elements (the identity where all are masked out)."
    return fn


amax, amin = _extreme("amax"), _extreme("amin")


def _arg(op):
    def fn(input, dim=None, *, keepdim=False, dtype=None, mask=None):
        dtype = dtypes.to_dtype(dtype) if dtype is not None else input.dtype
        return getattr(reduce, op)(_combine(op, input, mask), dim, bool(keepdim)).to(dtype)
    fn.__name__ = op
    fn.__doc__ = (f"The index of the {op[3:]}imum over dim among the masked-in elements, in input's dtype (as "
                  f"torch.masked.{op}).")
    return fn


argmax, argmin = _arg("argmax"), _arg("argmin")


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The mean over dim of the masked-in elements (NaN where all are masked out)."""
    dtype = dtypes.to_dtype(dtype) if dtype is not None else input.dtype
    if not dtype.is_floating:
        raise ValueError(f"mean(): Could not infer output dtype. Input dtype must be either a floating point or "
                         f"complex dtype. Got: {dtype}")
    dims = _dims(dim, input.ndim)
    if mask is None:
        count = 1
        for d in dims:
            count *= input.shape[d] if input.ndim else 1
        return sum(input, dim, keepdim=keepdim, dtype=dtype) / count if count else \
            sum(input, dim, keepdim=keepdim, dtype=dtype) * math.nan
    inmask = _mask(input, mask)
    count = reduce.sum(inmask, dims, bool(keepdim))
    return sum(input, dim, keepdim=keepdim, dtype=dtype, mask=inmask) / count


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """The median along dim of the masked-in elements (NaN where all are masked out)."""
    dtype = dtypes.to_dtype(dtype) if dtype is not None else input.dtype
    d = _dims(dim, input.ndim)[0]
    floating = input.dtype.is_floating
    x = input if floating else input.float()
    output = statistics.nanmedian(_combine("median", x, mask), d, keepdim).values
    if floating:
        return output
    if bool(output.isnan().any().item()):
        raise ValueError("masked median expects no fully masked out rows if dtype is not floating point")
    return output.to(dtype)


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """log(sum(exp)) over dim of the masked-in elements (-inf where all are masked out)."""
    dtype = dtypes.to_dtype(dtype) if dtype is not None else input.dtype
    return reduce.logsumexp(_combine("logsumexp", input, mask), _dims(dim, input.ndim), keepdim=keepdim).to(dtype)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """log(exp(input) + exp(other)), the masked-out elements of each counting as -inf."""
    dtype = dtypes.to_dtype(dtype) if dtype is not None else input.dtype
    from .ops.elementwise import function
    return function("logaddexp")(_combine("logaddexp", input, input_mask),
                                 _combine("logaddexp", other, other_mask)).to(dtype)


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The ord-norm over dim of the masked-in elements."""
    dtype = dtypes.to_dtype(dtype) if dtype is not None else input.dtype
    x = _combine("norm", input, mask, ord)
    return linalg.vector_norm(x, ord, _dims(dim, input.ndim), bool(keepdim), dtype=dtype)


def _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, take_sqrt):
    if unbiased is not None and correction is not None:
        raise AssertionError("Only one of unbiased and correction may be given")
    corr = 1.0
    if unbiased is not None:
        corr = 1.0 if unbiased else 0.0
    if correction is not None:
        corr = float(correction)
    dtype = dtypes.to_dtype(dtype) if dtype is not None else input.dtype
    if not dtype.is_floating:
        dtype = dtypes.float32
    dims = _dims(dim, input.ndim)
    if mask is None:
        n = 1
        for d in dims:
            n *= input.shape[d] if input.ndim else 1
        kept = tuple(1 if i in dims else s for i, s in enumerate(input.shape))
        count = full(kept, n, dtype=dtypes.int64, device=input.device)
        sample_total = sum(input, dim, keepdim=True, dtype=dtype)
        inmask = None
    else:
        inmask = _mask(input, mask)
        count = reduce.sum(inmask, dims, True)
        sample_total = sum(input, dim, keepdim=True, dtype=dtype, mask=inmask)
    x = input - sample_total / count
    total = sum(x * x, dim, keepdim=keepdim, dtype=dtype, mask=inmask)
    if not keepdim:
        count = count.reshape(tuple(total.shape))
    if corr != 0:
        count = count.to(dtype) - corr
        count = maximum(count, count.new_zeros(()))
    output = (total / count).to(dtype)
    return output.sqrt() if take_sqrt else output


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """The variance over dim of the masked-in elements (NaN where all are masked out)."""
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, False)


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """The standard deviation over dim of the masked-in elements (NaN where all are masked out)."""
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, True)


def softmax(input, dim, *, dtype=None, mask=None):
    """softmax along dim over the masked-in elements (0 at the masked-out ones)."""
    dtype = dtypes.to_dtype(dtype) if dtype is not None else input.dtype
    return reduce.softmax(_combine("amax", input, mask), _dims(dim, input.ndim)[0], dtype=dtype)


def log_softmax(input, dim, *, dtype=None, mask=None):
    """log_softmax along dim over the masked-in elements (-inf at the masked-out ones)."""
    dtype = dtypes.to_dtype(dtype) if dtype is not None else input.dtype
    return reduce.log_softmax(_combine("amax", input, mask), _dims(dim, input.ndim)[0], dtype=dtype)


def softmin(input, dim, *, dtype=None, mask=None):
    """softmin along dim over the masked-in elements (0 at the masked-out ones)."""
    dtype = dtypes.to_dtype(dtype) if dtype is not None else input.dtype
    return reduce.softmax(-_combine("amin", input, mask), _dims(dim, input.ndim)[0], dtype=dtype)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """The masked-in elements divided by their ord-norm along dim (at least eps), masked-out ones 0."""
    dtype = dtypes.to_dtype(dtype) if dtype is not None else input.dtype
    norms = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    return _combine("sum", input, mask) / maximum(norms, norms.new_full((), eps))

