"""Kumaraswamy(concentration1, concentration0) on [0, 1], as torch.distributions.Kumaraswamy: a Beta look-alike
with a closed-form CDF, so samples are uniform draws through (1 - (1 - u)^(1/b))^(1/a), differentiable in both
concentrations."""

import math

from .._tensor import Size
from . import constraints
from .gumbel import _EULER
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .uniform import Uniform
from .utils import broadcast_all

__all__ = ["Kumaraswamy"]


def _moments(a, b, n):
    """E[X^n] = b B(1 + n / a, b), through lgamma."""
    arg1 = 1 + n / a
    return b * (arg1.lgamma() + b.lgamma() - (arg1 + b).lgamma()).exp()


class Kumaraswamy(TransformedDistribution):
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        from .. import full_like
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base = Uniform(full_like(self.concentration0, 0), full_like(self.concentration0, 1),
                       validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()),
                      AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        batch_shape = Size(batch_shape)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        """((a - 1) / (a b - 1))^(1 / a) where a >= 1 and b >= 1 (not both 1), NaN elsewhere. PyTorch's mode
        evaluates a different expression that is NaN for every parameter."""
        from .. import where
        a, b = self.concentration1, self.concentration0
        log_mode = ((a - 1) / (a * b - 1)).log() / a
        defined = (a >= 1) & (b >= 1) & ((a > 1) | (b > 1))
        return where(defined, log_mode, math.nan).exp()

    @property
    def variance(self):
        return _moments(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self):
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        harmonic0 = (self.concentration0 + 1).digamma() + _EULER
        return t0 + t1 * harmonic0 - self.concentration1.log() - self.concentration0.log()
