"""What PyTorch's OpInfo samples found on the webgpu torch device, each against PyTorch on the CPU: zero gradients,
empty indices, Python numbers in the CPU fallback, the strides of copies between devices."""

import os
import warnings

import pytest

torch = pytest.importorskip("torch")
if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 9):
    pytest.skip("webgrad.torch_device needs torch >= 2.9", allow_module_level=True)

from helpers import webgpu_available  # noqa: E402

if not webgpu_available():  # the mechanics on webgrad's NumPy backend where no adapter exists
    os.environ.setdefault("WEBGRAD_TORCH_DEVICE", "cpu")

import webgrad.torch_device as td  # noqa: E402

DEV = "webgpu"


def test_sgn_backward_of_a_real_tensor_is_zeros_on_the_device():
    """ATen's gradient of sgn for real inputs is an efficient ZeroTensor: made on the device, no fallback."""
    x = torch.randn(4, 5)
    gx = x.to(DEV).requires_grad_()
    with td.strict():
        (grad,) = torch.autograd.grad(gx.sgn().sum(), gx)
    assert grad.device.type == DEV
    torch.testing.assert_close(grad.cpu(), torch.zeros(4, 5))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int64])
def test_gather_backward_with_an_empty_index(dtype):
    """An empty index of any shape and integer dtype is accepted by gather, and its backward scatters nothing."""
    x = torch.randn(5, requires_grad=True)
    gx = x.detach().to(DEV).requires_grad_()
    index = torch.zeros(2, 0, dtype=dtype)
    out = x.gather(0, index)
    gout = gx.gather(0, index.to(DEV))
    assert gout.shape == out.shape
    (grad,) = torch.autograd.grad(out.sum(), x, allow_unused=True, materialize_grads=True)
    (ggrad,) = torch.autograd.grad(gout.sum(), gx, allow_unused=True, materialize_grads=True)
    torch.testing.assert_close(ggrad.cpu(), grad)
    # scatter_add_ and scatter_ with an empty index leave self as it is, as on the CPU
    target = torch.arange(5.0)
    for fn in (lambda t, i, s: t.scatter_add_(0, i, s), lambda t, i, s: t.scatter_(0, i, s)):
        expected = fn(target.clone(), index, torch.zeros(2, 0))
        got = fn(target.to(DEV), index.to(DEV), torch.zeros(2, 0, device=DEV))
        torch.testing.assert_close(got.cpu(), expected)


@pytest.mark.parametrize("call", [
    lambda x, out: torch.special.zeta(x, 2.0, out=out),
    lambda x, out: torch.special.zeta(2.0, x, out=out),
    lambda x, out: torch.special.chebyshev_polynomial_t(x, 3, out=out),
    lambda x, out: torch.special.hermite_polynomial_h(x, 2, out=out),
], ids=["zeta_other", "zeta_self", "chebyshev_t", "hermite_h"])
def test_the_cpu_fallback_takes_python_numbers_for_tensor_arguments_of_out_overloads(call):
    """PyTorch hands the boxed fallback a wrapped number as a Python number; the out= overload wants a Tensor."""
    x = torch.rand(6) + 1
    expected = call(x, torch.empty(6))
    out = torch.empty(6, device=DEV)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the fallback's one warning per op)
        got = call(x.to(DEV), out)
    assert got is out
    torch.testing.assert_close(out.cpu(), expected)


CASES = {
    "transposed": lambda: torch.randn(3, 4).t(),
    "permuted": lambda: torch.randn(2, 3, 4).permute(2, 0, 1),
    "channels_last": lambda: torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last),
    "strided": lambda: torch.randn(3, 8)[:, ::2],
    "transposed_strided": lambda: torch.randn(4, 6).t()[::2],
    "expanded": lambda: torch.randn(3, 1).expand(3, 4),
    "offset": lambda: torch.randn(5)[1:4],
}


@pytest.mark.parametrize("case", list(CASES))
def test_copies_between_devices_keep_strides_as_preserve_format_does(case):
    """.to("webgpu"), .cpu(), .to(dtype) and .clone() keep a non-overlapping and dense tensor's strides (a
    transposed one's too), and give other tensors dense strides in the order of theirs, as on the CPU."""
    t = CASES[case]()
    g = t.to(DEV)
    assert g.stride() == t.clone().stride()
    back = g.cpu()
    assert back.stride() == t.clone().stride()
    torch.testing.assert_close(back, t)
    for copy, reference in ((g.to(torch.int32), t.to(torch.int32)), (g.clone(), t.clone()),
                            (g.contiguous(), t.contiguous())):
        assert copy.device.type == DEV and copy.stride() == reference.stride()
        torch.testing.assert_close(copy.cpu(), reference)


def test_copies_take_the_memory_format_asked_for():
    t = torch.randn(2, 3, 4, 5)
    g = t.to(DEV)
    for fmt in (torch.channels_last, torch.contiguous_format):
        got = g.contiguous(memory_format=fmt)
        assert got.stride() == t.contiguous(memory_format=fmt).stride()
        torch.testing.assert_close(got.cpu(), t)
        assert g.to(torch.float32, memory_format=fmt, copy=True).stride() == t.to(memory_format=fmt).stride()
    v = torch.randn(2, 3, 4, 5, 6)
    assert torch.empty(2, 3, 4, 5, 6, device=DEV, memory_format=torch.channels_last_3d).stride() == \
        v.contiguous(memory_format=torch.channels_last_3d).stride()
