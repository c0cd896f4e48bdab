"""Poisson(rate), as torch.distributions.Poisson.

Sampling runs on whole tensors in rounds, the host reading back one bool every few rounds: rates below 10 count
uniform products above exp(-rate) (Knuth's method: about rate + 1 rounds); larger rates use Hormann's transformed
rejection (PTRS), whose acceptance is about 90% a round."""

from numbers import Number

from .._tensor import Size
from . import constraints
from .exp_family import ExponentialFamily
from .utils import _uniform, broadcast_all

_ROUNDS_PER_CHECK = 4


def _knuth(lam):
    """Poisson draws for rates below 10 (elements at rate 0 stay 0)."""
    from .. import zeros_like
    threshold = (-lam).exp()
    k = zeros_like(lam)
    prod = lam * 0 + 1
    while True:
        for _ in range(_ROUNDS_PER_CHECK):
            prod = prod * _uniform(tuple(lam.shape), lam.dtype, lam.device)
            active = prod > threshold
            k = k + active.to(lam.dtype)
        if not bool(active.any().item()):
            return k


def _ptrs(lam):
    """Poisson draws for rates of 10 and more: Hormann (1993), 'The transformed rejection method for generating
    Poisson random variables'."""
    from .. import where, zeros_like
    shape = tuple(lam.shape)
    slam, loglam = lam.sqrt(), lam.log()
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    log_invalpha = (1.1239 + 1.1328 / (b - 3.4)).log()
    vr = 0.9277 - 3.6224 / (b - 2)
    k_out = zeros_like(lam)
    done = lam != lam
    while True:
        for _ in range(_ROUNDS_PER_CHECK):
            U = _uniform(shape, lam.dtype, lam.device) - 0.5
            V = _uniform(shape, lam.dtype, lam.device)
            us = 0.5 - U.abs()
            k = ((2 * a / us + b) * U + lam + 0.43).floor()
            fast = (us >= 0.07) & (V <= vr)
            reject = (k < 0) | ((us < 0.013) & (V > us))
            slow = (V.log() + log_invalpha - (a / (us * us) + b).log()) <= (-lam + k * loglam - (k + 1).lgamma())
            accept = fast | (~reject & slow)
            k_out = where(accept & ~done, k, k_out)
            done = done | accept
        if bool(done.all().item()):
            return k_out


class Poisson(ExponentialFamily):
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(Size() if isinstance(rate, Number) else self.rate.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Poisson, _instance)
        batch_shape = Size(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        super(Poisson, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=Size()):
        from .. import no_grad, where
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            lam = self.rate.detach().expand(*shape).contiguous()
            small = lam < 10
            out = None
            if bool(small.any().item()):
                out = _knuth(where(small, lam, 0.0))
            if out is None or not bool(small.all().item()):
                big = _ptrs(where(small, 10.0, lam))
                out = big if out is None else where(small, out, big)
            return out

    def log_prob(self, value):
        from .. import xlogy
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return xlogy(value, rate) - rate - (value + 1).lgamma()

    @property
    def _natural_params(self):
        """log(rate). No _mean_carrier_measure (E[-log x!] has no closed form), as PyTorch's: entropy raises
        NotImplementedError there too."""
        return (self.rate.log(),)

    def _log_normalizer(self, x):
        return x.exp()
