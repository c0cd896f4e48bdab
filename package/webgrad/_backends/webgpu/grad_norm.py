"""clip_grad_norm_'s fused kernels (shaders/grad_norm.wgsl): the total norm of all gradients and their
scaling, in 2 * ceil(len(grads) / 4) + 1 dispatches, with no read-back (so it records into replays)."""

import math
import struct

from .. import kernels
from ...dtypes import float32
from .dispatch import Kernel, Shader
from .views import check_view

SHADER = Shader("grad_norm.wgsl", {})
GRADS = 4  # gradients per dispatch (grad_norm.wgsl's GRADS)
_BINDINGS = tuple((i, "write") for i in range(GRADS)) + ((4, "write"), (5, "write"), (6, "uniform"))
NORM_PARTIALS = Kernel(SHADER, "norm_partials", _BINDINGS, ("P_KIND",))
NORM_FINISH = Kernel(SHADER, "norm_finish", _BINDINGS, ("P_KIND",))
SCALE = Kernel(SHADER, "scale", _BINDINGS)
_PARAMS = struct.Struct("<4I4I2I2fI")  # n[4], off[4], partial_offset, count, p, max_norm, error_code
WORKGROUP = 256
ELEMENTS_PER_GROUP = 4096  # partial sums: one workgroup per this many elements of a chunk, up to MAX_GROUPS
MAX_GROUPS = 256


def _p_kind(norm_type):
    if norm_type == 2.0:
        return 0
    if norm_type == 1.0:
        return 1
    if norm_type == math.inf:
        return 2
    if norm_type > 0 and math.isfinite(norm_type):
        return 3
    raise ValueError(f"clip_grad_norm_: norm_type must be positive or inf on WebGPU, got {norm_type}")


def _chunks(grads):
    """Groups of up to GRADS gradients, no buffer twice in a group (it would be bound writable twice)."""
    chunks, current = [], []
    for g in grads:
        if len(current) == GRADS or any(c.storage.buffer is g.storage.buffer for c in current):
            chunks.append(current)
            current = []
        current.append(g)
    if current:
        chunks.append(current)
    return chunks


def _storages(rt, chunk, scratch):
    return tuple(g.storage for g in chunk) + tuple(rt.spare(k) for k in range(len(chunk), GRADS)) + \
        (scratch, rt.errors)


def _params(chunk, partial_offset=0, count=0, p=0.0, max_norm=0.0, error_code=0):
    n = [g.numel for g in chunk] + [0] * (GRADS - len(chunk))
    off = [g.offset for g in chunk] + [0] * (GRADS - len(chunk))
    return _PARAMS.pack(*n, *off, partial_offset, count, p, max_norm, error_code)


@kernels.clip_grad_norm.implement("webgpu")
def clip_grad_norm_kernel(rt, out, grads, max_norm, norm_type, nonfinite_message=None):
    """The registry's clip_grad_norm: the message becomes an error code (Runtime.error_code)."""
    code = rt.error_code(nonfinite_message, RuntimeError) if nonfinite_message else 0
    clip_grad_norm(rt, out, grads, max_norm, norm_type, code)


def clip_grad_norm(rt, out, grads, max_norm, norm_type, error_code=0):
    """out (a float32 [1] view) = the norm_type-norm of all `grads` (contiguous float32 views) together;
    each gradient is then scaled in place by min(max_norm / (norm + 1e-6), 1). error_code (from
    rt.error_code) is reported when the norm is not finite; 0: no check."""
    check_view(out, "out", dtype=float32, contiguous=True)
    for g in grads:
        check_view(g, "grad", dtype=float32, contiguous=True)
    kind = _p_kind(norm_type)
    constants = NORM_PARTIALS.constants({"P_KIND": kind})
    chunks = _chunks([g for g in grads if g.numel])
    plan, partials = [], 0
    for chunk in chunks:
        groups = min(max(-(-sum(g.numel for g in chunk) // ELEMENTS_PER_GROUP), 1), MAX_GROUPS)
        plan.append((chunk, 2 + partials, groups))
        partials += groups
    scratch = rt.storage(2 + max(partials, 1), float32)  # [norm, coefficient, partials...]
    p = float(norm_type) if kind == 3 else 0.0
    for chunk, offset, groups in plan:
        rt.dispatch(NORM_PARTIALS, constants, _storages(rt, chunk, scratch), _params(chunk, offset, p=p),
                    (groups, 1, 1))
    rt.dispatch(NORM_FINISH, constants, _storages(rt, [], scratch),
                _params([], 2, partials, p, float(max_norm), error_code), (1, 1, 1))
    for chunk, _, _ in plan:
        groups = min(-(-max(g.numel for g in chunk) // WORKGROUP), rt.limits["max_compute_workgroups_per_dimension"])
        rt.dispatch(SCALE, (), _storages(rt, chunk, scratch), _params(chunk), (groups, 1, 1))
    rt.copy(scratch, 0, out.storage, 4 * out.offset, 4)
