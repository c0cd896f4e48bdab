"""torch.library: Python custom operators, as PyTorch defines them.

    @torch.library.custom_op("mylib::numpy_sin", mutates_args=())
    def numpy_sin(x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(np.sin(x.numpy()))

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    numpy_sin.register_autograd(lambda ctx, g: g * ctx.saved_tensors[0].cos(), setup_context=setup_context)
    numpy_sin(x); torch.ops.mylib.numpy_sin(x)          # the same operator

The operator runs its kernel for the device of its first tensor argument (``register_kernel``), else the function
it was defined with, with autograd off inside (an opaque kernel, as PyTorch's). Gradients come from
``register_autograd``: without one, backward through the operator raises RuntimeError, as PyTorch's does.
``Library(ns, "DEF"/"FRAGMENT").define(schema)`` with ``.impl(name, fn, dispatch_key)`` and the module-level
``define``/``impl`` do the same through schema strings; a CompositeImplicitAutograd implementation is
differentiated through the ops it calls.

webgrad runs every operator eagerly, so ``register_fake`` (shape functions for PyTorch's compiler) is kept and
returned but not needed; ``triton_op``/``wrap_triton`` are refused (no Triton on WebGPU).
"""

import inspect

from . import _autograd
from ._tensor import Tensor
from .ops import namespaces

__all__ = ["Library", "custom_op", "define", "impl", "register_autograd", "register_fake", "register_kernel",
           "get_ctx", "infer_schema", "triton_op", "wrap_triton"]

_ops = {}  # "ns::name" -> CustomOpDef

# dispatch keys of Library.impl / impl(types=...) -> webgrad device type (None: every device)
_DISPATCH_KEYS = {"": None, "CompositeImplicitAutograd": None, "CompositeExplicitAutograd": None, "Autograd": None,
                  "CPU": "cpu", "cpu": "cpu", "PrivateUse1": "webgpu", "webgpu": "webgpu", "CUDA": "cuda",
                  "cuda": "cuda", "Meta": "meta", "meta": "meta", "default": None}


def _split_name(qualname):
    if not isinstance(qualname, str) or "::" not in qualname:
        raise ValueError(f"Expected there to be a namespace in {qualname}, i.e. The operator name should look "
                         f"something like ns::foo")
    ns, name = qualname.split("::", 1)
    if not ns.isidentifier() or not name.split(".")[0].isidentifier():
        raise ValueError(f"{qualname!r} is not a valid operator name: expected 'namespace::name'")
    return ns, name.split(".")[0]


def infer_schema(fn, /, *, mutates_args, op_name=None):
    """The operator schema PyTorch would infer from `fn`'s annotations, e.g. '(Tensor x, float y) -> Tensor'.
    Every parameter needs an annotation, as PyTorch's."""
    sig = inspect.signature(fn)
    names = {"Tensor": "Tensor", "float": "float", "int": "SymInt", "bool": "bool", "str": "str"}
    params = []
    for p in sig.parameters.values():
        if p.annotation is inspect.Parameter.empty:
            raise ValueError(f"infer_schema(func): Parameter {p.name} must have a type annotation. Got func with "
                             f"signature {sig})")
        ann = getattr(p.annotation, "__name__", str(p.annotation))
        mut = "(a!)" if mutates_args != "unknown" and p.name in mutates_args else ""
        params.append(f"{names.get(ann, ann)}{mut} {p.name}")
    ret = sig.return_annotation
    ret = "()" if ret in (None, inspect.Signature.empty, type(None)) else names.get(
        getattr(ret, "__name__", str(ret)), getattr(ret, "__name__", str(ret)))
    return f"{op_name or ''}({', '.join(params)}) -> {ret}"


class CustomOpDef:
    """A custom operator: call it, or torch.ops.<ns>.<name>; register_kernel/register_autograd/register_fake."""

    def __init__(self, namespace, name, fn, mutates_args, device_types=None, composite=False):
        self._namespace, self._name, self._init_fn = namespace, name, fn
        self._mutates_args = mutates_args
        self._kernels = {}
        self._functions = {}  # kernel -> its autograd.Function, made once per kernel rather than per call
        self._composite = composite  # differentiated through the ops fn calls (CompositeImplicitAutograd)
        if fn is not None:
            for d in _device_list(device_types):
                self._kernels[d] = fn
        self._backward = self._setup_context = self._fake = None
        self._signature = inspect.signature(fn) if fn is not None else None
        self.__name__ = name
        self.__doc__ = getattr(fn, "__doc__", None)
        ns = namespaces.namespace(namespace, create=True)
        ns._ops[name] = self._packet = namespaces.OpOverloadPacket(namespace, name, self)
        _ops[f"{namespace}::{name}"] = self

    @property
    def _qualname(self):
        return f"{self._namespace}::{self._name}"

    @property
    def _opoverload(self):
        return self._packet.default

    def register_kernel(self, device_types, fn=None, /):
        """The kernel for these device types ('cpu', 'webgpu'; None: every device); a decorator without fn."""
        def register(f):
            if self._signature is None:
                self._signature = inspect.signature(f)
            for d in _device_list(device_types):
                self._kernels[d] = f
            return f
        return register if fn is None else register(fn)

    def register_fake(self, fn, /):
        """Kept for scripts written for PyTorch's compiler: webgrad runs the real kernel, so it is not called."""
        self._fake = fn
        return fn

    def register_autograd(self, backward, /, *, setup_context=None):
        """backward(ctx, *output grads) -> a gradient per input (None for non-tensors); setup_context(ctx,
        inputs, output) saves what backward needs."""
        if not callable(backward):
            raise TypeError(f"register_autograd: backward must be callable, got {type(backward).__name__}")
        self._backward, self._setup_context = backward, setup_context

    def _kernel_for(self, args):
        device = next((a.device.type for a in args if isinstance(a, Tensor)), "cpu")
        kernel = self._kernels.get(device) or self._kernels.get(None)
        if kernel is None:
            raise NotImplementedError(f"{self._qualname}: no kernel for device type {device!r} (registered: "
                                      f"{sorted(str(k) for k in self._kernels)}); use register_kernel")
        return kernel

    def _positional(self, args, kwargs):
        if not kwargs:
            return tuple(args)
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return tuple(bound.arguments.values())

    def __call__(self, *args, **kwargs):
        args = self._positional(args, kwargs)
        kernel = self._kernel_for(args)
        if self._composite:
            return kernel(*args)
        needs_grad = _autograd.is_grad_enabled() and any(isinstance(a, Tensor) and a.requires_grad for a in args)
        if not needs_grad:
            with _autograd.no_grad():
                return self._checked(kernel(*args), args)
        function = self._functions.get(kernel)
        if function is None:
            function = self._functions[kernel] = _operator_function(self, kernel)
        return function.apply(*args)

    def _checked(self, out, args):
        outs = out if isinstance(out, (tuple, list)) else (out,)
        for o in outs:
            if isinstance(o, Tensor) and any(o is a for a in args):
                raise RuntimeError(
                    f"{self._name}: The output of this custom operator (1) must not also be an input to this custom "
                    f"operator and (2) may not alias any inputs to this custom operator or other returns. Return a "
                    f"clone of the offending output tensor(s) (e.g. return x.clone())")
        return out

    def __repr__(self):
        return f"<CustomOpDef({self._qualname})>"


def _operator_function(op, kernel):
    """The autograd.Function that runs `kernel` and differentiates through op's register_autograd."""
    from .autograd import Function

    def forward(*args):
        return op._checked(kernel(*args), args)

    def setup_context(ctx, inputs, output):
        if op._setup_context is not None:
            op._setup_context(ctx, inputs, output)

    def backward(ctx, *grads):
        if op._backward is None:
            raise RuntimeError(f"Trying to backward through {op._namespace}.{op._name}.default but no autograd "
                               f"formula was registered. Please use register_autograd to add one.")
        return op._backward(ctx, *grads)

    name = f"GeneratedBackwardFor_{op._namespace}_{op._name}_default"
    return type(name, (Function,), {"forward": staticmethod(forward), "setup_context": staticmethod(setup_context),
                                    "backward": staticmethod(backward)})


def _device_list(device_types):
    if device_types is None:
        return [None]
    types = [device_types] if isinstance(device_types, str) else list(device_types)
    return [_DISPATCH_KEYS.get(t, t) for t in types]


def _lookup(op):
    if isinstance(op, CustomOpDef):
        return op
    if isinstance(op, namespaces.OpOverload):
        op = op.overloadpacket
    if isinstance(op, namespaces.OpOverloadPacket) and isinstance(op._fn, CustomOpDef):
        return op._fn
    found = _ops.get(op) if isinstance(op, str) else None
    if found is None:
        raise ValueError(f"{op!r} is not an operator defined through torch.library (custom_op or define)")
    return found


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None, tags=None):
    """Define a custom operator from a Python function; a decorator without fn. mutates_args names the
    arguments it writes in place (() for none, "unknown" if unsure)."""
    def define_op(f):
        if schema is None:
            infer_schema(f, mutates_args=mutates_args)  # raises, as PyTorch's, on a missing annotation
        ns, op = _split_name(name)
        return CustomOpDef(ns, op, f, mutates_args, device_types)
    return define_op if fn is None else define_op(fn)


def register_kernel(op, device_types, func=None, /, *, lib=None):
    return _lookup(op).register_kernel(device_types, func)


def register_autograd(op, backward, /, *, setup_context=None, lib=None):
    _lookup(op).register_autograd(backward, setup_context=setup_context)


def register_fake(op, func=None, /, *, lib=None, _stacklevel=1, allow_override=False):
    target = _lookup(op)
    return target.register_fake if func is None else target.register_fake(func)


impl_abstract = register_fake


def define(qualname, schema, *, lib=None, tags=()):
    """Define operator ns::name with a schema such as '(Tensor x) -> Tensor'; its kernels come from impl."""
    ns, op = _split_name(qualname)
    if "(" not in schema or "->" not in schema:
        raise RuntimeError(f"define({qualname!r}): could not parse the schema {schema!r} (expected "
                           f"'(Tensor x, ...) -> Tensor')")
    CustomOpDef(ns, op, None, "unknown")


def impl(qualname, types, func=None, *, lib=None):
    """Register `func` as ns::name's kernel for these dispatch keys/device types; a decorator without func."""
    def register(f):
        target = _lookup(qualname) if qualname in _ops else None
        if target is None:
            raise ValueError(f"impl({qualname!r}): define the operator first (torch.library.define)")
        keys = [types] if isinstance(types, str) else list(types)
        if any(k == "CompositeImplicitAutograd" for k in keys):
            target._composite = True
        target.register_kernel(types, f)
        return f
    return register if func is None else register(func)


class Library:
    """torch.library.Library(ns, kind): kind 'DEF' (a new namespace), 'FRAGMENT' (add to one) or 'IMPL'."""

    def __init__(self, ns, kind, dispatch_key=""):
        if kind not in ("DEF", "IMPL", "FRAGMENT"):
            raise ValueError(f"Unsupported kind: {kind}")
        if not isinstance(ns, str) or not ns.isidentifier():
            raise ValueError(f"Library: {ns!r} is not a namespace name")
        self.ns, self.kind, self.dispatch_key = ns, kind, dispatch_key
        namespaces.namespace(ns, create=True)

    def define(self, schema, alias_analysis="", *, tags=()):
        """Define 'name(Tensor x, ...) -> Tensor'; returns the operator's name."""
        if self.kind == "IMPL":
            raise RuntimeError("define() is not allowed on an IMPL library")
        name = schema.split("(", 1)[0].strip().split(".")[0]
        define(f"{self.ns}::{name}", schema[len(name):] if schema.startswith(name) else schema)
        return name

    def impl(self, op_name, fn, dispatch_key="", *, with_keyset=False, allow_override=True):
        name = op_name if isinstance(op_name, str) else op_name.name()
        name = name.split("::")[-1].split(".")[0]
        impl(f"{self.ns}::{name}", dispatch_key or self.dispatch_key or "CompositeImplicitAutograd", fn)

    def _destroy(self):
        pass


def get_ctx():
    raise RuntimeError("torch.library.get_ctx() is only for fake implementations under PyTorch's compiler; "
                       "webgrad runs operators eagerly and never calls them")


def triton_op(name, fn=None, /, *, mutates_args):
    raise NotImplementedError("torch.library.triton_op: webgrad has no Triton (kernels run as WGSL on WebGPU); "
                              "use torch.library.custom_op")


def wrap_triton(fn):
    raise NotImplementedError("torch.library.wrap_triton: webgrad has no Triton (kernels run as WGSL on WebGPU)")
