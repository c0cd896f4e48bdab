"""The browser binding: WebGPU through ``navigator.gpu`` and Pyodide's JS FFI (in a page or a Worker).

Implements the binding interface described in runtime.py. Two rules shape it:

* FFI calls cost microseconds each, so recorded work crosses into JavaScript once per submit: a JS
  array of records goes to ``encode.js``'s ``submit``, which does all the encoding; a captured graph is
  converted to a JS array once and replayed with the same single call.
* Python cannot wait for a JS promise unless Pyodide has JSPI (``pyodide.ffi.can_run_sync()``, true
  inside ``runPythonAsync`` in Chromium). Then device creation and read-back block with ``run_sync``;
  without it, ``create_async`` and ``read_async`` are the way (``await webgrad.webgpu.init_async()``,
  ``await tensor.numpy_async()``).

Validation errors in the browser arrive asynchronously: the binding collects them (encode.js ``watch``)
and raises them at the next submit or read-back; shader modules and pipelines are checked when made.
"""

import os

_NO_WEBGPU = (
    "WebGPU is not available in this browser (navigator.gpu is missing): use Chrome or Edge 113+, or start "
    "Chromium with --enable-unsafe-webgpu; the page must be served from https:// or http://localhost "
    "(WebGPU needs a secure context)."
)
_NO_JSPI = (
    "this Pyodide cannot block on JavaScript promises (pyodide.ffi.can_run_sync() is False: no JSPI, or "
    "Python was not entered through runPythonAsync): call `await webgrad.webgpu.init_async()` before "
    "using the 'webgpu' device, and read results with the async methods (`await tensor.numpy_async()`)"
)

# WebGPU's numeric flags (GPUBufferUsage, GPUShaderStage, GPUMapMode), as the spec defines them.
_USAGE = {
    "storage": 0x80 | 0x04 | 0x08,  # STORAGE | COPY_SRC | COPY_DST
    "uniform": 0x40 | 0x08,  # UNIFORM | COPY_DST
    "readback": 0x01 | 0x08,  # MAP_READ | COPY_DST
    "upload": 0x04 | 0x08,  # COPY_SRC | COPY_DST
}
_COMPUTE_STAGE = 0x4
_BINDING_TYPES = {"read": "read-only-storage", "write": "storage", "uniform": "uniform"}
_DEFER_MAX = 1 << 16  # bytes: larger writes are not deferred (see BrowserBinding.write_buffer)
# (maxStorageBuffersPerShaderStage: sgd4_group binds three per parameter it updates, optim.group_size)
_WANTED_LIMITS = ("maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize",
                  "maxStorageBuffersPerShaderStage")
# Record lists kept with their JS arrays (see BrowserBinding._js_records): an eager training loop submits a
# handful of distinct lists (one per batch buffer it cycles through, one with a read-back's copy, ...).
_SEGMENTS_KEPT = 16


def _navigator_gpu():
    import js

    navigator = getattr(js, "navigator", None)
    return getattr(navigator, "gpu", None) if navigator is not None else None


def has_webgpu():
    """Whether this page or worker exposes navigator.gpu (an adapter may still be missing)."""
    return _navigator_gpu() is not None


def _js_object(value):
    """A Python dict/list tree as JS objects/arrays (JsProxies inside pass through unchanged)."""
    import js
    from pyodide.ffi import to_js

    return to_js(value, dict_converter=js.Object.fromEntries, create_pyproxies=False)


def _is_null(value):
    """Whether a value from JavaScript is null (recent Pyodide gives JS null as pyodide.ffi.jsnull, not None)."""
    return type(value).__name__ == "JsNull"


def _helper():
    from pyodide.code import run_js

    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "encode.js"), encoding="utf-8") as f:
        return run_js(f.read())


def _device_request(adapter):
    limits = adapter.limits
    request = {"requiredLimits": {name: getattr(limits, name) for name in _WANTED_LIMITS}}
    # shader-f16: float16 storages (f16.py). timestamp-query costs nothing unless used; the replay profiler
    # (webgrad.bench.replay_profile) times dispatches with it, as native.py's device has it for bench profile.
    features = [f for f in ("shader-f16", "timestamp-query") if adapter.features.has(f)]
    if features:
        request["requiredFeatures"] = features
    return _js_object(request)


class BrowserBinding:
    name = "browser"
    # WGSL promises storageBarrier() only workgroup scope, and a browser's compiler (Tint) emits just that:
    # no handing results between workgroups of one dispatch here (reduce.wgsl folds in a second dispatch).
    device_scope_storage_barrier = False

    def __init__(self, adapter, device):
        from pyodide.ffi import can_run_sync, run_sync

        self._can_run_sync = can_run_sync
        self._run_sync = run_sync
        self._adapter = adapter
        self._device = device
        self._queue = device.queue
        self.features = frozenset(str(f) for f in device.features)
        self._helper = _helper()
        self._submit = self._helper.submit  # looked up once: each JsProxy attribute access is an FFI call
        self._errors = self._helper.watch(device)
        self._writes = []  # (buffer, offset, bytes) deferred to the next submit (see write_buffer)
        self._converted = []  # [(record list, its JS array)], most recently used first (see _js_records)
        # What crossed into JavaScript (tests bound these per eager step): submits, and the records that
        # had to be converted (to_js) rather than found already converted.
        self.counts = {"submits": 0, "records_converted": 0, "segments_reused": 0}
        limits = device.limits
        self.limits = {
            "max_storage_buffer_binding_size": int(limits.maxStorageBufferBindingSize),
            "max_buffer_size": int(limits.maxBufferSize),
            "max_compute_workgroups_per_dimension": int(limits.maxComputeWorkgroupsPerDimension),
            "max_compute_workgroup_storage_size": int(limits.maxComputeWorkgroupStorageSize),
            "max_compute_invocations_per_workgroup": int(limits.maxComputeInvocationsPerWorkgroup),
            "max_storage_buffers_per_shader_stage": int(limits.maxStorageBuffersPerShaderStage),
        }

    # ------------------------------------------------------------------ creation

    @classmethod
    async def create_async(cls):
        gpu = _navigator_gpu()
        if gpu is None:
            raise RuntimeError(_NO_WEBGPU)
        adapter = await gpu.requestAdapter(_js_object({"powerPreference": "high-performance"}))
        if adapter is None or _is_null(adapter):
            raise RuntimeError("WebGPU found no GPU adapter (navigator.gpu.requestAdapter() returned null): " + _NO_WEBGPU)
        return cls(adapter, await adapter.requestDevice(_device_request(adapter)))

    def info(self):
        info = getattr(self._adapter, "info", None)
        field = (lambda name: str(getattr(info, name, "") or "")) if info is not None else (lambda name: "")
        return {
            "vendor": field("vendor"),
            "architecture": field("architecture"),
            "device": field("device"),
            "description": field("description"),
            "backend": "browser WebGPU (navigator.gpu)",
            "limits": dict(self.limits),
        }

    # ------------------------------------------------------------------ objects

    def _check(self, what, create):
        """Create an object; where Python can wait, raise its validation error right away."""
        if not self._can_run_sync():
            return create()
        from pyodide.ffi import create_once_callable

        made, error = self._run_sync(self._helper.checked(self._device, create_once_callable(create)))
        if error:
            raise RuntimeError(f"WebGPU rejected {what}: {error}")
        return made

    def create_buffer(self, size, kind):
        return self._device.createBuffer(_js_object({"size": size, "usage": _USAGE[kind]}))

    def destroy_buffer(self, buffer):
        self._flush_writes()  # a deferred write into it must not meet a destroyed buffer
        buffer.destroy()

    def write_buffer(self, buffer, offset, data):
        """queue.writeBuffer, deferred to the next submit (or read-back, wait, destroy): the submit's one FFI
        call carries the writes too, issued before its commands, which is where WebGPU's queue order puts
        them anyway (a write lands before every later submit). Immediately writing cost three FFI calls
        (make a Uint8Array, fill it, writeBuffer) per write: per replay of an Adam step, for its scalars,
        and per eager training step for each batch. Large writes (datasets) still go at once, so that no
        copy of them is held."""
        if len(data) > _DEFER_MAX:
            import js

            self._flush_writes()
            staged = js.Uint8Array.new(len(data))
            staged.assign(data)
            self._queue.writeBuffer(buffer, offset, staged)
            return
        self._writes.append((buffer, offset, bytes(data)))  # a copy: the caller may reuse its buffer

    def _flush_writes(self):
        """Issue the deferred writes now (before work that is not a submit: a map, a wait, a destroy)."""
        if self._writes:
            from pyodide.ffi import to_js

            writes, self._writes = self._writes, []
            self._helper.write(self._queue, to_js(writes, create_pyproxies=False))

    def create_module(self, code, label):
        module = self._device.createShaderModule(_js_object({"code": code, "label": label}))
        if self._can_run_sync():
            info = self._run_sync(module.getCompilationInfo())
            errors = [f"{m.lineNum}:{m.linePos}: {m.message}" for m in info.messages if m.type == "error"]
            if errors:
                raise RuntimeError(f"WGSL compilation of {label} failed:\n" + "\n".join(errors))
        return module

    def create_layout(self, bindings):
        entries = [
            {"binding": n, "visibility": _COMPUTE_STAGE, "buffer": {"type": _BINDING_TYPES[kind]}}
            for n, kind in bindings
        ]
        group_layout = self._device.createBindGroupLayout(_js_object({"entries": entries}))
        pipeline_layout = self._device.createPipelineLayout(_js_object({"bindGroupLayouts": [group_layout]}))
        return group_layout, pipeline_layout

    def create_pipeline(self, module, entry, constants, pipeline_layout):
        stage = {"module": module, "entryPoint": entry}
        if constants:
            stage["constants"] = constants
        descriptor = _js_object({"layout": pipeline_layout, "compute": stage})
        return self._check(f"the pipeline {entry}{constants}", lambda: self._device.createComputePipeline(descriptor))

    def create_bind_group(self, group_layout, entries):
        descriptor = {"layout": group_layout, "entries": [{"binding": n, "resource": {"buffer": b}} for n, b in entries]}
        return self._device.createBindGroup(_js_object(descriptor))

    # ------------------------------------------------------------------ work

    def prepare(self, records):
        """A captured graph's records as one JS array, converted once and reused by every replay."""
        return _js_object(list(records))

    def submit(self, segments):
        from pyodide.ffi import to_js

        # One FFI call: the helper issues the deferred writes, encodes, submits and hands back the errors
        # collected so far.
        writes, self._writes = self._writes, []
        segments = [self._js_records(s) if type(s) is list else s for s in segments]
        self.counts["submits"] += 1
        errors = self._submit(self._device, to_js(segments, create_pyproxies=False), self._errors,
                              to_js(writes, create_pyproxies=False) if writes else None)
        if errors:
            raise RuntimeError(f"WebGPU reported: {errors}")

    def _js_records(self, records):
        """An eager record list as a JS array, reusing the array made for an equal list submitted before.

        to_js builds a JS array per record: for an eager MLP step's 19 records it took 41-80 us in Pyodide
        under Node on this 2-core machine, against 71-138 us for the helper's encoding and submit. A
        repeated eager step records the same list each time (same pipelines, cached bind groups, grids),
        and comparing lists costs ~0.6 us for 20 records: records hold the binding's own JsProxy objects,
        compared by identity first (a differing JsProxy compares through JS ===: the same JS object, or
        not equal). The kept lists hold their JsProxies, so no object of a kept list can be collected and
        its JS object replaced while an equal-looking list is around."""
        kept = self._converted
        n = len(records)
        for i, (held, converted) in enumerate(kept):
            if len(held) == n and held == records:
                if i:
                    kept.insert(0, kept.pop(i))
                self.counts["segments_reused"] += 1
                return converted
        from pyodide.ffi import to_js

        converted = to_js(records, create_pyproxies=False)
        self.counts["records_converted"] += n
        kept.insert(0, (list(records), converted))
        del kept[_SEGMENTS_KEPT:]
        return converted

    def _raise_errors(self):
        errors = self._errors.take()
        if errors:
            raise RuntimeError(f"WebGPU reported: {errors}")

    def read(self, buffer, size):
        if not self._can_run_sync():
            raise RuntimeError("reading GPU data synchronously is impossible here: " + _NO_JSPI)
        self._flush_writes()
        data = self._run_sync(self._helper.read(buffer, size)).to_bytes()
        self._raise_errors()
        return data

    async def read_async(self, buffer, size):
        self._flush_writes()
        data = (await self._helper.read(buffer, size)).to_bytes()
        self._raise_errors()
        return data

    def wait(self):
        if not self._can_run_sync():
            raise RuntimeError("waiting for the GPU synchronously is impossible here: " + _NO_JSPI)
        self._flush_writes()
        self._run_sync(self._queue.onSubmittedWorkDone())
        self._raise_errors()
