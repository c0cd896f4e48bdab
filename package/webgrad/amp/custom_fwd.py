"""torch.amp.custom_fwd / custom_bwd: decorators for an autograd.Function's forward and backward under autocast.

custom_fwd records whether autocast was on when forward ran (and its dtype), so that custom_bwd runs backward
in the same autocast state, as PyTorch's do. With cast_inputs, forward runs with autocast off and its floating
tensor arguments on the autocast device (float64 excepted) cast to cast_inputs, where autocast was on.
"""

import functools
from collections import abc

from .. import dtypes
from .._tensor import Tensor
from .autocast_mode import _device_type, autocast, get_autocast_dtype, is_autocast_enabled


def _cast(value, device_type, dtype):
    """value with its eligible tensors cast to dtype, through dicts, lists and tuples (PyTorch's _cast)."""
    if isinstance(value, Tensor):
        eligible = value.is_floating_point() and value.device.type == _device_type(device_type) and \
            value.dtype is not dtypes.float64
        return value.to(dtype) if eligible else value
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, abc.Mapping):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, list):
        return [_cast(v, device_type, dtype) for v in value]
    if isinstance(value, tuple):
        return tuple(_cast(v, device_type, dtype) for v in value)
    return value


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator for a custom autograd.Function's forward (see the module doc). device_type: "cuda" (WebGPU
    here), "webgpu" or "cpu"; cast_inputs: a floating dtype, or None to run forward in the caller's autocast."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        with autocast(device_type=device_type, enabled=False):
            return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator for a custom autograd.Function's backward: it runs in the autocast state its forward ran in."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type=device_type, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd
