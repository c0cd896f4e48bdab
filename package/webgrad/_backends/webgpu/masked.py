"""masked_fill (shaders/masked.wgsl): elementwise.wgsl's walker with the mask as a second operand."""

import math
import numbers

from ...dtypes import bool_, float32, int32, int64
from .. import kernels
from . import elementwise, views
from .dispatch import Kernel, Shader
from .views import check_same_shape, check_view

SHADER = Shader("masked.wgsl", elementwise._shader_inputs)  # (elementwise.wgsl's op codes and cases, included)
_IN = ("IN0_DTYPE", "IN0_FROM_OUT", "IN1_DTYPE", "IN1_FROM_OUT")
MASKED_FILL = Kernel(SHADER, "masked_fill", elementwise._LAYOUT, ("INT_MATH", "CONTIGUOUS", "OUT_DTYPE", *_IN))


def _fits_int32(value):
    """Whether a Python number, truncated as the kernel converts it, lies in the int32 range."""
    return (isinstance(value, numbers.Real) and math.isfinite(value)
            and views.INT32_MIN <= math.trunc(value) <= views.INT32_MAX)


@kernels.masked_fill.implement("webgpu")
def masked_fill(rt, out, x, mask, value):
    check_view(out, "out")
    check_view(x, "x", dtype=out.dtype)
    check_view(mask, "mask", dtype=bool_)
    check_same_shape(out, ("x", x), ("mask", mask))
    if out.dtype not in (float32, int32, int64):
        raise TypeError(f"masked_fill on WebGPU writes float32, int32 or int64, not {out.dtype}")
    if out.dtype is int64 and not _fits_int32(value):  # int64 holds the int32 range on WebGPU (dtypes.py)
        raise RuntimeError(f"masked_fill: {value!r} is outside the int32 range, the values WebGPU holds in an int64 "
                           "tensor (see webgrad.dtypes)")
    elementwise.launch(rt, MASKED_FILL, 0, out, [x, mask], a=value, int_math=out.dtype is not float32)
