"""webgrad.replayable: a recorded training step replays with new data, new random numbers and new
optimizer scalars, and gives the same numbers as eager training. Plus the issue's parity test: 20
identical training steps of a small MLP on the CPU and on WebGPU."""

import numpy as np
import pytest

import webgrad as wg
import webgrad.nn as nn
import webgrad.nn.functional as F
from helpers import webgpu_available

needs_webgpu = pytest.mark.skipif(not webgpu_available(), reason="needs a WebGPU adapter")


def _train(device, steps=20, replay=False, dropout=0.0, optimizer="adam"):
    wg.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Dropout(dropout), nn.Linear(32, 5)).to(device)
    opt = wg.optim.Adam(model.parameters(), lr=1e-2) if optimizer == "adam" else \
        wg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    sched = wg.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    run = wg.replayable(step) if replay else step
    data = wg.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x = wg.randn(16, 20, device=device, generator=data)
        y = wg.randint(0, 5, (16,), device=device, generator=data)
        losses.append(run(x, y).item())
        sched.step()
    return np.array(losses), [p.detach().to("cpu").numpy() for p in model.parameters()], run


@needs_webgpu
def test_training_parity_cpu_vs_webgpu():
    """20 identical steps of a small MLP: losses agree to 1e-5 per step, final weights to 1e-4."""
    cpu_losses, cpu_params, _ = _train("cpu")
    gpu_losses, gpu_params, _ = _train("webgpu")
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=0, atol=1e-5)
    for a, b in zip(cpu_params, gpu_params):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-4)


@needs_webgpu
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_replayed_training_matches_eager(optimizer):
    eager_losses, eager_params, _ = _train("cpu", dropout=0.2, optimizer=optimizer)
    losses, params, run = _train("webgpu", replay=True, dropout=0.2, optimizer=optimizer)
    assert run.replays == 18  # one warm-up call, one recording call, then replays only
    np.testing.assert_allclose(losses, eager_losses, rtol=0, atol=1e-5)
    for a, b in zip(eager_params, params):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-4)


@needs_webgpu
def test_replay_runs_no_python_ops_and_allocates_nothing(monkeypatch):
    backend = wg.device("webgpu").backend
    model = nn.Linear(8, 4).to("webgpu")
    opt = wg.optim.SGD(model.parameters(), lr=0.1)

    def step(x):
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    run = wg.replayable(step)
    x = wg.randn(4, 8, device="webgpu")
    run(x), run(x)
    # every op makes its output through Tensor._empty: count them during replays
    made = []
    real = wg.Tensor._empty.__func__
    monkeypatch.setattr(wg.Tensor, "_empty", classmethod(lambda cls, *a: made.append(a) or real(cls, *a)))
    before = dict(backend.runtime.stats)
    for _ in range(10):
        run(x).item()
    after = backend.runtime.stats
    assert after["replays"] - before["replays"] == 10
    assert made == []
    assert {k: after[k] - before[k] for k in after if "creat" in k} == {k: 0 for k in after if "creat" in k}


@needs_webgpu
def test_replayed_cnn_with_split_k_matches_eager_and_allocates_nothing():
    """A small CNN step with every matmul split across workgroups (forced: a software adapter's plan
    would not split): its scratch buffers come from the graph's pool, replays match eager CPU training
    and create no GPU objects."""
    from webgrad._backends.webgpu import matmul_plan

    def train(device, replay):
        wg.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(4, 6, 3, padding=(1, 0), dilation=(1, 2)), nn.ReLU(), nn.Flatten(),
                              nn.Linear(6 * 5, 3)).to(device)
        opt = wg.optim.Adam(model.parameters(), lr=1e-2)

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        run = wg.replayable(step) if replay else step
        data = wg.Generator().manual_seed(1)
        batches = [(wg.randn(5, 2, 10, 10, device=device, generator=data),
                    wg.randint(0, 3, (5,), device=device, generator=data)) for _ in range(8)]
        losses, stats = [], []
        for x, y in batches:
            losses.append(run(x, y).item())
            if device == "webgpu":
                stats.append(dict(wg.device("webgpu").backend.runtime.stats))
        return np.array(losses), [p.detach().to("cpu").numpy() for p in model.parameters()], stats

    eager_losses, eager_params, _ = train("cpu", False)
    matmul_plan._plan.cache_clear()
    old, matmul_plan._FORCED_SPLITS = matmul_plan._FORCED_SPLITS, 3
    try:
        losses, params, stats = train("webgpu", True)
        assert any(p.splits > 1 for p in wg.device("webgpu").backend.runtime.memo if hasattr(p, "splits"))
    finally:
        matmul_plan._FORCED_SPLITS = old
        matmul_plan._plan.cache_clear()
    np.testing.assert_allclose(losses, eager_losses, rtol=0, atol=1e-5)
    for a, b in zip(eager_params, params):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-4)
    created = {k: stats[-1][k] - stats[2][k] for k in stats[-1] if "creat" in k}  # over 5 replays
    assert created == {k: 0 for k in created}


@needs_webgpu
def test_new_shapes_run_eagerly_and_dropout_masks_change():
    model = nn.Dropout(0.5).to("webgpu")
    run = wg.replayable(lambda x: model(x) * 1.0)
    x = wg.ones(64, device="webgpu")
    masks = [run(x).tolist() for _ in range(4)]
    assert run.replays == 2
    assert masks[2] != masks[3]  # each replay draws new random numbers
    assert run(wg.ones(8, device="webgpu")).shape == (8,) and run.replays == 2  # other shape: eager


@needs_webgpu
def test_an_argument_written_in_place_changes_as_eagerly():
    # a running state passed in and updated in place: the replayed step works on its static copy, which every
    # call copies back into the caller's tensor (before this, the caller's tensor kept its value of the recording
    # call's start and every replay repeated the same output)
    def step(x, state):
        out = (x @ state).sum()
        state.mul_(0.5).add_(x.t() @ x)
        return out

    results = {}
    for replay in (False, True):
        wg.manual_seed(0)
        x, state = wg.randn(4, 3, device="webgpu"), wg.randn(3, 3, device="webgpu")
        fn = wg.replayable(step) if replay else step
        results[replay] = ([fn(x, state).item() for _ in range(5)], state.to("cpu").numpy())
    assert fn.replays == 3
    np.testing.assert_allclose(results[True][0], results[False][0], rtol=1e-6)
    np.testing.assert_allclose(results[True][1], results[False][1], rtol=1e-6)


def test_cpu_calls_the_function():
    run = wg.replayable(lambda x: x * 2)
    assert [run(wg.ones(2)).tolist() for _ in range(3)] == [[2.0, 2.0]] * 3
    assert run.replays == 0


@needs_webgpu
def test_a_long_replay_goes_in_parts(monkeypatch):
    """A replay of many records is submitted in growing parts (recording.replay_parts), here forced on the MLP's
    step: each replay makes that many submits, and the training matches eager training as before."""
    from webgrad._backends.webgpu import recording

    monkeypatch.setattr(recording, "SUBMIT_SPLIT_MIN", 8)
    monkeypatch.setattr(recording, "SUBMIT_FIRST", 2)
    eager_losses, eager_params, _ = _train("cpu", optimizer="sgd")
    rt = wg.device("webgpu").backend.runtime
    before = dict(rt.stats)
    losses, params, run = _train("webgpu", replay=True, optimizer="sgd")
    parts = recording.replay_parts(run.graph.records)
    assert len(parts) >= 3 and sum(map(len, parts)) == len(run.graph.records)
    assert rt.stats["submits"] - before["submits"] >= run.replays * len(parts)
    np.testing.assert_allclose(losses, eager_losses, rtol=0, atol=1e-5)
    for a, b in zip(eager_params, params):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-4)


@needs_webgpu
def test_a_step_that_reads_back_runs_eagerly_with_a_warning():
    """A value read back while recording decided something on the host that a replay would repeat
    unchanged (here LBFGS's line search, from its closure's loss): the step is not replayed but runs
    eagerly on every call, and ends where the eager loop ends."""
    def train(replay):
        wg.manual_seed(0)
        model = nn.Linear(4, 2).to("webgpu")
        opt = wg.optim.LBFGS(model.parameters(), lr=0.5, max_iter=3)
        x, y = wg.randn(8, 4, device="webgpu"), wg.randn(8, 2, device="webgpu")

        def step(x):
            def closure():
                opt.zero_grad()
                loss = F.mse_loss(model(x), y)
                loss.backward()
                return loss
            return opt.step(closure)

        run = wg.replayable(step) if replay else step
        losses = [float(run(x)) for _ in range(5)]
        return losses, model.weight.detach().numpy(), run

    eager_losses, eager_w, _ = train(False)
    with pytest.warns(RuntimeWarning, match=r"read \d+ value\(s\) back .* runs eagerly on every call"):
        losses, w, run = train(True)
    assert run.replays == 0 and run.graph is None
    np.testing.assert_array_equal(losses, eager_losses)
    np.testing.assert_array_equal(w, eager_w)


@needs_webgpu
def test_a_graph_that_read_back_refuses_to_replay():
    backend = wg.device("webgpu").backend
    x = wg.ones(4, device="webgpu")
    with backend.capture() as graph:
        y = x * 2
        assert y.sum().item() == 8.0
    assert graph.read_backs == 1
    with pytest.raises(RuntimeError, match=r"read 1 value\(s\) back .* would repeat|repeating whatever"):
        graph.replay()
    graph.release()
    with backend.capture() as clean:
        y = x * 3
    assert clean.read_backs == 0
    clean.replay()
    assert y.tolist() == [3.0] * 4


def test_replayable_needs_an_eager_call_first():
    """The eager call makes the state a step keeps; recorded, that state's initial values would be written
    again at every replay (an optimizer's moments reset, GradScaler's scale stuck)."""
    with pytest.raises(ValueError, match=r"warmup=0.*at least one eager call"):
        wg.replayable(lambda x: x, warmup=0)


@needs_webgpu
def test_state_made_inside_a_capture_is_made_once():
    """State that a recorded step makes (an optimizer's first step; GradScaler's first scale(), or Adam's
    state after GradScaler skipped the eager steps) is made outside the recording: replays go on from it
    instead of writing its initial values again (Adam's moments reset to zero, the scale stuck)."""
    backend = wg.device("webgpu").backend
    rng = np.random.default_rng(0)
    w0, g = rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)
    results = []
    for capture in (False, True):
        p = wg.tensor(w0, device="webgpu", requires_grad=True)
        p.grad = wg.tensor(g, device="webgpu")
        opt = wg.optim.Adam([p], lr=0.1)
        if capture:
            with backend.capture() as graph:
                opt.step()  # the first step: Adam's state is made here
            for _ in range(3):
                opt.prepare_replay()
                graph.replay()
        else:
            for _ in range(4):
                opt.step()
        results.append(p.detach().numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6, atol=1e-7)

    model = nn.Linear(4, 2).to("webgpu")
    opt = wg.optim.SGD(model.parameters(), lr=0.1)
    scaler = wg.amp.GradScaler(init_scale=8.0, growth_interval=1)
    x = wg.ones(3, 4, device="webgpu")
    with backend.capture() as graph:
        scaler.scale(model(x).sum()).backward()  # the first scale(): the scale is made here
        scaler.step(opt)
        scaler.update()
    for _ in range(3):
        graph.replay()
    assert scaler.get_scale() == 8.0 * 2 ** 4  # grown at the capture and at each replay, never reset


@needs_webgpu
@pytest.mark.parametrize("kind", ["onecycle", "sequential"])
def test_a_scheduler_stepped_inside_the_step_steps_at_every_replay(kind):
    """scheduler.step() inside the replayed function (a per-batch schedule): a replay does not run the
    function's Python, so the call runs again before each replay, as the optimizer's host half does; the
    lrs and the weights follow the eager loop. SequentialLR's children step inside it, not twice."""
    def train(replay):
        wg.manual_seed(0)
        model = nn.Linear(8, 4).to("webgpu")
        opt = wg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        if kind == "onecycle":
            sched = wg.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=20)
        else:
            sched = wg.optim.lr_scheduler.SequentialLR(
                opt, [wg.optim.lr_scheduler.LinearLR(opt, start_factor=0.2, total_iters=3),
                      wg.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6)], milestones=[3])
        x = wg.randn(16, 8, device="webgpu")

        def step(x):
            opt.zero_grad()
            loss = (model(x) ** 2).mean()
            loss.backward()
            opt.step()
            sched.step()
            return loss

        run = wg.replayable(step) if replay else step
        lrs = []
        for _ in range(10):
            run(x)
            lrs.append(opt.param_groups[0]["lr"])
        return lrs, sched.last_epoch, model.weight.detach().numpy(), run

    eager_lrs, eager_epoch, eager_w, _ = train(False)
    lrs, epoch, w, run = train(True)
    assert run.replays == 8 and lrs == eager_lrs and epoch == eager_epoch == 10
    np.testing.assert_allclose(w, eager_w, rtol=1e-6, atol=1e-7)
