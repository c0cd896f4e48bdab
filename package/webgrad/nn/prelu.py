"""PReLU: a ReLU whose negative slope is learnt, one value or one per channel (F.prelu)."""

from .._tensor import empty
from . import functional as F
from .init import constant_  # by name: PyTorch's `init` argument shadows the module
from .module import Module
from .parameter import Parameter


class PReLU(Module):
    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"

