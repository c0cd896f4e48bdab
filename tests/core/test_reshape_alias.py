"""reshape to the same shape is a new view, as PyTorch's (not the input itself): its own node (ViewBackward0, or
ReshapeAliasBackward0 for a strided input), sharing memory; flatten with nothing to merge returns the input."""

import pytest
import torch

import webgrad as wg


@pytest.mark.parametrize("lib", [wg, torch], ids=["webgrad", "torch"])
def test_reshape_to_the_same_shape_is_a_new_view(lib):
    x = lib.ones(2, 3, requires_grad=True) * 1
    y = x.reshape(2, 3)
    assert y is not x and x.reshape_as(x) is not x and y.grad_fn.name() == "ViewBackward0"
    with lib.no_grad():
        y[0, 0] = 5.0
    assert x[0, 0].item() == 5.0
    (y * 2).sum().backward()
    strided = x.t()
    assert strided.reshape(3, 2) is not strided and strided.reshape(3, 2).grad_fn.name() == "ReshapeAliasBackward0"
    assert x[:, :2].reshape(2, 1, 2).grad_fn.name() == "ReshapeAliasBackward0"
    assert x[:1].reshape(3).grad_fn.name() == "ViewBackward0"
    assert strided.reshape(6).grad_fn.name() == "UnsafeViewBackward0"


@pytest.mark.parametrize("lib", [wg, torch], ids=["webgrad", "torch"])
def test_flatten_with_nothing_to_merge_returns_the_input(lib):
    v, x = lib.ones(4), lib.ones(2, 3)
    assert v.flatten() is v and x.flatten(1, 1) is x and x.flatten(-1, 1) is x
    assert x.flatten() is not x and x.unflatten(1, (3,)) is not x
