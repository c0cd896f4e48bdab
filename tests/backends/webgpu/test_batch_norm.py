"""Batch normalisation's fused kernels (the device's batch_norm / batch_norm_backward): finite-difference
gradients, and PyTorch parity of the output, every gradient and the running statistics, in training and
eval, for [N, C], [N, C, L], [N, C, H, W] and [N, C, D, H, W], on every device and, on WebGPU, in every
kernel variant (GPU-shaped trees, with vec4 elementwise passes where the plane is a multiple of 4, their chunks
merged in one dispatch or in two; the software adapters' thread per chunk). Shapes include channels split into
several chunks and sizes that are no multiple of a workgroup; one is ResNet-18's first stage at batch 128
(128 x 64 x 32 x 32)."""

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import nn

from helpers import DEVICES, gradcheck

F = nn.functional
WEBGPU = [d for d in DEVICES if d == "webgpu"]


@pytest.fixture(params=["gpu", "gpu-two-dispatches", "software"])
def variant(request, monkeypatch):
    """On WebGPU, run the kernels of one kind of adapter (runtime.KERNEL_VARIANTS), whatever this one is; a GPU's
    chunks merged in the dispatch that computes them (FOLD: natively) or by a second one (a browser's Tint gives
    storageBarrier workgroup scope only)."""
    from webgrad._backends.webgpu.runtime import default_runtime
    rt = default_runtime()
    old = rt.software
    rt.software = request.param == "software"
    monkeypatch.setattr(rt.binding, "device_scope_storage_barrier", request.param == "gpu", raising=False)
    yield request.param
    rt.software = old


def _data(shape, seed=0, loc=3.0, scale=2.0):
    rng = np.random.default_rng(seed)
    c = shape[1]
    return dict(x=(rng.standard_normal(shape) * scale + loc).astype(np.float32),
                g=rng.standard_normal(shape).astype(np.float32),
                w=rng.uniform(0.5, 1.5, c).astype(np.float32), b=rng.standard_normal(c).astype(np.float32),
                rm=rng.standard_normal(c).astype(np.float32), rv=rng.uniform(0.5, 2.0, c).astype(np.float32))


def _compare(device, d, training, affine=True, momentum=0.1, eps=1e-5, rtol=1e-5):
    """F.batch_norm on `device` (float32) against PyTorch in float64 from the same float32 values."""
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in d.items()}
    for k in ("x", "w", "b"):
        t[k].requires_grad_(True)
    ty = torch.nn.functional.batch_norm(t["x"], t["rm"], t["rv"], t["w"] if affine else None,
                                        t["b"] if affine else None, training, momentum, eps)
    ty.backward(t["g"])
    o = {k: wg.tensor(v, device=device, requires_grad=k in ("x", "w", "b")) for k, v in d.items()}
    y = F.batch_norm(o["x"], o["rm"], o["rv"], o["w"] if affine else None, o["b"] if affine else None, training,
                     momentum, eps)
    y.backward(o["g"])
    pairs = [("out", y, ty), ("grad x", o["x"].grad, t["x"].grad), ("running_mean", o["rm"], t["rm"]),
             ("running_var", o["rv"], t["rv"])]
    if affine:
        pairs += [("grad weight", o["w"].grad, t["w"].grad), ("grad bias", o["b"].grad, t["b"].grad)]
    for name, ours, ref in pairs:
        ref = ref.detach().numpy()
        # relative to the largest value: sums over many values carry float32 rounding of that size
        np.testing.assert_allclose(ours.detach().cpu().numpy(), ref, rtol=0, atol=rtol * np.abs(ref).max(),
                                   err_msg=f"{name}, shape {d['x'].shape}, training={training}, on {device}")


SHAPES = [(5, 3), (4, 3, 7), (2, 5, 9, 11), (3, 4, 2, 3, 5), (3, 70, 33), (16, 8, 31, 17)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_matches_torch(device, shape, training):
    _compare(device, _data(shape), training)


@pytest.mark.parametrize("shape", [(4, 3, 7), (2, 5, 9, 11), (3, 70, 33), (16, 8, 31, 17), (2, 3, 1100),
                                   (3, 6, 4, 4)])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("device", WEBGPU)
def test_batch_norm_kernel_variants(device, variant, shape, training):
    _compare(device, _data(shape, seed=1), training, affine=shape[1] != 3)


@pytest.mark.parametrize("device", WEBGPU)
def test_batch_norm_resnet_first_stage_size(device, variant):
    """128 x 64 x 32 x 32: 131,072 values per channel, split into chunks and merged."""
    _compare(device, _data((128, 64, 32, 32)), True)


@pytest.mark.parametrize("device", WEBGPU)
def test_batch_norm_more_chunks_than_a_workgroup(device, variant, monkeypatch):
    """A channel split into more chunks than a workgroup has threads: the last workgroup gathers the partials
    a workgroup at a time (batch_norm.wgsl's FOLD), or the finish dispatches merge them all."""
    from webgrad._backends.webgpu import batch_norm as bn
    from webgrad._backends.webgpu.runtime import default_runtime
    monkeypatch.setattr(bn, "PER_THREAD", 1)
    monkeypatch.setattr(bn, "MIN_GROUPS", 4096)
    shape = (300, 2, 256)
    if variant != "software":
        assert bn._plan(default_runtime(), 2, 300 * 256, vec4=True)[0] > bn.WORKGROUP
    _compare(device, _data(shape, seed=2), True)


@pytest.mark.parametrize("device", WEBGPU)
def test_batch_norm_chunk_merges_and_tickets_reset(device, variant, monkeypatch):
    """Channels split into chunks: merged in the statistics' and the gradient sums' own dispatches where the
    binding vouches for device-scope storageBarrier (no finish or grad_finish dispatch), else by them. Shapes
    of different channel and chunk counts alternate over one ticket buffer, so each stays right only if every
    batch norm leaves its channels' counters at zero."""
    from webgrad._backends.webgpu import batch_norm as bn
    from webgrad._backends.webgpu.runtime import default_runtime
    rt = default_runtime()
    seen = []
    real = rt.run
    def spy(launch, storages):
        seen.append(launch.kernel.entry)
        return real(launch, storages)

    monkeypatch.setattr(rt, "run", spy)
    shapes = [(16, 8, 31, 17), (128, 3, 8, 8), (64, 24, 16, 16)]
    assert all(bn._plan(rt, s[1], s[0] * s[2] * s[3])[0] > 1 for s in shapes)
    for i in range(6):
        _compare(device, _data(shapes[i % 3], seed=i), True)
    merges = seen.count("finish") + seen.count("grad_finish")
    assert merges == (0 if variant == "gpu" else 12), seen


@pytest.mark.parametrize("device", DEVICES)
def test_batch_norm_statistics_far_from_zero(device, variant):
    """Values 1000 + N(0, 0.01): a one-pass sum of squares in float32 would lose the variance entirely
    (1000^2 against 1e-4); shifted sums merged with Chan's formula keep it (on WebGPU in both variants: the
    GPU's stats4 shifts each thread's sums by the first of its vec4s). momentum=1 puts the batch's
    mean and unbiased variance into the running statistics. The mean itself is float32 (as PyTorch's), so
    the output carries its rounding, ulp(1000) / 2 / 0.01 = 3e-3, as a per-channel offset; centred, it
    matches to 1e-4."""
    x = _data((8, 4, 32, 32), loc=1000.0, scale=0.01)["x"]  # 8,192 values a channel: two chunks
    ref = x.astype(np.float64)
    rm, rv = wg.zeros(4, device=device), wg.ones(4, device=device)
    y = F.batch_norm(wg.tensor(x, device=device), rm, rv, training=True, momentum=1.0).cpu().numpy()
    np.testing.assert_allclose(rv.cpu().numpy(), ref.var(axis=(0, 2, 3), ddof=1), rtol=1e-4)
    np.testing.assert_allclose(rm.cpu().numpy(), ref.mean(axis=(0, 2, 3)), rtol=0, atol=4e-5)
    expect = (ref - ref.mean(axis=(0, 2, 3), keepdims=True)) / np.sqrt(ref.var(axis=(0, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(y - y.mean(axis=(0, 2, 3), keepdims=True), expect, rtol=0, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_gradcheck(device, training):
    rng = np.random.default_rng(0)
    rm, rv = [0.1, -0.2, 0.3], [0.5, 1.5, 2.0]

    def fn(x, w, b):
        return F.batch_norm(x, wg.tensor(rm, dtype=x.dtype, device=x.device),
                            wg.tensor(rv, dtype=x.dtype, device=x.device), w, b, training=training)

    gradcheck(fn, rng.standard_normal((4, 3, 2, 3)), rng.uniform(0.5, 1.5, 3), rng.standard_normal(3), device=device)
    gradcheck(lambda x: F.batch_norm(x, None, None, training=True), rng.standard_normal((5, 3)), device=device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,kwargs,shape", [
    ("BatchNorm2d", {}, (4, 3, 5, 6)), ("BatchNorm2d", {"momentum": None}, (4, 3, 5, 6)),
    ("BatchNorm1d", {"affine": False, "momentum": 0.3}, (4, 3, 7)), ("BatchNorm1d", {}, (6, 3)),
    ("BatchNorm2d", {"track_running_stats": False}, (4, 3, 5, 6)), ("BatchNorm3d", {}, (2, 3, 2, 3, 4))])
def test_batchnorm_module_steps_match_torch(device, name, kwargs, shape):
    """Three training steps and one in eval, float32 on every device: outputs, input and parameter
    gradients, running statistics and num_batches_tracked (momentum=None: a cumulative average)."""
    ref = getattr(torch.nn, name)(3, **kwargs)
    ours = getattr(nn, name)(3, **kwargs)
    with torch.no_grad():
        if ref.affine:
            ref.weight.uniform_(0.5, 1.5)
            ref.bias.uniform_(-0.5, 0.5)
    ours.load_state_dict(ref.state_dict())
    ours = ours.to(device)
    rng = np.random.default_rng(0)
    for step in range(4):
        if step == 3:
            ref.eval()
            ours.eval()
        x = (rng.standard_normal(shape) * 2 + 1).astype(np.float32)
        g = rng.standard_normal(x.shape).astype(np.float32)
        xt, xw = torch.tensor(x, requires_grad=True), wg.tensor(x, device=device, requires_grad=True)
        yt, yw = ref(xt), ours(xw)
        yt.backward(torch.tensor(g))
        yw.backward(wg.tensor(g, device=device))
        np.testing.assert_allclose(yw.detach().cpu().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(xw.grad.cpu().numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
        for k, v in ref.state_dict().items():
            np.testing.assert_allclose(ours.state_dict()[k].cpu().numpy(), v.numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=f"{k} at step {step}")
        if ref.affine:
            np.testing.assert_allclose(ours.weight.grad.cpu().numpy(), ref.weight.grad.numpy(), rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(ours.bias.grad.cpu().numpy(), ref.bias.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", WEBGPU)
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_replayed_step_updates_running_statistics(device, momentum):
    """A recorded training step (webgrad.replayable) replays the statistics, their running averages and the
    batch count on the device: four replays match four eager PyTorch steps."""
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.BatchNorm2d(4, momentum=momentum),
                              torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 25, 3))
    ours = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4, momentum=momentum), nn.ReLU(),
                         nn.Flatten(), nn.Linear(4 * 25, 3))
    ours.load_state_dict(ref.state_dict())
    ours = ours.to(device)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    opt = wg.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        loss = F.cross_entropy(ours(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    run = wg.replayable(step)
    rng = np.random.default_rng(0)
    x = wg.zeros(6, 2, 5, 5, device=device)
    y = wg.zeros(6, dtype=wg.int32, device=device)
    for _ in range(6):  # eager, recording, then replays
        xs = rng.standard_normal((6, 2, 5, 5)).astype(np.float32)
        ys = rng.integers(0, 3, 6)
        x.copy_(wg.tensor(xs, device=device))
        y.copy_(wg.tensor(ys.astype(np.int32), device=device))
        loss = run(x, y)
        ref_loss = torch.nn.functional.cross_entropy(ref(torch.tensor(xs)), torch.tensor(ys))
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_opt.step()
        assert abs(loss.item() - ref_loss.item()) < 1e-4
    for k, v in ref.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k].cpu().numpy(), v.numpy(), rtol=1e-4, atol=1e-5, err_msg=k)


@pytest.mark.parametrize("device", DEVICES)
def test_batch_norm_errors_and_edges(device):
    x = wg.randn(4, 3, 2, device=device)
    with pytest.raises(TypeError, match="momentum"):
        F.batch_norm(x, wg.zeros(3, device=device), wg.ones(3, device=device), training=True, momentum=None)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(wg.randn(1, 3, device=device), None, None, training=True)
    empty = nn.BatchNorm1d(3).to(device)  # an empty batch passes through and counts, as in PyTorch
    assert tuple(empty(wg.empty(0, 3, device=device)).shape) == (0, 3) and empty.num_batches_tracked.item() == 1
    with pytest.raises(RuntimeError, match="running_mean and running_var are required"):
        F.batch_norm(x, None, None, training=False)
    with pytest.raises(RuntimeError, match=r"shape \[3\]"):
        F.batch_norm(x, None, None, wg.ones(4, device=device), training=True)
    # a non-contiguous input and running statistics that are views into one buffer (updated through a copy)
    stats = wg.zeros(2, 3, device=device)
    stats[1] = 1.0
    xs = wg.randn(3, 4, 2, device=device).permute(1, 0, 2)
    y = F.batch_norm(xs, stats[0], stats[1], training=True, momentum=0.5)
    ref_stats = torch.zeros(2, 3)
    ref_stats[1] = 1.0
    ref_y = torch.nn.functional.batch_norm(torch.tensor(xs.cpu().numpy()), ref_stats[0], ref_stats[1], training=True,
                                           momentum=0.5)
    np.testing.assert_allclose(y.cpu().numpy(), ref_y.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stats.cpu().numpy(), ref_stats.numpy(), rtol=1e-5, atol=1e-6)
