"""Names PyTorch scripts call that are other names of webgrad's ops or settings, against PyTorch's: the NumPy-style
aliases (torch.absolute, x.arctan2(y), ...), the torch.<op>_ in-place functions, the deprecated torch.range and
torch.set_default_tensor_type, torch.cosine_similarity / pairwise_distance / pdist, and the autocast queries."""

import warnings

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES

RNG = np.random.default_rng(0)


def _np(x):
    return np.asarray(x.detach().cpu().tolist(), dtype=np.float64).reshape(tuple(x.shape)) \
        if isinstance(x, wg.Tensor) else x.detach().numpy().astype(np.float64)


UNARY_ALIASES = ["absolute", "negative", "fix", "arccos", "arcsin", "arctan", "arctanh", "arcsinh"]


@pytest.mark.parametrize("device", DEVICES)
def test_numpy_style_aliases_match_torch(device):
    a = RNG.uniform(-0.9, 0.9, (3, 4)).astype(np.float32)
    b = RNG.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    wa, wb, ta, tb = wg.tensor(a, device=device), wg.tensor(b, device=device), torch.tensor(a), torch.tensor(b)
    for name in UNARY_ALIASES:
        for got, want in ((getattr(wg, name)(wa), getattr(torch, name)(ta)), (getattr(wa, name)(), getattr(ta, name)()),
                          (getattr(wa.clone(), name + "_")(), getattr(ta.clone(), name + "_")())):
            np.testing.assert_allclose(_np(got), _np(want), rtol=1e-5, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(_np(wg.arccosh(wb + 1)), _np(torch.arccosh(tb + 1)), rtol=1e-5)
    for name in ("multiply", "subtract", "arctan2"):
        np.testing.assert_allclose(_np(getattr(wg, name)(wa, wb)), _np(getattr(torch, name)(ta, tb)), rtol=1e-5,
                                   atol=1e-6, err_msg=name)
        np.testing.assert_allclose(_np(getattr(wa, name)(wb)), _np(getattr(ta, name)(tb)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(wg.subtract(wa, wb, alpha=2)), _np(torch.subtract(ta, tb, alpha=2)), rtol=1e-5)
    x = wg.tensor(a, device=device, requires_grad=True)  # the aliases are the ops: their gradients too
    wg.arctan2(x, wb).sum().backward()
    xt = torch.tensor(a, requires_grad=True)
    torch.arctan2(xt, tb).sum().backward()
    np.testing.assert_allclose(_np(x.grad), _np(xt.grad), rtol=1e-5, atol=1e-6)


IN_PLACE = ["abs", "sigmoid", "tanh", "exp", "neg", "sqrt", "relu", "floor", "round", "reciprocal", "square", "sin",
            "log1p", "trunc", "arctan", "fix"]


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_functions_match_torch(device):
    a = RNG.uniform(0.1, 2.0, (5,)).astype(np.float32)
    for name in IN_PLACE:
        w, t = wg.tensor(a, device=device), torch.tensor(a)
        got = getattr(wg, name + "_")(w)
        getattr(torch, name + "_")(t)
        assert got is w
        np.testing.assert_allclose(_np(w), _np(t), rtol=1e-5, atol=1e-6, err_msg=name)
    w, t = wg.tensor(a, device=device), torch.tensor(a)
    wg.clamp_(w, 0.5, 1.5), torch.clamp_(t, 0.5, 1.5)
    np.testing.assert_allclose(_np(w), _np(t))
    assert not hasattr(wg, "absolute_") and not hasattr(torch, "absolute_")  # PyTorch has only the method


@pytest.mark.parametrize("args,kwargs", [((1, 4), {}), ((0, 1, 0.3), {}), ((1, 4), {"dtype": "int64"}),
                                         ((1, 0.05, -0.2), {}), ((0, 0), {}), ((0.5, 3), {}), ((0, 1, 0.1), {})])
def test_range_matches_torch(args, kwargs):
    kw_w = {k: getattr(wg, v) for k, v in kwargs.items()}
    kw_t = {k: getattr(torch, v) for k, v in kwargs.items()}
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        got = wg.range(*args, **kw_w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.range(*args, **kw_t)
    assert tuple(got.shape) == tuple(want.shape) and got.dtype.name == str(want.dtype).removeprefix("torch.")
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-6)


def test_range_errors_match_torch():
    for lib in (wg, torch):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(RuntimeError, match="step must be nonzero"):
                lib.range(0, 1, 0)
            with pytest.raises(RuntimeError, match="inconsistent with step sign"):
                lib.range(0, 5, -1)


def test_set_default_tensor_type_matches_torch():
    try:
        for lib in (wg, torch):
            with pytest.warns(UserWarning, match="deprecated as of PyTorch 2.1"):
                lib.set_default_tensor_type("torch.DoubleTensor")
            assert lib.get_default_dtype() is lib.float64 and lib.zeros(1).dtype is lib.float64
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                lib.set_default_tensor_type(lib.FloatTensor)
                assert lib.get_default_dtype() is lib.float32
                with pytest.raises(TypeError, match="only floating-point types"):
                    lib.set_default_tensor_type(lib.IntTensor)
                with pytest.raises(TypeError, match="not available"):
                    lib.set_default_tensor_type("torch.cuda.FloatTensor")
    finally:
        wg.set_default_dtype(wg.float32)
        torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_distance_functions_at_top_level_match_torch(device):
    a, b = RNG.standard_normal((4, 3)).astype(np.float32), RNG.standard_normal((4, 3)).astype(np.float32)
    wa, wb, ta, tb = wg.tensor(a, device=device), wg.tensor(b, device=device), torch.tensor(a), torch.tensor(b)
    pairs = [(wg.cosine_similarity(wa, wb), torch.cosine_similarity(ta, tb)),
             (wg.cosine_similarity(wa, wb, dim=0), torch.cosine_similarity(ta, tb, dim=0)),
             (wg.pairwise_distance(wa, wb, p=1.0), torch.pairwise_distance(ta, tb, p=1.0)),
             (wg.pdist(wa), torch.pdist(ta))]
    for got, want in pairs:
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-5, atol=1e-6)


def test_autocast_queries():
    assert wg.is_autocast_enabled() is False and wg.is_autocast_enabled("cpu") is False
    with wg.autocast("cpu"):
        assert wg.is_autocast_enabled("cpu") and not wg.is_autocast_enabled()
        with pytest.warns(DeprecationWarning, match="is_autocast_enabled\\('cpu'\\)"):
            assert wg.is_autocast_cpu_enabled()
        assert wg.get_autocast_dtype("cpu") is wg.bfloat16  # PyTorch's CPU default
    with pytest.warns(DeprecationWarning, match="get_autocast_dtype\\('cuda'\\)"):
        assert wg.get_autocast_gpu_dtype() is wg.float16 is torch_like_gpu_default()
    with pytest.warns(DeprecationWarning):
        assert wg.get_autocast_cpu_dtype() is wg.bfloat16


def torch_like_gpu_default():
    """PyTorch's default autocast dtype on the GPU, as a webgrad dtype."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(wg, str(torch.get_autocast_gpu_dtype()).removeprefix("torch."))
