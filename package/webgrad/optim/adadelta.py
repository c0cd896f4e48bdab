"""Adadelta (torch.optim.Adadelta), composed of tensor ops.

Unlike SGD/Adam/RMSprop it has no fused backend kernel: each step is a handful of elementwise ops per
parameter (about ten dispatches on WebGPU), which is fine for the scripts that use it (pytorch/examples
mnist).

Replay (the composed optimizers alike: adagrad.py, adamax.py, nadam.py). A step recorded for replay runs
its recorded ops again, so every number that may change from step to step (lr, which a scheduler sets; the
bias corrections and step sizes computed from the step count) reaches them as a 0-d tensor that the step
fills from a dynamic scalar (Optimizer._operand): each replay computes with its own step's values, as an
eager step does. The other hyperparameters (rho, betas, eps, weight_decay, ...) are recorded as constants,
as the fused optimizers record theirs as override constants.

Update, as PyTorch:
    g = grad (+ weight_decay * p);  v = rho v + (1 - rho) g^2
    delta = sqrt(u + eps) / sqrt(v + eps) * g;  u = rho u + (1 - rho) delta^2;  p -= lr * delta
"""

from .._autograd import no_grad
from .optimizer import Optimizer, coupled_grad


class Adadelta(Optimizer):
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        # foreach / capturable: accepted for PyTorch scripts; they select implementations webgrad has one of.
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if differentiable:
            raise NotImplementedError("Adadelta(differentiable=True): webgrad's optimizers step outside the graph")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._evaluate(closure)
        for group in self.param_groups:
            lr, rho, eps, wd = group["lr"], group["rho"], group["eps"], group["weight_decay"]
            for p, grad in self._params_with_grad(group):
                state = self._state_of(p)
                state.setdefault("step", 0.0)
                square_avg = self._state_tensor(state, "square_avg", p)
                acc_delta = self._state_tensor(state, "acc_delta", p)
                state["step"] += 1.0
                lr_t = self._operand(("lr", id(group), p.device.type), lr, p)
                if self._replaying:  # the recorded ops run on replay; only the host values move
                    continue
                with no_grad():
                    grad = coupled_grad(grad, p, group["maximize"], wd)
                    square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
                    delta = (acc_delta + eps).sqrt() / (square_avg + eps).sqrt() * grad
                    acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
                    p.sub_(delta * lr_t)
        return loss
