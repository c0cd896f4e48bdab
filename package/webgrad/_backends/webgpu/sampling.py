"""multinomial (shaders/sampling.wgsl): one workgroup per row, the float32 walk of kernels.multinomial, so the draws
are the CPU reference's; bad weights are reported through the runtime's error word at the next read-back."""

import struct

from ...dtypes import float32
from .. import kernels
from .dispatch import Kernel, Shader, grid
from .views import INDEX, check_view, u32_fields

SHADER = Shader("sampling.wgsl", {})
MULTINOMIAL = Kernel(SHADER, "multinomial", ((0, "write"), (1, "read"), (2, "read"), (3, "write"), (4, "write"),
                                             (5, "uniform")))
_PARAMS = struct.Struct("<13I")
CHUNKS = 256  # sampling.wgsl's
BAD_VALUE = "probability tensor contains either `inf`, `nan` or element < 0"
ZERO_SUM = "invalid multinomial distribution (sum of probabilities <= 0)"


@kernels.multinomial.implement("webgpu")
def multinomial(rt, out, probs, seed, offset, replacement):
    check_view(probs, "probs", dtype=float32, contiguous=True, ndim=2)
    check_view(out, "out", dtype=INDEX, contiguous=True, ndim=2)
    rows, n = probs.shape
    s = out.shape[1]
    if out.shape[0] != rows:
        raise ValueError(f"multinomial: out {out.shape} must have probs' {rows} rows")
    if rows == 0 or s == 0:
        return
    seed_slot, seed_value = u32_fields(seed, "seed")
    offset_slot, offset_value = u32_fields(offset, "offset")
    codes = [rt.error_code(message, RuntimeError) for message in (BAD_VALUE, ZERO_SUM)]
    params = _PARAMS.pack(rows, n, s, -(-n // CHUNKS), probs.offset, out.offset, seed_value, offset_value, seed_slot,
                          offset_slot, 1 if replacement else 0, *codes)
    scratch = rt.spare(0) if replacement else rt.storage(rows * n, float32)  # the weights draws zero
    slots = tuple(slot for slot in (seed_slot, offset_slot) if slot != 0xFFFFFFFF)
    rt.dispatch(MULTINOMIAL, (), (out.storage, probs.storage, rt.scalars, scratch, rt.errors), params, grid(rows),
                slots)
