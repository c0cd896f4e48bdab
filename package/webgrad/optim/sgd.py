"""SGD with momentum, dampening, Nesterov momentum, weight decay and maximize (torch.optim.SGD).

The update rule is written out in ``_backends/kernels.py`` (``sgd_step``); each parameter's update is one
call of that fused kernel.
"""

from .optimizer import Optimizer
from .._backends import kernels
from ._sparse_grads import params_with_grad

# torch's SGD adds the weight decay to a sparse gradient as sparse + dense, which torch refuses so
_SPARSE_WEIGHT_DECAY = "add(sparse, dense) is not supported. Use add(dense, sparse) instead."


class SGD(Optimizer):
    _steps_through_fused_updates = True  # (Optimizer.skips_on_device)

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        # foreach / fused select PyTorch implementations; webgrad always runs one fused kernel per
        # parameter, so they are accepted (scripts pass them) and change nothing.
        if not 0.0 <= lr < float("inf"):  # NaN too: a NaN lr silently turns every weight into NaN
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if differentiable:
            raise NotImplementedError("SGD(differentiable=True): webgrad's optimizers step outside the graph")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)
        super().__init__(params, defaults)

    def _replay_invariants(self):  # (what picks sgd_step's kernel; the rest is re-read by a replay)
        return [dict(momentum=g["momentum"] != 0, nesterov=g["nesterov"], maximize=g["maximize"],
                     weight_decay=g["weight_decay"] != 0) for g in self.param_groups]

    def step(self, closure=None):
        loss = self._evaluate(closure)
        for group in self.param_groups:
            hyper = {k: group[k] for k in ("momentum", "dampening", "weight_decay", "nesterov", "maximize")}
            # a sparse gradient (nn.Embedding(sparse=True)) densified: the same update (_sparse_grads.py)
            for p, grad in params_with_grad(self, group, _SPARSE_WEIGHT_DECAY):
                buf, first = None, False
                if group["momentum"] != 0:
                    # PyTorch starts the buffer as a copy of the first gradient; we allocate it once and
                    # let the kernel write it (hyper["first"]), so later steps reuse the same tensor.
                    state = self._state_of(p)
                    first = state.get("momentum_buffer") is None
                    buf = self._state_tensor(state, "momentum_buffer", p)
                lr = self._device_scalar(("lr", id(group), p.device.type), group["lr"], p)
                self._fused_update(kernels.sgd_step, p, grad, (buf,), dict(hyper, lr=lr, first=first))
        return loss
