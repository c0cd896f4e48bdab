"""torch.finfo / torch.iinfo (every attribute, the repr and the errors, against torch) and Tensor.type_as (dtype
and device of the other tensor, gradients through it), as model code uses them: scores masked with
finfo(dtype).min, probabilities cast back with type_as."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES

FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTS = ["uint8", "int32", "int64"]


@pytest.mark.parametrize("name", FLOATS)
def test_finfo_matches_torch(name):
    ours, theirs = wg.finfo(getattr(wg, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert ours.dtype == theirs.dtype == name
    assert repr(ours) == repr(theirs)
    assert wg.finfo(getattr(torch, name)).eps == theirs.eps  # torch's dtypes name ours


@pytest.mark.parametrize("name", INTS)
def test_iinfo_matches_torch(name):
    ours, theirs = wg.iinfo(getattr(wg, name)), torch.iinfo(getattr(torch, name))
    assert (ours.bits, ours.min, ours.max, ours.dtype) == (theirs.bits, theirs.min, theirs.max, theirs.dtype)
    assert repr(ours) == repr(theirs)


def test_finfo_defaults_and_errors():
    assert wg.finfo().dtype == torch.finfo().dtype == "float32"
    with pytest.raises(TypeError, match="requires a floating point input type"):
        wg.finfo(wg.int32)
    with pytest.raises(TypeError, match="requires an integer input type"):
        wg.iinfo(wg.float32)
    with pytest.raises(TypeError, match="torch.bool is not supported by torch.iinfo"):
        wg.iinfo(wg.bool)


@pytest.mark.parametrize("device", DEVICES)
def test_finfo_min_masks_scores(device):
    """HF-style masking: scores where masked become finfo.min, and softmax gives them weight 0."""
    s = wg.tensor([[1.0, 2.0, 3.0]], device=device)
    keep = wg.tensor([[True, False, True]], device=device)
    masked = wg.where(keep, s, wg.tensor(wg.finfo(s.dtype).min, device=device))
    w = masked.softmax(-1).cpu().numpy()
    ref = torch.where(torch.tensor([[True, False, True]]), torch.tensor([[1.0, 2.0, 3.0]]),
                      torch.tensor(torch.finfo(torch.float32).min)).softmax(-1).numpy()
    np.testing.assert_allclose(w, ref, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_type_as(device):
    x = wg.tensor([1.5, -2.25], device=device, requires_grad=True)
    i = wg.tensor([1, 2], device=device)
    y = x.type_as(x)
    assert y is x  # no copy where the type matches, as torch
    assert i.type_as(x).dtype is wg.float32 and i.type_as(x).device == x.device
    assert x.type_as(i).dtype is wg.int64
    (x.type_as(x.detach()) * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.cpu().numpy(), [3.0, 3.0])
    with pytest.raises(TypeError, match=r"type_as\(\): argument 'other' \(position 1\) must be Tensor, not int"):
        x.type_as(3)


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
def test_type_as_moves_to_the_other_device():
    """PyTorch's type_as is self.type(other.type()), which moves a CPU tensor to CUDA: the device follows."""
    x = wg.tensor([1.0, 2.0])
    y = x.type_as(wg.zeros(1, device="webgpu"))
    assert y.device.type == "webgpu" and y.cpu().tolist() == [1.0, 2.0]
