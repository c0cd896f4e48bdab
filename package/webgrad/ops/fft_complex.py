"""torch.fft's transforms on complex64 (webgrad._complex): fftn and ifftn, rfftn and ihfftn (real input, one-sided
complex result), irfftn and hfftn (complex or real input, real result), with the one- and two-dim cases the public
namespace (webgrad/fft.py) makes of them, and fftfreq / rfftfreq.

A complex tensor is its (real, imag) float32 pair, so every transform is a sequence of real products with cosine
and sine matrices (ops/fft_real.py), one dim at a time, and its gradient comes by composition: for a real loss it
is PyTorch's (a complex input's .grad is dL/d(re) + i dL/d(im); a real-to-complex transform's gradient is the real
part of the adjoint, a complex-to-real one doubles the bins that stand for two, as PyTorch's fft_c2r_backward).
Inputs: complex64, or a real tensor (integers and bool as float32; float64 would need complex128, which webgrad
lacks, except where the result is real: irfft and hfft of a float64 input give float64, as torch's).
"""

import math
import warnings

from .. import _complex, dtypes
from .._autograd import is_grad_enabled
from .._tensor import Tensor, arange
from .fft_real import _along, _matrices, _plan, _resize, _scale, c2c, real_inverse

__all__ = ["fftfreq", "fftn", "hfftn", "ifftn", "ihfftn", "irfftn", "rfftfreq", "rfftn"]


def _pairs(input, op, real_only=False, complex_result=True):
    """input's (re, im) float pair (im None for a real input), checked as torch checks op's input."""
    if not isinstance(input, Tensor):
        raise TypeError(f"fft_{op}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if isinstance(input, _complex.ComplexTensor):
        if real_only and op in ("rfft", "ihfft"):
            raise RuntimeError(f"{op} expects a real input tensor, but got ComplexFloat")
        if real_only and op.startswith("rfft"):
            raise RuntimeError("rfftn expects a real-valued input tensor, but got ComplexFloat")
        if real_only:
            raise RuntimeError("Only supports floating-point dtypes, but found: ComplexFloat")
        return input.real, input.imag
    dtype = input.dtype
    if dtype in (dtypes.float16, dtypes.bfloat16):
        raise RuntimeError(f"Unsupported dtype {_complex._torch_name(dtype)}")
    if dtype is dtypes.float64 and complex_result:
        raise TypeError(dtypes.COMPLEX128_ERROR)
    return (input if dtype.is_floating else input.to(dtypes.float32)), None


def _complex_result(re, im):
    return _complex._pair(re, im if im is not None else re.new_zeros(tuple(re.shape)))


def _r2c(re, d, n, norm, forward):
    """The one-sided transform (n // 2 + 1 bins) of the real re along dim d, trimmed or zero-padded to n."""
    re = _resize(re, d, n)
    cos, sin = _matrices(n, n // 2 + 1, _scale(norm, n, not forward), re, period=n)
    return _along(re, d, cos), (-1.0 if forward else 1.0) * _along(re, d, sin)


def fftn(input, s=None, dim=None, norm=None, *, out=None, _forward=True, _op="fftn"):
    """The n-dim discrete Fourier transform (complex64), over dim (all dims when dim and s are None)."""
    re, im = _pairs(input, _op)
    dims, sizes = _plan(re, s, dim, _op, halved=False)
    _scale(norm, 1, True)  # the norm checked where no dim is transformed too
    for d, n in zip(dims, sizes):
        re, im = c2c(re, im, d, n, norm, _forward)
    return write_out(_complex_result(re, im), out, _op)


def ifftn(input, s=None, dim=None, norm=None, *, out=None, _op="ifftn"):
    """The n-dim inverse discrete Fourier transform (complex64)."""
    return fftn(input, s, dim, norm, out=out, _forward=False, _op=_op)


def rfftn(input, s=None, dim=None, norm=None, *, out=None, _forward=True, _op="rfftn"):
    """The n-dim transform of a real input: the last transformed dim keeps its n // 2 + 1 non-negative
    frequencies (the others are their conjugates)."""
    re, _ = _pairs(input, _op, real_only=True)
    dims, sizes = _plan(re, s, dim, _op, halved=False)
    for d, n in zip(dims[:-1], sizes[:-1]):
        re = _resize(re, d, n)
    re, im = _r2c(re, dims[-1], sizes[-1], norm, _forward)
    for d, n in zip(dims[:-1], sizes[:-1]):
        re, im = c2c(re, im, d, n, norm, _forward)
    return write_out(_complex_result(re, im), out, _op)


def ihfftn(input, s=None, dim=None, norm=None, *, out=None, _op="ihfftn"):
    """The n-dim inverse transform of a real input, one-sided on the last transformed dim (hfftn's inverse)."""
    return rfftn(input, s, dim, norm, out=out, _forward=False, _op=_op)


def irfftn(input, s=None, dim=None, norm=None, *, out=None, _op="irfftn"):
    """rfftn's inverse: a real result from a one-sided spectrum (the last dim's size 2 * (m - 1) by default)."""
    re, im = _pairs(input, _op, complex_result=False)
    return write_out(real_inverse(re, im, s, dim, norm, False, _op), out, _op)


def hfftn(input, s=None, dim=None, norm=None, *, out=None, _op="hfftn"):
    """The transform of a Hermitian-symmetric signal given by its one-sided half: a real result."""
    re, im = _pairs(input, _op, complex_result=False)
    return write_out(real_inverse(re, im, s, dim, norm, True, _op), out, _op)


def write_out(result, out, op):
    """result, or result copied into out (resized to it, with torch's warning where out held elements), as
    torch.fft's out= argument."""
    if out is None:
        return result
    if is_grad_enabled() and (result.requires_grad or out.requires_grad):
        raise RuntimeError(f"{op}(): functions with out=... arguments don't support automatic differentiation, but "
                           "one of the arguments requires grad.")
    is_complex = isinstance(result, _complex.ComplexTensor)
    if is_complex != isinstance(out, _complex.ComplexTensor):
        kind = "complex" if is_complex else "floating point"
        got = "ComplexFloat" if isinstance(out, _complex.ComplexTensor) else _complex._torch_name(out.dtype)
        raise RuntimeError(f"{op} expects a {kind} output tensor, but got {got}")
    if tuple(out.shape) != tuple(result.shape):
        if out.numel():
            warnings.warn(f"An output with one or more elements was resized since it had shape {list(out.shape)}, "
                          "which does not match the required output shape "
                          f"{list(result.shape)}. This behavior is deprecated.", UserWarning, stacklevel=3)
        (out._r.resize_(*result.shape, 2) if is_complex else out.resize_(*result.shape))
    return out.copy_(result)


def _frequencies(k, n, d, requires_grad, out):
    result = k / (n * d)
    if requires_grad:
        result.requires_grad_(True)
    return result if out is None else write_out(result, out, "fftfreq")


def _float_dtype(dtype):
    dtype = dtypes.float32 if dtype is None else dtypes.to_dtype(dtype)
    if not dtype.is_floating:
        raise RuntimeError(f"fftfreq requires a floating point dtype, but got {dtype.name}")
    return dtype


def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point transform with sample spacing d: [0, 1, ..., -(n // 2), ..., -1] /
    (d n)."""
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    dtype = _float_dtype(dtype)
    k = arange(n, dtype=dtype, device=device)
    k = k - n * (k >= math.ceil(n / 2)).to(dtype)
    return _frequencies(k, n, d, requires_grad, out)


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of rfft's n // 2 + 1 bins: [0, 1, ..., n // 2] / (d n)."""
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    return _frequencies(arange(n // 2 + 1, dtype=_float_dtype(dtype), device=device), n, d, requires_grad, out)
