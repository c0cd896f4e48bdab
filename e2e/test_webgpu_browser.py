"""The WebGPU backend's browser binding, in headless Chromium (SwiftShader) inside the Pyodide worker.

Each test runs kernels in the browser through webgrad._backends.webgpu (browser.py + encode.js, no
NumPy there: data crosses as struct-packed bytes) and compares with the CPU backend run here in
CPython on the same inputs.
"""


import numpy as np
import pytest

from webgrad import dtypes
from webgrad._backends import kernels
from webgrad._backends.cpu import CPUBackend
from webgrad._view import View

CPU = CPUBackend()

# Runs first in the worker: small helpers over struct-packed lists.
PRELUDE = """
import struct
from webgrad import dtypes
from webgrad._view import View
from webgrad._backends.webgpu import create_backend
from webgrad._backends import kernels
be = create_backend()
F32, I32, U8 = dtypes.float32, dtypes.int32, dtypes.uint8

def put(values, dtype, shape, strides=None, offset=0):
    fmt = {"float32": "f", "int32": "i", "uint8": "B"}[dtype.name]
    s = be.from_bytes(struct.pack(f"<{len(values)}{fmt}", *values), dtype)
    return View(s, shape, strides or View.contiguous_strides(shape), offset, dtype)

def new(shape, dtype=F32):
    n = 1
    for d in shape:
        n *= d
    return View(be.empty(n, dtype), shape, View.contiguous_strides(shape), 0, dtype)

def get(view):
    raw = be.to_bytes(view)
    fmt = {"float32": "f", "int32": "i", "uint8": "B", "bool": "?"}[view.dtype.name]
    return list(struct.unpack(f"<{len(raw) // struct.calcsize(fmt)}{fmt}", raw))
"""


def cpu_view(values, dtype, shape, strides=None, offset=0):
    arr = np.asarray(values, {dtypes.float32: np.float32, dtypes.int32: np.int32, dtypes.uint8: np.uint8}[dtype])
    return View(CPU.from_bytes(arr.tobytes(), dtype), shape, strides or View.contiguous_strides(shape), offset, dtype)


def cpu_new(shape, dtype=dtypes.float32):
    return View(CPU.empty(int(np.prod(shape)), dtype), shape, View.contiguous_strides(shape), 0, dtype)


def cpu_get(view, np_dtype=np.float32):
    return np.frombuffer(CPU.to_bytes(view), np_dtype)


@pytest.fixture
def py(run_python):
    run_python(PRELUDE)
    return run_python


def test_adapter_elementwise_reduce_softmax(py):
    info = py("import webgrad.webgpu as W\n"
              "(W.is_available(), W.adapter_info()['architecture'], type(be.runtime.binding).__name__)")
    assert info == [True, "swiftshader", "BrowserBinding"]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(24).astype(np.float32).tolist()
    y = rng.standard_normal(4).astype(np.float32).tolist()
    got = py(f"""
x = put({x}, F32, (4, 3), (1, 8), 0)          # strided (transposed, every other element)
y = put({y}, F32, (4, 3), (1, 0), 0)          # broadcast along dim 1
g, s, sm = new((4, 3)), new((4, 3)), new((4, 3))
kernels.unary(be, "gelu", g, x)
kernels.binary(be, "mul", s, x, y)
kernels.softmax(be, sm, s)
red = new((4, 1))
kernels.reduce(be, "sum", red, View(s.storage, (4, 3, 1), (3, 1, 1), 0, F32))
arg = new((4, 1), I32)
kernels.reduce(be, "argmax", arg, View(s.storage, (4, 3, 1), (3, 1, 1), 0, F32))
[get(g), get(s), get(sm), get(red), get(arg)]
""")
    cx, cy = cpu_view(x, dtypes.float32, (4, 3), (1, 8)), cpu_view(y, dtypes.float32, (4, 3), (1, 0))
    g, s, sm, red, arg = cpu_new((4, 3)), cpu_new((4, 3)), cpu_new((4, 3)), cpu_new((4, 1)), cpu_new((4, 1), dtypes.int32)
    kernels.unary(CPU, "gelu", g, cx)
    kernels.binary(CPU, "mul", s, cx, cy)
    kernels.softmax(CPU, sm, s)
    kernels.reduce(CPU, "sum", red, View(s.storage, (4, 3, 1), (3, 1, 1), 0, dtypes.float32))
    kernels.reduce(CPU, "argmax", arg, View(s.storage, (4, 3, 1), (3, 1, 1), 0, dtypes.float32))
    for got_part, want in zip(got[:4], (g, s, sm, red)):
        np.testing.assert_allclose(got_part, cpu_get(want), rtol=1e-5, atol=1e-6)
    assert got[4] == cpu_get(arg, np.int32).tolist()


def test_mnist_path_and_adam(py):
    # uint8 images selected by index, converted to float on the GPU, matmul, fused loss, Adam.
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, 5 * 784).astype(np.uint8).tolist()
    w = (rng.standard_normal(784 * 10) * 0.05).astype(np.float32).tolist()
    idx, target = [3, 0, 4], [7, 1, 2]
    got = py(f"""
data = put({images}, U8, (1, 5, 784))
batch = new((1, 3, 784), U8)
kernels.index_select(be, batch, data, put({idx}, I32, (3,)))
xf = new((1, 3, 784))
kernels.unary(be, "affine", xf, batch, 1 / 255, 0.0)
logits = new((1, 3, 10))
kernels.matmul(be, logits, xf, put({w}, F32, (1, 784, 10)))
loss, dlogits = new((3,)), new((3, 10))
t = put({target}, I32, (3,))
kernels.cross_entropy(be, loss, logits.reshaped((3, 10)), t)
kernels.cross_entropy_backward(be, dlogits, logits.reshaped((3, 10)), t, put([1 / 3], F32, (3,), (0,)))
[get(batch), get(loss), get(dlogits)]
""")
    cdata = cpu_view(images, dtypes.uint8, (1, 5, 784))
    batch, xf, logits = cpu_new((1, 3, 784), dtypes.uint8), cpu_new((1, 3, 784)), cpu_new((1, 3, 10))
    kernels.index_select(CPU, batch, cdata, cpu_view(idx, dtypes.int32, (3,)))
    kernels.unary(CPU, "affine", xf, batch, 1 / 255, 0.0)
    kernels.matmul(CPU, logits, xf, cpu_view(w, dtypes.float32, (1, 784, 10)))
    loss, dlogits = cpu_new((3,)), cpu_new((3, 10))
    t = cpu_view(target, dtypes.int32, (3,))
    kernels.cross_entropy(CPU, loss, logits.reshaped((3, 10)), t)
    kernels.cross_entropy_backward(CPU, dlogits, logits.reshaped((3, 10)), t, cpu_view([1 / 3], dtypes.float32, (3,), (0,)))
    assert got[0] == cpu_get(batch, np.uint8).tolist()
    np.testing.assert_allclose(got[1], cpu_get(loss), rtol=1e-4)
    np.testing.assert_allclose(got[2], cpu_get(dlogits), rtol=1e-4, atol=1e-6)

    rng = np.random.default_rng(2)
    p, g = rng.standard_normal(300).astype(np.float32).tolist(), rng.standard_normal(300).astype(np.float32).tolist()
    hyper = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False, decoupled=False)
    got = py(f"""
p, g, m, v = put({p}, F32, (300,)), put({g}, F32, (300,)), put([0.0] * 300, F32, (300,)), put([0.0] * 300, F32, (300,))
for t in (1.0, 2.0, 3.0):
    kernels.adam_step(be, p, g, m, v, None, dict({hyper!r}, step=t))
get(p)
""")
    cp, cg = cpu_view(p, dtypes.float32, (300,)), cpu_view(g, dtypes.float32, (300,))
    cm, cv = cpu_view([0.0] * 300, dtypes.float32, (300,)), cpu_view([0.0] * 300, dtypes.float32, (300,))
    for t in (1.0, 2.0, 3.0):
        kernels.adam_step(CPU, cp, cg, cm, cv, None, dict(hyper, step=t))
    np.testing.assert_allclose(got, cpu_get(cp), rtol=1e-5, atol=1e-6)


def test_optimizer_paths_and_row_kernels(py):
    """The optimizer kernels' vec4 path with a partial last vec4, their f32 path (a view at an odd
    offset), and softmax / cross-entropy with a thread per row and with tree reductions (few long
    rows), compiled by Tint and run on SwiftShader."""
    rng = np.random.default_rng(3)
    n = 301
    p, g, b = (rng.standard_normal(n + 1).astype(np.float32).tolist() for _ in range(3))
    sq = (np.abs(rng.standard_normal(n + 1)) + 0.5).astype(np.float32).tolist()
    sgd = dict(lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.01, nesterov=True, maximize=False, first=False)
    rms = dict(lr=0.01, alpha=0.9, eps=1e-8, weight_decay=0.0, momentum=0.5, centered=False, maximize=True)
    got = py(f"""
out = []
for off in (0, 1):  # offset 0: vec4 path (301 = 75 vec4s + 1); offset 1: f32 path
    p, g, b = put({p}, F32, ({n},), None, off), put({g}, F32, ({n},), None, off), put({b}, F32, ({n},), None, off)
    kernels.sgd_step(be, p, g, b, {sgd!r})
    sq, buf = put({sq}, F32, ({n},), None, off), put({b}, F32, ({n},), None, off)
    kernels.rmsprop_step(be, p, g, sq, buf, None, {rms!r})
    out += [get(p), get(b), get(sq), get(buf)]
out
""")
    want = []
    for off in (0, 1):
        cp, cg, cb = (cpu_view(v, dtypes.float32, (n,), None, off) for v in (p, g, b))
        kernels.sgd_step(CPU, cp, cg, cb, sgd)
        csq, cbuf = cpu_view(sq, dtypes.float32, (n,), None, off), cpu_view(b, dtypes.float32, (n,), None, off)
        kernels.rmsprop_step(CPU, cp, cg, csq, cbuf, None, rms)
        want += [cpu_get(cp), cpu_get(cb), cpu_get(csq), cpu_get(cbuf)]
    for got_part, want_part in zip(got, want):
        np.testing.assert_allclose(got_part, want_part, rtol=1e-5, atol=1e-6)

    for rows, cols in ((6, 10), (2, 1500)):  # a thread per row; tree reductions (fewer than 4 long rows)
        x = (rng.standard_normal(rows * cols) * 3).astype(np.float32).tolist()
        t = rng.integers(0, cols, rows).astype(np.int32)
        t[0] = -100
        t = t.tolist()
        got = py(f"""
x, t = put({x}, F32, ({rows}, {cols})), put({t}, I32, ({rows},))
sm, loss, dx = new(({rows}, {cols})), new(({rows},)), new(({rows}, {cols}))
kernels.softmax(be, sm, x, log=True)
kernels.cross_entropy(be, loss, x, t, -100, 0.1)
kernels.cross_entropy_backward(be, dx, x, t, put([0.5], F32, ({rows},), (0,)), -100, 0.1)
[get(sm), get(loss), get(dx)]
""")
        cx, ct = cpu_view(x, dtypes.float32, (rows, cols)), cpu_view(t, dtypes.int32, (rows,))
        sm, loss, dx = cpu_new((rows, cols)), cpu_new((rows,)), cpu_new((rows, cols))
        kernels.softmax(CPU, sm, cx, log=True)
        kernels.cross_entropy(CPU, loss, cx, ct, -100, 0.1)
        kernels.cross_entropy_backward(CPU, dx, cx, ct, cpu_view([0.5], dtypes.float32, (rows,), (0,)), -100, 0.1)
        for got_part, want in zip(got, (sm, loss, dx)):
            np.testing.assert_allclose(got_part, cpu_get(want), rtol=1e-4, atol=1e-6)


def test_random_async_read_capture_replay(py):
    got = py("""
out = new((1000,))
kernels.random(be, out, "normal", 1234, 77, 0.0, 1.0)
first = get(out)
await_read = await be.to_bytes_async(out)
[first[:50], list(struct.unpack("<50f", await_read[:200]))]
""")
    out = cpu_new((1000,))
    kernels.random(CPU, out, "normal", 1234, 77, 0.0, 1.0)
    np.testing.assert_allclose(got[0], cpu_get(out)[:50], rtol=1e-5, atol=1e-6)
    assert got[0] == got[1]
    # capture / replay: the whole graph goes to JavaScript in one call (encode.js submit)
    got = py("""
x = put([1.0, 2.0, 3.0, 4.0], F32, (4,))
lr = be.scalar(0.5)
y = new((4,))
with be.capture() as graph:
    kernels.unary(be, "affine", y, x, lr, 1.0)      # y = x * lr + 1
first = get(y)
be.write(x.storage, struct.pack("<4f", 10, 20, 30, 40))
lr.set(2.0)
submits = be.runtime.stats["submits"]
graph.replay()
second = get(y)
[first, second, be.runtime.stats["submits"] - submits, graph.dispatches]
""")
    assert got[0] == [1.5, 2.0, 2.5, 3.0]
    assert got[1] == [21.0, 41.0, 61.0, 81.0]
    # the replay went out at once in one submit (the GPU starts it while Python goes on), the read-back's
    # copy in one more
    assert got[2] == 2 and got[3] == 1



def test_concurrent_first_use_opens_one_device(run_python):
    # The page's trainer opens the device while the page's console (or a test) may use it too. Two
    # callers racing through the first use (one blocking with run_sync, one awaiting) must end with one
    # runtime, or tensors of one GPUDevice reach kernels of another (a validation error on read-back).
    got = run_python("""
import asyncio
from webgrad._backends.webgpu import runtime as R
R.default_runtime()  # the page's own runtime, opened (or joined) first
saved = R._default_runtime
R._default_runtime = None  # as if nothing were open yet
async def blocking():
    return R.default_runtime()
try:
    a, b, c = await asyncio.gather(blocking(), R.default_runtime_async(), blocking())
    same = a is b is c is R._default_runtime
    fresh = a is not saved
finally:
    R._default_runtime = saved
[same, fresh, R._opening is None]
""")
    assert got == [True, True, True]
