"""RAdam (torch.optim.RAdam), composed of tensor ops (replay: see adadelta.py's note).

Adam whose adaptive step is rectified by the variance of its second-moment estimate: while that variance is
intractable (rho_t <= 5, the first steps) the step is the bias-corrected momentum times lr alone, as SGD with
momentum; then the Adam step times the rectification term. Both cases are one expression of per-step
operands, (m / bc1) * lr * (sqrt(bc2) * rect / (sqrt(v) + eps + plain) + plain) with (rect, plain) = (r_t, 0)
or (0, 1), so a recorded step replays correctly across the switch; adding `plain` to the denominator keeps
the unused adaptive term finite (0) where eps is 0 and v is 0.
"""

import math

from .._autograd import no_grad
from ._composed import adam_moments_
from .optimizer import Optimizer, check_hyperparameters


class RAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        check_hyperparameters(lr, eps, betas, weight_decay)
        if differentiable:
            raise NotImplementedError("RAdam(differentiable=True): webgrad's optimizers step outside the graph")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _step_count_in_math(self):  # (the bias corrections and the rectification)
        return True

    def step(self, closure=None):
        loss = self._evaluate(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
            rho_inf = 2 / (1 - beta2) - 1
            for p, grad in self._params_with_grad(group):
                state = self._state_of(p)
                state.setdefault("step", 0.0)
                exp_avg = self._state_tensor(state, "exp_avg", p)
                exp_avg_sq = self._state_tensor(state, "exp_avg_sq", p)
                state["step"] += 1.0
                step = state["step"]
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
                rect, plain = 0.0, 1.0  # the variance is intractable: momentum SGD's step
                if rho_t > 5.0:
                    rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                    plain = 0.0
                decoupled = wd != 0 and group["decoupled_weight_decay"]
                shrink = self._operand(("shrink", id(group), p.device.type), 1 - lr * wd, p) if decoupled else None
                bc1 = self._operand(("bc1", id(p)), bias_correction1, p)
                lr_operand = self._operand(("lr", id(group), p.device.type), lr, p)
                scaled_rect = self._operand(("rect", id(p)), math.sqrt(bias_correction2) * rect, p)
                plain = self._operand(("plain", id(p)), plain, p)
                if self._replaying:
                    continue
                with no_grad():
                    grad = adam_moments_(p, grad, exp_avg, exp_avg_sq, group, shrink, beta1, beta2)
                    adaptive = scaled_rect / (exp_avg_sq.sqrt() + eps + plain) + plain
                    p.sub_(exp_avg / bc1 * lr_operand * adaptive)
        return loss
