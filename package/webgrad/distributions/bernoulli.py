"""Bernoulli(probs or logits), as torch.distributions.Bernoulli."""

import math

from .._tensor import Size
from . import constraints
from .exp_family import ExponentialFamily
from .families import BinaryParams
from .utils import _uniform, broadcast_all


def _bce_with_logits(logits, target):
    from ..nn.functional import binary_cross_entropy_with_logits
    return binary_cross_entropy_with_logits(logits, target, reduction="none")


class Bernoulli(ExponentialFamily, BinaryParams):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args=None):
        super().__init__(self._set_params(probs, logits), validate_args=validate_args)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return mode.masked_fill(self.probs == 0.5, math.nan)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        probs = self.probs.detach()
        return (_uniform(shape, probs.dtype, probs.device) < probs).to(probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -_bce_with_logits(logits, value)

    def entropy(self):
        return _bce_with_logits(self.logits, self.probs)

    def enumerate_support(self, expand=True):
        from .. import arange
        values = arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape(-1, *(1,) * len(self._batch_shape))
        if expand:
            values = values.expand(-1, *self._batch_shape)
        return values

    @property
    def _natural_params(self):
        return (self.probs.logit(),)

    def _log_normalizer(self, x):
        """F(theta) = log(1 + exp(theta))."""
        return x.exp().log1p()
