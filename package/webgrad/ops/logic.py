"""Logic and comparison ops, as torch: all, any, count_nonzero, isclose, allclose, equal, isin, isneginf, isposinf
and signbit.

They are compositions of comparisons and sums (a bool reduction is a count of the non-zero elements), so every
backend runs them with the kernels it has. Their results are bools or counts: nothing here has a gradient.
allclose and equal return Python bools, so they read their answer back (a sync on WebGPU, as on CUDA).
"""

import numbers

from .. import dtypes
from .._tensor import Tensor, _norm_dim, tensor, zeros
from .core import cast, check_same_device
from . import reduce


def _check(input, op, name="input"):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(input).__name__}")


def _reduce_dims(input, dim):
    """The dims a bool reduction runs over: all of them for None, `dim` otherwise (an empty tuple reduces
    nothing, as torch.all/any)."""
    if dim is None:
        return tuple(range(input.ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if input.ndim == 0:
        for d in dims:
            _norm_dim(d, 1)
        return ()
    return tuple(sorted({_norm_dim(d, input.ndim) for d in dims}))


def _nonzero(input):
    """input != 0 (NaN counts as non-zero), written ~(input == 0): some WebGPU compilers evaluate a != b on a NaN
    as an ordered comparison (False)."""
    return ~(input == 0)


def count_nonzero(input, dim=None):
    """The number of non-zero elements over `dim` (every dim when None or ()), as int64."""
    _check(input, "count_nonzero")
    dims = _reduce_dims(input, dim) if dim not in (None, ()) else tuple(range(input.ndim))
    return reduce.sum(_nonzero(input), dims) if dims else cast(_nonzero(input), dtypes.int64)


def _bool_reduce(op):
    def fn(input, dim=None, keepdim=False, *, out=None):
        _check(input, op)
        if out is not None:
            raise TypeError(f"{op}(): out= is not supported by webgrad; assign the result instead")
        dims = _reduce_dims(input, dim)
        nonzero = _nonzero(input)
        if dims:
            count = reduce.sum(nonzero, dims, keepdim)
            n = 1
            for d in dims:
                n *= input.shape[d]
            result = count == n if op == "all" else count > 0
        else:
            result = nonzero
        # uint8 in, uint8 out (torch keeps that legacy)
        return cast(result, dtypes.uint8) if input.dtype is dtypes.uint8 else result
    fn.__name__ = op
    fn.__doc__ = (f"Whether {'every' if op == 'all' else 'any'} element over `dim` (all dims when None) is non-zero, "
                  f"as torch.{op}: bool (uint8 for a uint8 input).")
    return fn


all = _bool_reduce("all")
any = _bool_reduce("any")


def _pair(input, other, op):
    _check(input, op)
    if not isinstance(other, Tensor):
        if not isinstance(other, numbers.Number):
            raise TypeError(f"{op}(): argument 'other' must be Tensor, not {type(other).__name__}")
        other = tensor(other, dtype=input.dtype, device=input.device)
    check_same_device(op, input, other)
    return input, other


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other| elementwise (equal values, infinities included, are close; NaNs
    only with equal_nan), as torch.isclose."""
    input, other = _pair(input, other, "isclose")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{input.dtype.name} did not match {other.dtype.name}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    close = input == other
    if not input.dtype.is_floating:
        if input.dtype is dtypes.bool_ or (rtol == 0 and atol == 0):
            return close
        input, other = cast(input, dtypes.float32), cast(other, dtypes.float32)
    if equal_nan:
        close = close | (input.isnan() & other.isnan())
    if rtol == 0 and atol == 0:
        return close
    diff = (input - other).abs()
    return close | (diff.isfinite() & (diff <= atol + rtol * other.abs()))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element is close (isclose), as a Python bool."""
    return bool(all(isclose(input, other, rtol, atol, equal_nan)).item())


def equal(input, other):
    """True if the tensors have the same shape and elements (NaN equals nothing), as torch.equal."""
    _check(input, "equal")
    _check(other, "equal", "other")
    check_same_device("equal", input, other)
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(all(input == other).item())


def _all_false(like):
    return zeros(tuple(like.shape), dtype=dtypes.bool_, device=like.device)


def isneginf(input):
    """Whether each element is -inf."""
    _check(input, "isneginf")
    return (input == float("-inf")) if input.dtype.is_floating else _all_false(input)


def isposinf(input):
    """Whether each element is +inf."""
    _check(input, "isposinf")
    return (input == float("inf")) if input.dtype.is_floating else _all_false(input)


def signbit(input):
    """Whether each element's sign bit is set (-0.0 and negative NaNs included), as torch.signbit."""
    _check(input, "signbit")
    if not input.dtype.is_floating:
        return input < 0
    from .elementwise import function
    return function("copysign")(input.new_ones(()), input) < 0


# Beyond this many pairs isin sorts the test elements and searches them instead of comparing every pair.
_PAIRWISE_LIMIT = 1 << 22


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of `elements` is in `test_elements` (either may be a Python number), as torch.isin."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin(): at least one of 'elements' and 'test_elements' must be a Tensor")
    like = elements if isinstance(elements, Tensor) else test_elements
    if not isinstance(elements, Tensor):
        elements = tensor(elements, device=like.device)
    if not isinstance(test_elements, Tensor):
        test_elements = tensor(test_elements, device=like.device)
    check_same_device("isin", elements, test_elements)
    dtype = dtypes.promote(elements.dtype, test_elements.dtype)
    x, test = cast(elements, dtype), cast(test_elements, dtype).reshape(-1)
    if test.numel() == 0:
        found = _all_false(x)
    elif x.numel() * test.numel() <= _PAIRWISE_LIMIT:
        found = reduce.sum(x.reshape(tuple(x.shape) + (1,)) == test, (x.ndim,)) > 0
    else:
        from .selection import searchsorted
        ordered = test.sort().values
        at = searchsorted(ordered, x.reshape(-1)).clamp(max=ordered.numel() - 1)
        found = (ordered.index_select(0, at) == x.reshape(-1)).reshape(tuple(x.shape))
    return ~found if invert else found

