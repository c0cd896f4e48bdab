"""Ops whose edge values need more than the random inputs of op_cases.py: prod's gradient with zeros in
the product, nan_to_num with NaN and infinities, against PyTorch on every device."""

import numpy as np
import pytest

import webgrad

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("values", [
    [[2.0, 0.0, 3.0], [1.5, -2.0, 0.5]],   # one zero in a row: its gradient is the product of the others
    [[0.0, 4.0, 0.0], [0.0, 1.0, 2.0]],    # two zeros: every gradient of that row is 0
])
@pytest.mark.parametrize("dim", [None, 1, 0])
def test_prod_gradient_with_zeros(values, dim, device):
    weight = [[0.3, -1.2, 2.0], [1.0, 0.5, -0.7]]
    ours = webgrad.tensor(values, device=device, requires_grad=True)
    theirs = torch.tensor(values, requires_grad=True)
    for x, lib in ((ours, webgrad), (theirs, torch)):
        out = x.prod() if dim is None else x.prod(dim, keepdim=True)
        w = lib.tensor(weight).sum() if dim is None else lib.tensor(weight).sum(dim, keepdim=True)
        (out * (w.to(device) if lib is webgrad else w)).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-6, atol=1e-7)
    expected = theirs.prod() if dim is None else theirs.prod(dim, keepdim=True)
    np.testing.assert_allclose((ours.prod() if dim is None else ours.prod(dim, keepdim=True)).detach().numpy(),
                               expected.detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("kwargs", [{}, {"nan": 0.5, "posinf": 7.0}, {"neginf": -1.0}])
def test_nan_to_num(kwargs, device):
    values = [1.0, float("nan"), float("inf"), -float("inf"), -2.5]
    ours = webgrad.tensor(values, device=device, requires_grad=True)
    theirs = torch.tensor(values, requires_grad=True)
    out, ref = webgrad.nan_to_num(ours, **kwargs), torch.nan_to_num(theirs, **kwargs)
    np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


def test_nan_is_unequal_and_truthy(device):
    """NaN != NaN and NaN != 1 are true, and NaN is truthy (bool, logical ops): WGSL's float `!=` is an ordered
    compare on some drivers, false where a side is NaN, which made torch.nanmean count the NaNs."""
    values = [1.0, float("nan"), 2.0, 0.0]
    other = [1.0, float("nan"), 3.0, 0.0]
    x, y = webgrad.tensor(values, device=device), webgrad.tensor(other, device=device)
    tx, ty = torch.tensor(values), torch.tensor(other)
    for ours, theirs in ((x != x, tx != tx), (x != y, tx != ty), (x != 1.0, tx != 1.0), (x.bool(), tx.bool()),
                         (x.logical_and(y), tx.logical_and(ty)), (x.logical_or(y), tx.logical_or(ty)),
                         (x.logical_xor(y), tx.logical_xor(ty)), (x.logical_not(), tx.logical_not())):
        assert ours.tolist() == theirs.tolist()
