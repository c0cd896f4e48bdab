"""Resampling, as torch.nn.functional: interpolate (nearest, nearest-exact, linear, bilinear, trilinear,
bicubic, area), pixel_shuffle and pixel_unshuffle.

Each is composed of existing ops, so its gradient comes from them: interpolation picks source rows of one
spatial dim at a time with index_select (the nearest one, or two or four neighbours blended with constant
weight tensors; area averages each output's window of rows with a constant [out, in] matrix), and pixel
(un)shuffle is a reshape and a permute. Source positions are computed on the
host with PyTorch's formulas (CPU kernels: aten/src/ATen/native/UpSample.h), in float32 for the nearest
modes as PyTorch does, so the same rows are picked.
"""

import functools
import math
import struct
import warnings

from .. import dtypes
from .._tensor import Tensor, tensor

_LINEAR = {"linear": 3, "bilinear": 4, "trilinear": 5, "bicubic": 4}
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "bicubic", "area")
_CUBIC_A = -0.75  # PyTorch's bicubic coefficient (UpSample.h)


def _f32(v):
    """v rounded to float32, as PyTorch computes nearest-neighbour source positions."""
    return struct.unpack("f", struct.pack("f", v))[0]


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """Resize the spatial dims (all dims after [N, C]) of a 3-D, 4-D or 5-D input."""
    if not isinstance(input, Tensor):
        raise TypeError(f"interpolate(): expected a Tensor, got {type(input).__name__}")
    if mode not in _MODES:
        raise NotImplementedError(f"interpolate(): mode must be one of {list(_MODES)}, got {mode!r}")
    if mode in ("nearest", "nearest-exact", "area"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    if antialias and (mode not in ("bilinear", "bicubic") or input.ndim != 4):
        raise ValueError("Anti-alias option is restricted to bilinear and bicubic modes and requires a 4-D tensor as "
                         "input")
    if input.ndim not in (3, 4, 5):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
                                  f"the modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact "
                                  f"(got {mode})")
    if mode in _LINEAR and input.ndim != _LINEAR[mode]:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {_LINEAR[mode]}D input")
    if not input.dtype.is_floating:
        raise RuntimeError(f"interpolate(): expected a floating point input, got {input.dtype.name}")
    dim = input.ndim - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        sizes = [int(s) for s in size] if isinstance(size, (list, tuple)) else [int(size)] * dim
        if len(sizes) != dim:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input with "
                             f"spatial dimensions of {list(input.shape[2:])} and output size of {list(size)}. Please "
                             f"provide input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) "
                             f"format.")
        scales = [None] * dim
    elif scale_factor is not None:
        scales = [float(s) for s in scale_factor] if isinstance(scale_factor, (list, tuple)) else [float(scale_factor)] * dim
        if len(scales) != dim:
            raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got input "
                             f"with spatial dimensions of {list(input.shape[2:])} and scale_factor of shape "
                             f"{list(scale_factor)}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                             f"scale_factor in (s1, s2, ...,sK) format.")
        sizes = [math.floor(n * s) for n, s in zip(input.shape[2:], scales)]
        if recompute_scale_factor:  # the kernel then derives its scale from the sizes alone
            scales = [None] * dim
    else:
        raise ValueError("either size or scale_factor should be defined")
    if any(s <= 0 for s in sizes):
        raise RuntimeError(f"interpolate(): output size must be positive, got {sizes} for input of shape "
                           f"{list(input.shape)}")
    if antialias:  # ATen's separable filters: out = Wh @ x @ Ww^T, each W a constant [out, in] matrix
        wh, ww = (tensor(aa_rows(n_in, n_out, bool(align_corners), scale, mode == "bicubic"), dtype=input.dtype,
                         device=input.device) for n_in, n_out, scale in zip(input.shape[2:], sizes, scales))
        return wh @ input @ ww.t()
    out = input
    for d, (n_in, n_out, scale) in enumerate(zip(input.shape[2:], sizes, scales)):
        axis = d + 2
        if mode in ("nearest", "nearest-exact"):
            # PyTorch's 2-D nearest kernel copies a dim of unchanged size and halves indices for a doubled
            # one whatever the scale; its 1-D and 3-D kernels and nearest-exact always use the formula
            shortcut = mode == "nearest" and input.ndim == 4
            if shortcut and n_out == n_in:
                continue
            out = out.index_select(axis, _index(_nearest(n_in, n_out, scale, mode == "nearest-exact", shortcut), out))
        elif mode == "area":  # adaptive average pooling, one dim at a time (its windows are separable)
            if n_out != n_in:
                out = _area(out, axis, n_in, n_out)
        elif mode == "bicubic":  # PyTorch copies only when both dims keep their size; otherwise the taps run
            if tuple(sizes) != tuple(input.shape[2:]):
                out = _cubic(out, axis, n_in, n_out, scale, align_corners)
        elif n_out == n_in:
            continue  # the linear kernels copy a dim of unchanged size, whatever the scale
        else:
            out = _linear(out, axis, n_in, n_out, scale, align_corners)
    return out


def _aa_filter(cubic):
    """ATen's antialiasing filters: the triangle (bilinear) and Keys' cubic with a = -0.5 (bicubic)."""
    def triangle(x):
        x = abs(x)
        return 1.0 - x if x < 1.0 else 0.0

    def keys(x):
        x, a = abs(x), -0.5
        if x < 1.0:
            return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        return (((x - 5.0) * x + 8.0) * x - 4.0) * a if x < 2.0 else 0.0
    return keys if cubic else triangle


@functools.lru_cache(maxsize=64)
def aa_rows(n_in, n_out, align_corners, scale, cubic):
    """The rows of ATen's antialiased resampling matrix [n_out, n_in] along one dim (UpSampleKernel.cpp's
    _compute_indices_min_size_weights_aa): output i averages the inputs within `support` of its center, the
    filter stretched by the scale when downsampling, the weights normalised to sum to 1. They depend on the
    sizes only, so a resize repeated over a data set computes them once."""
    if align_corners:
        step = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        step = 1.0 / scale if scale is not None and scale > 0 else n_in / n_out
    size = 4 if cubic else 2
    support = size * 0.5 * step if step >= 1.0 else size * 0.5
    stretch = 1.0 / step if step >= 1.0 else 1.0
    filt = _aa_filter(cubic)
    rows = []
    for i in range(n_out):
        center = step * (i + 0.5)
        low = max(int(center - support + 0.5), 0)
        count = min(int(center + support + 0.5), n_in) - low
        w = [filt((j + low - center + 0.5) * stretch) for j in range(count)]
        total = sum(w)
        row = [0.0] * n_in
        row[low:low + count] = [v / total for v in w] if total else w
        rows.append(tuple(row))
    return tuple(rows)


def _index(values, like):
    return tensor(values, dtype=dtypes.int32, device=like.device)


def _nearest(n_in, n_out, scale, exact, shortcut):
    """Source index of each output position (PyTorch's nearest_idx / nearest_neighbor_exact_compute_source_index)."""
    if shortcut and n_out == 2 * n_in:
        return [i >> 1 for i in range(n_out)]
    s = _f32(1.0 / scale) if scale is not None and scale > 0 else _f32(_f32(n_in) / _f32(n_out))
    if exact:
        return [min(math.floor(_f32(_f32(i + 0.5) * s)), n_in - 1) for i in range(n_out)]
    return [min(math.floor(_f32(i * s)), n_in - 1) for i in range(n_out)]


def _linear(x, axis, n_in, n_out, scale, align_corners):
    """Blend the two neighbouring source rows of dim `axis` (PyTorch's area_pixel_compute_source_index)."""
    if align_corners:
        s = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        s = 1.0 / scale if scale is not None and scale > 0 else n_in / n_out
    low, high, w_high = [], [], []
    for i in range(n_out):
        src = i * s if align_corners else max(s * (i + 0.5) - 0.5, 0.0)
        i0 = min(math.floor(src), n_in - 1)
        low.append(i0)
        high.append(i0 + 1 if i0 < n_in - 1 else i0)
        w_high.append(min(max(src - i0, 0.0), 1.0))
    shape = [1] * x.ndim
    shape[axis] = n_out
    lam = tensor(w_high, dtype=x.dtype, device=x.device).reshape(shape)
    a, b = x.index_select(axis, _index(low, x)), x.index_select(axis, _index(high, x))
    return a * (1.0 - lam) + b * lam


def _source_scale(n_in, n_out, scale, align_corners):
    """PyTorch's area_pixel_compute_scale."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else n_in / n_out


def _cubic(x, axis, n_in, n_out, scale, align_corners):
    """Four neighbouring source rows of dim `axis` (clamped at the edges) blended with the cubic convolution
    weights (A = -0.75), as PyTorch's upsample_bicubic2d."""
    s = _source_scale(n_in, n_out, scale, align_corners)
    a = _CUBIC_A
    taps = [([], []) for _ in range(4)]
    for i in range(n_out):
        src = i * s if align_corners else s * (i + 0.5) - 0.5
        i0 = math.floor(src)
        t = src - i0
        weights = (((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
                   ((a + 2) * t - (a + 3)) * t * t + 1,
                   ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
                   ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a)
        for k, (index, weight) in enumerate(taps):
            index.append(min(max(i0 - 1 + k, 0), n_in - 1))
            weight.append(weights[k])
    shape = [1] * x.ndim
    shape[axis] = n_out
    out = None
    for index, weight in taps:
        term = x.index_select(axis, _index(index, x)) * tensor(weight, dtype=x.dtype, device=x.device).reshape(shape)
        out = term if out is None else out + term
    return out


def _area(x, axis, n_in, n_out):
    """Each output row of dim `axis` the mean of its adaptive window [floor(i*n/o), ceil((i+1)*n/o)) of rows."""
    m = [[0.0] * n_in for _ in range(n_out)]
    for i in range(n_out):
        start, end = (i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)
        for j in range(start, end):
            m[i][j] = 1.0 / (end - start)
    weights = tensor(m, dtype=x.dtype, device=x.device)
    return (x.movedim(axis, -1) @ weights.t()).movedim(-1, axis)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None):
    """The deprecated name of interpolate (it warns, as PyTorch's)."""
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: interpolate(..., mode='nearest')."""
    warnings.warn("nn.functional.upsample_nearest is deprecated. Use nn.functional.interpolate instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: interpolate(..., mode='bilinear', align_corners=True)."""
    warnings.warn("nn.functional.upsample_bilinear is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def pixel_shuffle(input, upscale_factor):
    """[*, C*r*r, H, W] -> [*, C, H*r, W*r]: channel c*r*r + i*r + j goes to pixel (h*r + i, w*r + j)."""
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    r = int(upscale_factor)
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    b = len(batch)
    x = input.reshape(*batch, c // (r * r), r, r, h, w)
    x = x.permute(*range(b), b, b + 3, b + 1, b + 4, b + 2)
    return x.reshape(*batch, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """The inverse of pixel_shuffle: [*, C, H*r, W*r] -> [*, C*r*r, H, W]."""
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    r = int(downscale_factor)
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *batch, c, h, w = input.shape
    if h % r:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, but "
                           f"input.size(-2)={h} is not divisible by {r}")
    if w % r:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, but "
                           f"input.size(-1)={w} is not divisible by {r}")
    b = len(batch)
    x = input.reshape(*batch, c, h // r, r, w // r, r)
    x = x.permute(*range(b), b, b + 2, b + 4, b + 1, b + 3)
    return x.reshape(*batch, c * r * r, h // r, w // r)
