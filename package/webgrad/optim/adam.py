"""Adam and AdamW (torch.optim.Adam, torch.optim.AdamW).

AdamW is Adam with *decoupled* weight decay: the parameter shrinks by lr*weight_decay before the Adam
step instead of weight_decay*param being added to the gradient. As in PyTorch, both are one class
(``decoupled_weight_decay``) and AdamW only changes the defaults. The update rule is in
``_backends/kernels.py`` (``adam_step``); each parameter's update is one call of that fused kernel, and the step
hands them together to ``adam_steps`` where the backend has it (WebGPU: many parameters a dispatch).
"""

from ..dtypes import float32
from .optimizer import Optimizer, check_hyperparameters
from .._backends import kernels
from .._autograd import note_write


class Adam(Optimizer):
    _steps_through_fused_updates = True  # (Optimizer.skips_on_device)

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        # foreach / capturable / fused: accepted for PyTorch scripts (and kept in the param groups, as PyTorch
        # prints and saves them); webgrad's update is always one fused kernel.
        check_hyperparameters(lr, eps, betas, weight_decay)
        if differentiable:
            raise NotImplementedError(f"{type(self).__name__}(differentiable=True): webgrad's optimizers step outside "
                                      "the graph")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable,
                        fused=fused, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _replay_invariants(self):  # (what picks adam_step's kernel; the rest is re-read by a replay)
        return [dict(amsgrad=g["amsgrad"], maximize=g["maximize"], weight_decay=g["weight_decay"] != 0,
                     decoupled_weight_decay=g["decoupled_weight_decay"]) for g in self.param_groups]

    def step(self, closure=None):
        loss = self._evaluate(closure)
        grouped = {}  # backend -> the updates its adam_steps kernel takes together (see _groups)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            hyper = dict(beta1=beta1, beta2=beta2, eps=group["eps"], weight_decay=group["weight_decay"],
                         amsgrad=group["amsgrad"], maximize=group["maximize"],
                         decoupled=group["decoupled_weight_decay"])
            for p, grad in self._params_with_grad(group):
                state = self._state_of(p)
                state.setdefault("step", 0.0)  # first, so the keys come in PyTorch's order
                exp_avg = self._state_tensor(state, "exp_avg", p)
                exp_avg_sq = self._state_tensor(state, "exp_avg_sq", p)
                max_exp_avg_sq = self._state_tensor(state, "max_exp_avg_sq", p) if group["amsgrad"] else None
                # Each parameter counts its own steps (a parameter may first get a gradient late).
                state["step"] += 1.0
                lr = self._device_scalar(("lr", id(group), p.device.type), group["lr"], p)
                step = self._device_scalar(("step", id(p)), state["step"], p)
                states = (exp_avg, exp_avg_sq, max_exp_avg_sq)
                if self._groups(p):
                    grouped.setdefault(p.device.backend, []).append(
                        (p, grad, states, self._skip_hyper(p, dict(hyper, lr=lr, step=step))))
                else:
                    self._fused_update(kernels.adam_step, p, grad, states, dict(hyper, lr=lr, step=step))
        for backend, updates in grouped.items():
            views = [[None if t is None else t._view for t in (p, grad) + states] for p, grad, states, _ in updates]
            kernels.adam_steps(backend, *zip(*views), [hyper for *_, hyper in updates])
            for p, *_ in updates:
                note_write(p._view.storage)  # (a version each, as PyTorch's optimizers bump them)
        return loss

    def _groups(self, p):
        """Whether p's update goes to the multi-tensor adam_steps kernel (many parameters a dispatch on WebGPU):
        a contiguous float32 parameter, on a backend that has it, outside prepare_replay() (which only writes the
        new hyperparameters). A device flag that may skip the step (_skip_flags) goes with each update."""
        return (not self._replaying and p._view.is_contiguous() and p.dtype is float32
                and p.device.backend.has(kernels.adam_steps))


class AdamW(Adam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         foreach=foreach, maximize=maximize, capturable=capturable, differentiable=differentiable,
                         fused=fused, decoupled_weight_decay=True)
