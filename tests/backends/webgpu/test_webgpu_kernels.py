"""Every WebGPU kernel against the CPU backend (the numerical reference), natively through wgpu-py.

One helper drives them all: `run(method, args)` builds the same storages and views on both backends
(inputs with junk around them, at offsets, strided or broadcast with stride 0; outputs pre-filled
with a sentinel), runs the kernel on each and compares every output *storage* in full, so a kernel
that writes outside its view fails too. Floats: |gpu - cpu| <= atol + rtol * |cpu| with rtol 1e-5
(1e-4 for reductions over more than 1k elements); integers and bools: exactly.
"""

import math

import numpy as np
import pytest

pytest.importorskip("wgpu")

from webgrad import dtypes  # noqa: E402
from webgrad._backends.cpu import CPUBackend  # noqa: E402
from webgrad._backends.kernels import RANDOM_DISTS, REDUCE_OPS  # noqa: E402
from webgrad._view import View  # noqa: E402
from webgrad._backends.webgpu import elementwise as ew  # noqa: E402
from webgrad.ops import table  # noqa: E402
from webgrad._backends import kernels  # noqa: E402

# Every kernel of the op table (webgrad/ops/table.py) is tested here: a new record is picked up at once.
UNARY_OPS = tuple(table.UNARY)
UNARY_BACKWARD_OPS = tuple(name for name, op in table.UNARY.items() if op.grad)
BINARY_OPS = tuple(table.BINARY)

F32, I32, U8, BOOL = dtypes.float32, dtypes.int32, dtypes.uint8, dtypes.bool_
NP = {F32: np.float32, I32: np.int32, U8: np.uint8, BOOL: np.bool_}
CPU = CPUBackend()


@pytest.fixture(scope="module")
def gpu():
    from webgrad._backends.webgpu import create_backend

    try:
        return create_backend()
    except RuntimeError as e:  # pragma: no cover - no Vulkan driver on this machine
        pytest.skip(str(e))


# ------------------------------------------------------------------ building views on both backends


class Arg:
    """A view to build identically on both backends: `data` is the whole flat storage."""

    def __init__(self, data, dtype, shape, strides, offset, is_out=False):
        self.data, self.dtype, self.shape, self.strides, self.offset = data, dtype, tuple(shape), tuple(strides), offset
        self.is_out = is_out

    def view(self, be):
        storage = be.from_bytes(np.ascontiguousarray(self.data, NP[self.dtype]).tobytes(), self.dtype)
        return View(storage, self.shape, self.strides, self.offset, self.dtype)


def values(rng, dtype, n, domain="any"):
    if dtype is F32:
        if domain == "pos":
            return rng.uniform(0.3, 3.0, n).astype(np.float32)
        if domain == "away":
            return (rng.uniform(0.5, 2.0, n) * rng.choice([-1, 1], n)).astype(np.float32)
        if domain == "byte":
            return rng.uniform(0, 255, n).astype(np.float32)
        return (rng.standard_normal(n) * 2).astype(np.float32)
    if dtype is I32:
        return rng.integers(0 if domain in ("pos", "byte") else -50, 50, n).astype(np.int32) + (domain == "pos")
    if dtype is U8:
        return rng.integers(0, 256, n).astype(np.uint8)
    return rng.integers(0, 2, n).astype(np.bool_)


def make(rng, dtype, shape, layout="contiguous", domain="any", out=False):
    """An Arg of `shape` laid out as: contiguous, offset (inside a bigger storage), strided (transposed,
    every other element), broadcast (stride 0 along the first dim, or all dims for 1-D)."""
    shape = tuple(shape)
    n = math.prod(shape)
    if layout == "contiguous":
        size, strides, offset = n, View.contiguous_strides(shape), 0
    elif layout == "offset":
        size, strides, offset = n + 11, View.contiguous_strides(shape), 7
    elif layout == "aligned":  # contiguous at an offset that is a multiple of 4
        size, strides, offset = n + 13, View.contiguous_strides(shape), 8
    elif layout == "strided":
        # Storage is the reversed shape with the innermost dim doubled; the view walks it transposed.
        rev = list(shape[::-1])
        rev[-1] *= 2
        cs = View.contiguous_strides(rev)
        strides = tuple(cs[len(shape) - 1 - i] * (2 if i == 0 and len(shape) > 1 else 1) for i in range(len(shape)))
        if len(shape) == 1:
            strides = (2,)
        size, offset = math.prod(rev) + 3, 3
    elif layout == "rows4":  # rows of a wider row-major storage (a slice of its last dim), all in multiples of 4
        padded = shape[:-1] + (shape[-1] + 4,)
        size, strides, offset = math.prod(padded) + 8, View.contiguous_strides(padded), 4
    elif layout == "broadcast":
        kept = (1,) + shape[1:] if len(shape) > 1 else (1,)
        cs = View.contiguous_strides(kept)
        strides = (0,) + tuple(cs[1:]) if len(shape) > 1 else (0,)
        size, offset = math.prod(kept) + 2, 2
    else:
        raise ValueError(layout)
    data = values(rng, dtype, size, domain)
    if out:  # sentinel everywhere, so writes outside the view show
        data = np.full(size, {F32: -777.0, I32: -777, U8: 77, BOOL: True}[dtype], NP[dtype])
    return Arg(data, dtype, shape, strides, offset, out)


def full_view(be, view):
    """A contiguous view over the whole storage of `view` (to compare everything)."""
    n = view.storage.numel if hasattr(view.storage, "numel") else view.storage.size
    return View(view.storage, (n,), (1,), 0, view.dtype)


def run(gpu, method, args, kwargs=None, rtol=1e-5, atol=1e-6):
    """Call `method` on both backends with the Args built into views; compare the outputs' storages."""
    kwargs = kwargs or {}
    results = []
    for be in (gpu, CPU):
        built = [a.view(be) if isinstance(a, Arg) else a for a in args]
        kernels.REGISTRY[method](be, *built, **kwargs)
        outs = [v for a, v in zip(args, built) if isinstance(a, Arg) and a.is_out]
        results.append([np.frombuffer(be.to_bytes(full_view(be, v)), NP[v.dtype]) for v in outs])
    for got, want in zip(*results):
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(got, want)


def reference_unary(op, x, a=0.0, b=0.0, out_dtype=F32):
    """y = op(x) on the CPU, for backward tests."""
    vx = View(CPU.from_bytes(x.astype(np.float32).tobytes(), F32), x.shape, View.contiguous_strides(x.shape), 0, F32)
    vy = View(CPU.empty(x.size, out_dtype), x.shape, View.contiguous_strides(x.shape), 0, out_dtype)
    kernels.unary(CPU, op, vy, vx, a, b)
    return np.frombuffer(CPU.to_bytes(vy), NP[out_dtype]).reshape(x.shape)


SHAPES = [(1,), (3,), (127,), (1025,), (4, 33), (2, 3, 5), (7, 1, 9)]
LAYOUTS = ["contiguous", "offset", "strided", "broadcast"]
OUT_LAYOUTS = ["contiguous", "offset", "strided"]


def cases(seed):
    """A few (shape, input layout, output layout) triples, different for each op (by seed)."""
    rng = np.random.default_rng(seed)
    picks = [(SHAPES[(seed + i) % len(SHAPES)], LAYOUTS[(seed + i) % 4], OUT_LAYOUTS[(seed + 2 * i) % 3]) for i in range(3)]
    picks.append(((1025,), "contiguous", "contiguous"))  # the contiguous fast path
    picks.append(((3, 132), "aligned", "aligned"))  # the vec4 entry points (f32/i32, offsets and n multiples of 4)
    picks.append(((2, 3, 8), "rows4", "rows4"))  # their strided twins (innermost dim contiguous, all multiples of 4)
    return rng, picks


# ------------------------------------------------------------------ elementwise

UNARY_DOMAIN = {**{name: op.test for name, op in table.UNARY.items() if op.test != "normal"},
                "rdiv": "away", "pow": "pos"}
UNARY_SCALARS = {
    "softplus": (1.5, 2.0), "leaky_relu": (0.1, 0.0), "clamp": (-0.5, 0.7), "affine": (1.5, -2.0),
    "rdiv": (2.0, 0.0), "hardtanh": (-0.5, 0.7), "elu": (0.7, 0.0), "celu": (1.5, 0.0), "pow": (2.5, 0.0), "rpow": (1.7, 0.0),
    "eq": (0.0, 0.0), "ne": (0.0, 0.0), "lt": (0.25, 0.0), "le": (0.25, 0.0), "gt": (-0.25, 0.0), "ge": (-0.25, 0.0),
}
BOOL_UNARY = tuple(name for name, op in table.UNARY.items() if op.result == table.BOOL)
INT_EXACT_UNARY = tuple(name for name, op in table.UNARY.items() if op.int_exact and op.result != table.BOOL and name != "pow")


@pytest.mark.parametrize("op", UNARY_OPS)
def test_unary_float(gpu, op):
    rng, picks = cases(UNARY_OPS.index(op))
    a, b = UNARY_SCALARS.get(op, (0.0, 0.0))
    out_dtype = BOOL if op in BOOL_UNARY else F32
    for shape, layout, out_layout in picks:
        x = make(rng, F32, shape, layout, UNARY_DOMAIN.get(op, "any"))
        if op == "eq":
            x.data[::3] = 0.0  # some exact hits
        out = make(rng, out_dtype, shape, out_layout, out=True)
        run(gpu, "unary", [op, out, x, a, b])


@pytest.mark.parametrize("op", INT_EXACT_UNARY + BOOL_UNARY + ("pow",))
def test_unary_int(gpu, op):
    rng, picks = cases(3 + UNARY_OPS.index(op))
    a, b = {"clamp": (-7, 9), "affine": (3, -11), "pow": (3, 0)}.get(op, (2, 0))
    for shape, layout, out_layout in picks[:2]:
        x = make(rng, I32, shape, layout)
        out = make(rng, BOOL if op in BOOL_UNARY else I32, shape, out_layout, out=True)
        run(gpu, "unary", [op, out, x, a, b])


def test_unary_int_clamp_unbounded(gpu):
    # (clamp's parameters: +-inf means "no bound".) (Checked against NumPy directly: the CPU backend's int path
    # calls int(-inf).)
    x = np.arange(-20, 21, dtype=np.int32)
    s = gpu.from_bytes(x.tobytes(), I32)
    v = View(s, x.shape, (1,), 0, I32)
    kernels.unary(gpu, "clamp", v, v, -math.inf, 4)
    assert np.frombuffer(gpu.to_bytes(v), np.int32).tolist() == np.minimum(x, 4).tolist()


@pytest.mark.parametrize("dtype", [U8, BOOL, I32])
def test_unary_affine_from_integer_to_float(gpu, dtype):
    # uint8 images become float32 on the GPU: affine(x, 1/255, 0) reading the packed bytes.
    rng = np.random.default_rng(1)
    for shape, layout in (((784,), "offset"), ((5, 7), "strided"), ((3, 3), "broadcast")):
        run(gpu, "unary", ["affine", make(rng, F32, shape, "offset", out=True), make(rng, dtype, shape, layout), 1 / 255, 0.5])
    # contiguous and 4-aligned on both sides: uint8 words in, vec4s out (unary_from_u8x4)
    run(gpu, "unary", ["affine", make(rng, F32, (6, 12), "aligned", out=True), make(rng, dtype, (6, 12), "aligned"), 1 / 255, -0.25])


def test_unary_special_values(gpu):
    x = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 88.0, -88.0, 100.0, -100.0], np.float32)
    for op in ("exp", "log", "sqrt", "sign", "sigmoid", "tanh", "gelu", "gelu_tanh", "silu", "relu", "abs", "isnan",
               "isinf", "floor", "round", "softplus"):
        out_dtype = BOOL if op in BOOL_UNARY else F32
        ab = (1.0, 20.0) if op == "softplus" else (0.0, 0.0)
        run(gpu, "unary", [op, Arg(np.zeros(x.size, NP[out_dtype]), out_dtype, x.shape, (1,), 0, True),
                           Arg(x, F32, x.shape, (1,), 0), *ab], atol=1e-6)


def test_unary_wide_range_transcendentals(gpu):
    # sin/cos well outside [-pi, pi], exp/tanh over their whole useful range, erf-based gelu tails.
    x = np.linspace(-60, 60, 4001).astype(np.float32)
    for op in ("sin", "cos", "tanh", "sigmoid", "gelu", "gelu_tanh", "silu", "exp", "softplus"):
        run(gpu, "unary", [op, Arg(np.zeros(x.size, np.float32), F32, x.shape, (1,), 0, True), Arg(x, F32, x.shape, (1,), 0),
                           1.0, 20.0], rtol=2e-6 if op != "exp" else 1e-5, atol=1e-6)


@pytest.mark.parametrize("op", UNARY_BACKWARD_OPS)
def test_unary_backward(gpu, op):
    rng, picks = cases(UNARY_BACKWARD_OPS.index(op))
    a, b = UNARY_SCALARS.get(op, (0.0, 0.0))
    for shape, layout, out_layout in picks:
        n = math.prod(shape)
        xs = values(rng, F32, n, UNARY_DOMAIN.get(op, "away" if op in ("abs", "relu", "leaky_relu", "clamp") else "any")).reshape(shape)
        ys = reference_unary(op, xs, a, b)
        grad = make(rng, F32, shape, layout)
        x = Arg(xs.ravel(), F32, shape, View.contiguous_strides(shape), 0)
        y = Arg(ys.ravel(), F32, shape, View.contiguous_strides(shape), 0)
        out = make(rng, F32, shape, out_layout, out=True)
        run(gpu, "unary_backward", [op, out, grad, x, y, a, b], rtol=1e-5, atol=1e-5)


BINARY_DOMAIN = {"div": ("any", "away"), "floor_divide": ("any", "away"), "pow": ("pos", "any"), "hypot": ("away", "away"), "atan2": ("any", "away")}
BOOL_BINARY = ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor")
INT_BINARY = ("add", "sub", "mul", "minimum", "maximum", "eq", "ne", "lt", "le", "gt", "ge")


@pytest.mark.parametrize("op", BINARY_OPS)
def test_binary_float(gpu, op):
    rng, picks = cases(BINARY_OPS.index(op))
    dx, dy = BINARY_DOMAIN.get(op, ("any", "any"))
    for shape, layout, out_layout in picks:
        x = make(rng, F32, shape, layout, dx)
        y = make(rng, F32, shape, LAYOUTS[(LAYOUTS.index(layout) + 1) % 4] if layout in LAYOUTS else layout, dy)
        if op in ("eq", "ne", "le", "ge", "minimum", "maximum"):
            k = min(len(x.data), len(y.data)) // 2
            y.data[:k] = x.data[:k]  # some equal pairs
        out = make(rng, BOOL if op in BOOL_BINARY else F32, shape, out_layout, out=True)
        run(gpu, "binary", [op, out, x, y])


def test_strided_vec4_entry_points(gpu, monkeypatch):
    # a split's piece copied into its slice of a wider gradient, a transposed head layout, a broadcast operand:
    # the strided vec4 twins where every operand's innermost dim is contiguous and the rest is in multiples of 4,
    # the one-element walk where it is not
    entries = []
    prepare = ew._prepare
    monkeypatch.setattr(ew, "_prepare", lambda *a: entries.append(prepare(*a).kernel.entry) or prepare(*a))
    rng = np.random.default_rng(21)
    src = make(rng, F32, (2, 5, 12), "contiguous")
    dst = Arg(np.full(2 * 5 * 36 + 8, -777.0, np.float32), F32, (2, 5, 12), (180, 36, 1), 16, is_out=True)
    run(gpu, "copy", [dst, src])
    heads = Arg(values(rng, F32, 2 * 3 * 4 * 8), F32, (2, 4, 3, 8), (96, 8, 32, 1), 0)  # [B, H, T, hs] of [B, T, H, hs]
    run(gpu, "binary", ["mul", make(rng, F32, (2, 4, 3, 8), "contiguous", out=True), heads,
                        Arg(values(rng, F32, 8), F32, (2, 4, 3, 8), (0, 0, 0, 1), 0)])
    grads = [make(rng, F32, (3, 2, 8), "rows4", out=k == 0) for k in range(4)]  # out, grad, x, y
    run(gpu, "unary_backward", ["tanh", *grads])
    assert entries == ["unary4s", "binary4s", "unary_backward4s"]
    entries.clear()
    narrow = Arg(values(rng, F32, 40), F32, (5, 6), (8, 1), 2)
    run(gpu, "copy", [make(rng, F32, (5, 6), "contiguous", out=True), narrow])
    run(gpu, "copy", [make(rng, F32, (5, 8), "contiguous", out=True), make(rng, F32, (5, 8), "strided")])
    assert entries == ["unary", "unary"]  # a row of 6; a transposed innermost dim


@pytest.mark.parametrize("op", ("add", "mul", "floordiv", "max"))
def test_vec4_entry_points_integers_and_in_place(gpu, op):
    # unary4 / binary4 in integer math, and in place (the operand read through out's vec4 view)
    rng = np.random.default_rng(20)
    x, y = make(rng, I32, (4, 12), "aligned"), make(rng, I32, (4, 12), "aligned", "pos")
    if op in BINARY_OPS:
        run(gpu, "binary", [op, make(rng, I32, (4, 12), "aligned", out=True), x, y])
    run(gpu, "unary", ["affine", make(rng, I32, (4, 12), "aligned", out=True), x, 3, -2])
    s = gpu.from_bytes(np.arange(-8, 8, dtype=np.float32).tobytes(), F32)
    v = View(s, (3, 4), (4, 1), 4, F32)
    kernels.unary(gpu, "relu", v, v, 0.0, 0.0)
    kernels.binary(gpu, "mul", v, v, v)
    want = np.arange(-8, 8, dtype=np.float32)
    want[4:] = np.maximum(want[4:], 0) ** 2
    assert np.frombuffer(gpu.to_bytes(View(s, (16,), (1,), 0, F32)), np.float32).tolist() == want.tolist()


@pytest.mark.parametrize("op", INT_BINARY + ("pow", "div", "floor_divide"))
def test_binary_int(gpu, op):
    rng, picks = cases(7 + BINARY_OPS.index(op))
    for shape, layout, out_layout in picks[:2]:
        x = make(rng, I32, shape, layout)
        y = make(rng, I32, shape, "broadcast" if layout != "broadcast" else "offset", "pos" if op in ("pow", "div") else "any")
        if op == "pow":
            x.data %= 7
            y.data %= 6
        out_dtype = BOOL if op in BOOL_BINARY else F32 if op == "div" else I32
        run(gpu, "binary", [op, make(rng, out_dtype, shape, out_layout, out=True), x, y])


def test_binary_int_wraps_like_int32(gpu):
    x = np.array([2**31 - 1, -(2**31), 123456789, -5], np.int32)
    y = np.array([1, -1, 1000, 7], np.int32)
    for op in ("add", "sub", "mul"):
        run(gpu, "binary", [op, Arg(np.zeros(4, np.int32), I32, (4,), (1,), 0, True), Arg(x, I32, (4,), (1,), 0), Arg(y, I32, (4,), (1,), 0)])


@pytest.mark.parametrize("op", ("logical_and", "logical_or", "logical_xor", "eq", "ne"))
def test_binary_bool(gpu, op):
    rng = np.random.default_rng(5)
    for shape, layout in (((1025,), "offset"), ((4, 33), "strided"), ((2, 3, 5), "broadcast")):
        run(gpu, "binary", [op, make(rng, BOOL, shape, "offset", out=True), make(rng, BOOL, shape, layout), make(rng, BOOL, shape)])


def test_binary_uint8_out(gpu):
    rng = np.random.default_rng(6)
    for shape, out_layout in (((1025,), "offset"), ((4, 33), "strided")):
        run(gpu, "binary", ["add", make(rng, U8, shape, out_layout, out=True), make(rng, U8, shape), make(rng, U8, shape, "broadcast")])


def test_atan2_quadrants_and_zeros(gpu):
    y = np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 1.0, -1.0, 3.0, -1e-3, 5.0, 0.2], np.float32)
    x = np.array([0.0, 0.0, -0.0, -0.0, 1.0, 1.0, -1.0, -1.0, 0.0, -2.0, 1e-4, 7.0], np.float32)
    n = y.size
    run(gpu, "binary", ["atan2", Arg(np.zeros(n, np.float32), F32, (n,), (1,), 0, True), Arg(y, F32, (n,), (1,), 0),
                        Arg(x, F32, (n,), (1,), 0)], atol=1e-7)


def test_in_place_binary_and_unary(gpu):
    rng = np.random.default_rng(7)
    for be in (gpu,):
        data = values(rng, F32, 40)
        s = be.from_bytes(data.tobytes(), F32)
        v = View(s, (40,), (1,), 0, F32)
        kernels.binary(be, "add", v, v, v)  # out aliases both inputs
        kernels.unary(be, "affine", v, v, 2.0, 1.0)
        np.testing.assert_allclose(np.frombuffer(be.to_bytes(v), np.float32), (data + data) * 2 + 1, rtol=1e-6)
        # Overlapping but different views of one storage: read through a copy.
        s2 = be.from_bytes(np.arange(10, dtype=np.float32).tobytes(), F32)
        kernels.copy(be, View(s2, (9,), (1,), 1, F32), View(s2, (9,), (1,), 0, F32))
        assert np.frombuffer(be.to_bytes(View(s2, (10,), (1,), 0, F32)), np.float32).tolist() == [0, 0, 1, 2, 3, 4, 5, 6, 7, 8]


@pytest.mark.parametrize("dtype", [F32, I32, U8, BOOL])
def test_where(gpu, dtype):
    rng = np.random.default_rng(8)
    for shape, layout, out_layout in (((1025,), "contiguous", "contiguous"), ((4, 33), "strided", "offset"), ((2, 3, 5), "broadcast", "strided")):
        run(gpu, "where", [make(rng, dtype, shape, out_layout, out=True), make(rng, BOOL, shape, layout),
                           make(rng, dtype, shape, "offset"), make(rng, dtype, shape, "broadcast")])


@pytest.mark.parametrize("dtype", [F32, I32, U8, BOOL])
def test_fill(gpu, dtype):
    rng = np.random.default_rng(9)
    value = {F32: -3.25, I32: -123456, U8: 201, BOOL: True}[dtype]
    for shape, layout in (((1,), "contiguous"), ((1025,), "offset"), ((4, 33), "strided"), ((5,), "offset")):
        run(gpu, "fill", [make(rng, dtype, shape, layout, out=True), value])


@pytest.mark.parametrize("src", [F32, I32, U8, BOOL])
@pytest.mark.parametrize("dst", [F32, I32, U8, BOOL])
def test_copy_between_dtypes(gpu, src, dst):
    rng = np.random.default_rng(10)
    for shape, layout, out_layout in (((1025,), "contiguous", "contiguous"), ((4, 33), "strided", "offset"), ((3, 5), "broadcast", "strided")):
        x = make(rng, src, shape, layout, "byte" if dst is U8 else "any")
        run(gpu, "copy", [make(rng, dst, shape, out_layout, out=True), x])


# ------------------------------------------------------------------ memory


@pytest.mark.parametrize("dtype", [F32, I32, U8, BOOL])
def test_bytes_round_trip(gpu, dtype):
    rng = np.random.default_rng(11)
    for n in (1, 3, 4, 5, 127, 1025):
        data = values(rng, dtype, n)
        s = gpu.from_bytes(data.tobytes(), dtype)
        assert gpu.to_bytes(View(s, (n,), (1,), 0, dtype)) == data.tobytes()
        if n > 2:  # offset and strided reads convert on the GPU
            assert gpu.to_bytes(View(s, (n - 2,), (1,), 1, dtype)) == data[1:-1].tobytes()
            assert gpu.to_bytes(View(s, ((n + 1) // 2,), (2,), 0, dtype)) == data[::2].tobytes()


def test_write_updates_part_of_a_storage(gpu):
    s = gpu.from_bytes(np.zeros(10, np.float32).tobytes(), F32)
    gpu.write(s, np.array([1, 2, 3], np.float32).tobytes(), offset=4)
    assert np.frombuffer(gpu.to_bytes(View(s, (10,), (1,), 0, F32)), np.float32).tolist() == [0, 0, 0, 0, 1, 2, 3, 0, 0, 0]


# ------------------------------------------------------------------ reductions

REDUCE_SHAPES = [(1, 1, 1), (3, 127, 1), (2, 1025, 3), (4, 7, 64), (1, 5000, 1), (5, 3, 2), (2, 300, 40)]


@pytest.fixture(params=["gpu", "software"])
def adapter_kind(request, gpu, monkeypatch):
    """Kernel families plan for a GPU or for a software adapter (Runtime.software), whichever adapter
    runs the test: "software" takes reduce.split's one thread per output, conv_pool.wgsl's row kernels,
    the thread-per-row softmax / cross-entropy kernels and many vec4s per optimizer thread; "gpu" the
    tree kernels, per-element kernels and one vec4 per optimizer thread."""
    monkeypatch.setattr(gpu.runtime, "software", request.param == "software")
    return request.param


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("dtype", [F32, I32])
def test_reduce(gpu, adapter_kind, op, dtype):
    rng = np.random.default_rng(REDUCE_OPS.index(op))
    for shape in REDUCE_SHAPES:
        outer, size, inner = shape
        x = make(rng, dtype, shape, "offset" if size % 2 else "contiguous")
        if op == "prod":
            x.data = (rng.uniform(0.9, 1.1, x.data.size) if dtype is F32 else rng.integers(-1, 2, x.data.size)).astype(NP[dtype])
        if dtype is I32:
            x.data %= 5  # many ties: argmax/argmin must keep the first
        out_dtype = I32 if op.startswith("arg") else dtype
        run(gpu, "reduce", [op, make(rng, out_dtype, (outer, inner), "offset", out=True), x],
            rtol=1e-4 if size > 1000 else 1e-5, atol=1e-4 if size > 1000 else 1e-5)


@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
def test_reduce_nan_and_bool(gpu, op):
    x = np.array([1.0, np.nan, 3.0, np.nan, -1.0, 2.0], np.float32)
    out_dtype = I32 if op.startswith("arg") else F32
    run(gpu, "reduce", [op, Arg(np.zeros(2, NP[out_dtype]), out_dtype, (2, 1), (1, 1), 0, True), Arg(x, F32, (2, 3, 1), (3, 1, 1), 0)])
    b = np.array([0, 1, 1, 0, 0, 0], np.bool_)
    out_dtype = I32 if op.startswith("arg") else BOOL
    run(gpu, "reduce", [op, Arg(np.zeros(2, NP[out_dtype]), out_dtype, (2, 1), (1, 1), 0, True), Arg(b, BOOL, (2, 3, 1), (3, 1, 1), 0)])


def test_reduce_long_row_two_pass(gpu, adapter_kind):
    rng = np.random.default_rng(12)
    x = rng.standard_normal(200_003).astype(np.float32)
    x[123_457] = 50.0
    for op in ("sum", "max", "argmax"):
        out_dtype = I32 if op == "argmax" else F32
        run(gpu, "reduce", [op, Arg(np.zeros(1, NP[out_dtype]), out_dtype, (1, 1), (1, 1), 0, True),
                            Arg(x, F32, (1, x.size, 1), (x.size, 1, 1), 0)], rtol=1e-4, atol=1e-3)


# ------------------------------------------------------------------ softmax and cross-entropy

ROW_SHAPES = [(1, 1), (3, 10), (130, 10), (70, 300), (5, 1025), (2, 3000)]


@pytest.mark.parametrize("log", [False, True])
def test_softmax_and_backward(gpu, adapter_kind, log):
    rng = np.random.default_rng(13)
    for shape in ROW_SHAPES:
        x = make(rng, F32, shape, "offset")
        run(gpu, "softmax", [make(rng, F32, shape, "offset", out=True), x], {"log": log}, atol=1e-6)
        rows = math.prod(shape)
        y = make(rng, F32, shape, "contiguous")
        y.data = (rng.uniform(0, 1, rows) if not log else -rng.uniform(0, 5, rows)).astype(np.float32)
        run(gpu, "softmax_backward", [make(rng, F32, shape, "contiguous", out=True), make(rng, F32, shape, "offset"), y],
            {"log": log}, atol=1e-5)


def test_softmax_extreme_logits(gpu, adapter_kind):
    x = np.array([[1e4, -1e4, 0.0, 1e4 - 1.0], [-1e4, -1e4, -1e4, -1e4 + 3.0]], np.float32)
    for log in (False, True):
        run(gpu, "softmax", [Arg(np.zeros(8, np.float32), F32, (2, 4), (4, 1), 0, True), Arg(x.ravel(), F32, (2, 4), (4, 1), 0)], {"log": log})


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy(gpu, adapter_kind, smoothing):
    rng = np.random.default_rng(14)
    for rows, classes in ((1, 10), (7, 10), (130, 10), (130, 1), (70, 300), (5, 1025), (3, 1025)):
        logits = make(rng, F32, (rows, classes), "offset")
        logits.data *= 3
        t = rng.integers(0, classes, 2 * rows + 1).astype(np.int32)
        t[1::6] = -100  # ignored rows
        target = Arg(t, I32, (rows,), (2,), 1)  # strided
        kw = {"ignore_index": -100, "label_smoothing": smoothing}
        run(gpu, "cross_entropy", [make(rng, F32, (rows,), "offset", out=True), logits, target], kw, atol=1e-5)
        grad = make(rng, F32, (rows,), "broadcast")  # the same upstream gradient for every row (mean)
        run(gpu, "cross_entropy_backward", [make(rng, F32, (rows, classes), "offset", out=True), logits, target, grad], kw, atol=1e-6)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_mean(gpu, adapter_kind, smoothing):
    """reduction="mean" as (mean, count): one workgroup for small problems (more rows than its 256 threads
    too), per-row pairs + sums + a division past softmax_loss.MEAN_MAX_ELEMENTS; every row ignored gives
    NaN and a count of 0, as PyTorch; out at an offset."""
    from webgrad._backends.webgpu import softmax_loss

    rng = np.random.default_rng(21)
    large = softmax_loss.MEAN_MAX_ELEMENTS // 300 + 1
    for rows, classes in ((1, 10), (130, 10), (1000, 10), (3, 1025), (large, 300), (6, 4)):
        logits = make(rng, F32, (rows, classes), "offset")
        logits.data *= 3
        t = rng.integers(0, classes, 2 * rows + 1).astype(np.int32)
        t[1::6] = -100  # ignored rows
        if classes == 4:
            t[:] = -100  # all of them
        target = Arg(t, I32, (rows,), (2,), 1)
        kw = {"ignore_index": -100, "label_smoothing": smoothing}
        run(gpu, "cross_entropy_mean", [make(rng, F32, (2,), "offset", out=True), logits, target], kw, rtol=2e-5,
            atol=1e-5)


def test_cross_entropy_mean_is_one_dispatch_and_reports_bad_targets(gpu, adapter_kind):
    rt = gpu.runtime
    rows, classes = 300, 10
    rng = np.random.default_rng(22)
    logits = View(gpu.from_bytes(values(rng, F32, rows * classes).tobytes(), F32), (rows, classes), (classes, 1), 0, F32)
    t = rng.integers(0, classes, rows).astype(np.int32)
    out = View(gpu.empty(2, F32), (2,), (1,), 0, F32)
    before = rt.stats["dispatches"]
    kernels.cross_entropy_mean(gpu, out, logits, View(gpu.from_bytes(t.tobytes(), I32), (rows,), (1,), 0, I32))
    assert rt.stats["dispatches"] - before == 1
    assert np.frombuffer(gpu.to_bytes(out), np.float32)[1] == rows
    t[257] = classes  # a thread's second row
    kernels.cross_entropy_mean(gpu, out, logits, View(gpu.from_bytes(t.tobytes(), I32), (rows,), (1,), 0, I32))
    with pytest.raises(IndexError, match=r"cross_entropy: target 10 is out of bounds for 10 classes"):
        gpu.to_bytes(out)


def test_cross_entropy_ignore_index_is_a_class(gpu, adapter_kind):
    """ignore_index may name a real class: those rows give 0 and a zero gradient, the others count it."""
    rng = np.random.default_rng(15)
    for rows, classes in ((9, 5), (6, 1500)):
        logits = make(rng, F32, (rows, classes), "contiguous")
        target = Arg(rng.integers(0, classes, rows).astype(np.int32), I32, (rows,), (1,), 0)
        target.data[::3] = 2
        kw = {"ignore_index": 2, "label_smoothing": 0.2}
        run(gpu, "cross_entropy", [make(rng, F32, (rows,), "offset", out=True), logits, target], kw, atol=1e-5)
        grad = make(rng, F32, (rows,), "contiguous")
        run(gpu, "cross_entropy_backward", [make(rng, F32, (rows, classes), "contiguous", out=True), logits, target, grad], kw, atol=1e-6)


def test_cross_entropy_bad_target_raises_at_the_read_back(gpu, adapter_kind):
    """A target outside [0, C) (other than ignore_index) is reported through the runtime's error word at
    the next read-back (the GPU cannot raise), naming the first bad value; ignored rows give 0."""
    rows, classes = 4, 10
    rng = np.random.default_rng(16)
    logits = View(gpu.from_bytes(values(rng, F32, rows * classes).tobytes(), F32), (rows, classes), (classes, 1), 0, F32)
    target = View(gpu.from_bytes(np.array([-5, classes, 3, -100], np.int32).tobytes(), I32), (rows,), (1,), 0, I32)
    out = View(gpu.empty(rows, F32), (rows,), (1,), 0, F32)
    kernels.cross_entropy(gpu, out, logits, target, ignore_index=-100, label_smoothing=0.1)
    with pytest.raises(IndexError, match=r"cross_entropy: target (-5|10) is out of bounds for 10 classes"):
        gpu.to_bytes(out)
    good = View(gpu.from_bytes(np.array([0, 9, 3, -100], np.int32).tobytes(), I32), (rows,), (1,), 0, I32)
    kernels.cross_entropy(gpu, out, logits, good, ignore_index=-100, label_smoothing=0.1)
    loss = np.frombuffer(gpu.to_bytes(out), np.float32)
    assert np.isfinite(loss[:3]).all() and loss[3] == 0.0


# ------------------------------------------------------------------ indexing


@pytest.mark.parametrize("dtype", [F32, I32, U8, BOOL])
def test_index_select_and_gather(gpu, dtype):
    rng = np.random.default_rng(15)
    for (outer, size, inner), k in (((1, 10, 1), 4), ((3, 7, 5), 9), ((2, 5, 784), 3), ((1, 1000, 8), 130)):
        x = make(rng, dtype, (outer, size, inner), "offset" if inner % 4 else "contiguous")
        idx = Arg(rng.integers(0, size, k + 2).astype(np.int32), I32, (k,), (1,), 2)  # negatives: test_bounds.py
        run(gpu, "index_select", [make(rng, dtype, (outer, k, inner), "contiguous", out=True), x, idx])
        gidx = Arg(rng.integers(0, size, outer * k * inner).astype(np.int32), I32, (outer, k, inner), View.contiguous_strides((outer, k, inner)), 0)
        run(gpu, "gather", [make(rng, dtype, (outer, k, inner), "contiguous", out=True), x, gidx])


@pytest.mark.parametrize("dtype", [F32, I32])
def test_index_backward_scatter_add(gpu, dtype):
    rng = np.random.default_rng(16)
    for (outer, size, inner), k in (((1, 10, 1), 40), ((3, 7, 5), 9), ((2, 50, 16), 300)):
        grad = make(rng, dtype, (outer, k, inner), "offset")
        idx = Arg(rng.integers(0, size, k).astype(np.int32), I32, (k,), (1,), 0)  # with repeats
        run(gpu, "index_select_backward", [make(rng, dtype, (outer, size, inner), "offset", out=True), grad, idx], atol=1e-5)
        gidx = Arg(rng.integers(0, size, outer * k * inner).astype(np.int32), I32, (outer, k, inner), View.contiguous_strides((outer, k, inner)), 0)
        run(gpu, "gather_backward", [make(rng, dtype, (outer, size, inner), "contiguous", out=True), grad, gidx], atol=1e-5)


# ------------------------------------------------------------------ random numbers


@pytest.mark.parametrize("dist", RANDOM_DISTS)
def test_random_matches_cpu_stream(gpu, dist):
    a, b = {"uniform": (-2.0, 3.0), "normal": (1.0, 2.0), "randint": (-5.0, 1000.0)}[dist]
    out_dtype = I32 if dist == "randint" else F32
    for n, seed, offset in ((1, 0, 0), (1025, 1234, 17), (4097, 2**32 - 1, 2**32 - 100)):
        out = Arg(np.zeros(n + 3, NP[out_dtype]), out_dtype, (n,), (1,), 3, True)
        run(gpu, "random", [out, dist, seed, offset, a, b], atol=1e-5)


def test_random_uint8(gpu):
    run(gpu, "random", [Arg(np.zeros(130, np.uint8), U8, (127,), (1,), 3, True), "randint", 7, 5, 0.0, 256.0])


# ------------------------------------------------------------------ matmul


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul(gpu, trans_a, trans_b):
    rng = np.random.default_rng(17)
    for batch, M, N, K, bias, relu, bcast in ((1, 1, 1, 1, False, False, False), (2, 33, 17, 65, True, True, False),
                                              (3, 8, 12, 4, True, False, True), (1, 128, 10, 784, True, False, False)):
        a_shape = (batch, K, M) if trans_a else (batch, M, K)
        b_shape = (batch, N, K) if trans_b else (batch, K, N)
        a = make(rng, F32, a_shape, "offset")
        b = make(rng, F32, b_shape, "offset")
        if bcast:  # one matrix for every batch entry
            b = Arg(values(rng, F32, math.prod(b_shape[1:])), F32, b_shape, (0,) + View.contiguous_strides(b_shape[1:]), 0)
        args = [make(rng, F32, (batch, M, N), "offset", out=True), a, b, trans_a, trans_b,
                make(rng, F32, (N,), "offset") if bias else None, relu]
        # Summation order differs between tile configurations: allow float32 rounding of K terms of
        # size ~4 (inputs are ~N(0, 4)); a wrong element is off by O(10).
        run(gpu, "matmul", args, rtol=1e-5, atol=1.2e-5 * K)


# ------------------------------------------------------------------ convolution and pooling

CONV_GEOMETRIES = [  # (N, C, H, W), kernel, stride, padding, dilation
    ((2, 3, 7, 6), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((1, 2, 9, 9), (3, 2), (2, 1), (0, 1), (2, 1)),
    ((3, 1, 28, 28), (2, 2), (2, 2), (0, 0), (1, 1)),
    ((2, 2, 11, 10), (2, 3), (3, 3), (1, 1), (1, 1)),  # windows with gaps between them, padded
    ((2, 2, 7, 9), (2, 2), (2, 2), (0, 0), (1, 1)),  # MaxPool2d(2) over odd sizes (the 2x2 fast path)
]


def _out_hw(H, W, k, s, p, d):
    return (H + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1, (W + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1


def _needs_cpu(method):
    if "cpu" not in kernels.REGISTRY[method].impls:
        pytest.fail(f"the CPU reference has no {method} yet")


def test_im2col_col2im(gpu, adapter_kind):  # software: im2col_rows, a thread per row
    _needs_cpu("im2col")
    rng = np.random.default_rng(18)
    for (N, C, H, W), k, s, p, d in CONV_GEOMETRIES:
        OH, OW = _out_hw(H, W, k, s, p, d)
        cols = (N, C * k[0] * k[1], OH * OW)
        run(gpu, "im2col", [make(rng, F32, cols, "offset", out=True), make(rng, F32, (N, C, H, W), "offset"), k, s, p, d])
        run(gpu, "col2im", [make(rng, F32, (N, C, H, W), "offset", out=True), make(rng, F32, cols, "offset"), k, s, p, d], atol=1e-5)


def test_pooling(gpu, adapter_kind):  # software: the row kernels
    _needs_cpu("max_pool2d")
    rng = np.random.default_rng(19)
    for (N, C, H, W), k, s, p, d in CONV_GEOMETRIES:
        p = (min(p[0], k[0] // 2), min(p[1], k[1] // 2))
        OH, OW = _out_hw(H, W, k, s, p, d)
        x = make(rng, F32, (N, C, H, W), "offset")
        x.data = np.round(x.data)  # ties: the first maximum wins
        out = make(rng, F32, (N, C, OH, OW), "offset", out=True)
        idx = make(rng, I32, (N, C, OH, OW), "contiguous", out=True)
        run(gpu, "max_pool2d", [out, idx, x, k, s, p, d])
        # backward from the CPU's indices (both backends must route gradients the same way)
        vi = idx.view(CPU)
        vo = View(CPU.empty(out.data.size, F32), out.shape, out.strides, out.offset, F32)
        kernels.max_pool2d(CPU, vo, vi, x.view(CPU), k, s, p, d)
        indices = Arg(np.frombuffer(CPU.to_bytes(vi), np.int32).copy(), I32, vi.shape, vi.strides, 0)
        run(gpu, "max_pool2d_backward", [make(rng, F32, (N, C, H, W), "offset", out=True), make(rng, F32, (N, C, OH, OW), "offset"), indices], atol=1e-5)
        # with the geometry (non-overlapping windows take WebGPU's gather kernel)
        run(gpu, "max_pool2d_backward", [make(rng, F32, (N, C, H, W), "offset", out=True), make(rng, F32, (N, C, OH, OW), "offset"), indices, k, s, p, d], atol=1e-5)
        if d == (1, 1):
            for include_pad in (True, False):
                run(gpu, "avg_pool2d", [make(rng, F32, (N, C, OH, OW), "offset", out=True), x, k, s, p, include_pad])
                run(gpu, "avg_pool2d_backward", [make(rng, F32, (N, C, H, W), "offset", out=True), make(rng, F32, (N, C, OH, OW), "offset"), k, s, p, include_pad], atol=1e-6)


# ------------------------------------------------------------------ optimizers


def _optim_case(gpu, method, states, hypers, n=1000):
    """Run several steps of an optimizer kernel on both backends from the same start; compare all."""
    rng = np.random.default_rng(20)
    # State buffers start non-negative: some are averages of squares.
    start = [values(rng, F32, n) for _ in range(2)] + [np.abs(values(rng, F32, n)) * 0.1 for _ in states]
    if method == "rmsprop_step" and states[2]:  # centered: a grad_avg that fits its square_avg (sq - ga^2 > 0)
        start[4] = (0.5 * np.sqrt(start[2]) * rng.uniform(-1, 1, n)).astype(np.float32)
    sides = []
    for be in (gpu, CPU):
        views = [View(be.from_bytes(a.tobytes(), F32), (n,), (1,), 0, F32) for a in start]
        param, grad, *rest = views
        args = [param, grad] + [v if used else None for v, used in zip(rest, states)]
        for hyper in hypers:
            kernels.REGISTRY[method](be, *args, hyper)
        sides.append([np.frombuffer(be.to_bytes(v), np.float32) for v, a in zip(views, [1, 1] + list(states)) if a])
    for got, want in zip(*sides):
        assert np.isfinite(want).all()  # (values that went NaN on both sides would compare equal)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("momentum,nesterov,wd,maximize", [(0.0, False, 0.0, False), (0.9, False, 1e-2, False), (0.9, True, 0.0, True)])
def test_sgd_step(gpu, momentum, nesterov, wd, maximize):
    base = dict(lr=0.1, momentum=momentum, dampening=0.1 if not nesterov else 0.0, weight_decay=wd, nesterov=nesterov, maximize=maximize)
    _optim_case(gpu, "sgd_step", [momentum > 0], [dict(base, first=i == 0) for i in range(3)])


@pytest.mark.parametrize("amsgrad,decoupled,wd", [(False, False, 0.0), (True, False, 1e-2), (False, True, 1e-2)])
def test_adam_step(gpu, amsgrad, decoupled, wd):
    base = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=wd, amsgrad=amsgrad, maximize=False, decoupled=decoupled)
    _optim_case(gpu, "adam_step", [True, True, amsgrad], [dict(base, step=float(t)) for t in (1, 2, 3, 50)])


@pytest.mark.parametrize("momentum,centered", [(0.0, False), (0.5, True)])
def test_rmsprop_step(gpu, momentum, centered):
    base = dict(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=1e-3, momentum=momentum, centered=centered, maximize=False)
    _optim_case(gpu, "rmsprop_step", [True, momentum > 0, centered], [base] * 3)


OPTIM_CASES = [
    ("sgd_step", [True], [dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=1e-2, nesterov=False, maximize=False, first=i == 0) for i in range(2)]),
    ("adam_step", [True, True, True], [dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2, amsgrad=True, maximize=True, decoupled=False, step=float(t)) for t in (1, 2)]),
    ("adam_step", [True, True, False], [dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2, amsgrad=False, maximize=False, decoupled=True, step=float(t)) for t in (1, 2)]),
    ("rmsprop_step", [True, True, True], [dict(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=1e-3, momentum=0.5, centered=True, maximize=False)] * 2),
]


@pytest.mark.parametrize("n", [1, 3, 4, 5, 100003])
@pytest.mark.parametrize("offsets", [(0, 0, 0, 0, 0), (4, 8, 12, 0, 4), (0, 0, 0, 1, 0), (1, 2, 3, 5, 7)],
                         ids=["aligned", "aligned-offsets", "one-unaligned", "unaligned"])
def test_optimizer_vec4_and_f32_paths(gpu, adapter_kind, n, offsets):
    """The vec4 entry points (every offset a multiple of 4; n % 4 elements in a partial vec4) and the
    f32 ones (any other offset), on parameters of every size mod 4, each tensor at its offset inside a
    storage with junk before and after it: every storage is compared in full, so an update that
    writes past its view fails."""
    rng = np.random.default_rng(n)
    for method, states, hypers in OPTIM_CASES:
        # param, grad, then the states; state buffers start non-negative (some are averages of squares)
        datas = [values(rng, F32, off + n + 3) for off in offsets[:2]]
        datas += [np.abs(values(rng, F32, off + n + 3)) * 0.1 for off in offsets[2:2 + len(states)]]
        if method == "rmsprop_step":  # a grad_avg that fits its square_avg (sq - ga^2 > 0, well away from 0)
            sq = datas[2][offsets[2]:offsets[2] + n]
            datas[4][offsets[4]:offsets[4] + n] = 0.5 * np.sqrt(sq) * rng.uniform(-1, 1, n).astype(np.float32)
        sides = []
        for be in (gpu, CPU):
            views = [View(be.from_bytes(d.tobytes(), F32), (n,), (1,), off, F32) for d, off in zip(datas, offsets)]
            args = views[:2] + [v if used else None for v, used in zip(views[2:], states)]
            for hyper in hypers:
                kernels.REGISTRY[method](be, *args, hyper)
            sides.append([np.frombuffer(be.to_bytes(full_view(be, v)), np.float32) for v in views])
        for k, (got, want) in enumerate(zip(*sides)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{method} tensor {k}")


@pytest.mark.parametrize("flag", [0.0, 1.0, -2.0])
def test_optimizer_skip_if(gpu, flag):
    """hyper["skip_if"] (GradScaler's skipped step in a replayed step): where the one-element flag is above 0
    the update changes nothing, else it runs as without the flag; the flag sits at an offset in its storage,
    between values that would skip (or not) if read in its place."""
    rng = np.random.default_rng(29)
    n = 37
    for method, states, hypers in OPTIM_CASES:
        datas = [values(rng, F32, n) for _ in range(2)] + [np.abs(values(rng, F32, n)) * 0.1 for _ in states]
        if method == "rmsprop_step":  # a grad_avg that fits its square_avg (sq - ga^2 > 0), as above
            datas[4] = (0.5 * np.sqrt(datas[2]) * rng.uniform(-1, 1, n)).astype(np.float32)
        sides = []
        for be in (gpu, CPU):
            views = [View(be.from_bytes(d.tobytes(), F32), (n,), (1,), 0, F32) for d in datas]
            args = views[:2] + [v if used else None for v, used in zip(views[2:], states)]
            junk = -1.0 if flag > 0 else 1.0
            skip = View(be.from_bytes(np.array([junk, flag, junk], np.float32).tobytes(), F32), (), (), 1, F32)
            plain = [View(be.from_bytes(d.tobytes(), F32), (n,), (1,), 0, F32) for d in datas]
            plain_args = plain[:2] + [v if used else None for v, used in zip(plain[2:], states)]
            for hyper in hypers:
                kernels.REGISTRY[method](be, *args, dict(hyper, skip_if=skip))
                kernels.REGISTRY[method](be, *plain_args, hyper)
            got = [np.frombuffer(be.to_bytes(v), np.float32) for v in views]
            unflagged = [np.frombuffer(be.to_bytes(v), np.float32) for v in plain]
            for k, (g, d, u) in enumerate(zip(got, datas, unflagged)):
                assert np.isfinite(g).all(), f"{method} tensor {k}"
                np.testing.assert_array_equal(g, d if flag > 0 else u, err_msg=f"{method} tensor {k}")
            sides.append(got)
        for k, (got, want) in enumerate(zip(*sides)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{method} tensor {k}")


@pytest.mark.parametrize("offset", [0, 1, 4])  # vec4 and f32 entry points (the param's offset decides)
def test_optimizer_counts_skipped_steps(gpu, offset):
    """hyper["skipped_steps"] (Adam, RMSprop under skip_if): a skipped update adds 1 to the count, once per
    call whatever the parameter's size (one thread of the many adds it); an update that runs leaves it and
    Adam takes its bias corrections at step - count: the same result as step - count steps without it."""
    rng = np.random.default_rng(31)
    n = 4099
    adam = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2, amsgrad=False, maximize=False,
                decoupled=True)
    rms = dict(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False, maximize=False)
    for method, hyper, nstates in (("adam_step", adam, 2), ("rmsprop_step", rms, 1)):
        datas = [values(rng, F32, n) for _ in range(2)]
        datas += [np.abs(values(rng, F32, n)) * 0.1 for _ in range(nstates)]
        sides = []
        for be in (gpu, CPU):
            def views():
                return [View(be.from_bytes(np.pad(d, (offset, 0)).tobytes(), F32), (n,), (1,), offset, F32)
                        for d in datas] + [None] * (3 - nstates)
            counted, plain = views(), views()
            flag = View(be.from_bytes(np.array([0.0, 0.0], np.float32).tobytes(), F32), (), (), 1, F32)
            count = View(be.from_bytes(np.array([7.0, 0.0, 7.0], np.float32).tobytes(), F32), (), (), 1, F32)
            for skip in (1.0, 1.0, 0.0):  # two skipped steps, then one that runs at host step 5
                flag.storage = be.from_bytes(np.array([0.0, skip], np.float32).tobytes(), F32)
                kernels.REGISTRY[method](be, *counted, dict(hyper, step=5.0, skip_if=flag, skipped_steps=count))
            kernels.REGISTRY[method](be, *plain, dict(hyper, step=3.0))  # the steps taken: 5 - 2
            words = np.frombuffer(be.to_bytes(full_view(be, count)), np.float32)
            np.testing.assert_array_equal(words, [7.0, 2.0, 7.0], err_msg=f"{method}: the count, nothing beside it")
            got = [np.frombuffer(be.to_bytes(v), np.float32) for v in counted[:2 + nstates]]
            want = [np.frombuffer(be.to_bytes(v), np.float32) for v in plain[:2 + nstates]]
            for k, (g, w) in enumerate(zip(got, want)):
                np.testing.assert_array_equal(g, w, err_msg=f"{method} tensor {k}")
            sides.append(got)
        for k, (got, want) in enumerate(zip(*sides)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{method} tensor {k}")


def test_optimizer_update_follows_every_change_between_calls(gpu):
    """webgpu/optim.py reuses a parameter's last launch and scalar slots while its values and layout stay
    the same (a steady training loop). Each call below changes one thing for the same parameter: the
    gradient's offset, a state's offset, a plain learning rate, a flag; each must reach the kernel."""
    rng = np.random.default_rng(23)
    n = 37
    datas = [values(rng, F32, n + 8) for _ in range(3)] + [np.abs(values(rng, F32, n + 8)) * 0.1 for _ in range(3)]
    base = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False,
                decoupled=False)
    calls = [((0, 0, 0, 0), dict(base, step=1.0)), ((0, 0, 0, 0), dict(base, step=2.0)),
             ((0, 4, 0, 0), dict(base, step=3.0)), ((0, 4, 4, 0), dict(base, step=4.0)),
             ((0, 4, 4, 0), dict(base, step=5.0, lr=3e-2)), ((0, 4, 4, 0), dict(base, step=6.0, lr=3e-2, maximize=True)),
             ((0, 1, 4, 0), dict(base, step=7.0, weight_decay=0.1)), ((0, 1, 4, 0), dict(base, step=8.0, weight_decay=0.1))]
    sides = []
    for be in (gpu, CPU):
        storages = [be.from_bytes(d.tobytes(), F32) for d in datas]
        param, m, v = (View(storages[k], (n,), (1,), 0, F32) for k in (0, 3, 4))
        for (_, g_off, m_off, _), hyper in calls:
            grad = View(storages[1 + g_off % 2], (n,), (1,), g_off, F32)
            m = View(storages[3 if m_off == 0 else 5], (n,), (1,), m_off, F32)
            kernels.adam_step(be, param, grad, m, v, None, hyper)
            sides.append(np.frombuffer(be.to_bytes(full_view(be, param)), np.float32).copy())
    half = len(sides) // 2
    for k, (got, want) in enumerate(zip(sides[:half], sides[half:])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"after call {k}")


def test_optimizer_update_follows_a_kernel_variant_switch(gpu, monkeypatch):
    """A runtime switched between its software and GPU kernel variants keeps its storages: a parameter's
    next update must take the other variant's entry point (vec4 or f32), not the launch it kept
    (webgpu/optim.py's _Block); both compute the same update."""
    from webgrad._backends.webgpu import optim

    rng = np.random.default_rng(24)
    n = 64
    datas = [values(rng, F32, n) for _ in range(2)] + [np.abs(values(rng, F32, n)) * 0.1 for _ in range(2)]
    hyper = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False,
                 decoupled=False)
    sides = []
    for be in (gpu, CPU):
        param, grad, m, v = (View(be.from_bytes(d.tobytes(), F32), (n,), (1,), 0, F32) for d in datas)
        for step, per_thread in ((1.0, 1), (2.0, 0), (3.0, 1)):
            if be is gpu:
                monkeypatch.setitem(gpu.runtime.variant, "optim_vec4_per_thread", per_thread)
            kernels.adam_step(be, param, grad, m, v, None, dict(hyper, step=step))
            if be is gpu:
                assert optim._blocks[param.storage].launch.kernel.entry == ("adam4" if per_thread else "adam")
            sides.append(np.frombuffer(be.to_bytes(param), np.float32).copy())
    for k, (got, want) in enumerate(zip(sides[:3], sides[3:])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"after call {k}")


# ------------------------------------------------------------------ every op name is covered


def test_tables_are_all_tested():
    codes = ew.ops()
    assert set(codes.unary) == {"identity", "fill", *UNARY_OPS}
    assert set(codes.binary) == set(BINARY_OPS)
    assert set(codes.backward) == set(UNARY_BACKWARD_OPS)
