"""Ops composed of other ops (their gradients come from the ops they are built from)."""

import warnings


def _legacy_value_first(op, tensor1, tensor2, rest, value):
    """(tensor1, tensor2, value) of PyTorch's deprecated overload op(input, value, tensor1, tensor2), value a number
    (x.addcmul_(1 - beta, g, g) in scripts from before PyTorch 1.5), with PyTorch's warning."""
    if not rest:
        return tensor1, tensor2, value
    if len(rest) > 1 or not isinstance(tensor1, (int, float)):
        raise TypeError(f"{op}() takes 3 positional arguments (input, tensor1, tensor2; value by keyword), "
                        f"or the deprecated 4 (input, value, tensor1, tensor2) with value a number")
    warnings.warn(f"This overload of {op} is deprecated:\n\t{op}(Tensor input, Number value, Tensor tensor1, Tensor "
                  f"tensor2)\nConsider using one of the following signatures instead:\n\t{op}(Tensor input, Tensor "
                  "tensor1, Tensor tensor2, *, Number value = 1)", UserWarning, stacklevel=3)
    return tensor2, rest[0], tensor1


def addcmul(input, tensor1, tensor2, *rest, value=1):
    """input + value * tensor1 * tensor2 (torch.addcmul)."""
    tensor1, tensor2, value = _legacy_value_first("addcmul", tensor1, tensor2, rest, value)
    return input + (tensor1 * tensor2) * value if value != 1 else input + tensor1 * tensor2


def addcdiv(input, tensor1, tensor2, *rest, value=1):
    """input + value * tensor1 / tensor2 (torch.addcdiv)."""
    tensor1, tensor2, value = _legacy_value_first("addcdiv", tensor1, tensor2, rest, value)
    return input + (tensor1 / tensor2) * value if value != 1 else input + tensor1 / tensor2
