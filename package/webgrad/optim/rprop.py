"""Rprop (torch.optim.Rprop), composed of tensor ops (replay: see adadelta.py's note).

Resilient backpropagation: each element keeps its own step size, grown by etaplus where the gradient kept its
sign since the last step and shrunk by etaminus where it flipped (clamped to step_sizes), and moves by that
step size against the gradient's sign. Where the sign flipped the element does not move and its remembered
gradient becomes 0, so the next step neither grows nor shrinks it. lr is only the initial step size, read
when a parameter's state is made, so a step has no per-step operand: a replayed step runs its recorded ops as
they are.
"""

from .._autograd import no_grad
from ..ops.elementwise import where
from .optimizer import Optimizer


class Rprop(Optimizer):
    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        if differentiable:
            raise NotImplementedError("Rprop(differentiable=True): webgrad's optimizers step outside the graph")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._evaluate(closure)
        for group in self.param_groups:
            etaminus, etaplus = group["etas"]
            step_size_min, step_size_max = group["step_sizes"]
            for p, grad in self._params_with_grad(group):
                state = self._state_of(p)
                state.setdefault("step", 0.0)
                prev = self._state_tensor(state, "prev", p)
                step_size = self._state_tensor(state, "step_size", p, value=group["lr"])
                state["step"] += 1.0
                if self._replaying:
                    continue
                with no_grad():
                    if group["maximize"]:
                        grad = -grad
                    sign = (grad * prev).sign()
                    # etaplus where the sign held, etaminus where it flipped, 1 where either was 0 (sign + 1 == 1)
                    factor = where(sign > 0, etaplus, where(sign < 0, etaminus, sign + 1))
                    step_size.mul_(factor).clamp_(step_size_min, step_size_max)
                    grad = where(sign < 0, 0.0, grad)
                    p.addcmul_(grad.sign(), step_size, value=-1)
                    prev.copy_(grad)
        return loss
