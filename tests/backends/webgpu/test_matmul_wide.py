"""matmul_plan's choice for a wide layer at a small batch (128x128 tiles split across workgroups, vec4
stores) and the kernel under that plan, against NumPy (test_matmul_kernel's harness: poisoned output,
junk around every operand). Shapes scaled down from the wide MLP 3072-4096-4096-10 at batch 128 so that
lavapipe runs them in seconds, with ragged edges and every transpose."""

import pytest

pytest.importorskip("wgpu")

from webgrad._backends.webgpu import matmul_plan  # noqa: E402

from test_matmul_kernel import TRANS, check, runner  # noqa: E402,F401  (runner: the module's fixture)


def _plan(M, N, K, ta=False, tb=False):
    return matmul_plan.plan(1, M, N, K, ta, tb, False, False, 0, 0, 0, 0, 0, 0)


def test_wide_layer_plans():
    # forward x @ W^T and input gradient dY @ W of a 4096-wide layer at batch 128
    for K, ta, tb in ((4096, False, True), (4096, False, False), (3072, False, True)):
        p = _plan(128, 4096, K, ta, tb)
        assert (p.config, p.splits, p.entry_point) == ("128x128w16", 8, "matmul_vv4"), p  # WIDE_TWIN
        assert p.workgroups == (32, 1, 8) and p.reduce.entry_point == "matmul_reduce_few4"
    # the weight gradient X^T @ dY (K = 128) fills the GPU unsplit, as the BK = 16 twin
    # (matmul_plan.SHORT_K_TWIN_MIN); a shorter K, or another transpose of a short K, keeps the plain tile
    p = _plan(4096, 4096, 128, True, False)
    assert (p.config, p.splits, p.entry_point) == ("128x128w16", 1, "matmul_vv4"), p
    assert _plan(4096, 3072, 128, True, False).config == "128x128w16"
    assert _plan(4096, 4096, 64, True, False).config == "64x128"
    assert _plan(4096, 4096, 128, False, False).config == "64x128"
    # the tall-and-narrow mirror image takes the same tile
    assert _plan(4096, 128, 4096).config == "128x128w16"
    # products the rule leaves alone: square (taken by the big-tile rule), small on both sides, and
    # ResNet-18's weight gradients
    assert _plan(4096, 4096, 4096).config == "128x128w"  # square and big: matmul_plan._big_twin
    # (batch-reduce products over 128 images of 256 and 64 positions)
    for M, N, positions in ((128, 1152, 256), (256, 2304, 64)):
        assert matmul_plan.plan(1, M, N, positions, False, False, False, False, 0, 0, 0, 0, 0, 0,
                                items=128).config == "64x128"


@pytest.mark.parametrize("config", ["128x128w16", "128x128"])
@pytest.mark.parametrize("trans_a,trans_b", TRANS)
def test_wide_split_plan_parity(runner, trans_a, trans_b, config):  # noqa: F811
    # the wide plan's configuration (and the plain tile it replaced, still a forced choice) split across
    # workgroups on ragged shapes: M, N not multiples of the tile, K not of BK nor of the split; bias and
    # ReLU applied by the reduction
    check(runner, 1, 130, 260, 1037, trans_a, trans_b, bias=True, relu=True, config=config, splits=8, seed=31)
    p = check(runner, 1, 128, 512, 1024, trans_a, trans_b, bias=True, config=config, splits=8, seed=32)
    assert p.entry_point.endswith("4")  # N % 4 == 0 and a short K per split: vec4 stores
    # batched, one operand broadcast, offsets
    check(runner, 2, 96, 136, 520, trans_a, trans_b, bcast_b=True, config=config, splits=8, seed=33,
          a_off=4, b_off=8)


def test_wide_layer_training_step_matches_cpu(monkeypatch):
    # Linear(1024, 2048) at batch 128 on WebGPU planned for a GPU (lavapipe runs the GPU-shaped kernels):
    # its forward takes the wide plan (split-K, bias in the reduction), the bias gradients the column reduction;
    # outputs and every gradient against the CPU backend.
    np = pytest.importorskip("numpy")
    import webgrad as wg
    from webgrad._backends.webgpu import runtime

    from helpers import DEVICES

    if "webgpu" not in DEVICES:
        pytest.skip("no WebGPU adapter")
    monkeypatch.setattr(runtime.default_runtime(), "software", False)
    assert _plan(128, 2048, 1024, False, True).config == "128x128w16"
    rng = np.random.default_rng(3)
    x = rng.standard_normal((128, 1024)).astype(np.float32)
    y = rng.integers(0, 10, 128)
    grads = {}
    for device in ("cpu", "webgpu"):
        wg.manual_seed(0)
        model = wg.nn.Sequential(wg.nn.Linear(1024, 2048), wg.nn.ReLU(), wg.nn.Linear(2048, 10)).to(device)
        loss = wg.nn.functional.cross_entropy(model(wg.tensor(x, device=device)), wg.tensor(y, device=device))
        loss.backward()
        grads[device] = [loss.item()] + [p.grad.numpy() for p in model.parameters()]
    for got, want in zip(grads["webgpu"], grads["cpu"]):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)


def test_wide_split_product_scratch_while_recording_is_the_graphs(monkeypatch):
    # A split matmul writes its partial tiles into a scratch (Runtime.split_k_scratch): eagerly the runtime's
    # one kept scratch, shared with conv_gemm's; while a step is recorded, a storage of the graph's freed when
    # the product returns, which the recorded step's memory plan places (memory_plan.py).
    np = pytest.importorskip("numpy")
    import webgrad as wg
    from webgrad._backends.webgpu import runtime

    from helpers import DEVICES

    if "webgpu" not in DEVICES:
        pytest.skip("no WebGPU adapter")
    rt = runtime.default_runtime()
    monkeypatch.setattr(rt, "software", False)
    assert _plan(128, 2048, 1024, False, True).splits > 1
    rng = np.random.default_rng(4)
    x = rng.standard_normal((128, 1024)).astype(np.float32)
    w = (rng.standard_normal((2048, 1024)) / 32).astype(np.float32)
    tx, tw = wg.tensor(x, device="webgpu"), wg.tensor(w, device="webgpu")
    with rt.capture(plannable=True) as graph:
        y = wg.nn.functional.linear(tx, tw)
    assert "split-k" not in rt._kept_scratch
    assert graph.idle_bytes >= 4 * 128 * 2048  # the product's scratch, freed into the graph's pool
    graph.replay()
    np.testing.assert_allclose(y.numpy(), x @ w.T, rtol=1e-4, atol=1e-4)
    graph.release()
