"""Autograd semantics: the cases PyTorch's own C++ API autograd tests cover, on every device."""

import pytest

import webgrad as wg


def test_simple_grad(device):
    x = wg.tensor([[1.0, 2.0], [3.0, 4.0]], device=device, requires_grad=True)
    y = wg.tensor([[0.5, 1.0], [1.5, 2.0]], device=device, requires_grad=True)
    (x + x * y).sum().backward()
    assert x.grad.tolist() == [[1.5, 2.0], [2.5, 3.0]]
    assert y.grad.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_grad_accumulates_over_two_backward_passes(device):
    x = wg.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    (x * x).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0, 9.0]


def test_zero_grad_resets(device):
    x = wg.ones(3, device=device, requires_grad=True)
    (x * 2).sum().backward()
    x.grad.zero_()
    (x * 4).sum().backward()
    assert x.grad.tolist() == [4.0, 4.0, 4.0]
    x.grad = None
    (x * 1).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]


def test_backward_with_custom_gradient(device):
    x = wg.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = x * x
    y.backward(wg.tensor([1.0, 0.5], device=device))
    assert x.grad.tolist() == [2.0, 2.0]


def test_multilevel_chain(device):
    x = wg.tensor([2.0], device=device, requires_grad=True)
    y = x * x          # 4
    z = y * y + x      # 16 + 2; dz/dx = 4x^3 + 1 = 33
    w = z.exp().log()  # identity through two more levels
    w.backward(wg.ones(1, device=device))
    assert x.grad.tolist() == pytest.approx([33.0], rel=1e-5)


def test_diamond_graph_and_shared_subgraph(device):
    x = wg.tensor([3.0], device=device, requires_grad=True)
    a = x * 2
    b = a * a        # shared node a used twice
    c = a + b        # and a again
    d = c * b        # b reached along two paths
    d.sum().backward()
    # d = (2x + 4x^2) * 4x^2 = 8x^3 + 16x^4 ; d' = 24x^2 + 64x^3 = 216 + 1728
    assert x.grad.tolist() == pytest.approx([1944.0], rel=1e-5)


def test_no_grad_prevents_recording(device):
    x = wg.ones(2, device=device, requires_grad=True)
    with wg.no_grad():
        y = x * 2
    assert not y.requires_grad and y.grad_fn is None
    assert wg.is_grad_enabled()

    @wg.no_grad()
    def f(t):
        return t * 3
    assert not f(x).requires_grad
    with wg.set_grad_enabled(False):
        assert not wg.is_grad_enabled()
        with wg.enable_grad():
            assert (x * 2).requires_grad
    assert wg.is_grad_enabled()


def test_requires_grad_propagation(device):
    a = wg.ones(2, device=device)
    b = wg.ones(2, device=device, requires_grad=True)
    assert not (a * 2).requires_grad
    c = a + b
    assert c.requires_grad and not c.is_leaf and b.is_leaf
    assert c.grad_fn is not None
    assert not (a > 0).requires_grad  # comparisons are not differentiable
    assert not b.detach().requires_grad


def test_backward_errors_are_clear(device):
    x = wg.ones(2, device=device)
    with pytest.raises(RuntimeError, match="does not require grad"):
        (x * 2).sum().backward()
    y = wg.ones(2, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="scalar outputs"):
        (y * 2).backward()
    z = (y * y).sum()
    z.backward()
    with pytest.raises(RuntimeError, match="second time"):
        z.backward()
    with pytest.raises(RuntimeError, match="floating point"):
        wg.ones(2, dtype=wg.int32, device=device, requires_grad=True)


def test_retain_graph_allows_second_backward(device):
    x = wg.tensor([2.0], device=device, requires_grad=True)
    z = (x * x).sum()
    z.backward(retain_graph=True)
    z.backward()
    assert x.grad.tolist() == [8.0]


def test_retain_grad_on_intermediate(device):
    x = wg.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = x * 3
    y.retain_grad()
    (y * y).sum().backward()
    assert y.grad.tolist() == [6.0, 12.0]
    assert x.grad.tolist() == [18.0, 36.0]


def test_retained_gradient_fills_in_autograd_grad_too(device):
    # as PyTorch's retains_grad hooks: a tensor that retains its gradient gets it in any pass that reaches it, as
    # autograd.grad's input or on the way to one, and a later backward adds to it (values printed by torch 2.13)
    x = wg.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    h = x * 2
    h.retain_grad()
    (gh,) = wg.autograd.grad((h * h).sum(), h, retain_graph=True)
    assert gh.tolist() == h.grad.tolist() == [4.0, 8.0, 12.0] and x.grad is None
    wg.autograd.grad((h * 3).sum(), x, retain_graph=True)
    assert h.grad.tolist() == [7.0, 11.0, 15.0] and x.grad is None
    h.grad = None
    y = (h * h).sum()
    (gh,) = wg.autograd.grad(y, h, create_graph=True)
    (gh.sum() + y).backward()
    assert h.grad.tolist() == [10.0, 18.0, 26.0] and x.grad.tolist() == [12.0, 20.0, 28.0]


def test_gradient_shape_mismatch_is_reported(device):
    x = wg.ones(2, 3, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"\(2, 3\)"):
        (x * 2).backward(wg.ones(3, device=device))


def test_inplace_on_leaf_requiring_grad_is_refused(device):
    w = wg.ones(2, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="no_grad"):
        w += 1
    with wg.no_grad():
        w -= 0.5
    assert w.tolist() == [0.5, 0.5] and w.requires_grad and w.is_leaf


def test_deep_chain_does_not_hit_recursion_limit(device):
    x = wg.ones(1, device=device, requires_grad=True)
    y = x
    for _ in range(2000):
        y = y * 1.0
    y.sum().backward()
    assert x.grad.tolist() == [1.0]


def _sinh_function(lib):
    class Sinh(lib.autograd.Function):  # the double-backward tutorial's: intermediates returned as outputs
        @staticmethod
        def forward(ctx, x):
            expx, expnegx = lib.exp(x), lib.exp(-x)
            ctx.save_for_backward(expx, expnegx)
            return (expx - expnegx) / 2, expx, expnegx

        @staticmethod
        def backward(ctx, grad_out, grad_exp, grad_negexp):
            expx, expnegx = ctx.saved_tensors
            grad_input = grad_out * (expx + expnegx) / 2
            grad_input += grad_exp * expx
            grad_input -= grad_negexp * expnegx
            return grad_input
    return Sinh


def test_custom_function_with_several_outputs_as_torch():
    # One node: backward gets a gradient per output (zeros for those unused); a saved output is the returned one,
    # so its backward differentiates again (first and second derivatives of sinh as torch's)
    import numpy as np
    torch = pytest.importorskip("torch")
    values = np.linspace(-1.5, 2.0, 6).reshape(2, 3)
    results = []
    for lib in (torch, wg):
        x = lib.tensor(values, requires_grad=True)
        y, ex, enx = _sinh_function(lib).apply(x)
        first, = lib.autograd.grad(y.sum(), x, create_graph=True)
        second, = lib.autograd.grad(first.sum(), x, retain_graph=True)
        mixed, = lib.autograd.grad((y * 2 + ex).sum(), x)
        results.append([t.detach().numpy() for t in (y, ex, enx, first, second, mixed)])
        assert lib.autograd.gradgradcheck(lambda t: _sinh_function(lib).apply(t)[0], (x,))
    for ours, ref in zip(results[1], results[0]):
        np.testing.assert_allclose(ours, ref, rtol=1e-12)
    np.testing.assert_allclose(results[1][4], np.sinh(values), rtol=1e-12)


def _cube_function(lib, extra):
    from importlib import import_module
    once_differentiable = import_module(f"{lib.__name__}.autograd.function").once_differentiable

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale=1.0):
            ctx.save_for_backward(x)
            return x ** 3 * scale

        @staticmethod
        @once_differentiable
        def backward(ctx, grad_out):
            x, = ctx.saved_tensors
            return (grad_out * 3 * x ** 2,) + extra  # trailing gradients for arguments apply was not given
    return Cube


def test_once_differentiable_and_extra_none_gradients_as_torch():
    # A once_differentiable backward gives first derivatives; differentiating them again raises, as PyTorch's
    # DelayedError. Gradients past the arguments apply took are let pass when None, refused otherwise.
    import numpy as np
    torch = pytest.importorskip("torch")
    grads = []
    for lib in (torch, wg):
        x = lib.tensor([0.5, -2.0, 3.0], dtype=lib.float64, requires_grad=True)
        out = _cube_function(lib, (None, None)).apply(x) * x  # the gradient reaching backward requires grad
        g, = lib.autograd.grad(out.sum(), x, create_graph=True)
        second, = lib.autograd.grad(g.sum(), x, retain_graph=True)  # (PyTorch leaves the marked branch out)
        grads += [g.detach().numpy(), second.numpy()]
        with pytest.raises(RuntimeError, match="once_differentiable"):
            g.sum().backward()
        with pytest.raises(RuntimeError):
            _cube_function(lib, (lib.ones(3),)).apply(x).sum().backward()
    np.testing.assert_allclose(grads[2:], grads[:2], rtol=1e-12)


def test_grad_fn_name_is_called_as_torchs():
    # PyTorch scripts call grad_fn.name(); webgrad's own code compares the op name (grad_fn.name == "Mul")
    torch = pytest.importorskip("torch")
    names = []
    for lib in (torch, wg):
        x = lib.ones(2, requires_grad=True)
        y = (x * 3).sum()
        names.append((y.grad_fn.name(), y.grad_fn.next_functions[0][0].name(),
                      y.grad_fn.next_functions[0][0].next_functions[0][0].name()))
    assert names[1] == names[0] == ("SumBackward0", "MulBackward0", "torch::autograd::AccumulateGrad")
    assert (wg.ones(2, requires_grad=True) * 3).grad_fn.name == "Mul"
