"""reduce.wgsl's reduce_rows4 (float32 rows read as vec4s, reduce.py's _reduce_rows4) and the general
kernel's four-loads-per-iteration fold, against NumPy, planned for a GPU (Runtime.software off: lavapipe
runs the GPU-shaped kernels too). Rows long enough for one pass and for chunks plus the second pass,
several rows, an offset view, the ops it serves (sum, mean through sum, amax/amin with NaN, prod), and
the shapes that must keep the general kernel (unaligned, argmax, column sums)."""

import numpy as np
import pytest

import webgrad as wg
from webgrad._backends.webgpu import reduce as wreduce
from webgrad._backends.webgpu import runtime

from helpers import DEVICES

pytestmark = pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")


@pytest.fixture(params=[True, False], ids=["fold-in-one-dispatch", "fold-in-a-second"])
def gpu_plans(monkeypatch, request):
    """GPU-shaped plans, with chunk partials folded by the last workgroup (bindings whose compiler gives
    storageBarrier device scope: native) or by a second dispatch (the browser's)."""
    rt = runtime.default_runtime()
    monkeypatch.setattr(rt, "software", False)
    monkeypatch.setattr(rt.binding, "device_scope_storage_barrier", request.param, raising=False)
    return request.param


def _dispatched(monkeypatch):
    """Record the entry points reduce.py dispatches (Runtime.dispatch goes through run too)."""
    seen = []
    rt = runtime.default_runtime()
    real = rt.run

    def spy(launch, storages):
        seen.append(launch.kernel.entry)
        return real(launch, storages)

    monkeypatch.setattr(rt, "run", spy)
    return seen


def test_rows4_split():
    # one chunk for a row of a few thousand floats; chunks whose size is a multiple of 4 covering the row
    assert wreduce.rows4_split(1, 4096) == (1, 4096)
    for outer, size in [(1, 1 << 24), (3, 200_000), (1, 65_540), (700, 16_384)]:
        chunks, chunk = wreduce.rows4_split(outer, size)
        assert chunk % 4 == 0 and (chunks - 1) * chunk < size <= chunks * chunk
        assert outer * chunks <= max(outer, wreduce.ROWS4_GROUPS)


@pytest.mark.parametrize("shape", [(4096,), (200_000,), (3, 65_540), (2, 8, 4104), (100, 32_768)])
def test_rows4_sum_mean_max_min(gpu_plans, monkeypatch, shape):
    seen = _dispatched(monkeypatch)
    rng = np.random.default_rng(len(shape) * 7 + shape[-1])
    x = rng.standard_normal(shape).astype(np.float32)
    t = wg.tensor(x, device="webgpu")
    np.testing.assert_allclose(t.sum(-1).numpy(), x.astype(np.float64).sum(-1), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(t.mean(-1).numpy(), x.astype(np.float64).mean(-1), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(t.amax(-1).numpy(), x.max(-1))
    np.testing.assert_array_equal(t.amin(-1).numpy(), x.min(-1))
    assert "reduce_rows4" in seen
    # the whole tensor at once (the benchmark's sum)
    np.testing.assert_allclose(t.sum().item(), x.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)


def test_rows4_offset_view_nan_and_prod(gpu_plans, monkeypatch):
    seen = _dispatched(monkeypatch)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 8192)).astype(np.float32)
    x[1, 5000] = np.nan
    t = wg.tensor(x, device="webgpu")
    row = t[2]  # a view at offset 16384 floats
    np.testing.assert_allclose(row.sum().item(), x[2].astype(np.float64).sum(), rtol=1e-4, atol=1e-3)
    got = t.amax(1).numpy()
    assert np.isnan(got[1]) and got[0] == x[0].max() and got[2] == x[2].max()
    assert np.isnan(t.sum(1).numpy()[1])
    p = rng.uniform(0.999, 1.001, 8192).astype(np.float32)
    np.testing.assert_allclose(wg.tensor(p, device="webgpu").prod().item(), np.prod(p.astype(np.float64)),
                               rtol=1e-4)
    assert seen.count("reduce_rows4") >= 4


def test_general_kernel_keeps_other_shapes(gpu_plans, monkeypatch):
    seen = _dispatched(monkeypatch)
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 4097)).astype(np.float32)  # unaligned row
    t = wg.tensor(x, device="webgpu")
    np.testing.assert_allclose(t.sum(1).numpy(), x.astype(np.float64).sum(1), rtol=1e-4, atol=1e-3)
    y = rng.standard_normal(8192).astype(np.float32)
    y[7000] = 9.0
    y[7001] = 9.0
    assert wg.tensor(y, device="webgpu").argmax().item() == 7000  # first of equal maxima
    # a bias gradient: sum over 128 rows of a wide matrix (columns: the four-load fold)
    g = rng.standard_normal((128, 4100)).astype(np.float32)
    np.testing.assert_allclose(wg.tensor(g, device="webgpu").sum(0).numpy(), g.astype(np.float64).sum(0),
                               rtol=1e-4, atol=1e-4)
    gi = rng.integers(-1000, 1000, (128, 300)).astype(np.int32)
    np.testing.assert_array_equal(wg.tensor(gi, device="webgpu").sum(0).numpy(), gi.sum(0))
    assert "reduce_rows4" not in seen and "reduce" in seen


def test_rows4_one_dispatch_and_tickets_reset(gpu_plans, monkeypatch):
    # Rows split into chunks still take ONE dispatch where the last workgroup of a row folds the partials
    # (else a second dispatch of the general kernel folds them).
    # Shapes alternate so that one shape's partials land where another keeps its row counters: every
    # result stays right only if the counters are back at zero after each reduction.
    seen = _dispatched(monkeypatch)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 65540)).astype(np.float32)
    y = rng.standard_normal(300_000).astype(np.float32)
    tx, ty = wg.tensor(x, device="webgpu"), wg.tensor(y, device="webgpu")
    for _ in range(3):
        np.testing.assert_allclose(tx.sum(1).numpy(), x.astype(np.float64).sum(1), rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(tx.sum().item(), x.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)
        np.testing.assert_allclose(ty.sum().item(), y.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)
        assert ty.amax().item() == y.max() and tx.amin(1).numpy().tolist() == x.min(1).tolist()
    assert wreduce.rows4_split(1, y.size)[0] > 1 and wreduce.rows4_split(3, x.shape[1])[0] > 1
    if gpu_plans:
        assert seen == ["reduce_rows4"] * 15
    else:  # every one of these reductions is split into chunks: each takes a folding dispatch too
        assert seen == ["reduce_rows4", "reduce"] * 15


def test_rows4_chunked_sum_replays(gpu_plans):
    # a captured whole-tensor sum replays with new data (the graph reuses the scratch and its counters)
    rt = runtime.default_runtime()
    rng = np.random.default_rng(12)
    x = rng.standard_normal(200_000).astype(np.float32)
    t = wg.tensor(x, device="webgpu")
    with rt.capture() as graph:
        s = t.sum()
    np.testing.assert_allclose(s.item(), x.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)
    for k in range(3):
        x2 = rng.standard_normal(200_000).astype(np.float32)
        rt.write(t._view.storage, x2.tobytes())
        graph.replay()
        np.testing.assert_allclose(s.item(), x2.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)
