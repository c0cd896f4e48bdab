"""webgrad.autocast: a region where ops run in the precision PyTorch's autocast gives them.

The op lists and the per-op casts live in ops/autocast_policy.py (the ops carry its decorators); this
module is the user-facing switch: a context manager and a decorator with torch.autocast's arguments.
"""

import functools
import warnings

from .. import devices, dtypes
from ..ops.autocast_policy import LOWER_DTYPES, STATE

_TYPES = ("webgpu", "cpu")


def _device_type(device_type):
    if not isinstance(device_type, str):
        raise ValueError(f"autocast: expected `device_type` of type `str`, got: `{type(device_type)}`")
    kind = "webgpu" if device_type == "cuda" else devices.device(device_type).type  # "cuda": WebGPU here
    if kind not in _TYPES:
        raise ValueError(f"autocast: device type {device_type!r} is not one of webgrad's (webgpu, cuda, cpu)")
    return kind


def is_autocast_available(device_type):
    try:
        return _device_type(device_type) in _TYPES
    except ValueError:
        return False


def is_autocast_enabled(device_type=None):
    """Whether autocast is on for `device_type` (PyTorch's default, None, asks about the GPU: WebGPU)."""
    return STATE.enabled[_device_type(device_type or "webgpu")]


def get_autocast_dtype(device_type):
    return STATE.dtype[_device_type(device_type)]


def _deprecated(old, new):
    warnings.warn(f"torch.{old}() is deprecated. Please use torch.{new} instead.", DeprecationWarning, stacklevel=3)


def is_autocast_cpu_enabled():
    """Deprecated in PyTorch (with its warning): is_autocast_enabled('cpu')."""
    _deprecated("is_autocast_cpu_enabled", "is_autocast_enabled('cpu')")
    return is_autocast_enabled("cpu")


def get_autocast_cpu_dtype():
    """Deprecated in PyTorch (with its warning): get_autocast_dtype('cpu')."""
    _deprecated("get_autocast_cpu_dtype", "get_autocast_dtype('cpu')")
    return get_autocast_dtype("cpu")


def get_autocast_gpu_dtype():
    """Deprecated in PyTorch (with its warning): get_autocast_dtype('cuda'), WebGPU's here."""
    _deprecated("get_autocast_gpu_dtype", "get_autocast_dtype('cuda')")
    return get_autocast_dtype("cuda")


class autocast:
    """torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None) for webgrad's devices.

    device_type: "webgpu" (also "cuda") or "cpu"; dtype: as PyTorch's, None means get_autocast_dtype(device_type),
    which is bfloat16 on the CPU and float16 on WebGPU unless set_autocast_dtype changed it. Both devices take
    float16 and bfloat16 (as PyTorch's CPU and CUDA): another dtype warns and disables autocast, as PyTorch does
    for a dtype a device does not support. float16 on WebGPU needs the adapter feature shader-f16: entering such
    a region raises an error naming the feature otherwise; bfloat16 needs no feature (it computes in float32 and
    rounds each result: webgrad/dtypes.py), so it is the lower precision every adapter has, though it saves no
    device memory there. Usable as a context manager and a decorator."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        self.device = _device_type(device_type)
        self.fast_dtype = STATE.dtype[self.device] if dtype is None else _to_dtype(dtype)
        self._enabled = bool(enabled)
        self._cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        if self._enabled and self.fast_dtype not in LOWER_DTYPES[self.device]:
            names = " and ".join(d.name for d in LOWER_DTYPES[self.device])
            warnings.warn(f"In {self.device} autocast, but the target dtype {self.fast_dtype} is not supported: "
                          f"webgrad's {self.device} autocast takes {names}. Disabling autocast.", stacklevel=2)
            self._enabled = False

    def __enter__(self):
        if self._enabled and self.device == "webgpu" and self.fast_dtype is dtypes.float16:
            rt = devices.device("webgpu").backend.runtime
            if not rt.has_f16:
                from .._backends.webgpu.f16 import missing_feature_error
                raise missing_feature_error(rt)
        self._saved = (STATE.enabled[self.device], STATE.dtype[self.device], STATE.cache_enabled)
        STATE.enabled[self.device] = self._enabled
        if self.fast_dtype in LOWER_DTYPES[self.device]:  # (a dtype the device refused leaves the one it found)
            STATE.dtype[self.device] = self.fast_dtype
        STATE.cache_enabled = self._cache_enabled
        STATE.depth += 1
        return self

    def __exit__(self, *exc):
        STATE.enabled[self.device], STATE.dtype[self.device], STATE.cache_enabled = self._saved
        STATE.depth -= 1
        if STATE.depth == 0:
            STATE.cache.clear()  # casts of parameters live for the outermost region only, as in PyTorch
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)
        return run


def _to_dtype(dtype):
    try:
        return dtypes.to_dtype(dtype)
    except TypeError:  # torch.bfloat16 and other dtypes webgrad lacks: PyTorch warns and disables
        return dtype
