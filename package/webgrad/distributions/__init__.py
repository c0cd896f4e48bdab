"""Probability distributions (webgrad.distributions), as torch.distributions: parameters and samples are
webgrad tensors, every formula a composition of tensor ops (differentiable, on any device)."""

from . import constraints, transforms  # noqa: F401
from .bernoulli import Bernoulli  # noqa: F401
from .beta import Beta  # noqa: F401
from .binomial import Binomial  # noqa: F401
from .categorical import Categorical  # noqa: F401
from .cauchy import Cauchy  # noqa: F401
from .chi2 import Chi2  # noqa: F401
from .constraint_registry import biject_to, transform_to  # noqa: F401
from .continuous_bernoulli import ContinuousBernoulli  # noqa: F401
from .dirichlet import Dirichlet  # noqa: F401
from .distribution import Distribution  # noqa: F401
from .exp_family import ExponentialFamily  # noqa: F401
from .exponential import Exponential  # noqa: F401
from .fishersnedecor import FisherSnedecor  # noqa: F401
from .gamma import Gamma  # noqa: F401
from .generalized_pareto import GeneralizedPareto  # noqa: F401
from .geometric import Geometric  # noqa: F401
from .gumbel import Gumbel  # noqa: F401
from .half_cauchy import HalfCauchy  # noqa: F401
from .half_normal import HalfNormal  # noqa: F401
from .independent import Independent  # noqa: F401
from .inverse_gamma import InverseGamma  # noqa: F401
from .kl import kl_divergence, register_kl  # noqa: F401
from .kumaraswamy import Kumaraswamy  # noqa: F401
from .laplace import Laplace  # noqa: F401
from .lkj_cholesky import LKJCholesky  # noqa: F401
from .log_normal import LogNormal  # noqa: F401
from .logistic_normal import LogisticNormal  # noqa: F401
from .lowrank_multivariate_normal import LowRankMultivariateNormal  # noqa: F401
from .mixture_same_family import MixtureSameFamily  # noqa: F401
from .multinomial import Multinomial  # noqa: F401
from .multivariate_normal import MultivariateNormal  # noqa: F401
from .negative_binomial import NegativeBinomial  # noqa: F401
from .normal import Normal  # noqa: F401
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough  # noqa: F401
from .pareto import Pareto  # noqa: F401
from .poisson import Poisson  # noqa: F401
from .relaxed_bernoulli import RelaxedBernoulli  # noqa: F401
from .relaxed_categorical import RelaxedOneHotCategorical  # noqa: F401
from .studentT import StudentT  # noqa: F401
from .transformed_distribution import TransformedDistribution  # noqa: F401
from .transforms import AbsTransform, AffineTransform, ComposeTransform, ExpTransform  # noqa: F401
from .transforms import CatTransform, CorrCholeskyTransform, CumulativeDistributionTransform  # noqa: F401
from .transforms import IndependentTransform, ReshapeTransform, StackTransform  # noqa: F401
from .transforms import LowerCholeskyTransform, PositiveDefiniteTransform, PowerTransform  # noqa: F401
from .transforms import SigmoidTransform, SoftmaxTransform, SoftplusTransform, StickBreakingTransform  # noqa: F401
from .transforms import TanhTransform, Transform, identity_transform  # noqa: F401
from .uniform import Uniform  # noqa: F401
from .von_mises import VonMises  # noqa: F401
from .weibull import Weibull  # noqa: F401
from .wishart import Wishart  # noqa: F401
