"""Sparse COO tensors on torch.device("webgpu") (webgrad.torch_device.sparse): construction, moves, the products
with dense tensors and their gradients, each against PyTorch's sparse tensors on the CPU, in strict mode (no op
falls back to the CPU unless the test says so)."""

import io
import warnings

import pytest

from helpers import import_torch_device

torch, td = import_torch_device()

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


DEV = "webgpu"
pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks are implicitly disabled")

INDICES = torch.tensor([[0, 1, 1, 2, 0, 3], [2, 0, 2, 1, 2, 3]])  # (0, 2) twice: an uncoalesced tensor
VALUES = torch.tensor([3.0, 4.0, 5.0, 6.0, 1.0, -2.0])


def cpu_sparse():
    return torch.sparse_coo_tensor(INDICES, VALUES, (4, 5))


def same_sparse(got, expected):
    """Same layout, size, coalesced flag, and entries (compared coalesced)."""
    assert got.device.type == DEV and got.layout is torch.sparse_coo
    assert got.shape == expected.shape and got.is_coalesced() == expected.is_coalesced()
    back = got.cpu()
    assert back.is_sparse and back.device.type == "cpu"
    torch.testing.assert_close(back.coalesce().indices(), expected.coalesce().indices())
    torch.testing.assert_close(back.coalesce().values(), expected.coalesce().values())


def test_made_and_moved_on_the_device():
    a = cpu_sparse()
    with td.strict():
        moved = a.to(DEV)
        made = torch.sparse_coo_tensor(INDICES.to(DEV), VALUES.to(DEV), (4, 5))
        direct = torch.sparse_coo_tensor(INDICES, VALUES, (4, 5), device=DEV)
        inferred = torch.sparse_coo_tensor(INDICES.to(DEV), VALUES.to(DEV))
        for t in (moved, made, direct):
            same_sparse(t, a)
            assert t._nnz() == 6 and t.sparse_dim() == 2 and t.dense_dim() == 0 and t.dtype is torch.float32
        assert inferred.shape == (4, 4)
        torch.testing.assert_close(moved.to_dense().cpu(), a.to_dense())
        empty = torch.sparse_coo_tensor(size=(3, 4), device=DEV)
        assert empty._nnz() == 0 and empty.to_dense().cpu().abs().sum() == 0
        half = moved.to(torch.float16)
        assert half.dtype is torch.float16 and half._values().dtype is torch.float16
    assert "device='webgpu:0'" in repr(moved) and repr(moved).startswith("tensor(indices=tensor(")
    assert repr(moved).replace("device='webgpu:0', ", "") == repr(a)


def test_coalesce_and_what_an_uncoalesced_tensor_refuses():
    a, b = cpu_sparse(), cpu_sparse().to(DEV)
    with td.strict():
        assert not b.is_coalesced()
        for name in ("indices", "values"):
            with pytest.raises(RuntimeError, match=f"Cannot get {name} on an uncoalesced tensor"):
                getattr(b, name)()
        c = b.coalesce()
        assert c.is_coalesced() and c.coalesce() is c
        torch.testing.assert_close(c.indices().cpu(), a.coalesce().indices())
        torch.testing.assert_close(c.values().cpu(), a.coalesce().values())


def test_indices_outside_the_size_are_an_error():
    with pytest.raises(RuntimeError, match="size is inconsistent with indices: for dim 1, size is 2"):
        torch.sparse_coo_tensor(INDICES.to(DEV), VALUES.to(DEV), (4, 2))
    with pytest.raises(RuntimeError, match="found negative index -1 for dim 0"):
        torch.sparse_coo_tensor(torch.tensor([[-1, 0]], device=DEV), torch.ones(2, device=DEV), (3,))


@pytest.mark.parametrize("sparse_dim", [None, 1])
def test_dense_to_sparse_on_the_device(sparse_dim):
    x = torch.tensor([[0.0, 1.5, 0.0], [0.0, 0.0, 0.0], [-2.0, 0.0, 3.0]])
    args = () if sparse_dim is None else (sparse_dim,)
    with td.strict():
        got = x.to(DEV).to_sparse(*args)
    same_sparse(got, x.to_sparse(*args))
    torch.testing.assert_close(got.to_dense().cpu(), x)


def test_arithmetic_against_the_cpu():
    a, b = cpu_sparse(), cpu_sparse().to(DEV)
    dense = torch.randn(4, 5)
    with td.strict():
        same_sparse(-b, -a)
        same_sparse(b * 2.5, a * 2.5)
        same_sparse(b / 4, a / 4)
        same_sparse(b + b, a + a)
        same_sparse(b.t(), a.t())
        same_sparse(b.transpose(0, 1), a.transpose(0, 1))
        torch.testing.assert_close((dense.to(DEV) + b).cpu(), dense + a)
        torch.testing.assert_close(torch.add(dense.to(DEV), b, alpha=-2).cpu(), torch.add(dense, a, alpha=-2))
        torch.testing.assert_close(b.sum().cpu(), a.sum())
        same_sparse(dense.to(DEV).sparse_mask(b.coalesce()), dense.sparse_mask(a.coalesce()))


PRODUCTS = {
    "mm": lambda s, d: torch.mm(s, d),
    "spmm": lambda s, d: torch.spmm(s, d),
    "sparse.mm": lambda s, d: torch.sparse.mm(s, d),
    "matmul": lambda s, d: s @ d,
    "addmm": lambda s, d: torch.addmm(torch.ones(4, 3, device=d.device), s, d, beta=0.5, alpha=2.0),
    "dense @ sparse": lambda s, d: d.t() @ s.t().coalesce() @ torch.ones(4, 2, device=d.device),
}


@pytest.mark.parametrize("name", PRODUCTS)
def test_products_with_dense_tensors_and_their_gradients(name):
    """Each product's value, the dense operand's gradient and the sparse values' gradient, against the CPU."""
    product = PRODUCTS[name]
    torch.manual_seed(0)
    d = torch.randn(5, 3, requires_grad=True)
    v = VALUES.clone().requires_grad_()
    d_dev, v_dev = d.detach().to(DEV).requires_grad_(), VALUES.to(DEV).requires_grad_()
    expected = product(torch.sparse_coo_tensor(INDICES, v, (4, 5)), d)
    with td.strict():
        got = product(torch.sparse_coo_tensor(INDICES.to(DEV), v_dev, (4, 5)), d_dev)
        seed = torch.randn_like(expected)
        expected.backward(seed)
        got.backward(seed.to(DEV))
    torch.testing.assert_close(got.detach().cpu(), expected.detach())
    torch.testing.assert_close(d_dev.grad.cpu(), d.grad)
    torch.testing.assert_close(v_dev.grad.cpu(), v.grad)


def test_a_sparse_leaf_gets_a_sparse_gradient():
    a = cpu_sparse().coalesce().requires_grad_()
    b = cpu_sparse().coalesce().to(DEV).requires_grad_()
    x = torch.randn(5, 2)
    torch.sparse.mm(a, x).square().sum().backward()
    with td.strict():
        torch.sparse.mm(b, x.to(DEV)).square().sum().backward()
    same_sparse(b.grad, a.grad)


def test_a_graph_convolution_trains_as_on_the_cpu():
    """pytorch/examples' GCN: sparse features and a sparse normalised adjacency, two graph convolutions, Adam."""
    torch.manual_seed(0)
    nodes, features = 12, 7
    x = (torch.rand(nodes, features) < 0.3).float()
    edges = torch.randint(0, nodes, (2, 30))
    adj = torch.sparse_coo_tensor(edges, torch.ones(30), (nodes, nodes)) + torch.eye(nodes).to_sparse()
    degree = torch.sparse.sum(adj, 1).to_dense().rsqrt()
    adj = (torch.diag(degree).to_sparse() @ adj.to_dense() @ torch.diag(degree)).to_sparse()
    labels = torch.randint(0, 3, (nodes,))

    class GCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1, self.w2 = nn.Parameter(torch.randn(features, 8) * 0.3), nn.Parameter(torch.randn(8, 3) * 0.3)

        def forward(self, x, adj):
            h = F.relu(torch.spmm(adj, torch.mm(x, self.w1)))
            return F.log_softmax(torch.spmm(adj, torch.mm(h, self.w2)), dim=1)

    ref = GCN()
    model = GCN().to(DEV)
    model.load_state_dict(ref.state_dict())
    losses = {}
    for net, dev in ((ref, "cpu"), (model, DEV)):
        opt = torch.optim.Adam(net.parameters(), lr=0.05)
        inputs = (x.to_sparse().to(dev), adj.to(dev), labels.to(dev))
        losses[dev] = []
        with td.strict():
            for _ in range(3):
                opt.zero_grad()
                loss = F.nll_loss(net(*inputs[:2]), inputs[2])
                loss.backward()
                opt.step()
                losses[dev].append(loss.item())
    torch.testing.assert_close(torch.tensor(losses[DEV]), torch.tensor(losses["cpu"]), atol=1e-5, rtol=1e-4)


def test_other_ops_fall_back_to_the_cpu_once_warned_and_strict_mode_raises():
    a, b = cpu_sparse(), cpu_sparse().to(DEV)
    td.reset_fallback_counts()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.sin(b)
    assert any("aten.sin" in str(w.message) and "runs on the CPU" in str(w.message) for w in caught)
    same_sparse(got, torch.sin(a))
    assert td.fallback_counts() == {"aten.sin.default": 1}
    with td.strict(), pytest.raises(NotImplementedError, match="aten.sin.default has no webgrad kernel"):
        torch.sin(b)


def test_checkpoints_keep_sparse_tensors():
    b = cpu_sparse().to(DEV)
    buffer = io.BytesIO()
    torch.save({"adj": b}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)["adj"]
    same_sparse(loaded, cpu_sparse())
