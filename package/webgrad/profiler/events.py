"""What a profile holds: one FunctionEvent per recorded range, their averages, and the list of either.

The classes and attribute names are torch.autograd.profiler_util's (FunctionEvent, FunctionEventAvg,
EventList), so scripts that read ``prof.events()`` or ``prof.key_averages()`` find the fields they expect.
Times are microseconds (floats), memory bytes. webgrad measures host time only: every ``*device_time*``
field is 0 (see webgrad/profiler/__init__.py for why).
"""

import enum

from . import table, trace


class DeviceType(enum.Enum):
    """Where an event ran (torch.autograd.DeviceType's names): webgrad records host-side events only."""
    CPU = 0
    CUDA = 1


class Interval:
    """An event's [start, end] in microseconds since the profile started."""

    __slots__ = ("start", "end")

    def __init__(self, start, end):
        self.start, self.end = start, end

    def elapsed_us(self):
        return self.end - self.start


def _format_time(time_us):
    if time_us >= 1e6:
        return f"{time_us / 1e6:.3f}s"
    if time_us >= 1e3:
        return f"{time_us / 1e3:.3f}ms"
    return f"{time_us:.3f}us"


class _Formatted:
    """The ``*_str`` forms of the times, and the averages over ``count`` calls."""

    @property
    def cpu_time(self):
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def device_time(self):
        return 0.0 if self.count == 0 else self.device_time_total / self.count

    cuda_time = device_time

    @property
    def cuda_time_total(self):
        return self.device_time_total

    @property
    def self_cuda_time_total(self):
        return self.self_device_time_total

    @property
    def cuda_memory_usage(self):
        return self.device_memory_usage

    @property
    def self_cuda_memory_usage(self):
        return self.self_device_memory_usage

    cpu_time_str = property(lambda self: _format_time(self.cpu_time))
    cpu_time_total_str = property(lambda self: _format_time(self.cpu_time_total))
    self_cpu_time_total_str = property(lambda self: _format_time(self.self_cpu_time_total))
    device_time_str = property(lambda self: _format_time(self.device_time))
    device_time_total_str = property(lambda self: _format_time(self.device_time_total))
    self_device_time_total_str = property(lambda self: _format_time(self.self_device_time_total))


class FunctionEvent(_Formatted):
    """One recorded range: an op (``cpu_op``), a kernel call (``kernel``), a backward node or a
    record_function range (``user_annotation``), with its parent and children by nesting."""

    def __init__(self, id, name, thread, start_us, end_us, category="cpu_op", input_shapes=None,
                 cpu_memory_usage=0, device_memory_usage=0, sequence_nr=-1, use_device=None, stack=None):
        self.id, self.name, self.thread = id, name, thread
        self.time_range = Interval(start_us, end_us)
        self.category = category
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.cpu_memory_usage, self.device_memory_usage = cpu_memory_usage, device_memory_usage
        self.sequence_nr = sequence_nr
        self.use_device = use_device
        self.cpu_children, self.cpu_parent = [], None
        self.kernels, self.concrete_inputs = [], []
        self.stack = stack if stack is not None else []  # the caller's Python frames, innermost first
        self.device_type = DeviceType.CPU
        self.node_id, self.count, self.flops, self.scope, self.device_index = -1, 1, 0, 0, 0
        # torch's tables show every step as "ProfilerStep*" (one row); the trace keeps each step's own name
        self.trace_name = name
        if name.startswith("ProfilerStep#"):
            self.name = "ProfilerStep*"
        self.overload_name = ""
        self.is_async = self.is_remote = self.is_legacy = False
        self.fwd_thread = thread

    key = property(lambda self: self.name)
    is_user_annotation = property(lambda self: self.category == "user_annotation")

    @property
    def cpu_time_total(self):
        return self.time_range.elapsed_us()

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(child.cpu_time_total for child in self.cpu_children)

    @property
    def self_cpu_memory_usage(self):
        return self.cpu_memory_usage - sum(child.cpu_memory_usage for child in self.cpu_children)

    @property
    def self_device_memory_usage(self):
        return self.device_memory_usage - sum(child.device_memory_usage for child in self.cpu_children)

    device_time_total = self_device_time_total = property(lambda self: 0.0)

    def append_cpu_child(self, child):
        self.cpu_children.append(child)

    def set_cpu_parent(self, parent):
        self.cpu_parent = parent

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} device_type={self.device_type} "
                f"cpu_time={self.cpu_time_str} start_us={self.time_range.start:.3f} "
                f"end_us={self.time_range.end:.3f} cpu_children={[c.id for c in self.cpu_children]} "
                f"thread={self.thread} input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage} device_memory_usage={self.device_memory_usage}>")


_SUMMED = ("cpu_time_total", "device_time_total", "self_cpu_time_total", "self_device_time_total",
           "cpu_memory_usage", "device_memory_usage", "self_cpu_memory_usage", "self_device_memory_usage",
           "count", "flops")


class FunctionEventAvg(_Formatted):
    """The events of one key (name, and input shapes or stack where grouped by them), summed."""

    def __init__(self):
        self.key = None
        for name in _SUMMED:
            setattr(self, name, 0)
        self.node_id, self.is_async, self.is_remote, self.is_legacy = 0, False, False, False
        self.use_device, self.device_type, self.is_user_annotation = None, DeviceType.CPU, False
        self.input_shapes, self.overload_name, self.stack, self.scope = None, "", None, None
        self.cpu_parent, self.cpu_children = None, None

    def add(self, other):
        if not isinstance(other, (FunctionEvent, FunctionEventAvg)):
            raise TypeError(f"FunctionEventAvg.add: expected a FunctionEvent or FunctionEventAvg, got "
                            f"{type(other).__name__}")
        if self.key is None:  # the first event of the group gives its description
            self.key, self.node_id, self.is_async = other.key, other.node_id, other.is_async
            self.is_remote, self.is_legacy, self.use_device = other.is_remote, other.is_legacy, other.use_device
            self.device_type, self.is_user_annotation = other.device_type, other.is_user_annotation
            self.cpu_parent, self.cpu_children = other.cpu_parent, other.cpu_children
            self.input_shapes, self.stack, self.scope = other.input_shapes, other.stack, other.scope
        elif other.key != self.key:
            raise ValueError(f"FunctionEventAvg.add: key {other.key!r} differs from this average's {self.key!r}")
        for name in _SUMMED:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        return self

    def __iadd__(self, other):
        return self.add(other)

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total_str} "
                f"cpu_time={self.cpu_time_str} self_device_time={self.self_device_time_total_str} "
                f"device_time={self.device_time_str} input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage} device_memory_usage={self.device_memory_usage}>")


class EventList(list):
    """A list of FunctionEvents (or of their averages), with torch's summaries: key_averages, table,
    total_average, export_chrome_trace."""

    def __init__(self, *args, use_device=None, profile_memory=False, with_flops=False, metadata=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._use_device, self._profile_memory, self._with_flops = use_device, profile_memory, with_flops
        self.metadata = metadata if metadata is not None else {}

    def _like(self, events):
        return EventList(events, use_device=self._use_device, profile_memory=self._profile_memory,
                         with_flops=self._with_flops, metadata=self.metadata)

    @property
    def self_cpu_time_total(self):
        return sum(event.self_cpu_time_total for event in self)

    def __str__(self):
        return self.table()

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False, time_unit=None):
        """The events as torch prints them, one row each, sorted (descending) by attribute `sort_by`
        (``"cpu_time_total"``, ``"self_cpu_memory_usage"``, ...); the first `row_limit` rows."""
        return table.build(self, sort_by=sort_by, header=header, row_limit=row_limit,
                           max_src_column_width=max_src_column_width, max_name_column_width=max_name_column_width,
                           max_shapes_column_width=max_shapes_column_width, profile_memory=self._profile_memory,
                           top_level_events_only=top_level_events_only, time_unit=time_unit)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        """One FunctionEventAvg per name, and per input shapes with group_by_input_shape, and per the innermost
        `group_by_stack_n` frames of the caller's stack (recorded with with_stack=True) where that is > 0."""
        groups = {}
        for event in self:
            key = (event.key, str(event.node_id), str(event.device_type), event.is_legacy,
                   event.is_user_annotation)
            if group_by_input_shape:
                key += (str(event.input_shapes),)
            if group_by_stack_n > 0:
                key += tuple(event.stack[:group_by_stack_n])
            if group_by_overload_name:
                key += (event.overload_name,)
            groups.setdefault(key, FunctionEventAvg()).add(event)
        averages = self._like(groups.values())
        for average in averages:
            average.stack = (average.stack or [])[:group_by_stack_n]
            if not group_by_input_shape:
                average.input_shapes = ""
        return averages

    def total_average(self):
        """Every event summed into one FunctionEventAvg keyed "Total" (nested events count in their
        parents' totals and again on their own, as torch's does)."""
        total = FunctionEventAvg()
        for event in self:
            total.key = None
            total.add(event)
        total.key = "Total"
        return total

    def supported_export_stacks_metrics(self):
        return ["self_cpu_time_total", "self_cuda_time_total", "self_xpu_time_total", "self_privateuse1_time_total"]

    def export_stacks(self, path, metric):
        """One line per event with a stack: its frames outermost first, joined by ";", then the metric in
        whole microseconds (the collapsed-stack format flamegraph.pl and speedscope read)."""
        if metric not in self.supported_export_stacks_metrics():
            raise ValueError("metric should be one of: " + str(self.supported_export_stacks_metrics()))
        attribute = metric.replace("cuda", "device").replace("xpu", "device").replace("privateuse1", "device")
        blanks = str.maketrans(" ;\t\n", "____")
        with open(path, "w", encoding="utf-8") as f:
            for event in self:
                value = int(getattr(event, attribute))
                if event.stack and value > 0:
                    f.write(";".join(entry.translate(blanks) for entry in reversed(event.stack)) + f" {value}\n")

    def export_chrome_trace(self, path):
        """Write the events as a Chrome trace (JSON: chrome://tracing, Perfetto, TensorBoard's viewer);
        gzipped where `path` ends in ``.gz``."""
        trace.write(self, path)
