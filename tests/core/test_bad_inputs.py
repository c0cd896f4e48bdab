"""Bad input across the public API gets an error that names the problem, on every device, as PyTorch
raises (issue: no silent wrong answers). Each row: a call on device `d`, the error type, and words the
message must contain."""

import math

import pytest

import webgrad as wg
import webgrad.nn as nn
import webgrad.nn.functional as F


def _params():
    return [wg.zeros(2, requires_grad=True)]


CASES = [
    # shapes
    ("matmul_inner_sizes", lambda d: wg.randn(2, 3, device=d) @ wg.randn(4, 5, device=d), RuntimeError, "cannot be multiplied"),
    ("reshape_numel", lambda d: wg.randn(2, 3, device=d).reshape(4, 2), RuntimeError, "invalid for input of size 6"),
    ("cat_sizes", lambda d: wg.cat([wg.randn(2, 3, device=d), wg.randn(3, 2, device=d)]), RuntimeError, "must match"),
    ("broadcast", lambda d: wg.randn(3, device=d) + wg.randn(4, device=d), RuntimeError, "cannot be broadcast"),
    ("dim_out_of_range", lambda d: wg.randn(2, 3, device=d).sum(dim=5), IndexError, "Dimension out of range"),
    ("softmax_dim", lambda d: F.softmax(wg.randn(2, 3, device=d), dim=2), IndexError, "Dimension out of range"),
    ("linear_features", lambda d: nn.Linear(3, 2).to(d)(wg.randn(4, 5, device=d)), RuntimeError, "5 features"),
    ("conv_channels", lambda d: nn.Conv2d(3, 1, 3).to(d)(wg.randn(1, 2, 5, 5, device=d)), RuntimeError, "2 channels"),
    ("layer_norm_shape", lambda d: nn.LayerNorm(4).to(d)(wg.randn(2, 5, device=d)), RuntimeError, "normalized_shape"),
    ("batch_norm_channels", lambda d: nn.BatchNorm2d(3).to(d)(wg.randn(2, 4, 5, 5, device=d)), RuntimeError, "shape [4]"),
    ("bce_target_size", lambda d: F.binary_cross_entropy(wg.rand(3, device=d), wg.rand(4, device=d)), ValueError,
     "different to the input size"),
    ("ragged_list", lambda d: wg.tensor([[1, 2], [3]], device=d), ValueError, "rectangular"),
    ("negative_size", lambda d: wg.randn(-1, device=d), RuntimeError, "negative dimension -1"),  # as torch
    # geometry and ranges
    ("conv_stride_zero", lambda d: nn.Conv2d(1, 1, 3, stride=0).to(d)(wg.randn(1, 1, 5, 5, device=d)), ValueError,
     "stride and dilation must be positive"),
    ("conv_kernel_zero", lambda d: F.conv2d(wg.randn(1, 1, 5, 5, device=d), wg.randn(1, 1, 0, 0, device=d)), ValueError,
     "kernel size must be positive"),
    ("max_pool_kernel_zero", lambda d: F.max_pool2d(wg.randn(1, 1, 4, 4, device=d), 0), ValueError, "must be positive"),
    ("avg_pool_stride_zero", lambda d: F.avg_pool2d(wg.randn(1, 1, 4, 4, device=d), 2, stride=0), ValueError,
     "must be positive"),
    ("conv_too_small", lambda d: F.conv2d(wg.randn(1, 1, 2, 2, device=d), wg.randn(1, 1, 3, 3, device=d)), RuntimeError,
     "too small"),
    ("dropout_p", lambda d: F.dropout(wg.randn(2, device=d), p=1.5), ValueError, "between 0 and 1"),
    ("linspace_steps", lambda d: wg.linspace(0, 1, -2, device=d), ValueError, "non-negative"),
    ("pad_mode", lambda d: F.pad(wg.randn(1, 2, 3, device=d), (1, 1), mode="foo"), NotImplementedError, "mode must be"),
    ("int_floor_divide_by_zero", lambda d: wg.tensor([5, -5, 0], device=d) // 0, ZeroDivisionError, "division by zero"),
    ("int_remainder_by_zero", lambda d: wg.tensor([5, -5, 0], device=d) % 0, ZeroDivisionError, "division by zero"),
    # dtypes
    ("embedding_float_index", lambda d: nn.Embedding(5, 2).to(d)(wg.tensor([1.0], device=d)), TypeError, "integer tensor"),
    ("index_select_float_index", lambda d: wg.randn(3, device=d).index_select(0, wg.tensor([0.0], device=d)), TypeError,
     "integer tensor"),
    ("cross_entropy_float_target", lambda d: F.cross_entropy(wg.randn(3, 4, device=d), wg.rand(3, device=d)),
     RuntimeError, "probability targets must have the input's shape"),
    ("one_hot_float", lambda d: F.one_hot(wg.rand(3, device=d), 4), RuntimeError, "index tensor"),
    ("requires_grad_int", lambda d: wg.tensor([1, 2], device=d).requires_grad_(), RuntimeError, "floating point"),
    # devices
    ("device_mix", lambda d: wg.randn(2) + wg.randn(2, device=d) if d != "cpu" else wg.randn(2, device="cpu:1"),
     (RuntimeError, ValueError), "device"),
    ("device_index", lambda d: wg.zeros(2, device=f"{d}:7"), ValueError, "one"),
    ("device_name", lambda d: wg.zeros(2, device="tpu"), ValueError, "unknown device"),
    ("device_unavailable", lambda d: wg.zeros(2, device="cuda"), RuntimeError, "webgpu"),
    # optimizers and schedulers
    ("sgd_lr_nan", lambda d: wg.optim.SGD(_params(), lr=math.nan), ValueError, "Invalid learning rate"),
    ("adam_lr_negative", lambda d: wg.optim.Adam(_params(), lr=-1), ValueError, "Invalid learning rate"),
    ("rmsprop_lr_inf", lambda d: wg.optim.RMSprop(_params(), lr=math.inf), ValueError, "Invalid learning rate"),
    ("sgd_momentum", lambda d: wg.optim.SGD(_params(), lr=0.1, momentum=-1), ValueError, "momentum"),
    ("adam_betas", lambda d: wg.optim.Adam(_params(), betas=(1.5, 0.9)), ValueError, "beta parameter"),
    ("step_lr_zero", lambda d: wg.optim.lr_scheduler.StepLR(wg.optim.SGD(_params(), lr=0.1), step_size=0), ValueError,
     "step_size"),
]

# Values only the host can check without a GPU read-back: checked where they live on the host (the CPU
# device), as PyTorch does; on WebGPU the kernels' device-side error word covers index ranges.
HOST_VALUE_CASES = [
    ("one_hot_class_too_large", lambda d: F.one_hot(wg.tensor([3], device=d), num_classes=2), RuntimeError,
     "smaller than num_classes"),
    ("one_hot_negative", lambda d: F.one_hot(wg.tensor([-1], device=d), num_classes=2), RuntimeError, "non-negative"),
    ("bce_input_above_one", lambda d: F.binary_cross_entropy(wg.tensor([1.5], device=d), wg.tensor([1.0], device=d)),
     RuntimeError, "between 0 and 1"),
    ("int_floor_divide_by_zero_tensor", lambda d: wg.tensor([5, 1], device=d) // wg.tensor([0, 1], device=d),
     ZeroDivisionError, "division by zero"),
]


@pytest.mark.parametrize("name,call,error,words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_names_the_problem(name, call, error, words, device):
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        call(device)


@pytest.mark.parametrize("name,call,error,words", HOST_VALUE_CASES, ids=[c[0] for c in HOST_VALUE_CASES])
def test_bad_values_known_on_the_host(name, call, error, words):
    with pytest.raises(error, match=words):
        call("cpu")
