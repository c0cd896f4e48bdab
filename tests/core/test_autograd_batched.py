"""The autograd options built on vmap (autograd.grad's is_grads_batched, autograd.functional's vectorize and
strategy="forward-mode", gradcheck's check_batched_grad) and torch.autograd.forward_ad (with gradcheck's
check_forward_ad), against PyTorch's."""

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfwd

import webgrad as wg
import webgrad.autograd.forward_ad as wfwd
from helpers import webgpu_available

RNG = np.random.default_rng(0)


def _arr(*shape):
    return RNG.standard_normal(shape)


def _np(x):
    if isinstance(x, wg.Tensor):
        return np.asarray(x.detach().cpu().tolist(), dtype=np.float64).reshape(tuple(x.shape))
    return x.detach().numpy().astype(np.float64)


def _same(w, t, tol=1e-6):
    if isinstance(t, (tuple, list)):
        assert type(w) is type(t) and len(w) == len(t)
        for a, b in zip(w, t):
            _same(a, b, tol)
        return
    if t is None:
        assert w is None
        return
    assert tuple(w.shape) == tuple(t.shape)
    np.testing.assert_allclose(_np(w), _np(t), rtol=tol, atol=tol)


def _mlp(lib):
    def f(x, w):
        return (x @ w).tanh() * x.sum()
    return f


def test_grad_is_grads_batched_matches_torch():
    xs, ws = _arr(2, 3), _arr(3, 3)
    seeds, scalar_seeds = _arr(4, 2, 3), _arr(4)
    results = {}
    for lib in (torch, wg):
        x, w = lib.tensor(xs, requires_grad=True), lib.tensor(ws, requires_grad=True)
        unused = lib.tensor(_arr(3), requires_grad=True)
        out = _mlp(lib)(x, w)
        results[lib] = lib.autograd.grad(out, (x, w, unused), lib.tensor(seeds), retain_graph=True,
                                         allow_unused=True, is_grads_batched=True)
        assert results[lib][2] is None
        # a batch of seeds for a scalar output is a vector; the one grad makes for it (None) cannot be mapped
        results[lib, "scalar"] = lib.autograd.grad((out, out.sum()), x, (lib.tensor(seeds), lib.tensor(scalar_seeds)),
                                                   retain_graph=True, is_grads_batched=True)
        with pytest.raises(ValueError, match="in_dim"):
            lib.autograd.grad((out, out.sum()), x, (lib.tensor(seeds), None), retain_graph=True,
                              is_grads_batched=True)
        zero = lib.autograd.grad(out, (x, unused), lib.tensor(seeds), retain_graph=True, materialize_grads=True,
                                 is_grads_batched=True)[1]
        assert tuple(zero.shape) == (3,) and not bool(zero.any())  # unbatched zeros, as PyTorch's
        with pytest.raises(RuntimeError, match="is_grads_batched=True"):
            lib.autograd.grad(out, x, lib.tensor(_arr(4, 3, 2)), retain_graph=True, is_grads_batched=True)
    _same(results[wg][:2], results[torch][:2])
    _same(results[wg, "scalar"], results[torch, "scalar"])


def test_grad_is_grads_batched_keeps_a_graph_and_frees_it_after():
    xs, seeds = _arr(3), _arr(2, 3)
    grads = {}
    for lib in (torch, wg):
        x = lib.tensor(xs, requires_grad=True)
        out = x.sin() * x
        (g,) = lib.autograd.grad(out, x, lib.tensor(seeds), create_graph=True, is_grads_batched=True)
        assert g.requires_grad
        g.sum().backward()
        grads[lib] = x.grad
        out2 = x.exp()
        lib.autograd.grad(out2, x, lib.tensor(seeds), is_grads_batched=True)  # retain_graph defaults to False
        with pytest.raises(RuntimeError):
            lib.autograd.grad(out2, x, lib.tensor(seeds), is_grads_batched=True)
    _same(grads[wg], grads[torch])


def _outputs_of_two(a, b):
    return a.sin() * b.sum(), (a * a).sum(), b.exp() * 0 + 1.0


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
def test_jacobian_vectorize_matches_torch(strategy):
    xs, ys = _arr(3), _arr(2, 2)
    jac = {}
    for lib in (torch, wg):
        args = (lib.tensor(xs), lib.tensor(ys))
        jac[lib] = lib.autograd.functional.jacobian(_outputs_of_two, args, vectorize=True, strategy=strategy)
        loop = lib.autograd.functional.jacobian(_outputs_of_two, args)
        if strategy == "forward-mode":  # nested in lists (PyTorch's forward mode), the same tensors
            loop = [list(row) for row in loop]
        _same(jac[lib], loop)
        single_out = lib.autograd.functional.jacobian(lambda a, b: a * b.sum(), args, vectorize=True,
                                                      strategy=strategy)
        single_in = lib.autograd.functional.jacobian(lambda a: (a.sin(), a), args[0], vectorize=True,
                                                     strategy=strategy)
        jac[lib, "structures"] = (single_out, single_in)
        one = lib.autograd.functional.jacobian(lambda a: a.tanh(), args[0], vectorize=True, strategy=strategy)
        assert tuple(one.shape) == (3, 3)
    _same(jac[wg], jac[torch])
    _same(jac[wg, "structures"], jac[torch, "structures"])


def test_hessian_vectorize_matches_torch():
    xs, ys = _arr(3), _arr(2, 2)

    def scalar(a, b):
        return (a.sin() * b.sum() * a).sum() + (b * b * b).sum()

    hess = {}
    for lib in (torch, wg):
        args = (lib.tensor(xs), lib.tensor(ys))
        hess[lib] = lib.autograd.functional.hessian(scalar, args, vectorize=True)
        hess[lib, "fwd"] = lib.autograd.functional.hessian(scalar, args, vectorize=True,
                                                           outer_jacobian_strategy="forward-mode")
        x = lib.tensor(xs, requires_grad=True)
        h = lib.autograd.functional.hessian(lambda a: (a ** 3).sum(), x, vectorize=True, create_graph=True)
        assert h.requires_grad
        h.sum().backward()
        hess[lib, "grad"] = x.grad
    for key in ((), ("fwd",), ("grad",)):
        _same(hess[(wg,) + key] if key else hess[wg], hess[(torch,) + key] if key else hess[torch])


def test_jacobian_option_errors_match_torch():
    for lib in (torch, wg):
        x = lib.tensor(_arr(3))
        F = lib.autograd.functional
        cases = [(dict(strict=True, vectorize=True), RuntimeError, "vectorized=True"),
                 (dict(strategy="forward-mode"), NotImplementedError, "only implemented for `vectorize=True`"),
                 (dict(strategy="forward-mode", vectorize=True, create_graph=True), NotImplementedError,
                  "create_graph=True"),
                 (dict(strategy="forward-mode", vectorize=True, strict=True), RuntimeError, "strict=True"),
                 (dict(strategy="sideways"), AssertionError, "reverse-mode")]
        for kwargs, error, message in cases:
            with pytest.raises(error, match=message):
                F.jacobian(lambda a: a.sin(), x, **kwargs)


def test_gradcheck_check_batched_grad():
    a = wg.tensor(_arr(3, 2), requires_grad=True)
    b = wg.tensor(_arr(3, 2), requires_grad=True)
    f = lambda x, y: (x * y.sin()).sum(1)  # noqa: E731
    assert wg.autograd.gradcheck(f, (a, b), check_batched_grad=True)
    assert wg.autograd.gradgradcheck(f, (a, b), check_batched_grad=True)
    with pytest.raises(AssertionError, match="check_backward_ad"):
        wg.autograd.gradcheck(f, (a, b), check_batched_grad=True, check_backward_ad=False)

    class NoisyBackward(wg.autograd.Function):
        """A correct gradient plus noise too small for the finite differences: each seed alone and the batch
        give different numbers, which the batched test reports (vmap refuses its random op)."""

        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2 + wg.randn_like(grad) * 1e-12

    x = wg.tensor(_arr(3), requires_grad=True)
    assert wg.autograd.gradcheck(NoisyBackward.apply, (x,), nondet_tol=1e-9)
    with pytest.raises(wg.autograd.GradcheckError, match="batched gradients"):
        wg.autograd.gradcheck(NoisyBackward.apply, (x,), nondet_tol=1e-9, check_batched_grad=True)
    assert wg.autograd.gradcheck(NoisyBackward.apply, (x,), nondet_tol=1e-9, check_batched_grad=True,
                                 raise_exception=False) is False


def test_gradcheck_check_forward_ad():
    a = wg.tensor(_arr(3, 2), requires_grad=True)
    b = wg.tensor(_arr(3, 2), requires_grad=True)
    f = lambda x, y: (x * y.sin()).sum(1)  # noqa: E731
    assert wg.autograd.gradcheck(f, (a, b), check_forward_ad=True, check_batched_forward_grad=True)
    assert wg.autograd.gradcheck(f, (a, b), check_forward_ad=True, check_backward_ad=False)
    assert wg.autograd.gradgradcheck(lambda x: (x.tanh() * x).softmax(0), (a,), check_fwd_over_rev=True)
    wrong = lambda x: x.detach() * 2 + x * 0  # noqa: E731  (a Jacobian of zeros: wrong)
    with pytest.raises(wg.autograd.GradcheckError, match="Jacobian computed with forward mode mismatch"):
        wg.autograd.gradcheck(wrong, (a,), check_forward_ad=True, check_backward_ad=False)
    t = torch.tensor(_arr(2), requires_grad=True)
    for lib, x in ((wg, a), (torch, t)):
        with pytest.raises(AssertionError, match="at least one of check_forward_ad or check_backward_ad"):
            lib.autograd.gradcheck(lambda v: v * 2, (x,), check_backward_ad=False)
        with pytest.raises(AssertionError, match="requires check_forward_ad"):
            lib.autograd.gradcheck(lambda v: v * 2, (x,), check_batched_forward_grad=True)


def _dual_results(lib, fwd, xs, ts, ws):
    """What the forward-AD tutorial's uses give: tangents of elementwise, linear and fused ops, of a dual
    itself, of a tensor made without duals, and after the level closed."""
    x, t, w = lib.tensor(xs), lib.tensor(ts), lib.tensor(ws)
    out = {}
    with fwd.dual_level():
        dual = fwd.make_dual(x, t)
        out["self"] = fwd.unpack_dual(dual).tangent
        y = (w @ dual.sin()).tanh()
        primal, out["mlp"] = fwd.unpack_dual(y)
        out["primal"] = primal
        out["primal_tangent"] = fwd.unpack_dual(primal).tangent
        out["plain"] = fwd.unpack_dual(x * 2).tangent
        out["detached"] = fwd.unpack_dual(dual.detach() * 2).tangent
        out["zero"] = fwd.unpack_dual(dual * 0).tangent
        out["softmax"] = fwd.unpack_dual(lib.nn.functional.softmax(dual, 0)).tangent
        out["layer_norm"] = fwd.unpack_dual(lib.nn.functional.layer_norm(dual, (3,))).tangent
        out["sum"] = fwd.unpack_dual(dual.sum()).tangent
    out["after"] = fwd.unpack_dual(y).tangent
    out["outside"] = fwd.unpack_dual(y)
    return out


def test_forward_ad_matches_torch():
    xs, ts, ws = _arr(3), _arr(3), _arr(4, 3)
    w, t = _dual_results(wg, wfwd, xs, ts, ws), _dual_results(torch, tfwd, xs, ts, ws)
    for key in t:
        if key != "outside":
            _same(w[key], t[key])
    assert w["outside"].tangent is None and isinstance(w["outside"], wfwd.UnpackedDualTensor)


def test_forward_ad_tangent_is_differentiable():
    xs, ts = _arr(3), _arr(3)
    grads = {}
    for lib, fwd in ((torch, tfwd), (wg, wfwd)):
        x, t = lib.tensor(xs, requires_grad=True), lib.tensor(ts, requires_grad=True)
        with fwd.dual_level():
            tangent = fwd.unpack_dual(fwd.make_dual(x, t).exp() * x).tangent
        assert tangent.requires_grad
        tangent.sum().backward()
        grads[lib] = (x.grad, t.grad)
    _same(grads[wg], grads[torch])


def test_forward_ad_errors():
    x = wg.tensor(_arr(3))
    for lib, fwd in ((torch, tfwd), (wg, wfwd)):
        x = lib.tensor(_arr(3))
        with pytest.raises(RuntimeError, match="no level exists"):
            fwd.make_dual(x, x)
        with fwd.dual_level():
            with pytest.raises(RuntimeError, match="different size"):
                fwd.make_dual(x, lib.tensor(_arr(2)))
            with pytest.raises(ValueError, match="floating point"):
                fwd.make_dual(lib.tensor([1, 2]), x[:2])
            with pytest.raises(RuntimeError, match="Nested forward mode"):
                with fwd.dual_level():
                    pass
    with wfwd.dual_level(), wg.no_grad():  # refused, where PyTorch allows it: no graph would carry the tangent
        with pytest.raises(NotImplementedError, match="no_grad"):
            wfwd.make_dual(x, x)


@pytest.mark.skipif(not webgpu_available(), reason="no WebGPU adapter")
def test_batched_grad_and_forward_ad_on_webgpu():
    xs, ts, seeds = _arr(3).astype(np.float32), _arr(3).astype(np.float32), _arr(2, 3).astype(np.float32)
    x = wg.tensor(xs, device="webgpu", requires_grad=True)
    (g,) = wg.autograd.grad(x.sin() * x, x, wg.tensor(seeds, device="webgpu"), is_grads_batched=True)
    xt = torch.tensor(xs, requires_grad=True)
    (gt,) = torch.autograd.grad(xt.sin() * xt, xt, torch.tensor(seeds), is_grads_batched=True)
    _same(g, gt, tol=1e-5)
    with wfwd.dual_level():
        tangent = wfwd.unpack_dual(wfwd.make_dual(x.detach(), wg.tensor(ts, device="webgpu")).tanh()).tangent
    _same(tangent, torch.tensor(ts) * (1 - torch.tensor(xs).tanh() ** 2), tol=1e-5)
