"""torch.hann_window, hamming_window, blackman_window, bartlett_window and kaiser_window: the windows torch.stft
and torch.istft take, with torch's arguments (periodic=True drops the last point of a window one longer, ready
for a transform of window_length points), default dtype and errors.

A window takes no tensor input: its values are computed on the host in double precision from the closed forms
torch uses, then made a tensor of the dtype asked for on the device asked for (requires_grad=True makes a leaf,
as torch's).
"""

import math

from .. import _settings, dtypes
from ..signal.windows import _i0, _window as _window_tensor

__all__ = ["bartlett_window", "blackman_window", "hamming_window", "hann_window", "kaiser_window"]


def _dtype(name, window_length, dtype, layout):
    """The window's dtype, after torch's checks of its length, dtype and layout."""
    if not isinstance(window_length, int) or isinstance(window_length, bool):
        raise TypeError(f"{name}(): argument 'window_length' (position 1) must be int, not "
                        f"{type(window_length).__name__}")
    if layout is not None and getattr(layout, "name", str(layout)) != "strided":
        raise RuntimeError(f"{name} is not implemented for sparse types, got: layout={layout}")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    dtype = dtypes.to_dtype(dtype, None) or _settings.get_default_dtype()
    if not dtype.is_floating:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dtype.name}")
    return dtype


def _window(name, window_length, periodic, dtype, layout, device, requires_grad, value):
    """value(n, N) for n < window_length, N the symmetric window's length (window_length + 1 when periodic);
    a window of one point is [1.]."""
    dtype = _dtype(name, window_length, dtype, layout)
    if window_length <= 1:
        return _window_tensor([1.0] * window_length, dtype, device, requires_grad)
    full = window_length + 1 if periodic else window_length
    return _window_tensor([value(n, full) for n in range(window_length)], dtype, device, requires_grad)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   pin_memory=False, requires_grad=False):
    """alpha - beta cos(2 pi n / (N - 1))."""
    return _window("hamming_window", window_length, periodic, dtype, layout, device, requires_grad,
                   lambda n, full: alpha - beta * math.cos(2 * math.pi * n / (full - 1)))


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                requires_grad=False):
    """0.5 - 0.5 cos(2 pi n / (N - 1)) (sin^2(pi n / (N - 1)))."""
    return _window("hann_window", window_length, periodic, dtype, layout, device, requires_grad,
                   lambda n, full: 0.5 - 0.5 * math.cos(2 * math.pi * n / (full - 1)))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    """0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))."""
    def value(n, full):
        angle = math.pi * n / (full - 1)
        return 0.42 - 0.5 * math.cos(2 * angle) + 0.08 * math.cos(4 * angle)
    return _window("blackman_window", window_length, periodic, dtype, layout, device, requires_grad, value)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    """The triangle 1 - |2n / (N - 1) - 1|."""
    return _window("bartlett_window", window_length, periodic, dtype, layout, device, requires_grad,
                   lambda n, full: 1.0 - abs(2.0 * n / (full - 1) - 1.0))


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  pin_memory=False, requires_grad=False):
    """i0(beta sqrt(1 - ((n - a) / a)^2)) / i0(beta), a = (N - 1) / 2."""
    norm = _i0(abs(beta))

    def value(n, full):
        half = (full - 1) / 2.0
        return _i0(abs(beta) * math.sqrt(max(1.0 - ((n - half) / half) ** 2, 0.0))) / norm
    return _window("kaiser_window", window_length, periodic, dtype, layout, device, requires_grad, value)
