"""PyTorch scripts' surface: device discovery with PyTorch's meaning (issue 13)."""

import pytest

import webgrad as wg
from helpers import webgpu_available


def test_cuda_and_mps_are_absent():
    assert wg.cuda.is_available() is False
    assert wg.cuda.device_count() == 0
    assert wg.backends.mps.is_available() is False
    # the idiom of pytorch/examples picks the CPU
    assert wg.device("cuda" if wg.cuda.is_available() else "cpu") == "cpu"


def test_cudnn_flags_accept_assignment():
    before = (wg.backends.cudnn.benchmark, wg.backends.cudnn.deterministic)
    try:
        wg.backends.cudnn.benchmark = True
        wg.backends.cudnn.deterministic = True
        assert wg.backends.cudnn.benchmark is True and wg.backends.cudnn.deterministic is True
    finally:
        wg.backends.cudnn.benchmark, wg.backends.cudnn.deterministic = before


def test_accelerator_is_webgpu_when_there_is_an_adapter():
    has = webgpu_available()
    assert wg.accelerator.is_available() is has
    acc = wg.accelerator.current_accelerator()
    if has:
        assert acc == wg.device("webgpu") and acc.type == "webgpu"
        assert wg.zeros(2, device=acc).device == "webgpu"
    else:
        assert acc is None


def test_cuda_device_names_webgpu_in_the_error():
    with pytest.raises(ValueError, match="webgpu"):
        wg.device("cuda")
