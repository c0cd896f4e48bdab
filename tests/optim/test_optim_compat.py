"""Adadelta and LBFGS (composed of tensor ops) against torch.optim, trajectory for trajectory."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES
from test_optim import W0, _groups, _numpy, _problem, _train

ADADELTA = [dict(), dict(lr=0.5, rho=0.5), dict(eps=1e-3, weight_decay=0.1), dict(lr=0.3, maximize=True)]


@pytest.mark.parametrize("grouped", [False, True], ids=["one-group", "two-groups"])
@pytest.mark.parametrize("kwargs", ADADELTA, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()) or "defaults")
def test_adadelta_trajectory_matches_torch(kwargs, grouped):
    results = []
    for lib in (torch, wg):
        params, loss = _problem(lib)
        opt = lib.optim.Adadelta(_groups(params, grouped), **kwargs)
        _train(opt, loss, 12)
        results.append([_numpy(p) for p in params])
    for t, w in zip(*results):
        np.testing.assert_allclose(w, t, rtol=1e-9, atol=1e-12)
    assert not np.allclose(results[1][0], W0)
    assert sorted(opt.state_dict()["state"][0]) == ["acc_delta", "square_avg", "step"]


@pytest.mark.parametrize("device", DEVICES)
def test_adadelta_float32_on_device(device):
    results = []
    for lib, kw in ((torch, {}), (wg, {"device": device})):
        params, loss = _problem(lib, "float32", **kw)
        _train(lib.optim.Adadelta(params, lr=0.5, weight_decay=0.01), loss, 5)
        results.append([_numpy(p) for p in params])
    for t, w in zip(*results):
        np.testing.assert_allclose(w, t, rtol=1e-4, atol=1e-6)


COMPOSED = [("Adagrad", dict()), ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1,
                                                 initial_accumulator_value=0.5, eps=1e-3)),
            ("Adagrad", dict(lr=0.1, maximize=True)),
            ("Adamax", dict()), ("Adamax", dict(lr=0.05, betas=(0.5, 0.8), eps=1e-3, weight_decay=0.1)),
            ("Adamax", dict(lr=0.05, maximize=True)),
            ("NAdam", dict()), ("NAdam", dict(lr=0.05, weight_decay=0.1, momentum_decay=0.01)),
            ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
            ("NAdam", dict(lr=0.05, betas=(0.5, 0.8), eps=1e-3, maximize=True)),
            ("RAdam", dict()), ("RAdam", dict(lr=0.05, betas=(0.9, 0.9), weight_decay=0.1)),
            ("RAdam", dict(lr=0.05, betas=(0.9, 0.9), weight_decay=0.1, decoupled_weight_decay=True)),
            ("RAdam", dict(lr=0.05, betas=(0.5, 0.9), eps=0.0, maximize=True))]


@pytest.mark.parametrize("name,kwargs", COMPOSED,
                         ids=[f"{n}-" + ("-".join(f"{k}={v}" for k, v in kw.items()) or "defaults") for n, kw in COMPOSED])
def test_composed_optimizers_match_torch(name, kwargs):
    results = []
    for lib in (torch, wg):
        params, loss = _problem(lib)
        opt = getattr(lib.optim, name)(_groups(params, True), **kwargs)
        _train(opt, loss, 12)
        results.append([_numpy(p) for p in params])
    for t, w in zip(*results):
        np.testing.assert_allclose(w, t, rtol=1e-9, atol=1e-12)
    assert not np.allclose(results[1][0], W0)


def _lbfgs_run(lib, steps, dtype_name="float64", **kwargs):
    params, loss = _problem(lib, dtype_name)
    opt = lib.optim.LBFGS(params, **kwargs)
    losses = []

    def closure():
        opt.zero_grad()
        value = loss()
        value.backward()
        return value

    for _ in range(steps):
        losses.append(float(opt.step(closure).detach()))
    return [_numpy(p) for p in params], losses, opt


@pytest.mark.parametrize("kwargs", [dict(), dict(line_search_fn="strong_wolfe"),
                                    dict(history_size=2, max_iter=5, lr=0.5),
                                    dict(history_size=3, max_iter=4, line_search_fn="strong_wolfe")],
                         ids=["defaults", "strong_wolfe", "short-history", "short-history-wolfe"])
def test_lbfgs_trajectory_matches_torch(kwargs):
    (tp, tl, topt), (wp, wl, wopt) = (_lbfgs_run(lib, 3, **kwargs) for lib in (torch, wg))
    np.testing.assert_allclose(wl, tl, rtol=1e-7)
    for t, w in zip(tp, wp):
        np.testing.assert_allclose(w, t, rtol=1e-6, atol=1e-9)
    assert not np.allclose(wp[0], W0)
    ts, ws = topt.state[next(iter(topt.state))], wopt.state[next(iter(wopt.state))]
    assert (ws["func_evals"], ws["n_iter"]) == (ts["func_evals"], ts["n_iter"])


def test_lbfgs_errors():
    params, _ = _problem(wg)
    with pytest.raises(ValueError, match="line_search_fn"):
        wg.optim.LBFGS(params, line_search_fn="backtracking")
    with pytest.raises(ValueError, match="parameter groups"):
        wg.optim.LBFGS([{"params": [params[0]]}, {"params": [params[1]]}])
    with pytest.raises(RuntimeError, match="closure"):
        wg.optim.LBFGS(params).step(None)


@pytest.mark.parametrize("device", DEVICES)
def test_lbfgs_float32_on_device(device):
    # In float32, L-BFGS's flat directions amplify rounding (torch's scalars are float32 tensors, webgrad's
    # Python floats), so the parameters agree only roughly; the objective reached is what must agree.
    finals = []
    for lib, kw in ((torch, {}), (wg, {"device": device})):
        params, loss = _problem(lib, "float32", **kw)
        opt = lib.optim.LBFGS(params, max_iter=5, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            value = loss()
            value.backward()
            return value

        start = float(loss().detach())
        for _ in range(2):
            opt.step(closure)
        finals.append(float(loss().detach()))
        assert finals[-1] < 0.5 * start
    np.testing.assert_allclose(finals[1], finals[0], rtol=1e-4)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adadelta", "Adagrad", "Adamax", "ASGD", "NAdam", "RAdam",
                                  "RMSprop", "Rprop", "LBFGS"])
def test_param_group_defaults_are_torchs(name):
    # A printed or saved optimizer state_dict lists every default PyTorch keeps (foreach, capturable,
    # differentiable, fused included), in its order: a tutorial prints optimizer.state_dict()
    groups = [getattr(lib.optim, name)([lib.nn.Parameter(lib.zeros(2))]).state_dict()["param_groups"][0]
              for lib in (torch, wg)]
    assert list(groups[1].items()) == list(groups[0].items())


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop"])
def test_differentiable_optimizer_is_refused(name):
    with pytest.raises(NotImplementedError, match="differentiable"):
        getattr(wg.optim, name)([wg.nn.Parameter(wg.zeros(2))], differentiable=True)
