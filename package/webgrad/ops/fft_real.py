"""The discrete Fourier transforms as real linear maps on (real, imaginary) pairs of float tensors: the
complex-to-complex transform of one dim (c2c), the complex-to-real ones (irfftn, hfftn: real_inverse) and stft.
ops/fft_complex.py builds torch.fft's complex64 functions on them; irfftn and hfftn here take a real input and
give a real result with no complex tensor on the way (what the torch device's fallback runs).

Each transform is applied one dim at a time as a product with its [n_in, n_out] cosine and sine matrices (which
depend on the sizes only). The complex-to-real transform of the last dim reads the one-sided spectrum (weights 1
for the zero and Nyquist bins, 2 between) and ignores those two bins' imaginary parts, as pocketfft does. Sizes
follow torch.fft (s, dim and the defaults; the input trimmed or zero-padded to them; n // 2 + 1 bins on the last
dim of a real transform) and so does the scaling (norm 'backward', 'forward' or 'ortho', on all the transformed
dims). Gradients come by composition. The products cost O(n^2) per dim where an FFT costs O(n log n): meant for
the sizes models use, not long signals.
"""

import functools
import math

from .. import dtypes
from .._tensor import _norm_dim, tensor
from .conv import pad
from .matmul import matmul
from .shape import cat, stack

__all__ = ["c2c", "hfftn", "irfftn", "real_inverse", "stft"]


def _scale(norm, n, inverse):
    """The factor norm gives a transform of n points (irfft's direction is inverse, hfft's forward)."""
    if norm is None:
        norm = "backward"
    if norm not in ("backward", "forward", "ortho"):
        raise RuntimeError(f'Invalid normalization mode: "{norm}"')
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0 / n if (norm == "backward") == inverse else 1.0


def _resize(x, d, size):
    """x trimmed or zero-padded along dim d to size."""
    have = x.shape[d]
    if have > size:
        return x.narrow(d, 0, size)
    if have < size:
        shape = list(x.shape)
        shape[d] = size - have
        return cat([x, x.new_zeros(tuple(shape))], d)
    return x


def _along(x, d, matrix):
    """x's dim d contracted with matrix [n_in, n_out]."""
    return matmul(x.movedim(d, -1), matrix).movedim(-1, d)


def _matrices(n_in, n, scale, like, weights=None, period=None):
    """(cos, sin) matrices [n_in, n] on like's device: entry [k, m] = w_k * scale * cos(2 pi k m / period) (and
    sin); the period is n unless given."""
    cos, sin = _rows(n_in, n, scale, tuple(weights) if weights else None, n if period is None else period)
    return (tensor(cos, dtype=like.dtype, device=like.device), tensor(sin, dtype=like.dtype, device=like.device))


@functools.lru_cache(maxsize=32)
def _rows(n_in, n, scale, weights, period):
    """The matrices' rows, which depend on the sizes only: a transform repeated on same-sized inputs computes them
    once."""
    cos, sin = [], []
    for k in range(n_in):
        w = scale * (weights[k] if weights else 1.0)
        cos.append(tuple(w * math.cos(2 * math.pi * k * m / period) for m in range(n)))
        sin.append(tuple(w * math.sin(2 * math.pi * k * m / period) for m in range(n)))
    return tuple(cos), tuple(sin)


def _plan(x, s, dim, op, halved=True):
    """(dims, sizes) of a transform: torch.fft's rules for s and dim (dim None: the last len(s) dims, or all;
    s None or -1: the input's sizes, 2 * (m - 1) for the last dim of a complex-to-real (halved) transform). Only
    the complex-to-complex transforms (not halved) accept no dims at all."""
    if s is not None and dim is None and len(s) > x.ndim:
        raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has {x.ndim} dimensions.")
    if dim is None:
        dims = list(range(x.ndim - len(s), x.ndim)) if s is not None else list(range(x.ndim))
    else:
        dims = [_fft_dim(d, x.ndim) for d in ((dim,) if isinstance(dim, int) else dim)]
    if len(set(dims)) != len(dims):
        raise RuntimeError("FFT dims must be unique")
    if s is not None and len(s) != len(dims):
        raise RuntimeError("When given, dim and shape arguments must have the same length")
    if not dims and (halved or op in ("rfftn", "ihfftn")):
        raise RuntimeError(f"{op} must transform at least one axis")
    sizes = []
    for i, d in enumerate(dims):
        size = s[i] if s is not None and s[i] != -1 else None
        if size is None:
            size = 2 * (x.shape[d] - 1) if halved and i == len(dims) - 1 else x.shape[d]
        if size < 1:
            raise RuntimeError(f"Invalid number of data points ({size}) specified")
        sizes.append(size)
    return dims, sizes


def _fft_dim(d, ndim):
    if ndim == 0:
        raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
    return _norm_dim(d, ndim)


def c2c(re, im, d, n, norm, forward):
    """The complex transform of n points along dim d of the pair (re, im) (im None: zero), the input trimmed or
    zero-padded to n: e^{-2 pi i k m / n} forward, e^{+...} inverse, scaled as norm says."""
    re = _resize(re, d, n)
    cos, sin = _matrices(n, n, _scale(norm, n, not forward), re)
    sign = -1.0 if forward else 1.0
    if im is None:
        return _along(re, d, cos), sign * _along(re, d, sin)
    im = _resize(im, d, n)
    return _along(re, d, cos) - sign * _along(im, d, sin), sign * _along(re, d, sin) + _along(im, d, cos)


def real_inverse(re, im, s, dim, norm, hermitian, op):
    """irfftn (hermitian False) or hfftn (True) of the spectrum re + i im (im None: a real spectrum)."""
    dims, sizes = _plan(re, s, dim, op)
    for d, n in zip(dims[:-1], sizes[:-1]):  # inverse complex transforms for irfftn, forward ones for hfftn
        re, im = c2c(re, im, d, n, norm, forward=hermitian)
    if hermitian and im is not None:  # hfftn's conjugate before its complex-to-real transform
        im = -im
    d, n = dims[-1], sizes[-1]
    bins = n // 2 + 1
    re = _resize(re, d, bins)
    weights = [1.0 if k == 0 or 2 * k == n else 2.0 for k in range(bins)]
    cos, sin = _matrices(bins, n, _scale(norm, n, not hermitian), re, weights)
    out = _along(re, d, cos)
    if im is not None:
        out = out - _along(_resize(im, d, bins), d, sin)
    return out


def irfftn(input, s=None, dim=None, norm=None):
    """torch.fft.irfftn of a real input (irfft and irfft2 are its one- and two-dim cases)."""
    return real_inverse(input if input.dtype.is_floating else input.to(dtypes.float32), None, s, dim, norm, False,
                        "irfftn")


def hfftn(input, s=None, dim=None, norm=None):
    """torch.fft.hfftn of a real input (hfft and hfft2 are its one- and two-dim cases)."""
    return real_inverse(input if input.dtype.is_floating else input.to(dtypes.float32), None, s, dim, norm, True,
                        "hfftn")


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=False, pad_mode="reflect",
         normalized=False, onesided=True):
    """torch.stft(..., return_complex=False) of a real 1-D or batched [B, L] signal: [.., n_fft // 2 + 1 (all
    n_fft when not onesided), frames, 2] (real and imaginary parts). Each frame (hop_length apart, times the window
    centred in n_fft) is multiplied by the cosine and sine matrices of the forward transform."""
    if input.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.ndim}D")
    hop = n_fft // 4 if hop_length is None else hop_length
    length = n_fft if win_length is None else win_length
    if not 0 < n_fft or hop <= 0 or not 0 < length <= n_fft:
        raise RuntimeError(f"stft: expected 0 < n_fft, hop_length > 0 and 0 < win_length <= n_fft, but got "
                           f"n_fft={n_fft}, hop_length={hop}, win_length={length}")
    x = input.unsqueeze(0) if input.ndim == 1 else input
    if not x.dtype.is_floating:
        x = x.to(dtypes.float32)
    if center:
        half = n_fft // 2
        x = pad(x.unsqueeze(1), (half, half), mode=pad_mode).squeeze(1)
    if x.shape[-1] < n_fft:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {x.shape[-1]}, but got n_fft={n_fft}")
    frames = x.unfold(-1, n_fft, hop)  # [B, T, n_fft]
    if window is not None or length < n_fft:
        w = window if window is not None else x.new_ones(length)
        if length < n_fft:
            left = (n_fft - length) // 2
            w = cat([w.new_zeros(left), w, w.new_zeros(n_fft - length - left)])
        frames = frames * w
    bins = n_fft // 2 + 1 if onesided else n_fft
    cos, sin = _matrices(n_fft, bins, n_fft ** -0.5 if normalized else 1.0, x, period=n_fft)
    out = stack([matmul(frames, cos), -matmul(frames, sin)], -1).transpose(1, 2)  # [B, F, T, 2]
    return out.squeeze(0) if input.ndim == 1 else out
