"""GPU time per training step, from WebGPU timestamp queries, and the adapter's features, as the page's
worker sees them.

The worker (web/js/gpu-timer.js) asks for the 'timestamp-query' feature where the adapter has it and
brackets every compute pass webgrad encodes with timestamps; it adds up the nanoseconds as the results
come back and exposes the running total as `self.webgradGpuTimer` ({available, reason, ns, passes}).
Here the run reads that total at each loss read-back: the GPU time of the steps since the last one.
Outside the page (CPython) there is no such timer, and the figure says so.
"""


def _worker_global(name):
    try:
        import js  # Pyodide: the worker's global scope
    except ImportError:
        return None
    return getattr(js, name, None)


def adapter_features():
    """The WebGPU adapter's features (a set of names) as the worker recorded them, or None if unknown."""
    features = _worker_global("webgradAdapterFeatures")
    return None if features is None else set(features.to_py())


class GpuTimer:
    def __init__(self):
        self._timer = _worker_global("webgradGpuTimer")
        if self._timer is None:
            self.unavailable = "no GPU timer outside the page"
        elif not self._timer.available:
            self.unavailable = str(self._timer.reason)
        else:
            self.unavailable = None
        self.ms_per_step = None
        self._mark = self._read(), 0

    def _read(self):
        return float(self._timer.ns) if self.unavailable is None else 0.0

    def mark(self, step):
        """At a read-back (the GPU has finished the steps so far): the GPU ms per step since the last mark.
        The timestamps of the last submits may arrive a moment later; they count in the next interval."""
        if self.unavailable is not None:
            return
        ns, before = self._read(), self._mark
        if step > before[1] and ns > before[0]:
            self.ms_per_step = (ns - before[0]) / 1e6 / (step - before[1])
            self._mark = ns, step

    def rebase(self, step):
        """Start the next interval here (after work that is not training steps, e.g. an evaluation)."""
        if self.unavailable is None:
            self._mark = self._read(), step
