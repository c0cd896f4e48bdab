"""webgrad.optim: trajectories against torch.optim, the published update rules, state dicts, and the
promise that a step is one fused kernel per parameter with state tensors allocated once."""

import copy
import pickle
import re

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES

STEPS = 12
_rng = np.random.default_rng(0)
W0 = _rng.standard_normal((4, 3))
B0 = _rng.standard_normal(3)
X = _rng.standard_normal((5, 4))
Y = _rng.standard_normal((5, 3))


def _problem(lib, dtype_name="float64", device=None):
    """Parameters [W, b] and a loss(W, b) closure of a small regression, in torch or webgrad."""
    dtype = getattr(lib, dtype_name)
    kw = {"device": device} if device else {}
    W = lib.tensor(W0, dtype=dtype, requires_grad=True, **kw)
    b = lib.tensor(B0, dtype=dtype, requires_grad=True, **kw)
    x, y = lib.tensor(X, dtype=dtype, **kw), lib.tensor(Y, dtype=dtype, **kw)

    def loss():
        return (((x @ W + b).tanh() - y) ** 2).mean() + (W * W).sum() * 0.01

    return [W, b], loss


def _train(opt, loss, steps):
    for _ in range(steps):
        opt.zero_grad()
        loss().backward()
        opt.step()


def _numpy(t):
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else t.detach().to("cpu").numpy()


def _param_id(value):
    """Readable test ids: an optimizer name, or its keyword arguments."""
    return value if isinstance(value, str) else "-".join(f"{k}={v}" for k, v in value.items()) or "defaults"


def _groups(params, grouped):
    # two groups with their own hyperparameters, or one plain list
    return [{"params": [params[0]]}, {"params": [params[1]], "lr": 0.02}] if grouped else params


CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.5)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=0.1, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.5, weight_decay=0.1, nesterov=True, maximize=True)),
    ("Adam", dict()),
    ("Adam", dict(lr=0.05, amsgrad=True)),
    ("Adam", dict(lr=0.05, weight_decay=0.1)),
    ("Adam", dict(lr=0.05, betas=(0.5, 0.8), eps=1e-2)),
    ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("AdamW", dict()),
    ("AdamW", dict(lr=0.05, weight_decay=0.3, amsgrad=True)),
    ("AdamW", dict(lr=0.05, maximize=True)),
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, alpha=0.5, eps=1e-3)),
    ("RMSprop", dict(lr=0.01, maximize=True)),
    # composed of tensor ops
    ("Rprop", dict()),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2), maximize=True)),
    ("ASGD", dict()),
    ("ASGD", dict(lr=0.05, lambd=0.1, alpha=0.5, t0=3, weight_decay=0.1)),  # averaging from step 4
    ("ASGD", dict(lr=0.05, t0=5, maximize=True)),
    ("Adafactor", dict()),
    ("Adafactor", dict(lr=0.05, beta2_decay=-0.5, eps=(1e-3, 1e-2), d=1.5, weight_decay=0.1, maximize=True)),
]
CASE_IDS = [f"{name}-{_param_id(kw)}" for name, kw in CASES]


@pytest.mark.parametrize("grouped", [False, True], ids=["one-group", "two-groups"])
@pytest.mark.parametrize("name,kwargs", CASES, ids=CASE_IDS)
def test_trajectory_matches_torch(name, kwargs, grouped):
    results = []
    for lib in (torch, wg):
        params, loss = _problem(lib)
        _train(getattr(lib.optim, name)(_groups(params, grouped), **kwargs), loss, STEPS)
        results.append([_numpy(p) for p in params])
    for t, w in zip(*results):
        np.testing.assert_allclose(w, t, rtol=1e-9, atol=1e-12)
    assert not np.allclose(results[1][0], W0)  # the optimizer did move the parameters


def test_float32_trajectory_matches_torch():
    results = []
    for lib in (torch, wg):
        params, loss = _problem(lib, "float32")
        _train(lib.optim.Adam(params, lr=0.05, amsgrad=True, weight_decay=0.1), loss, STEPS)
        results.append([_numpy(p) for p in params])
    for t, w in zip(*results):
        assert w.dtype == np.float32
        np.testing.assert_allclose(w, t, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------- the published update rules
def test_adam_bias_correction_written_out():
    """Adam (Kingma & Ba, Algorithm 1) with gradients set by hand: the first step moves every
    coordinate by lr * g/(|g| + eps), i.e. ~lr whatever the gradient's scale; later steps follow
    m_hat = m/(1-b1^t), v_hat = v/(1-b2^t), p -= lr * m_hat/(sqrt(v_hat) + eps)."""
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    p0 = np.array([1.0, -2.0, 3.0, 0.5])
    grads = [np.array([0.5, -1e-3, 200.0, -3.0]) * (t + 1) ** 1.5 for t in range(4)]
    p = wg.tensor(p0, dtype=wg.float64, requires_grad=True)
    opt = wg.optim.Adam([p], lr=lr, betas=(b1, b2), eps=eps)

    expect, m, v = p0.copy(), np.zeros(4), np.zeros(4)
    for t, g in enumerate(grads, start=1):
        p.grad = wg.tensor(g, dtype=wg.float64)
        opt.step()
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        expect = expect - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        np.testing.assert_allclose(p.detach().numpy(), expect, rtol=1e-12, atol=1e-15)
        if t == 1:
            np.testing.assert_allclose(np.abs(expect - p0), lr, rtol=1e-4)


def test_adamw_decoupled_decay_written_out():
    """AdamW (Loshchilov & Hutter): p <- p * (1 - lr*wd) - lr * m_hat/(sqrt(v_hat) + eps), the decay
    never entering m or v. With a zero gradient the step is the pure decay; Adam's coupled decay
    (g + wd*p) would instead move each coordinate by ~lr."""
    lr, wd, b1, b2, eps = 0.1, 0.2, 0.9, 0.999, 1e-8
    p0 = np.array([1.0, -2.0, 3.0])
    p = wg.tensor(p0, dtype=wg.float64, requires_grad=True)
    opt = wg.optim.AdamW([p], lr=lr, weight_decay=wd)
    p.grad = wg.zeros(3, dtype=wg.float64)
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), p0 * (1 - lr * wd), rtol=1e-14)

    coupled = wg.tensor(p0, dtype=wg.float64, requires_grad=True)
    coupled.grad = wg.zeros(3, dtype=wg.float64)
    wg.optim.Adam([coupled], lr=lr, weight_decay=wd).step()
    np.testing.assert_allclose(coupled.detach().numpy(), p0 - lr * np.sign(p0), rtol=1e-6)

    # a few steps with gradients: the decay multiplies p, the moments see only the gradients
    expect, m, v = p0 * (1 - lr * wd), np.zeros(3), np.zeros(3)
    for t, g in enumerate([np.array([0.3, -0.1, 2.0]), np.array([-0.5, 0.2, 1.0])], start=2):
        p.grad = wg.tensor(g, dtype=wg.float64)
        opt.step()
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        expect = expect * (1 - lr * wd) - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        np.testing.assert_allclose(p.detach().numpy(), expect, rtol=1e-12)


def test_sgd_nesterov_written_out():
    lr, mu, wd = 0.1, 0.9, 0.01
    p0 = np.array([1.0, -1.0])
    p = wg.tensor(p0, dtype=wg.float64, requires_grad=True)
    opt = wg.optim.SGD([p], lr=lr, momentum=mu, nesterov=True, weight_decay=wd)
    expect, buf = p0.copy(), None
    for g in (np.array([1.0, 2.0]), np.array([-3.0, 0.5]), np.array([0.25, 0.25])):
        p.grad = wg.tensor(g, dtype=wg.float64)
        opt.step()
        d = g + wd * expect
        buf = d if buf is None else mu * buf + d
        expect = expect - lr * (d + mu * buf)
        np.testing.assert_allclose(p.detach().numpy(), expect, rtol=1e-14)


# --------------------------------------------------------------------- one fused kernel, no allocations
def _spy_backend(monkeypatch, device="cpu"):
    """Record every device-interface call made on `device`'s backend."""
    backend = wg.device(device).backend
    calls = []
    for name, attr in vars(wg._backends.interface.Backend).items():
        if name.startswith("_") or not callable(attr) or name in ("run", "has"):
            continue
        method = getattr(backend, name)
        monkeypatch.setattr(backend, name, lambda *a, _n=name, _m=method, **k: (calls.append(_n), _m(*a, **k))[1])
    run = backend.run
    monkeypatch.setattr(backend, "run", lambda kernel, *a, **k: (calls.append(kernel.name), run(kernel, *a, **k))[1])
    return calls


@pytest.mark.parametrize("name,kwargs,kernel", [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1), "sgd_step"),
    ("Adam", dict(amsgrad=True, weight_decay=0.1), "adam_step"),
    ("AdamW", dict(), "adam_step"),
    ("RMSprop", dict(centered=True, momentum=0.9), "rmsprop_step"),
])
def test_step_is_one_kernel_per_parameter_and_reuses_state(monkeypatch, device, name, kwargs, kernel):
    dtype = "float64" if device == "cpu" else "float32"
    params, loss = _problem(wg, dtype, device)
    frozen = wg.tensor([1.0, 2.0], requires_grad=True, device=device)  # never gets a gradient
    opt = getattr(wg.optim, name)(params + [frozen], **kwargs)
    loss().backward()
    opt.step()  # the first step creates the state
    state = {id(p): {k: v for k, v in opt.state[p].items() if isinstance(v, wg.Tensor)} for p in params}
    storages = {id(p): {k: v._view.storage for k, v in s.items()} for p, s in zip(params, state.values())}
    assert all(state.values()) and frozen not in opt.state

    calls = _spy_backend(monkeypatch, device)
    for _ in range(3):
        opt.step()
    # no elementwise chain, no allocation, nothing for `frozen`; then the step's work is submitted. Adam hands its
    # parameters to the multi-tensor adam_steps kernel in one call where the backend has it.
    from webgrad._backends import kernels
    per_step = [kernel] * len(params)
    if kernel == "adam_step" and params[0].dtype is wg.float32 and wg.device(device).backend.has(kernels.adam_steps):
        per_step = ["adam_steps"]
    assert calls == (per_step + ["submit"]) * 3
    for p in params:
        now = {k: v for k, v in opt.state[p].items() if isinstance(v, wg.Tensor)}
        assert now.keys() == state[id(p)].keys()
        assert all(now[k] is state[id(p)][k] and now[k]._view.storage is storages[id(p)][k] for k in now)


# --------------------------------------------------------------------- state dicts
def _sd_case(name, kwargs):
    return pytest.param(name, kwargs, id=f"{name}-{_param_id(kwargs)}")


STATE_CASES = [
    _sd_case("SGD", dict(lr=0.1, momentum=0.9)),
    _sd_case("Adam", dict(lr=0.05, amsgrad=True)),
    _sd_case("AdamW", dict(lr=0.05)),
    _sd_case("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
    _sd_case("Rprop", dict(lr=0.05)),
    _sd_case("ASGD", dict(lr=0.05, lambd=0.1, t0=2)),
    _sd_case("Adafactor", dict(lr=0.05, weight_decay=0.1)),
]


@pytest.mark.parametrize("name,kwargs", STATE_CASES)
def test_state_dict_round_trip(name, kwargs):
    """Save mid-run (through pickle, as a checkpoint), load into a fresh optimizer on fresh parameters,
    continue: identical to the uninterrupted run."""
    params, loss = _problem(wg)
    opt = getattr(wg.optim, name)(_groups(params, True), **kwargs)
    _train(opt, loss, 5)
    saved = pickle.loads(pickle.dumps(opt.state_dict()))
    saved_params = [p.detach().numpy().copy() for p in params]

    _train(opt, loss, 5)  # the uninterrupted run

    params2, loss2 = _problem(wg)
    for p, v in zip(params2, saved_params):
        with wg.no_grad():
            p.copy_(wg.tensor(v, dtype=wg.float64))
    opt2 = getattr(wg.optim, name)(_groups(params2, True), lr=123.0)  # hyperparameters come from the dict
    opt2.load_state_dict(saved)
    assert opt2.param_groups[1]["lr"] == 0.02 and opt2.param_groups[0]["lr"] == kwargs["lr"]
    _train(opt2, loss2, 5)
    for p, q in zip(params, params2):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_load_state_dict_copies_state():
    params, loss = _problem(wg)
    opt = wg.optim.Adam(params)
    _train(opt, loss, 2)
    opt2 = wg.optim.Adam(_problem(wg)[0])
    opt2.load_state_dict(opt.state_dict())
    for (p, s), (p2, s2) in zip(opt.state.items(), opt2.state.items()):
        assert s2["exp_avg"] is not s["exp_avg"] and s2["exp_avg"]._view.storage is not s["exp_avg"]._view.storage
        np.testing.assert_array_equal(s2["exp_avg"].numpy(), s["exp_avg"].numpy())
        assert s2["step"] == 2.0


@pytest.mark.parametrize("name,kwargs", STATE_CASES)
def test_state_dict_has_torch_format_and_loads_torch_state(name, kwargs):
    """Same keys, indices and values as torch.optim's state_dict; a torch state dict (tensors as NumPy
    arrays) loads into webgrad and training continues identically."""
    sds, runs = {}, {}
    for lib in (torch, wg):
        params, loss = _problem(lib)
        opt = getattr(lib.optim, name)(_groups(params, True), **kwargs)
        _train(opt, loss, 3)
        sds[lib], runs[lib] = opt.state_dict(), (params, loss, opt)
    t_sd, w_sd = sds[torch], sds[wg]
    assert len(w_sd["param_groups"]) == len(t_sd["param_groups"])
    for wgroup, tgroup in zip(w_sd["param_groups"], t_sd["param_groups"]):
        assert set(wgroup) <= set(tgroup)
        for key in wgroup:
            assert wgroup[key] == tgroup[key], key
    assert w_sd["state"].keys() == t_sd["state"].keys()
    for i in t_sd["state"]:
        assert list(w_sd["state"][i]) == list(t_sd["state"][i])
        for key, tv in t_sd["state"][i].items():
            np.testing.assert_allclose(np.asarray(w_sd["state"][i][key]), tv.numpy(), rtol=1e-12)

    torch_as_numpy = copy.deepcopy(t_sd)
    for s in torch_as_numpy["state"].values():
        for key, v in s.items():
            s[key] = v.item() if key == "step" else v.numpy()
    params, loss, _ = runs[wg]
    t_params, t_loss, t_opt = runs[torch]
    fresh = getattr(wg.optim, name)(_groups(params, True), **kwargs)
    fresh.load_state_dict(torch_as_numpy)
    _train(fresh, loss, 3)
    _train(t_opt, t_loss, 3)
    for p, q in zip(params, t_params):
        np.testing.assert_allclose(_numpy(p), _numpy(q), rtol=1e-9, atol=1e-12)


def test_load_state_dict_mismatch_leaves_optimizer_untouched():
    params, loss = _problem(wg)
    opt = wg.optim.Adam(_groups(params, True), lr=0.05)
    _train(opt, loss, 2)
    groups_before = opt.param_groups
    state_before = {id(p): dict(s) for p, s in opt.state.items()}
    good = opt.state_dict()

    one_group = wg.optim.Adam(params).state_dict()
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict(one_group)

    other, _ = _problem(wg)
    sizes = wg.optim.Adam([{"params": other}, {"params": [wg.zeros(1, requires_grad=True)]}]).state_dict()
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        opt.load_state_dict(sizes)

    bad_shape = copy.deepcopy(good)
    bad_shape["param_groups"][0]["lr"] = 99.0
    bad_shape["state"][1]["exp_avg_sq"] = wg.zeros(7, dtype=wg.float64)
    with pytest.raises(ValueError, match=re.escape("'exp_avg_sq' of shape [7] for parameter 1")):
        opt.load_state_dict(bad_shape)

    assert opt.param_groups is groups_before and opt.param_groups[0]["lr"] == 0.05
    assert {id(p): s for p, s in opt.state.items()} == state_before


def test_trains_an_nn_module_like_torch():
    """model.parameters() of an nn module, SGD with Nesterov momentum driven by OneCycleLR: the same
    weights as torch after a few steps (float32)."""
    t_model = torch.nn.Linear(4, 3)
    model = wg.nn.Linear(4, 3)
    with wg.no_grad():
        model.weight.copy_(wg.tensor(t_model.weight.detach().numpy()))
        model.bias.copy_(wg.tensor(t_model.bias.detach().numpy()))
    x, y = X.astype(np.float32), Y.astype(np.float32)
    for lib, m in ((torch, t_model), (wg, model)):
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=8)
        for _ in range(7):
            opt.zero_grad()
            ((m(lib.tensor(x)) - lib.tensor(y)) ** 2).mean().backward()
            opt.step()
            sched.step()
    np.testing.assert_allclose(_numpy(model.weight), _numpy(t_model.weight), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_numpy(model.bias), _numpy(t_model.bias), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------- behaviour of the base class
@pytest.mark.parametrize("name,kwargs", [
    ("SGD", dict(lr=-1)), ("SGD", dict(lr=0.1, momentum=-0.5)), ("SGD", dict(lr=0.1, weight_decay=-1e-3)),
    ("SGD", dict(lr=0.1, nesterov=True)), ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True)),
    ("Adam", dict(lr=-1)), ("Adam", dict(eps=-1.0)), ("Adam", dict(betas=(1.0, 0.999))),
    ("Adam", dict(betas=(0.9, -0.1))), ("Adam", dict(weight_decay=-0.5)), ("AdamW", dict(lr=-0.001)),
    ("RMSprop", dict(lr=-1)), ("RMSprop", dict(eps=-1)), ("RMSprop", dict(momentum=-1)),
    ("RMSprop", dict(weight_decay=-1)), ("RMSprop", dict(alpha=-0.5)),
    ("Rprop", dict(lr=-1)), ("Rprop", dict(etas=(1.1, 1.2))), ("Rprop", dict(etas=(0.5, 0.9))),
    ("ASGD", dict(lr=-1)), ("ASGD", dict(weight_decay=-1)),
    ("Adafactor", dict(lr=-1)), ("Adafactor", dict(beta2_decay=0.5)), ("Adafactor", dict(eps=(-1, 1e-3))),
    ("Adafactor", dict(eps=(None, -1))), ("Adafactor", dict(d=0.5)), ("Adafactor", dict(weight_decay=-1)),
    ("SparseAdam", dict(lr=0)), ("SparseAdam", dict(eps=0)), ("SparseAdam", dict(betas=(1.0, 0.9))),
    ("SparseAdam", dict(betas=(0.9, -0.1))),
])
def test_argument_validation_messages_match_torch(name, kwargs):
    with pytest.raises(ValueError) as expected:
        getattr(torch.optim, name)([torch.zeros(1, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError) as got:
        getattr(wg.optim, name)([wg.zeros(1, requires_grad=True)], **kwargs)
    assert str(got.value) == str(expected.value)


def test_param_group_errors():
    a, b = wg.zeros(2, requires_grad=True), wg.zeros(3, requires_grad=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        wg.optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        wg.optim.SGD(a, lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        wg.optim.SGD([{"params": {a, b}}], lr=0.1)
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        wg.optim.SGD([a, 3.0], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        wg.optim.SGD([a * 2], lr=0.1)
    with pytest.raises(ValueError, match="duplicate parameters"):
        wg.optim.SGD([a, a], lr=0.1)
    opt = wg.optim.SGD([a], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [b, a]})
    assert len(opt.param_groups) == 1
    opt.add_param_group({"params": b, "lr": 0.5})
    assert len(opt.param_groups[1]["params"]) == 1 and opt.param_groups[1]["params"][0] is b
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["momentum"] == 0.9


def test_zero_grad():
    params, loss = _problem(wg)
    opt = wg.optim.SGD(params, lr=0.1)
    loss().backward()
    grad = params[0].grad
    opt.zero_grad(set_to_none=False)
    assert params[0].grad is grad and not grad.numpy().any()
    opt.zero_grad()
    assert all(p.grad is None for p in params)


def test_step_with_closure_under_no_grad():
    params, loss = _problem(wg)
    opt = wg.optim.Adam(params, lr=0.05)
    calls = []

    def closure():
        calls.append(wg.is_grad_enabled())
        opt.zero_grad()
        out = loss()
        out.backward()
        return out

    with wg.no_grad():
        first = opt.step(closure)
    second = opt.step(closure)
    assert calls == [True, True]
    assert second.item() < first.item()
    assert opt.step() is None


def test_parameters_without_grad_are_skipped():
    a = wg.tensor([1.0, 2.0], requires_grad=True)
    b = wg.tensor([3.0, 4.0], requires_grad=True)
    opt = wg.optim.Adam([a, b], lr=0.1)
    a.grad = wg.tensor([1.0, -1.0])
    opt.step()
    assert b.tolist() == [3.0, 4.0] and b not in opt.state and opt.state[a]["step"] == 1.0


def test_strided_parameter_matches_torch():
    """A transposed (non-contiguous) leaf is updated in place, as in PyTorch."""
    results = []
    for lib in (torch, wg):
        base = lib.tensor(W0.T.copy(), dtype=lib.float64)
        W = base.T.requires_grad_(True)
        x = lib.tensor(X, dtype=lib.float64)
        opt = lib.optim.Adam([W], lr=0.1, weight_decay=0.1)
        for _ in range(4):
            opt.zero_grad()
            ((x @ W) ** 2).sum().backward()
            opt.step()
        assert not W.is_contiguous()
        results.append((_numpy(W), _numpy(base)))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-10)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-10)  # written through to the storage


def test_gradient_of_wrong_shape_is_an_error():
    p = wg.zeros(3, requires_grad=True)
    p.grad = wg.zeros(4)
    with pytest.raises(RuntimeError, match=re.escape("shape [3]")):
        wg.optim.SGD([p], lr=0.1).step()


# --------------------------------------------------------------------- other devices against the CPU
OTHER_DEVICES = [d for d in DEVICES if d != "cpu"]


@pytest.mark.skipif(not OTHER_DEVICES, reason="no WebGPU adapter in this environment")
@pytest.mark.parametrize("device", OTHER_DEVICES)
@pytest.mark.parametrize("size", [1, 3, 1025])
@pytest.mark.parametrize("name,kwargs", [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1, maximize=True)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.9, weight_decay=0.1, maximize=True)),
    ("Adadelta", dict(lr=0.5, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.5, maximize=True)),
    ("Adamax", dict(lr=0.05, weight_decay=0.1)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, momentum_decay=0.5, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.05, betas=(0.9, 0.9), weight_decay=0.1)),  # rectified from step 6
    ("Rprop", dict(lr=0.05, maximize=True)),
    ("ASGD", dict(lr=0.05, lambd=0.1, t0=2, weight_decay=0.1)),
    ("Adafactor", dict(lr=0.05, weight_decay=0.1)),
], ids=_param_id)
def test_device_parity_with_cpu(device, size, name, kwargs):
    """Float32 on the device against float32 on the CPU, gradients set by hand, with an lr change
    midway (the per-step scalars must be re-read)."""
    rng = np.random.default_rng(size)
    p0 = rng.standard_normal(size).astype(np.float32)
    grads = [rng.standard_normal(size).astype(np.float32) for _ in range(6)]
    results = {}
    for dev in ("cpu", device):
        p = wg.tensor(p0, device=dev, requires_grad=True)
        opt = getattr(wg.optim, name)([p], **kwargs)
        for i, g in enumerate(grads):
            if i == 3:
                opt.param_groups[0]["lr"] *= 0.5
            p.grad = wg.tensor(g, device=dev)
            opt.step()
        results[dev] = (p.detach().to("cpu").numpy(),
                        {k: v.to("cpu").numpy() for k, v in opt.state[p].items() if isinstance(v, wg.Tensor)})
    # float32 rounding: an element near 0 that was reached by cancellation carries the rounding
    # error of the vector's largest values, so the absolute tolerance scales with them
    def close(got, ref, what):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(ref).max()), err_msg=what)

    close(results[device][0], results["cpu"][0], "param")
    for key, value in results["cpu"][1].items():
        close(results[device][1][key], value, key)


@pytest.mark.skipif(not OTHER_DEVICES, reason="no WebGPU adapter in this environment")
@pytest.mark.parametrize("device", OTHER_DEVICES)
@pytest.mark.parametrize("name,kwargs", [
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1)),
    ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.05, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.9)),
    # composed of tensor ops: lr and the values computed from the step count reach them as 0-d tensors
    ("Adadelta", dict(lr=0.5, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.5, weight_decay=0.1)),
    ("Adamax", dict(lr=0.05, betas=(0.5, 0.8))),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, momentum_decay=0.5, decoupled_weight_decay=True)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, momentum_decay=0.5)),
    ("RAdam", dict(lr=0.05, betas=(0.9, 0.9), weight_decay=0.1)),  # rectified from step 6, a replayed one
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5))),
    ("ASGD", dict(lr=0.05, lambd=0.1, t0=3, weight_decay=0.1)),  # eta every step, mu from step 4 (replayed)
    ("Adafactor", dict(lr=0.05, weight_decay=0.1)),
], ids=_param_id)
def test_replayed_step_reads_new_lr_and_step(device, name, kwargs):
    """A captured optimizer step, replayed after prepare_replay() with a scheduler changing the lr,
    follows the eager CPU run: lr and the step count (Adam's bias corrections; Adagrad's lr decay,
    Adamax's and NAdam's step sizes) are re-read, not frozen at the recorded step's values."""
    rng = np.random.default_rng(1)
    p0 = rng.standard_normal(37).astype(np.float32)
    g = rng.standard_normal(37).astype(np.float32)
    results = {}
    for dev in ("cpu", device):
        p = wg.tensor(p0, device=dev, requires_grad=True)
        p.grad = wg.tensor(g, device=dev)
        opt = getattr(wg.optim, name)([p], **kwargs)
        sched = wg.optim.lr_scheduler.ExponentialLR(opt, gamma=0.7)
        opt.step()
        sched.step()
        if dev == "cpu":
            for _ in range(5):
                opt.step()
                sched.step()
        else:
            with wg.device(dev).backend.capture() as graph:
                opt.step()
            sched.step()
            for _ in range(4):
                opt.prepare_replay()
                graph.replay()
                sched.step()
        results[dev] = p.detach().to("cpu").numpy()
        assert opt.state[p].get("step", 6.0) == 6.0
    np.testing.assert_allclose(results[device], results["cpu"], rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not OTHER_DEVICES, reason="no WebGPU adapter in this environment")
@pytest.mark.parametrize("device", OTHER_DEVICES)
@pytest.mark.parametrize("name,kwargs", [
    ("SGD", dict(lr=0.01, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("AdamW", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True)),
], ids=_param_id)
def test_replay_follows_a_scheduler_that_cycles_momentum(device, name, kwargs):
    """OneCycleLR (cycle_momentum, its default) changes momentum or beta1 every step: a replayed step takes
    them as an eager step does (prepare_replay writes every hyperparameter of the fused updates)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    results = []
    for replay in (False, True):
        wg.manual_seed(0)
        model = wg.nn.Linear(8, 4).to(device)
        opt = getattr(wg.optim, name)(model.parameters(), **kwargs)
        sched = wg.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=20)
        xs = wg.tensor(x, device=device)

        def step(xs):
            opt.zero_grad()
            loss = (model(xs) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        run = wg.replayable(step) if replay else step
        for _ in range(12):
            run(xs)
            sched.step()
        results.append(model.weight.detach().to("cpu").numpy())
    assert run.replays == 10
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6, atol=1e-7)


@pytest.mark.skipif(not OTHER_DEVICES, reason="no WebGPU adapter in this environment")
@pytest.mark.parametrize("device", OTHER_DEVICES)
@pytest.mark.parametrize("name,kwargs,change,value", [
    ("SGD", dict(lr=0.1, momentum=0.9), "weight_decay", 0.1),   # picks another kernel
    ("Adam", dict(lr=0.1), "amsgrad", True),
    ("Adamax", dict(lr=0.1), "betas", (0.8, 0.999)),             # recorded as constants of its ops
    ("Adadelta", dict(lr=0.1), "rho", 0.5),
], ids=["SGD-weight_decay", "Adam-amsgrad", "Adamax-betas", "Adadelta-rho"])
def test_replay_refuses_a_change_it_cannot_follow(device, name, kwargs, change, value):
    """A hyperparameter that a replay cannot take a new value of raises at the next replay, naming it, before
    anything is counted; released and recorded again, the step goes on."""
    model = wg.nn.Linear(8, 4).to(device)
    opt = getattr(wg.optim, name)(model.parameters(), **kwargs)
    xs = wg.ones(16, 8, device=device)

    def step(xs):
        opt.zero_grad()
        (model(xs) ** 2).mean().backward()
        opt.step()

    run = wg.replayable(step)
    for _ in range(3):
        run(xs)
    steps = [dict(s).get("step") for s in opt.state.values()]
    opt.param_groups[0][change] = value
    with pytest.raises(RuntimeError, match=f"{name}: {change} changed since its step was recorded"):
        run(xs)
    assert [dict(s).get("step") for s in opt.state.values()] == steps
    run.release()
    for _ in range(3):
        run(xs)
    assert run.replays == 3  # one before the change, two after the new recording


def test_prepare_replay_counts_without_launching(monkeypatch):
    params, loss = _problem(wg)
    opt = wg.optim.Adam(params, lr=0.05)
    loss().backward()
    with pytest.raises(RuntimeError, match="take one eager step"):
        opt.prepare_replay()
    assert opt.state_dict()["state"] == {}
    opt.step()
    before = [p.detach().numpy().copy() for p in params]
    calls = _spy_backend(monkeypatch)
    opt.prepare_replay()
    assert calls == [] and all(opt.state[p]["step"] == 2.0 for p in params)
    for p, b in zip(params, before):
        np.testing.assert_array_equal(p.detach().numpy(), b)
