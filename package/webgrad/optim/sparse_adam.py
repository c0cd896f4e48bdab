"""SparseAdam (torch.optim.SparseAdam): Adam for sparse gradients, which webgrad does not have.

PyTorch's SparseAdam refuses a dense gradient at step(). Every webgrad gradient is dense, so the optimizer
is made, checked and saved as PyTorch's, and step() raises PyTorch's RuntimeError for any parameter with a
gradient: a script that reaches it fails as it would in PyTorch with dense gradients (use Adam instead).
"""

from .optimizer import Optimizer


class SparseAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        complex_params = [[i, j] for i, group in enumerate(self.param_groups)
                          for j, p in enumerate(group["params"]) if p.is_complex()]
        if complex_params:
            raise ValueError(f"Complex params at indices {complex_params}: SparseAdam does not support complex "
                             "parameters")

    def step(self, closure=None):
        loss = self._evaluate(closure)
        for group in self.param_groups:
            if any(p.grad is not None for p in group["params"]):
                raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
        return loss
