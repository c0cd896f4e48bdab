"""check_values and device_error_flag (shaders/value_checks.wgsl): value checks reported through the runtime's
error word, and that word as the skip flag of an optimizer's updates. Neither syncs: both record into a replayed
step."""

import math
import struct

from ... import dtypes
from .. import kernels
from .dispatch import Kernel, Shader
from .runtime import HANDLER_CODE
from .views import INT32_MAX, INT32_MIN, check_view, contiguous_view, f32

_SHADER = Shader("value_checks.wgsl", {})
CHECK_VALUES = Kernel(_SHADER, "check_values", ((0, "read"), (1, "write"), (2, "uniform")),
                      ("INT", "NAN", "LOW", "HIGH", "ZERO"))
ERROR_FLAG = Kernel(_SHADER, "device_error_flag", ((3, "write"), (4, "read"), (5, "read"), (6, "uniform")), ("FOUND",))
_PARAMS = struct.Struct("<9I")
_FLAG_PARAMS = struct.Struct("<4I")
_F32 = struct.Struct("<f")
_WORDS = (dtypes.float32, dtypes.int32, dtypes.int64)  # read as they are stored, a 32-bit word an element


def _f32_bits(value):
    """The bits of `value` as float32 (the nearest; beyond the largest float32, an infinity)."""
    return struct.unpack("<I", _F32.pack(f32(value)))[0]


def _int_bound(value, up):
    """(the i32 bound, whether no int32 value meets it) of an integer view's bound."""
    bound = math.ceil(value) if up else math.floor(value)
    if (up and bound > INT32_MAX) or (not up and bound < INT32_MIN):
        return 0, True
    return max(INT32_MIN, min(INT32_MAX, bound)) & 0xFFFFFFFF, False


@kernels.check_values.implement("webgpu")
def check_values(rt, x, message, error, low=None, high=None, nan=False, zero=False, below_message=None):
    check_view(x, "x")
    n = x.numel
    if n == 0:
        return
    if x.dtype not in _WORDS:  # uint8, bool: as int32 (float16 comes as float32: the record's CAST policy)
        target = dtypes.int32
    else:
        target = x.dtype
    if target is not x.dtype or not x.is_contiguous():
        words = contiguous_view(rt.storage(n, target), x.shape, target)
        kernels.copy.impls["webgpu"](rt, words, x)
        x = words
    integer = x.dtype is not dtypes.float32
    nan = bool(nan) and not integer
    if any(v is not None and math.isnan(v) for v in (low, high)):
        raise ValueError("check_values: a NaN bound")
    message_code = rt.error_code(message, error)
    low_code = rt.error_code(below_message, error) if below_message is not None else message_code
    lo = hi = always = 0
    if low is not None:
        lo, never = _int_bound(low, True) if integer else (_f32_bits(low), False)
        always = low_code if never else 0
    if high is not None:
        hi, never = _int_bound(high, False) if integer else (_f32_bits(high), False)
        always = always or (message_code if never else 0)
    flags = dict(INT=integer, NAN=nan, LOW=low is not None, HIGH=high is not None, ZERO=bool(zero))
    params = _PARAMS.pack(n, x.offset, lo, hi, message_code, low_code, message_code, message_code, always)
    rt.dispatch(CHECK_VALUES, CHECK_VALUES.constants(flags), (x.storage, rt.errors), params,
                (min(-(-n // 64), 256), 1, 1))


@kernels.device_error_flag.implement("webgpu")
def device_error_flag(rt, out, found=None):
    """See the record; reads the error word as the GPU reaches this dispatch (kernels before it have written it)."""
    check_view(out, "out", dtype=dtypes.float32)
    if out.numel != 1:
        raise ValueError(f"device_error_flag: out must have one element, not {out.numel}")
    if found is not None:
        check_view(found, "found", dtype=dtypes.float32)
        if found.numel != 1:
            raise ValueError(f"device_error_flag: found must have one element, not {found.numel}")
    params = _FLAG_PARAMS.pack(out.offset, found.offset if found is not None else 0, 0, 0)
    rt.dispatch(ERROR_FLAG, ERROR_FLAG.constants(dict(FOUND=found is not None)),
                (out.storage, rt.errors, found.storage if found is not None else rt.dummy), params, (1, 1, 1))
