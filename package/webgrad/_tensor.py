"""The Tensor: a strided view onto a backend storage, plus the autograd bookkeeping.

The class holds what every tensor has (shape, dtype, device, autograd state, data in and out, moves).
Its op methods (``x.exp()``, ``x + y``, ``x.sum()``) are declared in one place, ``ops/api.py``, from the
same functions that serve ``webgrad.exp(x)``; the elementwise ones come from the op table.
"""

import array
import math
import operator
import struct
import sys
from collections.abc import Sequence

from . import _autograd, _typenames, devices, dtypes
from ._autograd import record
from ._view import View
from ._backends import kernels


_CONTIGUOUS = {}  # shape -> (numel, contiguous strides), for Tensor._empty
# complex64's functions (to_complex, from_data, full, add, sub, mul, div), registered by webgrad/_complex.py:
# it builds on Tensor, which never imports it
COMPLEX = {}
_NP_NAMES = {"float32": "float32", "float16": "float16", "float64": "float64", "int64": "int64", "int32": "int32",
             "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool"}


def _np():
    try:
        import numpy
        return numpy
    except ImportError:
        return None


class Tensor:
    __slots__ = ("_view", "device", "requires_grad", "grad", "grad_fn", "_retains_grad", "__weakref__")

    def __new__(cls, *args, **kwargs):
        if (args or kwargs) and cls.__new__ is not Tensor.__new__:
            # a subclass's own __new__ calling super().__new__(cls, data): built here, as torch's Tensor.__new__;
            # a tensor is aliased, in its graph (Tensor.as_subclass, from webgrad/overrides.py)
            if len(args) == 1 and not kwargs and isinstance(args[0], Tensor):
                return args[0].as_subclass(cls)
            self = object.__new__(cls)
            Tensor.__init__(self, *args, **kwargs)
            return self
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        """PyTorch's legacy constructor: Tensor(3, 4) (or Tensor(size=(3, 4)), Tensor(webgrad.Size([3, 4])))
        is an uninitialised float32 tensor of that shape, Tensor() an empty one, and Tensor(data) is
        webgrad.tensor(data) in float32 (keywords: dtype, device, requires_grad, size). Prefer the creation
        functions, as in PyTorch."""
        try:
            self._view
            return  # already built (by a subclass's __new__): the arguments were that __new__'s, as in torch
        except AttributeError:
            pass
        self._legacy_init(*args, **kwargs)

    def _legacy_init(self, *args, dtype=None, device=None, requires_grad=False, size=None):
        shape = _legacy_shape(args, size)
        if shape is not None:
            t = empty(shape, dtype=dtype or dtypes.default_float(), device=device)
        else:
            data = args[0]  # a tensor keeps its dtype (as PyTorch); other data becomes float32
            t = tensor(data, dtype=dtype or (None if isinstance(data, Tensor) else dtypes.default_float()),
                       device=device)
        self._init(t._view, t.device, requires_grad)

    def _init(self, view, device, requires_grad=False):
        self._view = view
        self.device = device
        self.requires_grad = False
        self.grad = None
        self.grad_fn = None
        self._retains_grad = False
        if requires_grad:
            self.requires_grad_(True)

    @classmethod
    def _make(cls, view, device):
        t = object.__new__(cls)  # (not cls.__new__: no Python frame on every op's output)
        t._init(view, device)
        return t

    @classmethod
    def _empty(cls, shape, dtype, device):
        """A fresh contiguous tensor with undefined contents (the usual output of a kernel)."""
        shape = tuple(shape)
        # Every op's output comes through here: the element count and strides of a shape are computed
        # once (an eager step makes the same few shapes over and over).
        try:
            layout = _CONTIGUOUS.get(shape)
        except TypeError:  # an unhashable size (a 0-d tensor): computed below, not cached
            layout = None
        if layout is None:
            n = 1
            for s in shape:
                n *= s
            layout = (n, View.contiguous_strides(shape))
            # only sizes that are Python ints are kept: (3.0,) or (True,) equal (3,) or (1,) as keys, and
            # their layout (a float count) would then serve every later tensor of that shape
            if len(_CONTIGUOUS) < 4096 and all(type(s) is int for s in shape):
                try:
                    _CONTIGUOUS[shape] = layout
                except TypeError:
                    pass
        storage = device.backend.empty(layout[0], dtype)
        return cls._make(View(storage, shape, layout[1], 0, dtype), device)

    @staticmethod
    def _wrap_like(data, like):
        """A Python number, list or array as a tensor on `like`'s device with `like`'s dtype."""
        return tensor(data, dtype=like.dtype, device=like.device)

    def _full_like_value(self, value):
        return full(self.shape, value, dtype=self.dtype, device=self.device)

    # ----------------------------------------------------------------- attributes
    @property
    def shape(self):
        return Size(self._view.shape)

    @property
    def dtype(self):
        return self._view.dtype

    @property
    def ndim(self):
        return len(self._view.shape)

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def data(self):
        """The same storage without autograd history (PyTorch's .data)."""
        return self.detach()

    @data.setter
    def data(self, other):
        """`p.data = t` swaps the storage under p, keeping p's identity (how Module.to moves parameters)."""
        self._view = other._view
        self.device = other.device

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self):
        return self.transpose(-2, -1)

    @property
    def H(self):
        """The conjugate transpose of a matrix (webgrad's tensors are real: its transpose)."""
        if self.ndim not in (0, 2):
            raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor."
                               + (" For batches of matrices, consider using tensor.mH" if self.ndim > 2 else ""))
        return self.T

    @property
    def mH(self):
        """The conjugate transpose of each matrix of a batch (webgrad's tensors are real: mT)."""
        if self.ndim < 2:
            raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. Got "
                               f"{self.ndim}-D tensor.")
        return self.mT

    def size(self, dim=None):
        if dim is None:
            return self.shape
        return self._view.shape[_norm_dim(dim, self.ndim)]

    def dim(self):
        return self.ndim

    def ndimension(self):  # torch's older name for dim()
        return self.ndim

    def numel(self):
        return self._view.numel

    def nelement(self):
        return self.numel()

    def element_size(self):
        return self.dtype.itemsize

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        """The bytes this tensor's elements take (numel * itemsize, as torch: a view counts its own elements)."""
        return self._view.numel * self.dtype.itemsize

    def data_ptr(self):
        """An integer address of the first element, as torch's: each storage gets a base address of its own
        (webgrad has no raw pointers to give), and a view adds its offset in bytes, so views of one storage
        compare as torch's do (``a.data_ptr() == b.data_ptr()`` finds tied weights)."""
        return _storage_base(self._view.storage) + self._view.offset * self.dtype.itemsize

    def untyped_storage(self):
        return UntypedStorage(self)

    def pin_memory(self, device=None):
        return self  # no pinned host memory in webgrad: transfers to WebGPU go through the queue as they are

    def is_pinned(self, device=None):
        return False

    def bfloat16(self, memory_format=None):
        """bfloat16 (on the CPU; see webgrad/dtypes.py)."""
        return self.type(dtypes.bfloat16)

    def _check_cpu_map(self, op):
        if self.device.type != "cpu":
            raise TypeError(f"{op} is only implemented on CPU tensors; this tensor is on {self.device}")
        if self.requires_grad:
            raise RuntimeError(f"Can't call {op}() on Variable that requires grad. Use var.detach().{op}() instead.")

    def apply_(self, callable):
        """Each element x replaced by callable(x), in Python (CPU tensors only, as torch: slow, for tests)."""
        self._check_cpu_map("apply_")
        values = [callable(v) for v in _flat_list(self)]
        return self.copy_(Tensor._wrap_like(values, self).reshape(self.shape))

    def map_(self, tensor, callable):
        """Each element x replaced by callable(x, y), y the matching element of `tensor` broadcast to self's shape."""
        self._check_cpu_map("map_")
        if not isinstance(tensor, Tensor):
            raise TypeError(f"map_(): argument 'tensor' must be Tensor, not {type(tensor).__name__}")
        other = _flat_list(tensor.detach().to(self.device).expand(self.shape))
        values = [callable(a, b) for a, b in zip(_flat_list(self), other)]
        return self.copy_(Tensor._wrap_like(values, self).reshape(self.shape))

    def fill_diagonal_(self, fill_value, wrap=False):
        """The main diagonal (all dims equal, or a 2-D matrix) set to fill_value; wrap: in a tall matrix the
        diagonal starts again every (columns + 1) rows, as torch's (NumPy's fill_diagonal)."""
        shape = tuple(self.shape)
        if len(shape) < 2:
            raise RuntimeError("dimensions must larger than 1")
        if len(shape) > 2 and len(set(shape)) != 1:
            raise RuntimeError("all dimensions of input must be of equal length")
        if len(shape) == 2:
            rows, cols = shape
            end = rows * cols if wrap and rows > cols + 1 else min(rows, cols) * (cols + 1)
            positions = set(range(0, min(end, rows * cols), cols + 1))
        else:
            step = sum(_contiguous_strides(shape))
            positions = {i * step for i in range(shape[0])}
        mask = tensor([i in positions for i in range(self.numel())], device=self.device).reshape(shape)
        return self.masked_fill_(mask, fill_value)  # in place, with masked_fill_'s autograd

    def stride(self, dim=None):
        if dim is None:
            return self._view.strides
        return self._view.strides[_norm_dim(dim, self.ndim)]

    def storage_offset(self):
        return self._view.offset

    def is_contiguous(self, memory_format=None):
        """Whether the elements lie densely in `memory_format`'s order (row-major by default; channels_last: N, H,
        W, C for a 4-D tensor, channels_last_3d for a 5-D one; dims of size 1 take any stride), as torch's. webgrad
        allocates row-major (webgrad/memory_format.py), so a tensor moved to channels_last is not in that order."""
        if memory_format is None:
            return self._view.is_contiguous()
        from .memory_format import channels_last, channels_last_3d, contiguous_format, preserve_format
        if memory_format is contiguous_format or memory_format is preserve_format:
            return self._view.is_contiguous()
        order = {channels_last: (4, (1, 3, 2, 0)), channels_last_3d: (5, (1, 4, 3, 2, 0))}
        if memory_format not in order:
            raise TypeError(f"is_contiguous(): memory_format must be a torch memory format, got {memory_format!r}")
        ndim, dims = order[memory_format]
        if self.ndim != ndim:
            return False
        expected = 1
        for d in dims:  # innermost first: channels, then the spatial dims from the last, then the batch
            size, stride = self._view.shape[d], self._view.strides[d]
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def is_floating_point(self):
        return self.dtype.is_floating

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._view.shape[0]

    # ----------------------------------------------------------------- autograd
    @property
    def _version(self):
        """The number of in-place writes into this tensor's storage (PyTorch's version counter, shared by views)."""
        return _autograd.version(self._view.storage)

    def requires_grad_(self, requires_grad=True):
        if requires_grad and not self.dtype.is_floating:
            raise RuntimeError(
                f"only floating point tensors can require gradients; this tensor is {self.dtype.name}"
            )
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError("you can only change requires_grad flags of leaf variables")
        self.requires_grad = bool(requires_grad)
        return self

    def retain_grad(self):
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on a tensor that has requires_grad=False")
        if self.grad_fn is not None:
            self._retains_grad = True

    @property
    def retains_grad(self):
        return self._retains_grad

    def register_hook(self, hook):
        """hook(grad) on this tensor's gradient in every backward pass; it may return a replacement. Returns
        a handle whose remove() takes the hook off (see _autograd.register_hook)."""
        return _autograd.register_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook):
        return _autograd.register_post_accumulate_grad_hook(self, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        if not self.requires_grad:
            raise RuntimeError(
                "element 0 of tensors does not require grad and does not have a grad_fn: "
                "call backward() on a result computed from tensors with requires_grad=True"
            )
        if gradient is None:
            if self.numel() != 1:
                raise RuntimeError(
                    f"grad can be implicitly created only for scalar outputs; backward() on a tensor of shape "
                    f"{tuple(self.shape)} needs a `gradient` argument of that shape"
                )
            gradient = self._full_like_value(1.0)
        else:
            if not isinstance(gradient, Tensor):
                gradient = Tensor._wrap_like(gradient, self)
            if tuple(gradient.shape) != tuple(self.shape):
                raise RuntimeError(f"backward(): gradient has shape {tuple(gradient.shape)} but the tensor has "
                                   f"shape {tuple(self.shape)}")
        keep = create_graph if retain_graph is None else retain_graph
        if inputs is not None:  # accumulate into these tensors' .grad only, as torch
            inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
            for t, g in zip(inputs, _autograd.grad([(self, gradient)], inputs, bool(keep), bool(create_graph))):
                if g is not None:
                    _autograd.accumulate_into(t, g, bool(create_graph))
            return
        _autograd.backward(self, gradient, retain_graph=bool(keep), create_graph=bool(create_graph))

    def detach(self):
        return Tensor._make(self._view, self.device)

    def is_shared(self):
        return False  # no storage of webgrad's lives in shared memory (webgrad.multiprocessing)

    is_sparse = False  # webgrad.sparse's COO tensors say True

    @property
    def layout(self):
        from .layout import strided
        return strided

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        """This tensor's nonzero entries as a sparse COO tensor (webgrad.sparse)."""
        from .sparse import to_sparse
        return to_sparse(self, sparse_dim, layout=layout, blocksize=blocksize, dense_dim=dense_dim)

    def to_dense(self, dtype=None, *, masked_grad=None):
        return self if dtype is None else self.to(dtype=dtype)

    def share_memory_(self):
        from ._sharing import not_shared
        raise not_shared("Tensor.share_memory_()")

    def detach_(self):
        self.grad_fn = None
        self.requires_grad = False
        return self

    # ----------------------------------------------------------------- data out
    def _bytes(self):
        return self.device.backend.to_bytes(self._view)

    async def _bytes_async(self):
        return await self.device.backend.to_bytes_async(self._view)

    def _decode(self, raw):
        if self.dtype is dtypes.bfloat16:
            raw = dtypes.bf16_unpack(raw)  # exactly the float32 of the same value
            return array.array("f", raw).tolist()
        if self.dtype.fmt == "e":  # array.array has no half floats; struct does
            return list(struct.unpack(f"<{len(raw) // 2}e", raw))
        flat = array.array(self.dtype.fmt)
        flat.frombytes(raw)
        if self.dtype is dtypes.bool_:
            return [bool(v) for v in flat]
        return flat.tolist()

    def _check_item(self):
        if self.numel() != 1:
            raise RuntimeError(
                f"a Tensor with {self.numel()} elements cannot be converted to a Python scalar (item() needs exactly one)"
            )

    def item(self):
        self._check_item()
        return self._decode(self._bytes())[0]

    async def item_async(self):
        """item() for runtimes that cannot block on the GPU (a browser page without JSPI)."""
        self._check_item()
        return self._decode(await self._bytes_async())[0]

    def tolist(self):
        return _nest(self._decode(self._bytes()), self._view.shape)

    async def tolist_async(self):
        return _nest(self._decode(await self._bytes_async()), self._view.shape)

    def numpy(self):
        np = _np()
        if np is None:
            raise RuntimeError("numpy() needs NumPy, which is not installed; use tolist() instead")
        if self.requires_grad:
            raise RuntimeError("Can't call numpy() on a Tensor that requires grad. Use tensor.detach().numpy() instead.")
        _check_numpy_dtype(self.dtype)
        if self.device.type == "cpu":
            return self.device.backend.array(self._view)
        return np.frombuffer(self._bytes(), _NP_NAMES[self.dtype.name]).reshape(self._view.shape).copy()

    async def numpy_async(self):
        np = _np()
        if np is None:
            raise RuntimeError("numpy_async() needs NumPy, which is not installed; use tolist_async() instead")
        _check_numpy_dtype(self.dtype)
        return np.frombuffer(await self._bytes_async(), _NP_NAMES[self.dtype.name]).reshape(self._view.shape).copy()

    def __array__(self, dtype=None, copy=None):
        a = self.detach().numpy()
        return a.astype(dtype) if dtype is not None else a

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of a Tensor with {self.numel()} elements is ambiguous")
        return bool(self.item())

    def __index__(self):
        if self.dtype.is_floating or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __hash__(self):
        return id(self)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._view.shape[0]))

    def __reduce__(self):
        # pickling (e.g. copy.deepcopy of a module) goes through the canonical bytes
        return (_rebuild, (self._bytes(), self.dtype.name, tuple(self.shape), str(self.device), self.requires_grad))

    def __deepcopy__(self, memo):
        t = self.detach().clone()
        t.requires_grad = self.requires_grad
        memo[id(self)] = t
        return t

    # ----------------------------------------------------------------- moving
    def to(self, *args, **kwargs):
        """to(device), to(dtype), to(device, dtype), to(other_tensor), each followed by the positional
        non_blocking and copy flags as torch's; returns self when nothing changes."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        kwargs.pop("memory_format", None)  # accepted: webgrad's tensors are row-major (see memory_format.py)
        copy = kwargs.pop("copy", False)
        if kwargs:
            raise TypeError(f"to() got unexpected arguments {sorted(kwargs)}")
        flags = [a for a in args if isinstance(a, bool)]  # (non_blocking, copy): a bool is never a device
        if len(flags) > 2:
            raise TypeError(f"to() got {len(flags)} positional flags; it takes non_blocking and copy")
        if len(flags) == 2:
            copy = flags[1]
        for a in args:
            if isinstance(a, bool):
                continue
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, dtypes.DType) or a in (float, int, bool) or (hasattr(a, "itemsize") and not isinstance(a, str)):
                dtype = a
            else:
                device = a
        out = self
        if dtype is not None and dtypes.to_dtype(dtype) is not out.dtype:
            out = out.type(dtypes.to_dtype(dtype))
        if device is not None and devices.get(device) != out.device:
            out = _to_device(out, devices.get(device))
        if copy and out is self:
            out = self.clone()
        return out

    def cpu(self):
        return self.to("cpu")

    def webgpu(self):
        return self.to("webgpu")

    def cuda(self, device=None, non_blocking=False):
        """As on a torch without CUDA: an error that names webgpu (devices.DeviceUnavailableError)."""
        return self.to("cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device)

    def type(self, dtype=None, non_blocking=False, **kwargs):
        """t.type() names the type as PyTorch does ('torch.FloatTensor'); t.type(X) converts to X: a dtype,
        a legacy type (torch.LongTensor) or its name ('torch.LongTensor'). The device is kept."""
        if isinstance(dtype, dtypes.DType):
            return cast(self, dtype)
        if dtype is None:
            return _typenames.type_name(self.dtype)
        return cast(self, dtypes.float32 if dtype is Tensor else _typenames.type_dtype(dtype))

    def type_as(self, other):
        """self converted to other's type: its dtype and, as PyTorch's self.type(other.type()) moves a CPU tensor
        to CUDA, its device. No copy where both already match."""
        if not isinstance(other, Tensor):
            raise TypeError(f"type_as(): argument 'other' (position 1) must be Tensor, not {type(other).__name__}")
        return self.to(other.device, other.dtype)

    def float(self, memory_format=None):
        return self.type(dtypes.float32)

    def int(self, memory_format=None):
        return self.type(dtypes.int32)

    def long(self, memory_format=None):
        """int64, as PyTorch (on WebGPU its values must lie in the int32 range: see webgrad.dtypes)."""
        return self.type(dtypes.int64)

    def double(self, memory_format=None):
        """float64, on the CPU device; WebGPU has no 64-bit floats and says so."""
        return self.type(dtypes.float64)

    def half(self, memory_format=None):
        """float16 (on WebGPU where the adapter has shader-f16; webgrad.autocast casts per op instead)."""
        return self.type(dtypes.float16)

    def __format__(self, spec):
        # f"{loss:.4f}" formats a 0-d tensor's value, as PyTorch; other tensors only take an empty spec
        if self.ndim == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def bool(self, memory_format=None):
        return self.type(dtypes.bool_)

    def byte(self, memory_format=None):
        return self.type(dtypes.uint8)

    def short(self, memory_format=None):
        """int16 (on the CPU; see webgrad/dtypes.py)."""
        return self.type(dtypes.int16)

    def char(self, memory_format=None):
        """int8 (on the CPU; see webgrad/dtypes.py)."""
        return self.type(dtypes.int8)

    # ----------------------------------------------------------------- PyTorch's conveniences
    # Device questions scripts ask (`if x.is_cuda:`): webgrad has no CUDA, MPS or XPU device.
    is_cuda = property(lambda self: False)
    is_mps = property(lambda self: False)
    is_xpu = property(lambda self: False)
    is_meta = property(lambda self: self.device.type == "meta")
    is_cpu = property(lambda self: self.device.type == "cpu")

    def _new(self, dtype, device):
        return (self.dtype if dtype is None else dtypes.to_dtype(dtype)), (self.device if device is None else device)

    def new_empty(self, *sizes, size=None, dtype=None, device=None, requires_grad=False, layout=None,
                  pin_memory=False):
        """An uninitialised tensor with this one's dtype and device (unless given), as torch's new_empty."""
        dtype, device = self._new(dtype, device)
        return empty(_size_arg("new_empty", sizes, size), dtype=dtype, device=device, requires_grad=requires_grad,
                     layout=layout, pin_memory=pin_memory)

    def new_zeros(self, *sizes, size=None, dtype=None, device=None, requires_grad=False, layout=None,
                  pin_memory=False):
        dtype, device = self._new(dtype, device)
        return zeros(_size_arg("new_zeros", sizes, size), dtype=dtype, device=device, requires_grad=requires_grad,
                     layout=layout, pin_memory=pin_memory)

    def new_ones(self, *sizes, size=None, dtype=None, device=None, requires_grad=False, layout=None,
                 pin_memory=False):
        dtype, device = self._new(dtype, device)
        return ones(_size_arg("new_ones", sizes, size), dtype=dtype, device=device, requires_grad=requires_grad,
                    layout=layout, pin_memory=pin_memory)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
        dtype, device = self._new(dtype, device)
        return full(_size_arg("new_full", (), size), fill_value, dtype=dtype, device=device,
                    requires_grad=requires_grad, layout=layout, pin_memory=pin_memory)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
        """tensor(data) with this one's dtype and device unless given (a copy, without autograd history)."""
        _check_layout("new_tensor", layout, pin_memory)
        if isinstance(data, Tensor):
            import warnings
            warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() "
                          "or sourceTensor.detach().clone().requires_grad_(True), rather than "
                          "tensor.new_tensor(sourceTensor).", UserWarning, stacklevel=2)
        dtype, device = self._new(dtype, device)
        return tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        """The p-norm over `dim` (all elements when None), as torch.norm: p a number (0, 1, 2, inf, -inf, any
        other) or 'fro' (the 2-norm). Its gradient is torch's (0 where a norm is 0, shared among ties for inf)."""
        from . import _norm
        return _norm.norm(self, p, dim, keepdim, dtype)


_STORAGE_BASES = {}  # id(storage) -> (weak reference to it, its base address for data_ptr)
_NEXT_BASE = [1 << 36]


def _storage_base(storage):
    """A distinct base address per live storage, 64 GiB apart (no storage's offsets reach the next one's)."""
    key = id(storage)
    entry = _STORAGE_BASES.get(key)
    if entry is not None and entry[0]() is storage:
        return entry[1]
    import weakref
    base = _NEXT_BASE[0]
    _NEXT_BASE[0] += 1 << 36
    _STORAGE_BASES[key] = (weakref.ref(storage, lambda _, key=key: _STORAGE_BASES.pop(key, None)), base)
    return base


def _contiguous_strides(shape):
    return View.contiguous_strides(tuple(shape))


def _check_numpy_dtype(dtype):
    """NumPy has no bfloat16: numpy() refuses it with torch's TypeError (convert with .float() first)."""
    if dtype is dtypes.bfloat16:
        raise TypeError("Got unsupported ScalarType BFloat16")


def _flat_list(t):
    values = t.reshape(-1).tolist()
    return values


class UntypedStorage:
    """What Tensor.untyped_storage() gives: the bytes of the tensor's storage as torch's UntypedStorage
    describes them (size in bytes, data_ptr of its start, device); webgrad gives no byte-level access."""

    def __init__(self, t):
        self._storage, self._itemsize, self.device = t._view.storage, t.dtype.itemsize, t.device

    def nbytes(self):
        storage = self._storage
        numel = getattr(storage, "numel", None)
        return (numel if isinstance(numel, int) else storage.size) * self._itemsize

    size = nbytes

    def __len__(self):
        return self.nbytes()

    def element_size(self):
        return 1

    def data_ptr(self):
        return _storage_base(self._storage)


class Size(tuple):
    """torch.Size: a tuple with a PyTorch-looking repr and numel()."""

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self):
        return f"{dtypes.namespace()}.Size([{', '.join(str(s) for s in self)}])"

    # slices, sums and repeats of a Size are Sizes, as torch's (x.shape[:-1] + (n,) prints as torch.Size)
    def __getitem__(self, index):
        got = tuple.__getitem__(self, index)
        return Size(got) if isinstance(index, slice) else got

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple(self) + tuple(other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple(other) + tuple(self))

    def __mul__(self, n):
        return Size(tuple(self) * n)

    __rmul__ = __mul__


_autograd.register_tensor_type(Tensor)


def _rebuild(raw, dtype_name, shape, device, requires_grad):
    t = frombuffer(raw, dtype=dtypes.to_dtype(dtype_name), device=device).reshape(shape)
    t.requires_grad = requires_grad
    return t


def cast(x, dtype):
    """x converted to dtype (a new tensor even when nothing changes, as .to(copy=True))."""
    if x.dtype is dtype:
        return x
    if dtype.is_complex:
        return COMPLEX["to_complex"](x, dtype)
    out = Tensor._empty(x.shape, dtype, x.device)
    kernels.copy(x.device.backend, out._view, x._view)
    if dtype.is_floating and x.dtype.is_floating:
        # the gradient goes back in the input's dtype (autocast's float16 copies feed float32 parameters).
        # The backward keeps the dtype, not x: holding x would keep autocast's float32 originals alive
        # beside their float16 copies until the backward pass (a GPT's LayerNorm outputs, say).
        source = x.dtype
        record(out, "ToCopy", (x,), lambda g: (cast(g, source),))
    return out


def _to_device(t, device):
    if t.dtype.is_complex:  # its float32 pairs move (webgrad/_complex.py)
        return t.to(device)
    storage = device.backend.empty(t.numel(), t.dtype) if device.type == "meta" else \
        device.backend.from_bytes(t._bytes(), t.dtype)  # (a meta tensor keeps no values: none are read)
    out = Tensor._make(View(storage, t.shape, View.contiguous_strides(t.shape), 0, t.dtype), device)
    if t.requires_grad:
        source = t.device  # not t, which the backward would otherwise keep alive on its device
        record(out, "ToCopy", (t,), lambda g: (_to_device(g, source),))
    return out


def _norm_dim(dim, ndim):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def _nest(flat, shape):
    if not shape:
        return flat[0]
    if 0 in shape:  # no elements: the lists down to the first empty dim, as torch's [[], []] for shape (2, 0)
        return [] if shape[0] == 0 else [_nest(flat, shape[1:]) for _ in range(shape[0])]
    for n in reversed(shape[1:]):
        flat = [flat[i:i + n] for i in range(0, len(flat), n)]
    return flat


# ===================================================================== creation from data
_ARRAY_TYPECODES = {"f": dtypes.float32, "d": dtypes.float64, "B": dtypes.uint8, "b": dtypes.int8, "h": dtypes.int16,
                    "H": dtypes.int32, "i": dtypes.int32, "I": dtypes.int64, "l": dtypes.int64, "L": dtypes.int64,
                    "q": dtypes.int64, "Q": dtypes.int64}


# array.array typecodes whose bytes are a dtype's canonical layout as they are
_ARRAY_NATIVE = {"f": dtypes.float32, "d": dtypes.float64, "B": dtypes.uint8, "i": dtypes.int32, "q": dtypes.int64,
                 "b": dtypes.int8, "h": dtypes.int16}


def _flatten(data, tensor_dtypes=None):
    """Nested sequences (lists, tuples, deques, ranges ...) of numbers or tensors -> (flat list, shape). The dtype of
    each element that came from a tensor is appended to `tensor_dtypes`: torch.tensor's dtype follows them."""
    if type(data) in (float, int, bool):  # the common leaf, before the slower Sequence check
        return [data], ()
    if isinstance(data, Tensor):
        if tensor_dtypes is not None:
            tensor_dtypes.extend([data.dtype] * data.numel())
        return ([data.item()], ()) if data.ndim == 0 else _flatten(data.tolist())
    np = sys.modules.get("numpy")
    if np is not None and isinstance(data, np.ndarray):  # a list of arrays: their elements carry the arrays' dtype
        return list(data.reshape(-1)), tuple(data.shape)
    if isinstance(data, str):
        raise TypeError(f"new(): invalid data type 'str': {data!r} is text, not a number or a sequence of numbers")
    if not isinstance(data, (list, tuple)) and (isinstance(data, bytes) or not isinstance(data, Sequence)):
        return [data], ()
    if len(data) == 0:
        return [], (0,)
    parts = [_flatten(x, tensor_dtypes) for x in data]
    inner = parts[0][1]
    for p in parts:
        if p[1] != inner:
            raise ValueError(f"expected a rectangular nested sequence, but found sub-sequences of shapes {inner} and {p[1]}")
    flat = [v for p in parts for v in p[0]]
    return flat, (len(data),) + inner


def _infer_dtype(flat, tensor_dtypes=()):
    """torch.tensor's dtype for these Python numbers, of which len(tensor_dtypes) came from tensors of those dtypes
    (torch.tensor([t]) keeps t's dtype; numbers beside tensors promote with them). NumPy scalars among them carry
    their dtype as tensors do (torch.tensor([np.int64(1), 2]) is int64, [np.float64(0.5)] float64)."""
    np = sys.modules.get("numpy")  # (never imported here: Pyodide has none)
    if np is not None and any(isinstance(v, np.generic) for v in flat):
        carried = [_numpy_dtype(v.dtype) for v in flat if isinstance(v, np.generic)]
        plain = [v for v in flat if not isinstance(v, np.generic)]
        inferred = _infer_dtype(plain, tensor_dtypes) if plain else None
        for d in carried:
            inferred = d if inferred is None else dtypes.promote_types(inferred, d)
        return inferred
    if tensor_dtypes:
        inferred = None if len(tensor_dtypes) == len(flat) else _infer_dtype(flat)
        for d in tensor_dtypes:
            inferred = d if inferred is None else dtypes.promote_types(inferred, d)
        return inferred
    if flat and all(isinstance(v, bool) for v in flat):
        return dtypes.bool_
    if all(isinstance(v, int) for v in flat) and flat:
        return dtypes.int64  # as torch.tensor([1, 2])
    return dtypes.default_float()


def _pack(flat, dtype):
    """Python numbers -> canonical bytes of `dtype`."""
    try:
        if dtype is dtypes.bfloat16:  # as float32, then rounded to nearest even (torch's double -> float -> bf16)
            return dtypes.bf16_pack(array.array("f", [float(v) for v in flat]).tobytes())
        if dtype.fmt == "e":  # struct rounds to nearest even and gives inf beyond the range, as a cast does
            return b"".join(_pack_half(float(v)) for v in flat)
        if dtype.is_floating:
            return array.array(dtype.fmt, [float(v) for v in flat]).tobytes()
        if dtype is dtypes.bool_:
            return bytes(1 if v else 0 for v in flat)
        if dtype is dtypes.uint8:
            return bytes(int(v) for v in flat)
        return array.array(dtype.fmt, [int(v) for v in flat]).tobytes()
    except OverflowError:
        bad = next(int(v) for v in flat if not _fits(int(v), dtype))
        raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow: {bad}") from None
    except ValueError as e:
        raise ValueError(f"value out of range for {dtype.name}: {e}") from None
    except TypeError:
        bad = next(v for v in flat if not isinstance(v, (int, float, bool)))
        raise TypeError(f"tensor() expects numbers, got an element of type {type(bad).__name__}: {bad!r}") from None


def _fits(v, dtype):
    bits = 8 * dtype.itemsize - 1
    return -(1 << bits) <= v < (1 << bits)


_HALF_MAX = 65519.99999999999  # below this a float rounds to a finite half (65504); at or above it to inf


def _pack_half(v):
    if v != v or abs(v) < _HALF_MAX:
        return struct.pack("<e", v)
    return b"\x00\x7c" if v > 0 else b"\x00\xfc"  # struct refuses values beyond the range


def _numpy_dtype(np_dtype):
    """webgrad's dtype for a NumPy dtype, or TypeError."""
    kind, size = np_dtype.kind, np_dtype.itemsize
    if kind == "f":
        return {8: dtypes.float64, 2: dtypes.float16}.get(size, dtypes.float32)
    if kind == "b":
        return dtypes.bool_
    if kind in "iu":
        # uint16 widens to int32; int64, uint32 and uint64 to int64
        narrow = {"uint8": dtypes.uint8, "int8": dtypes.int8, "int16": dtypes.int16}.get(np_dtype.name)
        return narrow or (dtypes.int64 if size >= 8 or (kind == "u" and size == 4) else dtypes.int32)
    raise TypeError(f"can't convert a NumPy array of dtype {np_dtype} to a tensor")


def _from_numpy(arr, dtype):
    np = _np()
    kind, size = arr.dtype.kind, arr.dtype.itemsize
    dtype = dtype or _numpy_dtype(arr.dtype)
    if kind == "u" and size == 8 and dtype is dtypes.int64 and arr.size and arr.max() > 2**63 - 1:
        raise RuntimeError(f"value cannot be converted to type int64 without overflow: {arr.max()}")
    if dtype is dtypes.bfloat16:
        return dtypes.bf16_pack(np.ascontiguousarray(arr, dtype="<f4").tobytes()), tuple(arr.shape), dtype
    npd = _NP_NAMES[dtype.name]
    return np.ascontiguousarray(arr, dtype=npd).tobytes(), tuple(arr.shape), dtype


def tensor(data, dtype=None, device=None, requires_grad=False):
    """Create a tensor from data: nested lists / numbers, array.array, bytes-like (with dtype, default uint8),
    a NumPy array, or another tensor (copied)."""
    dtype = dtypes.to_dtype(dtype)
    dev = devices.get(device)
    np = _np()
    if isinstance(data, Tensor):
        out = data.detach().to(device=dev if device is not None else data.device, dtype=dtype, copy=True)
        return out.requires_grad_(requires_grad) if requires_grad else out
    if (dtype is not None and dtype.is_complex) or isinstance(data, complex) or (
            np is not None and isinstance(data, (np.ndarray, np.generic)) and np.asarray(data).dtype.kind == "c"):
        return _complex_data(data, dtype, dev, requires_grad)
    if np is not None and isinstance(data, (np.ndarray, np.generic)):
        raw, shape, dtype = _from_numpy(np.asarray(data), dtype)
    elif isinstance(data, array.array):
        src = _ARRAY_TYPECODES.get(data.typecode)
        if src is None:
            raise TypeError(f"unsupported array.array typecode {data.typecode!r}")
        dtype = dtype or src
        if _ARRAY_NATIVE.get(data.typecode) is dtype:  # already the canonical layout
            raw = data.tobytes()
        else:
            raw = _pack(data.tolist(), dtype)
        shape = (len(data),)
    elif isinstance(data, (bytes, bytearray, memoryview)):
        mv = memoryview(data)
        dtype = dtype or dtypes.uint8
        if mv.format not in ("B", "b", "c") and mv.itemsize == dtype.itemsize:
            shape = tuple(mv.shape)
            raw = mv.tobytes()
        else:
            raw = mv.tobytes()
            if len(raw) % dtype.itemsize:
                raise ValueError(f"buffer of {len(raw)} bytes is not a whole number of {dtype.name} elements")
            shape = (len(raw) // dtype.itemsize,)
    else:
        tensor_dtypes = []
        flat, shape = _flatten(data, tensor_dtypes)
        if dtype is None and any(type(v) is complex for v in flat):
            return _complex_data(data, dtype, dev, requires_grad)
        dtype = dtype or _infer_dtype(flat, tensor_dtypes)
        raw = _pack(flat, dtype)
    view = View(dev.backend.from_bytes(raw, dtype), shape, View.contiguous_strides(shape), 0, dtype)
    t = Tensor._make(view, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _complex_data(data, dtype, device, requires_grad):
    """tensor() of complex numbers (or with dtype=complex64): webgrad/_complex.py's view over float pairs."""
    from_data = COMPLEX["from_data"]
    if dtype is None or dtype is dtypes.complex64:
        return from_data(data, device=device, requires_grad=requires_grad)
    if dtype.is_complex:
        raise TypeError(dtypes.COMPLEX128_ERROR)
    if isinstance(data, (list, tuple, complex)):
        raise TypeError("must be real number, not complex")
    out = from_data(data, device=device).to(dtype)  # a NumPy array: the real part, with torch's warning
    return out.requires_grad_(True) if requires_grad else out


def as_tensor(data, dtype=None, device=None):
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype) if (device is not None or dtype is not None) else data
    return tensor(data, dtype=dtype, device=device)


def from_numpy(arr):
    """A CPU tensor that shares `arr`'s memory (writes show through both ways), as torch.from_numpy, for
    float32/float64/float16/int64/int32/int16/int8/uint8/bool arrays with non-negative strides. Other integer arrays
    are copied (uint16 into int32, uint32/uint64 into int64)."""
    np = _np()
    if np is None or not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    if arr.dtype.kind == "c":  # complex64: shared as its float32 pairs (webgrad/_complex.py)
        return COMPLEX["from_numpy"](arr)
    name = {"float32": "float32", "float64": "float64", "float16": "float16", "int64": "int64", "int32": "int32",
            "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool"}.get(arr.dtype.name)
    item = arr.dtype.itemsize
    if name is None or not arr.dtype.isnative or any(s < 0 or s % item for s in arr.strides):
        return tensor(arr, device="cpu")
    dtype = dtypes.to_dtype(name)
    span = 1 + sum((n - 1) * (s // item) for n, s in zip(arr.shape, arr.strides)) if arr.size else 0
    storage = np.lib.stride_tricks.as_strided(arr, shape=(span,), strides=(item,))
    strides = tuple(s // item for s in arr.strides)
    return Tensor._make(View(storage, tuple(arr.shape), strides, 0, dtype), devices.get("cpu"))


def _legacy_shape(args, size):
    """The shape of a legacy Tensor(*sizes) call, or None when it is Tensor(data)."""
    if size is not None:
        return tuple(size)
    if not args:
        return (0,)
    if isinstance(args[0], Size) and len(args) == 1:
        return tuple(args[0])
    if all(isinstance(a, int) and not isinstance(a, bool) for a in args) and (len(args) > 1 or not
                                                                              isinstance(args[0], Tensor)):
        return tuple(args)
    if len(args) > 1:
        raise TypeError(f"Tensor(): expected sizes (ints) or one data argument, got {len(args)} arguments")
    return None


def frombuffer(buffer, dtype=None, device=None, count=-1, offset=0):
    """A 1-D tensor from the bytes of `buffer` (canonical little-endian layout of `dtype`)."""
    dtype = dtypes.to_dtype(dtype, dtypes.uint8)
    mv = memoryview(buffer).cast("B")[offset:]
    if count >= 0:
        mv = mv[: count * dtype.itemsize]
    return tensor(mv, dtype=dtype, device=device)


# ===================================================================== creation functions
def _shape_args(size):
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, int) or isinstance(s, bool) or s < 0:
            raise ValueError(f"sizes must be non-negative integers, got {tuple(size)}")
    return tuple(size)


def _size_arg(name, sizes, size):
    """The shape of a creation call, from torch's forms: f(2, 3), f((2, 3)), f([2, 3]), f(Size), f(size=(2, 3)).

    Sizes are ints or anything with __index__ (a 0-d integer tensor); bad ones get torch's errors. No
    sizes at all give a 0-d tensor (torch asks for a size; webgrad's own code calls f(*shape) for any shape)."""
    if size is not None:
        if sizes:
            raise TypeError(f"{name}() got multiple values for argument 'size'")
        if not isinstance(size, (tuple, list)):
            raise TypeError(f"{name}(): argument 'size' must be tuple of ints, not {type(size).__name__}")
        sizes = tuple(size)
    elif len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    shape = []
    for s in sizes:
        if isinstance(s, (float, list, tuple, str)) or s is None:
            raise TypeError(f"{name}(): argument 'size' must be tuple of ints, but found element of type "
                            f"{type(s).__name__}")
        try:
            shape.append(operator.index(s))
        except TypeError:
            raise TypeError(f"{name}(): argument 'size' must be tuple of ints, but found element of type "
                            f"{type(s).__name__}") from None
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {shape}")
    return tuple(shape)


def _check_layout(name, layout, pin_memory=False):
    """layout=torch.strided and pin_memory=False are what webgrad's tensors are; other values are refused."""
    if layout is not None and "strided" not in str(layout):
        raise RuntimeError(f"{name}(): layout {layout} is not supported (webgrad's tensors are strided)")
    if pin_memory:
        raise RuntimeError(f"{name}(): pin_memory=True is not supported (webgrad has no pinned host memory)")


def empty(*sizes, size=None, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False,
          memory_format=None):
    """empty(*size) / empty(size=...): a tensor with undefined contents (torch.empty's forms)."""
    _check_layout("empty", layout, pin_memory)
    if dtype is not None and dtypes.to_dtype(dtype).is_complex:
        return full(_size_arg("empty", sizes, size), 0, dtype=dtype, device=device, requires_grad=requires_grad)
    t = Tensor._empty(_size_arg("empty", sizes, size), dtypes.to_dtype(dtype, dtypes.default_float()),
                      devices.get(device))
    return t.requires_grad_(True) if requires_grad else t


def full(size, fill_value, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    _check_layout("full", layout, pin_memory)
    size = _shape_args((size,) if isinstance(size, int) else (tuple(size),))
    dtype = dtypes.to_dtype(dtype) or dtypes.scalar_dtype(fill_value)  # a float fill: the default float dtype
    if dtype.is_complex:
        if dtype is not dtypes.complex64:
            raise TypeError(dtypes.COMPLEX128_ERROR)
        return COMPLEX["full"](size, fill_value, device=device, requires_grad=requires_grad)
    fill_value = dtypes.check_fill_value(fill_value, dtype)
    t = Tensor._empty(size, dtype, devices.get(device))
    kernels.fill(t.device.backend, t._view, fill_value)
    return t.requires_grad_(True) if requires_grad else t


def zeros(*sizes, size=None, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    """zeros(*size) / zeros(size=...), as torch.zeros."""
    return full(_size_arg("zeros", sizes, size), 0, dtype=dtypes.to_dtype(dtype, dtypes.default_float()), device=device,
                requires_grad=requires_grad, layout=layout, pin_memory=pin_memory)


def ones(*sizes, size=None, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    """ones(*size) / ones(size=...), as torch.ones."""
    return full(_size_arg("ones", sizes, size), 1, dtype=dtypes.to_dtype(dtype, dtypes.default_float()), device=device,
                requires_grad=requires_grad, layout=layout, pin_memory=pin_memory)


def _like(x, dtype, device):
    return dtypes.to_dtype(dtype, x.dtype), (device if device is not None else x.device)


def zeros_like(x, dtype=None, device=None, requires_grad=False):
    dtype, device = _like(x, dtype, device)
    return zeros(tuple(x.shape), dtype=dtype, device=device, requires_grad=requires_grad)


def ones_like(x, dtype=None, device=None, requires_grad=False):
    dtype, device = _like(x, dtype, device)
    return ones(tuple(x.shape), dtype=dtype, device=device, requires_grad=requires_grad)


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False):
    dtype, device = _like(x, dtype, device)
    return full(tuple(x.shape), fill_value, dtype=dtype, device=device, requires_grad=requires_grad)


def empty_like(x, dtype=None, device=None, requires_grad=False):
    dtype, device = _like(x, dtype, device)
    return empty(tuple(x.shape), dtype=dtype, device=device, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange(): step must be nonzero")
    is_int = all(isinstance(v, int) for v in (start, end, step))
    dtype = dtypes.to_dtype(dtype, dtypes.int64 if is_int else dtypes.default_float())
    # floats: torch's ceil of the rounded quotient (arange(0, 3, 0.3) has 10 values: 3 / 0.3 rounds to 10.0)
    n = max(0, -(-(end - start) // step)) if is_int else max(0, math.ceil((end - start) / step))
    values = [start + i * step for i in range(n)]
    return tensor(values, dtype=dtype, device=device, requires_grad=requires_grad) if n else \
        empty(0, dtype=dtype, device=device)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    """`steps` values from start to end, both included; start and end may be numbers or 0-d tensors."""
    _check_layout("linspace", layout, pin_memory)
    start, end, steps = _scalar_arg("linspace", start), _scalar_arg("linspace", end), operator.index(steps)
    if steps < 0:
        raise ValueError("linspace(): number of steps must be non-negative")
    if steps == 1:
        values = [float(start)]
    else:
        step = (end - start) / (steps - 1)
        # symmetric formula as PyTorch: the second half counts back from `end` so both ends are exact
        half = steps // 2
        values = [start + step * i if i < half else end - step * (steps - 1 - i) for i in range(steps)]
    return tensor(values, dtype=dtypes.to_dtype(dtype, dtypes.default_float()), device=device,
                  requires_grad=requires_grad) \
        if steps else empty(0, dtype=dtype, device=device)


def _scalar_arg(name, value):
    """A number, or a one-element tensor's value (linspace(tensor(0.), tensor(1.), 5) as torch's)."""
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise RuntimeError(f"{name}() expects its start and end tensors to be 0-d, got shape {list(value.shape)}")
        return value.item()
    return value


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    m = n if m is None else m
    flat = bytearray(n * m)
    for i in range(min(n, m)):
        flat[i * m + i] = 1
    t = tensor(bytes(flat), dtype=dtypes.uint8, device=device).reshape(n, m)
    return t.to(dtype=dtypes.to_dtype(dtype, dtypes.default_float())).requires_grad_(requires_grad)
