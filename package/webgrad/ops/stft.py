"""torch.stft and torch.istft (and Tensor.stft / Tensor.istft), with torch's arguments, defaults, shapes and errors.

Both are compositions of ops every device has, so autograd and the WebGPU device need nothing of their own:
- stft: the signal (centre-padded with F.pad) is cut into frames by one index_select (frame t holds samples
  t * hop .. t * hop + n_fft), multiplied by the window (zero-padded to n_fft around its centre), and each frame
  is transformed by one product with a DFT matrix: [cos | -sin] for a real signal, the 2 x 2 block matrix of the
  complex transform for a complex signal or window (or two-sided output).
- istft: each frame is transformed back by one product, multiplied by the window, and the frames are overlap-added
  (index_add, the adjoint of the framing); the sum is divided by the overlap-added squared window, after torch's
  check that it is nowhere near zero (NOLA), which reads one value back.

Complex tensors travel as (real, imaginary) float pairs (webgrad/_complex.py). The DFT products cost O(n_fft^2)
per frame where an FFT costs O(n_fft log n_fft): fine for the n_fft of speech features (256 .. 2048).
"""

import functools
import math
import warnings

from .. import _complex, dtypes
from .._tensor import Tensor, arange, zeros
from .conv import pad
from .matmul import matmul
from .scatter import index_add
from .shape import cat, stack

__all__ = ["istft", "stft"]

_NO_WINDOW = ("A window was not provided. A rectangular window will be applied,which is known to cause spectral "
              "leakage. Other windows such as torch.hann_window or torch.hamming_window are recommended to reduce "
              "spectral leakage.To suppress this warning and use a rectangular window, explicitly set "
              "`window=torch.ones(n_fft, device=<device>)`.")
_NO_WINDOW_INVERSE = ("A window was not provided. A rectangular window will be applied.Please provide the same window "
                      "used by stft to make the inversion lossless.To suppress this warning and use a rectangular "
                      "window, explicitly set `window=torch.ones(n_fft, device=<device>)`.")
_REAL_OUTPUT = ("stft with return_complex=False is deprecated. In a future pytorch release, stft will return complex "
                "tensors for all inputs, and return_complex=False will raise an error.\nNote: you can still call "
                "torch.view_as_real on the complex output to recover the old return format.")
_ONESIDED_COMPLEX = "Cannot have onesided output if window or input is complex"


def _parts(x):
    """(real, imaginary) of a tensor: float tensors of its shape, the imaginary part None for a real tensor."""
    if isinstance(x, _complex.ComplexTensor):
        pairs = _complex.view_as_real(x)
        return pairs.select(-1, 0), pairs.select(-1, 1)
    return x, None


def _as_output(pairs, return_complex):
    """[..., 2] (real, imaginary) pairs as the complex64 tensor, or as themselves (view_as_real's layout)."""
    pairs = pairs.contiguous()
    if not return_complex:
        return pairs
    if pairs.dtype is not dtypes.float32:
        raise TypeError(dtypes.COMPLEX128_ERROR)
    return _complex.view_as_complex(pairs)


def _padded_window(window, win_length, n_fft, like):
    """(real, imaginary) of the window zero-padded to n_fft around its centre (None, None: no window needed)."""
    if window is None and win_length == n_fft:
        return None, None
    re, im = _parts(window) if window is not None else (like.new_ones(win_length), None)
    if win_length < n_fft:
        left = (n_fft - win_length) // 2
        re = pad(re, (left, n_fft - win_length - left))
        im = None if im is None else pad(im, (left, n_fft - win_length - left))
    return re, im


def _frame_index(frames, n_fft, hop, device):
    """The flat positions t * hop + k (t < frames, k < n_fft) of every frame's samples, frame after frame."""
    starts = arange(frames, dtype=dtypes.int32, device=device) * hop
    return (starts.unsqueeze(1) + arange(n_fft, dtype=dtypes.int32, device=device)).reshape(-1)


def _times(a_re, a_im, b_re, b_im):
    """The complex product (a_re + i a_im)(b_re + i b_im), either imaginary part None for zero."""
    if a_im is None and b_im is None:
        return a_re * b_re, None
    if b_im is None:
        return a_re * b_re, a_im * b_re
    if a_im is None:
        return a_re * b_re, a_re * b_im
    return a_re * b_re - a_im * b_im, a_re * b_im + a_im * b_re


@functools.lru_cache(maxsize=8)
def _dft_matrix(kind, n_fft, bins, scale, dtype, device):
    """The DFT of frames as one real matrix acting on [re | im] rows, of `dtype` on `device` (built there with tensor
    ops, so that no NumPy is needed; kept, so that a repeated transform finds it). With C[k, m] = cos(2 pi k m /
    n_fft), S likewise:
    - "r2c": [n_fft, 2 bins] = [C | -S], the forward transform of real frames;
    - "c2c": [2 n_fft, 2 n_fft] = [[C, -S], [S, C]], the forward transform of complex frames;
    - "c2c inverse": [[C, S], [-S, C]], the inverse (the sign of the exponent flipped);
    - "c2r": [2 bins, n_fft] = [[w C], [-w S]] (C, S transposed: bin by sample), the real inverse of a one-sided
      spectrum, w 2 for the bins that stand for two (1 for the zero and Nyquist bins, whose imaginary parts S
      zeroes, as pocketfft's c2r ignores them).
    The angles are 2 pi (k m mod n_fft) / n_fft, reduced exactly in integers; the cosines are taken in float64 where
    the device has it (the CPU) and rounded once to float32."""
    rows, cols = (bins, n_fft) if kind == "c2r" else (n_fft, bins)
    exact = dtypes.float64 if device.type == "cpu" else dtypes.float32
    k = arange(rows, dtype=dtypes.int64, device=device).reshape(rows, 1)
    m = arange(cols, dtype=dtypes.int64, device=device).reshape(1, cols)
    angle = (k * m % n_fft).to(exact) * (2 * math.pi / n_fft)
    cos, sin = angle.cos() * scale, angle.sin() * scale
    if kind == "r2c":
        matrix = cat([cos, -sin], 1)
    elif kind == "c2c":
        matrix = cat([cat([cos, -sin], 1), cat([sin, cos], 1)], 0)
    elif kind == "c2c inverse":
        matrix = cat([cat([cos, sin], 1), cat([-sin, cos], 1)], 0)
    else:
        b = arange(bins, dtype=dtypes.int64, device=device)
        weights = (2 - ((b == 0) | (2 * b == n_fft)).to(exact)).reshape(bins, 1)
        matrix = cat([weights * cos, -weights * sin], 0)
    return matrix.to(dtype)


def _product(x, kind, n_fft, bins, scale):
    """x [..., rows] times _dft_matrix(kind, ...) of x's dtype on x's device."""
    return matmul(x, _dft_matrix(kind, n_fft, bins, float(scale), x.dtype, x.device))


def _forward(re, im, n_fft, bins, scale):
    """The DFT of frames [..., n_fft] (im None: real frames): (real, imaginary) pairs [..., bins, 2], in one
    product. X_m = sum_k x_k e^{-2 pi i k m / n_fft}: re' = re cos + im sin, im' = im cos - re sin."""
    if im is None:
        out = _product(re, "r2c", n_fft, bins, scale)
    else:
        out = _product(cat([re, im], -1), "c2c", n_fft, n_fft, scale)
    return out.unflatten(-1, (2, bins)).transpose(-1, -2)


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
         normalized=False, onesided=None, return_complex=None, align_to_window=None):
    """The short-time Fourier transform of a 1-D signal [L] or a batch [B, L]: [(B,) freqs, frames], complex64
    (return_complex=False: its [..., 2] real pairs, deprecated as in torch). freqs is n_fft // 2 + 1 (onesided, the
    default for a real signal and window) or n_fft; frames is 1 + (L' - n_fft) // hop_length, L' the signal's
    length after centre padding (n_fft // 2 on each side, pad_mode as F.pad's, when center)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"stft(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if center and align_to_window is not None:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    is_complex = isinstance(input, _complex.ComplexTensor) or (
        window is not None and isinstance(window, _complex.ComplexTensor))
    if return_complex is None:
        if not is_complex:
            raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will further "
                               "require that return_complex=True in a future PyTorch release.")
        return_complex = True
    if not return_complex:
        warnings.warn(_REAL_OUTPUT, UserWarning, stacklevel=2)
    if input.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got a tensor of shape {list(input.shape)}")
    if not isinstance(input, _complex.ComplexTensor) and not input.dtype.is_floating:
        raise RuntimeError("stft: expected a tensor of floating point or complex values")
    hop = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    re, im = _parts(input)
    if center:  # torch.functional.stft's padding: F.pad of the signal seen as [1, 1 or B, L]
        shape = (1,) * (3 - input.ndim) + tuple(input.shape)
        re, im = (None if part is None else pad(part.reshape(shape), (n_fft // 2, n_fft // 2), mode=pad_mode)
                  .reshape(tuple(input.shape[:-1]) + (-1,)) for part in (re, im))
    if align_to_window and win_length < n_fft:  # frames start where the window starts, not where n_fft does
        left = (n_fft - win_length) // 2
        re, im = (None if part is None else pad(part, (left, n_fft - win_length - left)) for part in (re, im))
    length = re.shape[-1]
    if not 0 < n_fft <= length:
        raise RuntimeError(f"stft: expected 0 < n_fft < {length}, but got n_fft={n_fft}")
    if hop <= 0:
        raise RuntimeError(f"stft: expected hop_length > 0, but got hop_length={hop}")
    if not 0 < win_length <= n_fft:
        raise RuntimeError(f"stft: expected 0 < win_length <= n_fft, but got win_length={win_length}")
    if window is not None and (window.ndim != 1 or window.shape[0] != win_length):
        raise RuntimeError(f"stft: expected a 1D window tensor of size equal to win_length={win_length}, but got "
                           f"window with size {list(window.shape)}")
    if window is None:
        warnings.warn(_NO_WINDOW, UserWarning, stacklevel=2)
    onesided = not is_complex if onesided is None else onesided
    if onesided and is_complex:
        raise RuntimeError(_ONESIDED_COMPLEX)
    frames = 1 + (length - n_fft) // hop
    index = _frame_index(frames, n_fft, hop, re.device)
    re, im = (None if part is None else part.index_select(-1, index).unflatten(-1, (frames, n_fft))
              for part in (re, im))
    w_re, w_im = _padded_window(window, win_length, n_fft, re)
    if w_re is not None:
        re, im = _times(re, im, w_re, w_im)
    if return_complex and re.dtype is not dtypes.float32:
        raise TypeError(dtypes.COMPLEX128_ERROR)
    pairs = _forward(re, im, n_fft, n_fft // 2 + 1 if onesided else n_fft, n_fft ** -0.5 if normalized else 1.0)
    return _as_output(pairs.transpose(-3, -2), return_complex)  # [..., frames, freqs, 2] -> [..., freqs, frames, 2]


def _inverse(re, im, n_fft, onesided, scale, complex_result):
    """The inverse DFT of spectra [..., freqs] (freqs n_fft, or n_fft // 2 + 1 when onesided) in one product:
    (real, imaginary) [..., n_fft] for a complex result, else the real signal (imaginary part None). The real
    inverse of a one-sided spectrum counts the bins between the zero and Nyquist ones twice and ignores those
    two bins' imaginary parts (sin is 0 there), as pocketfft's c2r."""
    if complex_result:  # x_k = sum_m X_m e^{+2 pi i k m / n}: re' = re cos - im sin, im' = re sin + im cos
        out = _product(cat([re, im], -1), "c2c inverse", n_fft, n_fft, scale)
        return out[..., :n_fft], out[..., n_fft:]
    bins = n_fft // 2 + 1
    if not onesided:
        re, im = re[..., :bins], im[..., :bins]
    return _product(cat([re, im], -1), "c2r", n_fft, bins, scale), None


def _overlap_add(frames, total, hop, index):
    """frames [B, T, n_fft] summed into [B, total]: frame t's sample k lands at t * hop + k."""
    batch = frames.shape[0]
    out = zeros((batch, total), dtype=frames.dtype, device=frames.device)
    return index_add(out, 1, index, frames.reshape(batch, -1))


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
          onesided=None, length=None, return_complex=False):
    """stft's inverse: a complex spectrogram [(B,) freqs, frames] (stft's return_complex=True output) back to the
    signal [(B,) L] by overlap-add of the inverse-transformed, windowed frames divided by the overlap-added squared
    window. L is n_fft + hop_length * (frames - 1), less n_fft // 2 at each end when center, or length (cut, or
    zero-padded at the end with torch's warning). return_complex=True gives a complex64 signal (two-sided input)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"istft(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not isinstance(input, _complex.ComplexTensor):
        raise RuntimeError("istft requires a complex-valued input tensor matching the output from stft with "
                           "return_complex=True.")
    hop = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    pairs_ndim = input.ndim + 1  # torch counts the dims of the (real, imag) view
    if input.numel() == 0:
        raise RuntimeError("istft input tensor cannot be empty")
    if pairs_ndim not in (3, 4):
        raise RuntimeError(f"istft: expected a tensor with 3 or 4 dimensions, but got {pairs_ndim}")
    freqs, frames = input.shape[-2], input.shape[-1]
    onesided = freqs != n_fft if onesided is None else onesided
    if onesided and n_fft // 2 + 1 != freqs:
        raise RuntimeError("istft: expected the frequency dimension (3rd to the last) of the input tensor to match "
                           f"n_fft / 2 + 1 when onesided=True, but got {freqs}")
    if not onesided and n_fft != freqs:
        raise RuntimeError("istft: expected the frequency dimension (3rd to the last) of the input tensor to match "
                           f"n_fft when onesided=False, but got {freqs}")
    if not 0 < hop <= win_length:
        raise RuntimeError("istft: expected 0 < hop_length <= win_length")
    if not 0 < win_length <= n_fft:
        raise RuntimeError("istft: expected 0 < win_length <= n_fft")
    if window is not None and (window.ndim != 1 or window.shape[0] != win_length):
        raise RuntimeError("istft: Invalid window shape. window has to be 1D and length of `win_length`")
    if window is None:
        warnings.warn(_NO_WINDOW_INVERSE, UserWarning, stacklevel=2)
    if return_complex and onesided:
        raise RuntimeError(_ONESIDED_COMPLEX)
    if not return_complex and window is not None and isinstance(window, _complex.ComplexTensor):
        raise RuntimeError("Complex windows are incompatible with return_complex=False")
    re, im = _parts(input)
    if input.ndim == 2:
        re, im = re.unsqueeze(0), im.unsqueeze(0)
    re, im = re.transpose(1, 2), im.transpose(1, 2)  # [B, frames, freqs]
    scale = n_fft ** -0.5 if normalized else 1.0 / n_fft
    y_re, y_im = _inverse(re, im, n_fft, onesided, scale, return_complex)
    w_re, w_im = _padded_window(window, win_length, n_fft, y_re)
    if w_re is None:
        w_re = y_re.new_ones(n_fft)
    y_re, y_im = _times(y_re, y_im, w_re, w_im)
    total = n_fft + hop * (frames - 1)
    index = _frame_index(frames, n_fft, hop, y_re.device)
    y_re, y_im = (None if part is None else _overlap_add(part, total, hop, index) for part in (y_re, y_im))
    e_re, e_im = _times(w_re, w_im, w_re, w_im)  # the window squared (complex windows: w^2, as torch's)
    e_re, e_im = (None if part is None else _overlap_add(part.expand(1, frames, n_fft), total, hop, index)
                  for part in (e_re, e_im))
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else (total - n_fft // 2 if center else total)
    stop = min(end, total)
    y_re, y_im, e_re, e_im = (None if part is None else part[:, start:stop] for part in (y_re, y_im, e_re, e_im))
    magnitude = e_re.abs() if e_im is None else (e_re * e_re + e_im * e_im).sqrt()
    if magnitude.numel() and bool((magnitude.min() < 1e-11).item()):
        raise RuntimeError("istft: window overlap add min: 1")
    if e_im is None:
        y_re, y_im = y_re / e_re, (None if y_im is None else y_im / e_re)
    else:  # y / e = y conj(e) / |e|^2
        y_re, y_im = _times(y_re, y_im, e_re, -e_im)
        y_re, y_im = y_re / (magnitude * magnitude), y_im / (magnitude * magnitude)
    if end > total:
        warnings.warn("The length of signal is shorter than the length parameter. Result is being padded with zeros "
                      "in the tail. Please check your center and hop_length settings.", UserWarning, stacklevel=2)
        y_re, y_im = (None if part is None else pad(part, (0, end - total)) for part in (y_re, y_im))
    if input.ndim == 2:
        y_re, y_im = y_re.squeeze(0), (None if y_im is None else y_im.squeeze(0))
    return _as_output(stack([y_re, y_im], -1), True) if return_complex else y_re
