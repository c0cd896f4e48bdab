"""GradScaler's kernels on WebGPU (shaders/amp.wgsl), used where the backend has them: the fused unscale
and inf/NaN check (one dispatch per gradient instead of three ops), and the undo of a step taken on
inf/NaN gradients (one dispatch per tensor, writing nothing on a clean step, instead of where + copy)."""

import struct

from ...dtypes import float32, int32
from .runtime import Kernel, Shader, grid
from .views import check_view

SHADER = Shader("amp.wgsl", {})
UNSCALE_CHECK = Kernel(SHADER, "unscale_check", ((0, "write"), (1, "read"), (2, "write"), (3, "uniform")))
RESTORE_IF = Kernel(SHADER, "restore_if", ((0, "write"), (1, "read"), (2, "read"), (3, "uniform")))
_PARAMS = struct.Struct("<4I")


def unscale_check(rt, grad, inv_scale, found_inf):
    """grad *= inv_scale (in place); found_inf = 1.0 where grad held inf/NaN before (else left as it was).
    grad: contiguous float32; inv_scale, found_inf: one-element float32 views of two other storages."""
    check_view(grad, "grad", dtype=float32, contiguous=True)
    for name, v in (("inv_scale", inv_scale), ("found_inf", found_inf)):
        check_view(v, name, dtype=float32)
        if v.numel != 1:
            raise ValueError(f"{name} must hold one element, not {v.numel}")
    if len({id(grad.storage), id(inv_scale.storage), id(found_inf.storage)}) != 3:
        raise ValueError("grad, inv_scale and found_inf must be three different storages")
    if grad.numel == 0:
        return
    key = (UNSCALE_CHECK, grad.numel, grad.offset, inv_scale.offset, found_inf.offset)
    launch = rt.memo.get(key)
    if launch is None:
        params = _PARAMS.pack(grad.numel, grad.offset, inv_scale.offset, found_inf.offset)
        launch = rt.memo[key] = rt.launch(UNSCALE_CHECK, (), params, grid(-(-grad.numel // 256)))
    rt.run(launch, (grad.storage, inv_scale.storage, found_inf.storage))


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
