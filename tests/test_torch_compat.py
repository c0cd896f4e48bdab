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


# ----------------------------------------------------------------- conversions and constructors
def test_legacy_tensor_constructor_as_torch():
    import torch
    for args in ((3, 4), (3,), ()):
        assert tuple(wg.Tensor(*args).shape) == tuple(torch.Tensor(*args).shape)
        assert wg.Tensor(*args).dtype is wg.float32
    assert tuple(wg.Tensor(wg.Size([2, 3])).shape) == (2, 3)
    assert wg.Tensor([1, 2]).tolist() == [1.0, 2.0] and wg.Tensor([1, 2]).dtype is wg.float32  # float, as torch
    assert wg.Tensor((2, 3)).tolist() == [2.0, 3.0]
    assert wg.Tensor(wg.tensor([1, 2])).dtype is wg.int32  # a tensor keeps its dtype
    assert isinstance(wg.Tensor(2, 2), wg.Tensor)


def test_format_spec_on_0d_tensor():
    import torch
    value = 1.23456789
    for spec in (".4f", ".2e", "", "8.3f"):
        assert format(wg.tensor(value), spec) == format(torch.tensor(value), spec)
    assert f"{wg.tensor(7)}" == "7"
    with pytest.raises(TypeError):
        f"{wg.ones(2):.2f}"


def test_double_and_long():
    x = wg.tensor([1.5, 2.0])
    assert x.double().dtype is wg.float64 and x.double().tolist() == [1.5, 2.0]
    if webgpu_available():
        with pytest.raises(TypeError, match="64-bit floats"):
            x.to("webgpu").double()
    # the int64 decision, pinned: webgrad's integers are int32; long() says so once per process
    from webgrad import dtypes
    dtypes._warned_int64.clear()
    with pytest.warns(UserWarning, match="int32"):
        y = x.long()
    assert y.dtype is wg.int32 and y.dtype == wg.long and wg.long is wg.int32
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x.long()  # once only


def test_from_numpy_shares_memory_on_cpu():
    import numpy as np
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = wg.from_numpy(a)
    assert t.device == "cpu"
    a[0, 0] = 9
    t[1, 1] = -1
    assert t.tolist() == [[9, 1, 2], [3, -1, 5]] and a[1, 1] == -1
    strided = wg.from_numpy(a[:, ::2])  # a strided array shares too
    a[1, 2] = 42
    assert strided.tolist() == [[9, 2], [3, 42]] and strided.stride() == (3, 2)
    copied = wg.from_numpy(np.array([1, 2], dtype=np.int64))  # int64 becomes int32: a copy
    assert copied.dtype is wg.int32 and copied.tolist() == [1, 2]
