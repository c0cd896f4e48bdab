"""Replay a training step: record the GPU work of one call, then re-issue it without re-running Python.

    step = webgrad.replayable(train_step)     # train_step(x, y) does forward, backward, optimizer.step()
    for x, y in loader:
        loss = step(x, y)                      # after a warm-up call and a recording call (and a second
                                               # one where a memory plan pays; see below): one replay

Why: from Python, every op costs tens of microseconds of FFI work while the GPU work of
a small model's step takes less. A replay hands the whole recorded step to the binding in one call.

How: the first call runs eagerly (it creates optimizer state); the second copies its tensor arguments
into *static* input tensors and runs `fn` on them inside ``backend.capture()``, which both runs and
records the step. Later calls copy the new arguments into the static inputs, run the replay hooks
(host-side bookkeeping registered during the recording: the optimizer counts its step and writes the
new lr and other hyperparameters, a scheduler stepped inside `fn` steps again, dropout draws new random
numbers) and replay. Any other Python in `fn` does not run again: a counter it increments, a value it
computes on the host, stay as recorded. They return the same output tensors each time,
refreshed by the replay, as torch.cuda.graphs do. A tensor argument the step writes in place (a running state
updated with add_) is copied back from its static input after every call, so the caller's tensor changes as an
eager call would change it.

Memory planning: a recorded step owns its intermediates' buffers for as long as it is replayed, and its
first recording can only hand them out in the order the step asks for them. Where that recording says a
plan made with the whole step known would hold at least 1/16 and 1 MiB less (the graph's plan_gain), the third
call records the step once more, following that plan, and replays start with the fourth
(_backends/webgpu/memory_plan.py; ResNet-18's step at batch 128 on WebGPU).

Rules, as with CUDA graphs: shapes stay the same (a call with other shapes, e.g. a smaller last
batch, simply runs eagerly); Python control flow that depends on tensor values is frozen as recorded,
so `fn` must not read values back (no .item() inside, no optimizer that takes a closure, as LBFGS). A
recording that did read values back (the backend counts them) is not replayed: a warning says so, and
`fn` runs eagerly on every call, as the eager loop would. On a backend without capture (the CPU) the
wrapper just calls `fn`.

Divergence: ``replayable(step, check_finite=True)`` checks the loss `fn` returns (the output, or its first
tensor) on every call: on WebGPU one tiny recorded kernel sets the runtime's error word when the loss is
NaN or infinite, and the next read-back (``loss.item()``) raises FloatingPointError; no sync is added.
``check_finite=callable`` calls it with the message instead, and the read-back returns the value. On the
CPU the check runs at once.
"""

import math
import threading
import warnings

from ._tensor import Tensor
from ._backends import kernels

_active = threading.local()


def capturing():
    """True while a step is being recorded (code with per-step host work must register a hook)."""
    return getattr(_active, "hooks", None) is not None


def on_replay(hook):
    """During a recording, run `hook()` before every replay of it (no-op otherwise)."""
    hooks = getattr(_active, "hooks", None)
    if hooks is not None:
        hooks.append(hook)


def _detach(out):
    if isinstance(out, Tensor):
        return out.detach()
    if isinstance(out, (tuple, list)):
        return type(out)(_detach(o) for o in out)
    if isinstance(out, dict):
        return {k: _detach(v) for k, v in out.items()}
    return out


def _signature(args):
    return tuple((tuple(a.shape), a.dtype.name, a.device.type) if isinstance(a, Tensor) else ("value", a)
                 for a in args)


def _loss(out):
    """The output's loss: the output if it is a tensor, else its first tensor (None if there is none)."""
    if isinstance(out, Tensor):
        return out
    if isinstance(out, (tuple, list)):
        return next((o for o in out if isinstance(o, Tensor)), None)
    return None


class Replayable:
    """The callable `replayable(fn)` returns; `.graph` is the recording, `.replays` counts replays."""

    def __init__(self, fn, warmup=1, check_finite=False):
        if not isinstance(warmup, int) or warmup < 1:
            raise ValueError(f"replayable(warmup={warmup!r}): at least one eager call comes before the recording "
                             "(as CUDA graphs want warm-up iterations): state that a step's code makes on its first "
                             "call, if made while recording, would be written afresh at every replay (webgrad's "
                             "optimizers and GradScaler make theirs outside the recording; other code may not)")
        if not (isinstance(check_finite, bool) or callable(check_finite)):
            raise TypeError(f"replayable(check_finite=...) takes a bool or a callable, got {type(check_finite).__name__}")
        self.fn = fn
        self.check_finite = check_finite
        self.warmup = warmup
        self.calls = 0
        self.replays = 0
        self.graph = None
        self._static = self._outputs = self._signature = None
        self._hooks = []
        self._reads_back = False  # the recording read values back: fn runs eagerly from then on
        self._written = []  # indices of the tensor arguments the recorded step writes in place
        self._replan = False  # the next call records again, with the memory plan the recording offers

    def __call__(self, *args):
        tensors = [a for a in args if isinstance(a, Tensor)]
        backend = tensors[0].device.backend if tensors else None
        self.calls += 1
        if backend is None or not backend.supports_capture or self.calls <= self.warmup or self._reads_back:
            return self._checked(self.fn(*args))
        if self.graph is None:
            return self._record(backend, args)
        if _signature(args) != self._signature:
            return self._checked(self.fn(*args))
        for static, a in zip(self._static, args):
            if isinstance(a, Tensor):
                kernels.copy(backend, static._view, a._view)
        if self._replan:
            return self._record(backend, args, replacing=self.graph)
        for hook in self._hooks:
            hook()
        self.graph.replay()
        self.replays += 1
        self._write_back(backend, args)
        return self._outputs

    def _write_back(self, backend, args):
        """Copy the static inputs the step writes in place back into the caller's arguments, as an eager call
        would have left them (a running state passed in and updated with add_, say)."""
        for i in self._written:
            kernels.copy(backend, args[i]._view, self._static[i]._view)

    @property
    def records_next_call(self):
        """Whether the next call records the step (warm-up over, nothing recorded yet, no read-back refused it)."""
        return self.graph is None and not self._reads_back and self.calls >= self.warmup

    @property
    def reads_back(self):
        """Whether the recording read values back, so that the step runs eagerly at every call."""
        return self._reads_back

    def record_again(self):
        """Count the calls so far as warm-up: the next call records the step afresh, even after a recording that
        read values back. For a caller that knows why those reads happened and that they decide nothing the
        step computes (torch_device's replayable: a compiler building its guards on a call that compiled)."""
        if self.graph is not None:
            self.graph.release()
        self.graph, self._static, self._outputs, self._hooks, self._written = None, None, None, [], []
        self._reads_back = self._replan = False
        self.warmup = self.calls

    def _record(self, backend, args, replacing=None):
        """Record the step on static copies of `args` (already copied into them when `replacing` the first
        recording: see the module doc's memory planning)."""
        if replacing is None:
            # static inputs are made before the capture, so they are inputs of the graph, not its own buffers
            self._static = [a.detach().clone() if isinstance(a, Tensor) else a for a in args]
            self._signature = _signature(args)
        versions = [a._version if isinstance(a, Tensor) else None for a in self._static]
        # (a recording that raises leaves no graph: the next call records); the first recording's hooks and
        # outputs may hold its tensors (a gradient), whose buffers this one's plan takes back
        self.graph, self._replan, self._hooks, self._outputs = None, False, [], None
        hooks = []
        _active.hooks = hooks
        try:
            with backend.capture(replacing, plannable=True) as graph:
                out = self._checked(self.fn(*self._static))  # the check is recorded: every replay runs it
        finally:
            _active.hooks = None
        self._outputs = _detach(out)
        if graph.read_backs:  # (every capture graph counts them: the interface says so)
            graph.release()
            self._static = None
            self._reads_back = True
            warnings.warn(f"webgrad.replayable: {getattr(self.fn, '__name__', 'the step')} read {graph.read_backs} "
                          "value(s) back from the GPU while it was being recorded (.item(), .tolist(), printing a "
                          "tensor, an optimizer that takes a closure such as LBFGS). A replay would repeat what was "
                          "decided from them, so the step runs eagerly on every call.", RuntimeWarning, stacklevel=3)
            return self._outputs
        self.graph, self._hooks = graph, hooks
        self._replan = replacing is None and graph.plan_gain > 0
        # the arguments the step writes in place (their static copies' versions moved): every call copies them back
        self._written = [i for i, (a, v) in enumerate(zip(self._static, versions))
                         if isinstance(a, Tensor) and a._version != v]
        self._write_back(backend, args)
        return self._outputs

    def _checked(self, out):
        """Check `out`'s loss for NaN / infinity when check_finite is set (see the module doc)."""
        loss = _loss(out) if self.check_finite else None
        if loss is None or not loss.dtype.is_floating:
            return out
        handler = self.check_finite if callable(self.check_finite) else FloatingPointError
        what = "replayable(check_finite): the step's loss is {}"
        backend = loss.device.backend
        if backend.has(kernels.check_finite):  # on the device, read with the next read-back
            kernels.check_finite(backend, loss.detach().contiguous()._view, what.format("NaN"), what.format("infinite"),
                                 handler)
            return out
        values = loss.detach().reshape(-1).tolist()
        bad = next((v for v in values if not math.isfinite(v)), None)
        if bad is not None:
            message = what.format("NaN" if bad != bad else "infinite")
            if handler is FloatingPointError:
                raise FloatingPointError(message)
            handler(message)
        return out

    def release(self):
        """Free the recording's buffers; the next call records again (also after a recording that read values
        back, for a step whose code has changed since)."""
        if self.graph is not None:
            self.graph.release()
        self.graph = None
        self._static = self._outputs = None
        self._reads_back = False
        self._replan = False
        self._written = []


def replayable(fn=None, *, warmup=1, check_finite=False):
    """Wrap a training step so that its GPU work is recorded once and replayed (see the module doc).
    Usable as `replayable(fn)` or as a decorator `@replayable` / `@replayable(warmup=2)`.
    check_finite: True or a callback, to check each step's loss for NaN / infinity (module doc)."""
    if fn is None:
        return lambda f: Replayable(f, warmup, check_finite)
    return Replayable(fn, warmup, check_finite)
