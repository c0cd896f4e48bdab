"""RelaxedBernoulli (the binary Concrete / Gumbel-sigmoid distribution) and its logit form, as
torch.distributions.RelaxedBernoulli and LogitRelaxedBernoulli: reparameterised, so gradients flow from a sample
to probs / logits (and a tensor temperature)."""

import math
from numbers import Number

from .._tensor import Size
from . import constraints
from .families import BinaryParams
from .transformed_distribution import TransformedDistribution
from .transforms import SigmoidTransform
from .utils import _uniform, broadcast_all, clamp_probs


def _log(x):
    return math.log(x) if isinstance(x, Number) else x.log()


class LogitRelaxedBernoulli(BinaryParams):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        super().__init__(self._set_params(probs, logits), validate_args=validate_args)

    def _expand_more(self, new):
        new.temperature = self.temperature

    def rsample(self, sample_shape=Size()):
        """(logistic noise + logit(probs)) / temperature."""
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(*shape))
        u = clamp_probs(_uniform(shape, probs.dtype, probs.device))
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value * self.temperature
        return _log(self.temperature) + diff - 2 * diff.exp().log1p()


class RelaxedBernoulli(TransformedDistribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base_dist = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base_dist, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs
