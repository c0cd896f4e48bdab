"""complex64 tensors, as a view over real (real, imag) pairs.

A complex64 tensor of shape S is a :class:`ComplexTensor` over a float32 tensor of shape S + (2,): the real and
imaginary parts interleaved, which is also the memory layout of PyTorch's complex64 and what
``torch.view_as_real`` shows. ``view_as_complex(x)`` and ``view_as_real(z)`` share storage with their input (writes
through one show in the other), under PyTorch's rules (float32, a last dim of size 2 with stride 1, even strides
and offset).

Every complex op is a composition of real ops on that backing tensor: ``z * w`` is
``stack([a c - b d, a d + b c], -1)``, ``z.sum(0)`` sums the backing tensor over dim 0, ``z[1:]`` slices it. So
autograd, both devices and the recorded/replayed step need nothing of their own, and the gradients are
PyTorch's: for a real loss L, a complex leaf's ``.grad`` is dL/d(re) + i dL/d(im) (the backing leaf's gradient,
seen as complex). Rotary position embeddings as Meta's Llama code writes them (``polar``, ``view_as_complex``,
a complex product, ``view_as_real``) train unchanged on every device.

What complex64 supports: creation (``torch.tensor`` of Python complex numbers or NumPy complex arrays,
``from_numpy`` (shared memory), ``complex``, ``polar``, ``zeros``/``ones``/``full`` with dtype=complex64,
``.to(complex64)`` of a real tensor),
``real``/``imag`` (views), ``conj`` (materialised: ``is_conj()`` is False and a write into the result does not
reach the input, where PyTorch's lazy conjugate view would), ``abs``, ``angle``, ``exp``, ``+ - * /`` with complex
or real tensors and Python numbers (complex scalars included), ``matmul`` (four real products), ``sum``/``mean``,
the view and shape ops, basic and advanced indexing and assignment, ``cat``/``stack``, device moves, ``numpy``,
``tolist``, ``item``, printing, ``allclose``/``isclose``/``equal``/``==``/``!=``, ``requires_grad_``, ``.grad``,
``backward(gradient, inputs=)``, ``autograd.grad`` (the engine differentiates the pairs: _autograd.grad), module
buffers (``.to`` moves them) and ``torch.save``/``load`` (ComplexFloatStorage, as torch writes it). A user's cast
to a real dtype keeps the real part with PyTorch's warning. complex128 is a name only (a TypeError on use), as
bfloat16; a NumPy complex128 array given to ``torch.tensor`` becomes complex64.

Everything else raises a TypeError (also a NotImplementedError, PyTorch's type for an op without a complex
kernel) naming complex64: every other Tensor method is sealed, any other op that reaches the tensor's data finds
no ``_view`` to compute on, and an op of webgrad's that converts its input with ``.float()`` (an integer
promotion) is refused rather than computing on the real part, so no op ever reads the interleaved floats, or
half of them, as real numbers by mistake.
"""

import inspect
import math
import sys
import warnings

from . import _tensor, dtypes
from ._tensor import Size, Tensor, _flatten, _nest, tensor, zeros
from ._tensor import full as _real_full
from .linalg import vector_norm
from .ops.core import broadcast_shapes
from .ops.shape import cat as _real_cat, stack as _real_stack

complex64 = dtypes.complex64


class ComplexUnsupported(TypeError, NotImplementedError):
    """An op without a complex64 path (a TypeError, and PyTorch's NotImplementedError)."""


def _unsupported(what):
    return ComplexUnsupported(
        f"{what} is not supported for complex64 tensors in webgrad; complex tensors support the arithmetic, "
        "reductions and views that rotary embeddings use (see webgrad._complex); torch.view_as_real(z) gives "
        "the (real, imag) pairs as a float32 tensor for anything else")


_PACKAGE_DIR = __file__.rsplit("/", 1)[0].rsplit("\\", 1)[0]


def _entry_point(frame):
    """The public webgrad function the user's code called (the outermost webgrad frame above `frame` with the
    name of a webgrad function or Tensor method), for errors; "this op" where none has one."""
    public = sys.modules.get("webgrad")
    name = None
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        code = frame.f_code.co_name
        if not code.startswith(("<", "_")) and (hasattr(public, code) or hasattr(Tensor, code)):
            name = code
        frame = frame.f_back
    return "this op" if name is None else f"{name}()"


def _real_only(x, what):
    if isinstance(x, ComplexTensor):
        raise _unsupported(what)
    return x


class ComplexTensor(Tensor):
    """A complex64 tensor: `_r` is its float32 backing tensor of shape self.shape + (2,)."""

    __slots__ = ("_r",)

    # ------------------------------------------------------------- what a Tensor holds, read from the backing
    @property
    def _view(self):
        raise _unsupported(_entry_point(sys._getframe(1)))

    @property
    def device(self):
        return self._r.device

    @property
    def requires_grad(self):
        return self._r.requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self._r.requires_grad = value

    @property
    def grad(self):
        g = self._r.grad
        return None if g is None else _wrap(g)

    @grad.setter
    def grad(self, value):
        self._r.grad = None if value is None else _as_complex_tensor(value, self.device)._r

    @property
    def grad_fn(self):
        return self._r.grad_fn

    @property
    def _retains_grad(self):
        return self._r._retains_grad

    @_retains_grad.setter
    def _retains_grad(self, value):
        self._r._retains_grad = value

    @property
    def shape(self):
        return Size(self._r.shape[:-1])

    @property
    def dtype(self):
        return complex64

    @property
    def ndim(self):
        return self._r.ndim - 1

    @property
    def data(self):
        return self.detach()

    @data.setter
    def data(self, other):
        self._r = _as_complex_tensor(other, None)._r

    @property
    def _version(self):
        return self._r._version

    def numel(self):
        return self._r.numel() // 2

    @property
    def nbytes(self):
        return self.numel() * 8

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._r.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._r.shape[0]))

    def stride(self, dim=None):
        strides = tuple(s // 2 for s in self._r.stride()[:-1])
        return strides if dim is None else strides[_dim(dim, self.ndim)]

    def storage_offset(self):
        return self._r.storage_offset() // 2

    def is_contiguous(self):
        return self._r.is_contiguous()

    def is_complex(self):
        return True

    def is_conj(self):
        return False  # conj() is materialised (see the module's docstring)

    def is_neg(self):
        return False

    def resolve_conj(self):
        return self

    resolve_neg = resolve_conj

    # ------------------------------------------------------------- autograd
    def requires_grad_(self, requires_grad=True):
        self._r.requires_grad_(requires_grad)
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        if gradient is None:
            raise RuntimeError("grad can be implicitly created only for real scalar outputs")
        g = _as_complex_tensor(gradient, self.device)
        self._r.backward(g._r, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)

    @staticmethod
    def _from_pairs(r):  # the autograd engine's way back from a gradient of the pairs (_autograd.grad)
        return _wrap(r)

    def detach(self):
        return _wrap(self._r.detach())

    def detach_(self):
        self._r.detach_()
        return self

    def clone(self, memory_format=None):
        return _wrap(self._r.clone())

    def contiguous(self, memory_format=None):
        return self if self._r.is_contiguous() else _wrap(self._r.contiguous())

    # ------------------------------------------------------------- data out
    def _pairs(self):
        flat = self._r.detach().contiguous().reshape(-1).tolist()
        return [complex(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]

    def _bytes(self):
        return self._r.detach().contiguous()._bytes()

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to a Python scalar "
                               "(item() needs exactly one)")
        return self._pairs()[0]

    def tolist(self):
        return _nest(self._pairs(), tuple(self.shape))

    def numpy(self, force=False):
        if self.requires_grad:
            raise RuntimeError("Can't call numpy() on a Tensor that requires grad. Use tensor.detach().numpy() instead.")
        import numpy as np
        pairs = np.ascontiguousarray(self._r.numpy(), dtype=np.float32)
        return pairs.view(np.complex64).reshape(tuple(self.shape))

    def __array__(self, dtype=None, copy=None):
        a = self.detach().numpy()
        return a.astype(dtype) if dtype is not None else a

    def __complex__(self):
        return complex(self.item())

    def __float__(self):
        raise TypeError("can't convert a complex64 tensor to float: use .real or .abs() first")

    __int__ = __float__

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of a Tensor with {self.numel()} elements is ambiguous")
        return self.item() != 0

    def __hash__(self):
        return id(self)

    def __reduce__(self):
        return (_rebuild, (self._r.detach().contiguous(), self.requires_grad))

    # ------------------------------------------------------------- moving and casting
    def to(self, *args, **kwargs):
        device, dtype, rest = None, kwargs.pop("dtype", None), {}
        if "device" in kwargs:
            device = kwargs.pop("device")
        positional = []
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, dtypes.DType) or a in (float, int, bool, complex) or (
                    hasattr(a, "itemsize") and not isinstance(a, str)):
                dtype = a
            else:
                positional.append(a)
        rest.update(kwargs)
        if dtype is not None:
            dt = dtypes.to_dtype(dtype)
            if dt is not complex64:
                return _to_real(self, dt).to(*positional, device=device, **rest)
        r = self._r.to(*positional, device=device, **rest)
        return self if r is self._r else _wrap(r)

    def type(self, dtype=None, non_blocking=False, **kwargs):
        if dtype is None:
            return "torch.ComplexFloatTensor"
        return self.to(dtype)

    def float(self, memory_format=None):
        return _to_real(self, dtypes.float32)

    def double(self, memory_format=None):
        return _to_real(self, dtypes.float64)

    def half(self, memory_format=None):
        return _to_real(self, dtypes.float16)

    def int(self, memory_format=None):
        return _to_real(self, dtypes.int32)

    def long(self, memory_format=None):
        return _to_real(self, dtypes.int64)

    def bool(self, memory_format=None):
        return self != 0

    def type_as(self, other):
        return self.to(other.dtype)

    def cfloat(self):
        return self

    # ------------------------------------------------------------- views and shapes (dims are complex dims)
    @property
    def real(self):
        return self._r.select(-1, 0)

    @real.setter
    def real(self, value):
        self._r.select(-1, 0).copy_(_real_only(value, "assigning a complex tensor to .real") if isinstance(
            value, Tensor) else _full(self.shape, value, self.device))

    @property
    def imag(self):
        return self._r.select(-1, 1)

    @imag.setter
    def imag(self, value):
        self._r.select(-1, 1).copy_(_real_only(value, "assigning a complex tensor to .imag") if isinstance(
            value, Tensor) else _full(self.shape, value, self.device))

    def view(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], dtypes.DType):
            raise _unsupported("view(dtype)")
        return _wrap(self._r.view(*_shape(shape), 2))

    def reshape(self, *shape):
        return _wrap(self._r.reshape(*_shape(shape), 2))

    def view_as(self, other):
        return self.view(*other.shape)

    def reshape_as(self, other):
        return self.reshape(*other.shape)

    def flatten(self, start_dim=0, end_dim=-1):
        if self.ndim == 0:
            return self.reshape(1)
        return _wrap(self._r.flatten(_dim(start_dim, self.ndim), _dim(end_dim, self.ndim)))

    def unflatten(self, dim, sizes):
        return _wrap(self._r.unflatten(_dim(dim, self.ndim), sizes))

    def unsqueeze(self, dim):
        return _wrap(self._r.unsqueeze(_dim(dim, self.ndim + 1)))

    def squeeze(self, dim=None):
        if self.ndim == 0:
            _no_dims(() if dim is None else (dim,) if isinstance(dim, int) else dim)
            return _wrap(self._r.view(*self._r.shape))
        if dim is None:
            dims = tuple(d for d, n in enumerate(self.shape) if n == 1)
        elif isinstance(dim, (tuple, list)):
            dims = tuple(_dim(d, self.ndim) for d in dim)
        else:
            dims = (_dim(dim, self.ndim),)
        dims = tuple(d for d in dims if self.shape[d] == 1)
        return _wrap(self._r.squeeze(dims)) if dims else _wrap(self._r.view(*self._r.shape))

    def transpose(self, dim0, dim1):
        if self.ndim == 0:
            _no_dims((dim0, dim1))
            return _wrap(self._r.view(*self._r.shape))
        return _wrap(self._r.transpose(_dim(dim0, self.ndim), _dim(dim1, self.ndim)))

    swapaxes = swapdims = transpose

    def t(self):
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
        return self if self.ndim < 2 else self.transpose(0, 1)

    def permute(self, *dims):
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        if len(dims) != self.ndim:
            raise RuntimeError(f"permute(): number of dims don't match in permute (the tensor has {self.ndim}, "
                               f"{len(dims)} given)")
        return _wrap(self._r.permute(*(_dim(d, self.ndim) for d in dims), self.ndim))

    def movedim(self, source, destination):
        if isinstance(source, int):
            source, destination = (source,), (destination,)
        return _wrap(self._r.movedim(tuple(_dim(d, self.ndim) for d in source),
                                     tuple(_dim(d, self.ndim) for d in destination)))

    moveaxis = movedim

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self):
        return self.transpose(-2, -1)

    @property
    def H(self):
        if self.ndim not in (0, 2):
            raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor.")
        return self.T.conj()

    @property
    def mH(self):
        if self.ndim < 2:
            raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. Got "
                               f"{self.ndim}-D tensor.")
        return self.mT.conj()

    def adjoint(self):
        return self.mH

    def expand(self, *sizes):
        sizes = _shape(sizes)
        return _wrap(self._r.expand(*sizes, 2))

    def expand_as(self, other):
        return self.expand(*other.shape)

    def broadcast_to(self, size):
        return self.expand(*size)

    def repeat(self, *sizes):
        sizes = _shape(sizes)
        return _wrap(self._r.repeat(*sizes, 1))

    def flip(self, *dims):
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        if self.ndim == 0:
            _no_dims(dims)
            return self.clone()
        return _wrap(self._r.flip(tuple(_dim(d, self.ndim) for d in dims)))

    def narrow(self, dim, start, length):
        return _wrap(self._r.narrow(_dim(dim, self.ndim), start, length))

    def select(self, dim, index):
        return _wrap(self._r.select(_dim(dim, self.ndim), index))

    def unbind(self, dim=0):
        return tuple(_wrap(r) for r in self._r.unbind(_dim(dim, self.ndim)))

    def split(self, split_size, dim=0):
        return tuple(_wrap(r) for r in self._r.split(split_size, _dim(dim, self.ndim)))

    def chunk(self, chunks, dim=0):
        return tuple(_wrap(r) for r in self._r.chunk(chunks, _dim(dim, self.ndim)))

    def __getitem__(self, index):
        return _wrap(self._r[_with_last(index, slice(None))])

    def __setitem__(self, index, value):
        if isinstance(value, Tensor) or not isinstance(value, (bool, int, float, complex)):
            value = _as_complex_tensor(value, self.device)
            self._r[_with_last(index, slice(None))] = value._r
            return
        value = complex(value)
        self._r[_with_last(index, 0)] = value.real
        self._r[_with_last(index, 1)] = value.imag

    # ------------------------------------------------------------- in-place writes (through the backing)
    def copy_(self, src, non_blocking=False):
        self._r.copy_(_as_complex_tensor(src, self.device).expand(*self.shape)._r)
        return self

    def zero_(self):
        self._r.zero_()
        return self

    def fill_(self, value):
        self[...] = value.item() if isinstance(value, Tensor) else value
        return self

    def _in_place(self, result):
        if tuple(result.shape) != tuple(self.shape):
            raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast shape "
                               f"{list(result.shape)}")
        self._r.copy_(result._r)
        return self

    def add_(self, other, alpha=1):
        return self._in_place(add(self, other, alpha=alpha))

    def sub_(self, other, alpha=1):
        return self._in_place(sub(self, other, alpha=alpha))

    def mul_(self, other):
        return self._in_place(mul(self, other))

    def div_(self, other, rounding_mode=None):
        return self._in_place(div(self, other, rounding_mode=rounding_mode))

    __iadd__, __isub__, __imul__, __itruediv__ = add_, sub_, mul_, div_

    # ------------------------------------------------------------- math
    def add(self, other, alpha=1):
        return add(self, other, alpha=alpha)

    def sub(self, other, alpha=1):
        return sub(self, other, alpha=alpha)

    subtract = sub

    def mul(self, other):
        return mul(self, other)

    multiply = mul

    def div(self, other, rounding_mode=None):
        return div(self, other, rounding_mode=rounding_mode)

    divide = true_divide = div

    def __add__(self, other):
        return add(self, other)

    def __radd__(self, other):
        return add(other, self)

    def __sub__(self, other):
        return sub(self, other)

    def __rsub__(self, other):
        return sub(other, self)

    def __mul__(self, other):
        return mul(self, other)

    def __rmul__(self, other):
        return mul(other, self)

    def __truediv__(self, other):
        return div(self, other)

    def __rtruediv__(self, other):
        return div(other, self)

    def __matmul__(self, other):
        return matmul(self, other)

    def __rmatmul__(self, other):
        return matmul(other, self)

    matmul = mm = bmm = __matmul__

    def __neg__(self):
        return _wrap(-self._r)

    neg = negative = __neg__

    def __pos__(self):
        return self

    def __abs__(self):
        return abs_(self)

    def abs(self):
        return abs_(self)

    absolute = abs

    def angle(self):
        return angle(self)

    def conj(self):
        return conj(self)

    conj_physical = conj

    def exp(self):
        return exp(self)

    def log(self):
        return log(self)

    def sqrt(self):
        return sqrt(self)

    def pow(self, exponent):
        return pow(self, exponent)

    def square(self):
        return mul(self, self)

    def __pow__(self, exponent):
        return pow(self, exponent)

    def __rpow__(self, base):
        return pow(base, self)

    def sum(self, dim=None, keepdim=False, dtype=None):
        return sum_(self, dim, keepdim, dtype)

    def mean(self, dim=None, keepdim=False, dtype=None):
        return mean(self, dim, keepdim, dtype)

    def __eq__(self, other):
        return eq(self, other)

    def __ne__(self, other):
        return ne(self, other)

    eq = __eq__
    ne = __ne__

    def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        return isclose(self, other, rtol, atol, equal_nan)

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        return allclose(self, other, rtol, atol, equal_nan)

    def equal(self, other):
        return equal(self, other)


# Tensor members a complex tensor keeps as they are: they read only what ComplexTensor provides.
_KEPT = frozenset((
    "__init__", "_init", "_make", "_empty", "_wrap_like", "size", "dim", "nelement", "element_size",
    "is_floating_point", "retain_grad", "is_shared", "share_memory_", "to_dense", "cpu", "webgpu", "cuda",
    "__format__", "__deepcopy__", "_check_item", "_new", "__class_getitem__", "__torch_function__",
    "__repr__",  # _printing.format_tensor reads a complex tensor through its pairs
))


def seal():
    """Give every Tensor method that ComplexTensor does not define a version that raises ComplexUnsupported
    (called once every module has attached its methods to Tensor)."""
    for name, member in list(vars(Tensor).items()):
        if name in vars(ComplexTensor) or name in _KEPT or not inspect.isfunction(member):
            continue
        setattr(ComplexTensor, name, _sealed(name))


def _sealed(name):
    def method(self, *args, **kwargs):
        raise _unsupported(f"{name}()")
    method.__name__ = name
    return method


# ===================================================================== helpers
def _wrap(r):
    z = object.__new__(ComplexTensor)
    z._r = r
    return z


def _rebuild(r, requires_grad):
    return _wrap(r.detach().clone()).requires_grad_(requires_grad) if requires_grad else _wrap(r)


def _dim(d, ndim):
    """Complex dim d of a tensor of ndim dims, as its pairs' dim (the same index: the pairs' dim is last). A 0-d
    tensor has no dim to give: its pairs' only dim is the (real, imag) one."""
    if ndim == 0:
        if d not in (0, -1):
            raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {d})")
        raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
    n = ndim
    if not -n <= d < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d % n


def _no_dims(dims):
    """Check the dims named for a 0-d tensor (0 or -1, as torch allows where the op is a no-op)."""
    for d in dims:
        if d not in (0, -1):
            raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {d})")


def _shape(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Size)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def _with_last(index, last):
    """A complex index as the backing tensor's: the same entries, then `last` for the (real, imag) dim."""
    index = index if isinstance(index, tuple) else (index,)
    if any(i is Ellipsis for i in index):
        return index + (last,)
    return index + (Ellipsis, last)


def _full(shape, value, device):
    return _real_full(tuple(shape), float(value), dtype=dtypes.float32, device=device)


def _float(t, where):
    """A real tensor as a complex64 op's float32 operand (float64 would make complex128, which webgrad lacks)."""
    if t.dtype is dtypes.float64 and t.ndim:
        raise TypeError(f"{where}: complex64 with a float64 tensor gives complex128, which webgrad does not "
                        "support; convert with .float() first")
    return t if t.dtype is dtypes.float32 else t.float()


def _pair(re, im):
    if tuple(re.shape) != tuple(im.shape):
        shape = broadcast_shapes(tuple(re.shape), tuple(im.shape))
        re, im = re.expand(*shape), im.expand(*shape)
    return _wrap(_real_stack([re, im], -1))


def _as_complex_tensor(x, device):
    """x (a complex or real tensor, a number, nested lists, a NumPy array) as a ComplexTensor."""
    if isinstance(x, ComplexTensor):
        return x
    if isinstance(x, Tensor):
        return _pair(_float(x, "complex64"), _zeros_like(x))
    if isinstance(x, (bool, int, float, complex)):
        x = complex(x)
        return _wrap(tensor([x.real, x.imag], dtype=dtypes.float32, device=device))
    return from_data(x, device=device)


def _zeros_like(t):
    return zeros(tuple(t.shape), dtype=dtypes.float32, device=t.device).expand(*t.shape)


def _operand(x, where):
    if isinstance(x, ComplexTensor):
        return x
    if isinstance(x, Tensor):
        return _float(x, where)
    if isinstance(x, (bool, int, float)):
        return float(x)
    if isinstance(x, complex):
        return x
    raise TypeError(f"{where}(): unsupported operand of type {type(x).__name__} for a complex64 tensor")


def _lift(a, b):
    """Operands of a complex op where neither is a complex tensor (a real tensor and a complex scalar): the
    tensor made complex."""
    if isinstance(a, ComplexTensor) or isinstance(b, ComplexTensor):
        return a, b
    if isinstance(a, Tensor):
        return _as_complex_tensor(a, a.device), b
    if isinstance(b, Tensor):
        return a, _as_complex_tensor(b, b.device)
    raise TypeError("expected a tensor operand")


def _to_real(z, dtype):
    """z as a real dtype: the real part, with PyTorch's warning (a complex dtype is kept)."""
    if dtype is complex64:
        return z
    if dtype is dtypes.complex128:
        raise TypeError(dtypes.COMPLEX128_ERROR)
    # An op of webgrad's converting its input (`x if x.dtype.is_floating else x.float()`, meant for integers)
    # has no complex path: it raises instead of computing on the real part.
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename in (__file__, _tensor.__file__):
        frame = frame.f_back
    if frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        raise _unsupported(_entry_point(frame))
    warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=3)
    return z.real.to(dtype)


def to_complex(x, dtype=complex64):
    """A real tensor converted to complex64 (imaginary part 0), as x.to(torch.complex64); gradients flow to x."""
    if dtype is not complex64:
        raise TypeError(dtypes.COMPLEX128_ERROR)
    if x.dtype is dtypes.float64:
        x = x.float()
    return _as_complex_tensor(x if x.dtype is dtypes.float32 else x.float(), x.device)


# ===================================================================== creation
def from_data(data, device=None, requires_grad=False):
    """torch.tensor(data, dtype=complex64) for Python numbers, nested lists and NumPy arrays (a complex128 array
    becomes complex64, the one complex dtype webgrad has)."""
    try:
        import numpy as np
    except ImportError:
        np = None
    if np is not None and isinstance(data, (np.ndarray, np.generic)):
        arr = np.asarray(data)
        pairs = np.stack([arr.real, arr.imag], -1).astype(np.float32) if arr.dtype.kind == "c" else \
            np.stack([arr.astype(np.float32), np.zeros(arr.shape, np.float32)], -1)
        z = _wrap(tensor(pairs, device=device))
    else:
        flat, shape = _flatten(data)
        vals = []
        for v in flat:
            if not isinstance(v, (bool, int, float, complex)):
                raise TypeError(f"tensor() expects numbers, got an element of type {type(v).__name__}: {v!r}")
            v = complex(v)
            vals += (v.real, v.imag)
        z = _wrap(tensor(vals, dtype=dtypes.float32, device=device).reshape(*shape, 2))
    return z.requires_grad_(True) if requires_grad else z


def from_numpy(arr):
    """torch.from_numpy of a complex64 array: a CPU tensor sharing its memory (through its float32 pairs)."""
    import numpy as np
    if arr.dtype != np.complex64:
        raise TypeError("webgrad has no complex128 tensors, so from_numpy cannot share this array's memory: "
                        "convert it with .astype(numpy.complex64) (torch.tensor(array) copies it as complex64)"
                        if arr.dtype == np.complex128 else f"can't convert np.ndarray of type {arr.dtype} to a tensor")
    if not arr.dtype.isnative or any(s < 0 or s % 4 for s in arr.strides):
        return from_data(arr, device="cpu")
    # the real parts' view has the array's strides; the (real, imag) dim steps 4 bytes
    pairs = np.lib.stride_tricks.as_strided(arr.real, shape=(*arr.shape, 2), strides=(*arr.strides, 4))
    return _wrap(_tensor.from_numpy(pairs))


def full(shape, value, device=None, requires_grad=False):
    value = complex(value)
    re = _real_full(tuple(shape), value.real, dtype=dtypes.float32, device=device)
    im = _real_full(tuple(shape), value.imag, dtype=dtypes.float32, device=device)
    z = _wrap(_real_stack([re, im], -1))
    return z.requires_grad_(True) if requires_grad else z


def polar(abs, angle):
    """abs * (cos(angle) + i sin(angle)), as torch.polar (float32 tensors of the same dtype)."""
    _check_parts(abs, angle)
    abs, angle = _float(abs, "polar"), _float(angle, "polar")
    return _pair(abs * angle.cos(), abs * angle.sin())


def complex_(real, imag):
    """real + i imag, as torch.complex (float32 tensors of the same dtype)."""
    _check_parts(real, imag)
    return _pair(_float(real, "complex"), _float(imag, "complex"))


def _check_parts(a, b):
    for t in (a, b):
        if not isinstance(t, Tensor) or isinstance(t, ComplexTensor):
            raise TypeError(f"expected real float tensors, got {type(t).__name__}"
                            + (" of complex64" if isinstance(t, ComplexTensor) else ""))
    if not (a.dtype.is_floating and b.dtype.is_floating):
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got "
                           f"{_torch_name(a.dtype)} and {_torch_name(b.dtype)}")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"Expected object of scalar type {_torch_name(a.dtype)} but got scalar type "
                           f"{_torch_name(b.dtype)} for second argument")
    if a.dtype is dtypes.float64:
        raise TypeError(dtypes.COMPLEX128_ERROR)


def _torch_name(dtype):
    return {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long", "int32": "Int",
            "bool": "Bool", "uint8": "Byte"}.get(dtype.name, dtype.name)


def view_as_complex(input):
    """The complex64 tensor whose (real, imag) pairs are `input`'s last dim (size 2), sharing its storage."""
    if isinstance(input, ComplexTensor) or not isinstance(input, Tensor):
        raise RuntimeError("view_as_complex is only supported for half, float and double tensors, but got a "
                           f"tensor of scalar type: {'ComplexFloat' if isinstance(input, Tensor) else type(input).__name__}")
    if not input.dtype.is_floating:
        raise RuntimeError("view_as_complex is only supported for half, float and double tensors, but got a "
                           f"tensor of scalar type: {_torch_name(input.dtype)}")
    if input.dtype is not dtypes.float32:
        raise TypeError(f"view_as_complex: webgrad's complex dtype is complex64, made from float32 pairs; this "
                        f"tensor is {input.dtype.name} (convert with .float() first)")
    if input.ndim == 0 or input.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    strides = input.stride()
    if strides[-1] != 1:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % 2 for s in strides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    if input.storage_offset() % 2:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")
    return _wrap(input.view(*input.shape))


def view_as_real(input):
    """The float32 tensor of shape input.shape + (2,) of `input`'s (real, imag) pairs, sharing its storage."""
    if not isinstance(input, ComplexTensor):
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return input._r.view(*input._r.shape)


def real(input):
    return input.real if isinstance(input, ComplexTensor) else input


def imag(input):
    if not isinstance(input, ComplexTensor):
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return input.imag


def is_complex(input):
    if not isinstance(input, Tensor):
        raise TypeError(f"is_complex(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    return isinstance(input, ComplexTensor)


# ===================================================================== arithmetic
def add(input, other, alpha=1):
    a, b = _lift(_operand(input, "add"), _operand(other, "add"))
    if alpha != 1:
        b = mul(b, alpha) if isinstance(b, Tensor) else b * alpha
    if not isinstance(a, ComplexTensor):
        a, b = b, a
    if isinstance(b, ComplexTensor):
        return _wrap(a._r + b._r)
    if isinstance(b, Tensor):
        return _pair(a.real + b, a.imag)
    b = complex(b)
    if b.imag == 0:
        return _pair(a.real + b.real, a.imag)
    return _pair(a.real + b.real, a.imag + b.imag)


def sub(input, other, alpha=1):
    b = _operand(other, "sub")
    return add(input, -b if not isinstance(b, Tensor) else (b.neg() if isinstance(b, ComplexTensor) else -b),
               alpha=alpha)


def mul(input, other):
    a, b = _lift(_operand(input, "mul"), _operand(other, "mul"))
    if not isinstance(a, ComplexTensor):
        a, b = b, a
    if isinstance(b, ComplexTensor):
        ar, ai, br, bi = a.real, a.imag, b.real, b.imag
        return _pair(ar * br - ai * bi, ar * bi + ai * br)
    if isinstance(b, Tensor):
        return _wrap(a._r * b.unsqueeze(-1))
    if isinstance(b, complex) and b.imag != 0:
        ar, ai = a.real, a.imag
        return _pair(ar * b.real - ai * b.imag, ar * b.imag + ai * b.real)
    return _wrap(a._r * float(b.real if isinstance(b, complex) else b))


def div(input, other, rounding_mode=None):
    if rounding_mode is not None:
        raise _unsupported(f"div(rounding_mode={rounding_mode!r})")
    a, b = _lift(_operand(input, "div"), _operand(other, "div"))
    if isinstance(b, ComplexTensor):
        br, bi = b.real, b.imag
        den = br * br + bi * bi
        if isinstance(a, ComplexTensor):
            ar, ai = a.real, a.imag
            return _pair((ar * br + ai * bi) / den, (ai * br - ar * bi) / den)
        return mul(_pair(br / den, -bi / den), a)  # a / b = a * conj(b) / |b|^2
    if isinstance(b, Tensor):
        return _wrap(a._r / b.unsqueeze(-1))
    b = complex(b)
    if b.imag == 0:
        return _wrap(a._r / b.real)
    return mul(a, 1 / b)


def matmul(input, other):
    a, b = _operand(input, "matmul"), _operand(other, "matmul")
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError("matmul(): expected tensors")
    if not (isinstance(a, ComplexTensor) and isinstance(b, ComplexTensor)):  # as torch: no mixed dtypes here
        names = ["c10::complex<float>" if isinstance(t, ComplexTensor) else _torch_name(t.dtype).lower()
                 for t in (a, b)]
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {names[0]} != {names[1]}")
    ar, ai, br, bi = a.real, a.imag, b.real, b.imag
    return _pair(ar @ br - ai @ bi, ar @ bi + ai @ br)


def abs_(input):
    return vector_norm(input._r, dim=-1)  # its gradient at 0 is 0, as PyTorch's abs of a complex 0


def angle(input):
    """The argument of each element: atan2(imag, real); for a real tensor pi where it is negative, else 0
    (NaN stays NaN), as torch.angle."""
    if not isinstance(input, ComplexTensor):
        if not isinstance(input, Tensor):
            raise TypeError(f"angle(): argument 'input' must be Tensor, not {type(input).__name__}")
        x = input if input.dtype.is_floating else input.float()
        # joins the graph with a zero gradient, as torch's (x.clamp(-1, 1) * 0 is 0 for +-inf, NaN for NaN)
        return (x < 0).to(x.dtype) * math.pi + x.clamp(-1, 1) * 0
    return input.imag.atan2(input.real)


def conj(input):
    if not isinstance(input, ComplexTensor):
        return input
    return _pair(input.real, -input.imag)


def exp(input):
    e = input.real.exp()
    im = input.imag
    return _pair(e * im.cos(), e * im.sin())


def log(input):
    """The principal logarithm: log|z| + i angle(z)."""
    return _pair(abs_(input).log(), angle(input))


def sqrt(input):
    return pow(input, 0.5)


def pow(input, exponent):
    """input ** exponent: an integer exponent by repeated products (exact gradients, z = 0 included), any other
    by exp(exponent * log(input)) (the principal branch, as torch's)."""
    if not isinstance(input, ComplexTensor):  # a real tensor or a number raised to a complex power
        base = _as_complex_tensor(input, exponent.device) if isinstance(input, (int, float, complex)) else \
            _as_complex_tensor(_operand(input, "pow"), None)
        return exp(mul(log(base), exponent))
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float, complex, Tensor)):
        raise TypeError(f"pow(): unsupported exponent of type {type(exponent).__name__} for a complex64 tensor")
    if isinstance(exponent, int) or (isinstance(exponent, float) and exponent.is_integer() and abs(exponent) < 64):
        n = int(exponent)
        out, square, k = None, input, abs(n)
        while k:
            if k & 1:
                out = square if out is None else mul(out, square)
            k >>= 1
            if k:
                square = mul(square, square)
        if out is None:
            return full(tuple(input.shape), 1, device=input.device)
        return div(1, out) if n < 0 else out
    return exp(mul(log(input), exponent))


def _dims(z, dim):
    if z.ndim == 0:  # a 0-d tensor reduces over no dim (dim 0 or -1 name it, as torch allows)
        _no_dims((dim,) if isinstance(dim, int) else dim or ())
        return ()
    if dim is None:
        return tuple(range(z.ndim))
    if isinstance(dim, (tuple, list)):
        return tuple(_dim(d, z.ndim) for d in dim)
    return (_dim(dim, z.ndim),)


def sum_(input, dim=None, keepdim=False, dtype=None):
    if dtype is not None and dtypes.to_dtype(dtype) is not complex64:
        raise _unsupported(f"sum(dtype={dtype!r})")
    dims = _dims(input, dim)
    return _wrap(input._r.sum(dim=dims, keepdim=keepdim)) if dims else input.clone()


def mean(input, dim=None, keepdim=False, dtype=None):
    if dtype is not None and dtypes.to_dtype(dtype) is not complex64:
        raise _unsupported(f"mean(dtype={dtype!r})")
    dims = _dims(input, dim)
    return _wrap(input._r.mean(dim=dims, keepdim=keepdim)) if dims else input.clone()


def eq(input, other):
    a, b = _lift(_operand(input, "eq"), _operand(other, "eq"))
    if not isinstance(a, ComplexTensor):
        a, b = b, a
    b = _as_complex_tensor(b, a.device)
    return (a._r == b._r).all(-1)


def ne(input, other):
    return eq(input, other).logical_not()


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol * |b| with the complex modulus, as torch.isclose on complex tensors."""
    a = _as_complex_tensor(input, getattr(input, "device", None))
    b = _as_complex_tensor(other, a.device)
    close = (a - b).abs() <= atol + rtol * b.abs()
    same = eq(a, b)
    if equal_nan:
        nan_a = (a._r != a._r).any(-1)
        nan_b = (b._r != b._r).any(-1)
        same = same | (nan_a & nan_b)
    return close | same


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def equal(input, other):
    if not (isinstance(input, ComplexTensor) and isinstance(other, ComplexTensor)):
        return False if tuple(input.shape) != tuple(other.shape) else bool(eq(input, other).all().item())
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(eq(input, other).all().item())


def cat(tensors, dim=0):
    tensors = list(tensors)
    first = next(t for t in tensors if isinstance(t, ComplexTensor))
    zs = [_as_complex_tensor(t, first.device) for t in tensors]
    # torch's legacy rule: 1-D empty tensors are skipped
    zs = [z for z in zs if not (z.ndim == 1 and z.numel() == 0)] or zs[:1]
    for i, z in enumerate(zs):
        if z.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    return _wrap(_real_cat([z._r for z in zs], _dim(dim, zs[0].ndim)))


def stack(tensors, dim=0):
    tensors = list(tensors)
    first = next(t for t in tensors if isinstance(t, ComplexTensor))
    zs = [_as_complex_tensor(t, first.device) for t in tensors]
    return _wrap(_real_stack([z._r for z in zs], _dim(dim, zs[0].ndim + 1)))


def _any_complex(args):
    for a in args[:2]:
        if isinstance(a, ComplexTensor):
            return True
        if isinstance(a, complex):
            return True
    return False


def _seq_complex(args, kwargs):
    seq = args[0] if args else kwargs.get("tensors", ())
    return isinstance(seq, (list, tuple)) and any(isinstance(t, ComplexTensor) for t in seq)


# Existing webgrad functions that take a complex path when an operand is complex: name -> (the complex
# implementation, the test on the call's arguments)
METHOD = object()  # dispatch to the first argument's ComplexTensor method of the same name
DISPATCH = {
    "add": add, "sub": sub, "subtract": sub, "mul": mul, "multiply": mul, "div": div, "divide": div,
    "true_divide": div, "matmul": matmul, "mm": matmul, "bmm": matmul, "eq": eq, "ne": ne, "not_equal": ne,
    "isclose": isclose, "allclose": allclose, "equal": equal, "cat": cat, "concat": cat, "concatenate": cat,
    "stack": stack, "sum": sum_, "mean": mean, "abs": abs_, "absolute": abs_, "exp": exp, "log": log,
    "sqrt": sqrt, "pow": pow, "square": METHOD, "neg": METHOD,
    "negative": METHOD, "conj": conj, "conj_physical": conj, "clone": METHOD, "contiguous": METHOD,
    "reshape": METHOD, "view": METHOD, "flatten": METHOD, "unflatten": METHOD, "squeeze": METHOD,
    "unsqueeze": METHOD, "transpose": METHOD, "swapaxes": METHOD, "swapdims": METHOD, "permute": METHOD,
    "movedim": METHOD, "moveaxis": METHOD, "t": METHOD, "narrow": METHOD, "select": METHOD,
    "unbind": METHOD, "split": METHOD, "chunk": METHOD, "flip": METHOD, "broadcast_to": METHOD,
    "repeat": METHOD, "expand_as": METHOD,
}


def dispatching(name, fn):
    """fn (a webgrad function) that hands its call to the complex implementation when an operand is complex."""
    impl = DISPATCH[name]
    if name in ("cat", "concat", "concatenate", "stack"):
        def wrapper(*args, **kwargs):
            if _seq_complex(args, kwargs):
                return impl(*args, **kwargs)
            return fn(*args, **kwargs)
    elif impl is METHOD:
        def wrapper(*args, **kwargs):
            if args and isinstance(args[0], ComplexTensor):
                return getattr(args[0], name)(*args[1:], **kwargs)
            return fn(*args, **kwargs)
    else:
        def wrapper(*args, **kwargs):
            if _any_complex(args):
                return impl(*args, **kwargs)
            return fn(*args, **kwargs)
    wrapper.__name__ = getattr(fn, "__name__", name)
    wrapper.__qualname__ = getattr(fn, "__qualname__", name)
    wrapper.__doc__ = fn.__doc__
    wrapper.__wrapped__ = fn
    return wrapper


# webgrad.<name> functions that exist only for complex numbers (the real tensor's forms where torch has them)
FUNCTIONS = {"polar": polar, "complex": complex_, "view_as_complex": view_as_complex, "view_as_real": view_as_real,
             "real": real, "imag": imag, "is_complex": is_complex, "angle": angle, "conj": conj,
             "conj_physical": conj, "resolve_conj": lambda input: input, "resolve_neg": lambda input: input,
             "is_conj": lambda input: False, "is_neg": lambda input: False}


_tensor.COMPLEX.update(to_complex=to_complex, from_data=from_data, from_numpy=from_numpy, full=full, add=add, sub=sub, mul=mul, div=div)
