"""NegativeBinomial(total_count, probs or logits): failures before total_count successes of probability
1 - probs, as torch.distributions.NegativeBinomial. Samples are Poisson draws at Gamma-distributed rates."""

from .._tensor import Size
from . import constraints
from .families import BinaryParams
from .gamma import Gamma
from .poisson import Poisson
from .utils import lazy_property


class NegativeBinomial(BinaryParams):
    COUNTED = True
    arg_constraints = {"total_count": constraints.greater_than_eq(0), "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        super().__init__(self._set_params(probs, logits, total_count), validate_args=validate_args)

    @property
    def mean(self):
        return self.total_count * self.logits.exp()

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / (-self.logits).sigmoid()

    @lazy_property
    def _gamma(self):
        return Gamma(concentration=self.total_count, rate=(-self.logits).exp(), validate_args=False)

    def sample(self, sample_shape=Size()):
        from .. import no_grad
        with no_grad():
            rate = self._gamma.sample(sample_shape=sample_shape)
            return Poisson(rate, validate_args=False).sample()

    def log_prob(self, value):
        from ..nn.functional import logsigmoid
        if self._validate_args:
            self._validate_sample(value)
        n = self.total_count
        log_unnormalized_prob = n * logsigmoid(-self.logits) + value * logsigmoid(self.logits)
        log_normalization = -(n + value).lgamma() + (1.0 + value).lgamma() + n.lgamma()
        log_normalization = log_normalization.masked_fill(n + value == 0.0, 0.0)
        return log_unnormalized_prob - log_normalization
