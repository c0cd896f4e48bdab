"""Cauchy(loc, scale), as torch.distributions.Cauchy."""

import math

from .._tensor import Size
from .families import LocScale
from .utils import _uniform


class Cauchy(LocScale):
    @property
    def mean(self):
        return self.loc * 0 + math.nan

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self.loc * 0 + math.inf

    def rsample(self, sample_shape=Size()):
        """loc + scale * tan(pi (u - 1/2)): the inverse CDF of uniform noise."""
        shape = self._extended_shape(sample_shape)
        eps = (math.pi * (_uniform(shape, self.loc.dtype, self.loc.device) - 0.5)).tan()
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value):
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()
