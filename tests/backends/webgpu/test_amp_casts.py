"""Casts autocast's step no longer makes: kernels that read (and write) float16 where the float32 kernel ran on
float32 copies. A half column sum (a Linear's bias gradient under autocast) runs reduce.wgsl's reduce_cols4h on
the halves and rounds each total once into the half out: the float32 path's result on a cast of x, bit for bit,
without the cast of x and of the result. Checked against that path and torch, on the GPU-shaped kernels
(Runtime.software off: lavapipe runs them too), and by the dispatches of a small autocast step."""

import numpy as np
import pytest

import webgrad as wg
from helpers import DEVICES

torch = pytest.importorskip("torch")


def _has_f16():
    return "webgpu" in DEVICES and wg.device("webgpu").backend.runtime.has_f16


pytestmark = pytest.mark.skipif(not _has_f16(), reason="needs a WebGPU adapter with shader-f16")

RNG = np.random.default_rng(40)


@pytest.fixture
def rt(monkeypatch):
    from webgrad._backends.webgpu.runtime import default_runtime
    rt = default_runtime()
    monkeypatch.setattr(rt, "software", False)
    return rt


class _Entries:
    """The kernel entry points the runtime runs while active."""

    def __init__(self, rt, monkeypatch):
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
def entries(rt, monkeypatch):
    return _Entries(rt, monkeypatch)


def _reduce(op, x, out_dtype=None):
    """kernels.reduce over the middle axis of webgpu tensor x [outer, size, inner]: a new [outer, inner] tensor."""
    from webgrad._backends import kernels
    outer, _, inner = x.shape
    out = wg.empty(outer, inner, dtype=out_dtype or x.dtype, device="webgpu")
    kernels.reduce(x.device.backend, op, out._view, x._view)
    return out


SHAPES = [(1, 64, 32), (1, 512, 384), (2, 100, 36), (1, 4096, 64), (3, 1000, 96), (1, 70, 1540)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_half_columns_equal_the_float32_path(rt, entries, shape, op):
    """One dispatch of reduce_cols4h (chunks folded in it where the rows are many), bit for bit the float32
    kernel's total on a cast of x, rounded once; within a half's rounding of torch's float16 sum."""
    a = (RNG.standard_normal(shape) * 4).astype(np.float16)
    x = wg.tensor(a, device="webgpu")
    entries.take()
    got = _reduce(op, x)
    assert entries.take() == ["reduce_cols4h"]
    assert got.dtype is wg.float16
    via_f32 = _reduce(op, wg.tensor(a.astype(np.float32), device="webgpu")).numpy().astype(np.float16)
    np.testing.assert_array_equal(got.numpy(), via_f32)
    ref = getattr(torch.tensor(a), "amax" if op == "max" else "amin" if op == "min" else "sum")(1).numpy()
    np.testing.assert_allclose(got.numpy().astype(np.float32), ref.astype(np.float32), rtol=1e-3, atol=1e-2)


def test_half_columns_round_once_and_overflow_to_inf(rt):
    """Totals past the float16 range are inf (as torch's half sum), NaN propagates, and each total is rounded once
    from f32 (not accumulated in half): 4096 rows of 1 + 2^-10 sum to 4100, where a half accumulator stalls."""
    a = np.full((1, 4096, 32), 1 + 2.0 ** -10, dtype=np.float16)
    a[0, :, 1] = 60000
    a[0, :, 2] = -60000
    a[0, 7, 3] = np.nan
    got = _reduce("sum", wg.tensor(a, device="webgpu")).numpy()[0]
    ref = torch.tensor(a).sum(1).numpy()[0]
    assert got[1] == np.inf and got[2] == -np.inf and np.isnan(got[3])
    np.testing.assert_array_equal(got, ref)
    assert got[0] == np.float16(4096 * (1 + 2.0 ** -10))


def test_half_column_views_that_do_not_fit_take_the_casts(rt, entries):
    """x at an offset that is not a multiple of 4, or too few rows: the float32 kernel through casts (the record's
    HALF policy falls back), with the same values."""
    a = RNG.standard_normal((1, 2 * 65 * 32 + 2)).astype(np.float16)
    x = wg.tensor(a, device="webgpu")[0, 2:].reshape(1, 130, 32)
    entries.take()
    got = _reduce("sum", x)
    names = entries.take()
    assert "reduce_cols4h" not in names and "reduce_cols4" in names
    ref = a[0, 2:].reshape(130, 32).astype(np.float32).sum(0).astype(np.float16)
    np.testing.assert_allclose(got.numpy()[0].astype(np.float32), ref.astype(np.float32), rtol=2e-3, atol=2e-3)
    y = wg.tensor(RNG.standard_normal((1, 8, 32)).astype(np.float16), device="webgpu")
    entries.take()
    _reduce("sum", y)
    assert "reduce_cols4h" not in entries.take()


def test_linear_bias_gradient_under_autocast(rt, entries):
    """A Linear's bias gradient under autocast (the sum over rows of the half output gradient) is one reduce_cols4h
    with no cast of the gradient to float32 or of the sum back to half; gradients as torch's autocast on CPU
    within half rounding."""
    w = RNG.standard_normal((96, 64)).astype(np.float32) * 0.1
    b = RNG.standard_normal(96).astype(np.float32) * 0.1
    xa = RNG.standard_normal((128, 64)).astype(np.float32)
    lin = wg.nn.Linear(64, 96).to("webgpu")
    with wg.no_grad():
        lin.weight.copy_(wg.tensor(w, device="webgpu"))
        lin.bias.copy_(wg.tensor(b, device="webgpu"))
    x = wg.tensor(xa, device="webgpu")
    with wg.autocast("webgpu"):
        y = lin(x)
    assert y.dtype is wg.float16
    loss = (y.float() * wg.linspace(-1, 1, 96, device="webgpu")).sum()
    entries.take()
    loss.backward()
    names = entries.take()
    i = names.index("reduce_cols4h")
    assert names[i - 1] != "f_from_h4" and names[i + 1] != "h_from_f4"
    tlin = torch.nn.Linear(64, 96)
    with torch.no_grad():
        tlin.weight.copy_(torch.tensor(w))
        tlin.bias.copy_(torch.tensor(b))
    with torch.autocast("cpu", dtype=torch.float16):
        ty = tlin(torch.tensor(xa))
    (ty.float() * torch.linspace(-1, 1, 96)).sum().backward()
    assert lin.bias.grad.dtype is wg.float32
    np.testing.assert_allclose(lin.bias.grad.numpy(), tlin.bias.grad.numpy(), rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(lin.weight.grad.numpy(), tlin.weight.grad.numpy(), rtol=5e-3, atol=5e-3)


def test_autocast_linear_layer_norm_step_dispatches(rt, entries):
    """The dispatches of a LayerNorm -> Linear -> GELU -> Linear step under autocast, backward: per Linear, the
    two products and one reduce_cols4h; the casts left are PyTorch's (the float32 loss gradient to half, the
    Linear's input gradient to float32 for LayerNorm, each parameter gradient to float32) and the weights' casts
    made again for the input gradients (autocast_policy.kept). Before reduce_cols4h the bias gradients cost four
    casts more (f_from_h4 of the output gradient, h_from_f4 of the sum)."""
    wg.manual_seed(0)
    model = wg.nn.Sequential(wg.nn.LayerNorm(64), wg.nn.Linear(64, 96), wg.nn.GELU(),
                             wg.nn.Linear(96, 64)).to("webgpu")
    x = wg.randn(128, 64, device="webgpu")
    with wg.autocast("webgpu"):
        y = model(x)
    loss = y.float().pow(2).mean()
    entries.take()
    loss.backward()
    names = entries.take()
    casts = [n for n in names if n.startswith(("h_from", "f_from"))]
    assert names.count("reduce_cols4h") == 2 and "reduce_cols4" not in names
    assert names.count("matmul_vv4") == 4
    # half loss gradient, two weight recasts; LayerNorm's input gradient; 4 parameter gradients
    assert casts.count("h_from_f4") == 3 and casts.count("f_from_h4") == 5, names
    assert len(casts) == 8
