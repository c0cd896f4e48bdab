"""nn.Module: the base class of every layer and model, with PyTorch's API and behaviour.

A module keeps three ordered registries, filled by attribute assignment (``self.fc = Linear(...)``,
``self.w = Parameter(...)``) or by register_parameter / register_buffer / add_module:

* ``_parameters``: name -> Parameter (or None): what optimizers train;
* ``_buffers``: name -> Tensor (or None): state that is saved but not trained (BatchNorm's running
  statistics); names in ``_non_persistent_buffers_set`` are left out of state_dict;
* ``_modules``: name -> child Module (or None).

Everything else (parameters(), state_dict(), to(), repr, ...) walks these registries recursively.
"""

from collections import OrderedDict, namedtuple
from collections.abc import Mapping

from .. import _autograd, _compile, devices, dtypes
from .._autograd import RemovableHandle, no_grad, record
from .._tensor import Tensor, empty_like, tensor
from ..memory_format import memory_format as _memory_format
from .parameter import _SHAPE_ERROR, Buffer, Parameter, is_lazy


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict(strict=False) skipped (PyTorch's return type)."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(text, spaces):
    """Indent every line but the first (PyTorch's helper for nested reprs)."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _as_tensor(value):
    """A state_dict value (webgrad Tensor, torch Tensor, NumPy array) as a webgrad Tensor, or None."""
    if isinstance(value, Tensor):
        return value.detach()
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch.Tensor: go through NumPy
        return tensor(value.detach().cpu().numpy())
    if hasattr(value, "__array__") and hasattr(value, "shape"):  # a NumPy array
        return tensor(value)
    return None


def _storage(t):
    """The storage under a tensor (a complex64 tensor's is its float32 pairs': webgrad/_complex.py)."""
    return (t._r if t.dtype.is_complex else t)._view.storage


_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks",
               "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks", "_state_dict_pre_hooks", "_state_dict_hooks")
_EXTRA_STATE_KEY = "_extra_state"  # PyTorch's state_dict key for get_extra_state()'s value
# hooks every module runs around its forward (register_module_forward_pre_hook / register_module_forward_hook)
_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()


def register_module_forward_pre_hook(hook):
    """hook(module, args) before every module's forward (before the module's own pre-hooks); it may return
    new args. Returns a handle whose remove() unregisters it."""
    handle = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    return handle


def register_module_forward_hook(hook, *, always_call=False):
    """hook(module, args, output) after every module's forward (before the module's own hooks); it may return
    a new output. always_call is accepted for PyTorch's signature; the hook runs after a forward that returned."""
    handle = RemovableHandle(_global_forward_hooks)
    _global_forward_hooks[handle.id] = hook
    return handle


def _call_with_hooks(module, args, kwargs):
    """Module.__call__ with hooks: forward pre-hooks, forward, forward hooks; with backward hooks, the tensor
    inputs and outputs pass through identity nodes whose gradient hooks see grad_output and grad_input (as
    PyTorch's BackwardHook does)."""
    d = module.__dict__
    for hook in list(_global_forward_pre_hooks.values()):
        result = hook(module, args)
        if result is not None:
            args = result if isinstance(result, tuple) else (result,)
    pre_kwargs = d.get("_forward_pre_hooks_with_kwargs", {})
    for key, hook in list(d.get("_forward_pre_hooks", {}).items()):
        if key in pre_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), but "
                                       f"got {result}.")
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    backward = (d.get("_backward_hooks") or d.get("_backward_pre_hooks")) and _autograd.is_grad_enabled()
    state = _BackwardHookState(module, args) if backward else None
    if state is not None:
        args = state.wrap_inputs(args)
    hooks_kwargs = d.get("_forward_hooks_with_kwargs", {})
    try:
        output = module.forward(*args, **kwargs)
    except Exception:
        always = d.get("_forward_hooks_always_called", {})
        for key, hook in list(d.get("_forward_hooks", {}).items()):
            if key in always:
                try:
                    hook(module, args, kwargs, None) if key in hooks_kwargs else hook(module, args, None)
                except Exception:  # noqa: BLE001 - forward's own error is the one to report
                    pass
        raise
    for hook in list(_global_forward_hooks.values()):
        result = hook(module, args, output)
        if result is not None:
            output = result
    for key, hook in list(d.get("_forward_hooks", {}).items()):
        result = hook(module, args, kwargs, output) if key in hooks_kwargs else hook(module, args, output)
        if result is not None:
            output = result
    if state is not None:
        output = state.wrap_outputs(output)
    return output


def _identity(t):
    """t again as a new tensor with a node of its own (gradient passed through), for a hook to sit on."""
    out = Tensor._make(t._view, t.device)
    return record(out, "BackwardHookFunction", (t,), lambda g: (g,))


class _BackwardHookState:
    """One call's backward hooks: the gradients of its outputs (grad_output) are collected as they arrive;
    when those of every input that requires grad are known too, the full backward hooks run once. Inputs
    other than tensors that require grad get None. Where several inputs require grad, a replacement
    grad_input from the hooks reaches only the input whose gradient arrived last (the others have moved on
    already): PyTorch routes them through one node, which webgrad's engine does not have."""

    def __init__(self, module, args):
        self.module = module
        self.n_inputs = len(args)
        self.grad_inputs = [None] * len(args)
        self.inputs, self.pending_inputs = set(), set()
        self.grad_outputs = None

    def wrap_inputs(self, args):
        if not self.module.__dict__.get("_backward_hooks"):
            return args
        out = list(args)
        for i, a in enumerate(args):
            if isinstance(a, Tensor) and a.requires_grad and a.dtype.is_floating:
                out[i] = _identity(a)
                self.inputs.add(i)
                _autograd.add_node_hook(out[i].grad_fn, self._input_hook(i))
        return tuple(out)

    def wrap_outputs(self, output):
        single = isinstance(output, Tensor)
        outputs = [output] if single else list(output) if isinstance(output, (tuple, list)) else None
        if outputs is None:
            return output
        self.grad_outputs = [None] * len(outputs)
        self.outputs = set()
        for i, o in enumerate(outputs):
            if isinstance(o, Tensor) and o.requires_grad and o.dtype.is_floating:
                outputs[i] = _identity(o)
                self.outputs.add(i)
                _autograd.add_node_hook(outputs[i].grad_fn, self._output_hook(i))
        self._rearm()
        if single:
            return outputs[0]
        return type(output)(outputs) if isinstance(output, tuple) and type(output) is tuple else \
            (type(output)(*outputs) if isinstance(output, tuple) else outputs)

    def _output_hook(self, i):
        def hook(g):
            self.grad_outputs[i] = g
            self.waiting_outputs.discard(i)
            if self.waiting_outputs:
                return None
            grads = tuple(self.grad_outputs)
            for pre in list(self.module.__dict__.get("_backward_pre_hooks", {}).values()):
                result = pre(self.module, grads)
                if result is not None:
                    grads = _check_grads(result, grads, "backward pre-hook", "grad_output")
            self.grad_outputs = list(grads)
            if not self.inputs:  # no input requires grad: the hooks run now, grad_input all None
                self._fire()
            return grads[i]
        return hook

    def _input_hook(self, i):
        def hook(g):
            self.grad_inputs[i] = g
            self.pending_inputs.discard(i)
            if self.pending_inputs:
                return None
            return self._fire()[i]
        return hook

    def _rearm(self):  # for the next backward pass through the same graph (retain_graph)
        self.pending_inputs, self.waiting_outputs = set(self.inputs), set(self.outputs)

    def _fire(self):
        grads = tuple(self.grad_inputs)
        self._rearm()
        grad_outputs = tuple(self.grad_outputs or ())
        for hook in list(self.module.__dict__.get("_backward_hooks", {}).values()):
            result = hook(self.module, grads, grad_outputs)
            if result is not None:
                grads = _check_grads(result, grads, "backward hook", "grad_input")
        return grads


def _check_grads(result, grads, kind, name):
    result = (result,) if isinstance(result, Tensor) else tuple(result)
    if len(result) != len(grads):
        raise RuntimeError(f"{kind} returned an invalid number of {name}, got {len(result)}, but expected {len(grads)}")
    return result


class _StateDictPostHook:
    """A state_dict post-hook: the public form must return None, PyTorch's private one may return a new dict."""

    def __init__(self, hook, public):
        self.hook, self.public = hook, public

    def __call__(self, module, state_dict, prefix, local_metadata):
        result = self.hook(module, state_dict, prefix, local_metadata)
        if self.public and result is not None:
            raise RuntimeError("state_dict post-hook must return None")
        return result


class Module:
    training: bool

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments: Module.__init__ takes none")
        # object.__setattr__: our own __setattr__ needs these registries to exist already
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", {})
        for name in _HOOK_DICTS:
            object.__setattr__(self, name, OrderedDict())
        object.__setattr__(self, "_forward_hooks_with_kwargs", {})
        object.__setattr__(self, "_forward_pre_hooks_with_kwargs", {})
        object.__setattr__(self, "_forward_hooks_always_called", {})

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        d = self.__dict__
        if d.get("_forward_pre_hooks") or d.get("_forward_hooks") or d.get("_backward_hooks") or \
                d.get("_backward_pre_hooks") or _global_forward_pre_hooks or _global_forward_hooks:
            return _call_with_hooks(self, args, kwargs)
        return self.forward(*args, **kwargs)

    # ----------------------------------------------------------------- hooks
    def _hook_dict(self, name):
        hooks = self.__dict__.get(name)
        if hooks is None:  # a module built without Module.__init__ (unpickled from an older version)
            hooks = OrderedDict() if name in _HOOK_DICTS else {}
            object.__setattr__(self, name, hooks)
        return hooks

    def _add_hook(self, name, hook, prepend=False, flags=()):
        if not callable(hook):
            raise TypeError(f"{name[1:-1]} must be callable, got {type(hook).__name__}")
        hooks = self._hook_dict(name)
        extra = [self._hook_dict(flag) for flag, on in flags if on]
        handle = RemovableHandle(hooks, extra_dict=extra)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        for flag in extra:
            flag[handle.id] = True
        return handle

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) before forward (with_kwargs: hook(module, args, kwargs)); it may return new args
        (a non-tuple is wrapped in one) or, with_kwargs, a new (args, kwargs) pair."""
        return self._add_hook("_forward_pre_hooks", hook, prepend, [("_forward_pre_hooks_with_kwargs", with_kwargs)])

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """hook(module, args, output) after forward (with_kwargs: hook(module, args, kwargs, output)); it may
        return a new output. always_call: it runs even when forward raised."""
        return self._add_hook("_forward_hooks", hook, prepend, [("_forward_hooks_with_kwargs", with_kwargs),
                                                                 ("_forward_hooks_always_called", always_call)])

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) when the gradients of the module's outputs are known; it may return new
        grad_output (a tuple), which then flows into the module."""
        return self._add_hook("_backward_pre_hooks", hook, prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) when the gradients of the module's tensor inputs are known (a
        None for an input that does not require grad); it may return new grad_input (a tuple)."""
        return self._add_hook("_backward_hooks", hook, prepend)

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs) before
        load_state_dict reads this module's entries (with_module: the module first); it may rename keys in
        state_dict (a copy of the caller's): how a layout change keeps old checkpoints loading."""
        if with_module:
            module, inner = self, hook

            def hook(*args):
                return inner(module, *args)
        return self._add_hook("_load_state_dict_pre_hooks", hook)

    def register_load_state_dict_pre_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook):
        """hook(module, incompatible_keys) after load_state_dict has copied the values; it may clear or extend
        incompatible_keys.missing_keys / unexpected_keys (strict=True then judges what is left). It must
        return None."""
        return self._add_hook("_load_state_dict_post_hooks", hook)

    def register_state_dict_pre_hook(self, hook):
        """hook(module, prefix, keep_vars) before state_dict() collects this module's entries."""
        return self._add_hook("_state_dict_pre_hooks", hook)

    def register_state_dict_post_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata) after state_dict() has collected this module's
        entries and its children's; it may edit state_dict in place and must return None."""
        return self._add_hook("_state_dict_hooks", _StateDictPostHook(hook, public=True))

    def _register_state_dict_hook(self, hook):
        """PyTorch's older form: hook(module, state_dict, prefix, local_metadata) may return a new state_dict."""
        return self._add_hook("_state_dict_hooks", _StateDictPostHook(hook, public=False))

    def get_extra_state(self):
        """What a module saves besides its tensors, under the state_dict key '_extra_state': a module that
        overrides this (and set_extra_state) has the entry; the base class has none."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called. Please "
                           "file an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml "
                           "to report this bug.")

    def set_extra_state(self, state):
        """Restores what get_extra_state() returned (called by load_state_dict)."""
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called. Please "
                           "file an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml "
                           "to report this bug.")

    def _has_extra_state(self):
        return type(self).get_extra_state is not Module.get_extra_state

    def register_backward_hook(self, hook):
        raise NotImplementedError("Module.register_backward_hook (deprecated in PyTorch: it sees only the last op of "
                                  "forward) is not supported by webgrad: use register_full_backward_hook")

    # ----------------------------------------------------------------- registration
    def _check_name(self, name, kind, registry):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if hasattr(self, name) and name not in registry:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name, param):
        self._check_name(name, "parameter", self.__dict__.get("_parameters", {}))
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(webgrad.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created "
                             f"explicitly. To express '{name}' as a function of another Tensor, compute the value in "
                             "the forward() method.")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        self._check_name(name, "buffer", self.__dict__.get("_buffers", {}))
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module", self.__dict__.get("_modules", {}))
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__

        def remove_from(*registries):
            for r in registries:
                if name in r:
                    r.discard(name) if isinstance(r, set) else r.pop(name)

        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(d, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(webgrad.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if d.get("_modules") is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(d, self._parameters, self._buffers, self._non_persistent_buffers_set)
            self._modules[name] = value
        elif name in d.get("_modules", {}):
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                "(webgrad.nn.Module or None expected)")
            self._modules[name] = value
        elif isinstance(value, Buffer):
            if d.get("_buffers") is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            remove_from(d, self._parameters, self._modules)
            self.register_buffer(name, value, persistent=value.persistent)
        elif name in d.get("_buffers", {}):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' (Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):  # called only when normal lookup fails
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry in d and name in d[registry]:
                return d[registry][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(self._parameters) | set(self._buffers) | set(self._modules))

    # ----------------------------------------------------------------- traversal
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, registry, prefix, recurse, remove_duplicate):
        seen = set()
        walk = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in walk:
            for name, t in getattr(module, registry).items():
                if t is None or (remove_duplicate and id(t) in seen):
                    continue
                seen.add(id(t))
                yield module_prefix + ("." if module_prefix else "") + name, t

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target):
        module = self
        for item in (target.split(".") if target else []):
            if item not in module._modules or module._modules[item] is None:
                raise AttributeError(f"{module._get_name()} has no attribute `{item}` (looking up '{target}')")
            module = module._modules[item]
        return module

    def set_submodule(self, target, module, strict=False):
        """Put `module` at the dotted path `target` (replacing what is there; strict=True: only replacing)."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(f"{parent._get_name()} has no attribute `{name}`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError(f"`{name}` is not an nn.Module")
        setattr(parent, name, module)

    def _get_attribute(self, target):
        """(module, name, value) for a dotted path to a tensor attribute: get_parameter's and get_buffer's walk."""
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(f"{module._get_name()} has no attribute `{name}`")
        return module, name, getattr(module, name)

    def get_parameter(self, target):
        """The Parameter at the dotted path `target` ("encoder.layer.0.weight"); AttributeError otherwise."""
        _, name, param = self._get_attribute(target)
        if not isinstance(param, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return param

    def get_buffer(self, target):
        """The buffer at the dotted path `target` ("bn.running_mean"); AttributeError otherwise."""
        module, name, buffer = self._get_attribute(target)
        if name not in module._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return buffer

    def apply(self, fn):
        """fn(module) for every submodule (children first) and self, as PyTorch."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ----------------------------------------------------------------- modes and gradients
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad = p.grad.detach()
                with no_grad():
                    p.grad.zero_()

    # ----------------------------------------------------------------- device and dtype
    def _apply(self, convert, recurse=True):
        """Replace every parameter's and buffer's data by convert(tensor), in place: the Parameter objects
        (and their .grad) stay the same, so an optimizer built before .to() keeps working. recurse=False:
        this module's own tensors only."""
        with no_grad():
            for module in (self.modules() if recurse else (self,)):
                for t in list(module._parameters.values()) + list(module._buffers.values()):
                    if t is None:
                        continue
                    t.data = convert(t)
                    if t.grad is not None:
                        t.grad = convert(t.grad)
        return self

    def to(self, *args, **kwargs):
        """to(device), to(dtype), to(device, dtype), to(tensor): moves/casts parameters and buffers in place.
        Only floating tensors change dtype (integer buffers such as num_batches_tracked keep theirs)."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        memory_format = kwargs.pop("memory_format", None)  # row-major kept: see memory_format.py
        if kwargs:
            raise TypeError(f"to() got unexpected arguments {sorted(kwargs)}")
        if memory_format is not None and not isinstance(memory_format, _memory_format):
            raise TypeError(f"to(): memory_format must be a torch.memory_format, not {type(memory_format).__name__}")
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, (str, devices.device)):
                device = a
            else:
                dtype = a
        device = devices.get(device) if device is not None else None
        dtype = dtypes.to_dtype(dtype)
        if dtype is not None and not dtype.is_floating:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype!r}")

        def convert(t):
            return t.to(device=device, dtype=dtype if t.dtype.is_floating else None)
        return self._apply(convert)

    def share_memory(self):
        """PyTorch moves the storages to shared memory here; webgrad has none (webgrad.multiprocessing)."""
        from .._sharing import not_shared
        raise not_shared("Module.share_memory()")

    def cpu(self):
        return self.to("cpu")

    def webgpu(self):
        return self.to("webgpu")

    def cuda(self, device=None):
        """As on a torch without CUDA: an error that names webgpu, the module left as it was."""
        return self.to("cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device)

    def float(self):
        return self.to(dtypes.float32)

    def double(self):
        return self.to(dtypes.float64)

    def half(self):
        """float16 floating parameters and buffers (on WebGPU where the adapter has shader-f16)."""
        return self.to(dtypes.float16)

    def bfloat16(self):
        """bfloat16 floating parameters and buffers (on the CPU; see webgrad/dtypes.py)."""
        return self.to(dtypes.bfloat16)

    def to_empty(self, *, device, recurse=True):
        """Parameters and buffers (and their grads) replaced by uninitialised storage on `device` (None: where
        each is), same shapes and dtypes: what a module built on one device, then filled by load_state_dict or
        its reset_parameters, starts from. recurse=False: this module's own tensors only."""
        device = devices.get(device) if device is not None else None
        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    def compile(self, *args, **kwargs):
        """torch.compile(self's call, *args, **kwargs), in place, returning None: the arguments are checked as
        webgrad.compile checks them, and the module keeps running eagerly (webgrad.compile compiles nothing;
        webgrad.replayable records a training step once and replays it as one GPU submission)."""
        _compile.compile(self.forward, *args, **kwargs)

    # ----------------------------------------------------------------- state dict
    def _state_entries(self, prefix=""):
        """(key, module, local name, tensor) for every state_dict entry: parameters, then persistent
        buffers, then the children's, as PyTorch orders them."""
        for name, p in self._parameters.items():
            if p is not None:
                yield prefix + name, self, name, p
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                yield prefix + name, self, name, b
        for name, module in self._modules.items():
            if module is not None:
                yield from module._state_entries(prefix + name + ".")

    def _extra_state_modules(self, prefix=""):
        """(key, module) for every module with extra state (get_extra_state overridden)."""
        for name, module in self.named_modules(prefix=prefix.rstrip(".")):
            if module._has_extra_state():
                yield (name + "." if name else "") + _EXTRA_STATE_KEY, module

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers (detached unless keep_vars), with the extra state of modules that
        define get_extra_state(), keyed by dotted path; the state-dict hooks run around each module's part."""
        if args:  # PyTorch's deprecated positional form: state_dict(destination, prefix, keep_vars)
            destination, prefix, keep_vars = (list(args) + [destination, prefix, keep_vars][len(args):])[:3]
        out = OrderedDict() if destination is None else destination
        for hook in list(self.__dict__.get("_state_dict_pre_hooks", {}).values()):
            hook(self, prefix, keep_vars)
        for name, t in list(self._parameters.items()) + [(n, b) for n, b in self._buffers.items()
                                                         if n not in self._non_persistent_buffers_set]:
            if t is not None:
                out[prefix + name] = t if keep_vars or is_lazy(t) else t.detach()  # a lazy placeholder: itself
        if self._has_extra_state():
            out[prefix + _EXTRA_STATE_KEY] = self.get_extra_state()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=out, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in list(self.__dict__.get("_state_dict_hooks", {}).values()):
            result = hook(self, out, prefix, {})
            if result is not None:
                out = result
        return out

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy parameters and buffers from `state_dict` (values: webgrad or torch tensors, or NumPy arrays).

        Everything is checked, and every value converted to its target's device and dtype, before the
        first copy: on any error the model is left exactly as it was.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        hooked = [(prefix, m) for prefix, m in self.named_modules() if m.__dict__.get("_load_state_dict_pre_hooks")]
        if hooked:
            state_dict = OrderedDict(state_dict)  # the hooks may rename keys; the caller's dict stays as it was
            for prefix, m in hooked:
                for hook in list(m._load_state_dict_pre_hooks.values()):
                    hook(state_dict, prefix + "." if prefix else "", {}, strict, [], [], [])
        entries = list(self._state_entries())
        extra = list(self._extra_state_modules())
        expected = {key for key, _, _, _ in entries} | {key for key, _ in extra}
        missing = [key for key, _, _, _ in entries if key not in state_dict] + \
            [key for key, _ in extra if key not in state_dict]
        unexpected = [key for key in state_dict if key not in expected]
        errors, staged = [], []
        targets = {id(_storage(t)) for _, _, _, t in entries if not is_lazy(t)}
        for key, module, name, target in entries:
            if key not in state_dict:
                continue
            if is_lazy(state_dict[key]):  # an uninitialised lazy module's entry: nothing to copy, as PyTorch
                if not is_lazy(target):
                    raise RuntimeError(_SHAPE_ERROR)  # PyTorch reads the placeholder's shape here
                continue
            value = _as_tensor(state_dict[key])
            if value is None:
                errors.append(f'While copying the parameter named "{key}", expected a Tensor (webgrad or torch) or a '
                              f"NumPy array from checkpoint but received {type(state_dict[key]).__name__}")
                continue
            if target.ndim == 0 and tuple(value.shape) == (1,):
                value = value.reshape(())
            if tuple(value.shape) != tuple(target.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape {value.shape} from checkpoint, "
                              f"the shape in current model is {target.shape}.")
                continue
            try:
                if not assign:  # assign=True keeps the checkpoint's tensors as they are (device and dtype)
                    value = value.to(device=target.device, dtype=target.dtype)
                if id(_storage(value)) in targets:  # it may alias another target: copy before any write
                    value = value.clone()
                staged.append((module, name, target, value))
            except Exception as e:  # noqa: BLE001 - reported with the key, all together, below
                errors.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                              f"{target.shape}, an exception occurred: {e}")
        post_hooks = [m for m in self.modules() if m.__dict__.get("_load_state_dict_post_hooks")]
        if post_hooks and not errors:  # the hooks see the loaded module and may forgive missing/unexpected keys
            self._write_state(staged, extra, state_dict, assign)
            incompatible = _IncompatibleKeys(missing, unexpected)
            for m in post_hooks:
                for hook in list(m._load_state_dict_post_hooks.values()):
                    if hook(m, incompatible) is not None:
                        raise RuntimeError("load_state_dict post hook must return None; it edits incompatible_keys")
            staged, extra = [], []
        if strict:  # PyTorch's order: missing keys, unexpected keys, then the per-key errors
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(self._get_name(), "\n\t".join(errors)))
        self._write_state(staged, extra, state_dict, assign)
        return _IncompatibleKeys(missing, unexpected)

    @staticmethod
    def _write_state(staged, extra, state_dict, assign):
        """load_state_dict's writes, once every value has been checked: copies (assign: the values become the
        parameters and buffers), then each module's set_extra_state."""
        with no_grad():
            for module, name, target, value in staged:
                if not assign:
                    target.copy_(value)
                elif isinstance(target, Parameter):
                    setattr(module, name, Parameter(value, target.requires_grad))
                else:
                    setattr(module, name, value)
        for key, module in extra:
            if key in state_dict:
                module.set_extra_state(state_dict[key])

    # ----------------------------------------------------------------- printing
    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        """The text between the parentheses of this module's repr; layers override it."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): {_addindent(repr(module), 2)}" for name, module in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                body = extra_lines[0]
            else:
                body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"
