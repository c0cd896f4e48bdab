"""ContinuousBernoulli(probs or logits) on [0, 1], as torch.distributions.ContinuousBernoulli (Loaiza-Ganem and
Cunningham, 2019): density proportional to probs^x (1 - probs)^(1 - x). Its normaliser, mean and variance have a
removable singularity at probs = 1/2: inside `lims` they switch to Taylor expansions, as PyTorch's do."""

import math

from . import constraints
from .distribution import _all_true
from .exp_family import ExponentialFamily
from .families import BinaryParams
from .utils import _uniform, broadcast_all, clamp_probs, lazy_property, logits_to_probs

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ExponentialFamily, BinaryParams):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        batch_shape = self._set_params(probs, logits)
        if probs is not None:
            # probs is checked before the clamp below, which would make any value pass (PyTorch checks it here
            # only when validate_args is given explicitly)
            if validate_args is not None and not _all_true(constraints.unit_interval.check(self.probs)):
                raise ValueError("The parameter probs has invalid values")
            self.probs = self._param = clamp_probs(self.probs)
        self._lims = lims
        super().__init__(batch_shape, validate_args=validate_args)

    def _expand_more(self, new):
        new._lims = self._lims

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        """probs, with the values inside the unstable region moved to its lower edge (where the exact formulas,
        evaluated on both branches of a where, stay finite)."""
        from .. import where
        return where(self._outside_unstable_region(), self.probs, self.probs * 0 + self._lims[0])

    def _cont_bern_log_norm(self):
        """log C(probs), C(p) = 2 atanh(1 - 2p) / (1 - 2p) (log 2 at p = 1/2)."""
        from .. import where
        cut = self._cut_probs()
        below_half = where(cut <= 0.5, cut, cut * 0)
        above_half = where(cut >= 0.5, cut, cut * 0 + 1)
        log_norm = ((-cut).log1p() - cut.log()).abs().log() - where(cut <= 0.5, (-2.0 * below_half).log1p(),
                                                                      (2.0 * above_half - 1.0).log())
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        from .. import where
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / ((-cut).log1p() - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self):
        return self.variance.sqrt()

    @property
    def variance(self):
        from .. import where
        cut = self._cut_probs()
        variances = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + 1.0 / ((-cut).log1p() - cut.log()).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return where(self._outside_unstable_region(), variances, taylor)

    def sample(self, sample_shape=()):
        from .. import no_grad
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """The inverse CDF of uniform draws: differentiable in probs / logits."""
        shape = self._extended_shape(sample_shape)
        return self.icdf(_uniform(shape, self.probs.dtype, self.probs.device))

    def log_prob(self, value):
        from ..nn.functional import binary_cross_entropy_with_logits
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value):
        from .. import where
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = where(self._outside_unstable_region(), cdfs, value)
        return where(value <= 0.0, value * 0, where(value >= 1.0, value * 0 + 1, unbounded))

    def icdf(self, value):
        from .. import where
        cut = self._cut_probs()
        exact = ((-cut + value * (2.0 * cut - 1.0)).log1p() - (-cut).log1p()) / (cut.log() - (-cut).log1p())
        return where(self._outside_unstable_region(), exact, value)

    def entropy(self):
        log_probs0 = (-self.probs).log1p()
        log_probs1 = self.probs.log()
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        """F(logits) = log((exp(x) - 1) / x), by its Taylor expansion near x = 0."""
        from .. import where
        unstable_low, unstable_high = self._lims[0] - 0.5, self._lims[1] - 0.5
        outside = (x <= unstable_low) | (x > unstable_high)
        cut = where(outside, x, x * 0 + unstable_low)
        log_norm = cut.expm1().abs().log() - cut.abs().log()
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return where(outside, log_norm, taylor)
