"""GradScaler's fused unscale and inf/NaN check on WebGPU (shaders/amp.wgsl): one dispatch per gradient
instead of three ops (webgrad.amp.GradScaler uses it where the backend has it)."""

import struct

from ...dtypes import float32
from .runtime import Kernel, Shader, grid
from .views import check_view

SHADER = Shader("amp.wgsl", {})
UNSCALE_CHECK = Kernel(SHADER, "unscale_check", ((0, "write"), (1, "read"), (2, "write"), (3, "uniform")))
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
