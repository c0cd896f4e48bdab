"""torch's process-wide settings: the default float dtype and the CPU thread counts.

set_default_dtype(float64) makes float data, creation functions (zeros, rand, arange of floats, ...) and new
layers' parameters float64, as PyTorch's does; float64 lives on the CPU (WebGPU stores no float64, so making
such a tensor there raises). The thread counts are kept and reported: webgrad's CPU backend computes through
NumPy, whose BLAS threads are fixed by its environment (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS) when it starts,
so set_num_threads does not change them.
"""

import os

from . import dtypes

_threads = {}


def get_default_dtype():
    """The dtype of float data and of creation functions without dtype= (float32 unless set)."""
    return dtypes.default_float()


def set_default_dtype(d):
    """Make `d` (float32 or float64) the default float dtype; other dtypes raise TypeError, as PyTorch's."""
    dtypes.set_default_float(d)


def set_default_tensor_type(t):
    """torch.set_default_tensor_type (deprecated in PyTorch, with its warning): a legacy tensor type
    (torch.DoubleTensor) or its name ('torch.DoubleTensor') whose dtype becomes the default float dtype. Only
    float types are accepted, as PyTorch's; the CUDA ones are refused with PyTorch's error on a machine without
    CUDA (webgrad has none: set_default_device('webgpu') is the GPU's)."""
    import warnings

    from ._typenames import TYPES
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.", UserWarning,
                  stacklevel=2)
    if isinstance(t, str):
        name = t
    elif isinstance(t, type) and isinstance(getattr(t, "is_cuda", None), bool):
        name = f"torch.{'cuda.' if t.is_cuda else ''}{t.__name__}"
    else:
        raise TypeError(f"invalid type: '{type(t).__name__}'")
    short = name.removeprefix("torch.")
    if short.startswith("cuda.") and short[len("cuda."):] in TYPES:
        raise TypeError(f"type {name} not available. Torch not compiled with CUDA enabled.")
    if short not in TYPES:
        raise TypeError(f"invalid type: '{name}'")
    dtype = dtypes.to_dtype(TYPES[short])
    if not dtype.is_floating:
        raise TypeError("only floating-point types are supported as the default type")
    dtypes.set_default_float(dtype)


def _cpus():
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _positive(n, name):
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise RuntimeError(f"{name} expects a positive integer")
    return n


def get_num_threads():
    """The number set by set_num_threads (by default the CPUs this process may use)."""
    return _threads.get("intra", _cpus())


def set_num_threads(n):
    """Record the intra-op thread count torch would use (see the module doc: NumPy's own threads are unchanged)."""
    _threads["intra"] = _positive(n, "set_num_threads")


def get_num_interop_threads():
    return _threads.get("interop", _cpus())


def set_num_interop_threads(n):
    _threads["interop"] = _positive(n, "set_num_interop_threads")
