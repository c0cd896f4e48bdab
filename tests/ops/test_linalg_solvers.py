"""torch.linalg's solvers and factorizations (webgrad/linalg.py, the kernels lu_factor, lu_permutation, cholesky,
triangular_solve, qr, eigh and svd): values against torch on every device, batched and not, gradients against
torch and finite differences, and torch's errors."""

import warnings

import numpy as np
import pytest
import webgrad as wg
from helpers import DEVICES, gradcheck

torch = pytest.importorskip("torch")


def _dtype(device):
    return wg.float64 if device == "cpu" else wg.float32


def _tol(device):
    return dict(rtol=1e-7, atol=1e-9) if device == "cpu" else dict(rtol=2e-3, atol=2e-4)


def _wg(a, device):
    return wg.tensor(a, dtype=_dtype(device), device=device)


def _np(x):
    return x.detach().to("cpu").numpy().astype(np.float64)


def _close(x, expected, device, **kw):
    expected = expected.detach().numpy() if isinstance(expected, torch.Tensor) else np.asarray(expected)
    np.testing.assert_allclose(_np(x), expected, **{**_tol(device), **kw})


def _well_conditioned(rng, shape):
    return rng.standard_normal(shape) + 3 * np.eye(shape[-1])


def _spd(rng, shape):
    a = rng.standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


# ----------------------------------------------------------------------------- values
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5, 5), (6, 3), (2, 3, 6)])
def test_lu_factor_and_lu_match_torch(device, shape):
    a = np.random.default_rng(0).standard_normal(shape)
    LU, pivots, info = wg.linalg.lu_factor_ex(_wg(a, device))
    t = torch.linalg.lu_factor_ex(torch.tensor(a))
    assert pivots.dtype is wg.int32 and tuple(info.shape) == shape[:-2]
    _close(LU, t.LU, device)
    np.testing.assert_array_equal(pivots.to("cpu").numpy(), t.pivots.numpy())
    np.testing.assert_array_equal(info.to("cpu").numpy(), 0)
    P, L, U = wg.linalg.lu(_wg(a, device))
    tP, tL, tU = torch.linalg.lu(torch.tensor(a))
    _close(P, tP, device)
    _close(L, tL, device)
    _close(U, tU, device)
    P2, L2, U2 = wg.lu_unpack(LU, pivots)
    _close(P2 @ L2 @ U2, a, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batch", [(), (3,)])
def test_inv_det_slogdet_solve_match_torch(device, batch):
    rng = np.random.default_rng(1)
    a = _well_conditioned(rng, batch + (5, 5))
    b = rng.standard_normal(batch + (5, 2))
    ta, tb = torch.tensor(a), torch.tensor(b)
    A = _wg(a, device)
    _close(wg.linalg.inv(A), torch.linalg.inv(ta), device)
    _close(wg.inverse(A), torch.inverse(ta), device)
    _close(wg.linalg.det(A), torch.linalg.det(ta), device)
    sign, logabsdet = wg.linalg.slogdet(A)
    tsign, tlog = torch.linalg.slogdet(ta)
    _close(sign, tsign, device)
    _close(logabsdet, tlog, device)
    _close(wg.logdet(A), torch.logdet(ta), device)
    _close(wg.linalg.solve(A, _wg(b, device)), torch.linalg.solve(ta, tb), device)
    _close(wg.linalg.solve(A, _wg(b, device).mT, left=False), torch.linalg.solve(ta, tb.mT, left=False), device)
    _close(wg.linalg.solve(A, _wg(b[..., 0], device)), torch.linalg.solve(ta, tb[..., 0]), device)  # a vector
    LU, piv = wg.linalg.lu_factor(A)
    tLU, tpiv = torch.linalg.lu_factor(ta)
    for left in (True, False):
        for adjoint in (True, False):
            rhs = b if left else np.swapaxes(b, -1, -2)
            _close(wg.linalg.lu_solve(LU, piv, _wg(rhs, device), left=left, adjoint=adjoint),
                   torch.linalg.lu_solve(tLU, tpiv, torch.tensor(rhs), left=left, adjoint=adjoint), device)
    _close(wg.linalg.matrix_power(A, -3), torch.linalg.matrix_power(ta, -3), device)


@pytest.mark.parametrize("device", DEVICES)
def test_triangular_and_cholesky_match_torch(device):
    rng = np.random.default_rng(2)
    a = _well_conditioned(rng, (2, 4, 4))
    b = rng.standard_normal((3, 1, 4, 2))  # broadcasts against a's batch
    for upper in (True, False):
        for left in (True, False):
            for unit in (True, False):
                rhs = b if left else np.swapaxes(b, -1, -2)
                got = wg.linalg.solve_triangular(_wg(a, device), _wg(rhs, device), upper=upper, left=left,
                                                 unitriangular=unit)
                want = torch.linalg.solve_triangular(torch.tensor(a), torch.tensor(rhs), upper=upper, left=left,
                                                     unitriangular=unit)
                _close(got, want, device)
    x, m = wg.triangular_solve(_wg(b[0], device), _wg(a, device), transpose=True)
    with warnings.catch_warnings():  # (deprecated in torch)
        warnings.simplefilter("ignore")
        tx, tm = torch.triangular_solve(torch.tensor(b[0]), torch.tensor(a), transpose=True)
    _close(x, tx, device)
    _close(m, tm, device)
    spd = _spd(rng, (3, 4, 4))
    for upper in (False, True):
        L = wg.linalg.cholesky(_wg(spd, device), upper=upper)
        _close(L, torch.linalg.cholesky(torch.tensor(spd), upper=upper), device)
        _close(wg.cholesky_solve(_wg(b[0, 0], device), L, upper),
               torch.cholesky_solve(torch.tensor(b[0, 0]), torch.linalg.cholesky(torch.tensor(spd), upper=upper),
                                    upper), device)
        _close(wg.cholesky_inverse(L[0], upper), np.linalg.inv(spd[0]), device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(5, 5), (2, 6, 3), (3, 5)])
def test_qr_svd_eigh(device, shape):
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape)
    ta = torch.tensor(a)
    for mode in ("reduced", "complete"):
        Q, R = wg.linalg.qr(_wg(a, device), mode=mode)
        tQ, tR = torch.linalg.qr(ta, mode=mode)
        _close(Q, tQ, device)  # LAPACK's signs on every device
        _close(R, tR, device)
    k = min(shape[-2:])
    S = wg.linalg.svdvals(_wg(a, device))
    _close(S, torch.linalg.svdvals(ta), device)
    U, S, Vh = wg.linalg.svd(_wg(a, device), full_matrices=False)
    _close((U * S.unsqueeze(-2)) @ Vh, a, device)
    _close(U.mT @ U, np.eye(k) + 0 * a[..., :k, :k], device)
    U, S, Vh = wg.linalg.svd(_wg(a, device))
    assert U.shape[-1] == shape[-2] and Vh.shape[-2] == shape[-1]
    _close(Vh @ Vh.mT, np.eye(shape[-1]) + 0 * a[..., :1, :1], device)
    _close(wg.linalg.pinv(_wg(a, device)), torch.linalg.pinv(ta), device)
    np.testing.assert_array_equal(wg.linalg.matrix_rank(_wg(a, device)).to("cpu").numpy(),
                                  torch.linalg.matrix_rank(ta).numpy())
    if shape[-1] == shape[-2]:
        sym = a + np.swapaxes(a, -1, -2)
        L, V = wg.linalg.eigh(_wg(sym, device))
        tL, tV = torch.linalg.eigh(torch.tensor(sym))
        _close(L, tL, device)
        _close((V.mT @ _wg(tV.numpy(), device)).abs(), np.eye(shape[-1]), device)  # equal up to each sign
        _close(wg.linalg.eigvalsh(_wg(sym, device), UPLO="U"), tL, device)


def test_compositions_match_torch():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 4, 4))
    ta = torch.tensor(a)
    for p in (None, 2, -2, "fro", "nuc", 1, -1, float("inf")):
        _close(wg.linalg.cond(_wg(a, "cpu"), p), torch.linalg.cond(ta, p), "cpu", rtol=1e-6)
    _close(wg.linalg.matrix_exp(_wg(a, "cpu")), torch.linalg.matrix_exp(ta), "cpu", rtol=1e-6)
    t4 = rng.standard_normal((4, 6, 8, 3))
    _close(wg.linalg.tensorinv(_wg(t4, "cpu")), torch.linalg.tensorinv(torch.tensor(t4)), "cpu", rtol=1e-6)
    b = rng.standard_normal((4, 6))
    _close(wg.linalg.tensorsolve(_wg(t4, "cpu"), _wg(b, "cpu")),
           torch.linalg.tensorsolve(torch.tensor(t4), torch.tensor(b)), "cpu", rtol=1e-6)
    h, tau = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 3))
    _close(wg.linalg.householder_product(_wg(h, "cpu"), _wg(tau, "cpu")),
           torch.linalg.householder_product(torch.tensor(h), torch.tensor(tau)), "cpu")
    for driver in ("gelsy", "gelsd", "gels"):
        b = rng.standard_normal((2, 6, 2))
        a6 = rng.standard_normal((2, 6, 3))
        got = wg.linalg.lstsq(_wg(a6, "cpu"), _wg(b, "cpu"), driver=driver)
        want = torch.linalg.lstsq(torch.tensor(a6), torch.tensor(b), driver=driver)
        for g, w in zip(got, want):
            assert tuple(g.shape) == tuple(w.shape), driver
            _close(g, w, "cpu")


# ----------------------------------------------------------------------------- gradients
def _grads_match(fw, ft, *arrays, post=None, seed=0):
    """webgrad's and torch's gradients of sum(out_i * W_i) (float64, CPU) are equal."""
    rng = np.random.default_rng(seed)
    xs = [wg.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    ow, ot = fw(*xs), ft(*ts)
    ow = ow if isinstance(ow, tuple) else (ow,)
    ot = ot if isinstance(ot, tuple) else (ot,)
    lw = lt = 0
    for o, t in zip(ow, ot):
        if t.dtype.is_floating_point and t.numel():
            w = rng.standard_normal(tuple(t.shape))
            lw = lw + (o * wg.tensor(w)).sum()
            lt = lt + (t * torch.tensor(w)).sum()
    lw.backward()
    lt.backward()
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-7, atol=1e-9)


def test_gradients_of_the_lu_family_match_torch():
    rng = np.random.default_rng(5)
    a = _well_conditioned(rng, (2, 4, 4))
    b = rng.standard_normal((2, 4, 3))
    L = torch.linalg
    _grads_match(lambda x: tuple(wg.linalg.lu(x)), lambda x: tuple(L.lu(x)), a)
    _grads_match(lambda x: tuple(wg.linalg.lu(x)), lambda x: tuple(L.lu(x)), rng.standard_normal((2, 5, 3)))
    _grads_match(lambda x: tuple(wg.linalg.lu(x)), lambda x: tuple(L.lu(x)), rng.standard_normal((3, 5)))
    _grads_match(lambda x: wg.linalg.lu_factor(x).LU, lambda x: L.lu_factor(x).LU, a)
    for name in ("inv", "det", "logdet"):
        _grads_match(getattr(wg, "inverse" if name == "inv" else name), getattr(torch, "inverse" if name == "inv"
                                                                              else name), a)
    _grads_match(lambda x: tuple(wg.linalg.slogdet(x)), lambda x: tuple(L.slogdet(x)), a)
    _grads_match(wg.linalg.solve, L.solve, a, b)
    _grads_match(lambda x, y: wg.linalg.solve(x, y, left=False), lambda x, y: L.solve(x, y, left=False),
                 a, np.swapaxes(b, -1, -2))
    _grads_match(wg.linalg.solve, L.solve, a, b[0, :, 0])  # a vector, broadcast over A's batch
    LU, piv = L.lu_factor(torch.tensor(a))
    for left in (True, False):
        for adjoint in (True, False):
            rhs = b if left else np.swapaxes(b, -1, -2)
            _grads_match(lambda x, y: wg.linalg.lu_solve(x, wg.tensor(piv.numpy()), y, left=left, adjoint=adjoint),
                         lambda x, y: L.lu_solve(x, piv, y, left=left, adjoint=adjoint), LU.numpy(), rhs)
    _grads_match(lambda x: wg.linalg.matrix_power(x, -2), lambda x: L.matrix_power(x, -2), a)
    _grads_match(lambda x: wg.linalg.det(x), lambda x: L.det(x), rng.standard_normal((1, 1)))


def test_gradients_of_triangular_cholesky_match_torch():
    rng = np.random.default_rng(6)
    a = _well_conditioned(rng, (2, 4, 4))
    b = rng.standard_normal((3, 1, 4, 2))
    for upper in (True, False):
        for left in (True, False):
            rhs = b if left else np.swapaxes(b, -1, -2)
            _grads_match(lambda x, y: wg.linalg.solve_triangular(x, y, upper=upper, left=left),
                         lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left), a, rhs)
        _grads_match(lambda x, y: tuple(wg.triangular_solve(y, x, upper, True, True)),
                     lambda x, y: tuple(torch.triangular_solve(y, x, upper, True, True)), a, b[0])
        spd = _spd(rng, (2, 4, 4))
        _grads_match(lambda x: wg.linalg.cholesky(x, upper=upper), lambda x: torch.linalg.cholesky(x, upper=upper),
                     spd)
        factor = np.linalg.cholesky(spd)
        factor = np.swapaxes(factor, -1, -2) if upper else factor
        _grads_match(lambda y, f: wg.cholesky_solve(y, f, upper), lambda y, f: torch.cholesky_solve(y, f, upper),
                     b[0], factor)
        _grads_match(lambda f: wg.cholesky_inverse(f[0], upper), lambda f: torch.cholesky_inverse(f[0], upper),
                     factor)


def test_gradients_of_qr_eigh_svd_match_torch():
    rng = np.random.default_rng(7)
    for shape in ((2, 4, 4), (5, 3), (3, 5)):
        a = rng.standard_normal(shape)
        _grads_match(lambda x: tuple(wg.linalg.qr(x)), lambda x: tuple(torch.linalg.qr(x)), a)
        # sign-invariant functions of the singular vectors
        _grads_match(lambda x: (lambda r: (r.U @ r.Vh, r.S))(wg.linalg.svd(x, full_matrices=False)),
                     lambda x: (lambda r: (r.U @ r.Vh, r.S))(torch.linalg.svd(x, full_matrices=False)), a)
        _grads_match(wg.linalg.svdvals, torch.linalg.svdvals, a)
        _grads_match(wg.linalg.pinv, torch.linalg.pinv, a)
    sym = rng.standard_normal((2, 4, 4))
    sym = sym + np.swapaxes(sym, -1, -2)
    _grads_match(lambda x: (lambda r: (r[0], r[1] * r[1]))(wg.linalg.eigh(x)),
                 lambda x: (lambda r: (r[0], r[1] * r[1]))(torch.linalg.eigh(x)), sym)
    _grads_match(wg.linalg.eigvalsh, torch.linalg.eigvalsh, sym)
    _grads_match(wg.linalg.matrix_exp, torch.linalg.matrix_exp, rng.standard_normal((2, 3, 3)))


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck(device):
    rng = np.random.default_rng(8)
    a = _well_conditioned(rng, (2, 3, 3))
    gradcheck(wg.linalg.inv, a, device=device)
    gradcheck(wg.linalg.solve, a, rng.standard_normal((2, 3, 2)), device=device)
    gradcheck(lambda x: wg.linalg.slogdet(x).logabsdet, a, device=device)
    gradcheck(lambda x: wg.linalg.solve_triangular(x, x[..., :2], upper=True), a, device=device)
    if device == "cpu":  # (finite differences of factorizations need float64 steps)
        gradcheck(lambda x: wg.linalg.cholesky(x @ x.mT + 3 * wg.eye(3, dtype=x.dtype)), a)
        gradcheck(lambda x: tuple(wg.linalg.qr(x)), rng.standard_normal((4, 3)))
        gradcheck(lambda x: wg.linalg.svdvals(x), rng.standard_normal((4, 3)))
        gradcheck(lambda x: wg.linalg.eigvalsh(x + x.mT), rng.standard_normal((3, 3)))


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    singular = _wg(np.array([[1.0, 2.0], [2.0, 4.0]]), device)
    indefinite = _wg(np.array([[1.0, 2.0], [2.0, 1.0]]), device)
    assert issubclass(wg.linalg.LinAlgError, RuntimeError)
    with pytest.raises(wg.linalg.LinAlgError, match="The diagonal element 2 is zero"):
        wg.linalg.inv(singular)
    with pytest.raises(wg.linalg.LinAlgError, match=r"\(Batch element 1\)"):
        wg.linalg.inv(wg.stack([wg.eye(2, dtype=singular.dtype, device=device), singular]))
    with pytest.raises(wg.linalg.LinAlgError, match="input matrix is singular"):
        wg.linalg.solve(singular, _wg(np.ones(2), device))
    with pytest.raises(wg.linalg.LinAlgError, match="leading minor of order 2 is not positive-definite"):
        wg.linalg.cholesky(indefinite)
    with pytest.raises(RuntimeError, match="U\\[2,2\\] is zero"):
        wg.linalg.lu_factor(singular)
    assert wg.linalg.inv_ex(singular).info.item() == 2
    assert wg.linalg.cholesky_ex(indefinite).info.item() == 2
    with pytest.raises(RuntimeError, match="2 by 3 matrices"):
        wg.linalg.inv(_wg(np.ones((2, 3)), device))
    with pytest.raises(RuntimeError, match="Expected a floating point"):
        wg.linalg.det(wg.ones(2, 2, dtype=wg.int64, device=device))
    with pytest.raises(RuntimeError, match="Incompatible shapes"):
        wg.linalg.solve_triangular(_wg(np.eye(3), device), _wg(np.ones((2, 1)), device), upper=True)
    with pytest.raises(RuntimeError, match="mode='r'"):
        wg.linalg.qr(_wg(np.eye(3), device).requires_grad_(True), mode="r").R.sum().backward()


def test_methods_and_torch_names():
    a = wg.tensor(_well_conditioned(np.random.default_rng(9), (3, 3)))
    ta = torch.tensor(a.numpy())
    for name in ("inverse", "det", "logdet", "pinverse", "matrix_exp"):
        _close(getattr(a, name)(), getattr(ta, name)(), "cpu", rtol=1e-6)
    assert wg.slogdet(a)._fields == ("sign", "logabsdet") and a.slogdet()._fields == ("sign", "logabsdet")
    assert wg.linalg.qr(a)._fields == ("Q", "R") and wg.linalg.eigh(a)._fields == ("eigenvalues", "eigenvectors")
    assert wg.linalg.lu_factor(a)._fields == ("LU", "pivots")
    U, S, V = a.svd()
    _close(U @ wg.diag_embed(S) @ V.mT, a.numpy(), "cpu")
    LU, _ = a.lu()
    _close(LU, ta.lu()[0], "cpu")
    _close(a.matrix_power(-1), ta.matrix_power(-1), "cpu")
    spd = a @ a.mT
    _close(spd.cholesky(), torch.tensor(spd.numpy()).cholesky(), "cpu")
    out = wg.empty(3, 3, dtype=wg.float64)
    assert wg.linalg.inv(a, out=out) is out


@pytest.mark.parametrize("n,rank", [(24, 24), (40, 3), (50, 50), (50, 1), (64, 64)])
def test_decompositions_of_larger_and_rank_deficient_matrices(device, n, rank):
    # across the Jacobi kernels' order limit on WebGPU (JACOBI_MAX_ORDER: larger ones run on the host), and a
    # rank-one matrix, whose zero singular values pinv must drop
    rng = np.random.default_rng(n + rank)
    a = (rng.standard_normal((n, rank)) @ rng.standard_normal((rank, n))).astype(np.float32)
    A = wg.tensor(a, device=device)
    s = wg.linalg.svdvals(A).to("cpu").numpy()
    ref = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    assert np.abs(s - ref).max() <= 2e-5 * ref.max()
    sym = a + a.T
    e = wg.linalg.eigvalsh(wg.tensor(sym, device=device)).to("cpu").numpy()
    assert np.abs(e - np.linalg.eigvalsh(sym.astype(np.float64))).max() <= 2e-5 * np.abs(sym).max()
    U, S, Vh = wg.linalg.svd(A, full_matrices=False)
    np.testing.assert_allclose(((U * S.unsqueeze(-2)) @ Vh).to("cpu").numpy(), a, atol=2e-5 * ref.max())
    if rank < n:
        import torch
        p = wg.linalg.pinv(A).to("cpu").numpy()
        ref_p = torch.linalg.pinv(torch.from_numpy(a)).numpy()  # float32's cutoff: eps * n * the largest value
        np.testing.assert_allclose(p, ref_p, atol=1e-4 * np.abs(ref_p).max())
