"""torch.stft / torch.istft and the window functions against PyTorch: values, shapes, dtypes, warnings and errors;
centre padding modes, win_length < n_fft, normalized, onesided, complex signals and windows, batched input; the
gradient through stft -> abs -> sum; stft -> istft round trips; and a spectrogram with its gradient on WebGPU."""

import warnings

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES, assert_opinfo_entries_pass

RNG = np.random.default_rng(0)
SIGNAL = RNG.standard_normal((2, 120)).astype(np.float32)
COMPLEX_SIGNAL = (SIGNAL[0] + 1j * SIGNAL[1]).astype(np.complex64)
WINDOWS = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]


@pytest.fixture(autouse=True)
def _quiet():
    """Both libraries warn about a missing window and about return_complex=False; the tests that care look."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def _pairs(result):
    """A result as NumPy (real, imag) pairs where it is complex."""
    result = result.detach()
    if isinstance(result, torch.Tensor):
        return torch.view_as_real(result).numpy() if result.is_complex() else result.numpy()
    return wg.view_as_real(result).numpy() if result.is_complex() else result.numpy()


def _call(lib, fn, array, *args, window=None, **kwargs):
    """lib.<fn>(lib.tensor(array), *args, window=lib.<window>(...), **kwargs); window is (name, length) or None."""
    if window is not None:
        kwargs["window"] = getattr(lib, window[0])(window[1])
    return getattr(lib, fn)(lib.tensor(array), *args, **kwargs)


@pytest.mark.parametrize("name", WINDOWS)
@pytest.mark.parametrize("length", [0, 1, 2, 7, 16])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows_match_torch(name, length, periodic):
    expected = getattr(torch, name)(length, periodic)
    got = getattr(wg, name)(length, periodic)
    assert tuple(got.shape) == tuple(expected.shape) and got.dtype is wg.float32
    np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-6)


def test_window_arguments_match_torch():
    np.testing.assert_allclose(wg.hamming_window(9, False, 0.5, 0.3).numpy(),
                               torch.hamming_window(9, False, 0.5, 0.3).numpy(), atol=1e-6)
    np.testing.assert_allclose(wg.kaiser_window(9, True, 5.0, dtype=wg.float64).numpy(),
                               torch.kaiser_window(9, True, 5.0, dtype=torch.float64).numpy(), atol=1e-12)
    assert wg.hann_window(4, dtype=wg.float64).dtype is wg.float64
    assert wg.blackman_window(4, requires_grad=True).requires_grad
    with pytest.raises(RuntimeError, match="requires non-negative window_length, got window_length=-1"):
        wg.hann_window(-1)
    with pytest.raises(RuntimeError, match="bartlett_window expects floating point dtypes"):
        wg.bartlett_window(4, dtype=wg.int64)
    with pytest.raises(RuntimeError, match="bartlett_window expects floating point dtypes"):
        torch.bartlett_window(4, dtype=torch.int64)
    with pytest.raises(TypeError, match="window_length"):
        wg.hann_window(4.0)


STFT_CASES = [
    {},
    {"window": ("hann_window", 32)},
    {"window": ("hamming_window", 20), "win_length": 20},
    {"win_length": 11, "hop_length": 5},
    {"window": ("hann_window", 32), "normalized": True, "onesided": False},
    {"center": False, "hop_length": 7},
    {"center": False, "win_length": 20, "window": ("hann_window", 20), "align_to_window": True},
    {"pad_mode": "constant"}, {"pad_mode": "replicate"}, {"pad_mode": "circular"},
]


@pytest.mark.parametrize("kwargs", STFT_CASES, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()) or "defaults")
@pytest.mark.parametrize("batched", [False, True])
def test_stft_matches_torch(kwargs, batched):
    signal = SIGNAL if batched else SIGNAL[0]
    expected = _call(torch, "stft", signal, 32, return_complex=True, **kwargs)
    got = _call(wg, "stft", signal, 32, return_complex=True, **kwargs)
    assert got.dtype is wg.complex64 and tuple(got.shape) == tuple(expected.shape)
    np.testing.assert_allclose(_pairs(got), _pairs(expected), atol=2e-5, rtol=1e-5)


def test_stft_real_layout_complex_input_and_complex_window():
    expected = _call(torch, "stft", SIGNAL, 16, return_complex=False, window=("hann_window", 16))
    got = _call(wg, "stft", SIGNAL, 16, return_complex=False, window=("hann_window", 16))
    assert got.dtype is wg.float32 and tuple(got.shape) == tuple(expected.shape) == (2, 9, 31, 2)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=2e-5)
    expected = torch.stft(torch.from_numpy(COMPLEX_SIGNAL), 16, hop_length=3, window=torch.hann_window(16))
    got = wg.stft(wg.tensor(COMPLEX_SIGNAL), 16, hop_length=3, window=wg.hann_window(16))
    assert tuple(got.shape) == tuple(expected.shape) == (16, 41)  # complex input: two-sided, complex by default
    np.testing.assert_allclose(_pairs(got), _pairs(expected), atol=2e-5)
    window = (np.hanning(16) * np.exp(0.3j * np.arange(16))).astype(np.complex64)
    expected = torch.stft(torch.from_numpy(SIGNAL[0]), 16, window=torch.from_numpy(window))
    got = wg.stft(wg.tensor(SIGNAL[0]), 16, window=wg.tensor(window))
    np.testing.assert_allclose(_pairs(got), _pairs(expected), atol=2e-5)
    expected = torch.stft(torch.from_numpy(SIGNAL[0]).double(), 16, return_complex=False)
    got = wg.stft(wg.tensor(SIGNAL[0], dtype=wg.float64), 16, return_complex=False)
    assert got.dtype is wg.float64
    np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-10)
    np.testing.assert_allclose(_pairs(wg.tensor(SIGNAL).stft(16, return_complex=True)),
                               _pairs(torch.from_numpy(SIGNAL).stft(16, return_complex=True)), atol=2e-5)


def test_stft_warns_as_torch():
    for kwargs, message in (({"return_complex": True}, "A window was not provided"),
                            ({"return_complex": False, "window": wg.ones(16)}, "return_complex=False is deprecated")):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            wg.stft(wg.tensor(SIGNAL), 16, **kwargs)
        assert any(message in str(w.message) for w in caught), [str(w.message) for w in caught]


STFT_ERRORS = [
    ((SIGNAL, 16), {}, RuntimeError, "requires the return_complex parameter be given for real inputs"),
    ((SIGNAL[None], 16), {"return_complex": True}, RuntimeError, "expected a 1D or 2D tensor"),
    ((SIGNAL, 200), {"return_complex": True, "center": False}, RuntimeError, "expected 0 < n_fft < 120"),
    ((SIGNAL, 16), {"return_complex": True, "hop_length": 0}, RuntimeError, "expected hop_length > 0"),
    ((SIGNAL, 16), {"return_complex": True, "win_length": 20}, RuntimeError, "expected 0 < win_length <= n_fft"),
    ((SIGNAL, 16), {"return_complex": True, "window": ("ones", 10)}, RuntimeError,
     "expected a 1D window tensor of size equal to win_length=16"),
    ((SIGNAL, 16), {"return_complex": True, "pad_mode": "zeros"}, NotImplementedError, "zeros"),
    ((SIGNAL.astype(np.int32), 16), {"return_complex": True}, RuntimeError, "floating point or complex"),
    ((COMPLEX_SIGNAL, 16), {"onesided": True}, RuntimeError, "Cannot have onesided output if window or input is"),
    ((SIGNAL, 16), {"return_complex": True, "align_to_window": True}, RuntimeError, "align_to_window should only"),
]


@pytest.mark.parametrize("args, kwargs, error, message", STFT_ERRORS)
def test_stft_errors_match_torch(args, kwargs, error, message):
    for lib in (torch, wg):
        with pytest.raises(error, match=message):
            _call(lib, "stft", *args, **kwargs)


def test_stft_gradient_through_abs_matches_torch():
    def grads(lib):
        signal = lib.tensor(SIGNAL, requires_grad=True)
        window = lib.tensor(np.hanning(24).astype(np.float32), requires_grad=True)
        lib.stft(signal, 32, hop_length=6, win_length=24, window=window, return_complex=True).abs().sum().backward()
        return signal.grad.numpy(), window.grad.numpy()
    for got, expected in zip(grads(wg), grads(torch)):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_istft_and_complex_stft_gradients_match_torch():
    """Through istft to the spectrogram and the window (both in its overlap-add and its envelope), and through the
    stft of a complex signal; a complex leaf's .grad is dL/d(re) + i dL/d(im), as torch's."""
    spectrum = (RNG.standard_normal((9, 20)) + 1j * RNG.standard_normal((9, 20))).astype(np.complex64)
    window = np.hanning(16).astype(np.float32) + 0.1

    def grads(lib):
        leaf, w = lib.tensor(spectrum, requires_grad=True), lib.tensor(window, requires_grad=True)
        y = lib.istft(leaf, 16, window=w, length=70)
        (y * lib.arange(70, dtype=lib.float32).sin()).sum().backward()
        signal = lib.tensor(COMPLEX_SIGNAL, requires_grad=True)
        lib.stft(signal, 16, hop_length=5, window=w.detach()).abs().sum().backward()
        return _pairs(leaf.grad.resolve_conj() if lib is torch else leaf.grad), w.grad.numpy(), _pairs(
            signal.grad.resolve_conj() if lib is torch else signal.grad)
    for got, expected in zip(grads(wg), grads(torch)):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


ISTFT_CASES = [
    {"window": ("hann_window", 32)},
    {},
    {"window": ("hann_window", 32), "length": 100},
    {"window": ("hann_window", 32), "length": 150},
    {"window": ("hamming_window", 20), "win_length": 20, "hop_length": 5},
    {"window": ("hann_window", 32), "normalized": True},
    {"window": ("hann_window", 32), "onesided": False},
    {"window": ("hann_window", 32), "onesided": False, "return_complex": True},
]


@pytest.mark.parametrize("kwargs", ISTFT_CASES, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()) or "defaults")
@pytest.mark.parametrize("batched", [False, True])
def test_istft_matches_torch_and_inverts_stft(kwargs, batched):
    signal = SIGNAL if batched else SIGNAL[0]
    keys = ("window", "win_length", "hop_length", "normalized", "onesided")
    forward = {k: v for k, v in kwargs.items() if k in keys}
    results = []
    for lib in (torch, wg):
        spectrum = _call(lib, "stft", signal, 32, return_complex=True, **forward)
        window = getattr(lib, kwargs["window"][0])(kwargs["window"][1]) if "window" in kwargs else None
        results.append(lib.istft(spectrum, 32, **{**kwargs, "window": window}))
    expected, got = results
    assert tuple(got.shape) == tuple(expected.shape) and got.is_complex() == expected.is_complex()
    np.testing.assert_allclose(_pairs(got), _pairs(expected), atol=2e-5)
    kept = min(signal.shape[-1], kwargs.get("length", signal.shape[-1]))
    back = _pairs(got)[..., :kept, 0] if got.is_complex() else _pairs(got)[..., :kept]
    np.testing.assert_allclose(back, signal[..., :kept], atol=2e-5)  # the round trip gives the signal back


def test_istft_of_a_complex_window_and_the_tensor_method():
    window = (np.hanning(16) * np.exp(0.3j * np.arange(16)) + 0.1).astype(np.complex64)
    results = []
    for lib in (torch, wg):
        w = lib.tensor(window)
        results.append(lib.stft(lib.tensor(COMPLEX_SIGNAL), 16, window=w).istft(16, window=w, return_complex=True))
    np.testing.assert_allclose(_pairs(results[1]), _pairs(results[0]), atol=2e-5)
    np.testing.assert_allclose(_pairs(results[1])[..., 0] + 1j * _pairs(results[1])[..., 1], COMPLEX_SIGNAL,
                               atol=2e-5)


def _spectrum(lib):
    return lib.stft(lib.tensor(SIGNAL[0]), 16, return_complex=True)


ISTFT_ERRORS = [
    (lambda lib: lib.istft(lib.view_as_real(_spectrum(lib)), 16), "requires a complex-valued input tensor"),
    (lambda lib: lib.istft(_spectrum(lib), 16, window=lib.zeros(16)), "window overlap add min"),
    (lambda lib: lib.istft(_spectrum(lib), 16, window=lib.hann_window(16), center=False), "window overlap add min"),
    (lambda lib: lib.istft(_spectrum(lib), 16, onesided=False),
     "to match n_fft when onesided=False, but got 9"),
    (lambda lib: lib.istft(_spectrum(lib), 18), "to match n_fft / 2 \\+ 1 when onesided=True, but got 9"),
    (lambda lib: lib.istft(_spectrum(lib)[None, None], 16), "expected a tensor with 3 or 4 dimensions, but got 5"),
    (lambda lib: lib.istft(_spectrum(lib), 16, hop_length=20), "expected 0 < hop_length <= win_length"),
    (lambda lib: lib.istft(_spectrum(lib), 16, win_length=20), "expected 0 < win_length <= n_fft"),
    (lambda lib: lib.istft(_spectrum(lib), 16, window=lib.ones(10)), "Invalid window shape"),
    (lambda lib: lib.istft(_spectrum(lib), 16, return_complex=True), "Cannot have onesided output"),
]


@pytest.mark.parametrize("call, message", ISTFT_ERRORS)
def test_istft_errors_match_torch(call, message):
    for lib in (torch, wg):
        with pytest.raises(RuntimeError, match=message):
            call(lib)


def test_istft_warns_when_length_pads():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = wg.istft(_spectrum(wg), 16, window=wg.ones(16), length=200)
    expected = torch.istft(_spectrum(torch), 16, window=torch.ones(16), length=200)
    np.testing.assert_allclose(out.numpy(), expected.numpy(), atol=2e-5)
    assert tuple(out.shape) == (200,) and not out.numpy()[128:].any()  # 16 + 4 * 30 - 8 samples, then zeros
    assert any("shorter than the length parameter" in str(w.message) for w in caught)


def test_opinfo_entry_passes():
    """PyTorch's own samples of stft (values and gradients) through webgrad.testing.opinfo."""
    assert_opinfo_entries_pass(["stft"], "cpu")


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
def test_a_spectrogram_its_gradient_and_inverse_on_webgpu():
    leaf_t = torch.tensor(SIGNAL, requires_grad=True)
    spectrum_t = torch.stft(leaf_t, 16, window=torch.hann_window(16), return_complex=True)
    spectrum_t.abs().sum().backward()
    leaf = wg.tensor(SIGNAL, device="webgpu", requires_grad=True)
    window = wg.hann_window(16, device="webgpu")
    spectrum = wg.stft(leaf, 16, window=window, return_complex=True)
    spectrum.abs().sum().backward()
    assert spectrum.device.type == "webgpu" and leaf.grad.device.type == "webgpu"
    np.testing.assert_allclose(_pairs(spectrum), _pairs(spectrum_t), atol=2e-5)
    np.testing.assert_allclose(leaf.grad.numpy(), leaf_t.grad.numpy(), rtol=1e-4, atol=1e-4)
    back = wg.istft(spectrum.detach(), 16, window=window, length=SIGNAL.shape[-1])
    assert back.device.type == "webgpu"
    np.testing.assert_allclose(back.numpy(), SIGNAL, atol=2e-5)
