"""torch.norm and Tensor.norm: vector p-norms composed from webgrad's ops, with torch's gradient.

The forward is sum(|x|^p)^(1/p) (and its special cases) computed without recording; the backward is
PyTorch's norm_backward, which a composition of sqrt, pow and abs would not give: it is 0 where a norm
is 0 (sqrt's derivative there is infinite) and it shares an inf-norm's gradient among tied maxima.
"""

import math

from . import dtypes
from ._autograd import no_grad, record
from ._svd import singular_norm


def _dims(x, dim):
    if dim is None:
        return tuple(range(x.ndim))
    if isinstance(dim, int):
        return (dim,)
    return tuple(dim)


def _order(p):
    if isinstance(p, str):
        if p == "fro":
            return 2.0
        raise ValueError(f"norm(): unknown norm type {p!r} (use a number, 'fro' or inf)")
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"norm(): p must be a number or 'fro', not {type(p).__name__}")
    return float(p)


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm(input, p='fro', dim=None, keepdim=False, dtype=None) for vector norms and the nuclear norm
    (webgrad.norm also takes out=)."""
    if p == "nuc":  # the sum of the singular values of the matrices over dim (the last two by default)
        x = input if dtype is None else input.to(dtypes.to_dtype(dtype))
        dims = (-2, -1) if dim is None else tuple(dim)
        if len(dims) != 2 or x.ndim < 2:
            raise RuntimeError(f"norm(p='nuc'): expected a matrix and two dims, got shape {list(x.shape)} and dim={dim}")
        return singular_norm(x, "nuc", dims[0] % x.ndim, dims[1] % x.ndim, keepdim)
    order = _order(p)
    x = input if dtype is None else input.to(dtypes.to_dtype(dtype))
    if not x.dtype.is_floating:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {x.dtype.name}")
    dims = _dims(x, dim) or tuple(range(x.ndim))  # dim=() means every dim, as dim=None
    with no_grad():
        a = x.abs()
        if order == 0:
            out = (a != 0).to(x.dtype).sum(dims, keepdim=keepdim)
        elif order == 1:
            out = a.sum(dims, keepdim=keepdim)
        elif order == 2:
            out = (x * x).sum(dims, keepdim=keepdim).sqrt()
        elif order == math.inf:
            out = a.amax(dims, keepdim=keepdim)
        elif order == -math.inf:
            out = a.amin(dims, keepdim=keepdim)
        else:
            out = (a ** order).sum(dims, keepdim=keepdim) ** (1.0 / order)

    def backward(g):
        n, g = out, g
        if not keepdim and x.ndim:  # put the reduced dims back, to broadcast against x
            for d in sorted(d % max(x.ndim, 1) for d in dims):
                n, g = n.unsqueeze(d), g.unsqueeze(d)
        if order == 0:
            return (None,)  # a count of non-zeros: no gradient reaches x, as in torch
        if order == 1:
            return (x.sign() * g,)
        if order == 2:
            return (x * (g / n.where(n != 0, 1.0)),)
        if math.isinf(order):
            tie = (x.abs() == n).to(x.dtype)
            return (x.sign() * tie * (g / tie.sum(dims, keepdim=True)),)
        scaled = x.sign() * x.abs() ** (order - 1)
        if order < 1:
            scaled = scaled.where(x != 0, 0.0)
        return (scaled * (g / (n ** (order - 1)).where(n != 0, 1.0)).where(n != 0, 0.0),)

    return record(out, "LinalgVectorNorm", (x,), backward)  # (torch.norm is linalg.vector_norm: PyTorch's name)
