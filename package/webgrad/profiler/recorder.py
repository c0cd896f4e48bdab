"""The recorder behind a profile: host-time ranges of ops, kernel calls, backward nodes and record_function
ranges, nested as they ran, and what they became (FunctionEvents) when the profile stops.

Three hooks feed it while it is active (and cost one ``is None`` check each when none is):
- ``_backends/kernels.PROFILER``: every device kernel call goes through ``DeviceKernel.__call__``, which hands
  it here (events named ``webgrad::<kernel>``, e.g. ``webgrad::matmul``, ``webgrad::unary(relu)``);
- ``_autograd.PROFILER``: the engine hands each node's backward here (``autograd::engine::evaluate_function:
  AddmmBackward0`` around ``AddmmBackward0``, as torch names them);
- the public op functions, which ``instrument.py`` wraps while a profile records (events ``aten::<name>``).
"""

import os
import sys
import threading
import time

from .. import _autograd
from .._backends import kernels
from .._tensor import Tensor
from . import instrument
from .events import EventList, FunctionEvent


_PROFILER_DIR = os.path.dirname(os.path.abspath(__file__))


def _python_stack():
    """The Python frames of the op's caller, innermost first, as torch lists them ("file.py(12): forward");
    the profiler's own frames left out."""
    frames = []
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if not code.co_filename.startswith(_PROFILER_DIR):
            frames.append(f"{code.co_filename}({frame.f_lineno}): {code.co_name}")
        frame = frame.f_back
    return frames


class _Range:
    __slots__ = ("id", "name", "category", "thread", "parent", "start", "end", "shapes", "cpu_bytes",
                 "device_bytes", "measured", "stack")

    def __init__(self, id, name, category, thread, parent):
        self.id, self.name, self.category, self.thread, self.parent = id, name, category, thread, parent
        self.start = self.end = None
        self.shapes = self.stack = None
        self.cpu_bytes = self.device_bytes = 0
        self.measured = False  # memory measured from the op's outputs (else: the sum of its children's)


def _shape(value):
    return list(value.shape) if isinstance(value, Tensor) or hasattr(value, "strides") else []


def _storage_id(value):
    try:
        return id(value._view.storage) if isinstance(value, Tensor) else None
    except TypeError:  # a complex tensor keeps its (real, imag) pairs elsewhere: no storage of its own
        return None


def _new_bytes(out, inputs):
    """Bytes of the tensors in `out` that do not share a storage with a tensor in `inputs` (views and in-place
    results allocate nothing): (on the host, on a device)."""
    shared = {_storage_id(a) for a in inputs}
    cpu = device = 0
    for o in out if isinstance(out, (tuple, list)) else (out,):
        storage = _storage_id(o)
        if storage is None or storage in shared:
            continue
        view = o._view
        nbytes = view.dtype.itemsize
        for size in view.shape:
            nbytes *= size
        if o.device.type == "cpu":
            cpu += nbytes
        else:
            device += nbytes
    return cpu, device


class Recorder:
    """Collects ranges between start() and stop(); stop() gives the EventList."""

    def __init__(self, record_shapes=False, profile_memory=False, use_device=None, with_stack=False):
        self.record_shapes, self.profile_memory, self.use_device = record_shapes, profile_memory, use_device
        self.with_stack = with_stack
        self.ranges = []  # every range, in the order they began
        self.stacks = {}  # thread id -> its open ranges, innermost last
        self.start_ns = self.base_ns = None

    # -------------------------------------------------------------------------------------- ranges
    def begin(self, name, category, inputs=None):
        thread = threading.get_ident()
        stack = self.stacks.get(thread)
        if stack is None:
            stack = self.stacks[thread] = []
        r = _Range(len(self.ranges) + 1, name, category, thread, stack[-1] if stack else None)
        if inputs is not None and self.record_shapes:
            r.shapes = [_shape(value) for value in inputs]
        self.ranges.append(r)
        stack.append(r)
        r.start = time.perf_counter_ns()
        return r

    def end(self, r):
        """Close `r` and any range opened inside it and left open (an exception passed through it)."""
        now = time.perf_counter_ns()
        if r.end is not None:
            return
        stack = self.stacks[r.thread]
        while stack:
            top = stack.pop()
            top.end = now
            if top is r:
                break

    # -------------------------------------------------------------------------------------- hooks
    def op(self, name, fn, args, kwargs):
        """Run public op `fn`, recorded as `name` (an op calling itself by another path, F.relu calling
        Tensor.relu, is one op and recorded once)."""
        stack = self.stacks.get(threading.get_ident())
        if stack and stack[-1].name == name:
            return fn(*args, **kwargs)
        # the positional arguments, then tensors passed by keyword (flags such as inplace=False are not inputs)
        inputs = args + tuple(v for v in kwargs.values() if isinstance(v, Tensor)) if kwargs else args
        r = self.begin(name, "cpu_op", inputs)
        if self.with_stack:
            r.stack = _python_stack()
        try:
            out = fn(*args, **kwargs)
        finally:
            self.end(r)
        if self.profile_memory:
            r.cpu_bytes, r.device_bytes = _new_bytes(out, inputs)
            r.measured = True
        return out

    def annotate(self, name, fn, args, kwargs):
        """Run `fn` inside a range `name` of its own (an optimizer's step; a subclass's step calling its base's
        is one range)."""
        stack = self.stacks.get(threading.get_ident())
        if stack and stack[-1].name == name:
            return fn(*args, **kwargs)
        r = self.begin(name, "user_annotation")
        try:
            return fn(*args, **kwargs)
        finally:
            self.end(r)

    def kernel(self, kernel, backend, args, kwargs):
        name = kernel.name
        if args and isinstance(args[0], str):  # the elementwise kernels' op: unary(relu), binary(add)
            name = f"{name}({args[0]})"
        r = self.begin("webgrad::" + name, "kernel", args)
        try:
            return backend.run(kernel, *args, **kwargs)
        finally:
            self.end(r)

    def begin_backward(self, node):
        name = node.name_()
        outer = self.begin("autograd::engine::evaluate_function: " + name, "cpu_op")
        self.begin(name, "cpu_op")
        return outer  # (ending it ends the inner range too)

    # -------------------------------------------------------------------------------------- life
    def start(self):
        if kernels.PROFILER is not None:
            raise RuntimeError("Profiler is already enabled: webgrad's profilers do not nest (stop the running "
                               "one first)")
        instrument.install(self)
        kernels.PROFILER = _autograd.PROFILER = self
        self.start_ns, self.base_ns = time.perf_counter_ns(), time.time_ns()  # (times count from here)

    def stop(self):
        """Stop recording; the EventList of what was recorded (ranges still open end now)."""
        if kernels.PROFILER is self:
            kernels.PROFILER = _autograd.PROFILER = None
            instrument.uninstall()
        now = time.perf_counter_ns()
        for r in self.ranges:
            if r.end is None:
                r.end = now
        self.stacks = {}
        for r in reversed(self.ranges):  # children began after their parents: sums flow upwards
            if r.parent is not None and not r.parent.measured:
                r.parent.cpu_bytes += r.cpu_bytes
                r.parent.device_bytes += r.device_bytes
        events = EventList(use_device=self.use_device, profile_memory=self.profile_memory,
                           metadata={"baseTimeNanoseconds": self.base_ns, "record_shapes": int(self.record_shapes),
                                     "profile_memory": int(self.profile_memory)})
        made = {}
        threads = {}  # thread ids as small numbers, in order of appearance (as torch's trace shows them)
        for r in self.ranges:
            thread = threads.setdefault(r.thread, len(threads) + 1)
            event = FunctionEvent(r.id, r.name, thread, (r.start - self.start_ns) / 1e3,
                                  (r.end - self.start_ns) / 1e3, r.category, r.shapes, r.cpu_bytes,
                                  r.device_bytes, use_device=self.use_device, stack=r.stack)
            made[r.id] = event
            if r.parent is not None:
                parent = made[r.parent.id]
                event.cpu_parent = parent
                parent.cpu_children.append(event)
            events.append(event)
        return events


def active():
    """The recorder of the profile now recording, or None."""
    return kernels.PROFILER
