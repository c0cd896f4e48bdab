"""ASGD (torch.optim.ASGD), averaged stochastic gradient descent, composed of tensor ops (replay: see
adadelta.py's note).

Each step decays the parameter by (1 - lambd * eta), moves it by -eta * grad, and folds it into the running
average ax with weight mu; then eta = lr / (1 + lambd * lr * step) ** alpha and mu = 1 / max(1, step - t0)
for the next step. eta and mu are host numbers kept in float32, as PyTorch keeps them (0-d float32 tensors),
so trajectories agree to the last bits; they reach the ops as per-step operands. The average is written as
p - (p - ax) * (1 - mu), which is p itself while mu is 1 (before t0, where PyTorch copies p), so one recorded
expression serves every step of a replay.
"""

import struct

from .._autograd import no_grad
from .optimizer import Optimizer, coupled_grad


def _f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


class ASGD(Optimizer):
    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if differentiable:
            raise NotImplementedError("ASGD(differentiable=True): webgrad's optimizers step outside the graph")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _step_count_in_math(self):  # (eta and mu)
        return True

    def step(self, closure=None):
        loss = self._evaluate(closure)
        for group in self.param_groups:
            lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
            for p, grad in self._params_with_grad(group):
                state = self._state_of(p)
                if not state:
                    state["step"] = 0.0
                    state["eta"] = _f32(lr)
                    state["mu"] = 1.0
                ax = self._state_tensor(state, "ax", p)
                state["step"] += 1.0
                eta, mu = state["eta"], state["mu"]
                shrink = self._operand(("shrink", id(p)), 1 - lambd * eta, p)
                eta_t = self._operand(("eta", id(p)), eta, p)
                keep = self._operand(("keep", id(p)), 1 - mu, p)  # the weight ax keeps
                step = state["step"]
                state["eta"] = _f32(lr / ((1 + lambd * lr * step) ** alpha))
                state["mu"] = _f32(1 / max(1, step - t0))
                if self._replaying:
                    continue
                with no_grad():
                    grad = coupled_grad(grad, p, group["maximize"], group["weight_decay"])
                    p.mul_(shrink)
                    p.sub_(grad * eta_t)
                    ax.copy_(p - (p - ax) * keep)
        return loss

    def _load_state_dict(self, state_dict):
        """As Optimizer.load_state_dict; eta and mu (0-d tensors in PyTorch's dicts) become host numbers."""
        state_dict = dict(state_dict, state={
            index: {name: float(value) if name in ("eta", "mu") else value for name, value in values.items()}
            for index, values in state_dict["state"].items()})
        super()._load_state_dict(state_dict)
