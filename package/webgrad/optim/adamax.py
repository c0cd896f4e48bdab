"""Adamax (torch.optim.Adamax), composed of tensor ops (replay: see adadelta.py's note).

    m = lerp(m, g, 1 - beta1);  u = max(beta2 * u, |g| + eps);  p -= lr / (1 - beta1^step) * m / u
"""

from .._autograd import no_grad
from ._composed import lerp_
from .optimizer import Optimizer, check_hyperparameters, coupled_grad


class Adamax(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        check_hyperparameters(lr, eps, betas, weight_decay)
        if differentiable:
            raise NotImplementedError("Adamax(differentiable=True): webgrad's optimizers step outside the graph")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _step_count_in_math(self):  # (the bias correction)
        return True

    def step(self, closure=None):
        loss = self._evaluate(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p, grad in self._params_with_grad(group):
                state = self._state_of(p)
                state.setdefault("step", 0.0)
                exp_avg = self._state_tensor(state, "exp_avg", p)
                exp_inf = self._state_tensor(state, "exp_inf", p)
                state["step"] += 1.0
                clr = self._operand(("clr", id(p)), group["lr"] / (1 - beta1 ** state["step"]), p)
                if self._replaying:
                    continue
                with no_grad():
                    grad = coupled_grad(grad, p, group["maximize"], group["weight_decay"])
                    lerp_(exp_avg, grad, 1 - beta1)
                    exp_inf.copy_((exp_inf * beta2).maximum(grad.abs() + group["eps"]))
                    p.sub_(exp_avg / exp_inf * clr)
        return loss
