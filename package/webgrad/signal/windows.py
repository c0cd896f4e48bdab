"""torch.signal.windows: bartlett, blackman, cosine, exponential, gaussian, general_cosine, general_hamming,
hamming, hann, kaiser and nuttall, with torch's definitions (sym=False gives the periodic window).

The values are computed on the host in double precision and made a tensor once; windows take no input, so
they have no gradient to carry (requires_grad=True makes a leaf, as torch's).
"""

import math

from .. import devices, dtypes
from .._tensor import empty, tensor

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
           "hamming", "hann", "kaiser", "nuttall"]


def _checks(name, M, dtype, layout):
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not None and "strided" not in str(layout):
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    dtype = dtypes.to_dtype(dtype, dtypes.float32)
    if dtype not in (dtypes.float32, dtypes.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype.name}")
    return dtype


def _window(values, dtype, device, requires_grad):
    if not values:
        return empty(0, dtype=dtype, device=devices.get(device), requires_grad=requires_grad)
    return tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)


def _points(start, step, M):
    """torch.linspace(start, start + (M - 1) * step, M)."""
    return [start + i * step for i in range(M)]


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """exp(-|n - center| / tau)."""
    dtype = _checks("exponential", M, dtype, layout)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    k = _points(-center / tau, 1.0 / tau, M)
    return _window([math.exp(-abs(v)) for v in k], dtype, device, requires_grad)


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """sin(pi * (n + 1/2) / M) (M + 1 for the periodic window)."""
    dtype = _checks("cosine", M, dtype, layout)
    constant = math.pi / (M + 1 if not sym and M > 1 else M) if M else 0.0
    return _window([math.sin(v) for v in _points(0.5 * constant, constant, M)], dtype, device, requires_grad)


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """exp(-((n - center) / std)^2 / 2)."""
    dtype = _checks("gaussian", M, dtype, layout)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    constant = 1 / (std * math.sqrt(2))
    return _window([math.exp(-v * v) for v in _points(start * constant, constant, M)], dtype, device, requires_grad)


def _i0(x):
    """The modified Bessel function of the first kind, order 0 (its power series, exact to double precision
    for the arguments windows use)."""
    total, term, k, q = 1.0, 1.0, 0, (x / 2.0) ** 2
    while term > 1e-17 * total:
        k += 1
        term *= q / (k * k)
        total += term
    return total


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """i0(beta * sqrt(1 - (2n / (M - 1) - 1)^2)) / i0(beta)."""
    dtype = _checks("kaiser", M, dtype, layout)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    if M <= 1:
        return _window([1.0] * M, dtype, device, requires_grad)
    constant = 2.0 * beta / (M if not sym else M - 1)
    end = min(beta, -beta + (M - 1) * constant)
    step = (end + beta) / (M - 1)
    k = _points(-beta, step, M)
    norm = _i0(beta)
    return _window([_i0(math.sqrt(max(beta * beta - v * v, 0.0))) / norm for v in k], dtype, device, requires_grad)


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The triangular window 1 - |2n / (M - 1) - 1|."""
    dtype = _checks("bartlett", M, dtype, layout)
    if M <= 1:
        return _window([1.0] * M, dtype, device, requires_grad)
    constant = 2 / (M if not sym else M - 1)
    return _window([1 - abs(v) for v in _points(-1.0, constant, M)], dtype, device, requires_grad)


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """sum_i (-1)^i a_i cos(2 pi i n / (M - 1)) (M for the periodic window)."""
    dtype = _checks("general_cosine", M, dtype, layout)
    if M <= 1:
        return _window([1.0] * M, dtype, device, requires_grad)
    try:
        coefficients = [float(w) for w in a]
    except TypeError:
        raise TypeError("Coefficients must be a list/tuple") from None
    if not coefficients:
        raise ValueError("Coefficients cannot be empty")
    constant = 2 * math.pi / (M if not sym else M - 1)
    values = [sum((-1) ** i * w * math.cos(i * v) for i, w in enumerate(coefficients))
              for v in _points(0.0, constant, M)]
    return _window(values, dtype, device, requires_grad)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """alpha - (1 - alpha) cos(2 pi n / (M - 1))."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """general_hamming with alpha 0.54."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """general_hamming with alpha 0.5."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """general_cosine with coefficients 0.42, 0.5, 0.08."""
    _checks("blackman", M, dtype, layout)
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """general_cosine with Nuttall's four coefficients."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)
