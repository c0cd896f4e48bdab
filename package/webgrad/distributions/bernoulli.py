"""Bernoulli(probs or logits), as torch.distributions.Bernoulli."""

import math
from numbers import Number

from .._tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import _uniform, broadcast_all, lazy_property, logits_to_probs, probs_to_logits


def _bce_with_logits(logits, target):
    from ..nn.functional import binary_cross_entropy_with_logits
    return binary_cross_entropy_with_logits(logits, target, reduction="none")


class Bernoulli(Distribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(Size() if is_scalar else self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Bernoulli, _instance)
        batch_shape = Size(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        super(Bernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.size()

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
