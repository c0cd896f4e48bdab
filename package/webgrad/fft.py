"""torch.fft: the discrete Fourier transforms on complex64 (fft, ifft, rfft, irfft, hfft, ihfft and their 2-dim and
n-dim forms), with torch's arguments (n or s, dim, norm 'backward' / 'forward' / 'ortho', out), sizes (the input
trimmed or zero-padded), dtypes and errors; fftfreq, rfftfreq, fftshift and ifftshift.

The transforms are products with cosine and sine matrices (ops/fft_complex.py, ops/fft_real.py): O(n^2) per
transformed dim, exact for the sizes models use, differentiable by composition on every device."""

from . import _complex
from ._tensor import _norm_dim
from .ops import fft_complex as _impl
from .ops.fft_complex import fftfreq, rfftfreq
from .ops.movement import roll

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
           "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _one_dim(op, n, dim):
    """(s, dim) of a one-dim transform, checked as torch's argument parser checks them."""
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"fft_{op}(): argument 'dim' must be int, not {type(dim).__name__}")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool)):
        raise TypeError(f"fft_{op}(): argument 'n' must be int, not {type(n).__name__}")
    return (None if n is None else (n,)), (dim,)


def fft(input, n=None, dim=-1, norm=None, *, out=None):
    """The one-dim discrete Fourier transform of input along dim (complex64), input trimmed or zero-padded to n."""
    s, dims = _one_dim("fft", n, dim)
    return _impl.fftn(input, s, dims, norm, out=out, _op="fft")


def ifft(input, n=None, dim=-1, norm=None, *, out=None):
    """The one-dim inverse discrete Fourier transform (complex64)."""
    s, dims = _one_dim("ifft", n, dim)
    return _impl.ifftn(input, s, dims, norm, out=out, _op="ifft")


def rfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The one-dim transform of a real input: its n // 2 + 1 non-negative frequencies (complex64)."""
    s, dims = _one_dim("rfft", n, dim)
    return _impl.rfftn(input, s, dims, norm, out=out, _op="rfft")


def irfft(input, n=None, dim=-1, norm=None, *, out=None):
    """rfft's inverse: n real points (2 * (m - 1) by default) from m one-sided frequencies."""
    s, dims = _one_dim("irfft", n, dim)
    return _impl.irfftn(input, s, dims, norm, out=out, _op="irfft")


def hfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The transform of a Hermitian-symmetric signal given by its first half: n real points (2 * (m - 1) by
    default)."""
    s, dims = _one_dim("hfft", n, dim)
    return _impl.hfftn(input, s, dims, norm, out=out, _op="hfft")


def ihfft(input, n=None, dim=-1, norm=None, *, out=None):
    """hfft's inverse: the n // 2 + 1 first bins of the inverse transform of a real input (complex64)."""
    s, dims = _one_dim("ihfft", n, dim)
    return _impl.ihfftn(input, s, dims, norm, out=out, _op="ihfft")


def fftn(input, s=None, dim=None, norm=None, *, out=None):
    """The n-dim discrete Fourier transform over dim (the last len(s) dims when only s is given, else all)."""
    return _impl.fftn(input, s, dim, norm, out=out)


def ifftn(input, s=None, dim=None, norm=None, *, out=None):
    """The n-dim inverse discrete Fourier transform."""
    return _impl.ifftn(input, s, dim, norm, out=out)


def rfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The n-dim transform of a real input, one-sided (n // 2 + 1 bins) on the last transformed dim."""
    return _impl.rfftn(input, s, dim, norm, out=out)


def irfftn(input, s=None, dim=None, norm=None, *, out=None):
    """rfftn's inverse: a real result, the last dim 2 * (m - 1) long unless s says otherwise."""
    return _impl.irfftn(input, s, dim, norm, out=out)


def hfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The n-dim transform of a Hermitian-symmetric signal given by its one-sided half: a real result."""
    return _impl.hfftn(input, s, dim, norm, out=out)


def ihfftn(input, s=None, dim=None, norm=None, *, out=None):
    """hfftn's inverse of a real input: one-sided on the last transformed dim (complex64)."""
    return _impl.ihfftn(input, s, dim, norm, out=out)


def fft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """fftn over two dims (the last two by default)."""
    return _impl.fftn(input, s, dim, norm, out=out, _op="fft2")


def ifft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """ifftn over two dims (the last two by default)."""
    return _impl.ifftn(input, s, dim, norm, out=out, _op="ifft2")


def rfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """rfftn over two dims (the last two by default)."""
    return _impl.rfftn(input, s, dim, norm, out=out, _op="rfft2")


def irfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """irfftn over two dims (the last two by default)."""
    return _impl.irfftn(input, s, dim, norm, out=out, _op="irfft2")


def hfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """hfftn over two dims (the last two by default)."""
    return _impl.hfftn(input, s, dim, norm, out=out, _op="hfft2")


def ihfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """ihfftn over two dims (the last two by default)."""
    return _impl.ihfftn(input, s, dim, norm, out=out, _op="ihfft2")


def _shifts(input, dim, sign):
    if dim is None:
        dims = tuple(range(input.ndim))
    else:
        dims = tuple(_norm_dim(d, input.ndim) for d in ((dim,) if isinstance(dim, int) else dim))
    return tuple(sign * (input.shape[d] // 2) for d in dims), dims


def _roll(input, dim, sign):
    shifts, dims = _shifts(input, dim, sign)
    if isinstance(input, _complex.ComplexTensor):  # the pairs rolled along the same dims
        return _complex._wrap(roll(input._r, shifts, dims) if dims else input._r.clone())
    return roll(input, shifts, dims) if dims else input.clone()


def fftshift(input, dim=None):
    """The zero frequency moved to the centre of dims (all dims when None): roll by n // 2."""
    return _roll(input, dim, 1)


def ifftshift(input, dim=None):
    """fftshift's inverse: roll by -(n // 2)."""
    return _roll(input, dim, -1)
