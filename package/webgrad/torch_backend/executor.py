"""Run one ATen FX graph (a forward or a backward graph from AOTAutograd) on a webgrad device.

Boundary: the graph's inputs and outputs are torch tensors on the CPU. Inputs are uploaded, except those
found in the :class:`Resident` cache (parameters and buffers, which stay on the device between calls and
steps until the optimizer changes them) and the :class:`SavedOnDevice` handles of saved activations.

What comes back from a forward graph of a training step is of two kinds (AOTAutograd's metadata says
where the split lies): what the user sees (the outputs, and buffers mutated in place such as BatchNorm's
running statistics), read back into torch tensors, and what the forward saved for its backward, handed to
AOTAutograd as :class:`SavedOnDevice` handles that keep the data on the device: the backward graph takes
the device tensor straight from the handle, so activations are never read back nor uploaded again. All
the tensors a call reads back (the user's outputs, the backward's gradients) come back in one read per
dtype: packed into one device buffer, read once, split into torch tensors.

Fallback is per node: a node whose op has no entry in ``aten_table.ATEN`` (or whose arguments the entry
does not cover) runs in eager PyTorch on the CPU: its inputs are read back, torch runs it, and its results
are uploaded again. Why per node, not a graph break: Dynamo has already traced and AOTAutograd already
differentiated the whole graph; splitting it again would need a partitioner and would re-enter Python
between pieces anyway, while a per-node fallback keeps every mapped node on the device and is exactly
eager PyTorch's result for the unmapped ones. One warning per op, naming it.

On WebGPU a graph's second call is recorded with webgrad's capture (``backend.capture()``, as
``webgrad.replayable`` does) and later calls with the same input shapes replay it: the inputs are written
into the recording's static tensors and the whole graph, read-back packing included, is issued in one
call, with no Python per node. A graph that needed a fallback node at its first call is never recorded (a
read-back cannot be replayed).

Never a silent wrong result: each node's result is checked against the shape and dtype that tracing
recorded for it (``node.meta["val"]``); a mismatch is an error that names the node.
"""

import operator
import time
import warnings
import weakref

import torch

import webgrad as wg
from webgrad import dtypes
from webgrad._tensor import Tensor
from webgrad._view import View

from .aten_table import (ATEN, NEEDS_DEVICE, Unsupported, _DTYPES, batch_norm_in_place, nll_log_softmax_backward,
                         nll_of_log_softmax)
from .._backends import kernels

_TORCH_DTYPES = {dtypes.float32: torch.float32, dtypes.float64: torch.float64, dtypes.int64: torch.int64,
                 dtypes.int32: torch.int32, dtypes.uint8: torch.uint8, dtypes.bool_: torch.bool}

_warned = set()


def _on_device(a):
    """Whether `a` is a torch tensor on the webgpu device (webgrad.torch_device): its data is on the GPU already."""
    return isinstance(a, torch.Tensor) and a.device.type == "webgpu"


def _device_storage():
    from webgrad.torch_device import storage  # imported only where webgpu tensors exist, so it is registered
    return storage


def _warn_once(op, why):
    if op not in _warned:
        _warned.add(op)
        warnings.warn(f"webgrad torch backend: {op} is not mapped to webgrad ({why}); it runs in eager PyTorch "
                      "on the CPU (per-node fallback)", stacklevel=2)


def _host_bytes(t):
    """A torch tensor's elements in webgrad's canonical layout: a flat uint8 NumPy array, no copy where `t` is
    already a contiguous CPU tensor."""
    c = t.detach()
    if c.device.type != "cpu":
        c = c.cpu()
    return c.contiguous().reshape(-1).view(torch.uint8).numpy()


def upload(t, device):
    """A torch tensor as a webgrad Tensor on `device`."""
    dtype = _DTYPES.get(t.dtype)
    if dtype is None:
        raise Unsupported(f"dtype {t.dtype} has no webgrad equivalent")
    be = device.backend
    shape = tuple(t.shape)
    data = _host_bytes(t) if t.numel() else None
    storage = be.from_bytes(data, dtype) if data is not None else be.empty(0, dtype)
    return Tensor._make(View(storage, shape, View.contiguous_strides(shape), 0, dtype), device)


def _to_torch(raw, dtype, shape, like=None):
    """Canonical bytes (bytes, bytearray or a uint8 torch tensor) as a CPU torch tensor of `shape`, cast to
    `like`'s dtype where ATen had another (int32 -> int64)."""
    if not isinstance(raw, torch.Tensor):
        raw = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if len(raw) else torch.empty(0, dtype=torch.uint8)
    out = raw.view(_TORCH_DTYPES[dtype]).reshape(shape) if raw.numel() else \
        torch.empty(shape, dtype=_TORCH_DTYPES[dtype])
    if like is not None and like.dtype != out.dtype:
        out = out.to(like.dtype)
    return out


def download(x, like=None):
    """A webgrad Tensor as a CPU torch tensor, cast to `like`'s dtype (int32 -> int64 where ATen had int64)."""
    return _to_torch(x.device.backend.to_bytes(x._view), x.dtype, tuple(x.shape), like)


class SavedOnDevice(torch.Tensor):
    """A tensor a forward graph saved for its backward, whose data stays on the webgrad device.

    AOTAutograd stores what the forward returns past the user's outputs (``ctx.save_for_backward``) and
    hands it to the compiled backward; nothing else reads it. So instead of reading each activation back
    into torch and uploading it again in the backward, the forward returns this handle: a torch tensor
    with the activation's shape and dtype and no data, carrying the device tensor. The backward graph
    takes the device tensor from it. Any other use (a torch op, printing, ``.numpy()``, a
    saved-tensor hook that copies it) raises a RuntimeError that says so, never a silent wrong value.

    The handle is valid for the backward of the call that made it: when a replayed forward is about to
    overwrite the memory a live handle points into (two forwards before one backward), the executor first
    moves the handle's data into memory of its own (:meth:`GraphExecutor._preserve`).
    """

    @staticmethod
    def __new__(cls, value, like=None):
        dtype = like.dtype if isinstance(like, torch.Tensor) else _TORCH_DTYPES[value.dtype]
        handle = torch.Tensor._make_wrapper_subclass(cls, tuple(value.shape), dtype=dtype, device="cpu")
        handle.value = value
        return handle

    __torch_function__ = torch._C._disabled_torch_function_impl  # straight to __torch_dispatch__

    def __init__(self, value, like=None):
        pass  # all made in __new__

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func in (torch.ops.aten.detach.default, torch.ops.aten.alias.default):
            return SavedOnDevice(args[0].value, args[0])  # autograd's own bookkeeping: the same data
        raise RuntimeError(
            f"webgrad torch backend: {func} on an activation that a compiled forward graph saved for its "
            "backward. Its data stays on the webgrad device and only that backward graph may read it; no "
            "torch copy exists. To have saved activations read back into torch tensors (e.g. for a "
            "saved-tensor hook), compile with options={'saved': 'torch'}.")

    def __repr__(self):
        return f"SavedOnDevice(shape={tuple(self.shape)}, dtype={self.dtype}, on webgrad {self.value.device})"


class Resident:
    """Device copies of torch tensors, reused while the torch memory is alive and unchanged.

    An entry is keyed by the tensor's address (data pointer, shape, strides, dtype) and holds a weak
    reference to its storage and the tensor's ``_version`` (bumped by every in-place write:
    ``optimizer.step()``, ``p.data.copy_``; aliases share it). While the storage lives its memory cannot
    be reused, so a live entry with the same address and version is the same data, whichever tensor
    object over it comes back (AOTAutograd hands parameters back as fresh aliases). So parameters and
    buffers are uploaded once and again only after the optimizer changed them.

    The weak reference is Python's own (``weakref.ref`` to the storage object, which torch keeps as
    long as the storage lives), not torch's ``StorageWeakRef``: that one frees its handle in ``__del__``,
    which prints AttributeErrors when entries die during interpreter shutdown.
    """

    _all = weakref.WeakSet()  # every Resident (one per compiled frame): see forget_storage

    def __init__(self, device, stats=None):
        Resident._all.add(self)
        self.device = device
        self._entries = {}  # address -> (storage weak reference, version, webgrad tensor)
        self._holders = {}  # id(webgrad tensor) -> address, for entries whose device tensor a replay rewrites
        self._sweep_at = 64
        self.stats = stats if stats is not None else {}
        self.stats.setdefault("uploads", 0)
        self.stats.setdefault("hits", 0)

    @staticmethod
    def _address(t):
        return (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype) if t.numel() and t.device.type == "cpu" \
            else None

    def find(self, t):
        """The device copy of `t` if one is valid, else None."""
        address = self._address(t)
        entry = self._entries.get(address) if address is not None else None
        if entry is not None:
            ref, version, x = entry
            if ref() is not None and version == t._version:
                self.stats["hits"] += 1
                return x
        return None

    def get(self, t):
        x = self.find(t)
        if x is None:
            x = upload(t, self.device)
            self.stats["uploads"] += 1
            self.put(t, x)
        return x

    @classmethod
    def forget_storage(cls, storage):
        """Host memory about to be rewritten in place: every Resident forgets the copies it holds of
        tensors over it."""
        for resident in list(cls._all):
            entries = resident._entries
            for key in [k for k, e in entries.items() if e[0]() is storage]:
                del entries[key]

    def drop(self, address):
        self._entries.pop(address, None)

    def forget(self, x):
        """`x`'s memory is about to be rewritten: the entry that names it as some tensor's copy goes."""
        address = self._holders.pop(id(x), None)
        if address is not None:
            entry = self._entries.get(address)
            if entry is not None and entry[2] is x:
                del self._entries[address]

    def put(self, t, x, rewritten=False):
        """Remember `x` as `t`'s device copy; `rewritten`: a replay's static input, see :meth:`forget`."""
        address = self._address(t)
        if address is None:
            return
        self._entries[address] = (weakref.ref(t.untyped_storage()), t._version, x)
        if rewritten:
            self._holders[id(x)] = address
        if len(self._entries) >= self._sweep_at:  # forget the device copies of freed torch memory
            for key in [k for k, e in self._entries.items() if e[0]() is None]:
                del self._entries[key]
            self._sweep_at = max(64, 2 * len(self._entries))


class GraphExecutor:
    """Calls an ATen FX graph on webgrad: ``GraphExecutor(gm, device, resident)(*torch_inputs)``.

    user_outputs: how many of the graph's outputs the user sees (a training forward graph: AOTAutograd's
    ``num_forward_returns``); the others are saved for the backward and stay on the device as
    :class:`SavedOnDevice` handles. None: every output is read back.
    """

    def __init__(self, gm, device, resident, fallback="eager", stats=None, replay=True, user_outputs=None):
        if fallback not in ("eager", "error"):
            raise ValueError(f"fallback must be 'eager' or 'error', got {fallback!r}")
        self.gm = gm
        self.device = device
        self.resident = resident
        self.fallback = fallback
        self.stats = stats if stats is not None else {"fallback": {}}
        self.nodes = list(gm.graph.nodes)
        self._overrides = _pair(self.nodes)
        # inputs on the webgpu device that batch norm updates in place (its running statistics): see
        # _in_place_batch_norm
        self.written = _in_place_batch_norm(self.nodes, self._overrides)
        out = self.nodes[-1].args[0]
        self._tuple_out = isinstance(out, (tuple, list))
        self._out_args = _flat(out)
        self._out_metas = [a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in self._out_args]
        # outputs that are such a statistic's new value: handed back as a new tensor over the input's memory
        # (AOTAutograd copies it into the buffer, a copy onto itself), not as the input tensor itself
        self._written_outputs = {i for i, a in enumerate(self._out_args) if isinstance(a, torch.fx.Node) and
                                 a.op == "call_function" and a.target is operator.getitem and
                                 self._overrides.get(a.args[0]) is batch_norm_in_place and a.args[1] in (3, 4)}
        # outputs that tracing put on the webgpu device stay there: handed out as webgpu tensors, never read back
        self._out_device = [isinstance(m, torch.Tensor) and m.device.type == "webgpu" for m in self._out_metas]
        self._handed = []  # weak references to the torch storages of webgpu outputs that live in the recording
        self.user_outputs = len(self._out_args) if user_outputs is None else user_outputs
        self._timed = "time" in self.stats
        self.replay = replay and device.backend.supports_capture
        self._pack = device.type == "webgpu"  # one read-back per dtype; on the CPU a read is a copy anyway
        self.calls = 0
        self._replay = None
        self._first_call_clean = False
        self._checked = "error" in self.stats
        self._handles = []  # weak references to the SavedOnDevice handles of the last replayed or recorded call
        self._hosts = {}  # read slot -> (host buffer, its storage's use count with no tensor handed out)

    def __call__(self, *args):
        with wg.no_grad():
            if self.device.backend.capturing:
                # a whole step being recorded around this call (webgrad.torch_device.replayable): the nodes
                # run, and are recorded, as part of it; a capture does not nest, nor replay inside another
                inputs = [self._input(a) for a in args]
                passthrough = {id(x): a for x, a in zip(inputs, args) if isinstance(a, torch.Tensor)}
                values = self._compute(inputs)
                replay, self._replay = self._replay, None
                try:
                    return self._outputs(values, self._plan_reads(values, passthrough), passthrough)
                finally:
                    self._replay = replay
            if self._replay is not None and self._replay.matches(args):
                self._preserve()
                values, reads = self._replay.run(args, self.resident)
                passthrough = {id(x): a for x, a in zip(self._replay.static, args) if isinstance(a, torch.Tensor)}
            else:
                inputs = [self._input(a) for a in args]
                self.calls += 1
                values = None
                if self.calls == 2 and self.replay and self._capturable(inputs):
                    try:
                        self._replay = _Replay.record(self, inputs, args)
                        values, reads = self._replay.outputs, self._replay.reads
                        if self._replay.graph.read_backs:  # (this call's values are right: it ran)
                            self._replay.graph.release()
                            self._replay, self.replay = None, False
                            warnings.warn("webgrad torch backend: a graph read values back from the GPU while it "
                                          "was recorded, which a replay would not redo; it runs node by node",
                                          stacklevel=2)
                    except Exception as e:  # something in the graph cannot be recorded: run it node by node
                        self.replay = False
                        warnings.warn(f"webgrad torch backend: a graph could not be recorded for replay ({e}); "
                                      "it runs node by node", stacklevel=2)
                passthrough = {id(x): a for x, a in zip(inputs, args) if isinstance(a, torch.Tensor)}
                if values is None:
                    values = self._compute(inputs)
                    reads = self._plan_reads(values, passthrough)
            return self._outputs(values, reads, passthrough)

    def _input(self, a):
        if _on_device(a):
            return _device_storage().unwrap(a)
        if isinstance(a, SavedOnDevice):
            if a.value.device != self.device:
                raise RuntimeError(f"webgrad torch backend: a saved activation on {a.value.device} reached a "
                                   f"graph compiled for {self.device}")
            return a.value
        return self.resident.get(a) if isinstance(a, torch.Tensor) else a

    def _capturable(self, inputs):
        """Replay needs tensors only as inputs and a first call without fallback."""
        return all(isinstance(x, Tensor) for x in inputs) and self._first_call_clean

    def _preserve(self):
        """A replay rewrites the memory of the previous replay's outputs: the handles of saved activations
        still alive from it (their backward has not run yet) get copies of their data first."""
        for ref in self._handles:
            handle = ref()
            if handle is not None:
                handle.value = handle.value.clone()
                self.stats["preserved"] = self.stats.get("preserved", 0) + 1
        self._handles = []
        for ref in self._handed:  # webgpu outputs still held: their data moves to memory of their own
            held = ref()
            if held is not None:
                _device_storage().preserve(held)
                self.stats["preserved"] = self.stats.get("preserved", 0) + 1
        self._handed = []

    # ------------------------------------------------------------------ node by node

    def _compute(self, inputs):
        """Run every node on the device; the output node's values (webgrad Tensors or Python values)."""
        env = {}
        placeholders = iter(inputs)
        before = sum(self.stats["fallback"].values())
        run, timed = self._run, self._timed
        for node in self.nodes:
            op = node.op
            if op == "call_function":
                if timed:  # host time per op (the device may still be working: see parity.py)
                    start = time.perf_counter()
                    env[node] = run(node, env)
                    times = self.stats["time"]
                    times[str(node.target)] = times.get(str(node.target), 0.0) + time.perf_counter() - start
                else:
                    env[node] = run(node, env)
            elif op == "placeholder":
                env[node] = next(placeholders)
            elif op == "get_attr":
                env[node] = self.resident.get(getattr(self.gm, node.target))
            elif op == "output":
                if self.calls == 1:
                    self._first_call_clean = sum(self.stats["fallback"].values()) == before
                return _flat(_load(node.args[0], env))
            else:
                raise RuntimeError(f"webgrad torch backend: unexpected FX node kind {op!r} ({node.name})")

    def _run(self, node, env):
        target = node.target
        if target is operator.getitem:
            seq, i = node.args
            return env[seq][i]
        args, kwargs = _load(node.args, env), _load(node.kwargs, env)
        fn = self._overrides.get(node) or ATEN.get(target)
        if fn is not None:
            try:
                if target in NEEDS_DEVICE:
                    kwargs = dict(kwargs, target=self.device)
                out = _conform(node, fn(*args, **kwargs))
                _check(node, out)
                if self._checked:
                    self._compare(node, args, kwargs, out)
                return out
            except Unsupported as e:
                why = str(e)
        else:
            why = "no entry in webgrad.torch_backend.aten_table.ATEN"
        name = str(target)
        if self.fallback == "error":
            raise NotImplementedError(f"webgrad torch backend: {name} ({node.format_node()}): {why}")
        _warn_once(name, why)
        self.stats["fallback"][name] = self.stats["fallback"].get(name, 0) + 1
        return self._eager(node, args, kwargs)

    # ------------------------------------------------------------------ outputs

    def _plan_reads(self, values, passthrough):
        """Which outputs to read back, packed: a list of (device tensor to read, [(output index, element
        offset, numel)]) per dtype. A forward's saved activations and outputs that are inputs unchanged
        are not read. On WebGPU the tensors of a dtype are copied into one buffer (inside the recording
        when there is one), so a call reads back once per dtype, not once per tensor."""
        groups, seen = {}, set()
        for i, value in enumerate(values):
            if isinstance(value, Tensor) and id(value) not in passthrough and id(value) not in seen and \
                    i < self.user_outputs and not self._out_device[i]:
                seen.add(id(value))
                groups.setdefault(value.dtype, []).append(i)
        reads = []
        for dtype, idx in groups.items():
            if not self._pack or len(idx) == 1 or dtype.itemsize != 4:
                reads.extend((values[i], [(i, 0, values[i].numel())]) for i in idx)
                continue
            be = self.device.backend
            total = sum(values[i].numel() for i in idx)
            packed = be.empty(total, dtype)
            parts, offset = [], 0
            for i in idx:
                x = values[i]
                n = x.numel()
                if n:
                    shape = tuple(x.shape)
                    kernels.copy(be, View(packed, shape, View.contiguous_strides(shape), offset, dtype), x._view)
                parts.append((i, offset, n))
                offset += n
            reads.append((Tensor._make(View(packed, (total,), (1,), 0, dtype), self.device), parts))
        return reads

    def _outputs(self, values, reads, passthrough):
        results = [None] * len(values)
        by_value = {}
        self.stats["reads"] = self.stats.get("reads", 0) + len(reads)
        for k, (x, parts) in enumerate(reads):
            flat = self._host(k, self.device.backend.to_bytes(x._view))
            size = x.dtype.itemsize
            for i, offset, n in parts:
                value = values[i]
                part = flat if len(parts) == 1 else flat[offset * size:(offset + n) * size]
                t = _to_torch(part, value.dtype, tuple(value.shape), self._out_metas[i])
                # the tensor stays valid on the device: a later graph that receives `t` reuses it
                self.resident.put(t, value)
                if self._replay is not None:  # its address, not `t`: a reference would stop autograd from
                    self._replay.handed_out.append(Resident._address(t))  # taking a gradient as .grad uncopied
                results[i] = by_value[id(value)] = t
        handles = self._handles if self._replay is not None else None
        for i, value in enumerate(values):
            if results[i] is not None:
                continue
            if not isinstance(value, Tensor):
                results[i] = value
            elif id(value) in passthrough and not (self.written and self._out_device[i] and
                                                   i in self._written_outputs):
                # an input unchanged (AOTAutograd saves parameters for the backward this way) goes back as
                # that very torch tensor: no read-back, and its device copy stays found
                results[i] = passthrough[id(value)]
            elif id(value) in by_value:  # saved for the backward and also seen by the user
                results[i] = by_value[id(value)]
            elif self._out_device[i]:  # a webgpu tensor over the device memory: no read-back
                results[i] = by_value[id(value)] = t = _device_storage().wrap(value, self._out_metas[i].dtype)
                # the next replay rewrites this memory (see _preserve), unless it is a parameter's, read in place
                if self._replay is not None and id(value._view.storage) not in self._replay.read_in_place:
                    self._handed.append(weakref.ref(t.untyped_storage()))
            else:
                results[i] = handle = SavedOnDevice(value, self._out_metas[i])
                if handles is not None:
                    handles.append(weakref.ref(handle))
        return tuple(results) if self._tuple_out else results[0]

    def _host(self, key, raw):
        """`raw` in a torch uint8 tensor: the one this read slot used last time when no tensor handed out
        from it is alive any more (the usual loop: the gradients of step k are gone, zero_grad set them to
        None, before the backward of step k + 1), else a new one. Fresh host memory of a ResNet's
        gradients costs more in page faults than the copy itself (tens of ms for 45 MB)."""
        held = self._hosts.get(key)
        if held is not None and held[1] >= 0 and held[0].numel() == len(raw) and _use_count(held[0]) == held[1]:
            buf = held[0]
            # device copies recorded for tensors over this memory are stale now. Version counters cannot
            # say so: AOTAutograd hands an output on as an _unsafe_view, a tensor over the same memory
            # with a counter of its own, and another graph's Resident keeps a copy under that one
            Resident.forget_storage(buf.untyped_storage())
        else:
            buf = torch.empty(len(raw), dtype=torch.uint8)
            self._hosts[key] = (buf, _use_count(buf))
        if len(raw):
            memoryview(buf.numpy())[:] = raw
        return buf

    # ------------------------------------------------------------------ eager PyTorch for one node

    def _compare(self, node, args, kwargs, out):
        """Debugging aid (stats with an "error" key): run the node in eager PyTorch as well and record the
        largest absolute difference per op: where a model's mismatch comes from."""
        kwargs = {k: v for k, v in kwargs.items() if k != "target"}
        want = self._eager(node, args, kwargs, upload_results=False)
        worst = 0.0
        for got, ref in zip(_flat(out), _flat(want)):
            if isinstance(got, Tensor) and isinstance(ref, torch.Tensor) and ref.numel():
                diff = (download(got, ref).double() - ref.double()).abs().max().item()
                worst = max(worst, diff)
        name = str(node.target)
        errors = self.stats["error"]
        if worst >= errors.get(name, (0.0, ""))[0]:
            errors[name] = (worst, node.name)

    def _eager(self, node, args, kwargs, upload_results=True):
        """Run the node in eager PyTorch on CPU copies of its inputs, and upload its results."""
        metas = {id(v): m for v, m in zip(_flat(args) + _flat(list(kwargs.values())),
                                          _flat(_meta(node.args)) + _flat(_meta(list(node.kwargs.values()))))}

        def to_torch(v):
            if not isinstance(v, Tensor):
                return v
            meta = metas.get(id(v))
            t = download(v, meta)
            # give it the strides tracing saw: some kernels (flash attention's backward) rely on them
            if isinstance(meta, torch.Tensor) and t.stride() != meta.stride() and t.numel() and \
                    _dense(meta):
                t = torch.empty_strided(t.shape, meta.stride(), dtype=t.dtype).copy_(t)
            return t
        targs = _map(args, to_torch)
        tkwargs = {k: _map(v, to_torch) for k, v in kwargs.items()}
        out = node.target(*targs, **tkwargs)
        if not upload_results:
            return out
        return _map(out, lambda t: upload(t, self.device) if isinstance(t, torch.Tensor) else t)


class _Replay:
    """A graph's device work recorded once (the executor's second call) and re-issued per call.

    New data reaches the recording's static input tensors by one write (torch data) or one device copy
    (a resident parameter, a saved activation) each, and the whole graph, with the packing of its
    read-back, is replayed with one call into the binding: no Python per node. The outputs live in the
    same storages at every replay, so the resident entries of the previous call's outputs are dropped
    before the next replay overwrites them (a torch tensor handed out earlier is then uploaded again if
    it comes back, never read stale), and saved-activation handles still alive are preserved
    (:meth:`GraphExecutor._preserve`).
    """

    def __init__(self, graph, static, outputs, reads, signature, args, written=()):
        self.graph, self.static, self.outputs, self.reads = graph, static, outputs, reads
        self.signature = signature
        self.handed_out = []
        # inputs used where they lie (parameters, and running statistics updated in place): a call must pass
        # the same memory
        self.in_place = [i for i, (x, a) in enumerate(zip(static, args)) if _on_device(a) and
                         (isinstance(a, torch.nn.Parameter) or i in written) and
                         x._view.storage is _device_storage().storage_of(a)]
        self.read_in_place = {id(static[i]._view.storage) for i in self.in_place}

    @classmethod
    def record(cls, executor, inputs, args):
        backend = executor.device.backend
        # made before the capture: inputs of the graph, not its buffers. A parameter on the webgpu device is
        # read where it lies (the graphs never write their inputs; an optimizer updates it in place)
        static = [x if _on_device(a) and (isinstance(a, torch.nn.Parameter) or i in executor.written) else x.clone()
                  for i, (x, a) in enumerate(zip(inputs, args))]
        passthrough = {id(x): a for x, a in zip(static, args) if isinstance(a, torch.Tensor)}
        with backend.capture() as graph:
            outputs = executor._compute(static)
            reads = executor._plan_reads(outputs, passthrough)
        return cls(graph, static, outputs, reads, _signature(args), args, executor.written)

    def matches(self, args):
        if _signature(args) != self.signature:
            return False
        for i in self.in_place:
            a, x = args[i], self.static[i]
            if _device_storage().storage_of(a) is not x._view.storage or a.stride() != x._view.strides or \
                    a.storage_offset() != x._view.offset:
                return False
        return True

    def run(self, args, resident):
        for address in self.handed_out:
            resident.drop(address)
        self.handed_out = []
        backend = self.static[0].device.backend if self.static else None
        for static, a in zip(self.static, args):
            if not isinstance(a, torch.Tensor):
                continue  # a Python value: equal to the recorded one (the signature says so)
            if _on_device(a):  # a device copy into the static input, unless it is that memory already
                x = _device_storage().unwrap(a)
                if x._view.storage is not static._view.storage or x._view.strides != static._view.strides or \
                        x._view.offset != static._view.offset:
                    kernels.copy(backend, static._view, x._view)
                continue
            x = a.value if isinstance(a, SavedOnDevice) else resident.find(a)
            if x is static:
                continue
            resident.forget(static)
            if x is not None:
                kernels.copy(backend, static._view, x._view)
            elif static.dtype is dtypes.bool_ or not a.numel():  # no in-place write for bools: upload, copy
                kernels.copy(backend, static._view, upload(a, static.device)._view)
                resident.stats["uploads"] += 1
            else:  # torch data straight into the static tensor: no new device memory, no copy
                backend.write(static._view.storage, _host_bytes(a))
                resident.stats["uploads"] += 1
                resident.put(a, static, rewritten=True)  # the other graphs of the step find it here
        self.graph.replay()
        resident.stats["replays"] = resident.stats.get("replays", 0) + 1
        return self.outputs, self.reads


def _signature(args):
    return [(tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else ("value", a) for a in args]


def _use_count(t):
    """How many tensors (and storage objects) hold `t`'s storage; -1 where torch does not say (then a host
    buffer is never reused)."""
    count = getattr(torch._C, "_storage_Use_Count", None)
    return count(t.untyped_storage()._cdata) if count is not None else -1


def _dense(meta):
    """Whether `meta`'s strides are a permutation of contiguous ones (no overlap, no gap)."""
    expected = 1
    for size, stride in sorted((d for d in zip(meta.shape, meta.stride()) if d[0] != 1), key=lambda d: d[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def _pair(nodes):
    """Pairs of nodes that one kernel computes together: {node: what runs instead of its table entry}.
    nll_loss_backward feeding _log_softmax_backward_data (a cross-entropy's backward) is one
    cross-entropy-backward kernel when both read the same log-probabilities; the second node then passes its
    input on. AOTAutograd may hand the two nodes the log-probabilities as two saved tensors, so the sameness is
    checked when the nodes run (the same memory); where it fails the pair runs as two ops. In the forward, an
    nll_loss_forward of what _log_softmax made (a cross-entropy's forward) is one cross-entropy kernel."""
    aten = torch.ops.aten
    overrides = {}
    for node in nodes:
        if node.op == "call_function" and node.target is aten.nll_loss_forward.default and \
                isinstance(node.args[0], torch.fx.Node) and node.args[0].target is aten._log_softmax.default:
            overrides[node] = nll_of_log_softmax
        if node.op != "call_function" or node.target is not aten._log_softmax_backward_data.default:
            continue
        g, logp, dim = node.args[:3]
        if not isinstance(g, torch.fx.Node) or g.target is not aten.nll_loss_backward.default or len(g.users) != 1:
            continue
        metas = [n.meta.get("val") if isinstance(n, torch.fx.Node) else None for n in (g.args[1], logp)]
        if g.args[3] is not None or dim not in (1, -1) or not all(
                isinstance(m, torch.Tensor) and m.dim() == 2 and m.dtype is torch.float32 for m in metas):
            continue
        seen = {}

        def first(*args, seen=seen):
            seen["args"] = args
            return nll_log_softmax_backward(*args)

        def second(grad, y, dim, dtype, seen=seen):
            args = seen.pop("args")
            logp = args[1]
            if y._view.storage is logp._view.storage and y._view.strides == logp._view.strides and \
                    y._view.offset == logp._view.offset:
                return grad  # the pair's kernel computed the logits' gradient already
            return ATEN[aten._log_softmax_backward_data.default](
                ATEN[aten.nll_loss_backward.default](*args), y, dim, dtype)
        overrides[g], overrides[node] = first, second
    return overrides


def _in_place_batch_norm(nodes, overrides):
    """Training batch norms of a graph on webgpu tensors whose running statistics are graph inputs: the kernel
    updates those inputs in place and the node hands them back as its new statistics, so AOTAutograd's copy of
    the new values into the buffers copies a tensor onto itself (nothing: see torch_device's copy_), where the
    functional form would make new statistics and copy them back (two copies each per step). Returns the
    indices of the placeholders written (a replay must then be given the same memory for them)."""
    aten = torch.ops.aten
    placeholders = [n for n in nodes if n.op == "placeholder"]
    index = {n: i for i, n in enumerate(placeholders)}
    written = set()
    for node in nodes:
        if node.op != "call_function" or node.target is not aten._native_batch_norm_legit_functional.default:
            continue
        stats = node.args[3:5]
        training = node.args[5]
        metas = [n.meta.get("val") if isinstance(n, torch.fx.Node) else None for n in stats]
        if training is not True or not all(n in index for n in stats) or not all(
                isinstance(m, torch.Tensor) and m.device.type == "webgpu" for m in metas):
            continue
        overrides[node] = batch_norm_in_place
        written.update(index[n] for n in stats)
    return written


def _unaliased(node):
    """The node an alias or detach chain starts from (AOTAutograd saves a tensor and hands aliases of it on)."""
    aten = torch.ops.aten
    while isinstance(node, torch.fx.Node) and node.op == "call_function" and \
            node.target in (aten.alias.default, aten.detach.default):
        node = node.args[0]
    return node


_INTS = (dtypes.int32, dtypes.int64)


def _conform(node, out):
    """An integer result in the integer dtype tracing recorded (int32 and int64 index the same on webgrad; ATen
    says which one the next op and the caller see)."""
    val = node.meta.get("val")
    if isinstance(out, Tensor):
        want = _DTYPES.get(val.dtype) if isinstance(val, torch.Tensor) else None
        return out.to(dtype=want) if want is not None and want is not out.dtype and out.dtype in _INTS and \
            want in _INTS else out
    if isinstance(out, (tuple, list)) and isinstance(val, (tuple, list)):
        fixed = []
        for o, v in zip(out, val):
            want = _DTYPES.get(v.dtype) if isinstance(v, torch.Tensor) else None
            fixed.append(o.to(dtype=want) if isinstance(o, Tensor) and want is not None and want is not o.dtype
                         and o.dtype in _INTS and want in _INTS else o)
        return type(out)(fixed) if len(fixed) == len(out) else out
    return out


def _check(node, out):
    """The result's shape and dtype must be the ones tracing recorded (never a silent wrong result)."""
    val = node.meta.get("val")
    for got, want in zip(_flat(out), _flat(val)):
        if isinstance(want, torch.Tensor) and got is not None:
            if not isinstance(got, Tensor) or tuple(got.shape) != tuple(want.shape) or \
                    got.dtype is not _DTYPES.get(want.dtype):
                raise RuntimeError(f"webgrad torch backend: {node.target} gave "
                                   f"{tuple(got.shape) if isinstance(got, Tensor) else type(got).__name__} "
                                   f"{getattr(got, 'dtype', '')} where tracing expects {tuple(want.shape)} "
                                   f"{want.dtype} (node {node.name}); this is a bug in its ATen mapping")


def _load(a, env):
    if isinstance(a, torch.fx.Node):
        return env[a]
    if isinstance(a, (tuple, list)):
        return type(a)(_load(x, env) for x in a)
    if isinstance(a, dict):
        return {k: _load(v, env) for k, v in a.items()}
    return a


def _meta(a):
    if isinstance(a, torch.fx.Node):
        return a.meta.get("val")
    if isinstance(a, (tuple, list)):
        return [_meta(x) for x in a]
    return None


def _flat(a):
    if isinstance(a, (tuple, list)):
        return [y for x in a for y in _flat(x)]
    return [a]


def _map(a, fn):
    if isinstance(a, (tuple, list)):
        return type(a)(_map(x, fn) for x in a)
    return fn(a)
