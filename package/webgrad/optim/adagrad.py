"""Adagrad (torch.optim.Adagrad), composed of tensor ops (replay: see adadelta.py's note).

    g = grad (+ weight_decay * p);  sum += g^2;  p -= lr / (1 + (step - 1) * lr_decay) * g / (sqrt(sum) + eps)
"""

from .._autograd import no_grad
from .optimizer import Optimizer, coupled_grad
from ._sparse_grads import params_with_grad


class Adagrad(Optimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if differentiable:
            raise NotImplementedError("Adagrad(differentiable=True): webgrad's optimizers step outside the graph")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def _step_count_in_math(self):  # (the lr decay)
        return any(g["lr_decay"] != 0 for g in self.param_groups)

    def step(self, closure=None):
        loss = self._evaluate(closure)
        for group in self.param_groups:
            # a sparse gradient (nn.Embedding(sparse=True)) densified: the same update (_sparse_grads.py)
            for p, grad in params_with_grad(self, group, "weight_decay option is not compatible with sparse "
                                            "gradients"):
                state = self._state_of(p)
                state.setdefault("step", 0.0)
                self._state_tensor(state, "sum", p, group["initial_accumulator_value"])
                state["step"] += 1.0
                clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
                clr = self._operand(("clr", id(p)), clr, p)
                if self._replaying:
                    continue
                with no_grad():
                    grad = coupled_grad(grad, p, group["maximize"], group["weight_decay"])
                    state["sum"].addcmul_(grad, grad, value=1)
                    p.sub_(grad / (state["sum"].sqrt() + group["eps"]) * clr)
        return loss
