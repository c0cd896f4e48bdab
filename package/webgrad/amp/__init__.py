"""webgrad.amp: automatic mixed precision, as torch.amp.

    scaler = webgrad.amp.GradScaler()
    with webgrad.autocast(device_type="webgpu", dtype=webgrad.float16):
        loss = loss_fn(model(x), y)               # matmul/linear/conv in float16, losses and norms in float32
    scaler.scale(loss).backward()                # gradients reach the float32 parameters
    scaler.step(optimizer)                       # skipped when a gradient holds inf/NaN
    scaler.update()                              # grows or backs off the loss scale

float16 on WebGPU needs the adapter feature shader-f16 (see _backends/webgpu/f16.py).
"""

from .autocast_mode import autocast, get_autocast_dtype, is_autocast_available, is_autocast_enabled
from .custom_fwd import custom_bwd, custom_fwd
from .grad_scaler import GradScaler, OptState

__all__ = ["autocast", "GradScaler", "OptState", "custom_bwd", "custom_fwd", "get_autocast_dtype",
           "is_autocast_available", "is_autocast_enabled"]
