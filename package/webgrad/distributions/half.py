"""Half (folded at 0) distributions: |X| for a loc-0 distribution X symmetric about 0, as torch's HalfNormal and
HalfCauchy. A member names its BASE (Normal, Cauchy) and gives its own mean and variance."""

import math

from .._tensor import Size
from . import constraints
from .families import _member
from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform


class Half(TransformedDistribution):
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    BASE = None

    def __init__(self, scale, validate_args=None):
        super().__init__(self.BASE(0, scale, validate_args=False), AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(_member(self, Half), _instance)
        return super().expand(Size(batch_shape), _instance=new)

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mode(self):
        return self.scale * 0

    def log_prob(self, value):
        from .. import as_tensor, where
        if self._validate_args:
            self._validate_sample(value)
        value = as_tensor(value, dtype=self.scale.dtype, device=self.scale.device)
        return where(value >= 0, self.base_dist.log_prob(value) + math.log(2), -math.inf)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)
