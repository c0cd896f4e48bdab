"""The op boundary a profile sees: webgrad's public op functions (``webgrad.<op>`` and the creation functions,
``Tensor.<op>``, its operators and its conversions and read-backs: ``to``, ``float``, ``item``, ...;
``nn.functional.<op>``), wrapped while a profile records and put back when it stops.

webgrad has no dispatcher every op passes through (ops call each other as plain functions), so the public
names are where an op begins and ends as the user sees it, as torch's profiler sees ATen ops. Wrapping them
only while recording keeps ops free of any profiling cost otherwise. A function held before the profile
started (``add = torch.add``) is the unwrapped one: its call shows as the kernels it runs, not as an op.

Events are named ``aten::<name>`` after torch's op of the same name (``aten::linear``, ``aten::add``; the
operators by the op they are: ``x + y`` is ``aten::add``), except where torch's ATen name differs
(``cross_entropy`` is ``aten::cross_entropy_loss``); indexing, which torch records as select, slice or index
depending on the key, is recorded as ``Tensor.__getitem__`` / ``Tensor.__setitem__``. Optimizers' step and
zero_grad are ranges named as torch's (``Optimizer.step#SGD.step``) around the ops and kernels they run.
"""

import functools
import types

import webgrad

from .. import _tensor, nn, optim
from ..nn import functional
from ..ops import api

_OPERATORS = {
    "__add__": "add", "__radd__": "add", "__iadd__": "add_", "__sub__": "sub", "__rsub__": "rsub",
    "__isub__": "sub_", "__mul__": "mul", "__rmul__": "mul", "__imul__": "mul_", "__truediv__": "div",
    "__rtruediv__": "div", "__itruediv__": "div_", "__floordiv__": "floor_divide", "__rfloordiv__": "floor_divide",
    "__mod__": "remainder", "__rmod__": "remainder", "__pow__": "pow", "__rpow__": "pow", "__matmul__": "matmul",
    "__rmatmul__": "matmul", "__neg__": "neg", "__abs__": "abs", "__eq__": "eq", "__ne__": "ne", "__lt__": "lt",
    "__le__": "le", "__gt__": "gt", "__ge__": "ge", "__and__": "bitwise_and", "__or__": "bitwise_or",
    "__xor__": "bitwise_xor", "__invert__": "bitwise_not", "__lshift__": "__lshift__", "__rshift__": "__rshift__",
}
_OWN_NAMES = {"__getitem__": "Tensor.__getitem__", "__setitem__": "Tensor.__setitem__"}
_ATEN_NAMES = {"cross_entropy": "cross_entropy_loss", "concat": "cat", "concatenate": "cat", "true_divide": "div",
               "divide": "div", "multiply": "mul", "subtract": "sub", "absolute": "abs", "negative": "neg",
               "clip": "clamp", "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le",
               "not_equal": "ne", "swapaxes": "transpose", "swapdims": "transpose"}
# Creation functions (webgrad.zeros, ...), recorded as torch's aten::zeros, ...
_CREATION = set("zeros ones empty full randn rand randint randperm arange linspace eye zeros_like ones_like empty_like "
                "full_like randn_like rand_like".split())
# Tensor methods that copy or read back (where a WebGPU program waits for its results), and torch's op for each.
_CONVERSIONS = {"item": "item", "to": "to", "cpu": "to", "cuda": "to", "float": "to", "double": "to", "half": "to",
                "int": "to", "long": "to", "bool": "to"}
# Queries of a tensor's description, not ops (torch's profiler records none of them either).
_NOT_OPS = {"numel", "dim", "size", "stride", "element_size", "result_type", "can_cast", "promote_types",
            "broadcast_shapes", "equal", "allclose"}
# nn.functional's private functions that nn's modules call directly, and the op they are.
_FUNCTIONAL_ENTRY_POINTS = {"_batch_norm": "batch_norm"}
# nn.functional's names that are helpers imported there, not functions of torch.nn.functional.
_HELPER_MODULES = {"webgrad._autograd", "webgrad.ops.autocast_policy"}

_patched = []  # (owner, name, original value) of what install() replaced


def event_name(name):
    if name in _OWN_NAMES:
        return _OWN_NAMES[name]
    return "aten::" + _OPERATORS.get(name) if name in _OPERATORS else "aten::" + _ATEN_NAMES.get(name, name)


def _is_op(name):
    base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
    return not name.startswith("is_") and base not in _NOT_OPS


def _targets():
    """(owner, attribute, function, event name) of every public op function: webgrad's namespace, Tensor's
    methods and operators, nn.functional's functions (and the private entry points nn's modules call), and
    the nn.functional functions nn Modules keep as class attributes (Conv2d's F.conv2d, Softmax's F.softmax)."""
    ops = api.FUNCTIONS
    for name, value in vars(webgrad).items():
        if (name in ops or name in _CREATION) and _is_op(name) and callable(value) and not isinstance(value, type):
            yield webgrad, name, value, event_name(name)
    for name, value in vars(_tensor.Tensor).items():
        if not isinstance(value, types.FunctionType):
            continue
        if name in _CONVERSIONS:
            yield _tensor.Tensor, name, value, event_name(_CONVERSIONS[name])
        elif (name in ops or name in _OPERATORS or name in _OWN_NAMES or (name.endswith("_") and name[:-1] in ops)) \
                and _is_op(name):
            yield _tensor.Tensor, name, value, event_name(name)
    public = {}
    for name, value in vars(functional).items():
        if name in _FUNCTIONAL_ENTRY_POINTS:
            yield functional, name, value, event_name(_FUNCTIONAL_ENTRY_POINTS[name])
        elif (not name.startswith("_") and isinstance(value, types.FunctionType) and _is_op(name)
                and value.__module__ not in _HELPER_MODULES):
            public[id(value)] = name
            yield functional, name, value, event_name(name)
    for module_class in vars(nn).values():
        if isinstance(module_class, type) and issubclass(module_class, nn.Module):
            for name, value in vars(module_class).items():
                if isinstance(value, staticmethod) and id(value.__func__) in public:
                    yield module_class, name, value, event_name(public[id(value.__func__)])


def _optimizer_methods():
    """(class, method, function) of the optimizers' step and zero_grad, which torch's optimizers record as
    ranges named ``Optimizer.step#SGD.step``, ``Optimizer.zero_grad#SGD.zero_grad``."""
    for optimizer_class in vars(optim).values():
        if isinstance(optimizer_class, type) and issubclass(optimizer_class, optim.Optimizer):
            for method in ("step", "zero_grad"):
                if isinstance(vars(optimizer_class).get(method), types.FunctionType):
                    yield optimizer_class, method, vars(optimizer_class)[method]


def _optimizer_range(recorder, method, fn):
    @functools.wraps(fn)
    def run(self, *args, **kwargs):
        return recorder.annotate(f"Optimizer.{method}#{type(self).__name__}.{method}", fn, (self,) + args, kwargs)
    return run


def _wrapped(recorder, name, fn):
    if isinstance(fn, staticmethod):
        return staticmethod(_wrapped(recorder, name, fn.__func__))

    @functools.wraps(fn)
    def op(*args, **kwargs):
        return recorder.op(name, fn, args, kwargs)
    return op


def install(recorder):
    """Route every public op function through `recorder.op` until uninstall()."""
    if _patched:
        raise RuntimeError("webgrad's op functions are already instrumented by a running profile")
    for owner, name, fn, event in list(_targets()):
        _patched.append((owner, name, fn))
        setattr(owner, name, _wrapped(recorder, event, fn))
    for owner, name, fn in list(_optimizer_methods()):
        _patched.append((owner, name, fn))
        setattr(owner, name, _optimizer_range(recorder, name, fn))


def uninstall():
    """Put back what install() replaced."""
    while _patched:
        owner, name, fn = _patched.pop()
        setattr(owner, name, fn)
