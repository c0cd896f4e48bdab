"""A bad index never changes the model. The CPU raises an out-of-range embedding index or cross-entropy target in
the forward, before the step; WebGPU raises it at the next read-back, and the optimizer step that follows the failed
check changes nothing: its updates take the runtime's error word as their skip flag (kernels.device_error_flag, as
GradScaler's inf flag), eagerly and in a replayed step, grouped updates included. Every parameter and the optimizer
state are then bit for bit as before that step, the step count too, and training goes on exactly as if the step had
never been taken."""

import numpy as np
import pytest

import webgrad as wg
import webgrad.nn as nn
import webgrad.nn.functional as F
from helpers import webgpu_available

pytestmark = pytest.mark.skipif(not webgpu_available(), reason="needs a WebGPU adapter")

OPTIMIZERS = {
    "sgd-momentum": lambda ps: wg.optim.SGD(ps, lr=0.1, momentum=0.9),
    "sgd-nesterov-decay": lambda ps: wg.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    "adam": lambda ps: wg.optim.Adam(ps, lr=0.05),
    "adamw-amsgrad": lambda ps: wg.optim.AdamW(ps, lr=0.02, amsgrad=True),
    "rmsprop": lambda ps: wg.optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
}
# Composed of tensor ops: their step runs, then parameters and state are put back from copies where the flag is set
# (Optimizer._undone_where). Adagrad (without lr_decay) and Adadelta compute nothing from the step count.
COMPOSED = {
    "adagrad": lambda ps: wg.optim.Adagrad(ps, lr=0.1),
    "adadelta": lambda ps: wg.optim.Adadelta(ps, lr=0.5, weight_decay=0.01),
    "adamax": lambda ps: wg.optim.Adamax(ps, lr=0.02),
    "nadam": lambda ps: wg.optim.NAdam(ps, lr=0.02),
}
OPTIMIZERS.update(COMPOSED)
FUSED = sorted(set(OPTIMIZERS) - set(COMPOSED))
BAD = {"index": "index", "target": "target"}  # what the bad step gets out of range


class Net(nn.Module):
    """Embedding -> two Linear layers: parameters of 96, 130, 10, 50 and 5 elements (partial vec4s)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(12, 8)
        self.fc1 = nn.Linear(16, 10)
        self.fc2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(self.emb(x).flatten(1))))


def _batches(n):
    rng = np.random.default_rng(3)
    return [(rng.integers(0, 12, (6, 2)), rng.integers(0, 5, 6)) for _ in range(n)]


def _snapshot(model, opt):
    params = [p.detach().to("cpu").numpy().copy() for p in model.parameters()]
    state = {i: {k: (v.to("cpu").numpy().copy() if isinstance(v, wg.Tensor) else v) for k, v in s.items()}
             for i, s in opt.state_dict()["state"].items()}
    return params, state


def _same(a, b):
    for x, y in zip(a[0], b[0]):
        np.testing.assert_array_equal(x, y)
    assert a[1].keys() == b[1].keys()
    for i in a[1]:
        assert a[1][i].keys() == b[1][i].keys()
        for k in a[1][i]:
            np.testing.assert_array_equal(a[1][i][k], b[1][i][k], err_msg=f"state {i} {k}")


def _train(device, opt_name, replay, bad_at=None, bad="index", steps=7):
    """Train `steps` good batches; with bad_at, a bad batch comes before good batch bad_at. Returns the snapshots
    (before the bad step, after it), the final snapshot and the step wrapper."""
    wg.manual_seed(0)
    model = Net().to(device)
    opt = OPTIMIZERS[opt_name](model.parameters())

    def step(x, t):
        loss = F.cross_entropy(model(x), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    run = wg.replayable(step) if replay else step
    around = None
    for i, (x, t) in enumerate(_batches(steps)):
        if i == bad_at:
            before = _snapshot(model, opt)
            bx, bt = x.copy(), t.copy()
            if bad == "index":
                bx[2, 1] = 12  # one past the embedding's rows
            else:
                bt[4] = 5  # one past the classes
            replays = getattr(run, "replays", 0)
            with pytest.raises(IndexError, match="out of"):
                run(wg.tensor(bx, device=device), wg.tensor(bt, device=device)).item()
            if replay and device == "webgpu":
                assert run.replays == replays + 1  # the bad step was a replay
            around = before, _snapshot(model, opt)
        run(wg.tensor(x, device=device), wg.tensor(t, device=device)).item()
    return around, _snapshot(model, opt), run


@pytest.fixture(params=["software", "gpu"])
def variant(request, monkeypatch):
    """The adapter's own kernel variants, and a GPU's (one vec4 a thread: grouped SGD and Adam updates)."""
    if request.param == "gpu":
        monkeypatch.setattr(wg.device("webgpu").backend.runtime, "software", False)
    return request.param


@pytest.mark.parametrize("replay", [False, True], ids=["eager", "replayed"])
@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("opt_name", FUSED + ["adagrad", "adadelta"])
def test_a_bad_step_changes_nothing_on_webgpu(variant, opt_name, bad, replay):
    around, final, run = _train("webgpu", opt_name, replay, bad_at=4, bad=bad)
    _same(*around)  # parameters, moments, momentum buffers and the step count as before the bad step
    _, clean, _ = _train("webgpu", opt_name, replay)
    _same(final, clean)  # and training went on as if it had never been taken
    if replay:
        assert run.replays >= 3


@pytest.mark.parametrize("replay", [False, True], ids=["eager", "replayed"])
@pytest.mark.parametrize("opt_name", ["adamax", "nadam"])
def test_composed_optimizers_with_a_host_step_count_change_no_tensor(opt_name, replay):
    """Adamax's and NAdam's bias corrections come from values kept on the host (the step count, NAdam's mu_product),
    which a skip decided on the device cannot hold back: the parameters and their tensor state stay as before the
    bad step, those host values move."""
    (before, after), _, _ = _train("webgpu", opt_name, replay, bad_at=4, bad="target")
    for x, y in zip(before[0], after[0]):
        np.testing.assert_array_equal(x, y)
    for i in before[1]:
        for k in before[1][i]:
            if isinstance(before[1][i][k], np.ndarray):
                np.testing.assert_array_equal(before[1][i][k], after[1][i][k], err_msg=f"state {i} {k}")


@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("opt_name", ["sgd-momentum", "adam"])
def test_the_cpu_raises_in_the_forward_and_changes_nothing(opt_name, bad):
    around, final, _ = _train("cpu", opt_name, False, bad_at=4, bad=bad)
    _same(*around)
    _same(final, _train("cpu", opt_name, False)[1])


@pytest.mark.parametrize("opt_name", ["sgd-momentum", "adam"])
def test_several_steps_before_the_read_back_are_all_skipped(opt_name):
    # the error word stays set until a read-back raises it: every step issued after the bad one is skipped too
    wg.manual_seed(0)
    model = Net().to("webgpu")
    opt = OPTIMIZERS[opt_name](model.parameters())
    batches = _batches(5)
    bad = batches[2][0].copy()
    bad[0, 0] = -13
    losses = []
    for i, x in enumerate((batches[0][0], batches[1][0], bad, batches[3][0], batches[4][0])):
        if i == 2:
            before = _snapshot(model, opt)
        loss = F.cross_entropy(model(wg.tensor(x, device="webgpu")), wg.tensor(batches[1][1], device="webgpu"))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)
    with pytest.raises(IndexError):
        losses[-1].item()
    _same(before, _snapshot(model, opt))


def _resnet_step(opt_name, never_pending=False):
    """A replayed step of a small residual network with batch norm and cross-entropy (whose target check may set
    the error word); never_pending: the backend says no error can be pending, as before the flag existed."""
    with pytest.MonkeyPatch.context() as m:
        if never_pending:
            m.setattr(type(wg.device("webgpu").backend), "errors_pending", property(lambda self: False))
        return _resnet_steps(opt_name)


def _resnet_steps(opt_name):
    wg.manual_seed(0)
    conv = lambda cin, cout: nn.Conv2d(cin, cout, 3, padding=1, bias=False)  # noqa: E731
    body = nn.Sequential(conv(8, 8), nn.BatchNorm2d(8), nn.ReLU(), conv(8, 8), nn.BatchNorm2d(8))
    stem = nn.Sequential(conv(3, 8), nn.BatchNorm2d(8), nn.ReLU())
    head = nn.Linear(8, 4)
    model = nn.ModuleList([stem, body, head]).to("webgpu")
    opt = OPTIMIZERS[opt_name](model.parameters())

    def step(x, t):
        h = stem(x)
        h = F.relu(body(h) + h)
        loss = F.cross_entropy(head(h.mean((2, 3))), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    run = wg.replayable(step)
    gen = wg.Generator().manual_seed(2)
    losses = [run(wg.randn(4, 3, 8, 8, device="webgpu", generator=gen),
                  wg.randint(0, 4, (4,), device="webgpu", generator=gen)).item() for _ in range(5)]
    rt = wg.device("webgpu").backend.runtime
    entries = [d.kernel.entry for d in rt.describe(run.graph.records) if d.kernel]
    return run, entries, losses, [p.detach().to("cpu").numpy() for p in model.parameters()]


@pytest.mark.parametrize("opt_name,group,single", [("sgd-momentum", "sgd4_group", "sgd4"), ("adam", "adam4_group", "adam4")])
def test_a_replayed_step_keeps_its_grouped_updates_and_one_more_dispatch(monkeypatch, opt_name, group, single):
    monkeypatch.setattr(wg.device("webgpu").backend.runtime, "software", False)
    run, entries, losses, params = _resnet_step(opt_name)
    assert entries.count("device_error_flag") == 1
    assert entries.count(group) >= 1 and entries.count(single) <= 1
    base, base_entries, base_losses, base_params = _resnet_step(opt_name, never_pending=True)
    assert "device_error_flag" not in base_entries and base_entries.count(group) == entries.count(group)
    assert run.graph._dispatch_count == base.graph._dispatch_count + 1
    assert losses == base_losses
    for a, b in zip(params, base_params):
        np.testing.assert_array_equal(a, b)


def test_no_flag_where_no_kernel_can_report_an_error():
    # an MSE step on dense inputs runs no index or value check: no flag kernel, the updates as before
    wg.manual_seed(0)
    model = nn.Linear(5, 3).to("webgpu")
    opt = wg.optim.Adam(model.parameters())

    def step(x, t):
        loss = F.mse_loss(model(x), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    run = wg.replayable(step)
    for _ in range(4):
        run(wg.randn(2, 5, device="webgpu"), wg.randn(2, 3, device="webgpu")).item()
    rt = wg.device("webgpu").backend.runtime
    describe = rt.describe(run.graph.records)
    assert "device_error_flag" not in [d.kernel.entry for d in describe if d.kernel]
    assert not any(dict(d.constants).get("SKIP_IF") for d in describe if d.kernel)
    assert not wg.device("cpu").backend.errors_pending  # (the CPU raises at once)


@pytest.mark.parametrize("replay", [False, True], ids=["eager", "replayed"])
def test_gradscalers_flag_and_the_error_flag_both_skip(monkeypatch, replay):
    # replayed: both flags skip on the device. eager: GradScaler's read of its inf flag raises the error, and the
    # scaler starts its next step afresh (it unscales again; left mid-step it applied gradients times the scale)
    monkeypatch.setattr(wg.device("webgpu").backend.runtime, "software", False)

    def train(bad_at):
        wg.manual_seed(0)
        model = Net().to("webgpu")
        opt = wg.optim.Adam(model.parameters(), lr=0.05)
        scaler = wg.amp.GradScaler("webgpu", init_scale=2.0 ** 10)
        scale = wg.ones(1, device="webgpu")

        def step(x, t, s):
            loss = F.cross_entropy(model(x) * s, t)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            return loss

        run = wg.replayable(step) if replay else step
        for i, (x, t) in enumerate(_batches(8)):
            if i == bad_at:
                bad = x.copy()
                bad[0, 0] = 40
                with pytest.raises(IndexError):
                    run(wg.tensor(bad, device="webgpu"), wg.tensor(t, device="webgpu"), scale).item()
            s = wg.full((1,), float("inf") if i == 4 else 1.0, device="webgpu")  # step 4 overflows: GradScaler skips
            run(wg.tensor(x, device="webgpu"), wg.tensor(t, device="webgpu"), s).item()
        assert not replay or run.replays >= 4
        return _snapshot(model, opt), scaler.get_scale()

    (got, got_scale), (want, want_scale) = train(bad_at=6), train(bad_at=None)
    _same(got, want)
    assert got_scale == want_scale
