"""Run one ATen FX graph (a forward or a backward graph from AOTAutograd) on a webgrad device.

Boundary: the graph's inputs and outputs are torch tensors on the CPU. Inputs are uploaded, except those
found in the :class:`Resident` cache (parameters, buffers, and the activations the forward graph saved for
the backward), which stay on the device between calls and steps. Outputs are read back into torch
tensors, so gradients come back as ordinary CPU tensors (what torch optimizers, gloo and DDP expect).

Fallback is per node: a node whose op has no entry in ``aten_table.ATEN`` (or whose arguments the entry
does not cover) runs in eager PyTorch on the CPU: its inputs are read back, torch runs it, and its results
are uploaded again. Why per node, not a graph break: Dynamo has already traced and AOTAutograd already
differentiated the whole graph; splitting it again would need a partitioner and would re-enter Python
between pieces anyway, while a per-node fallback keeps every mapped node on the device and is exactly
eager PyTorch's result for the unmapped ones. One warning per op, naming it.

On WebGPU a graph's second call is recorded with webgrad's capture (``backend.capture()``, as
``webgrad.replayable`` does) and later calls with the same input shapes replay it: the inputs are copied
into the recording's static tensors and the whole graph is issued in one call, with no Python per node.
A graph that needed a fallback node at its first call is never recorded (a read-back cannot be replayed).

Never a silent wrong result: each node's result is checked against the shape and dtype that tracing
recorded for it (``node.meta["val"]``); a mismatch is an error that names the node.
"""

import operator
import time
import warnings

import torch

import webgrad as wg
from webgrad import dtypes
from webgrad._tensor import Tensor
from webgrad._view import View

from .aten_table import ATEN, NEEDS_DEVICE, Unsupported, _DTYPES

_TORCH_DTYPES = {dtypes.float32: torch.float32, dtypes.float64: torch.float64, dtypes.int32: torch.int32,
                 dtypes.uint8: torch.uint8, dtypes.bool_: torch.bool}

_warned = set()


def _warn_once(op, why):
    if op not in _warned:
        _warned.add(op)
        warnings.warn(f"webgrad torch backend: {op} is not mapped to webgrad ({why}); it runs in eager PyTorch "
                      "on the CPU (per-node fallback)", stacklevel=2)


def upload(t, device):
    """A torch tensor as a webgrad Tensor on `device` (int64 becomes int32, webgrad's index dtype)."""
    dtype = _DTYPES.get(t.dtype)
    if dtype is None:
        raise Unsupported(f"dtype {t.dtype} has no webgrad equivalent")
    c = t.detach()
    if c.device.type != "cpu":
        c = c.cpu()
    if t.dtype is torch.int64:
        c = c.to(torch.int32)
    c = c.contiguous()
    be = device.backend
    shape = tuple(c.shape)
    data = c.reshape(-1).view(torch.uint8).numpy().tobytes() if c.numel() else b""
    storage = be.from_bytes(data, dtype) if data else be.empty(0, dtype)
    return Tensor._make(View(storage, shape, View.contiguous_strides(shape), 0, dtype), device)


def download(x, like=None):
    """A webgrad Tensor as a CPU torch tensor, cast to `like`'s dtype (int32 -> int64 where ATen had int64)."""
    raw = x.device.backend.to_bytes(x._view)
    out = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
    dtype = _TORCH_DTYPES[x.dtype]
    out = out.view(dtype).reshape(tuple(x.shape)) if raw else torch.empty(tuple(x.shape), dtype=dtype)
    if like is not None and like.dtype != out.dtype:
        out = out.to(like.dtype)
    return out


class Resident:
    """Device copies of torch tensors, reused while the torch memory is alive and unchanged.

    An entry is keyed by the tensor's address (data pointer, shape, strides, dtype) and holds a weak
    reference to its storage and the tensor's ``_version`` (bumped by every in-place write:
    ``optimizer.step()``, ``p.data.copy_``; aliases share it). While the storage lives its memory cannot
    be reused, so a live entry with the same address and version is the same data, whichever tensor
    object over it comes back (AOTAutograd hands saved activations and parameters back as fresh
    aliases). So parameters and buffers are uploaded once and again only after the optimizer changed
    them, and the activations the forward graph saved for the backward stay on the device.
    """

    def __init__(self, device, stats=None):
        from torch.multiprocessing.reductions import StorageWeakRef
        self._weak = StorageWeakRef
        self.device = device
        self._entries = {}  # address -> (storage weak reference, version, webgrad tensor)
        self._sweep_at = 64
        self.stats = stats if stats is not None else {}
        self.stats.setdefault("uploads", 0)
        self.stats.setdefault("hits", 0)

    @staticmethod
    def _address(t):
        return (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype) if t.numel() and t.device.type == "cpu" \
            else None

    def get(self, t):
        address = self._address(t)
        entry = self._entries.get(address) if address is not None else None
        if entry is not None:
            ref, version, x = entry
            if not ref.expired() and version == t._version:
                self.stats["hits"] += 1
                return x
        x = upload(t, self.device)
        self.stats["uploads"] += 1
        self.put(t, x)
        return x

    def drop(self, t):
        self._entries.pop(self._address(t), None)

    def put(self, t, x):
        address = self._address(t)
        if address is None:
            return
        self._entries[address] = (self._weak(t.untyped_storage()), t._version, x)
        if len(self._entries) >= self._sweep_at:  # forget the device copies of freed torch memory
            for key in [k for k, e in self._entries.items() if e[0].expired()]:
                del self._entries[key]
            self._sweep_at = max(64, 2 * len(self._entries))


class GraphExecutor:
    """Calls an ATen FX graph on webgrad: ``GraphExecutor(gm, device, resident)(*torch_inputs)``."""

    def __init__(self, gm, device, resident, fallback="eager", stats=None, replay=True):
        if fallback not in ("eager", "error"):
            raise ValueError(f"fallback must be 'eager' or 'error', got {fallback!r}")
        self.gm = gm
        self.device = device
        self.resident = resident
        self.fallback = fallback
        self.stats = stats if stats is not None else {"fallback": {}}
        self.nodes = list(gm.graph.nodes)
        self._timed = "time" in self.stats
        self.replay = replay
        self.calls = 0
        self._replay = None
        self._first_call_clean = False
        self._checked = "error" in self.stats

    def __call__(self, *args):
        with wg.no_grad():
            inputs = [self.resident.get(a) if isinstance(a, torch.Tensor) else a for a in args]
            if self._replay is not None and self._replay.matches(inputs):
                values = self._replay.run(inputs, self.resident)
            else:
                self.calls += 1
                values = None
                if self.calls == 2 and self.replay and self._capturable(inputs):
                    try:
                        self._replay = _Replay.record(self, inputs)
                        values = self._replay.outputs
                    except Exception as e:  # something in the graph cannot be recorded: run it node by node
                        self.replay = False
                        warnings.warn(f"webgrad torch backend: a graph could not be recorded for replay ({e}); "
                                      "it runs node by node", stacklevel=2)
                if values is None:
                    values = self._compute(inputs)
            # an output that is an input unchanged (AOTAutograd saves parameters for the backward this way)
            # goes back as that very torch tensor: no read-back, and its device copy stays found
            passthrough = {id(x): a for x, a in zip(inputs, args) if isinstance(a, torch.Tensor)}
            if self._replay is not None:
                passthrough.update({id(x): a for x, a in zip(self._replay.static, args) if isinstance(a, torch.Tensor)})
            return self._outputs(values, passthrough)

    def _capturable(self, inputs):
        """Replay needs a backend that records, tensors only as inputs, and a first call without fallback."""
        return hasattr(self.device.backend, "capture") and all(isinstance(x, Tensor) for x in inputs) and \
            self._first_call_clean

    def _compute(self, inputs):
        """Run every node on the device; the output node's values (webgrad Tensors or Python values)."""
        env = {}
        placeholders = iter(inputs)
        before = sum(self.stats["fallback"].values())
        for node in self.nodes:
            if node.op == "placeholder":
                env[node] = next(placeholders)
            elif node.op == "call_function":
                if self._timed:  # host time per op (the device may still be working: see parity.py)
                    start = time.perf_counter()
                    env[node] = self._run(node, env)
                    times = self.stats["time"]
                    times[str(node.target)] = times.get(str(node.target), 0.0) + time.perf_counter() - start
                else:
                    env[node] = self._run(node, env)
            elif node.op == "get_attr":
                env[node] = self.resident.get(getattr(self.gm, node.target))
            elif node.op == "output":
                if self.calls == 1:
                    self._first_call_clean = sum(self.stats["fallback"].values()) == before
                return _flat(_load(node.args[0], env))
            else:
                raise RuntimeError(f"webgrad torch backend: unexpected FX node kind {node.op!r} ({node.name})")

    def _outputs(self, values, passthrough):
        node = self.nodes[-1]
        results = []
        for value, arg in zip(values, _flat(node.args[0])):
            if id(value) in passthrough:
                results.append(passthrough[id(value)])
            elif isinstance(value, Tensor):
                t = download(value, arg.meta.get("val") if hasattr(arg, "meta") else None)
                # the tensor stays valid on the device: a backward graph that receives `t` reuses it
                self.resident.put(t, value)
                if self._replay is not None:
                    self._replay.handed_out.append(t)
                results.append(t)
            else:
                results.append(value)
        return tuple(results) if isinstance(node.args[0], (tuple, list)) else results[0]

    def _run(self, node, env):
        target = node.target
        if target is operator.getitem:
            seq, i = _load(node.args, env)
            return seq[i]
        args, kwargs = _load(node.args, env), _load(node.kwargs, env)
        fn = ATEN.get(target)
        name = str(target)
        if fn is not None:
            try:
                if target in NEEDS_DEVICE:
                    kwargs = dict(kwargs, target=self.device)
                out = fn(*args, **kwargs)
                _check(node, out)
                if self._checked:
                    self._compare(node, args, kwargs, out)
                return out
            except Unsupported as e:
                why = str(e)
        else:
            why = "no entry in webgrad.torch_backend.aten_table.ATEN"
        if self.fallback == "error":
            raise NotImplementedError(f"webgrad torch backend: {name} ({node.format_node()}): {why}")
        _warn_once(name, why)
        self.stats["fallback"][name] = self.stats["fallback"].get(name, 0) + 1
        return self._eager(node, args, kwargs)

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

    Inputs are copied into the recording's static input tensors (one small copy per input) and the
    whole graph is replayed with one call into the binding: no Python per node. The outputs live in the
    same storages at every replay, so the resident entries of the previous call's outputs are dropped
    before the next replay overwrites them (a torch tensor handed out earlier is then uploaded again if
    it comes back, never read stale).
    """

    def __init__(self, graph, static, outputs):
        self.graph, self.static, self.outputs = graph, static, outputs
        self.signature = _signature(static)
        self.handed_out = []

    @classmethod
    def record(cls, executor, inputs):
        backend = executor.device.backend
        static = [x.clone() for x in inputs]  # made before the capture: inputs of the graph, not its buffers
        with backend.capture() as graph:
            outputs = executor._compute(static)
        return cls(graph, static, outputs)

    def matches(self, inputs):
        return _signature(inputs) == self.signature

    def run(self, inputs, resident):
        for t in self.handed_out:
            resident.drop(t)
        self.handed_out = []
        backend = self.static[0].device.backend if self.static else None
        for static, x in zip(self.static, inputs):
            if x is not static:
                backend.copy(static._view, x._view)
        self.graph.replay()
        resident.stats["replays"] = resident.stats.get("replays", 0) + 1
        return self.outputs


def _signature(inputs):
    return [(tuple(x.shape), x.dtype) if isinstance(x, Tensor) else ("value", x) for x in inputs]


def _dense(meta):
    """Whether `meta`'s strides are a permutation of contiguous ones (no overlap, no gap)."""
    expected = 1
    for size, stride in sorted((d for d in zip(meta.shape, meta.stride()) if d[0] != 1), key=lambda d: d[1]):
        if stride != expected:
            return False
        expected *= size
    return True


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
