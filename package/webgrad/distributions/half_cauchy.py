"""HalfCauchy(scale): |Cauchy(0, scale)|, as torch.distributions.HalfCauchy."""

import math

from .cauchy import Cauchy
from .half import Half


class HalfCauchy(Half):
    BASE = Cauchy

    @property
    def mean(self):
        from .. import full
        return full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype, device=self.scale.device)

    @property
    def variance(self):
        return self.base_dist.variance
