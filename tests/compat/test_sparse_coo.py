"""Sparse COO tensors against torch on every device: sparse_coo_tensor, to_sparse, to_dense, coalesce,
indices/values, sparse @ dense (torch.sparse.mm, torch.spmm, torch.mm, @) and dense @ sparse, sparse + dense,
sparse.sum; values and the gradients of the values and the dense operands."""

import warnings

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES

warnings.filterwarnings("ignore", message="Sparse invariant checks")

I = [[0, 0, 1, 2, 2], [1, 1, 0, 2, 0]]  # (0, 1) twice: uncoalesced
V = np.array([1.0, 2.0, 3.0, -4.0, 0.5], dtype=np.float32)


def _np(t):
    return t.detach().to("cpu").numpy() if isinstance(t, wg.Tensor) else t.detach().numpy()


def _close(a, b, atol=1e-5):
    np.testing.assert_allclose(_np(a), _np(b), rtol=1e-5, atol=atol)


def _pair(arr, device, grad=True):
    return wg.tensor(arr, device=device, requires_grad=grad), torch.tensor(arr, requires_grad=grad)


def _grad_out(shape, seed=0):
    g = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return g


@pytest.mark.parametrize("device", DEVICES)
def test_construction_and_attributes(device):
    s = wg.sparse_coo_tensor(I, wg.tensor(V, device=device), (3, 3))
    t = torch.sparse_coo_tensor(I, torch.tensor(V), (3, 3))
    assert s.is_sparse and s.layout is wg.sparse_coo and not wg.ones(1).is_sparse and wg.ones(1).layout is wg.strided
    assert isinstance(s, wg.Tensor) and s.device.type == device
    assert (tuple(s.shape), s._nnz(), s.sparse_dim(), s.dense_dim(), s.is_coalesced(), s.dim(), s.numel()) == \
        (tuple(t.shape), t._nnz(), t.sparse_dim(), t.dense_dim(), t.is_coalesced(), t.dim(), t.numel())
    _close(s.to_dense(), t.to_dense())
    # indices from a NumPy array, values from a list, dtype= casts them, size inferred from the indices
    s2 = wg.sparse_coo_tensor(np.array(I, dtype=np.int32), [1, 1, 1, 1, 1], dtype=wg.int64, device=device)
    t2 = torch.sparse_coo_tensor(np.array(I, dtype=np.int32), [1, 1, 1, 1, 1], dtype=torch.int64)
    assert s2.dtype == wg.int64 and s2._indices().dtype == wg.int64 and tuple(s2.shape) == tuple(t2.shape)
    assert _np(s2.to_dense()).tolist() == t2.to_dense().numpy().tolist()
    # hybrid: values with a dense dim
    hv = np.arange(10, dtype=np.float32).reshape(5, 2)
    _close(wg.sparse_coo_tensor(I, wg.tensor(hv, device=device), (3, 3, 2)).to_dense(),
           torch.sparse_coo_tensor(I, torch.tensor(hv), (3, 3, 2)).to_dense())
    assert "layout=torch.sparse_coo" in repr(s) and "nnz=5" in repr(s)


@pytest.mark.parametrize("device", DEVICES)
def test_construction_errors_as_torch(device):
    v = wg.tensor(V, device=device)
    with pytest.raises(RuntimeError, match="indices and values must have same nnz"):
        wg.sparse_coo_tensor(I, v[:3], (3, 3))
    with pytest.raises(RuntimeError, match="size is inconsistent with indices: for dim 0, size is 2 but found index 2"):
        wg.sparse_coo_tensor(I, v, (2, 3))
    with pytest.raises(RuntimeError, match="found negative index"):
        wg.sparse_coo_tensor([[0, -1], [0, 0]], v[:2], (2, 2))
    with pytest.raises(RuntimeError, match="indices must be sparse_dim x nnz"):
        wg.sparse_coo_tensor([0, 1], v[:2], (2,))
    with pytest.raises(RuntimeError, match="Cannot get indices on an uncoalesced tensor, please call .coalesce"):
        wg.sparse_coo_tensor(I, v, (3, 3)).indices()
    with pytest.raises(RuntimeError, match="Cannot get values on an uncoalesced tensor"):
        wg.sparse_coo_tensor(I, v, (3, 3)).values()
    with pytest.raises(NotImplementedError, match="not supported on sparse COO tensors.*to_dense"):
        wg.sparse_coo_tensor(I, v, (3, 3)).exp()


@pytest.mark.parametrize("device", DEVICES)
def test_coalesce_and_its_gradient(device):
    wv, tv = _pair(V, device)
    s = wg.sparse_coo_tensor(I, wv, (3, 3)).coalesce()
    t = torch.sparse_coo_tensor(I, tv, (3, 3)).coalesce()
    assert s.is_coalesced() and _np(s.indices()).tolist() == t.indices().numpy().tolist()
    _close(s.values(), t.values())
    g = _grad_out(tuple(t.values().shape))
    (s.values() * wg.tensor(g, device=device)).sum().backward()
    (t.values() * torch.tensor(g)).sum().backward()
    _close(wv.grad, tv.grad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sparse_dim", [None, 1])
def test_to_sparse_and_to_dense_with_gradients(device, sparse_dim):
    x = np.array([[0.0, 1.5, 0.0], [0.0, 0.0, 0.0], [-2.0, 0.0, 3.0]], dtype=np.float32)
    wx, tx = _pair(x, device)
    args = () if sparse_dim is None else (sparse_dim,)
    s, t = wx.to_sparse(*args), tx.to_sparse(*args)
    assert s.is_coalesced() and _np(s.indices()).tolist() == t.indices().numpy().tolist()
    _close(s.values(), t.values())
    g = _grad_out((3, 3))
    (s.to_dense() * wg.tensor(g, device=device)).sum().backward()
    (t.to_dense() * torch.tensor(g)).sum().backward()
    _close(wx.grad, tx.grad)
    assert wx.to_dense() is wx and s.to_sparse() is s


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("how", ["sparse.mm", "spmm", "mm", "@", "matmul"])
def test_sparse_times_dense_with_gradients(device, how):
    wv, tv = _pair(V, device)
    d = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    wd, td = _pair(d, device)
    s, t = wg.sparse_coo_tensor(I, wv, (3, 3)), torch.sparse_coo_tensor(I, tv, (3, 3))
    call = {"sparse.mm": lambda L, a, b: L.sparse.mm(a, b), "spmm": lambda L, a, b: L.spmm(a, b),
            "mm": lambda L, a, b: L.mm(a, b), "@": lambda L, a, b: a @ b,
            "matmul": lambda L, a, b: L.matmul(a, b)}[how]
    out, ref = call(wg, s, wd), call(torch, t, td)
    assert not out.is_sparse
    _close(out, ref)
    g = _grad_out((3, 4), 2)
    (out * wg.tensor(g, device=device)).sum().backward()
    (ref * torch.tensor(g)).sum().backward()
    _close(wv.grad, tv.grad)
    _close(wd.grad, td.grad)


@pytest.mark.parametrize("device", DEVICES)
def test_dense_times_sparse_and_vectors(device):
    wv, tv = _pair(V, device)
    d = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    wd, td = _pair(d, device)
    s, t = wg.sparse_coo_tensor(I, wv, (3, 3)), torch.sparse_coo_tensor(I, tv, (3, 3))
    out, ref = wd @ s, td @ t
    _close(out, ref)
    out.sum().backward()
    ref.sum().backward()
    _close(wv.grad, tv.grad)
    _close(wd.grad, td.grad)
    vec = np.array([1.0, -1.0, 2.0], dtype=np.float32)
    _close(s @ wg.tensor(vec, device=device), t @ torch.tensor(vec))


@pytest.mark.parametrize("device", DEVICES)
def test_sparse_leaf_gradient_is_sparse_as_torch_sparse_mm(device):
    d = np.random.default_rng(4).standard_normal((3, 2)).astype(np.float32)
    for indices in (I, [[0, 1, 2], [1, 0, 2]]):
        n = len(indices[0])
        s = wg.sparse_coo_tensor(indices, wg.tensor(V[:n], device=device), (3, 3)).requires_grad_()
        t = torch.sparse_coo_tensor(indices, torch.tensor(V[:n]), (3, 3)).requires_grad_()
        assert s.is_leaf and s.requires_grad
        wg.sparse.mm(s, wg.tensor(d, device=device)).sum().backward()
        torch.sparse.mm(t, torch.tensor(d)).sum().backward()
        assert s.grad.is_sparse and s.grad.is_coalesced()
        assert _np(s.grad.indices()).tolist() == t.grad.coalesce().indices().numpy().tolist()
        _close(s.grad.values(), t.grad.coalesce().values())
        s.grad = None
        assert s.grad is None


@pytest.mark.parametrize("device", DEVICES)
def test_addition_promotion_and_scaling(device):
    """torch.eye(V) + an int64 sparse adjacency (the gcn example's line): a dense float result, duplicates summed."""
    s = wg.sparse_coo_tensor(I, wg.ones(5), (3, 3), dtype=wg.int64).to(device)
    t = torch.sparse_coo_tensor(I, torch.ones(5), (3, 3), dtype=torch.int64)
    out, ref = wg.eye(3, device=device) + s, torch.eye(3) + t
    assert not out.is_sparse and out.dtype == wg.float32
    _close(out, ref)
    with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported. Use add\(dense, sparse\)"):
        s + wg.eye(3, device=device)
    _close(wg.add(wg.eye(3, device=device), s, alpha=2), torch.add(torch.eye(3), t, alpha=2))
    _close(wg.eye(3, device=device) - s, torch.eye(3) - t)
    wv, tv = _pair(V, device)
    sf, tf = wg.sparse_coo_tensor(I, wv, (3, 3)), torch.sparse_coo_tensor(I, tv, (3, 3))
    both, ref_both = sf + sf * 2, tf + tf * 2
    assert both.is_sparse and not both.is_coalesced()
    _close(both.to_dense(), ref_both.to_dense())
    dense = np.arange(9, dtype=np.float32).reshape(3, 3)
    _close((sf * wg.tensor(dense, device=device)).to_dense(), (tf * torch.tensor(dense)).to_dense())
    _close((-sf / 2).to_dense(), (-tf / 2).to_dense())
    with pytest.raises(RuntimeError, match="same size"):
        wg.ones(2, 2, device=device) + sf


@pytest.mark.parametrize("device", DEVICES)
def test_sum_transpose_addmm_and_moves(device):
    wv, tv = _pair(V, device)
    s, t = wg.sparse_coo_tensor(I, wv, (3, 3)), torch.sparse_coo_tensor(I, tv, (3, 3))
    _close(wg.sparse.sum(s), torch.sparse.sum(t))
    for dim in (0, 1):
        _close(wg.sparse.sum(s, dim).to_dense(), torch.sparse.sum(t, dim).to_dense())
    _close(s.t().to_dense(), t.t().to_dense())
    _close(s.transpose(0, 1).to_dense(), t.transpose(0, 1).to_dense())
    base = np.ones((3, 2), dtype=np.float32)
    d = np.random.default_rng(5).standard_normal((3, 2)).astype(np.float32)
    _close(wg.sparse.addmm(wg.tensor(base, device=device), s, wg.tensor(d, device=device), beta=0.5, alpha=2.0),
           torch.sparse.addmm(torch.tensor(base), t, torch.tensor(d), beta=0.5, alpha=2.0))
    other = "cpu" if device == "webgpu" else device
    moved = s.to(other)
    assert moved.is_sparse and moved.device.type == other
    _close(moved.to_dense(), t.to_dense())
    assert s.double().dtype == wg.float64 if device == "cpu" else s.float().dtype == wg.float32
    legacy = wg.sparse.FloatTensor(wg.tensor(I), wg.tensor(V), wg.Size([3, 3]))
    _close(legacy.to_dense(), t.to_dense())


def test_sparse_graph_convolution_trains_as_torch():
    """Two steps of a GCN layer (features and the normalised adjacency sparse, as pytorch/examples' gcn)."""
    rng = np.random.default_rng(6)
    adj = (rng.random((6, 6)) < 0.4).astype(np.float32) + np.eye(6, dtype=np.float32)
    feats = (rng.random((6, 5)) < 0.5).astype(np.float32)
    w0 = rng.standard_normal((5, 3)).astype(np.float32)
    losses = {}
    for lib in (wg, torch):
        w = lib.tensor(w0, requires_grad=True)
        a, f = lib.tensor(adj).to_sparse(), lib.tensor(feats).to_sparse()
        opt = lib.optim.SGD([w], lr=0.5)
        losses[lib.__name__] = []
        for _ in range(2):
            opt.zero_grad()
            loss = lib.spmm(a, lib.mm(f, w)).relu().pow(2).mean()
            loss.backward()
            opt.step()
            losses[lib.__name__].append(loss.item())
    np.testing.assert_allclose(losses["webgrad"], losses["torch"], rtol=1e-5)
