"""3-D pooling, as torch.nn.functional's max_pool3d, avg_pool3d, adaptive_max_pool3d and adaptive_avg_pool3d (and
their *_with_indices forms), over [N, C, D, H, W] or unbatched [C, D, H, W], for nn.Conv3d's networks.

The passes are ops/pooling3d.py's (a box window is separable: one pass per axis, see there), which the PyTorch
device's ATen table runs too. The averages are compositions of webgrad ops, so autograd differentiates them as
written; a maximum's gradient goes to the element each window took (its indices), and under create_graph that
scatter is differentiated again through its adjoint, the gather of those indices."""

from .._autograd import record, record_adjoint
from .._tensor import Tensor
from ..ops import pooling3d


def _check(input, op):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating:
        raise RuntimeError(f"{op}(): expected a floating point input, got {input.dtype.name}")


def _with_grad(input, out, indices, name):
    """out (the maxima) recorded with the scatter of its gradient to `indices` as its backward."""
    def backward(g):
        gx = pooling3d.max_pool3d_backward(g, input, indices)
        lead = tuple(indices.shape[:-3])
        flat = indices.reshape(*lead, -1)
        return (record_adjoint(gx, g, lambda h: h.reshape(*lead, -1).gather(-1, flat).reshape(*indices.shape),
                               name + "Backward"),)
    return record(out, name, (input,), backward)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    """(maxima, flat indices d * H * W + h * W + w of each window's maximum in its volume)."""
    _check(input, "max_pool3d")
    out, indices = pooling3d.max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode)
    return _with_grad(input, out, indices, "MaxPool3DWithIndices"), indices


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over each kd x kh x kw window (dilated, padded with -inf, ceil_mode as max_pool2d's)."""
    out, indices = max_pool3d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return (out, indices) if return_indices else out


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=True):
    _check(input, "adaptive_max_pool3d")
    out, indices = pooling3d.adaptive_max_pool3d(input, output_size)
    return _with_grad(input, out, indices, "AdaptiveMaxPool3D"), indices


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max over PyTorch's adaptive windows [floor(o * I / O), ceil((o + 1) * I / O)) of each axis; None in
    output_size keeps that axis."""
    out, indices = adaptive_max_pool3d_with_indices(input, output_size)
    return (out, indices) if return_indices else out


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over each window, with PyTorch's divisors (count_include_pad, ceil_mode's clipped windows,
    divisor_override)."""
    _check(input, "avg_pool3d")
    return pooling3d.avg_pool3d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def adaptive_avg_pool3d(input, output_size):
    """Mean over PyTorch's adaptive windows of each axis; None in output_size keeps that axis."""
    _check(input, "adaptive_avg_pool3d")
    return pooling3d.adaptive_avg_pool3d(input, output_size)


__all__ = ["max_pool3d", "max_pool3d_with_indices", "adaptive_max_pool3d", "adaptive_max_pool3d_with_indices",
           "avg_pool3d", "adaptive_avg_pool3d"]
