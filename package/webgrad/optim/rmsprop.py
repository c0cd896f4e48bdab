"""RMSprop, plain or centered, with optional momentum and weight decay (torch.optim.RMSprop).

The update rule is in ``_backends/kernels.py`` (``rmsprop_step``); each parameter's update is one call of
that fused kernel.
"""

from .optimizer import Optimizer
from .._backends import kernels


class RMSprop(Optimizer):
    _steps_through_fused_updates = True  # (Optimizer.skips_on_device)

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        # capturable / foreach: accepted for PyTorch scripts (and kept in the param groups, as PyTorch prints and
        # saves them); webgrad's update is always one fused kernel.
        if not 0.0 <= lr < float("inf"):  # NaN too: a NaN lr silently turns every weight into NaN
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        if differentiable:
            raise NotImplementedError("RMSprop(differentiable=True): webgrad's optimizers step outside the graph")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _replay_invariants(self):  # (what picks rmsprop_step's kernel; the rest is re-read by a replay)
        return [dict(momentum=g["momentum"] > 0, centered=g["centered"], maximize=g["maximize"],
                     weight_decay=g["weight_decay"] != 0) for g in self.param_groups]

    def step(self, closure=None):
        loss = self._evaluate(closure)
        for group in self.param_groups:
            hyper = {k: group[k] for k in ("alpha", "eps", "weight_decay", "momentum", "centered", "maximize")}
            for p, grad in self._params_with_grad(group):
                state = self._state_of(p)
                state.setdefault("step", 0.0)  # not used by the update; kept (and saved) as PyTorch does
                square_avg = self._state_tensor(state, "square_avg", p)
                # Created when first needed, so a scheduler (OneCycleLR) may turn momentum on later.
                buf = self._state_tensor(state, "momentum_buffer", p) if group["momentum"] > 0 else None
                grad_avg = self._state_tensor(state, "grad_avg", p) if group["centered"] else None
                state["step"] += 1.0
                lr = self._device_scalar(("lr", id(group), p.device.type), group["lr"], p)
                self._fused_update(kernels.rmsprop_step, p, grad, (square_avg, buf, grad_avg), dict(hyper, lr=lr))
        return loss
