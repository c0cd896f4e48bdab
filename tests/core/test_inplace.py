"""In-place ops with PyTorch's autograd semantics, on every device: the in-place result takes the tensor's
place in the graph (relu_, F.relu(inplace=True), +=, x[i] = v, masked_fill_, fill_, copy_, ...), and the
version counters refuse, with PyTorch's error, a backward that would read values its forward did not see."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES


def _setitem(y, index, value):
    y[index] = value
    return y


CASES = {
    "relu_": lambda L, F, x: (x * 2).relu_() * 3,
    "F.relu(inplace)": lambda L, F, x: F.relu(x * 2, inplace=True) * x,
    "nn.ReLU(inplace)": lambda L, F, x: L.nn.ReLU(inplace=True)(x - 0.5) * x,
    "sigmoid_": lambda L, F, x: (x * 2).sigmoid_(),
    "exp_ (needs its input)": lambda L, F, x: (x * 1).exp_() * 2,
    "leaky_relu(inplace)": lambda L, F, x: F.leaky_relu(x * 2, 0.2, inplace=True),
    "clamp_": lambda L, F, x: (x * 2).clamp_(-0.5, 0.5),
    "add_": lambda L, F, x: (x * 2).add_(x),
    "+=": lambda L, F, x: (lambda y: y.__iadd__(x * x))(x * 2),
    "mul_": lambda L, F, x: (x + 1).mul_(x),
    "x[0, 1:3] = v": lambda L, F, x: _setitem(x * 2, (0, slice(1, 3)), x[1, :2] * 5),
    "x[1] = 0": lambda L, F, x: _setitem(x * 2, 1, 0.0),
    "x[mask] = 0": lambda L, F, x: _setitem(x * 2, x > 0, 0.0),
    "x[[0, 2]] = v": lambda L, F, x: _setitem(x * 2, [0, 2], x[1] * 3),
    "masked_fill_": lambda L, F, x: (x * 2).masked_fill_(x > 0.5, 1.0) * x,
    "fill_": lambda L, F, x: (x * 2).fill_(3.0) + x,
    "zero_": lambda L, F, x: (x * 2).zero_() + x,
    "copy_": lambda L, F, x: (x * 2).copy_(x * x),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_in_place_ops_in_the_graph_match_torch(device, case):
    data = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    x = wg.tensor(data, device=device, requires_grad=True)
    out = CASES[case](wg, wg.nn.functional, x)
    (out * wg.arange(1.0, 13.0, device=device).reshape(3, 4)).sum().backward()
    t = torch.tensor(data, requires_grad=True)
    tout = CASES[case](torch, torch.nn.functional, t)
    (tout * torch.arange(1.0, 13.0).reshape(3, 4)).sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_a_residual_block_with_inplace_relu_and_add_trains_as_in_torch(device):
    def block(nn):
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.c1, self.b1 = nn.Conv2d(3, 3, 3, padding=1), nn.BatchNorm2d(3)
                self.c2, self.b2 = nn.Conv2d(3, 3, 3, padding=1), nn.BatchNorm2d(3)
                self.relu = nn.ReLU(inplace=True)

            def forward(self, x):
                out = self.relu(self.b1(self.c1(x)))
                out = self.b2(self.c2(out))
                out += x
                return self.relu(out)
        return Block()

    torch.manual_seed(0)
    reference = block(torch.nn)
    model = block(wg.nn)
    model.load_state_dict({k: wg.tensor(v.detach().numpy()) for k, v in reference.state_dict().items()})
    model.to(device)
    data = np.random.default_rng(1).normal(size=(2, 3, 5, 5)).astype(np.float32)
    x = wg.tensor(data, device=device, requires_grad=True)
    model(x).sum().backward()
    t = torch.tensor(data, requires_grad=True)
    reference(t).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), atol=1e-4)
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), dict(reference.named_parameters())[name].grad.numpy(), atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_modifying_what_a_backward_saved_raises_torchs_error(device):
    x = wg.randn(3, requires_grad=True, device=device)
    y = x.exp()  # exp's backward reads its output
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    x = wg.randn(3, requires_grad=True, device=device)
    h = (x * 2).relu_()
    h.relu_()  # the first relu_'s backward saved h: torch refuses this backward too
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        h.sum().backward()
    w = wg.randn(3, requires_grad=True, device=device)
    a = x * w  # mul saves x and w
    with wg.no_grad():
        w.add_(1)  # an optimizer step between forward and backward
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        a.sum().backward()


@pytest.mark.parametrize("device", DEVICES)
def test_views_and_bases_written_through_each_other_are_refused(device):
    # webgrad does not rebase views: a view whose base was modified in place (or the reverse) would give a
    # gradient missing that op, so it refuses to join the graph instead
    x = wg.randn(3, 4, requires_grad=True, device=device)
    h = x * 2
    v = h[0]
    h.relu_()
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        v.sum()
    h = x * 2
    h[0].relu_()
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        h * 1


@pytest.mark.parametrize("device", DEVICES)
def test_leaves_and_dtypes_are_refused_as_torch_refuses_them(device):
    x = wg.randn(3, requires_grad=True, device=device)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(1)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x[0] = 1.0
    ints = wg.tensor([1, 2], device=device)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        ints.add_(1.5)
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2]).add_(1.5)  # (the same refusal)


@pytest.mark.parametrize("device", DEVICES)
def test_version_counters_count_writes_and_are_shared_by_views(device):
    x = wg.zeros(4, device=device)
    v = x[1:3]
    assert x._version == v._version == 0
    x.add_(1)
    v.mul_(2)
    x[0] = 5.0
    x.zero_()
    t = torch.zeros(4)
    tv = t[1:3]
    t.add_(1)
    tv.mul_(2)
    t[0] = 5.0
    t.zero_()
    assert x._version == v._version == t._version == 4


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("make", [lambda p: wg.optim.SGD(p, lr=0.1), lambda p: wg.optim.AdamW(p, lr=0.1)],
                         ids=["SGD", "AdamW"])
def test_an_optimizer_step_between_forward_and_backward_is_refused(device, make):
    w = wg.nn.Parameter(wg.randn(3, device=device))
    opt = make([w])
    x = wg.randn(3, device=device)
    (w * x).sum().backward()
    opt.step()
    opt.zero_grad()
    loss = (w * w).sum()  # mul saves w
    w.grad = wg.ones(3, device=device)
    opt.step()  # w changes: the recorded product saw its old values
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    assert w._version >= 2


# An op's result written in place: PyTorch refuses the backward only where the derivative reads the result
# (exp, sigmoid, tanh, sqrt, ...); a derivative that reads the input alone (pow, sin, abs, clamp, ...) keeps
# only the input, so the write is harmless (the old VAE idiom: mu.pow(2).add_(logvar.exp())).
RESULT_WRITTEN = {
    "pow(2)": lambda L, x: x.pow(2), "**3": lambda L, x: x ** 3, "square": lambda L, x: L.square(x),
    "sin": lambda L, x: L.sin(x), "log": lambda L, x: L.log(x.abs() + 1), "abs": lambda L, x: x.abs(),
    "neg": lambda L, x: -x, "clamp": lambda L, x: x.clamp(-1, 1), "erf": lambda L, x: L.erf(x),
    "leaky_relu": lambda L, x: L.nn.functional.leaky_relu(x, 0.1),
    "softplus": lambda L, x: L.nn.functional.softplus(x), "2 ** x": lambda L, x: 2 ** x,
    "exp": lambda L, x: L.exp(x), "sigmoid": lambda L, x: L.sigmoid(x), "tanh": lambda L, x: L.tanh(x),
    "sqrt": lambda L, x: L.sqrt(x.abs() + 1), "elu": lambda L, x: L.nn.functional.elu(x),
    "celu": lambda L, x: L.nn.functional.celu(x, 1.5), "selu": lambda L, x: L.nn.functional.selu(x),
    "relu": lambda L, x: L.relu(x),
}


@pytest.mark.parametrize("case", list(RESULT_WRITTEN))
def test_writing_an_ops_result_in_place_is_refused_as_torch_refuses_it(device, case):
    def run(L, dev):
        x = L.tensor([0.5, -1.5, 2.0, -0.25], device=dev, requires_grad=True)
        y = RESULT_WRITTEN[case](L, x)
        y.add_(1)
        try:
            (y * y).sum().backward()
        except RuntimeError as e:
            assert "inplace" in str(e)
            return None
        return x.grad.detach().to("cpu").numpy()
    ref, ours = run(torch, "cpu"), run(wg, device)
    assert (ref is None) == (ours is None), (ref, ours)
    if ref is not None:
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)


VIEW_CASES = {
    "unsqueeze_": lambda y: y.unsqueeze_(1),
    "squeeze_": lambda y: y.unsqueeze_(0).squeeze_(0),
    "t_": lambda y: y.t_(),
    "transpose_": lambda y: y.transpose_(0, 1),
    "swapdims_": lambda y: y.swapdims_(1, 0),
    "swapaxes_": lambda y: y.swapaxes_(0, 1),
}


@pytest.mark.parametrize("case", list(VIEW_CASES), ids=list(VIEW_CASES))
def test_in_place_view_ops_reshape_the_tensor_itself_as_torch(case):
    """x.unsqueeze_(-1) and friends change x's own shape and strides over the same storage; in the graph x takes
    the view's place, and a leaf that requires grad is refused, as PyTorch does."""
    data = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    results = []
    for L in (wg, torch):
        x = L.tensor(data, requires_grad=True)
        y = x * 2
        out = VIEW_CASES[case](y)
        assert out is y
        weights = L.tensor(np.arange(y.numel(), dtype=np.float32).reshape(tuple(y.shape)))
        (y * weights).sum().backward()
        results.append((tuple(y.shape), y.stride(), y.detach().numpy(), x.grad.numpy()))
        plain = L.tensor(data)
        VIEW_CASES[case](plain)
        assert tuple(plain.shape) == tuple(y.shape)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            VIEW_CASES[case](L.tensor(data, requires_grad=True))
    (ws, wst, wy, wg_grad), (ts, tst, ty, t_grad) = results
    assert ws == ts and tuple(wst) == tuple(tst)
    np.testing.assert_allclose(wy, ty)
    np.testing.assert_allclose(wg_grad, t_grad)
