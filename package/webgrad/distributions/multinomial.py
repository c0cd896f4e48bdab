"""Multinomial(total_count, probs or logits): counts of total_count categorical draws, as
torch.distributions.Multinomial."""

import math

from .._tensor import Size
from . import constraints
from .binomial import Binomial
from .categorical import Categorical
from .distribution import Distribution
from .utils import broadcast_all


class Multinomial(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = Size(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(total_count=self.total_count, probs=new._categorical.probs)
        super(Multinomial, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def param_shape(self):
        return self._categorical.param_shape

    def sample(self, sample_shape=Size()):
        """total_count categorical draws, one-hot and summed: no scatter, no host loop."""
        from ..nn.functional import one_hot
        sample_shape = Size(sample_shape) if not isinstance(sample_shape, int) else Size((sample_shape,))
        draws = self._categorical.sample(Size((self.total_count,) + tuple(sample_shape)))
        counts = one_hot(draws, self._categorical._num_events).sum(0)
        return counts.to(self.probs.dtype)

    def entropy(self):
        n = float(self.total_count)
        term1 = n * self._categorical.entropy() - math.lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = self._binomial.log_prob(support).exp()
        weights = (support + 1).lgamma()
        return term1 + (binomial_probs * weights).sum((0, -1))

    def log_prob(self, value):
        from .. import where
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = (value.sum(-1) + 1).lgamma()
        log_factorial_xs = (value + 1).lgamma().sum(-1)
        logits = where((value == 0) & (logits == -math.inf), 0.0, logits)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)
