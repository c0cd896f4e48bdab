"""The WebGPU runtime: everything between the kernels and a binding, written once for both bindings.

What it does
------------
* **Memory.** GPU buffers come from a size-class pool (:class:`BufferPool`). A :class:`Storage` (what
  the backend hands the engine) returns its buffer to the pool when it is garbage-collected, so a
  training loop that repeats the same step reuses the same buffers and allocates none.
* **Caches.** Shader modules, pipelines (key: kernel, override constants), bind group layouts, bind
  groups (key: layout, buffers, uniform buffer) and per-dispatch uniform buffers (key: their bytes)
  are each created once. A repeated step therefore costs no WebGPU object creation at all.
* **Batching.** :meth:`Runtime.dispatch` only appends a record ``(0, pipeline, bind_group, x, y, z)``;
  copies are records ``(1, src, src_offset, dst, dst_offset, size)``. The records are handed to the
  binding, which encodes them into one command encoder and submits, at a sync point: a read-back,
  :meth:`Runtime.synchronize`, or every ``FLUSH_AFTER`` dispatches.
* **Ordering of writes.** ``queue.writeBuffer`` takes effect before any *later submitted* work, so
  writing into a buffer that a not-yet-submitted dispatch uses would be seen too early. The runtime
  tracks the buffers the pending records use and submits them first in that case.
* **Graph capture.** Inside ``with runtime.capture() as graph:`` every record is also kept by the
  graph; ``graph.replay()`` re-issues the whole sequence with one call into the binding (in the
  browser: one FFI call with a prebuilt JS array), submitted at once so that the GPU runs a step
  while the host prepares the next. See :class:`Graph`.
* **Device-side errors.** A kernel cannot raise. Kernels that read through an index (index.wgsl,
  softmax_loss.wgsl) or check a value (grad_norm.wgsl) never read out of bounds and, on a bad value, set
  the runtime's *error word* (:meth:`Runtime.error_code`): the first error wins. The word is copied out
  with the data of the next read-back (no extra sync), or read at :meth:`Runtime.synchronize`, and the
  error raised there, naming the op and the value, as CUDA reports a device-side assert at the next sync.
* **Dynamic scalars.** A value that changes every step (learning rate, step count, random offset)
  cannot live in a cached uniform, or a replay would reuse the old one. :meth:`Runtime.scalar` gives
  a :class:`DynamicScalar`: a slot in a GPU buffer that kernels read at run time and ``set()`` writes.

The binding interface
---------------------
A binding (``native.py``: wgpu-py; ``browser.py``: Pyodide's JS FFI) is a small object with:
``info()``, ``limits`` (dict), ``create_buffer(size, kind)`` with kind in "storage", "uniform",
"readback", "upload"; ``write_buffer(buffer, offset, data)``; ``create_module(code, label)``;
``create_layout(bindings)`` -> (bind_group_layout, pipeline_layout), bindings being
``((number, "read"|"write"|"uniform"), ...)``; ``create_pipeline(module, entry, constants,
pipeline_layout)``; ``create_bind_group(bind_group_layout, ((number, buffer), ...))``;
``prepare(records)`` -> a replayable form of a record list; ``submit(segments)`` where each segment
is a record list or a prepared one; ``read(buffer, size)`` -> bytes (blocking; the buffer is a
"readback" one) and ``async read_async(buffer, size)``; ``wait()``; ``destroy_buffer(buffer)``.
"""

import collections
import contextlib
import heapq
import itertools
import os
import struct
import sys
import weakref
from typing import NamedTuple

from ...dtypes import float16, float32, uint8
from . import memory_plan
from . import shaders

# Dtype codes, the same in every shader (injected as DT_* constants by shaders.source).
DTYPE_CODES = {"float32": 0, "int32": 1, "uint8": 2, "bool": 3, "float16": 4}  # float16: f16.py's kernels
DTYPE_CONSTANTS = {"DT_F32": 0, "DT_I32": 1, "DT_U8": 2, "DT_BOOL": 3}


def dtype_code(dtype):
    return DTYPE_CODES[dtype.name]


def storage_nbytes(numel, dtype):
    """Bytes a storage of `numel` elements takes on the GPU (uint8 packs four to a word, float16 two)."""
    words = (numel + 3) // 4 if dtype is uint8 else (numel + 1) // 2 if dtype is float16 else numel
    return 4 * max(words, 1)


def pow2_at_least(n):
    """The least power of two >= n (1 for n <= 1)."""
    return 1 << max(n - 1, 0).bit_length()


def size_class(nbytes):
    """The pooled buffer size for a request: 256 bytes, or the next of 1, 1.25, 1.5, 1.75 x 2**k
    (at most 25% waste, few distinct sizes so buffers are found again)."""
    if nbytes <= 256:
        return 256
    top = pow2_at_least(nbytes)
    quarter = top // 8  # steps of top/8 between top/2 and top
    return max(256, -(-nbytes // quarter) * quarter)


class Shader:
    """A .wgsl file plus the integer constants and splices injected into it (see shaders.source); or,
    when `code` is given, that WGSL text as is (kernels users write: webgrad.webgpu.Kernel, custom_kernel.py).

    `constants` is a dict, or a function returning (constants, splices), called when a runtime first
    compiles the shader: elementwise.wgsl takes its op codes and cases from the op table that way."""

    __slots__ = ("name", "constants", "code")

    def __init__(self, name, constants, code=None):
        self.name = name
        self.constants = constants
        self.code = code

    def source(self):
        if self.code is not None:
            return self.code
        constants, splices = self.constants() if callable(self.constants) else (self.constants, None)
        return shaders.source(self.name, dict(DTYPE_CONSTANTS, **constants), splices)

    def __repr__(self):
        return f"Shader({self.name!r})"


class Kernel:
    """One entry point of a shader with its explicit bind group layout.

    bindings: ((binding number, kind), ...) with kind "read" (read-only storage), "write" (read-write
    storage) or "uniform". Explicit layouts (rather than layout "auto") keep every binding even when a
    specialisation does not use it, so one bind group fits every pipeline of the kernel.
    overrides: the names of the override constants the entry point uses; :meth:`constants` passes
    exactly these (WebGPU implementations may reject constants an entry point does not use).
    """

    __slots__ = ("shader", "entry", "bindings", "overrides", "storage_bindings", "uniform_binding")

    def __init__(self, shader, entry, bindings, overrides=()):
        self.shader = shader
        self.entry = entry
        self.bindings = tuple(bindings)
        self.overrides = tuple(overrides)
        self.storage_bindings = tuple(n for n, kind in self.bindings if kind != "uniform")
        uniforms = [n for n, kind in self.bindings if kind == "uniform"]
        self.uniform_binding = uniforms[0] if uniforms else None

    def constants(self, values):
        """The pipeline key part for this entry: ((name, number), ...) for its overrides, from a dict
        that may hold more (booleans become 0/1)."""
        return tuple((name, int(values[name])) for name in self.overrides)

    def __repr__(self):
        return f"Kernel({self.shader.name}:{self.entry})"


class PlannedDispatch:
    """A dispatch planned once (a family caches these, e.g. with functools.lru_cache): the kernel, its
    override constants (picked from a dict by Kernel.constants), the packed Params and the grid.
    Runtime.record runs it on storages, its Launch kept in the runtime's memo under it."""

    __slots__ = ("kernel", "constants", "params", "workgroups")

    def __init__(self, kernel, constants, params, workgroups):
        self.kernel = kernel
        self.constants = kernel.constants(constants)
        self.params = params
        self.workgroups = workgroups

    def __repr__(self):
        return f"{type(self).__name__}({self.kernel.entry}, {dict(self.constants)}, workgroups={self.workgroups})"


class Launch:
    """A pipeline with its uniform buffer, grid and dynamic scalar slots: a dispatch without buffers."""

    __slots__ = ("kernel", "pipeline", "uniform", "groups", "slots", "constants", "params")

    def __init__(self, kernel, pipeline, uniform, groups, slots, constants=(), params=None):
        self.kernel = kernel
        self.pipeline = pipeline
        self.uniform = uniform
        self.groups = groups
        self.slots = slots
        self.constants = constants  # what made it (fusion.py reads a captured step's dispatches by them)
        self.params = params


def grid(groups, max_per_dim=65535):
    """Workgroup counts (x, y, 1) covering `groups` workgroups; kernels that use more than 65535 read
    their linear id as wid.x + wid.y * num_workgroups.x and skip ids past the end."""
    if groups <= max_per_dim:
        return (max(groups, 1), 1, 1)
    return (max_per_dim, -(-groups // max_per_dim), 1)


ERROR_WORD_BYTES = 16  # the error word as read back: code, value (i32), size, unused
ERROR_CODES_MAX = 1 << 20  # distinct error messages kept; beyond it one generic code


# ---------------------------------------------------------------------------------------- memory


_serials = itertools.count()


class PooledBuffer:
    """A GPU buffer of one size class; `handle` is the binding's buffer object.

    Buffers order by creation (`serial`): the pools' free lists are heaps that hand out the oldest free
    buffer of a class. Which buffer an op gets then depends on which buffers are free, not on the order in
    which the garbage collector released them, so a repeated eager step gets the same buffers every time
    and finds its bind groups in the cache. (Last-in-first-out lists drifted: a tensor kept across steps,
    such as the returned loss, shifted the order, and an eager MNIST step made 4 to 9 new bind groups
    each time, an FFI call and a WebGPU object each in the browser.)"""

    __slots__ = ("handle", "size", "serial")

    def __init__(self, handle, size):
        self.handle = handle
        self.size = size
        self.serial = next(_serials)

    def __lt__(self, other):
        return self.serial < other.serial


class BufferPool:
    """Free GPU buffers by size class. `create(size)` makes a new binding buffer.

    It counts bytes as PyTorch's caching allocator does (torch.cuda.memory_allocated and friends):
    `allocated`, the size classes of the buffers live storages hold; `peak`, its maximum since the last
    reset; `reserved`, every buffer this pool made and has not destroyed (in use or free).
    """

    def __init__(self, create):
        self._create = create
        self._free = {}
        self.allocated = self.peak = self.reserved = 0
        # Every buffer made, in use or free. A storage dropped inside a reference cycle (a traceback that
        # holds tensors, say) is collected together with everything only it references, its binding
        # buffer included: the cycle collector would run the binding buffer's finalizer (releasing the
        # GPU buffer) even though Storage.__del__ hands it back to the pool, and a later bind group would
        # use a dead buffer (wgpu-native: "invalid bind group entry"). Held here, it is never unreachable.
        self._owned = set()

    def acquire(self, nbytes):
        size = _size_classes.get(nbytes)
        if size is None:
            size = size_class(nbytes)
            if len(_size_classes) < 4096:
                _size_classes[nbytes] = size
        free = self._free.get(size)
        if free:
            buffer = heapq.heappop(free)
        else:
            buffer = PooledBuffer(self._create(size), size)
            self._owned.add(buffer)
            self.reserved += size
        self._count(size)
        return buffer

    def release(self, buffer):
        self.allocated -= buffer.size
        heapq.heappush(self._free.setdefault(buffer.size, []), buffer)

    def take_fitting(self, nbytes, largest):
        """A free buffer of `nbytes` to `largest` bytes, the smallest there is (counted as allocated), or None."""
        buffer = _best_fit(self._free, nbytes, largest)
        if buffer is not None:
            self._count(buffer.size)
        return buffer

    def _count(self, size):
        self.allocated += size
        if self.allocated > self.peak:
            self.peak = self.allocated

    def _take_back(self, buffer):
        """A free buffer a CapturePool held (already counted as not allocated)."""
        heapq.heappush(self._free.setdefault(buffer.size, []), buffer)

    def drain(self):
        """Remove and return every free buffer (to destroy them)."""
        buffers = [b for free in self._free.values() for b in free]
        self._free.clear()
        self.reserved -= sum(b.size for b in buffers)
        self._owned.difference_update(buffers)
        return buffers


_size_classes = {}  # nbytes -> size_class(nbytes): every allocation asks, an eager step for few sizes


def _best_fit(free, nbytes, largest):
    """Pop the smallest buffer of `nbytes` to `largest` bytes from `free` (size -> buffers), or None."""
    sizes = [size for size, buffers in free.items() if nbytes <= size <= largest and buffers]
    return heapq.heappop(free[min(sizes)]) if sizes else None


FIT_CLASSES = 1  # a capture's request takes a free buffer of at most this many times its size class
# A step is recorded again, planned, where that saves at least 1/16 of its graph's buffers and 1 MiB: a small
# step's few KiB do not pay for a second recording (its Python once more, hooks registered anew)
REPLAN_SHARE = 16
REPLAN_MIN_BYTES = 1 << 20


class CapturePool:
    """The pool new storages use during a capture.

    Buffers taken during a capture belong to the graph until it is released: a replay writes into
    them again, so they must not be handed to anyone else meanwhile. Within the capture they are
    reused (in recorded order, which is safe: the GPU runs the records in order). Its buffers count
    in the parent pool's `reserved`, and in its `allocated` while a storage holds them.

    Memory planning, online: a recorded step's intermediates live in the graph's buffers for good, so each
    buffer the capture adds is held by every replay. A request therefore takes a free buffer of its size
    class before it makes one: first among those freed earlier in the capture, then among the pool's free
    ones (the eager warm-up step's). Of its class only (FIT_CLASSES = 1). Until session 22 a larger one was
    taken too, up to twice the request's class: in a graph that nothing replaced that held less (ResNet-18's
    recorded step at batch 128: 934.1 MiB at its peak, the least of the bounds 1, 1.5, 2, 4 and none tried).
    But a storage that outlives the step then kept the larger buffer: the gradients a first recording made took
    77 MiB instead of 47, and those are alive while the step is recorded again, planned (below), whose peak was
    then 864.6 MiB instead of 842.4 (lavapipe, GPU kernel variants). A first recording is now either replaced by
    a planned one or holds within 1/REPLAN_SHARE of what the plan would.

    Planned: given a `plan` (memory_plan.BufferPlan, made from `events` of an earlier recording of the same
    step; see memory_plan), the k-th request takes the plan's buffer for it, made at its first use, as long
    as the request asks what the plan's did and no live storage holds that buffer; else the plan is dropped
    and the pool goes on online, its planned buffers among the free ones.
    """

    def __init__(self, parent, plan=None):
        self._parent = parent
        self._free = {}
        self.closed = False
        # ("acquire", bytes) per request and ("release", its index) per storage freed, in order, until the
        # capture ends (seal): what a later recording of the same step plans from (memory_plan.plan). A storage
        # freed afterwards (the returned loss, at the next call) outlived the step.
        self.events = []
        self.sealed = False
        self._holder = {}  # buffer -> the index of the request whose storage holds it
        self.owned = set()  # every buffer this capture took (the graph's)
        self._requests = 0
        self._plan = plan
        self._planned = {}  # slot -> its buffer, once made
        self._planned_buffers = set()  # their buffers
        self._planned_free = set()  # planned buffers no storage holds

    @property
    def idle_bytes(self):
        """Bytes of the buffers the capture took that no storage holds."""
        return (sum(b.size for free in self._free.values() for b in free)
                + sum(b.size for b in self._planned_free))

    def acquire(self, nbytes):
        k = self._requests
        self._requests += 1
        self.events.append(("acquire", nbytes))
        buffer = self._from_plan(k, nbytes) if self._plan is not None else None
        if buffer is None:
            largest = FIT_CLASSES * size_class(nbytes)
            buffer = _best_fit(self._free, nbytes, largest)
            if buffer is not None:
                self._parent._count(buffer.size)
            else:
                buffer = self._parent.take_fitting(nbytes, largest) or self._parent.acquire(nbytes)
                self.owned.add(buffer)
        self._holder[buffer] = k
        return buffer

    def _from_plan(self, k, nbytes):
        """The k-th request's planned buffer, or None (the plan dropped) where the request differs from the
        plan's or that buffer is held."""
        plan = self._plan
        if k >= len(plan.requests) or plan.requests[k] != nbytes:
            return self._drop_plan()
        slot = plan.slots[k]
        buffer = self._planned.get(slot)
        if buffer is None:
            buffer = self._planned[slot] = self._parent.acquire(plan.sizes[slot])
            self._planned_buffers.add(buffer)
            self.owned.add(buffer)
            return buffer
        if buffer not in self._planned_free:
            return self._drop_plan()
        self._planned_free.remove(buffer)
        self._parent._count(buffer.size)
        return buffer

    def _drop_plan(self):
        self._plan = None
        for buffer in self._planned_free:
            heapq.heappush(self._free.setdefault(buffer.size, []), buffer)
        self._planned_free.clear()
        self._planned.clear()
        self._planned_buffers.clear()

    @property
    def planned(self):
        """Whether the capture followed its plan throughout (False without one)."""
        return self._plan is not None

    def release(self, buffer):
        if self.closed:
            self._parent.release(buffer)
            return
        k = self._holder.pop(buffer)
        if not self.sealed:
            self.events.append(("release", k))
        self._parent.allocated -= buffer.size
        if buffer in self._planned_buffers:
            self._planned_free.add(buffer)
        else:
            heapq.heappush(self._free.setdefault(buffer.size, []), buffer)

    def close(self):
        """The graph is gone: return its free buffers, and the rest as their storages die."""
        self.closed = True
        for free in self._free.values():
            for buffer in free:
                self._parent._take_back(buffer)
        for buffer in self._planned_free:
            self._parent._take_back(buffer)
        self._free.clear()
        self._planned_free.clear()


class Storage:
    """What the backend hands the engine: `numel` elements of `dtype` in one pooled GPU buffer.

    The buffer goes back to its pool when the storage is garbage-collected (pool None: permanent).
    """

    __slots__ = ("buffer", "numel", "dtype", "pool", "__weakref__")

    def __init__(self, buffer, numel, dtype, pool):
        self.buffer = buffer
        self.numel = numel
        self.dtype = dtype
        self.pool = pool

    def __del__(self):
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.release(self.buffer)

    def __repr__(self):
        return f"webgpu.Storage({self.numel} x {self.dtype.name}, {self.buffer.size} bytes)"


# ---------------------------------------------------------------------------------------- scalars


class DynamicScalar:
    """A scalar kernels read from GPU memory when they run, so it can change between replays.

    kind "f32" (op parameters such as a learning rate) or "u32" (random seeds and offsets).
    Pass it wherever a kernel takes a scalar that may change (unary/unary_backward `a`, `b`, `fill`'s
    value, `random`'s seed and offset); change it with :meth:`set`.
    """

    __slots__ = ("_runtime", "slot", "kind", "_value", "__weakref__")

    def __init__(self, runtime, slot, kind, value):
        self._runtime = runtime
        self.slot = slot
        self.kind = kind
        self._value = None
        self.set(value)

    @property
    def value(self):
        return self._value

    def set(self, value):
        if self.kind == "f32":
            word = struct.pack("<f", float(value))
        else:
            word = struct.pack("<I", int(value) & 0xFFFFFFFF)
        self._runtime._write_scalar(self.slot, word)
        self._value = value

    def __del__(self):
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            runtime._free_scalar_slots.append(self.slot)

    def __repr__(self):
        return f"DynamicScalar({self._value!r}, {self.kind}, slot {self.slot})"


# ---------------------------------------------------------------------------------------- graphs


class TracedRecord(NamedTuple):
    """What a captured record ran on: its Launch (None: a copy or an upload), and per storage binding (in
    binding order) the storage's serial, its PooledBuffer and a weak reference to it."""

    launch: object
    serials: tuple
    buffers: tuple
    refs: tuple


# A long replay goes to the GPU in parts, each submitted as soon as it is encoded: after a read-back the GPU
# starts on the first few records while the host encodes the rest, instead of idling through the encoding of
# the whole step (ResNet-18's 627 records: about 2 ms natively, 2.7 through Dawn, against a 10.8 ms step). Each
# part is SUBMIT_GROWTH times the one before, so that its GPU time covers the encoding of the next. Steps of
# fewer than SUBMIT_SPLIT_MIN records (MNIST's, whose encoding is short) go in one submit: each submit costs
# host time of its own (a Pyodide FFI call in the browser).
SUBMIT_SPLIT_MIN = 200
SUBMIT_FIRST = 16
SUBMIT_GROWTH = 3


def replay_parts(records):
    """`records` cut into the parts a replay submits one after another (one part if they are few)."""
    if len(records) < SUBMIT_SPLIT_MIN:
        return [records]
    parts, start, size = [], 0, SUBMIT_FIRST
    while len(records) - start > 2 * size:
        parts.append(records[start:start + size])
        start, size = start + size, size * SUBMIT_GROWTH
    return parts + [records[start:]]


# A captured step's records are fused at its seal (fusion.py); WEBGRAD_FUSE=0 keeps them as recorded.
FUSE = {"on": os.environ.get("WEBGRAD_FUSE") != "0"}


class Graph:
    """A recorded sequence of GPU work (one training step, say) that can be re-issued.

    Made by ``with runtime.capture() as graph:``: the work inside runs normally *and* is recorded.
    ``graph.replay()`` issues the same dispatches and copies again, on the same buffers, in one call
    into the binding, without running any Python op code. To feed new data, write it into the input
    storages (``backend.write``) before replaying; to change scalars, use DynamicScalars. Results are
    found in the same storages as after the capture.

    The graph keeps alive every storage it reads or writes that was made before the capture, and owns
    the buffers of storages made during it (they return to the pool when the graph is released).
    """

    def __init__(self, runtime, plan=None, plannable=False):
        self._runtime = runtime
        self.plannable = plannable  # see Runtime.capture
        self.records = []
        self.buffers = set()  # PooledBuffers the records use (for write ordering)
        self.slots = set()  # dynamic scalar slots the records read
        self.pool = CapturePool(runtime.pool, plan)
        self._keep = {}  # id -> Storage made before the capture and used by it
        self._uploads = []  # buffers holding data written during the capture
        self._parts = None  # the records prepared for the binding, in the parts a replay submits
        self._failed = False
        self.checks_errors = False  # whether a recorded kernel may set the error word (see error_code)
        # Values read back while recording (Runtime.read): the host decided something from them that a replay,
        # which runs only the recorded GPU work, would repeat unchanged. Such a graph refuses to replay.
        self.read_backs = 0
        self._plan_gain = None  # see plan_gain
        self.better_plan = None  # the plan plan_gain found, where it pays
        # Per record, for fusion.py at the seal: a TracedRecord. Storages are told apart by a serial (an id
        # can be reused once its storage is gone) and held weakly, so that the seal sees which outlive the step.
        self.trace = []
        self.fused = 0  # chains fusion.py fused at the seal
        self.grouped = 0  # sgd4 updates fusion.py grouped into sgd4_group dispatches at the seal
        self._serials = weakref.WeakKeyDictionary()
        self._next_serial = itertools.count()

    def _add(self, record, storages, slots, launch=None):
        self.records.append(record)
        serials = []
        for s in storages:
            self.buffers.add(s.buffer)
            if s.pool is not self.pool:
                self._keep[id(s)] = s
            serial = self._serials.get(s)
            if serial is None:
                serial = self._serials[s] = next(self._next_serial)
            serials.append(serial)
        self.trace.append(TracedRecord(launch, tuple(serials), tuple(s.buffer for s in storages),
                                       tuple(weakref.ref(s) for s in storages)))
        self.slots.update(slots)

    def _seal(self, failed):
        self._failed = failed
        self.pool.sealed = True
        if not failed:
            if FUSE["on"]:
                from .fusion import fuse  # (fusion.py imports batch_norm and elementwise, which import this)
                self.records = fuse(self, self._runtime)
            self.trace = None  # (its weak references and launches are needed no longer)
            self._parts = [self._runtime.binding.prepare(part) for part in replay_parts(self.records)]
            self._dispatch_count = self.dispatches  # counted once, not at every replay

    @property
    def dispatches(self):
        return sum(1 for r in self.records if r[0] == 0)

    @property
    def idle_bytes(self):
        """Bytes of the buffers the graph owns that no live storage holds (its intermediates): not in
        the pool's `allocated`, yet a replay writes into them, so no one else may use them meanwhile."""
        return self.pool.idle_bytes

    @property
    def own_bytes(self):
        """Bytes of every buffer the graph owns: its intermediates' (idle_bytes) and those of the storages it
        made that outlive it (a parameter's gradient, the returned loss)."""
        return sum(b.size for b in self.pool.owned)

    @property
    def plan_gain(self):
        """Bytes that recording this step again, planned from this recording (capture(replacing=self);
        memory_plan.py), would save: 0 unless that is at least 1/REPLAN_SHARE of own_bytes and REPLAN_MIN_BYTES,
        and where this graph was not recorded plannable (Runtime.capture), cannot be replayed or was planned."""
        if self._plan_gain is None:
            self._plan_gain = 0
            if self.plannable and self._parts is not None and not self.read_backs and not self.pool.planned:
                plan = memory_plan.plan(self.pool.events, size_class)
                gain = self.own_bytes - plan.nbytes
                if gain * REPLAN_SHARE >= self.own_bytes and gain >= REPLAN_MIN_BYTES:
                    self._plan_gain, self.better_plan = gain, plan
        return self._plan_gain

    def replay(self):
        """Submit the recorded work again, with any eager work recorded before it (without waiting)."""
        if self._parts is None:
            raise RuntimeError(
                "this graph cannot be replayed: "
                + ("its capture raised an exception" if self._failed else "it was released")
            )
        if self.read_backs:
            raise RuntimeError(
                f"this graph cannot be replayed: its capture read {self.read_backs} value(s) back from the GPU "
                "(.item(), .tolist(), .numpy(), a tensor printed or used in a Python condition, an optimizer "
                "that takes a closure such as LBFGS), and a replay runs only the recorded GPU work, repeating "
                "whatever was decided from those values. Capture work that reads nothing back "
                "(webgrad.replayable runs such a step eagerly instead)")
        self._runtime._replay(self)

    def release(self):
        """Give the graph's buffers back to the pool; the graph cannot be replayed afterwards."""
        if self._parts is not None or not self.pool.closed:
            self._parts = None
            self.records = []
            self._keep = {}
            self._uploads = []
            self.pool.close()

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown
            pass


Dispatch = collections.namedtuple("Dispatch", "record kernel constants params groups")
Dispatch.__doc__ = """One recorded dispatch, described (Runtime.describe): the record, its Kernel, the override
constants ((name, number), ...), the bytes of its uniform (or None) and its (x, y, z) workgroup counts."""


# ---------------------------------------------------------------------------------------- runtime


# Kernel variants by kind of adapter, in one table: name -> (on a GPU, on a software adapter). A software
# adapter (lavapipe, SwiftShader) runs each 4 invocations as SIMD lanes of one CPU thread: a workgroup
# barrier costs a coroutine switch per 4 lanes and every load ~45 ns whether one word or four, while
# arithmetic is nearly free. So there the families pick barrier-free kernels that keep data in registers
# (measured in each family's comments); GPUs keep shared-memory tiles and tree reductions. The families
# read their choice as rt.variant[name], never the adapter kind itself.
KERNEL_VARIANTS = {
    "matmul_profile": ("gpu", "cpu"),     # matmul_plan: workgroup tiles (matmul.wgsl) / 16x16 register blocks
                                          # per invocation (matmul_cpu.wgsl)
    "conv_unfold": (False, True),         # conv2d, its weight and input gradients: implicit gathers / an
                                          # explicit im2col (K padded to 4) + matmul, col2im
    "conv_rows": (False, True),           # im2col, col2im, max-pool and its backward: a thread per element /
                                          # a thread per row (no index divisions per element)
    "reduce_one_thread": (False, True),   # reductions: workgroup trees / one thread folds each output's row
    "softmax_rows": (False, True),        # softmax, cross-entropy: a tree per row / a thread per row
    "optim_vec4_per_thread": (1, 16),     # vec4s each thread of an optimizer update handles
    "batch_norm_rows": (False, True),     # batch norm statistics and gradient sums: a workgroup tree per
                                          # (chunk, channel) / a thread per (chunk, channel)
}


# Words of counters at the start of Runtime.tickets (the kernels' partials follow them).
TICKET_COUNTERS = 4096


class Runtime:
    FLUSH_AFTER = 1024  # dispatches recorded before an automatic submit
    CACHE_LIMIT = 8192  # bind groups / uniform buffers kept; the caches are cleared at a submit beyond it
    SCALAR_SLOTS = 65536  # capacity of the dynamic scalar buffer (256 KiB)
    SCALAR_GAP = 64  # slots set in one step and at most this far apart are written together

    def __init__(self, binding):
        self.binding = binding
        self.limits = binding.limits
        info = binding.info()
        # A software adapter (lavapipe, SwiftShader) runs each 4 invocations as SIMD lanes of a CPU thread:
        # kernel families choose barrier-free, register-heavy variants there (matmul.profile,
        # reduce.split). Workgroup barriers and loads are what cost (see shaders/matmul_cpu.wgsl).
        self.software = info.get("adapter_type") == "CPU" or info.get("architecture") == "swiftshader"
        # Optional WebGPU features the device was given: float16 storages need shader-f16 (f16.py).
        self.features = frozenset(getattr(binding, "features", ()))
        self.has_f16 = "shader-f16" in self.features
        self.stats = dict.fromkeys(
            (
                "buffers_created", "pipelines_created", "bind_groups_created", "uniforms_created",
                "dispatches", "copies", "submits", "reads", "writes", "replays",
            ),
            0,
        )
        self.pool = BufferPool(lambda size: self._create_buffer(size, "storage"))
        self._readback_pool = BufferPool(lambda size: self._create_buffer(size, "readback"))
        self._alloc = self.pool  # the pool new storages draw from (a CapturePool while capturing)
        self._kept_scratch = {}  # name -> Storage: see kept_scratch
        self._tickets = None  # see tickets
        self._modules = {}
        self._layouts = {}
        self._pipelines = {}
        self._uniforms = {}
        self._bind_groups = {}
        self.memo = {}  # kernel families' Launches, keyed by what determines them (see launch())
        self._records = []  # the open segment of eager records
        self._segments = []  # closed segments (record lists or prepared graphs) awaiting submit
        self._pending = set()  # PooledBuffers used by work not yet submitted
        self._pending_slots = set()
        self._scalar_writes = set()  # slots set but not yet written (see _write_scalar)
        self._scalar_values = bytearray(4 * self.SCALAR_SLOTS)  # every slot's value, as on the GPU after a flush
        self._graph = None
        self.dummy = self._permanent(256)  # bound to read-only bindings a kernel does not use
        self._spares = []  # the same for unused writable bindings (see spare)
        self.scalars = self._permanent(4 * self.SCALAR_SLOTS)  # dynamic scalars, one word each
        self._free_scalar_slots = list(range(self.SCALAR_SLOTS - 1, -1, -1))
        # The error word: [code, value, size, 0] (see error_code); written through atomics by kernels.
        self.errors = self._permanent(256)
        self.binding.write_buffer(self.errors.buffer.handle, 0, bytes(ERROR_WORD_BYTES))
        self._error_codes = {}  # (exception class, message template) -> code (1-based)
        self._error_kinds = []
        self._errors_armed = False  # whether work that may set the error word ran since it was last read

    def _permanent(self, nbytes):
        """A storage outside the pools (never released)."""
        return Storage(PooledBuffer(self._create_buffer(nbytes, "storage"), nbytes), nbytes // 4, None, None)

    def spare(self, k):
        """The k-th small permanent buffer for an unused *writable* binding (WebGPU forbids binding one
        buffer writable twice in a dispatch, so each such binding needs its own)."""
        while len(self._spares) <= k:
            self._spares.append(self._permanent(256))
        return self._spares[k]

    def _create_buffer(self, size, kind):
        self.stats["buffers_created"] += 1
        return self.binding.create_buffer(size, kind)

    # ------------------------------------------------------------------ memory

    def storage(self, numel, dtype):
        """A new storage of `numel` elements of `dtype`, contents undefined."""
        if numel < 0:
            raise ValueError(f"cannot allocate {numel} elements")
        nbytes = storage_nbytes(numel, dtype)
        limit = self.limits["max_storage_buffer_binding_size"]
        if nbytes > limit:
            raise MemoryError(
                f"a {dtype.name} storage of {numel} elements needs {nbytes} bytes, more than this "
                f"GPU binds at once ({limit} bytes, maxStorageBufferBindingSize)"
            )
        pool = self._alloc
        return Storage(pool.acquire(nbytes), numel, dtype, pool)

    def split_k_scratch(self, numel):
        """The float32 scratch of split-K products (matmul.wgsl's and conv_gemm.wgsl's partial tiles), at
        least `numel` floats: ONE storage, shared by every split product and kept (like a cuBLAS workspace;
        memory_allocated() counts it, empty_cache() leaves it), grown by replacing it (a graph that recorded
        the old one keeps that alive for its replays). The GPU runs the records in order, so a product's
        reduction has summed its partial tiles before the next product writes over them.

        It comes from the runtime's own pool even while capturing. A scratch per product, freed after its
        reduction, went back to the capture's pool, where the next tensor that fitted took it (often one
        kept until the backward), so the next split product drew a new buffer and the graph kept them all:
        ResNet-18 at batch 128 (bench scale's peak, GPU kernel variants, lavapipe = the H200's bytes) held
        108 MiB of such buffers with 64x128 conv tiles (peak 900.6 MiB) and 240 MiB with the 128x128w16 rule
        (1020.6); with this one kept scratch its graph owns 750.8 MiB and the peak is 892.9 MiB with the rule.
        """
        return self.kept_scratch("split-k", numel)

    def kept_scratch(self, name, numel):
        """The runtime's kept float32 scratch `name`, at least `numel` floats, as split_k_scratch describes:
        "split-k" (split products' partial tiles); "winograd-u", "winograd-in" and "winograd-out"
        (winograd.py's transformed operands and products: a dispatch reads some and writes another, which
        WebGPU allows only for distinct buffers; a split product inside it uses "split-k" too).

        While a plannable capture records (capture(plannable=True), replay.py's), a new storage of the graph's
        instead, which the op drops when it returns: a recorded step owns its buffers for good, and a kept
        scratch would be held beside them, sized for the step's largest op (96 MiB in ResNet-18's step at
        batch 128). A scratch of the graph's lives only through its op, so a planned recording
        (capture(replacing=...)) lets it share buffers with activations not yet made or already freed. A
        capture that no plan follows keeps the kept scratches: online, a freed per-op scratch was taken by a
        kept activation and the graph made a new one for the next op (ResNet-18 peaked at 1263.8 MiB against
        988.8)."""
        if self._graph is not None and self._graph.plannable:
            return self.storage(numel, float32)  # the graph's, for this op alone (see capture)
        s = self._kept_scratch.get(name)
        if s is None or s.numel < numel:
            nbytes = storage_nbytes(numel, float32)
            limit = self.limits["max_storage_buffer_binding_size"]
            if nbytes > limit:
                raise MemoryError(f"a {name} scratch of {nbytes} bytes is more than this GPU binds at once "
                                  f"({limit} bytes, maxStorageBufferBindingSize)")
            buffer = self.pool.acquire(nbytes)  # self.pool, not self._alloc: a capture's pool would own it
            s = self._kept_scratch[name] = Storage(buffer, buffer.size // 4, float32, self.pool)
        return s

    def tickets(self, words):
        """The runtime's ticket buffer, at least `words` 32-bit words, for kernels whose last workgroup to
        finish merges the others' partials in the same dispatch (reduce_rows4's STAGE 3, batch norm's FOLD):
        ticket counters in its first TICKET_COUNTERS words, partials after them (so that one kernel's partials
        never land on another's counters). Outside the pools (nothing else may write it: its counters must read
        zero between dispatches, and every kernel that uses it leaves them so) and zero when made (WebGPU zeroes
        new buffers); a larger one replaces it when a shape needs more (submitted work and graphs keep the old
        one alive)."""
        if self._tickets is None or self._tickets.numel < words:
            self._tickets = self._permanent(4 * max(pow2_at_least(words), 4096))
        return self._tickets

    def write(self, storage, data, byte_offset=0):
        """Copy `data` (bytes-like, a multiple of 4 bytes) into `storage` at `byte_offset`, in order
        with the work recorded so far."""
        nbytes = len(data)
        if nbytes == 0:
            return
        if nbytes % 4 or byte_offset % 4:
            raise ValueError("GPU writes must cover whole 4-byte words")
        if byte_offset + nbytes > storage.buffer.size:
            raise ValueError(f"write of {nbytes} bytes at {byte_offset} overruns a {storage.buffer.size}-byte buffer")
        self.stats["writes"] += 1
        if self._graph is not None:
            # Replayable: the data gets a buffer of its own and the copy is part of the recording.
            upload = self._create_buffer(nbytes, "upload")
            self.binding.write_buffer(upload, 0, data)
            self._graph._uploads.append(upload)
            self._append((1, upload, 0, storage.buffer.handle, byte_offset, nbytes), (storage,), ())
            return
        if storage.buffer in self._pending:
            self.flush()
        self.binding.write_buffer(storage.buffer.handle, byte_offset, data)

    def copy(self, src, src_offset, dst, dst_offset, nbytes):
        """Record a buffer-to-buffer copy of `nbytes` (all multiples of 4) between storages."""
        self._append((1, src.buffer.handle, src_offset, dst.buffer.handle, dst_offset, nbytes), (src, dst), ())

    def read(self, storage, byte_offset, nbytes):
        """The bytes [byte_offset, byte_offset + nbytes) of a storage, after all queued work.

        Raises the error a kernel recorded in the error word (see error_code) instead, if any."""
        staging, total = self._stage_read(storage, byte_offset, nbytes)
        try:
            data = self.binding.read(staging.handle, total)
        finally:
            self._readback_pool.release(staging)
        return self._check_errors(data, nbytes)

    async def read_async(self, storage, byte_offset, nbytes):
        staging, total = self._stage_read(storage, byte_offset, nbytes)
        try:
            data = await self.binding.read_async(staging.handle, total)
        finally:
            self._readback_pool.release(staging)
        return self._check_errors(data, nbytes)

    def _stage_read(self, storage, byte_offset, nbytes):
        if nbytes % 4 or byte_offset % 4:
            raise ValueError("GPU reads must cover whole 4-byte words")
        # The error word rides along behind the data when work that may set it ran since the last read:
        # one more small copy into the same staging buffer, no extra map or sync.
        total = nbytes + (ERROR_WORD_BYTES if self._errors_armed else 0)
        staging = self._readback_pool.acquire(total)
        if self._graph is not None:
            self._graph.read_backs += 1
        # Not part of any capture: the staging buffer is reused for other reads.
        if nbytes:
            self._records.append((1, storage.buffer.handle, byte_offset, staging.handle, 0, nbytes))
        if total > nbytes:
            self._records.append((1, self.errors.buffer.handle, 0, staging.handle, nbytes, ERROR_WORD_BYTES))
            self._errors_armed = False  # everything that may set it so far is in this submit
        self.stats["reads"] += 1
        self.flush()
        return staging, total

    def empty_cache(self):
        """Destroy the free pooled buffers (like torch.cuda.empty_cache); buffers of live tensors and of
        graphs stay. Work already submitted keeps what it uses (WebGPU defers the destruction)."""
        self.flush()
        drained = self.pool.drain() + self._readback_pool.drain()
        if drained:
            # cached bind groups would keep the destroyed buffers' objects alive for nothing
            self._bind_groups.clear()
        for buffer in drained:
            self.binding.destroy_buffer(buffer.handle)

    # ------------------------------------------------------------------ device-side errors

    def error_code(self, template, exception=IndexError):
        """The code a kernel writes into the error word to report `exception(template.format(value=v,
        size=s))`, v and s being the two words it writes beside the code (`exception` may also be a plain
        callable, called with the message instead, the read then going on). A dispatch that binds
        :attr:`errors` arms the next read-back to check the word (see run)."""
        key = (exception, template)
        code = self._error_codes.get(key)
        if code is None:
            if len(self._error_kinds) >= ERROR_CODES_MAX:
                key = (exception, "a kernel reported an out-of-range value {value} (size {size})")
                code = self._error_codes.get(key)
            if code is None:
                self._error_kinds.append(key)
                code = self._error_codes[key] = len(self._error_kinds)
        return code

    def _check_errors(self, data, nbytes):
        """`data`'s first nbytes; raise the error in its trailing error word, if one is there and set."""
        if len(data) == nbytes:
            return data
        code, value, size, _ = struct.unpack_from("<IiII", data, nbytes)
        if code:
            self.clear_errors()
            kind, template = self._error_kinds[code - 1]
            message = template.format(value=value, size=size)
            if isinstance(kind, type) and issubclass(kind, BaseException):
                raise kind(message)
            kind(message)  # a handler (replayable's check_finite callback): called, and the read goes on
        return data[:nbytes]

    def clear_errors(self):
        """Reset the error word (once an error has been raised, or to drop one)."""
        self.flush()  # recorded work keeps the word it sees; later work starts from zero
        self.binding.write_buffer(self.errors.buffer.handle, 0, bytes(ERROR_WORD_BYTES))

    # ------------------------------------------------------------------ dynamic scalars

    def scalar(self, value, kind="f32"):
        """A :class:`DynamicScalar` holding `value` (kind "f32" or "u32")."""
        if kind not in ("f32", "u32"):
            raise ValueError(f"dynamic scalar kind must be 'f32' or 'u32', not {kind!r}")
        if not self._free_scalar_slots:
            raise RuntimeError(f"more than {self.SCALAR_SLOTS} dynamic scalars are alive")
        return DynamicScalar(self, self._free_scalar_slots.pop(), kind, value)

    def _write_scalar(self, slot, word):
        if slot in self._pending_slots:
            self.flush()  # recorded work must still see the old value
        # Written at the next flush, before its submit: the same order for the GPU (a queue write lands
        # before later submits), and an optimizer's several scalars per step go out in one write_buffer.
        self._scalar_values[4 * slot:4 * slot + 4] = word
        self._scalar_writes.add(slot)

    def _write_scalars(self):
        """Write the scalars set since the last flush: one write_buffer per cluster of slots less than
        SCALAR_GAP apart, the slots between them rewritten with the values they hold (the host's copy)."""
        slots = sorted(self._scalar_writes)
        self._scalar_writes = set()
        first = slots[0]
        for i in range(1, len(slots) + 1):
            if i == len(slots) or slots[i] - slots[i - 1] > self.SCALAR_GAP:
                end = 4 * (slots[i - 1] + 1)
                self.binding.write_buffer(self.scalars.buffer.handle, 4 * first, bytes(self._scalar_values[4 * first:end]))
                if i < len(slots):
                    first = slots[i]

    # ------------------------------------------------------------------ kernels

    def dispatch(self, kernel, constants, storages, params, groups, slots=()):
        """Record one dispatch of `kernel`.

        constants: tuple of (name, number) override constants (hashable: the pipeline cache key);
        storages: one Storage per storage binding of the kernel, in binding-number order;
        params: the bytes of its uniform (None if it has none); groups: (x, y, z) workgroup counts;
        slots: dynamic scalar slots the dispatch reads.
        """
        self.run(self.launch(kernel, constants, params, groups, slots), storages)

    def launch(self, kernel, constants, params, groups, slots=()):
        """Everything of a dispatch but its buffers (pipeline, uniform, grid), to :meth:`run` on any
        storages. A family may keep Launches in :attr:`memo` (keyed by what determines them) to skip
        packing parameters on a repeated call."""
        pipeline = self._pipelines.get((kernel, constants))
        if pipeline is None:
            pipeline = self._create_pipeline(kernel, constants)
        uniform = None if params is None else (self._uniforms.get(params) or self._create_uniform(params))
        return Launch(kernel, pipeline, uniform, groups, tuple(slots), constants, params)

    def record(self, dispatch, storages):
        """Record a PlannedDispatch on `storages` (see run), its Launch made once and kept in memo."""
        launch = self.memo.get(dispatch)
        if launch is None:
            launch = self.memo[dispatch] = self.launch(dispatch.kernel, dispatch.constants, dispatch.params,
                                                       dispatch.workgroups)
        self.run(launch, storages)

    def run(self, launch, storages):
        """Record `launch` on `storages` (one per storage binding of its kernel, in binding order)."""
        # The hot path of every eager op (in the browser, CPython in WebAssembly): one pass over the
        # storages, no generator, and the pending set updated here rather than through _append's loop.
        buffers = tuple([s.buffer for s in storages])
        record = self.dispatch_record(launch, buffers)
        self.stats["dispatches"] += 1
        if self.errors in storages:
            # Armed here, when the dispatch is recorded, not when its code was made: a read-back in between
            # (the browser binding reads on a pipeline's first use) must not consume the flag early.
            self._errors_armed = True
            if self._graph is not None:
                self._graph.checks_errors = True
        if self._graph is not None:
            self._append(record, storages, launch.slots, launch)
            return
        self._records.append(record)
        self._pending.update(buffers)
        if launch.slots:
            self._pending_slots.update(launch.slots)
        if len(self._records) >= self.FLUSH_AFTER:
            self.flush()

    def dispatch_record(self, launch, buffers):
        """The record of `launch` on `buffers` (PooledBuffers, one per storage binding), its bind group made
        once and kept."""
        key = (launch.kernel, buffers, launch.uniform)
        bind_group = self._bind_groups.get(key)
        if bind_group is None:
            bind_group = self._create_bind_group(launch.kernel, buffers, launch.uniform, key)
        groups = launch.groups
        return (0, launch.pipeline, bind_group, groups[0], groups[1], groups[2])

    def _append(self, record, storages, slots, launch=None):
        self._records.append(record)
        for s in storages:
            self._pending.add(s.buffer)
        if slots:
            self._pending_slots.update(slots)
        if self._graph is not None:
            self._graph._add(record, storages, slots, launch)
        if record[0] == 1:
            self.stats["copies"] += 1
        if len(self._records) >= self.FLUSH_AFTER:
            self.flush()

    @property
    def software(self):
        """Whether the adapter is a CPU (lavapipe, SwiftShader): it selects self.variant."""
        return self._software

    @software.setter
    def software(self, value):  # tests set it to run a family's other variants on the adapter they have
        self._software = bool(value)
        self.variant = {name: choices[self._software] for name, choices in KERNEL_VARIANTS.items()}

    def _layout(self, kernel):
        layout = self._layouts.get(kernel.bindings)
        if layout is None:
            layout = self._layouts[kernel.bindings] = self.binding.create_layout(kernel.bindings)
        return layout

    def _create_pipeline(self, kernel, constants):
        module = self._modules.get(kernel.shader)
        if module is None:
            module = self._modules[kernel.shader] = self.binding.create_module(kernel.shader.source(),
                                                                                kernel.shader.name)
        pipeline = self.binding.create_pipeline(module, kernel.entry, dict(constants), self._layout(kernel)[1])
        self._pipelines[(kernel, constants)] = pipeline
        self.stats["pipelines_created"] += 1
        return pipeline

    def _create_uniform(self, params):
        size = -(-max(len(params), 16) // 16) * 16
        handle = self._create_buffer(size, "uniform")
        self.binding.write_buffer(handle, 0, params)
        uniform = self._uniforms[params] = PooledBuffer(handle, size)
        self.stats["uniforms_created"] += 1
        return uniform

    def _create_bind_group(self, kernel, buffers, uniform, key):
        entries = [(n, b.handle) for n, b in zip(kernel.storage_bindings, buffers)]
        if kernel.uniform_binding is not None:
            entries.append((kernel.uniform_binding, uniform.handle))
        bind_group = self.binding.create_bind_group(self._layout(kernel)[0], entries)
        self._bind_groups[key] = bind_group
        self.stats["bind_groups_created"] += 1
        return bind_group

    # ------------------------------------------------------------------ submission

    def flush(self):
        """Submit all recorded work (without waiting for it)."""
        if self._scalar_writes:
            self._write_scalars()
        if self._records:
            self._segments.append(self._records)
            self._records = []
        if not self._segments:
            return
        segments, self._segments = self._segments, []
        self.binding.submit(segments)
        self.stats["submits"] += 1
        self._pending.clear()
        self._pending_slots.clear()
        if max(len(self._bind_groups), len(self._uniforms), len(self.memo)) > self.CACHE_LIMIT:
            # Dropping our references is safe: submitted work and graphs keep what they use alive.
            self._bind_groups.clear()
            self._uniforms.clear()
            self.memo.clear()

    def synchronize(self):
        """Submit all recorded work and wait until the GPU has finished it. Raises the error a kernel
        recorded (see error_code): the error word is read instead of a plain wait."""
        if self._errors_armed:
            self.read(self.errors, 0, 0)
            return
        self.flush()
        self.binding.wait()

    # ------------------------------------------------------------------ profiling

    def describe(self, records):
        """What each dispatch of `records` (e.g. a captured :class:`Graph`'s ``.records``) runs, for
        profilers: a :class:`Dispatch` per dispatch record, in order (copies are left out). Its kernel is
        None where the pipeline is no longer in the caches; params is None where the uniform is not."""
        pipelines = {id(p): key for key, p in self._pipelines.items()}
        bind_groups = {id(bg): key for key, bg in self._bind_groups.items()}
        params = {id(u): raw for raw, u in self._uniforms.items()}
        out = []
        for record in records:
            if record[0] != 0:
                continue
            kernel, constants = pipelines.get(id(record[1]), (None, ()))
            key = bind_groups.get(id(record[2]))
            raw = params.get(id(key[2])) if key is not None and key[2] is not None else None
            out.append(Dispatch(record, kernel, constants, raw, tuple(record[3:6])))
        return out

    # ------------------------------------------------------------------ capture / replay

    @property
    def capturing(self):
        """Whether a capture is recording."""
        return self._graph is not None

    @contextlib.contextmanager
    def outside_capture(self):
        """Inside a capture, work issued in the block runs once, in order, and is not recorded, and its
        storages come from the runtime's pool, not the graph's: state that outlives the step, made while the
        step is recorded (an optimizer's first moments, a loss scale), initialised once. The graph then uses
        those storages as it uses any made before the capture. Outside a capture it changes nothing."""
        graph, alloc = self._graph, self._alloc
        self._graph, self._alloc = None, self.pool
        try:
            yield
        finally:
            self._graph, self._alloc = graph, alloc

    @contextlib.contextmanager
    def capture(self, replacing=None, plannable=False):
        """Record the work issued inside the block into a :class:`Graph` (the work also runs).

        plannable: the step may be recorded again, planned (replay.py): the graph's scratches are then storages
        of its own, one per op (kept_scratch), which a plan can place, and the kept ones are given back first.
        replacing: a plannable graph recorded before of the same step, released here; where its plan_gain is
        not 0, this recording's buffers follow the plan made from it (memory_plan.py)."""
        if self._graph is not None:
            raise RuntimeError("runtime.capture() does not nest")
        plan = None
        if replacing is not None:
            if replacing.plan_gain:
                plan = replacing.better_plan
            replacing.release()
            plannable = True
        if plannable:
            self._kept_scratch.clear()
        graph = Graph(self, plan, plannable)
        self._graph, self._alloc = graph, graph.pool
        failed = True
        try:
            yield graph
            failed = False
        finally:
            self._graph, self._alloc = None, self.pool
            graph._seal(failed)

    def _replay(self, graph):
        if self._graph is not None:
            raise RuntimeError("a graph cannot be replayed while another capture is recording")
        if self._records:
            self._segments.append(self._records)
            self._records = []
        first, *rest = graph._parts
        self._segments.append(first)
        self._pending.update(graph.buffers)
        self._pending_slots.update(graph.slots)
        if graph.checks_errors:
            self._errors_armed = True
        self.stats["replays"] += 1
        self.stats["dispatches"] += graph._dispatch_count
        # Submitted at once, like a CUDA graph launch: the GPU starts this step while the host prepares
        # the next (writes its batch, encodes its replay). Left queued, a loop whose optimizer writes no
        # dynamic scalar (SGD) submitted nothing until the next read-back: the host encoded ten steps with
        # the GPU idle, then waited for all ten (H200, wide MLP: 1,780 us/step instead of ~1,330).
        self.flush()
        for part in rest:  # (see replay_parts)
            self._segments.append(part)
            self.flush()


# ---------------------------------------------------------------------------------------- default


_default_runtime = None
# In the browser, opening the device awaits two JS promises. While one caller waits (run_sync or await
# yields to the event loop), another coroutine can ask for the runtime too: the page's trainer loading
# its data while a console line runs, say. Each would open its own GPUDevice, and a tensor of one
# device handed to a kernel of the other is a WebGPU validation error. So the request in flight is
# shared: every caller waits on the same task, and the first to finish makes the one runtime.
_opening = None


def _browser_binding_task():
    global _opening
    if _opening is None:
        import asyncio

        from .browser import BrowserBinding

        _opening = asyncio.ensure_future(BrowserBinding.create_async())
    return _opening


def _adopt(task):
    """The runtime for the binding the shared task opened (made once, by whoever gets here first)."""
    global _default_runtime, _opening
    if _opening is task:
        _opening = None  # done (or failed: a later call tries again)
    binding = task.result()
    if _default_runtime is None or _default_runtime.binding is not binding:
        _default_runtime = Runtime(binding)
    return _default_runtime


def default_runtime():
    """The process-wide runtime, created on first use with the binding this platform has."""
    global _default_runtime
    if _default_runtime is None:
        if sys.platform == "emscripten":
            from pyodide.ffi import can_run_sync, run_sync

            from .browser import _NO_JSPI, _NO_WEBGPU, _navigator_gpu

            if _navigator_gpu() is None:
                raise RuntimeError(_NO_WEBGPU)
            if not can_run_sync():
                raise RuntimeError("WebGPU is available, but " + _NO_JSPI)
            task = _browser_binding_task()
            try:
                run_sync(task)
            except Exception:
                if not task.done():
                    raise  # run_sync itself failed; a failed request raises from _adopt instead
            return _adopt(task)
        from .native import NativeBinding

        _default_runtime = Runtime(NativeBinding())
    return _default_runtime


def reset_default_runtime():
    """Forget the process-wide runtime (its device was lost, say): the next use opens a new device."""
    global _default_runtime
    _default_runtime = None


async def default_runtime_async():
    """Like default_runtime, for a browser without JSPI (where the device must be awaited)."""
    global _default_runtime
    if _default_runtime is None:
        if sys.platform == "emscripten":
            task = _browser_binding_task()
            try:
                await task
            except Exception:
                if not task.done():
                    raise  # a failed request raises from _adopt instead
            return _adopt(task)
        from .native import NativeBinding

        _default_runtime = Runtime(NativeBinding())
    return _default_runtime
