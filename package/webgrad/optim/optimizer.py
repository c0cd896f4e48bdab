"""The Optimizer base class: parameter groups, per-parameter state and PyTorch-format state dicts.

Subclasses (sgd.py, adam.py, rmsprop.py) only implement ``step``. Each of their updates is ONE fused
backend kernel per parameter (``sgd_step``, ``adam_step``, ``rmsprop_step``, specified in
``_backends/kernels.py``), never a chain of elementwise ops: on WebGPU every op is a dispatch with a
Python-side cost, and a fused kernel also lets a captured training step replay with new learning rates.

State tensors (momentum buffers, moment estimates) are created once, on the parameter's device and in
its dtype, at a parameter's first step; later steps update them in place and allocate nothing. The
scalar ``step`` counter is kept as a Python float (PyTorch keeps a 0-d tensor): the host needs it every
step to compute bias corrections, and a tensor on the GPU would cost a read-back.

Replaying a captured step (WebGPU). The values that change from step to step (each group's lr, each
parameter's step count) reach the kernels as the backend's *dynamic scalars*: device-resident words
that a replayed command sequence reads afresh (the optimizers composed of tensor ops get them as 0-d tensors
that the step fills from such scalars: ``_operand``). ``prepare_replay()`` does the host half of ``step()``
(count the step, write the new lr and step values) without launching kernels:

    opt.step()                                   # one eager step first: it creates the state tensors
    with backend.capture() as graph:
        opt.step()
    for _ in range(n):
        opt.prepare_replay(); graph.replay(); scheduler.step()
"""

import copy
from collections import OrderedDict, defaultdict
from itertools import chain

from .. import replay
from .._autograd import RemovableHandle, enable_grad, no_grad, note_write
from .._tensor import Tensor, empty, full_like, tensor, zeros
from ..ops.elementwise import where
from ..ops.shape import cat
from ..dtypes import float32, int32
from .._backends import kernels


class _RequiredParameter:
    """Marks a hyperparameter with no default: every parameter group must then give a value."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def coupled_grad(grad, p, maximize, weight_decay):
    """The gradient the composed optimizers step with, as PyTorch's: negated to maximize, plus L2 weight decay
    (weight_decay * p). Call under no_grad."""
    if maximize:
        grad = -grad
    return grad.add(p, alpha=weight_decay) if weight_decay != 0 else grad


def check_hyperparameters(lr, eps=None, betas=None, weight_decay=None, **non_negative):
    """PyTorch's argument checks, shared by the optimizers (same messages). lr must be finite: a NaN or
    infinite learning rate would silently turn every weight into NaN."""
    if not 0.0 <= lr < float("inf"):
        raise ValueError(f"Invalid learning rate: {lr}")
    if eps is not None and not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if betas is not None:
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
    if weight_decay is not None and not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    for name, value in non_negative.items():
        if not 0.0 <= value:
            raise ValueError(f"Invalid {name} value: {value}")


# hooks around every optimizer's step (register_optimizer_step_pre_hook / register_optimizer_step_post_hook)
_global_step_pre_hooks = OrderedDict()
_global_step_post_hooks = OrderedDict()


def register_optimizer_step_pre_hook(hook):
    """hook(optimizer, args, kwargs) before every optimizer's step; it may return new (args, kwargs)."""
    handle = RemovableHandle(_global_step_pre_hooks)
    _global_step_pre_hooks[handle.id] = hook
    return handle


def register_optimizer_step_post_hook(hook):
    """hook(optimizer, args, kwargs) after every optimizer's step."""
    handle = RemovableHandle(_global_step_post_hooks)
    _global_step_post_hooks[handle.id] = hook
    return handle


def _hooks(optimizer, name):
    """The optimizer's own hook dict `name` (made on first use: an optimizer unpickled or built by a subclass
    that skipped Optimizer.__init__ has none yet)."""
    hooks = optimizer.__dict__.get(name)
    if hooks is None:
        hooks = OrderedDict()
        optimizer.__dict__[name] = hooks
    return hooks


def _add_hook(optimizer, name, hook, prepend=False):
    hooks = _hooks(optimizer, name)
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


class Optimizer:
    """Base class of all optimizers, as torch.optim.Optimizer.

    params: an iterable of tensors, or of dicts (parameter groups) with a "params" entry and any
    hyperparameters that should differ from `defaults` for that group.
    """

    def __init__(self, params, defaults):
        self.defaults = defaults
        # Keyed by the parameter tensor itself, as PyTorch (Tensor hashes by identity).
        self.state = defaultdict(dict)
        self.param_groups = []
        self._scalars = {}  # key -> the backend's dynamic scalar for a per-step value (see module doc)
        self._operands = {}  # key -> a 0-d tensor filled from self._scalars[key] (_operand)
        self._filled = set()  # keys of self._operands filled in this step()
        self._replaying = False
        # {device type: one-element float32 tensor} while GradScaler captures a step (skips_on_device): each
        # fused update then passes its device's flag as hyper["skip_if"], and changes nothing where it is > 0.
        self._skip_if = None
        # param -> the steps a device flag skipped (_skipped_steps), where the update counts them
        self._skip_counts = {}
        # {device type: one-element float32 tensor}: this step's skip flag per device (_skip_flags), None for none
        self._step_skip = None
        self._undoing = False  # inside _undone_where (see _marks_step_called)
        self._error_flags_kept = {}  # device -> the tensor device_error_flag writes (kept: a replay writes it again)
        self._recorded_hyper = None  # _replay_invariants() when a step was last recorded (prepare_replay checks)
        self._packed = {}  # strided param -> the contiguous copy its last fused update ran on
        self._prepared = {}  # param -> the hyper its last prepare_replay() wrote (_fused_update)
        if defaults.get("fused") and defaults.get("foreach"):
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got a Tensor")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def __init_subclass__(cls, **kwargs):
        # Schedulers warn when they are stepped before the optimizer ever was (PyTorch does the same):
        # every subclass's step records that it ran.
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _marks_step_called(cls.__dict__["step"])

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {key}: {group[key]}" for key in sorted(group) if key != "params")
        return "\n".join(lines) + "\n)"

    # ----------------------------------------------------------------- parameter groups
    def add_param_group(self, param_group):
        """Add a group of parameters (a dict with "params") with its own hyperparameters."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        else:
            params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group, params=params)
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            group.setdefault(name, default)
        if len({id(p) for p in params}) != len(params):
            raise ValueError("optimizer contains a parameter group with duplicate parameters")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        """Reset every parameter's gradient: to None (the default, frees memory) or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()

    def step(self, closure=None):
        """Update every parameter that has a gradient; returns closure() if a closure is given."""
        raise NotImplementedError(f"{type(self).__name__} does not implement step()")

    def skips_on_device(self):
        """Whether everything step() changes goes through fused updates (_fused_update), so that a device flag
        can skip the whole step (GradScaler's skipped step in a captured, replayed step: no read-back, no copies
        to restore from). True for SGD, Adam, AdamW and RMSprop; False for an optimizer composed of tensor ops,
        and for a subclass whose own step() may do more."""
        for cls in type(self).__mro__:
            if "step" in cls.__dict__:
                return cls.__dict__.get("_steps_through_fused_updates", False)
        return False

    def prepare_replay(self):
        """Before replaying a captured ``step()``: count the step and write this step's lr and step
        values where the captured kernels read them, launching nothing (see the module doc). The fused
        updates' other hyperparameters (momentum, betas, eps, weight_decay: a scheduler such as OneCycleLR
        cycles momentum) are written likewise. What cannot change in a replay (_replay_invariants: for a fused
        update what picks its kernel, as weight_decay from 0 or nesterov; for an optimizer composed of tensor
        ops every hyperparameter but lr, recorded as constants of its ops) raises if it changed since the
        recording, before anything is counted."""
        if self._recorded_hyper is not None:
            now = self._replay_invariants()
            changed = sorted({k for g, r in zip(now, self._recorded_hyper) for k in g if g[k] != r.get(k)})
            if changed or len(now) != len(self._recorded_hyper):
                raise RuntimeError(f"{type(self).__name__}: {', '.join(changed) or 'the parameter groups'} changed "
                                   "since its step was recorded, and the replay cannot follow (it runs the recorded "
                                   "kernels and ops); record the step again (webgrad.replayable(...).release()) or "
                                   "keep them fixed")
        self._replaying = True
        try:
            self.step()
        finally:
            self._replaying = False

    def _replay_invariants(self):
        """Per group, what a replayed step cannot take a new value of (prepare_replay compares it with the
        recording's): here every hyperparameter but lr (an optimizer composed of tensor ops records them as
        constants of its ops); the fused optimizers keep only what picks their kernels."""
        return [{k: v for k, v in g.items() if k not in ("params", "lr")} for g in self.param_groups]

    # ----------------------------------------------------------------- helpers for step()
    def _evaluate(self, closure):
        """Run the closure (which recomputes the loss and calls backward) with gradients enabled.
        Every step() starts here, so this is also where a step being recorded for replay (see
        webgrad/replay.py) asks to have its host half, prepare_replay(), run before each replay."""
        if replay.capturing() and not self._replaying:
            replay.on_replay(self.prepare_replay)
        if not self._replaying and self.param_groups[0]["params"][0].device.backend.capturing:
            self._recorded_hyper = copy.deepcopy(self._replay_invariants())
            self._prepared = {}  # (a new recording: its kernels' slots are written at its first replay)
        self._filled.clear()
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        self._step_skip = None if self._replaying else self._skip_flags()
        return loss

    def _skip_flags(self):
        """This step's skip flag per device type for the fused updates (skips_on_device), or None: GradScaler's
        inf flag (_skip_if) and, on a backend that reports device-side errors late (WebGPU), the error word as a
        flag (kernels.device_error_flag), the larger of the two where both are there. So a step that follows a
        failed index or value check (an embedding index or a cross-entropy target out of range) changes no
        parameter and no state before its error raises at the next read-back, as the CPU raises in the forward
        before the step; the kernels count the skip where they keep a step count (_skipped_steps). An optimizer
        composed of tensor ops gets the same protection from its step's wrapper (_undone_where)."""
        found = self._skip_if
        if not self.skips_on_device():
            return found
        return self._error_flags(found)

    def _error_flags(self, found=None):
        """{device type: one-element float32 tensor, > 0 where the step must change nothing}: the backend's error
        word as a flag (kernels.device_error_flag), merged with `found` (GradScaler's) where given; None where
        nothing is flagged. The flag's kernel runs only where a kernel that may report an error ran since the
        backend last read its errors (backend.errors_pending)."""
        flags = dict(found) if found else {}
        devices = {p.device: None for group in self.param_groups for p in group["params"]}
        for device in devices:
            backend = device.backend
            if not backend.errors_pending or not backend.has(kernels.device_error_flag):
                continue
            out = self._error_flags_kept.get(device)
            if out is None:
                with backend.outside_capture():
                    out = self._error_flags_kept[device] = zeros(1, device=device)
            prior = flags.get(device.type)
            kernels.device_error_flag(backend, out._view, None if prior is None else prior._view)
            flags[device.type] = out
        return flags or None

    def _undone_where(self, found, run):
        """run() (this optimizer's step), with no effect on the devices whose flag in `found` ({device type:
        one-element float32 tensor}) is > 0, decided on the device (no read-back): the parameters that have a
        gradient and their tensor state are copied before it and put back where the flag is set. For an
        optimizer whose changes are not all fused updates (skips_on_device() False): GradScaler's skipped step,
        and a step after a failed device-side check. A kept step count (the state_dict's "step") counts the skip
        (_skipped_steps); a count the step computes from on the host still advances."""
        with no_grad():
            kept = []
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None or p.device.type not in found:
                        continue
                    kept.append((p, None, p.detach().clone()))
                    for key, value in self.state.get(p, {}).items():
                        if isinstance(value, Tensor) and value.device == p.device:
                            kept.append((p, key, value.clone()))
            retval = run()
            skipped = {}  # per device: 1.0 where the step is skipped, else 0.0
            for p, key, old in kept:
                if key is None and "step" in self.state.get(p, {}):  # (the count state_dict() leaves out)
                    dev = p.device.type
                    if dev not in skipped:
                        skipped[dev] = (found[dev] > 0).to(float32).reshape(1)
                    self._skipped_steps(p).add_(skipped[dev])
                now = p if key is None else self.state[p].get(key)
                if now is None:
                    continue
                total, backend = found[old.device.type], now.device.backend
                if (backend.has(kernels.amp_restore_if) and now.dtype in (float32, int32)
                        and now.dtype is old.dtype and now.is_contiguous() and now.shape == old.shape):
                    kernels.amp_restore_if(backend, now._view, old._view, total._view)  # one dispatch, no copy
                else:
                    now.copy_(where(total > 0, old, now))
        return retval

    def _skip_hyper(self, p, hyper):
        """hyper with this step's skip flag of p's device (hyper["skip_if"]) and, for an update that keeps a step
        count (Adam's, RMSprop's), p's count of skipped steps (hyper["skipped_steps"]); hyper itself without."""
        flag = self._step_skip.get(p.device.type) if self._step_skip else None
        if flag is None:
            return hyper
        hyper = dict(hyper, skip_if=flag._view)
        if "step" in self.state.get(p, ()):  # a kept step count (Adam's, RMSprop's): its kernel counts skips
            hyper["skipped_steps"] = self._skipped_steps(p)._view
        return hyper

    def _params_with_grad(self, group):
        """(param, grad) for each parameter of `group` that has a gradient; grad is a contiguous view. A sparse
        gradient (nn.Embedding(sparse=True)) is refused with torch's error: SGD, Adagrad and SparseAdam take it."""
        for p in group["params"]:
            grad = p.grad
            if grad is None:
                continue
            if grad.is_sparse:
                name = type(self).__name__
                hint = ", please consider SparseAdam instead" if name in ("Adam", "AdamW") else ""
                raise RuntimeError(f"{'Adam' if name == 'AdamW' else name} does not support sparse gradients{hint}")
            pv, gv = p._view, grad._view  # (views, not the Tensor properties: this runs for every parameter)
            if gv.shape != pv.shape or gv.dtype is not pv.dtype or grad.device != p.device:
                raise RuntimeError(f"a parameter of shape {list(p.shape)} ({p.dtype.name}, {p.device}) has a gradient "
                                   f"of shape {list(grad.shape)} ({grad.dtype.name}, {grad.device}); they must match")
            if not gv.is_contiguous():
                grad = grad.contiguous()
            yield p, grad

    def _state_of(self, p):
        """self.state[p]. A replay cannot allocate: under prepare_replay() the state must exist already."""
        if self._replaying and not self.state.get(p):
            raise RuntimeError("prepare_replay(): the optimizer has no state for a parameter yet; take one "
                               "eager step() before capturing the step to replay")
        return self.state[p]

    @staticmethod
    def _state_tensor(state, key, p, value=0.0):
        """state[key], created as `value` everywhere, shaped like p (on its device, in its dtype), the first time
        only. Made while a step is recorded (its first step, or one after GradScaler skipped the eager steps),
        it is made outside the recording: a replay must not write the initial values again."""
        t = state.get(key)
        if t is None:
            with p.device.backend.outside_capture():
                t = state[key] = full_like(p, value)
        return t

    def _device_scalar(self, key, value, p):
        """`value` as the kernels of p's device should get a per-step value: on a backend with dynamic
        scalars (WebGPU) a device-resident scalar, kept under `key` and rewritten only when the value
        changes, so a replayed step sees it; elsewhere the number itself."""
        held = self._scalars.get(key)
        if held is None:  # (only a backend with dynamic scalars ever has one held)
            backend = p.device.backend
            if not backend.supports_capture:
                return value
            held = self._scalars[key] = backend.scalar(value)
        elif held.value != value:
            held.set(value)
        return held

    def _operand(self, key, value, p):
        """`value`, a number that may change from step to step (lr, a bias correction), as an operand of the
        tensor ops of a composed step(): on a backend with dynamic scalars, a 0-d tensor on p's device that a
        fill from the dynamic scalar under `key` sets in each step (once per step for a key shared by several
        parameters), so that a replayed step computes with this step's value rather than the recorded one;
        elsewhere, or for a parameter that is not float32, the number itself. Under prepare_replay() it only
        writes the new value."""
        scalar = self._device_scalar(key, value, p)
        if isinstance(scalar, (int, float)) or p.dtype is not float32:
            return value
        t = self._operands.get(key)
        if t is None:
            with p.device.backend.outside_capture():
                t = self._operands[key] = empty((), dtype=float32, device=p.device)
        if not self._replaying and key not in self._filled:
            self._filled.add(key)
            kernels.fill(p.device.backend, t._view, scalar)
        return t

    def _step_count_in_math(self):
        """Whether step() computes values from the step count on the host (bias corrections, lr decay): a step
        that GradScaler skips on the device and undoes from copies (skips_on_device() False) still counts in
        them, and GradScaler warns."""
        return False

    def _skipped_steps(self, p):
        """The count of p's steps that a device flag skipped (GradScaler's replayed steps on inf/NaN, steps after
        a failed device-side check), a one-element float32 tensor on p's device, made outside any recording and
        kept by the update's kernel. The host's state["step"] counts those steps too, as it cannot see them; the
        kernel subtracts the count (as PyTorch's fused Adam subtracts found_inf from its step), and so does
        state_dict(). The counts of the parameters on one device are made together, as views of one tensor, so
        that a multi-tensor update binds one buffer for all of them (adam_steps)."""
        count = self._skip_counts.get(p)
        if count is None:
            device = p.device
            missing = [q for group in self.param_groups for q in group["params"]
                       if q.device == device and self._skip_counts.get(q) is None]
            with device.backend.outside_capture():
                counts = zeros(len(missing), device=device)
            for i, q in enumerate(missing):
                self._skip_counts[q] = counts[i:i + 1]
            count = self._skip_counts[p]
        return count

    def _fused_update(self, kernel, p, grad, states, hyper):
        """Run the fused update `kernel` (a record of _backends/kernels.py, e.g. kernels.adam_step) once on p, its gradient and its state tensors
        (None for unused ones). The kernels want a contiguous parameter; a strided one (PyTorch allows
        them) is updated through a packed copy that is written back. Under prepare_replay() the kernel only
        takes this step's hyperparameters (hyper["prepare"]), launching nothing."""
        if self._replaying:
            # (hyper as the last replay of p had it: nothing to write. lr and step are dynamic scalars, the same
            # objects every step, whose values _device_scalar has written already.)
            if p.device.backend.supports_capture and self._prepared.get(p) != hyper:
                self._prepared[p] = hyper
                target = self._packed.get(p, p) if not p._view.is_contiguous() else p  # (the copy it ran on)
                views = [s._view if s is not None else None for s in states]
                kernel(p.device.backend, target._view, grad._view, *views, dict(hyper, prepare=True))
            return
        hyper = self._skip_hyper(p, hyper)
        views = [s._view if s is not None else None for s in states]
        backend = p.device.backend
        note_write(p._view.storage)  # (a version each, as PyTorch's optimizers bump them)
        if p._view.is_contiguous():
            kernel(backend, p._view, grad._view, *views, hyper)
        else:
            packed = self._packed[p] = p.detach().contiguous()  # (kept: a replay's prepare finds its kernel's values)
            kernel(backend, packed._view, grad._view, *views, hyper)
            kernels.copy(p.device.backend, p._view, packed._view)

    # ----------------------------------------------------------------- hooks
    def register_step_pre_hook(self, hook):
        """hook(optimizer, args, kwargs) before each step(); it may return new (args, kwargs) for step."""
        return _add_hook(self, "_optimizer_step_pre_hooks", hook)

    def register_step_post_hook(self, hook):
        """hook(optimizer, args, kwargs) after each step()."""
        return _add_hook(self, "_optimizer_step_post_hooks", hook)

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer) before state_dict() packs the state."""
        return _add_hook(self, "_optimizer_state_dict_pre_hooks", hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) after state_dict(); it may return the state dict to hand back instead."""
        return _add_hook(self, "_optimizer_state_dict_post_hooks", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) before load_state_dict() reads it; it may return the dict to load instead."""
        return _add_hook(self, "_optimizer_load_state_dict_pre_hooks", hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer) after load_state_dict() has replaced the state."""
        return _add_hook(self, "_optimizer_load_state_dict_post_hooks", hook, prepend)

    # ----------------------------------------------------------------- state dicts
    def state_dict(self):
        """The optimizer state in PyTorch's format, with the state-dict hooks run around it (_state_dict)."""
        for hook in list(_hooks(self, "_optimizer_state_dict_pre_hooks").values()):
            hook(self)
        out = self._state_dict()
        for hook in list(_hooks(self, "_optimizer_state_dict_post_hooks").values()):
            result = hook(self, out)
            if result is not None:
                out = result
        return out

    def load_state_dict(self, state_dict):
        """Load a state made by state_dict(), with the load hooks run around it (_load_state_dict)."""
        for hook in list(_hooks(self, "_optimizer_load_state_dict_pre_hooks").values()):
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        self._load_state_dict(state_dict)
        for hook in list(_hooks(self, "_optimizer_load_state_dict_post_hooks").values()):
            hook(self)

    def _state_dict(self):
        """The optimizer state in PyTorch's format:

        {"state": {index: {name: value}}, "param_groups": [{hyperparameters..., "params": [index, ...]}]}

        Parameters are numbered in order over all groups. State tensors are the optimizer's own tensors
        (not copies, as PyTorch): save or deep-copy the dict before the optimizer steps again.
        """
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        counted = [(p, count) for p, count in self._skip_counts.items() if id(p) in index]
        if counted:  # steps skipped on the device, which "step" counts too: one read-back per device
            by_device = defaultdict(list)
            for p, count in counted:
                by_device[count.device].append((p, count))
            for pairs in by_device.values():
                for (p, _), skipped in zip(pairs, cat([c for _, c in pairs]).tolist()):
                    if skipped and "step" in state[index[id(p)]]:
                        state[index[id(p)]]["step"] -= skipped
        return {"state": state, "param_groups": groups}

    def _load_state_dict(self, state_dict):
        """Load a state made by state_dict() (of this optimizer class, with groups of the same sizes).

        Everything is checked and converted before anything is replaced, so an error leaves the
        optimizer as it was. State tensors are copied onto each parameter's device and dtype.
        """
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has a different number of parameter groups "
                             f"({len(saved_groups)}, this optimizer has {len(self.param_groups)})")
        for i, (saved, group) in enumerate(zip(saved_groups, self.param_groups)):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(f"loaded state dict contains a parameter group that doesn't match the size of "
                                 f"optimizer's group (group {i}: {len(saved['params'])} parameters saved, "
                                 f"{len(group['params'])} in the optimizer)")
        by_index = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                            chain.from_iterable(g["params"] for g in self.param_groups)))

        state = defaultdict(dict)
        for key, values in state_dict["state"].items():
            p = by_index.get(key)
            if p is None:
                raise ValueError(f"loaded state dict has state for parameter {key!r}, which none of its "
                                 "param_groups lists")
            state[p] = {name: _load_value(p, key, name, v) for name, v in values.items()}

        groups = []
        for saved, group in zip(saved_groups, self.param_groups):
            new = copy.deepcopy({k: v for k, v in saved.items() if k != "params"})
            for name, default in self.defaults.items():  # a dict from an older version may lack a key
                new.setdefault(name, default)
            new["params"] = group["params"]
            groups.append(new)
        self.state = state
        self.param_groups = groups
        self._scalars = {}  # keyed by the old groups; a step captured before this load is stale anyway
        self._operands, self._filled, self._skip_counts = {}, set(), {}


def _load_value(p, index, name, value):
    """One saved state entry, converted for parameter p."""
    if name == "step":
        return float(value)  # PyTorch saves a 0-d tensor; webgrad keeps a Python float (see module doc)
    if value is None or isinstance(value, (int, float, bool)):
        return value
    t = tensor(value, dtype=p.dtype, device=p.device)  # always a fresh copy: the optimizer owns its state
    if tuple(t.shape) != tuple(p.shape):
        raise ValueError(f"loaded state dict has {name!r} of shape {list(t.shape)} for parameter {index}, "
                         f"whose shape is {list(p.shape)}")
    return t


def _submit(param_groups):
    """Start the step's queued work on each device it used, without waiting. Eager WebGPU work is otherwise
    submitted only at a read-back (or every Runtime.FLUSH_AFTER dispatches): with the loss read every 10
    steps, the GPU sat idle while the host issued ten steps and the host then waited for all ten, so an
    eager step cost its host time plus its GPU time; submitted at each step's end, the GPU runs step i
    while the host issues step i + 1 (H200 through Dawn, the wide MLP's eager SGD step: 35,101 and 47,639
    samples/s before, 51,572 and 52,114 after; optimizers that write a step count each step, as Adam, were
    submitted there already)."""
    backends = {p.device.backend for group in param_groups for p in group["params"]}
    for backend in backends:
        backend.submit()


def _marks_step_called(step):
    """A subclass's step, wrapped: it records that it ran (for the schedulers), and an optimizer composed of tensor
    ops steps under _undone_where where a device-side check may have failed (its fused peers skip in their
    kernels), so that a failed step never updates the weights."""
    def wrapper(*args, **kwargs):
        self = args[0]  # the hooks get step's arguments with self first, as PyTorch's
        for hook in list(_global_step_pre_hooks.values()) + list(_hooks(self, "_optimizer_step_pre_hooks").values()):
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError("optimizer step pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                       f"but got {result}.")
                args, kwargs = result
        result = _stepped(args[0], step, args[1:], kwargs)
        for hook in list(_hooks(self, "_optimizer_step_post_hooks").values()) + list(_global_step_post_hooks.values()):
            hook(self, args, kwargs)
        return result

    wrapper.__name__ = step.__name__
    wrapper.__doc__ = step.__doc__
    wrapper.__wrapped__ = step
    return wrapper


def _stepped(self, step, args, kwargs):
    """One step between the step hooks (see _marks_step_called). A group's lr given as a one-element tensor (as
    torch allows) is read once and the step runs with its value; the group keeps the tensor."""
    tensor_lrs = [(group, group["lr"]) for group in self.param_groups if isinstance(group.get("lr"), Tensor)]
    for group, lr in tensor_lrs:
        if lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
    for group, lr in tensor_lrs:
        group["lr"] = lr.item()
    try:
        return _step_once(self, step, args, kwargs)
    finally:
        for group, lr in tensor_lrs:
            group["lr"] = lr


def _step_once(self, step, args, kwargs):
    self._opt_called = True
    flags = None if self._replaying or self.skips_on_device() or self._undoing else self._error_flags()
    if flags:
        self._undoing = True  # (GradScaler's own _undone_where may call this step: one level of copies)
        try:
            result = self._undone_where(flags, lambda: step(self, *args, **kwargs))
        finally:
            self._undoing = False
    else:
        result = step(self, *args, **kwargs)
    if not self._replaying:  # a replay submits the recorded step itself
        _submit(self.param_groups)
    return result
