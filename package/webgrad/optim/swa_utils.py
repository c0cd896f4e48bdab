"""Weight averaging (torch.optim.swa_utils): AveragedModel keeps a running average of a model's weights (SWA's
equal weights, or an exponential moving average), SWALR anneals each group's lr to a constant SWA lr, and
update_bn recomputes BatchNorm statistics for averaged weights with one pass over the data.

    swa_model = AveragedModel(model)                                  # or AveragedModel(model,
    swa_scheduler = SWALR(optimizer, swa_lr=0.05)                     #   multi_avg_fn=get_ema_multi_avg_fn(0.999))
    ... each epoch after swa_start: swa_model.update_parameters(model); swa_scheduler.step()
    update_bn(loader, swa_model)

The averages use PyTorch's formulas, so the averaged weights agree with PyTorch's to the last bits: with no
averaging function, AveragedModel computes PyTorch's CPU average, avg + (current - avg) / (n + 1);
get_swa_multi_avg_fn lerps toward the model's weights by 1 / (n + 1) rounded to float32, as PyTorch computes it
from its integer n_averaged (PyTorch's CUDA default).
"""

import copy
import itertools
import math
import struct

from .._autograd import no_grad
from .._tensor import Tensor, tensor
from .. import dtypes
from ..nn.module import Module
from ..nn.normalization import _BatchNorm
from ._composed import lerp_
from .lr_scheduler import LRScheduler, _per_group

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn", "get_ema_avg_fn",
           "get_swa_avg_fn"]


def _f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def get_ema_multi_avg_fn(decay=0.999):
    """An AveragedModel multi_avg_fn: ema <- decay * ema + (1 - decay) * current, in place, for lists of tensors."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param_list, current_param_list, _):
        if ema_param_list[0].is_floating_point() or ema_param_list[0].is_complex():
            for p_ema, p_model in zip(ema_param_list, current_param_list):
                lerp_(p_ema, p_model, 1 - decay)
        else:
            for p_ema, p_model in zip(ema_param_list, current_param_list):
                p_ema.copy_(p_ema * decay + p_model * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    """An AveragedModel multi_avg_fn: the equal-weight running average, avg += (current - avg) / (n + 1), in place."""

    @no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        count = int(num_averaged.item()) if isinstance(num_averaged, Tensor) else num_averaged
        if averaged_param_list[0].is_floating_point() or averaged_param_list[0].is_complex():
            # PyTorch's weight is 1 / (n + 1) of its integer tensor n: a float32 tensor
            weight = _f32(1 / (count + 1)) if isinstance(num_averaged, Tensor) else 1 / (count + 1)
            for p_avg, p_model in zip(averaged_param_list, current_param_list):
                lerp_(p_avg, p_model, weight)
        else:
            for p_avg, p_model in zip(averaged_param_list, current_param_list):
                p_avg.add_((p_model - p_avg) / (count + 1))
    return swa_update


def get_ema_avg_fn(decay=0.999):
    """An AveragedModel avg_fn: returns decay * ema + (1 - decay) * current."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """An AveragedModel avg_fn: returns avg + (current - avg) / (n + 1)."""

    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A copy of `model` (on `device` where given) whose weights are a running average of the weights
    update_parameters(model) is called with: the first call copies them, later calls average with avg_fn (one
    tensor at a time, returning the new value) or multi_avg_fn (lists of tensors, in place); with neither, the
    equal-weight SWA average. use_buffers: average the buffers too (else they are copied). n_averaged, a buffer,
    counts the calls; avg_fn and multi_avg_fn are not part of the state_dict."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=dtypes.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @no_grad()
    def update_parameters(self, model):
        if self.use_buffers:
            self_params = itertools.chain(self.module.parameters(), self.module.buffers())
            model_params = itertools.chain(model.parameters(), model.buffers())
        else:
            self_params, model_params = self.parameters(), model.parameters()
        averaged, current = [], []
        for p_averaged, p_model in zip(self_params, model_params):
            averaged.append(p_averaged.detach())
            current.append(p_model.detach().to(p_averaged.device))
        count = int(self.n_averaged.item())
        if count == 0:
            for p_averaged, p_model in zip(averaged, current):
                p_averaged.copy_(p_model)
        elif self.avg_fn is not None:
            for p_averaged, p_model in zip(averaged, current):
                p_averaged.copy_(self.avg_fn(p_averaged, p_model, self.n_averaged.to(p_averaged.device)))
        elif self.multi_avg_fn is None:  # PyTorch's CPU path: avg_fn's formula, dividing by the exact count
            for p_averaged, p_model in zip(averaged, current):
                p_averaged.copy_(p_averaged + (p_model - p_averaged) / (count + 1))
        else:
            groups = {}  # (device, dtype) -> (averaged, current): the groups PyTorch's multi-tensor path makes
            for p_averaged, p_model in zip(averaged, current):
                pair = groups.setdefault((str(p_averaged.device), p_averaged.dtype), ([], []))
                pair[0].append(p_averaged)
                pair[1].append(p_model)
            for group_averaged, group_current in groups.values():
                self.multi_avg_fn(group_averaged, group_current, self.n_averaged.to(group_averaged[0].device))
        if not self.use_buffers:
            for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                b_swa.detach().copy_(b_model.detach().to(b_swa.device))
        self.n_averaged += 1


@no_grad()
def update_bn(loader, model, device=None):
    """Recompute the running statistics of every BatchNorm layer of `model` with one pass over `loader` (batches
    that are tensors, or lists/tuples whose first item is the input), as a cumulative average over the batches;
    the layers' momentum and the model's training mode are restored afterwards."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's lr from its value to swa_lr over anneal_epochs steps ("cos" or "linear"), then holds
    it at swa_lr (stored in the groups as group["swa_lr"])."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        for value, group in zip(_per_group("swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = value
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        # recursive, as PyTorch's: undo the previous step's blend to find the lr the annealing started from
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
                    for group in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [group["swa_lr"] * alpha + lr * (1 - alpha) for group, lr in zip(self.optimizer.param_groups, prev_lrs)]

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def state_dict(self):
        """Every attribute except the optimizer and the anneal function (as PyTorch)."""
        return {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
