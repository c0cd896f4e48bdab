"""Binomial(total_count, probs or logits), as torch.distributions.Binomial. Sampling counts Bernoulli draws in
blocks of trials (the count's maximum, read back once, sets how many), so no per-element loop runs."""

from .._tensor import Size
from . import constraints
from .families import BinaryParams
from .utils import _uniform

_TRIALS_PER_BLOCK = 64


def _clamp_by_zero(x):
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(BinaryParams):
    COUNTED = True
    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        super().__init__(self._set_params(probs, logits, total_count), validate_args=validate_args)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        from .. import minimum
        return minimum(((self.total_count + 1) * self.probs).floor(), self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        from .. import arange, no_grad, zeros
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            probs = self.probs.detach().expand(*shape)
            n = self.total_count.detach().expand(*shape)
            n_max = int(n.max().item()) if n.numel() else 0
            counts = zeros(shape, dtype=probs.dtype, device=probs.device)
            for start in range(0, n_max, _TRIALS_PER_BLOCK):
                size = min(_TRIALS_PER_BLOCK, n_max - start)
                trial = arange(start, start + size, dtype=probs.dtype, device=probs.device)
                trial = trial.reshape(size, *(1,) * len(shape))
                hits = (_uniform((size, *shape), probs.dtype, probs.device) < probs) & (trial < n)
                counts = counts + hits.to(probs.dtype).sum(0)
            return counts

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n = self.total_count
        log_factorial_n = (n + 1).lgamma()
        log_factorial_k = (value + 1).lgamma()
        log_factorial_nmk = (n - value + 1).lgamma()
        # n * log(1 + exp(logits)) computed stably
        normalize_term = n * _clamp_by_zero(self.logits) + n * (-self.logits.abs()).exp().log1p() - log_factorial_n
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize_term

    def _homogeneous_count(self, what):
        total_count = int(self.total_count.max().item())
        if not int(self.total_count.min().item()) == total_count:
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return total_count

    def entropy(self):
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        from .. import arange
        total_count = self._homogeneous_count("enumerate_support")
        values = arange(1 + total_count, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape(-1, *(1,) * len(self._batch_shape))
        if expand:
            values = values.expand(-1, *self._batch_shape)
        return values
