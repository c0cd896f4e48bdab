"""Fractional max pooling (Graham, 2014): F.fractional_max_pool2d/3d and nn.FractionalMaxPool2d/3d.

Each plane (one sample's channel) draws a number u in [0, 1) per spatial dim; window i along a dim of input size n,
pool size k and output size m starts at trunc((i + u) * a) - trunc(u * a), a = (n - k) / (m - 1), the last at n - k.
The windows' elements are gathered with one index tensor and reduced with max, so the gradient (to each window's
maximum) comes from gather's and both devices run it. Indices are flat positions in the input plane, as PyTorch's.
"""

import math
import struct

from .._tensor import Tensor, arange
from ..ops.shape import cat
from ..random import rand
from .module import Module

__all__ = ["fractional_max_pool2d", "fractional_max_pool2d_with_indices", "fractional_max_pool3d",
           "fractional_max_pool3d_with_indices", "FractionalMaxPool2d", "FractionalMaxPool3d"]


def _tuple(value, d, what, op):
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,) * d
    if len(values) == 1:
        values = values * d
    if len(values) != d:
        raise ValueError(f"{op} requires {what} to either be a single value or a tuple of {d}")
    return values


def _float32(value):
    """value rounded to float32 (PyTorch computes the windows' step in the input's dtype); NumPy-free, as the
    package imports without NumPy in Pyodide."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _starts(samples, n, k, m):
    """[planes, m] window starts along one dim, from each plane's sample u, in float32 arithmetic as PyTorch's."""
    last = samples.new_full((samples.shape[0], 1), n - k).long()
    if m == 1:
        return last
    alpha = _float32(_float32(n - k) / _float32(m - 1))
    steps = arange(m - 1, device=samples.device, dtype=samples.dtype)
    # truncation toward zero, as PyTorch's int64 cast (samples outside [0, 1) give other windows than floor's)
    inner = ((steps + samples.unsqueeze(1)) * alpha).trunc().long() - (samples * alpha).trunc().long().unsqueeze(1)
    return cat([inner, last], 1)


def _pool(input, kernel_size, output_size, output_ratio, random_samples, d):
    op = f"fractional_max_pool{d}d"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.ndim not in (d + 1, d + 2):
        raise RuntimeError(f"{op}(): Expected {d + 1}D or {d + 2}D tensor, but got: {list(input.shape)}")
    if output_size is None and output_ratio is None:
        raise ValueError(f"{op} requires specifying either an output_size or an output_ratio")
    spatial = tuple(input.shape[-d:])
    kernel = _tuple(kernel_size, d, "kernel_size", op)
    if output_size is None:
        ratios = _tuple(output_ratio, d, "output_ratio", op)
        if not all(0 < r < 1 for r in ratios):
            raise ValueError(f"{op} requires output_ratio to be in the range (0, 1), got {output_ratio}")
        output_size = tuple(int(n * r) for n, r in zip(spatial, ratios))
    out = _tuple(output_size, d, "output_size", op)
    for n, k, m in zip(spatial, kernel, out):
        if k <= 0 or m <= 0 or m + k - 1 > n:
            raise RuntimeError(f"{op}(): pool size {k} and output size {m} do not fit an input of size {n} "
                               "(output_size + kernel_size - 1 must not exceed the input size)")
    batched = input.ndim == d + 2
    x = input if batched else input.unsqueeze(0)
    n_batch, channels = x.shape[0], x.shape[1]
    if random_samples is None:
        random_samples = rand(n_batch, channels, d, dtype=input.dtype, device=input.device)
    if tuple(random_samples.shape) != (n_batch, channels, d):
        raise RuntimeError(f"{op}(): expected _random_samples of shape {[n_batch, channels, d]}, got "
                           f"{list(random_samples.shape)}")
    planes = n_batch * channels
    samples = random_samples.detach().reshape(planes, d)
    # PyTorch's 2-D kernel reads its two samples as (width, height); the 3-D one as (time, height, width)
    order = (1, 0) if d == 2 else (0, 1, 2)
    strides = [math.prod(spatial[i + 1:]) for i in range(d)]
    flat = None  # [planes, out_1, k_1, out_2, k_2, ...]: every window element's flat position in the plane
    for axis in range(d):
        n, k, m = spatial[axis], kernel[axis], out[axis]
        starts = _starts(samples[:, order[axis]], n, k, m)
        positions = (starts.unsqueeze(2) + arange(k, device=input.device).long()) * strides[axis]  # [planes, m, k]
        positions = positions.reshape((planes,) + (1, 1) * axis + (m, k) + (1, 1) * (d - axis - 1))
        flat = positions if flat is None else flat + positions
    perm = (0,) + tuple(range(1, 2 * d + 1, 2)) + tuple(range(2, 2 * d + 1, 2))
    flat = flat.permute(perm).reshape(planes, *out, math.prod(kernel))  # [planes, out..., window]
    plane_size, windows = math.prod(spatial), math.prod(flat.shape[1:])
    values = x.reshape(planes, plane_size).gather(1, flat.reshape(planes, windows)).reshape(flat.shape)
    result, which = values.max(-1)
    indices = flat.gather(-1, which.unsqueeze(-1)).squeeze(-1)
    shape = (n_batch, channels, *out) if batched else (channels, *out)
    return result.reshape(shape), indices.reshape(shape)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """(output, indices) of fractional max pooling over [N, C, H, W] or [C, H, W], as PyTorch's."""
    return _pool(input, kernel_size, output_size, output_ratio, _random_samples, 2)


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """Fractional max pooling over [N, C, H, W] or [C, H, W], as torch.nn.functional.fractional_max_pool2d: give
    output_size or output_ratio (in (0, 1)); _random_samples [N, C, 2] fixes the windows (else drawn with rand)."""
    out, indices = _pool(input, kernel_size, output_size, output_ratio, _random_samples, 2)
    return (out, indices) if return_indices else out


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """(output, indices) of fractional max pooling over [N, C, T, H, W] or [C, T, H, W], as PyTorch's."""
    return _pool(input, kernel_size, output_size, output_ratio, _random_samples, 3)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """Fractional max pooling over [N, C, T, H, W] or [C, T, H, W], as torch.nn.functional.fractional_max_pool3d;
    _random_samples is [N, C, 3]."""
    out, indices = _pool(input, kernel_size, output_size, output_ratio, _random_samples, 3)
    return (out, indices) if return_indices else out


class _FractionalMaxPoolNd(Module):
    _d = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        name = f"FractionalMaxPool{self._d}d"
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if output_ratio is not None and not all(0 < r < 1 for r in _tuple(output_ratio, self._d, "output_ratio",
                                                                          name)):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")
        self.kernel_size = kernel_size
        self.output_size = output_size
        self.output_ratio = output_ratio
        self.return_indices = return_indices
        if _random_samples is not None:
            self.register_buffer("_random_samples", _random_samples)
        else:
            self._random_samples = None

    def forward(self, input):
        out, indices = _pool(input, self.kernel_size, self.output_size, self.output_ratio, self._random_samples,
                             self._d)
        return (out, indices) if self.return_indices else out


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling over 2 spatial dims, as torch.nn.FractionalMaxPool2d."""
    _d = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Fractional max pooling over 3 spatial dims, as torch.nn.FractionalMaxPool3d."""
    _d = 3
