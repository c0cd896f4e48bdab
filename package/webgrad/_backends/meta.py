"""The meta device: tensors with a shape, a dtype and strides but no data, as PyTorch's "meta" device.

Scripts use it to build a model's structure without its memory (``model.to("meta")`` for a stateless copy that
torch.func.functional_call fills with real tensors, ``with torch.device("meta"):`` then ``to_empty``), and to
learn output shapes. Every op runs through the engine as on any device, so shapes, dtypes, broadcasting, errors
and autograd's graph are the ones a real device gives; the kernels compute nothing. What needs the values raises
PyTorch's NotImplementedError: reading them (``item``, ``tolist``, printing the values, moving to another device
with ``to``) and a kernel whose result the host reads (a count of nonzeros, a data-dependent shape).
"""

from .. import dtypes
from .interface import Backend

COPY_OUT = ("Cannot copy out of meta tensor; no data! A meta tensor has a shape and a dtype, not values: use "
            "'to_empty()' instead of 'to()' when moving module from meta to a different device.")


class MetaStorage:
    """A storage of `numel` elements of `dtype` that holds none of them."""

    __slots__ = ("numel", "dtype", "__weakref__")

    def __init__(self, numel, dtype):
        self.numel, self.dtype = numel, dtype

    @property
    def nbytes(self):
        return self.numel * self.dtype.itemsize


class _HostValue:
    """What a kernel returns to the host on the meta device: there is no value, and using it says so."""

    __slots__ = ("kernel",)

    def __init__(self, kernel):
        self.kernel = kernel

    def _fail(self, *args):
        raise NotImplementedError(f"{self.kernel.name} reads tensor data on the host, and meta tensors have none "
                                  "(its result depends on the values: a count, a data-dependent shape)")

    __int__ = __index__ = __float__ = __bool__ = __iter__ = __len__ = __getitem__ = _fail
    __add__ = __radd__ = __sub__ = __mul__ = __lt__ = __le__ = __gt__ = __ge__ = _fail


class MetaBackend(Backend):
    name = "meta"

    def empty(self, numel, dtype):
        dtypes.check_storable(dtype)
        return MetaStorage(numel, dtype)

    def from_bytes(self, data, dtype):
        dtypes.check_storable(dtype)
        return MetaStorage(len(data) // dtype.itemsize, dtype)

    def to_bytes(self, view):
        raise NotImplementedError(COPY_OUT)

    def run(self, kernel, *args, **kwargs):
        return _HostValue(kernel)

    def has(self, kernel):
        return True
