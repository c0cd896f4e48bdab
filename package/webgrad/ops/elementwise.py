"""Elementwise ops: unary math and activations, binary arithmetic with broadcasting, comparisons, where.

Each op computes its result with one backend kernel and records its backward right beside it.
Scalars never become tensors: `x * 2` is the `affine` kernel with a=2, so no upload happens per step.
"""

import inspect
import warnings

from .. import _bounds, dtypes
from .._autograd import is_grad_enabled, no_grad, record
from .._tensor import COMPLEX, Tensor, full
from .core import broadcast_shapes, cast, check_same_device, expanded_view, new, unbroadcast  # noqa: F401
from . import table
from .inplace import assign_, run_in_place
from .second_derivatives import unary_backward_backward
from .._backends import kernels

INF = float("inf")


def _float_input(x, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): expected a Tensor, got {type(x).__name__}")
    return x if x.dtype.is_floating else cast(x, dtypes.float32)


# ===================================================================== unary
def _unary(x, op, a=0.0, b=0.0, dtype=None, name=None, grad_op=None):
    out = new(x.shape, dtype or x.dtype, x.device)
    kernels.unary(x.device.backend, op, out._view, x._view, a, b)
    if grad_op is not None:
        xs, ys = _kept(grad_op, x, out)
        record(out, name or op.capitalize(), (x,), lambda g: (_unary_grad(grad_op, g, xs, ys, a, b),))
    return out


def _kept(op, x, y):
    """The (x, y) operands of op's derivative kernel that its backward keeps: the ones its formula reads
    (table.Unary.grad_reads), the other slot given the kept one (the kernel only takes its shape). Ops in
    _GRAD_FROM_OUTPUT keep y for both."""
    if op in _GRAD_FROM_OUTPUT:
        return y, y
    reads_x, reads_y = table.UNARY[op].grad_reads
    if reads_y:
        return (x if reads_x else y), y
    return x, x


def _unary_grad(op, g, x, y, a, b):
    """g * op'(x) through the derivative kernel (x, y: what _kept gives). Under create_graph (grad mode on in
    the backward pass, something here requiring grad) it is a node of its own: linear in g, and through x or
    y by op's second derivative (second_derivatives.py)."""
    out = new(x.shape, x.dtype, x.device)
    kernels.unary_backward(x.device.backend, op, out._view, g._view, x._view, y._view, a, b)
    if is_grad_enabled() and (g.requires_grad or x.requires_grad or y.requires_grad):
        record(out, f"{table.UNARY[op].node}Backward", (g, x, y),
               unary_backward_backward(op, g, x, y, a, b, _unary_grad))
    return out


def apply_unary(op, input, a=0.0, b=0.0):
    """Run the op-table record `op` (table.Unary) on `input`: its forward kernel, and its backward
    kernel recorded for autograd. Integer inputs are converted to float32 unless the op keeps them."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op.name}(): expected a Tensor, got {type(input).__name__}")
    x = input
    if op.float_only and not x.dtype.is_floating:
        raise _not_for(op.name, x.dtype)
    if not x.dtype.is_floating and op.result != table.BOOL and not (op.result == table.SAME and op.int_exact):
        x = cast(x, dtypes.float32)
    a, b = _NONE if a is None else a, _NONE if b is None else b
    out = _unary(x, op.name, a, b, dtype=dtypes.bool_ if op.result == table.BOOL else x.dtype)
    if op.grad is not None and x.dtype.is_floating:
        xs, ys = _kept(op.name, x, out)
        record(out, op.node, (x,), lambda g: (_unary_grad(op.name, g, xs, ys, a, b),))
    elif op.zero_grad and x.dtype.is_floating:
        record_zero_grad(out, op.node, (x,))
    return out


_NONE = float("nan")  # a parameter given as None (logit's eps), as the kernels read it
_TORCH_TYPE_NAMES = {"int32": "Int", "int64": "Long", "bool": "Bool", "uint8": "Byte"}


def _not_for(op, dtype):
    """PyTorch's error for a float-only op given integers or bools."""
    return NotImplementedError(f'"{op}" not implemented for \'{_TORCH_TYPE_NAMES.get(dtype.name, dtype.name)}\'')


def record_zero_grad(out, name, inputs):
    """Record `out` as a piecewise-constant function of `inputs` (floor, sign, round, div with a rounding
    mode): as in PyTorch it joins the graph, and its backward gives each input a gradient of zeros."""
    shapes = [t.shape if isinstance(t, Tensor) else None for t in inputs]

    def backward(g):
        return tuple(None if s is None else full(s, 0.0, dtype=g.dtype, device=g.device) for s in shapes)
    backward.constant_gradient = True  # zeros at every order (create_graph asks: _autograd)
    return record(out, name, inputs, backward)


# Ops whose derivative, written in x, gives the same value on y = f(x): their backward keeps the output only
# (as PyTorch's does), so the input's buffer is freed once nothing else needs it. relu: x > 0 iff y > 0
# (NaN and -0 included); relu6: 0 < x < 6 iff 0 < y < 6; sigmoid and tanh: written in y alone.
_GRAD_FROM_OUTPUT = frozenset(("relu", "relu6", "sigmoid", "tanh"))


def _bind(op, args, kwargs, with_inplace):
    """(a, b, inplace) from the call's arguments, bound to the record's parameter names as Python would."""
    names = [n for n, _ in op.params] + (["inplace"] if with_inplace else [])
    if len(args) > len(names):
        raise TypeError(f"{op.name}() takes {len(names) + 1} positional arguments but {len(args) + 1} were given")
    values = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"{op.name}() got an unexpected keyword argument {k!r}")
        if k in values:
            raise TypeError(f"{op.name}() got multiple values for argument {k!r}")
        values[k] = v
    params = [_NONE if values.get(n, d) is None else float(values.get(n, d)) for n, d in op.params] + [0.0, 0.0]
    return params[0], params[1], bool(values.get("inplace", False))


def _signature(op, with_inplace):
    P = inspect.Parameter
    params = [P("input", P.POSITIONAL_OR_KEYWORD)]
    params += [P(n, P.POSITIONAL_OR_KEYWORD, default=d) for n, d in op.params]
    if with_inplace:
        params.append(P("inplace", P.POSITIONAL_OR_KEYWORD, default=False))
    return inspect.Signature(params)


def _unary_function(op):
    with_inplace = "inplace_arg" in op.expose

    def fn(input, *args, **kwargs):
        a, b, inplace = _bind(op, args, kwargs, with_inplace)
        if not inplace:
            return apply_unary(op, input, a, b)
        if op.name in _GRAD_FROM_OUTPUT and not op.params and "inplace" in op.expose:
            return getattr(Tensor, op.name + "_")(input)  # (F.relu(x, inplace=True): one kernel on x's storage)
        return run_in_place(input, lambda src: apply_unary(op, src, a, b), op.name + "_")
    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = op.doc
    fn.__signature__ = _signature(op, with_inplace)
    return fn


def _binary_function(op):
    def fn(input, other):
        if not isinstance(input, Tensor):
            if not isinstance(other, Tensor):
                raise TypeError(f"{op.name}(): expected a Tensor, got {type(input).__name__}")
            input = _scalar_operand(other, input, op.name)
        if not isinstance(other, Tensor):
            other = _scalar_operand(input, other, op.name)
        if op.float_only and not (input.dtype.is_floating or other.dtype.is_floating):
            raise _not_for(op.name, dtypes.result_type(input, other))
        if op.result == table.FLOAT:
            input, other = _float_input(input, op.name), _float_input(other, op.name)
        x, y, dtype = _promote_pair(input, other, op.name)
        out = _binary_kernel(op.name, x, y, dtype, out_dtype=dtypes.bool_ if op.result == table.BOOL else None)
        if op.grad is None or not out.dtype.is_floating:
            return out

        def backward(g):
            gx, gy = op.grad(g, x, y, out)
            return (None if gx is None else unbroadcast(gx, x.shape)), (None if gy is None else unbroadcast(gy, y.shape))
        return record(out, op.node, (x, y), backward)
    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = op.doc
    return fn


_functions = {}


def function(name):
    """The differentiable function of op-table record `name` (built once, on first use)."""
    op = table.UNARY.get(name) if name in table.UNARY and table.UNARY[name].expose else table.BINARY.get(name)
    op = op or table.UNARY.get(name)
    if op is None:
        raise KeyError(f"no op {name!r} in the op table")
    fn = _functions.get(name)
    if fn is None or fn.__record__ is not op:
        fn = _unary_function(op) if op.kind == "unary" else _binary_function(op)
        fn.__record__ = op
        _functions[name] = table.FUNCTIONS[name] = fn
    return fn


def table_functions(exposure):
    """{name: function} for the records exposed as `exposure` ("function", "method", "functional", ...)."""
    return {name: function(name) for name, op in {**table.UNARY, **table.BINARY}.items() if exposure in op.expose}


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu(): approximate must be 'none' or 'tanh', got {approximate!r}")
    return apply_unary(table.UNARY["gelu" if approximate == "none" else "gelu_tanh"], input)


def _maybe_inplace(input, out, inplace):
    if not inplace:
        return out
    return assign_(input, out)


def clamp(input, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("clamp(): at least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = input
        if min is not None:
            out = maximum(out, min if isinstance(min, Tensor) else full_scalar_like(out, min))
        if max is not None:
            out = minimum(out, max if isinstance(max, Tensor) else full_scalar_like(out, max))
        return out
    dtype = input.dtype
    if (isinstance(min, float) or isinstance(max, float)) and not dtype.is_floating:
        dtype = dtypes.float32
        input = cast(input, dtype)
    lo = -INF if min is None else float(min)
    hi = INF if max is None else float(max)
    return _unary(input, "clamp", lo, hi, name="Clamp.1", grad_op="clamp" if dtype.is_floating else None)


clip = clamp


def full_scalar_like(t, value):
    return full((), value, dtype=t.dtype, device=t.device)


def _scalar_operand(t, value, op):
    """A Python scalar beside tensor `t` as a 0-d tensor of torch's wrapped-number dtype: it lifts only the
    category (an int tensor and 2.5 give float32; a float16 tensor and 2.5 stay float16)."""
    return full((), value, dtype=_scalar_dtype(t, value, op), device=t.device)


def affine(input, scale, shift, dtype=None):
    """input * scale + shift in one kernel (also converts uint8 images to float on the device)."""
    if dtype is None:
        wants_float = isinstance(scale, float) or isinstance(shift, float)
        dtype = dtypes.float32 if wants_float and not input.dtype.is_floating else input.dtype
    out = _unary(input, "affine", float(scale), float(shift), dtype=dtype)
    if out.dtype.is_floating and input.dtype.is_floating:
        record(out, "Affine", (input,), lambda g: (g * scale,))
    return out


def isnan(input):
    return _unary(input, "isnan", dtype=dtypes.bool_)


def isinf(input):
    return _unary(input, "isinf", dtype=dtypes.bool_)


def logical_not(input):
    return _unary(input, "logical_not", dtype=dtypes.bool_)


# ===================================================================== binary
def _cpu_scalars_to_device(*tensors):
    """The tensors, with 0-d CPU tensors moved to the device of the others where those are elsewhere: PyTorch's
    elementwise ops take a 0-d CPU tensor beside tensors on any device, as a scalar (a distribution's
    Normal(0., 1.) prior beside a posterior on the GPU). Any other mix is left to check_same_device's error."""
    devices = {t.device for t in tensors if isinstance(t, Tensor) and not (t.ndim == 0 and t.device.type == "cpu")}
    if len(devices) != 1:
        return tensors
    (device,) = devices
    if device.type == "cpu":
        return tensors
    return tuple(t.to(device) if isinstance(t, Tensor) and t.ndim == 0 and t.device.type == "cpu" else t
                 for t in tensors)


def _promote_pair(x, y, op):
    """x and y converted to their result dtype, torch.result_type's: a 0-d tensor beside a tensor with dims
    only lifts the category (int32 + a 0-d int64 stays int32; int32 + a 0-d float32 is float32). A float16
    operand of a float32 result stays as it is (_to_operand)."""
    x, y = _cpu_scalars_to_device(x, y)
    check_same_device(op, x, y)
    if x.dtype is y.dtype:
        return x, y, x.dtype
    dtype = dtypes.result_type(x, y)
    return _to_operand(x, dtype), _to_operand(y, dtype), dtype


def _to_operand(x, dtype):
    """x as an operand of an elementwise kernel computing in `dtype`: converted, but for a float16 operand of a
    float32 op, which the kernels read as it is (math in float32, as the conversion first would give). Under
    autocast a GPT's residual add, the float32 stream plus a half projection, then makes no float32 copy of the
    projection (a pass through memory and a buffer each), and its backward gives the half operand its gradient
    in half (the engine's cast to the input's dtype, as PyTorch's)."""
    if dtype is dtypes.float32 and x.dtype is dtypes.float16:
        return x
    return cast(x, dtype)


def _binary_kernel(op, x, y, dtype, out_dtype=None):
    shape = broadcast_shapes(x.shape, y.shape, op=op)
    out = new(shape, out_dtype or dtype, x.device)
    kernels.binary(x.device.backend, op, out._view, expanded_view(x, shape), expanded_view(y, shape))
    return out


def _scalar_dtype(x, s, op):
    if not isinstance(s, (int, float, bool)):
        raise TypeError(f"{op}(): unsupported operand type {type(s).__name__}")
    return dtypes.promote_scalar(x.dtype, s)


def legacy_alpha_first(op, other, alpha, form="Tensor input, Number alpha, Tensor other"):
    """(other, alpha) of PyTorch's deprecated overload op(input, alpha, other), alpha a number and other a tensor
    (x.add_(-lr, grad) in scripts from before PyTorch 1.5), with PyTorch's warning; else as they came."""
    if isinstance(alpha, Tensor) and isinstance(other, (int, float)) and not isinstance(other, bool):
        plain = form.replace("Number alpha, Tensor other", "Tensor other, *, Number alpha = 1")
        warnings.warn(f"This overload of {op} is deprecated:\n\t{op}({form})\nConsider using one of the following "
                      f"signatures instead:\n\t{op}({plain})", UserWarning, stacklevel=3)
        return alpha, other
    return other, alpha


def add(input, other, alpha=1):
    other, alpha = legacy_alpha_first("add", other, alpha)
    if getattr(input, "is_sparse", False) or getattr(other, "is_sparse", False):  # webgrad.sparse COO operands
        from ..sparse._coo import add as sparse_add
        return sparse_add(input, other, alpha)
    if not isinstance(input, Tensor):
        input, other = other, input
    if not isinstance(other, Tensor):
        if isinstance(other, complex):  # a real tensor and a complex scalar: a complex64 result
            return COMPLEX["add"](input, other, alpha=alpha)
        dtype = _scalar_dtype(input, other * alpha, "add")
        return _affine_scalar(input, 1, other * alpha, dtype, "Add")
    if alpha != 1:
        other = mul(other, alpha)
    x, y, dtype = _promote_pair(input, other, "add")
    out = _binary_kernel("add", x, y, dtype)
    xs, ys = x.shape, y.shape  # the backward needs the shapes only: holding x and y would keep their buffers
    return record(out, "Add", (x, y), lambda g: (unbroadcast(g, xs), unbroadcast(g, ys)))


def _affine_scalar(x, scale, shift, dtype, name):
    out = _unary(x, "affine", scale, shift, dtype=dtype)
    if dtype.is_floating and x.dtype.is_floating:
        record(out, name, (x,), (lambda g: (g,)) if scale == 1 else (lambda g: (g * scale,)))
    return out


def sub(input, other, alpha=1):
    other, alpha = legacy_alpha_first("sub", other, alpha)
    if getattr(input, "is_sparse", False) or getattr(other, "is_sparse", False):
        from ..sparse._coo import add as sparse_add
        return sparse_add(input, other, -alpha)
    if isinstance(input, complex) or isinstance(other, complex):
        return COMPLEX["sub"](input, other, alpha=alpha)
    if not isinstance(input, Tensor):  # scalar - tensor
        dtype = _scalar_dtype(other, input, "sub")
        return _affine_scalar(other, -alpha, input, dtype, "Rsub.1")  # (PyTorch's rsub(Tensor, Scalar))
    if not isinstance(other, Tensor):
        dtype = _scalar_dtype(input, other * alpha, "sub")
        return _affine_scalar(input, 1, -other * alpha, dtype, "Sub")
    if alpha != 1:
        other = mul(other, alpha)
    x, y, dtype = _promote_pair(input, other, "sub")
    out = _binary_kernel("sub", x, y, dtype)
    xs, ys = x.shape, y.shape  # shapes only, as in add
    return record(out, "Sub", (x, y), lambda g: (unbroadcast(g, xs), unbroadcast(neg(g), ys)))


def mul(input, other):
    if not isinstance(input, Tensor):
        input, other = other, input
    if not isinstance(other, Tensor):
        if isinstance(other, complex):
            return COMPLEX["mul"](input, other)
        dtype = _scalar_dtype(input, other, "mul")
        return _affine_scalar(input, other, 0, dtype, "Mul")
    x, y, dtype = _promote_pair(input, other, "mul")
    out = _binary_kernel("mul", x, y, dtype)
    return record(out, "Mul", (x, y), lambda g: (_grad_of("mul", g, y, x), _grad_of("mul", g, x, y)))


def _grad_of(op, g, other, operand):
    """op(g, other) as `operand`'s gradient (a product's g * y, a quotient's g / y), summed to its shape. Where
    the operand is a float16 operand of a float32 op (_to_operand) of the full shape and no graph is being built
    of the backward, the kernel writes the half gradient itself, each value rounded once from its float32 result
    (what the float32 result cast to half gives, as PyTorch's engine casts it), with no float32 result to cast."""
    if (operand.dtype is dtypes.float16 and g.dtype is not dtypes.float16 and not is_grad_enabled()
            and tuple(operand.shape) == tuple(g.shape)):
        out = new(operand.shape, operand.dtype, g.device)
        kernels.binary(g.device.backend, op, out._view, g._view, expanded_view(other, tuple(g.shape)))
        return out
    return unbroadcast(_BINARY_OPS[op](g, other), operand.shape)


def div(input, other, rounding_mode=None):
    if rounding_mode is not None:
        if rounding_mode not in ("floor", "trunc"):
            raise ValueError(f"div(): rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
        both_int = all(not (t.dtype.is_floating if isinstance(t, Tensor) else isinstance(t, float)) for t in (input, other))
        if both_int:  # exact integer division (through float32 it would lose |x| > 2**24)
            q = floor_divide(input, other)
            if rounding_mode == "trunc":  # trunc is floor + 1 where the quotient is negative and inexact
                x = input if isinstance(input, Tensor) else full_scalar_like(other, input)
                y = other if isinstance(other, Tensor) else full_scalar_like(input, other)
                inexact = x - q * y != 0
                q = where(logical_and(inexact, logical_xor(x < 0, y < 0)), q + 1, q)
            return q
        with no_grad():
            q = div(input, other)
            q = floor(q) if rounding_mode == "floor" else trunc(q)
        return record_zero_grad(q, "Div", (input, other))
    if not isinstance(input, Tensor):  # scalar / tensor
        if isinstance(input, complex):
            return COMPLEX["div"](input, other)
        y = _float_input(other, "div")
        return _unary(y, "rdiv", float(input), name="Rdiv", grad_op="rdiv")
    x = _float_input(input, "div")
    if not isinstance(other, Tensor):
        if not isinstance(other, (int, float)):
            if isinstance(other, complex):
                return COMPLEX["div"](input, other)
            raise TypeError(f"div(): unsupported operand type {type(other).__name__}")
        # x / 0 -> x * inf gives inf, -inf or nan (for 0 / 0) exactly as true division does
        return _affine_scalar(x, 1.0 / other if other != 0 else INF, 0.0, x.dtype, "Div")
    y = _float_input(other, "div")
    x, y, dtype = _promote_pair(x, y, "div")
    out = _binary_kernel("div", x, y, dtype)
    return record(out, "Div", (x, y), lambda g: (_grad_of("div", g, y, x), unbroadcast(neg(g) * out / y, y.shape)))


true_divide = divide = div


def floor_divide(input, other):
    """input // other; exact on integers (not through float32, which loses |x| > 2**24)."""
    ints = [t for t in (input, other) if isinstance(t, Tensor)]
    if not ints or any(t.dtype.is_floating for t in ints) or isinstance(input, float) or isinstance(other, float):
        return div(input, other, rounding_mode="floor")
    if not isinstance(other, Tensor):
        if other == 0:
            raise _bounds.IntegerDivisionByZero("ZeroDivisionError: integer division by zero")
        other = full_scalar_like(input, other)
    else:  # (as PyTorch: the CPU raises here, WebGPU at the next read-back)
        kernels.check_values(other.device.backend, other._view, _bounds.DIVISION_BY_ZERO, _bounds.IntegerDivisionByZero,
                             zero=True)
    if not isinstance(input, Tensor):
        input = full_scalar_like(other, input)
    x, y, dtype = _promote_pair(input, other, "floor_divide")
    return _binary_kernel("floor_divide", x, y, dtype)


def remainder(input, other):
    return input - floor_divide(input, other) * other


def pow(input, exponent):
    if not isinstance(input, Tensor):  # scalar ** tensor
        y = _float_input(exponent, "pow")
        return _unary(y, "rpow", float(input), name="Pow.2", grad_op="rpow")  # (PyTorch's overload numbers)
    if not isinstance(exponent, Tensor):
        if not isinstance(exponent, (int, float)):
            raise TypeError(f"pow(): unsupported exponent type {type(exponent).__name__}")
        if not input.dtype.is_floating and (isinstance(exponent, float) or exponent < 0):
            input = cast(input, dtypes.float32)
        return _unary(input, "pow", float(exponent), name="Pow", grad_op="pow" if input.dtype.is_floating else None)
    x, y, dtype = _promote_pair(input, exponent, "pow")
    out = _binary_kernel("pow", x, y, dtype)

    def backward(g):
        gx = g * y * pow(x, y - 1)
        # d/dy x**y = x**y * log(x); define it as 0 where x == 0 (as PyTorch) instead of nan
        gy = where(x == 0, 0.0, g * out * log(x)) if y.requires_grad else None
        return unbroadcast(gx, x.shape), (unbroadcast(gy, y.shape) if gy is not None else None)
    return record(out, "Pow.1", (x, y), backward)


def _min_max(op):
    def fn(input, other):
        x, y, dtype = _promote_pair(input, other, op)
        out = _binary_kernel(op, x, y, dtype)

        def backward(g):
            # ties split the gradient in half, as PyTorch
            wins = (x > y) if op == "maximum" else (x < y)
            share = cast(wins, g.dtype) + cast(x == y, g.dtype) * 0.5
            return unbroadcast(g * share, x.shape), unbroadcast(g * (1.0 - share), y.shape)
        return record(out, op.capitalize(), (x, y), backward)
    fn.__name__ = op
    return fn


maximum = _min_max("maximum")
minimum = _min_max("minimum")


def atan2(input, other):
    x, y, dtype = _promote_pair(_float_input(input, "atan2"), _float_input(other, "atan2"), "atan2")
    out = _binary_kernel("atan2", x, y, dtype)

    def backward(g):
        denom = x * x + y * y
        return unbroadcast(g * y / denom, x.shape), unbroadcast(neg(g) * x / denom, y.shape)
    return record(out, "Atan2", (x, y), backward)


def _compare(op):
    def fn(input, other):
        if not isinstance(input, Tensor):
            raise TypeError(f"{op}(): the first argument must be a Tensor")
        if not isinstance(other, Tensor):
            if not isinstance(other, (int, float, bool)):
                return NotImplemented
            return _unary(input, op, float(other), dtype=dtypes.bool_)
        x, y, dtype = _promote_pair(input, other, op)
        return _binary_kernel(op, x, y, dtype, out_dtype=dtypes.bool_)
    fn.__name__ = op
    return fn


eq, ne, lt, le, gt, ge = (_compare(op) for op in ("eq", "ne", "lt", "le", "gt", "ge"))
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne


def _logical(op):
    def fn(input, other):
        input, other = _cpu_scalars_to_device(input, other)
        check_same_device(op, input, other)
        x, y = cast(input, dtypes.bool_), cast(other, dtypes.bool_)
        return _binary_kernel(op, x, y, dtypes.bool_)
    fn.__name__ = op
    return fn


logical_and, logical_or, logical_xor = (_logical(op) for op in ("logical_and", "logical_or", "logical_xor"))


def where(condition, input, other):
    """where(cond, x, y): x where cond is true, else y; x and y may be Python scalars."""
    if not isinstance(condition, Tensor):
        raise TypeError("where(): condition must be a bool Tensor")
    like = input if isinstance(input, Tensor) else other if isinstance(other, Tensor) else condition
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        dtype = dtypes.float32 if isinstance(input, float) or isinstance(other, float) else dtypes.int64
    elif isinstance(input, Tensor) and isinstance(other, Tensor):
        dtype = dtypes.result_type(input, other)
    else:
        s = other if isinstance(input, Tensor) else input
        dtype = dtypes.promote_scalar(like.dtype, s)
    x = _to_operand(input, dtype) if isinstance(input, Tensor) else full_scalar_like_dtype(condition, input, dtype)
    y = _to_operand(other, dtype) if isinstance(other, Tensor) else full_scalar_like_dtype(condition, other, dtype)
    condition, x, y = _cpu_scalars_to_device(condition, x, y)
    check_same_device("where", condition, x, y)
    cond = cast(condition, dtypes.bool_)
    shape = broadcast_shapes(cond.shape, x.shape, y.shape, op="where")
    out = new(shape, dtype, x.device)
    kernels.where(x.device.backend, out._view, expanded_view(cond, shape), expanded_view(x, shape), expanded_view(y, shape))

    def backward(g):
        zero = full_scalar_like_dtype(g, 0.0, g.dtype)
        gx = unbroadcast(where(cond, g, zero), x.shape) if x.requires_grad else None
        gy = unbroadcast(where(cond, zero, g), y.shape) if y.requires_grad else None
        return gx, gy
    return record(out, "Where", (x, y), backward)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN -> `nan`, +inf -> `posinf`, -inf -> `neginf` (default: the dtype's largest / lowest finite
    value), as torch.nan_to_num; the gradient flows through the finite elements only."""
    if not input.dtype.is_floating:
        return clone(input)
    big = 1.7976931348623157e308 if input.dtype is dtypes.float64 else 3.4028234663852886e38
    posinf = big if posinf is None else posinf
    neginf = -big if neginf is None else neginf
    out = where(function("isnan")(input), float(nan), input)
    out = where(input == INF, float(posinf), out)
    return where(input == -INF, float(neginf), out)


def full_scalar_like_dtype(t, value, dtype):
    return full((), value, dtype=dtype, device=t.device)


def clone(input, memory_format=None):
    out = new(input.shape, input.dtype, input.device)
    kernels.copy(input.device.backend, out._view, input._view)
    return record(out, "Clone", (input,), lambda g: (g,))


def contiguous(input, memory_format=None):
    return input if input._view.is_contiguous() else clone(input)


_BINARY_OPS = {"mul": mul, "div": div}  # (_grad_of's ops)

# The table's functions that this module's hand-written ops and backward passes call.
neg, floor, trunc, log = function("neg"), function("floor"), function("trunc"), function("log")
