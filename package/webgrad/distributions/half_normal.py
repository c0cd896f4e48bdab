"""HalfNormal(scale): |Normal(0, scale)|, as torch.distributions.HalfNormal."""

import math

from .half import Half
from .normal import Normal


class HalfNormal(Half):
    BASE = Normal

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)
