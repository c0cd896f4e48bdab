"""torch.cuda.amp: PyTorch's deprecated spellings of torch.amp, with its FutureWarnings.

`torch.cuda.amp.autocast(...)` is `webgrad.amp.autocast("cuda", ...)` and `torch.cuda.amp.GradScaler(...)` is
`webgrad.amp.GradScaler("cuda", ...)`; in webgrad the device "cuda" of autocast and GradScaler means WebGPU.
Where there is no WebGPU device, both warn and disable themselves, as PyTorch's do without CUDA.
"""

import warnings

from .. import amp as _amp
from .. import dtypes


def _gpu_available():
    from .. import webgpu
    return webgpu.is_available()


class autocast(_amp.autocast):
    """torch.cuda.amp.autocast(enabled=True, dtype=torch.float16, cache_enabled=True)."""

    def __init__(self, enabled=True, dtype=dtypes.float16, cache_enabled=True):
        warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', "
                      "args...)` instead.", FutureWarning, stacklevel=2)
        if enabled and not _gpu_available():
            warnings.warn("torch.cuda.amp.autocast: there is no WebGPU device (what 'cuda' means in webgrad). "
                          "Disabling autocast.", UserWarning, stacklevel=2)
            enabled = False
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """torch.cuda.amp.GradScaler(init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
    enabled=True)."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use `torch.amp.GradScaler('cuda', "
                      "args...)` instead.", FutureWarning, stacklevel=2)
        if enabled and not _gpu_available():
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but there is no WebGPU device (what 'cuda' means in "
                          "webgrad). Disabling.", UserWarning, stacklevel=2)
            enabled = False
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """torch.cuda.amp.custom_fwd: deprecated in PyTorch for torch.amp.custom_fwd(device_type='cuda')."""
    warnings.warn("`torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use `torch.amp.custom_fwd(args..., "
                  "device_type='cuda')` instead.", FutureWarning, stacklevel=2)
    return _amp.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """torch.cuda.amp.custom_bwd: deprecated in PyTorch for torch.amp.custom_bwd(device_type='cuda')."""
    warnings.warn("`torch.cuda.amp.custom_bwd(args...)` is deprecated. Please use `torch.amp.custom_bwd(args..., "
                  "device_type='cuda')` instead.", FutureWarning, stacklevel=2)
    return _amp.custom_bwd(bwd, device_type="cuda")
