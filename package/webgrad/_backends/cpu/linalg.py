"""The CPU reference of the batched matrix product and of the dense factorizations (LU, Cholesky, triangular
solves, QR, symmetric eigen-decomposition, SVD).

LU, Cholesky and the triangular solves loop over columns with every matrix of the batch at once, so that a
failure is reported per matrix (LAPACK's info), as torch's _ex variants do; QR, eigh and SVD are LAPACK's
through NumPy, as PyTorch's CPU.
"""

from .. import kernels
from .arrays import array, np, write


@kernels.matmul.implement("cpu")
def matmul(out, a, b, trans_a=False, trans_b=False, bias=None, relu=False):
    # BLAS in the tensors' own dtype (as PyTorch on the CPU): float32 training stays fast, and float64
    # gradient checks stay exact. A stride-0 batch is one matrix: multiply it once, not per batch.
    av, bv = array(a), array(b)
    if trans_a:
        av = av.transpose(0, 2, 1)
    if trans_b:
        bv = bv.transpose(0, 2, 1)
    if av.shape[0] == 1 or a.strides[0] == 0:
        av = av[:1]
    if bv.shape[0] == 1 or b.strides[0] == 0:
        bv = bv[:1]
    if av.dtype == np.float16:  # half products accumulate in float32 and round once (PyTorch, cuBLAS)
        av, bv = av.astype(np.float32), bv.astype(np.float32)
    # NumPy only reaches BLAS for 2-D operands; a 3-D matmul of strided views is ~10x slower
    res = (av[0] @ bv[0])[None] if av.shape[0] == 1 and bv.shape[0] == 1 else np.matmul(av, bv)
    if bias is not None:
        res += array(bias).astype(res.dtype)
    if relu:
        np.maximum(res, 0, out=res)
    array(out)[...] = res


@kernels.matmul_causal.implement("cpu")
def matmul_causal(out, a, b, trans_a=False, trans_b=False, part="out"):
    # the whole product: BLAS has no triangular shortcut worth a copy, and the contract allows it
    matmul(out, a, b, trans_a, trans_b)


@kernels.lu_factor.implement("cpu")
def lu_factor(lu, pivots, info, a):
    w = array(a).copy()
    batch, m, n = w.shape
    rows = np.arange(batch)
    piv = np.zeros((batch, min(m, n)), np.int32)
    failed = np.zeros(batch, np.int32)
    for j in range(min(m, n)):
        p = j + np.argmax(np.abs(w[:, j:, j]), axis=1)  # the first of equal magnitudes, as LAPACK's idamax
        piv[:, j] = p + 1
        w[rows, j], w[rows, p] = w[rows, p], w[rows, j].copy()
        d = w[:, j, j]
        zero = d == 0
        failed[(failed == 0) & zero] = j + 1
        # a zero pivot has a zero column below it: nothing to scale
        w[:, j + 1:, j] /= np.where(zero, 1, d)[:, None]
        w[:, j + 1:, j + 1:] -= w[:, j + 1:, j, None] * w[:, j, None, j + 1:]
    write(lu, w)
    write(pivots, piv)
    write(info, failed)


@kernels.lu_permutation.implement("cpu")
def lu_permutation(perm, pivots):
    piv = array(pivots).astype(np.int64) - 1
    batch, m = perm.shape
    rows = np.arange(batch)
    order = np.tile(np.arange(m), (batch, 1))
    for j in range(piv.shape[1]):
        p = piv[:, j]
        order[rows, j], order[rows, p] = order[rows, p], order[rows, j].copy()
    write(perm, order)


@kernels.cholesky.implement("cpu")
def cholesky(l, info, a):
    w = np.tril(array(a))
    batch, n, _ = w.shape
    failed = np.zeros(batch, np.int32)
    ok = np.ones(batch, bool)
    for j in range(n):  # right-looking: column j is final once the columns before it updated it
        d = w[:, j, j]
        bad = ok & ~(d > 0)
        failed[bad] = j + 1
        ok &= ~bad
        root = np.sqrt(np.where(ok, d, 1))
        w[:, j, j] = np.where(ok, root, d)
        w[:, j + 1:, j] /= root[:, None]
        col = np.where(ok[:, None], w[:, j + 1:, j], 0)
        w[:, j + 1:, j + 1:] -= np.tril(col[:, :, None] * col[:, None, :])
    write(l, w)
    write(info, failed)


@kernels.triangular_solve.implement("cpu")
def triangular_solve(x, a, b, upper=False, unitriangular=False):
    av, bv = array(a), array(b)
    dtype = np.result_type(av.dtype, bv.dtype)
    n = av.shape[-1]
    res = np.zeros(np.broadcast_shapes(av.shape[:1], bv.shape[:1]) + bv.shape[1:], dtype)
    order = range(n - 1, -1, -1) if upper else range(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in order:
            done = slice(i + 1, n) if upper else slice(0, i)
            s = bv[:, i, :] - np.einsum("bj,bjk->bk", av[:, i, done], res[:, done, :])
            res[:, i, :] = s if unitriangular else s / av[:, i, i, None]
    write(x, res)


@kernels.qr.implement("cpu")
def qr(q, r, a):
    av = array(a)
    mode = "complete" if q.shape[-1] == av.shape[-2] and r.shape[-2] == av.shape[-2] else "reduced"
    qv, rv = np.linalg.qr(av, mode=mode)
    write(q, qv)
    write(r, rv)


@kernels.eigh.implement("cpu")
def eigh(values, vectors, a, upper=False):
    w, v = np.linalg.eigh(array(a), UPLO="U" if upper else "L")
    write(values, w)
    write(vectors, v)


@kernels.svd.implement("cpu")
def svd(u, s, vh, a):
    uv, sv, vhv = np.linalg.svd(array(a), full_matrices=False)
    write(u, uv)
    write(s, sv)
    write(vh, vhv)
