"""Gamma(concentration, rate), as torch.distributions.Gamma, with the standard-gamma sampler Dirichlet and Beta
share.

Sampling is Marsaglia and Tsang's squeeze-free method run on whole tensors: every round proposes for every
element, keeps the first accepted proposal of each, and the host reads back one bool (are all done?) every few
rounds (acceptance is above 95% for every shape, so a round or two suffices). Shapes below 1 draw at shape + 1 and
scale by u^(1/shape).

The reparameterised gradient is the implicit one, as PyTorch's: dx/dalpha = -(dF/dalpha)(x; alpha) / p(x; alpha)
with F the regularised incomplete gamma function. dF/dalpha is a Richardson-extrapolated central difference of
webgrad.special.gammainc in alpha (PyTorch evaluates series and fitted approximations instead): exact in
expectation up to the difference's error (about 1e-4 relative in float32)."""

from numbers import Number

from .._tensor import Size
from . import constraints
from .exp_family import ExponentialFamily
from .utils import _finfo, _standard_normal, _uniform, broadcast_all

_ROUNDS_PER_CHECK = 3


def _marsaglia_tsang(alpha):
    """Gamma(alpha, 1) draws of alpha's shape (alpha > 0, no gradient)."""
    from .. import where, zeros_like
    boost = alpha < 1
    a = where(boost, alpha + 1, alpha)
    d = a - 1.0 / 3.0
    c = (9.0 * d).rsqrt()
    x = zeros_like(alpha)
    done = alpha != alpha  # all False, on alpha's device
    shape = tuple(alpha.shape)
    while True:
        for _ in range(_ROUNDS_PER_CHECK):
            z = _standard_normal(shape, alpha.dtype, alpha.device)
            u = _uniform(shape, alpha.dtype, alpha.device)
            v = (1 + c * z) ** 3
            # a non-positive v gives a NaN log: the comparison is False and the proposal is rejected
            accept = (v > 0) & (u.log() < 0.5 * z * z + d - d * v + d * v.log())
            x = where(accept & ~done, d * v, x)
            done = done | accept
        if bool(done.all().item()):
            break
    u = _uniform(shape, alpha.dtype, alpha.device)
    x = where(boost, x * u.pow(alpha.reciprocal()), x)
    return x.clamp(min=_finfo(alpha.dtype).tiny)


def _standard_gamma_grad(x, alpha):
    """dx/dalpha at fixed CDF value: -(dF/dalpha) / pdf, with dF/dalpha extrapolated from central differences at
    steps h and 2h (h below alpha / 2, so alpha - 2h stays positive)."""
    from .. import special, where
    step = 2e-2 if alpha.dtype.name in ("float32", "float16", "bfloat16") else 1e-4
    # F changes over a scale of alpha in alpha below 1 and of sqrt(alpha) (the spread of x) above
    h = step * alpha.clamp(max=1) * alpha.clamp(min=1).sqrt()

    def central(hh):
        return (special.gammainc(alpha + hh, x) - special.gammainc(alpha - hh, x)) / (2 * hh)

    dF = (4 * central(h) - central(2 * h)) / 3
    log_pdf = (alpha - 1) * x.log() - x - alpha.lgamma()
    grad = -dF * (-log_pdf).exp()
    return where(grad == grad, grad, grad * 0).clamp(min=0)  # x grows with alpha: the gradient is non-negative


def _standard_gamma(concentration):
    """Gamma(concentration, 1) samples; differentiable in concentration (implicit reparameterisation)."""
    from .. import is_grad_enabled, no_grad
    alpha = concentration.detach()
    with no_grad():
        x = _marsaglia_tsang(alpha)
    if not (concentration.requires_grad and is_grad_enabled()):
        return x  # sample(), or parameters without gradients: no gradient to compute
    with no_grad():
        grad = _standard_gamma_grad(x, alpha)
    return x + (concentration - alpha) * grad  # x in value, grad as d x / d concentration


class Gamma(ExponentialFamily):
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        scalar = isinstance(concentration, Number) and isinstance(rate, Number)
        super().__init__(Size() if scalar else self.concentration.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = Size(batch_shape)
        new.concentration, new.rate = self.concentration.expand(batch_shape), self.rate.expand(batch_shape)
        super(Gamma, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        value = _standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        floor = value.detach().clamp(min=_finfo(value.dtype).tiny)
        return value + (floor - value.detach())  # kept above zero without touching the gradient

    def log_prob(self, value):
        from .. import as_tensor, xlogy
        value = as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        return (xlogy(self.concentration, self.rate) + xlogy(self.concentration - 1, value) - self.rate * value
                - self.concentration.lgamma())

    def entropy(self):
        c = self.concentration
        return c - self.rate.log() + c.lgamma() + (1.0 - c) * c.digamma()

    def cdf(self, value):
        from .. import special
        if self._validate_args:
            self._validate_sample(value)
        return special.gammainc(self.concentration, self.rate * value)

    @property
    def _natural_params(self):
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x, y):
        return (x + 1).lgamma() + (x + 1) * (-y.reciprocal()).log()
