"""Elementwise ops on float16 and float32 operands together (PyTorch's promotion: a float32 result, math in f32):
the WebGPU kernels read the half operand as it is (elementwise.wgsl's binary4m, unary_backward4m and where4m over
views whose innermost dim is contiguous, the scalar entry points elsewhere), so the op is one dispatch with no
float32 copy of the half operand. Results and gradients against torch (the half operand's gradient float16, as
PyTorch's), broadcasting, strided views, in-place `x += half`, comparisons, where, and the dispatches made."""

import numpy as np
import pytest

import webgrad as wg
from helpers import DEVICES

torch = pytest.importorskip("torch")


def _has_f16():
    return "webgpu" in DEVICES and wg.device("webgpu").backend.runtime.has_f16


pytestmark = pytest.mark.skipif(not _has_f16(), reason="needs a WebGPU adapter with shader-f16")

RNG = np.random.default_rng(11)


class _Entries:
    """The kernel entry points the runtime runs while active (and their count)."""

    def __init__(self, monkeypatch):
        from webgrad._backends.webgpu.runtime import default_runtime
        rt = default_runtime()
        self.names = []
        run = rt.run

        def recording(prepared, storages, *args, **kwargs):
            self.names.append(prepared.kernel.entry)
            return run(prepared, storages, *args, **kwargs)
        monkeypatch.setattr(rt, "run", recording)

    def take(self):
        names, self.names = self.names, []
        return names


@pytest.fixture
def entries(monkeypatch):
    return _Entries(monkeypatch)


def _pair(shape_x, shape_y, half_first=False, positive=False):
    a = RNG.standard_normal(shape_x).astype(np.float32)
    b = RNG.standard_normal(shape_y).astype(np.float16)
    if positive:
        a, b = np.abs(a) + np.float32(0.5), np.abs(b) + np.float16(0.5)
    return (b, a) if half_first else (a, b)


def _wg(a, requires_grad=True):
    return wg.tensor(a, device="webgpu", requires_grad=requires_grad)


def _torch(a, requires_grad=True):
    return torch.tensor(a, requires_grad=requires_grad)


def _close(ours, theirs, rtol=1e-6, atol=1e-7):
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(ours.detach().cpu().numpy().astype(np.float64),
                               theirs.detach().numpy().astype(np.float64), rtol=rtol, atol=atol)


OPS = {
    "add": lambda lib, x, y: x + y,
    "sub": lambda lib, x, y: x - y,
    "mul": lambda lib, x, y: x * y,
    "div": lambda lib, x, y: x / y,
    "maximum": lambda lib, x, y: lib.maximum(x, y),
    "atan2": lambda lib, x, y: lib.atan2(x, y),
    "pow": lambda lib, x, y: lib.pow(x, y),
    "fmod": lambda lib, x, y: lib.fmod(x, y),  # a heavy record: its own module's twins of the mixed entry points
    "add_alpha": lambda lib, x, y: lib.add(x, y, alpha=2),
}


@pytest.mark.parametrize("half_first", [False, True], ids=["f32_f16", "f16_f32"])
@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("shapes", [((4, 8), (4, 8)), ((3, 5), (3, 5)), ((2, 3, 8), (8,)), ((2, 3, 1), (2, 1, 6)),
                                    ((2, 4, 8), (2, 1, 8))],
                         ids=["vec4", "odd", "broadcast_row", "broadcast_outer", "broadcast_middle"])
def test_matches_torch(op, shapes, half_first, entries):
    """Values as torch's (float32, the half operand promoted exactly), and the gradients: float32 for the float32
    operand, float16 for the half one (torch's engine casts to the input's dtype)."""
    a, b = _pair(*shapes, half_first=half_first, positive=op in ("pow", "fmod"))
    ta, tb = _torch(a), _torch(b)
    wa, wb = _wg(a), _wg(b)
    ref = OPS[op](torch, ta, tb)
    out = OPS[op](wg, wa, wb)
    assert out.dtype is wg.float32
    _close(out, ref, rtol=2e-6)
    g = RNG.standard_normal(ref.shape).astype(np.float32)
    ref.backward(torch.tensor(g))
    out.backward(wg.tensor(g, device="webgpu"))
    for ours, theirs in ((wa, ta), (wb, tb)):
        assert ours.grad.dtype is ours.dtype
        tight = theirs.dtype == torch.float32 and op in ("add", "sub", "mul")
        _close(ours.grad, theirs.grad, rtol=1e-6 if tight else 2e-3, atol=1e-6 if tight else 2e-3)


@pytest.mark.parametrize("shape", [(4, 8), (3, 5), (2, 3, 8)], ids=["vec4", "odd", "rows"])
def test_one_dispatch_no_cast(shape, entries):
    """x32 + y16 is the add's dispatch alone: no cast of y into a float32 copy first (binary4m where the layout
    takes four elements a thread, else the scalar binary, which reads halves too)."""
    a, b = _pair(shape, shape)
    x, y = _wg(a, False), _wg(b, False)
    entries.take()
    out = x + y
    quads = all(n % 4 == 0 for n in shape[-1:])
    assert entries.take() == ["binary4m" if quads else "binary"]
    _close(out, torch.tensor(a) + torch.tensor(b), rtol=0, atol=0)
    out = y * x
    assert entries.take() == ["binary4m" if quads else "binary"]
    _close(out, torch.tensor(b) * torch.tensor(a), rtol=0, atol=0)


def test_backward_gives_the_half_operand_a_half_gradient_in_one_cast(entries):
    """The residual add's backward under autocast: the float32 stream's gradient as it is, and the half
    projection's one cast of it into float16 (PyTorch's engine does the same cast); no float32 copy of y was made
    forward for a backward to cast back."""
    a, b = _pair((2, 4, 8), (2, 4, 8))
    x, y = _wg(a), _wg(b)
    entries.take()
    out = x + y
    assert entries.take() == ["binary4m"]
    out.backward(wg.ones(2, 4, 8, device="webgpu"))
    names = entries.take()
    assert names.count("h_from_f4") == 1 and not any(n.startswith("f_from_h") for n in names)
    assert x.grad.dtype is wg.float32 and y.grad.dtype is wg.float16
    assert (y.grad.cpu().numpy() == 1).all() and (x.grad.cpu().numpy() == 1).all()


@pytest.mark.parametrize("op", ["mul", "div"])
@pytest.mark.parametrize("shape", [(2, 4, 8), (3, 6)], ids=["halves8", "odd"])
def test_product_gradient_of_the_half_operand_is_written_in_half(op, shape, entries):
    """x32 * y16 backward: y's gradient g * x is written as float16 by the product's kernel (binary8h, each value
    rounded once from f32: PyTorch's cast of its float32 product gives the same), with no float32 product and no
    cast; where the layout does not take eight halves a thread, the float32 product and its cast."""
    a, b = _pair(shape, shape, half_first=True, positive=True)
    wa, wb = _wg(a), _wg(b)
    ta, tb = _torch(a), _torch(b)
    out, ref = getattr(wg, op)(wa, wb), getattr(torch, op)(ta, tb)
    g = RNG.standard_normal(shape).astype(np.float32)
    entries.take()
    out.backward(wg.tensor(g, device="webgpu"))
    names = entries.take()
    ref.backward(torch.tensor(g))
    if shape[-1] % 8 == 0:
        assert "binary8h" in names and "h_from_f4" not in names and "h_from_f" not in names
    else:
        assert "binary8h" not in names
    assert wa.grad.dtype is wg.float16 and wb.grad.dtype is wg.float32
    np.testing.assert_array_equal(wa.grad.cpu().numpy(), ta.grad.numpy()) if op == "mul" else \
        _close(wa.grad, ta.grad, rtol=1e-3, atol=1e-3)
    _close(wb.grad, tb.grad, rtol=1e-5, atol=1e-6)


def test_strided_halves_into_a_half_out(entries):
    """half + a broadcast half row: not contiguous, so not binary_h8; binary8h takes it (eight halves a thread, no
    float32 copies), each value rounded once as torch's."""
    a = RNG.standard_normal((4, 16)).astype(np.float16)
    b = RNG.standard_normal((16,)).astype(np.float16)
    x, y = _wg(a, False), _wg(b, False)
    entries.take()
    out = x + y
    assert entries.take() == ["binary8h"] and out.dtype is wg.float16
    np.testing.assert_array_equal(out.cpu().numpy(), (torch.tensor(a) + torch.tensor(b)).numpy())


def test_product_gradient_in_half_under_create_graph():
    """Under create_graph the half operand's gradient is an op of the graph (the float32 product, cast): its own
    gradient flows, as torch's."""
    a, b = _pair((4, 8), (4, 8), half_first=True)
    wa, wb = _wg(a), _wg(b)
    ta, tb = _torch(a), _torch(b)
    (ga,) = wg.autograd.grad((wa * wb).sum(), (wa,), create_graph=True)
    (ra,) = torch.autograd.grad((ta * tb).sum(), (ta,), create_graph=True)
    assert ga.dtype is wg.float16 and ga.requires_grad
    (ga.float() ** 2).sum().backward()
    (ra.float() ** 2).sum().backward()
    _close(wb.grad, tb.grad, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("layout", ["transposed_half", "sliced_f32", "strided_rows", "expanded_row",
                                    "expanded_column"])
def test_strided_views(layout, entries):
    """Non-contiguous operands: a transposed half view (scalar walk), a float32 slice at an offset that is not a
    multiple of 4 (scalar walk), rows of a wider buffer whose innermost dim is contiguous and an expanded half row
    (binary4m's strided walk), and an expanded half column (scalar walk: its innermost stride is 0)."""
    base32 = RNG.standard_normal((8, 12)).astype(np.float32)
    base16 = RNG.standard_normal((12, 8)).astype(np.float16)
    x32, x16 = _wg(base32, False), _wg(base16, False)
    t32, t16 = torch.tensor(base32), torch.tensor(base16)
    if layout == "transposed_half":
        pick = lambda f, h: (f, h.t())  # noqa: E731
        entry = "binary"
    elif layout == "sliced_f32":
        pick = lambda f, h: (f[:, 1:9], h[:8])  # noqa: E731
        entry = "binary"
    elif layout == "strided_rows":
        pick = lambda f, h: (f[:, 4:12], h[4:, :])  # noqa: E731
        entry = "binary4m"
    elif layout == "expanded_row":
        pick = lambda f, h: (f[:, :8], h[0].expand(8, 8))  # noqa: E731
        entry = "binary4m"
    else:
        pick = lambda f, h: (f[:, :8], h[:8, :1].expand(8, 8))  # noqa: E731
        entry = "binary"
    wx, wy = pick(x32, x16)
    tx, ty = pick(t32, t16)
    entries.take()
    out = wx * wy
    assert entries.take() == [entry]
    _close(out, tx * ty, rtol=0, atol=0)


def test_in_place_add_of_a_half_keeps_float32(entries):
    """x += half: allowed (PyTorch), x stays float32 with the float32 sum; no float32 copy of the half operand."""
    a, b = _pair((4, 8), (4, 8))
    x, y = _wg(a, False), _wg(b, False)
    before = x
    entries.take()
    x += y
    names = entries.take()
    assert x is before and x.dtype is wg.float32
    assert "binary4m" in names and not any(n.startswith("f_from_h") for n in names)
    tx = torch.tensor(a)
    tx += torch.tensor(b)
    _close(x, tx, rtol=0, atol=0)


def test_in_place_add_in_the_graph():
    """The same in place on a non-leaf that requires grad: the gradients as torch's, the half one float16."""
    a, b = _pair((4, 8), (4, 8))
    wa, wb = _wg(a), _wg(b)
    ta, tb = _torch(a), _torch(b)
    w, t = wa * 2, ta * 2
    w += wb
    t += tb
    _close(w, t, rtol=0, atol=0)
    (w * w).sum().backward()
    (t * t).sum().backward()
    assert wb.grad.dtype is wg.float16
    _close(wa.grad, ta.grad, rtol=1e-6)
    _close(wb.grad, tb.grad, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("shape", [(4, 8), (3, 5)], ids=["vec4", "odd"])
def test_comparisons_read_halves(shape, entries):
    """A comparison of float32 and float16 gives bool in one dispatch."""
    a, b = _pair(shape, shape)
    b[0, 0] = np.float16(a[0, 0])  # a tie, where both hold the same value
    a[0, 0] = np.float32(b[0, 0])
    x, y = _wg(a, False), _wg(b, False)
    for name in ("lt", "ge", "eq"):
        entries.take()
        out = getattr(wg, name)(x, y)
        assert len(entries.take()) == 1 and out.dtype is wg.bool
        np.testing.assert_array_equal(out.cpu().numpy(), getattr(torch, name)(torch.tensor(a), torch.tensor(b)).numpy())


@pytest.mark.parametrize("shape", [(4, 8), (3, 5)], ids=["vec4", "odd"])
def test_where_of_a_half_and_a_float(shape, entries):
    """where(cond, half, float): float32, one dispatch (where4m or where_select, the half read as it is); the
    gradients as torch's, the half one float16."""
    a, b = _pair(shape, shape, half_first=True)
    c = RNG.standard_normal(shape) > 0
    cond = wg.tensor(c, device="webgpu")
    wa, wb = _wg(a), _wg(b)
    ta, tb = _torch(a), _torch(b)
    entries.take()
    out = wg.where(cond, wa, wb)
    assert entries.take() == ["where4m" if shape[-1] % 4 == 0 else "where_select"]
    ref = torch.where(torch.tensor(c), ta, tb)
    _close(out, ref, rtol=0, atol=0)
    g = RNG.standard_normal(shape).astype(np.float32)
    out.backward(wg.tensor(g, device="webgpu"))
    ref.backward(torch.tensor(g))
    assert wa.grad.dtype is wg.float16 and wb.grad.dtype is wg.float32
    _close(wa.grad, ta.grad, rtol=1e-3, atol=1e-3)
    _close(wb.grad, tb.grad, rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(4, 8), (3, 5)], ids=["vec4", "odd"])
def test_unary_backward_kernel_reads_mixed_operands(shape, entries):
    """kernels.unary_backward with a float32 gradient and float16 x and y into a float32 out: one dispatch, equal to
    the float32 kernel on the half values promoted."""
    from webgrad._backends import kernels
    backend = wg.device("webgpu").backend
    x16 = RNG.standard_normal(shape).astype(np.float16)
    g = _wg(RNG.standard_normal(shape).astype(np.float32), False)
    xh = _wg(x16, False)
    yh = wg.tanh(xh)
    xf, yf = xh.float(), yh.float()
    mixed = wg.empty(*shape, device="webgpu")
    plain = wg.empty(*shape, device="webgpu")
    entries.take()
    kernels.unary_backward(backend, "tanh", mixed._view, g._view, xh._view, yh._view)
    assert entries.take() == ["unary_backward4m" if shape[-1] % 4 == 0 else "unary_backward"]
    kernels.unary_backward(backend, "tanh", plain._view, g._view, xf._view, yf._view)
    np.testing.assert_array_equal(mixed.cpu().numpy(), plain.cpu().numpy())


def test_cpu_device_agrees():
    """The CPU backend reads the half operand as it is too: the same values and dtypes on both devices."""
    a, b = _pair((3, 8), (8,))
    outs = []
    for device in ("cpu", "webgpu"):
        x, y = wg.tensor(a, device=device), wg.tensor(b, device=device)
        outs.append((x * y + y).cpu().numpy())
        assert (x * y).dtype is wg.float32
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6)


def test_autocast_residual_add_makes_no_cast(entries):
    """Under autocast, a linear's half output added to a float32 stream (a GPT block's residual) is one mixed
    add: no float32 copy of the half operand."""
    lin = wg.nn.Linear(8, 8, device="webgpu")
    x = _wg(RNG.standard_normal((4, 8)).astype(np.float32))
    with wg.autocast("webgpu"):
        y = lin(x)
        assert y.dtype is wg.float16
        entries.take()
        out = x + y
        assert entries.take() == ["binary4m"] and out.dtype is wg.float32
    out.sum().backward()
    assert x.grad.dtype is wg.float32 and lin.weight.grad.dtype is wg.float32
