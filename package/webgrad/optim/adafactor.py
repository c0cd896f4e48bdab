"""Adafactor (torch.optim.Adafactor), composed of tensor ops (replay: see adadelta.py's note).

Adam without the first moment and with a factored second moment: for a matrix (and each matrix of a batch of
them) only the row means and column means of grad^2 are kept, and their outer product over the mean of the
rows estimates the full matrix; a vector keeps the full average. The averages move toward this step's values
by step ** beta2_decay; the step size is min(lr, 1 / sqrt(step)) times the parameter's RMS (at least eps2),
and the update is divided by max(1, RMS(update) / d).

PyTorch reads the two RMS values back to the host (.item()); here they stay on the device as 0-d tensors, so a
step needs no read-back and records for replay; the per-step numbers (the averages' weight, the step size's
bound, the weight decay's factor) are operands.
"""

import math

from .._autograd import no_grad
from .._tensor import tensor, zeros
from .._typeinfo import finfo
from .optimizer import Optimizer


class Adafactor(Optimizer):
    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False):
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _step_count_in_math(self):  # (the averages' weight and the step size's bound)
        return True

    def step(self, closure=None):
        loss = self._evaluate(closure)
        for group in self.param_groups:
            lr, wd, d = group["lr"], group["weight_decay"], group["d"]
            eps1, eps2 = group["eps"]
            for p, grad in self._params_with_grad(group):
                if p.is_complex():
                    raise RuntimeError("Adafactor does not support complex parameters")
                state = self._state_of(p)
                state.setdefault("step", 0.0)
                factored = grad.dim() > 1
                if factored:
                    row_var = _factor_state(state, "row_var", p, -1)
                    col_var = _factor_state(state, "col_var", p, -2)
                else:
                    variance = self._state_tensor(state, "variance", p)
                state["step"] += 1.0
                step = state["step"]
                weight = self._operand(("weight", id(p)), step ** group["beta2_decay"], p)
                rho = self._operand(("rho", id(p)), min(lr, 1 / step ** 0.5), p)
                shrink = self._operand(("shrink", id(group), p.device.type), 1 - lr * wd, p) if wd != 0 else None
                if self._replaying:
                    continue
                eps1_p = finfo(p.dtype).eps if eps1 is None else eps1
                with no_grad():
                    if group["maximize"]:
                        grad = -grad
                    alpha = (p.norm() / math.sqrt(p.numel())).clamp(min=eps2) * rho
                    if shrink is not None:
                        p.mul_(shrink)
                    squared = grad * grad
                    if factored:
                        row_var.add_((squared.mean(-1, keepdim=True) - row_var) * weight)
                        col_var.add_((squared.mean(-2, keepdim=True) - col_var) * weight)
                        var_estimate = (row_var @ col_var) / row_var.mean(-2, keepdim=True).clamp(min=eps1_p)
                    else:
                        variance.add_((squared - variance) * weight)
                        var_estimate = variance
                    update = var_estimate.clamp(min=eps1_p * eps1_p).rsqrt() * grad
                    denom = (update.norm() / (math.sqrt(update.numel()) * d)).clamp(min=1.0)
                    p.sub_(update * (alpha / denom))
        return loss

    def _load_state_dict(self, state_dict):
        """As Optimizer.load_state_dict; the factored averages (row_var, col_var) have their own shapes: p's with
        size 1 in the last, or the second-to-last, dimension."""
        params = [p for group in self.param_groups for p in group["params"]]
        indices = [i for group in state_dict["param_groups"] for i in group["params"]]
        by_index = dict(zip(indices, params)) if len(indices) == len(params) else {}
        factors, rest = {}, {}
        for index, values in state_dict["state"].items():
            rest[index] = {k: v for k, v in values.items() if k not in _FACTOR_DIMS}
            p = by_index.get(index)
            for key in (k for k in _FACTOR_DIMS if k in values and p is not None):  # (no p: super() raises)
                t = tensor(values[key], dtype=p.dtype, device=p.device)  # a fresh copy, as the base class makes
                expected = list(p.shape)
                expected[_FACTOR_DIMS[key]] = 1
                if list(t.shape) != expected:
                    raise ValueError(f"loaded state dict has {key!r} of shape {list(t.shape)} for parameter {index}, "
                                     f"which should be {expected} for its shape {list(p.shape)}")
                factors.setdefault(p, {})[key] = t
        super()._load_state_dict(dict(state_dict, state=rest))
        for p, loaded in factors.items():
            self.state[p] = {**self.state[p], **loaded}


_FACTOR_DIMS = {"row_var": -1, "col_var": -2}  # state key -> the dimension its running mean is taken over


def _factor_state(state, key, p, dim):
    """state[key]: the running mean of grad^2 over dimension `dim` of p (kept with size 1 there), made as zeros
    the first time (outside any recording, as Optimizer._state_tensor makes state)."""
    t = state.get(key)
    if t is None:
        shape = list(p.shape)
        shape[dim] = 1
        with p.device.backend.outside_capture():
            t = state[key] = zeros(shape, dtype=p.dtype, device=p.device)
    return t
