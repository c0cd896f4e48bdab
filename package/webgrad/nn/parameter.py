"""nn.Parameter: a Tensor that a Module registers as one of its parameters (requires_grad by default).

A Parameter shares storage with the tensor it wraps. It stays a Parameter only as an object: any op on
it returns a plain Tensor, as in PyTorch.
"""

from .._tensor import Tensor, empty


class Parameter(Tensor):
    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): expected a Tensor, got {type(data).__name__}")
        self._init(data._view, data.device)
        if requires_grad:
            self.requires_grad_(True)  # refuses integer tensors with a clear message

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = Parameter(self.detach().clone(), self.requires_grad)
        return memo[id(self)]

    def __reduce__(self):
        return (_rebuild_parameter, (self.detach(), self.requires_grad))


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)
