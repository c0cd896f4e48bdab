"""Dropout in one pass, its mask drawn inside and never stored (shaders/dropout.wgsl)."""

import struct

from ...dtypes import float32
from .. import kernels
from .dispatch import Kernel, Shader
from .elementwise import materialize
from .views import check_view, u32_fields

SHADER = Shader("dropout.wgsl", {})
_LAYOUT = ((0, "write"), (1, "read"), (2, "read"), (3, "uniform"))
DROPOUT = Kernel(SHADER, "dropout", _LAYOUT)
DROPOUT4 = Kernel(SHADER, "dropout4", _LAYOUT)
_PARAMS = struct.Struct("<7I2f")
WORKGROUP = 256


@kernels.dropout.implement("webgpu")
def dropout(rt, out, x, p, seed, offset):
    check_view(out, "out", dtype=float32, contiguous=True)
    check_view(x, "x", dtype=float32, contiguous=True)
    if x.shape != out.shape:
        raise ValueError(f"dropout: x has shape {x.shape} but out has shape {out.shape}")
    if not 0.0 < p < 1.0:
        raise ValueError(f"dropout: p must be in (0, 1), got {p}")
    n = out.numel
    if n == 0:
        return
    if x.storage is out.storage:
        x = materialize(rt, x)  # (a buffer is bound for reading or for writing)
    seed_slot, seed_value = u32_fields(seed, "seed")
    offset_slot, offset_value = u32_fields(offset, "offset")
    params = _PARAMS.pack(n, x.offset, out.offset, seed_value, offset_value, seed_slot, offset_slot, float(p),
                          1.0 / (1.0 - p))
    vec4 = n % 4 == 0 and x.offset % 4 == 0 and out.offset % 4 == 0
    kernel = DROPOUT4 if vec4 else DROPOUT
    groups = min(-(-n // (WORKGROUP * (4 if vec4 else 1))), rt.limits["max_compute_workgroups_per_dimension"])
    slots = tuple(s for s in (seed_slot, offset_slot) if s != 0xFFFFFFFF)
    rt.dispatch(kernel, (), (out.storage, x.storage, rt.scalars), params, (groups, 1, 1), slots)
