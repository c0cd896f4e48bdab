"""torch.optim.swa_utils: AveragedModel's SWA and EMA averages (avg_fn, multi_avg_fn, use_buffers) against
torch's, SWALR's schedule values, update_bn's recomputed BatchNorm statistics."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES

_rng = np.random.default_rng(7)
X = _rng.standard_normal((16, 3)).astype(np.float32)
Y = _rng.standard_normal((16, 2)).astype(np.float32)


def _models(device=None):
    """The same small model (Linear, BatchNorm1d, ReLU, Linear) in torch and webgrad, float64."""
    t_model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(),
                                  torch.nn.Linear(4, 2)).double()
    model = wg.nn.Sequential(wg.nn.Linear(3, 4), wg.nn.BatchNorm1d(4), wg.nn.ReLU(), wg.nn.Linear(4, 2)).double()
    with wg.no_grad():
        for (name, t), w in zip(t_model.state_dict().items(), model.state_dict().values()):
            w.copy_(wg.tensor(t.numpy(), dtype=w.dtype))
    if device:
        model = model.to(device)
    return t_model, model


def _train_and_average(lib, model, averaged, steps=5, device=None):
    kw = {"device": device} if device else {}
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    x, y = lib.tensor(X, dtype=lib.float64, **kw), lib.tensor(Y, dtype=lib.float64, **kw)
    for _ in range(steps):
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        averaged.update_parameters(model)


def _numpy(t):
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else t.detach().to("cpu").numpy()


AVERAGES = {
    "swa": lambda lib: {},
    "ema-multi": lambda lib: dict(multi_avg_fn=lib.optim.swa_utils.get_ema_multi_avg_fn(0.9)),
    "ema-multi-buffers": lambda lib: dict(multi_avg_fn=lib.optim.swa_utils.get_ema_multi_avg_fn(0.8),
                                          use_buffers=True),
    "ema-fn": lambda lib: dict(avg_fn=lib.optim.swa_utils.get_ema_avg_fn(0.7)),
    "swa-fn": lambda lib: dict(avg_fn=lib.optim.swa_utils.get_swa_avg_fn()),
    "swa-multi": lambda lib: dict(multi_avg_fn=lib.optim.swa_utils.get_swa_multi_avg_fn()),  # float32 weights
}


@pytest.mark.parametrize("kind", list(AVERAGES))
def test_averaged_model_matches_torch(kind):
    t_model, model = _models()
    results = []
    for lib, m in ((torch, t_model), (wg, model)):
        averaged = lib.optim.swa_utils.AveragedModel(m, **AVERAGES[kind](lib))
        _train_and_average(lib, m, averaged)
        results.append(averaged.state_dict())
    t_sd, w_sd = results
    assert list(w_sd) == list(t_sd)  # module.* then n_averaged
    assert int(w_sd["n_averaged"]) == 5
    for key, value in t_sd.items():
        np.testing.assert_allclose(_numpy(w_sd[key]), value.numpy(), rtol=1e-12, atol=1e-14, err_msg=key)
    # the average is not the model: the weights moved, and the average lags behind
    assert not np.allclose(_numpy(w_sd["module.0.weight"]), _numpy(model[0].weight))


def test_averaged_model_is_a_module_running_the_copy():
    _, model = _models()
    averaged = wg.optim.swa_utils.AveragedModel(model)
    assert averaged.module is not model and isinstance(averaged, wg.nn.Module)
    x = wg.tensor(X, dtype=wg.float64)
    model.eval()
    averaged.eval()
    np.testing.assert_array_equal(_numpy(averaged(x)), _numpy(model(x)))
    assert next(averaged.named_buffers())[0] == "n_averaged" and int(averaged.n_averaged) == 0
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        wg.optim.swa_utils.AveragedModel(model, avg_fn=wg.optim.swa_utils.get_swa_avg_fn(),
                                         multi_avg_fn=wg.optim.swa_utils.get_swa_multi_avg_fn())
    for make in (wg.optim.swa_utils.get_ema_avg_fn, wg.optim.swa_utils.get_ema_multi_avg_fn):
        with pytest.raises(ValueError, match=r"Invalid decay value 1.5 provided. Please provide a value in \[0,1\]"):
            make(1.5)


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
def test_averaged_model_on_device(device):
    """EMA of the weights and buffers of a float32 model trained on the device: torch's float32 averages."""
    t_model, model = _models()
    model = model.float().to(device)
    averaged = wg.optim.swa_utils.AveragedModel(model, multi_avg_fn=wg.optim.swa_utils.get_ema_multi_avg_fn(0.9),
                                                use_buffers=True)
    t_model = t_model.float()
    t_averaged = torch.optim.swa_utils.AveragedModel(
        t_model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9), use_buffers=True)
    for lib, m, avg, kw in ((torch, t_model, t_averaged, {}), (wg, model, averaged, {"device": device})):
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        x, y = lib.tensor(X, **kw), lib.tensor(Y, **kw)
        for _ in range(3):
            opt.zero_grad()
            ((m(x) - y) ** 2).mean().backward()
            opt.step()
            avg.update_parameters(m)
    for (key, value), got in zip(t_averaged.state_dict().items(), averaged.state_dict().values()):
        np.testing.assert_allclose(_numpy(got), value.numpy(), rtol=1e-5, atol=1e-6, err_msg=key)


def _lrs(lib, steps, **kwargs):
    params = [lib.zeros(2, requires_grad=True), lib.zeros(1, requires_grad=True)]
    opt = lib.optim.SGD([{"params": params[:1]}, {"params": params[1:], "lr": 0.5}], lr=1.0)
    sched = lib.optim.swa_utils.SWALR(opt, **kwargs)
    lrs = [sched.get_last_lr()]
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
    return lrs, sched


@pytest.mark.parametrize("kwargs", [dict(swa_lr=0.05), dict(swa_lr=[0.1, 0.01], anneal_epochs=3),
                                    dict(swa_lr=0.2, anneal_epochs=4, anneal_strategy="linear"),
                                    dict(swa_lr=0.3, anneal_epochs=0)], ids=["cos", "per-group", "linear", "no-anneal"])
def test_swalr_schedule_matches_torch(kwargs):
    (t_lrs, t_sched), (w_lrs, w_sched) = (_lrs(lib, 14, **kwargs) for lib in (torch, wg))
    np.testing.assert_allclose(w_lrs, t_lrs, rtol=1e-13)
    assert w_lrs[-1] == pytest.approx([g["swa_lr"] for g in w_sched.optimizer.param_groups])
    t_state, w_state = t_sched.state_dict(), w_sched.state_dict()
    assert "anneal_func" not in w_state and w_state["_anneal_strategy"] == t_state["_anneal_strategy"]
    assert w_state["anneal_epochs"] == t_state["anneal_epochs"]


def test_swalr_state_dict_round_trip_and_errors():
    lrs, sched = _lrs(wg, 3, swa_lr=0.1, anneal_epochs=6, anneal_strategy="linear")
    state = sched.state_dict()
    _, other = _lrs(wg, 0, swa_lr=0.1)
    other.optimizer.param_groups[0]["lr"], other.optimizer.param_groups[1]["lr"] = lrs[-1]
    other.load_state_dict(state)
    assert other.anneal_func(0.25) == 0.25  # linear again
    for _ in range(3):
        sched.step()
        other.step()
    assert other.get_last_lr() == sched.get_last_lr()
    opt = wg.optim.SGD([wg.zeros(1, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear', instead got step"):
        wg.optim.swa_utils.SWALR(opt, swa_lr=0.1, anneal_strategy="step")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0, got -1"):
        wg.optim.swa_utils.SWALR(opt, swa_lr=0.1, anneal_epochs=-1)
    with pytest.raises(ValueError, match="swa_lr"):
        wg.optim.swa_utils.SWALR(opt, swa_lr=[0.1, 0.2])


def test_update_bn_matches_torch():
    """One pass over the data as a cumulative average (momentum None), the momentum and training mode restored;
    batches as (input, target) pairs."""
    t_model, model = _models()
    batches = [(X[i:i + 4] * (i + 1), Y[i:i + 4]) for i in range(0, 16, 4)]
    for lib, m in ((torch, t_model), (wg, model)):
        m.eval()
        loader = [(lib.tensor(x, dtype=lib.float64), lib.tensor(y, dtype=lib.float64)) for x, y in batches]
        lib.optim.swa_utils.update_bn(loader, m)
        assert not m.training and m[1].momentum == 0.1
    for key in ("running_mean", "running_var"):
        np.testing.assert_allclose(_numpy(getattr(model[1], key)), getattr(t_model[1], key).numpy(), rtol=1e-12)
    assert int(model[1].num_batches_tracked) == int(t_model[1].num_batches_tracked) == 4
    no_bn = wg.nn.Linear(3, 2)
    wg.optim.swa_utils.update_bn([wg.tensor(X)], no_bn)  # nothing to update: the loader is not read
