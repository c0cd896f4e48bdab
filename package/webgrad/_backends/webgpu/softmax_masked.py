"""The masked softmax of hand-written attention, forward and backward (shaders/softmax_masked.wgsl).

forward/backward below also take a dropout that follows the softmax (the seal of a recorded step fuses a GPT's
`attn_dropout` into them: fusion.py); the registry's records are the plain ones.
"""

import struct

from ...dtypes import bool_, float32
from .. import kernels
from .dispatch import Kernel, Shader, grid, pow2_at_least
from .elementwise import materialize
from .views import check_view, u32_fields

SHADER = Shader("softmax_masked.wgsl", {})
_FWD = ((0, "write"), (1, "read"), (2, "read"), (3, "write"), (4, "read"), (5, "uniform"), (6, "read"))
_BWD = ((0, "write"), (1, "read"), (2, "read"), (4, "read"), (5, "uniform"), (6, "read"))
_FLAGS = ("VEC", "MASKED", "DROPOUT", "IN_FROM_OUT")
FORWARD = Kernel(SHADER, "softmax_masked", _FWD, ("TPR", "VALUE_INF") + _FLAGS)
FORWARD_ROWS = Kernel(SHADER, "softmax_masked_rows", _FWD, ("VALUE_INF",) + _FLAGS)
BACKWARD = Kernel(SHADER, "softmax_masked_backward", _BWD, ("TPR",) + _FLAGS)
BACKWARD_ROWS = Kernel(SHADER, "softmax_masked_backward_rows", _BWD, _FLAGS)
KERNELS = (FORWARD, FORWARD_ROWS, BACKWARD, BACKWARD_ROWS)
_PARAMS = struct.Struct("<17I4f")
ROWS_WG = 64
NO_SLOT = 0xFFFFFFFF


def _shape(view, name):
    check_view(view, name, dtype=float32, contiguous=True, ndim=4)
    return view.shape


def _mask(mask, shape):
    if mask is None:
        return 0, (0, 0, 0, 0)
    check_view(mask, "mask", dtype=bool_, ndim=4)
    if mask.shape != shape or any(s < 0 for s in mask.strides):
        raise ValueError(f"softmax_masked: mask has shape {mask.shape} (strides {mask.strides}), expected {shape}")
    return mask.offset, mask.strides


def _threads(cols):
    return min(256, max(32, pow2_at_least(-(-cols // 4))))


def _run(rt, backward, out, x, y, mask, value, scale, dropped, p, seed, offset):
    """One dispatch: the forward (x: the scores, y: None) or the backward (x: the gradient, y: the forward's y)."""
    shape = _shape(out, "out")
    if _shape(x, "grad" if backward else "x") != shape or (y is not None and _shape(y, "y") != shape):
        raise ValueError(f"softmax_masked: operands of shapes {x.shape}, {shape} differ")
    if dropped is not None and _shape(dropped, "dropped") != shape:
        raise ValueError(f"softmax_masked: dropped has shape {dropped.shape}, expected {shape}")
    d0, d1, d2, cols = shape
    rows = d0 * d1 * d2
    if rows * cols == 0:
        return
    m_off, m_strides = _mask(mask, shape)
    x, y = (materialize(rt, v) if v is not None and v.storage is out.storage else v for v in (x, y))
    dropping = p > 0.0
    seed_slot, seed_value = u32_fields(seed, "seed") if dropping else (NO_SLOT, 0)
    offset_slot, offset_value = u32_fields(offset, "offset") if dropping else (NO_SLOT, 0)
    vec = cols % 4 == 0 and all(v.offset % 4 == 0 for v in (out, x, y, dropped) if v is not None)
    value = float(value)
    flags = {"VEC": vec, "MASKED": mask is not None, "VALUE_INF": value == float("-inf"), "DROPOUT": dropping,
             "IN_FROM_OUT": False}
    if backward:  # x_off: where grad_x goes; g_off: the gradient
        params = _PARAMS.pack(d1, d2, cols, rows, out.offset, y.offset, x.offset, 0, m_off, *m_strides, seed_value,
                              offset_value, seed_slot, offset_slot, 0.0, float(scale), float(p),
                              1.0 / (1.0 - p) if dropping else 1.0)
    else:
        params = _PARAMS.pack(d1, d2, cols, rows, x.offset, out.offset, 0, dropped.offset if dropped is not None else 0,
                              m_off, *m_strides, seed_value, offset_value, seed_slot, offset_slot,
                              value if value != float("-inf") else 0.0, float(scale), float(p),
                              1.0 / (1.0 - p) if dropping else 1.0)
    mask_storage = mask.storage if mask is not None else rt.dummy
    scalars = rt.scalars
    if backward:
        storages = (out.storage, x.storage, mask_storage, scalars, y.storage)
    else:
        storages = (out.storage, x.storage, mask_storage, dropped.storage if dropped is not None else rt.spare(0),
                    scalars, rt.dummy)
    limit = rt.limits["max_compute_workgroups_per_dimension"]
    slots = tuple(s for s in (seed_slot, offset_slot) if s != NO_SLOT)
    if rt.variant["softmax_rows"]:
        kernel = BACKWARD_ROWS if backward else FORWARD_ROWS
        groups = grid(-(-rows // ROWS_WG), limit)
    else:
        kernel = BACKWARD if backward else FORWARD
        flags["TPR"] = _threads(cols)
        groups = grid(rows, limit)
    rt.dispatch(kernel, kernel.constants(flags), storages, params, groups, slots)


def forward(rt, out, x, mask, value, scale=1.0, dropped=None, p=0.0, seed=0, offset=0):
    _run(rt, False, out, x, None, mask, value, scale, dropped, p, seed, offset)


def backward(rt, out, grad, y, mask, scale=1.0, p=0.0, seed=0, offset=0):
    _run(rt, True, out, grad, y, mask, 0.0, scale, None, p, seed, offset)


@kernels.softmax_masked.implement("webgpu")
def softmax_masked(rt, out, x, mask, value, scale=1.0):
    forward(rt, out, x, mask, value, scale)


@kernels.softmax_masked_backward.implement("webgpu")
def softmax_masked_backward(rt, out, grad, y, mask, scale=1.0):
    backward(rt, out, grad, y, mask, scale)


# ------------------------------------------------------------------ a recorded step's chains (fusion.py)

def is_forward(launch):
    return launch is not None and launch.kernel in (FORWARD, FORWARD_ROWS)


def is_backward(launch):
    return launch is not None and launch.kernel in (BACKWARD, BACKWARD_ROWS)


def fields(launch):
    """The launch's Params as a dict (softmax_masked.wgsl's names)."""
    names = ("d1", "d2", "cols", "rows", "x_off", "y_off", "g_off", "drop_off", "m_off", "m_s0", "m_s1", "m_s2",
             "m_s3", "seed", "offset", "seed_slot", "offset_slot", "value", "scale", "p_drop", "drop_scale")
    return dict(zip(names, _PARAMS.unpack(launch.params)))


def relaunch(rt, launch, slots=(), in_from_out=False, **changes):
    """The launch with some Params changed (scale, offsets, a dropout: p_drop > 0 turns DROPOUT on), reading its
    input through its output's binding where in_from_out; None where the change is not one the kernel takes (vec4
    loads on an offset that is no multiple of 4)."""
    f = fields(launch)
    f.update(changes)
    constants = dict(launch.constants)
    constants["DROPOUT"] = int(f["p_drop"] > 0.0)
    constants["IN_FROM_OUT"] = int(in_from_out)
    if constants["VEC"] and any(f[k] % 4 for k in ("x_off", "y_off", "g_off", "drop_off")):
        return None
    params = _PARAMS.pack(*f.values())
    kernel = launch.kernel
    return rt.launch(kernel, kernel.constants(constants), params, launch.groups,
                     tuple(sorted(set(launch.slots) | set(slots))))
