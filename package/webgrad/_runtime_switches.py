"""torch.*'s process-wide switches: warn-always, flush-denormal, anomaly mode (webgrad.autograd's), the autocast
state functions (webgrad.autocast's state), init_num_threads and get_device_module."""

import warnings

from . import _anomaly, dtypes
from .ops.autocast_policy import LOWER_DTYPES, STATE as _AUTOCAST

_warn_always = {"enabled": False}


def set_warn_always(b):
    """Whether warnings PyTorch gives once per process should be given every time (a flag scripts and tests set)."""
    _warn_always["enabled"] = bool(b)


def is_warn_always_enabled():
    return _warn_always["enabled"]


def set_flush_denormal(mode):
    """False, as PyTorch on a CPU without flush-to-zero: webgrad's CPU backend (NumPy) cannot set the FPU's
    denormal mode, and WebGPU's shaders leave denormal handling to the GPU."""
    if not isinstance(mode, bool):
        raise RuntimeError(f"flush_denormal expects a bool, but got {type(mode).__name__}")
    return False


def init_num_threads():
    """Nothing to initialise: webgrad's thread counts are set with set_num_threads."""


# ============================================================ anomaly mode
def set_anomaly_enabled(enabled, check_nan=True):
    """Turns webgrad.autograd's anomaly detection on or off (as autograd.set_detect_anomaly, without a block)."""
    _anomaly._anomaly["enabled"], _anomaly._anomaly["check_nan"] = bool(enabled), bool(check_nan)


is_anomaly_enabled = _anomaly.is_anomaly_enabled
is_anomaly_check_nan_enabled = _anomaly.is_anomaly_check_nan_enabled


# ========================================================== autocast state
def _device_type(device_type):
    from .amp.autocast_mode import _device_type as kind
    return kind(device_type)


def _deprecated(old, new):
    warnings.warn(f"torch.{old} is deprecated. Please use torch.{new} instead.", DeprecationWarning, stacklevel=3)


def is_autocast_cache_enabled():
    return _AUTOCAST.cache_enabled


def set_autocast_cache_enabled(enabled):
    _AUTOCAST.cache_enabled = bool(enabled)


def clear_autocast_cache():
    """Drops the casts of parameters autocast keeps for its region."""
    _AUTOCAST.cache.clear()


def autocast_increment_nesting():
    _AUTOCAST.depth += 1
    return _AUTOCAST.depth


def autocast_decrement_nesting():
    _AUTOCAST.depth -= 1
    return _AUTOCAST.depth


def set_autocast_enabled(device_type, enabled=None):
    """set_autocast_enabled(device_type, enabled), or the older set_autocast_enabled(enabled) for the GPU (WebGPU),
    which PyTorch still accepts without a warning. Enabling WebGPU autocast to float16 needs an adapter with
    shader-f16, as `with autocast("webgpu")` does (bfloat16 needs no feature)."""
    if enabled is None:  # the one-argument form: PyTorch's GPU
        device_type, enabled = "cuda", device_type
    kind = _device_type(device_type)
    if enabled and kind == "webgpu" and _AUTOCAST.dtype[kind] is dtypes.float16:
        from .devices import device
        runtime = device("webgpu").backend.runtime
        if not runtime.has_f16:
            from ._backends.webgpu.f16 import missing_feature_error
            raise missing_feature_error(runtime)
    _AUTOCAST.enabled[kind] = bool(enabled)


def set_autocast_dtype(device_type, dtype):
    """Sets the dtype autocast lowers to where a region names none: bfloat16 or float16, on either device. Any
    other dtype warns and leaves the dtype as it was (as `autocast(dtype=...)` warns for a dtype a device does
    not support)."""
    kind = _device_type(device_type)
    try:
        wanted = dtypes.to_dtype(dtype)
    except TypeError:  # dtypes webgrad lacks
        wanted = None
    if wanted not in LOWER_DTYPES[kind]:
        names = " and ".join(d.name for d in LOWER_DTYPES[kind])
        warnings.warn(f"In {kind} autocast, the target dtype {dtype} is not supported: webgrad's {kind} autocast "
                      f"takes {names}; the dtype stays {_AUTOCAST.dtype[kind].name}.", stacklevel=2)
        return
    _AUTOCAST.dtype[kind] = wanted


def set_autocast_cpu_enabled(enabled):
    _deprecated("set_autocast_cpu_enabled(enabled)", "set_autocast_enabled('cpu', enabled)")
    _AUTOCAST.enabled["cpu"] = bool(enabled)


def set_autocast_cpu_dtype(dtype):
    _deprecated("set_autocast_cpu_dtype(dtype)", "set_autocast_dtype('cpu', dtype)")
    set_autocast_dtype("cpu", dtype)


def set_autocast_gpu_dtype(dtype):
    _deprecated("set_autocast_gpu_dtype(dtype)", "set_autocast_dtype('cuda', dtype)")
    set_autocast_dtype("cuda", dtype)


# ============================================================ device modules
def get_device_module(device=None):
    """The module of a device type, as torch.get_device_module: webgrad.cpu for "cpu", webgrad.cuda (WebGPU's, with
    torch.cuda's names) for "webgpu" and "cuda", webgrad.mps and webgrad.xpu; with no argument, the current
    accelerator's module, or webgrad.cpu where there is none."""
    from . import accelerator, cpu, cuda, mps, xpu
    from .devices import device as to_device
    if device is None:
        current = accelerator.current_accelerator()
        kind = "cpu" if current is None else current.type
    elif isinstance(device, str) and device in ("cuda", "mps", "xpu"):
        kind = device
    else:
        try:
            kind = to_device(device).type
        except ValueError as error:  # an unknown device string: PyTorch's RuntimeError
            raise RuntimeError(str(error)) from None
    modules = {"cpu": cpu, "webgpu": cuda, "cuda": cuda, "mps": mps, "xpu": xpu}
    if kind not in modules:
        raise RuntimeError(f"Device '{kind}' does not have a corresponding module registered as 'torch.{kind}'.")
    return modules[kind]


FUNCTIONS = {name: globals()[name] for name in (
    "set_warn_always", "is_warn_always_enabled", "set_flush_denormal", "init_num_threads", "set_anomaly_enabled",
    "is_anomaly_enabled", "is_anomaly_check_nan_enabled", "is_autocast_cache_enabled", "set_autocast_cache_enabled",
    "clear_autocast_cache", "autocast_increment_nesting", "autocast_decrement_nesting", "set_autocast_enabled",
    "set_autocast_dtype", "set_autocast_cpu_enabled", "set_autocast_cpu_dtype", "set_autocast_gpu_dtype",
    "get_device_module")}
