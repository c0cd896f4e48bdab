"""Geometric(probs or logits): the number of failures before the first success, as
torch.distributions.Geometric."""


from .._tensor import Size
from . import constraints
from .distribution import _all_true
from .families import BinaryParams
from .utils import _finfo, _uniform, broadcast_all


class Geometric(BinaryParams):
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        super().__init__(self._set_params(probs, logits), validate_args=validate_args)
        if self._validate_args and probs is not None and not _all_true(self.probs > 0):
            value = self.probs
            raise ValueError(f"Expected parameter probs ({type(value).__name__} of shape {tuple(value.shape)}) of "
                             f"distribution {self!r} to be positive but found invalid values:\n{value}")

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return self.probs * 0

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        probs = self.probs.detach()
        u = _uniform(shape, probs.dtype, probs.device).clamp(min=_finfo(probs.dtype).tiny)
        return (u.log() / (-probs).log1p()).floor()

    def log_prob(self, value):
        from .. import where
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = where((probs == 1) & (value == 0), 0.0, probs)  # 0 * log(0) is 0 there
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        from ..nn.functional import binary_cross_entropy_with_logits
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs
