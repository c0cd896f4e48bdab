"""torch.svd_lowrank and torch.pca_lowrank: randomized low-rank SVD (Halko, Martinsson and Tropp, 2009).

A random [n, q] projection of A is orthonormalised by QR and refined by niter power iterations; the SVD of the small
Qᴴ A then gives A's leading singular triplets. The steps are PyTorch's own (torch._lowrank), built from
webgrad.randn, matmul, linalg.qr and linalg.svd, so they are differentiable and batched as those are. Results depend
on the random projection: seed with webgrad.manual_seed for repeatable ones.
"""

from . import linalg
from ._tensor import Tensor
from .random import randn


def _approximate_basis(A, q, niter, M):
    """An [m, q] matrix with orthonormal columns whose range approximates A's (less M's, where given)."""
    R = randn(A.shape[-1], q, dtype=A.dtype, device=A.device)

    def project(B, N, X):
        return B @ X if N is None else B @ X - N @ X

    Q = linalg.qr(project(A, M, R)).Q
    for _ in range(niter):
        Q = linalg.qr(project(A.mH, None if M is None else M.mH, Q)).Q
        Q = linalg.qr(project(A, M, Q)).Q
    return Q


def _svd_lowrank(A, q, niter, M):
    q = 6 if q is None else q
    niter = 2 if niter is None else niter
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(A.shape)
    transposed = m < n  # work on the tall one: A's conjugate transpose
    if transposed:
        A = A.mH
        M = None if M is None else M.mH
    Q = _approximate_basis(A, q, niter, M)
    B = Q.mH @ A if M is None else Q.mH @ A - Q.mH @ M
    U, S, Vh = linalg.svd(B, full_matrices=False)
    U, V = Q @ U, Vh.mH
    return (V, S, U) if transposed else (U, S, V)


def _check_matrix(A, op):
    if not isinstance(A, Tensor):
        raise TypeError(f"{op}(): argument 'A' must be Tensor, not {type(A).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"{op}(): expected a matrix or a batch of matrices, got a {A.ndim}-D tensor")
    if not A.dtype.is_floating:
        raise RuntimeError(f"{op}(): expected a floating point input, got {A.dtype}")
    return A.to_dense() if A.is_sparse else A


def svd_lowrank(A, q=6, niter=2, M=None):
    """(U, S, V) with A - M ≈ U diag(S) Vᴴ: U [..., m, q], S [..., q], V [..., n, q], as torch.svd_lowrank. q: the
    rank sought (slightly more than the true rank is best), niter: power iterations (more: more accurate)."""
    A = _check_matrix(A, "svd_lowrank")
    return _svd_lowrank(A, q, niter, None if M is None else _check_matrix(M, "svd_lowrank"))


def pca_lowrank(A, q=None, center=True, niter=2):
    """(U, S, V), the principal components of A's rows, as torch.pca_lowrank: svd_lowrank of A less its column
    means (center=True). q defaults to min(6, m, n) and must lie in [0, min(m, n)]."""
    A = _check_matrix(A, "pca_lowrank")
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not 0 <= q <= min(m, n):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}")
    if not niter >= 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if center:
        A = A - A.mean(dim=(-2,), keepdim=True)
    return _svd_lowrank(A, q, niter, None)


FUNCTIONS = {"svd_lowrank": svd_lowrank, "pca_lowrank": pca_lowrank}
