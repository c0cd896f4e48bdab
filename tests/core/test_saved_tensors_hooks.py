"""autograd.graph.saved_tensors_hooks, save_on_cpu and disable_saved_tensors_hooks against PyTorch: how often the
hooks run on simple models, that backward computes with what unpack_hook returns, nesting, errors, and that the
graph lets go of the tensors themselves once pack_hook has them."""

import gc
import weakref

import numpy as np
import pytest
import torch
from helpers import webgpu_available

import webgrad as wg


def _data(lib, *shape, seed=0, grad=False):
    t = lib.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
    return t.requires_grad_() if grad else t


def _custom(lib):
    class Mul(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            ctx.saved_tensors  # a second access unpacks again, as PyTorch's
            return g * b, g * a
    return Mul


def _linear(lib, n_in, n_out, seed):
    layer = lib.nn.Linear(n_in, n_out)
    with lib.no_grad():
        layer.weight.copy_(_data(lib, n_out, n_in, seed=seed))
        layer.bias.copy_(_data(lib, n_out, seed=seed + 1))
    return layer


def _linear_relu(lib, x):
    return lib.relu(_linear(lib, 3, 5, seed=10)(x))


def _mlp(lib, x):
    return lib.nn.Sequential(_linear(lib, 3, 8, seed=10), lib.nn.ReLU(), _linear(lib, 8, 2, seed=20))(x)


MODELS = {
    "x*x": lambda lib, x: x * x,
    "exp": lambda lib, x: x.exp(),
    "pow": lambda lib, x: x.pow(2),
    "sigmoid": lambda lib, x: x.sigmoid(),
    "tanh": lambda lib, x: x.tanh(),
    "matmul": lambda lib, x: x @ _data(lib, 3, 2, seed=5),
    "sum": lambda lib, x: x.sum(0),
    "add": lambda lib, x: x + 1,
    "linear+relu": _linear_relu,
    "mlp": _mlp,
    "custom Function": lambda lib, x: _custom(lib).apply(x, x + 1),
}


def _counts(lib, model):
    counts = {"pack": 0, "unpack": 0}

    def pack(t):
        counts["pack"] += 1
        return t

    def unpack(t):
        counts["unpack"] += 1
        return t
    x = _data(lib, 4, 3, grad=True)
    with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = model(lib, x)
    packed = counts["pack"]
    y.sum().backward()
    return packed, counts["unpack"], x.grad


@pytest.mark.parametrize("name", list(MODELS))
def test_hooks_run_as_often_as_torchs(name):
    ours, theirs = _counts(wg, MODELS[name]), _counts(torch, MODELS[name])
    assert ours[:2] == theirs[:2]
    np.testing.assert_allclose(ours[2].numpy(), theirs[2].numpy(), rtol=1e-5, atol=1e-6)


def test_backward_computes_with_what_unpack_returns():
    for lib in (wg, torch):
        x = _data(lib, 5, grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t * 0):
            y = x * x
        y.sum().backward()
        assert not x.grad.any(), lib.__name__
        x.grad = None
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t * 4, lambda t: t / 4):
            y = lib.pow(x, 2)
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)


def test_pack_may_return_any_object():
    storage = []

    def pack(t):
        storage.append(t)
        return len(storage) - 1
    x = _data(wg, 5, grad=True)
    with wg.autograd.graph.saved_tensors_hooks(pack, lambda i: storage[i]):
        y = x * x
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)


def test_innermost_hooks_pack():
    logs = {}
    for lib in (wg, torch):
        log = logs[lib] = []
        x = _data(lib, 3, grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: log.append("outer") or t, lambda t: t):
            with lib.autograd.graph.saved_tensors_hooks(lambda t: log.append("inner") or t, lambda t: t):
                y = x * x
            z = y.exp()
        (y.sum() + z.sum()).backward()
    assert logs[wg] == logs[torch] == ["inner", "inner", "outer"]


def test_retain_graph_unpacks_each_pass_and_a_freed_graph_refuses():
    for lib in (wg, torch):
        unpacked = []
        x = _data(lib, 3, grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: unpacked.append(1) or t):
            y = x.exp()
        y.sum().backward(retain_graph=True)
        y.sum().backward()
        assert len(unpacked) == 2
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.sum().backward()


def test_errors_as_torch():
    for lib in (wg, torch):
        graph = lib.autograd.graph
        x = _data(lib, 3, grad=True)
        with pytest.raises(RuntimeError, match="A saved tensor pack hook is modifying its input in place"):
            with graph.saved_tensors_hooks(lambda t: t.mul_(2), lambda t: t):
                h = x * 1.0
                h * h
        with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor but got result of type int"):
            with graph.saved_tensors_hooks(lambda t: t, lambda t: 3):
                y = x * x
            y.sum().backward()
        with graph.disable_saved_tensors_hooks("no hooks in this block"):
            with pytest.raises(RuntimeError, match="^no hooks in this block$"):
                graph.saved_tensors_hooks(lambda t: t, lambda t: t).__enter__()
            (x * x).sum().backward()  # saving without hooks is fine
        with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            with pytest.raises(RuntimeError, match="^hooks are on$"):
                graph.disable_saved_tensors_hooks("hooks are on").__enter__()


def test_graph_lets_go_of_saved_tensors_once_packed_elsewhere():
    """A pack hook that copies: after the block, only the copy keeps the values, as in PyTorch."""
    for lib in (wg, torch):
        x = _data(lib, 4, grad=True)
        h = x + 1  # (add saves nothing: only sin's node holds h)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone(), lambda t: t):
            y = h.sin()
        ref = weakref.ref(h)
        del h
        gc.collect()
        assert ref() is None, lib.__name__
        y.sum().backward()
        expected = np.cos(x.detach().numpy() + 1)
        np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5)


def test_save_on_cpu_gives_torchs_gradients():
    grads = {}
    for lib in (wg, torch):
        x = _data(lib, 4, 3, grad=True)
        with lib.autograd.graph.save_on_cpu(pin_memory=False):
            y = _mlp(lib, x)
        y.square().sum().backward()
        grads[lib] = x.grad
    np.testing.assert_allclose(grads[wg].numpy(), grads[torch].numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not webgpu_available(), reason="no WebGPU adapter")
def test_save_on_cpu_moves_webgpu_tensors_to_the_cpu_and_back():
    devices = []
    x = _data(wg, 4, 3).to("webgpu").requires_grad_()

    class Spy(wg.autograd.graph.save_on_cpu):
        def __init__(self):
            super().__init__()
            pack, self.pack_hook = self.pack_hook, lambda t: devices.append(pack(t)[1].device.type) or pack(t)
    with Spy():
        y = (x * x).exp()
    y.sum().backward()
    assert devices and set(devices) == {"cpu"}
    assert x.grad.device.type == "webgpu"
    xs = x.detach().cpu().numpy()
    np.testing.assert_allclose(x.grad.cpu().numpy(), 2 * xs * np.exp(xs * xs), rtol=1e-4)


def test_graph_module_names():
    x = _data(wg, 3, grad=True)
    y = x * 2
    assert isinstance(y.grad_fn, wg.autograd.graph.Node)
    edge = wg.autograd.graph.get_gradient_edge(x)
    assert edge.output_nr == 0 and edge.node.variable is x
    assert wg.autograd.graph.get_gradient_edge(y).node is y.grad_fn
    before = y._version
    wg.autograd.graph.increment_version(y)
    assert y._version == before + 1


def test_saved_attributes_of_a_node_as_torchs():
    """grad_fn._saved_self / _saved_other / _saved_result (the tutorial's look at what a node saved), unpacked on
    each access under hooks, and refused once backward freed them."""
    for lib in (wg, torch):
        a, b = _data(lib, 5, grad=True), _data(lib, 5, seed=1, grad=True)
        y = a * b
        assert y.grad_fn._saved_self is a and y.grad_fn._saved_other is b
        y = a.exp()
        assert y.grad_fn._saved_result.equal(y)
        log = []
        with lib.autograd.graph.saved_tensors_hooks(lambda t: log.append("pack") or t,
                                                    lambda t: log.append("unpack") or t):
            y = a.pow(2)
        assert y.grad_fn._saved_self.equal(a) and y.grad_fn._saved_self.equal(a)
        assert log == ["pack", "unpack", "unpack"]
        with pytest.raises(AttributeError):
            y.grad_fn._saved_nothing_by_this_name
        y.sum().backward()
        with pytest.raises(RuntimeError, match="access saved tensors after they have already been freed"):
            y.grad_fn._saved_self
