"""webgrad.autograd.profiler_util, as torch.autograd.profiler_util: where torch keeps the profiler's event
classes (``from torch.autograd.profiler_util import EventList``). They live in webgrad/profiler/events.py."""

from ..profiler.events import DeviceType, EventList, FunctionEvent, FunctionEventAvg, Interval

__all__ = ["DeviceType", "EventList", "FunctionEvent", "FunctionEventAvg", "Interval"]
