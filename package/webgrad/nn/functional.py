"""webgrad.nn.functional: the stateless forms of layers, activations and losses (as torch.nn.functional)."""

from ..ops.elementwise import gelu, leaky_relu, relu, sigmoid, silu, softplus, tanh  # noqa: F401
from ..ops.loss import cross_entropy  # noqa: F401
from ..ops.matmul import linear  # noqa: F401
from ..ops.reduce import log_softmax, softmax  # noqa: F401
