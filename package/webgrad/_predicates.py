"""torch.is_tensor, numel, is_floating_point and is_nonzero: questions about a tensor, as PyTorch answers them."""

from ._tensor import Tensor


def _tensor_arg(name, input):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    return input


def is_tensor(obj):
    """Whether obj is a webgrad Tensor (Parameters included), as torch.is_tensor."""
    return isinstance(obj, Tensor)


def numel(input):
    """The number of elements of input, as torch.numel."""
    return _tensor_arg("numel", input).numel()


def is_floating_point(input):
    """Whether input's dtype is a floating-point one (float16, float32, float64), as torch.is_floating_point."""
    return _tensor_arg("is_floating_point", input).dtype.is_floating


def is_nonzero(input):
    """Whether the single element of input is nonzero, as torch.is_nonzero: a tensor of no element or of more
    than one is ambiguous (RuntimeError). Reads the value on the host."""
    n = _tensor_arg("is_nonzero", input).numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item())
