"""The ATen-level torch.* functions (native_layer_norm, native_batch_norm, native_group_norm,
_native_batch_norm_legit, _softmax_backward_data, _chunk_cat, grid_sampler_2d/3d), F.linear_cross_entropy with and
without chunking options, svd_lowrank / pca_lowrank, fractional max pooling, linalg.ldl_factor / ldl_solve and
geqrf / ormqr, against PyTorch: values, gradients, running statistics, errors; and their OpInfo entries."""

import warnings

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES, assert_opinfo_entries_pass

RNG = np.random.default_rng(0)


def _pair(array, grad=False):
    """The same values as a torch and a webgrad tensor."""
    return (torch.tensor(array, requires_grad=grad), wg.tensor(array, requires_grad=grad))


def _close(w, t, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(w.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol)


def _randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------------------------------ normalizations
def test_native_layer_norm_outputs_statistics_and_gradients():
    (tx, wx), (tw, ww), (tb, wb) = _pair(_randn(2, 3, 4), True), _pair(_randn(3, 4), True), _pair(_randn(3, 4), True)
    t_out = torch.native_layer_norm(tx, (3, 4), tw, tb, 1e-5)
    w_out = wg.native_layer_norm(wx, (3, 4), ww, wb, 1e-5)
    for w, t in zip(w_out, t_out):
        assert tuple(w.shape) == tuple(t.shape)
        _close(w, t)
    assert [o.requires_grad for o in w_out] == [o.requires_grad for o in t_out] == [True, False, False]
    g = _randn(2, 3, 4)
    t_out[0].backward(torch.tensor(g))
    w_out[0].backward(wg.tensor(g))
    for w, t in ((wx, tx), (ww, tw), (wb, tb)):
        _close(w.grad, t.grad, 1e-3, 1e-4)


@pytest.mark.parametrize("training", [True, False])
def test_native_batch_norm_saved_statistics_and_running_update(training):
    x = _randn(4, 3, 5)
    t_stats = [torch.tensor(v) for v in (_randn(3), np.abs(_randn(3)) + 0.5)]
    w_stats = [wg.tensor(s.numpy()) for s in t_stats]
    (tw, ww), (tb, wb), (tx, wx) = _pair(_randn(3), True), _pair(_randn(3), True), _pair(x, True)
    t_out = torch.native_batch_norm(tx, tw, tb, *t_stats, training, 0.3, 1e-5)
    w_out = wg.native_batch_norm(wx, ww, wb, *w_stats, training, 0.3, 1e-5)
    for w, t in zip(w_out, t_out):
        assert tuple(w.shape) == tuple(t.shape)
        _close(w, t)
    for w, t in zip(w_stats, t_stats):  # the running statistics, updated in place in training only
        _close(w, t)
    g = _randn(4, 3, 5)
    t_out[0].backward(torch.tensor(g))
    w_out[0].backward(wg.tensor(g))
    for w, t in ((wx, tx), (ww, tw), (wb, tb)):
        _close(w.grad, t.grad, 1e-3, 1e-4)


def test_native_batch_norm_legit_without_running_statistics():
    tx, wx = _pair(_randn(3, 2, 4))
    t_out = torch._native_batch_norm_legit(tx, None, None, True, 0.1, 1e-5)
    w_out = wg._native_batch_norm_legit(wx, None, None, True, 0.1, 1e-5)
    for w, t in zip(w_out, t_out):
        _close(w, t)
    with pytest.raises(RuntimeError, match="running_mean"):
        wg.native_batch_norm(wx, None, None, None, None, False, 0.1, 1e-5)


def test_native_group_norm_statistics_are_differentiable():
    (tx, wx), (tw, ww) = _pair(_randn(2, 6, 5), True), _pair(_randn(6), True)
    t_out = torch.native_group_norm(tx, tw, None, 2, 6, 5, 3, 1e-5)
    w_out = wg.native_group_norm(wx, ww, None, 2, 6, 5, 3, 1e-5)
    cotangents = [_randn(*t.shape) for t in t_out]
    sum(((t * torch.tensor(c)).sum() for t, c in zip(t_out, cotangents))).backward()
    sum(((w * wg.tensor(c)).sum() for w, c in zip(w_out, cotangents))).backward()
    for w, t in zip(w_out, t_out):
        _close(w, t)
    _close(wx.grad, tx.grad, 1e-3, 1e-4)
    _close(ww.grad, tw.grad, 1e-3, 1e-4)
    with pytest.raises(RuntimeError, match="divisible"):
        wg.native_group_norm(wx, None, None, 2, 6, 5, 4, 1e-5)


def test_softmax_backward_data_is_softmax_gradient():
    x = _randn(3, 7)
    (tg, wg_), (ty, wy) = _pair(_randn(3, 7), True), _pair(torch.softmax(torch.tensor(x), 1).numpy(), True)
    t = torch._softmax_backward_data(tg, ty, 1, torch.float32)
    w = wg._softmax_backward_data(wg_, wy, 1, wg.float32)
    _close(w, t)
    c = _randn(3, 7)
    t.backward(torch.tensor(c))
    w.backward(wg.tensor(c))
    _close(wg_.grad, tg.grad)
    _close(wy.grad, ty.grad)


@pytest.mark.parametrize("shapes, dim, chunks", [([(1, 2, 3), (1, 2, 5)], -1, 5), ([(3, 3, 2, 1), (1, 4, 2, 2)], 0, 2),
                                                 ([(2, 7, 3), (2, 1)], 1, 3)])
def test_chunk_cat_pads_and_interleaves_chunks(shapes, dim, chunks):
    arrays = [_randn(*s) for s in shapes]
    t = torch._chunk_cat([torch.tensor(a) for a in arrays], dim, chunks)
    w = wg._chunk_cat([wg.tensor(a) for a in arrays], dim, chunks)
    assert tuple(w.shape) == tuple(t.shape)
    _close(w, t)


def test_chunk_cat_rejects_mismatched_leading_dims():
    with pytest.raises(RuntimeError, match="same sizes"):
        wg._chunk_cat([wg.zeros(2, 3), wg.zeros(3, 3)], 1, 2)


def test_aten_only_operators_through_torch_ops():
    (tx, wx) = _pair(_randn(4, 3, 5), True)
    t_stats = [torch.zeros(3), torch.ones(3)]
    w_stats = [wg.zeros(3), wg.ones(3)]
    t_out = torch.ops.aten._batch_norm_with_update(tx, None, None, *t_stats, 0.2, 1e-5)
    w_out = wg.ops.aten._batch_norm_with_update(wx, None, None, *w_stats, 0.2, 1e-5)
    for w, t in zip(w_out, t_out):
        assert tuple(w.shape) == tuple(t.shape)
        _close(w, t)
    assert w_out[3].dtype == wg.uint8
    for w, t in zip(w_stats, t_stats):
        _close(w, t)
    mask = RNG.uniform(size=(4, 3, 5)) > 0.3
    (tg, wgr) = _pair(_randn(4, 3, 5), True)
    _close(wg.ops.aten.native_dropout_backward(wgr, wg.tensor(mask), 1.5),
           torch.ops.aten.native_dropout_backward(tg, torch.tensor(mask), 1.5))


def test_max_pool2d_with_indices_backward_scatters_into_the_input():
    (tx, wx) = _pair(_randn(2, 3, 6, 7), True)
    t_out, t_idx = torch.nn.functional.max_pool2d_with_indices(tx, 3, 2, 1, 1, True)
    w_out, w_idx = wg.nn.functional.max_pool2d_with_indices(wx, 3, 2, 1, 1, True)
    np.testing.assert_array_equal(w_idx.numpy(), t_idx.numpy())
    g = _randn(*t_out.shape)
    t = torch.ops.aten.max_pool2d_with_indices_backward(torch.tensor(g), tx, [3, 3], [2, 2], [1, 1], [1, 1], True,
                                                        t_idx)
    w = wg.ops.aten.max_pool2d_with_indices_backward(wg.tensor(g), wx, [3, 3], [2, 2], [1, 1], [1, 1], True, w_idx)
    _close(w, t)
    w.sum().backward()
    assert float(wx.grad.abs().sum()) == 0.0  # the input gives only the shape: a zero gradient, as ATen's


# -------------------------------------------------------------------------------------------- grid samplers
@pytest.mark.parametrize("interpolation, padding", [(0, 0), (1, 1), (2, 2), (0, 2)])
def test_grid_sampler_2d_maps_mode_codes(interpolation, padding):
    (tx, wx), (tg, wgr) = _pair(_randn(2, 3, 5, 6), True), _pair(RNG.uniform(-1.1, 1.1, (2, 4, 3, 2)).astype(
        np.float32), True)
    t = torch.grid_sampler_2d(tx, tg, interpolation, padding, False)
    w = wg.grid_sampler_2d(wx, wgr, interpolation, padding, False)
    _close(w, t)
    c = _randn(*t.shape)
    t.backward(torch.tensor(c))
    w.backward(wg.tensor(c))
    _close(wx.grad, tx.grad, 1e-3, 1e-4)
    _close(wgr.grad, tg.grad, 1e-3, 1e-4)


def test_grid_sampler_3d_and_rank_errors():
    (tx, wx), (tg, wgr) = _pair(_randn(1, 2, 3, 4, 5)), _pair(RNG.uniform(-1, 1, (1, 2, 2, 3, 3)).astype(np.float32))
    _close(wg.grid_sampler_3d(wx, wgr, 0, 1, True), torch.grid_sampler_3d(tx, tg, 0, 1, True))
    with pytest.raises(RuntimeError, match="5D input"):
        wg.grid_sampler_3d(wg.zeros(1, 1, 2, 2), wg.zeros(1, 2, 2, 2), 0, 0, False)
    with pytest.raises(RuntimeError, match="4D input"):
        wg.grid_sampler_2d(wx, wgr, 0, 0, False)


# -------------------------------------------------------------------------------------- linear cross entropy
def _lce_case(n, d, c, ignore_some):
    target = RNG.integers(0, c, n)
    if ignore_some:
        target[::3] = -100
    return _randn(n, d), _randn(c, d), _randn(c), target, np.abs(_randn(c)) + 0.1


def _lce_both(x, w, b, target, cls_weight, reduction, t_options, w_options, use_bias=True, use_weight=True):
    results = []
    for lib, options in ((torch, t_options), (wg, w_options)):
        tensors = [lib.tensor(a, requires_grad=True) for a in (x, w, b)]
        out = lib.nn.functional.linear_cross_entropy(
            tensors[0], tensors[1], lib.tensor(target), linear_bias=tensors[2] if use_bias else None,
            weight=lib.tensor(cls_weight) if use_weight else None, reduction=reduction, options=options)
        cotangent = np.linspace(-1, 1, out.numel(), dtype=np.float32).reshape(tuple(out.shape))
        out.backward(lib.tensor(cotangent))
        results.append((out, [t.grad for t in tensors]))
    return results


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("chunk", [None, 3, 16])
def test_linear_cross_entropy_matches_torch(reduction, chunk):
    x, w, b, target, cls_weight = _lce_case(10, 5, 7, ignore_some=True)
    t_options = None if chunk is None else torch.nn.LinearCrossEntropyOptions(batch_chunk_size=chunk)
    w_options = None if chunk is None else wg.nn.LinearCrossEntropyOptions(batch_chunk_size=chunk)
    (t_out, t_grads), (w_out, w_grads) = _lce_both(x, w, b, target, cls_weight, reduction, t_options, w_options)
    _close(w_out, t_out)
    for wgrad, tgrad in zip(w_grads, t_grads):
        _close(wgrad, tgrad, 1e-3, 1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_linear_cross_entropy_chunked_on_each_device(device):
    x, w, b, target, _ = _lce_case(7, 4, 9, ignore_some=True)
    t_args = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    w_args = [wg.tensor(a, device=device, requires_grad=True) for a in (x, w, b)]
    t_loss = torch.nn.functional.linear_cross_entropy(
        t_args[0], t_args[1], torch.tensor(target), linear_bias=t_args[2],
        options=torch.nn.LinearCrossEntropyOptions(batch_chunk_size=3))
    w_loss = wg.nn.functional.linear_cross_entropy(
        w_args[0], w_args[1], wg.tensor(target, device=device), linear_bias=w_args[2],
        options=wg.nn.LinearCrossEntropyOptions(batch_chunk_size=3))
    t_loss.backward()
    w_loss.backward()
    _close(w_loss.cpu(), t_loss, 1e-4, 1e-5)
    for wa, ta in zip(w_args, t_args):
        _close(wa.grad.cpu(), ta.grad, 1e-3, 1e-4)


def test_linear_cross_entropy_chunked_default_options_and_unbatched_input():
    x, w, b, target, cls_weight = _lce_case(9, 4, 30, ignore_some=False)
    for sl in (slice(None), 0):  # batched, then one unbatched row
        (t_out, t_grads), (w_out, w_grads) = _lce_both(
            x[sl], w, b, target[sl], cls_weight, "mean", torch.nn.LinearCrossEntropyOptions(),
            wg.nn.LinearCrossEntropyOptions(), use_bias=False, use_weight=False)
        _close(w_out, t_out)
        for wgrad, tgrad in zip(w_grads[:2], t_grads[:2]):
            _close(wgrad, tgrad, 1e-3, 1e-4)
        assert w_grads[2] is None and t_grads[2] is None


def test_linear_cross_entropy_k_dimensional_and_probabilities_use_the_reference():
    x, w3 = _randn(4, 3), _randn(5, 2, 3)
    target = RNG.integers(0, 5, (4, 2))
    t = torch.nn.functional.linear_cross_entropy(torch.tensor(x), torch.tensor(w3), torch.tensor(target))
    _close(wg.nn.functional.linear_cross_entropy(wg.tensor(x), wg.tensor(w3), wg.tensor(target)), t)
    probs = torch.softmax(torch.tensor(_randn(4, 5)), 1).numpy()
    w2 = _randn(5, 3)
    t = torch.nn.functional.linear_cross_entropy(torch.tensor(x), torch.tensor(w2), torch.tensor(probs),
                                                 label_smoothing=0.1)
    _close(wg.nn.functional.linear_cross_entropy(wg.tensor(x), wg.tensor(w2), wg.tensor(probs), label_smoothing=0.1),
           t)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wg.nn.functional.linear_cross_entropy(wg.tensor(x), wg.tensor(w2), wg.tensor(probs),
                                              options=wg.nn.LinearCrossEntropyOptions())
    assert any("options" in str(c.message) for c in caught)


def test_linear_cross_entropy_errors_and_retain_graph():
    F = wg.nn.functional
    with pytest.raises(RuntimeError, match="dimensionality 1 or 2"):
        F.linear_cross_entropy(wg.zeros(2, 2, 3), wg.zeros(4, 3), wg.zeros(2, dtype=wg.int64))
    with pytest.raises(RuntimeError, match="in_features"):
        F.linear_cross_entropy(wg.zeros(2, 3), wg.zeros(4, 2), wg.zeros(2, dtype=wg.int64))
    with pytest.raises(RuntimeError, match="ignore_index cannot be specified"):
        F.linear_cross_entropy(wg.zeros(2, 3), wg.zeros(4, 3), wg.zeros(2, 4), ignore_index=1)
    with pytest.raises(ValueError, match="acc_policy"):
        wg.nn.LinearCrossEntropyOptions(acc_policy="fast")
    with pytest.raises(ValueError, match="batch_chunk_size"):
        wg.nn.LinearCrossEntropyOptions(batch_chunk_size=0)
    x = wg.tensor(_randn(6, 3), requires_grad=True)
    loss = F.linear_cross_entropy(x, wg.tensor(_randn(5, 3)), wg.tensor(RNG.integers(0, 5, 6)),
                                  options=wg.nn.LinearCrossEntropyOptions(batch_chunk_size=2))
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="allow_retain_graph"):
        loss.backward()


# --------------------------------------------------------------------------------------------------- low rank
def test_svd_lowrank_recovers_a_low_rank_matrix():
    a = _randn(2, 30, 3) @ _randn(2, 3, 20)  # a batch of rank-3 matrices
    wg.manual_seed(0)
    u, s, v = wg.svd_lowrank(wg.tensor(a), q=5)
    assert tuple(u.shape) == (2, 30, 5) and tuple(s.shape) == (2, 5) and tuple(v.shape) == (2, 20, 5)
    np.testing.assert_allclose((u @ wg.diag_embed(s) @ v.mT).numpy(), a, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(s.numpy()[:, :3], torch.linalg.svdvals(torch.tensor(a))[:, :3].numpy(), rtol=1e-4)
    wide = a.transpose(0, 2, 1).copy()  # m < n: the conjugate transpose's factors, swapped
    u, s, v = wg.svd_lowrank(wg.tensor(wide), q=4)
    assert tuple(u.shape) == (2, 20, 4) and tuple(v.shape) == (2, 30, 4)
    np.testing.assert_allclose((u @ wg.diag_embed(s) @ v.mT).numpy(), wide, rtol=1e-3, atol=1e-3)


def test_pca_lowrank_centres_and_checks_q():
    a = _randn(40, 3) @ _randn(3, 8) + 5.0
    wg.manual_seed(1)
    u, s, v = wg.pca_lowrank(wg.tensor(a), q=3)
    centred = a - a.mean(0, keepdims=True)
    np.testing.assert_allclose((u @ wg.diag(s) @ v.T).numpy(), centred, rtol=1e-3, atol=1e-3)
    with pytest.raises(ValueError, match="q"):
        wg.pca_lowrank(wg.tensor(a), q=9)


def test_svd_lowrank_is_differentiable():
    x = wg.tensor(_randn(12, 2) @ _randn(2, 9), requires_grad=True)
    wg.manual_seed(2)
    _, s, _ = wg.svd_lowrank(x, q=2, niter=3)
    s.sum().backward()  # d(nuclear norm of a rank-2 matrix) = U Vᵀ
    u, _, vh = np.linalg.svd(x.detach().numpy(), full_matrices=False)
    np.testing.assert_allclose(x.grad.numpy(), u[:, :2] @ vh[:2], rtol=1e-3, atol=1e-3)


# --------------------------------------------------------------------------------------------- fractional pool
@pytest.mark.parametrize("d, shape, kernel, out", [(2, (2, 3, 9, 11), 3, (3, 4)), (2, (3, 10, 7), (2, 3), (5, 3)),
                                                   (3, (2, 2, 6, 7, 8), 2, (3, 4, 5))])
def test_fractional_max_pool_with_fixed_samples(d, shape, kernel, out):
    tx, wx = _pair(_randn(*shape), True)
    batch = shape[0] if len(shape) == d + 2 else 1
    samples = RNG.uniform(0, 1, (batch, shape[-d - 1], d)).astype(np.float32)
    name = f"fractional_max_pool{d}d"
    t_out, t_idx = getattr(torch.nn.functional, name)(tx, kernel, output_size=out, return_indices=True,
                                                      _random_samples=torch.tensor(samples))
    w_out, w_idx = getattr(wg.nn.functional, name)(wx, kernel, output_size=out, return_indices=True,
                                                   _random_samples=wg.tensor(samples))
    _close(w_out, t_out)
    np.testing.assert_array_equal(w_idx.numpy(), t_idx.numpy())
    c = _randn(*t_out.shape)
    t_out.backward(torch.tensor(c))
    w_out.backward(wg.tensor(c))
    _close(wx.grad, tx.grad)


def test_fractional_max_pool_module_and_errors():
    pool = wg.nn.FractionalMaxPool2d(2, output_ratio=0.5)
    assert tuple(pool(wg.zeros(1, 2, 8, 6)).shape) == (1, 2, 4, 3)
    out, idx = wg.nn.FractionalMaxPool3d(2, output_size=2, return_indices=True)(wg.zeros(2, 4, 4, 4))
    assert tuple(out.shape) == tuple(idx.shape) == (2, 2, 2, 2)
    with pytest.raises(ValueError, match="output_size or an output_ratio"):
        wg.nn.functional.fractional_max_pool2d(wg.zeros(1, 1, 4, 4), 2)
    with pytest.raises(RuntimeError, match="do not fit"):
        wg.nn.functional.fractional_max_pool2d(wg.zeros(1, 1, 4, 4), 3, output_size=3)


# ---------------------------------------------------------------------------------------------------- LDLᵀ
def _symmetric_cases():
    """Symmetric matrices that take each of Bunch-Kaufman's branches: 1x1 pivots, row swaps, 2x2 blocks, a zero
    diagonal, a zero pivot (singular D)."""
    cases = []
    for trial in range(40):
        n = 1 + trial % 7
        a = _randn(n, n)
        if trial % 3 == 0:
            np.fill_diagonal(a, 0.0)
        if trial % 8 == 1:
            a[trial % n, :] = 0.0
        cases.append(a + a.T)
    return cases


def test_ldl_factor_matches_lapack_pivots_and_solve():
    for a in _symmetric_cases():
        t = torch.linalg.ldl_factor_ex(torch.tensor(a))
        w = wg.linalg.ldl_factor_ex(wg.tensor(a))
        _close(w.LD, t.LD, 1e-4, 1e-4)
        np.testing.assert_array_equal(w.pivots.numpy(), t.pivots.numpy())
        assert w.pivots.dtype == wg.int32 and int(w.info) == int(t.info)
        if int(t.info) == 0:
            b = _randn(a.shape[0], 3)
            expected = torch.linalg.ldl_solve(t.LD, t.pivots, torch.tensor(b))
            _close(wg.linalg.ldl_solve(w.LD, w.pivots, wg.tensor(b)), expected, 1e-3, 1e-3)


def test_ldl_batched_broadcast_and_errors():
    a = np.stack([m for m in _symmetric_cases() if m.shape[0] == 4][:3])
    t_ld, t_piv = torch.linalg.ldl_factor(torch.tensor(a))
    w_ld, w_piv = wg.linalg.ldl_factor(wg.tensor(a))
    _close(w_ld, t_ld, 1e-4, 1e-4)
    np.testing.assert_array_equal(w_piv.numpy(), t_piv.numpy())
    b = _randn(4, 2)  # one right-hand side for the whole batch
    _close(wg.linalg.ldl_solve(w_ld, w_piv, wg.tensor(b)), torch.linalg.ldl_solve(t_ld, t_piv, torch.tensor(b)),
           1e-3, 1e-3)
    with pytest.raises(RuntimeError, match="not invertible"):
        wg.linalg.ldl_factor(wg.zeros(3, 3))
    with pytest.raises(RuntimeError, match="square"):
        wg.linalg.ldl_factor(wg.zeros(2, 3))


# ------------------------------------------------------------------------------------------- geqrf / ormqr
@pytest.mark.parametrize("shape", [(5, 5), (6, 3), (3, 6), (2, 4, 3)])
def test_geqrf_matches_lapack(shape):
    a = _randn(*shape)
    if shape == (5, 5):
        a[:, 1] = 0.0  # a zero column below the diagonal: tau 0 (no reflection)
    t_a, t_tau = torch.geqrf(torch.tensor(a))
    w_a, w_tau = wg.geqrf(wg.tensor(a))
    _close(w_a, t_a, 1e-4, 1e-5)
    _close(w_tau, t_tau, 1e-4, 1e-5)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
def test_ormqr_values_and_gradients(left, transpose):
    t_a, t_tau = torch.geqrf(torch.tensor(_randn(2, 5, 3)))
    c = _randn(2, 5, 4) if left else _randn(2, 4, 5)
    t_args = [torch.tensor(v, requires_grad=True) for v in (t_a.numpy(), t_tau.numpy(), c)]
    w_args = [wg.tensor(v.detach().numpy(), requires_grad=True) for v in t_args]
    t_out = torch.ormqr(*t_args, left, transpose)
    w_out = wg.ormqr(*w_args, left, transpose)
    _close(w_out, t_out)
    g = _randn(*t_out.shape)
    t_out.backward(torch.tensor(g))
    w_out.backward(wg.tensor(g))
    for w, t in zip(w_args, t_args):
        _close(w.grad, t.grad, 1e-3, 1e-3)
    with pytest.raises(RuntimeError, match="must be equal"):
        wg.ormqr(w_args[0], w_args[1], wg.zeros(2, 3, 3))


def test_geqrf_and_ormqr_are_tensor_methods():
    a = _randn(4, 3)
    t_a, t_tau = torch.tensor(a).geqrf()
    w_a, w_tau = wg.tensor(a).geqrf()
    _close(w_a, t_a)
    _close(w_a.ormqr(w_tau, wg.eye(4), transpose=True), t_a.ormqr(t_tau, torch.eye(4), transpose=True))


# -------------------------------------------------------------------------------------------------- OpInfo
def test_opinfo_entries_pass_on_cpu():
    assert_opinfo_entries_pass([
        "native_layer_norm", "native_batch_norm", "native_group_norm", "_native_batch_norm_legit",
        "_softmax_backward_data", "_chunk_cat", "grid_sampler_2d", "nn.functional.linear_cross_entropy",
        "nn.functional.linear_cross_entropy:chunked", "nn.functional.linear_cross_entropy:chunked_none",
        "svd_lowrank", "pca_lowrank", "nn.functional.fractional_max_pool2d", "linalg.ldl_factor",
        "linalg.ldl_factor_ex", "linalg.ldl_solve", "geqrf", "ormqr", "slice", "native_dropout_backward",
        "_batch_norm_with_update", "max_pool2d_with_indices_backward", "_unsafe_masked_index",
        "_unsafe_masked_index_put_accumulate", "torch.ops.aten._safe_softmax.default"], "cpu")


def test_safe_softmax_and_masked_index_ops():
    x = _randn(3, 4)
    x[1] = -np.inf  # a fully masked row: zeros, with zero gradients
    tx, wx = _pair(x, True)
    t = torch.ops.aten._safe_softmax(tx, 1)
    w = wg.ops.aten._safe_softmax(wx, 1)
    _close(w, t)
    c = _randn(3, 4)
    t.backward(torch.tensor(c))
    w.backward(wg.tensor(c))
    _close(wx.grad, tx.grad)
    (ty, wy), mask = _pair(_randn(4, 5), True), RNG.uniform(size=(6, 6)) > 0.4
    rows, cols = RNG.integers(-2, 7, (6, 1)), RNG.integers(-2, 7, (1, 6))
    t = torch._unsafe_masked_index(ty, torch.tensor(mask), [torch.tensor(rows), torch.tensor(cols)], -3.0)
    w = wg._unsafe_masked_index(wy, wg.tensor(mask), [wg.tensor(rows), wg.tensor(cols)], -3.0)
    _close(w, t)
    values = _randn(6, 6)
    t = torch._unsafe_masked_index_put_accumulate(ty, torch.tensor(mask), [torch.tensor(rows), torch.tensor(cols)],
                                                  torch.tensor(values))
    w = wg._unsafe_masked_index_put_accumulate(wy, wg.tensor(mask), [wg.tensor(rows), wg.tensor(cols)],
                                               wg.tensor(values))
    _close(w, t)
    with pytest.raises(RuntimeError, match="bool"):
        wg._unsafe_masked_index(wy, wg.tensor(rows), [wg.tensor(rows)], 0.0)
