"""The rest of torch.distributions against PyTorch: ContinuousBernoulli, ExponentialFamily, GeneralizedPareto,
Kumaraswamy, LKJCholesky, VonMises, Wishart and the Cat, CorrCholesky, CumulativeDistribution, Reshape and Stack
transforms. Densities, entropies, moments and CDFs value for value; shapes and expand; sample moments with a fixed
seed and loose tolerances; reparameterised gradients; KL pairs; validation errors; one WebGPU case."""

import math
import warnings

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.distributions as D
from webgrad.distributions.utils import tril_matrix_to_vec, vec_to_tril_matrix

from tests.helpers import webgpu_available

TD = torch.distributions
RNG = np.random.default_rng(0)


def _np(t):
    return t.detach().to("cpu").numpy()


def _f32(*shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape).astype(np.float32)


def _both(*arrays, requires_grad=False):
    """Each array as a (webgrad, torch) pair of float32 tensors."""
    return [(wg.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad))
            for a in arrays]


def _close(a, b, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(_np(a), b.detach().numpy(), rtol=rtol, atol=atol)


def _spd(batch, n):
    a = RNG.standard_normal((*batch, n, n)).astype(np.float32)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=np.float32)


_COV = _spd((2,), 3)
_DF = np.array([4.0, 6.5], dtype=np.float32)

# name -> (constructor name, parameters, keyword arguments, values to score, properties to compare)
CASES = {
    "cb_probs": ("ContinuousBernoulli", {"probs": np.array([0.1, 0.3, 0.4995, 0.5, 0.5005, 0.8], np.float32)}, {},
                 _f32(4, 6, low=0.01, high=0.99), ("mean", "variance", "stddev", "entropy", "cdf", "icdf")),
    "cb_logits": ("ContinuousBernoulli", {"logits": np.array([-3.0, -0.5, 0.0, 0.002, 1.5], np.float32)}, {},
                  _f32(3, 5, low=0.01, high=0.99), ("mean", "variance", "entropy", "cdf", "icdf")),
    "gpd": ("GeneralizedPareto", {"loc": np.array([0.0, 0.5, -1.0], np.float32),
                                  "scale": np.array([1.0, 2.0, 0.5], np.float32),
                                  "concentration": np.array([0.3, 0.0, -0.4], np.float32)}, {},
            np.array([[0.5, 1.0, -0.9], [2.0, 3.0, 0.1]], np.float32),
            ("mean", "variance", "mode", "entropy", "cdf", "icdf", "log_cdf", "log_survival_function")),
    "gpd_heavy": ("GeneralizedPareto", {"loc": np.zeros(2, np.float32), "scale": np.ones(2, np.float32),
                                        "concentration": np.array([0.7, 1.2], np.float32)}, {},
                  np.array([[0.5, 3.0]], np.float32), ("mean", "variance", "entropy", "cdf")),
    "kumaraswamy": ("Kumaraswamy", {"concentration1": np.array([2.0, 0.5, 1.5], np.float32),
                                    "concentration0": np.array([3.0, 2.0, 0.7], np.float32)}, {},
                    _f32(4, 3, low=0.05, high=0.95), ("mean", "variance", "entropy")),
    "von_mises": ("VonMises", {"loc": np.array([0.5, -2.0, 3.0, 0.0], np.float32),
                               "concentration": np.array([0.3, 2.0, 20.0, 4.0], np.float32)}, {},
                  _f32(5, 4, low=-6, high=6), ("mean", "mode", "variance")),
    "wishart_cov": ("Wishart", {"df": _DF, "covariance_matrix": _COV}, {}, _spd((2,), 3),
                    ("mean", "mode", "variance", "entropy", "covariance_matrix", "precision_matrix", "scale_tril")),
    "wishart_prec": ("Wishart", {"df": _DF, "precision_matrix": _COV}, {}, _spd((4, 2), 3),
                     ("mean", "variance", "entropy", "covariance_matrix", "scale_tril")),
    "wishart_tril": ("Wishart", {"df": np.float32(5.0), "scale_tril": np.linalg.cholesky(_COV)}, {}, _spd((2,), 3),
                     ("mean", "variance", "entropy", "precision_matrix")),
}


def _make(name, requires_grad=False):
    cls, params, kwargs, _, _ = CASES[name]
    pairs = _both(*params.values(), requires_grad=requires_grad)
    ours = getattr(D, cls)(**dict(zip(params, (p[0] for p in pairs))), **kwargs)
    theirs = getattr(TD, cls)(**dict(zip(params, (p[1] for p in pairs))), **kwargs)
    return ours, theirs, pairs


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_torch(name):
    ours, theirs, _ = _make(name)
    values = CASES[name][3]
    tol = dict(rtol=2e-4, atol=2e-4) if name.startswith("wishart") else {}
    _close(ours.log_prob(wg.tensor(values)), theirs.log_prob(torch.tensor(values)), **tol)
    for prop in CASES[name][4]:
        if prop in ("cdf", "log_cdf", "log_survival_function"):
            _close(getattr(ours, prop)(wg.tensor(values)), getattr(theirs, prop)(torch.tensor(values)))
        elif prop == "icdf":
            q = _f32(*values.shape, low=0.02, high=0.98)
            _close(ours.icdf(wg.tensor(q)), theirs.icdf(torch.tensor(q)), rtol=1e-4)
        elif prop == "entropy":
            _close(ours.entropy(), theirs.entropy(), **tol)
        else:
            _close(getattr(ours, prop), getattr(theirs, prop), **tol)
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    assert tuple(ours.event_shape) == tuple(theirs.event_shape)


def test_lkj_cholesky_log_prob_and_shapes():
    conc = np.array([[0.5, 1.0, 2.5]], np.float32)
    for dim in (2, 4):
        ours, theirs = D.LKJCholesky(dim, wg.tensor(conc)), TD.LKJCholesky(dim, torch.tensor(conc))
        torch.manual_seed(0)
        value = theirs.sample((5,))
        _close(ours.log_prob(wg.tensor(value.numpy())), theirs.log_prob(value), rtol=1e-4)
        assert tuple(ours.batch_shape) == (1, 3) and tuple(ours.event_shape) == (dim, dim)
        assert tuple(ours.sample((2,)).shape) == (2, 1, 3, dim, dim)
        expanded = ours.expand((4, 3))
        assert tuple(expanded.sample().shape) == (4, 3, dim, dim)
        _close(expanded.log_prob(wg.tensor(value[0].numpy())), theirs.expand((4, 3)).log_prob(value[0]), rtol=1e-4)
    scalar = D.LKJCholesky(3, 2.0)
    assert tuple(scalar.batch_shape) == () and not scalar.has_rsample
    assert scalar.support is D.constraints.corr_cholesky


def test_kumaraswamy_mode():
    """((a - 1) / (a b - 1))^(1 / a) where a, b >= 1 (PyTorch's mode is NaN everywhere: checked against the density's
    argmax on a grid instead)."""
    a, b = np.array([2.0, 3.0, 1.0, 0.5], np.float32), np.array([3.0, 1.0, 2.0, 2.0], np.float32)
    mode = _np(D.Kumaraswamy(wg.tensor(a), wg.tensor(b)).mode)
    grid = np.linspace(1e-4, 1 - 1e-4, 20001)
    density = a[:2, None] * b[:2, None] * grid ** (a[:2, None] - 1) * (1 - grid ** a[:2, None]) ** (b[:2, None] - 1)
    np.testing.assert_allclose(mode[:2], grid[density.argmax(-1)], atol=1e-3)
    assert mode[2] == pytest.approx(0.0, abs=1e-6) and np.isnan(mode[3])


@pytest.mark.parametrize("name", sorted(CASES))
def test_expand_and_sample_shapes(name):
    ours, theirs, _ = _make(name)
    batch = tuple(theirs.batch_shape)
    new_batch = (3,) + (batch if batch else (2,))
    expanded, expanded_torch = ours.expand(new_batch), theirs.expand(new_batch)
    assert type(expanded) is type(ours) and tuple(expanded.batch_shape) == new_batch
    assert tuple(expanded.sample((2,)).shape) == (2, *new_batch, *theirs.event_shape)
    if ours.has_rsample:
        assert tuple(ours.rsample((4,)).shape) == (4, *batch, *theirs.event_shape)
    assert ours.has_rsample == theirs.has_rsample
    values = CASES[name][3][-1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _close(expanded.log_prob(wg.tensor(values)), expanded_torch.log_prob(torch.tensor(values)),
               rtol=2e-4, atol=2e-4)


def test_scalar_parameters_give_an_empty_batch_shape():
    assert tuple(D.ContinuousBernoulli(0.3).batch_shape) == ()
    assert tuple(D.GeneralizedPareto(0.0, 1.0, 0.2).batch_shape) == ()
    assert tuple(D.Kumaraswamy(2.0, 3.0).batch_shape) == ()
    assert tuple(D.Wishart(4.0, covariance_matrix=wg.eye(3)).batch_shape) == ()
    assert tuple(D.ContinuousBernoulli(0.3).sample((5,)).shape) == (5,)


def _mean_of_samples(dist, n):
    wg.manual_seed(0)
    return _np(dist.sample((n,))).mean(0)


@pytest.mark.parametrize("name", ["cb_probs", "gpd", "kumaraswamy", "wishart_cov"])
def test_sample_means(name):
    ours, theirs, _ = _make(name)
    mean = theirs.mean.numpy()
    n = 4000 if name.startswith("wishart") else 20000
    spread = theirs.stddev.numpy() if not name.startswith("wishart") else theirs.variance.sqrt().numpy()
    np.testing.assert_array_less(np.abs(_mean_of_samples(ours, n) - mean), 5 * spread / math.sqrt(n) + 1e-3)


def test_von_mises_samples():
    ours, theirs, _ = _make("von_mises")
    wg.manual_seed(0)
    angles = _np(ours.sample((20000,)))
    assert angles.dtype == np.float32 and np.all(np.abs(angles) <= math.pi)
    resultant = np.exp(1j * angles).mean(0)
    np.testing.assert_allclose(np.angle(resultant), theirs.mean.numpy(), atol=0.1)
    np.testing.assert_allclose(1 - np.abs(resultant), theirs.variance.numpy(), atol=0.02)
    # a concentration far below float32's resolution of the direct proposal formula: near-uniform angles, no stall
    flat = _np(D.VonMises(wg.zeros(1), wg.full((1,), 1e-6)).sample((4000,)))
    assert abs(flat.std() - math.pi / math.sqrt(3)) < 0.05


def test_lkj_cholesky_sample_moments():
    wg.manual_seed(0)
    conc = np.array([0.5, 2.0], np.float32)
    samples = D.LKJCholesky(3, wg.tensor(conc)).sample((4000,))
    assert bool(D.constraints.corr_cholesky.check(samples).all().item())
    corr = _np(samples @ samples.mT)
    # each off-diagonal correlation is Beta(eta - 1 + d / 2, same) on (-1, 1): variance 1 / (2 eta + d - 1)
    for i, j in ((1, 0), (2, 0), (2, 1)):
        np.testing.assert_allclose(corr[:, :, i, j].var(0), 1 / (2 * conc + 2), rtol=0.1)


def test_wishart_singular_samples_are_redrawn():
    dist = D.Wishart(wg.tensor(2.05), covariance_matrix=wg.eye(3) * 1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wg.manual_seed(0)
        sample = dist.rsample((200,))
    assert tuple(sample.shape) == (200, 3, 3)
    assert np.isfinite(_np(sample)).all()


def test_continuous_bernoulli_rsample_is_the_icdf_and_its_gradient_matches_torch():
    for key in ("probs", "logits"):
        name = "cb_" + key
        ours, theirs, ((w, t),) = _make(name, requires_grad=True)
        u = _f32(3, w.shape[0], low=0.02, high=0.98)
        ours.icdf(wg.tensor(u)).sum().backward()
        theirs.icdf(torch.tensor(u)).sum().backward()
        _close(w.grad, t.grad, rtol=1e-3, atol=1e-4)
        w.grad = None
        D.ContinuousBernoulli(**{key: w}).rsample((2,)).sum().backward()
        assert w.grad is not None and np.isfinite(_np(w.grad)).all()
    ours, theirs, ((w, t),) = _make("cb_probs", requires_grad=True)
    values = CASES["cb_probs"][3]
    ours.log_prob(wg.tensor(values)).sum().backward()
    theirs.log_prob(torch.tensor(values)).sum().backward()
    _close(w.grad, t.grad, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("name", ["gpd", "kumaraswamy"])
def test_pathwise_gradient_of_the_mean(name):
    """d/dtheta of the mean of rsample draws approaches d/dtheta of the analytic mean (both sides webgrad; the
    analytic one checked against torch's)."""
    ours, theirs, pairs = _make(name, requires_grad=True)
    wg.manual_seed(0)
    ours.rsample((40000,)).mean(0).sum().backward()
    pathwise = [_np(w.grad) for w, _ in pairs]
    for w, _ in pairs:
        w.grad = None
    ours.mean.sum().backward()
    theirs.mean.sum().backward()
    for (w, t), estimate in zip(pairs, pathwise):
        _close(w.grad, t.grad, rtol=1e-4, atol=1e-5)
        expected = t.grad.numpy()
        if name == "gpd" and w is pairs[2][0]:
            # at concentration 0 exactly, samples follow the exponential branch, which does not depend on the
            # concentration: the pathwise gradient is 0 there, in PyTorch as here
            expected = np.where(CASES[name][1]["concentration"] == 0, 0.0, expected)
        np.testing.assert_allclose(estimate, expected, rtol=0.1, atol=0.05)


def test_wishart_rsample_gradient():
    """E[X] = df Sigma: the pathwise gradient of the sample mean in the scale_tril L and in df approaches the
    analytic one's."""
    L = np.linalg.cholesky(_COV[0]).astype(np.float32)
    (tril, tril_t), (df, df_t) = _both(L, np.float32(5.0), requires_grad=True)
    weights = _f32(3, 3)
    wg.manual_seed(0)
    sample = D.Wishart(df, scale_tril=tril).rsample((20000,)).mean(0)
    (sample * wg.tensor(weights)).sum().backward()
    (TD.Wishart(df_t, scale_tril=tril_t).mean * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(_np(tril.grad), tril_t.grad.numpy(), rtol=0.1, atol=0.15 * np.abs(tril_t.grad).max())
    np.testing.assert_allclose(_np(df.grad), df_t.grad.numpy(), rtol=0.1)


def test_exponential_family_entropy_by_bregman_divergence():
    for name in ("cb_probs", "cb_logits", "wishart_cov"):
        ours, theirs, _ = _make(name)
        assert isinstance(ours, D.ExponentialFamily)
        _close(D.ExponentialFamily.entropy(ours), TD.ExponentialFamily.entropy(theirs), rtol=1e-3, atol=1e-3)


def _kl_pairs():
    cb = ({"probs": np.array([0.2, 0.4998, 0.9], np.float32)}, {"logits": np.array([1.0, -0.3, 0.01], np.float32)})
    return {
        "cb_cb": (("ContinuousBernoulli", cb[0]), ("ContinuousBernoulli", cb[1])),
        "beta_cb": (("Beta", {"concentration1": np.array([0.5, 2.0, 3.0], np.float32),
                              "concentration0": np.array([1.5, 2.0, 0.7], np.float32)}),
                    ("ContinuousBernoulli", cb[0])),
        "cb_exponential": (("ContinuousBernoulli", cb[1]),
                           ("Exponential", {"rate": np.array([0.5, 1, 3], np.float32)})),
        "cb_normal": (("ContinuousBernoulli", cb[0]), ("Normal", {"loc": np.array([0, 0.5, 2], np.float32),
                                                                 "scale": np.array([1, 0.3, 2], np.float32)})),
        "cb_uniform": (("ContinuousBernoulli", cb[0]), ("Uniform", {"low": np.array([-1, 0, -0.5], np.float32),
                                                                   "high": np.array([2, 3, 1], np.float32)})),
        "uniform_cb": (("Uniform", {"low": np.array([0.1, 0, 0.2], np.float32),
                                    "high": np.array([0.8, 0.5, 1], np.float32)}), ("ContinuousBernoulli", cb[1])),
        "normal_cb": (("Normal", {"loc": np.zeros(3, np.float32), "scale": np.ones(3, np.float32)}),
                      ("ContinuousBernoulli", cb[0])),
        "cb_pareto": (("ContinuousBernoulli", cb[0]), ("Pareto", {"scale": np.ones(3, np.float32),
                                                                 "alpha": np.ones(3, np.float32)})),
        "wishart_wishart": (("Wishart", {"df": _DF, "covariance_matrix": _COV}),
                            ("Wishart", {"df": _DF[::-1].copy(), "precision_matrix": _COV})),
    }


@pytest.mark.parametrize("pair", sorted(_kl_pairs()))
def test_kl_divergence_matches_torch(pair):
    (cls_p, params_p), (cls_q, params_q) = _kl_pairs()[pair]
    dists = []
    for module in (D, TD):
        make = (wg.tensor if module is D else torch.tensor)
        p = getattr(module, cls_p)(**{k: make(v) for k, v in params_p.items()})
        q = getattr(module, cls_q)(**{k: make(v) for k, v in params_q.items()})
        dists.append(module.kl_divergence(p, q))
    tol = dict(rtol=1e-3, atol=1e-3) if pair == "wishart_wishart" else dict(rtol=1e-4, atol=1e-5)
    _close(dists[0], dists[1], **tol)


def test_kl_between_different_exponential_families_is_refused():
    with pytest.raises(NotImplementedError):
        D.kl_divergence(D.Wishart(4.0, covariance_matrix=wg.eye(2)), D.ContinuousBernoulli(0.3))


def test_validation_errors():
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.ContinuousBernoulli(probs=0.3, logits=0.1)
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.ContinuousBernoulli()
    with pytest.raises(ValueError, match="probs has invalid values"):
        D.ContinuousBernoulli(wg.tensor([0.2, 1.5]), validate_args=True)
    with pytest.raises(ValueError, match="scale"):
        D.GeneralizedPareto(0.0, wg.tensor([-1.0]), 0.1)
    with pytest.raises(ValueError, match="concentration1"):
        D.Kumaraswamy(wg.tensor([-1.0]), wg.tensor([1.0]))
    with pytest.raises(ValueError, match="support"):
        D.Kumaraswamy(2.0, 3.0).log_prob(wg.tensor(1.5))
    with pytest.raises(ValueError, match="support"):
        D.GeneralizedPareto(0.0, 1.0, -0.5).log_prob(wg.tensor(3.0))
    with pytest.raises(ValueError, match="dim=1"):
        D.LKJCholesky(1)
    with pytest.raises(ValueError, match="concentration"):
        D.LKJCholesky(3, wg.tensor([-0.5]))
    with pytest.raises(ValueError, match="support"):
        D.LKJCholesky(2).log_prob(wg.tensor([[1.0, 0.0], [0.5, 0.5]]))
    with pytest.raises(ValueError, match="concentration"):
        D.VonMises(wg.tensor([0.0]), wg.tensor([-1.0]))
    with pytest.raises(ValueError, match="greater than ndim - 1"):
        D.Wishart(wg.tensor(1.5), covariance_matrix=wg.eye(3))
    with pytest.raises(AssertionError, match="Exactly one"):
        D.Wishart(4.0, covariance_matrix=wg.eye(3), scale_tril=wg.eye(3))
    with pytest.raises(ValueError, match="two-dimensional"):
        D.Wishart(4.0, covariance_matrix=wg.ones(3))
    with pytest.raises(ValueError, match="covariance_matrix"):
        D.Wishart(4.0, covariance_matrix=-wg.eye(3))
    with pytest.warns(UserWarning, match="Low df"):
        D.Wishart(2.5, covariance_matrix=wg.eye(3))
    with pytest.raises(ValueError, match="support"):
        D.Wishart(4.0, covariance_matrix=wg.eye(2)).log_prob(-wg.eye(2))


# transforms: (ours, torch's, input)
def _transform_cases():
    T, TT = D.transforms, TD.transforms
    x3 = _f32(3, 4, low=-2, high=2)
    return {
        "corr_cholesky": (T.CorrCholeskyTransform(), TT.CorrCholeskyTransform(), _f32(2, 6, low=-2, high=2)),
        "reshape": (T.ReshapeTransform((2, 3), (3, 2)), TT.ReshapeTransform((2, 3), (3, 2)), _f32(4, 2, 3)),
        "cat_dim0": (T.CatTransform([T.ExpTransform(), T.AffineTransform(1.0, 2.0)], 0, [1, 2]),
                     TT.CatTransform([TT.ExpTransform(), TT.AffineTransform(1.0, 2.0)], 0, [1, 2]), x3),
        "cat_last": (T.CatTransform([T.SigmoidTransform(), T.identity_transform, T.ExpTransform()], -1, [1, 2, 1]),
                     TT.CatTransform([TT.SigmoidTransform(), TT.identity_transform, TT.ExpTransform()], -1,
                                     [1, 2, 1]), x3),
        "cat_event": (T.CatTransform([T.IndependentTransform(T.SigmoidTransform(), 1), T.ExpTransform()], -1, [2, 2]),
                      TT.CatTransform([TT.IndependentTransform(TT.SigmoidTransform(), 1), TT.ExpTransform()], -1,
                                      [2, 2]), x3),
        "stack": (T.StackTransform([T.ExpTransform(), T.TanhTransform(), T.identity_transform], 1),
                  TT.StackTransform([TT.ExpTransform(), TT.TanhTransform(), TT.identity_transform], 1), x3[:, :3]),
        "cdf": (T.CumulativeDistributionTransform(D.Normal(wg.tensor(0.5), wg.tensor(2.0))),
                TT.CumulativeDistributionTransform(TD.Normal(torch.tensor(0.5), torch.tensor(2.0))), x3),
    }


@pytest.mark.parametrize("name", sorted(_transform_cases()))
def test_transforms_match_torch(name):
    ours, theirs, x = _transform_cases()[name]
    y, y_t = ours(wg.tensor(x)), theirs(torch.tensor(x))
    _close(y, y_t, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(ours.inv(y)), x, rtol=1e-3, atol=1e-4)
    _close(ours.log_abs_det_jacobian(wg.tensor(x), y), theirs.log_abs_det_jacobian(torch.tensor(x), y_t),
           rtol=1e-4, atol=1e-5)
    assert tuple(ours.forward_shape(x.shape)) == tuple(theirs.forward_shape(torch.Size(x.shape)))
    assert tuple(ours.inverse_shape(tuple(y.shape))) == tuple(theirs.inverse_shape(y_t.shape))
    assert ours.bijective == theirs.bijective
    assert ours.domain.event_dim == theirs.domain.event_dim
    assert ours.codomain.event_dim == theirs.codomain.event_dim
    if name != "cat_event":  # pieces of different event dims: torch's cat constraint cannot check them either
        assert bool(ours.codomain.check(y).all().item())
    cached = ours.with_cache(1)
    x_tensor = wg.tensor(x)
    assert cached(x_tensor) is cached(x_tensor)


def test_corr_cholesky_log_det_is_the_jacobian_of_the_triangle():
    """The log-Jacobian against the determinant of the numerical Jacobian of x -> strict lower triangle of y (the
    free coordinates of a correlation Cholesky factor)."""
    x = _f32(6, low=-1, high=1).astype(np.float64)
    transform = D.transforms.CorrCholeskyTransform()

    def free(v):
        return _np(tril_matrix_to_vec(transform(wg.tensor(v, dtype=wg.float64)), diag=-1))

    eps = 1e-6
    jac = np.stack([(free(x + eps * e) - free(x - eps * e)) / (2 * eps) for e in np.eye(6)], -1)
    y = transform(wg.tensor(x, dtype=wg.float64))
    log_det = float(transform.log_abs_det_jacobian(wg.tensor(x, dtype=wg.float64), y).item())
    assert log_det == pytest.approx(np.log(abs(np.linalg.det(jac))), abs=1e-5)


def test_constraint_registry_reaches_the_new_transforms():
    C = D.constraints
    assert isinstance(D.biject_to(C.corr_cholesky), D.transforms.CorrCholeskyTransform)
    x = wg.tensor(_f32(5, 10, low=-3, high=3))
    assert bool(C.corr_cholesky.check(D.biject_to(C.corr_cholesky)(x)).all().item())
    cat = D.biject_to(C.cat([C.positive, C.unit_interval], -1, [2, 1]))
    assert isinstance(cat, D.transforms.CatTransform)
    y = cat(wg.tensor(_f32(4, 3, low=-3, high=3)))
    assert bool((y[:, :2] > 0).all().item()) and bool(((y[:, 2] > 0) & (y[:, 2] < 1)).all().item())
    stack = D.transform_to(C.stack([C.real, C.positive], 0))
    assert isinstance(stack, D.transforms.StackTransform)
    assert bool(C.stack([C.real, C.positive], 0).check(stack(wg.tensor(_f32(2, 3)))).all().item())


def test_copula_through_the_cdf_transform():
    """A Gaussian copula: TransformedDistribution of a MultivariateNormal through the standard normal CDF."""
    scale_tril = np.array([[1.0, 0.0], [0.6, 0.8]], np.float32)
    ours = D.TransformedDistribution(D.MultivariateNormal(wg.zeros(2), scale_tril=wg.tensor(scale_tril)),
                                     [D.transforms.CumulativeDistributionTransform(D.Normal(0.0, 1.0))])
    theirs = TD.TransformedDistribution(TD.MultivariateNormal(torch.zeros(2), scale_tril=torch.tensor(scale_tril)),
                                        [TD.transforms.CumulativeDistributionTransform(TD.Normal(0.0, 1.0))])
    u = _f32(5, 2, low=0.05, high=0.95)
    _close(ours.log_prob(wg.tensor(u)), theirs.log_prob(torch.tensor(u)), rtol=1e-4, atol=1e-4)


def test_tril_vector_helpers_match_torch():
    from torch.distributions.utils import tril_matrix_to_vec as tril_t, vec_to_tril_matrix as vec_t
    m = _f32(2, 4, 4)
    for diag in (-2, -1, 0, 1):
        _close(tril_matrix_to_vec(wg.tensor(m), diag), tril_t(torch.tensor(m), diag))
        v = tril_t(torch.tensor(m), diag).numpy()
        _close(vec_to_tril_matrix(wg.tensor(v), diag), vec_t(torch.tensor(v), diag))
    with pytest.raises(ValueError, match="lower triangular"):
        vec_to_tril_matrix(wg.zeros(4))


def test_transform_errors():
    T = D.transforms
    with pytest.raises(ValueError, match="different numbers of elements"):
        T.ReshapeTransform((2, 3), (4,))
    with pytest.raises(ValueError, match="Shape mismatch"):
        T.ReshapeTransform((2, 3), (6,)).forward_shape((5, 3, 2))
    with pytest.raises(AssertionError, match="lengths"):
        T.CatTransform([T.ExpTransform()], 0, [1, 2])
    with pytest.raises(AssertionError, match="must equal length"):
        T.CatTransform([T.ExpTransform(), T.ExpTransform()], 0, [1, 2])(wg.zeros(4))
    with pytest.raises(AssertionError, match="must equal length"):
        T.StackTransform([T.ExpTransform()], 0)(wg.zeros(3, 2))
    with pytest.raises(ValueError, match="flattened lower-diagonal"):
        T.CorrCholeskyTransform().forward_shape((4,))
    with pytest.raises(ValueError, match="not square"):
        T.CorrCholeskyTransform().inverse_shape((3, 4))


@pytest.mark.skipif(not webgpu_available(), reason="no WebGPU adapter")
def test_webgpu_sampling_and_scoring():
    """ContinuousBernoulli (rsample and its gradient) and VonMises (the masked rejection sampler in float32) on
    WebGPU tensors, against the CPU's values."""
    probs = np.array([0.2, 0.5, 0.85], np.float32)
    p_gpu = wg.tensor(probs, device="webgpu", requires_grad=True)
    dist = D.ContinuousBernoulli(p_gpu)
    values = _f32(2, 3, low=0.05, high=0.95)
    _close(dist.log_prob(wg.tensor(values, device="webgpu")),
           TD.ContinuousBernoulli(torch.tensor(probs)).log_prob(torch.tensor(values)), rtol=1e-4, atol=1e-5)
    wg.manual_seed(0)
    sample = dist.rsample((500,))
    assert sample.device.type == "webgpu" and tuple(sample.shape) == (500, 3)
    sample.sum().backward()
    assert p_gpu.grad is not None and np.isfinite(_np(p_gpu.grad)).all()
    loc, conc = np.array([0.5, -2.0], np.float32), np.array([0.5, 8.0], np.float32)
    vm = D.VonMises(wg.tensor(loc, device="webgpu"), wg.tensor(conc, device="webgpu"))
    angles = vm.sample((3000,))
    assert angles.device.type == "webgpu"
    resultant = np.exp(1j * _np(angles)).mean(0)
    np.testing.assert_allclose(np.angle(resultant), loc, atol=0.15)
    _close(vm.log_prob(wg.tensor(values[:, :2], device="webgpu")),
           TD.VonMises(torch.tensor(loc), torch.tensor(conc)).log_prob(torch.tensor(values[:, :2])), rtol=1e-4)
