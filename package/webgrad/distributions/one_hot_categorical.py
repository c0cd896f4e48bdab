"""OneHotCategorical: Categorical with one-hot samples, as torch.distributions.OneHotCategorical (and its
straight-through variant)."""

from .._tensor import Size
from . import constraints
from .categorical import Categorical
from .distribution import Distribution


def _one_hot(indices, num_classes, like):
    from ..nn.functional import one_hot
    return one_hot(indices, num_classes).to(like.dtype)


class OneHotCategorical(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(OneHotCategorical, _instance)
        batch_shape = Size(batch_shape)
        new._categorical = self._categorical.expand(batch_shape)
        super(OneHotCategorical, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _param(self):
        return self._categorical._param

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        probs = self._categorical.probs
        return _one_hot(probs.argmax(-1), probs.shape[-1], probs)

    @property
    def variance(self):
        return self._categorical.probs * (1 - self._categorical.probs)

    @property
    def param_shape(self):
        return self._categorical.param_shape

    def sample(self, sample_shape=Size()):
        probs = self._categorical.probs
        return _one_hot(self._categorical.sample(sample_shape), probs.shape[-1], probs).detach()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        from .. import eye
        n = self.event_shape[0]
        values = eye(n, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape(n, *(1,) * len(self.batch_shape), n)
        if expand:
            values = values.expand(n, *self.batch_shape, n)
        return values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """rsample: a one-hot sample whose gradient is the gradient of probs (the straight-through estimator)."""

    has_rsample = True

    def rsample(self, sample_shape=Size()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
