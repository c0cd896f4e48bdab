"""A custom autograd.Function's ctx against PyTorch: mark_non_differentiable (a sort's indices, a float output),
set_materialize_grads(False) (None for an output no gradient reached), mark_dirty (the input itself returned, its
version, its new grad_fn, several outputs, grad mode off, and torch's errors)."""

import numpy as np
import pytest
import torch

import webgrad as wg


def _sort(lib, seen):
    class Sort(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            values, indices = x.sort()
            ctx.mark_non_differentiable(indices)
            ctx.save_for_backward(indices)
            return values, indices

        @staticmethod
        def backward(ctx, grad_values, grad_indices):
            seen.append(grad_indices)
            (indices,) = ctx.saved_tensors
            return lib.zeros_like(grad_values).scatter(0, indices, grad_values)
    return Sort


@pytest.mark.parametrize("lib", [wg, torch], ids=["webgrad", "torch"])
def test_non_differentiable_indices_take_no_gradient_and_backward_gets_zeros(lib):
    seen = []
    x = lib.tensor([3.0, 1.0, 2.0], requires_grad=True)
    values, indices = _sort(lib, seen).apply(x)
    assert values.requires_grad and not indices.requires_grad and indices.grad_fn is None
    assert type(values.grad_fn).__name__ == "SortBackward"
    (values * lib.tensor([1.0, 10.0, 100.0])).sum().backward()
    np.testing.assert_allclose(x.grad.tolist(), [100.0, 1.0, 10.0])
    assert seen[0].dtype == lib.int64 and seen[0].tolist() == [0, 0, 0]


def _float_non_differentiable(lib, seen):
    class Pair(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            kept, dropped = x * 2, x * 3
            ctx.mark_non_differentiable(dropped)
            return kept, dropped

        @staticmethod
        def backward(ctx, grad_kept, grad_dropped):
            seen.append(grad_dropped)
            return grad_kept * 2
    return Pair


@pytest.mark.parametrize("lib", [wg, torch], ids=["webgrad", "torch"])
def test_a_floating_output_marked_non_differentiable(lib):
    seen = []
    x = lib.ones(2, requires_grad=True)
    kept, dropped = _float_non_differentiable(lib, seen).apply(x)
    assert kept.requires_grad and not dropped.requires_grad and dropped.grad_fn is None
    kept.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0] and seen[0].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("lib", [wg, torch], ids=["webgrad", "torch"])
def test_a_single_output_marked_non_differentiable(lib):
    class Twice(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out = x * 2
            ctx.mark_non_differentiable(out)
            return out

        @staticmethod
        def backward(ctx, grad):
            return grad

    y = Twice.apply(lib.ones(2, requires_grad=True))
    assert not y.requires_grad and y.grad_fn is None and y.tolist() == [2.0, 2.0]


def _two_outputs(lib, seen, materialize):
    class Two(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(materialize)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, grad_a, grad_b):
            seen.append((grad_a, grad_b))
            total = 0
            if grad_a is not None:
                total = total + grad_a * 2
            if grad_b is not None:
                total = total + grad_b * 3
            return total
    return Two


def _materialize_run(lib, materialize):
    seen = []
    x = lib.ones(2, requires_grad=True)
    a, b = _two_outputs(lib, seen, materialize).apply(x)
    b.sum().backward(retain_graph=True)
    (a * 5).sum().backward(retain_graph=True)
    (a + b).sum().backward()
    return [tuple(None if g is None else g.tolist() for g in grads) for grads in seen], x.grad.tolist()


@pytest.mark.parametrize("materialize", [True, False])
def test_set_materialize_grads(materialize):
    assert _materialize_run(wg, materialize) == _materialize_run(torch, materialize)


def _max_without_materialize(lib, seen):
    class Max(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            values, indices = x.max(0)
            ctx.mark_non_differentiable(indices)
            return values, indices

        @staticmethod
        def backward(ctx, grad_values, grad_indices):
            seen.append(grad_indices)
            return grad_values.expand(2, 3)
    return Max


@pytest.mark.parametrize("lib", [wg, torch], ids=["webgrad", "torch"])
def test_non_differentiable_output_gets_none_without_materialize(lib):
    seen = []
    x = lib.ones(2, 3, requires_grad=True)
    values, _ = _max_without_materialize(lib, seen).apply(x)
    values.sum().backward()
    assert seen == [None] and x.grad.tolist() == [[1.0] * 3] * 2


def _mul_two_in_place(lib):
    class MulTwo(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad * 2
    return MulTwo


@pytest.mark.parametrize("lib", [wg, torch], ids=["webgrad", "torch"])
def test_mark_dirty_returns_the_input_itself_with_a_new_grad_fn(lib):
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = a * 3
    before = b._version
    y = _mul_two_in_place(lib).apply(b)
    assert y is b and type(b.grad_fn).__name__ == "MulTwoBackward" and b._version == before + 2
    assert b.tolist() == [6.0, 12.0]
    (y * y).sum().backward()
    np.testing.assert_allclose(a.grad.tolist(), [72.0, 144.0])


@pytest.mark.parametrize("lib", [wg, torch], ids=["webgrad", "torch"])
def test_mark_dirty_without_grad(lib):
    plain = lib.tensor([1.0, 2.0])
    y = _mul_two_in_place(lib).apply(plain)
    assert y is plain and not y.requires_grad and plain._version == 2
    leaf = lib.tensor([1.0, 2.0], requires_grad=True)
    with lib.no_grad():
        y = _mul_two_in_place(lib).apply(leaf)
    assert y is not leaf and not y.requires_grad and leaf.tolist() == [2.0, 4.0]
    y.add_(1)  # an alias of the leaf's memory
    assert leaf.tolist() == [3.0, 5.0]


@pytest.mark.parametrize("lib", [wg, torch], ids=["webgrad", "torch"])
def test_mark_dirty_errors_as_torch(lib):
    leaf = lib.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been used in an in-place"):
        _mul_two_in_place(lib).apply(leaf)

    class NotReturned(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            x.mul_(2)
            ctx.mark_dirty(x)
            return y * 2

        @staticmethod
        def backward(ctx, grad):
            return grad, grad

    with pytest.raises(RuntimeError, match="Some elements marked as dirty during the forward method were not "
                                           "returned as output"):
        NotReturned.apply(leaf.clone(), leaf.clone())


@pytest.mark.parametrize("lib", [wg, torch], ids=["webgrad", "torch"])
def test_a_dirty_backward_that_saved_the_old_values_refuses(lib):
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    y = _mul_two_in_place(lib).apply(a.exp())  # exp saved its result, which MulTwo then modified
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def _dirty_with_another_output(lib, seen):
    class AddOneBoth(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x, x * 2

        @staticmethod
        def backward(ctx, grad_x, grad_double):
            seen.append((grad_x.tolist(), grad_double.tolist()))
            return grad_x + 2 * grad_double
    return AddOneBoth


def _dirty_several_run(lib):
    seen = []
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1
    before = b._version
    x, double = _dirty_with_another_output(lib, seen).apply(b)
    assert x is b and double.requires_grad and b._version == before + 2
    (x * double).sum().backward()
    return b.tolist(), double.tolist(), seen, a.grad.tolist()


def test_mark_dirty_with_several_outputs():
    assert _dirty_several_run(wg) == _dirty_several_run(torch)


def _duplicate_run(lib, dirty):
    seen = []

    class Duplicate(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            if dirty:
                x.mul_(2)
                ctx.mark_dirty(x)
                out = x
            else:
                out = x * 2
            return out, x * 3, out

        @staticmethod
        def backward(ctx, grad_first, grad_triple, grad_last):
            seen.append([grad_first.tolist(), grad_triple.tolist(), grad_last.tolist()])
            return 2 * (grad_first + grad_last) + 3 * grad_triple

    x = lib.ones(2, requires_grad=True)
    first, triple, last = Duplicate.apply(x.clone() if dirty else x)
    assert first is last
    (first * 5 + triple).sum().backward()
    return seen, x.grad.tolist()


@pytest.mark.parametrize("dirty", [False, True])
def test_a_tensor_returned_twice_is_one_output(dirty):
    assert _duplicate_run(wg, dirty) == _duplicate_run(torch, dirty)


@pytest.mark.parametrize("lib", [wg, torch], ids=["webgrad", "torch"])
def test_non_differentiable_outputs_without_materialized_gradients(lib):
    seen = []

    class Pair(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            kept, dropped = x.clone(), x.clone()
            ctx.mark_non_differentiable(dropped)
            ctx._materialize_non_diff_grads = False
            return kept, dropped

        @staticmethod
        def backward(ctx, grad_kept, grad_dropped):
            seen.append(grad_dropped)
            return grad_kept

    Pair.apply(lib.tensor(1.0, requires_grad=True))[0].backward()
    assert seen == [None]
