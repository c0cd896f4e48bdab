"""A replayed step's SGD updates grouped into sgd4_group dispatches (fusion.py's sgd_group, optim_group.wgsl):
the replay trains exactly as eager steps do (bit for bit) for every SGD option, parameters of any size (a partial
last vec4, several workgroups), groups cut where the device's storage buffers run out, a learning rate changed
between replays, and GradScaler's skipped steps. The runtime is told it runs on a GPU (sgd4's one vec4 a thread,
which sgd4_group does too)."""

import numpy as np
import pytest

import webgrad as wg
import webgrad.nn as nn
import webgrad.nn.functional as F
from helpers import webgpu_available
from gpu_fixtures import gpu_kernels  # noqa: F401  (pytest fixtures)

pytestmark = pytest.mark.skipif(not webgpu_available(), reason="needs a WebGPU adapter")


def _model():
    wg.manual_seed(0)
    # 35-, 7-, 7,210- and 1,030-element parameters: partial vec4s, and one of 8 workgroups
    return nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 1030)).to("webgpu")


def _train(replay, options, steps=5, scaler=None, lrs=None):
    model = _model()
    opt = wg.optim.SGD(model.parameters(), **options)

    def step(x, t):
        loss = F.mse_loss(model(x), t)
        opt.zero_grad()
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return loss

    run = wg.replayable(step) if replay else step
    data = wg.Generator().manual_seed(1)
    losses = []
    for i in range(steps):
        if lrs is not None:
            for group in opt.param_groups:
                group["lr"] = lrs[i]
        x = wg.randn(4, 5, device="webgpu", generator=data)
        t = wg.randn(4, 1030, device="webgpu", generator=data)
        if scaler is not None and i == 3:
            x = x * float("inf")  # an overflowing step: GradScaler skips it on the device
        losses.append(run(x, t).item())
    return np.array(losses), [p.detach().to("cpu").numpy() for p in model.parameters()], run


def _entries(run):
    describe = wg.device("webgpu").backend.runtime.describe
    return [d.kernel.entry for d in describe(run.graph.records) if d.kernel]


def _same(replayed, eager):
    np.testing.assert_array_equal(replayed[0], eager[0])
    for a, b in zip(replayed[1], eager[1]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("options", [
    dict(lr=0.05), dict(lr=0.05, momentum=0.9), dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-2),
    dict(lr=0.05, momentum=0.5, dampening=0.3, maximize=True)],
    ids=["plain", "momentum", "nesterov-decay", "dampening-maximize"])
def test_grouped_updates_train_as_eager_steps(gpu_kernels, options):
    eager = _train(False, options)
    replayed = _train(True, options)
    run = replayed[2]
    assert run.replays == 3 and run.graph.grouped == 4
    entries = _entries(run)
    assert entries.count("sgd4_group") == 1 and "sgd4" not in entries
    _same(replayed, eager)


def test_groups_end_where_the_storage_buffers_do(gpu_kernels, monkeypatch):
    # 3 + 2 bindings a member with momentum: a device of 9 storage buffers takes two members a dispatch
    from webgrad._backends.webgpu import optim

    rt = wg.device("webgpu").backend.runtime
    monkeypatch.setitem(rt.limits, "max_storage_buffers_per_shader_stage", 9)
    assert optim.group_size(rt, True) == 2 and optim.group_size(rt, False) == 3
    options = dict(lr=0.05, momentum=0.9)
    eager = _train(False, options)
    replayed = _train(True, options)
    assert _entries(replayed[2]).count("sgd4_group") == 2
    _same(replayed, eager)
    monkeypatch.setitem(rt.limits, "max_storage_buffers_per_shader_stage", 8)  # WebGPU's default: one member
    replayed = _train(True, options)
    assert replayed[2].graph.grouped == 0 and _entries(replayed[2]).count("sgd4") == 4
    _same(replayed, eager)


def test_a_learning_rate_changed_between_replays_is_read(gpu_kernels):
    options, lrs = dict(lr=0.05, momentum=0.9), [0.05, 0.05, 0.02, 0.1, 0.01]
    _same(_train(True, options, lrs=lrs), _train(False, options, lrs=lrs))


def test_grad_scaler_skips_a_grouped_step_on_the_device(gpu_kernels):
    options = dict(lr=0.05, momentum=0.9)
    eager = _train(False, options, steps=6, scaler=wg.amp.GradScaler("webgpu", init_scale=4.0))
    replayed = _train(True, options, steps=6, scaler=wg.amp.GradScaler("webgpu", init_scale=4.0))
    assert replayed[2].graph.grouped == 4 and np.isnan(replayed[0][3])
    np.testing.assert_array_equal(np.isnan(replayed[0]), np.isnan(eager[0]))
    finite = ~np.isnan(eager[0])
    np.testing.assert_array_equal(replayed[0][finite], eager[0][finite])
    for a, b in zip(replayed[1], eager[1]):
        np.testing.assert_array_equal(a, b)
