"""torch.utils.benchmark's Timer and Measurement, for scripts that time their statements:

    from torch.utils.benchmark import Timer
    m = Timer(stmt="model(x)", globals={"model": model, "x": x}).blocked_autorange(min_run_time=0.5)
    print(m)            # title, median, IQR, how many measurements and runs
    m.median, m.times   # seconds per run

As PyTorch's: ``timeit(number)`` warms up with ``max(number // 100, 2)`` runs and measures ``number`` runs once;
``blocked_autorange`` finds a block size whose timer overhead is negligible, then measures blocks until
``min_run_time`` has passed; ``stmt`` and ``setup`` are Python source run with ``globals`` (``torch`` added as
webgrad). The default timer waits for queued WebGPU work before reading the clock, as PyTorch's synchronizes
CUDA, so a measurement covers the GPU's work, not only its dispatch. Not here: C++ statements, Callgrind
instruction counts, ``Compare`` and the fuzzers.
"""

import dataclasses
import textwrap
import timeit as _timeit

__all__ = ["Timer", "Measurement", "TaskSpec", "select_unit"]

_MAX_SIGNIFICANT_FIGURES = 4
_MIN_CONFIDENCE_INTERVAL = 25e-9  # 25 ns
_IQR_WARN_THRESHOLD = 0.1
_IQR_GROSS_WARN_THRESHOLD = 0.25


def timer():
    """The clock, read after queued WebGPU work has finished (nothing to wait for when no device is open)."""
    from .. import webgpu
    webgpu.synchronize()
    return _timeit.default_timer()


def select_unit(t):
    """(unit, seconds per unit) to print a duration of t seconds: ns, us, ms or s."""
    import math
    exponent = math.floor(math.log10(t)) // 3 if t > 0 else 0
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(exponent, "s")
    return unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[unit]


def _quantile(ordered, q):
    """The q-quantile of sorted values by linear interpolation (torch.quantile's default)."""
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclasses.dataclass(init=True, repr=False, eq=True, frozen=True)
class TaskSpec:
    """What a Timer measures (everything but its globals)."""

    stmt: str
    setup: str
    global_setup: str = ""
    label: str = None
    sub_label: str = None
    description: str = None
    env: str = None
    num_threads: int = 1

    @property
    def title(self):
        if self.label is not None:
            return self.label + (f": {self.sub_label}" if self.sub_label else "")
        if "\n" not in self.stmt:
            return self.stmt + (f": {self.sub_label}" if self.sub_label else "")
        return f"stmt:{f' ({self.sub_label})' if self.sub_label else ''}\n{textwrap.indent(self.stmt, '  ')}"

    def setup_str(self):
        if self.setup == "pass" or not self.setup:
            return ""
        return f"setup:\n{textwrap.indent(self.setup, '  ')}" if "\n" in self.setup else f"setup: {self.setup}"

    def summarize(self):
        sections = [self.title, self.description or "", self.setup_str()]
        return "\n".join(f"{s}\n" if "\n" in s else s for s in sections if s)


_TASKSPEC_FIELDS = tuple(f.name for f in dataclasses.fields(TaskSpec))


@dataclasses.dataclass(init=True, repr=False)
class Measurement:
    """One or more timings of a statement: raw_times[i] is the time of number_per_run runs."""

    number_per_run: int
    raw_times: list
    task_spec: TaskSpec
    metadata: dict = None

    def __post_init__(self):
        self._sorted_times, self._warnings = (), ()
        self._median = self._mean = self._p25 = self._p75 = -1.0

    def __getattr__(self, name):
        if name in _TASKSPEC_FIELDS:
            return getattr(self.task_spec, name)
        return super().__getattribute__(name)

    @property
    def times(self):
        """Seconds per run, one value per measurement."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self):
        self._lazy_init()
        return self._median

    @property
    def mean(self):
        self._lazy_init()
        return self._mean

    @property
    def iqr(self):
        self._lazy_init()
        return self._p75 - self._p25

    @property
    def significant_figures(self):
        """Digits the interquartile spread supports (1 to 4), as PyTorch estimates them."""
        import math
        import statistics
        self._lazy_init()
        n = len(self._sorted_times)
        middle = self._sorted_times[n // 4:math.ceil(3 * n / 4)]
        spread = statistics.pstdev(middle) if len(middle) > 1 else 0.0
        interval = max(1.645 * spread / math.sqrt(len(middle)), _MIN_CONFIDENCE_INTERVAL)
        return min(max(math.floor(math.log10(self._median / interval)), 1), _MAX_SIGNIFICANT_FIGURES)

    @property
    def has_warnings(self):
        self._lazy_init()
        return bool(self._warnings)

    def meets_confidence(self, threshold=_IQR_WARN_THRESHOLD):
        return self.iqr / self.median < threshold

    @property
    def title(self):
        return self.task_spec.title

    @property
    def env(self):
        return "Unspecified env" if self.task_spec.env is None else self.task_spec.env

    @property
    def as_row_name(self):
        return self.sub_label or self.stmt or "[Unknown]"

    def _lazy_init(self):
        if self.raw_times and not self._sorted_times:
            self._sorted_times = tuple(sorted(self.times))
            self._median = _quantile(self._sorted_times, 0.5)
            self._mean = sum(self._sorted_times) / len(self._sorted_times)
            self._p25 = _quantile(self._sorted_times, 0.25)
            self._p75 = _quantile(self._sorted_times, 0.75)
            if not self.meets_confidence(_IQR_GROSS_WARN_THRESHOLD):
                self._warn("This suggests significant environmental influence.")
            elif not self.meets_confidence(_IQR_WARN_THRESHOLD):
                self._warn("This could indicate system fluctuation.")

    def _warn(self, message):
        relative = self.iqr / self.median * 100
        self._warnings += (f"  WARNING: Interquartile range is {relative:.1f}% of the median measurement.\n"
                           f"           {message}",)

    def __repr__(self):
        self._lazy_init()
        n = len(self._sorted_times)
        unit, scale = select_unit(self._median)
        lines = [object.__repr__(self), self.task_spec.summarize(),
                 f"  {'Median: ' if n > 1 else ''}{self._median / scale:.2f} {unit}"]
        if n >= 4:
            lines.append(f"  IQR:    {self.iqr / scale:.2f} {unit} ({self._p25 / scale:.2f} to "
                         f"{self._p75 / scale:.2f})")
        lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs "
                     f"{'per measurement,' if n > 1 else ','} {self.num_threads} "
                     f"thread{'s' if self.num_threads > 1 else ''}")
        lines.extend(self._warnings)
        return "\n".join(lines).strip()

    @staticmethod
    def merge(measurements):
        """Replicates of one task merged into one Measurement per task, extrapolated to one run each."""
        groups = {}
        for m in measurements:
            groups.setdefault(m.task_spec, []).append(m)
        return [Measurement(number_per_run=1, raw_times=[t for m in group for t in m.times], task_spec=spec)
                for spec, group in groups.items()]


class Timer:
    """Times a Python statement (see the module doc); arguments as torch.utils.benchmark.Timer's."""

    def __init__(self, stmt="pass", setup="pass", global_setup="", timer=timer, globals=None, label=None,
                 sub_label=None, description=None, env=None, num_threads=1, language="python"):
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")
        if str(getattr(language, "value", language)).lower() not in ("py", "python"):
            raise ValueError(f"webgrad's Timer runs Python statements only, not language {language!r}")
        if global_setup:
            raise ValueError(f"global_setup is C++ only, got `{global_setup}`. Most likely this code can simply be "
                             "moved to `setup`.")
        import webgrad
        self._globals = dict(globals or {})
        self._globals.setdefault("torch", webgrad)
        self._task_spec = TaskSpec(stmt=stmt, setup=setup, global_setup=global_setup, label=label,
                                   sub_label=sub_label, description=description, env=env, num_threads=num_threads)
        self._timer = _timeit.Timer(stmt=stmt, setup=setup, timer=timer, globals=self._globals)

    def _timeit(self, number):
        return max(self._timer.timeit(number), 1e-9)

    def timeit(self, number=1000000):
        """Run stmt max(number // 100, 2) times to warm up, then time `number` runs."""
        self._timeit(max(int(number // 100), 2))
        return Measurement(number_per_run=number, raw_times=[self._timeit(number)], task_spec=self._task_spec)

    def repeat(self, repeat=-1, number=-1):
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback=None):
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _estimate_block_size(self, min_run_time):
        """Runs per block such that the timer's own overhead is negligible (also the warm-up)."""
        overheads = sorted(self._timeit(0) for _ in range(5))
        overhead, number = overheads[2], 1
        while True:
            taken = self._timeit(number)
            if (overhead / taken <= 1e-4 and taken >= min_run_time / 1000) or taken > min_run_time:
                return number
            if number * 10 > 2147483647:
                return number
            number *= 10

    def blocked_autorange(self, callback=None, min_run_time=0.2):
        """Time blocks of runs until min_run_time seconds have passed: one measurement per block."""
        number = self._estimate_block_size(min_run_time)
        times, total = [], 0.0
        while total < min_run_time or not times:
            spent = self._timeit(number)
            times.append(spent)
            total += spent
            if callback:
                callback(number, spent)
        return Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)
