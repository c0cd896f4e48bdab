"""torch.profiler.profile: a recording driven by a schedule of steps, handed to on_trace_ready as each
recorded cycle ends; ProfilerActivity; tensorboard_trace_handler."""

import enum
import json
import os
import platform
import time
import warnings

from . import recorder
from .record_function import record_function
from .schedule import ProfilerAction, default_schedule


class ProfilerActivity(enum.Enum):
    """What to record. webgrad records host time for every activity; CUDA (and the other accelerators)
    only name the device its memory columns report (see the package docstring)."""
    CPU = 0
    XPU = 1
    MTIA = 2
    CUDA = 3
    HPU = 4
    PrivateUse1 = 5


def supported_activities():
    """The activities this machine can trace: CPU (webgrad reaches GPUs through WebGPU, never CUDA)."""
    return {ProfilerActivity.CPU}


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False, use_python_export=False):
    """An on_trace_ready that writes each trace to `dir_name` as ``<worker>.<time ns>.pt.trace.json`` (``.gz``
    with use_gzip), the files TensorBoard's profiler plugin reads; worker defaults to ``<host>_<pid>``."""
    def handler_fn(prof):
        nonlocal worker_name
        if not os.path.isdir(dir_name):
            try:
                os.makedirs(dir_name, exist_ok=True)
            except Exception as e:
                raise RuntimeError("Can't create directory: " + dir_name) from e
        if not worker_name:
            worker_name = f"{platform.node()}_{os.getpid()}"
        file_name = f"{worker_name}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, file_name))
    return handler_fn


class profile:
    """``with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof: ...`` then
    ``prof.key_averages().table(sort_by="cpu_time_total")``, ``prof.export_chrome_trace(path)``.

    With a `schedule`, call ``prof.step()`` after each step: the schedule's actions decide which steps are
    recorded, and at the end of each recorded cycle ``on_trace_ready(prof)`` gets the profile, whose events
    are that cycle's. Steps recorded are wrapped in ``ProfilerStep#<n>`` ranges, as torch's.
    with_stack records each op's Python call stack (the table's Source Location column, export_stacks,
    key_averages(group_by_stack_n=...)); with_flops, with_modules and the experimental options are accepted and
    record nothing more.
    """

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False, use_cuda=None,
                 custom_trace_id_callback=None):
        self.activities = set(activities) if activities else supported_activities()
        if use_cuda is not None:
            warnings.warn("`use_cuda` is deprecated, use `activities` argument instead", FutureWarning,
                          stacklevel=2)
            if use_cuda:
                self.activities.add(ProfilerActivity.CUDA)
            else:
                self.activities.discard(ProfilerActivity.CUDA)
        unknown = [a for a in self.activities if not isinstance(a, ProfilerActivity)]
        if unknown:
            raise TypeError(f"profile(): activities must be ProfilerActivity values, got {unknown[0]!r}")
        if not self.activities:
            raise AssertionError("No valid profiler activities found")
        devices = {ProfilerActivity.CUDA: "cuda", ProfilerActivity.XPU: "xpu", ProfilerActivity.MTIA: "mtia",
                   ProfilerActivity.HPU: "hpu", ProfilerActivity.PrivateUse1: "privateuseone"}
        self.use_device = next((devices[a] for a in devices if a in self.activities), None)
        self.record_shapes, self.profile_memory = record_shapes, profile_memory
        self.with_stack, self.with_flops, self.with_modules = with_stack, with_flops, with_modules
        self.schedule, self.record_steps = (schedule, True) if schedule else (default_schedule, False)
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        self.step_rec_fn = None
        self._recorder, self._events, self._metadata = None, None, {}

    # ---------------------------------------------------------------------------------- the session
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.stop()

    def start(self):
        self._transit(ProfilerAction.NONE, self.current_action)
        if self.record_steps:
            self.step_rec_fn = record_function("ProfilerStep#" + str(self.step_num))
            self.step_rec_fn.__enter__()

    def stop(self):
        if self.step_rec_fn is not None:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None
        self._transit(self.current_action, None)

    def step(self):
        """The end of a step: the schedule's action for the next one takes effect."""
        if self.step_rec_fn is not None:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None
        previous = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(previous, self.current_action)
        if self.record_steps:
            self.step_rec_fn = record_function("ProfilerStep#" + str(self.step_num))
            self.step_rec_fn.__enter__()

    def _transit(self, previous, current):
        """torch's action map: what moving from one step's action to the next's does (None: the end)."""
        NONE, WARMUP, RECORD, SAVE = (ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD,
                                      ProfilerAction.RECORD_AND_SAVE)
        recording = (RECORD, SAVE)
        if previous == current and current in (NONE, WARMUP, RECORD):
            return
        if previous == RECORD and current == SAVE:
            return
        if previous == NONE and current is None:
            return
        if previous == WARMUP and current == NONE:
            warnings.warn("Incorrect schedule: WARMUP followed by NONE", stacklevel=3)
        if previous == RECORD and current in (NONE, WARMUP):
            warnings.warn(f"Incorrect schedule: RECORD followed by {current.name}", stacklevel=3)
        if previous in recording:
            self._stop_trace()
            if previous == SAVE or current is None:
                self._trace_ready()
        if current in recording:
            self._start_trace()

    def _start_trace(self):
        self._recorder = recorder.Recorder(self.record_shapes, self.profile_memory, self.use_device,
                                           self.with_stack)
        self._recorder.start()

    def _stop_trace(self):
        if self._recorder is not None:
            self._events = self._recorder.stop()
            self._events.metadata.update(self._metadata)
            self._recorder = None

    def _trace_ready(self):
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # ---------------------------------------------------------------------------------- the results
    def _recorded(self):
        if self._events is None:
            raise AssertionError("the profile holds no trace yet: read it after a recorded cycle ends "
                                 "(the end of the `with` block, stop(), or the step that completes the cycle)")
        return self._events

    def events(self):
        """Every recorded event (FunctionEvent), in the order they began."""
        return self._recorded()

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        """The events averaged by name (and input shapes, with group_by_input_shape): see EventList."""
        return self._recorded().key_averages(group_by_input_shape, group_by_stack_n, group_by_overload_name)

    def export_chrome_trace(self, path):
        """Write the trace as Chrome trace JSON (gzipped where `path` ends in ``.gz``)."""
        self._recorded().export_chrome_trace(path)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Write each op's stack with its `metric` in the collapsed-stack format of flame graphs
        (needs with_stack=True)."""
        if not self.with_stack:
            raise AssertionError("export_stacks() requires with_stack=True")
        self._recorded().export_stacks(path, metric)

    def add_metadata(self, key, value):
        """A string entry in the exported trace's top level."""
        self._metadata[key] = value

    def add_metadata_json(self, key, value):
        """A JSON entry (given as text) in the exported trace's top level."""
        self._metadata[key] = json.loads(value)
