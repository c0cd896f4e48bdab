"""Epilogue fusion in captured steps (package/webgrad/_backends/webgpu/fusion.py): batch norm, a residual add
and ReLU become one dispatch in a replayed step where nothing else uses the values between them, and so do a
gradient accumulation's add and the ReLU backward that reads the sum; the replayed step computes exactly what
the eager step computes; where a value between them is used again, or
outlives the step, nothing is fused. The runtime is told it runs on a GPU (the vec4 kernels that fuse)."""

import numpy as np
import pytest

import webgrad as wg
import webgrad.nn as nn
import webgrad.nn.functional as F
from helpers import webgpu_available
from gpu_fixtures import gpu_kernels  # noqa: F401  (pytest fixtures)

pytestmark = pytest.mark.skipif(not webgpu_available(), reason="needs a WebGPU adapter")


class Block(nn.Module):
    """ResNet's basic block, a second one whose input is also its residual (that input's gradient is a sum, then
    ReLU's backward), and a pre-activation-style BN + add with no ReLU after it; `leak`: the first BN's output is
    also returned (the step returns it too: it outlives the step), `twice`: the first BN's output feeds two ops."""

    def __init__(self, leak=False, twice=False):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(4, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.shortcut = nn.Sequential(nn.Conv2d(4, 8, 1, bias=False), nn.BatchNorm2d(8))
        self.conv3, self.bn4 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.bn3 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 3)
        self.leak, self.twice = leak, twice

    def forward(self, x):
        y1 = self.bn1(self.conv1(x))
        y = F.relu(y1)
        if self.twice:
            y = y + y1.sigmoid()
        z = self.bn2(self.conv2(y))
        out = F.relu(z + self.shortcut(x))
        out = F.relu(self.bn4(self.conv3(out)) + out)
        out = self.bn3(out) + out  # BN + add, no ReLU
        logits = self.fc(out.mean((2, 3)))
        return (logits, y1) if self.leak else logits


def _train(replay, steps=5, **kw):
    wg.manual_seed(0)
    model = Block(**kw).to("webgpu")
    opt = wg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, t):
        out = model(x)
        loss = F.cross_entropy(out[0] if isinstance(out, tuple) else out, t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return (loss, out[1]) if isinstance(out, tuple) else loss  # (the step's outputs outlive it)

    run = wg.replayable(step) if replay else step
    data = wg.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x = wg.randn(3, 4, 8, 8, device="webgpu", generator=data)
        t = wg.randint(0, 3, (3,), device="webgpu", generator=data)
        out = run(x, t)
        losses.append((out[0] if isinstance(out, tuple) else out).item())
    state = [v.detach().to("cpu").numpy() for v in model.state_dict().values()]
    return np.array(losses), state, run


@pytest.mark.parametrize("kw,fused", [({}, 5), (dict(leak=True), 4), (dict(twice=True), 4)],
                         ids=["block", "bn-output-returned", "bn-output-used-twice"])
def test_replay_fuses_and_computes_what_eager_computes(gpu_kernels, kw, fused):
    eager_losses, eager_state, _ = _train(False, **kw)
    losses, state, run = _train(True, **kw)
    assert run.replays == 3
    # bn1 + relu, bn2 + add + relu, bn4 + add + relu, bn3 + add, and the add of the first block's output's two
    # gradients + its ReLU's backward; a returned bn1 output or one read twice stays as it was
    assert run.graph.fused == fused
    np.testing.assert_array_equal(losses, eager_losses)
    for a, b in zip(eager_state, state):  # weights, biases, running statistics and the batch counts
        np.testing.assert_array_equal(b, a)


def test_fusion_removes_the_passes(gpu_kernels, monkeypatch):
    from webgrad._backends.webgpu import optim, recording

    _, _, run = _train(True, steps=2)
    fused = run.graph.dispatches
    entries = [d.kernel.entry for d in wg.device("webgpu").backend.runtime.describe(run.graph.records) if d.kernel]
    assert entries.count("normalize4_act") == 4 and entries.count("add_unary_backward4") == 1
    # and the 16 parameters' SGD updates take as few dispatches as the device's bindings allow (test_sgd_group.py)
    groups = -(-16 // optim.group_size(wg.device("webgpu").backend.runtime, True))
    assert entries.count("sgd4_group") == groups and "sgd4" not in entries and run.graph.grouped == 16
    monkeypatch.setitem(recording.FUSE, "on", False)
    _, _, run = _train(True, steps=2)
    assert run.graph.fused == 0 and run.graph.grouped == 0
    # three ReLUs and three adds, a gradient's add; the updates
    assert run.graph.dispatches - fused == 7 + 16 - groups
    names = [d.kernel.entry for d in wg.device("webgpu").backend.runtime.describe(run.graph.records) if d.kernel]
    assert "normalize4_act" not in names and names.count("normalize4") == 5
    assert "add_unary_backward4" not in names


def test_relu_backward_folds_into_a_winograd_input_gradient(gpu_kernels, monkeypatch):
    # With 8 channels on Winograd, conv2's input gradient comes from winograd.wgsl's output transform, which then
    # writes it masked by bn1's ReLU (its backward's pass gone); the replay still computes what eager steps do
    from webgrad._backends.webgpu import recording, winograd

    monkeypatch.setattr(winograd, "MIN_CHANNELS", 8)
    eager_losses, eager_state, _ = _train(False)
    losses, state, run = _train(True)
    assert run.graph.fused == 6  # the five fusions of the block, and this one
    np.testing.assert_array_equal(losses, eager_losses)
    for a, b in zip(eager_state, state):
        np.testing.assert_array_equal(b, a)
    describe = wg.device("webgpu").backend.runtime.describe
    masked = [d for d in describe(run.graph.records) if d.kernel and d.kernel.entry == "wino_output"
              and dict(d.constants)["MASK"]]
    assert len(masked) == 1
    monkeypatch.setitem(recording.FUSE, "on", False)
    _, _, plain = _train(True, steps=2)
    groups = sum(1 for d in describe(run.graph.records) if d.kernel and d.kernel.entry == "sgd4_group")
    assert run.graph.grouped == 16 and plain.graph.grouped == 0
    assert plain.graph.dispatches - run.graph.dispatches == 8 + 16 - groups
