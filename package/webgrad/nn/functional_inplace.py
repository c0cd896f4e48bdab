"""F.relu_, F.elu_, F.leaky_relu_, F.hardtanh_, F.selu_, F.celu_: the activations written into their input, which
they return, as torch.nn.functional's (each is its activation with inplace=True)."""

from ..ops.elementwise import function as _table_function

relu, elu, leaky_relu, hardtanh, selu, celu = map(_table_function, ("relu", "elu", "leaky_relu", "hardtanh", "selu",
                                                                     "celu"))


def relu_(input):
    return relu(input, inplace=True)


def elu_(input, alpha=1.0):
    return elu(input, alpha, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def selu_(input):
    return selu(input, inplace=True)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


__all__ = ["relu_", "elu_", "leaky_relu_", "hardtanh_", "selu_", "celu_"]
