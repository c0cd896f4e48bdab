"""Numerical reductions and calculus, as torch: aminmax, nansum, nanmean, trace, dist, diff, trapezoid, trapz,
cumulative_trapezoid, cov and corrcoef.

Each is a composition of reductions, slices and elementwise ops, so its gradient comes from the ops it is made
of and it runs on every backend.
"""

import math
import numbers
import warnings

from ..return_types import structseq
from .. import _norm, dtypes
from .._tensor import Tensor, _norm_dim, tensor
from .core import cast, check_same_device
from .elementwise import where
from .shape import cat, narrow
from . import reduce

aminmax_result = structseq("aminmax", ["min", "max"])  # torch.return_types.aminmax


def _check(input, op, name="input"):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(input).__name__}")


def aminmax(input, *, dim=None, keepdim=False):
    """(amin, amax) over `dim` (every element when None), as torch.aminmax; tied extremes share the gradient."""
    _check(input, "aminmax")
    if dim is None:
        if input.numel() == 0:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty tensor")
        x = input.reshape(-1)
        lo, hi = reduce.amin(x, 0), reduce.amax(x, 0)
        if keepdim:
            lo, hi = lo.reshape((1,) * input.ndim), hi.reshape((1,) * input.ndim)
        return aminmax_result(lo, hi)
    d = _norm_dim(dim, max(input.ndim, 1))
    if input.ndim and input.shape[d] == 0:
        raise IndexError(f"aminmax(): Expected reduction dim {d} to have non-zero size.")
    if input.numel() == 0:  # other dims empty: an empty result
        shape = list(input.shape)
        if keepdim:
            shape[d] = 1
        else:
            del shape[d]
        empty = input.reshape(-1)[:0].reshape(shape)
        return aminmax_result(empty, empty.clone())
    return aminmax_result(reduce.amin(input, d, keepdim), reduce.amax(input, d, keepdim))


def _nan_free(input):
    return where(input.isnan(), 0.0, input) if input.dtype.is_floating else input


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """sum with NaNs counted as zero (their gradient is zero), as torch.nansum."""
    _check(input, "nansum")
    return reduce.sum(_nan_free(input), dim, keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """mean over the elements that are not NaN (NaN where all are), as torch.nanmean."""
    _check(input, "nanmean")
    x = cast(input, dtypes.to_dtype(dtype)) if dtype is not None else input
    if not x.dtype.is_floating:
        raise RuntimeError(f"nanmean(): expected input to have floating point dtype but got {x.dtype.name}")
    count = reduce.sum(~x.isnan(), dim, keepdim)
    return reduce.sum(_nan_free(x), dim, keepdim) / count


def trace(input):
    """The sum of a matrix's diagonal (integers sum as int64), as torch.trace."""
    _check(input, "trace")
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return reduce.sum(input.diagonal())


def dist(input, other, p=2):
    """The p-norm of input - other (broadcast), as torch.dist."""
    _check(input, "dist")
    _check(other, "dist", "other")
    if isinstance(p, Tensor):
        p = p.item()
    diff = input - other
    if not diff.dtype.is_floating:
        raise RuntimeError(f"dist(): expected a floating point tensor, got {diff.dtype.name}")
    return _norm.norm(diff, float(p))


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along `dim` (prepend/append joined first), as torch.diff; bools give x[i+1] ^
    x[i]."""
    _check(input, "diff")
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = _norm_dim(dim, input.ndim)
    if n == 0:  # (prepend and append are not joined then, as torch's)
        return input
    parts = []
    for extra in (prepend, input, append):
        if extra is None:
            continue
        if not isinstance(extra, Tensor):
            extra = tensor(extra, dtype=input.dtype, device=input.device)
        if extra.ndim == 0:  # a scalar stands for a slice of size 1 along dim
            shape = list(input.shape)
            shape[d] = 1
            extra = extra.expand(*shape)
        parts.append(extra)
    x = cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        size = x.shape[d]
        if size == 0:
            break
        hi, lo = narrow(x, d, 1, size - 1), narrow(x, d, 0, size - 1)
        x = (hi != lo) if x.dtype is dtypes.bool_ else hi - lo
    return x


def _spacing(y, x, dx, d, op):
    """The widths of the trapezoids along dim d: from sample points x, or a constant dx (None: 1)."""
    if x is None:
        return 1.0 if dx is None else dx
    if dx is not None:
        raise RuntimeError(f"{op}: received both x and dx")
    if isinstance(x, numbers.Number):
        return x
    check_same_device(op, y, x)
    if x.ndim == 1:  # the sample points of dim d
        if x.shape[0] != y.shape[d]:
            raise RuntimeError(f"{op}: There must be one `x` value for each sample point")
        widths = diff(x)
        return widths.reshape((-1,) + (1,) * (y.ndim - 1 - d))
    return diff(x, dim=d - y.ndim)


def _heights(y, d):
    size = y.shape[d]
    return narrow(y, d, 1, size - 1) + narrow(y, d, 0, size - 1)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The integral of y along dim by the trapezoidal rule, over sample points x or a constant spacing dx, as
    torch.trapezoid."""
    _check(y, "trapezoid", "y")
    d = _norm_dim(dim, y.ndim)
    if y.shape[d] == 0:
        return reduce.sum(y, d) * 0.0
    widths = _spacing(y, x, dx, d, "trapezoid")
    if isinstance(widths, numbers.Number):  # factored out of the sum, as torch's
        return reduce.sum(_heights(y, d), d) * (widths / 2.0)
    return reduce.sum(_heights(y, d) * widths, d) / 2.0


def trapz(y, x=None, *, dx=None, dim=-1):
    """torch.trapz: trapezoid under its older name."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running integral of y along dim by the trapezoidal rule (one element fewer than y along dim), as
    torch.cumulative_trapezoid."""
    _check(y, "cumulative_trapezoid", "y")
    d = _norm_dim(dim, y.ndim)
    if y.shape[d] == 0:
        return y.clone()
    widths = _spacing(y, x, dx, d, "cumulative_trapezoid")
    if isinstance(widths, numbers.Number):
        return reduce.cumsum(_heights(y, d), d) * (widths / 2.0)
    return reduce.cumsum(_heights(y, d) * widths / 2.0, d)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """The derivative estimate of input along each dim (every dim when None): second-order central differences
    inside, one-sided differences of edge_order 1 or 2 at the ends, over unit spacing, a number per dim, or sample
    coordinates per dim, as torch.gradient (a tuple, one tensor per dim)."""
    _check(input, "gradient")
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    dims = tuple(range(input.ndim)) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    dims = tuple(_norm_dim(d, input.ndim) for d in dims)
    if spacing is None:
        spacing = 1
    spacings = list(spacing) if isinstance(spacing, (tuple, list)) else [spacing] * len(dims)
    if len(spacings) == 1 and len(dims) > 1:
        spacings = spacings * len(dims)
    if len(spacings) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or its length to match the "
                           f"number of dimensions ({len(dims)}), but got {len(spacings)}")
    x = input if input.dtype.is_floating else cast(input, dtypes.float32)
    return tuple(_gradient_along(x, d, h, edge_order) for d, h in zip(dims, spacings))


def _gradient_along(x, d, h, edge_order):
    n = x.shape[d]
    if n < edge_order + 1:
        raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")

    def part(start, length):
        return narrow(x, d, start, length)
    if not isinstance(h, Tensor):  # uniform spacing
        h = float(h)
        inner = (part(2, n - 2) - part(0, n - 2)) * (0.5 / h)
        if edge_order == 1:
            first = (part(1, 1) - part(0, 1)) * (1.0 / h)
            last = (part(n - 1, 1) - part(n - 2, 1)) * (1.0 / h)
        else:
            first = (part(0, 1) * -1.5 + part(1, 1) * 2.0 - part(2, 1) * 0.5) * (1.0 / h)
            last = (part(n - 3, 1) * 0.5 - part(n - 2, 1) * 2.0 + part(n - 1, 1) * 1.5) * (1.0 / h)
        return cat([first, inner, last], d)
    # sample coordinates along d: non-uniform differences (numpy's formulas, as torch's)
    if h.ndim != 1 or h.shape[0] != n:
        raise RuntimeError(f"torch.gradient expected each tensor to be on the same device and of length {n}")

    def along(t):  # a [k] coordinate difference broadcast along dim d
        return t.reshape((-1,) + (1,) * (x.ndim - 1 - d))
    dx = diff(h.to(x.dtype))
    a, b = along(dx[:-1]), along(dx[1:])  # the steps before and after each inner point
    inner = (part(2, n - 2) * (a * a) - part(0, n - 2) * (b * b) + part(1, n - 2) * (b * b - a * a)) / \
        (a * b * (a + b))
    d0, d1 = along(dx[:1]), along(dx[-1:])
    if edge_order == 1:
        first = (part(1, 1) - part(0, 1)) / d0
        last = (part(n - 1, 1) - part(n - 2, 1)) / d1
    else:
        h1, h2 = along(dx[:1]), along(dx[1:2])
        first = part(0, 1) * (-(2 * h1 + h2) / (h1 * (h1 + h2))) + part(1, 1) * ((h1 + h2) / (h1 * h2)) + \
            part(2, 1) * (-h1 / (h2 * (h1 + h2)))
        g1, g2 = along(dx[-2:-1]), along(dx[-1:])
        last = part(n - 3, 1) * (g2 / (g1 * (g1 + g2))) + part(n - 2, 1) * (-(g1 + g2) / (g1 * g2)) + \
            part(n - 1, 1) * ((2 * g2 + g1) / (g2 * (g1 + g2)))
    return cat([first, inner, last], d)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in input's rows (observations in its columns), with frequency and
    analytic weights, as torch.cov."""
    _check(input, "cov")
    if input.ndim > 2:
        raise ValueError(f"cov(): expected input to have two or fewer dimensions but got an input with {input.ndim} "
                         "dimensions")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.dtype.is_floating:
        x = cast(x, dtypes.float32)
    observations = x.shape[1]
    w = None
    if fweights is not None:
        if fweights.dtype.is_floating:
            raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with "
                               f"{fweights.dtype.name} dtype")
        if fweights.ndim > 1 or fweights.numel() != observations:
            raise RuntimeError(f"cov(): expected fweights to have one dimension and {observations} elements")
        w = cast(fweights, x.dtype)
    if aweights is not None:
        if not aweights.dtype.is_floating:
            raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got aweights with "
                               f"{aweights.dtype.name} dtype")
        if aweights.ndim > 1 or aweights.numel() != observations:
            raise RuntimeError(f"cov(): expected aweights to have one dimension and {observations} elements")
        w = aweights if w is None else w * aweights
    if w is None:
        avg = reduce.mean(x, 1)
        w_sum = float(observations)
        norm = w_sum - correction
    else:
        w_sum = reduce.sum(w)
        avg = reduce.sum(x * w, 1) / w_sum
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = w_sum - correction
        else:
            norm = w_sum - correction * reduce.sum(w * aweights) / w_sum
    if isinstance(norm, float):
        if norm <= 0:
            warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number "
                          "of observations.", stacklevel=2)
            norm = 0.0
    else:
        norm = where(norm <= 0, 0.0, norm)
    centred = x - avg.unsqueeze(1)
    weighted = centred if w is None else centred * w
    c = weighted.matmul(centred.t())
    c = c / norm if not isinstance(norm, float) or norm != 0 else c * math.inf
    return c.reshape(()) if input.ndim < 2 or x.shape[0] == 1 else c


def corrcoef(input):
    """Pearson's correlation coefficients of the variables in input's rows, clipped to [-1, 1], as
    torch.corrcoef."""
    _check(input, "corrcoef")
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = c.diagonal()
    std = d.sqrt()
    c = c / std.unsqueeze(1)
    c = c / std.unsqueeze(0)
    return c.clamp(-1.0, 1.0)
