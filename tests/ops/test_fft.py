"""torch.fft against PyTorch: values, shapes, dtypes, norms, sizes, errors and gradients of every transform, on
real and complex64 inputs, fftfreq / rfftfreq, fftshift of a complex spectrum, out=, and a transform with its
gradient on WebGPU."""

import warnings

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES, assert_opinfo_entries_pass

ONE_DIM = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
TWO_DIM = ["fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2"]
N_DIM = ["fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn"]
REAL_ONLY = {"rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn"}
RNG = np.random.default_rng(0)
REAL = RNG.standard_normal((3, 4, 6)).astype(np.float32)
COMPLEX = (RNG.standard_normal((3, 4, 6)) + 1j * RNG.standard_normal((3, 4, 6))).astype(np.complex64)

SIZES = {  # per family: keyword arguments giving sizes and dims, trims and zero-pads among them
    "one": [{}, {"n": 5}, {"n": 9}, {"n": 3, "dim": 0}, {"dim": 1}],
    "two": [{}, {"s": (7, 3)}, {"dim": (0, 2)}, {"s": (2, 8), "dim": (2, 1)}, {"s": (-1, 5)}],
    "n": [{}, {"s": (3, 8)}, {"dim": (2, 0)}, {"s": (5,), "dim": (1,)}, {"s": (2, 3, 4)}, {"dim": -1}],
}


def _family(name):
    return "one" if name in ONE_DIM else "two" if name in TWO_DIM else "n"


def _both(name, array, **kwargs):
    """(torch's result, webgrad's) of torch.fft.<name>(array, **kwargs)."""
    expected = getattr(torch.fft, name)(torch.from_numpy(array), **kwargs)
    got = getattr(wg.fft, name)(wg.tensor(array), **kwargs)
    return expected, got


def _assert_same(expected, got, atol=2e-4):
    assert tuple(got.shape) == tuple(expected.shape)
    assert got.dtype.name == str(expected.dtype).split(".")[-1]
    np.testing.assert_allclose(got.numpy(), expected.resolve_conj().numpy(), rtol=2e-4, atol=atol)


@pytest.mark.parametrize("name", ONE_DIM + TWO_DIM + N_DIM)
@pytest.mark.parametrize("norm", [None, "backward", "forward", "ortho"])
def test_values_shapes_and_dtypes_match_torch(name, norm):
    for array in (REAL, COMPLEX):
        if name in REAL_ONLY and array is COMPLEX:
            continue
        for kwargs in SIZES[_family(name)]:
            _assert_same(*_both(name, array, norm=norm, **kwargs))


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "hfft", "ifftn"])
def test_integer_input_is_float32_and_float64_input_of_a_real_result_stays_float64(name):
    _assert_same(*_both(name, np.arange(12).reshape(3, 4)))
    if name in ("irfft", "hfft"):
        _assert_same(*_both(name, REAL.astype(np.float64)))


def test_complex_results_from_float64_need_complex128_which_webgrad_lacks():
    with pytest.raises(TypeError, match="complex128"):
        wg.fft.fft(wg.tensor(REAL.astype(np.float64)))


def test_zero_dim_and_no_dim():
    expected, got = _both("fftn", np.array(2.5, dtype=np.float32))
    _assert_same(expected, got)
    _assert_same(*_both("fftn", REAL, dim=()))


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the exception itself is what is compared)
        return type(e), str(e)
    raise AssertionError("no error raised")


@pytest.mark.parametrize("call", [
    lambda fft, x, z: fft.fft(x, n=0),
    lambda fft, x, z: fft.irfft(x[..., :1]),
    lambda fft, x, z: fft.irfft(x, n=-2),
    lambda fft, x, z: fft.fft(x, dim=3),
    lambda fft, x, z: fft.fftn(x, s=(3,), dim=(0, 1)),
    lambda fft, x, z: fft.fftn(x, dim=(0, 0)),
    lambda fft, x, z: fft.fftn(x, s=(1, 2, 3, 4)),
    lambda fft, x, z: fft.fft(x, norm="bad"),
    lambda fft, x, z: fft.rfft(z),
    lambda fft, x, z: fft.ihfft(z),
    lambda fft, x, z: fft.rfft2(z),
    lambda fft, x, z: fft.ihfftn(z),
    lambda fft, x, z: fft.rfftn(x, dim=()),
    lambda fft, x, z: fft.irfftn(x, dim=()),
    lambda fft, x, z: fft.rfft(x, dim=(0,)),
    lambda fft, x, z: fft.fft(x[0, 0, 0]),
    lambda fft, x, z: fft.fft(x.half()),
    lambda fft, x, z: fft.fft(x, out=fft.irfft(x)),
    lambda fft, x, z: fft.irfft(x, out=fft.fft(x)),
], ids=lambda call: "")
def test_errors_match_torch(call):
    t = _error(lambda: call(torch.fft, torch.from_numpy(REAL), torch.from_numpy(COMPLEX)))
    w = _error(lambda: call(wg.fft, wg.tensor(REAL), wg.tensor(COMPLEX)))
    assert w == t


def _grad(lib, name, array, reduce, **kwargs):
    leaf = lib.tensor(array, requires_grad=True)
    reduce(getattr(lib.fft, name)(leaf, **kwargs)).backward()
    return leaf.grad.resolve_conj().numpy() if lib is torch else leaf.grad.numpy()


def _weighted(y):
    """A real loss reading a result's every part with its own weight: its gradient tells the parts apart."""
    parts = [y.real, y.imag] if y.is_complex() else [y]
    total = 0
    for i, part in enumerate(parts):
        weights = (part.detach() * 0 + 1).cumsum(-1).sin() * (i + 1)
        total = total + (part * weights).sum() + (part * part).sum()
    return total


@pytest.mark.parametrize("name", ONE_DIM + TWO_DIM + N_DIM)
@pytest.mark.parametrize("reduce", [_weighted, lambda y: y.abs().sum()], ids=["weighted-parts", "abs"])
def test_gradients_match_torch(name, reduce):
    """The gradients of real<->complex transforms follow torch's conventions (irfft's doubled bins, rfft's real
    part of the adjoint); a complex leaf's .grad is dL/d(re) + i dL/d(im)."""
    for array in (REAL[0], COMPLEX[0]) if name not in REAL_ONLY else (REAL[0],):
        for kwargs in ({}, {"norm": "ortho"}, {"n": 5} if _family(name) == "one" else {"s": (3, 5)}):
            expected = _grad(torch, name, array, reduce, **kwargs)
            np.testing.assert_allclose(_grad(wg, name, array, reduce, **kwargs), expected, rtol=1e-3, atol=1e-3)


def test_round_trips():
    x = wg.tensor(REAL)
    np.testing.assert_allclose(wg.fft.irfft(wg.fft.rfft(x), n=6).numpy(), REAL, atol=1e-5)
    np.testing.assert_allclose(wg.fft.ifftn(wg.fft.fftn(x)).real.numpy(), REAL, atol=1e-5)
    np.testing.assert_allclose(wg.fft.hfft(wg.fft.ihfft(x), n=6).numpy(), REAL, atol=1e-5)


def test_out_is_written_and_resized_as_torch():
    x = wg.tensor(REAL)
    out = wg.zeros(3, 4, 6, dtype=wg.complex64)
    assert wg.fft.fft(x, out=out) is out
    _assert_same(torch.fft.fft(torch.from_numpy(REAL)), out)
    empty = wg.zeros(0)
    assert wg.fft.irfft(x, out=empty) is empty
    _assert_same(torch.fft.irfft(torch.from_numpy(REAL)), empty)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wrong = wg.zeros(2, dtype=wg.complex64)
        wg.fft.rfft(x, out=wrong)
    assert tuple(wrong.shape) == (3, 4, 4) and any("resized" in str(w.message) for w in caught)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        wg.fft.fft(wg.tensor(REAL, requires_grad=True), out=out)


@pytest.mark.parametrize("n, d", [(1, 1.0), (5, 1.0), (6, 0.5), (8, 2.0)])
def test_fftfreq_and_rfftfreq(n, d):
    for name in ("fftfreq", "rfftfreq"):
        _assert_same(getattr(torch.fft, name)(n, d), getattr(wg.fft, name)(n, d), atol=1e-6)
    _assert_same(torch.fft.fftfreq(n, dtype=torch.float64), wg.fft.fftfreq(n, dtype=wg.float64), atol=1e-12)
    assert wg.fft.rfftfreq(n, requires_grad=True).requires_grad


def test_fftshift_of_a_complex_spectrum():
    spectrum_t = torch.fft.fft2(torch.from_numpy(REAL))
    spectrum_w = wg.fft.fft2(wg.tensor(REAL))
    _assert_same(torch.fft.fftshift(spectrum_t, dim=(-2, -1)), wg.fft.fftshift(spectrum_w, dim=(-2, -1)))
    _assert_same(torch.fft.ifftshift(spectrum_t), wg.fft.ifftshift(spectrum_w))


def test_opinfo_entries_pass():
    """PyTorch's own samples of every transform (values and gradients) through webgrad.testing.opinfo."""
    assert_opinfo_entries_pass([f"fft.{name}" for name in ONE_DIM + TWO_DIM + N_DIM], "cpu")


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
def test_a_transform_and_its_gradient_on_webgpu():
    leaf_t = torch.tensor(COMPLEX[0], requires_grad=True)
    torch.fft.irfft2(torch.fft.fft(leaf_t), s=(4, 6)).pow(2).sum().backward()
    leaf = wg.tensor(COMPLEX[0], device="webgpu", requires_grad=True)
    y = wg.fft.irfft2(wg.fft.fft(leaf), s=(4, 6))
    y.pow(2).sum().backward()
    assert y.device.type == "webgpu"
    np.testing.assert_allclose(y.detach().numpy(), torch.fft.irfft2(torch.fft.fft(leaf_t), s=(4, 6)).detach().numpy(),
                               rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(leaf.grad.numpy(), leaf_t.grad.resolve_conj().numpy(), rtol=1e-3, atol=1e-2)
