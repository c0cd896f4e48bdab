"""GPU memory: pooled buffers by size class, the pool a capture draws from (online and planned memory
planning), and the storages the backend hands the engine."""

import heapq
import itertools

from ...dtypes import float16, uint8
from .dispatch import pow2_at_least


def storage_nbytes(numel, dtype):
    """Bytes a storage of `numel` elements takes on the GPU (uint8 packs four to a word, float16 two)."""
    words = (numel + 3) // 4 if dtype is uint8 else (numel + 1) // 2 if dtype is float16 else numel
    return 4 * max(words, 1)



def size_class(nbytes):
    """The pooled buffer size for a request: 256 bytes, or the next of 1, 1.25, 1.5, 1.75 x 2**k
    (at most 25% waste, few distinct sizes so buffers are found again)."""
    if nbytes <= 256:
        return 256
    top = pow2_at_least(nbytes)
    quarter = top // 8  # steps of top/8 between top/2 and top
    return max(256, -(-nbytes // quarter) * quarter)


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

    def release(self, buffer, _push=heapq.heappush):
        # (heappush bound at definition: a Storage freed at interpreter exit, after the heapq global is torn down,
        # still returns its buffer instead of printing "Exception ignored in Storage.__del__")
        self.allocated -= buffer.size
        _push(self._free.setdefault(buffer.size, []), buffer)

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

class CapturePool:
    """The pool new storages use during a capture.

    Buffers taken during a capture belong to the graph until it is released: a replay writes into
    them again, so they must not be handed to anyone else meanwhile. Within the capture they are
    reused (in recorded order, which is safe: the GPU runs the records in order). Its buffers count
    in the parent pool's `reserved`, and in its `allocated` while a storage holds them.

    Memory planning, online: a recorded step's intermediates live in the graph's buffers for good, so each
    buffer the capture adds is held by every replay. A request therefore takes a free buffer of its size
    class before it makes one: first among those freed earlier in the capture, then among the pool's free
    ones (the eager warm-up step's). Of its class only (FIT_CLASSES = 1). Taking larger ones too, up to twice the
    request's class, made a graph that nothing replaced hold less (ResNet-18's recorded step at batch 128: 934.1
    MiB at its peak, the least of the bounds 1, 1.5, 2, 4 and none tried); but a storage that outlives the step
    then keeps the larger buffer: the gradients a first recording made took 77 MiB instead of 47, and those are
    alive while the step is recorded again, planned (below), whose peak was then 864.6 MiB instead of 842.4
    (lavapipe, GPU kernel variants). A first recording is either replaced by a planned one or holds within
    1/REPLAN_SHARE of what the plan would.

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

