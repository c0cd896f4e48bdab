"""NAdam (torch.optim.NAdam), composed of tensor ops (replay: see adadelta.py's note).

Adam with Nesterov momentum and a momentum schedule mu_t = beta1 (1 - 0.5 * 0.96^(t * momentum_decay)).
The running product of the mu_t is kept in float32, as PyTorch keeps it (a float32 0-d tensor), so the
trajectories agree to the last bits.
"""

import struct

from .._autograd import no_grad
from ._composed import adam_moments_
from .optimizer import Optimizer, check_hyperparameters


def _f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


class NAdam(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        check_hyperparameters(lr, eps, betas, weight_decay, momentum_decay=momentum_decay)
        if differentiable:
            raise NotImplementedError("NAdam(differentiable=True): webgrad's optimizers step outside the graph")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _step_count_in_math(self):  # (the momentum schedule, the bias correction)
        return True

    def step(self, closure=None):
        loss = self._evaluate(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, wd, eps, decay = group["lr"], group["weight_decay"], group["eps"], group["momentum_decay"]
            for p, grad in self._params_with_grad(group):
                state = self._state_of(p)
                state.setdefault("step", 0.0)
                state.setdefault("mu_product", 1.0)
                exp_avg = self._state_tensor(state, "exp_avg", p)
                exp_avg_sq = self._state_tensor(state, "exp_avg_sq", p)
                state["step"] += 1.0
                step = state["step"]
                mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * decay)))
                mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * decay)))
                state["mu_product"] = mu_product = _f32(state["mu_product"] * _f32(mu))  # float32 * float32, as torch
                decoupled = wd != 0 and group["decoupled_weight_decay"]
                shrink = self._operand(("shrink", id(group), p.device.type), 1 - lr * wd, p) if decoupled else None
                bias_correction2 = self._operand(("bc2", id(p)), 1 - beta2 ** step, p)
                grad_step = self._operand(("grad_step", id(p)), lr * (1.0 - mu) / (1.0 - mu_product), p)
                avg_step = self._operand(("avg_step", id(p)), lr * mu_next / (1.0 - mu_product * mu_next), p)
                if self._replaying:
                    continue
                with no_grad():
                    grad = adam_moments_(p, grad, exp_avg, exp_avg_sq, group, shrink, beta1, beta2)
                    denom = (exp_avg_sq / bias_correction2).sqrt() + eps
                    p.sub_(grad / denom * grad_step)
                    p.sub_(exp_avg / denom * avg_step)
        return loss
