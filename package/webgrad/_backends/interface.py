"""The device interface: what the engine asks of a backend besides its kernels.

The autograd engine and every op (``webgrad/ops``) are written once against this interface and the kernel
registry (``kernels.py``). A backend implements the memory methods below and ``run``, which runs a kernel
record with the implementation the backend registered on it: ``cpu/`` (NumPy, the numerical reference) and
the WebGPU runtime with its two bindings (``webgpu/browser.py`` through Pyodide's JS FFI,
``webgpu/native.py`` through wgpu-py).

A backend hands out *storages*: opaque handles to a flat block of elements of one dtype. The engine never
looks inside; it describes what a kernel should read or write with a :class:`webgrad._view.View` over a
storage (shape, element strides, element offset), exactly like a PyTorch tensor over its storage. Data
crosses the boundary in the canonical layout of :mod:`webgrad.dtypes` (packed little-endian; bool is one
byte 0/1).
"""

import contextlib


class Backend:
    """Abstract base: the methods every backend implements. Arguments are documented here once."""

    name = "abstract"  # "cpu" or "webgpu"

    # ----------------------------------------------------------------- memory
    def empty(self, numel, dtype):
        """A new storage of `numel` elements of `dtype`, contents undefined."""
        raise NotImplementedError

    def from_bytes(self, data, dtype):
        """A new storage holding `data` (a bytes-like object in `dtype`'s canonical layout)."""
        raise NotImplementedError

    def to_bytes(self, view):
        """The elements of `view` in row-major order, canonical layout, as `bytes` (waits for queued work)."""
        raise NotImplementedError

    async def to_bytes_async(self, view):
        """Like to_bytes, for runtimes that cannot block (a browser without JSPI). Default: the sync one."""
        return self.to_bytes(view)

    def synchronize(self):
        """Submit queued work and wait for it to finish."""

    def submit(self):
        """Start queued work without waiting for it: called at the end of each optimizer step, so that a
        backend which queues (WebGPU) computes one training step while the host issues the next, as CUDA's
        asynchronous launches do. A backend that runs each kernel at once has nothing to do."""

    @property
    def errors_pending(self):
        """Whether an error a kernel found may be waiting for the next read-back to raise it: a kernel that may
        report one (an index or value check) ran, or is recorded into a step, since the backend last read its
        errors. A backend that raises at once (the CPU) has none."""
        return False

    # ----------------------------------------------------------------- graph capture (a capability)
    # A backend that queues its work can record it once and replay it (webgrad.replayable). It sets
    # supports_capture and implements the methods below; the engine asks the flag, never probes.
    supports_capture = False

    @property
    def capturing(self):
        """Whether a capture is recording."""
        return False

    def outside_capture(self):
        """A context in which work runs once and is not recorded, even inside a capture, and new storages
        do not belong to the graph: how state that outlives a step (an optimizer's moments, GradScaler's
        scale) is made when the step that first needs it is being recorded. Else its initialisation would be
        recorded and run again at every replay."""
        return contextlib.nullcontext()

    def capture(self, replacing=None, plannable=False):
        """``with backend.capture() as graph:`` runs and records the work issued inside; then
        ``graph.replay()`` runs it again and ``graph.release()`` frees it. ``graph.read_backs`` counts the
        values read back inside the block; a graph with any refuses to replay (RuntimeError): a replay would
        repeat what the host decided from them. With ``plannable=True`` the caller may record the same step
        again: ``graph.plan_gain`` is the bytes of memory that recording it with ``capture(replacing=graph)``
        would save (0 where that does not pay); that recording releases `graph` and lays out its own memory
        from what `graph` learned."""
        raise NotImplementedError(f"the {self.name} backend cannot capture work for replay")

    def scalar(self, value, kind="f32"):
        """A kernel scalar that may change between replays (e.g. the learning rate): an object with
        ``.value`` and ``.set(value)`` that kernels read from the device. Without capture: the number."""
        return value

    def write(self, storage, data, offset=0):
        """Overwrite elements [offset, offset + n) of `storage` with canonical bytes: how new inputs
        reach a captured graph without a new allocation."""
        raise NotImplementedError(f"the {self.name} backend does not write into storages in place")

    # ----------------------------------------------------------------- kernels
    features = frozenset()  # adapter features this device has (kernels.DeviceKernel.requires)

    def run(self, kernel, *args, **kwargs):
        """Run `kernel` (a record of kernels.py) with these arguments; what it computes is the record's doc."""
        raise NotImplementedError

    def has(self, kernel):
        """Whether this backend implements `kernel` and has the adapter features it requires (an optional
        kernel may be missing: the engine then composes the same result from other kernels)."""
        return self.name in kernel.impls and kernel.requires <= self.features
