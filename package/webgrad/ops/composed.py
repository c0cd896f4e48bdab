"""Ops composed of other ops (their gradients come from the ops they are built from)."""


def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2 (torch.addcmul)."""
    return input + (tensor1 * tensor2) * value if value != 1 else input + tensor1 * tensor2


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2 (torch.addcdiv)."""
    return input + (tensor1 / tensor2) * value if value != 1 else input + tensor1 / tensor2
