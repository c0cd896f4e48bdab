"""webgrad.distributions beyond Categorical against torch.distributions on every device: densities, entropies,
moments, CDFs and their gradients; reparameterised samples' gradients; sample shapes and moments; KL divergences;
constraints and validation errors; transformed distributions."""

import math

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.distributions as D

from tests.helpers import DEVICES

TD = torch.distributions
RNG = np.random.default_rng(0)


def _np(t):
    return t.detach().to("cpu").numpy()


def _f32(*shape, low=None, high=None):
    if low is None:
        return RNG.standard_normal(shape).astype(np.float32)
    return RNG.uniform(low, high, shape).astype(np.float32)


def _tril(n, batch=()):
    a = RNG.standard_normal((*batch, n, n)).astype(np.float32) * 0.4
    L = np.tril(a)
    idx = np.arange(n)
    L[..., idx, idx] = np.abs(L[..., idx, idx]) + 0.6
    return L


_L = _tril(3)
_COV = _L @ _L.T
_ONE_HOT = np.eye(4, dtype=np.float32)[[[1, 3], [0, 2], [2, 2]]]  # [3, 2, 4]

# name -> (constructor name, parameters (float arrays; a name ending in "*" is not a differentiable parameter),
#          keyword arguments, values to score)
CASES = {
    "normal": ("Normal", {"loc": _f32(3), "scale": _f32(3, low=0.5, high=2)}, {}, _f32(4, 3)),
    "normal_scalar_scale": ("Normal", {"loc": _f32(2, 3)}, {"scale": 0.7}, _f32(2, 3)),
    "laplace": ("Laplace", {"loc": _f32(3), "scale": _f32(3, low=0.5, high=2)}, {}, _f32(4, 3)),
    "exponential": ("Exponential", {"rate": _f32(3, low=0.5, high=3)}, {}, _f32(4, 3, low=0.05, high=3)),
    "uniform": ("Uniform", {"low": _f32(3, low=-2, high=-1), "high": _f32(3, low=1, high=3)}, {},
                _f32(4, 3, low=-0.9, high=0.9)),
    "bernoulli_probs": ("Bernoulli", {"probs": _f32(3, low=0.1, high=0.9)}, {},
                        RNG.integers(0, 2, (4, 3)).astype(np.float32)),
    "bernoulli_logits": ("Bernoulli", {"logits": _f32(3)}, {}, RNG.integers(0, 2, (4, 3)).astype(np.float32)),
    "lognormal": ("LogNormal", {"loc": _f32(3) * 0.5, "scale": _f32(3, low=0.3, high=1)}, {},
                  _f32(4, 3, low=0.1, high=4)),
    "gamma": ("Gamma", {"concentration": _f32(3, low=0.5, high=4), "rate": _f32(3, low=0.5, high=2)}, {},
              _f32(4, 3, low=0.1, high=4)),
    "beta": ("Beta", {"concentration1": _f32(3, low=0.5, high=4), "concentration0": _f32(3, low=0.5, high=4)}, {},
             _f32(4, 3, low=0.05, high=0.95)),
    "dirichlet": ("Dirichlet", {"concentration": _f32(2, 4, low=0.5, high=3)}, {},
                  RNG.dirichlet(np.ones(4), (3, 2)).astype(np.float32)),
    "onehot": ("OneHotCategorical", {"probs": _f32(2, 4, low=0.1, high=1)}, {}, _ONE_HOT),
    "mvn_scale_tril": ("MultivariateNormal", {"loc": _f32(2, 3), "scale_tril": _L}, {}, _f32(4, 2, 3)),
    "mvn_covariance": ("MultivariateNormal", {"loc": _f32(3), "covariance_matrix": _COV}, {}, _f32(4, 2, 3)),
    "cauchy": ("Cauchy", {"loc": _f32(3), "scale": _f32(3, low=0.5, high=2)}, {}, _f32(4, 3)),
    "halfnormal": ("HalfNormal", {"scale": _f32(3, low=0.5, high=2)}, {}, _f32(4, 3, low=0.05, high=3)),
    "chi2": ("Chi2", {"df": _f32(3, low=1, high=6)}, {}, _f32(4, 3, low=0.1, high=6)),
    "studentt": ("StudentT", {"df": _f32(3, low=2.5, high=8), "loc": _f32(3), "scale": _f32(3, low=0.5, high=2)}, {},
                 _f32(4, 3)),
    "gumbel": ("Gumbel", {"loc": _f32(3), "scale": _f32(3, low=0.5, high=2)}, {}, _f32(4, 3)),
    "geometric": ("Geometric", {"probs": _f32(3, low=0.2, high=0.9)}, {},
                  RNG.integers(0, 6, (4, 3)).astype(np.float32)),
    "poisson": ("Poisson", {"rate": np.array([0.5, 4.0, 30.0], np.float32)}, {},
                RNG.integers(0, 40, (4, 3)).astype(np.float32)),
    "relaxed_bernoulli": ("RelaxedBernoulli", {"temperature": np.array([0.6], np.float32), "logits": _f32(3)}, {},
                          _f32(4, 3, low=0.05, high=0.95)),
    "relaxed_onehot": ("RelaxedOneHotCategorical", {"temperature": np.array([0.8], np.float32), "logits": _f32(2, 4)},
                       {}, RNG.dirichlet(np.ones(4), (3, 2)).astype(np.float32)),
    "binomial": ("Binomial", {"probs": _f32(3, low=0.1, high=0.9)}, {"total_count": 10},
                 RNG.integers(0, 11, (4, 3)).astype(np.float32)),
    "multinomial": ("Multinomial", {"probs": _f32(2, 4, low=0.1, high=1)}, {"total_count": 7},
                    RNG.multinomial(7, [0.25] * 4, (3, 2)).astype(np.float32)),
    "halfcauchy": ("HalfCauchy", {"scale": _f32(3, low=0.5, high=2)}, {}, _f32(4, 3, low=0.05, high=3)),
    "pareto": ("Pareto", {"scale": _f32(3, low=0.5, high=1), "alpha": _f32(3, low=2.5, high=4)}, {},
               _f32(4, 3, low=1.0, high=4)),
    "weibull": ("Weibull", {"scale": _f32(3, low=0.5, high=2), "concentration": _f32(3, low=0.8, high=3)}, {},
                _f32(4, 3, low=0.05, high=3)),
    "inversegamma": ("InverseGamma", {"concentration": _f32(3, low=4.5, high=6), "rate": _f32(3, low=0.5, high=2)}, {},
                     _f32(4, 3, low=0.05, high=2)),
    "lowrank_mvn": ("LowRankMultivariateNormal", {"loc": _f32(2, 3), "cov_factor": _f32(3, 2) * 0.5,
                                                  "cov_diag": _f32(3, low=0.5, high=1.5)}, {}, _f32(4, 2, 3)),
    "logistic_normal": ("LogisticNormal", {"loc": _f32(3), "scale": _f32(3, low=0.5, high=1.5)}, {},
                        RNG.dirichlet(np.ones(4), (2,)).astype(np.float32)),
    "negative_binomial": ("NegativeBinomial", {"total_count": _f32(3, low=1, high=8),
                                               "probs": _f32(3, low=0.2, high=0.8)}, {},
                          RNG.integers(0, 12, (4, 3)).astype(np.float32)),
    "fisher_snedecor": ("FisherSnedecor", {"df1": _f32(3, low=3, high=8), "df2": _f32(3, low=9, high=15)}, {},
                        _f32(4, 3, low=0.1, high=3)),
    "mvn_precision": ("MultivariateNormal", {"loc": _f32(3), "precision_matrix": np.linalg.inv(_COV)}, {},
                      _f32(4, 3)),
}

ATTRIBUTES = ["mean", "variance", "stddev", "mode"]


def _make(name, device):
    cls, params, kwargs, value = CASES[name]
    w = {k: wg.tensor(v, device=device, requires_grad=True) for k, v in params.items()}
    t = {k: torch.tensor(v.astype(np.float64), requires_grad=True) for k, v in params.items()}
    return getattr(D, cls)(**w, **kwargs), getattr(TD, cls)(**t, **kwargs), w, t, value


def _close(a, b, rtol=2e-4, atol=2e-5):
    np.testing.assert_allclose(_np(a), b.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name, device):
    """log_prob, entropy, moments, mode, cdf and icdf against torch (float64), and the gradient of their sum."""
    wd, td, w, t, value = _make(name, device)
    assert tuple(wd.batch_shape) == tuple(td.batch_shape) and tuple(wd.event_shape) == tuple(td.event_shape)
    wv, tv = wg.tensor(value, device=device), torch.tensor(value.astype(np.float64))
    outs = [(wd.log_prob(wv), td.log_prob(tv))]
    for method in ("entropy", "cdf", "icdf"):
        try:
            arg = () if method == "entropy" else (tv if method == "cdf" else torch.tensor(_probabilities(value)),)
            expected = getattr(td, method)(*arg)
        except NotImplementedError:
            continue
        # torch has no gradient of gammainc in its shape argument
        if method == "cdf" and name in ("gamma", "chi2", "inversegamma"):
            _close(wd.cdf(wv), expected)
            continue
        got = getattr(wd, method)(*(() if method == "entropy" else (wg.tensor(_np_arg(arg[0]), device=device),)))
        outs.append((got, expected))
    for attr in ATTRIBUTES:
        try:
            expected = getattr(td, attr)
        except NotImplementedError:
            continue
        outs.append((getattr(wd, attr), expected))
    total_w, total_t = 0, 0
    for got, expected in outs:
        assert tuple(got.shape) == tuple(expected.shape)
        e = expected.detach().numpy()
        g = _np(got)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(e))
        finite = ~np.isnan(e)
        np.testing.assert_allclose(g[finite], e[finite], rtol=2e-4, atol=3e-5)
        if finite.all() and got.requires_grad:
            total_w = total_w + got.sum()
            total_t = total_t + expected.sum()
    total_w.backward()
    total_t.backward()
    for k in w:
        np.testing.assert_allclose(_np(w[k].grad), t[k].grad.numpy(), rtol=1e-3, atol=1e-4, err_msg=k)


def _probabilities(value):
    return np.linspace(0.05, 0.95, value.size).reshape(value.shape)


def _np_arg(x):
    return x.detach().numpy().astype(np.float32)


# ---------------------------------------------------------------- reparameterised samples


UNIVARIATE_RSAMPLE = ["normal", "laplace", "exponential", "uniform", "lognormal", "cauchy", "halfnormal", "gumbel",
                      "halfcauchy", "pareto", "weibull"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", UNIVARIATE_RSAMPLE)
def test_rsample_gradient_is_the_implicit_one(name, device):
    """A sample drawn as a monotone map of fixed noise keeps its CDF value, so d x / d theta = -(dF/dtheta) / p(x);
    torch's cdf and log_prob give that at our samples."""
    wg.manual_seed(1)
    wd, td, w, t, _ = _make(name, device)
    assert wd.has_rsample
    x = wd.rsample((64,))
    assert tuple(x.shape) == (64, *td.batch_shape)
    x.sum().backward()
    xt = torch.tensor(_np(x).astype(np.float64))
    weight = (-td.log_prob(xt)).exp().detach()
    (-(td.cdf(xt) * weight).sum()).backward()
    for k in w:
        np.testing.assert_allclose(_np(w[k].grad), t[k].grad.numpy(), rtol=2e-3, atol=2e-3, err_msg=k)


@pytest.mark.parametrize("device", DEVICES)
def test_gamma_rsample_gradient_against_torch_standard_gamma_grad(device):
    """The implicit gradient of Gamma samples, per sample, against torch's own d x / d concentration."""
    wg.manual_seed(2)
    conc = np.array([0.3, 2.5, 9.0], np.float32)  # 150 draws: not a multiple of 4, the kernels the other tests use
    rate = np.array([2.0, 0.5, 1.5], np.float32)
    c, r = wg.tensor(conc, device=device, requires_grad=True), wg.tensor(rate, device=device, requires_grad=True)
    x = D.Gamma(c, r).rsample((50,))
    x.sum().backward()
    xs = torch.tensor(_np(x).astype(np.float64) * rate.astype(np.float64))  # standard gamma draws
    ct = torch.tensor(conc.astype(np.float64)).expand_as(xs)
    dc = (torch._standard_gamma_grad(ct, xs) / torch.tensor(rate.astype(np.float64))).sum(0)
    dr = (-xs / torch.tensor(rate.astype(np.float64)) ** 2).sum(0)
    np.testing.assert_allclose(_np(c.grad), dc.numpy(), rtol=2e-3)
    np.testing.assert_allclose(_np(r.grad), dr.numpy(), rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("param", ["scale_tril", "covariance_matrix", "precision_matrix"])
def test_mvn_rsample_gradient_same_noise(param, device):
    """loc + L eps: our sample's gradient against torch's of the same expression, eps recovered from the sample."""
    wg.manual_seed(3)
    loc = _f32(3)
    mat = {"scale_tril": _L, "covariance_matrix": _COV, "precision_matrix": np.linalg.inv(_COV)}[param]
    w = [wg.tensor(loc, device=device, requires_grad=True), wg.tensor(mat, device=device, requires_grad=True)]
    t = [torch.tensor(loc.astype(np.float64), requires_grad=True),
         torch.tensor(mat.astype(np.float64), requires_grad=True)]
    x = D.MultivariateNormal(w[0], **{param: w[1]}).rsample((16,))
    assert tuple(x.shape) == (16, 3)
    coef = torch.tensor(RNG.standard_normal((16, 3)))
    (x * wg.tensor(coef.numpy().astype(np.float32), device=device)).sum().backward()
    td = TD.MultivariateNormal(t[0], **{param: t[1]})
    L = td._unbroadcasted_scale_tril.detach()
    eps = torch.linalg.solve_triangular(L, (torch.tensor(_np(x).astype(np.float64)) - t[0].detach()).T, upper=False)
    ((t[0] + (td._unbroadcasted_scale_tril @ eps).T) * coef).sum().backward()
    for a, b in zip(w, t):
        np.testing.assert_allclose(_np(a.grad), b.grad.numpy(), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["mvn_scale_tril", "mvn_covariance", "mvn_precision", "lowrank_mvn"])
def test_mvn_matrices_match_torch(name, device):
    wd, td, _, _, _ = _make(name, device)
    for attr in ("scale_tril", "covariance_matrix", "precision_matrix"):
        _close(getattr(wd, attr), getattr(td, attr), rtol=1e-4, atol=1e-5)
    e = wd.expand((4, *wd.batch_shape))
    assert tuple(e.covariance_matrix.shape) == (4, *td.batch_shape, 3, 3)


@pytest.mark.parametrize("device", DEVICES)
def test_dirichlet_and_beta_rsample_gradients_in_expectation(device):
    """The mean of many reparameterised draws, differentiated, against the gradient of the exact mean."""
    wg.manual_seed(4)
    conc = np.array([0.6, 1.5, 3.0], np.float32)
    c = wg.tensor(conc, device=device, requires_grad=True)
    n = 19999  # element counts off multiples of 4: gammainc's kernel the other tests compiled (lavapipe: ~15 s each)
    s = D.Dirichlet(c).rsample((n,))
    coef = np.array([1.0, -2.0, 0.5], np.float32)
    (s.mean(0) * wg.tensor(coef, device=device)).sum().backward()
    ct = torch.tensor(conc.astype(np.float64), requires_grad=True)
    ((ct / ct.sum()) * torch.tensor(coef.astype(np.float64))).sum().backward()
    np.testing.assert_allclose(_np(c.grad), ct.grad.numpy(), atol=0.04)
    a = wg.tensor([2.0], device=device, requires_grad=True)
    b = wg.tensor([0.7], device=device, requires_grad=True)
    D.Beta(a, b).rsample((n,)).mean().backward()
    # d/da a/(a+b) = b/(a+b)^2, d/db = -a/(a+b)^2
    np.testing.assert_allclose([_np(a.grad)[0], _np(b.grad)[0]], [0.7 / 2.7 ** 2, -2 / 2.7 ** 2], atol=0.01)


@pytest.mark.parametrize("device", DEVICES)
def test_relaxed_rsample_gradients_same_noise(device):
    """Gumbel-softmax and binary Concrete samples: our sample's gradient against torch's of the same expression,
    the noise recovered from the sample (up to the shift softmax ignores)."""
    wg.manual_seed(8)
    logits, temp = _f32(2, 4), np.array([0.7], np.float32)
    w = [wg.tensor(logits, device=device, requires_grad=True), wg.tensor(temp, device=device, requires_grad=True)]
    t = [torch.tensor(logits.astype(np.float64), requires_grad=True),
         torch.tensor(temp.astype(np.float64), requires_grad=True)]
    y = D.RelaxedOneHotCategorical(w[1], logits=w[0]).rsample((8,))
    assert tuple(y.shape) == (8, 2, 4)
    np.testing.assert_allclose(_np(y).sum(-1), 1.0, rtol=1e-5)
    coef = _f32(8, 2, 4)
    (y * wg.tensor(coef, device=device)).sum().backward()
    noise = torch.tensor(np.log(_np(y).astype(np.float64))) * float(temp[0]) - torch.tensor(logits.astype(np.float64))
    ((((t[0] + noise) / t[1]).softmax(-1)) * torch.tensor(coef.astype(np.float64))).sum().backward()
    for a, b in zip(w, t):
        np.testing.assert_allclose(_np(a.grad), b.grad.numpy(), rtol=2e-3, atol=2e-3)
    p = wg.tensor([0.2, 0.5, 0.9], device=device, requires_grad=True)
    pt = torch.tensor([0.2, 0.5, 0.9], dtype=torch.float64, requires_grad=True)
    x = D.RelaxedBernoulli(0.5, probs=p).rsample((16,))
    assert tuple(x.shape) == (16, 3) and ((_np(x) > 0) & (_np(x) < 1)).all()
    x.sum().backward()
    xd = np.clip(_np(x).astype(np.float64), 1e-7, 1 - 1e-7)
    noise = torch.tensor(0.5 * (np.log(xd) - np.log1p(-xd)))  # logistic noise + logit(p), divided by temperature
    noise = noise - (pt.detach().log() - (-pt.detach()).log1p())
    ((noise + pt.log() - (-pt).log1p()) / 0.5).sigmoid().sum().backward()
    np.testing.assert_allclose(_np(p.grad), pt.grad.numpy(), rtol=5e-3, atol=5e-3)


# ---------------------------------------------------------------- sample shapes and moments

MOMENT_CASES = ["normal", "laplace", "exponential", "uniform", "bernoulli_logits", "lognormal", "gamma", "beta",
                "dirichlet", "onehot", "mvn_scale_tril", "halfnormal", "chi2", "gumbel", "geometric", "studentt",
                "poisson", "binomial", "multinomial", "weibull", "inversegamma", "lowrank_mvn", "negative_binomial",
                "fisher_snedecor"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", MOMENT_CASES)
def test_sample_shapes_and_moments(name, device):
    wg.manual_seed(5)
    wd, td, _, _, _ = _make(name, device)
    n = 20000
    s = wd.sample((n,))
    assert tuple(s.shape) == (n, *td.batch_shape, *td.event_shape)
    assert not s.requires_grad
    assert tuple(wd.sample().shape) == tuple(td.batch_shape) + tuple(td.event_shape)
    assert tuple(wd.sample((2, 3)).shape) == (2, 3, *td.batch_shape, *td.event_shape)
    s = _np(s).astype(np.float64)
    mean, var = td.mean.detach().numpy(), td.variance.detach().numpy()
    # 6 standard errors of the sample mean; the variance within 10% (25% for heavy tails, whose sample variance
    # converges slowly)
    np.testing.assert_allclose(s.mean(0), mean, atol=float(6 * np.sqrt(var.max() / n)) + 1e-6)
    heavy = name in ("lognormal", "studentt", "inversegamma", "fisher_snedecor")
    np.testing.assert_allclose(s.var(0), var, rtol=0.25 if heavy else 0.1, atol=1e-3)
    if name in ("uniform", "beta", "gamma", "exponential", "dirichlet"):
        support = td.support
        assert bool(support.check(torch.tensor(s)).all())
    if name == "mvn_scale_tril":
        cov = np.cov(s[:, 0].T)
        np.testing.assert_allclose(cov, _COV, atol=0.1)


@pytest.mark.parametrize("device", DEVICES)
def test_sampling_follows_manual_seed(device):
    for cls, args in ((D.Normal, (0.0, 1.0)), (D.Gamma, (0.5, 1.0)), (D.Bernoulli, (0.3,))):
        draws = []
        for _ in range(2):
            wg.manual_seed(7)
            d = cls(*(wg.full((5,), a, device=device) for a in args))
            draws.append(_np(d.sample((3,))))
        np.testing.assert_array_equal(draws[0], draws[1])


# ---------------------------------------------------------------- KL divergences

KL_PAIRS = [("normal", "Normal", ["loc", "scale"]), ("laplace", "Laplace", ["loc", "scale"]),
            ("exponential", "Exponential", ["rate"]), ("gamma", "Gamma", ["concentration", "rate"]),
            ("beta", "Beta", ["concentration1", "concentration0"]), ("dirichlet", "Dirichlet", ["concentration"]),
            ("bernoulli_probs", "Bernoulli", ["probs"]), ("onehot", "OneHotCategorical", ["probs"]),
            ("lognormal", "LogNormal", ["loc", "scale"]), ("uniform", "Uniform", ["low", "high"]),
            ("mvn_scale_tril", "MultivariateNormal", ["loc", "scale_tril"]), ("cauchy", "Cauchy", ["loc", "scale"]),
            ("geometric", "Geometric", ["probs"]), ("gumbel", "Gumbel", ["loc", "scale"]),
            ("halfnormal", "HalfNormal", ["scale"]), ("poisson", "Poisson", ["rate"]),
            ("lowrank_mvn", "LowRankMultivariateNormal", ["loc", "cov_factor", "cov_diag"])]


def _shifted(name, value):
    """A second parameter set, same support."""
    if name in ("probs",):
        v = np.clip(value[..., ::-1] * 0.8 + 0.1, 0.05, 0.95) if value.ndim > 1 else np.clip(1 - value, 0.05, 0.95)
        return np.ascontiguousarray(v).astype(np.float32)
    if name == "loc":
        return value + 0.3
    if name == "low":
        return value - 0.5
    if name == "high":
        return value + 0.25
    if name == "scale_tril":
        return (value * 1.3).astype(np.float32)
    return (value * 1.4 + 0.1).astype(np.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case,cls,names", KL_PAIRS, ids=[c[1] for c in KL_PAIRS])
def test_kl_divergence_matches_torch(case, cls, names, device):
    params = CASES[case][1]
    first = {k: params[k] for k in names}
    second = {k: _shifted(k, v) for k, v in first.items()}
    wp = {k: wg.tensor(v, device=device, requires_grad=True) for k, v in first.items()}
    wq = {k: wg.tensor(v, device=device) for k, v in second.items()}
    tp = {k: torch.tensor(v.astype(np.float64), requires_grad=True) for k, v in first.items()}
    tq = {k: torch.tensor(v.astype(np.float64)) for k, v in second.items()}
    kl = D.kl_divergence(getattr(D, cls)(**wp), getattr(D, cls)(**wq))
    tkl = TD.kl_divergence(getattr(TD, cls)(**tp), getattr(TD, cls)(**tq))
    _close(kl, tkl)
    kl.sum().backward()
    tkl.sum().backward()
    for k in wp:
        np.testing.assert_allclose(_np(wp[k].grad), tp[k].grad.numpy(), rtol=1e-3, atol=1e-4, err_msg=k)


@pytest.mark.parametrize("device", DEVICES)
def test_kl_special_cases(device):
    def t(x):
        return wg.tensor(np.asarray(x, np.float32), device=device)

    # Uniform: infinite where q's interval does not cover p's
    kl = D.kl_divergence(D.Uniform(t([0.0, 0.0]), t([1.0, 1.0])), D.Uniform(t([-1.0, 0.5]), t([2.0, 2.0])))
    np.testing.assert_allclose(_np(kl), [math.log(3.0), math.inf])
    # Categorical: zero probability in p contributes nothing, in q makes it infinite
    kl = D.kl_divergence(D.Categorical(probs=t([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]])),
                         D.Categorical(probs=t([[0.25, 0.25, 0.5], [1.0, 0.0, 0.0]])))
    np.testing.assert_allclose(_np(kl), [math.log(2.0), math.inf], rtol=1e-6)
    # Independent over Normal: the reinterpreted dims are summed
    loc, scale = t(_f32(2, 3)), t(_f32(2, 3, low=0.5, high=2))
    p = D.Independent(D.Normal(loc, scale), 1)
    q = D.Independent(D.Normal(loc + 1, scale * 2), 1)
    np.testing.assert_allclose(_np(D.kl_divergence(p, q)),
                               _np(D.kl_divergence(D.Normal(loc, scale), D.Normal(loc + 1, scale * 2)).sum(-1)),
                               rtol=1e-6)
    # mixed pairs torch has
    tp, tq = TD.Normal(torch.tensor([0.3]), torch.tensor([0.8])), TD.Laplace(torch.tensor([0.1]), torch.tensor([1.2]))
    kl = D.kl_divergence(D.Normal(t([0.3]), t([0.8])), D.Laplace(t([0.1]), t([1.2])))
    _close(kl, TD.kl_divergence(tp, tq))
    kl = D.kl_divergence(D.Uniform(t([-0.5]), t([1.5])), D.Normal(t([0.2]), t([0.9])))
    _close(kl, TD.kl_divergence(TD.Uniform(torch.tensor([-0.5]), torch.tensor([1.5])),
                                TD.Normal(torch.tensor([0.2]), torch.tensor([0.9]))))
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p type Normal and q type "
                                                  "Cauchy"):
        D.kl_divergence(D.Normal(t([0.0]), t([1.0])), D.Cauchy(t([0.0]), t([1.0])))


def test_register_kl_picks_the_most_specific_pair():
    class MyNormal(D.Normal):
        pass

    p, q = MyNormal(wg.tensor([0.0]), wg.tensor([1.0])), D.Normal(wg.tensor([1.0]), wg.tensor([1.0]))
    np.testing.assert_allclose(_np(D.kl_divergence(p, q)), [0.5])  # inherits Normal-Normal

    @D.register_kl(MyNormal, D.Normal)
    def _mine(p, q):
        return p.loc * 0 + 42.0

    np.testing.assert_allclose(_np(D.kl_divergence(p, q)), [42.0])
    np.testing.assert_allclose(_np(D.kl_divergence(q, q)), [0.0])
    with pytest.raises(TypeError):
        D.register_kl(int, D.Normal)


@pytest.mark.parametrize("device", DEVICES)
def test_mixture_same_family_matches_torch(device):
    """A Gaussian mixture over 2-vectors (a mixture density network's head): log_prob, moments, cdf of a univariate
    mixture, the gradients, and samples drawn from the picked components."""
    logits, locs, scales = _f32(2, 3), _f32(2, 3, 2) * 2, _f32(2, 3, 2, low=0.3, high=1.0)
    w = [wg.tensor(a, device=device, requires_grad=True) for a in (logits, locs, scales)]
    t = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in (logits, locs, scales)]
    wd = D.MixtureSameFamily(D.Categorical(logits=w[0]), D.Independent(D.Normal(w[1], w[2]), 1))
    td = TD.MixtureSameFamily(TD.Categorical(logits=t[0]), TD.Independent(TD.Normal(t[1], t[2]), 1))
    assert tuple(wd.batch_shape) == (2,) and tuple(wd.event_shape) == (2,)
    x = _f32(5, 2, 2)
    lp, tlp = wd.log_prob(wg.tensor(x, device=device)), td.log_prob(torch.tensor(x.astype(np.float64)))
    _close(lp, tlp)
    _close(wd.mean, td.mean)
    _close(wd.variance, td.variance)
    (lp.sum() + wd.variance.sum()).backward()
    (tlp.sum() + td.variance.sum()).backward()
    for a, b in zip(w, t):
        np.testing.assert_allclose(_np(a.grad), b.grad.numpy(), rtol=1e-3, atol=1e-4)
    wg.manual_seed(6)
    s = wd.sample((20000,))
    assert tuple(s.shape) == (20000, 2, 2)
    np.testing.assert_allclose(_np(s).mean(0), td.mean.detach().numpy(), atol=0.08)
    np.testing.assert_allclose(_np(s).var(0), td.variance.detach().numpy(), rtol=0.1)
    uni = D.MixtureSameFamily(D.Categorical(logits=w[0]), D.Normal(w[1][..., 0], w[2][..., 0]))
    tuni = TD.MixtureSameFamily(TD.Categorical(logits=t[0]), TD.Normal(t[1][..., 0], t[2][..., 0]))
    _close(uni.cdf(wg.tensor(x[..., 0], device=device)), tuni.cdf(torch.tensor(x[..., 0].astype(np.float64))))
    assert tuple(wd.expand((4, 2)).sample().shape) == (4, 2, 2)
    with pytest.raises(ValueError, match="does not equal `component_distribution.batch_shape\\[-1\\]`"):
        D.MixtureSameFamily(D.Categorical(logits=w[0][..., :2]), D.Normal(w[1][..., 0], w[2][..., 0]))


# ---------------------------------------------------------------- transformed distributions


@pytest.mark.parametrize("device", DEVICES)
def test_transformed_distribution_matches_torch(device):
    """A squashed Gaussian policy (Independent Normal -> Tanh -> Affine), as SAC writes it: log_prob, sample shape,
    rsample gradient flowing to the base parameters."""
    loc, scale = _f32(2, 3), _f32(2, 3, low=0.3, high=1.0)
    w = [wg.tensor(loc, device=device, requires_grad=True), wg.tensor(scale, device=device, requires_grad=True)]
    t = [torch.tensor(loc.astype(np.float64), requires_grad=True),
         torch.tensor(scale.astype(np.float64), requires_grad=True)]
    wd = D.TransformedDistribution(D.Independent(D.Normal(*w), 1),
                                   [D.TanhTransform(), D.AffineTransform(wg.tensor([0.5, 0.0, -1.0], device=device),
                                                                         2.0)])
    td = TD.TransformedDistribution(TD.Independent(TD.Normal(*t), 1),
                                    [TD.TanhTransform(), TD.AffineTransform(torch.tensor([0.5, 0.0, -1.0]).double(),
                                                                            2.0)])
    assert tuple(wd.batch_shape) == (2,) and tuple(wd.event_shape) == (3,)
    value = np.tanh(_f32(5, 2, 3)) * 2 + np.array([0.5, 0.0, -1.0], np.float32)
    lp = wd.log_prob(wg.tensor(value, device=device))
    tlp = td.log_prob(torch.tensor(value.astype(np.float64)))
    _close(lp, tlp, rtol=1e-3, atol=1e-4)
    lp.sum().backward()
    tlp.sum().backward()
    for a, b in zip(w, t):
        np.testing.assert_allclose(_np(a.grad), b.grad.numpy(), rtol=1e-3, atol=1e-3)
    x = wd.rsample((4,))
    assert tuple(x.shape) == (4, 2, 3) and x.requires_grad
    s = _np(wd.sample((100,)))
    assert (np.abs(s - np.array([0.5, 0.0, -1.0])) <= 2.0).all()
    # a LogNormal written by hand is LogNormal
    ln = D.TransformedDistribution(D.Normal(w[0], w[1]), [D.ExpTransform()])
    v = wg.tensor(np.exp(_f32(2, 3)), device=device)
    _close(ln.log_prob(v), TD.LogNormal(*t).log_prob(torch.tensor(_np(v).astype(np.float64))))
    _close(ln.cdf(v), TD.LogNormal(*t).cdf(torch.tensor(_np(v).astype(np.float64))))
    sig = D.TransformedDistribution(D.Normal(w[0], w[1]), D.SigmoidTransform())
    tsig = TD.TransformedDistribution(TD.Normal(*t), TD.SigmoidTransform())
    v = np.array([[0.2, 0.5, 0.9]], np.float32)
    _close(sig.log_prob(wg.tensor(v, device=device)), tsig.log_prob(torch.tensor(v.astype(np.float64))))


def test_transforms():
    x = wg.tensor([-1.0, 0.5, 2.0])
    for ours, theirs in ((D.ExpTransform(), TD.ExpTransform()), (D.TanhTransform(), TD.TanhTransform()),
                         (D.SoftplusTransform(), TD.SoftplusTransform()),
                         (D.SigmoidTransform(), TD.SigmoidTransform()),
                         (D.AffineTransform(1.0, -3.0), TD.AffineTransform(1.0, -3.0))):
        xt = torch.tensor(_np(x))
        y, yt = ours(x), theirs(xt)
        _close(y, yt)
        _close(ours.inv(y), theirs.inv(yt), rtol=1e-4, atol=1e-5)
        _close(ours.log_abs_det_jacobian(x, y), theirs.log_abs_det_jacobian(xt, yt))
        assert ours.inv.inv is ours
    comp = D.ComposeTransform([D.ExpTransform(), D.AffineTransform(2.0, 3.0)])
    tcomp = TD.ComposeTransform([TD.ExpTransform(), TD.AffineTransform(2.0, 3.0)])
    _close(comp(x), tcomp(torch.tensor(_np(x))))
    _close(comp.log_abs_det_jacobian(x, comp(x)), tcomp.log_abs_det_jacobian(torch.tensor(_np(x)),
                                                                              tcomp(torch.tensor(_np(x)))))
    assert D.AffineTransform(1.0, -3.0).sign == -1 and D.ExpTransform() == D.ExpTransform()


def test_biject_to_and_transform_to_match_torch():
    """Constraint -> transform from the unconstrained reals: values, inverses, Jacobians against torch; the images
    satisfy the constraints."""
    C, TC = D.constraints, TD.constraints
    x = _f32(2, 3)
    pairs = [(C.positive, TC.positive), (C.nonnegative, TC.nonnegative),
             (C.interval(-1.0, 2.0), TC.interval(-1.0, 2.0)),
             (C.unit_interval, TC.unit_interval), (C.simplex, TC.simplex), (C.greater_than(1.5), TC.greater_than(1.5)),
             (C.less_than(1.5), TC.less_than(1.5)), (C.real_vector, TC.real_vector),
             (C.independent(C.positive, 1), TC.independent(TC.positive, 1))]
    for ours, theirs in pairs:
        for reg, treg in ((D.biject_to, TD.biject_to), (D.transform_to, TD.transform_to)):
            t, tt = reg(ours), treg(theirs)
            assert type(t).__name__ == type(tt).__name__
            y, ty = t(wg.tensor(x)), tt(torch.tensor(x))
            _close(y, ty, rtol=1e-5, atol=1e-6)
            _close(t.inv(y), tt.inv(ty), rtol=1e-3, atol=1e-4)
            if not isinstance(t, D.SoftmaxTransform):
                _close(t.log_abs_det_jacobian(wg.tensor(x), y), tt.log_abs_det_jacobian(torch.tensor(x), ty))
            assert bool(ours.check(y).all()), (ours, reg)
    m = _f32(3, 3)
    for ours, theirs in ((C.lower_cholesky, TC.lower_cholesky), (C.positive_definite, TC.positive_definite)):
        t, tt = D.transform_to(ours), TD.transform_to(theirs)
        y = t(wg.tensor(m))
        _close(y, tt(torch.tensor(m)), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.tril(_np(t.inv(y))), np.tril(m), rtol=1e-3, atol=1e-3)
        assert bool(ours.check(y).all())
    with pytest.raises(NotImplementedError, match="Cannot transform _LowerCholesky constraints"):
        D.biject_to(C.lower_cholesky)
    # an unconstrained parameter trained through transform_to stays inside its constraint
    raw = wg.zeros(3, requires_grad=True)
    opt = wg.optim.SGD([raw], lr=0.5)
    for _ in range(20):
        probs = D.transform_to(C.simplex)(raw)
        loss = -D.Categorical(probs=probs).log_prob(wg.tensor([2, 2, 1])).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert _np(D.transform_to(C.simplex)(raw)).argmax() == 2


# ---------------------------------------------------------------- validation, constraints, expand


def test_validation_errors_match_torch():
    neg = wg.tensor([1.0, -1.0])
    # validate_args=True on both sides: a script elsewhere in the suite may have turned torch's default off
    on = {"validate_args": True}
    for make, tmake in ((lambda s: D.Normal(wg.zeros(2), s, **on), lambda s: TD.Normal(torch.zeros(2), s, **on)),
                        (lambda s: D.Gamma(s, 1.0, **on), lambda s: TD.Gamma(s, 1.0, **on)),
                        (lambda s: D.Exponential(s, **on), lambda s: TD.Exponential(s, **on))):
        with pytest.raises(ValueError) as ours:
            make(neg)
        with pytest.raises(ValueError) as theirs:
            tmake(torch.tensor([1.0, -1.0]))
        # the message names the parameter, the shape and the constraint as torch's does
        assert str(ours.value).split(" of distribution")[0] == str(theirs.value).split(" of distribution")[0]
        assert "to satisfy the constraint GreaterThan(lower_bound=0.0), but found invalid values" in str(ours.value)
    assert tuple(D.Normal(wg.zeros(2), neg, validate_args=False).scale.shape) == (2,)  # no check when asked not to
    with pytest.raises(ValueError, match="Expected parameter probs"):
        D.Bernoulli(wg.tensor([0.5, 1.5]))
    with pytest.raises(ValueError, match="Expected parameter probs"):
        D.Categorical(probs=wg.tensor([0.5, -0.25, 0.75]))
    with pytest.raises(ValueError, match="Expected parameter low"):
        D.Uniform(wg.tensor([0.0, 2.0]), wg.tensor([1.0, 1.0]))
    with pytest.raises(ValueError, match="Expected parameter covariance_matrix .* PositiveDefinite"):
        D.MultivariateNormal(wg.zeros(2), covariance_matrix=wg.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="Expected parameter scale_tril .* LowerCholesky"):
        D.MultivariateNormal(wg.zeros(2), scale_tril=wg.tensor([[1.0, 0.5], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix or precision_matrix or scale_tril"):
        D.MultivariateNormal(wg.zeros(2))
    with pytest.raises(ValueError, match="loc must be at least one-dimensional."):
        D.MultivariateNormal(wg.tensor(0.0), scale_tril=wg.eye(1))
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        D.Bernoulli()
    with pytest.raises(ValueError, match="Expected reinterpreted_batch_ndims <= len\\(base_distribution.batch_shape"):
        D.Independent(D.Normal(wg.zeros(2), wg.ones(2)), 2)
    with pytest.raises(ValueError, match="`concentration` parameter must be at least one-dimensional."):
        D.Dirichlet(wg.tensor(1.0))
    # values outside the support
    with pytest.raises(ValueError, match="Expected value argument .* to be within the support \\(GreaterThanEq"):
        D.Exponential(wg.ones(2)).log_prob(wg.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="to be within the support \\(Boolean\\(\\)\\)"):
        D.Bernoulli(wg.tensor([0.5])).log_prob(wg.tensor([0.5]))
    with pytest.raises(ValueError, match="Value is not broadcastable with batch_shape\\+event_shape"):
        D.Normal(wg.zeros(3), wg.ones(3)).log_prob(wg.zeros(2))
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        D.Normal(wg.zeros(3), wg.ones(3)).log_prob(0.5)
    with pytest.raises(ValueError, match="Input arguments must all be instances of numbers.Number"):
        D.Normal("a", 1.0)
    try:
        D.Distribution.set_default_validate_args(False)
        D.Normal(wg.zeros(2), neg)
        assert D.Exponential(wg.ones(1)).log_prob(wg.tensor([-1.0])).shape == (1,)
    finally:
        D.Distribution.set_default_validate_args(True)


def test_constraints_expand_and_repr():
    C = D.constraints
    v = wg.tensor([-1.0, 0.0, 0.5, 1.0, math.nan])
    tv = torch.tensor(_np(v))
    for ours, theirs in ((C.real, TD.constraints.real), (C.positive, TD.constraints.positive),
                         (C.nonnegative, TD.constraints.nonnegative), (C.unit_interval, TD.constraints.unit_interval),
                         (C.boolean, TD.constraints.boolean),
                         (C.interval(-0.5, 0.5), TD.constraints.interval(-0.5, 0.5)),
                         (C.half_open_interval(0.0, 1.0), TD.constraints.half_open_interval(0.0, 1.0))):
        np.testing.assert_array_equal(_np(ours.check(v)), theirs.check(tv).numpy())
        assert repr(ours) == repr(theirs)
    simplex = wg.tensor([[0.2, 0.8], [0.7, 0.4]])
    np.testing.assert_array_equal(_np(C.simplex.check(simplex)), [True, False])
    assert repr(C.independent(C.real, 1)) == repr(TD.constraints.independent(TD.constraints.real, 1))
    assert C.real_vector.event_dim == 1 and C.positive_definite.event_dim == 2
    mats = wg.tensor([[[2.0, 1.0], [1.0, 2.0]], [[1.0, 2.0], [2.0, 1.0]], [[1.0, 0.0], [0.0, 0.0]]])
    for ours, theirs in ((C.square, TD.constraints.square), (C.symmetric, TD.constraints.symmetric),
                         (C.positive_semidefinite, TD.constraints.positive_semidefinite),
                         (C.positive_definite, TD.constraints.positive_definite)):
        np.testing.assert_array_equal(_np(ours.check(mats)), theirs.check(torch.tensor(_np(mats))).numpy())
        assert repr(ours) == repr(theirs)
    n = D.Normal(wg.zeros(3), wg.ones(3))
    e = n.expand((4, 3))
    assert tuple(e.batch_shape) == (4, 3) and tuple(e.sample().shape) == (4, 3)
    for d in (D.Bernoulli(logits=wg.zeros(3)), D.Gamma(wg.ones(3), 1.0), D.Beta(wg.ones(3), wg.ones(3)),
              D.Laplace(wg.zeros(3), 1.0), D.Uniform(wg.zeros(3), 1.0), D.Exponential(wg.ones(3)),
              D.LogNormal(wg.zeros(3), 1.0), D.Independent(D.Normal(wg.zeros(2, 3), 1.0), 1)):
        e = d.expand((2, *d.batch_shape))
        assert tuple(e.batch_shape) == (2, *d.batch_shape), type(d).__name__
        assert tuple(e.sample().shape) == (2, *d.batch_shape, *d.event_shape)
    m = D.MultivariateNormal(wg.zeros(3), scale_tril=wg.eye(3)).expand((5,))
    assert tuple(m.batch_shape) == (5,) and tuple(m.log_prob(wg.zeros(5, 3)).shape) == (5,)
    oh = D.OneHotCategorical(logits=wg.zeros(2, 4)).expand((3, 2))
    assert tuple(oh.sample().shape) == (3, 2, 4)
    assert repr(D.Normal(wg.zeros(3), wg.ones(3))).startswith("Normal(loc: ")
    assert repr(D.Normal(0.0, 1.0)) == repr(TD.Normal(0.0, 1.0)) == "Normal(loc: 0.0, scale: 1.0)"
    assert D.Normal(0.0, 1.0).batch_shape == () and D.Normal(0.0, 1.0).sample().shape == ()
    # enumerate_support
    np.testing.assert_array_equal(_np(D.Bernoulli(wg.tensor([0.2, 0.4])).enumerate_support()), [[0, 0], [1, 1]])
    np.testing.assert_array_equal(_np(D.Categorical(logits=wg.zeros(3)).enumerate_support()), [0, 1, 2])
    assert tuple(D.OneHotCategorical(logits=wg.zeros(2, 3)).enumerate_support().shape) == (3, 2, 3)
    # a Binomial of counts that differ per element draws within each count
    b = D.Binomial(wg.tensor([0.0, 3.0, 70.0]), probs=wg.tensor([0.5, 1.0, 0.5]))
    s = _np(b.sample((500,)))
    assert (s[:, 0] == 0).all() and (s[:, 1] == 3).all() and s[:, 2].max() <= 70 and s[:, 2].min() >= 0
    with pytest.raises(NotImplementedError, match="Inhomogeneous total count not supported by `entropy`."):
        b.entropy()
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count is not supported"):
        D.Multinomial(wg.tensor(3), probs=wg.ones(3))
    # Uniform's support is a constraint that depends on the parameters
    u = D.Uniform(wg.zeros(2), wg.tensor([1.0, 2.0]))
    np.testing.assert_array_equal(_np(u.support.check(wg.tensor([0.5, 1.5]))), [True, True])
    assert C.is_dependent(D.Uniform.support) and not C.is_dependent(C.real)
    # Normal(0, 1) built from Python numbers works with tensors of any batch shape
    np.testing.assert_allclose(_np(D.Normal(0.0, 1.0).log_prob(wg.zeros(2))), [-0.5 * math.log(2 * math.pi)] * 2,
                               rtol=1e-6)


def test_straight_through_and_as_torch_names():
    probs = wg.tensor([[0.2, 0.3, 0.5]], requires_grad=True)
    d = D.OneHotCategoricalStraightThrough(probs=probs)
    s = d.rsample((4,))
    assert tuple(s.shape) == (4, 1, 3) and set(np.unique(_np(s))) <= {0.0, 1.0}
    (s * wg.tensor([1.0, 2.0, 3.0])).sum().backward()
    tprobs = torch.tensor([[0.2, 0.3, 0.5]], requires_grad=True)
    ts = TD.OneHotCategoricalStraightThrough(probs=tprobs).rsample((4,))
    (ts * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_allclose(_np(probs.grad), tprobs.grad.numpy(), rtol=1e-5, atol=1e-6)
    import webgrad.distributions.kl as kl_module
    import webgrad.distributions.normal as normal_module
    assert kl_module.kl_divergence is D.kl_divergence and normal_module.Normal is D.Normal
    for name in ("Normal", "Bernoulli", "Uniform", "Laplace", "Exponential", "Independent", "MultivariateNormal",
                 "OneHotCategorical", "LogNormal", "Beta", "Gamma", "Dirichlet", "TransformedDistribution", "Cauchy",
                 "HalfNormal", "Chi2", "StudentT", "Gumbel", "Geometric", "MixtureSameFamily", "Poisson",
                 "RelaxedBernoulli", "RelaxedOneHotCategorical", "Binomial", "Multinomial", "HalfCauchy", "Pareto",
                 "Weibull", "InverseGamma", "LowRankMultivariateNormal", "LogisticNormal", "NegativeBinomial",
                 "FisherSnedecor"):
        ours, theirs = getattr(D, name), getattr(TD, name)
        assert ours.has_rsample == theirs.has_rsample or isinstance(theirs.has_rsample, property), name
        assert set(_keys(ours)) == set(_keys(theirs)), name


def _keys(cls):
    c = cls.__dict__.get("arg_constraints", getattr(cls, "arg_constraints", {}))
    return c.keys() if isinstance(c, dict) else {"low", "high"}


SCRIPT = '''
import torch
import torch.nn as nn
from torch.distributions import Categorical, Independent, Normal, TransformedDistribution, kl_divergence
from torch.distributions.transforms import TanhTransform

torch.manual_seed(0)
# a VAE's latent: rsample, a KL term against the standard normal prior
enc = nn.Linear(4, 4)
x = torch.randn(16, 4)
opt = torch.optim.Adam(enc.parameters(), lr=0.05)
losses = []
for _ in range(30):
    mu, log_std = enc(x).chunk(2, dim=-1)
    q = Independent(Normal(mu, log_std.exp()), 1)
    z = q.rsample()
    prior = Independent(Normal(torch.zeros_like(mu), torch.ones_like(mu)), 1)
    loss = kl_divergence(q, prior).mean() + 0.0 * z.sum()
    opt.zero_grad(); loss.backward(); opt.step()
    losses.append(loss.item())
assert losses[-1] < 0.2 * losses[0], losses
# REINFORCE on a 3-armed bandit whose best arm is 2
logits = torch.zeros(3, requires_grad=True)
opt = torch.optim.SGD([logits], lr=0.5)
for _ in range(40):
    dist = Categorical(logits=logits)
    a = dist.sample((32,))
    reward = (a == 2).float()
    loss = -(dist.log_prob(a) * (reward - reward.mean())).mean() - 0.01 * dist.entropy()
    opt.zero_grad(); loss.backward(); opt.step()
assert Categorical(logits=logits).probs[2].item() > 0.8
# a squashed Gaussian policy's log-probability of its own reparameterised action
pi = TransformedDistribution(Normal(torch.zeros(2), torch.ones(2)), [TanhTransform(cache_size=1)])
act = pi.rsample()
print("ok", tuple(act.shape), tuple(pi.log_prob(act).shape), type(q).__module__)
'''


def test_scripts_under_as_torch():
    """A VAE's KL term, REINFORCE and a squashed Gaussian policy, written against torch, run on webgrad."""
    import os
    import subprocess
    import sys
    from helpers import PACKAGE_DIR
    out = subprocess.run([sys.executable, "-c", "import webgrad; webgrad.as_torch()\n" + SCRIPT], capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=str(PACKAGE_DIR)), timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok", "(2,)", "(2,)", "webgrad.distributions.independent"]
    exec(compile(SCRIPT, "script", "exec"), {})  # the same script passes on PyTorch
