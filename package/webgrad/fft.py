"""torch.fft, the part webgrad has: fftshift and ifftshift (real-valued reorderings of a spectrum's
frequencies). The transforms themselves give complex results, and webgrad has no complex dtype."""

from ._tensor import _norm_dim
from .ops.movement import roll

__all__ = ["fftshift", "ifftshift"]


def _shifts(input, dim, sign):
    if dim is None:
        dims = tuple(range(input.ndim))
    else:
        dims = tuple(_norm_dim(d, input.ndim) for d in ((dim,) if isinstance(dim, int) else dim))
    return tuple(sign * (input.shape[d] // 2) for d in dims), dims


def fftshift(input, dim=None):
    """The zero frequency moved to the centre of dims (all dims when None): roll by n // 2."""
    shifts, dims = _shifts(input, dim, 1)
    return roll(input, shifts, dims) if dims else input.clone()


def ifftshift(input, dim=None):
    """fftshift's inverse: roll by -(n // 2)."""
    shifts, dims = _shifts(input, dim, -1)
    return roll(input, shifts, dims) if dims else input.clone()
