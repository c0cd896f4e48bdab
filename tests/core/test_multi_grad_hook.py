"""autograd.graph.register_multi_grad_hook against PyTorch: mode "all" (one call per backward pass with the
gradients it computed, None for the others; backward(inputs=...), several roots), mode "any" (the first gradient),
remove(), and torch's errors."""

import numpy as np
import pytest
import torch

import webgrad as wg


def _values(lib):
    a = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    b = lib.tensor([[1.0, 0.0, 2.0], [3.0, 1.0, -1.0]], requires_grad=True)
    return a, b


def _as_lists(grads):
    return [None if g is None else np.asarray(g.tolist()) for g in grads]


def _same(mine, theirs):
    assert len(mine) == len(theirs)
    for m, t in zip(mine, theirs):
        assert (m is None) == (t is None)
        if m is not None:
            np.testing.assert_allclose(m, t, rtol=1e-6)


def _all_mode_calls(lib):
    a, b = _values(lib)
    c, d = a * b, a * b
    calls = []
    handle = lib.autograd.graph.register_multi_grad_hook((a, b, c, d), lambda grads: calls.append(_as_lists(grads)))
    c.sum().backward(retain_graph=True)
    c.sum().backward(inputs=(a,), retain_graph=True)
    (c.sum() + 2 * d.sum()).backward(retain_graph=True)
    (c * d).sum().backward(retain_graph=True)
    handle.remove()
    c.sum().backward(retain_graph=True)
    return calls


def test_all_mode_calls_once_per_pass_with_none_for_gradients_not_computed():
    mine, theirs = _all_mode_calls(wg), _all_mode_calls(torch)
    assert len(mine) == len(theirs) == 4
    for m, t in zip(mine, theirs):
        _same(m, t)


def _any_mode_calls(lib):
    a, b = _values(lib)
    c = a * b
    calls = []
    handle = lib.autograd.graph.register_multi_grad_hook((a, c), lambda grad: calls.append(_as_lists([grad])),
                                                         mode="any")
    (c * 3).sum().backward(retain_graph=True)
    (a * b).sum().backward()
    with handle:
        pass
    (a * 2).sum().backward()
    return calls


def test_any_mode_calls_with_the_first_gradient_computed():
    mine, theirs = _any_mode_calls(wg), _any_mode_calls(torch)
    assert len(mine) == len(theirs) == 2
    for m, t in zip(mine, theirs):
        _same(m, t)


def test_a_hook_on_a_pass_that_reaches_none_of_the_tensors_is_not_called():
    a, b = _values(wg)
    calls = []
    wg.autograd.graph.register_multi_grad_hook((a,), calls.append)
    (b * 2).sum().backward()
    assert calls == []


@pytest.mark.parametrize("lib", [wg, torch], ids=["webgrad", "torch"])
def test_errors_as_torch(lib):
    a, _ = _values(lib)
    with pytest.raises(ValueError, match="Expects mode to be one of \\('all', 'any'\\) but got some"):
        lib.autograd.graph.register_multi_grad_hook((a,), print, mode="some")
    with pytest.raises(AssertionError, match="Expected gradient function to be set"):
        lib.autograd.graph.register_multi_grad_hook((lib.ones(2),), print)
    lib.autograd.graph.register_multi_grad_hook((lib.ones(2),), print, mode="any").remove()  # no error
