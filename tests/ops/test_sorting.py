"""topk, sort, argsort and msort (ops/sorting.py, kernels.topk) against PyTorch on every device: values and indices
(ties in torch's stable order), NaN and -0.0, any dim, integer and bool inputs, the WebGPU kernel's three paths
(one tile; candidates per tile; the whole row sorted in scratch), gradients, and torch's errors."""

import numpy as np
import pytest
import torch

import webgrad as wg

from helpers import DEVICES, gradcheck

# (rows, n, k): one tile of <= 1024; a longer row with k <= 512 (candidates, 2 and 3 passes); a longer row with a
# larger k (the whole row in scratch, two and three merge stages)
SHAPES = [(3, 10, 4), (2, 65, 65), (2, 1024, 1024), (2, 5000, 40), (1, 50257, 40), (2, 5000, 700), (1, 4100, 4100)]


def _ties(rows, n, seed=0):
    """Random values with many ties (one value in ten repeated) and some -0.0 beside 0.0."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((rows, n)).astype(np.float32)
    a[:, ::10] = 0.5
    a[:, 1::17] = 0.0
    a[:, 2::17] = -0.0
    return a


@pytest.mark.parametrize("rows,n,k", SHAPES)
@pytest.mark.parametrize("largest", [True, False])
def test_topk_is_torchs_stable_sort_prefix(device, rows, n, k, largest):
    a = _ties(rows, n)
    values, indices = wg.topk(wg.tensor(a, device=device), k, largest=largest)
    ref_values, ref_indices = torch.sort(torch.from_numpy(a), descending=largest, stable=True)
    assert values.dtype is wg.float32 and indices.dtype is wg.int64
    np.testing.assert_array_equal(values.numpy(), ref_values[:, :k].numpy())
    np.testing.assert_array_equal(indices.numpy(), ref_indices[:, :k].numpy())
    # the top k as a set is torch.topk's (torch orders ties its own way)
    tv, _ = torch.topk(torch.from_numpy(a), k, largest=largest)
    np.testing.assert_array_equal(values.numpy(), tv.numpy())


@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_argsort_along_any_dim(device, descending):
    a = _ties(4, 30, seed=1).reshape(4, 5, 6)
    x = wg.tensor(a, device=device)
    for dim in (0, 1, -1):
        values, indices = x.sort(dim=dim, descending=descending)
        ref = torch.sort(torch.from_numpy(a), dim=dim, descending=descending, stable=True)
        np.testing.assert_array_equal(values.numpy(), ref.values.numpy())
        np.testing.assert_array_equal(indices.numpy(), ref.indices.numpy())
        np.testing.assert_array_equal(wg.argsort(x, dim, descending=descending).numpy(), ref.indices.numpy())
        np.testing.assert_array_equal(x.argsort(dim=dim, descending=descending, stable=True).numpy(),
                                      ref.indices.numpy())
    np.testing.assert_array_equal(wg.msort(x).numpy(), torch.msort(torch.from_numpy(a)).numpy())
    topk = x.topk(2, dim=1)
    ref = torch.topk(torch.from_numpy(a), 2, dim=1)
    np.testing.assert_array_equal(topk.values.numpy(), ref.values.numpy())
    assert tuple(topk.indices.shape) == (4, 2, 6)


def test_nan_is_largest_and_negative_zero_equals_zero(device):
    a = np.array([1.0, np.nan, 3.0, -0.0, 0.0, -np.inf, np.inf, np.nan, -2.0], np.float32)
    x = wg.tensor(a, device=device)
    for descending in (False, True):
        values, indices = x.sort(descending=descending)
        ref = torch.sort(torch.from_numpy(a), descending=descending, stable=True)
        np.testing.assert_array_equal(values.numpy(), ref.values.numpy())  # (NaN == NaN here; -0.0 kept as -0.0)
        np.testing.assert_array_equal(np.signbit(values.numpy()), np.signbit(ref.values.numpy()))
        np.testing.assert_array_equal(indices.numpy(), ref.indices.numpy())
    values, indices = x.topk(3)
    assert np.isnan(values.numpy()[:2]).all() and values.numpy()[2] == np.inf
    assert indices.tolist() == [1, 7, 6]


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
def test_integer_and_bool_inputs(device, dtype):
    rng = np.random.default_rng(2)
    a = rng.integers(0, 2 if dtype == "bool" else 200, (3, 50)).astype(dtype)
    if dtype in ("int64", "int32"):
        a[0, :4] = [-2**31, 2**31 - 1, -1, 0]
    ref = torch.sort(torch.from_numpy(a), descending=True, stable=True)
    values, indices = wg.tensor(a, device=device).sort(descending=True)
    assert values.dtype is getattr(wg, dtype) and indices.dtype is wg.int64
    np.testing.assert_array_equal(values.numpy(), ref.values.numpy())
    np.testing.assert_array_equal(indices.numpy(), ref.indices.numpy())


def test_scalars_and_empty_inputs(device):
    x = wg.tensor(3.0, device=device)
    assert x.topk(1).values.item() == 3.0 and x.topk(1).indices.item() == 0
    assert x.sort().values.shape == () and x.sort().indices.item() == 0
    empty = wg.zeros(2, 0, device=device)
    assert tuple(empty.sort().values.shape) == (2, 0)
    assert tuple(wg.topk(wg.ones(2, 5, device=device), 0).values.shape) == (2, 0)


def test_gradient_goes_back_to_the_entries(device):
    gradcheck(lambda x: wg.topk(x, 3, dim=1).values, np.random.default_rng(3).standard_normal((2, 7, 3)),
              device=device)
    gradcheck(lambda x: x.sort(dim=0, descending=True).values * 2, np.random.default_rng(4).standard_normal((5, 2)),
              device=device)
    a = np.random.default_rng(5).standard_normal((3, 6)).astype(np.float32)
    x, t = wg.tensor(a, device=device, requires_grad=True), torch.tensor(a, requires_grad=True)
    g = np.random.default_rng(6).standard_normal((3, 2)).astype(np.float32)
    x.topk(2, largest=False).values.backward(wg.tensor(g, device=device))
    t.topk(2, largest=False).values.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())
    assert not x.sort().indices.requires_grad


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
def test_a_long_row_on_the_gpu_takes_few_dispatches():
    """Top-40 of a 50,257-entry row (GPT-2's vocabulary): three tile passes, not a sort of the whole row; a row of
    up to 1,024 entries one."""
    from webgrad._backends.webgpu.runtime import default_runtime
    stats = default_runtime().stats
    for n, dispatches in ((50257, 3), (1024, 1)):
        x = wg.randn(1, n, device="webgpu")
        before = stats["dispatches"]
        wg.topk(x, 40)
        assert stats["dispatches"] - before == dispatches


def test_torchs_errors():
    x = wg.ones(3)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        x.topk(4)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        x.topk(-1)
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.sort(dim=1)
    with pytest.raises(TypeError, match="must be int"):
        x.topk(1.5)


@pytest.mark.parametrize("call", [
    lambda t, x: t.max(x, 1), lambda t, x: t.min(x, 0, keepdim=True), lambda t, x: t.sort(x, 1),
    lambda t, x: t.topk(x, 2), lambda t, x: t.kthvalue(x, 1), lambda t, x: t.median(x, 1), lambda t, x: t.mode(x, 1),
    lambda t, x: t.cummax(x, 1), lambda t, x: t.aminmax(x), lambda t, x: t.frexp(x), lambda t, x: t.svd(x[:, :2]),
    lambda t, x: t.linalg.slogdet(x[:, :2]), lambda t, x: t.linalg.qr(x), lambda t, x: t.linalg.lu_factor(x[:, :2])],
    ids=["max", "min", "sort", "topk", "kthvalue", "median", "mode", "cummax", "aminmax", "frexp", "svd", "slogdet",
         "linalg_qr", "lu_factor"])
def test_named_results_are_torchs_return_types(call):
    """Ops returning several tensors return torch.return_types.NAME: fields by name, and torch's printing."""
    values = [[4.0, 1.0, 3.0], [2.0, 5.0, 0.5]]
    ours, theirs = call(wg, wg.tensor(values)), call(torch, torch.tensor(values))
    assert type(ours).__name__ == type(theirs).__name__ and len(ours) == len(theirs)
    # field names and values as torch prints them (the package named as webgrad's dtypes are, outside as_torch())
    assert repr(ours) == repr(theirs).replace("torch.", "webgrad.")
    assert all(getattr(ours, name) is value for name, value in zip(ours._fields, ours))
    assert isinstance(ours, getattr(wg.return_types, type(theirs).__name__))
