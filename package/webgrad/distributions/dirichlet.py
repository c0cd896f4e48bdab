"""Dirichlet(concentration) over the simplex of the last dim, as torch.distributions.Dirichlet: samples are
normalised standard-gamma draws, so rsample is differentiable through the gamma sampler's implicit gradient."""

from .._tensor import Size
from . import constraints
from .exp_family import ExponentialFamily
from .gamma import _standard_gamma


class Dirichlet(ExponentialFamily):
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(Size(tuple(concentration.shape[:-1])), Size(tuple(concentration.shape[-1:])),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = Size(batch_shape)
        new.concentration = self.concentration.expand(*batch_shape, *self.event_shape)
        super(Dirichlet, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        g = _standard_gamma(self.concentration.expand(*shape))
        return g / g.sum(-1, keepdim=True)

    def log_prob(self, value):
        from .. import xlogy
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return xlogy(c - 1.0, value).sum(-1) + c.sum(-1).lgamma() - c.lgamma().sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        """(c - 1)^+ normalised; where every concentration is below 1, the one-hot vertex of the largest."""
        from .. import where
        from ..nn.functional import one_hot
        cm1 = (self.concentration - 1).clamp(min=0.0)
        mode = cm1 / cm1.sum(-1, True)
        vertex = one_hot(mode.argmax(-1), cm1.shape[-1]).to(mode.dtype)
        return where((self.concentration < 1).all(-1, keepdim=True), vertex, mode)

    @property
    def variance(self):
        c = self.concentration
        c0 = c.sum(-1, True)
        return c * (c0 - c) / (c0.pow(2) * (c0 + 1))

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        a0 = c.sum(-1)
        return c.lgamma().sum(-1) - a0.lgamma() - (k - a0) * a0.digamma() - ((c - 1.0) * c.digamma()).sum(-1)

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - x.sum(-1).lgamma()
