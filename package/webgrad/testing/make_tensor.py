"""torch.testing.make_tensor: a tensor of random values in [low, high), with torch's defaults and checks (floats in
[-9, 9), integers in [-9, 10), bools either), for tests that need an input of some shape and dtype."""

import math
import warnings
from collections.abc import Sequence

from .. import dtypes


def _low_high(dtype, low, high, *, lowest, highest, default_low, default_high):
    """low and high checked and clamped to what dtype holds (integers: rounded up), as torch's."""
    low = default_low if low is None else low
    high = default_high if high is None else high
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
    if low == high and dtype.is_floating:
        warnings.warn("Passing `low==high` to `torch.testing.make_tensor` for floating or complex types is "
                      "deprecated since 2.1 and will be removed in 2.3. Use `torch.full(...)` instead.",
                      FutureWarning, stacklevel=3)
    elif low >= high:
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    elif high < lowest or low >= highest:
        raise ValueError(f"The value interval specified by `low` and `high` is [{low}, {high}), but {dtype} only "
                         f"supports [{lowest}, {highest})")
    low, high = min(max(low, lowest), highest), min(max(high, lowest), highest)
    return (math.ceil(low), math.ceil(high)) if not dtype.is_floating else (low, high)


def make_tensor(*shape, dtype, device, low=None, high=None, requires_grad=False, noncontiguous=False,
                exclude_zero=False, memory_format=None):
    """A tensor of `shape` (ints, or one sequence) with random values in [low, high) (see the module doc).
    noncontiguous: a strided view of a larger tensor; exclude_zero: zeros replaced by 1 (integers) or the
    dtype's smallest normal number."""
    from .. import finfo, full, iinfo, randint
    from ..random import rand
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = shape[0]
    shape = tuple(shape)
    dtype = dtypes.to_dtype(dtype)
    if noncontiguous and memory_format is not None:
        raise ValueError("The parameters `noncontiguous` and `memory_format` are mutually exclusive, but got "
                         f"noncontiguous={noncontiguous} and memory_format={memory_format}")
    integral = not dtype.is_floating and not dtype.is_complex
    if requires_grad and integral:
        raise ValueError(f"`requires_grad=True` is not supported for boolean and integral dtypes, but got "
                         f"dtype={dtype}")
    if dtype.is_complex:
        raise TypeError(f"The requested dtype '{dtype}' is not supported by torch.testing.make_tensor() in webgrad")
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:
        shape = (*shape[:-1], 2 * shape[-1])
    if dtype is dtypes.bool_:
        low, high = _low_high(dtype, low, high, lowest=0, highest=2, default_low=0, default_high=2)
        result = randint(low, high, shape, device=device, dtype=dtype)
    elif integral:
        info = iinfo(dtype)
        low, high = _low_high(dtype, low, high, lowest=info.min, highest=info.max + (dtype is not dtypes.int64),
                              default_low=-9, default_high=10)
        result = randint(low, high, shape, device=device, dtype=dtype)
    else:
        info = finfo(dtype)
        low, high = _low_high(dtype, low, high, lowest=info.min, highest=info.max, default_low=-9, default_high=9)
        if low == high:
            result = full(shape, low, device=device, dtype=dtype)
        else:  # low + (high - low) * u, with the span halved first where it would overflow the dtype
            u = rand(shape, device=device, dtype=dtypes.float32 if dtype.itemsize < 4 else dtype)
            result = (u * (high / 2 - low / 2) * 2 + low).to(dtype)
    if noncontiguous:
        result = result[..., 1::2]
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero:
        result = result.masked_fill(result == 0, 1 if integral else finfo(dtype).tiny)
    if dtype.is_floating:
        result.requires_grad = requires_grad
    return result
