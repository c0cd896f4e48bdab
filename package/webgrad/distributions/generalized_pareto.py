"""GeneralizedPareto(loc, scale, concentration), as torch.distributions.GeneralizedPareto: the limit law of tails
beyond a threshold. concentration 0 is the exponential case, handled by its own branch of each formula (the
general one divides by the concentration); concentration < 0 bounds the support above at loc - scale /
concentration."""

import math
from numbers import Number

from .._tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import _uniform, broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        scalar = all(isinstance(v, Number) for v in (loc, scale, concentration))
        super().__init__(Size() if scalar else self.loc.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(GeneralizedPareto, _instance)
        batch_shape = Size(batch_shape)
        new.loc, new.scale = self.loc.expand(batch_shape), self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        super(GeneralizedPareto, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _exponential_case(self):
        """Where the concentration is 0 (to isclose's tolerance), and the concentration with those set to 1."""
        from .. import isclose, where
        eq_zero = isclose(self.concentration, self.concentration * 0)
        return eq_zero, where(eq_zero, self.concentration * 0 + 1, self.concentration)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        return self.icdf(_uniform(shape, self.loc.dtype, self.loc.device))

    def _z(self, x):
        return (x - self.loc) / self.scale

    def log_prob(self, value):
        from .. import where
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._exponential_case()
        y = 1 / safe_conc + 1
        general = where(y == 0, y, y * (safe_conc * z).log1p())
        return -self.scale.log() - where(eq_zero, z, general)

    def log_survival_function(self, value):
        from .. import where
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._exponential_case()
        return where(eq_zero, -z, -(safe_conc * z).log1p() / safe_conc)

    def log_cdf(self, value):
        return (-self.log_survival_function(value).exp()).log1p()

    def cdf(self, value):
        return self.log_cdf(value).exp()

    def icdf(self, value):
        from .. import where
        eq_zero, safe_conc = self._exponential_case()
        log_u = (-value).log1p()
        general = self.loc + self.scale / safe_conc * (-safe_conc * log_u).expm1()
        return where(eq_zero, self.loc - self.scale * log_u, general)

    @property
    def mean(self):
        from .. import where
        valid = self.concentration < 1
        safe_conc = where(valid, self.concentration, self.concentration * 0 + 0.5)
        return where(valid, self.loc + self.scale / (1 - safe_conc), math.nan)

    @property
    def variance(self):
        from .. import where
        valid = self.concentration < 0.5
        safe_conc = where(valid, self.concentration, self.concentration * 0 + 0.25)
        result = self.scale.pow(2) / ((1 - safe_conc).pow(2) * (1 - 2 * safe_conc))
        return where(valid, result, math.nan)

    @property
    def mode(self):
        return self.loc

    def entropy(self):
        return (self.scale.log() + self.concentration + 1).expand(*self._batch_shape)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        from .. import where
        upper = where(self.concentration < 0, self.loc - self.scale / self.concentration, math.inf)
        return constraints.interval(self.loc, upper)
