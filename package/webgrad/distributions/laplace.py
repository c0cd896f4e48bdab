"""Laplace(loc, scale), as torch.distributions.Laplace."""


from .._tensor import Size
from .families import LocScale
from .utils import _finfo, _uniform


class Laplace(LocScale):
    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def rsample(self, sample_shape=Size()):
        """loc - scale * sign(u) * log1p(-|u|), u uniform on (eps - 1, 1): the inverse CDF, kept off u = -1."""
        shape = self._extended_shape(sample_shape)
        eps = _finfo(self.loc.dtype).eps
        u = _uniform(shape, self.loc.dtype, self.loc.device) * (2 - eps) + (eps - 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * (-(value - self.loc).abs() / self.scale).expm1()

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()
