"""check_finite (shaders/check.wgsl): a NaN or infinity among a tensor's values, reported through the
runtime's error word at the next read-back (no sync of its own; it records into replays)."""

import struct

from ...dtypes import float32
from .. import kernels
from .dispatch import Kernel, Shader
from .views import check_view

CHECK_FINITE = Kernel(Shader("check.wgsl", {}), "check_finite", ((0, "read"), (1, "write"), (2, "uniform")))
_PARAMS = struct.Struct("<4I")  # n, offset, nan_code, inf_code


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
