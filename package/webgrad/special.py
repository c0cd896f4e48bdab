"""torch.special: special functions, as webgrad.special (``import torch.special`` under as_torch()).

The functions of their own here (Bessel functions, orthogonal polynomials, erfcx, ndtr, ...) are op-table
records exposed as "special" (ops/table.py); the rest are torch.special's other names for webgrad's
functions (expit is sigmoid, gammaln is lgamma, multigammaln is mvlgamma, ...).
"""

from .ops import elementwise as _elementwise
from .ops import elementwise_math as _math
from .ops import reduce as _reduce
from .ops.elementwise import function as _function

globals().update(_elementwise.table_functions("special"))

erf = _function("erf")
erfc = _function("erfc")
erfinv = _function("erfinv")
expit = _function("sigmoid")
exp2 = _function("exp2")
expm1 = _function("expm1")
log1p = _function("log1p")
logit = _function("logit")
sinc = _function("sinc")
round = _function("round")
i0 = _function("i0")
digamma = psi = _function("digamma")
gammaln = _function("lgamma")
gammainc = _function("igamma")
gammaincc = _function("igammac")
xlogy = _function("xlogy")
polygamma = _math.polygamma


def multigammaln(input, p):
    """torch.special.multigammaln(input, p): the multivariate log-gamma function (torch.mvlgamma)."""
    return _math.mvlgamma(input, p)


def softmax(input, dim, *, dtype=None):
    """torch.special.softmax(input, dim, *, dtype=None)."""
    return _reduce.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    """torch.special.log_softmax(input, dim, *, dtype=None)."""
    return _reduce.log_softmax(input, dim, dtype=dtype)


def logsumexp(input, dim, keepdim=False):
    """torch.special.logsumexp(input, dim, keepdim=False)."""
    return _reduce.logsumexp(input, dim, keepdim)
