"""kl_divergence(p, q) and register_kl, as torch.distributions.kl: closed forms looked up by the two
distributions' types (the most specific registered pair along the classes' MROs)."""

import math
import warnings

from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .cauchy import Cauchy
from .continuous_bernoulli import ContinuousBernoulli
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exp_family import ExponentialFamily, _log_normalizer_and_gradient
from .exponential import Exponential
from .gamma import Gamma
from .geometric import Geometric
from .gumbel import _EULER, Gumbel
from .half_normal import HalfNormal
from .independent import Independent
from .laplace import Laplace
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .pareto import Pareto
from .poisson import Poisson
from .transformed_distribution import TransformedDistribution
from .uniform import Uniform
from .utils import _sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}  # (type_p, type_q) -> fn(p, q)
_KL_MEMOIZE = {}  # (type_p, type_q) -> the fn dispatch picked


def register_kl(type_p, type_q):
    """Decorator: fn(p, q) computes KL(p || q) for p of type_p and q of type_q (subclasses included)."""
    if not (isinstance(type_p, type) and issubclass(type_p, Distribution)):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not (isinstance(type_q, type) and issubclass(type_q, Distribution)):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()
        return fun

    return decorator


def _dispatch_kl(type_p, type_q):
    matches = [(sp, sq) for sp, sq in _KL_REGISTRY if issubclass(type_p, sp) and issubclass(type_q, sq)]
    if not matches:
        return NotImplemented
    depth_p, depth_q = type_p.__mro__.index, type_q.__mro__.index
    left = min(matches, key=lambda m: (depth_p(m[0]), depth_q(m[1])))
    right = min(matches, key=lambda m: (depth_q(m[1]), depth_p(m[0])))
    if _KL_REGISTRY[left] is not _KL_REGISTRY[right]:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). Please "
                      f"register_kl({left[0].__name__}, {right[1].__name__})", RuntimeWarning, stacklevel=2)
    return _KL_REGISTRY[left]


def kl_divergence(p, q):
    """KL(p || q), batched over the two distributions' broadcast batch shape."""
    key = type(p), type(q)
    if key not in _KL_MEMOIZE:
        _KL_MEMOIZE[key] = _dispatch_kl(*key)
    fun = _KL_MEMOIZE[key]
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type "
                                  f"{q.__class__.__name__}")
    return fun(p, q)


def _infinite_like(t):
    from .. import full_like
    return full_like(t, math.inf)


def _x_log_x(t):
    """x log x, 0 at x = 0."""
    from .. import xlogy
    return xlogy(t, t)


def _where_inf(mask, t):
    from .. import where
    return where(mask, math.inf, t)


def _where_zero(mask, t):
    from .. import where
    return where(mask, 0.0, t)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    from ..nn.functional import softplus
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = _where_zero(p.probs == 0, _where_inf(q.probs == 0, t1))
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = _where_zero(p.probs == 1, _where_inf(q.probs == 1, t2))
    return t1 + t2


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_p = p.concentration1 + p.concentration0
    sum_q = q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + sum_p.lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + sum_q.lgamma()
    t3 = (p.concentration1 - q.concentration1) * p.concentration1.digamma()
    t4 = (p.concentration0 - q.concentration0) * p.concentration0.digamma()
    t5 = (sum_q - sum_p) * sum_p.digamma()
    return t1 - t2 + t3 + t4 + t5


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    shape = tuple(t.shape)
    t = _where_zero((p.probs == 0).expand(*shape), _where_inf((q.probs == 0).expand(*shape), t))
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = sum_p.lgamma() - sum_q.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sum_p.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = q.concentration.lgamma() - p.concentration.lgamma()
    t3 = (p.concentration - q.concentration) * p.concentration.digamma()
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return t1 + t2 + t3 - 1


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    from .. import broadcast_shapes, linalg
    if tuple(p.event_shape) != tuple(q.event_shape):
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot be "
                         "computed")
    Lp, Lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = Lq.diagonal(dim1=-2, dim2=-1).log().sum(-1) - Lp.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    batch = tuple(broadcast_shapes(tuple(Lq.shape[:-2]), tuple(Lp.shape[:-2])))
    n = p.event_shape[0]
    # tr(Sq^-1 Sp) = |Lq^-1 Lp|_F^2
    term2 = linalg.solve_triangular(Lq.expand(*batch, n, n), Lp.expand(*batch, n, n), upper=False).pow(2)
    term2 = term2.sum((-2, -1))
    term3 = _batch_mahalanobis(Lq, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms:
        raise NotImplementedError
    if tuple(p.event_shape) != tuple(q.event_shape):
        raise NotImplementedError
    extra_event_dim = len(p.event_shape) - len(p.base_dist.event_shape)
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), extra_event_dim)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _where_inf((q.low > p.low) | (q.high < p.high), result)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    loc_diff = p.loc - q.loc
    scale_ratio = p.scale / q.scale
    loc_diff_scale_ratio = loc_diff / p.scale
    t1 = scale_ratio.log()
    t2 = math.sqrt(2 / math.pi) * p.scale * (-0.5 * loc_diff_scale_ratio.pow(2)).exp()
    t3 = loc_diff * (loc_diff / (math.sqrt(2) * p.scale)).erf()
    return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return _where_inf((q.low > p.support.lower_bound) | (q.high < p.support.upper_bound), result)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = common_term.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    return t1 - (4 * p.scale * q.scale).log()


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * _EULER
    t3 = (ct2 + (1 + ct1).lgamma() - ct3).exp()
    return t1 + t2 + t3 - (1 + _EULER)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


def _batch_trace_XXT(bmat):
    return bmat.pow(2).sum((-2, -1))


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrankmultivariatenormal_lowrankmultivariatenormal(p, q):
    from .. import linalg
    from .lowrank_multivariate_normal import _batch_lowrank_logdet, _batch_lowrank_mahalanobis
    if tuple(p.event_shape) != tuple(q.event_shape):
        raise ValueError("KL-divergence between two Low Rank Multivariate Normals with different event shapes cannot "
                         "be computed")
    pW, pD, qW, qD = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag, q._unbroadcasted_cov_factor, \
        q._unbroadcasted_cov_diag
    term1 = _batch_lowrank_logdet(qW, qD, q._capacitance_tril) - _batch_lowrank_logdet(pW, pD, p._capacitance_tril)
    term3 = _batch_lowrank_mahalanobis(qW, qD, q.loc - p.loc, q._capacitance_tril)
    # tr(Sq^-1 Sp) with Sq^-1 = qD^-1 - A^T A (Woodbury) and Sp = pD + pW pW^T
    A = linalg.solve_triangular(q._capacitance_tril, qW.mT / qD.unsqueeze(-2), upper=False)
    term21 = (pD / qD).sum(-1)
    term22 = _batch_trace_XXT(pW * qD.rsqrt().unsqueeze(-1))
    term23 = _batch_trace_XXT(A * pD.sqrt().unsqueeze(-2))
    term24 = _batch_trace_XXT(A @ pW)
    return 0.5 * (term1 + term21 + term22 - term23 - term24 + term3 - p.event_shape[0])


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    """The Bregman divergence of the family's log-normaliser: F(theta_q) - F(theta_p) - <theta_q - theta_p,
    grad F(theta_p)>."""
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential families cannot be "
                                  "computed using Bregman divergences")
    p_params, p_log_normalizer, gradients = _log_normalizer_and_gradient(p)
    result = q._log_normalizer(*q._natural_params) - p_log_normalizer
    for p_param, q_param, grad in zip(p_params, q._natural_params, gradients):
        result = result - _sum_rightmost((q_param - p_param) * grad, len(q.event_shape))
    return result


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + (-p.probs).log1p()
    t3 = -q._cont_bern_log_norm() - (-q.probs).log1p()
    return t1 + t2 + t3


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    return -p.entropy() - p.mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    t1 = -p.entropy()
    t2 = 0.5 * (math.log(2.0 * math.pi) + (q.loc / q.scale).pow(2)) + q.scale.log()
    t3 = (p.variance + p.mean.pow(2) - 2.0 * q.loc * p.mean) / (2.0 * q.scale.pow(2))
    return t1 + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    # infinite unless the uniform's support strictly contains [0, 1], PyTorch's (q.low >= 0) | (q.high <= 1)
    return _where_inf((q.low >= p.support.lower_bound) | (q.high <= p.support.upper_bound), result)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    result = -p.entropy() - p.mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()
    return _where_inf((p.high >= q.support.upper_bound) | (p.low <= q.support.lower_bound), result)


# Pairs where p puts mass outside q's support: KL(p || q) is infinite everywhere.

@register_kl(Beta, Pareto)
def _kl_beta_infinity(p, q):
    return _infinite_like(p.concentration1)


@register_kl(ContinuousBernoulli, Pareto)
def _kl_continuous_bernoulli_infinity(p, q):
    return _infinite_like(p.probs)


@register_kl(Exponential, Beta)
@register_kl(Exponential, ContinuousBernoulli)
@register_kl(Exponential, Pareto)
@register_kl(Exponential, Uniform)
def _kl_exponential_infinity(p, q):
    return _infinite_like(p.rate)


@register_kl(Gamma, Beta)
@register_kl(Gamma, ContinuousBernoulli)
@register_kl(Gamma, Pareto)
@register_kl(Gamma, Uniform)
def _kl_gamma_infinity(p, q):
    return _infinite_like(p.concentration)


@register_kl(Gumbel, Beta)
@register_kl(Gumbel, ContinuousBernoulli)
@register_kl(Gumbel, Exponential)
@register_kl(Gumbel, Gamma)
@register_kl(Gumbel, Pareto)
@register_kl(Gumbel, Uniform)
@register_kl(Laplace, Beta)
@register_kl(Laplace, ContinuousBernoulli)
@register_kl(Laplace, Exponential)
@register_kl(Laplace, Gamma)
@register_kl(Laplace, Pareto)
@register_kl(Laplace, Uniform)
@register_kl(Normal, Beta)
@register_kl(Normal, ContinuousBernoulli)
@register_kl(Normal, Exponential)
@register_kl(Normal, Gamma)
@register_kl(Normal, Pareto)
@register_kl(Normal, Uniform)
def _kl_real_line_infinity(p, q):
    return _infinite_like(p.loc)


@register_kl(Pareto, Beta)
@register_kl(Pareto, ContinuousBernoulli)
@register_kl(Pareto, Uniform)
def _kl_pareto_infinity(p, q):
    return _infinite_like(p.scale)


@register_kl(Poisson, Bernoulli)
@register_kl(Poisson, Binomial)
def _kl_poisson_infinity(p, q):
    return _infinite_like(p.rate)


# Discrete pairs.

@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    """n_p (p log(p / q) + (1 - p) log((1 - p) / (1 - q))) for equal counts; infinite where p has more trials
    (its support reaches counts q cannot give). Fewer trials in p than in q is PyTorch's NotImplementedError."""
    if bool((p.total_count < q.total_count).any().item()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return _where_inf(p.total_count > q.total_count, kl)


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


# Pareto and the pairs into it (Gil, 2011, "Kullback-Leibler divergences of continuous distributions").

@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * scale_ratio.log() - alpha_ratio.log() + alpha_ratio - 1
    return _where_inf(p.support.lower_bound < q.support.lower_bound, result)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    scale_rate_prod = p.scale * q.rate
    t1 = (p.alpha / scale_rate_prod).log()
    t3 = p.alpha * scale_rate_prod / (p.alpha - 1)
    # infinite where p's mean is
    return _where_inf(p.alpha <= 1, t1 - p.alpha.reciprocal() + t3 - 1)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    common_term = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - common_term
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common_term
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return _where_inf(p.alpha <= 1, t1 + t2 + t3 + t4 - 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    var_normal = 2 * q.scale.pow(2)
    common_term = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t3 = p.alpha * common_term.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common_term - q.loc).pow(2)
    # infinite where p's variance is
    return _where_inf(p.alpha <= 2, t1 - p.alpha.reciprocal() + (t3 + t4) / var_normal - 1)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * width).log()
    t2 = (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    return _where_inf(p.low < q.support.lower_bound, t2 * (q.alpha + 1) - t1)


# Beta into distributions on wider supports: -H(p) - E_p[log q].

@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * (p.concentration1 / (p.concentration1 + p.concentration0))


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    total = p.concentration1 + p.concentration0
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (q.concentration - 1) * (p.concentration1.digamma() - total.digamma())
    t4 = q.rate * p.concentration1 / total
    return -p.entropy() + t2 - t3 + t4


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    total = p.concentration1 + p.concentration0
    mean = p.concentration1 / total
    var_normal = q.scale.pow(2)
    t2 = 0.5 * (var_normal * 2 * math.pi).log()
    half_second_moment = (mean * (1 - mean) / (total + 1) + mean.pow(2)) * 0.5
    return -p.entropy() + t2 + (half_second_moment - q.loc * mean + q.loc.pow(2) * 0.5) / var_normal


# Exponential and Gamma into other families.

@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    t1 = -q.concentration * ratio.log()
    return t1 + ratio + q.concentration.lgamma() + q.concentration * _EULER - (1 + _EULER)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    scale_rate_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = scale_rate_prod.log() - 1
    t2 = loc_scale_ratio.exp() * scale_rate_prod / (scale_rate_prod + 1)
    return t1 - loc_scale_ratio + t2 + scale_rate_prod.reciprocal()


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var_normal = q.scale.pow(2)
    rate_sqr = p.rate.pow(2)
    t1 = 0.5 * (rate_sqr * var_normal * 2 * math.pi).log()
    return t1 - 1 + (rate_sqr.reciprocal() - q.loc / p.rate + q.loc.pow(2) * 0.5) / var_normal


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    beta_scale_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = (p.concentration - 1) * p.concentration.digamma() - p.concentration.lgamma() - p.concentration
    t2 = beta_scale_prod.log() + p.concentration / beta_scale_prod
    t3 = loc_scale_ratio.exp() * (1 + beta_scale_prod.reciprocal()).pow(-p.concentration) - loc_scale_ratio
    return t1 + t2 + t3


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    var_normal = q.scale.pow(2)
    beta_sqr = p.rate.pow(2)
    t1 = 0.5 * (beta_sqr * var_normal * 2 * math.pi).log() - p.concentration - p.concentration.lgamma()
    t2 = 0.5 * (p.concentration.pow(2) + p.concentration) / beta_sqr
    t3 = q.loc * p.concentration / p.rate
    t4 = 0.5 * q.loc.pow(2)
    return t1 + (p.concentration - 1) * p.concentration.digamma() + (t2 - t3 + t4) / var_normal


# Gumbel, Laplace and Normal against each other.

@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    param_ratio = p.scale / q.scale
    t1 = (param_ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * param_ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * _EULER - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (_EULER + 1)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var_normal = q.scale.pow(2)
    scale_sqr_var_ratio = p.scale.pow(2) / var_normal
    t1 = 0.5 * (2 * scale_sqr_var_ratio / math.pi).log()
    t2 = 0.5 * p.loc.pow(2) - p.loc * q.loc + 0.5 * q.loc.pow(2)
    return -t1 + scale_sqr_var_ratio + t2 / var_normal - 1


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_scale_ratio = p.loc / q.scale
    var_scale_sqr_ratio = (p.scale / q.scale).pow(2)
    loc_scale_ratio = q.loc / q.scale
    t1 = var_scale_sqr_ratio.log() * 0.5
    t2 = mean_scale_ratio - loc_scale_ratio
    t3 = (-mean_scale_ratio + 0.5 * var_scale_sqr_ratio + loc_scale_ratio).exp()
    return -t1 + t2 + t3 - (0.5 * (1 + math.log(2 * math.pi)))


# Uniform into other families: -log(high - low) - E_p[log q].

@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    width = p.high - p.low
    t2 = (q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    t3 = (q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + width) / width
    t4 = q.concentration1.lgamma() + q.concentration0.lgamma() - (q.concentration1 + q.concentration0).lgamma()
    result = t3 + t4 - width.log() - t2
    return _where_inf((p.high > q.support.upper_bound) | (p.low < q.support.lower_bound), result)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _where_inf(p.low < q.support.lower_bound, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    width = p.high - p.low
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    t4 = q.rate * (p.high + p.low) / 2
    return _where_inf(p.low < q.support.lower_bound, -width.log() + t2 + t3 + t4)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    common_term = q.scale / (p.high - p.low)
    high_loc_diff = (p.high - q.loc) / q.scale
    low_loc_diff = (p.low - q.loc) / q.scale
    t1 = common_term.log() + 0.5 * (high_loc_diff + low_loc_diff)
    t2 = common_term * ((-high_loc_diff).exp() - (-low_loc_diff).exp())
    return t1 - t2


# Multivariate normals, full and low-rank covariance: log det ratio, tr(Sq^-1 Sp) and the Mahalanobis term.

@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_multivariatenormal_lowrankmultivariatenormal(p, q):
    from .. import linalg
    from .lowrank_multivariate_normal import _batch_lowrank_logdet, _batch_lowrank_mahalanobis
    if tuple(p.event_shape) != tuple(q.event_shape):
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with different event shapes "
                         "cannot be computed")
    Lp = p._unbroadcasted_scale_tril
    qW, qD = q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag
    term1 = (_batch_lowrank_logdet(qW, qD, q._capacitance_tril)
             - 2 * Lp.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    term3 = _batch_lowrank_mahalanobis(qW, qD, q.loc - p.loc, q._capacitance_tril)
    # tr(Sq^-1 Sp) with Sq^-1 = qD^-1 - A^T A (Woodbury) and Sp = Lp Lp^T
    A = linalg.solve_triangular(q._capacitance_tril, qW.mT / qD.unsqueeze(-2), upper=False)
    term21 = _batch_trace_XXT(Lp * qD.rsqrt().unsqueeze(-1))
    term22 = _batch_trace_XXT(A @ Lp)
    return 0.5 * (term1 + term21 - term22 + term3 - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrankmultivariatenormal_multivariatenormal(p, q):
    from .. import broadcast_shapes, linalg
    from .lowrank_multivariate_normal import _batch_lowrank_logdet
    if tuple(p.event_shape) != tuple(q.event_shape):
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with different event shapes "
                         "cannot be computed")
    Lq = q._unbroadcasted_scale_tril
    pW, pD = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag
    term1 = 2 * Lq.diagonal(dim1=-2, dim2=-1).log().sum(-1) - _batch_lowrank_logdet(pW, pD, p._capacitance_tril)
    term3 = _batch_mahalanobis(Lq, q.loc - p.loc)
    # tr(Sq^-1 Sp) = |Lq^-1 pW|_F^2 + |Lq^-1 pD^(1/2)|_F^2
    batch = tuple(broadcast_shapes(tuple(Lq.shape[:-2]), tuple(pW.shape[:-2])))
    n, rank = p.event_shape[0], pW.shape[-1]
    Lq = Lq.expand(*batch, n, n)
    term21 = _batch_trace_XXT(linalg.solve_triangular(Lq, pW.expand(*batch, n, rank), upper=False))
    term22 = _batch_trace_XXT(linalg.solve_triangular(Lq, pD.sqrt().diag_embed().expand(*batch, n, n), upper=False))
    return 0.5 * (term1 + term21 + term22 + term3 - p.event_shape[0])
