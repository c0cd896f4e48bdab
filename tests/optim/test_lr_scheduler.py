"""webgrad.optim.lr_scheduler: every scheduler's lr (and momentum) sequence against torch's, state dicts,
and PyTorch's warnings."""

import pickle
import warnings

import numpy as np

import pytest
import torch

import webgrad as wg

EPOCHS = 30


def _optimizer(lib, name="SGD"):
    """Two parameter groups with different lrs, so per-group handling is exercised."""
    a = lib.zeros(2, requires_grad=True)
    b = lib.zeros(3, requires_grad=True)
    groups = [{"params": [a]}, {"params": [b], "lr": 0.02}]
    if name == "SGD":
        return lib.optim.SGD(groups, lr=0.1, momentum=0.9)
    return getattr(lib.optim, name)(groups, lr=0.1)


def _momentum(group):
    return group["betas"][0] if "betas" in group else group["momentum"]


def _sequence(lib, make, epochs=EPOCHS, optimizer="SGD", metrics=None):
    """[(group lrs, get_last_lr(), group momenta)] after construction and after each epoch."""
    opt = _optimizer(lib, optimizer)
    sched = make(lib.optim.lr_scheduler, opt)

    def snapshot():
        return ([g["lr"] for g in opt.param_groups], list(sched.get_last_lr()),
                [_momentum(g) for g in opt.param_groups])

    out = [snapshot()]
    for epoch in range(epochs):
        opt.step()
        sched.step(metrics[epoch]) if metrics is not None else sched.step()
        out.append(snapshot())
    return out


def _assert_same(got, expected):
    assert len(got) == len(expected)
    for epoch, (g, e) in enumerate(zip(got, expected)):
        for g_values, e_values in zip(g, e):
            assert g_values == pytest.approx(e_values, rel=1e-12, abs=1e-15), f"epoch {epoch}: {g} != {e}"


SCHEDULES = {
    "StepLR": lambda s, o: s.StepLR(o, step_size=3, gamma=0.5),
    "MultiStepLR": lambda s, o: s.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
    "ExponentialLR": lambda s, o: s.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda s, o: s.CosineAnnealingLR(o, T_max=10),
    "CosineAnnealingLR-past-T_max": lambda s, o: s.CosineAnnealingLR(o, T_max=7, eta_min=1e-3),
    "LinearLR": lambda s, o: s.LinearLR(o),
    "LinearLR-factors": lambda s, o: s.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=6),
    "OneCycleLR-cos": lambda s, o: s.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=EPOCHS + 1),
    "OneCycleLR-linear": lambda s, o: s.OneCycleLR(o, max_lr=0.8, total_steps=EPOCHS + 1, anneal_strategy="linear",
                                                   pct_start=0.25, div_factor=10.0, final_div_factor=100.0),
    "OneCycleLR-three-phase": lambda s, o: s.OneCycleLR(o, max_lr=1.0, epochs=1, steps_per_epoch=EPOCHS + 1,
                                                        three_phase=True, base_momentum=0.8, max_momentum=0.9),
    "OneCycleLR-no-momentum": lambda s, o: s.OneCycleLR(o, max_lr=1.0, total_steps=EPOCHS + 5, cycle_momentum=False),
    "SequentialLR": lambda s, o: s.SequentialLR(o, [s.LinearLR(o, start_factor=0.1, total_iters=4),
                                                    s.CosineAnnealingLR(o, T_max=8, eta_min=0.001),
                                                    s.StepLR(o, step_size=2, gamma=0.7)], milestones=[4, 12]),
    "SequentialLR-exponential": lambda s, o: s.SequentialLR(o, [s.ExponentialLR(o, gamma=0.5),
                                                                s.MultiStepLR(o, [3, 6])], milestones=[5]),
    "CyclicLR-triangular": lambda s, o: s.CyclicLR(o, base_lr=0.01, max_lr=[0.1, 0.05], step_size_up=4),
    "CyclicLR-triangular2": lambda s, o: s.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3, step_size_down=5,
                                                    mode="triangular2", base_momentum=0.7, max_momentum=0.95),
    "CyclicLR-exp_range": lambda s, o: s.CyclicLR(o, base_lr=[0.02, 0.01], max_lr=0.2, step_size_up=2,
                                                  mode="exp_range", gamma=0.97),
    "CyclicLR-scale_fn": lambda s, o: s.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3,
                                                 scale_fn=lambda x: 1 / (1 + 0.1 * x), scale_mode="iterations",
                                                 cycle_momentum=False),
}


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_lr_sequence_matches_torch(schedule, optimizer):
    make = SCHEDULES[schedule]
    expected = _sequence(torch, make, optimizer=optimizer)
    got = _sequence(wg, make, optimizer=optimizer)
    _assert_same(got, expected)
    assert len({tuple(lrs) for lrs, _, _ in got}) > 2  # the schedule did change the lr


PLATEAU_METRICS = [1.0, 0.9, 0.95, 0.95, 0.95, 0.89, 0.9, 0.9, 0.9, 0.9, 0.5, 0.6, 0.6, 0.6, 0.6,
                   0.6, 0.6, 0.6, 0.6, 0.6, 0.4, 0.45, 0.45, 0.45, 0.45, 0.45, 0.45, 0.45, 0.45, 0.45]


@pytest.mark.parametrize("kwargs", [
    dict(patience=2),
    dict(mode="max", patience=1, factor=0.5),
    dict(patience=1, threshold=0.05, threshold_mode="abs", cooldown=2),
    dict(patience=0, factor=0.5, min_lr=[0.01, 0.005]),
    dict(patience=0, factor=0.5, min_lr=0.004, eps=1e-3),
    dict(mode="max", threshold=0.1, patience=0, factor=0.7),
])
def test_reduce_lr_on_plateau_matches_torch(kwargs):
    def make(s, o):
        return s.ReduceLROnPlateau(o, **kwargs)

    expected = _sequence(torch, make, metrics=PLATEAU_METRICS)
    got = _sequence(wg, make, metrics=[wg.tensor(m) for m in PLATEAU_METRICS])  # tensors are accepted too
    _assert_same(got, expected)
    assert got[-1][0] != got[0][0]


def test_resume_with_last_epoch_matches_torch():
    """A scheduler built with last_epoch >= 0 (resuming) reads initial_lr from the groups."""
    sequences = []
    for lib in (torch, wg):
        opt = _optimizer(lib)
        for group in opt.param_groups:
            group["initial_lr"] = group["lr"] * 2
        sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10, last_epoch=3)
        seq = [sched.get_last_lr()]
        for _ in range(8):
            opt.step()
            sched.step()
            seq.append(sched.get_last_lr())
        sequences.append([lr for lrs in seq for lr in lrs])
    assert sequences[1] == pytest.approx(sequences[0], rel=1e-12)
    with pytest.raises(KeyError, match="initial_lr"):
        wg.optim.lr_scheduler.StepLR(_optimizer(wg), step_size=2, last_epoch=4)


def test_step_with_epoch_uses_closed_form_as_torch():
    results = []
    for lib in (torch, wg):
        opt = _optimizer(lib)
        sched = lib.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
        opt.step()
        with pytest.warns(UserWarning, match="epoch parameter"):
            sched.step(7)
        results.append((sched.last_epoch, sched.get_last_lr()))
    assert results[1] == (7, pytest.approx(results[0][1], rel=1e-12))


def test_one_cycle_errors_match_torch():
    for kwargs in (dict(max_lr=1.0), dict(max_lr=1.0, total_steps=0), dict(max_lr=[1.0], total_steps=5),
                   dict(max_lr=1.0, total_steps=5, pct_start=1), dict(max_lr=1.0, total_steps=5, anneal_strategy="x")):
        with pytest.raises(ValueError) as expected:
            torch.optim.lr_scheduler.OneCycleLR(_optimizer(torch), **kwargs)
        with pytest.raises(ValueError) as got:
            wg.optim.lr_scheduler.OneCycleLR(_optimizer(wg), **kwargs)
        assert str(got.value) == str(expected.value)
    messages = []
    for lib in (torch, wg):  # stepping past total_steps
        opt = _optimizer(lib)
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=3)
        opt.step()
        with pytest.raises(ValueError) as err:
            for _ in range(10):
                sched.step()
        messages.append(str(err.value))
    assert messages[1] == messages[0] == "Tried to step 4 times. The specified number of total steps is 3"


STATE_CASES = {
    "StepLR": SCHEDULES["StepLR"],
    "CosineAnnealingLR": SCHEDULES["CosineAnnealingLR-past-T_max"],
    "OneCycleLR": SCHEDULES["OneCycleLR-three-phase"],
    "SequentialLR": SCHEDULES["SequentialLR"],
    "ReduceLROnPlateau": lambda s, o: s.ReduceLROnPlateau(o, patience=1, cooldown=1),
    "CyclicLR": SCHEDULES["CyclicLR-triangular2"],
}


@pytest.mark.parametrize("schedule", list(STATE_CASES))
def test_state_dict_round_trip(schedule):
    """Checkpoint mid-run (optimizer and scheduler, through pickle), resume in fresh objects built the
    usual way (scheduler constructed, then both states loaded): same lrs as the uninterrupted run."""
    make = STATE_CASES[schedule]
    plateau = schedule == "ReduceLROnPlateau"

    def advance(opt, sched, epochs, start):
        lrs = []
        for epoch in range(start, start + epochs):
            opt.step()
            sched.step(PLATEAU_METRICS[epoch]) if plateau else sched.step()
            lrs.append(([g["lr"] for g in opt.param_groups], [_momentum(g) for g in opt.param_groups]))
        return lrs

    opt = _optimizer(wg)
    sched = make(wg.optim.lr_scheduler, opt)
    advance(opt, sched, 9, 0)
    checkpoint = pickle.dumps({"opt": opt.state_dict(), "sched": sched.state_dict()})
    expected = advance(opt, sched, 12, 9)

    opt2 = _optimizer(wg)
    sched2 = make(wg.optim.lr_scheduler, opt2)
    saved = pickle.loads(checkpoint)
    sched2.load_state_dict(saved["sched"])
    opt2.load_state_dict(saved["opt"])
    assert sched2.get_last_lr() == [g["lr"] for g in opt2.param_groups]
    assert advance(opt2, sched2, 12, 9) == expected


def test_warns_when_stepped_before_the_optimizer():
    opt = _optimizer(wg)
    sched = wg.optim.lr_scheduler.StepLR(opt, step_size=2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()

    opt = _optimizer(wg)
    sched = wg.optim.lr_scheduler.StepLR(opt, step_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            opt.step()
            sched.step()


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_state_dict_keys_and_get_lr_outside_step_as_torch(schedule):
    """state_dict() holds torch's keys in torch's order (its _get_lr_called_within_step too), and get_lr() called
    from outside step() warns as torch's: the last lrs are get_last_lr()'s."""
    results = []
    for lib in (torch, wg):
        opt = _optimizer(lib)
        sched = SCHEDULES[schedule](lib.optim.lr_scheduler, opt)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                opt.step()
                sched.step()
            stepped = [str(w.message) for w in caught if "get_last_lr" in str(w.message)]
            try:
                sched.get_lr()
            except NotImplementedError:  # SequentialLR's, in torch too
                pass
            outside = [str(w.message) for w in caught if "get_last_lr" in str(w.message)][len(stepped):]
        results.append((list(sched.state_dict()), stepped, outside))
    assert results[1] == results[0]


def test_scheduler_drives_the_optimizer():
    """The optimizer reads the lr the scheduler wrote: with SGD and a constant gradient each step
    moves the parameter by exactly the scheduled lr."""
    p = wg.tensor([0.0], dtype=wg.float64, requires_grad=True)
    opt = wg.optim.SGD([p], lr=1.0)
    sched = wg.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    for _ in range(4):
        p.grad = wg.tensor([-1.0], dtype=wg.float64)
        opt.step()
        sched.step()
    assert p.item() == 1.0 + 0.5 + 0.25 + 0.125


def test_argument_errors():
    opt = _optimizer(wg)
    s = wg.optim.lr_scheduler
    with pytest.raises(TypeError, match="is not an Optimizer"):
        s.StepLR("sgd", step_size=1)
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        s.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        s.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="mode avg is unknown"):
        s.ReduceLROnPlateau(opt, mode="avg")
    with pytest.raises(ValueError, match="expected 2 min_lrs, got 1"):
        s.ReduceLROnPlateau(opt, min_lr=[0.1])
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        s.SequentialLR(opt, [s.StepLR(opt, 2), s.ReduceLROnPlateau(opt)], milestones=[3])
    with pytest.raises(ValueError, match="number of milestones"):
        s.SequentialLR(opt, [s.StepLR(opt, 2), s.StepLR(opt, 3)], milestones=[3, 4])
    with pytest.raises(ValueError, match="same optimizer"):
        s.SequentialLR(opt, [s.StepLR(opt, 2), s.StepLR(_optimizer(wg), 3)], milestones=[3])
    with pytest.raises(ValueError, match="mode is invalid and scale_fn is None"):
        s.CyclicLR(opt, 0.01, 0.1, mode="sawtooth")
    with pytest.raises(ValueError, match="optimizer must support momentum"):
        s.CyclicLR(wg.optim.Adagrad([wg.zeros(1, requires_grad=True)]), 0.01, 0.1)
    rms = wg.optim.RMSprop([wg.zeros(1, requires_grad=True)])
    s.OneCycleLR(rms, max_lr=0.1, total_steps=4)  # RMSprop has "momentum": cycled like SGD's
    assert rms.param_groups[0]["momentum"] == 0.95


_MORE = {
    "LambdaLR": lambda L, o: L.optim.lr_scheduler.LambdaLR(o, lambda e: 0.95 ** e),
    "LambdaLR per group": lambda L, o: L.optim.lr_scheduler.LambdaLR(o, [lambda e: 0.9 ** e, lambda e: 1 / (1 + e)]),
    "MultiplicativeLR": lambda L, o: L.optim.lr_scheduler.MultiplicativeLR(o, lambda e: 0.9),
    "ConstantLR": lambda L, o: L.optim.lr_scheduler.ConstantLR(o, factor=0.5, total_iters=4),
    "PolynomialLR": lambda L, o: L.optim.lr_scheduler.PolynomialLR(o, total_iters=10, power=2.0),
    "CosineAnnealingWarmRestarts": lambda L, o: L.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=5, T_mult=2,
                                                                                                eta_min=0.01),
    "ChainedScheduler": lambda L, o: L.optim.lr_scheduler.ChainedScheduler(
        [L.optim.lr_scheduler.ConstantLR(o, factor=0.5, total_iters=3), L.optim.lr_scheduler.ExponentialLR(o, 0.9)]),
}


@pytest.mark.parametrize("name", list(_MORE))
def test_more_schedulers_follow_torch(name):
    def lrs(lib):
        opt = lib.optim.SGD([{"params": [lib.nn.Parameter(lib.zeros(1))]},
                             {"params": [lib.nn.Parameter(lib.zeros(1))], "lr": 0.5}], lr=0.1, momentum=0.9)
        sched = _MORE[name](lib, opt)
        out = []
        for _ in range(25):
            opt.step()
            sched.step()
            out.append([g["lr"] for g in opt.param_groups])
        return out
    import torch
    import webgrad
    np.testing.assert_allclose(lrs(webgrad), lrs(torch), rtol=1e-12, atol=1e-15)


def test_cyclic_state_dict_keeps_a_callable_objects_attributes_as_torch():
    class Scale:
        def __init__(self, k):
            self.k = k

        def __call__(self, x):
            return self.k ** x

    states = []
    for lib in (torch, wg):
        sched = lib.optim.lr_scheduler.CyclicLR(_optimizer(lib), 0.01, 0.1, scale_fn=Scale(0.5))
        states.append(sched.state_dict()["_scale_fn_custom"])
        fresh = lib.optim.lr_scheduler.CyclicLR(_optimizer(lib), 0.01, 0.1, scale_fn=Scale(0.9))
        fresh.load_state_dict(sched.state_dict())
        assert fresh._scale_fn_custom.k == 0.5
    assert states[0] == states[1] == {"k": 0.5}
    lambda_sched = wg.optim.lr_scheduler.CyclicLR(_optimizer(wg), 0.01, 0.1, scale_fn=lambda x: 1.0)
    assert lambda_sched.state_dict()["_scale_fn_custom"] is None
