"""Anomaly tools (issue 15): detect_anomaly names the op whose gradient went NaN/inf, clip_grad_norm_ /
clip_grad_value_ match PyTorch (fused on WebGPU, inside replayed steps too), and replayable's
check_finite reports a non-finite loss at the loss read-back."""

import math

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn.functional as F
from helpers import DEVICES, webgpu_available

needs_webgpu = pytest.mark.skipif(not webgpu_available(), reason="needs a WebGPU adapter")


@pytest.mark.parametrize("device", DEVICES)
def test_detect_anomaly_names_the_op(device):
    x = wg.tensor([1.0, 0.0, 2.0], device=device, requires_grad=True)
    with wg.autograd.detect_anomaly():
        assert wg.autograd.is_anomaly_enabled()
        y = (x.log() * 0.0).sum()  # d log(x)/dx at 0 is inf; times 0: NaN
        with pytest.raises(RuntimeError, match=r"Function 'LogBackward0' returned nan values in its 0th output") as e:
            y.backward()
        assert "y = (x.log() * 0.0).sum()" in str(e.value)  # the forward call's traceback, user frames only
        del e  # its traceback holds the failed backward's frames
        z = wg.tensor([0.0], device=device, requires_grad=True)
        with pytest.raises(RuntimeError, match=r"Function 'DivBackward0' returned inf values in its 1st output|"
                                               r"returned inf values"):
            (wg.ones(1, device=device) / z).sum().backward()
    assert not wg.autograd.is_anomaly_enabled()
    # the same graph without anomaly mode trains on silently, as in PyTorch
    x.grad = None
    (x.log() * 0.0).sum().backward()
    assert math.isnan(x.grad.tolist()[1])
    wg.autograd.set_detect_anomaly(True)
    try:
        w = wg.tensor([1.0, 2.0], device=device, requires_grad=True)
        (w * w).sum().backward()  # finite gradients pass
        assert w.grad.tolist() == [2.0, 4.0]
    finally:
        wg.autograd.set_detect_anomaly(False)


def _grads(device, seed, scale):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(5, 3), (3,), (70, 40), (2,), (1,), (9000,)]]
    ws = [wg.tensor(a, device=device, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    for w, t, a in zip(ws, ts, arrays):
        w.grad = wg.tensor(a * scale, device=device)
        t.grad = torch.tensor(a * scale)
    return ws, ts


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0])
@pytest.mark.parametrize("max_norm", [1.5, 1e9])
def test_clip_grad_norm_matches_torch(device, norm_type, max_norm):
    ws, ts = _grads(device, 0, 3.0)
    n = wg.nn.utils.clip_grad_norm_(ws, max_norm, norm_type=norm_type)
    m = torch.nn.utils.clip_grad_norm_(ts, max_norm, norm_type=norm_type)
    assert tuple(n.shape) == () and n.device.type == device
    assert n.item() == pytest.approx(m.item(), rel=1e-5)
    for w, t in zip(ws, ts):
        np.testing.assert_allclose(w.grad.to("cpu").numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_clip_grad_norm_edge_cases(device):
    assert wg.nn.utils.clip_grad_norm_([wg.zeros(2, device=device, requires_grad=True)], 1.0).item() == 0.0
    w = wg.tensor([3.0, 4.0], device=device, requires_grad=True)
    w.grad = wg.tensor([3.0, 4.0], device=device)
    assert wg.nn.utils.clip_grad_norm_(w, 1.0).item() == pytest.approx(5.0)  # a single tensor
    assert w.grad.tolist() == pytest.approx([0.6, 0.8], rel=1e-5)
    w.grad = wg.tensor([float("nan"), 1.0], device=device)
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from `parameters` is non-finite"):
        wg.nn.utils.clip_grad_norm_([w], 1.0, error_if_nonfinite=True).item()
    w.grad = wg.tensor([float("inf"), 1.0], device=device)
    n = wg.nn.utils.clip_grad_norm_([w], 1.0)  # scales by the non-finite norm, as PyTorch
    t = torch.tensor([0.0, 0.0], requires_grad=True)
    t.grad = torch.tensor([float("inf"), 1.0])
    assert n.item() == torch.nn.utils.clip_grad_norm_([t], 1.0).item() == math.inf
    np.testing.assert_array_equal(w.grad.to("cpu").numpy(), t.grad.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_clip_grad_value_matches_torch(device):
    ws, ts = _grads(device, 1, 2.0)
    assert wg.nn.utils.clip_grad_value_(ws, 0.5) is None
    torch.nn.utils.clip_grad_value_(ts, 0.5)
    for w, t in zip(ws, ts):
        np.testing.assert_array_equal(w.grad.to("cpu").numpy(), t.grad.numpy())


@needs_webgpu
def test_clip_grad_norm_is_fused_and_replays_without_read_back():
    from webgrad._backends.webgpu.runtime import default_runtime
    rt = default_runtime()
    ws, _ = _grads("webgpu", 0, 3.0)
    reads, dispatches = rt.stats["reads"], rt.stats["dispatches"]
    wg.nn.utils.clip_grad_norm_(ws, 1.0)
    assert rt.stats["reads"] == reads
    assert rt.stats["dispatches"] - dispatches == 2 * 2 + 1  # 6 gradients: 2 chunks of 4, norm and scale, + finish

    wg.manual_seed(0)
    models = [wg.nn.Sequential(wg.nn.Linear(6, 16), wg.nn.ReLU(), wg.nn.Linear(16, 3)).to("webgpu") for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    opts = [wg.optim.SGD(m.parameters(), lr=0.5) for m in models]
    norms = [[], []]

    def make(k):
        def step(x, y):
            loss = F.cross_entropy(models[k](x), y)
            opts[k].zero_grad()
            loss.backward()
            n = wg.nn.utils.clip_grad_norm_(models[k].parameters(), 0.1)
            opts[k].step()
            return loss, n
        return step
    replayed, eager = wg.replayable(make(0)), make(1)
    data = wg.Generator().manual_seed(3)
    for _ in range(5):
        x, y = wg.randn(8, 6, device="webgpu", generator=data), wg.randint(0, 3, (8,), device="webgpu", generator=data)
        for k, step in enumerate((replayed, eager)):
            loss, n = step(x, y)
            norms[k].append(n.item())
    assert replayed.replays == 3
    np.testing.assert_allclose(norms[0], norms[1], rtol=1e-5)
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        np.testing.assert_allclose(a.to("cpu").detach().numpy(), b.to("cpu").detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_replayable_check_finite(device):
    w = wg.ones(3, device=device, requires_grad=True)

    def step(x):
        loss = (w * x).sum()
        loss.backward()
        return loss

    good = wg.ones(3, device=device)
    bad = wg.tensor([1.0, float("nan"), 1.0], device=device)
    worse = wg.tensor([1.0, float("inf"), 1.0], device=device)
    run = wg.replayable(step, check_finite=True)
    for _ in range(3):  # warm-up, recording, replay
        assert run(good).item() == 3.0
    with pytest.raises(FloatingPointError, match="the step's loss is NaN"):
        run(bad).item()
    assert run(good).item() == 3.0
    with pytest.raises(FloatingPointError, match="the step's loss is infinite"):
        run(worse).item()
    if device == "webgpu":
        assert run.replays == 4
    seen = []
    run = wg.replayable(step, check_finite=seen.append)
    for x in (good, good, good, bad, good):
        run(x).item()
    assert seen == ["replayable(check_finite): the step's loss is NaN"]
    with pytest.raises(TypeError):
        wg.replayable(step, check_finite="yes")
