"""Values torch refuses where it reads them: one_hot's classes, binary_cross_entropy's probabilities, an integer
divisor of 0. torch raises RuntimeError; webgrad's CPU raises at the call, WebGPU at the next read-back (the
check_values kernel and the runtime's error word), never with a silent answer (rows of zeros, NaN, a loss, a
quotient). Valid values give torch's answer."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import webgrad as wg
import webgrad.nn.functional as F
from helpers import DEVICES


def _raises_as_torch(device, torch_call, call, words):
    """torch raises RuntimeError matching `words`; so does `call` on `device`: at once on the CPU, at the read-back
    of its result on WebGPU (the call itself returns)."""
    with pytest.raises(RuntimeError, match=words):
        torch_call()
    if device == "cpu":
        with pytest.raises(RuntimeError, match=words):
            call()
        return
    out = call()
    with pytest.raises(RuntimeError, match=words):
        out.tolist() if out.numel() else wg.webgpu.synchronize()  # (an empty result reads nothing back)


def _still_works(device):
    """The error is consumed: the device computes and reads back as before."""
    assert (wg.arange(4, device=device) * 2).tolist() == [0, 2, 4, 6]


# ------------------------------------------------------------------ one_hot

ONE_HOT_BAD = [([[3]], 2, "smaller than num_classes"), ([0, 1, 2], 2, "smaller than num_classes"),
               ([[-1]], 2, "non-negative"), ([1, -3, 0], 4, "non-negative"), ([2, -1], -1, "non-negative"),
               ([0], 0, "smaller than num_classes")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("values,num_classes,words", ONE_HOT_BAD, ids=str)
def test_one_hot_out_of_range_raises_as_torch(device, values, num_classes, words):
    _raises_as_torch(device, lambda: TF.one_hot(torch.tensor(values), num_classes),
                     lambda: F.one_hot(wg.tensor(values, device=device), num_classes), words)
    _still_works(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("values,num_classes", [([[0, 2], [1, 1]], 3), ([4, 0], -1), ([1], 2), ([], 3)], ids=str)
def test_one_hot_in_range_is_torchs(device, values, num_classes):
    want = TF.one_hot(torch.tensor(values, dtype=torch.int64), num_classes)
    got = F.one_hot(wg.tensor(values, dtype=wg.int64, device=device), num_classes)
    assert got.dtype is wg.int64 and tuple(got.shape) == tuple(want.shape)
    assert got.to("cpu").numpy().tolist() == want.tolist()


@pytest.mark.parametrize("device", DEVICES)
def test_one_hot_int32_classes_are_checked_too(device):
    # (torch takes int64 classes only; webgrad takes int32 as well, and checks them alike)
    call = lambda: F.one_hot(wg.tensor([0, 5], dtype=wg.int32, device=device), 5)  # noqa: E731
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        call() if device == "cpu" else call().tolist()


# ------------------------------------------------------------------ binary_cross_entropy

BCE_BAD = [([1.5], [1.0], "input"), ([-0.1], [0.0], "input"), ([math.nan], [1.0], "input"), ([0.5, 1.0 + 1e-6], [1, 1], "input"),
           ([0.5], [2.0], "target"), ([0.5], [-0.5], "target"), ([0.5], [math.nan], "target"),
           ([0.25, 0.75], [0.0, 1.0 + 2 ** -20], "target")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("x,y,which", BCE_BAD, ids=str)
def test_bce_outside_0_1_raises_as_torch(device, reduction, x, y, which):
    words = f"all elements of {which} should be between 0 and 1"
    _raises_as_torch(device, lambda: TF.binary_cross_entropy(torch.tensor(x), torch.tensor(y, dtype=torch.float32),
                                                             reduction=reduction),
                     lambda: F.binary_cross_entropy(wg.tensor(x, device=device), wg.tensor(y, dtype=wg.float32,
                                                                                           device=device),
                                                    reduction=reduction), words)
    _still_works(device)


@pytest.mark.parametrize("device", DEVICES)
def test_bce_in_range_is_torchs_with_its_gradient(device):
    x = np.array([0.0, 0.25, 0.5, 0.999, 1.0], np.float32)
    y = np.array([0.0, 1.0, 0.3, 1.0, 1.0], np.float32)
    tx = torch.tensor(x, requires_grad=True)
    want = TF.binary_cross_entropy(tx, torch.tensor(y))
    want.backward()
    wx = wg.tensor(x, device=device, requires_grad=True)
    got = F.binary_cross_entropy(wx, wg.tensor(y, device=device))
    got.backward()
    assert got.item() == pytest.approx(want.item(), rel=1e-6)
    np.testing.assert_allclose(wx.grad.to("cpu").numpy(), tx.grad.numpy(), rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_bce_checks_a_strided_input(device):
    x = wg.tensor([[0.5, 3.0], [0.5, 0.5]], device=device).t()  # (not contiguous: the kernel copies it first)
    if device == "cpu":
        with pytest.raises(RuntimeError, match="input should be between 0 and 1"):
            F.binary_cross_entropy(x, wg.full((2, 2), 0.5, device=device))
        return
    loss = F.binary_cross_entropy(x, wg.full((2, 2), 0.5, device=device))
    with pytest.raises(RuntimeError, match="input should be between 0 and 1"):
        loss.item()


# ------------------------------------------------------------------ integer division by zero

DIVISIONS = {
    "floor_divide": (lambda a, b: a // b, lambda a, b: a // b),
    "remainder": (lambda a, b: a % b, lambda a, b: a % b),
    "torch.remainder": (torch.remainder, wg.remainder),
    "torch.floor_divide": (torch.floor_divide, wg.floor_divide),
    "div_floor": (lambda a, b: torch.div(a, b, rounding_mode="floor"), lambda a, b: wg.div(a, b, rounding_mode="floor")),
    "div_trunc": (lambda a, b: torch.div(a, b, rounding_mode="trunc"), lambda a, b: wg.div(a, b, rounding_mode="trunc")),
}
INT_DTYPES = ["int64", "int32", "uint8"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", sorted(DIVISIONS))
def test_integer_division_by_a_zero_element_raises_as_torch(device, dtype, name):
    t_op, w_op = DIVISIONS[name]
    a, b = [7, 5, 9], [2, 0, 3]
    tt, wt = getattr(torch, dtype), getattr(wg, dtype)
    _raises_as_torch(device, lambda: t_op(torch.tensor(a, dtype=tt), torch.tensor(b, dtype=tt)),
                     lambda: w_op(wg.tensor(a, dtype=wt, device=device), wg.tensor(b, dtype=wt, device=device)),
                     "ZeroDivisionError")
    _still_works(device)


@pytest.mark.parametrize("device", DEVICES)
def test_a_division_by_zero_is_also_pythons_zero_division_error(device):
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        (wg.tensor([4, 6], device=device) // wg.tensor([1, 0], device=device)).tolist()
    with pytest.raises(ZeroDivisionError):
        wg.tensor([4, 6], device=device) % 0  # a Python zero: refused on the host, on every device
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        (7 // wg.tensor([0, 3], device=device)).tolist()  # the reflected form checks its tensor divisor


@pytest.mark.parametrize("device", DEVICES)
def test_a_broadcast_divisor_is_checked(device):
    a = wg.tensor([[5, 6], [7, 8]], device=device)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        (a // wg.tensor([3, 0], device=device)).tolist()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        (a % wg.tensor([[3], [0]], device=device).expand(2, 2)).tolist()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", sorted(DIVISIONS))
def test_integer_division_without_zeros_is_torchs(device, dtype, name):
    t_op, w_op = DIVISIONS[name]
    if dtype == "uint8":
        a, b = [7, 5, 255, 0, 200], [2, 5, 16, 3, 201]
    else:
        a, b = [7, -5, 9, -9, 0, 2 ** 20 + 3], [2, 3, -4, -2, 5, -7]
    tt, wt = getattr(torch, dtype), getattr(wg, dtype)
    want = t_op(torch.tensor(a, dtype=tt), torch.tensor(b, dtype=tt))
    got = w_op(wg.tensor(a, dtype=wt, device=device), wg.tensor(b, dtype=wt, device=device))
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("device", DEVICES)
def test_float_division_by_zero_stays_ieee(device):
    # torch divides floats by zero without complaint (inf, nan): no check there
    x, y = [1.0, -1.0, 0.0], [0.0, 0.0, 0.0]
    want = torch.floor_divide(torch.tensor(x), torch.tensor(y))
    got = wg.floor_divide(wg.tensor(x, device=device), wg.tensor(y, device=device)).tolist()
    np.testing.assert_array_equal(np.array(got), want.numpy())
