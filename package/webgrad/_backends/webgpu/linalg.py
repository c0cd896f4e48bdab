"""The dense factorizations on WebGPU (shaders/linalg.wgsl): LU, the pivots' permutation, Cholesky, triangular
solves, Householder QR, Jacobi eigen-decomposition and SVD, float32, a workgroup per matrix."""

import struct

from ...dtypes import float32, int32
from .. import kernels
from .dispatch import Kernel, Shader, grid
from .views import check_view

SHADER = Shader("linalg.wgsl", {})
_U = "uniform"
_BINDINGS = {
    "lu_factor": ((0, "read"), (1, "write"), (4, "write"), (5, "write"), (6, _U)),
    "lu_permutation": ((4, "write"), (6, _U), (7, "read")),
    "cholesky": ((0, "read"), (1, "write"), (5, "write"), (6, _U)),
    "triangular_solve": ((0, "read"), (1, "write"), (6, _U), (8, "read")),
    "qr": ((0, "read"), (1, "write"), (2, "write"), (6, _U), (9, "write")),
    "eigh": ((0, "read"), (1, "write"), (2, "write"), (6, _U), (9, "write")),
    "svd": ((0, "read"), (1, "write"), (2, "write"), (3, "write"), (6, _U), (9, "write")),
}
KERNELS = {name: Kernel(SHADER, name, bindings) for name, bindings in _BINDINGS.items()}
_PARAMS = struct.Struct("<12I")
WG = 64


def _params(batch, m, n, k, flags=0, a=None, b=None, o0=None, o1=None, o2=None, i0=None, i1=None):
    offsets = [v.offset if v is not None else 0 for v in (a, b, o0, o1, o2, i0, i1)]
    return _PARAMS.pack(batch, m, n, k, flags, *offsets)


def _float(view, name, ndim):
    return check_view(view, name, dtype=float32, contiguous=True, ndim=ndim)


def _ints(view, name, ndim):
    return check_view(view, name, dtype=int32, contiguous=True, ndim=ndim)


@kernels.lu_factor.implement("webgpu")
def lu_factor(rt, lu, pivots, info, a):
    _float(a, "a", 3)
    _float(lu, "lu", 3)
    _ints(pivots, "pivots", 2)
    _ints(info, "info", 1)
    batch, m, n = a.shape
    if batch == 0:
        return
    params = _params(batch, m, n, min(m, n), a=a, o0=lu, i0=pivots, i1=info)
    rt.dispatch(KERNELS["lu_factor"], (), (a.storage, lu.storage, pivots.storage, info.storage), params, grid(batch))


@kernels.lu_permutation.implement("webgpu")
def lu_permutation(rt, perm, pivots):
    _ints(perm, "perm", 2)
    _ints(pivots, "pivots", 2)
    batch, m = perm.shape
    if batch == 0:
        return
    params = _params(batch, m, 0, pivots.shape[1], i0=perm, i1=pivots)
    rt.dispatch(KERNELS["lu_permutation"], (), (perm.storage, pivots.storage), params, grid(-(-batch // WG)))


@kernels.cholesky.implement("webgpu")
def cholesky(rt, l, info, a):
    _float(a, "a", 3)
    _float(l, "l", 3)
    _ints(info, "info", 1)
    batch, n, _ = a.shape
    if batch == 0:
        return
    params = _params(batch, n, n, n, a=a, o0=l, i1=info)
    rt.dispatch(KERNELS["cholesky"], (), (a.storage, l.storage, info.storage), params, grid(batch))


@kernels.triangular_solve.implement("webgpu")
def triangular_solve(rt, x, a, b, upper=False, unitriangular=False):
    _float(a, "a", 3)
    _float(b, "b", 3)
    _float(x, "x", 3)
    batch, n, k = x.shape
    if a.shape != (batch, n, n) or b.shape != x.shape:
        raise ValueError(f"triangular_solve: a {list(a.shape)}, b {list(b.shape)} and x {list(x.shape)} do not fit")
    if x.numel == 0:
        return
    params = _params(batch, n, n, k, int(upper) | 2 * int(unitriangular), a=a, b=b, o0=x)
    rt.dispatch(KERNELS["triangular_solve"], (), (a.storage, x.storage, b.storage), params,
                grid(batch * -(-k // WG)))


@kernels.qr.implement("webgpu")
def qr(rt, q, r, a):
    _float(a, "a", 3)
    _float(q, "q", 3)
    _float(r, "r", 3)
    batch, m, n = a.shape
    if batch == 0:
        return
    columns = q.shape[2]
    scratch = rt.storage(batch * (m * n + min(m, n)), float32)
    params = _params(batch, m, n, columns, a=a, o0=q, o1=r)
    rt.dispatch(KERNELS["qr"], (), (a.storage, q.storage, r.storage, scratch), params, grid(batch))


# The Jacobi kernels (eigh, svd) are checked against LAPACK up to this order on lavapipe (random and
# rank-deficient matrices, 40 shapes); from order 50 on they gave wrong values there, for a reason not yet
# found. Larger matrices are decomposed on the host (a read-back and an upload, as norms' singular values are).
JACOBI_MAX_ORDER = 40


def _on_host(rt, outs, a, decompose):
    """Run `decompose` (NumPy arrays: a [batch, m, n] float32 -> the outputs' arrays) on a host copy of `a`
    and write its results into the `outs` views."""
    try:
        import numpy as np
    except ImportError:
        raise NotImplementedError(f"on WebGPU, decompositions of matrices larger than {JACOBI_MAX_ORDER} x "
                                  f"{JACOBI_MAX_ORDER} run on the host and need NumPy") from None
    data = rt.read(a.storage, 4 * a.offset, 4 * a.numel)
    results = decompose(np.frombuffer(bytes(data), dtype=np.float32).reshape(a.shape).astype(np.float64))
    for view, value in zip(outs, results):
        rt.write(view.storage, np.ascontiguousarray(value, dtype=np.float32).tobytes(), 4 * view.offset)


@kernels.eigh.implement("webgpu")
def eigh(rt, values, vectors, a, upper=False):
    _float(a, "a", 3)
    _float(values, "values", 2)
    _float(vectors, "vectors", 3)
    batch, n, _ = a.shape
    if batch == 0:
        return
    if n > JACOBI_MAX_ORDER:
        import numpy as np  # (_on_host says so where it is missing)
        _on_host(rt, (values, vectors), a, lambda x: np.linalg.eigh(x, UPLO="U" if upper else "L"))
        return
    scratch = rt.storage(batch * (2 * n * n + n + n % 2), float32)
    params = _params(batch, n, n, n, int(upper), a=a, o0=values, o1=vectors)
    rt.dispatch(KERNELS["eigh"], (), (a.storage, values.storage, vectors.storage, scratch), params, grid(batch))


@kernels.svd.implement("webgpu")
def svd(rt, u, s, vh, a):
    _float(a, "a", 3)
    _float(u, "u", 3)
    _float(s, "s", 2)
    _float(vh, "vh", 3)
    batch, m, n = a.shape
    if batch == 0:
        return
    k = min(m, n)
    if k > JACOBI_MAX_ORDER:
        def decompose(x):
            import numpy as np
            return np.linalg.svd(x, full_matrices=False)
        _on_host(rt, (u, s, vh), a, decompose)
        return
    scratch = rt.storage(batch * (max(m, n) * k + k * k), float32)
    params = _params(batch, m, n, k, int(m < n), a=a, o0=u, o1=s, o2=vh)
    rt.dispatch(KERNELS["svd"], (), (a.storage, u.storage, s.storage, vh.storage, scratch), params, grid(batch))
