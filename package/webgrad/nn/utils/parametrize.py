"""webgrad.nn.utils.parametrize, as torch.nn.utils.parametrize: a module's tensor computed from other tensors
each time it is read (``module.weight`` = parametrization(original)).

register_parametrization swaps the module's class for a subclass (``ParametrizedLinear``) with a property of
the tensor's name; the tensors it is computed from live in ``module.parametrizations[name]`` (a
ParametrizationList) as ``original`` (or ``original0``, ``original1``, ... when the parametrization's
right_inverse returns several), so state_dict keys are PyTorch's (``parametrizations.weight.original``).
"""

from contextlib import contextmanager

from ..._autograd import no_grad
from ..._tensor import Tensor
from ..container import ModuleDict, ModuleList
from ..module import Module
from ..parameter import Parameter

_cache_enabled = 0
_cache = {}


@contextmanager
def cached():
    """Within the block, each parametrized tensor is computed once on first read and reused (torch's cached())."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def _register(module, name, value, like):
    if isinstance(like, Parameter):
        module.register_parameter(name, value if isinstance(value, Parameter) else Parameter(value, like.requires_grad))
    else:
        module.register_buffer(name, value)


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the tensor(s) they start from (``original``, or
    ``original0``... where the first parametrization's right_inverse returns a sequence)."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = tuple(original.shape), original.dtype
        with no_grad():
            new = original
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:  # as PyTorch: a right_inverse that cannot run is the identity here
                        pass
        if not isinstance(new, (Tensor, list, tuple)):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                             f"Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if tuple(new.shape) != shape or new.dtype is not dtype:
                if not unsafe:
                    raise ValueError("When `right_inverse` outputs one tensor, it may not change the dtype or shape.\n"
                                     f"original.dtype: {dtype}\nright_inverse(original).dtype: {new.dtype}\n"
                                     f"original.shape: {shape}\nright_inverse(original).shape: {tuple(new.shape)}\n")
                original = Parameter(new.detach(), original.requires_grad) if isinstance(original, Parameter) \
                    else new.detach()
            elif new is not original:
                with no_grad():
                    original.copy_(new)  # the same Parameter object: an optimizer built before still holds it
            _register(self, "original", original, original)
        else:
            for i, t in enumerate(new):
                if not isinstance(t, Tensor):
                    raise ValueError(f"'right_inverse' must return a sequence of tensors. Got {type(t).__name__}.")
                t = t.detach()
                _register(self, f"original{i}", Parameter(t, original.requires_grad)
                          if isinstance(original, Parameter) else t, original)
        if not unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(z).__name__}.")
            if tuple(z.shape) != shape or z.dtype is not dtype:
                raise ValueError("Registering a parametrization may not change the shape of the tensor, unless "
                                 f"`unsafe` flag is enabled.\nunparametrized shape: {shape}\n"
                                 f"parametrized shape: {tuple(z.shape)}" if tuple(z.shape) != shape else
                                 "Registering a parametrization may not change the dtype of the tensor, unless "
                                 f"`unsafe` flag is enabled.\nunparametrized dtype: {dtype}\n"
                                 f"parametrized dtype: {z.dtype}")

    def originals(self):
        if self.is_tensor:
            return (self.original,)
        return tuple(getattr(self, f"original{i}") for i in range(self.ntensors))

    def right_inverse(self, value):
        """Assignment ``module.weight = value``: the originals set so that the parametrization gives value."""
        with no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not implement right_inverse.")
                value = module.right_inverse(value)
            values = (value,) if self.is_tensor else tuple(value)
            if len(values) != self.ntensors:
                raise ValueError(f"'right_inverse' must return a sequence of tensors of length {self.ntensors}. "
                                 f"Got a sequence of length {len(values)}.")
            for target, v in zip(self.originals(), values):
                if tuple(v.shape) != tuple(target.shape) or v.dtype is not target.dtype:
                    raise ValueError(f"The tensor returned by right_inverse has shape {tuple(v.shape)} and dtype "
                                     f"{v.dtype}; the original has shape {tuple(target.shape)} and dtype "
                                     f"{target.dtype}")
                target.copy_(v)

    def forward(self):
        modules = list(self)
        x = modules[0](*self.originals())
        for module in modules[1:]:
            x = module(x)
        return x


def _parametrized_class(module):
    cls = module.__class__
    return type(f"Parametrized{cls.__name__}", (cls,), {"__module__": cls.__module__, "_webgrad_parametrized": cls})


def _property(name):
    def get(self):
        if _cache_enabled:
            key = (id(self), name)
            if key not in _cache:
                _cache[key] = self.parametrizations[name]()
            return _cache[key]
        return self.parametrizations[name]()

    def set(self, value):
        if _cache_enabled:
            raise RuntimeError("Cannot set the value of a parametrized tensor within the cached() context")
        self.parametrizations[name].right_inverse(value)
    return property(get, set)


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """module.<tensor_name> becomes parametrization(original); original (the tensor as it was, or what the
    parametrization's right_inverse makes of it) is kept in module.parametrizations[tensor_name]. A second
    parametrization of the same tensor is applied after the first. Returns the module."""
    if not isinstance(parametrization, Module):
        raise TypeError(f"parametrization must be an nn.Module, got {type(parametrization).__name__}")
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if not isinstance(x, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(x).__name__}.")
            if tuple(x.shape) != tuple(y.shape) or x.dtype is not y.dtype:
                raise ValueError("Registering a parametrization may not change the shape of the tensor, unless "
                                 f"`unsafe` flag is enabled.\nunparametrized shape: {tuple(y.shape)}\n"
                                 f"parametrized shape: {tuple(x.shape)}")
            if hasattr(parametrization, "right_inverse"):
                z = parametrization.right_inverse(x)
                if not isinstance(z, Tensor) or tuple(z.shape) != tuple(y.shape):
                    raise ValueError("parametrization.right_inverse must return a tensor of the tensor's shape")
        plist.append(parametrization)
        plist.unsafe = plist.unsafe or unsafe
        return module
    if tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        if original is None:
            raise ValueError(f"Module '{module}' has no parameter or buffer with name '{tensor_name}'")
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            module.__class__ = _parametrized_class(module)
            module.parametrizations = ModuleDict()
        setattr(module.__class__, tensor_name, _property(tensor_name))
        module.parametrizations[tensor_name] = plist
        return module
    raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with "
                     f"name '{tensor_name}'")


def is_parametrized(module, tensor_name=None):
    parametrizations = module.__dict__.get("_modules", {}).get("parametrizations")
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def type_before_parametrizations(module):
    """The module's class before register_parametrization swapped it."""
    return module.__class__.__dict__.get("_webgrad_parametrized", type(module)) if is_parametrized(module) \
        else type(module)


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Undo register_parametrization on module.<tensor_name>: it becomes a plain parameter (or buffer) again,
    holding its current parametrized value (leave_parametrized) or its original. Returns the module."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
            if tuple(t.shape) == tuple(original.shape) and t.dtype is original.dtype:
                with no_grad():
                    original.copy_(t)
            else:
                original = Parameter(t.detach(), original.requires_grad) if isinstance(original, Parameter) \
                    else t.detach()
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized "
                             "in terms of a sequence of tensors.")
        with no_grad():
            t = getattr(module, tensor_name)
        first = plist.original0
        original = Parameter(t.detach(), first.requires_grad) if isinstance(first, Parameter) else t.detach()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register(module, tensor_name, original, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__dict__["_webgrad_parametrized"]
    return module
