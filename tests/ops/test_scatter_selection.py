"""Scatters, data-dependent selections, scans, order statistics and the small nn.functional layers (issue 39)
against torch on every device, on cases the OpInfo samples leave out: repeated indices, contention, long rows,
integers, NaN, zeros in products, errors."""

import math

import numpy as np
import pytest

import webgrad as wg
from helpers import DEVICES

torch = pytest.importorskip("torch")


def _wg(a, device, grad=False):
    t = wg.tensor(np.asarray(a), device=device)
    return t.requires_grad_(True) if grad else t


def _np(t):
    return t.detach().to("cpu").numpy() if isinstance(t, wg.Tensor) else t.detach().numpy()


def _close(got, want, device, rtol=1e-5, atol=1e-5):
    if device != "cpu":
        rtol, atol = max(rtol, 1e-3), max(atol, 1e-4)
    got, want = _np(got), _np(want)
    assert got.shape == want.shape, f"shape {got.shape} vs torch {want.shape}"
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def _both(fn_wg, fn_torch, arrays, device, grad=True, rtol=1e-5, atol=1e-5, seed=0):
    """Run fn on webgrad (device) and torch with the same float arrays; compare outputs and the gradients of
    sum(out * W)."""
    xs = [_wg(a, device, grad and a.dtype.kind == "f") for a in arrays]
    ts = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    got, want = fn_wg(*xs), fn_torch(*ts)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        _close(g, w, device, rtol, atol)
    if grad:
        rng = np.random.default_rng(seed)
        weights = [rng.standard_normal(tuple(w.shape)).astype(np.float32) for w in want]
        floats = [(g, w, c) for g, w, c in zip(got, want, weights) if w.dtype.is_floating_point and w.requires_grad]
        sum(((g * _wg(c, device)).sum() for g, _, c in floats), _wg(np.float32(0), device)).backward()
        sum((w * torch.tensor(c)).sum() for _, w, c in floats).backward()
        for x, t in zip(xs, ts):
            if t.grad is not None:
                assert x.grad is not None, "a gradient torch gives is missing"
                _close(x.grad, t.grad, device, max(rtol, 1e-4), max(atol, 1e-4))


# ===================================================================== scatters
@pytest.mark.parametrize("device", DEVICES)
def test_scatter_repeated_indices_keep_the_last_write(device):
    index = np.array([[0, 1, 0, 0], [2, 2, 1, 2]])
    src = np.arange(8, dtype=np.float32).reshape(2, 4) + 1
    for dtype in (np.float32, np.int64, np.int32):
        x = np.zeros((3, 4), dtype)
        got = _wg(x, device).scatter(0, _wg(index, device), _wg(src.astype(dtype), device))
        want = torch.tensor(x).scatter(0, torch.tensor(index), torch.tensor(src.astype(dtype)))
        _close(got, want, device)
    mask = _wg(np.zeros((2, 5), bool), device).scatter(1, _wg(np.array([[1, 3], [0, 0]]), device), True)
    assert _np(mask).tolist() == [[False, True, False, True, False], [True, False, False, False, False]]


@pytest.mark.parametrize("device", DEVICES)
def test_scatter_add_with_contention_and_index_add(device):
    rng = np.random.default_rng(1)
    # 20,000 sources into 3 targets per column: the lists of a target are long
    index = rng.integers(0, 3, (20000, 4))
    src = rng.standard_normal((20000, 4)).astype(np.float32)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    _both(lambda a, b: a.scatter_add(0, _wg(index, device), b),
          lambda a, b: a.scatter_add(0, torch.tensor(index), b), [x, src], device, rtol=1e-4, atol=1e-3)
    # a [K] index along the middle dim of a 3-D tensor, repeated rows, alpha
    idx = np.array([4, 0, 4, 2, 4, 1])
    x3 = rng.standard_normal((3, 5, 7)).astype(np.float32)
    s3 = rng.standard_normal((3, 6, 7)).astype(np.float32)
    _both(lambda a, b: a.index_add(1, _wg(idx, device), b, alpha=-2.5),
          lambda a, b: a.index_add(1, torch.tensor(idx), b, alpha=-2.5), [x3, s3], device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_every_reduction(device, reduce, include_self):
    rng = np.random.default_rng(2)
    index = rng.integers(0, 4, (6, 5))
    src = rng.uniform(0.5, 2.0, (6, 5)).astype(np.float32)
    src[1, 2] = 0.0  # a zero among a product's factors
    x = rng.uniform(0.5, 2.0, (4, 5)).astype(np.float32)
    _both(lambda a, b: a.scatter_reduce(0, _wg(index, device), b, reduce, include_self=include_self),
          lambda a, b: a.scatter_reduce(0, torch.tensor(index), b, reduce, include_self=include_self),
          [x, src], device, rtol=1e-4)
    if reduce != "prod":  # index_reduce has no sum; mean/amax/amin/prod match scatter_reduce's [K] form
        return
    idx = np.array([1, 0, 1, 3])
    s = rng.uniform(0.5, 2.0, (4, 5)).astype(np.float32)
    _both(lambda a, b: a.index_reduce(0, _wg(idx, device), b, "prod", include_self=include_self),
          lambda a, b: a.index_reduce(0, torch.tensor(idx), b, "prod", include_self=include_self),
          [x, s], device, rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_scatter_reduce_integers_and_nan(device):
    index = np.array([0, 0, 1, 1, 1])
    src = np.array([5, -3, 7, 2, 9], np.int64)
    x = np.array([1, 4, 6], np.int64)
    for reduce in ("sum", "prod", "amax", "amin", "mean"):
        got = _wg(x, device).scatter_reduce(0, _wg(index, device), _wg(src, device), reduce)
        want = torch.tensor(x).scatter_reduce(0, torch.tensor(index), torch.tensor(src), reduce)
        _close(got, want, device)
    f = np.array([1.0, np.nan, 3.0], np.float32)
    got = _wg(np.zeros(2, np.float32), device).scatter_reduce(0, _wg(np.array([0, 0, 1]), device), _wg(f, device),
                                                              "amax")
    assert math.isnan(_np(got)[0]) and _np(got)[1] == 3.0


def test_int64_sums_beyond_int32_on_webgpu_raise():
    if "webgpu" not in DEVICES:
        pytest.skip("no WebGPU adapter")
    big = np.array([2**30, 2**30, 2**30], np.int64)
    x = _wg(np.zeros(1, np.int64), "webgpu").scatter_add(0, _wg(np.zeros(3, np.int64), "webgpu"),
                                                         _wg(big, "webgpu"))
    with pytest.raises(RuntimeError, match="int32 range"):
        x.tolist()
    cpu = wg.zeros(1, dtype=wg.int64).scatter_add(0, wg.zeros(3, dtype=wg.int64), wg.tensor(big))
    assert cpu.tolist() == [3 * 2**30]


@pytest.mark.parametrize("device", DEVICES)
def test_scatter_errors(device):
    x = _wg(np.zeros((3, 4), np.float32), device)
    with pytest.raises(IndexError, match="out of bounds"):
        x.scatter_add(0, _wg(np.array([[0, 3, 1, 0]]), device), _wg(np.ones((1, 4), np.float32), device)).tolist()
    with pytest.raises(RuntimeError, match="dtype"):
        x.scatter(0, _wg(np.array([[0, 1, 1, 0]]), device), _wg(np.ones((1, 4), np.int64), device))
    with pytest.raises(RuntimeError, match="reduce"):
        x.scatter_reduce(0, _wg(np.array([[0, 1, 1, 0]]), device), x[:1], "max")


@pytest.mark.parametrize("device", DEVICES)
def test_index_put_put_take_and_in_place_forms(device):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    rows, cols = np.array([0, 2, 0, 3]), np.array([1, 1, 1, 4])
    v = rng.standard_normal(4).astype(np.float32)
    _both(lambda a, b: a.index_put((_wg(rows, device), _wg(cols, device)), b, accumulate=True),
          lambda a, b: a.index_put((torch.tensor(rows), torch.tensor(cols)), b, accumulate=True), [x, v], device)
    flat = np.array([-1, 3, 7, 3])
    _both(lambda a, b: a.put(_wg(flat, device), b, accumulate=True),
          lambda a, b: a.put(torch.tensor(flat), b, accumulate=True), [x, v], device)
    _both(lambda a: wg.take(a, _wg(np.array([[0, -1], [7, 7]]), device)),
          lambda a: torch.take(a, torch.tensor([[0, -1], [7, 7]])), [x], device)
    y = _wg(x, device)
    y.index_fill_(1, _wg(np.array([0, -1]), device), 2.0).scatter_(0, _wg(np.array([[3]]), device), 9.0)
    t = torch.tensor(x)
    t.index_fill_(1, torch.tensor([0, -1]), 2.0).scatter_(0, torch.tensor([[3]]), 9.0)
    _close(y, t, device)


# ===================================================================== selections
@pytest.mark.parametrize("device", DEVICES)
def test_nonzero_masked_select_masked_scatter(device):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((37, 300)).astype(np.float32)
    x[x < 0.3] = 0
    _close(wg.nonzero(_wg(x, device)), torch.nonzero(torch.tensor(x)), device)
    for a, b in zip(wg.nonzero(_wg(x, device), as_tuple=True), torch.nonzero(torch.tensor(x), as_tuple=True)):
        _close(a, b, device)
    _close(wg.argwhere(_wg(x[:0], device)), torch.argwhere(torch.tensor(x[:0])), device)
    mask = rng.random((37, 1)) < 0.5
    _both(lambda a: a.masked_select(_wg(mask, device)), lambda a: a.masked_select(torch.tensor(mask)), [x], device)
    src = rng.standard_normal(40 * 300).astype(np.float32)
    _both(lambda a, b: a.masked_scatter(_wg(mask, device), b),
          lambda a, b: a.masked_scatter(torch.tensor(mask), b), [x, src], device)


@pytest.mark.parametrize("device", DEVICES)
def test_unique_and_unique_consecutive(device):
    x = np.array([[3, 1, 3], [2, 1, 3], [3, 1, 3], [2, 1, 3]], np.int64)
    for kwargs in ({}, {"dim": 0}, {"dim": 1}):
        got = wg.unique(_wg(x, device), return_inverse=True, return_counts=True, **kwargs)
        want = torch.unique(torch.tensor(x), return_inverse=True, return_counts=True, **kwargs)
        for a, b in zip(got, want):
            _close(a, b, device)
        got = wg.unique_consecutive(_wg(x, device), return_inverse=True, return_counts=True, **kwargs)
        want = torch.unique_consecutive(torch.tensor(x), return_inverse=True, return_counts=True, **kwargs)
        for a, b in zip(got, want):
            _close(a, b, device)
    f = np.array([2.0, np.nan, -1.0, 2.0, np.nan], np.float32)
    got = wg.unique(_wg(f, device), return_counts=True)
    want = torch.unique(torch.tensor(f), return_counts=True)
    _close(got[0], want[0], device)
    _close(got[1], want[1], device)


@pytest.mark.parametrize("device", DEVICES)
def test_searchsorted_bucketize_isin(device):
    seq = np.array([[-1.0, 0.0, 0.0, 2.5, np.nan], [1.0, 2.0, 3.0, 4.0, 5.0]], np.float32)
    values = np.array([[0.0, -2.0, np.nan, 2.5], [3.0, 6.0, 0.5, 5.0]], np.float32)
    for right in (False, True):
        _close(wg.searchsorted(_wg(seq, device), _wg(values, device), right=right),
               torch.searchsorted(torch.tensor(seq), torch.tensor(values), right=right), device)
    ints = np.array([1, 3, 5, 7], np.int64)
    _close(wg.bucketize(_wg(np.array([[0, 3], [8, 5]]), device), _wg(ints, device), out_int32=True),
           torch.bucketize(torch.tensor([[0, 3], [8, 5]]), torch.tensor(ints), out_int32=True), device)
    assert wg.searchsorted(_wg(ints, device), 4).item() == 2
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 3000, 3000), rng.integers(0, 3000, 2000)  # beyond the pairwise limit: sort and search
    _close(wg.isin(_wg(a, device), _wg(b, device)), torch.isin(torch.tensor(a), torch.tensor(b)), device)
    _close(wg.isin(_wg(a, device), _wg(b, device), invert=True),
           torch.isin(torch.tensor(a), torch.tensor(b), invert=True), device)


@pytest.mark.parametrize("device", DEVICES)
def test_histc_and_histogram(device):
    x = np.array([0.0, 1.0, 2.5, 10.0, 10.5, -1.0, np.nan, 9.999, 5.0], np.float32)
    for bins, lo, hi in ((10, 0, 10), (3, 0, 0), (4, -1, 11)):
        _close(wg.histc(_wg(x[~np.isnan(x)] if lo == hi else x, device), bins, lo, hi),
               torch.histc(torch.tensor(x[~np.isnan(x)] if lo == hi else x), bins, lo, hi), device)
    y = np.random.default_rng(6).standard_normal(1000).astype(np.float32)
    w = np.random.default_rng(7).random(1000).astype(np.float32)
    got = wg.histogram(_wg(y, device), 7, weight=_wg(w, device), density=True)
    want = torch.histogram(torch.tensor(y), 7, weight=torch.tensor(w), density=True)
    _close(got.hist, want.hist, device, rtol=1e-4)
    _close(got.bin_edges, want.bin_edges, device)


@pytest.mark.parametrize("device", DEVICES)
def test_gradient_and_histogramdd(device):
    rng = np.random.default_rng(12)
    y = rng.standard_normal((6, 5)).astype(np.float32)
    coords = np.array([0.0, 0.5, 1.7, 2.0, 3.5, 4.0], np.float32)
    coords2 = np.array([-1.0, 0.0, 0.25, 3.0, 3.5], np.float32)
    for edge_order in (1, 2):
        _both(lambda a: wg.gradient(a, spacing=(_wg(coords, device), _wg(coords2, device)), edge_order=edge_order),
              lambda a: torch.gradient(a, spacing=(torch.tensor(coords), torch.tensor(coords2)),
                                       edge_order=edge_order), [y], device, rtol=1e-4)
        _both(lambda a: wg.gradient(a, spacing=[0.5, 2.0], dim=(1, 0), edge_order=edge_order),
              lambda a: torch.gradient(a, spacing=[0.5, 2.0], dim=(1, 0), edge_order=edge_order), [y], device)
    points = rng.standard_normal((500, 3)).astype(np.float32)
    w = rng.random(500).astype(np.float32)
    got = wg.histogramdd(_wg(points, device), [3, 4, 2], weight=_wg(w, device), density=True)
    want = torch.histogramdd(torch.tensor(points), [3, 4, 2], weight=torch.tensor(w), density=True)
    _close(got.hist, want.hist, device, rtol=1e-4)
    for a, b in zip(got.bin_edges, want.bin_edges):
        _close(a, b, device)


# ===================================================================== scans and order statistics
@pytest.mark.parametrize("device", DEVICES)
def test_scans_on_long_rows_and_columns(device):
    rng = np.random.default_rng(8)
    # rows longer than a software adapter's loop (inner > 1 goes through a transposed copy there)
    x = rng.uniform(-3, 3, (2, 40000, 3)).astype(np.float32)
    for name in ("cummax", "cummin"):
        got, want = getattr(wg, name)(_wg(x, device), 1), getattr(torch, name)(torch.tensor(x), 1)
        _close(got.values, want.values, device)
        _close(got.indices, want.indices, device)
    small = rng.uniform(0.9, 1.1, (3, 2000)).astype(np.float32)
    _close(wg.cumprod(_wg(small, device), 1), torch.cumprod(torch.tensor(small), 1), device, rtol=1e-4)
    _close(wg.logcumsumexp(_wg(x, device), 1), torch.logcumsumexp(torch.tensor(x), 1), device, rtol=1e-5)
    ints = rng.integers(-50, 50, (4, 9))
    got, want = wg.cummax(_wg(ints, device), 1), torch.cummax(torch.tensor(ints), 1)
    _close(got.values, want.values, device)
    _close(got.indices, want.indices, device)


@pytest.mark.parametrize("device", DEVICES)
def test_scan_gradients_with_zeros_ties_and_infinities(device):
    x = np.array([[2.0, 0.0, 3.0, 0.0, 1.5], [0.5, 2.0, 0.0, 4.0, 1.0], [1.0, 2.0, 3.0, 4.0, 5.0]], np.float32)
    _both(lambda a: a.cumprod(1), lambda a: a.cumprod(1), [x], device, rtol=1e-4)
    ties = np.array([[1.0, 3.0, 3.0, 2.0, 3.0]], np.float32)
    _both(lambda a: wg.cummax(a, 1), lambda a: torch.cummax(a, 1), [ties], device)
    inf = np.array([[-np.inf, 0.0, -np.inf, 1000.0, 2.0]], np.float32)
    _close(wg.logcumsumexp(_wg(inf, device), 1), torch.logcumsumexp(torch.tensor(inf), 1), device)


@pytest.mark.parametrize("device", DEVICES)
def test_order_statistics(device):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((4, 7, 3)).astype(np.float32)
    _both(lambda a: wg.kthvalue(a, 3, 1, keepdim=True), lambda a: torch.kthvalue(a, 3, 1, keepdim=True), [x], device)
    _both(lambda a: wg.median(a, 1), lambda a: torch.median(a, 1), [x], device)
    _both(lambda a: wg.median(a), lambda a: torch.median(a), [x], device)
    q = np.array([0.0, 0.25, 0.9, 1.0], np.float32)
    for interpolation in ("linear", "lower", "higher", "midpoint", "nearest"):
        _both(lambda a, b: wg.quantile(a, b, dim=1, interpolation=interpolation),
              lambda a, b: torch.quantile(a, b, dim=1, interpolation=interpolation), [x, q], device, rtol=1e-4)
    n = x.copy()
    n[0, 2, 1] = n[1, 0, 0] = np.nan
    _both(lambda a: wg.nanmedian(a, 1), lambda a: torch.nanmedian(a, 1), [n], device)
    _both(lambda a: wg.nanquantile(a, 0.3, dim=1), lambda a: torch.nanquantile(a, 0.3, dim=1), [n], device)
    _close(wg.median(_wg(n, device), 1).values, torch.median(torch.tensor(n), 1).values, device)
    m = rng.integers(0, 4, (5, 30)).astype(np.float32)
    got, want = wg.mode(_wg(m, device), 1), torch.mode(torch.tensor(m), 1)
    _close(got.values, want.values, device)
    # which occurrence torch names depends on its unstable sort; webgrad names the last, and it holds the mode
    at = _np(got.indices)
    assert (m[np.arange(5), at] == _np(got.values)).all()
    assert all(not (m[r, at[r] + 1:] == m[r, at[r]]).any() for r in range(5))
    with pytest.raises(RuntimeError, match="q"):
        wg.quantile(_wg(x, device), 1.5)


# ===================================================================== nn.functional
@pytest.mark.parametrize("device", DEVICES)
def test_embedding_bag_modes(device):
    rng = np.random.default_rng(10)
    weight = rng.standard_normal((10, 4)).astype(np.float32)
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = np.array([0, 4, 4])  # the middle bag is empty
    for mode in ("sum", "mean", "max"):
        _both(lambda w: wg.nn.functional.embedding_bag(_wg(idx, device), w, _wg(offsets, device), mode=mode,
                                                      padding_idx=2),
              lambda w: torch.nn.functional.embedding_bag(torch.tensor(idx), w, torch.tensor(offsets), mode=mode,
                                                         padding_idx=2), [weight], device)


@pytest.mark.parametrize("device", DEVICES)
def test_fold_unfold_and_adaptive_max_pool(device):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    F, TF = wg.nn.functional, torch.nn.functional
    _both(lambda a: F.unfold(a, (3, 2), dilation=(1, 2), padding=1, stride=(2, 1)),
          lambda a: TF.unfold(a, (3, 2), dilation=(1, 2), padding=1, stride=(2, 1)), [x], device)
    cols = rng.standard_normal((2, 3 * 4, 32)).astype(np.float32)  # 4 x 8 blocks
    _both(lambda a: F.fold(a, (6, 7), 2, padding=1, stride=(2, 1)),
          lambda a: TF.fold(a, (6, 7), 2, padding=1, stride=(2, 1)), [cols], device)
    _both(lambda a: F.adaptive_max_pool2d(a, (4, 5), return_indices=True),
          lambda a: TF.adaptive_max_pool2d(a, (4, 5), return_indices=True), [x], device)
    pooled, where = TF.max_pool2d(torch.tensor(x), 2, return_indices=True)
    _both(lambda a: F.max_unpool2d(a, _wg(where.numpy(), device), 2, output_size=(7, 6)),
          lambda a: TF.max_unpool2d(a, where, 2, output_size=(7, 6)), [pooled.numpy()], device)
    signal = rng.standard_normal((2, 3, 11)).astype(np.float32)
    weight = rng.standard_normal((4, 3, 3)).astype(np.float32)
    _both(lambda a, w: F.conv1d(a, w, padding="same", dilation=2),
          lambda a, w: TF.conv1d(a, w, padding="same", dilation=2), [signal, weight], device, rtol=1e-4)
    _both(lambda a: F.max_pool1d(a, 3, 2, 1, ceil_mode=True, return_indices=True),
          lambda a: TF.max_pool1d(a, 3, 2, 1, ceil_mode=True, return_indices=True), [signal], device)
