"""matmul.wgsl's float16 variants (half a, b, out and bias read straight from memory, staged into the f32 tiles,
f32 products and sums, one rounding at the store) against its float32 variant on the same float16-rounded
operands, its result rounded to float16 once: the multiply is the same code, so the two agree bit for bit, for
every tile configuration a GPU's plan can pick, every transpose, vec4 and scalar loads, vec4 and scalar stores,
offsets, batch strides (0 included), split-K (float32 partials, one rounding in the reduction), float16 and
float32 bias, ReLU. Then the backend's half products (linear, matmul, bmm, addmm under autocast) take these
variants on a GPU profile, with no cast kernels around them.

The runtime is told it runs on a GPU, so lavapipe (which has shader-f16) runs matmul.wgsl, not matmul_cpu.wgsl."""

import numpy as np
import pytest

import webgrad as wg
from helpers import DEVICES

torch = pytest.importorskip("torch")

from test_matmul_kernel import padded_buffers  # noqa: E402


def _has_f16():
    return "webgpu" in DEVICES and wg.device("webgpu").backend.runtime.has_f16


pytestmark = pytest.mark.skipif(not _has_f16(), reason="needs a WebGPU adapter with shader-f16")


@pytest.fixture
def rt(monkeypatch):
    from webgrad._backends.webgpu.runtime import default_runtime

    runtime = default_runtime()
    monkeypatch.setattr(runtime, "software", False)
    return runtime


def _flat(values, dtype):
    """A webgpu tensor holding `values` (1-D), kept alive by the caller, and its storage."""
    t = wg.tensor(np.ascontiguousarray(values).astype(dtype), device="webgpu")
    return t


def _run(rt, p, types, bufs, bias):
    from webgrad._backends.webgpu import matmul

    a, b, out, bv = (t._view.storage if t is not None else None for t in (*bufs, bias))
    matmul.run_plan(rt, p, a, b, out, bv, types)


def check_pair(rt, batch, M, N, K, trans_a=False, trans_b=False, bias=None, relu=False, a_off=0, b_off=0,
               o_off=0, bias_off=0, bcast_a=False, bcast_b=False, config=None, splits=None, seed=0):
    """Run one planned product on the float16 and float32 variants; assert the half result is the float32 one
    rounded once, bit for bit, and that nothing outside the output was written. bias: None, "f16" or "f32"."""
    from webgrad._backends.webgpu import matmul_plan

    rng = np.random.default_rng(seed)
    na, nb = (1 if bcast_a else batch), (1 if bcast_b else batch)
    a = rng.standard_normal((na, K, M) if trans_a else (na, M, K)).astype(np.float16)
    b = rng.standard_normal((nb, N, K) if trans_b else (nb, K, N)).astype(np.float16)
    bv = rng.standard_normal(N).astype(np.float16)
    n_out = batch * M * N
    # (1234 and 3210 are exact in float16)
    abuf, bbuf, biasbuf, obuf = padded_buffers(rng, a, b, bv, a_off, b_off, bias_off, o_off, n_out, tail=3210.0)
    p = matmul_plan.plan(batch, M, N, K, trans_a, trans_b, bias is not None, relu, a_off, b_off, o_off,
                         bias_off if bias else 0, 0 if bcast_a else M * K, 0 if bcast_b else N * K,
                         config=config, splits=splits, profile="gpu")
    results = {}
    for name in ("f16", "f32"):
        dt = np.float16 if name == "f16" else np.float32
        bufs = [_flat(abuf, dt), _flat(bbuf, dt), _flat(obuf, dt)]
        bias_dt = np.float32 if bias == "f32" else dt
        bt = _flat(biasbuf, bias_dt) if bias else None
        types = (name, name, name, ("f32" if bias == "f32" else name) if bias else name)
        _run(rt, p, types, bufs, bt)
        results[name] = bufs[2].to("cpu").numpy()
    got, full = results["f16"], results["f32"]
    assert got.dtype == np.float16
    assert np.all(got[:o_off] == 1234.0), "wrote before the output region"
    assert np.all(got[o_off + n_out:] == 3210.0), "wrote after the output region"
    out = got[o_off:o_off + n_out]
    want = full[o_off:o_off + n_out].astype(np.float16)
    assert not np.isnan(out).any(), f"{np.isnan(out).sum()} outputs not written ({p})"
    diff = out.view(np.uint16) != want.view(np.uint16)
    assert not diff.any(), f"{diff.sum()} of {diff.size} differ from the float32 kernel's, rounded ({p})"
    # and the float32 kernel is the product itself (a sanity check of the harness)
    opa = a.astype(np.float64).transpose(0, 2, 1) if trans_a else a.astype(np.float64)
    opb = b.astype(np.float64).transpose(0, 2, 1) if trans_b else b.astype(np.float64)
    ref = np.matmul(opa, opb) + (bv.astype(np.float64) if bias else 0.0)
    ref = np.broadcast_to(np.maximum(ref, 0.0) if relu else ref, (batch, M, N)).ravel()
    mag = np.matmul(np.abs(opa), np.abs(opb)) + (np.abs(bv.astype(np.float64)) if bias else 0.0)
    mag = np.broadcast_to(mag, (batch, M, N)).ravel()
    assert np.all(np.abs(full[o_off:o_off + n_out] - ref) <= 1e-4 * mag + 1e-30), p
    return p


TRANS = [(False, False), (True, False), (False, True), (True, True)]


def _configs():
    from webgrad._backends.webgpu import matmul_plan

    return sorted(matmul_plan.CONFIGS)


# Every configuration with two of the transposes (a pipeline compiles in about a second on lavapipe), and every
# transpose on one configuration of each kind: 4x4, 8x4 and 8x8 register blocks, K slices, the warp-tiled and
# swizzled tiles with one or two workgroup buffers.
REPRESENTATIVE = ("32x32", "64x32k2", "64x128", "128x64w", "128x128w16")
CASES = sorted({(c, *TRANS[(i + k) % 4]) for i, c in enumerate(_configs()) for k in (0, 1)}
               | {(c, *t) for c in REPRESENTATIVE for t in TRANS})


@pytest.mark.parametrize("config,trans_a,trans_b", CASES)
def test_every_config(rt, config, trans_a, trans_b):
    # aligned sizes and offsets: vec4 loads of both operands and vec4 stores (a short K); ragged edge tiles
    p = check_pair(rt, 2, 72, 68, 40, trans_a, trans_b, bias="f16", relu=True, a_off=4, b_off=8, o_off=4,
                   config=config, splits=1, seed=1)
    assert p.entry_point == "matmul_vv4"
    # odd sizes and offsets: scalar, bounds-checked loads and stores; b shared by the batch (stride 0)
    p = check_pair(rt, 2, 37, 29, 23, trans_a, trans_b, bias="f16", a_off=1, b_off=3, o_off=1, bias_off=1,
                   bcast_b=True, config=config, splits=1, seed=2)
    assert p.entry_point == "matmul_ss"


@pytest.mark.parametrize("entry,a_off,b_off,K", [("matmul_vs4", 0, 1, 24), ("matmul_sv4", 1, 0, 24),
                                                 ("matmul_vv", 0, 0, 600)])
@pytest.mark.parametrize("trans_a,trans_b", TRANS)
def test_mixed_loads_and_long_k(rt, entry, a_off, b_off, K, trans_a, trans_b):
    # one operand vec4, the other scalar; a K past VEC_STORE_MAX_K takes scalar stores of an aligned output
    p = check_pair(rt, 1, 36, 40, K, trans_a, trans_b, a_off=a_off, b_off=b_off, config="32x32", splits=1, seed=3)
    assert p.entry_point == entry


@pytest.mark.parametrize("config", ["32x32k4", "16x16k8", "64x32k2", "128x128w16"])
@pytest.mark.parametrize("trans_a,trans_b", TRANS)
def test_k_slices_and_split_k(rt, config, trans_a, trans_b):
    # KS > 1 (slices adding their partial sums in workgroup memory), then split 3 ways across workgroups:
    # f32 partials in the scratch, the reduction (vec4: N % 4 == 0) adding them and the bias, one rounding
    for splits, (N, entry) in ((1, (48, None)), (3, (48, "matmul_reduce_few4")), (3, (45, "matmul_reduce"))):
        p = check_pair(rt, 2, 33, N, 200, trans_a, trans_b, bias="f16", relu=True, config=config, splits=splits,
                       seed=4)
        assert p.splits == splits
        if entry is not None:
            assert p.reduce.entry_point == entry


@pytest.mark.parametrize("splits", [1, 4])
def test_float32_bias(rt, splits):
    # a float32 bias with half operands (the kind bias of the kernel's CT = f32)
    check_pair(rt, 1, 40, 44, 96, False, True, bias="f32", config="32x32", splits=splits, seed=5)
    check_pair(rt, 1, 40, 43, 96, False, True, bias="f32", relu=True, config="32x32", splits=splits, bias_off=1,
               seed=6)


def test_rounding_overflow_and_nan(rt):
    # products past the half range round to inf (to_f16), as torch's half matmul; a NaN operand gives NaN
    from webgrad._backends.webgpu import matmul_plan

    a = np.full((1, 4, 8), 20000.0, np.float16)
    a[0, 1] = -20000.0
    a[0, 2, 0] = np.nan
    b = np.ones((1, 8, 4), np.float16)
    b[0, :, 3] = 0.25
    p = matmul_plan.plan(1, 4, 4, 8, False, False, False, False, 0, 0, 0, 0, 32, 32, config="32x32", splits=1,
                         profile="gpu")
    bufs = [_flat(a.ravel(), np.float16), _flat(b.ravel(), np.float16), _flat(np.zeros(16), np.float16)]
    _run(rt, p, ("f16",) * 4, bufs, None)
    got = bufs[2].to("cpu").numpy().reshape(4, 4)
    want = (torch.tensor(a[0]).float() @ torch.tensor(b[0]).float()).half().numpy()
    np.testing.assert_array_equal(got, want)
    assert np.isposinf(got[0, 0]) and np.isneginf(got[1, 0]) and got[0, 3] == 40000.0 and np.isnan(got[2]).all()


# ---- the backend's half products


@pytest.fixture
def spy(rt, monkeypatch):
    """The element types of every matmul.wgsl plan the backend runs, and the float16 cast launches."""
    from webgrad._backends.webgpu import f16, matmul

    seen = {"types": [], "casts": 0}
    run_plan = matmul.run_plan

    def spy_run(rt_, p, *args):
        seen["types"].append(args[4] if len(args) > 4 else matmul.F32)
        return run_plan(rt_, p, *args)

    copy = f16.copy

    def spy_copy(rt_, out, x):
        seen["casts"] += 1
        return copy(rt_, out, x)

    monkeypatch.setattr(matmul, "run_plan", spy_run)
    monkeypatch.setattr(f16, "copy", spy_copy)
    return seen


def test_backend_half_products_run_the_half_variants(spy):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 5, 24)).astype(np.float16)
    w = rng.standard_normal((12, 24)).astype(np.float16)
    bias = rng.standard_normal(12).astype(np.float16)
    y = rng.standard_normal((2, 24, 7)).astype(np.float16)
    gx, gw, gb, gy = (wg.tensor(v, device="webgpu") for v in (x, w, bias, y))
    tx, tw, tb, ty = (torch.tensor(v.astype(np.float32)) for v in (x, w, bias, y))
    cases = [
        (wg.nn.functional.linear(gx, gw, gb), torch.nn.functional.linear(tx, tw, tb)),
        (gx @ gy, tx @ ty),
        (wg.bmm(gx, gy), torch.bmm(tx, ty)),
        (gx[0] @ gw.t(), tx[0] @ tw.t()),
    ]
    assert spy["casts"] == 0, "a half product went through float32 copies"
    # addmm: the product, rounded, then the sum, rounded (two half ops; the broadcast add casts)
    cases.append((wg.addmm(gb, gx[1], gw.t()), (tx[1] @ tw.t()).half().float() + tb))
    for got, want in cases:
        assert got.dtype is wg.float16
        np.testing.assert_array_equal(got.to("cpu").numpy(), want.half().numpy())
    assert len(spy["types"]) == 5 and all(t[:3] == ("f16", "f16", "f16") for t in spy["types"]), spy["types"]


def test_mixed_dtypes_keep_the_cast_path(spy):
    # a float16 operand with a float32 one (not a product autocast makes) still works, through copies
    a = wg.tensor(np.ones((3, 4), np.float16), device="webgpu")
    out = wg.empty((3, 5), dtype=wg.float16, device="webgpu")
    from webgrad._backends import kernels

    b = wg.tensor(np.full((4, 5), 0.5, np.float32), device="webgpu")
    kernels.matmul(a.device.backend, out._view.reshaped((1, 3, 5)), a._view.reshaped((1, 3, 4)),
                   b._view.reshaped((1, 4, 5)))
    np.testing.assert_array_equal(out.to("cpu").numpy(), np.full((3, 5), 2.0, np.float16))
    assert spy["types"] == [("f32",) * 4] and spy["casts"] > 0


def test_autocast_linear_trains_on_the_half_variants(spy):
    # a Linear's step under autocast: forward, input and weight gradients all on the half variants
    rng = np.random.default_rng(8)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    lin = wg.nn.Linear(32, 24).to("webgpu")
    ref = torch.nn.Linear(32, 24)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(lin.weight.detach().to("cpu").numpy()))
        ref.bias.copy_(torch.tensor(lin.bias.detach().to("cpu").numpy()))
    gx = wg.tensor(x, device="webgpu", requires_grad=True)
    with wg.autocast("webgpu", dtype=wg.float16):
        out = lin(gx)
    out.float().square().sum().backward()
    tx = torch.tensor(x, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.float16):
        tout = ref(tx)
    tout.float().square().sum().backward()
    assert out.dtype is wg.float16
    np.testing.assert_allclose(out.detach().to("cpu").numpy().astype(np.float32),
                               tout.detach().numpy().astype(np.float32), rtol=2e-3, atol=2e-3)
    for ours, theirs in ((gx.grad, tx.grad), (lin.weight.grad, ref.weight.grad), (lin.bias.grad, ref.bias.grad)):
        np.testing.assert_allclose(ours.to("cpu").numpy(), theirs.numpy(), rtol=1e-2, atol=1e-2)
    assert sum(t[:3] == ("f16", "f16", "f16") for t in spy["types"]) == 3, spy["types"]
