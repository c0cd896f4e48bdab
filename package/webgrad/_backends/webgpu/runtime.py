"""The WebGPU runtime: the device, between the kernels and a binding, written once for both bindings.

The WebGPU backend's modules by job: ``dispatch.py`` (what a dispatch is made of: shaders, entry points,
grids, dynamic scalars), ``memory.py`` (buffer pools, the capture pool, storages), ``recording.py``
(captured graphs and their replay), this module (the device: caches, the command stream, read-backs,
errors), ``f16.py`` (float16 casts and policies), one module per kernel family, and the two bindings
``native.py`` and ``browser.py``.

What it does
------------
* **Memory.** GPU buffers come from a size-class pool (memory.BufferPool). A Storage (what the backend
  hands the engine) returns its buffer to the pool when it is garbage-collected, so a training loop that
  repeats the same step reuses the same buffers and allocates none.
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
  while the host prepares the next. See recording.Graph.
* **Device-side errors.** A kernel cannot raise. Kernels that read through an index (index.wgsl,
  softmax_loss.wgsl) or check a value (grad_norm.wgsl) never read out of bounds and, on a bad value, set
  the runtime's *error word* (:meth:`Runtime.error_code`): the first error wins. The word is copied out
  with the data of the next read-back (no extra sync), or read at :meth:`Runtime.synchronize`, and the
  error raised there, naming the op and the value, as CUDA reports a device-side assert at the next sync.
* **Dynamic scalars.** A value that changes every step (learning rate, step count, random offset)
  cannot live in a cached uniform, or a replay would reuse the old one. :meth:`Runtime.scalar` gives
  a dispatch.DynamicScalar: a slot in a GPU buffer that kernels read at run time and ``set()`` writes.

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
import struct
import sys

from ...dtypes import float32
from ...devices import OutOfMemoryError
from .dispatch import DynamicScalar, Launch, pow2_at_least
from .memory import BufferPool, PooledBuffer, Storage, storage_nbytes
from .recording import Graph

ERROR_WORD_BYTES = 16  # the error word as read back: code, value (i32), size, unused
ERROR_CODES_MAX = 1 << 20  # distinct error messages kept; beyond it one generic code
# Set in the code of an error reported to a callback rather than raised (error_code): such a report lets the
# read go on, so it skips no optimizer step (value_checks.wgsl's device_error_flag).
HANDLER_CODE = 1 << 31


Dispatch = collections.namedtuple("Dispatch", "record kernel constants params groups")
Dispatch.__doc__ = """One recorded dispatch, described (Runtime.describe): the record, its Kernel, the override
constants ((name, number), ...), the bytes of its uniform (or None) and its (x, y, z) workgroup counts."""


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
    "layer_norm_rows": (False, True),     # layer norm: a workgroup tree per row / a thread per row (and per
                                          # column for the parameter gradients)
    "attention_untiled": (False, True),   # fused attention: key / query tiles in workgroup memory / each
                                          # thread reads the rows itself (no barriers)
}


# Words of counters at the start of Runtime.tickets (the kernels' partials follow them).

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
        # Uploads staged behind work still to be submitted (write): free again once that work is submitted
        self._upload_pool = BufferPool(lambda size: self._create_buffer(size, "upload"))
        self._staged = []
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
        self._staged_scalars = {}  # slot -> the word a recorded copy writes into it (see _write_scalar)
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
            raise OutOfMemoryError(
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
                raise OutOfMemoryError(f"a {name} scratch of {nbytes} bytes is more than this GPU binds at once "
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
            # Work still to be submitted uses this buffer (the pool hands a buffer out again as soon as its
            # storage dies). A write to it now would land before that work runs: stage the data and record the
            # copy in order, instead of submitting everything so far (an eager step paid a submit for each such
            # upload, an arange in a loss's backward among them). The staging buffer is taken again only after
            # the submit that copies from it, which the queue orders before any later write to it.
            upload = self._upload_pool.acquire(nbytes)
            self.binding.write_buffer(upload.handle, 0, data)
            self._staged.append(upload)
            self._append((1, upload.handle, 0, storage.buffer.handle, byte_offset, nbytes), (storage,), ())
            return
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

    def read_into(self, storage, byte_offset, out):
        """Like read, the bytes from byte_offset written into writable buffer `out` (len(out) of them) instead
        of returned: a read-back that lands where the caller needs it (a DDP bucket's shared-memory slot)."""
        nbytes = memoryview(out).nbytes
        staging, total = self._stage_read(storage, byte_offset, nbytes)
        try:
            if hasattr(self.binding, "read_into"):
                tail = self.binding.read_into(staging.handle, total, out)
            else:
                data = self.binding.read(staging.handle, total)
                memoryview(out).cast("B")[:] = memoryview(data)[:nbytes]
                tail = bytes(data[nbytes:])
        finally:
            self._readback_pool.release(staging)
        self._check_errors(tail, 0)

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
                code = len(self._error_kinds)
                if not (isinstance(exception, type) and issubclass(exception, BaseException)):
                    code |= HANDLER_CODE
                self._error_codes[key] = code
        return code

    @property
    def errors_armed(self):
        """Whether work that may set the error word ran (or is recorded) since the word was last read: a kernel
        reading the word now (device_error_flag) may find an error the host has not raised yet."""
        return self._errors_armed

    def _check_errors(self, data, nbytes):
        """`data`'s first nbytes; raise the error in its trailing error word, if one is there and set."""
        if len(data) == nbytes:
            return data
        code, value, size, _ = struct.unpack_from("<IiII", data, nbytes)
        if code:
            self.clear_errors()
            kind, template = self._error_kinds[(code & ~HANDLER_CODE) - 1]
            message = template.format(value=value, size=size)
            if isinstance(kind, type) and issubclass(kind, BaseException):
                raise kind(message)
            kind(message)  # a handler (replayable's check_finite callback): called, and the read goes on
        if isinstance(data, bytearray):  # (dropped in place: a slice would copy a large read once more)
            del data[nbytes:]
            return data
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
            if self._graph is None:
                # Recorded work must still see the old value: the new one is staged and copied into the slot in
                # order, after that work, instead of submitting it first (an eager optimizer step that advances
                # its scalars had split every training step into two submits). The host's copy of the slot
                # keeps the old value until that submit: a cluster write at the flush (_write_scalars) puts
                # the old value, which the work before the copy reads.
                upload = self._upload_pool.acquire(4)
                self.binding.write_buffer(upload.handle, 0, word)
                self._staged.append(upload)
                # (the slot stays pending: a later write to it before the submit, by this scalar or by the next
                # one to take the slot, is staged after this copy, not written under it at the flush)
                self._staged_scalars[slot] = word  # (before _append, which may flush)
                self._append((1, upload.handle, 0, self.scalars.buffer.handle, 4 * slot, 4), (), (slot,))
                return
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
        for upload in self._staged:
            self._upload_pool.release(upload)
        self._staged.clear()
        for slot, word in self._staged_scalars.items():  # (what the submitted copies wrote)
            self._scalar_values[4 * slot:4 * slot + 4] = word
        self._staged_scalars.clear()
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
