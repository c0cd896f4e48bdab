"""grad_fn names as PyTorch's: for ~110 common expressions, y.grad_fn.name() and type(y.grad_fn).__name__ are
torch's (ViewBackward0 for a reshape that is a view, UnsafeViewBackward0 for one that copies, SumBackward1 for a
sum over dims, AddmmBackward0 for a linear layer with a bias, FnBackward for a custom Function...).

Where webgrad composes an op of others, the composite's last node carries torch's name; what lies behind it
(next_functions) may still differ. Known exclusions, where torch's name comes from its internals:
- scaled_dot_product_attention: torch's node depends on the backend its dispatcher picks (the math path ends in an
  _unsafe_view, flash and memory-efficient kernels have nodes of their own); webgrad's is one fused node;
- einsum: torch's last node depends on the contraction path opt_einsum chose (a bmm and then views/permutes)."""

import numpy as np
import pytest
import torch

import webgrad as wg


def _leaf(lib, *shape, seed=0):
    return lib.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32)).requires_grad_()


def _F(lib):
    return lib.nn.functional


CASES = {
    # views and reshapes
    "t": lambda L, x, m: x.t(),
    "T": lambda L, x, m: x.T,
    "mT": lambda L, x, m: x.mT,
    "transpose": lambda L, x, m: x.transpose(0, 1),
    "swapaxes": lambda L, x, m: x.swapaxes(0, 1),
    "permute": lambda L, x, m: x.permute(1, 0),
    "movedim": lambda L, x, m: x.movedim(0, 1),
    "reshape a view": lambda L, x, m: x.reshape(12),
    "reshape a copy": lambda L, x, m: x.t().reshape(12),
    "view": lambda L, x, m: x.view(2, 6),
    "flatten": lambda L, x, m: x.flatten(),
    "flatten a copy": lambda L, x, m: x.t().flatten(),
    "unflatten": lambda L, x, m: x.unflatten(1, (2, 2)),
    "unsqueeze": lambda L, x, m: x.unsqueeze(0),
    "squeeze(dim)": lambda L, x, m: x.unsqueeze(0).squeeze(0),
    "squeeze()": lambda L, x, m: x.unsqueeze(0).squeeze(),
    "squeeze(dims)": lambda L, x, m: x[None, None].squeeze((0, 1)),
    "expand": lambda L, x, m: x[:1].expand(5, 4),
    "select": lambda L, x, m: x[0],
    "slice": lambda L, x, m: x[1:],
    "slice of columns": lambda L, x, m: x[:, 1:],
    "narrow": lambda L, x, m: x.narrow(0, 0, 1),
    "split": lambda L, x, m: x.split(1)[0],
    "split with sizes": lambda L, x, m: x.split([1, 2])[0],
    "chunk": lambda L, x, m: x.chunk(2, 1)[0],
    "unbind": lambda L, x, m: x.unbind(0)[0],
    "advanced index": lambda L, x, m: x[L.tensor([0, 2])],
    "gather": lambda L, x, m: x.gather(1, L.tensor([[0], [1], [2]])),
    "index_select": lambda L, x, m: x.index_select(0, L.tensor([0, 2])),
    "stack": lambda L, x, m: L.stack([x, m]),
    "cat": lambda L, x, m: L.cat([x, m]),
    "repeat": lambda L, x, m: x.repeat(2, 1),
    "flip": lambda L, x, m: x.flip(0),
    "roll": lambda L, x, m: x.roll(1, 0),
    "tril": lambda L, x, m: x.tril(),
    "triu": lambda L, x, m: x.triu(1),
    "clone": lambda L, x, m: x.clone(),
    "contiguous": lambda L, x, m: x.t().contiguous(),
    "to double": lambda L, x, m: x.double(),
    "pad": lambda L, x, m: _F(L).pad(x, (1, 1)),
    # reductions
    "sum()": lambda L, x, m: x.sum(),
    "sum(dim)": lambda L, x, m: x.sum(1),
    "sum(dims)": lambda L, x, m: x.sum((0, 1)),
    "sum(dtype)": lambda L, x, m: x.sum(dtype=L.float64),
    "mean()": lambda L, x, m: x.mean(),
    "mean(dim)": lambda L, x, m: x.mean(0),
    "mean(dim, keepdim)": lambda L, x, m: x.mean(1, keepdim=True),
    "max()": lambda L, x, m: x.max(),
    "max(dim)": lambda L, x, m: x.max(1)[0],
    "min()": lambda L, x, m: x.min(),
    "amax": lambda L, x, m: x.amax(1),
    "prod": lambda L, x, m: x.prod(),
    "var": lambda L, x, m: x.var(),
    "std(dim)": lambda L, x, m: x.std(1),
    "norm": lambda L, x, m: x.norm(),
    "logsumexp": lambda L, x, m: x.logsumexp(1),
    "cumsum": lambda L, x, m: x.cumsum(0),
    "sort": lambda L, x, m: x.sort(1)[0],
    "topk": lambda L, x, m: x.topk(2)[0],
    # elementwise
    "add": lambda L, x, m: x + m,
    "add scalar": lambda L, x, m: x + 1,
    "sub": lambda L, x, m: x - m,
    "scalar - tensor": lambda L, x, m: 1 - x,
    "mul": lambda L, x, m: x * m,
    "mul scalar": lambda L, x, m: x * 2,
    "div": lambda L, x, m: x / m,
    "div scalar": lambda L, x, m: x / 2,
    "neg": lambda L, x, m: -x,
    "pow scalar": lambda L, x, m: x ** 2,
    "pow tensor": lambda L, x, m: x.abs() ** m,
    "scalar ** tensor": lambda L, x, m: 2.0 ** x,
    "square": lambda L, x, m: x.square(),
    "sqrt": lambda L, x, m: x.abs().sqrt(),
    "rsqrt": lambda L, x, m: x.abs().rsqrt(),
    "exp": lambda L, x, m: x.exp(),
    "log": lambda L, x, m: x.abs().log(),
    "abs": lambda L, x, m: x.abs(),
    "sin": lambda L, x, m: x.sin(),
    "tanh": lambda L, x, m: x.tanh(),
    "sigmoid": lambda L, x, m: x.sigmoid(),
    "relu": lambda L, x, m: x.relu(),
    "gelu": lambda L, x, m: _F(L).gelu(x),
    "silu": lambda L, x, m: _F(L).silu(x),
    "leaky_relu": lambda L, x, m: _F(L).leaky_relu(x),
    "elu": lambda L, x, m: _F(L).elu(x),
    "softplus": lambda L, x, m: _F(L).softplus(x),
    "clamp(min, max)": lambda L, x, m: x.clamp(-0.5, 0.5),
    "clamp(min)": lambda L, x, m: x.clamp(min=0),
    "where": lambda L, x, m: L.where(x > 0, x, m),
    "maximum": lambda L, x, m: L.maximum(x, m),
    "masked_fill": lambda L, x, m: x.masked_fill(x > 0, 0.0),
    "lerp": lambda L, x, m: L.lerp(x, m, 0.3),
    # products
    "matmul": lambda L, x, m: x @ m.t(),
    "mm": lambda L, x, m: x.mm(m.t()),
    "bmm": lambda L, x, m: x.unsqueeze(0).bmm(m.t().unsqueeze(0)),
    "matmul 3-D @ 2-D": lambda L, x, m: x.unsqueeze(0) @ m.t(),
    "matmul 3-D @ 3-D": lambda L, x, m: L.stack([x, m]) @ L.stack([m, x]).mT,
    "matmul 2-D @ 1-D": lambda L, x, m: x @ m[0],
    "matmul 1-D @ 2-D": lambda L, x, m: x[0] @ m.t(),
    "mv": lambda L, x, m: x.mv(m[0]),
    "dot": lambda L, x, m: x[0].dot(m[0]),
    "outer": lambda L, x, m: L.outer(x[0], m[0]),
    "addmm": lambda L, x, m: L.addmm(m[0, :3], x, m.t()),
    "baddbmm": lambda L, x, m: L.baddbmm(x[None, :, :3], x[None], m.t()[None]),
    "linear": lambda L, x, m: _F(L).linear(x, m),
    "linear with bias": lambda L, x, m: _F(L).linear(x, m, _leaf(L, 3, seed=7)),
    "linear 3-D": lambda L, x, m: _F(L).linear(x.unsqueeze(0), m),
    "linear 3-D with bias": lambda L, x, m: _F(L).linear(x.unsqueeze(0), m, _leaf(L, 3, seed=7)),
    "linear 3-D, bias a strided view": lambda L, x, m: _F(L).linear(x.unsqueeze(0), m, m[:, 0]),
    "linear 3-D input a strided view": lambda L, x, m: _F(L).linear(L.stack([x, m], 1), m, _leaf(L, 3, seed=7)),
    # layers and losses
    "softmax": lambda L, x, m: x.softmax(1),
    "log_softmax": lambda L, x, m: x.log_softmax(1),
    "layer_norm": lambda L, x, m: _F(L).layer_norm(x, (4,)),
    "embedding": lambda L, x, m: _F(L).embedding(L.tensor([0, 2]), x),
    "conv1d": lambda L, x, m: _F(L).conv1d(x.unsqueeze(0), m[:, :3].unsqueeze(-1)),
    "max_pool1d": lambda L, x, m: _F(L).max_pool1d(x.unsqueeze(0), 2),
    "avg_pool1d": lambda L, x, m: _F(L).avg_pool1d(x.unsqueeze(0), 2),
    "mse_loss": lambda L, x, m: _F(L).mse_loss(x, m.detach()),
    "cross_entropy": lambda L, x, m: _F(L).cross_entropy(x, L.tensor([0, 1, 2])),
    "nll_loss": lambda L, x, m: _F(L).nll_loss(x, L.tensor([0, 1, 2])),
    "binary_cross_entropy_with_logits":
        lambda L, x, m: _F(L).binary_cross_entropy_with_logits(x, m.detach().sigmoid()),
}


def _names(lib, expression):
    y = expression(lib, _leaf(lib, 3, 4), _leaf(lib, 3, 4, seed=1))
    return y.grad_fn.name(), type(y.grad_fn).__name__


@pytest.mark.parametrize("name", list(CASES))
def test_grad_fn_name_is_torchs(name):
    assert _names(wg, CASES[name]) == _names(torch, CASES[name])


def test_custom_function_node_is_named_as_torchs():
    names = []
    for lib in (wg, torch):
        class Double(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2
        y = Double.apply(_leaf(lib, 3))
        names.append((y.grad_fn.name(), type(y.grad_fn).__name__))
    assert names[0] == names[1] == ("DoubleBackward", "DoubleBackward")


def test_op_name_webgrad_compares_stays_the_op():
    """webgrad's own code and tests compare grad_fn.name with the op ("Sum"); the overload shows only in name()."""
    y = _leaf(wg, 3, 4).sum(1)
    assert y.grad_fn.name == "Sum" and y.grad_fn.name() == "SumBackward1"
    assert isinstance(y.grad_fn, wg.autograd.graph.Node)
