"""affine_grid and grid_sample (nn/_grid_sample.py) against torch on every device: the grids of 2-D and 3-D
affine matrices, sampling in every mode x padding_mode x align_corners with grids that reach past [-1, 1],
forward values and the gradients of input, grid and theta; the errors and warnings; and the spatial-transformer
tutorial's pattern (localization net -> theta -> affine_grid -> grid_sample -> conv) trained two steps."""

import warnings

import numpy as np
import pytest
import webgrad as wg
import webgrad.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _close(got, ref, atol=1e-4, rtol=1e-4):
    got = got.detach().to("cpu").numpy()
    ref = ref.detach().numpy()
    assert got.shape == ref.shape, f"shape {got.shape}, torch {ref.shape}"
    np.testing.assert_allclose(got, ref, atol=atol, rtol=rtol)


def _pair(a, device):
    return (wg.tensor(a, device=device, requires_grad=True), torch.tensor(a, requires_grad=True))


def _parity(device, wg_fn, torch_fn, *arrays, atol=1e-4, seed=1):
    """Forward and every input's gradient, under a random cotangent."""
    pairs = [_pair(a, device) for a in arrays]
    got, ref = wg_fn(*[w for w, _ in pairs]), torch_fn(*[t for _, t in pairs])
    _close(got, ref, atol=atol)
    cot = np.random.default_rng(seed).standard_normal(tuple(ref.shape)).astype(np.float32)
    got.backward(wg.tensor(cot, device=device))
    ref.backward(torch.tensor(cot))
    for w, t in pairs:
        _close(w.grad, t.grad, atol=atol)


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 1, 3), (1, 2, 3, 4, 5), (2, 1, 2, 1, 3)],
                         ids=["2d", "2d-unit", "3d", "3d-unit"])
@pytest.mark.parametrize("align", [False, True])
def test_affine_grid_matches_torch(device, size, align):
    d = len(size) - 2
    theta = np.random.default_rng(0).standard_normal((size[0], d, d + 1)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unit-size warning under align_corners=True
        _parity(device, lambda t: F.affine_grid(t, size, align_corners=align),
                lambda t: TF.affine_grid(t, size, align_corners=align), theta)


MODES_4D = [(m, p, a) for m in ("bilinear", "nearest", "bicubic") for p in ("zeros", "border", "reflection")
            for a in (False, True)]


def _grid(shape, seed):
    # past the edges (|x| up to 3.5: reflection folds it more than once), and some exactly-inside points
    return (np.random.default_rng(seed).uniform(-1, 1, shape) * 3.5).astype(np.float32)


@pytest.mark.parametrize("mode,padding,align", MODES_4D, ids=[f"{m}-{p}-{'ac' if a else 'noac'}" for m, p, a in MODES_4D])
def test_grid_sample_2d_matches_torch(device, mode, padding, align):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    grid = _grid((2, 4, 7, 2), 1)
    _parity(device, lambda i, g: F.grid_sample(i, g, mode=mode, padding_mode=padding, align_corners=align),
            lambda i, g: TF.grid_sample(i, g, mode=mode, padding_mode=padding, align_corners=align), x, grid,
            atol=3e-4)


MODES_5D = [(m, p, a) for m in ("bilinear", "nearest") for p in ("zeros", "border", "reflection")
            for a in (False, True)]


@pytest.mark.parametrize("mode,padding,align", MODES_5D, ids=[f"{m}-{p}-{'ac' if a else 'noac'}" for m, p, a in MODES_5D])
def test_grid_sample_3d_matches_torch(device, mode, padding, align):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 2, 3, 4, 5)).astype(np.float32)
    grid = _grid((2, 2, 3, 4, 3), 3)
    _parity(device, lambda i, g: F.grid_sample(i, g, mode=mode, padding_mode=padding, align_corners=align),
            lambda i, g: TF.grid_sample(i, g, mode=mode, padding_mode=padding, align_corners=align), x, grid,
            atol=3e-4)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "reflection"])
def test_grid_sample_float64_on_cpu(mode, padding):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 2, 4, 3))
    grid = _grid((1, 3, 5, 2), 5).astype(np.float64)
    _parity("cpu", lambda i, g: F.grid_sample(i, g, mode=mode, padding_mode=padding, align_corners=False),
            lambda i, g: TF.grid_sample(i, g, mode=mode, padding_mode=padding, align_corners=False), x, grid,
            atol=1e-10)


def test_affine_grid_then_grid_sample_theta_gradient(device):
    """The repro of the tutorial's failure: theta's gradient through both functions."""
    theta = np.array([[[0.9, -0.2, 0.1], [0.3, 1.1, -0.2]]], dtype=np.float32)
    x = np.random.default_rng(6).standard_normal((1, 2, 4, 4)).astype(np.float32)

    def run(lib, t, i):
        g = lib.nn.functional.affine_grid(t, (1, 2, 3, 5), align_corners=False)
        return lib.nn.functional.grid_sample(i, g, align_corners=False)

    _parity(device, lambda t, i: run(wg, t, i), lambda t, i: run(torch, t, i), theta, x)


def _errors(fn_wg, fn_torch):
    with pytest.raises(Exception) as ref:
        fn_torch()
    with pytest.raises(type(ref.value)):
        fn_wg()


ERRORS = {
    "theta-int": lambda lib, x, g: lib.nn.functional.affine_grid(lib.ones(1, 2, 3, dtype=lib.int64), (1, 1, 2, 2),
                                                                 align_corners=False),
    "theta-shape": lambda lib, x, g: lib.nn.functional.affine_grid(lib.ones(1, 3, 3), (1, 1, 2, 2), align_corners=False),
    "size-3d": lambda lib, x, g: lib.nn.functional.affine_grid(lib.ones(1, 2, 3), (1, 1, 2), align_corners=False),
    "size-zero": lambda lib, x, g: lib.nn.functional.affine_grid(lib.ones(1, 2, 3), (1, 1, 0, 2), align_corners=False),
    "theta-batch": lambda lib, x, g: lib.nn.functional.affine_grid(lib.ones(2, 2, 3), (3, 1, 2, 2), align_corners=False),
    "mode": lambda lib, x, g: lib.nn.functional.grid_sample(x, g, mode="area", align_corners=False),
    "padding": lambda lib, x, g: lib.nn.functional.grid_sample(x, g, padding_mode="wrap", align_corners=False),
    "batch": lambda lib, x, g: lib.nn.functional.grid_sample(x, g[:1], align_corners=False),
    "last-dim": lambda lib, x, g: lib.nn.functional.grid_sample(x, lib.cat([g, g], -1), align_corners=False),
    "3d-input": lambda lib, x, g: lib.nn.functional.grid_sample(x[0], g[0, ..., :1], align_corners=False),
    "dtype": lambda lib, x, g: lib.nn.functional.grid_sample(x, g.double(), align_corners=False),
    "empty": lambda lib, x, g: lib.nn.functional.grid_sample(x[:, :, :0], g, align_corners=False),
    "bicubic-5d": lambda lib, x, g: lib.nn.functional.grid_sample(x.unsqueeze(2), lib.zeros(2, 1, 3, 3, 3),
                                                                  mode="bicubic", align_corners=False),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_match_torch(case):
    x = np.zeros((2, 1, 3, 3), np.float32)
    g = np.zeros((2, 3, 3, 2), np.float32)
    _errors(lambda: ERRORS[case](wg, wg.tensor(x), wg.tensor(g)),
            lambda: ERRORS[case](torch, torch.tensor(x), torch.tensor(g)))


def test_default_align_corners_warns_as_torch():
    theta = wg.tensor([[[1.0, 0, 0], [0, 1, 0]]])
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        grid = F.affine_grid(theta, (1, 1, 2, 2))
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        F.grid_sample(wg.ones(1, 1, 2, 2), grid)
    with pytest.warns(UserWarning, match="unit-size grids"):
        F.affine_grid(theta, (1, 1, 1, 2), align_corners=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.grid_sample(wg.ones(1, 1, 2, 2), F.affine_grid(theta, (1, 1, 2, 2), align_corners=False), align_corners=False)


def _stn_losses(lib, params, x, y, device=None, steps=2):
    """The spatial-transformer tutorial's network in miniature, trained `steps` SGD steps; the losses."""
    Fn = lib.nn.functional
    kw = {} if device is None else {"device": device}
    ps = [lib.tensor(p, requires_grad=True, **kw) for p in params]
    x, y = lib.tensor(x, **kw), lib.tensor(y, **kw)
    opt = lib.optim.SGD(ps, lr=0.5)
    losses = []
    for _ in range(steps):
        lw, lb, fw, fb, cw, cb = ps
        h = Fn.relu(Fn.max_pool2d(Fn.conv2d(x, lw, lb), 2))
        theta = Fn.linear(h.flatten(1), fw, fb).view(-1, 2, 3)
        grid = Fn.affine_grid(theta, x.size(), align_corners=False)
        warped = Fn.grid_sample(x, grid, align_corners=False)
        out = Fn.conv2d(warped, cw, cb).mean((2, 3))
        loss = Fn.mse_loss(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().to("cpu").numpy() if lib is wg else p.detach().numpy() for p in ps]


def test_spatial_transformer_trains_as_torch(device):
    rng = np.random.default_rng(8)
    f32 = np.float32
    params = [rng.standard_normal((3, 1, 3, 3)).astype(f32) * 0.3, np.zeros(3, f32),  # localization conv
              rng.standard_normal((6, 3 * 3 * 3)).astype(f32) * 0.05,  # fc -> theta, starts near the identity
              np.array([1, 0, 0, 0, 1, 0], f32),
              rng.standard_normal((2, 1, 3, 3)).astype(f32) * 0.3, np.zeros(2, f32)]  # the classifier's conv
    x = rng.standard_normal((4, 1, 8, 8)).astype(f32)
    y = rng.standard_normal((4, 2)).astype(f32)
    got, got_params = _stn_losses(wg, params, x, y, device=device)
    ref, ref_params = _stn_losses(torch, params, x, y)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    assert ref[1] < ref[0]  # it trains
    for g, r in zip(got_params, ref_params):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)
