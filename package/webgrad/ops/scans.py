"""Cumulative ops other than cumsum, as torch: cumprod, logcumsumexp, cummax and cummin, each one scan kernel along
the dim (kernels.scan), with PyTorch's gradients: cumprod's exact with zeros, logcumsumexp's through log-space sums
of the gradient's positive and negative parts, and cummax/cummin's to the positions their indices name.
"""

from ..return_types import structseq
from .. import dtypes
from .._autograd import no_grad, record
from .._tensor import Tensor, _norm_dim, full
from .core import cast, new
from .elementwise import where
from .reduce import _layout, cumsum
from .._backends import kernels

cummax_result = structseq("cummax", ["values", "indices"])  # torch.return_types.cummax
cummin_result = structseq("cummin", ["values", "indices"])

_LOWEST = -3.4028234663852886e38  # float32's lowest: log(0) of the gradient's parts, as torch's


def _check(input, op):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")


def _scan(op, x, d, with_indices=False):
    """kernels.scan of op over dim d of x: (values, indices or None)."""
    v = _layout(x, (d,))
    values = new(tuple(x.shape), x.dtype, x.device)
    indices = new(tuple(x.shape), dtypes.int64, x.device) if with_indices else None
    if x.numel():
        kernels.scan(x.device.backend, op, values._view.reshaped(v.shape), v,
                     indices._view.reshaped(v.shape) if with_indices else None)
    return values, indices


def _reversed_cumsum(t, d):
    return cumsum(t.flip(d), d).flip(d)


def cumprod(input, dim, *, dtype=None):
    """The running products of input along dim, as torch.cumprod (integers and bools multiply in int64)."""
    _check(input, "cumprod")
    x = input
    if dtype is not None:
        x = cast(x, dtypes.to_dtype(dtype))
    elif not x.dtype.is_floating:
        x = cast(x, dtypes.int64)
    if x.ndim == 0:
        _norm_dim(dim, 1)
        return x.clone()
    d = _norm_dim(dim, x.ndim)
    if x.dtype is dtypes.float16:  # (multiplied in float32 and rounded once)
        return cast(cumprod(cast(x, dtypes.float32), d), dtypes.float16)
    if not x.dtype.is_floating and x.device.type != "cpu":
        raise NotImplementedError(f"cumprod of {x.dtype.name} on {x.device.type}: integer running products need 64-bit "
                                  "integers, which only the CPU device holds; compute it on the CPU or in float32")
    out, _ = _scan("prod", x, d)
    if not x.dtype.is_floating:
        return out

    def backward(g):
        # d out_j / d x_k = prod_{i <= j, i != k} x_i (j >= k). Before a slice's first zero that is out_j / x_k;
        # at the first zero it is the running product with that zero taken as 1; after it, 0.
        with no_grad():
            zero = x == 0
            zeros_so_far = cumsum(zero, d)
            before = zeros_so_far == 0
            first_zero = zero & (zeros_so_far == 1)
            grad = _reversed_cumsum(where(before, g * out, 0.0), d) / where(before, x, 1.0)
            grad = where(before, grad, 0.0)
            lifted, _ = _scan("prod", where(first_zero, 1.0, x), d)  # (no read-back to ask whether a zero is there)
            grad = where(first_zero, _reversed_cumsum(where(zeros_so_far >= 1, g * lifted, 0.0), d), grad)
        return (grad,)
    return record(out, "Cumprod", (x,), backward)


def logcumsumexp(input, dim):
    """log(cumsum(exp(input))) along dim, computed stably (a log-add-exp scan), as torch.logcumsumexp."""
    _check(input, "logcumsumexp")
    x = input if input.dtype.is_floating else cast(input, dtypes.float32)
    if x.ndim == 0:
        _norm_dim(dim, 1)
        return x.clone()
    d = _norm_dim(dim, x.ndim)
    out, _ = _scan("logaddexp", x, d)

    def backward(g):
        # torch's: the gradient's positive and negative parts summed in log space from the end (the same formula,
        # so that float32 rounds alike where it cancels: inputs of 1e4 lose digits in both)
        def reverse_lse(t):
            return _scan("logaddexp", t.flip(d).contiguous(), d)[0].flip(d)
        with no_grad():
            log_abs = g.abs().log()
            positive = where(g > 0, log_abs, _LOWEST)
            negative = where(g < 0, log_abs, _LOWEST)
            grad = (reverse_lse(positive - out) + x).exp() - (reverse_lse(negative - out) + x).exp()
        return (grad,)
    return record(out, "Logcumsumexp", (x,), backward)


def _extreme(op, result):
    def fn(input, dim):
        _check(input, "cum" + op)
        if input.ndim == 0:
            _norm_dim(dim, 1)
            return result(input.clone(), full((), 0, dtype=dtypes.int64, device=input.device))
        d = _norm_dim(dim, input.ndim)
        x = input if input.dtype in (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64) else \
            cast(input, dtypes.float32 if input.dtype.is_floating else dtypes.int32)
        values, indices = _scan(op, x, d, with_indices=True)
        if x.dtype is not input.dtype:
            values = cast(values, input.dtype)
        elif input.dtype.is_floating:
            def backward(g):  # each position's gradient goes to the element it took its value from
                from .scatter import scatter_add
                return (scatter_add(g.new_zeros(tuple(g.shape)), d, indices, g),)
            record(values, "Cum" + op, (input,), backward)
        return result(values, indices)
    fn.__name__ = "cum" + op
    fn.__doc__ = (f"The running {op}imum of input along dim and the index it was taken from (the latest on ties; "
                  f"NaN propagates), as torch.cum{op}.")
    return fn


cummax = _extreme("max", cummax_result)
cummin = _extreme("min", cummin_result)
