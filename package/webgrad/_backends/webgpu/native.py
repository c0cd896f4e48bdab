"""The native binding: WebGPU in CPython through wgpu-py (Vulkan, Metal or DX12 underneath).

Implements the binding interface described in runtime.py; everything else is shared with the browser.
"""

import os
import re

_HOW_TO_ENABLE = (
    "install wgpu-py (`pip install wgpu`) and a Vulkan, Metal or DX12 driver; on Debian/Ubuntu without "
    "a GPU, `apt-get install mesa-vulkan-drivers` gives a software Vulkan device (lavapipe)"
)

# Mesa's lavapipe (the software Vulkan driver the README suggests where no GPU exists) "inlines uniforms":
# when a pipeline's if/loop conditions read a uniform buffer at constant offsets (every kernel's Params:
# `k < P.K`), each bind of that pipeline in a command buffer clones the shader, substitutes the current
# uniform values, and JIT-compiles a new variant with LLVM. Mesa 22.3 (Debian 12) keeps no cache of those
# variants and never frees them: every dispatch after a pipeline switch cost 20-40 ms of compilation and
# ~1.8 MiB of process memory (RSS grew ~7 MiB per MNIST training step, eager or replayed; webgrad's own
# counters stayed flat). The pass only looks at uniform-buffer loads (lvp_inline_uniforms.c), so on
# lavapipe the Params binding becomes a read-only storage buffer: same WGSL layout rules for reading, no
# inlining, one compiled shader per pipeline. Found by timing and RSS per op: only the kernels whose
# loops are bounded by Params (matmul) grew, and only when their first run made inlining look worth it.
_UNIFORM_VAR = re.compile(r"var\s*<\s*uniform\s*>")


def _inlines_uniforms(info):
    return "llvmpipe" in (info.get("device", "") + info.get("vendor", "")).lower()


try:  # wgpu-py's cffi handle on wgpu-native: not public API, so submit() falls back to the public calls
    from wgpu.backends.wgpu_native._ffi import ffi as _ffi, lib as _lib
except Exception:  # pragma: no cover - another wgpu-py layout
    _ffi = _lib = None


def _chosen_adapter(wgpu):
    """The adapter WEBGRAD_ADAPTER_INDEX or LOCAL_RANK picks (adapters.py), or None: wgpu's own choice."""
    import logging
    import os
    from .adapters import choose_adapter, wants_choice
    log = logging.getLogger("webgrad.webgpu")
    if not wants_choice(os.environ):
        return None
    adapters = wgpu.gpu.enumerate_adapters_sync()
    choice = choose_adapter([a.info for a in adapters], os.environ)
    if choice is None:
        log.info("LOCAL_RANK=%s: one adapter of the preferred kind, shared by the ranks (wgpu's choice)",
                 os.environ.get("LOCAL_RANK"))
        return None
    index, reason = choice
    info = adapters[index].info
    log.info("WebGPU adapter %d (%s, %s) chosen by %s", index, info.get("device", ""), info.get("backend_type", ""),
             reason)
    return adapters[index]


# WEBGRAD_SHADER_CHECKS picks which of its runtime checks naga (wgpu-native's WGSL compiler) puts into every
# shader, to measure what they cost (bench replay, bench kernels): "all" (the default: wgpu-py's own
# create_shader_module), "bounds" (index clamps only), "loops" (loop bounding only) or "none". Measurement only:
# without the clamps an index past a workgroup or private array is undefined behaviour, and webgrad's kernels are
# meant to keep theirs in range but nothing would catch a mistake. H200: ResNet-18's
# replayed step (bench replay) 10,184 us of GPU span with all, 10,018 bounds, 9,883 loops, 9,561 none; matmul
# 4096^3 (bench kernels) 37.5 TFLOP/s with all, 40.9 none. Dawn's alike switch, its toggle disable_robustness
# (tools/bench_dawn.py --profile --also 'enable-dawn-features=disable_robustness'), took the span 10,377 -> 9,728.
SHADER_CHECKS = {"all": 3, "bounds": 1, "loops": 2, "none": 0}  # -> WGPUShaderRuntimeChecks flags


def shader_module(device, code, label):
    """A shader module of wgpu-py device `device`, with the runtime checks WEBGRAD_SHADER_CHECKS names."""
    checks = os.environ.get("WEBGRAD_SHADER_CHECKS") or "all"
    if checks not in SHADER_CHECKS:
        raise ValueError(f"WEBGRAD_SHADER_CHECKS={checks!r}: expected one of {', '.join(SHADER_CHECKS)}")
    if checks == "all":
        return device.create_shader_module(code=code, label=label)
    try:  # wgpu-native's wgpuDeviceCreateShaderModuleTrusted, through wgpu-py's internals (no public API)
        from wgpu.backends.wgpu_native import _api
        create = _api.libf.wgpuDeviceCreateShaderModuleTrusted
    except (ImportError, AttributeError) as e:
        raise RuntimeError(f"WEBGRAD_SHADER_CHECKS={checks}: this wgpu-py has no trusted shader modules "
                           f"({e})") from None
    source = _api.new_struct_p("WGPUShaderSourceWGSL *", code=_api.to_c_string_view(code))
    source[0].chain.next = _api.ffi.NULL
    source[0].chain.sType = _api.lib.WGPUSType_ShaderSourceWGSL
    descriptor = _api.new_struct_p("WGPUShaderModuleDescriptor *",
                                   nextInChain=_api.ffi.cast("WGPUChainedStruct *", source),
                                   label=_api.to_c_string_view(label))
    handle = create(device._internal, descriptor, SHADER_CHECKS[checks])
    if handle == _api.ffi.NULL:
        raise RuntimeError(f"shader module {label!r} could not be created")
    return _api.GPUShaderModule(label, handle, device)


class NativeBinding:
    name = "native"
    # naga, wgpu-native's WGSL compiler, gives storageBarrier() device-scope acquire-release semantics,
    # which kernels that hand results between workgroups of one dispatch rely on (reduce.wgsl's STAGE 3).
    device_scope_storage_barrier = True

    def __init__(self, power_preference="high-performance", without_features=()):
        try:
            import wgpu
        except ImportError as e:
            raise RuntimeError(f"WebGPU is not available natively: {_HOW_TO_ENABLE}.") from e
        self._wgpu = wgpu
        try:
            adapter = _chosen_adapter(wgpu) or wgpu.gpu.request_adapter_sync(power_preference=power_preference)
        except ValueError:  # a bad WEBGRAD_ADAPTER_INDEX or LOCAL_RANK: its own message
            raise
        except Exception as e:  # wgpu-py raises when no backend has an adapter
            raise RuntimeError(f"WebGPU found no GPU adapter ({e}): {_HOW_TO_ENABLE}.") from None
        if adapter is None:
            raise RuntimeError(f"WebGPU found no GPU adapter: {_HOW_TO_ENABLE}.")
        self._adapter = adapter
        self._params_in_storage = _inlines_uniforms(adapter.info)
        # Ask for the adapter's own maxima where a bigger tensor or dataset would need them.
        # Storage buffers per stage: Params takes one of its own where it lives in storage, and sgd4_group binds
        # three per parameter it updates (optim.group_size).
        wanted = ("max-storage-buffer-binding-size", "max-buffer-size", "max-compute-workgroup-storage-size",
                  "max-storage-buffers-per-shader-stage")
        # timestamp-query costs nothing unless used; webgrad.bench.profile times each dispatch with it.
        # shader-f16 (float16 storages, f16.py) where the adapter has it; without_features leaves features out
        # (tests open a device without shader-f16 on an adapter that has it).
        features = [f for f in ("timestamp-query", "shader-f16") if f in adapter.features and f not in without_features]
        self._device = adapter.request_device_sync(
            required_features=features,
            required_limits={k: adapter.limits[k] for k in wanted if k in adapter.limits},
        )
        self._queue = self._device.queue
        self.features = frozenset(str(f) for f in self._device.features)
        limits = self._device.limits
        self.limits = {
            "max_storage_buffer_binding_size": limits["max-storage-buffer-binding-size"],
            "max_buffer_size": limits["max-buffer-size"],
            "max_compute_workgroups_per_dimension": limits["max-compute-workgroups-per-dimension"],
            "max_compute_workgroup_storage_size": limits["max-compute-workgroup-storage-size"],
            "max_compute_invocations_per_workgroup": limits["max-compute-invocations-per-workgroup"],
            "max_storage_buffers_per_shader_stage": limits["max-storage-buffers-per-shader-stage"],
        }
        usage = wgpu.BufferUsage
        self._usages = {
            "storage": usage.STORAGE | usage.COPY_SRC | usage.COPY_DST,
            "uniform": usage.UNIFORM | usage.COPY_DST | (usage.STORAGE if self._params_in_storage else 0),
            "readback": usage.MAP_READ | usage.COPY_DST,
            "upload": usage.COPY_SRC | usage.COPY_DST,
        }
        self._binding_types = {"read": "read-only-storage", "write": "storage",
                               "uniform": "read-only-storage" if self._params_in_storage else "uniform"}
        # wait(): a 4-byte copy submitted after everything else, then mapped (the queue runs in order).
        self._fence_src = self.create_buffer(4, "upload")
        self._fence_dst = self.create_buffer(4, "readback")

    def info(self):
        info = self._adapter.info
        return {
            "vendor": info.get("vendor", ""),
            "architecture": info.get("architecture", ""),
            "device": info.get("device", ""),
            "description": info.get("description", ""),
            "backend": f"wgpu-py {self._wgpu.__version__} / {info.get('backend_type', '')}",
            "adapter_type": info.get("adapter_type", ""),
            "limits": dict(self.limits),
        }

    # ------------------------------------------------------------------ objects

    def create_buffer(self, size, kind):
        return self._device.create_buffer(size=size, usage=self._usages[kind])

    def destroy_buffer(self, buffer):
        buffer.destroy()

    def write_buffer(self, buffer, offset, data):
        self._queue.write_buffer(buffer, offset, data)

    def create_module(self, code, label):
        if self._params_in_storage:
            code = _UNIFORM_VAR.sub("var<storage, read>", code)
        return shader_module(self._device, code, label)

    def create_layout(self, bindings):
        compute = self._wgpu.ShaderStage.COMPUTE
        entries = [
            {"binding": n, "visibility": compute, "buffer": {"type": self._binding_types[kind]}}
            for n, kind in bindings
        ]
        group_layout = self._device.create_bind_group_layout(entries=entries)
        return group_layout, self._device.create_pipeline_layout(bind_group_layouts=[group_layout])

    def create_pipeline(self, module, entry, constants, pipeline_layout):
        stage = {"module": module, "entry_point": entry}
        if constants:
            stage["constants"] = constants
        return self._device.create_compute_pipeline(layout=pipeline_layout, compute=stage)

    def create_bind_group(self, group_layout, entries):
        return self._device.create_bind_group(
            layout=group_layout,
            entries=[{"binding": n, "resource": {"buffer": b, "offset": 0, "size": b.size}} for n, b in entries],
        )

    # ------------------------------------------------------------------ work

    def prepare(self, records):
        """A captured graph's records as :class:`_Prepared` (resolved once for every replay's encoding)."""
        if _lib is None:
            return tuple(records)
        return _Prepared(records)

    def submit(self, segments):
        """Encode every record of every segment into one command encoder and submit it. Consecutive
        dispatches share one compute pass (WebGPU orders and synchronises dispatches within a pass).

        The three calls per dispatch go straight to wgpu-native through cffi where wgpu-py exposes it:
        its wrappers (error capture around each call, argument checks, a cffi array for the dynamic
        offsets) were most of the ~1 ms of host time that replaying a 45-dispatch CNN step took on an
        H100 machine, more than the step's GPU work at batch 128; with direct calls it took 0.4-0.6 ms.
        Every record was validated when it was first issued through the same calls, and errors still
        surface at compute_pass.end() and encoder.finish(), which stay wrapped. A pipeline already set
        is not set again."""
        encoder = self._device.create_command_encoder()
        compute_pass = None
        lib = _lib
        for records in segments:
            if type(records) is _Prepared:
                if compute_pass is not None:
                    compute_pass.end()
                    compute_pass = None
                records.encode(encoder._internal)
                continue
            for r in records:
                if r[0] == 0:
                    if compute_pass is None:
                        compute_pass = encoder.begin_compute_pass()
                        handle, pipeline = compute_pass._internal, None
                    if lib is None:
                        compute_pass.set_pipeline(r[1])
                        compute_pass.set_bind_group(0, r[2])
                        compute_pass.dispatch_workgroups(r[3], r[4], r[5])
                        continue
                    if r[1] is not pipeline:
                        pipeline = r[1]
                        lib.wgpuComputePassEncoderSetPipeline(handle, pipeline._internal)
                    lib.wgpuComputePassEncoderSetBindGroup(handle, 0, r[2]._internal, 0, _ffi.NULL)
                    lib.wgpuComputePassEncoderDispatchWorkgroups(handle, r[3], r[4], r[5])
                else:
                    if compute_pass is not None:
                        compute_pass.end()
                        compute_pass = None
                    encoder.copy_buffer_to_buffer(r[1], r[2], r[3], r[4], r[5])
        if compute_pass is not None:
            compute_pass.end()
        self._queue.submit([encoder.finish()])

    def read(self, buffer, size):
        buffer.map_sync(self._wgpu.MapMode.READ, 0, size)
        try:  # one copy out of the mapping, into memory the caller may keep and write (torch.frombuffer)
            return bytearray(buffer.read_mapped(0, size, copy=False))
        finally:
            buffer.unmap()

    def read_into(self, buffer, size, out):
        """Map `buffer`, copy its first len(out) bytes straight into writable buffer `out` (one copy, no
        intermediate), and return the bytes after them, up to `size` (the error word, if it rode along)."""
        buffer.map_sync(self._wgpu.MapMode.READ, 0, size)
        try:
            mapped = buffer.read_mapped(0, size, copy=False)
            target = memoryview(out).cast("B")
            target[:] = mapped[:len(target)]
            return bytes(mapped[len(target):])
        finally:
            buffer.unmap()

    async def read_async(self, buffer, size):
        return self.read(buffer, size)

    def wait(self):
        # (queue.on_submitted_work_done_sync is broken in wgpu-py 0.32; mapping is public and reliable.)
        encoder = self._device.create_command_encoder()
        encoder.copy_buffer_to_buffer(self._fence_src, 0, self._fence_dst, 0, 4)
        self._queue.submit([encoder.finish()])
        self._fence_dst.map_sync(self._wgpu.MapMode.READ, 0, 4)
        self._fence_dst.unmap()


class _Prepared:
    """A captured graph's records in the form a replay encodes fastest (NativeBinding.prepare).

    A replay's whole host cost is its encoding, so everything that does not change between replays is
    worked out here once: the records grouped into compute passes and copies, each object's wgpu-native
    handle, which dispatches need their pipeline set. encode() then makes only the raw wgpu-native calls
    (begin pass, set pipeline where it changes, set bind group, dispatch, end pass, copy): no wgpu-py
    wrapper objects or argument checks per pass and copy. Every record was validated when it was first
    issued (through the wrapped calls); wgpu-native keeps an encoder's errors for its finish(), which
    submit() still calls through wgpu-py, so errors surface there as before. `records` keeps the objects
    the handles belong to alive.
    """

    __slots__ = ("records", "steps", "_pass_descriptor")

    def __init__(self, records):
        self.records = tuple(records)
        steps, body, pipeline = [], None, None
        for r in self.records:
            if r[0] == 0:
                if body is None:
                    body, pipeline = [], None
                    steps.append((0, body))
                same = r[1] is pipeline
                pipeline = r[1]
                body.append((None if same else r[1]._internal, r[2]._internal, r[3], r[4], r[5]))
            else:
                body = None
                steps.append((1, (r[1]._internal, r[2], r[3]._internal, r[4], r[5])))
        self.steps = tuple((kind, tuple(b) if kind == 0 else b) for kind, b in steps)
        self._pass_descriptor = _ffi.new("WGPUComputePassDescriptor *")  # no label, no timestamps

    def __len__(self):
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    def encode(self, encoder):
        """Encode the records into the raw command encoder `encoder`."""
        lib, null, descriptor = _lib, _ffi.NULL, self._pass_descriptor
        set_pipeline, set_bind_group = lib.wgpuComputePassEncoderSetPipeline, lib.wgpuComputePassEncoderSetBindGroup
        dispatch = lib.wgpuComputePassEncoderDispatchWorkgroups
        for kind, body in self.steps:
            if kind:
                lib.wgpuCommandEncoderCopyBufferToBuffer(encoder, *body)
                continue
            handle = lib.wgpuCommandEncoderBeginComputePass(encoder, descriptor)
            try:
                for pipeline, bind_group, x, y, z in body:
                    if pipeline is not None:
                        set_pipeline(handle, pipeline)
                    set_bind_group(handle, 0, bind_group, 0, null)
                    dispatch(handle, x, y, z)
                lib.wgpuComputePassEncoderEnd(handle)
            finally:
                lib.wgpuComputePassEncoderRelease(handle)
