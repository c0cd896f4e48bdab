"""Names from PyTorch's past that scripts still use: the typed tensor classes (torch.FloatTensor,
torch.LongTensor, ...) and torch.autograd.Variable.

The typed classes are what they are in PyTorch: not subclasses of Tensor but factories and type tests.
`FloatTensor(2, 3)` is an uninitialised float32 tensor of that shape, `FloatTensor([1, 2])` one made from
data, `isinstance(t, FloatTensor)` asks whether t is a float32 tensor, and `t.type(torch.LongTensor)`
converts. In webgrad a legacy type names a dtype only: tensors are made on the default device and
`t.type(...)` keeps t's device (PyTorch's CPU types would move a GPU tensor to the CPU). The CUDA ones
(torch.cuda.FloatTensor, ...) exist for `isinstance` and for `torch.cuda.FloatTensor if cuda else ...`; making
a tensor with one is an error, as on a PyTorch build without CUDA.
"""

import warnings

from . import dtypes
from ._tensor import Tensor, _legacy_shape, empty, tensor
from ._typenames import TYPES

class TensorType(type):
    """The metaclass of the legacy types: calling one makes a tensor of its dtype, isinstance checks the dtype."""

    @property
    def dtype(cls):
        if cls.is_cuda:
            raise RuntimeError(f"torch.cuda.{cls.__name__}: webgrad has no CUDA device (use device='webgpu')")
        return dtypes.to_dtype(TYPES[cls.__name__])

    def __instancecheck__(cls, obj):
        return not cls.is_cuda and isinstance(obj, Tensor) and obj.dtype is cls.dtype

    def __call__(cls, *args, device=None):
        if cls.is_cuda:
            raise TypeError(f"type torch.cuda.{cls.__name__} not available: webgrad has no CUDA device "
                            "(torch.cuda.is_available() is False); make tensors with device='webgpu'")
        dtype = cls.dtype
        shape = _legacy_shape(args, None)
        if shape is not None:
            return empty(shape, dtype=dtype, device=device)
        data = args[0]
        if isinstance(data, Tensor):  # the same tensor, as PyTorch (which refuses another dtype)
            if data.dtype is not dtype:
                raise TypeError(f"{cls.__name__}(): expected a {dtype.name} tensor (got {data.dtype.name}); "
                                f"convert with .type({cls.__name__}) or .to({dtype.name})")
            return data if device is None else data.to(device)
        if isinstance(data, (int, float, bool, str)):
            raise TypeError(f"{cls.__name__}(): data must be a sequence (got {type(data).__name__})")
        return tensor(data, dtype=dtype, device=device)

    def __repr__(cls):
        return f"<class '{'torch.cuda' if cls.is_cuda else 'torch'}.{cls.__name__}'>"


def _types(cuda):
    module = "webgrad.cuda" if cuda else "webgrad"
    return {name: TensorType(name, (), {"is_cuda": cuda, "__module__": module, "__qualname__": name,
                                        "__doc__": f"torch.{'cuda.' if cuda else ''}{name}: see webgrad._legacy"})
            for name in TYPES}


LEGACY_TYPES = _types(cuda=False)
CUDA_TYPES = _types(cuda=True)
FloatTensor, DoubleTensor, HalfTensor, LongTensor, IntTensor, ByteTensor, BoolTensor = LEGACY_TYPES.values()


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor)  # every tensor is a Variable, as in PyTorch since 0.4

    def __call__(cls, data=None, requires_grad=False, volatile=False):
        """Variable(t, requires_grad=False): t without its history (sharing its data), as modern PyTorch."""
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` instead.",
                          UserWarning, stacklevel=2)
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        return out.requires_grad_(True) if requires_grad else out


class Variable(metaclass=_VariableMeta):
    """torch.autograd.Variable: since PyTorch 0.4 a tensor is a Variable; Variable(t) returns t detached."""
