"""reduce.wgsl's vec4 paths, reduce_rows4 (float32 rows) and reduce_cols4 (float32 columns: bias gradients), both
launched by reduce.py's _reduce_vec4, and the general kernel's four-loads-per-iteration fold, against NumPy,
planned for a GPU (Runtime.software off: lavapipe runs the GPU-shaped kernels too). Rows and columns long enough
for one pass and for chunks plus the folding (in the same dispatch or a second), several rows, offset views, the
ops they serve (sum, mean through sum, amax/amin with NaN, prod), and the shapes that must keep the general
kernel (unaligned, argmax, integers, short columns)."""

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
    # columns of a width that is not a multiple of 4, and integer columns: the four-load fold
    g = rng.standard_normal((128, 4101)).astype(np.float32)
    np.testing.assert_allclose(wg.tensor(g, device="webgpu").sum(0).numpy(), g.astype(np.float64).sum(0),
                               rtol=1e-4, atol=1e-4)
    gi = rng.integers(-1000, 1000, (128, 300)).astype(np.int32)
    np.testing.assert_array_equal(wg.tensor(gi, device="webgpu").sum(0).numpy(), gi.sum(0))
    assert "reduce_rows4" not in seen and "reduce_cols4" not in seen and "reduce" in seen


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


# ---- reduce_cols4

def test_cols4_split():
    # one chunk for a short batch; chunks of whole COLS4_CHUNK multiples covering the rows, about ROWS4_GROUPS
    # workgroups in all
    assert wreduce.cols4_split(1, 128, 4096) == (1, 128)
    for outer, size, inner in [(1, 4096, 384), (1, 4096, 1536), (3, 1000, 64), (1, 70_000, 8)]:
        chunks, chunk = wreduce.cols4_split(outer, size, inner)
        assert (chunks - 1) * chunk < size <= chunks * chunk
        groups = outer * -(-inner // (4 * wreduce.COLS4_WIDTH)) * chunks
        assert chunks == 1 or groups <= 2 * wreduce.ROWS4_GROUPS


@pytest.mark.parametrize("shape", [(4096, 384), (128, 4100), (3, 1000, 64), (9000, 32), (2, 96, 5, 44)])
def test_cols4_sum_mean_max_min(gpu_plans, monkeypatch, shape):
    # a GPT's bias gradient, a wide layer's at batch 128, several column blocks (outer > 1: dim 1 of 3), few
    # columns over many rows, a ragged last column group (44 floats: 11 of the workgroup's 16 vec4 columns)
    seen = _dispatched(monkeypatch)
    rng = np.random.default_rng(shape[0] + shape[-1])
    x = rng.standard_normal(shape).astype(np.float32)
    t = wg.tensor(x, device="webgpu")
    dim = 0 if len(shape) == 2 else 1
    np.testing.assert_allclose(t.sum(dim).numpy(), x.astype(np.float64).sum(dim), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(t.mean(dim).numpy(), x.astype(np.float64).mean(dim), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(t.amax(dim).numpy(), x.max(dim))
    np.testing.assert_array_equal(t.amin(dim).numpy(), x.min(dim))
    assert "reduce_cols4" in seen


def test_cols4_offset_view_nan_prod_and_short_columns(gpu_plans, monkeypatch):
    seen = _dispatched(monkeypatch)
    rng = np.random.default_rng(21)
    x = rng.standard_normal((3, 512, 64)).astype(np.float32)
    x[1, 300, 7] = np.nan
    t = wg.tensor(x, device="webgpu")
    block = t[2]  # a view at offset 2 * 512 * 64 floats
    np.testing.assert_allclose(block.sum(0).numpy(), x[2].astype(np.float64).sum(0), rtol=1e-4, atol=1e-3)
    got = t.amax(1).numpy()
    assert np.isnan(got[1, 7]) and np.isnan(t.sum(1).numpy()[1, 7])
    np.testing.assert_array_equal(np.delete(got[1], 7), np.delete(x[1].max(0), 7))
    p = rng.uniform(0.99, 1.01, (600, 32)).astype(np.float32)
    np.testing.assert_allclose(wg.tensor(p, device="webgpu").prod(0).numpy(), np.prod(p.astype(np.float64), 0),
                               rtol=1e-4)
    assert seen.count("reduce_cols4") >= 4
    seen.clear()
    # fewer rows than COLS4_MIN_ROWS, or fewer columns than COLS4_MIN_INNER: the general kernel
    for s in (rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((500, 28)).astype(np.float32)):
        np.testing.assert_allclose(wg.tensor(s, device="webgpu").sum(0).numpy(), s.astype(np.float64).sum(0),
                                   rtol=1e-4, atol=1e-4)
    assert "reduce_cols4" not in seen and "reduce" in seen


def test_cols4_one_dispatch_tickets_reset_and_replay(gpu_plans, monkeypatch):
    # chunked column sums of two shapes alternating (each one's partials land on words the other counts with),
    # then a captured one replayed with new data: right only if every counter is back at zero after its use
    seen = _dispatched(monkeypatch)
    rng = np.random.default_rng(22)
    x = rng.standard_normal((4096, 384)).astype(np.float32)
    y = rng.standard_normal((2000, 1536)).astype(np.float32)
    tx, ty = wg.tensor(x, device="webgpu"), wg.tensor(y, device="webgpu")
    for _ in range(2):
        np.testing.assert_allclose(tx.sum(0).numpy(), x.astype(np.float64).sum(0), rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(ty.sum(0).numpy(), y.astype(np.float64).sum(0), rtol=1e-4, atol=1e-3)
    assert wreduce.cols4_split(1, 4096, 384)[0] > 1 and wreduce.cols4_split(1, 2000, 1536)[0] > 1
    assert seen == (["reduce_cols4"] * 4 if gpu_plans else ["reduce_cols4", "reduce"] * 4)
    rt = runtime.default_runtime()
    with rt.capture() as graph:
        s = tx.sum(0)
    for _ in range(2):
        x = rng.standard_normal((4096, 384)).astype(np.float32)
        rt.write(tx._view.storage, x.tobytes())
        graph.replay()
        np.testing.assert_allclose(s.numpy(), x.astype(np.float64).sum(0), rtol=1e-4, atol=1e-3)
