"""Checking and simplifying the strided views kernels receive (shared by every kernel family)."""

import math
import numbers

from ... import dtypes
from ..._view import View, _dense
from .dispatch import DynamicScalar
from .memory import Storage

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
F32_MAX = 3.4028234663852886e38
MAX_RANK = 8  # dims an elementwise kernel walks after merging (Params.shape holds 8)
# Index and label dtypes: int64 is held as int32 words (webgrad/dtypes.py), so kernels read both alike.
INDEX = (dtypes.int32, dtypes.int64)
# bfloat16, int8 and int16 storages hold 32-bit words, which kernels see as float32 and int32 views (narrow.py)
WIDE = {dtypes.bfloat16: dtypes.float32, dtypes.int8: dtypes.int32, dtypes.int16: dtypes.int32}


def check_view(view, name, dtype=None, contiguous=False, ndim=None):
    """Raise a clear error unless `view` is a valid view of a WebGPU storage (with `dtype`, or one of a tuple
    of dtypes such as INDEX, contiguous, of `ndim` dims when asked); return it. (Called for every operand of
    every kernel: one loop.)"""
    if not isinstance(view, View):
        raise TypeError(f"{name} must be a webgrad View, not {type(view).__name__}")
    storage = view.storage
    if not isinstance(storage, Storage):
        raise TypeError(f"{name} is not a WebGPU storage (got {type(storage).__name__}): move it to the device first")
    if view.dtype is not storage.dtype and view.dtype is not WIDE.get(storage.dtype):  # (narrow.py's wide twins)
        raise TypeError(f"{name} is a {view.dtype} view of a {storage.dtype} storage")
    if dtype is not None and view.dtype is not dtype and not (type(dtype) is tuple and view.dtype in dtype):
        shown = " or ".join(map(str, dtype)) if type(dtype) is tuple else dtype
        raise TypeError(f"{name} must be {shown}, not {view.dtype}")
    shape, strides = view.shape, view.strides
    if (ndim is not None and len(shape) != ndim) or len(shape) != len(strides):
        raise ValueError(f"{name} must have {ndim or len(strides)} dims, not shape {shape} (strides {strides})")
    dense, numel = _dense(shape)
    if strides == dense and numel:
        # Contiguous and not empty, as most operands are: it spans [offset, offset + numel). The general
        # loop below finds the same bounds at ~4x the cost in Pyodide, for every operand of every kernel.
        if view.offset >= 0 and view.offset + numel <= storage.numel:
            return view  # (out of bounds: the general path below raises the error)
    if contiguous and not view.is_contiguous():
        raise ValueError(f"{name} must be contiguous, got shape {shape} strides {strides}")
    low = high = view.offset
    for n, s in zip(shape, strides):
        if n <= 0:
            if n < 0:
                raise ValueError(f"{name} has a negative dimension: {shape}")
            return view  # empty: touches nothing
        if s > 0:
            high += (n - 1) * s
        else:
            low += (n - 1) * s
    if low < 0 or high >= storage.numel:
        raise IndexError(
            f"{name} (shape {shape}, strides {strides}, offset {view.offset}) reaches outside its storage "
            f"of {storage.numel} elements"
        )
    return view


def check_same_shape(out, *views):
    for name, v in views:
        if v.shape != out.shape:
            raise ValueError(f"{name} has shape {v.shape} but out has shape {out.shape} (broadcast with stride-0 views first)")


def holds_dtype(values, wanted):
    """Whether any View among `values` (or in a list or tuple among them: a kernel's VIEWS argument) has a dtype in
    `wanted` (a kernel call's arguments, checked before a launcher that stores some dtypes otherwise)."""
    for v in values:
        if isinstance(v, View):
            if v.dtype in wanted:
                return True
        elif isinstance(v, (list, tuple)) and any(isinstance(w, View) and w.dtype in wanted for w in v):
            return True
    return False


def merge_dims(shape, strides_per_operand):
    """Drop size-1 dims and merge neighbouring dims that are contiguous in every operand.

    Returns [(size, [stride of each operand]), ...]; usually one or two dims remain.
    """
    merged = []
    for d, n in enumerate(shape):
        if n == 1:
            continue
        strides = [s[d] for s in strides_per_operand]
        if merged:
            prev_n, prev_strides = merged[-1]
            if all(ps == s * n for ps, s in zip(prev_strides, strides)):
                merged[-1] = (prev_n * n, strides)
                continue
        merged.append((n, strides))
    return merged


def contiguous_view(storage, shape, dtype, offset=0):
    return View(storage, shape, View.contiguous_strides(shape), offset, dtype)


def same_view(a, b):
    return a.storage is b.storage and a.offset == b.offset and a.shape == b.shape and a.strides == b.strides


# ------------------------------------------------------------------ scalars


def f32(value):
    """A Python number as the nearest float32 (overflow goes to +-inf rather than raising)."""
    v = float(value)
    if math.isfinite(v) and abs(v) > F32_MAX:
        return math.copysign(math.inf, v)
    return v


def i32(value):
    """A Python number as an int32 (infinities and out-of-range values clamp to the int32 range)."""
    v = float(value)
    if math.isnan(v):
        return 0
    if math.isinf(v):
        return INT32_MAX if v > 0 else INT32_MIN
    return max(INT32_MIN, min(INT32_MAX, int(value)))


def is_integral(value):
    """True when a scalar is exact in int32 arithmetic (infinite bounds count: they clamp)."""
    if isinstance(value, DynamicScalar):
        return False
    v = float(value)
    return math.isinf(v) or (v.is_integer() and INT32_MIN <= v <= INT32_MAX)


def scalar_fields(value):
    """(slot, f32 value, i32 value) for a kernel scalar: a number, or a DynamicScalar (kind "f32")."""
    if isinstance(value, DynamicScalar):
        if value.kind != "f32":
            raise TypeError(f"this kernel reads float scalars; {value!r} holds a {value.kind}")
        return value.slot, 0.0, 0
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, numbers.Real):
        raise TypeError(f"a kernel scalar must be a Python number or a DynamicScalar, not {type(value).__name__}")
    return 0xFFFFFFFF, f32(value), i32(value)


def u32_fields(value, name):
    """(slot, value) for a u32 kernel scalar: a non-negative int, or a DynamicScalar of kind "u32"."""
    if isinstance(value, DynamicScalar):
        if value.kind != "u32":
            raise TypeError(f"{name} must be a DynamicScalar of kind 'u32', not {value.kind!r}")
        return value.slot, 0
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int or a DynamicScalar, not {type(value).__name__}")
    return 0xFFFFFFFF, int(value) & 0xFFFFFFFF
