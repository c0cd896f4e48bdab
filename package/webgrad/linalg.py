"""torch.linalg: norms and products (vector_norm, matrix_norm, norm, vecdot, cross, diagonal, multi_dot,
matrix_power, vander) and the dense solvers and factorizations (LU, Cholesky, triangular solves, QR, symmetric
eigen-decomposition, SVD and what is built from them: inv, det, slogdet, solve, lstsq, pinv, matrix_rank, cond,
matrix_exp, ...).

The norms and products are compositions of webgrad's ops. The factorizations are device kernels
(_backends/kernels.py: lu_factor, lu_permutation, cholesky, triangular_solve, qr, eigh, svd); everything else
is composed from them and the ordinary ops. Gradients are PyTorch's formulas (FunctionsManual.cpp), written
with webgrad's ops; an op with several differentiable outputs records one node over their packed values.
The matrix norms that need singular values (ord='nuc', 2, -2) compute them on the host (_svd.py). Errors
follow torch: a singular or indefinite matrix raises LinAlgError (a RuntimeError) from the variants without
_ex, after one read-back of the factorization's info, as torch syncs there too.
"""

import math

from .return_types import structseq
from . import _norm, dtypes
from ._autograd import is_grad_enabled, no_grad, record
from ._backends import kernels
from ._svd import singular_norm
from ._tensor import _norm_dim, arange, eye, ones_like, zeros
from .ops.core import new
from .ops.elementwise import where
from .ops.matmul import matmul
from .ops.movement import diag_embed
from .ops.products import cross as _cross
from .ops.shape import cat, stack
from .ops.shape import diagonal as _diagonal

__all__ = [
    "LinAlgError",
    "cholesky",
    "cholesky_ex",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eigh",
    "eigvalsh",
    "householder_product",
    "inv",
    "inv_ex",
    "logdet",
    "lstsq",
    "lu",
    "lu_factor",
    "lu_factor_ex",
    "lu_solve",
    "lu_unpack",
    "matrix_exp",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_ex",
    "solve_triangular",
    "svd",
    "svdvals",
    "tensorinv",
    "tensorsolve",
    "vander",
    "vecdot",
    "vector_norm",
]


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
    """A @ A @ ... (n times) for square matrices (batched), by repeated squaring; n = 0 gives the identity,
    a negative n the power of A's inverse."""
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{A.shape[-2] if A.ndim >= 2 else 1} by {A.shape[-1] if A.ndim else 1} matrices")
    if n < 0:
        A, n = inv(A), -n
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



# ===================================================================== solvers and factorizations
class LinAlgError(RuntimeError):
    """torch.linalg.LinAlgError: the matrix is singular, or not positive-definite, where an op needs it to be."""


LUFactor = structseq("linalg_lu_factor", ["LU", "pivots"])
LUFactorEx = structseq("linalg_lu_factor_ex", ["LU", "pivots", "info"])
PLU = structseq("linalg_lu", ["P", "L", "U"])
LUUnpack = structseq("lu_unpack", ["P", "L", "U"])
InvEx = structseq("linalg_inv_ex", ["inverse", "info"])
SolveEx = structseq("linalg_solve_ex", ["result", "info"])
SignLogAbsDet = structseq("linalg_slogdet", ["sign", "logabsdet"])
CholeskyEx = structseq("linalg_cholesky_ex", ["L", "info"])
QR = structseq("linalg_qr", ["Q", "R"])
Eigh = structseq("linalg_eigh", ["eigenvalues", "eigenvectors"])
SVD = structseq("linalg_svd", ["U", "S", "Vh"])
Lstsq = structseq("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])


def _outs(result, out):
    """Copy a tuple result into the tensors of `out` (a tuple), as torch's out= of several results."""
    if out is None:
        return result
    for o, r in zip(out, result):
        o.copy_(r)
    return type(result)(*out)


def _check_matrix(name, A, square=True, what="A"):
    if not A.dtype.is_floating:
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got {_torch_name(A.dtype)}")
    if A.dtype in (dtypes.float16, dtypes.bfloat16):
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {_torch_name(A.dtype)}")
    if A.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor {what} must have at least 2 dimensions.")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{name}: {what} must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")


def _torch_name(dtype):
    return {"int64": "Long", "int32": "Int", "uint8": "Byte", "bool": "Bool", "float16": "Half",
            "bfloat16": "BFloat16"}.get(
        dtype.name, dtype.name.capitalize())


def _flat(A):
    """A's matrices as one contiguous [batch, m, n] tensor, detached (the ops record their own gradients)."""
    return A.detach().reshape(math.prod(A.shape[:-2]), *A.shape[-2:]).contiguous()


def _run(kernel, A, shapes_dtypes, *extra):
    """Run a factorization kernel on A's matrices: outputs of the given (shape after the batch, dtype or None
    for A's), each [batch, ...]; an empty batch or matrix runs nothing (the outputs are zeros)."""
    batch = tuple(A.shape[:-2])
    flat = _flat(A)
    outs = [new((flat.shape[0],) + tuple(shape), dtype or A.dtype, A.device) for shape, dtype in shapes_dtypes]
    if flat.numel():
        kernel(A.device.backend, *[o._view for o in outs], flat._view, *[e._view for e in extra])
    else:
        for o in outs:
            o.zero_()
    return [o.reshape(batch + tuple(shape)) for o, (shape, _) in zip(outs, shapes_dtypes)]


def _record_many(name, inputs, outputs, backward):
    """Record one node for several differentiable outputs: they are packed into one flat tensor, and
    backward(*grads) receives one gradient per output (zeros for the outputs nothing used)."""
    if not is_grad_enabled() or not any(getattr(t, "requires_grad", False) for t in inputs):
        return outputs
    sizes = [o.numel() for o in outputs]
    packed = cat([o.reshape(-1) for o in outputs])

    def unpack(flat):
        parts, at = [], 0
        for o, size in zip(outputs, sizes):
            parts.append(flat[at:at + size].reshape(o.shape))
            at += size
        return parts
    record(packed, name, inputs, lambda g: backward(*unpack(g)))
    return unpack(packed)


def _raise_info(name, info, message):
    """Raise LinAlgError naming the first failed matrix, if any (one read-back, as torch's check)."""
    codes = info.reshape(-1).tolist()
    for b, code in enumerate(codes):
        if code:
            where_ = f"(Batch element {b}): " if info.ndim else ""
            raise LinAlgError(f"{name}: {where_}{message.format(code)}")


def _mH(x):
    return x.mT


def _eye_like(A, n=None):
    n = A.shape[-1] if n is None else n
    return eye(n, dtype=A.dtype, device=A.device)


def _sum_to(g, shape):
    return g if tuple(g.shape) == tuple(shape) else g.sum_to_size(*shape)


def _broadcast_batch(*shapes):
    from .ops.elementwise import broadcast_shapes
    return tuple(broadcast_shapes(*shapes))


# ----------------------------------------------------------------------------- triangular solves
def _solve_triangular_left(A, B, upper, unitriangular):
    """A^-1 B for triangular A [..., n, n] and B [..., n, k] (batch dims broadcast), no autograd."""
    batch = _broadcast_batch(A.shape[:-2], B.shape[:-2])
    n, k = B.shape[-2], B.shape[-1]
    a = A.detach().expand(*batch, n, n)
    b = B.detach().expand(*batch, n, k)
    (x,) = _run(lambda backend, xv, av, bv: kernels.triangular_solve(backend, xv, av, bv, upper, unitriangular),
                a, [((n, k), B.dtype)], _flat(b))
    return x


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """X with A X = B (left) or X A = B (right) for triangular A (only its upper or lower triangle read, its
    diagonal taken as ones when unitriangular); batch dims broadcast, as torch.linalg.solve_triangular."""
    _check_matrix("linalg.solve_triangular", A)
    _check_matrix("linalg.solve_triangular", B, square=False, what="B")
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({A.shape[-2]}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    if A.dtype is not B.dtype:
        raise RuntimeError(f"linalg.solve_triangular: Expected A and B to have the same dtype, but found A of type "
                           f"{_torch_name(A.dtype)} and B of type {_torch_name(B.dtype)} instead")
    if left:
        X = _solve_triangular_left(A, B, upper, unitriangular)
    else:  # X A = B  <=>  A^T X^T = B^T
        X = _solve_triangular_left(A.mT, B.mT, not upper, unitriangular).mT.contiguous()

    def backward(g):
        gB = solve_triangular(_mH(A), g, upper=not upper, left=left, unitriangular=unitriangular)
        gA = -matmul(gB, _mH(X)) if left else -matmul(_mH(X), gB)
        gA = gA.triu(1 if unitriangular else 0) if upper else gA.tril(-1 if unitriangular else 0)
        return _sum_to(gA, A.shape), _sum_to(gB, B.shape)
    return _out(record(X, "LinalgSolveTriangular", (A, B), backward), out)


def _triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """torch.triangular_solve (deprecated there): (A^-1 b or A^-T b, a copy of A)."""
    X = solve_triangular(A.mT if transpose else A, b, upper=upper != transpose, unitriangular=unitriangular)
    return _outs(structseq("triangular_solve", ["solution", "cloned_coefficient"])(X, A.clone()), out)


# ----------------------------------------------------------------------------- LU
def _lu_raw(A):
    m, n = A.shape[-2:]
    return _run(kernels.lu_factor, A, [((m, n), None), ((min(m, n),), dtypes.int32), ((), dtypes.int32)])


def _permutation(pivots, m):
    """The permutation matrices P (A = P L U) of LAPACK pivots [..., k], as float one-hots."""
    batch = tuple(pivots.shape[:-1])
    flat = pivots.detach().reshape(math.prod(batch), pivots.shape[-1]).to(dtypes.int32).contiguous()
    perm = new((flat.shape[0], m), dtypes.int32, pivots.device)
    if perm.numel():
        kernels.lu_permutation(pivots.device.backend, perm._view, flat._view)
    return perm.reshape(batch + (m,))


def _perm_matrix(perm, dtype):
    m = perm.shape[-1]
    rows = arange(m, device=perm.device).to(dtypes.int32).reshape(m, 1)
    return (perm.unsqueeze(-2) == rows).to(dtype)  # P[perm[j], j] = 1


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """The packed LU factorization with partial pivoting (LU: L below the diagonal, U on and above it;
    pivots: LAPACK's, 1-based int32) and info (0, or the 1-based index of a zero pivot)."""
    _check_matrix("linalg.lu_factor_ex", A, square=False)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    LU, pivots, info = _lu_raw(A)
    if check_errors:
        _raise_info("torch.linalg.lu_factor_ex", info, "U[{0},{0}] is zero and using it on lu_solve would result "
                    "in a division by zero.")
    m, n = A.shape[-2:]
    k = min(m, n)

    def backward(g):
        P, L, U = lu_unpack(LU, pivots)
        return (_lu_backward(g[..., :, :k].tril(-1), g[..., :k, :].triu(), P, L, U),)
    LU = record(LU, "LinalgLuFactorEx", (A,), backward)
    return _outs(LUFactorEx(LU, pivots, info), out)


def lu_factor(A, *, pivot=True, out=None):
    """(LU, pivots) of lu_factor_ex; a zero pivot raises, as torch's."""
    LU, pivots, info = lu_factor_ex(A, pivot=pivot)
    _raise_info("torch.linalg.lu_factor", info, "U[{0},{0}] is zero and using it on lu_solve would result in a "
                "division by zero. If you still want to perform the factorization, consider calling "
                "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
    return _outs(LUFactor(LU, pivots), out)


def _lu_backward(gL, gU, P, L, U):
    """torch's linalg_lu_backward: the gradient of A = P L U from those of L (strictly lower) and U."""
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    if m == n:
        gA = matmul(_mH(L), gL).tril(-1) + matmul(gU, _mH(U)).triu()
        gA = solve_triangular(_mH(U), gA, upper=False, left=False)
        gA = solve_triangular(_mH(L), gA, upper=True, unitriangular=True)
    elif m < n:
        U1 = U[..., :, :k]
        gA = matmul(_mH(L), gL) - matmul(gU.triu(), _mH(U))
        gA = solve_triangular(_mH(U1), gA.tril(-1), upper=False, left=False)
        gA = cat([gA + gU[..., :, :k].triu(), gU[..., :, k:]], -1)
        gA = solve_triangular(_mH(L), gA, upper=True, unitriangular=True)
    else:
        L1 = L[..., :k, :]
        gA = matmul(gU, _mH(U)) - matmul(_mH(L), gL.tril(-1))
        gA = solve_triangular(_mH(L1), gA.triu(), upper=True, left=True, unitriangular=True)
        gA = cat([gA + gL[..., :k, :].tril(-1), gL[..., k:, :]], -2)
        gA = solve_triangular(_mH(U), gA, upper=False, left=False)
    return matmul(P, gA)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """(P, L, U) from lu_factor's packed result: A = P L U, L [m, k] unit lower, U [k, n] upper."""
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    if unpack_data:
        L = LU_data[..., :, :k].tril(-1) + eye(m, k, dtype=LU_data.dtype, device=LU_data.device)
        U = LU_data[..., :k, :].triu()
    else:
        L = U = zeros(0, dtype=LU_data.dtype, device=LU_data.device)
    P = _perm_matrix(_permutation(LU_pivots, m), LU_data.dtype) if unpack_pivots else \
        zeros(0, dtype=LU_data.dtype, device=LU_data.device)
    return _outs(LUUnpack(P, L, U), out)


def lu(A, *, pivot=True, out=None):
    """(P, L, U) with A = P L U, as torch.linalg.lu."""
    _check_matrix("linalg.lu", A, square=False)
    LU, pivots, _ = lu_factor_ex(A, pivot=pivot)
    return _outs(PLU(*lu_unpack(LU, pivots)), out)


def _apply_perm(perm, B, transpose):
    """P^T B (transpose) or P B for the permutation perm [..., m] (P[perm[j], j] = 1)."""
    P = _perm_matrix(perm, B.dtype)
    return matmul(P.mT if transpose else P, B)


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """X with A X = B (left) or X A = B, A (or A^H when adjoint) given by lu_factor's (LU, pivots)."""
    _check_matrix("linalg.lu_solve", LU, what="LU")
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    perm = _permutation(pivots, n)
    L = dict(upper=False, unitriangular=True)
    U = dict(upper=True)
    if left and not adjoint:  # U^-1 L^-1 P^T B
        X = solve_triangular(LU, solve_triangular(LU, _apply_perm(perm, B, True), **L), **U)
    elif left:  # A^H X = B: P L^-H U^-H B
        Y = solve_triangular(_mH(LU), B, upper=False)
        X = _apply_perm(perm, solve_triangular(_mH(LU), Y, upper=True, unitriangular=True), False)
    elif not adjoint:  # X P L U = B: X = B U^-1 L^-1 P^T
        Y = solve_triangular(LU, solve_triangular(LU, B, left=False, **U), left=False, **L)
        X = _apply_perm(perm, Y.mT, False).mT
    else:  # X U^H L^H P^T = B: X = B P L^-H U^-H
        Y = _apply_perm(perm, B.mT, True).mT
        X = solve_triangular(_mH(LU), solve_triangular(_mH(LU), Y, upper=True, left=False, unitriangular=True),
                             upper=False, left=False)
    return _out(X, out)


def _lu_solve_detached(LU, pivots, B, left=True, adjoint=False):
    with no_grad():
        return lu_solve(LU, pivots, B, left=left, adjoint=adjoint)


def inv_ex(A, *, check_errors=False, out=None):
    """(A^-1, info) for square A (batched); info is lu_factor's (a singular A gives inf / nan)."""
    _check_matrix("linalg.inv_ex", A)
    LU, pivots, info = _lu_raw(A)
    if check_errors:
        _raise_info("linalg.inv", info, "The diagonal element {0} is zero, the inversion could not be completed "
                    "because the input matrix is singular.")
    X = _lu_solve_detached(LU, pivots, _eye_like(A).expand(*A.shape))
    X = record(X, "LinalgInvEx", (A,), lambda g: (-matmul(_mH(X), matmul(g, _mH(X))),))
    return _outs(InvEx(X, info), out)


def inv(A, *, out=None):
    """A^-1 for square A (batched); a singular A raises LinAlgError, as torch.linalg.inv."""
    _check_matrix("linalg.inv", A)
    return _out(inv_ex(A, check_errors=True).inverse, out)


def _vector_rhs(A, B):
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """(X, info) with A X = B (left) or X A = B for square A; B a matrix, or a vector (B.ndim == 1, or A's shape
    without its last dim), batch dims broadcast."""
    _check_matrix("linalg.solve", A)
    vector = left and _vector_rhs(A, B)
    Bm = B.unsqueeze(-1) if vector else B
    n = A.shape[-1]
    if Bm.ndim < 2 or (Bm.shape[-2] if left else Bm.shape[-1]) != n:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and "
                           f"{'x'.join(map(str, B.shape[-2:]))})")
    LU, pivots, info = _lu_raw(A)
    if check_errors:
        _raise_info("torch.linalg.solve", info, "The solver failed because the input matrix is singular.")
    X = _lu_solve_detached(LU, pivots, Bm.detach(), left=left)

    def backward(g):
        gB = _lu_solve_detached(LU, pivots, g, left=left, adjoint=True)
        gA = -matmul(gB, _mH(X)) if left else -matmul(_mH(X), gB)
        return _sum_to(gA, A.shape), _sum_to(gB.squeeze(-1) if vector else gB, B.shape)
    X = record(X, "LinalgSolveEx", (A, B), backward)
    return _outs(SolveEx(X.squeeze(-1) if vector else X, info), out)


def solve(A, B, *, left=True, out=None):
    """X with A X = B (left) or X A = B; a singular A raises LinAlgError."""
    X, info = solve_ex(A, B, left=left)
    _raise_info("torch.linalg.solve", info, "The solver failed because the input matrix is singular.")
    return _out(X, out)


def _det_parts(A):
    """(LU, pivots, the permutation's sign) of square A."""
    LU, pivots, _ = _lu_raw(A)
    n = A.shape[-1]
    swaps = (pivots != arange(1, n + 1, device=A.device).to(dtypes.int32)).to(dtypes.int32).sum(-1)
    return LU, pivots, 1 - 2 * (swaps % 2).to(A.dtype)


def det(A, *, out=None):
    """The determinant of square A (batched): the product of U's diagonal and the permutation's sign. Its
    gradient is det A^-H, or the singular values' product rule where A is (near) singular, as torch's."""
    _check_matrix("linalg.det", A)
    LU, pivots, sign = _det_parts(A)
    d = LU.diagonal(0, -2, -1).prod(-1) * sign

    def backward(g):
        n = A.shape[-1]
        if A.numel() == 0:
            return (A.new_zeros(A.shape),)
        if n == 1:
            return (g.reshape(*g.shape, 1, 1).expand(*A.shape),)
        scale = diag_embed((g * d).unsqueeze(-1).expand(*d.shape, n))
        singular = d.abs() < 100.0 * _eps(A.dtype)
        flags = singular.reshape(-1).tolist()
        if not any(flags):
            return (_lu_solve_detached(LU, pivots, scale, adjoint=True),)
        mask = singular.reshape(*singular.shape, 1, 1)
        identity = _eye_like(A).expand(*A.shape)
        distinct = diag_embed(arange(1, n + 1, dtype=A.dtype, device=A.device).expand(*A.shape[:-1]))
        U, S, Vh = svd(where(mask, A.detach(), distinct))
        alpha = det(U) * det(Vh) * g
        D = _prod_others(S) * alpha.unsqueeze(-1)
        g_singular = matmul(U * D.unsqueeze(-2), Vh)
        if all(flags):
            return (g_singular,)
        g_regular = inv(where(mask, identity, A.detach())).mT * (g * d).reshape(*d.shape, 1, 1)
        return (where(mask, g_singular, g_regular),)
    return _out(record(d, "LinalgDet", (A,), backward), out)


def _prod_others(S):
    """prod_{j != i} S_j for each i along the last dim (no division: zeros allowed)."""
    ones = S[..., :1] * 0 + 1
    before = cat([ones, S[..., :-1].cumprod(-1)], -1)  # prod_{j < i}
    after = cat([ones, S.flip(-1)[..., :-1].cumprod(-1)], -1).flip(-1)  # prod_{j > i}
    return before * after


def _eps(dtype):
    return 2.220446049250313e-16 if dtype is dtypes.float64 else 1.1920928955078125e-07


def slogdet(A, *, out=None):
    """(sign, log|det A|) of square A (batched): sign 0 and -inf for a singular A."""
    _check_matrix("linalg.slogdet", A)
    LU, pivots, perm_sign = _det_parts(A)
    diag = LU.diagonal(0, -2, -1)
    sign = diag.sign().prod(-1) * perm_sign
    logabsdet = diag.abs().log().sum(-1)
    n = A.shape[-1]

    def backward(g):
        return (_lu_solve_detached(LU, pivots, diag_embed(g.unsqueeze(-1).expand(*g.shape, n)), adjoint=True),)
    sign, logabsdet = _record_many("LinalgSlogdet", (A,), [sign, logabsdet], lambda gsign, g: backward(g))
    return _outs(SignLogAbsDet(sign, logabsdet), out)


def logdet(A, *, out=None):
    """log det A: nan where det A < 0, -inf where it is 0."""
    _check_matrix("logdet", A)
    sign, logabsdet = slogdet(A)
    return _out(where(sign < 0, math.nan, logabsdet), out)


# ----------------------------------------------------------------------------- Cholesky
def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """(L, info): A = L L^H for symmetric positive-definite A (its lower triangle read), or A = U^H U with
    upper=True; info 0, or the order of the first leading minor that is not positive-definite."""
    _check_matrix("linalg.cholesky", A)
    n = A.shape[-1]
    L, info = _run(kernels.cholesky, A, [((n, n), None), ((), dtypes.int32)])
    if check_errors:
        _raise_info("linalg.cholesky", info, "The factorization could not be completed because the input is not "
                    "positive-definite (the leading minor of order {0} is not positive-definite).")

    def backward(g):  # torch's cholesky_backward, for the lower factor
        gL = g.mT if upper else g
        gA = matmul(_mH(L), gL).tril()
        gA = (gA + gA.tril(-1).mT) * 0.5
        gA = solve_triangular(_mH(L), gA, upper=True)
        return (solve_triangular(L, gA, upper=False, left=False),)
    result = L.mT.contiguous() if upper else L
    result = record(result, "LinalgCholeskyEx", (A,), backward)
    return _outs(CholeskyEx(result, info), out)


def cholesky(A, *, upper=False, out=None):
    """The Cholesky factor of symmetric positive-definite A; raises LinAlgError where A is not."""
    L, info = cholesky_ex(A, upper=upper)
    _raise_info("linalg.cholesky", info, "The factorization could not be completed because the input is not "
                "positive-definite (the leading minor of order {0} is not positive-definite).")
    return _out(L, out)


def _cholesky(A, upper=False, *, out=None):
    """torch.cholesky (deprecated there)."""
    return cholesky(A, upper=upper, out=out)


def _cholesky_solve_plain(B, L, upper):
    if upper:  # A = U^H U
        return solve_triangular(L, solve_triangular(_mH(L), B, upper=False), upper=True)
    return solve_triangular(_mH(L), solve_triangular(L, B, upper=False), upper=True)


def cholesky_solve(B, L, upper=False, *, out=None):
    """X with A X = B for A = L L^H (U^H U when upper) given by its Cholesky factor, as torch.cholesky_solve."""
    _check_matrix("cholesky_solve", L, what="input2")
    with no_grad():
        X = _cholesky_solve_plain(B, L, upper)

    def backward(g):  # torch's cholesky_solve_backward
        gB = cholesky_solve(g, L, upper)
        common = matmul(gB, _mH(X))
        common = common + _mH(common)
        gL = -matmul(L, common) if upper else -matmul(common, L)
        return _sum_to(gB, B.shape), _sum_to(gL, L.shape)
    return _out(record(X, "CholeskySolve", (B, L), backward), out)


def cholesky_inverse(L, upper=False, *, out=None):
    """(L L^H)^-1 (or (U^H U)^-1) from a Cholesky factor, as torch.cholesky_inverse."""
    _check_matrix("cholesky_inverse", L)
    with no_grad():
        X = _cholesky_solve_plain(_eye_like(L).expand(*L.shape), L, upper)

    def backward(g):  # torch's cholesky_inverse_backward
        common = matmul(X, matmul(g + _mH(g), X))
        return (-matmul(L, common) if upper else -matmul(common, L),)
    return _out(record(X, "CholeskyInverse", (L,), backward), out)


# ----------------------------------------------------------------------------- QR, eigh, SVD
def qr(A, mode="reduced", *, out=None):
    """(Q, R) with A = Q R, Q with orthonormal columns and R upper triangular (Householder, LAPACK's signs).
    mode: 'reduced' (Q [m, k], R [k, n]), 'complete' (Q [m, m], R [m, n]) or 'r' (R only, Q empty)."""
    _check_matrix("linalg.qr", A, square=False)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           "or 'complete'")
    m, n = A.shape[-2:]
    c = m if mode == "complete" else min(m, n)
    Q, R = _run(kernels.qr, A, [((m, c), None), ((c, n), None)])
    if A.numel() == 0 and Q.numel():  # (no reflectors: Q is the identity, as LAPACK's)
        Q = eye(m, c, dtype=A.dtype, device=A.device).expand(*Q.shape).contiguous()
    if mode == "r":
        def backward_r(g):
            raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
                               "Please use linalg.qr(A, mode='reduced') if you are going to differentiate through "
                               "linalg.qr.")
        return _outs(QR(zeros(0, dtype=A.dtype, device=A.device), record(R, "LinalgQr", (A,), backward_r)), out)

    def backward(gQ, gR):  # torch's linalg_qr_backward
        if mode == "complete" and m > n:
            raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
        gA = matmul(gR, _mH(R)) - matmul(_mH(Q), gQ)
        if m >= n:
            sym = gA.triu()
            sym = sym + _mH(sym)
            sym = sym - diag_embed(sym.diagonal(0, -2, -1) * 0.5)
            return (solve_triangular(_mH(R), matmul(Q, sym) + gQ, upper=False, left=False),)
        X = -gA
        skew = (X - _mH(X)).tril()
        gA = solve_triangular(_mH(R[..., :, :m]), matmul(Q, skew), upper=False, left=False)
        gA = cat([gA, gA.new_zeros(tuple(R.shape[:-1]) + (n - m,))], -1)
        return (gA + matmul(Q, gR),)
    return _outs(QR(*_record_many("LinalgQr", (A,), [Q, R], backward)), out)


def _qr_torch(input, some=True, *, out=None):
    """torch.qr (deprecated there): some=False is mode='complete'."""
    return _outs(structseq("qr", ["Q", "R"])(*qr(input, "reduced" if some else "complete")), out)


def eigh(A, UPLO="L", *, out=None):
    """(eigenvalues ascending, eigenvectors as columns) of symmetric A, of its lower (UPLO='L') or upper
    triangle; each eigenvector's sign is the backend's (LAPACK's on the CPU)."""
    _check_matrix("linalg.eigh", A)
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    n = A.shape[-1]
    L, V = _run(lambda backend, lv, vv, av: kernels.eigh(backend, lv, vv, av, UPLO == "U"), A,
                [((n,), None), ((n, n), None)])

    def backward(gL, gV):  # torch's linalg_eig_backward, hermitian
        VhgV = matmul(_mH(V), gV)
        VhgV = (VhgV - _mH(VhgV)) * 0.5
        E = L.unsqueeze(-2) - L.unsqueeze(-1) + diag_embed(ones_like(L))
        gA = VhgV / E
        gA = gA - diag_embed(gA.diagonal(0, -2, -1)) + diag_embed(gL)
        return (matmul(V, matmul(gA, _mH(V))),)
    return _outs(Eigh(*_record_many("LinalgEigh", (A,), [L, V], backward)), out)


def eigvalsh(A, UPLO="L", *, out=None):
    """The eigenvalues of symmetric A, ascending; the gradient V diag(g) V^H."""
    _check_matrix("linalg.eigvalsh", A)
    with no_grad():
        L, V = eigh(A, UPLO)
    return _out(record(L, "LinalgEigvalsh", (A,), lambda g: (matmul(V * g.unsqueeze(-2), _mH(V)),)), out)


def _svd_reduced(A):
    m, n = A.shape[-2:]
    k = min(m, n)
    return _run(kernels.svd, A, [((m, k), None), ((k,), None), ((k, n), None)])


def _svd_backward(gU, gS, gVh, U, S, Vh):
    """torch's svd_backward (real) for the reduced factors (full ones are narrowed to them first, as torch's:
    the completing columns get no gradient)."""
    m, n, k = U.shape[-2], Vh.shape[-1], S.shape[-1]
    if U.shape[-1] > k:
        U, gU = U[..., :k], gU[..., :k]
    if Vh.shape[-2] > k:
        Vh, gVh = Vh[..., :k, :], gVh[..., :k, :]
    if not (m and n and S.shape[-1]):  # an empty matrix: nothing flows (as torch)
        return zeros(*U.shape[:-2], m, n, dtype=U.dtype, device=U.device)
    skew = lambda X: X - _mH(X)
    UhgU = skew(matmul(_mH(U), gU))
    VhgV = skew(matmul(Vh, _mH(gVh)))
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + diag_embed(ones_like(S))
    gA = (UhgU * S.unsqueeze(-2) + S.unsqueeze(-1) * VhgV) / E + diag_embed(gS)
    if m > n:
        gA = matmul(U, gA)
        gUSinv = gU / S.unsqueeze(-2)
        gA = gA + gUSinv - matmul(U, matmul(_mH(U), gUSinv))
        return matmul(gA, Vh)
    if m < n:
        gA = matmul(gA, Vh)
        SinvgVh = gVh / S.unsqueeze(-1)
        gA = gA + SinvgVh - matmul(matmul(SinvgVh, _mH(Vh)), Vh)
        return matmul(U, gA)
    return matmul(U, matmul(gA, Vh))


def _complete(Q):
    """Q [..., m, k] with orthonormal columns completed to an orthonormal basis [..., m, m]."""
    m, k = Q.shape[-2:]
    if k == m:
        return Q
    full = qr(Q.detach(), mode="complete").Q
    return cat([Q, full[..., :, k:]], -1)


def svd(A, full_matrices=True, *, driver=None, out=None):
    """(U, S, Vh) with A = U diag(S) Vh, S descending; full_matrices completes U and Vh to square ones.
    The vectors' signs are the backend's (LAPACK's on the CPU)."""
    _check_matrix("linalg.svd", A, square=False)
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with "
                           "cuSOLVER backend.")
    U, S, Vh = _svd_reduced(A)
    U, S, Vh = _record_many("LinalgSvd", (A,), [U, S, Vh],
                            lambda gU, gS, gVh: (_svd_backward(gU, gS, gVh, U, S, Vh),))
    if full_matrices and A.shape[-2] != A.shape[-1]:
        U = _complete(U)
        Vh = _complete(Vh.mT).mT
    return _outs(SVD(U, S, Vh), out)


def _svd_torch(input, some=True, compute_uv=True, *, out=None):
    """torch.svd (deprecated there): (U, S, V) with V, not V^H."""
    U, S, Vh = svd(input, full_matrices=not some)
    if not compute_uv:
        U, Vh = U.detach().zero_(), Vh.detach().zero_()
    return _outs(structseq("svd", ["U", "S", "V"])(U, S, Vh.mT), out)


def svdvals(A, *, driver=None, out=None):
    """The singular values of A, descending; the gradient U diag(g) Vh."""
    _check_matrix("linalg.svdvals", A, square=False)
    U, S, Vh = _svd_reduced(A)
    return _out(record(S, "LinalgSvdvals", (A,), lambda g: (matmul(U * g.unsqueeze(-2), Vh),)), out)


def _tolerance(values_max, atol, rtol, m, n, dtype):
    """max(atol, rtol * values_max) with torch's defaults: rtol = eps * max(m, n) unless atol is given > 0.
    values_max: [..., 1]; atol and rtol: numbers or tensors of the batch shape."""
    def column(x):
        return x.unsqueeze(-1) if hasattr(x, "shape") else x
    if rtol is None:
        given = atol is not None and (bool((atol > 0).any()) if hasattr(atol, "shape") else atol > 0)
        rtol = 0.0 if given else _eps(dtype) * max(m, n)
    from .ops.elementwise import maximum
    tol = values_max * column(rtol)
    return tol if atol is None else maximum(tol, tol * 0 + column(atol))


def _largest(values):
    """The largest of the last dim, kept as [..., 1] (0 where there is none)."""
    if values.numel() == 0:
        return values.new_zeros(tuple(values.shape[:-1]) + (1,))
    return values.amax(-1, keepdim=True)


def _pinv_backward(g, P, A):
    """torch's pinv_backward."""
    m, n = A.shape[-2:]
    Ph, gh = _mH(P), _mH(g)
    if m <= n:
        K = matmul(gh, P)
        KPh = matmul(K, Ph)
        return -_mH(matmul(P, K)) + KPh - matmul(matmul(A, P), KPh) + matmul(matmul(Ph, P), gh - matmul(K, A))
    K = matmul(P, gh)
    PhK = matmul(Ph, K)
    return -_mH(matmul(K, P)) + matmul(matmul(gh - matmul(A, K), P), Ph) + PhK - matmul(matmul(PhK, P), A)


def pinv(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """The pseudo-inverse of A through its SVD (eigh when hermitian), singular values at most
    max(atol, rtol * largest) dropped."""
    _check_matrix("linalg.pinv", A, square=hermitian)
    m, n = A.shape[-2:]
    with no_grad():
        if hermitian:
            L, V = eigh(A)
            absL = L.abs()
            tol = _tolerance(_largest(absL), atol, rtol, m, n, A.dtype)
            inverse = where(absL > tol, 1 / L, 0.0)
            P = matmul(V * inverse.unsqueeze(-2), _mH(V))
        else:
            U, S, Vh = _svd_reduced(A)
            top = S[..., :1] if S.shape[-1] else S.new_zeros(tuple(S.shape[:-1]) + (1,))
            tol = _tolerance(top, atol, rtol, m, n, A.dtype)
            inverse = where(S > tol, 1 / S, 0.0)
            P = matmul(_mH(Vh) * inverse.unsqueeze(-2), _mH(U))
    return _out(record(P, "LinalgPinv", (A,), lambda g: (_pinv_backward(g, P, A),)), out)


def _pinverse(input, rcond=1e-15):
    """torch.pinverse: pinv with rtol=rcond."""
    return pinv(input, rtol=rcond)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, tol=None, out=None):
    """The number of singular values (|eigenvalues| when hermitian) above max(atol, rtol * largest), int64."""
    _check_matrix("linalg.matrix_rank", A, square=hermitian)
    if tol is not None:
        atol, rtol = tol, 0.0
    m, n = A.shape[-2:]
    with no_grad():
        values = eigvalsh(A).abs() if hermitian else svdvals(A)
        limit = _tolerance(_largest(values), atol, rtol, m, n, A.dtype)
        return _out((values > limit).sum(-1).to(dtypes.int64), out)


def lstsq(A, B, rcond=None, *, driver=None, out=None):
    """The least-squares solution of A X = B, with torch's CPU outputs per driver: 'gelsy' (the default) gives
    the rank; 'gelsd' / 'gelss' the rank and singular values; 'gels' neither; residuals (the squared residual
    norms) where m > n, every matrix has full rank and the driver is not 'gelsy'."""
    _check_matrix("linalg.lstsq", A, square=False)
    driver = "gelsy" if driver is None else driver
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    vector = B.ndim == A.ndim - 1
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.shape[-2] != A.shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    m, n = A.shape[-2:]
    rtol = rcond if rcond is not None and rcond >= 0 else None
    X = matmul(pinv(A, rtol=rtol), Bm)
    empty = X.reshape(-1)[:0]  # (an empty result on the graph, as torch's)
    rank = matrix_rank(A, rtol=rtol) if driver != "gels" else zeros(0, dtype=dtypes.int64, device=A.device)
    values = svdvals(A) if driver in ("gelsd", "gelss") else empty
    residuals = empty
    if driver != "gelsy" and m > n and bool((matrix_rank(A) == n).all()):
        residuals = ((matmul(A, X) - Bm) ** 2).sum(-2)
        residuals = residuals.squeeze(-1) if vector else residuals
    return _outs(Lstsq(X.squeeze(-1) if vector else X, residuals, rank, values), out)


def cond(A, p=None, *, out=None):
    """The condition number of A in the norm p (None / 2: largest over smallest singular value; -2 the
    inverse; 'fro', 'nuc', inf, -inf, 1, -1: norm(A) norm(A^-1))."""
    _check_matrix("linalg.cond", A, square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        S = svdvals(A)
        ratio = S[..., 0] / S[..., -1]
        return _out(ratio if p != -2 else 1 / ratio, out)
    return _out(matrix_norm(A, p) * matrix_norm(inv(A), p), out)


# ----------------------------------------------------------------------------- compositions
def matrix_exp(A):
    """exp(A) for square A (batched): scaling and squaring with a degree-13 Padé approximant (Higham 2005),
    composed of matmuls and one solve, so its gradient comes from theirs."""
    _check_matrix("linalg.matrix_exp", A)
    if A.numel() == 0:
        return A.clone()
    if A.dtype is dtypes.float32 and A.device.type == "cpu":  # the squarings amplify float32 rounding
        return matrix_exp(A.to(dtypes.float64)).to(dtypes.float32)
    b = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
         10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.)
    norm1 = A.detach().abs().sum(-2).amax(-1).reshape(-1).tolist()
    s = max(0, math.ceil(math.log2(max(max(norm1), 1e-300) / 5.371920351148152))) if norm1 else 0
    X = A / (2 ** s)
    identity = _eye_like(A)
    X2 = matmul(X, X)
    X4 = matmul(X2, X2)
    X6 = matmul(X4, X2)
    U = matmul(X, matmul(X6, b[13] * X6 + b[11] * X4 + b[9] * X2) + b[7] * X6 + b[5] * X4 + b[3] * X2 +
               b[1] * identity)
    V = matmul(X6, b[12] * X6 + b[10] * X4 + b[8] * X2) + b[6] * X6 + b[4] * X4 + b[2] * X2 + b[0] * identity
    R = solve(V - U, V + U)
    for _ in range(s):
        R = matmul(R, R)
    return R


def tensorinv(A, ind=2, *, out=None):
    """The inverse of A read as a matrix: dims [:ind] by dims [ind:]; the result has shape A.shape[ind:] +
    A.shape[:ind]."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    if math.prod(rows) != math.prod(cols):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {math.prod(cols)} != {math.prod(rows)}")
    return _out(inv(A.reshape(math.prod(rows), math.prod(cols))).reshape(*cols, *rows), out)


def tensorsolve(A, B, dims=None, *, out=None):
    """X with tensordot(A, X, X.ndim) = B: A's dims (after moving `dims` to the end) read as a square matrix."""
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        keep = [d for d in range(A.ndim) if d not in dims]
        A = A.permute(*keep, *dims)
    rest = tuple(A.shape[B.ndim:])
    n = math.prod(B.shape)
    if math.prod(rest) != n:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(result_shape) == prod(other.shape), "
                           f"but got {math.prod(rest)} != {n}")
    return _out(solve(A.reshape(n, n), B.reshape(n)).reshape(*rest), out)


def householder_product(A, tau, *, out=None):
    """The first n columns of H_1 H_2 ... H_k, H_i = I - tau_i v_i v_i^H, v_i column i of A below the diagonal
    with a 1 on it (LAPACK orgqr), composed of ops (so differentiable in A and tau)."""
    _check_matrix("linalg.householder_product", A, square=False)
    m, n = A.shape[-2:]
    k = tau.shape[-1]
    if n > m:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-2] must be greater than or equal to "
                           "input.shape[-1]")
    if k > n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-1] must be greater than or equal to "
                           "tau.shape[-1]")
    V = A.tril(-1) + eye(m, n, dtype=A.dtype, device=A.device)
    Q = eye(m, n, dtype=A.dtype, device=A.device).expand(*A.shape)
    if k == 0:
        Q = Q + A * 0  # (on A's graph all the same, as torch's)
    for i in reversed(range(k)):  # Q = H_i Q, from the last reflector on
        v = V[..., :, i:i + 1]
        Q = Q - tau[..., i:i + 1].unsqueeze(-1) * matmul(v, matmul(_mH(v), Q))
    return _out(Q, out)


def _lu_torch(A, pivot=True, get_infos=False, out=None):
    """torch.lu (deprecated there): (LU, pivots) or (LU, pivots, infos)."""
    LU, pivots, info = lu_factor_ex(A, pivot=pivot)
    if not get_infos:
        _raise_info("torch.linalg.lu_factor", info, "U[{0},{0}] is zero and using it on lu_solve would result in "
                    "a division by zero.")
    result = (LU, pivots, info) if get_infos else (LU, pivots)
    if out is not None:
        for o, r in zip(out, result):
            o.copy_(r)
        return tuple(out)
    return result


def _lu_solve_torch(b, LU_data, LU_pivots, *, out=None):
    """torch.lu_solve (deprecated there): lu_solve with the right-hand side first."""
    return lu_solve(LU_data, LU_pivots, b, out=out)


def _slogdet_torch(A, *, out=None):
    sign, logabsdet = slogdet(A)
    return _outs(structseq("slogdet", ["sign", "logabsdet"])(sign, logabsdet), out)


# webgrad.<name> (torch's top-level functions) and the Tensor methods that run them
TORCH_FUNCTIONS = {
    "inverse": inv, "det": det, "logdet": logdet, "slogdet": _slogdet_torch, "svd": _svd_torch, "qr": _qr_torch,
    "pinverse": _pinverse, "triangular_solve": _triangular_solve, "cholesky": _cholesky,
    "cholesky_solve": cholesky_solve, "cholesky_inverse": cholesky_inverse, "lu": _lu_torch,
    "lu_solve": _lu_solve_torch, "lu_unpack": lu_unpack, "matrix_power": matrix_power, "matrix_exp": matrix_exp,
}


def _method(fn, *names):
    """A Tensor method calling fn(self, ...) with torch's positional parameter names."""
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = names[0] if names else fn.__name__
    method.__doc__ = fn.__doc__
    return method


# Tensor methods (declared with the others in ops/api.py)
TENSOR_METHODS = {
    "inverse": _method(inv, "inverse"), "det": _method(det), "logdet": _method(logdet),
    "slogdet": _method(_slogdet_torch, "slogdet"), "matrix_power": _method(matrix_power),
    "matrix_exp": _method(matrix_exp), "cholesky": _method(_cholesky, "cholesky"),
    "cholesky_solve": _method(cholesky_solve), "cholesky_inverse": _method(cholesky_inverse),
    "qr": _method(_qr_torch, "qr"), "svd": _method(_svd_torch, "svd"), "pinverse": _method(_pinverse, "pinverse"),
    "lu": _method(_lu_torch, "lu"), "lu_solve": _method(_lu_solve_torch, "lu_solve"),
    "triangular_solve": _method(_triangular_solve, "triangular_solve"),
}


from ._ldl import LDLFactor, LDLFactorEx, ldl_factor, ldl_factor_ex, ldl_solve  # noqa: E402,F401  (Bunch-Kaufman)
__all__ += ["ldl_factor", "ldl_factor_ex", "ldl_solve"]
