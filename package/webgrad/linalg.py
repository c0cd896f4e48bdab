"""torch.linalg, the part without factorisations: vector_norm, matrix_norm, norm, vecdot, cross, diagonal,
multi_dot, matrix_power (n >= 0) and vander.

Each is a composition of webgrad's ops (norms through webgrad.norm's torch-exact gradient), so it runs on
every device. The matrix norms that need singular values (ord='nuc', 2, -2) compute them on the host with
one-sided Jacobi rotations (a read-back on WebGPU), and their gradient from the singular vectors, as torch's.
"""

import math

from . import _norm, dtypes
from ._svd import singular_norm
from ._tensor import _norm_dim, eye, ones_like
from .ops.matmul import matmul
from .ops.products import cross as _cross
from .ops.shape import diagonal as _diagonal, stack

__all__ = ["vector_norm", "matrix_norm", "norm", "vecdot", "cross", "diagonal", "multi_dot", "matrix_power",
           "vander"]


def _out(result, out):
    return result if out is None else out.copy_(result)


def _float_input(name, x, dtype):
    if dtype is not None:
        x = x.to(dtypes.to_dtype(dtype))
    if not x.dtype.is_floating:
        raise RuntimeError(f"linalg.{name}: Expected a floating point or complex tensor as input. Got {x.dtype.name}")
    return x


# ===================================================================== norms
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """The ord-norm of x over dim (every element when None): sum(|x|^ord)^(1/ord), with ord 0 (the count of
    non-zeros), inf and -inf (max and min of |x|)."""
    x = _float_input("vector_norm", x, dtype)
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    dims = tuple(range(x.ndim)) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    dims = tuple(_norm_dim(d, x.ndim) for d in dims) if x.ndim else ()
    if x.numel() == 0 and ord < 0 or (math.isinf(ord) and any(x.shape[d] == 0 for d in dims)):
        raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on an empty tensor because the "
                           "operation does not have an identity")
    return _out(_norm.norm(x, float(ord), dims if dims else None, keepdim), out)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """The matrix norm of A over the two dims: 'fro', 'nuc', inf / -inf (max / min row sum of |A|),
    1 / -1 (max / min column sum), 2 / -2 (largest / smallest singular value)."""
    A = _float_input("matrix_norm", A, dtype)
    dim = tuple(dim)
    if len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
    if A.ndim < 2:
        raise RuntimeError(f"linalg.matrix_norm: The input tensor A must have at least 2 dimensions, got {A.ndim}")
    d0, d1 = _norm_dim(dim[0], A.ndim), _norm_dim(dim[1], A.ndim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    if ord == "fro":
        return _out(_norm.norm(A, 2.0, (d0, d1), keepdim), out)
    if ord in ("nuc", 2, -2):
        return _out(singular_norm(A, ord, d0, d1, keepdim), out)
    if isinstance(ord, str) or ord not in (1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    # inf: sum over the columns (d1), then the max over rows (d0); 1: the other way round
    summed, picked = (d1, d0) if math.isinf(ord) else (d0, d1)
    if A.shape[picked] == 0:
        raise RuntimeError(f"linalg.matrix_norm cannot compute the {ord} norm on an empty tensor")
    sums = A.abs().sum(summed, keepdim=True)
    result = sums.amax(picked, keepdim=True) if ord > 0 else sums.amin(picked, keepdim=True)
    return _out(result if keepdim else result.squeeze((d0, d1)), out)


def norm(A, ord=None, dim=None, keepdim=False, *, out=None, dtype=None):
    """vector_norm or matrix_norm, as torch.linalg.norm chooses: by len(dim), else by A's dims when ord is
    given; without ord and dim, the 2-norm of all elements."""
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype, out=out)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype, out=out)
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype, out=out)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype, out=out)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype, out=out)
    raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {A.ndim}D.")


# ===================================================================== products and rearrangements
def vecdot(x, y, *, dim=-1, out=None):
    """The dot product of x and y along dim (broadcast against each other)."""
    return _out((x * y).sum(dim), out)


def cross(input, other, *, dim=-1, out=None):
    """The cross product of 3-vectors along dim (input and other broadcast)."""
    return _out(_cross(input, other, dim), out)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonal of the last two dims (a view), as torch.linalg.diagonal."""
    return _diagonal(A, offset, dim1, dim2)


def multi_dot(tensors, *, out=None):
    """The product of a chain of matrices (the first may be a vector, read as a row; the last a column)."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    first_vector, last_vector = tensors[0].ndim == 1, tensors[-1].ndim == 1
    if first_vector:
        tensors[0] = tensors[0].unsqueeze(0)
    if last_vector:
        tensors[-1] = tensors[-1].unsqueeze(1)
    for i, t in enumerate(tensors):
        if t.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    # the cheaper association of each step, left to right: a chain is short, its order matters little
    result = tensors[0]
    for t in tensors[1:]:
        result = matmul(result, t)
    if first_vector:
        result = result.squeeze(0)
    if last_vector:
        result = result.squeeze(-1)
    return _out(result, out)


def matrix_power(A, n, *, out=None):
    """A @ A @ ... (n times) for square matrices (batched), by repeated squaring; n = 0 gives the identity.
    Negative n needs the inverse, which webgrad does not compute."""
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{A.shape[-2] if A.ndim >= 2 else 1} by {A.shape[-1] if A.ndim else 1} matrices")
    if n < 0:
        raise NotImplementedError("linalg.matrix_power with a negative exponent needs the matrix inverse, which "
                                  "webgrad does not compute yet")
    if n == 0:
        identity = eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(*A.shape)
        return _out(identity + A * 0 if A.requires_grad else identity.clone(), out)
    result, square = None, A
    while n:
        if n & 1:
            result = square if result is None else matmul(result, square)
        n >>= 1
        if n:
            square = matmul(square, square)
    return _out(result, out)


def vander(x, *, N=None):
    """The Vandermonde matrix of x's last dim: columns x^0, x^1, ..., x^(N-1) (N = len(x) by default)."""
    x = x.reshape(1) if x.ndim == 0 else x
    N = x.shape[-1] if N is None else N
    if N <= 1:
        raise RuntimeError("N must be greater than 1.")
    columns = [ones_like(x), x]
    for _ in range(N - 2):
        columns.append(columns[-1] * x)
    return stack(columns, -1)

