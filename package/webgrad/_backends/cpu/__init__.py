"""The CPU backend: the device interface and every kernel of the registry, with NumPy.

It is the numerical reference that every other backend is tested against, so it favours plain, obviously
right NumPy over speed. Each family module registers its kernels on the records of ``_backends/kernels.py``
(``@kernels.NAME.implement("cpu")``); this module holds the memory methods and runs the records.
"""

from ... import dtypes
from .. import kernels
from ..interface import Backend
# the kernel families: importing them registers their implementations on the records
from . import augment, checks, conv, elementwise, index, linalg, loss, norm, optim, random, reduce  # noqa: F401
from . import attention, layer_norm, masked, softmax_masked  # noqa: F401  (the transformer's kernels)
from . import sampling, sorting  # noqa: F401  (topk and multinomial)
from . import scatter  # noqa: F401  (scatter_reduce, compact, scan, searchsorted, histc)
from .arrays import NP_DTYPES, array, np, require_numpy, round_bfloat16

_WRITTEN = (kernels.OUT, kernels.INOUT)


class CPUBackend(Backend):
    name = "cpu"

    def __init__(self):
        require_numpy()

    def empty(self, numel, dtype):
        dtypes.check_storable(dtype)
        return np.empty(numel, NP_DTYPES[dtype])

    def from_bytes(self, data, dtype):
        dtypes.check_storable(dtype)
        if dtype is dtypes.bfloat16:  # two bytes each, canonically; float32 words here (webgrad/dtypes.py)
            data = dtypes.bf16_unpack(data)
        arr = np.frombuffer(bytes(data) if not isinstance(data, (bytes, bytearray)) else data, NP_DTYPES[dtype])
        return arr.copy()

    def to_bytes(self, view):
        raw = np.ascontiguousarray(array(view)).tobytes()
        return dtypes.bf16_pack(raw) if view.dtype is dtypes.bfloat16 else raw

    array = staticmethod(array)  # the NumPy array a view describes (tests and tools read storages with it)

    def run(self, kernel, *args, **kwargs):
        impl = kernel.impls.get("cpu")
        if impl is None:
            raise NotImplementedError(f"the cpu backend has no kernel {kernel.name!r}")
        result = impl(*args, **kwargs)
        _round_bfloat16_outputs(kernel, args, kwargs)
        return result


_WRITES = {}  # kernel -> ((position, kind) of each argument it writes, {name: kind} of the same)


def _writes(kernel):
    found = _WRITES.get(kernel)
    if found is None:
        written = [(i, a) for i, a in enumerate(kernel.args) if a.kind in _WRITTEN or a.kind == kernels.VIEWS]
        found = _WRITES[kernel] = (tuple((i, a.kind) for i, a in written), {a.name: a.kind for _, a in written})
    return found


def _round_bfloat16_outputs(kernel, args, kwargs):
    """Round each bfloat16 view a kernel wrote to bfloat16 (its storage holds float32 words: webgrad/dtypes.py),
    so that every kernel computes bfloat16 as float32 and its result is rounded once, here."""
    positions, names = _writes(kernel)
    for i, kind in positions:
        if i < len(args):
            _round_written(kind, args[i])
    if kwargs:
        for name, value in kwargs.items():
            if name in names:
                _round_written(names[name], value)


def _round_written(kind, value):
    if kind in _WRITTEN:
        if value is not None and value.dtype is dtypes.bfloat16:
            round_bfloat16(array(value))
    elif kind == kernels.VIEWS:
        for view in value or ():
            if view is not None and view.dtype is dtypes.bfloat16:
                round_bfloat16(array(view))
