"""Two answers that were silent where torch raises: F.pad whose negative padding removes more than a dim
holds (torch: RuntimeError from narrow), and binary_cross_entropy with a target outside [0, 1] (torch:
RuntimeError; checked on the host for the CPU device, as the input's range is)."""

import pytest
import torch
import torch.nn.functional as TF

import webgrad as wg
import webgrad.nn.functional as F
from helpers import DEVICES

PADS = [(-2, -1), (-3, 0), (0, 0, -1, -1), (-2, -2), (-4, 1), (-4, 2), (1, -4), (0, 0, -2, -1), (-5, 5), (-1, 3)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pad", PADS, ids=str)
def test_negative_padding_as_torch(device, pad):
    x = torch.arange(6.0).reshape(2, 3)
    try:
        expected = TF.pad(x, pad)
    except RuntimeError:
        with pytest.raises(RuntimeError, match="removes more than"):
            F.pad(wg.tensor(x.numpy(), device=device), pad)
        return
    got = F.pad(wg.tensor(x.numpy(), device=device), pad)
    assert tuple(got.shape) == tuple(expected.shape)
    assert (got.to("cpu").numpy() == expected.numpy()).all()  # numpy: tolist() of a [2, 0] tensor fails here


@pytest.mark.parametrize("target", [2.0, -0.5, float("nan"), 1.0 + 1e-6])
def test_bce_target_outside_0_1_raises_as_torch(target):
    with pytest.raises(RuntimeError, match="all elements of target should be between 0 and 1"):
        TF.binary_cross_entropy(torch.tensor([0.5, 0.5]), torch.tensor([0.0, target]))
    with pytest.raises(RuntimeError, match="all elements of target should be between 0 and 1"):
        F.binary_cross_entropy(wg.tensor([0.5, 0.5]), wg.tensor([0.0, target]))


def test_bce_targets_at_the_ends_are_fine():
    got = F.binary_cross_entropy(wg.tensor([0.25, 0.75]), wg.tensor([0.0, 1.0])).item()
    assert got == pytest.approx(TF.binary_cross_entropy(torch.tensor([0.25, 0.75]), torch.tensor([0.0, 1.0])).item())
