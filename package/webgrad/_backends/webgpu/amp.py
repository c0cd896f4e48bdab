"""GradScaler's kernels on WebGPU (shaders/amp.wgsl), used where the backend has them: the fused unscale
and inf/NaN check (one dispatch per six gradients instead of three ops per gradient), and the undo of a step
taken on inf/NaN gradients (one dispatch per tensor, writing nothing on a clean step, instead of where + copy)."""

import struct

from ...dtypes import float32, int32
from .. import kernels
from .dispatch import Kernel, Shader, grid
from .views import check_view

SHADER = Shader("amp.wgsl", {})
GRADS_PER_DISPATCH = 6  # unscale_check6's gradient bindings (with inv_scale and the flag: WebGPU's 8 a stage)
UNSCALE_CHECK6 = Kernel(SHADER, "unscale_check6", tuple((k, "write") for k in range(GRADS_PER_DISPATCH))
                        + ((6, "read"), (7, "write"), (8, "uniform")))
_PARAMS6 = struct.Struct("<28I")  # n[8], offset[8], first[8] (6 used of each), inv_offset, flag_offset, pad
RESTORE_IF = Kernel(SHADER, "restore_if", ((0, "write"), (1, "read"), (2, "read"), (3, "uniform")))
_PARAMS = struct.Struct("<4I")


@kernels.amp_unscale_check.implement("webgpu")
def unscale_check(rt, grads, inv_scale, found_inf):
    """Each of `grads` *= inv_scale (in place); found_inf = 1.0 where a gradient held inf/NaN before (else left
    as it was). grads: contiguous float32 views; inv_scale, found_inf: one-element float32 views of two other
    storages. Up to GRADS_PER_DISPATCH gradients, each in a storage of its own, per dispatch."""
    for name, v in (("inv_scale", inv_scale), ("found_inf", found_inf)):
        check_view(v, name, dtype=float32)
        if v.numel != 1:
            raise ValueError(f"{name} must hold one element, not {v.numel}")
    if inv_scale.storage is found_inf.storage:
        raise ValueError("inv_scale and found_inf must be two different storages")
    batch = []
    for grad in grads:
        check_view(grad, "grad", dtype=float32, contiguous=True)
        if grad.storage is inv_scale.storage or grad.storage is found_inf.storage:
            raise ValueError("a gradient shares its storage with inv_scale or found_inf")
        if grad.numel == 0:
            continue
        if any(g.storage is grad.storage for g in batch) or len(batch) == GRADS_PER_DISPATCH:
            _unscale_check6(rt, batch, inv_scale, found_inf)
            batch = []
        batch.append(grad)
    if batch:
        _unscale_check6(rt, batch, inv_scale, found_inf)


def _unscale_check6(rt, grads, inv_scale, found_inf):
    key = (UNSCALE_CHECK6, tuple((g.numel, g.offset) for g in grads), inv_scale.offset, found_inf.offset)
    launch = rt.memo.get(key)
    if launch is None:
        pad = [0] * (8 - len(grads))
        first, total = [], 0
        for g in grads:
            first.append(total)
            total += -(-g.numel // 256)
        params = _PARAMS6.pack(*[g.numel for g in grads], *pad, *[g.offset for g in grads], *pad,
                               *first, *[0xFFFFFFFF] * (8 - len(grads)), inv_scale.offset, found_inf.offset, 0, 0)
        launch = rt.memo[key] = rt.launch(UNSCALE_CHECK6, (), params, grid(total))
    spares = [rt.spare(k) for k in range(GRADS_PER_DISPATCH - len(grads))]  # distinct: bound writable
    rt.run(launch, (*(g.storage for g in grads), *spares, inv_scale.storage, found_inf.storage))


@kernels.amp_restore_if.implement("webgpu")
def restore_if(rt, out, saved, found):
    """out = saved where found (a one-element float32 view) is above 0, else out is left as it is. out
    and saved: contiguous views of one shape, float32 or int32, in two storages apart from found's."""
    check_view(found, "found", dtype=float32)
    if found.numel != 1:
        raise ValueError(f"found must hold one element, not {found.numel}")
    for name, v in (("out", out), ("saved", saved)):
        check_view(v, name, contiguous=True)
        if v.dtype not in (float32, int32):
            raise TypeError(f"restore_if: {name} must be float32 or int32, not {v.dtype}")
    if out.shape != saved.shape or out.dtype is not saved.dtype:
        raise ValueError(f"restore_if: out {out.shape} {out.dtype} and saved {saved.shape} {saved.dtype} differ")
    if len({id(out.storage), id(saved.storage), id(found.storage)}) != 3:
        raise ValueError("out, saved and found must be three different storages")
    if out.numel == 0:
        return
    key = (RESTORE_IF, out.numel, out.offset, saved.offset, found.offset)
    launch = rt.memo.get(key)
    if launch is None:
        params = _PARAMS.pack(out.numel, out.offset, saved.offset, found.offset)
        launch = rt.memo[key] = rt.launch(RESTORE_IF, (), params, grid(-(-out.numel // 256)))
    rt.run(launch, (out.storage, saved.storage, found.storage))
