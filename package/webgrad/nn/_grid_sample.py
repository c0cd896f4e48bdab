"""Spatial transformers, as torch.nn.functional: affine_grid and grid_sample.

Both are compositions of existing ops, so they run on every backend and their gradients come from the ops
they are built from. affine_grid multiplies a base grid of normalized pixel centres (linspace) by thetaᵀ.
grid_sample turns each output location into a set of taps (1 for nearest, 2^d corners for bilinear and
trilinear, 4x4 for bicubic): integer source positions and a weight each. The positions of every tap are
gathered from the input flattened to [N, C, L] in one gather, and the weighted taps are summed. Weights depend
on the grid through differentiable ops (the fractional part of the source position), so the grid's gradient
comes from them; the gather's backward gives the input's. The formulas follow PyTorch's CPU kernels
(aten/src/ATen/native/GridSampler.h and cpu/GridSamplerKernel.cpp).
"""

import itertools
import warnings

from .._tensor import Tensor, linspace, ones
from ..ops.elementwise import where
from ..ops.shape import stack

_MODES = ("bilinear", "nearest", "bicubic")
_PADDINGS = ("zeros", "border", "reflection")
_CUBIC_A = -0.75  # PyTorch's bicubic coefficient (cubic convolution)


def _default_align_corners(align_corners):
    if align_corners is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                      "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                      "grid_sample for details.", stacklevel=3)
        return False
    return bool(align_corners)


# ===================================================================== affine_grid
def _base_coords(steps, align_corners, like):
    """The normalized centres of `steps` pixels: -1..1, pulled in by (steps-1)/steps without align_corners;
    a unit dim sits at 0."""
    if steps <= 1:
        return linspace(0.0, 0.0, 1, dtype=like.dtype, device=like.device)
    r = linspace(-1.0, 1.0, steps, dtype=like.dtype, device=like.device)
    return r if align_corners else r * ((steps - 1) / steps)


def affine_grid(theta, size, align_corners=None):
    """The sampling grid [N, H, W, 2] (or [N, D, H, W, 3]) of a batch of affine matrices theta [N, 2, 3]
    (or [N, 3, 4]) for an output of `size` (N, C, H, W) (or (N, C, D, H, W)): grid[n, h, w] = theta[n] @ (x_w, y_h, 1),
    where x, y are normalized pixel centres."""
    align_corners = _default_align_corners(align_corners)
    if not isinstance(theta, Tensor):
        raise TypeError(f"affine_grid(): argument 'theta' must be Tensor, not {type(theta).__name__}")
    if not theta.dtype.is_floating:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = tuple(int(s) for s in size)
    if len(size) == 4:
        if theta.ndim != 3 or theta.shape[-2] != 2 or theta.shape[-1] != 3:
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. "
                             f"Got {theta.shape}.")
    elif len(size) == 5:
        if theta.ndim != 3 or theta.shape[-2] != 3 or theta.shape[-1] != 4:
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. "
                             f"Got {theta.shape}.")
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation "
                      "of affine_grid for details.", stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    d = len(spatial)
    if theta.shape[0] != size[0]:
        raise RuntimeError(f"affine_grid(): expected theta to hold {size[0]} affine matrices (the batch size of "
                           f"size {list(size)}), but got theta of shape {list(theta.shape)}")
    # base[..., k] is coordinate k (x along the last dim, then y, then z), base[..., d] = 1
    columns = []
    for k in range(d):
        axis = d - 1 - k  # x runs along the last spatial dim
        view = [1] * d
        view[axis] = spatial[axis]
        columns.append(_base_coords(spatial[axis], align_corners, theta).reshape(*view).expand(*spatial))
    columns.append(ones(*spatial, dtype=theta.dtype, device=theta.device))
    base = stack(columns, -1).reshape(-1, d + 1)  # [prod(spatial), d+1]
    grid = base @ theta.transpose(1, 2)  # [N, prod(spatial), d]
    return grid.reshape(size[0], *spatial, d)


# ===================================================================== grid_sample
def _unnormalize(coord, size, align_corners):
    """Grid coordinate in [-1, 1] -> source pixel position."""
    if align_corners:
        return (coord + 1) * ((size - 1) / 2)
    return (coord + 1) * (size / 2) - 0.5


def _reflect(coord, twice_low, twice_high):
    """Reflect coord off the bounds twice_low/2 and twice_high/2 until it lies between them."""
    if twice_low == twice_high:
        return coord * 0.0
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    coord = (coord - low).abs()
    extra = coord.fmod(span)
    flips = (coord / span).floor()
    return where(flips.remainder(2) == 0, extra + low, span - extra + low)


def _pad_coordinate(coord, size, padding_mode, align_corners):
    """Where padding_mode sends a source position (zeros: unchanged, out-of-bounds taps are masked later)."""
    if padding_mode == "border":
        return coord.clamp(0, size - 1)
    if padding_mode == "reflection":
        if align_corners:
            coord = _reflect(coord, 0, 2 * (size - 1))
        else:
            coord = _reflect(coord, -1, 2 * size - 1)
        return coord.clamp(0, size - 1)
    return coord


def _cubic_coefficients(t):
    """The 4 cubic-convolution weights of taps -1, 0, 1, 2 at fractional position t."""
    A = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _check_grid_sample(input, grid, mode):
    if not isinstance(input, Tensor) or not isinstance(grid, Tensor):
        bad = "input" if not isinstance(input, Tensor) else "grid"
        raise TypeError(f"grid_sample(): argument '{bad}' must be Tensor, not "
                        f"{type(input if bad == 'input' else grid).__name__}")
    if input.device != grid.device:
        raise RuntimeError(f"grid_sampler(): expected input and grid to be on same device, but input is on "
                           f"{input.device} and grid is on {grid.device}")
    if input.dtype != grid.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have the same dtype, but input is "
                           f"{input.dtype} and grid is {grid.dtype}")
    if not input.dtype.is_floating:
        raise NotImplementedError(f"grid_sampler(): not implemented for {input.dtype}: expected a floating point "
                                  f"input and grid")
    sizes = f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}"
    if input.ndim != grid.ndim:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same number of dimensions, but got {sizes}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got {sizes}")
    if grid.shape[-1] != input.ndim - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.ndim - 2} in last dimension, but got "
                           f"grid with sizes {list(grid.shape)}")
    if input.ndim not in (4, 5):
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but got "
                           f"{sizes}")
    for i in range(2, input.ndim):
        if input.shape[i] == 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                               f"sizes {list(input.shape)} with dimension {i} being empty")
    if mode == "bicubic" and input.ndim != 4:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")


def _taps(coords, sizes, mode, padding_mode, align_corners):
    """(positions, weight) per tap: positions are per-dim float tensors holding integers, weight None for 1."""
    if mode == "nearest":
        padded = [_pad_coordinate(c, s, padding_mode, align_corners) for c, s in zip(coords, sizes)]
        # round half to even, as nearbyint; round's gradient is 0, as PyTorch's grid gradient in nearest mode
        return [([c.round() for c in padded], None)]
    if mode == "bilinear":
        padded = [_pad_coordinate(c, s, padding_mode, align_corners) for c, s in zip(coords, sizes)]
        lows = [c.floor() for c in padded]
        fracs = [c - low for c, low in zip(padded, lows)]  # weight of the upper neighbour
        taps = []
        for corner in itertools.product((0, 1), repeat=len(coords)):
            weight = None
            for bit, frac in zip(corner, fracs):
                w = frac if bit else 1 - frac
                weight = w if weight is None else weight * w
            taps.append(([low + bit for low, bit in zip(lows, corner)], weight))
        return taps
    # bicubic: taps at floor-1 .. floor+2 of the unpadded position; padding moves each tap, not the position
    lows = [c.floor() for c in coords]
    coefficients = [_cubic_coefficients(c - low) for c, low in zip(coords, lows)]
    taps = []
    for offsets in itertools.product(range(4), repeat=len(coords)):
        positions = [_pad_coordinate(low + (o - 1), s, padding_mode, align_corners)
                     for low, o, s in zip(lows, offsets, sizes)]
        weight = None
        for o, coefs in zip(offsets, coefficients):
            weight = coefs[o] if weight is None else weight * coefs[o]
        taps.append((positions, weight))
    return taps


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample input [N, C, H, W] (or [N, C, D, H, W]) at the normalized locations grid [N, H', W', 2]
    (or [N, D', H', W', 3]; x, y(, z) order, -1 and 1 the input's edges), as torch.nn.functional.grid_sample."""
    if mode not in _MODES:
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in _PADDINGS:
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    align_corners = _default_align_corners(align_corners)
    _check_grid_sample(input, grid, mode)
    n, c = input.shape[0], input.shape[1]
    out_spatial = tuple(grid.shape[1:-1])
    d = input.ndim - 2
    sizes = tuple(reversed(input.shape[2:]))  # W, H(, D): the order of the grid's coordinates
    strides = [1]
    for s in sizes[:-1]:
        strides.append(strides[-1] * s)
    points = 1
    for s in out_spatial:
        points *= s
    flat_grid = grid.reshape(n, points, d)
    coords = [_unnormalize(g, s, align_corners) for g, s in zip(flat_grid.unbind(-1), sizes)]

    indices, weights = [], []
    for positions, weight in _taps(coords, sizes, mode, padding_mode, align_corners):
        inside = None
        index = None
        for p, s, stride in zip(positions, sizes, strides):
            ok = (p >= 0) & (p <= s - 1)
            inside = ok if inside is None else inside & ok
            term = p.clamp(0, s - 1).long() * stride  # clamped so a masked tap still reads a valid element
            index = term if index is None else index + term
        if weight is None:  # nearest: weight 1, tied to the grid so that its gradient is 0, not absent
            weight = positions[0] * 0 + 1
        # where, not a product: an out-of-bounds tap contributes 0 even where its weight is inf or nan
        weights.append(where(inside, weight, 0.0))
        indices.append(index)
    taps = len(indices)
    index = stack(indices, 1).reshape(n, 1, taps * points).expand(n, c, taps * points)
    values = input.reshape(n, c, -1).gather(2, index).reshape(n, c, taps, points)
    out = values * stack(weights, 1).unsqueeze(1)
    if taps > 1:
        out = out.sum(2)
    else:
        out = out.squeeze(2)
    return out.reshape(n, c, *out_spatial)


__all__ = ["affine_grid", "grid_sample"]
