"""Categorical over K categories (the last dim of probs / logits), as torch.distributions.Categorical.

Everything is a composition of tensor ops, so log_prob and entropy are differentiable with respect to the
parameters, and sampling runs on the parameters' device (Gumbel-max over webgrad.rand: no host loop)."""

import math

from .. import dtypes
from .._tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import _finfo, _uniform, lazy_property, logits_to_probs, probs_to_logits


class Categorical(Distribution):
    """probs (non-negative, normalised over the last dim here) or logits (log-probabilities up to a constant,
    normalised with logsumexp here): exactly one of the two."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        super().__init__(Size(tuple(self._param.shape[:-1])), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = Size(batch_shape)
        param_shape = tuple(batch_shape) + (self._num_events,)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(*param_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(*param_shape)
            new._param = new.logits
        new._num_events = self._num_events
        super(Categorical, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)  # clamped to [eps, 1 - eps] before the log, as torch

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return self._param.shape

    @property
    def mean(self):
        from .. import full
        return full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype, device=self.probs.device)

    @property
    def variance(self):
        return self.mean

    @property
    def mode(self):
        return self.probs.argmax(-1)

    def sample(self, sample_shape=Size()):
        """Indices of shape sample_shape + batch_shape, drawn as argmax(logits + Gumbel noise) on the device."""
        sample_shape = tuple(sample_shape) if not isinstance(sample_shape, int) else (sample_shape,)
        u = _uniform(sample_shape + tuple(self._param.shape), self._param.dtype, self._param.device)
        gumbel = -(-u.log()).log()  # u in [0, 1): u == 0 gives -inf, never chosen
        # from probs, log(probs) keeps a zero-probability category at -inf (the clamped logits would let it win
        # with probability ~eps), so such a category is never drawn, as torch's multinomial
        base = self.probs.detach().log() if "probs" in self.__dict__ and self._param is self.probs \
            else self.logits.detach()
        return (base + gumbel).argmax(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        shape = tuple(_broadcast_shapes(tuple(value.shape), tuple(self.batch_shape)))
        index = value.to(dtypes.int32).reshape(*value.shape, 1).expand(*shape, 1)
        return self.logits.expand(*shape, self._num_events).gather(-1, index).squeeze(-1)

    def entropy(self):
        low = _finfo(self.logits.dtype).min
        return -(self.logits.clamp(min=low) * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        from .. import arange
        values = arange(self._num_events, device=self._param.device).reshape(-1, *(1,) * len(self.batch_shape))
        if expand:
            values = values.expand(-1, *self.batch_shape)
        return values


def _broadcast_shapes(a, b):
    """The broadcast of two shapes (NumPy rules), with PyTorch's error for incompatible ones."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) at non-singleton "
                               f"dimension")
        out.append(max(x, y))
    return out
