"""SparseAdam (torch.optim.SparseAdam): Adam's lazy variant for sparse gradients (nn.Embedding(sparse=True)).

Only the rows present in the gradient change, parameters and moments alike; a row the gradient leaves out keeps
its moments (Adam would decay them). Per parameter, as torch's:

    g = coalesce(grad)  (-grad when maximize);  rows = its indices;  m, v = exp_avg[rows], exp_avg_sq[rows]
    m += (1 - beta1) * (g - m);  v += (1 - beta2) * (g^2 - v);  exp_avg[rows], exp_avg_sq[rows] = m, v
    p[rows] -= lr * sqrt(1 - beta2^step) / (1 - beta1^step) * m / (sqrt(v) + eps)

Coalescing reads the indices back to the host (sparse/_coo.py); the rest is index_select / index_copy_ /
index_add_ on the device. A dense gradient is refused with torch's RuntimeError.
"""

import math

from .._autograd import no_grad
from ..sparse._coo import _linear
from .._tensor import zeros_like
from ._sparse_grads import check_sparse_grad
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
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if not grad.is_sparse:
                    raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
                check_sparse_grad(p, grad)
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = zeros_like(p)
                    state["exp_avg_sq"] = zeros_like(p)
                state["step"] += 1
                with no_grad():
                    self._lazy_update(p, -grad if group["maximize"] else grad, state, group, beta1, beta2)
        return loss

    @staticmethod
    def _lazy_update(p, grad, state, group, beta1, beta2):
        grad = grad.coalesce()  # the update is not linear: each row once
        if grad._nnz() == 0:
            return
        sd = grad.sparse_dim()
        rows_shape = (math.prod(p.shape[:sd]),) + tuple(p.shape[sd:])
        rows = _linear(grad._indices(), tuple(p.shape[:sd]))
        values = grad._values()
        exp_avg, exp_avg_sq = state["exp_avg"].view(rows_shape), state["exp_avg_sq"].view(rows_shape)
        old_avg, old_avg_sq = exp_avg.index_select(0, rows), exp_avg_sq.index_select(0, rows)
        numer = (values - old_avg) * (1 - beta1) + old_avg
        avg_sq = (values * values - old_avg_sq) * (1 - beta2) + old_avg_sq
        exp_avg.index_copy_(0, rows, numer)
        exp_avg_sq.index_copy_(0, rows, avg_sq)
        step = state["step"]
        step_size = group["lr"] * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
        p.view(rows_shape).index_add_(0, rows, -step_size * (numer / (avg_sq.sqrt() + group["eps"])))
