"""In-place ops (x.add_(y), x += y, x.relu_(), F.relu(x, inplace=True), x.zero_(), x.copy_(y), ...), with
PyTorch's autograd semantics.

Outside the graph (grad mode off, or nothing involved requires grad: parameters under no_grad, buffers,
optimizer state) the result is computed out of place and written into x's storage with one copy kernel, which
writes through any strided view.

Inside the graph, x takes the result's place, as in PyTorch: after `x.relu_()` x is the relu's output, and a
backward through x reaches the relu, then x's old history. The op runs on a copy of x's old values (PyTorch's
"original self") where its backward reads them; unary ops of the op table whose derivative reads only their
output (relu, relu6, hardtanh, sigmoid, tanh) and add/sub run in place with no copy.

Every in-place write counts in its storage's version (Tensor._version, _autograd.note_write). A backward that
would read a tensor its op saved and that was written since raises PyTorch's error, and a tensor that shares its
storage with one modified through another tensor (a view and its base) refuses to join the graph: webgrad does
not rebase views, and no gradient is ever computed from values its forward did not see.
"""

from .. import _autograd, dtypes, random
from .._tensor import Tensor
from .._autograd import is_grad_enabled, no_grad, record
from .core import broadcast_shapes, cast, expanded_view
from .._backends import kernels


def check_inplace(x, op):
    """PyTorch's refusal: a leaf that requires grad cannot be modified in place while grad mode is on."""
    if is_grad_enabled() and x.requires_grad and x.grad_fn is None:
        raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation; "
                           "wrap the update in `with webgrad.no_grad():`")


def records(x, others=()):
    """Whether an in-place op on x joins the graph (x or an operand has history and grad mode is on)."""
    return is_grad_enabled() and (x.requires_grad or any(getattr(o, "requires_grad", False) for o in others))


def _write(x, value, graph=False):
    """Copy `value` (broadcastable to x) into x's storage and count the write."""
    kernels.copy(x.device.backend, x._view, expanded_view(value, tuple(x.shape)))
    _autograd.note_write(x._view.storage, graph)


def _adopt(x, result):
    """After result's values were written into x: x takes result's place in the graph. result's node is one
    the in-place op made on a copy of x's old values (none of its saved tensors is x's storage), so it counts
    as recorded after the write: x is then current, and its views and base are stale."""
    node = result.grad_fn
    if node is not None:
        node.clock = _autograd.clock()
        x.grad_fn, x.requires_grad = node, True
    return x


_TORCH_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
                "int32": "Int", "uint8": "Byte", "bool": "Bool"}


def _check_result_dtype(x, value, op):
    """PyTorch refuses an in-place result x's dtype cannot hold (a float result into an integer tensor)."""
    if value.dtype is x.dtype:
        return
    if (value.dtype.is_floating and not x.dtype.is_floating) or (x.dtype is dtypes.bool_ and value.dtype is not
                                                                  dtypes.bool_):
        raise RuntimeError(f"{op}: result type {_TORCH_NAMES.get(value.dtype.name, value.dtype.name)} can't be cast "
                           f"to the desired output type {_TORCH_NAMES.get(x.dtype.name, x.dtype.name)}")


def assign_(x, value, op="in-place op"):
    """Write `value` (a tensor broadcastable to x's shape) into x's storage as op `op`; returns x. In the graph,
    x becomes value (value must have been computed from x's old values, or from a clone of them)."""
    check_inplace(x, op)
    if value.device != x.device:
        raise RuntimeError(f"{op}: expected a value on {x.device}, got one on {value.device}")
    shape = tuple(x.shape)
    if tuple(value.shape) != shape:
        if broadcast_shapes(shape, tuple(value.shape), op=op) != shape:
            raise RuntimeError(f"{op}: result of shape {list(value.shape)} doesn't match the in-place target's "
                               f"shape {list(shape)}")
    graph = records(x, (value,))
    if graph:
        value = cast(value, x.dtype)
        if tuple(value.shape) != shape:
            value = value.expand(*shape)
    with no_grad():
        _write(x, cast(value, x.dtype), graph)
    if graph:
        # A node of its own between x and value: value's node keeps its clock, so what it saved is still
        # checked against this write (value may have been computed from x itself).
        record(x, "Copy", (value,), lambda g: (g,))
        x.grad_fn.clock = _autograd.clock()
    return x


def in_place(op_name, fn, output_only_grad=False):
    """Tensor.<op>_: `fn` (the out-of-place op) with PyTorch's in-place semantics (see the module doc).
    output_only_grad: fn's backward reads only its output, so it may run on x's own storage."""
    def method(self, *args, **kwargs):
        check_inplace(self, op_name)
        if not records(self, args + tuple(kwargs.values())):
            with no_grad():
                result = fn(self, *args, **kwargs)
            _check_result_dtype(self, result, op_name)
            return assign_(self, result, op_name)
        return apply_in_place(self, lambda source: fn(source, *args, **kwargs), op_name, output_only_grad)
    method.__name__ = op_name
    return method


def run_in_place(x, fn, op_name, others=()):
    """x <- fn(x) as op `op_name` (fn: the out-of-place op): in the graph through apply_in_place, else
    computed without recording and written into x's storage."""
    check_inplace(x, op_name)
    if records(x, others):
        return apply_in_place(x, fn, op_name)
    with no_grad():
        result = fn(x)
    _check_result_dtype(x, result, op_name)
    return assign_(x, result, op_name)


def apply_in_place(x, fn, op_name, output_only_grad=False):
    """x <- fn(x) in the graph: fn (an out-of-place, recorded op) runs on a copy of x's old values (or on x
    itself where its backward reads only its output), its result is written into x's storage, and x takes
    the result's place in the graph."""
    check_inplace(x, op_name)
    source = x if output_only_grad else x.clone()  # the old values, for a backward that reads them
    result = fn(source)
    _check_result_dtype(x, result, op_name)
    with no_grad():
        _write(x, cast(result, x.dtype), graph=True)
    return _adopt(x, result)


def view_in_place(op_name, fn):
    """Tensor.<view op>_ (unsqueeze_, squeeze_, t_, transpose_ ...): the tensor itself takes the view's shape and
    strides over the same storage, no value written; in the graph it takes the view's place (its grad_fn), as
    PyTorch's in-place view ops do. A leaf that requires grad is refused under grad mode, as in PyTorch."""
    def method(self, *args, **kwargs):
        check_inplace(self, op_name)
        view = fn(self, *args, **kwargs)
        self._view = view._view
        if view.grad_fn is not None:
            self.grad_fn = view.grad_fn
        return self
    method.__name__ = op_name
    return method


# --------------------------------------------------------------------------- the op table's unary ops

def unary_in_place(op_name, fn, rec, from_output):
    """Tensor.<op>_ for an op-table unary record: in place on x's storage where the derivative can be computed
    from the output alone (from_output: elementwise._GRAD_FROM_OUTPUT; one kernel, no copy), else through
    in_place's copy of x."""
    generic = in_place(op_name, fn)
    if not from_output:
        return generic

    def method(self, *args, **kwargs):
        if not records(self) or not self.dtype.is_floating or args or kwargs:
            return generic(self, *args, **kwargs)
        check_inplace(self, op_name)
        a, b = (tuple(d for _, d in rec.params) + (0.0, 0.0))[:2]
        kernels.unary(self.device.backend, rec.name, self._view, self._view, a, b)
        y = self  # after the kernel, self holds f(old self): the derivative reads it as y (and never x)
        record(self, rec.node, (self,), lambda g: (_derivative(rec.name, g, y, a, b),))
        _autograd.note_write(self._view.storage, graph=True)
        self.grad_fn.clock = _autograd.clock()
        return self
    method.__name__ = op_name
    return method


def _derivative(op, g, y, a, b):
    """g * f'(x) from y alone (the op's derivative reads only y): its unary_backward kernel, y passed as x too."""
    out = Tensor._empty(tuple(y.shape), y.dtype, y.device)
    kernels.unary_backward(y.device.backend, op, out._view, g.contiguous()._view, y._view, y._view, a, b)
    return out


# --------------------------------------------------------------------------- fills, copies, random fills

def zero_(x):
    return fill_(x, 0)


def fill_(x, value):
    check_inplace(x, "fill_")
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} "
                               "dimensions.")
        return assign_(x, value, "fill_")
    value = dtypes.check_fill_value(value, x.dtype)
    kernels.fill(x.device.backend, x._view, value)
    if records(x):
        return _written_constant(x, "Fill")
    _autograd.note_write(x._view.storage)
    return x


def _written_constant(x, name):
    """x (with history) now holds values that do not depend on its old ones."""
    record(x, name, (x,), lambda g: (g * 0,))  # as PyTorch: the old history gets a gradient of zeros
    _autograd.note_write(x._view.storage, graph=True)
    x.grad_fn.clock = _autograd.clock()
    return x


def copy_(x, src, non_blocking=False):
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): expected a Tensor, got {type(src).__name__}")
    if src.device != x.device:
        src = src.to(x.device)
    return assign_(x, src, "copy_")


def _random_(dist):
    def method(x, a=None, b=None, generator=None):
        check_inplace(x, f"{dist}_")
        defaults = {"uniform": (0.0, 1.0), "normal": (0.0, 1.0)}[dist]
        a = defaults[0] if a is None else a
        b = defaults[1] if b is None else b
        random.fill_random(x, dist, a, b, generator)
        if records(x):
            return _written_constant(x, dist.capitalize())
        _autograd.note_write(x._view.storage)
        return x
    method.__name__ = f"{dist}_"
    return method


uniform_ = _random_("uniform")
normal_ = _random_("normal")
