"""torch.linalg.ldl_factor, ldl_factor_ex and ldl_solve: the Bunch-Kaufman LDLᵀ factorization of real symmetric
matrices, as LAPACK's sytrf/sytrs (lower triangle) that PyTorch calls.

P A Pᵀ = L D Lᵀ with D made of 1x1 and 2x2 blocks: at column k the diagonal element is the pivot when it is large
enough against its column (|a_kk| >= alpha * colmax, alpha = (1 + sqrt(17)) / 8), otherwise another row is swapped in
or a 2x2 block taken, by LAPACK's rules, so the results (LD in compact form, 1-based pivots, negative for a 2x2 block)
are LAPACK's. Each step is a few tensor ops on the trailing block; the pivot choice reads a handful of scalars, and
matrices of a batch are factored one after another (their pivots differ). The factorization is not differentiable,
as PyTorch's is not.
"""

import math

from .return_types import structseq
from . import dtypes
from ._tensor import Tensor, tensor, zeros
from .ops.shape import cat, stack

LDLFactor = structseq("linalg_ldl_factor", ["LD", "pivots"])
LDLFactorEx = structseq("linalg_ldl_factor_ex", ["LD", "pivots", "info"])

_ALPHA = (1.0 + math.sqrt(17.0)) / 8.0  # LAPACK's Bunch-Kaufman threshold


def _check(A, name, what="A"):
    if not isinstance(A, Tensor):
        raise TypeError(f"{name}(): argument '{what}' must be Tensor, not {type(A).__name__}")
    if not A.dtype.is_floating:
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got {A.dtype}")
    if A.dtype in (dtypes.float16, getattr(dtypes, "bfloat16", None)):
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {A.dtype}")
    if A.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor {what} must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{name}: {what} must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")


def _symmetric(T):
    """The symmetric matrix T's lower triangle defines (what LAPACK reads with uplo='L')."""
    return T.tril() + T.tril(-1).mT


def _swap(T, i, j):
    """T with rows and columns i and j exchanged (a symmetric permutation)."""
    order = list(range(T.shape[0]))
    order[i], order[j] = j, i
    index = tensor(order, dtype=dtypes.int64, device=T.device)
    return T.index_select(0, index).index_select(1, index)


def _pivot(T):
    """(kp, kstep, singular) for the trailing block T, by LAPACK's sytf2 rules (local indices)."""
    n = T.shape[0]
    absakk = abs(float(T[0, 0]))
    imax, colmax = 0, 0.0
    if n > 1:
        column = T[1:, 0].abs()
        imax = int(column.argmax()) + 1
        colmax = float(column[imax - 1])
    if max(absakk, colmax) == 0.0 or math.isnan(absakk):
        return 0, 1, True
    if absakk >= _ALPHA * colmax:
        return 0, 1, False
    rowmax = float(T[imax, :imax].abs().max())  # the largest off-diagonal element of row/column imax
    if imax < n - 1:
        rowmax = max(rowmax, float(T[imax + 1:, imax].abs().max()))
    if absakk >= _ALPHA * colmax * (colmax / rowmax):
        return 0, 1, False
    if abs(float(T[imax, imax])) >= _ALPHA * rowmax:
        return imax, 1, False
    return imax, 2, False


def _eliminate(T, kstep):
    """T after eliminating its first kstep columns: the multipliers in those columns, the Schur complement below."""
    if kstep == 1:
        if T.shape[0] == 1:
            return T
        x, d11 = T[1:, 0], 1.0 / T[0, 0]
        rest = T[1:, 1:] + x.unsqueeze(1) * (-d11 * x).unsqueeze(0)  # - x xᵀ / d, as LAPACK's syr rounds it
        return _join(T[0:1], (x * d11).unsqueeze(1), rest)
    if T.shape[0] == 2:
        return T
    d21 = T[1, 0]
    d11, d22 = T[1, 1] / d21, T[0, 0] / d21
    d21 = (1.0 / (d11 * d22 - 1.0)) / d21
    x0, x1 = T[2:, 0], T[2:, 1]
    wk, wkp1 = d21 * (d11 * x0 - x1), d21 * (d22 * x1 - x0)  # the rows of X D⁻¹, in LAPACK's arithmetic
    rest = T[2:, 2:] - x0.unsqueeze(1) * wk.unsqueeze(0) - x1.unsqueeze(1) * wkp1.unsqueeze(0)
    return _join(T[0:2], stack([wk, wkp1], 1), rest)


def _join(top, left, rest):
    """The block matrix [[top], [left, rest]] (top: the eliminated rows, whole width)."""
    return cat([top, cat([left, rest], 1)], 0)


def _factor_one(A):
    """(LD, pivots as a list, info) of one n x n matrix."""
    n = A.shape[0]
    M = _symmetric(A)
    done = []  # the finished columns' blocks: (k, kstep, block columns [n - k, kstep])
    pivots, info, k = [], 0, 0
    while k < n:
        kp, kstep, singular = _pivot(M)
        if singular:
            info = info or k + 1
        else:
            kk = kstep - 1
            if kp != kk:
                M = _swap(M, kk, kp)
            M = _eliminate(M, kstep)
        done.append((k, M[:, :kstep]))
        pivots += [k + kp + 1] if kstep == 1 else [-(k + kp + 1)] * 2
        M = _symmetric(M[kstep:, kstep:]) if k + kstep < n else M[kstep:, kstep:]
        k += kstep
    LD = zeros((n, n), dtype=A.dtype, device=A.device)
    for k, columns in done:
        LD[k:, k:k + columns.shape[1]] = columns
    return LD.tril(), pivots, info


def ldl_factor_ex(A, *, hermitian=False, check_errors=False, out=None):
    """(LD, pivots, info), as torch.linalg.ldl_factor_ex: LD holds L (unit lower, below the diagonal) and the
    blocks of D; info is the first zero pivot's 1-based index (D singular), 0 where none. Real matrices:
    hermitian=True is the same factorization."""
    _check(A, "torch.linalg.ldl_factor_ex")
    if out is not None:
        raise NotImplementedError("linalg.ldl_factor_ex(): out= is not supported; use the returned tensors")
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    flat = A.detach().reshape(math.prod(batch), n, n)
    results = [_factor_one(flat[i]) for i in range(flat.shape[0])]
    if results:
        LD = stack([r[0] for r in results]).reshape(A.shape)
        pivots = tensor([r[1] for r in results], dtype=dtypes.int32, device=A.device).reshape(batch + (n,))
    else:
        LD = zeros(A.shape, dtype=A.dtype, device=A.device)
        pivots = zeros(batch + (n,), dtype=dtypes.int32, device=A.device)
    info = tensor([r[2] for r in results], dtype=dtypes.int32, device=A.device).reshape(batch)
    if check_errors:
        _raise_singular(info, "torch.linalg.ldl_factor_ex")
    return LDLFactorEx(LD, pivots, info)


def _raise_singular(info, name):
    bad = [int(v) for v in info.reshape(-1).tolist() if v > 0]
    if bad:
        raise RuntimeError(f"{name}: The factorization could not be completed because the input is not invertible: "
                           f"D has a zero diagonal block at position {bad[0]}")


def ldl_factor(A, *, hermitian=False, out=None):
    """(LD, pivots), as torch.linalg.ldl_factor; a RuntimeError where D is singular (ldl_factor_ex reports it)."""
    if out is not None:
        raise NotImplementedError("linalg.ldl_factor(): out= is not supported; use the returned tensors")
    LD, pivots, info = ldl_factor_ex(A, hermitian=hermitian)
    _raise_singular(info, "torch.linalg.ldl_factor")
    return LDLFactor(LD, pivots)


def _row_swap(B, i, j):
    if i == j:
        return B
    order = list(range(B.shape[0]))
    order[i], order[j] = j, i
    return B.index_select(0, tensor(order, dtype=dtypes.int64, device=B.device))


def _solve_one(LD, pivots, B):
    """X with A X = B for A = P L D Lᵀ Pᵀ given by (LD, pivots): LAPACK's sytrs, lower."""
    n = LD.shape[0]
    k = 0
    while k < n:  # L D Y = B
        if pivots[k] > 0:
            B = _row_swap(B, k, pivots[k] - 1)
            if k < n - 1:
                B = _set_rows(B, k + 1, B[k + 1:] - LD[k + 1:, k:k + 1] * B[k:k + 1])
            B = _set_rows(B, k, B[k:k + 1] / LD[k, k])
            k += 1
        else:
            B = _row_swap(B, k + 1, -pivots[k] - 1)
            if k < n - 2:
                B = _set_rows(B, k + 2, B[k + 2:] - LD[k + 2:, k:k + 1] * B[k:k + 1] - LD[k + 2:, k + 1:k + 2] *
                              B[k + 1:k + 2])
            akm1k = LD[k + 1, k]
            akm1, ak = LD[k, k] / akm1k, LD[k + 1, k + 1] / akm1k
            denom = akm1 * ak - 1.0
            bkm1, bk = B[k:k + 1] / akm1k, B[k + 1:k + 2] / akm1k
            B = _set_rows(B, k, (ak * bkm1 - bk) / denom)
            B = _set_rows(B, k + 1, (akm1 * bk - bkm1) / denom)
            k += 2
    k = n - 1
    while k >= 0:  # Lᵀ X = Y
        if pivots[k] > 0:
            if k < n - 1:
                B = _set_rows(B, k, B[k:k + 1] - LD[k + 1:, k:k + 1].mT @ B[k + 1:])
            B = _row_swap(B, k, pivots[k] - 1)
            k -= 1
        else:
            if k < n - 1:
                below = B[k + 1:]
                B = _set_rows(B, k, B[k:k + 1] - LD[k + 1:, k:k + 1].mT @ below)
                B = _set_rows(B, k - 1, B[k - 1:k] - LD[k + 1:, k - 1:k].mT @ below)
            B = _row_swap(B, k, -pivots[k] - 1)
            k -= 2
    return B


def _set_rows(B, start, rows):
    """B with rows start, start + 1, ... replaced by `rows`."""
    return cat([B[:start], rows, B[start + rows.shape[0]:]], 0)


def ldl_solve(LD, pivots, B, *, hermitian=False, out=None):
    """X with A X = B from A's ldl_factor (LD, pivots), as torch.linalg.ldl_solve; batch dims broadcast."""
    _check(LD, "torch.linalg.ldl_solve", "LD")
    if not isinstance(B, Tensor) or B.ndim < 2:
        raise RuntimeError("torch.linalg.ldl_solve: B must have at least 2 dimensions")
    if out is not None:
        raise NotImplementedError("linalg.ldl_solve(): out= is not supported; use the returned tensor")
    n = LD.shape[-1]
    if B.shape[-2] != n:
        raise RuntimeError(f"torch.linalg.ldl_solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({LD.shape[-2]}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    if pivots.dtype not in (dtypes.int32, dtypes.int64) or tuple(pivots.shape) != tuple(LD.shape[:-1]):
        raise RuntimeError(f"torch.linalg.ldl_solve: expected pivots of shape {list(LD.shape[:-1])} and an integer "
                           f"dtype, got {list(pivots.shape)} {pivots.dtype}")
    batch = _broadcast(tuple(LD.shape[:-2]), tuple(B.shape[:-2]))
    count = math.prod(batch)
    if count == 0 or n == 0:
        return zeros(batch + tuple(B.shape[-2:]), dtype=B.dtype, device=B.device)
    LDs = LD.detach().expand(batch + (n, n)).reshape(count, n, n)
    piv = pivots.expand(batch + (n,)).reshape(count, n).tolist()
    Bs = B.detach().expand(batch + tuple(B.shape[-2:])).reshape(count, n, B.shape[-1])
    return stack([_solve_one(LDs[i], piv[i], Bs[i]) for i in range(LDs.shape[0])]).reshape(
        batch + tuple(B.shape[-2:]))


def _broadcast(a, b):
    out = []
    for x, y in zip((1,) * (len(b) - len(a)) + a, (1,) * (len(a) - len(b)) + b):
        if x != y and 1 not in (x, y):
            raise RuntimeError(f"torch.linalg.ldl_solve: the batch dims of LD {list(a)} and B {list(b)} do not "
                               "broadcast")
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(out)
