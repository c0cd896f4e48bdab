"""ExponentialFamily membership and the KL registry against PyTorch: which classes are exponential families, their
natural parameters, log-normalisers and carrier measures value for value, the Bregman entropy and KL each member
gets from them (against its own closed forms and PyTorch's), and every (p, q) pair torch.distributions.kl
registers, finite and infinite entries alike, with gradients and one WebGPU case."""

import inspect

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.distributions as D
from webgrad.distributions import kl as wkl

from tests.helpers import webgpu_available

TD = torch.distributions


def _np(t):
    return t.detach().to("cpu").numpy()


def _close(a, b, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(_np(a), b.detach().numpy(), rtol=rtol, atol=atol)


def _arr(*values):
    return np.array(values, np.float32)


def _spd(batch, n, seed):
    a = np.random.default_rng(seed).standard_normal((*batch, n, n)).astype(np.float32)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=np.float32)


# family -> (class name, keyword arguments as float32 arrays); "_q" variants give a second member of the family
PARAMS = {
    "bernoulli": ("Bernoulli", {"probs": _arr(0.2, 0.5, 0.9)}),
    "bernoulli_q": ("Bernoulli", {"logits": _arr(-0.4, 1.2, 0.3)}),
    "beta": ("Beta", {"concentration1": _arr(0.7, 2.0, 3.5), "concentration0": _arr(1.5, 0.8, 2.5)}),
    "beta_q": ("Beta", {"concentration1": _arr(1.2, 0.9, 5.0), "concentration0": _arr(2.0, 1.1, 1.5)}),
    "binomial": ("Binomial", {"total_count": _arr(5, 5, 5), "probs": _arr(0.3, 0.6, 0.1)}),
    "binomial_q": ("Binomial", {"total_count": _arr(5, 5, 5), "logits": _arr(0.5, -1.0, 2.0)}),
    "binomial_fewer": ("Binomial", {"total_count": _arr(4, 5, 3), "probs": _arr(0.4, 0.5, 0.2)}),
    "cb": ("ContinuousBernoulli", {"probs": _arr(0.2, 0.6, 0.9)}),
    "cb_q": ("ContinuousBernoulli", {"probs": _arr(0.7, 0.3, 0.5)}),
    "dirichlet": ("Dirichlet", {"concentration": _arr(0.8, 2.0, 3.0)[None, :] + _arr(0.0, 1.5)[:, None]}),
    "dirichlet_q": ("Dirichlet", {"concentration": _arr(1.5, 0.6, 2.2)}),
    "exponential": ("Exponential", {"rate": _arr(0.5, 1.0, 2.5)}),
    "exponential_q": ("Exponential", {"rate": _arr(1.5, 0.3, 2.0)}),
    "gamma": ("Gamma", {"concentration": _arr(0.8, 2.0, 4.0), "rate": _arr(1.5, 0.7, 2.0)}),
    "gamma_q": ("Gamma", {"concentration": _arr(1.3, 0.6, 3.0), "rate": _arr(0.5, 1.7, 1.0)}),
    "gumbel": ("Gumbel", {"loc": _arr(-0.5, 0.0, 1.0), "scale": _arr(0.7, 1.2, 2.0)}),
    "laplace": ("Laplace", {"loc": _arr(0.4, -1.0, 0.0), "scale": _arr(1.1, 0.6, 2.0)}),
    "normal": ("Normal", {"loc": _arr(-1.0, 0.3, 2.0), "scale": _arr(0.5, 1.0, 1.5)}),
    "normal_q": ("Normal", {"loc": _arr(0.5, -0.2, 1.0)[None, :] + _arr(0.0, 1.0)[:, None],
                            "scale": _arr(1.5, 0.8, 2.5)}),
    # alpha <= 1 (infinite mean) and <= 2 (infinite variance) give the infinite entries of the pairs from Pareto
    "pareto": ("Pareto", {"scale": _arr(0.5, 1.0, 2.0), "alpha": _arr(0.8, 1.5, 3.5)}),
    "pareto_q": ("Pareto", {"scale": _arr(0.4, 1.5, 1.0), "alpha": _arr(2.0, 1.0, 4.0)}),
    "poisson": ("Poisson", {"rate": _arr(0.5, 2.0, 7.0)}),
    "poisson_q": ("Poisson", {"rate": _arr(1.5, 0.7, 9.0)}),
    # low < 0 and high > 1 give the infinite entries of Uniform against Beta, Exponential and Gamma
    "uniform": ("Uniform", {"low": _arr(0.1, -0.2, 0.3), "high": _arr(0.6, 0.9, 1.4)}),
    "uniform_q": ("Uniform", {"low": _arr(-0.5, -0.3, 0.2), "high": _arr(1.0, 0.8, 2.0)}),
    # low below the Pareto's scale (0.9 < 1.0) gives an infinite entry
    "uniform_pareto": ("Uniform", {"low": _arr(0.6, 0.9, 2.5), "high": _arr(1.0, 3.0, 2.6)}),
    "mvn": ("MultivariateNormal", {"loc": np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32),
                                   "covariance_matrix": _spd((2,), 3, 2)}),
    "lowrank": ("LowRankMultivariateNormal", {"loc": _arr(0.3, -0.4, 1.0),
                                              "cov_factor": np.random.default_rng(3).standard_normal((3, 2))
                                              .astype(np.float32),
                                              "cov_diag": _arr(0.5, 1.2, 0.8)}),
    "lowrank_batched": ("LowRankMultivariateNormal", {"loc": _arr(0.3, -0.4, 1.0),
                                                      "cov_factor": np.random.default_rng(4)
                                                      .standard_normal((2, 3, 1)).astype(np.float32),
                                                      "cov_diag": _arr(0.5, 1.2, 0.8)}),
}


def _make(key, requires_grad=False, device="cpu"):
    """(webgrad distribution, torch distribution, {name: (webgrad leaf, torch leaf)}) for PARAMS[key]."""
    name, kwargs = PARAMS[key]
    leaves, wkw, tkw = {}, {}, {}
    for arg, value in kwargs.items():
        grad = requires_grad and arg != "total_count"
        w = wg.tensor(value, device=device, requires_grad=grad)
        t = torch.tensor(value, requires_grad=grad)
        leaves[arg], wkw[arg], tkw[arg] = (w, t), w, t
    return getattr(D, name)(**wkw), getattr(TD, name)(**tkw), leaves


# ---------------------------------------------------------------------------------------------- class hierarchy

def _torch_classes():
    return [name for name in TD.__all__ if inspect.isclass(getattr(TD, name))
            and issubclass(getattr(TD, name), TD.Distribution)]


@pytest.mark.parametrize("name", _torch_classes())
def test_bases_match_torch(name):
    """Every torch base of a distribution class is in webgrad's MRO (webgrad adds shared-code mixins such as
    LocScale), so isinstance answers as PyTorch's, ExponentialFamily included."""
    ours, theirs = getattr(D, name), getattr(TD, name)
    our_mro = {cls.__name__ for cls in ours.__mro__}
    for base in theirs.__bases__:
        if issubclass(base, TD.Distribution):
            assert base.__name__ in our_mro
    assert issubclass(ours, D.ExponentialFamily) == issubclass(theirs, TD.ExponentialFamily)


# --------------------------------------------------------------------------------------------- family members

FAMILY = ["bernoulli", "beta", "cb", "dirichlet", "exponential", "gamma", "normal", "poisson"]
# members with a carrier measure, whose entropy ExponentialFamily.entropy computes (PyTorch leaves Beta, Dirichlet
# and Poisson without one, so there it raises NotImplementedError)
WITH_CARRIER = ["bernoulli", "cb", "exponential", "gamma", "normal"]


@pytest.mark.parametrize("key", FAMILY)
def test_natural_params_and_log_normalizer_match_torch(key):
    d, td, _ = _make(key)
    ours, theirs = d._natural_params, td._natural_params
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        _close(a, b)
    _close(d._log_normalizer(*ours), td._log_normalizer(*theirs))
    assert tuple(d._log_normalizer(*ours).shape) == tuple(d.batch_shape)


@pytest.mark.parametrize("key", FAMILY)
def test_mean_carrier_measure_matches_torch(key):
    d, td, _ = _make(key)
    if key in WITH_CARRIER:
        assert d._mean_carrier_measure == td._mean_carrier_measure
        return
    for dist in (d, td):
        with pytest.raises(NotImplementedError):
            dist._mean_carrier_measure


@pytest.mark.parametrize("key", WITH_CARRIER)
def test_bregman_entropy_matches_closed_form(key):
    """F(theta) - <theta, grad F(theta)> - E[k(x)] is the member's own entropy and PyTorch's Bregman entropy."""
    d, td, _ = _make(key)
    bregman = D.ExponentialFamily.entropy(d)
    np.testing.assert_allclose(_np(bregman), _np(d.entropy()), rtol=2e-4, atol=2e-5)
    _close(bregman, TD.ExponentialFamily.entropy(td), rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("key", ["beta", "dirichlet", "poisson"])
def test_bregman_entropy_needs_carrier_measure(key):
    d, td, _ = _make(key)
    for entropy, dist in ((D.ExponentialFamily.entropy, d), (TD.ExponentialFamily.entropy, td)):
        with pytest.raises(NotImplementedError):
            entropy(dist)


def test_poisson_entropy_is_not_implemented_as_torch():
    d, td, _ = _make("poisson")
    for dist in (d, td):
        with pytest.raises(NotImplementedError):
            dist.entropy()


@pytest.mark.parametrize("key", FAMILY)
def test_bregman_kl_matches_closed_form(key):
    """The family's Bregman KL (what KL dispatch reaches for a member without its own pair) agrees with the member's
    closed-form KL and with PyTorch's Bregman KL."""
    p, tp, _ = _make(key)
    q, tq, _ = _make(key + "_q")
    bregman = wkl._kl_expfamily_expfamily(p, q)
    _close(bregman, TD.kl._kl_expfamily_expfamily(tp, tq), rtol=1e-3, atol=1e-4)
    _close(bregman, TD.kl_divergence(tp, tq), rtol=1e-3, atol=1e-4)
    _close(D.kl_divergence(p, q), TD.kl_divergence(tp, tq), rtol=1e-3, atol=1e-4)


def test_cross_family_pair_without_closed_form_raises_as_torch():
    """Bernoulli against Normal reaches the ExponentialFamily pair, which refuses different families."""
    for module, make in ((D, wg.tensor), (TD, torch.tensor)):
        with pytest.raises(NotImplementedError, match="different exponential families"):
            module.kl_divergence(module.Bernoulli(make([0.3])), module.Normal(make([0.0]), make([1.0])))


def test_existing_behaviour_of_new_members():
    """Becoming ExponentialFamily members changes no method: expand keeps the class, Normal's entropy and Bernoulli's
    log_prob are still their own closed forms."""
    d, td, _ = _make("normal")
    e = d.expand((4, 3))
    assert type(e) is D.Normal and tuple(e.batch_shape) == (4, 3)
    assert D.Normal.entropy is not D.ExponentialFamily.entropy
    b, tb, _ = _make("bernoulli")
    value = wg.tensor(_arr(0.0, 1.0, 1.0))
    _close(b.log_prob(value), tb.log_prob(torch.tensor(_arr(0.0, 1.0, 1.0))))
    assert type(b.expand((2, 3))) is D.Bernoulli


# ------------------------------------------------------------------------------------------------- KL registry

def test_registry_has_every_torch_pair():
    ours = {(p.__name__, q.__name__) for p, q in wkl._KL_REGISTRY}
    theirs = {(p.__name__, q.__name__) for p, q in TD.kl._KL_REGISTRY}
    assert theirs <= ours, sorted(theirs - ours)


# (p, q) keys of PARAMS for the pairs with a closed form
FINITE_PAIRS = [
    ("bernoulli", "poisson"), ("binomial", "binomial_q"),
    ("beta", "exponential"), ("beta", "gamma"), ("beta", "normal"),
    ("exponential", "gamma"), ("exponential", "gumbel"), ("exponential", "normal"),
    ("gamma", "exponential"), ("gamma", "gumbel"), ("gamma", "normal"),
    ("gumbel", "normal"), ("laplace", "normal"), ("normal", "gumbel"),
    ("pareto", "pareto_q"), ("pareto", "exponential"), ("pareto", "gamma"), ("pareto", "normal"),
    ("uniform", "beta"), ("uniform", "exponential"), ("uniform", "gamma"), ("uniform", "gumbel"),
    ("uniform_pareto", "pareto"),
    ("mvn", "lowrank"), ("lowrank", "mvn"), ("mvn", "lowrank_batched"), ("lowrank_batched", "mvn"),
]

# pairs where p's support is not inside q's: infinite everywhere
INFINITE_PAIRS = [
    ("beta", "pareto"), ("cb", "pareto"),
    ("exponential", "beta"), ("exponential", "cb"), ("exponential", "pareto"), ("exponential", "uniform"),
    ("gamma", "beta"), ("gamma", "cb"), ("gamma", "pareto"), ("gamma", "uniform"),
    ("pareto", "beta"), ("pareto", "cb"), ("pareto", "uniform"),
    ("poisson", "bernoulli"), ("poisson", "binomial"),
] + [(p, q) for p in ("gumbel", "laplace", "normal")
     for q in ("beta", "cb", "exponential", "gamma", "pareto", "uniform")]


@pytest.mark.parametrize("pair", FINITE_PAIRS, ids="-".join)
def test_kl_pair_matches_torch(pair):
    p, tp, _ = _make(pair[0])
    q, tq, _ = _make(pair[1])
    kl, tkl = D.kl_divergence(p, q), TD.kl_divergence(tp, tq)
    assert tuple(kl.shape) == tuple(tkl.shape)
    _close(kl, tkl, rtol=2e-4, atol=1e-4)


@pytest.mark.parametrize("pair", INFINITE_PAIRS, ids="-".join)
def test_kl_infinite_pair_matches_torch(pair):
    p, tp, _ = _make(pair[0])
    q, tq, _ = _make(pair[1])
    kl, tkl = D.kl_divergence(p, q), TD.kl_divergence(tp, tq)
    assert tuple(kl.shape) == tuple(tkl.shape) and np.isposinf(_np(kl)).all()
    assert torch.isinf(tkl).all()


def test_masked_entries_are_infinite_where_torch_is():
    """The pairs that are finite only on part of the batch put inf exactly where PyTorch does (the test data has
    both kinds of entry for each)."""
    for pair in [("pareto", "pareto_q"), ("pareto", "exponential"), ("pareto", "normal"), ("uniform", "beta"),
                 ("uniform", "exponential"), ("uniform_pareto", "pareto")]:
        p, tp, _ = _make(pair[0])
        q, tq, _ = _make(pair[1])
        infinite = np.isinf(_np(D.kl_divergence(p, q)))
        np.testing.assert_array_equal(infinite, torch.isinf(TD.kl_divergence(tp, tq)).numpy())
        assert infinite.any() and not infinite.all(), pair


def test_binomial_counts():
    """More trials in p than in q: infinite; fewer: PyTorch's NotImplementedError."""
    p, tp, _ = _make("binomial")
    q, tq, _ = _make("binomial_fewer")
    kl, tkl = D.kl_divergence(p, q), TD.kl_divergence(tp, tq)
    _close(kl, tkl)
    np.testing.assert_array_equal(np.isinf(_np(kl)), [True, False, True])
    for module, a, b in ((D, q, p), (TD, tq, tp)):
        with pytest.raises(NotImplementedError, match="total_count"):
            module.kl_divergence(a, b)


def test_mvn_lowrank_event_shapes_must_match():
    mvn = D.MultivariateNormal(wg.zeros(2), wg.eye(2))
    lowrank, _, _ = _make("lowrank")
    for a, b in ((mvn, lowrank), (lowrank, mvn)):
        with pytest.raises(ValueError, match="different event shapes"):
            D.kl_divergence(a, b)


def test_mvn_lowrank_agree_with_full_covariance():
    """A LowRankMultivariateNormal and the MultivariateNormal of its covariance give the same KL, either way round
    (the Woodbury and triangular-solve paths against the full-covariance pair)."""
    mvn, _, _ = _make("mvn")
    for key in ("lowrank", "lowrank_batched"):
        lowrank, _, _ = _make(key)
        as_full = D.MultivariateNormal(lowrank.loc, covariance_matrix=lowrank.covariance_matrix)
        np.testing.assert_allclose(_np(D.kl_divergence(mvn, lowrank)), _np(D.kl_divergence(mvn, as_full)),
                                   rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(_np(D.kl_divergence(lowrank, mvn)), _np(D.kl_divergence(as_full, mvn)),
                                   rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pair", [("gamma", "normal"), ("normal", "gumbel"), ("uniform_pareto", "pareto"),
                                  ("beta", "gamma"), ("lowrank", "mvn"), ("mvn", "lowrank")], ids="-".join)
def test_kl_gradients_match_torch(pair):
    p, tp, p_leaves = _make(pair[0], requires_grad=True)
    q, tq, q_leaves = _make(pair[1], requires_grad=True)
    D.kl_divergence(p, q).sum().backward()
    TD.kl_divergence(tp, tq).sum().backward()
    for w, t in list(p_leaves.values()) + list(q_leaves.values()):
        if t.requires_grad:
            _close(w.grad, t.grad, rtol=1e-3, atol=1e-4)


@pytest.mark.skipif(not webgpu_available(), reason="no WebGPU adapter")
def test_webgpu_kl_and_bregman_entropy():
    """A cross-family KL with its inf mask, a Bregman KL and a Bregman entropy (autograd through the
    log-normaliser) on WebGPU tensors, against PyTorch."""
    p, _, _ = _make("pareto", device="webgpu")
    q, _, _ = _make("normal", device="webgpu")
    _, tp, _ = _make("pareto")
    _, tq, _ = _make("normal")
    kl = D.kl_divergence(p, q)
    assert kl.device.type == "webgpu"
    _close(kl, TD.kl_divergence(tp, tq), rtol=1e-3, atol=1e-4)
    g, _, _ = _make("gamma", device="webgpu")
    gq, _, _ = _make("gamma_q", device="webgpu")
    _, tg, _ = _make("gamma")
    _, tgq, _ = _make("gamma_q")
    _close(wkl._kl_expfamily_expfamily(g, gq), TD.kl_divergence(tg, tgq), rtol=1e-3, atol=1e-4)
    _close(D.ExponentialFamily.entropy(g), tg.entropy(), rtol=1e-3, atol=1e-4)
