"""Runtime invariants of the WebGPU backend (natively through wgpu-py): caches, buffer reuse, batching,
write ordering, graph capture and replay, dynamic scalars, errors."""

import gc
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("wgpu")

import webgrad  # noqa: E402
from webgrad import dtypes  # noqa: E402
from webgrad._view import View  # noqa: E402
from webgrad._backends.webgpu import shaders  # noqa: E402
from webgrad._backends.webgpu.dispatch import DynamicScalar  # noqa: E402
from webgrad._backends.webgpu.memory import size_class  # noqa: E402
from webgrad._backends.webgpu.runtime import Runtime  # noqa: E402
from webgrad._backends import kernels  # noqa: E402

F32, I32, U8 = dtypes.float32, dtypes.int32, dtypes.uint8
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(scope="module")
def gpu():
    from webgrad._backends.webgpu import create_backend

    try:
        return create_backend()
    except RuntimeError as e:  # pragma: no cover - no Vulkan driver on this machine
        pytest.skip(str(e))


def put(be, array, dtype=F32, shape=None):
    array = np.ascontiguousarray(array)
    shape = shape or array.shape
    return View(be.from_bytes(array.tobytes(), dtype), shape, View.contiguous_strides(shape), 0, dtype)


def new(be, shape, dtype=F32):
    return View(be.empty(int(np.prod(shape)), dtype), shape, View.contiguous_strides(shape), 0, dtype)


def get(be, view, np_dtype=np.float32):
    return np.frombuffer(be.to_bytes(view), np_dtype).reshape(view.shape)


def training_step(be, x, w, b, target, ones, m, v, t):
    """One MLP-like step made of the backend's kernels: forward, loss, backward, Adam update."""
    batch, classes = x.shape[1], w.shape[2]
    logits = new(be, (1, batch, classes))
    kernels.matmul(be, logits, x, w, bias=b)
    relu = new(be, logits.shape)
    kernels.unary(be, "relu", relu, logits)
    flat = relu.reshaped((batch, classes))
    loss = new(be, (batch,))
    kernels.cross_entropy(be, loss, flat, target)
    total = new(be, (1, 1))
    kernels.reduce(be, "sum", total, loss.reshaped((1, batch, 1)))
    dflat = new(be, (batch, classes))
    kernels.cross_entropy_backward(be, dflat, flat, target, ones)
    dlogits = new(be, (1, batch, classes))
    kernels.unary_backward(be, "relu", dlogits, dflat.reshaped(logits.shape), logits, relu)
    dw = new(be, w.shape)
    kernels.matmul(be, dw, x, dlogits, trans_a=True)
    hyper = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False,
                 decoupled=False, step=t if isinstance(t, DynamicScalar) else float(t))
    kernels.adam_step(be, w.reshaped((w.numel,)), dw.reshaped((w.numel,)), m, v, None, hyper)
    return total


def test_size_classes_are_coarse_and_cover():
    for n in (1, 255, 256, 257, 1000, 4096, 4097, 10**6, 47_040_000):
        c = size_class(n)
        assert c >= n and c <= max(256, 1.25 * n + 256)
    assert len({size_class(n) for n in range(1, 1 << 20, 997)}) < 60


def test_pipelines_compile_once(gpu):
    rt = gpu.runtime
    x, out = put(gpu, np.ones(100, np.float32)), new(gpu, (100,))
    kernels.unary(gpu, "exp", out, x)
    before = dict(rt.stats)
    for _ in range(5):
        kernels.unary(gpu, "exp", out, x)
    gpu.synchronize()
    assert rt.stats["pipelines_created"] == before["pipelines_created"]
    assert rt.stats["bind_groups_created"] == before["bind_groups_created"]
    assert rt.stats["uniforms_created"] == before["uniforms_created"]


def test_no_buffer_growth_over_100_training_steps(gpu):
    rng = np.random.default_rng(0)
    rt = gpu.runtime
    batch, features, classes = 32, 64, 10
    w = put(gpu, rng.standard_normal((1, features, classes)).astype(np.float32) * 0.1)
    b = put(gpu, np.zeros(classes, np.float32))
    m, v = put(gpu, np.zeros(features * classes, np.float32)), put(gpu, np.zeros(features * classes, np.float32))
    ones = View(gpu.from_bytes(np.ones(1, np.float32).tobytes(), F32), (batch,), (0,), 0, F32)

    def step(t):
        x = put(gpu, rng.standard_normal((1, batch, features)).astype(np.float32))  # a new batch each step
        target = put(gpu, rng.integers(0, classes, batch).astype(np.int32), I32)
        total = training_step(gpu, x, w, b, target, ones, m, v, t)
        return get(gpu, total) if t % 10 == 0 else None

    # Free buffers earlier tests left in this shared runtime's pool: otherwise the steps cycle through
    # them and bind each once (after the torch backend's tests: 24 new bind groups in 100 steps).
    gc.collect()
    rt.empty_cache()
    for t in range(1, 11):  # warm-up (with one read-back): pipelines, pool sizes, uniforms
        step(t)
    gc.collect()
    before = dict(rt.stats)
    for t in range(11, 111):
        step(t)
    gpu.synchronize()
    after = rt.stats
    for key in ("buffers_created", "pipelines_created", "bind_groups_created", "uniforms_created"):
        assert after[key] == before[key], f"{key} grew from {before[key]} to {after[key]}"
    assert after["dispatches"] - before["dispatches"] >= 100 * 8
    # One submit per read-back (every 10 steps) plus the writes of the new batch into buffers the
    # previous step's work still uses, nothing per kernel.
    assert after["submits"] - before["submits"] <= 2 * 100 + 10


def test_one_submit_per_sync_point(gpu):
    rt = gpu.runtime
    x = put(gpu, np.arange(64, dtype=np.float32))
    out = new(gpu, (64,))
    gpu.synchronize()
    submits = rt.stats["submits"]
    for _ in range(50):
        kernels.unary(gpu, "neg", out, x)
        kernels.binary(gpu, "add", out, out, x)
    assert rt.stats["submits"] == submits  # recorded, not submitted
    result = get(gpu, out)
    assert rt.stats["submits"] == submits + 1
    np.testing.assert_array_equal(result, np.zeros(64))  # -x + x, 50 times
    gpu.synchronize()
    assert rt.stats["submits"] == submits + 1  # nothing left to submit


def test_submits_after_many_dispatches_without_sync(gpu):
    rt = gpu.runtime
    x = put(gpu, np.ones(8, np.float32))
    gpu.synchronize()
    submits = rt.stats["submits"]
    for _ in range(Runtime.FLUSH_AFTER + 5):
        kernels.unary(gpu, "affine", x, x, 1.0, 1.0)
    assert rt.stats["submits"] == submits + 1
    assert get(gpu, x)[0] == Runtime.FLUSH_AFTER + 6


def test_write_comes_after_recorded_readers_without_a_submit(gpu):
    # queue.writeBuffer lands before any later submit: a write into a buffer that recorded work reads is staged
    # and copied in order, so the reader recorded before it sees the old data, and nothing is submitted early.
    rt = gpu.runtime
    x = put(gpu, np.full(16, 3.0, np.float32))
    gpu.synchronize()
    submits = rt.stats["submits"]
    out = new(gpu, (16,))
    kernels.unary(gpu, "square", out, x)
    for value in (5.0, 6.0):  # two staged writes before one submit: each keeps its own staging buffer
        gpu.write(x.storage, np.full(16, value, np.float32).tobytes())
        if value == 5.0:
            out2 = new(gpu, (16,))
            kernels.unary(gpu, "square", out2, x)
    out3 = new(gpu, (16,))
    kernels.unary(gpu, "square", out3, x)
    assert rt.stats["submits"] == submits
    assert get(gpu, out).tolist() == [9.0] * 16
    assert get(gpu, out2).tolist() == [25.0] * 16
    assert get(gpu, out3).tolist() == [36.0] * 16
    gpu.write(x.storage, np.full(16, 7.0, np.float32).tobytes())  # nothing pending: written directly
    assert get(gpu, x).tolist() == [7.0] * 16


def test_storage_buffers_return_to_the_pool(gpu):
    rt = gpu.runtime
    s = gpu.empty(1000, F32)
    buffer = s.buffer
    del s
    gc.collect()
    created = rt.stats["buffers_created"]
    s2 = gpu.empty(900, F32)  # same size class: the same buffer again
    assert s2.buffer is buffer and rt.stats["buffers_created"] == created


def test_capture_replay_with_new_inputs(gpu):
    rng = np.random.default_rng(1)
    rt = gpu.runtime
    batch, features, classes = 16, 12, 5
    w0 = rng.standard_normal((1, features, classes)).astype(np.float32) * 0.3
    w = put(gpu, w0)
    b = put(gpu, np.zeros(classes, np.float32))
    m, v = put(gpu, np.zeros(features * classes, np.float32)), put(gpu, np.zeros(features * classes, np.float32))
    ones = View(gpu.from_bytes(np.ones(1, np.float32).tobytes(), F32), (batch,), (0,), 0, F32)
    x = put(gpu, rng.standard_normal((1, batch, features)).astype(np.float32))
    target = put(gpu, rng.integers(0, classes, batch).astype(np.int32), I32)
    step = gpu.scalar(1.0)

    # Eager reference: three steps with different data, from the same start, on a twin model.
    data = [(rng.standard_normal((1, batch, features)).astype(np.float32), rng.integers(0, classes, batch).astype(np.int32))
            for _ in range(3)]
    tw, tm, tv = put(gpu, w0), put(gpu, np.zeros(features * classes, np.float32)), put(gpu, np.zeros(features * classes, np.float32))
    expected = []
    for t, (xd, td) in enumerate(data, start=1):
        expected.append(get(gpu, training_step(gpu, put(gpu, xd), tw, b, put(gpu, td, I32), ones, tm, tv, t)))
    expected_w = get(gpu, tw)

    # Captured: the first step runs during capture; replays get new inputs written into x and target.
    gpu.write(x.storage, data[0][0].tobytes())
    gpu.write(target.storage, data[0][1].tobytes())
    with gpu.capture() as graph:
        total = training_step(gpu, x, w, b, target, ones, m, v, step)
    got = [get(gpu, total)]
    pipelines = rt.stats["pipelines_created"]
    garbage = [put(gpu, np.full((1, batch, classes), 7.0, np.float32)) for _ in range(8)]  # reuses pool buffers
    for t, (xd, td) in enumerate(data[1:], start=2):
        gpu.write(x.storage, xd.tobytes())
        gpu.write(target.storage, td.tobytes())
        step.set(float(t))
        graph.replay()
        got.append(get(gpu, total))
    assert rt.stats["pipelines_created"] == pipelines  # replay ran no Python op code
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5)
    np.testing.assert_allclose(get(gpu, w), expected_w, rtol=1e-5, atol=1e-7)
    assert all(get(gpu, g).max() == 7.0 for g in garbage)  # the graph's buffers were never handed out
    graph.release()
    with pytest.raises(RuntimeError, match="released"):
        graph.replay()


def test_replay_is_one_record_list_and_draws_new_random_numbers(gpu):
    from webgrad._backends.cpu import CPUBackend

    rt = gpu.runtime
    cpu = CPUBackend()
    out = new(gpu, (257,))
    offset = gpu.scalar(0, kind="u32")
    with gpu.capture() as graph:
        kernels.random(gpu, out, "uniform", 42, offset, -1.0, 1.0)
    assert graph.dispatches == 1
    for k in (0, 1000, 2**32 - 5):
        offset.set(k)
        graph.replay()
        ref = View(cpu.empty(257, F32), (257,), (1,), 0, F32)
        kernels.random(cpu, ref, "uniform", 42, k, -1.0, 1.0)
        np.testing.assert_allclose(get(gpu, out), np.frombuffer(cpu.to_bytes(ref), np.float32), rtol=1e-6, atol=1e-7)
    assert rt.stats["replays"] >= 3


def test_dynamic_scalar_changes_between_eager_calls(gpu):
    # Two calls recorded with different values of one dynamic scalar must each see their own value.
    x = put(gpu, np.ones(4, np.float32))
    a, b = new(gpu, (4,)), new(gpu, (4,))
    scale = gpu.scalar(2.0)
    kernels.unary(gpu, "affine", a, x, scale, 0.0)
    scale.set(3.0)
    kernels.unary(gpu, "affine", b, x, scale, 0.0)
    assert get(gpu, a).tolist() == [2.0] * 4 and get(gpu, b).tolist() == [3.0] * 4


def test_dynamic_scalar_set_under_queued_work_is_copied_in_order_without_a_submit(gpu):
    """Setting a scalar that queued work reads stages the new value and copies it in order (an eager optimizer's
    step count each step): no submit, each kernel sees its own value, the slot of a scalar that died with such a
    copy queued is taken again without the copy landing over the new owner's value, and a cluster of scalars
    written at the flush leaves the copied slot as the copy wrote it."""
    rt = gpu.runtime
    x = put(gpu, np.ones(4, np.float32))
    outs = [new(gpu, (4,)) for _ in range(5)]
    rt.flush()
    scale, neighbour = gpu.scalar(2.0), gpu.scalar(10.0)
    submits = rt.stats["submits"]
    kernels.unary(gpu, "affine", outs[0], x, scale, 0.0)
    scale.set(3.0)
    kernels.unary(gpu, "affine", outs[1], x, scale, 0.0)
    scale.set(4.0)
    assert rt.stats["submits"] == submits  # nothing was submitted to keep the first kernel's value
    slot = scale.slot
    del scale  # dies with its copy of 4.0 queued; the next scalar may take its slot
    taker = gpu.scalar(5.0)
    kernels.unary(gpu, "affine", outs[2], x, taker, 0.0)
    neighbour.set(11.0)  # written by the flush, in a cluster of slots around the copied ones
    kernels.unary(gpu, "affine", outs[3], x, neighbour, 0.0)
    assert [get(gpu, o).tolist()[0] for o in outs[:4]] == [2.0, 3.0, 5.0, 11.0]
    kernels.unary(gpu, "affine", outs[4], x, taker, 0.0)  # after the submit: the value the copy left
    assert get(gpu, outs[4]).tolist() == [5.0] * 4
    assert taker.slot == slot or slot in rt._free_scalar_slots


def test_capture_records_data_written_inside_it(gpu):
    # A constant uploaded during the capture is re-uploaded by each replay, even if its buffer was
    # reused for something else later in the step.
    out = new(gpu, (4,))
    with gpu.capture() as graph:
        c = put(gpu, np.array([1, 2, 3, 4], np.float32))
        kernels.unary(gpu, "neg", out, c)
        del c
        junk = new(gpu, (4,))
        kernels.fill(gpu, junk, 9.0)
    graph.replay()
    assert get(gpu, out).tolist() == [-1, -2, -3, -4]


def test_errors_name_the_problem(gpu):
    x = new(gpu, (4,))
    with pytest.raises(ValueError, match="unknown unary op 'expp'"):
        kernels.unary(gpu, "expp", x, x)
    with pytest.raises(TypeError, match="float64"):
        gpu.empty(4, dtypes.float64)
    with pytest.raises(IndexError, match="outside its storage"):
        kernels.unary(gpu, "exp", View(x.storage, (5,), (1,), 0, F32), x)
    with pytest.raises(TypeError, match="not a WebGPU storage"):
        kernels.unary(gpu, "exp", x, View(np.zeros(4, np.float32), (4,), (1,), 0, F32))
    with pytest.raises(TypeError, match="writes bool"):
        kernels.unary(gpu, "lt", x, x, 0.0)
    with pytest.raises(ValueError, match="has shape"):
        kernels.binary(gpu, "add", x, x, new(gpu, (2, 2)))
    with pytest.raises(ValueError, match="not a whole number of webgrad.int32 elements"):
        gpu.from_bytes(b"123", I32)
    with pytest.raises(TypeError, match="int32 indices"):
        kernels.reduce(gpu, "argmax", new(gpu, (1, 1)), new(gpu, (1, 4, 1)))
    with pytest.raises(RuntimeError, match="does not nest"):
        with gpu.capture():
            with gpu.capture():
                pass


def test_shaders_load_from_inside_the_package():
    splices = {name: "" for name in ("unary_f", "unary_i", "backward_f", "binary_f", "binary_i", "unary_overflow",
                                     "binary_overflow")}
    splices["unary_f"] = "        case OP_NEG: { return -x; }"
    src = shaders.source("elementwise.wgsl", {"OP_NEG": 2}, splices)
    assert src.startswith("const OP_NEG: u32 = 2u;")
    assert "case OP_NEG: { return -x; }" in src  # the op table's case, spliced in
    assert not any(line.strip().startswith("//! splice") for line in src.splitlines())
    with pytest.raises(ValueError, match="no text given for '//! splice unary_f'"):
        shaders.source("elementwise.wgsl", {})
    assert "fn decode_f32" in src  # common.wgsl was included
    assert not any(line.startswith("//! include") for line in src.splitlines())
    package = os.path.dirname(os.path.abspath(webgrad.__file__))
    assert shaders.FOLDER == os.path.join(package, "shaders")
    with pytest.raises(FileNotFoundError, match="nonexistent.wgsl"):
        shaders.read("nonexistent.wgsl")


def test_missing_wgpu_gives_instructions():
    code = ("import sys; sys.modules['wgpu'] = None\n"
            "from webgrad._backends.webgpu.native import NativeBinding\n"
            "try:\n    NativeBinding()\nexcept RuntimeError as e:\n    print(e)\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "package"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60).stdout
    assert "pip install wgpu" in out and "mesa-vulkan-drivers" in out


def test_public_module(gpu):
    import webgrad.webgpu as webgpu

    assert webgpu.is_available()
    info = webgpu.adapter_info()
    assert {"vendor", "architecture", "device", "description", "backend", "limits"} <= set(info)
    assert info["limits"]["max_storage_buffer_binding_size"] >= 128 << 20
    webgpu.synchronize()


def test_describe_names_each_recorded_dispatch(gpu):
    out, copy = new(gpu, (257,)), new(gpu, (257,))
    with gpu.capture() as graph:
        kernels.random(gpu, out, "uniform", 7, gpu.scalar(0, kind="u32"), 0.0, 1.0)
        gpu.runtime.copy(out.storage, 0, copy.storage, 0, 257 * 4)  # a copy record: not a dispatch
        kernels.random(gpu, out, "normal", 7, gpu.scalar(0, kind="u32"), 0.0, 1.0)
    described = gpu.runtime.describe(graph.records)
    assert [d.record for d in described] == [r for r in graph.records if r[0] == 0] and len(described) == 2
    assert len(graph.records) == 3
    for d in described:
        assert d.kernel.shader.name == "random.wgsl" and d.groups == tuple(d.record[3:6])
        assert isinstance(d.constants, tuple) and (d.params is None or isinstance(d.params, bytes))


def test_reset_opens_a_new_device():
    # In a fresh interpreter: a reset must not leave this session's tensors on a device that is gone.
    code = ("import webgrad as wg, webgrad.webgpu as webgpu\n"
            "from webgrad._backends.webgpu import runtime\n"
            "a = wg.ones(3, device='webgpu'); first = runtime.default_runtime()\n"
            "webgpu.reset()\n"
            "b = wg.arange(3, device='webgpu') * 2\n"
            "assert runtime.default_runtime() is not first and b.device.backend.runtime is not first\n"
            "print(b.tolist())\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "package"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.strip() == "[0, 2, 4]", out.stderr
