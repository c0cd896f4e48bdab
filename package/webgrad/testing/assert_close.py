"""torch.testing.assert_close: tensors, Python numbers, and sequences and mappings of them, equal within tolerances.

Values are read to the host and compared in Python (no NumPy needed): |actual - expected| <= atol + rtol *
|expected|, each difference rounded to the tensors' dtype as PyTorch computes it, with PyTorch's default
tolerances per dtype and its messages (the mismatched elements, the greatest differences and where they are).
"""

import math
import struct
from collections.abc import Mapping, Sequence

from .. import dtypes
from .._tensor import Tensor

# PyTorch's default (rtol, atol) by dtype; every other dtype compares exactly
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7)}
_PY_TOLERANCES = {bool: (0.0, 0.0), int: (0.0, 0.0), float: _TOLERANCES["float64"], complex: _TOLERANCES["float64"]}


class _Mismatch(Exception):
    """A failed comparison: its message, and whether the caller raises it as TypeError or ValueError."""

    def __init__(self, message, kind=AssertionError):
        super().__init__(message)
        self.kind = kind


def _round(value, dtype_name):
    """value rounded to float16 or float32, as a result computed in that dtype."""
    if dtype_name in ("float16", "float32") and math.isfinite(value):
        fmt = "e" if dtype_name == "float16" else "f"
        try:
            return struct.unpack(fmt, struct.pack(fmt, value))[0]
        except OverflowError:
            return math.copysign(math.inf, value)
    return value


def _close(a, e, rtol, atol, equal_nan):
    if a == e:
        return True
    if math.isnan(a) or math.isnan(e):
        return equal_nan and math.isnan(a) and math.isnan(e)
    if math.isinf(a) or math.isinf(e):
        return False
    return abs(a - e) <= atol + rtol * abs(e)


def _differences(a, e, floating, dtype_name):
    """(absolute, relative) difference of two elements, as PyTorch's message computes them."""
    if not floating:
        d = abs(int(a) - int(e))
        return d, (d / abs(int(e)) if e else (math.inf if d else math.nan))
    d = _round(abs(a - e), dtype_name) if not (math.isnan(a) or math.isnan(e)) else math.nan
    if math.isinf(a) and math.isinf(e) and a != e:
        d = math.inf
    r = _round(d / abs(e), dtype_name) if e else (math.inf if d else math.nan)
    if math.isnan(d):
        r = math.nan
    return d, r


def _index(flat, shape):
    out = []
    for size in reversed(shape):
        out.append(flat % size)
        flat //= size
    return tuple(reversed(out))


def _greatest(values):
    """(value, position) of the largest, NaN winning as torch.max's."""
    best, where = None, 0
    for i, v in enumerate(values):
        if isinstance(v, float) and math.isnan(v):
            return v, i
        if best is None or v > best:
            best, where = v, i
    return best, where


def _tolerance_text(tol, exact):
    return "" if exact else f" (up to {tol} allowed)"


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride):
    if actual.shape != expected.shape:
        raise _Mismatch(f"The values for attribute 'shape' do not match: {actual.shape} != {expected.shape}.")
    if check_device and actual.device != expected.device:
        raise _Mismatch(f"The values for attribute 'device' do not match: {actual.device} != {expected.device}.")
    if check_dtype and actual.dtype is not expected.dtype:
        raise _Mismatch(f"The values for attribute 'dtype' do not match: {actual.dtype} != {expected.dtype}.")
    if check_stride and actual.stride() != expected.stride():
        raise _Mismatch(f"The values for attribute 'stride()' do not match: {actual.stride()} != "
                        f"{expected.stride()}.")
    if actual.dtype.is_complex or expected.dtype.is_complex:  # as torch: real and imaginary parts each close
        from .._complex import view_as_real
        actual, expected = (view_as_real(t.to(dtypes.complex64)) for t in (actual, expected))
        return _compare_tensors(actual, expected, rtol, atol, equal_nan, False, False, False)
    dtype = actual.dtype
    if actual.dtype is not expected.dtype:
        dtype = dtypes.promote_types(actual.dtype, expected.dtype)
    if rtol is None:
        rtol, atol = (max(_TOLERANCES.get(d.name, (0.0, 0.0))[i] for d in (actual.dtype, expected.dtype))
                      for i in (0, 1))
    floating = dtype.is_floating
    a_values = actual.detach().reshape(-1).tolist()
    e_values = expected.detach().reshape(-1).tolist()
    if floating:
        a_values, e_values = [float(v) for v in a_values], [float(v) for v in e_values]
    else:
        a_values, e_values = [int(v) for v in a_values], [int(v) for v in e_values]
    matches = [(a == e) if not floating else _close(a, e, rtol, atol, equal_nan) for a, e in zip(a_values, e_values)]
    if all(matches):
        return
    exact = rtol == 0 and atol == 0
    diffs = [(0, 0.0) if m else _differences(a, e, floating, dtype.name)
             for a, e, m in zip(a_values, e_values, matches)]
    if actual.ndim == 0:
        d, r = diffs[0]
        raise _Mismatch(f"Scalars are not {'equal' if exact else 'close'}!\n\nExpected {e_values[0]} but got "
                        f"{a_values[0]}.\nAbsolute difference: {d}{_tolerance_text(atol, exact)}\n"
                        f"Relative difference: {r}{_tolerance_text(rtol, exact)}")
    mismatched, total = matches.count(False), len(matches)
    max_abs, abs_at = _greatest([d for d, _ in diffs])
    max_rel, rel_at = _greatest([r for _, r in diffs])
    shape = tuple(actual.shape)
    raise _Mismatch(f"Tensor-likes are not {'equal' if exact else 'close'}!\n\n"
                    f"Mismatched elements: {mismatched} / {total} ({mismatched / total:.1%})\n"
                    f"Greatest absolute difference: {max_abs} at index {_index(abs_at, shape)}"
                    f"{_tolerance_text(atol, exact)}\n"
                    f"Greatest relative difference: {max_rel} at index {_index(rel_at, shape)}"
                    f"{_tolerance_text(rtol, exact)}")


def _compare_numbers(actual, expected, rtol, atol, equal_nan, check_dtype):
    if check_dtype and type(actual) is not type(expected):
        raise _Mismatch(f"The (d)types do not match: {type(actual)} != {type(expected)}.")
    if rtol is None:
        rtol, atol = (max(_PY_TOLERANCES[type(v)][i] for v in (actual, expected)) for i in (0, 1))
    floating = isinstance(actual, float) or isinstance(expected, float)
    a, e = (float(actual), float(expected)) if floating else (int(actual), int(expected))
    if (a == e) if not floating else _close(a, e, rtol, atol, equal_nan):
        return
    exact = rtol == 0 and atol == 0
    d = abs(a - e)
    r = d / abs(e) if e else (math.inf if d else math.nan)
    raise _Mismatch(f"Scalars are not {'equal' if exact else 'close'}!\n\nExpected {expected} but got {actual}.\n"
                    f"Absolute difference: {d}{_tolerance_text(atol, exact)}\n"
                    f"Relative difference: {r}{_tolerance_text(rtol, exact)}")


def _is_number(x):
    return isinstance(x, (bool, int, float))


def _compare(actual, expected, path, options):
    if isinstance(actual, Tensor) and isinstance(expected, Tensor):
        return _compare_tensors(actual, expected, options["rtol"], options["atol"], options["equal_nan"],
                                options["check_device"], options["check_dtype"], options["check_stride"]), path
    if _is_number(actual) and _is_number(expected):
        return _compare_numbers(actual, expected, options["rtol"], options["atol"], options["equal_nan"],
                                options["check_dtype"]), path
    if actual is None and expected is None:
        return None, path
    sequences = all(isinstance(x, Sequence) and not isinstance(x, str) for x in (actual, expected))
    if sequences:
        if len(actual) != len(expected):
            raise _Mismatch(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare_item(a, e, path + [i], options)
        return None, path
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        keys_a, keys_e = set(actual), set(expected)
        if keys_a != keys_e:
            missing, extra = sorted(keys_e - keys_a, key=repr), sorted(keys_a - keys_e, key=repr)
            raise _Mismatch(f"The keys of the mappings do not match:\nMissing keys in the actual mapping: {missing}\n"
                            f"Additional keys in the actual mapping: {extra}")
        for key in actual:
            _compare_item(actual[key], expected[key], path + [key], options)
        return None, path
    raise _Mismatch(f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}.",
                    TypeError)


def _compare_item(actual, expected, path, options):
    try:
        _compare(actual, expected, path, options)
    except _Mismatch as e:
        if getattr(e, "located", False):
            raise
        where = "".join(f"[{p!r}]" for p in path)
        located = _Mismatch(f"{e}\n\nThe failure occurred for item {where}", e.kind)
        located.located = True
        raise located from None


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """Raise AssertionError unless actual and expected are close, as torch.testing.assert_close: tensors
    elementwise (|actual - expected| <= atol + rtol * |expected|; NaN equal to NaN only with equal_nan) after
    matching shape, device and dtype (check_dtype=False compares in the promoted dtype), Python numbers, and
    sequences and mappings of them, item by item. rtol and atol default by dtype as PyTorch's (float32: 1.3e-6
    and 1e-5; float16: 1e-3 and 1e-5; float64: 1e-7 each; integers and bool: exact) and come together (ValueError
    for one alone). msg replaces the message, or a callable maps the message to the one raised. Inputs of
    types it cannot compare raise TypeError."""
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                         f"{'rtol' if rtol is None else 'atol'}.")
    options = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device, check_dtype=check_dtype,
                   check_stride=check_stride)
    try:
        _compare(actual, expected, [], options)
    except _Mismatch as e:
        if e.kind is not AssertionError:
            raise e.kind(str(e)) from None
        message = str(e)
        if callable(msg):
            message = msg(message)
        elif msg is not None:
            message = msg
        raise AssertionError(message) from None
