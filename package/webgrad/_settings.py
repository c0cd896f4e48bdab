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
