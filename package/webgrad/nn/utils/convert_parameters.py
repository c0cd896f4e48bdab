"""torch.nn.utils.parameters_to_vector and vector_to_parameters: a model's parameters as one flat vector."""

from ..._tensor import Tensor


def _check_same_device(param, device):
    if device is not None and param.device != device:
        raise TypeError(f"Found two parameters on different devices, this is currently not supported. "
                        f"({device} and {param.device})")
    return param.device


def parameters_to_vector(parameters):
    """The parameters (an iterable of tensors, all on one device) flattened and concatenated in order, as
    torch's; differentiable."""
    from ...ops.shape import cat
    device, flat = None, []
    for param in parameters:
        device = _check_same_device(param, device)
        flat.append(param.reshape(-1))
    return cat(flat)


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of the 1-D tensor vec into the parameters' data (shapes kept), as torch's: the
    parameters' .data is replaced, outside autograd."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    device, pointer = None, 0
    for param in parameters:
        device = _check_same_device(param, device)
        n = param.numel()
        param.data = vec[pointer:pointer + n].view_as(param).data
        pointer += n
