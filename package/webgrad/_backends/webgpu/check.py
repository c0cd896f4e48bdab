"""check_finite (shaders/check.wgsl): a NaN or infinity among a tensor's values, reported through the
runtime's error word at the next read-back (no sync of its own; it records into replays)."""

import struct

from ...dtypes import float32
from .. import kernels
from .dispatch import Kernel, Shader
from .views import check_view

_SHADER = Shader("check.wgsl", {})
CHECK_FINITE = Kernel(_SHADER, "check_finite", ((0, "read"), (1, "write"), (2, "uniform")))
CHECK_INT64 = Kernel(_SHADER, "check_int64", ((0, "read"), (1, "write"), (2, "uniform"), (3, "read")))
_PARAMS = struct.Struct("<4I")  # n, offset, nan_code (check_int64: its one code), inf_code


def check_finite(rt, x, nan_code, inf_code):
    """Record a check of the contiguous float32 view x: codes from rt.error_code for a NaN, an infinity."""
    check_view(x, "x", dtype=float32, contiguous=True)
    if x.numel == 0:
        return
    groups = min(-(-x.numel // 64), 256)
    rt.dispatch(CHECK_FINITE, (), (x.storage, rt.errors), _PARAMS.pack(x.numel, x.offset, nan_code, inf_code),
                (groups, 1, 1))


@kernels.check_finite.implement("webgpu")
def check_finite_kernel(rt, x, nan_message, inf_message, error):
    """The registry's check_finite: the messages become error codes (Runtime.error_code)."""
    check_finite(rt, x, rt.error_code(nan_message, error), rt.error_code(inf_message, error))


def check_int64(rt, out, hi, message):
    """Record a check of an exact int64 total: out, its contiguous low words (an int64 view); hi, a storage of
    out.numel second words (check.wgsl's check_int64). A total outside the int32 range raises
    RuntimeError(message) at the next read-back (message may use {value}, the element, and {size})."""
    n = out.numel
    if n == 0:
        return
    code = rt.error_code(message, RuntimeError)
    rt.dispatch(CHECK_INT64, (), (out.storage, rt.errors, hi), _PARAMS.pack(n, out.offset, code, 0),
                (min(-(-n // 64), 256), 1, 1))
