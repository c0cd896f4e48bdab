"""The CPU backend: the device interface and every kernel of the registry, with NumPy.

It is the numerical reference that every other backend is tested against, so it favours plain, obviously
right NumPy over speed. Each family module registers its kernels on the records of ``_backends/kernels.py``
(``@kernels.NAME.implement("cpu")``); this module holds the memory methods and runs the records.
"""

from ... import dtypes
from ..interface import Backend
# the kernel families: importing them registers their implementations on the records
from . import augment, checks, conv, elementwise, index, linalg, loss, norm, optim, random, reduce  # noqa: F401
from . import attention, layer_norm, masked, softmax_masked  # noqa: F401  (the transformer's kernels)
from . import sampling, sorting  # noqa: F401  (topk and multinomial)
from . import scatter  # noqa: F401  (scatter_reduce, compact, scan, searchsorted, histc)
from .arrays import NP_DTYPES, array, np, require_numpy


class CPUBackend(Backend):
    name = "cpu"

    def __init__(self):
        require_numpy()

    def empty(self, numel, dtype):
        dtypes.check_storable(dtype)
        return np.empty(numel, NP_DTYPES[dtype])

    def from_bytes(self, data, dtype):
        dtypes.check_storable(dtype)
        arr = np.frombuffer(bytes(data) if not isinstance(data, (bytes, bytearray)) else data, NP_DTYPES[dtype])
        return arr.copy()

    def to_bytes(self, view):
        return np.ascontiguousarray(array(view)).tobytes()

    array = staticmethod(array)  # the NumPy array a view describes (tests and tools read storages with it)

    def run(self, kernel, *args, **kwargs):
        impl = kernel.impls.get("cpu")
        if impl is None:
            raise NotImplementedError(f"the cpu backend has no kernel {kernel.name!r}")
        return impl(*args, **kwargs)
