"""torch.overrides: Tensor subclasses and the ``__torch_function__`` protocol, as PyTorch has them.

A class that subclasses Tensor (``class M(torch.Tensor)``), or any class that defines a ``__torch_function__``
classmethod (a Tensor-like such as PyTorch's ScalarTensor/DiagonalTensor example), takes over the calls it is an
argument of: ``torch.*`` functions, ``torch.nn.functional.*`` functions, Tensor methods and operators. The call
reaches ``type(arg).__torch_function__(func, types, args, kwargs)``, where ``func`` is the public object the user
called (``torch.add``, ``torch.Tensor.add``; ``x + y`` is ``torch.Tensor.add`` as in PyTorch), ``types`` the
overriding types. Arguments are looked for at the top level and inside lists and tuples; subclasses go before
their superclasses, otherwise left to right; the first handler that does not return NotImplemented answers.
Tensor's own ``__torch_function__`` (what a subclass that does not define one gets, and what ``super()`` reaches)
runs the function with subclass dispatch off and converts the Tensors it returns to the subclass
(``_convert``), so results of ops on a subclass instance are of the subclass and in-place ops return self.

Cost: webgrad's ops are plain functions with no dispatcher in front of them (the browser path is host-bound).
The dispatching wrappers are installed only when the first class that can take calls is created (a Tensor
subclass, through ``Tensor.__init_subclass__``; under ``as_torch()``, a Tensor-like, through a hook on class
creation that removes itself once it has fired: watch_tensor_likes; or a TorchFunctionMode entered). Until then no op pays anything; afterwards a call
with no subclass among its arguments pays one wrapper and a scan of its arguments. A function taken before
that (``from torch import add``, or a Module made before holding ``F.relu``) is the plain one and does not
dispatch; webgrad's own default arguments are switched to the wrappers. Inside an implementation, calls do
not dispatch again: Tensor's ``__torch_function__`` turns dispatch off around the function, as PyTorch's does,
and the autograd engine runs with it off (gradients are plain Tensors, as PyTorch's).

Known differences: the switches (DisableTorchFunction, the mode stack) are process-wide, not per thread; with
the wrappers in place a warning raised inside a public function with a ``stacklevel`` points one frame short
(at the wrapper); ``__torch_dispatch__`` and ``_make_wrapper_subclass`` (subclasses below ATen) are not
supported.

webgrad's own subclasses (Parameter, Buffer, complex64 and sparse tensors) have PyTorch's
``_disabled_torch_function_impl``: they never dispatch, and ops on them return plain Tensors.
"""

import builtins
import functools
import types

from . import _autograd
from ._tensor import Tensor

_SUBCLASS_OFF = [0]  # depth of DisableTorchFunctionSubclass and DisableTorchFunction blocks
_ALL_OFF = [0]  # depth of DisableTorchFunction blocks (modes off too)
_MODES = []  # the active TorchFunctionModes, innermost last
_QUIET = [False]  # nothing may dispatch now: the first check of every wrapped call
_TAKES_CALLS = {}  # type -> whether its __torch_function__ takes calls
_installed = []  # (owner, name, original) of what install() replaced


def _disabled_torch_function_impl(func, types, args=(), kwargs=None):
    """torch._C._disabled_torch_function_impl: a class whose __torch_function__ is this never takes calls
    (torch.nn.Parameter's is)."""
    return func(*args, **(kwargs or {}))


def _refresh():
    _QUIET[0] = bool(_ALL_OFF[0]) or (bool(_SUBCLASS_OFF[0]) and not _MODES)


def _takes_calls(cls):
    """Whether instances of `cls` get the calls they are arguments of (not Tensor, not a disabled class)."""
    known = _TAKES_CALLS.get(cls)
    if known is None:
        handler = getattr(cls, "__torch_function__", None)
        known = (cls is not Tensor and handler is not None
                 and getattr(handler, "__func__", handler) is not _disabled_torch_function_impl)
        _TAKES_CALLS[cls] = known
    return known


def _add_overloaded(found, arg):
    """`found` with `arg` inserted where PyTorch puts it: one argument per type, a subclass before its
    superclasses, otherwise in argument order."""
    cls = type(arg)
    if found is None:
        return [arg]
    index = len(found)
    for i, other in enumerate(found):
        if type(other) is cls:
            return found
        if index == len(found) and issubclass(cls, type(other)):
            index = i
    found.insert(index, arg)
    return found


def _overloaded_args(relevant):
    """The arguments among `relevant` (and inside its lists and tuples) whose types take calls, in order."""
    found = None
    for arg in relevant:
        cls = type(arg)
        if cls is Tensor:
            continue
        if cls is list or cls is tuple:
            for item in arg:
                if type(item) is not Tensor and _takes_calls(type(item)):
                    found = _add_overloaded(found, item)
        elif _takes_calls(cls):
            found = _add_overloaded(found, arg)
    return found


def _call_args(args, kwargs):
    found = _overloaded_args(args)
    if kwargs:
        more = _overloaded_args(kwargs.values())
        for arg in more or ():
            found = _add_overloaded(found, arg)
    return found


def _handle(func, overloaded, args, kwargs, operator=False):
    """Hand the call to the innermost mode, then to each overriding argument, until one does not return
    NotImplemented."""
    overloaded = overloaded or ()
    kinds = tuple(type(a) for a in overloaded)
    kwargs = kwargs or None  # no keywords: None, as torch's C++ bindings hand them
    if _MODES and not _ALL_OFF[0]:
        mode = _MODES.pop()  # inside its handler, calls go to the next mode (PyTorch's _pop_mode_temporarily)
        _refresh()
        try:
            result = mode.__torch_function__(func, kinds, args, kwargs)
        finally:
            _MODES.append(mode)
            _refresh()
        if result is not NotImplemented:
            return result
    for arg in overloaded:
        result = arg.__torch_function__(func, kinds, args, kwargs)
        if result is not NotImplemented:
            return result
    if operator:  # a + b: Python then tries the other operand's reflected operator
        return NotImplemented
    name = getattr(func, "_torch_name", None) or f"{getattr(func, '__module__', None)}.{func.__name__}"
    listed = "\n".join(f"  - tensor subclass {k}" for k in kinds)
    raise TypeError(f"Multiple dispatch failed for '{name}'; all __torch_function__ handlers returned "
                    f"NotImplemented:\n\n{listed}\n")


def _dispatching(fn, name, owner, owner_name, operator=False):
    """`fn` behind the protocol, as `owner_name`.`name`; the wrapper's `_torch_api` (itself unless set) is what
    handlers receive."""
    @functools.wraps(fn)
    def public(*args, **kwargs):
        if _QUIET[0]:
            return fn(*args, **kwargs)
        overloaded = None if _SUBCLASS_OFF[0] else _call_args(args, kwargs)
        if overloaded is None and not (_MODES and not _ALL_OFF[0]):
            return fn(*args, **kwargs)
        return _handle(public._torch_api or public, overloaded, args, kwargs, operator)
    public._torch_api = None
    # named where it lives (torch.concat.__name__ is "concat"; pickle finds a function by module and qualname)
    public.__name__ = name
    public.__qualname__ = "Tensor." + name if owner is Tensor else name
    public.__module__ = Tensor.__module__ if owner is Tensor else owner.__name__
    public._torch_name = f"{owner_name}.{name}"
    return public


# ----------------------------------------------------------------------------- switches (torch._C)
class DisableTorchFunctionSubclass:
    """torch._C.DisableTorchFunctionSubclass: inside the block, subclasses and Tensor-likes take no calls
    (modes still do)."""

    def __enter__(self):
        _SUBCLASS_OFF[0] += 1
        _refresh()
        return self

    def __exit__(self, *exc):
        _SUBCLASS_OFF[0] -= 1
        _refresh()
        return False


class DisableTorchFunction(DisableTorchFunctionSubclass):
    """torch._C.DisableTorchFunction: inside the block, nothing takes calls, modes included."""

    def __enter__(self):
        _ALL_OFF[0] += 1
        return super().__enter__()

    def __exit__(self, *exc):
        _ALL_OFF[0] -= 1
        return super().__exit__(*exc)


def _is_torch_function_enabled():
    return not _SUBCLASS_OFF[0]


def _is_torch_function_mode_enabled():
    return bool(_MODES) and not _ALL_OFF[0]


def _without_subclasses(fn):
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with DisableTorchFunctionSubclass():
            return fn(*args, **kwargs)
    return run


# ----------------------------------------------------------------------------- the public helpers
def has_torch_function(relevant_args):
    """Whether an element of `relevant_args` takes calls (exact Tensors and Parameters do not), or a mode is
    active."""
    return _is_torch_function_mode_enabled() or (not _SUBCLASS_OFF[0] and _overloaded_args(relevant_args)
                                                  is not None)


def has_torch_function_unary(arg):
    return has_torch_function((arg,))


def has_torch_function_variadic(*args):
    return has_torch_function(args)


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """Call the __torch_function__ of the arguments among `relevant_args` that take calls (and the active
    mode's) for `public_api(*args, **kwargs)`; TypeError when all return NotImplemented."""
    overloaded = None if _SUBCLASS_OFF[0] else _overloaded_args(relevant_args)
    return _handle(public_api, overloaded, args, kwargs)


def is_tensor_like(inp):
    """True for a Tensor and for anything whose type has a __torch_function__."""
    return type(inp) is Tensor or hasattr(inp, "__torch_function__")


def get_default_nowrap_functions():
    """The functions whose results Tensor.__torch_function__ hands back unconverted (a subclass's .grad is the
    plain Tensor autograd wrote)."""
    return {Tensor.__dict__["grad"].__get__}


def get_ignored_functions():
    """Public functions that never dispatch (webgrad's are the creation-free utilities it does not wrap)."""
    import webgrad
    return {getattr(webgrad, name) for name in _IGNORED if callable(getattr(webgrad, name, None))}


def is_tensor_method_or_property(func):
    """Whether `func` is a Tensor method or a property getter (its first argument is then the tensor)."""
    return any(func is v for v in vars(Tensor).values()) or getattr(func, "__name__", None) == "__get__"


def wrap_torch_function(dispatcher):
    """Decorator: `func(*args, **kwargs)` dispatches on the arguments `dispatcher(*args, **kwargs)` returns."""
    def inner(func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            relevant = dispatcher(*args, **kwargs)
            if has_torch_function(relevant):
                return handle_torch_function(wrapped, relevant, *args, **kwargs)
            return func(*args, **kwargs)
        return wrapped
    return inner


# ----------------------------------------------------------------------------- modes
class TorchFunctionMode:
    """Override every dispatching function inside a `with` block, factories included: the innermost mode's
    __torch_function__(func, types, args, kwargs) gets each call; calls it makes go to the next mode out."""

    def __init__(self):
        pass

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError

    def __enter__(self):
        install()
        _MODES.append(self)
        _refresh()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        _MODES.remove(self)
        _refresh()


class BaseTorchFunctionMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _get_current_function_mode():
    return _MODES[-1] if _MODES else None


def _get_current_function_mode_stack():
    return list(_MODES)


# ----------------------------------------------------------------------------- Tensor's side
def _convert(ret, cls):
    """`ret` with its Tensors (also inside tuples and lists) as instances of `cls`, as torch._tensor._convert."""
    if cls is Tensor:
        return ret
    if isinstance(ret, Tensor):
        if not isinstance(ret, cls) and not isinstance(ret, _special_tensors()):
            ret = as_subclass(ret, cls)
    elif isinstance(ret, (tuple, list)):
        items = [_convert(r, cls) for r in ret]
        ret = type(ret)._make(items) if hasattr(ret, "_fields") else type(ret)(items)
    return ret


@functools.cache
def _special_tensors():
    """webgrad's tensors held other than by a view (complex64's pairs, sparse COO): never converted."""
    from ._complex import ComplexTensor
    from .sparse._coo import SparseCOOTensor
    return ComplexTensor, SparseCOOTensor


def _default_torch_function(cls, func, types, args=(), kwargs=None):
    """Tensor.__torch_function__: run `func` with subclass dispatch off; its Tensors come back as `cls`."""
    if kwargs is None:
        kwargs = {}
    if not all(issubclass(cls, t) for t in types):
        return NotImplemented
    with DisableTorchFunctionSubclass():
        ret = func(*args, **kwargs)
        if func in get_default_nowrap_functions():
            return ret
        return _convert(ret, cls)


def _alias_backward(g):
    return (g,)


def as_subclass(self, cls):
    """This tensor as an instance of `cls` (a Tensor subclass): same data, and in the same autograd graph
    (an alias of it), as torch's Tensor.as_subclass."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError("Creating a Tensor subclass from a class that does not inherit from Tensor is not "
                        "possible. Make sure your class inherits from Tensor.")
    out = object.__new__(cls)
    out._init(self._view, self.device)
    if self.requires_grad:
        _autograd.record(out, "Alias", (self,), _alias_backward)
    return out


def _make_subclass(cls, data, require_grad=False, dispatch_strides=False, dispatch_device=False,
                   device_for_backend_keys=None):
    """torch.Tensor._make_subclass(cls, data, require_grad): a `cls` over data's storage, detached from its
    graph (a leaf), requiring grad as asked."""
    if not isinstance(data, Tensor):
        raise TypeError(f"_make_subclass(): argument 'data' (position 2) must be Tensor, not {type(data).__name__}")
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"cls must be a type (got {cls})" if not isinstance(cls, type) else
                        "Creating a Tensor subclass from a class that does not inherit from Tensor is not "
                        "possible. Make sure your class inherits from Tensor.")
    out = object.__new__(cls)
    out._init(data._view, data.device, bool(require_grad))
    return out


# ----------------------------------------------------------------------------- installing the wrappers
# Public webgrad functions that take no part in dispatch (settings, I/O, seeding; torch ignores them too)
_IGNORED = frozenset("as_torch compile load save replayable vmap manual_seed seed initial_seed get_rng_state "
                     "set_rng_state set_printoptions is_tensor is_grad_enabled is_inference_mode_enabled "
                     "is_autocast_enabled is_autocast_cpu_enabled".split())
_IGNORED_PREFIXES = ("set_", "get_", "use_", "are_", "is_deterministic", "is_warn")
# Tensor members that stay as they are (construction, hashing, copying, the protocol itself)
_TENSOR_KEPT = frozenset("__init__ __new__ __init_subclass__ __hash__ __reduce__ __reduce_ex__ __deepcopy__ "
                         "__array__ __format__ __iter__ __class_getitem__ __torch_function__ __getstate__ "
                         "__setstate__ __copy__ as_subclass _make_subclass".split())
# nn.functional's names that are helpers imported there, not functions of torch.nn.functional
_FUNCTIONAL_HELPERS = frozenset(("webgrad._autograd", "webgrad.ops.autocast_policy"))
# Operators whose handlers receive the method PyTorch names (x + y calls Tensor.add's __torch_function__)
_OPERATOR_METHODS = {"__add__": "add", "__radd__": "add", "__mul__": "mul", "__rmul__": "mul", "__sub__": "sub",
                     "__truediv__": "div", "__matmul__": "matmul", "__neg__": "neg", "__abs__": "abs",
                     "__iadd__": "add_", "__isub__": "sub_", "__imul__": "mul_", "__itruediv__": "div_"}


def _targets():
    """(owner, name, function) of every dispatching public function: webgrad's namespace, Tensor's methods and
    operators, nn.functional's functions and the nn Modules' staticmethods that hold them."""
    import webgrad
    from .nn import functional
    for name, value in list(vars(webgrad).items()):
        if (isinstance(value, types.FunctionType) and not name.startswith("_") and name not in _IGNORED
                and not name.startswith(_IGNORED_PREFIXES)):
            yield webgrad, name, value
    for name, value in list(vars(Tensor).items()):
        if isinstance(value, types.FunctionType) and name not in _TENSOR_KEPT and (
                not name.startswith("_") or (name.startswith("__") and name.endswith("__"))):
            yield Tensor, name, value
    for name, value in list(vars(functional).items()):
        if (isinstance(value, types.FunctionType) and not name.startswith("_")
                and value.__module__ not in _FUNCTIONAL_HELPERS):
            yield functional, name, value


def install():
    """Put the dispatching wrappers in place of the public functions (once; called when the first class that
    can take calls is created)."""
    if _installed:
        return
    _remove_class_hook()
    import webgrad
    from . import dtypes, nn
    from .nn import functional
    wrapped = {}
    torch = dtypes.namespace()
    owner_names = {Tensor: torch + ".Tensor", webgrad: torch, functional: torch + ".nn.functional"}
    # one wrapper per function across the namespaces (torch.conv1d is F.conv1d, torch.absolute is torch.abs, as
    # before); one per name on Tensor (x + y and x.add(y) hand different functions to handlers, as torch's)
    shared = {}
    for owner, name, fn in list(_targets()):
        key = (name, id(fn)) if owner is Tensor else id(fn)
        public = shared.get(key)
        if public is None:
            public = shared[key] = _dispatching(fn, name, owner, owner_names[owner], operator=name.startswith(
                "__") and name.endswith("__") and name != "__repr__")
        _installed.append((owner, name, fn))
        setattr(owner, name, public)
        if owner is functional:
            wrapped[id(fn)] = public
    for name, method in _OPERATOR_METHODS.items():
        if name in vars(Tensor) and method in vars(Tensor):
            vars(Tensor)[name]._torch_api = vars(Tensor)[method]
    for module_class in list(vars(nn).values()):  # F.conv2d held as a staticmethod (Conv2d's)
        if isinstance(module_class, type) and issubclass(module_class, nn.Module):
            for name, value in list(vars(module_class).items()):
                if isinstance(value, staticmethod) and id(value.__func__) in wrapped:
                    _installed.append((module_class, name, value))
                    setattr(module_class, name, staticmethod(wrapped[id(value.__func__)]))
    _rebind_defaults({key: public for key, public in shared.items() if not isinstance(key, tuple)})
    _installed.append((_autograd, "run_backward", _autograd.run_backward))
    _autograd.run_backward = _without_subclasses(_autograd.run_backward)
    _refresh()


def _rebind_defaults(wrappers):
    """Default arguments in webgrad's own functions that hold a function now wrapped (TransformerEncoderLayer's
    activation=F.relu) get the wrapper: a module made from here on dispatches, and holds what F.relu is."""
    import sys
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith("webgrad."):
            continue
        for value in list(vars(module).values()):
            members = vars(value).values() if isinstance(value, type) and value.__module__ == module_name else (value,)
            for member in members:
                fn = getattr(member, "__func__", member)
                if not isinstance(fn, types.FunctionType) or fn.__module__ != module_name:
                    continue
                if fn.__defaults__ and any(id(d) in wrappers for d in fn.__defaults__):
                    _installed.append((fn, "__defaults__", fn.__defaults__))
                    fn.__defaults__ = tuple(wrappers.get(id(d), d) for d in fn.__defaults__)
                if fn.__kwdefaults__ and any(id(d) in wrappers for d in fn.__kwdefaults__.values()):
                    _installed.append((fn, "__kwdefaults__", dict(fn.__kwdefaults__)))
                    fn.__kwdefaults__ = {k: wrappers.get(id(d), d) for k, d in fn.__kwdefaults__.items()}


def _uninstall():
    """Put back what install() replaced and watch class creation again where as_torch() asked for it (tests that
    must leave webgrad as they found it). Subclasses made before keep their classes but dispatch again only once a
    new one installs."""
    while _installed:
        owner, name, fn = _installed.pop()
        setattr(owner, name, fn)
    if _watch_requested:
        builtins.__build_class__ = _watching_build_class


# ----------------------------------------------------------------------------- when to install
def _subclass_created(cls, **kwargs):
    """Tensor.__init_subclass__: webgrad's own subclasses get the disabled protocol; the first user subclass
    that takes calls installs the wrappers."""
    super(Tensor, cls).__init_subclass__(**kwargs)
    if _is_webgrad_class(cls):
        if "__torch_function__" not in vars(cls):
            cls.__torch_function__ = _disabled_torch_function_impl
    elif _takes_calls(cls):
        install()


def _is_webgrad_class(cls):
    return (cls.__module__ or "").split(".")[0] == "webgrad"


def _disable_webgrad_subclasses(cls):
    for sub in cls.__subclasses__():
        if _is_webgrad_class(sub) and "__torch_function__" not in vars(sub):
            sub.__torch_function__ = _disabled_torch_function_impl
        _disable_webgrad_subclasses(sub)


_build_class = builtins.__build_class__


def _watching_build_class(func, name, *bases, **kwargs):
    """builtins.__build_class__ until the wrappers are installed: a class statement that defines a
    __torch_function__ (a Tensor-like) installs them. It puts the original back once it has fired."""
    cls = _build_class(func, name, *bases, **kwargs)
    if isinstance(cls, type) and "__torch_function__" in vars(cls) and _takes_calls(cls) \
            and not any((c.__module__ or "").split(".")[0] in _NOT_WATCHED for c in cls.__mro__):
        install()
    return cls


# where classes with a __torch_function__ are not webgrad's concern: webgrad's own, and a real torch imported
# beside it (its Tensor, Parameter and modes, and the classes derived from them)
_NOT_WATCHED = frozenset(("webgrad", "torch", "functorch"))


def _remove_class_hook():
    if builtins.__build_class__ is _watching_build_class:
        builtins.__build_class__ = _build_class


_watch_requested = []


def watch_tensor_likes():
    """Watch class statements for a Tensor-like (a class that is no Tensor but defines __torch_function__, as the
    docs' ScalarTensor), which then installs the wrappers: a one-shot hook on builtins.__build_class__, taken out
    when it fires. webgrad.as_torch() turns it on, where webgrad stands for torch and scripts may define one; a plain
    `import webgrad` leaves the builtins alone (its Tensor-likes dispatch once a subclass or mode installed)."""
    if not _watch_requested:
        _watch_requested.append(True)
    if not _installed:
        builtins.__build_class__ = _watching_build_class


Tensor.__torch_function__ = classmethod(_default_torch_function)
Tensor.as_subclass = as_subclass
Tensor._make_subclass = staticmethod(_make_subclass)
Tensor.__init_subclass__ = classmethod(_subclass_created)
_disable_webgrad_subclasses(Tensor)
_has_torch_function, _has_torch_function_unary = has_torch_function, has_torch_function_unary
_has_torch_function_variadic = has_torch_function_variadic
