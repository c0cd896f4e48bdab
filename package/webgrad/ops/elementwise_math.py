"""Elementwise math whose signature the op table's generic functions do not give: polygamma(n, x) (the
order first), mvlgamma, lerp, clamp_min/clamp_max with tensor bounds (PyTorch's gradient split), rsub,
renorm, frexp, ldexp, float_power, positive, and the reflected operators Tensor.__rdiv__ / __rmod__.
Each is a record's kernel or a composition of webgrad ops, with PyTorch's gradient and errors.
"""

import math

from ..return_types import structseq
from .. import dtypes
from .._autograd import no_grad, record, renamed
from .._tensor import Tensor, tensor
from . import elementwise as ew
from . import table
from .core import cast, unbroadcast

frexp_result = structseq("frexp", ["mantissa", "exponent"])  # torch.return_types.frexp


def _check_tensor(x, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(x).__name__}")


def polygamma(n, input):
    """torch.polygamma(n, input): the n-th derivative of digamma (n = 0: digamma itself)."""
    _check_tensor(input, "polygamma")
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"polygamma(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return ew.apply_unary(table.UNARY["polygamma"], input, float(n))


def _polygamma_method(self, n):  # Tensor.polygamma(n): the tensor is the input, n the order
    return polygamma(n, self)


def mvlgamma(input, p):
    """torch.mvlgamma(input, p): the multivariate log-gamma function, sum_j lgamma(x - j/2) + p(p-1)/4 log(pi)."""
    _check_tensor(input, "mvlgamma")
    if input.dtype is dtypes.bool_:
        raise RuntimeError("The input tensor may not be a boolean tensor.")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    x = input if input.dtype.is_floating else cast(input, dtypes.float32)
    shifts = tensor([-0.5 * j for j in range(p - 1, -1, -1)], dtype=x.dtype, device=x.device)
    args = x.unsqueeze(-1) + shifts
    return args.lgamma().sum(-1) + p * (p - 1) * math.log(math.pi) / 4.0


def lerp(input, end, weight):
    """torch.lerp(input, end, weight): input + weight (end - input), as PyTorch computes it (from end when
    |weight| >= 1/2, so weight 1 gives end exactly); weight a number or a tensor."""
    _check_tensor(input, "lerp")
    _check_tensor(end, "lerp")
    if end.dtype is not input.dtype:
        raise RuntimeError(f"expected dtype {input.dtype.name} for `end` but got dtype {end.dtype.name}")
    diff = end - input
    if not isinstance(weight, Tensor):
        w = float(weight)
        return renamed(input + diff * w if abs(w) < 0.5 else end - diff * (1.0 - w), "Lerp")
    if weight.dtype is not input.dtype:
        raise RuntimeError(f"expected dtype {input.dtype.name} for `weight` but got dtype {weight.dtype.name}")
    return renamed(ew.where(weight.abs() < 0.5, input + diff * weight, end - diff * (1.0 - weight)), "Lerp")


def _clamp_bound(op):
    def fn(input, bound):
        _check_tensor(input, op)
        if not isinstance(bound, Tensor):
            return ew.clamp(input, min=bound) if op == "clamp_min" else ew.clamp(input, max=bound)
        # a tensor bound: the result as maximum/minimum (NaN from either side), the gradient as PyTorch's
        # clamp: ties go to the input
        x, m, _ = ew._promote_pair(input, bound, op)
        with no_grad():
            out = ew.maximum(x, m) if op == "clamp_min" else ew.minimum(x, m)
        if not out.dtype.is_floating:
            return out

        def backward(g):  # (a NaN input sends neither a gradient)
            keep, bound = ((x >= m), (x < m)) if op == "clamp_min" else ((x <= m), (x > m))
            zero = ew.full_scalar_like(g, 0.0)
            gx = unbroadcast(ew.where(keep, g, zero), x.shape) if x.requires_grad else None
            gm = unbroadcast(ew.where(bound, g, zero), m.shape) if m.requires_grad else None
            return gx, gm
        return record(out, "ClampMin" if op == "clamp_min" else "ClampMax", (x, m), backward)
    fn.__name__ = op
    fn.__doc__ = f"torch.{op}(input, bound): clamp on one side; the bound a number or a tensor."
    return fn


clamp_min = _clamp_bound("clamp_min")
clamp_max = _clamp_bound("clamp_max")


def rsub(input, other, alpha=1):
    """torch.rsub(input, other, alpha=1): other - alpha * input."""
    return ew.sub(other, input, alpha=alpha)


def renorm(input, p, dim, maxnorm):
    """torch.renorm(input, p, dim, maxnorm): each slice along `dim` whose p-norm exceeds maxnorm scaled down
    to it (by maxnorm / (norm + 1e-7), as PyTorch); the gradient through the norm, as PyTorch's."""
    from .._norm import norm
    _check_tensor(input, "renorm")
    if input.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    if not p > 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    d = dim + input.ndim if dim < 0 else dim
    if not 0 <= d < input.ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-input.ndim}, {input.ndim - 1}], "
                         f"but got {dim})")
    dims = tuple(i for i in range(input.ndim) if i != d)
    n = norm(input, p, dims, keepdim=True)
    factor = ew.where(n > maxnorm, maxnorm / (n + 1e-7), 1.0)
    return input * factor


def frexp(input):
    """torch.frexp(input): (mantissa, exponent) with input = mantissa * 2**exponent, |mantissa| in [0.5, 1)
    (0, inf and NaN keep their value with exponent 0); exponent int32; the mantissa's gradient g / 2**exponent."""
    _check_tensor(input, "frexp")
    if not input.dtype.is_floating:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    with no_grad():
        mantissa = ew.apply_unary(table.UNARY["frexp_mantissa"], input)
        exponent = ew.apply_unary(table.UNARY["frexp_exponent"], input)
    record(mantissa, "Frexp", (input,), lambda g: (g / exponent.exp2(),))
    return frexp_result(mantissa, cast(exponent, dtypes.int32))


def ldexp(input, other):
    """torch.ldexp(input, other): input * 2**other (a floating result)."""
    _check_tensor(input, "ldexp")
    _check_tensor(other, "ldexp")
    return ew.mul(input, ew.pow(2.0, other))


def float_power(input, exponent):
    """torch.float_power(input, exponent): pow in float64, whatever the operands' dtypes."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError("float_power(): one of the arguments must be a Tensor")
    x = cast(input, dtypes.float64) if isinstance(input, Tensor) else float(input)
    y = cast(exponent, dtypes.float64) if isinstance(exponent, Tensor) else float(exponent)
    return ew.pow(x, y)


def positive(input):
    """torch.positive(input): the input itself (not a copy), as PyTorch's."""
    _check_tensor(input, "positive")
    if input.dtype is dtypes.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def rdiv(self, other):  # Tensor.__rdiv__: other / self
    return ew.div(other, self)


def rmod(self, other):  # Tensor.__rmod__: other % self
    if not isinstance(other, Tensor):
        other = ew._scalar_operand(self, other, "remainder")
    return ew.remainder(other, self)
