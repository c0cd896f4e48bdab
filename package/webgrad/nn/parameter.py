"""nn.Parameter: a Tensor that a Module registers as one of its parameters (requires_grad by default); nn.Buffer,
one it registers as a buffer.

A Parameter shares storage with the tensor it wraps. It stays a Parameter only as an object: any op on
it returns a plain Tensor, as in PyTorch.

UninitializedParameter and UninitializedBuffer are the shape-less placeholders of lazy modules (nn/lazy.py).
"""

import os
import sys

from .._tensor import Tensor, empty


class _ParameterMeta(type):
    """Parameter's metaclass, as torch's: a tensor of a user's Tensor subclass made a parameter keeps its class
    (Parameter(data) returns it, flagged `_is_param`), and isinstance(it, Parameter) is True."""

    def __instancecheck__(cls, instance):
        if type.__instancecheck__(cls, instance):
            return True
        # only a user's subclass instance has a __dict__ to hold the flag (cheap answers for everything else)
        if cls is not Parameter or type(instance) is Tensor or not isinstance(instance, Tensor):
            return False
        return bool(getattr(instance, "__dict__", {}).get("_is_param"))


class Parameter(Tensor, metaclass=_ParameterMeta):
    def __new__(cls, *args, **kwargs):
        data = args[0] if args else kwargs.get("data")
        if cls is not Parameter or data is None or type(data) is Tensor or isinstance(data, Parameter) or \
                type(data).__module__.split(".")[0] == "webgrad":
            return super().__new__(cls)
        requires_grad = args[1] if len(args) > 1 else kwargs.get("requires_grad", True)
        # a user's Tensor subclass: the parameter is a detached alias of that class (torch's custom-tensor path)
        t = data.detach().requires_grad_(requires_grad)
        if type(t) is not type(data):
            raise RuntimeError(f"Creating a Parameter from an instance of type {type(data).__name__} requires that "
                               f"detach() returns an instance of the same type, but return type "
                               f"{type(t).__name__} was found instead. To use the type as a Parameter, please "
                               f"correct the detach() semantics defined by its __torch_dispatch__() "
                               f"implementation.")
        t._is_param = True
        return t

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): expected a Tensor, got {type(data).__name__}")
        self._init(data._view, data.device)
        if requires_grad:
            self.requires_grad_(True)  # refuses integer tensors with a clear message

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = Parameter(self.detach().clone(), self.requires_grad)
        return memo[id(self)]

    def __reduce__(self):
        return (_rebuild_parameter, (self.detach(), self.requires_grad))


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)


class Buffer(Tensor):
    """nn.Buffer(data, persistent=True): assigned to a Module attribute, registers that tensor as a buffer
    (persistent ones go into state_dict), as Module.register_buffer does. It shares storage with data."""

    def __init__(self, data=None, *, persistent=True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer(): expected a Tensor, got {type(data).__name__}")
        self._init(data._view, data.device)
        self.requires_grad = data.requires_grad
        self.persistent = persistent


# ----------------------------------------------------------------- uninitialised placeholders (lazy modules)
_VIEW_SLOT = Tensor.__dict__["_view"]  # the slot under the `_view` property below: the placeholder's real view

_PACKAGE_DIR = os.path.dirname(os.path.dirname(__file__)) + os.sep  # webgrad/: its frames are ops
_SHAPE_ERROR = ("Can't access the shape of an uninitialized parameter or buffer. This error usually happens in "
                "`load_state_dict` when trying to load an uninitialized parameter into an initialized one. Call "
                "`forward` to initialize the parameters before accessing their attributes.")


class UninitializedTensorMixin:
    """What UninitializedParameter and UninitializedBuffer share: a placeholder whose shape is not known yet.

    It holds a 0-element tensor only to remember a device and a dtype (`.to()`, `.cuda()`, `.double()` on a
    module before its first forward change them), and `materialize(shape)` turns it, in place, into a
    Parameter (or Tensor) of that shape: the object stays the same, so a module or optimizer that holds it
    holds the real tensor afterwards. Every op that would compute with it finds no `_view` to read and raises
    PyTorch's ValueError; `.shape` raises PyTorch's RuntimeError."""

    __slots__ = ()
    cls_to_become = None

    def _use_error(self, frame):
        """PyTorch's ValueError for an op on a placeholder, naming the function the user called."""
        from .._complex import _entry_point
        return ValueError(
            f"Attempted to use an uninitialized parameter in {_entry_point(frame)}. This error happens when you are "
            f"using a `LazyModule` or explicitly manipulating `torch.nn.parameter.{type(self).__name__}` objects. "
            "When using LazyModules Call `forward` with a dummy batch to initialize the parameters before calling "
            "torch functions")

    @property
    def _view(self):
        raise self._use_error(sys._getframe(1))

    @_view.setter
    def _view(self, view):
        _VIEW_SLOT.__set__(self, view)

    def _placeholder(self):
        """The 0-element tensor that carries the device and dtype, as a plain Tensor."""
        return Tensor._make(_VIEW_SLOT.__get__(self), self.device)

    def materialize(self, shape, device=None, dtype=None):
        """Become a cls_to_become (Parameter or Tensor) of `shape` with undefined contents, on `device` and of
        `dtype` (this placeholder's where not given)."""
        value = empty(shape, device=self.device if device is None else device,
                      dtype=self.dtype if dtype is None else dtype)
        _VIEW_SLOT.__set__(self, value._view)
        self.device = value.device
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        caller = sys._getframe(1)
        if caller.f_code.co_filename.startswith(_PACKAGE_DIR):  # an op reads it first: PyTorch's error for ops
            raise self._use_error(caller)
        raise RuntimeError(_SHAPE_ERROR)

    @property
    def dtype(self):
        return _VIEW_SLOT.__get__(self).dtype

    @property
    def ndim(self):  # the placeholder's, as PyTorch answers
        return 1

    def size(self, dim=None):
        return self._placeholder().size(dim)

    @property
    def data(self):
        return self._placeholder()

    @data.setter
    def data(self, other):  # how Module.to() moves the placeholder
        _VIEW_SLOT.__set__(self, _VIEW_SLOT.__get__(other))
        self.device = other.device

    def to(self, *args, **kwargs):
        """The placeholder converted (self where nothing changes), as PyTorch: Module.to() assigns it to .data."""
        return self._unless_same(self._placeholder().to(*args, **kwargs))

    def type(self, dtype=None, non_blocking=False, **kwargs):
        converted = self._placeholder().type(dtype, non_blocking, **kwargs)
        return converted if isinstance(converted, str) else self._unless_same(converted)

    def _unless_same(self, converted):
        same = converted.device == self.device and converted.dtype is self.dtype
        return self if same else converted

    def share_memory_(self):
        raise RuntimeError("Can't share memory on an uninitialized parameter or buffer. Call `forward` to initialize "
                           "the parameters before calling `module.share_memory()`.")

    def __repr__(self):
        return f"<{type(self).__name__}>"

    def __reduce__(self):
        return (type(self), (self.requires_grad,))

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.device, self.dtype)
        return memo[id(self)]


def is_lazy(param):
    """Whether `param` is an UninitializedParameter or UninitializedBuffer."""
    return isinstance(param, UninitializedTensorMixin)


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A Parameter whose shape is not known yet (a lazy module's weight before its first forward). Only its
    device and dtype can change, and materialize() makes it a Parameter."""

    __slots__ = ()
    cls_to_become = Parameter

    def __init__(self, requires_grad=True, device=None, dtype=None):
        super().__init__(empty(0, device=device, dtype=dtype), requires_grad)


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet (a lazy batch norm's running statistics before its first
    forward). Only its device and dtype can change, and materialize() makes it a Tensor."""

    __slots__ = ()
    cls_to_become = Tensor

    def __init__(self, requires_grad=False, device=None, dtype=None):
        placeholder = empty(0, device=device, dtype=dtype)
        self._init(placeholder._view, placeholder.device, requires_grad)
