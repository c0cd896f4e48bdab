"""Counter-based random numbers (shaders/random.wgsl), the same stream as every other backend."""

import math
import struct

from ...dtypes import float32, int32, int64, uint8
from ..kernels import RANDOM_DISTS
from .. import kernels
from .elementwise import IDENTITY, UNARY_TO_U8, launch
from .dispatch import Kernel, Shader, dtype_code
from .views import check_view, contiguous_view, f32, u32_fields

DIST_CODES = {name: code for code, name in enumerate(RANDOM_DISTS)}
SHADER = Shader("random.wgsl", {"RNG_" + n.upper(): c for n, c in DIST_CODES.items()})
RANDOM = Kernel(SHADER, "random", ((0, "write"), (1, "read"), (2, "uniform")), ("DIST", "OUT_DTYPE"))

_PARAMS = struct.Struct("<7Ii2f")  # n, out_offset, seed, offset, seed_slot, offset_slot, span | low | a, b
WORKGROUP = 256


@kernels.random.implement("webgpu")
def random(rt, out, dist, seed, offset, a=0.0, b=1.0):
    """seed and offset: ints, or DynamicScalars of kind "u32" (to draw new numbers on each replay)."""
    if dist not in DIST_CODES:
        raise ValueError(f"unknown distribution {dist!r}; expected one of {RANDOM_DISTS}")
    check_view(out, "out", contiguous=True)
    if out.dtype not in (float32, int32, int64, uint8):
        raise TypeError(f"random writes float32, int32, int64 or uint8, not {out.dtype}")
    n = out.numel
    if n == 0:
        return
    if out.dtype is uint8:  # bytes are packed four to a word: draw into int32, then pack
        tmp = contiguous_view(rt.storage(n, int32), out.shape, int32)
        random(rt, tmp, dist, seed, offset, a, b)
        launch(rt, UNARY_TO_U8, IDENTITY, out, [tmp], int_math=True)
        return
    seed_slot, seed_value = u32_fields(seed, "seed")
    offset_slot, offset_value = u32_fields(offset, "offset")
    low, span = 0, 0
    if dist == "randint":
        if not (math.isfinite(a) and math.isfinite(b)) or b < a:
            raise ValueError(f"randint needs finite bounds with low <= high, got [{a}, {b})")
        low, span = int(a), int(b) - int(a)
        if out.dtype is int64 and span and not (-(2**31) <= low and low + span - 1 < 2**31):
            # int64 holds the int32 range on WebGPU (webgrad/dtypes.py)
            raise RuntimeError(f"randint: int64 values in [{low}, {low + span}) are outside the int32 range, the "
                               "values WebGPU holds in an int64 tensor (see webgrad.dtypes); draw them on the CPU")
        if a != low or b != int(b) or not -(2**31) <= low < 2**31 or span >= 2**32:
            raise ValueError(f"randint bounds must be integers in the int32 range, got [{a}, {b})")
    params = _PARAMS.pack(n, out.offset, seed_value, offset_value, seed_slot, offset_slot, span, low, f32(a), f32(b))
    constants = RANDOM.constants({"DIST": DIST_CODES[dist], "OUT_DTYPE": dtype_code(out.dtype)})
    slots = tuple(s for s in (seed_slot, offset_slot) if s != 0xFFFFFFFF)
    groups = min(-(-n // WORKGROUP), rt.limits["max_compute_workgroups_per_dimension"])
    rt.dispatch(RANDOM, constants, (out.storage, rt.scalars), params, (groups, 1, 1), slots)
