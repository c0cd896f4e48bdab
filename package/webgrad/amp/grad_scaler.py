"""webgrad.amp.GradScaler: dynamic loss scaling with torch.amp.GradScaler's semantics.

float16 gradients underflow where float32 ones would not; the loss is multiplied by a large scale before
backward, the gradients divided by it before the optimizer step, and a step whose gradients hold inf or
NaN is skipped while the scale backs off. After `growth_interval` clean steps in a row the scale grows.

Everything lives on the device, as in PyTorch: the scale and the growth tracker are 0-d float32 tensors,
the inf/NaN check runs on the device (on WebGPU fused with the unscale, one kernel per gradient; no
per-parameter read-back), and update() computes the new scale with tensor ops (PyTorch's
_amp_update_scale_). Eager, step() reads one flag to decide whether to run
the optimizer. Inside a recording of webgrad.replayable no value can be read, so there the step is
skipped on the device: SGD, Adam, AdamW and RMSprop pass the flag to their fused update kernels, which
change nothing where it is set (as PyTorch's fused optimizers take found_inf; Adam's and RMSprop's kernels
also count the skipped steps, which Adam's bias corrections and state_dict()'s "step" leave out); any other
optimizer's step runs and is then undone where the flag is set, its parameters and state tensors restored
from copies taken before the step. Its skipped steps are counted on the device too, for state_dict(), but the
host-side step count that its step() computes from still holds them: GradScaler warns where that changes
the math (Adamax, NAdam, Adagrad with lr_decay). Zero read-backs per replayed step either way.
"""

import warnings
from collections import abc, defaultdict
from enum import Enum

from .. import devices, dtypes
from .._autograd import no_grad
from .._tensor import Tensor, full, zeros
from ..ops.elementwise import where
from ..ops.shape import stack
from .._backends import kernels


def _device_type(device):
    """"cuda" (PyTorch's default) means WebGPU here."""
    kind = "webgpu" if str(device).split(":")[0] == "cuda" else devices.device(device).type
    if kind in devices.FOREIGN:
        raise ValueError(f"GradScaler: device {device!r} is not one of webgrad's (webgpu, cuda, cpu)")
    return kind


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state():
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    """torch.amp.GradScaler(device="cuda", init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True); device "cuda" means WebGPU, as webgrad.device("cuda") does."""

    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._device = _device_type(device)
        self._enabled = enabled
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale = None  # a 0-d float32 tensor, made on the first scale() call's device
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker = None
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _check_scale_growth_tracker(self, funcname):
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, dev):
        with dev.backend.outside_capture():  # (made while a step is recorded: not reset at every replay)
            self._scale = full((), float(self._init_scale), dtype=dtypes.float32, device=dev)
            self._growth_tracker = full((), float(self._init_growth_tracker), dtype=dtypes.float32, device=dev)

    # ------------------------------------------------------------------ scale / unscale

    def scale(self, outputs):
        """outputs * scale (a tensor, or an iterable of tensors, nested)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            return outputs * self._scale.to(outputs.device)

        def apply(val):
            if isinstance(val, Tensor):
                return self.scale(val)
            if isinstance(val, abc.Iterable):
                iterable = map(apply, val)
                return type(val)(iterable) if isinstance(val, (list, tuple)) else iterable
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")
        return apply(outputs)

    def _unscale_grads_(self, optimizer, inv_scale, allow_fp16):
        """Multiply every gradient by inv_scale in place; return {device: 0-d float32 flag}, 1.0 where a
        gradient (before unscaling, as PyTorch checks) holds inf or NaN. Without a read-back: on WebGPU a
        fused kernel (backend.amp_unscale_check, six gradients a dispatch) sets the flag; elsewhere inf * 0
        and NaN * 0 are NaN, so one sum of zeros per gradient, and one over those, carry the verdict."""
        fused, sums = {}, defaultdict(list)
        batches, invs = defaultdict(list), {}  # device -> the gradients for its fused kernel, its inv_scale
        with no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    g = param.grad
                    if g is None:
                        continue
                    if g.is_sparse:  # (nn.Embedding(sparse=True)) its values, unscaled in place, as torch's
                        g = g._values()
                    if not allow_fp16 and g.dtype is dtypes.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    dev, backend = g.device.type, g.device.backend
                    inv = inv_scale.to(g.device)
                    if backend.has(kernels.amp_unscale_check) and g.dtype is dtypes.float32 and g.is_contiguous():
                        if dev not in fused:
                            fused[dev], invs[dev] = zeros((), device=g.device), inv
                        batches[dev].append(g._view)
                        continue
                    sums[dev].append((g * 0.0).sum())
                    g.mul_(inv)
            for dev, flag in fused.items():
                kernels.amp_unscale_check(flag.device.backend, batches[dev], invs[dev]._view, flag._view)
            flags = {dev: stack(s).sum().isnan().float() for dev, s in sums.items()}
            for dev, flag in fused.items():
                flags[dev] = flag if dev not in flags else flags[dev].maximum(flag)
            return flags

    def unscale_(self, optimizer):
        """Divide optimizer's gradients by the scale (in place), once per step, before clipping them."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        with no_grad():
            inv_scale = self._scale.reciprocal()
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, False)
        state["stage"] = OptState.UNSCALED

    # ------------------------------------------------------------------ step / update

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs) unless a gradient held inf/NaN; unscales first if needed."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(state["found_inf_per_device"]) == 0:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        flags = list(state["found_inf_per_device"].values())
        if any(f.device.backend.capturing for f in flags):  # (webgrad.replayable's recording too)
            retval = self._step_undone_on_device(optimizer, flags, args, kwargs)
        elif not self._found_inf(flags):  # the one read-back of an eager step
            retval = optimizer.step(*args, **kwargs)
        else:
            retval = None
        state["stage"] = OptState.STEPPED
        return retval

    def _found_inf(self, flags):
        """The sum of the inf flags, read back. That read raises an error a kernel of this step reported on the
        device (an index out of range, WebGPU): the step is then abandoned, as on the CPU, whose error raised in the
        forward, and the optimizers' stages start afresh, so that a caller who catches it can take the next step
        (left UNSCALED, the next step() would skip unscale_ and apply gradients times the scale)."""
        try:
            return sum(v.item() for v in flags)
        except BaseException:
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)
            raise

    def _step_undone_on_device(self, optimizer, flags, args, kwargs):
        """The step, with no effect where a flag is set, decided on the device (no read-back). An optimizer
        whose every change is a fused update (Optimizer.skips_on_device: SGD, Adam, AdamW, RMSprop) gets
        the flag and its kernels change nothing where it is set; any other runs its step, then parameters
        and tensor state are put back from copies taken before it."""
        by_device = {}
        for flag in flags:
            by_device.setdefault(flag.device.type, []).append(flag)
        # per device, a flag > 0 where any was set
        found = {dev: fs[0] if len(fs) == 1 else stack(fs).sum() for dev, fs in by_device.items()}
        if optimizer.skips_on_device():
            optimizer._skip_if = found
            try:
                return optimizer.step(*args, **kwargs)
            finally:
                optimizer._skip_if = None
        if optimizer._step_count_in_math() and not getattr(optimizer, "_warned_step_count", False):
            optimizer._warned_step_count = True
            warnings.warn(f"GradScaler in a replayed step: a step it skips on the device still counts in "
                          f"{type(optimizer).__name__}'s step count where step() computes from it on the host "
                          "(bias corrections, lr decay), unlike PyTorch's, which leaves a skipped step out; "
                          "Adam, AdamW, RMSprop and SGD skip exactly", RuntimeWarning, stacklevel=3)
        optimizer._undoing = True  # (its step's own check of device errors is folded into `found` below)
        try:
            return optimizer._undone_where(optimizer._error_flags(found),
                                           lambda: optimizer.step(*args, **kwargs))
        finally:
            optimizer._undoing = False

    def update(self, new_scale=None):
        """The next step's scale: backoff_factor times it after an inf/NaN step, growth_factor times it
        after growth_interval clean steps in a row (growth only to a finite value), else unchanged."""
        if not self._enabled:
            return
        scale, tracker = self._check_scale_growth_tracker("update")
        with no_grad():
            if new_scale is not None:
                if isinstance(new_scale, (int, float)):
                    scale.fill_(float(new_scale))
                else:
                    reason = "new_scale should be a float or a 1-element tensor with requires_grad=False."
                    if not (isinstance(new_scale, Tensor) and new_scale.numel() == 1 and not new_scale.requires_grad
                            and new_scale.dtype is dtypes.float32):
                        raise AssertionError(reason)
                    scale.copy_(new_scale.reshape(()))
            else:
                found_infs = [f.to(scale.device) for state in self._per_optimizer_states.values()
                              for f in state["found_inf_per_device"].values()]
                if len(found_infs) == 0:
                    raise AssertionError("No inf checks were recorded prior to update.")
                found = stack(found_infs).sum() > 0
                successful = tracker + 1.0
                grow = successful >= float(self._growth_interval)
                grown = scale * float(self._growth_factor)
                keep_or_grow = where(grow.logical_and(grown.isfinite()), grown, scale)
                new = where(found, scale * float(self._backoff_factor), keep_or_grow)
                zero = zeros((), device=scale.device)
                tracker.copy_(where(found.logical_or(grow), zero, successful))
                scale.copy_(new)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    # ------------------------------------------------------------------ accessors and state

    def get_scale(self):
        """The current scale as a Python float (a read-back), 1.0 when disabled."""
        if not self._enabled:
            return 1.0
        return float(self._init_scale) if self._scale is None else self._scale.item()

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker.item())

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker ({} disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(float(state_dict["scale"]))
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(float(state_dict["_growth_tracker"]))

    def __getstate__(self):
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise AssertionError("A GradScaler instance may only be pickled at the beginning of an iteration, "
                                     "or at the end after scaler.update().")
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
