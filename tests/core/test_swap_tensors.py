"""torch.utils.swap_tensors against PyTorch's: two tensors exchange class, attributes, values and autograd state in
place, so every reference (an optimizer's parameter list) sees the other."""

import weakref

import numpy as np
import pytest
import torch

import webgrad as wg


@pytest.mark.parametrize("lib", [torch, wg], ids=["torch", "webgrad"])
def test_swapped_tensors_trade_everything(lib):
    t1, t2 = lib.arange(2), lib.arange(3.0, requires_grad=True)
    lib.utils.swap_tensors(t1, t2)
    assert t1.tolist() == [0.0, 1.0, 2.0] and t1.requires_grad and t1.dtype == lib.float32
    assert t2.tolist() == [0, 1] and not t2.requires_grad and t2.dtype == lib.int64
    weight = lib.nn.Parameter(lib.ones(2, 3))
    weight.note = "old"
    optimizer = lib.optim.SGD([weight], lr=0.5)
    new = lib.nn.Parameter(lib.full((2, 3), 4.0))
    lib.utils.swap_tensors(weight, new)
    assert optimizer.param_groups[0]["params"][0] is weight and new.note == "old" and not hasattr(weight, "note")
    (weight * 2).sum().backward()
    optimizer.step()  # the optimizer's reference steps the swapped-in values
    np.testing.assert_allclose(weight.detach().numpy(), np.full((2, 3), 3.0))


@pytest.mark.parametrize("lib", [torch, wg], ids=["torch", "webgrad"])
def test_a_weakly_held_tensor_is_not_swapped(lib):
    t1, t2 = lib.zeros(2), lib.ones(2)
    ref = weakref.ref(t1)
    with pytest.raises(RuntimeError, match="weakref"):
        lib.utils.swap_tensors(t1, t2)
    assert ref() is t1 and t1.tolist() == [0.0, 0.0]
