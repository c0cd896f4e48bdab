"""How a training loop meets the GPU (issue 11: the host's work overlaps the GPU's): each replay is
submitted at once, in one submit, with no wait, and so is each eager step, at its optimizer step; a
periodic loss read costs one submit and one read; values read after many queued replays are those of the
latest step. Counts, not times."""

import numpy as np
import pytest

import webgrad as wg
import webgrad.nn as nn
import webgrad.nn.functional as F
from helpers import webgpu_available

needs_webgpu = pytest.mark.skipif(not webgpu_available(), reason="needs a WebGPU adapter")


def _model_and_step(device, optimizer):
    wg.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5)).to(device)
    opt = (wg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if optimizer == "sgd"
           else wg.optim.Adam(model.parameters(), lr=1e-2))

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return model, step


def _batches(device, n):
    data = wg.Generator().manual_seed(1)
    return [(wg.randn(16, 20, device=device, generator=data), wg.randint(0, 5, (16,), device=device, generator=data))
            for _ in range(n)]


class _Calls:
    """Counts the binding's submits, waits, reads and buffer writes (wrapping the runtime's binding in place)."""

    def __init__(self, monkeypatch, binding):
        self.counts = dict.fromkeys(("submit", "wait", "read", "write_buffer"), 0)
        for name in self.counts:
            def counted(*args, _name=name, _f=getattr(binding, name)):
                self.counts[_name] += 1
                return _f(*args)
            monkeypatch.setattr(binding, name, counted)

    def take(self):
        counts, self.counts = self.counts, dict.fromkeys(self.counts, 0)
        return counts


@needs_webgpu
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_each_replay_is_one_submit_and_no_wait(monkeypatch, optimizer):
    """SGD writes no dynamic scalar per step, Adam writes its step count and bias corrections: both submit
    every replay at once (before, SGD's replays stayed queued until the next read-back), with no wait and no
    read; Adam's scalars of a step go out in one buffer write (they were one each)."""
    _, step = _model_and_step("webgpu", optimizer)
    run = wg.replayable(step)
    batches = _batches("webgpu", 4)
    for x, y in batches[:2]:  # warm-up, recording
        run(x, y)
    wg.webgpu.synchronize()
    rt = wg.device("webgpu").backend.runtime
    calls = _Calls(monkeypatch, rt.binding)
    for i in range(6):
        submits = rt.stats["submits"]
        run(*batches[i % 4])
        assert rt.stats["submits"] == submits + 1
        assert calls.take() == {"submit": 1, "wait": 0, "read": 0, "write_buffer": 0 if optimizer == "sgd" else 1}
    assert run.replays == 6
    loss = run(*batches[0])
    loss.item()  # the periodic loss read: the staging copy's submit and one mapped read, nothing else
    assert {k: v for k, v in calls.take().items() if k != "write_buffer"} == {"submit": 2, "wait": 0, "read": 1}
    wg.webgpu.synchronize()  # all was read: a plain wait, nothing to submit
    assert calls.take() == {"submit": 0, "wait": 1, "read": 0, "write_buffer": 0}


@needs_webgpu
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_each_eager_step_is_submitted_at_its_optimizer_step(monkeypatch, optimizer):
    """Without replay, the optimizer's step() submits the step's queued work (forward, backward, update) in
    one submit and waits for nothing, so the GPU computes it while the host issues the next step (before,
    eager work waited for the next read-back: ten steps of host time, then ten of GPU time). The values are
    those of the same steps on the CPU."""
    model, step = _model_and_step("webgpu", optimizer)
    ref_model, ref_step = _model_and_step("cpu", optimizer)
    gpu_batches, cpu_batches = _batches("webgpu", 8), _batches("cpu", 8)
    for (x, y), (cx, cy) in zip(gpu_batches[:2], cpu_batches[:2]):  # warm-up: pipelines, state, pool
        step(x, y)
        ref_step(cx, cy)
    wg.webgpu.synchronize()
    rt = wg.device("webgpu").backend.runtime
    calls = _Calls(monkeypatch, rt.binding)
    for (x, y), (cx, cy) in zip(gpu_batches[2:], cpu_batches[2:]):
        loss = step(x, y)
        ref_loss = ref_step(cx, cy)
        assert not rt._records, "work of the step left queued after opt.step()"
        counts = calls.take()
        assert (counts["submit"], counts["wait"], counts["read"]) == (1, 0, 0), counts
    assert loss.item() == pytest.approx(ref_loss.item(), abs=1e-5)
    for p, q in zip(model.parameters(), ref_model.parameters()):
        np.testing.assert_allclose(p.detach().to("cpu").numpy(), q.detach().numpy(), rtol=0, atol=1e-5)


@needs_webgpu
def test_values_read_after_queued_replays_are_the_latest():
    """Twelve replays queued without a read, then the loss and the weights: the same as twelve eager steps
    on the CPU (the read waits for the last replay, not an earlier one)."""
    model, step = _model_and_step("webgpu", "sgd")
    ref_model, ref_step = _model_and_step("cpu", "sgd")
    run = wg.replayable(step)
    gpu_batches, cpu_batches = _batches("webgpu", 14), _batches("cpu", 14)
    for (x, y), (cx, cy) in zip(gpu_batches, cpu_batches):
        loss = run(x, y)
        ref_loss = ref_step(cx, cy)
    assert run.replays == 12
    assert loss.item() == pytest.approx(ref_loss.item(), abs=1e-5)
    for p, q in zip(model.parameters(), ref_model.parameters()):
        np.testing.assert_allclose(p.detach().to("cpu").numpy(), q.detach().numpy(), rtol=0, atol=1e-5)


@needs_webgpu
def test_error_of_a_queued_replay_surfaces_at_the_next_read():
    """A bad class index inside a replayed step (device-side: the error word) raises at the loss read that
    follows, although the replays were submitted without waiting; training goes on after it."""
    _, step = _model_and_step("webgpu", "sgd")
    run = wg.replayable(step)
    good = _batches("webgpu", 1)[0]
    for _ in range(3):
        run(*good)
    run(*good).item()
    bad_y = good[1].clone()
    bad_y[3] = 7  # 5 classes
    run(good[0], bad_y)
    loss = run(*good)  # queued behind the bad one
    with pytest.raises(IndexError, match="7"):
        loss.item()
    assert np.isfinite(run(*good).item())  # the word was cleared
