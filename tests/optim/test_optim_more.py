"""Rprop, ASGD, Adafactor and SparseAdam beyond test_optim.py's tables: Adafactor's factored second moment on
matrices and batches of matrices (against torch, on the device, replayed), the host state PyTorch keeps as 0-d
tensors, and SparseAdam's refusal of dense gradients."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES
from test_optim import _numpy

OTHER_DEVICES = [d for d in DEVICES if d != "cpu"]
_rng = np.random.default_rng(3)
SHAPES = {"matrix": (5, 3), "batched": (2, 4, 3), "vector": (6,)}
P0 = {name: _rng.standard_normal(shape) for name, shape in SHAPES.items()}
GRADS = [{name: _rng.standard_normal(shape) for name, shape in SHAPES.items()} for _ in range(8)]


def _run(lib, name, kwargs, steps=8, dtype_name="float64", device=None):
    """Parameters of SHAPES, stepped with the gradients GRADS; returns (params, optimizer)."""
    kw = {"device": device} if device else {}
    dtype = getattr(lib, dtype_name)
    params = [lib.tensor(P0[k], dtype=dtype, requires_grad=True, **kw) for k in SHAPES]
    opt = getattr(lib.optim, name)(params, **kwargs)
    for grads in GRADS[:steps]:
        for p, k in zip(params, SHAPES):
            p.grad = lib.tensor(grads[k], dtype=dtype, **kw)
        opt.step()
    return params, opt


@pytest.mark.parametrize("kwargs", [dict(), dict(lr=0.05, weight_decay=0.1, eps=(1e-3, 1e-2), maximize=True),
                                    dict(lr=0.5, beta2_decay=-0.6, d=2.0)], ids=["defaults", "decay-eps", "d"])
def test_adafactor_factored_matches_torch(kwargs):
    (tp, topt), (wp, wopt) = (_run(lib, "Adafactor", kwargs) for lib in (torch, wg))
    for t, w in zip(tp, wp):
        np.testing.assert_allclose(_numpy(w), _numpy(t), rtol=1e-9, atol=1e-12)
    assert not np.allclose(_numpy(wp[0]), P0["matrix"])
    t_sd, w_sd = topt.state_dict(), wopt.state_dict()
    for i in t_sd["state"]:
        assert list(w_sd["state"][i]) == list(t_sd["state"][i])
        for key, value in t_sd["state"][i].items():
            np.testing.assert_allclose(np.asarray(w_sd["state"][i][key]), value.numpy(), rtol=1e-9, atol=1e-15)
    assert list(w_sd["state"][1]["row_var"].shape) == [2, 4, 1] and list(w_sd["state"][1]["col_var"].shape) == [2, 1, 3]


def test_adafactor_loads_torch_state_and_continues():
    (tp, topt), (wp, wopt) = (_run(lib, "Adafactor", dict(lr=0.05), steps=4) for lib in (torch, wg))
    saved = topt.state_dict()
    saved["state"] = {i: {k: v.item() if k == "step" else v.numpy() for k, v in s.items()}
                      for i, s in saved["state"].items()}
    fresh = wg.optim.Adafactor(wp, lr=1.0)
    fresh.load_state_dict(saved)
    for opt, params, lib in ((topt, tp, torch), (fresh, wp, wg)):
        for grads in GRADS[4:]:
            for p, k in zip(params, SHAPES):
                p.grad = lib.tensor(grads[k], dtype=lib.float64)
            opt.step()
    for t, w in zip(tp, wp):
        np.testing.assert_allclose(_numpy(w), _numpy(t), rtol=1e-9, atol=1e-12)

    bad = wopt.state_dict()
    bad["state"][0] = dict(bad["state"][0], row_var=np.zeros((1, 3)))
    with pytest.raises(ValueError, match=r"'row_var' of shape \[1, 3\] for parameter 0, which should be \[5, 1\]"):
        wg.optim.Adafactor(wp).load_state_dict(bad)


@pytest.mark.skipif(not OTHER_DEVICES, reason="no WebGPU adapter in this environment")
@pytest.mark.parametrize("device", OTHER_DEVICES)
def test_adafactor_factored_on_device_and_replayed(device):
    """Float32 on the device against torch's float32; then a recorded step replayed with a changing lr follows
    the eager run (the averages' weight and the step size's bound are re-read each step)."""
    (tp, _), (wp, _) = (_run(lib, "Adafactor", dict(lr=0.05, weight_decay=0.1), dtype_name="float32", **kw)
                        for lib, kw in ((torch, {}), (wg, {"device": device})))
    for t, w in zip(tp, wp):
        np.testing.assert_allclose(_numpy(w), _numpy(t), rtol=1e-5, atol=1e-6)

    results = {}
    for dev in ("cpu", device):
        params = [wg.tensor(P0[k], dtype=wg.float32, requires_grad=True, device=dev) for k in SHAPES]
        for p, k in zip(params, SHAPES):
            p.grad = wg.tensor(GRADS[0][k], dtype=wg.float32, device=dev)
        opt = wg.optim.Adafactor(params, lr=0.05, weight_decay=0.1)
        sched = wg.optim.lr_scheduler.ExponentialLR(opt, gamma=0.7)
        opt.step()
        sched.step()
        if dev == "cpu":
            for _ in range(4):
                opt.step()
                sched.step()
        else:
            with wg.device(dev).backend.capture() as graph:
                opt.step()
            sched.step()
            for _ in range(3):
                opt.prepare_replay()
                graph.replay()
                sched.step()
        results[dev] = [_numpy(p) for p in params]
    for got, ref in zip(results[device], results["cpu"]):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_asgd_state_matches_torch_and_loads_it():
    """ASGD's eta and mu (0-d float32 tensors in PyTorch, host numbers here) have torch's values, and a torch
    state dict with them as arrays loads."""
    kwargs = dict(lr=0.05, lambd=0.1, t0=3, weight_decay=0.1)
    (tp, topt), (wp, wopt) = (_run(lib, "ASGD", kwargs, steps=5) for lib in (torch, wg))
    t_sd, w_sd = topt.state_dict(), wopt.state_dict()
    for i, t_state in t_sd["state"].items():
        assert list(w_sd["state"][i]) == ["step", "eta", "mu", "ax"] == list(t_state)
        assert w_sd["state"][i]["eta"] == t_state["eta"].item() and w_sd["state"][i]["mu"] == t_state["mu"].item()
        np.testing.assert_allclose(_numpy(w_sd["state"][i]["ax"]), t_state["ax"].numpy(), rtol=1e-12)
    assert w_sd["state"][0]["mu"] == 0.5
    saved = {"param_groups": t_sd["param_groups"],
             "state": {i: {k: v.numpy() for k, v in s.items()} for i, s in t_sd["state"].items()}}
    fresh = wg.optim.ASGD(wp, **kwargs)
    fresh.load_state_dict(saved)
    assert fresh.state[wp[0]]["eta"] == t_sd["state"][0]["eta"].item()
    assert isinstance(fresh.state[wp[0]]["mu"], float)


def test_rprop_step_sizes_match_torch():
    kwargs = dict(lr=0.1, etas=(0.4, 1.3), step_sizes=(0.02, 0.5))
    (tp, topt), (wp, wopt) = (_run(lib, "Rprop", kwargs) for lib in (torch, wg))
    for t, w in zip(tp, wp):
        np.testing.assert_array_equal(_numpy(w), _numpy(t))
    for p, q in zip(tp, wp):
        for key in ("prev", "step_size"):
            np.testing.assert_array_equal(_numpy(wopt.state[q][key]), topt.state[p][key].numpy())
        sizes = _numpy(wopt.state[q]["step_size"])
        assert sizes.min() >= 0.02 and sizes.max() <= 0.5 and len(np.unique(sizes)) > 1


def test_sparse_adam_refuses_dense_gradients_as_torch():
    for lib in (torch, wg):
        p, q = lib.zeros(3, requires_grad=True), lib.zeros(2, requires_grad=True)
        opt = lib.optim.SparseAdam([p, q], lr=0.01)
        assert opt.step() is None  # nothing has a gradient: nothing to refuse
        q.grad = lib.ones(2)
        with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients, please consider Adam"):
            opt.step()
        assert opt.state_dict()["param_groups"][0]["betas"] == (0.9, 0.999)
    z = wg.view_as_complex(wg.zeros(2, 2, requires_grad=True))
    with pytest.raises(ValueError, match=r"Complex params at indices \[\[0, 0\]\]"):
        wg.optim.SparseAdam([z.detach().requires_grad_()])
