"""VonMises(loc, concentration), the circular normal, as torch.distributions.VonMises: angles in radians, read
modulo 2 pi; mean and variance are the circular ones.

Sampling is Best and Fisher's (1979) wrapped-Cauchy rejection sampler run on whole tensors, as PyTorch's
_rejection_sample: each round proposes for every element at once and keeps the first accepted proposal of each
under a mask; the host reads back one bool (are all done?) every few rounds (acceptance is above 65% for every
concentration). The proposal's parameter is computed in a cancellation-free form, so the float32 sampler (the one
devices without float64 run) does not stall at small concentrations; on the CPU it runs in float64, as PyTorch's."""

import math

from .._tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import _uniform, broadcast_all, lazy_property

__all__ = ["VonMises"]

_ROUNDS_PER_CHECK = 4

# Abramowitz and Stegun 9.8.1-9.8.4: I0 and I1 below 3.75 (in (x / 3.75)^2) and exp(-x) sqrt(x) I0, I1 above (in
# 3.75 / x), as PyTorch's
_I0_COEF_SMALL = [1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2]
_I0_COEF_LARGE = [0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2, -0.2057706e-1, 0.2635537e-1,
                  -0.1647633e-1, 0.392377e-2]
_I1_COEF_SMALL = [0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2, 0.32411e-3]
_I1_COEF_LARGE = [0.39894228, -0.3988024e-1, -0.362018e-2, 0.163801e-2, -0.1031555e-1, 0.2282967e-1,
                  -0.2895312e-1, 0.1787654e-1, -0.420059e-2]
_COEF_SMALL = [_I0_COEF_SMALL, _I1_COEF_SMALL]
_COEF_LARGE = [_I0_COEF_LARGE, _I1_COEF_LARGE]


def _eval_poly(y, coef):
    result = coef[-1]
    for c in reversed(coef[:-1]):
        result = c + y * result
    return result


def _log_modified_bessel_fn(x, order=0):
    """log I_order(x) for x > 0, order 0 or 1."""
    from .. import where
    if order not in (0, 1):
        raise ValueError(f"order must be 0 or 1, got {order}")
    small = _eval_poly((x / 3.75).pow(2), _COEF_SMALL[order])
    if order == 1:
        small = x.abs() * small
    large = x - 0.5 * x.log() + _eval_poly(3.75 / x, _COEF_LARGE[order]).log()
    return where(x < 3.75, small.log(), large)


def _proposal_r(kappa):
    """Best and Fisher's r = (1 + rho^2) / (2 rho), rho = (tau - sqrt(2 tau)) / (2 kappa), tau = 1 + s,
    s = sqrt(1 + 4 kappa^2), with the difference in rho rewritten as 2 kappa tau / ((s + 1)(tau + sqrt(2 tau)))
    (the direct form cancels to 0 in float32 below kappa ~ 1e-4)."""
    s = (1 + 4 * kappa.pow(2)).sqrt()
    tau = 1 + s
    rho = 2 * kappa * tau / ((s + 1) * (tau + (2 * tau).sqrt()))
    return (1 + rho.pow(2)) / (2 * rho)


def _rejection_sample(loc, concentration, proposal_r, shape):
    from .. import where, zeros
    x = zeros(shape, dtype=loc.dtype, device=loc.device)
    done = x != x  # all False, on loc's device
    while True:
        for _ in range(_ROUNDS_PER_CHECK):
            u1, u2, u3 = _uniform((3, *shape), loc.dtype, loc.device).unbind(0)
            z = (math.pi * u1).cos()
            f = (1 + proposal_r * z) / (proposal_r + z)
            c = concentration * (proposal_r - f)
            accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
            x = where(accept & ~done, (u3 - 0.5).sign() * f.acos(), x)
            done = done | accept
        if bool(done.all().item()):
            break
    return (x + math.pi + loc) % (2 * math.pi) - math.pi


class VonMises(Distribution):
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.size(), Size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(VonMises, _instance)
        batch_shape = Size(batch_shape)
        new.loc, new.concentration = self.loc.expand(batch_shape), self.concentration.expand(batch_shape)
        super(VonMises, new).__init__(batch_shape, Size(), validate_args=False)
        new._validate_args = self._validate_args
        return new

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration * (value - self.loc).cos() - math.log(2 * math.pi)
                - _log_modified_bessel_fn(self.concentration, order=0))

    def sample(self, sample_shape=Size()):
        """Best and Fisher's rejection sampler, in float64 on the CPU (as PyTorch) and in float32 on devices
        without float64."""
        from .. import float64, no_grad
        with no_grad():
            work = float64 if self.loc.device.type == "cpu" else self.loc.dtype
            loc, kappa = self.loc.to(work), self.concentration.to(work)
            shape = tuple(self._extended_shape(sample_shape))
            x = _rejection_sample(loc.expand(*shape), kappa.expand(*shape), _proposal_r(kappa).expand(*shape), shape)
            return x.to(self.loc.dtype)

    @property
    def mean(self):
        """The circular mean."""
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        """The circular variance, 1 - I1(kappa) / I0(kappa)."""
        return 1 - (_log_modified_bessel_fn(self.concentration, order=1)
                    - _log_modified_bessel_fn(self.concentration, order=0)).exp()
