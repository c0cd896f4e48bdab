"""webgrad.autograd.profiler, as torch.autograd.profiler: the profiler as one context manager.

    with torch.autograd.profiler.profile(record_shapes=True) as prof:
        model(x).sum().backward()
    print(prof.key_averages().table(sort_by="self_cpu_time_total"))

It records what webgrad.profiler.profile records (see webgrad/profiler/__init__.py: host times only, so
``use_cuda``/``use_device`` are accepted and the device times are 0). emit_nvtx and emit_itt, which annotate
ranges for NVIDIA's and Intel's tools, have no such tool to talk to here and do nothing.
"""

import contextlib
import warnings

from ..profiler.events import EventList, FunctionEvent, FunctionEventAvg  # (torch exports them here)
from ..profiler.record_function import record_function
from ..profiler.recorder import Recorder

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "emit_itt", "emit_nvtx", "profile", "record_function"]


class profile:
    """Records between ``__enter__`` and ``__exit__`` (``enabled=False``: records nothing). The results:
    ``function_events`` (an EventList), ``key_averages()``, ``table()``, ``total_average()``,
    ``export_chrome_trace(path)``, ``self_cpu_time_total``."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False, with_flops=False,
                 profile_memory=False, with_stack=False, with_modules=False, use_kineto=False, use_cpu=True,
                 experimental_config=None, acc_events=False, custom_trace_id_callback=None):
        self.enabled = enabled
        if use_cuda:
            warnings.warn("The attribute `use_cuda` will be deprecated soon, please use ``use_device = 'cuda'`` "
                          "instead.", FutureWarning, stacklevel=2)
            use_device = "cuda"
        self.use_device, self.record_shapes, self.profile_memory = use_device, record_shapes, profile_memory
        self.with_flops, self.with_stack, self.with_modules = with_flops, with_stack, with_modules
        self.function_events = None
        self.entered = False
        self._recorder = None

    def __enter__(self):
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self.entered = True
        self._recorder = Recorder(self.record_shapes, self.profile_memory, self.use_device, self.with_stack)
        self._recorder.start()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if not self.enabled:
            return False
        self.function_events = self._recorder.stop()
        self._recorder = None
        return False

    def _check_finish(self):
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")
        return self.function_events

    def __str__(self):
        return str(self._check_finish())

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False, time_unit=None):
        return self._check_finish().table(sort_by, row_limit, max_src_column_width, max_name_column_width,
                                          max_shapes_column_width, header, top_level_events_only, time_unit)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        return self._check_finish().key_averages(group_by_input_shape, group_by_stack_n, group_by_overload_name)

    def total_average(self):
        return self._check_finish().total_average()

    def export_chrome_trace(self, path):
        self._check_finish().export_chrome_trace(path)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        events = self._check_finish()
        if not self.with_stack:
            raise AssertionError("export_stacks() requires with_stack=True")
        events.export_stacks(path, metric)

    def events(self):
        return self._check_finish()

    @property
    def self_cpu_time_total(self):
        return self._check_finish().self_cpu_time_total


@contextlib.contextmanager
def emit_nvtx(enabled=True, record_shapes=False):
    """NVTX ranges for NVIDIA's Nsight: no CUDA here, so a context that does nothing."""
    yield


@contextlib.contextmanager
def emit_itt(enabled=True, record_shapes=False):
    """ITT ranges for Intel's VTune: none here, so a context that does nothing."""
    yield
