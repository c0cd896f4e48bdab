"""Kernel benchmark: `python -m webgrad.bench kernels [--big] [--trans] [--sizes ...] [--shapes ...] [--configs ...] [--splits ...]`.

Times shaders/matmul.wgsl (through matmul_plan, dispatched with raw wgpu-py) on square sizes and on
the matmul shapes of an MNIST MLP and CNN step, an elementwise op and a reduction (raw WGSL, and
through webgrad's WebGPU backend when it works), on whatever WebGPU adapter wgpu-py finds, and the
same work in NumPy on the CPU. `--configs` sweeps tile configurations (names from
matmul_plan.CONFIGS, or "WG_X,WG_Y,TM,TN,BK[,KS]") and `--splits` K splits across workgroups (split-K: the
time is the product's and the reduction's together).

GPU timing: pipelines and bind groups are built first; each measurement records `iters` dispatches
into one command buffer (one compute pass), submits it and waits for the queue to drain (a 16-byte
read-back queued behind it: wgpu-py 0.32's queue.on_submitted_work_done_sync() is broken); the time
per dispatch is the best of 3 such submits after a warm-up, from timestamp queries where the adapter
has them (wall clock otherwise, also reported). All GPU measurements run before the NumPy ones, after
~1 s of busy warm-up on a discrete GPU: an idle GPU clocks down and would slow small kernels ~2x.

The helpers here (device, `MatmulRunner`) are also the raw harness of tests/backends/webgpu/test_matmul_kernel.py.
"""

import argparse
import struct
import sys
import time

from webgrad._backends.webgpu import matmul, matmul_plan
from webgrad._backends.webgpu.native import shader_module
from .._backends import kernels


def request_device(power_preference="high-performance"):
    import wgpu

    adapter = wgpu.gpu.request_adapter_sync(power_preference=power_preference)
    lim = adapter.limits
    features = [f for f in ("timestamp-query",) if f in adapter.features]
    device = adapter.request_device_sync(
        required_features=features,
        required_limits={
            "max-storage-buffer-binding-size": lim["max-storage-buffer-binding-size"],
            "max-buffer-size": lim["max-buffer-size"],
            "max-compute-workgroup-storage-size": lim["max-compute-workgroup-storage-size"],
        },
    )
    return adapter, device


def adapter_name(adapter):
    info = adapter.info
    return f"{info.get('device', '?')} ({info.get('adapter_type', '?')}, {info.get('backend_type', '?')})"


class MatmulRunner:
    """Compiles matmul.wgsl once, caches a pipeline per (entry point, constants), dispatches plans."""

    def __init__(self, device):
        import wgpu

        self.wgpu = wgpu
        self.device = device
        self.modules = {}  # shader file -> module (matmul.wgsl; matmul_cpu_*.wgsl on a software adapter)
        ro, rw, un = "read-only-storage", "storage", "uniform"
        self.layout = device.create_bind_group_layout(entries=[
            {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": t}}
            for i, t in enumerate((ro, ro, rw, ro, un))
        ])
        self.pipeline_layout = device.create_pipeline_layout(bind_group_layouts=[self.layout])
        self.pipelines = {}

    def pipeline(self, p):
        key = (p.shader, p.entry_point, tuple(sorted(p.constants.items())))
        pipe = self.pipelines.get(key)
        if pipe is None:
            if p.shader not in self.modules:
                self.modules[p.shader] = shader_module(self.device, matmul.shader(p.shader).source(), p.shader)
            pipe = self.device.create_compute_pipeline(
                layout=self.pipeline_layout,
                compute={"module": self.modules[p.shader], "entry_point": p.entry_point, "constants": p.constants},
            )
            self.pipelines[key] = pipe
        return pipe

    def bind(self, p, a, b, out, bias=None):
        """(pipeline, bind group) for the single dispatch p (a plan, or its `reduce`) over wgpu buffers
        a, b, out, bias (None: a's buffer)."""
        wgpu = self.wgpu
        params = self.device.create_buffer_with_data(
            data=p.params, usage=wgpu.BufferUsage.UNIFORM)
        bg = self.device.create_bind_group(layout=self.layout, entries=[
            {"binding": 0, "resource": {"buffer": a}},
            {"binding": 1, "resource": {"buffer": b}},
            {"binding": 2, "resource": {"buffer": out}},
            {"binding": 3, "resource": {"buffer": bias if bias is not None else a}},
            {"binding": 4, "resource": {"buffer": params}},
        ])
        return self.pipeline(p), bg

    def work(self, p, a, b, out, bias=None):
        """[(pipeline, bind group, workgroups)] for every dispatch of plan p: one, or with split-K the
        product into a new scratch buffer and the reduction from it into out."""
        if p.reduce is None:
            return [(*self.bind(p, a, b, out, bias), p.workgroups)]
        scratch = self.device.create_buffer(size=max(16, 4 * p.scratch), usage=self.wgpu.BufferUsage.STORAGE)
        return [(*self.bind(p, a, b, scratch, bias), p.workgroups),
                (*self.bind(p.reduce, scratch, b, out, bias), p.reduce.workgroups)]

    def run(self, p, a, b, out, bias=None):
        enc = self.device.create_command_encoder()
        cp = enc.begin_compute_pass()
        for pipe, bg, wg in self.work(p, a, b, out, bias):
            cp.set_pipeline(pipe)
            cp.set_bind_group(0, bg)
            cp.dispatch_workgroups(*wg)
        cp.end()
        self.device.queue.submit([enc.finish()])


# ----------------------------------------------------------------------------- timing

class GpuTimer:
    """Times `iters` dispatches of (pipeline, bind group, workgroups) recorded in one compute pass."""

    def __init__(self, device):
        import wgpu

        self.wgpu = wgpu
        self.device = device
        self.query = None
        if "timestamp-query" in device.features:
            self.query = device.create_query_set(type=wgpu.QueryType.timestamp, count=2)
            self.resolve = device.create_buffer(
                size=16, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
        # Waiting: wgpu-py 0.32's queue.on_submitted_work_done_sync() is broken (a cffi callback
        # signature mismatch), so wait by reading back a tiny buffer: its copy is queued after the
        # timed work, and the map completes only once the queue has drained up to it.
        self.fence = device.create_buffer(size=16, usage=wgpu.BufferUsage.COPY_SRC)

    def _submit(self, work, iters, stamp):
        enc = self.device.create_command_encoder()
        tw = None
        if stamp and self.query is not None:
            tw = {"query_set": self.query, "beginning_of_pass_write_index": 0, "end_of_pass_write_index": 1}
        cp = enc.begin_compute_pass(timestamp_writes=tw)
        for _ in range(iters):
            for pipe, bg, wg in work:
                cp.set_pipeline(pipe)
                cp.set_bind_group(0, bg)
                cp.dispatch_workgroups(*wg)
        cp.end()
        if tw:
            enc.resolve_query_set(self.query, 0, 2, self.resolve, 0)
        t0 = time.perf_counter()
        self.device.queue.submit([enc.finish()])
        self.device.queue.read_buffer(self.fence)
        wall = time.perf_counter() - t0
        gpu = None
        if tw:
            t = struct.unpack("<2Q", self.device.queue.read_buffer(self.resolve))
            gpu = (t[1] - t[0]) * 1e-9 if t[1] > t[0] else None
        return wall, gpu

    def time(self, work, iters, repeats=3, warm_up=True):
        """Seconds per iteration: (best wall clock incl. submit and wait, best GPU timestamp or None)."""
        if warm_up:
            self._submit(work, 1, False)  # pipeline creation, first-use costs
        walls, gpus = [], []
        for _ in range(repeats):
            w, g = self._submit(work, iters, True)
            walls.append(w / iters)
            if g is not None:
                gpus.append(g / iters)
        return min(walls), (min(gpus) if gpus else None)


def gpu_warm_up(runner, timer, seconds=1.0):
    """Keep the GPU busy for a while so that its clocks are up before the first measurement."""
    bench_matmul_gpu(runner, timer, (1, 2048, 2048, 2048), check=False, budget=seconds)


def _iters_for(seconds_per_iter_guess, budget=0.25, lo=2, hi=1000):
    return int(max(lo, min(hi, budget / max(seconds_per_iter_guess, 1e-7))))


# ----------------------------------------------------------------------------- matmul

def _buffer(device, array, extra_usage=0):
    import wgpu

    return device.create_buffer_with_data(
        data=array, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | extra_usage)


def bench_matmul_gpu(runner, timer, shape, trans_a=False, trans_b=False, config=None, check=True,
                     bias=False, relu=False, budget=0.25, splits=None, profile="gpu"):
    """GFLOP/s of one matmul shape (batch, M, N, K) on the GPU; also the max relative error."""
    import numpy as np

    batch, M, N, K = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((batch, K, M) if trans_a else (batch, M, K), dtype=np.float32)
    b = rng.standard_normal((batch, N, K) if trans_b else (batch, K, N), dtype=np.float32)
    bb = rng.standard_normal(N, dtype=np.float32)
    dev = runner.device
    ba, bbuf = _buffer(dev, a), _buffer(dev, b)
    bbias = _buffer(dev, bb) if bias else None
    bout = dev.create_buffer(size=4 * batch * M * N,
                             usage=runner.wgpu.BufferUsage.STORAGE | runner.wgpu.BufferUsage.COPY_SRC)
    p = matmul_plan.plan(batch, M, N, K, trans_a, trans_b, bias, relu, 0, 0, 0, 0, M * K, K * N,
                         config=config, splits=splits, profile=profile)
    work = runner.work(p, ba, bbuf, bout, bbias)
    flop = matmul_plan.flops(batch, M, N, K)
    # one probe to size the run
    w, _ = timer.time(work, 1, repeats=1)
    iters = _iters_for(w, budget, lo=1)
    # a slow adapter (software Vulkan, big sizes): one timed submit after the probe's warm-up
    wall, gpu = timer.time(work, iters, repeats=1 if w > 0.5 else 3, warm_up=False)
    err = None
    if check:
        out = np.frombuffer(dev.queue.read_buffer(bout), np.float32).reshape(batch, M, N)
        aa = a.transpose(0, 2, 1) if trans_a else a
        bm = b.transpose(0, 2, 1) if trans_b else b
        nb, rows = min(batch, 2), 256  # check a slice: the float64 reference of 4096^3 is slow
        ref = np.matmul(aa[:nb, :rows].astype(np.float64), bm[:nb].astype(np.float64))
        out = out[:, :rows]
        if bias:
            ref = ref + bb
        if relu:
            ref = np.maximum(ref, 0)
        err = float(np.abs(out[:nb] - ref).max() / max(np.abs(ref).max(), 1e-30))
    return dict(config=p.config + (f"/s{p.splits}" if p.splits > 1 else ""), entry=p.entry_point, iters=iters,
                wall_gflops=flop / wall / 1e9, gpu_gflops=(flop / gpu / 1e9) if gpu else None,
                us=(gpu or wall) * 1e6, err=err)


def bench_matmul_numpy(shape, trans_a=False, trans_b=False):
    import numpy as np

    batch, M, N, K = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((batch, K, M) if trans_a else (batch, M, K), dtype=np.float32)
    b = rng.standard_normal((batch, N, K) if trans_b else (batch, K, N), dtype=np.float32)
    aa = a.transpose(0, 2, 1) if trans_a else a
    bm = b.transpose(0, 2, 1) if trans_b else b
    np.matmul(aa, bm)
    t0 = time.perf_counter()
    np.matmul(aa, bm)
    guess = time.perf_counter() - t0
    n = _iters_for(guess, budget=0.3, lo=1, hi=200)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            np.matmul(aa, bm)
        best = min(best, (time.perf_counter() - t0) / n)
    return matmul_plan.flops(batch, M, N, K) / best / 1e9


# ----------------------------------------------------------------------------- memory-bound kernels
# Stand-alone WGSL for an elementwise op and a sum reduction, used when the WebGPU backend's own
# kernels are not available; with them, bench_backend_ops() times the backend instead.

_EW_WGSL = """
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> y: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> o: array<vec4<f32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = g.x + g.y * nw.x * 256u;
    if (i < arrayLength(&o)) { o[i] = x[i] + y[i]; }
}
"""

_SUM_WGSL = """
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> o: array<f32>;
var<workgroup> part: array<f32, 256>;
override CHUNK: u32 = 64u;  // vec4s per thread
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) w: vec3<u32>) {
    let n = arrayLength(&x);
    let base = w.x * 256u * CHUNK;
    var s = vec4<f32>(0.0);
    for (var c = 0u; c < CHUNK; c++) {
        let i = base + c * 256u + t;
        if (i < n) { s += x[i]; }
    }
    part[t] = s.x + s.y + s.z + s.w;
    workgroupBarrier();
    for (var k = 128u; k > 0u; k = k >> 1u) {
        if (t < k) { part[t] += part[t + k]; }
        workgroupBarrier();
    }
    if (t == 0u) { o[w.x] = part[0]; }
}
"""


def _raw_pipeline(device, code, n_bindings, kinds):
    import wgpu

    layout = device.create_bind_group_layout(entries=[
        {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": kinds[i]}}
        for i in range(n_bindings)])
    pipe = device.create_compute_pipeline(
        layout=device.create_pipeline_layout(bind_group_layouts=[layout]),
        compute={"module": device.create_shader_module(code=code), "entry_point": "main"})
    return pipe, layout


def bench_memory_raw(device, timer, n):
    """GB/s of out = x + y (12 bytes/element) and of sum(x) (4 bytes/element), raw WGSL, n floats."""
    import numpy as np
    import wgpu

    rng = np.random.default_rng(0)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    bx, by = _buffer(device, x), _buffer(device, y)
    bo = device.create_buffer(size=4 * n, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
    res = {}

    pipe, layout = _raw_pipeline(device, _EW_WGSL, 3, ("read-only-storage", "read-only-storage", "storage"))
    bg = device.create_bind_group(layout=layout, entries=[
        {"binding": i, "resource": {"buffer": buf}} for i, buf in enumerate((bx, by, bo))])
    groups = -(-n // 4 // 256)
    wg = (min(groups, 65535), -(-groups // 65535), 1)
    w, _ = timer.time([(pipe, bg, wg)], 1, repeats=1)
    wall, gpu = timer.time([(pipe, bg, wg)], _iters_for(w))
    out = np.frombuffer(device.queue.read_buffer(bo), np.float32)
    ok = np.allclose(out, x + y)
    res["add"] = (12 * n / (gpu or wall) / 1e9, ok)

    chunk = 64
    groups = -(-n // 4 // (256 * chunk))
    bp = device.create_buffer(size=4 * groups, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
    pipe, layout = _raw_pipeline(device, _SUM_WGSL, 2, ("read-only-storage", "storage"))
    bg = device.create_bind_group(layout=layout, entries=[
        {"binding": 0, "resource": {"buffer": bx}}, {"binding": 1, "resource": {"buffer": bp}}])
    w, _ = timer.time([(pipe, bg, (groups, 1, 1))], 1, repeats=1)
    wall, gpu = timer.time([(pipe, bg, (groups, 1, 1))], _iters_for(w))
    part = np.frombuffer(device.queue.read_buffer(bp), np.float32)
    ok = abs(part.astype(np.float64).sum() - x.astype(np.float64).sum()) < 1e-3 * np.abs(x).sum()
    res["sum"] = (4 * n / (gpu or wall) / 1e9, ok)
    return res


def _backend():
    """webgrad's WebGPU backend, or (None, reason) when it cannot be created here."""
    try:
        from webgrad._backends.webgpu import create_backend

        return create_backend(), None
    except Exception as e:  # the backend is optional for this benchmark
        return None, f"{type(e).__name__}: {e}".splitlines()[0][:120]


def _time_backend(be, fn, iters=20, warm_up=0.0):
    """Best of 3 of `iters` calls of fn between synchronize()s, in seconds per call; first, with warm_up > 0,
    fn itself in a loop for that many seconds (see bench_backend_ops)."""
    fn()
    be.synchronize()
    start = time.perf_counter()
    while time.perf_counter() - start < warm_up:
        for _ in range(iters):
            fn()
        be.synchronize()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        be.synchronize()
        best = min(best, (time.perf_counter() - t0) / iters)
    return best


# Whole-tensor sums timed per synchronize(): 100 of them (~4 ms of GPU work at 16.7M floats on an H200)
# so that the wait's fixed cost (~0.1 ms) is not a tenth of the figure, as it was with 20.
SUM_ITERS = 100


# Seconds each backend op runs untimed before its timing on a discrete GPU. Making the 16.7M-float inputs
# (NumPy, ~0.2 s) leaves the GPU idle, and an H100 clocked down in that gap: the backend's sum read 1,028 GB/s
# (those dispatches alone 1,196) after it, and 1,550-1,860 (alone 2,295-2,416) with its clocks up (a probe
# sweeping reduce.py's ROWS4 constants, each timing after 0.5 s of matmuls; the constants changed nothing).
BACKEND_WARM_UP = 0.5


def bench_backend_ops(be, n, warm_up=0.0):
    """GB/s of add and sum through the WebGPU backend (the engine's path: views, plan, runtime
    batching), timed with synchronize() around `iters` queued ops: the host's recording, the submit and
    the GPU's work all count; each op first runs `warm_up` seconds untimed (BACKEND_WARM_UP on a discrete
    GPU). An op that fails reports its error. Also `sum_detail` (see backend_sum_detail) where the
    binding exposes its wgpu device."""
    import numpy as np

    from webgrad import dtypes
    from webgrad._view import View

    f32 = dtypes.float32
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    sx, so, sr = be.from_bytes(x.tobytes(), f32), be.empty(n, f32), be.empty(1, f32)
    vx, vo = View(sx, (n,), (1,), 0, f32), View(so, (n,), (1,), 0, f32)
    vr, vsum = View(sr, (1, 1), (1, 1), 0, f32), View(sx, (1, n, 1), (n, 1, 1), 0, f32)

    def sum_op():
        kernels.reduce(be, "sum", vr, vsum)

    res = {}
    for name, fn, nbytes, iters in (
        ("add", lambda: kernels.binary(be, "add", vo, vx, vx), 12 * n, 20),
        ("sum", sum_op, 4 * n, SUM_ITERS),
    ):
        try:
            res[name] = nbytes / _time_backend(be, fn, iters, warm_up) / 1e9
        except Exception as e:
            res[name] = f"{type(e).__name__}: {e}".splitlines()[0][:80]
    if isinstance(res["sum"], float):
        got = struct.unpack("<f", be.to_bytes(vr))[0]
        ref = float(x.astype(np.float64).sum())
        if abs(got - ref) > 1e-4 * float(np.abs(x).sum()):
            res["sum"] = f"WRONG: {got} against {ref}"
        try:
            res["sum_detail"] = backend_sum_detail(be, sum_op, 4 * n)
        except Exception as e:  # a diagnostic: the figure above stands without it
            res["sum_detail"] = f"{type(e).__name__}: {e}".splitlines()[0][:80]
    return res


def backend_sum_detail(be, sum_op, nbytes):
    """Where the time of one backend sum goes: (dispatches it records, GB/s of those dispatches alone on
    the GPU: timestamp queries around a pass of 100 copies of them, else that pass's wall clock; host
    microseconds to record one call)."""
    rt = be.runtime
    device = getattr(rt.binding, "_device", None)  # the native binding's wgpu device (as bench profile)
    if device is None:
        raise RuntimeError("this binding exposes no wgpu device")
    with rt.capture() as graph:
        sum_op()
    work = [(r[1], r[2], r[3:6]) for r in graph.records if r[0] == 0]
    be.synchronize()
    wall, gpu = GpuTimer(device).time(work, 100)
    rt.flush()
    t0 = time.perf_counter()
    for _ in range(200):
        sum_op()
    host = (time.perf_counter() - t0) / 200
    be.synchronize()
    graph.release()
    return len(work), nbytes / (gpu or wall) / 1e9, host * 1e6


def bench_backend_matmul(be, shape, trans_a, trans_b):
    """GFLOP/s of one matmul through the backend (includes the runtime's per-op cost)."""
    import numpy as np

    from webgrad import dtypes
    from webgrad._view import View

    f32 = dtypes.float32
    batch, M, N, K = shape
    rng = np.random.default_rng(0)
    ash = (batch, K, M) if trans_a else (batch, M, K)
    bsh = (batch, N, K) if trans_b else (batch, K, N)
    views = []
    for sh in (ash, bsh):
        arr = rng.standard_normal(sh, dtype=np.float32)
        views.append(View(be.from_bytes(arr.tobytes(), f32), sh, View.contiguous_strides(sh), 0, f32))
    out = View(be.empty(batch * M * N, f32), (batch, M, N), View.contiguous_strides((batch, M, N)), 0, f32)
    t = _time_backend(be, lambda: kernels.matmul(be, out, views[0], views[1], trans_a, trans_b), iters=50)
    return matmul_plan.flops(*shape) / t / 1e9


def bench_memory_numpy(n):
    import numpy as np

    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    y = x.copy()
    o = np.empty_like(x)
    res = {}
    for name, fn, nbytes in (("add", lambda: np.add(x, y, out=o), 12 * n), ("sum", lambda: x.sum(), 4 * n)):
        fn()
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(5):
                fn()
            best = min(best, (time.perf_counter() - t0) / 5)
        res[name] = nbytes / best / 1e9
    return res


# ----------------------------------------------------------------------------- driver

MNIST_SHAPES = [  # (batch, M, N, K), trans_a, trans_b: an MLP 784-128-10 step at batch 128
    ((1, 128, 128, 784), False, True),   # x @ W1^T
    ((1, 128, 784, 128), True, False),   # dW1 = dy^T @ x
    ((1, 128, 10, 128), False, True),    # h @ W2^T
    ((1, 128, 128, 10), False, False),   # dh = dy @ W2
]

# The GEMMs of an im2col implementation of conv3x3(1->16) and conv3x3(16->32) on 28x28 / 14x14, batch
# 128. (webgrad's convolutions gather the image inside the matmul kernel instead: `python -m
# webgrad.bench profile` times the dispatches a CNN training step really runs.)
CNN_SHAPES = [
    ((1, 100352, 16, 9), False, True),    # conv1: cols [N*H*W, 9] @ W1^T
    ((1, 25088, 32, 144), False, True),   # conv2: cols [N*H*W, 144] @ W2^T
    ((1, 32, 144, 25088), True, False),   # conv2 dW = dy^T @ cols
    ((1, 25088, 144, 32), False, False),  # conv2 dcols = dy @ W2
]

# The products of a wide MLP 3072-4096-4096-10 training step at batch 128 (bench profile --models widemlp),
# timed with --big (or on a discrete GPU) unless --shapes replaces the defaults: Linear's forward x @ W^T,
# the input gradient dY @ W and the weight gradient dY^T @ X (K = the batch).
WIDE_SHAPES = [
    ((1, 128, 4096, 3072), False, True),   # layer 1 forward
    ((1, 4096, 3072, 128), True, False),   # layer 1 dW
    ((1, 128, 4096, 4096), False, True),   # layer 2 forward
    ((1, 128, 4096, 4096), False, False),  # layer 2 dX
    ((1, 4096, 4096, 128), True, False),   # layer 2 dW
    ((1, 128, 10, 4096), False, True),     # layer 3 forward
]


def _torch_matmuls(results):
    """{(shape, variant): GFLOP/s of torch.matmul on CUDA (cuBLAS, TF32 off), or why not}, timed with CUDA events."""
    try:
        import torch
    except ImportError:
        return {(shape, var): "n/a (no torch)" for shape, var, *_ in results}
    if not torch.cuda.is_available():
        return {(shape, var): "n/a (no CUDA)" for shape, var, *_ in results}
    torch.backends.cuda.matmul.allow_tf32 = False
    out = {}
    for (b, m, n, k), var, ta, tb, _ in results:
        if ((b, m, n, k), var) in out:
            continue
        a = torch.randn((b, k, m) if ta else (b, m, k), device="cuda")
        w = torch.randn((b, n, k) if tb else (b, k, n), device="cuda")
        a, w = (a.transpose(1, 2) if ta else a), (w.transpose(1, 2) if tb else w)
        for _ in range(3):
            torch.matmul(a, w)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        iters = 20
        start.record()
        for _ in range(iters):
            torch.matmul(a, w)
        end.record()
        torch.cuda.synchronize()
        us = start.elapsed_time(end) * 1000 / iters
        out[(b, m, n, k), var] = f"{2.0 * b * m * n * k / us / 1e3:9.1f} ({us:9.1f} us)"
    return out


def _parse_shape(spec):
    v = [int(x) for x in spec.split(",")]
    return (tuple(v[:4]), bool(v[4]) if len(v) > 4 else False, bool(v[5]) if len(v) > 5 else False)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m webgrad.bench kernels", description=__doc__.split("\n")[0])
    ap.add_argument("--big", action="store_true", help="also 4096^3 and the wide MLP's products (default on a "
                    "discrete GPU)")
    ap.add_argument("--sizes", type=int, nargs="*", help="square matmul sizes (default 256 512 1024 2048; none: --sizes alone)")
    ap.add_argument("--configs", nargs="*", help="tile configs to sweep: names from matmul_plan.CONFIGS or "
                    "experimental specs WG_X,WG_Y,TM,TN,BK[,KS][,w][,nbuf1] (default: the plan's choice)")
    ap.add_argument("--trans", action="store_true", help="also time the three transposed variants")
    ap.add_argument("--shapes", nargs="*", help="extra shapes batch,M,N,K[,trans_a,trans_b] instead of the "
                    "MNIST/CNN/wide MLP ones")
    ap.add_argument("--splits", type=int, nargs="*", help="K splits across workgroups to sweep (default: the plan's)")
    ap.add_argument("--no-numpy", action="store_true")
    ap.add_argument("--torch", action="store_true", help="also time each product with PyTorch on its CUDA GPU "
                    "(cuBLAS, float32 without TF32, as PyTorch's default) in the same call")
    ap.add_argument("--mem-n", type=int, default=None, help="elements for the memory-bound ops")
    args = ap.parse_args(argv)

    import numpy as np

    adapter, device = request_device()
    discrete = adapter.info.get("adapter_type", "") == "DiscreteGPU"
    profile = "cpu" if adapter.info.get("adapter_type", "") == "CPU" else "gpu"  # as matmul.profile
    print(f"adapter: {adapter_name(adapter)}")
    print(f"numpy {np.__version__} on CPU; timestamp queries: {'timestamp-query' in device.features}; "
          f"workgroup storage {device.limits['max-compute-workgroup-storage-size']} bytes")
    runner, timer = MatmulRunner(device), GpuTimer(device)

    sizes = args.sizes if args.sizes is not None else [256, 512, 1024, 2048]
    if (args.big or discrete) and args.sizes is None:
        sizes = sizes + [4096]
    configs = [matmul_plan.add_config(c) if "," in c else c for c in args.configs] if args.configs else [None]

    if discrete:
        gpu_warm_up(runner, timer)

    splits = args.splits or [None]
    jobs = []
    for n in sizes:
        for cfg in configs:
            jobs.append(((1, n, n, n), False, False, cfg, None))
            if args.trans:
                jobs += [((1, n, n, n), ta, tb, cfg, None) for ta, tb in ((True, False), (False, True), (True, True))]
    extra = [_parse_shape(x) for x in args.shapes] if args.shapes is not None else (
        MNIST_SHAPES + CNN_SHAPES + (WIDE_SHAPES if args.big or discrete else []))
    jobs += [(shape, ta, tb, cfg, sp) for shape, ta, tb in extra for cfg in configs for sp in splits]

    # All GPU work first, NumPy afterwards: an idle gap (NumPy running) lets the GPU clock down, which
    # would slow the next small kernel's measurement.
    print("\nmatmul float32 on the GPU (GFLOP/s; gpu = timestamp queries, wall = submit-to-done; "
          "us per matmul; relerr = max|out - ref| / max|ref|)")
    print(f"{'shape':>16} {'variant':>7} {'config':>20} {'entry':>10} {'gpu':>9} {'wall':>9} {'us':>10} {'relerr':>8}")
    results = []
    for shape, ta, tb, cfg, sp in jobs:
        r = bench_matmul_gpu(runner, timer, shape, ta, tb, config=cfg, splits=sp, profile=profile)
        var = ("T" if ta else "N") + ("T" if tb else "N")
        gpu = f"{r['gpu_gflops']:9.1f}" if r["gpu_gflops"] else f"{'-':>9}"
        print(f"{'x'.join(map(str, shape)):>16} {var:>7} {r['config']:>20} {r['entry']:>10} {gpu} "
              f"{r['wall_gflops']:9.1f} {r['us']:10.1f} {r['err']:8.1e}", flush=True)
        results.append((shape, var, ta, tb, r))

    n_mem = args.mem_n or ((1 << 24) if discrete else (1 << 22))
    raw = bench_memory_raw(device, timer, n_mem)

    be, why = _backend()
    back, back_mm = None, {}
    if be is not None:
        for shape, var, ta, tb, _ in results:
            if (shape, var) not in back_mm:
                try:
                    back_mm[shape, var] = f"{bench_backend_matmul(be, shape, ta, tb):9.1f}"
                except Exception as e:
                    back_mm[shape, var] = f"{type(e).__name__}: {e}".splitlines()[0][:60]
        back = bench_backend_ops(be, n_mem, BACKEND_WARM_UP if discrete else 0.0)

    print("\nsummary, GFLOP/s: GPU kernel (timestamps, else wall clock)" + (", PyTorch's cuBLAS" if args.torch else "")
          + ("" if args.no_numpy else ", NumPy on the CPU") + (", through webgrad's backend" if be else ""))
    cublas = _torch_matmuls(results) if args.torch else {}
    for shape, var, ta, tb, r in results:
        g = r["gpu_gflops"] or r["wall_gflops"]
        line = f"{'x'.join(map(str, shape)):>16} {var:>3} {r['config']:>20} {g:9.1f}"
        if (shape, var) in cublas:
            line += f"   torch {cublas[shape, var]}"
        if not args.no_numpy:
            npf = bench_matmul_numpy(shape, ta, tb)
            line += f"   numpy {npf:8.1f}  ({g / npf:5.1f}x)"
        if be is not None:
            line += f"   backend {back_mm[shape, var]}"
        print(line, flush=True)

    cpu = bench_memory_numpy(n_mem)
    print(f"\nmemory-bound ops, {n_mem} float32 elements (GB/s: add counts 12 bytes/element, sum 4)")
    for op in ("add", "sum"):
        gb, ok = raw[op]
        b = back[op] if back else "n/a"
        b = f"{b:9.1f}" if isinstance(b, float) else b
        print(f"  {op:>4}: raw WGSL {gb:9.1f}{'' if ok else ' (WRONG)'}   numpy {cpu[op]:9.1f}   webgrad backend {b}")
    detail = back.get("sum_detail") if back else None
    if isinstance(detail, tuple):
        print(f"        (backend sum: {detail[0]} dispatch(es) per call; those alone on the GPU {detail[1]:.1f} GB/s; "
              f"host {detail[2]:.1f} us to record a call; {SUM_ITERS} calls per synchronize)")
    elif detail:
        print(f"        (backend sum detail not available: {detail})")
    if be is None:
        print(f"  (webgrad's WebGPU backend not available: {why}; only the raw WGSL kernels were timed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
